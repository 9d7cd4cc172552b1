/*
 * A small C shim over WiredTiger's C API for tidemark-bench: the API is
 * method tables of function pointers (WT_CONNECTION, WT_SESSION,
 * WT_CURSOR), which this file calls so that Rust sees plain functions.
 * Every function returns WiredTiger's error code (0 on success).
 */
#include <string.h>
#include <wiredtiger.h>

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

/* Copies the value of `k` into buf (up to cap bytes); *len = its length. */
int tmwt_get(WT_CURSOR *c, const void *k, size_t kl, void *buf, size_t cap, size_t *len) {
    WT_ITEM key, value;
    memset(&key, 0, sizeof(key));
    key.data = k;
    key.size = kl;
    c->set_key(c, &key);
    int ret = c->search(c);
    if (ret == 0)
        ret = c->get_value(c, &value);
    if (ret == 0) {
        *len = value.size;
        memcpy(buf, value.data, value.size < cap ? value.size : cap);
    }
    (void)c->reset(c);
    return ret;
}

/* Reads up to n pairs from the first key >= k, copying each into buf. */
int tmwt_scan(WT_CURSOR *c, const void *k, size_t kl, size_t n, void *buf, size_t cap, size_t *got) {
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
        memcpy(buf, kk.data, kk.size < cap ? kk.size : cap);
        memcpy(buf, vv.data, vv.size < cap ? vv.size : cap);
        (*got)++;
        if (*got < n)
            ret = c->next(c);
    }
    (void)c->reset(c);
    return ret == WT_NOTFOUND ? 0 : ret;
}
