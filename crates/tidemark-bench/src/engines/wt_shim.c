/*
 * A small C shim over WiredTiger's C API for tidemark-bench: the API is
 * method tables of function pointers (WT_CONNECTION, WT_SESSION,
 * WT_CURSOR), which this file calls so that Rust sees plain functions.
 * Every function returns WiredTiger's error code (0 on success).
 */
#include <string.h>
#include <wiredtiger.h>

/* Receives one pair read (key NULL and kl 0 for a point read). */
typedef void (*tmwt_visit)(void *ctx, const void *k, size_t kl, const void *v, size_t vl);

int tmwt_notfound(void) { return WT_NOTFOUND; }
int tmwt_rollback(void) { return WT_ROLLBACK; }
const char *tmwt_strerror(int err) { return wiredtiger_strerror(err); }

int tmwt_open(const char *home, const char *config, WT_CONNECTION **connp) {
    return wiredtiger_open(home, NULL, config, connp);
}

int tmwt_close(WT_CONNECTION *conn) { return conn->close(conn, NULL); }

/* Opens a session and a cursor on `uri`, creating the table if needed. */
int tmwt_session(WT_CONNECTION *conn, const char *uri, WT_SESSION **sp, WT_CURSOR **cp) {
    WT_SESSION *s;
    int ret = conn->open_session(conn, NULL, NULL, &s);
    if (ret != 0)
        return ret;
    ret = s->create(s, uri, "key_format=u,value_format=u");
    if (ret == 0)
        ret = s->open_cursor(s, uri, NULL, NULL, cp);
    if (ret != 0) {
        (void)s->close(s, NULL);
        return ret;
    }
    *sp = s;
    return 0;
}

int tmwt_session_close(WT_SESSION *s) { return s->close(s, NULL); }
int tmwt_begin(WT_SESSION *s) { return s->begin_transaction(s, NULL); }
int tmwt_commit(WT_SESSION *s) { return s->commit_transaction(s, NULL); }
int tmwt_abort(WT_SESSION *s) { return s->rollback_transaction(s, NULL); }
int tmwt_checkpoint(WT_SESSION *s) { return s->checkpoint(s, NULL); }

int tmwt_put(WT_CURSOR *c, const void *k, size_t kl, const void *v, size_t vl) {
    WT_ITEM key, value;
    memset(&key, 0, sizeof(key));
    memset(&value, 0, sizeof(value));
    key.data = k;
    key.size = kl;
    value.data = v;
    value.size = vl;
    c->set_key(c, &key);
    c->set_value(c, &value);
    int ret = c->insert(c);
    (void)c->reset(c);
    return ret;
}

int tmwt_remove(WT_CURSOR *c, const void *k, size_t kl) {
    WT_ITEM key;
    memset(&key, 0, sizeof(key));
    key.data = k;
    key.size = kl;
    c->set_key(c, &key);
    int ret = c->remove(c);
    (void)c->reset(c);
    if (ret == WT_NOTFOUND)
        ret = 0;
    return ret;
}

/* Hands the value of `k` to visit (key NULL), which copies it out as
 * every engine's read does; *len = its length. */
int tmwt_get(WT_CURSOR *c, const void *k, size_t kl, tmwt_visit visit, void *ctx) {
    WT_ITEM key, value;
    memset(&key, 0, sizeof(key));
    key.data = k;
    key.size = kl;
    c->set_key(c, &key);
    int ret = c->search(c);
    if (ret == 0)
        ret = c->get_value(c, &value);
    if (ret == 0)
        visit(ctx, NULL, 0, value.data, value.size);
    (void)c->reset(c);
    return ret;
}

/* Hands up to n pairs from the first key >= k to visit, in key order. */
int tmwt_scan(WT_CURSOR *c, const void *k, size_t kl, size_t n, tmwt_visit visit, void *ctx, size_t *got) {
    WT_ITEM key, kk, vv;
    int exact = 0, ret;
    memset(&key, 0, sizeof(key));
    key.data = k;
    key.size = kl;
    *got = 0;
    c->set_key(c, &key);
    ret = c->search_near(c, &exact);
    if (ret == 0 && exact < 0)
        ret = c->next(c);
    while (ret == 0 && *got < n) {
        if ((ret = c->get_key(c, &kk)) != 0 || (ret = c->get_value(c, &vv)) != 0)
            break;
        visit(ctx, kk.data, kk.size, vv.data, vv.size);
        (*got)++;
        if (*got < n)
            ret = c->next(c);
    }
    (void)c->reset(c);
    return ret == WT_NOTFOUND ? 0 : ret;
}
