"""Key-value tables, batches, transactions and snapshots."""

import threading
import time

import pytest

import tidemark


def test_open_options_and_context_manager(tmp_path):
    with tidemark.open(tmp_path / "a", cache_size="8MB", durability="fsync",
                       checkpoint_interval=0, eviction_threads=2) as db:
        assert db.durability == "fsync"
        assert not db.closed
        # The pool's budget: 8 MiB less the slack kept for one page per thread.
        assert 7 << 20 < db.stats()["cache_size"] <= 8 << 20
        db.table("kv").put(b"k", b"v")
    assert db.closed
    with pytest.raises(tidemark.DatabaseClosed):
        db.table("kv")
    # What was written survives the reopen.
    with tidemark.Database(tmp_path / "a") as db:
        assert db.table("kv").get(b"k") == b"v"


def test_page_size_is_chosen_at_creation(tmp_path):
    with pytest.raises(tidemark.ConfigurationError):
        tidemark.open(tmp_path / "bad", page_size=3000)
    assert not (tmp_path / "bad").exists()
    with tidemark.open(tmp_path / "a", page_size="8KiB") as db:
        assert db.page_size == 8192
        assert db.max_key_size == 2048
        assert db.stats()["page_size"] == 8192
        kv = db.table("kv")
        kv.put(b"k" * 2048, b"v")
        with pytest.raises(tidemark.KeySizeError):
            kv.put(b"k" * 2049, b"v")
    # Reopened without the option, or with another size, it keeps its own.
    with tidemark.open(tmp_path / "a", page_size=4096) as db:
        assert db.page_size == 8192
        assert db.table("kv").get(b"k" * 2048) == b"v"
    with tidemark.open(tmp_path / "b") as db:
        assert db.page_size == tidemark.DEFAULT_PAGE_SIZE
        assert db.max_key_size == tidemark.MAX_KEY_SIZE


def test_checkpoint_log_size_starts_checkpoints(tmp_path):
    # Under one 64 KiB segment: refused.
    with pytest.raises(tidemark.ConfigurationError):
        tidemark.open(tmp_path / "bad", log_segment_size="64KiB", checkpoint_log_size="32KiB")
    with tidemark.open(tmp_path / "a", log_segment_size="64KiB", checkpoint_log_size="256KiB",
                       checkpoint_interval=0) as db:
        kv = db.table("kv")
        before = db.stats()["checkpoints"]
        for i in range(2000):
            kv.put(b"k%05d" % i, b"v" * 500)
        # About 1.1 MB of log: the checkpointer is asked for one as the
        # log passes 256 KiB past the last checkpoint; it runs on its own
        # thread.
        deadline = time.monotonic() + 10
        while db.stats()["checkpoints"] == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert db.stats()["checkpoints"] > before
    # 0 turns it off; the option is accepted.
    with tidemark.open(tmp_path / "b", checkpoint_log_size=0, checkpoint_interval=0) as db:
        db.table("kv").put(b"k", b"v")


def test_write_back_interval(tmp_path):
    # A small cache, twice its size in values: pages are evicted to the
    # data file, which is then written back between checkpoints.
    with tidemark.open(tmp_path / "a", cache_size="2MB", checkpoint_interval=0,
                       checkpoint_log_size=0, write_back_interval=0.05) as db:
        kv = db.table("kv")
        checkpoints = db.stats()["checkpoints"]
        for k in range(2000):
            kv.put(b"k%05d" % k, b"v" * 2000)
        deadline = time.monotonic() + 10
        while db.stats()["data_write_backs"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert db.stats()["data_write_backs"] > 0
        # A write-back is not a checkpoint.
        assert db.stats()["checkpoints"] == checkpoints
    # 0 turns it off.
    with tidemark.open(tmp_path / "b", cache_size="2MB", write_back_interval=0) as db:
        kv = db.table("kv")
        for k in range(2000):
            kv.put(b"k%05d" % k, b"v" * 2000)
        time.sleep(0.3)
        assert db.stats()["data_write_backs"] == 0


def test_os_cache(tmp_path):
    # "keep" never drops; "drop" keeps every value (and drops where the
    # kernel can); anything else is refused.
    with tidemark.open(tmp_path / "a", cache_size="2MB", os_cache="keep") as db:
        assert db.stats()["os_cache_drop_behind"] == 0
        assert db.stats()["memory_limit_bytes"] == 0
    with tidemark.open(tmp_path / "b", cache_size="2MB", os_cache="drop") as db:
        kv = db.table("kv")
        for k in range(2000):
            kv.put(b"k%05d" % k, b"v%d" % k * 200)
        db.checkpoint()
        for k in range(0, 2000, 7):
            assert kv.get(b"k%05d" % k) == b"v%d" % k * 200
    with pytest.raises(tidemark.ConfigurationError):
        tidemark.open(tmp_path / "c", os_cache="sometimes")


def test_checkpoint_flush_nice(tmp_path):
    # Out of 0..19: refused; negative turns the thread off.
    with pytest.raises(tidemark.ConfigurationError):
        tidemark.open(tmp_path / "bad", checkpoint_flush_nice=20)
    for i, nice in enumerate([None, 0, 12, -1]):
        with tidemark.open(tmp_path / f"d{i}", checkpoint_flush_nice=nice) as db:
            kv = db.table("kv")
            for k in range(500):
                kv.put(b"k%05d" % k, b"v" * 100)
            assert db.checkpoint()["pages_written"] > 0
        with tidemark.open(tmp_path / f"d{i}") as db:
            assert db.table("kv").get(b"k00499") == b"v" * 100


def test_parse_size():
    assert tidemark.parse_size(4096) == 4096
    assert tidemark.parse_size("64MB") == 64 << 20
    assert tidemark.parse_size("1.5GiB") == 3 << 29
    assert tidemark.parse_size("512k") == 512 << 10
    for bad in ("lots", "12 parsecs", "-1MB"):
        with pytest.raises(tidemark.ConfigurationError):
            tidemark.parse_size(bad)
    with pytest.raises(TypeError):
        tidemark.parse_size(1.5)


def test_put_get_delete_range(db):
    kv = db.table("kv")
    assert kv.name == "kv"
    assert kv.get(b"k") is None
    kv.put(b"k", b"v")
    assert kv.get(b"k") == b"v"
    assert kv.delete(b"k") is True
    assert kv.delete(b"k") is False
    assert kv.get(b"k") is None
    for i in range(100):
        kv.put(b"key%03d" % i, b"%d" % i, durability="none")
    got = list(kv.range(b"key010", b"key020"))
    assert got == [(b"key%03d" % i, b"%d" % i) for i in range(10, 20)]
    rev = list(kv.range(b"key010", b"key020", reverse=True))
    assert rev == got[::-1]
    assert len(list(kv.range())) == 100
    assert [k for k, _ in kv.range(hi=b"key002")] == [b"key000", b"key001"]
    # A limit: the first (or last) entries only, however many the range holds.
    assert list(kv.range(b"key010", limit=3)) == got[:3]
    assert list(kv.range(b"key010", b"key020", reverse=True, limit=4)) == got[::-1][:4]
    assert list(kv.range(b"key010", b"key020", limit=0)) == []
    assert list(kv.range(b"key010", b"key020", limit=500)) == got
    with db.snapshot() as s:
        assert list(s.range("kv", b"key010", limit=2)) == got[:2]
    t = db.transaction()
    t.put("kv", b"key0105", b"own")
    assert list(t.range("kv", b"key010", limit=2)) == [got[0], (b"key0105", b"own")]
    assert list(t.table("kv").range(b"key010", reverse=True, limit=1)) == [(b"key099", b"99")]
    t.rollback()
    with pytest.raises(OverflowError):
        kv.range(limit=-1)
    assert db.list_tables() == ["kv"]
    db.drop_table("kv")
    assert db.list_tables() == []


def test_bad_keys_values_and_names(db):
    kv = db.table("kv")
    with pytest.raises(tidemark.KeySizeError):
        kv.put(b"", b"v")
    with pytest.raises(tidemark.KeySizeError):
        kv.put(b"k" * (tidemark.MAX_KEY_SIZE + 1), b"v")
    with pytest.raises(tidemark.ValueTooLarge):
        kv.put(b"k", b"v" * (tidemark.MAX_VALUE_SIZE + 1))
    with pytest.raises(TypeError):
        kv.put("text", b"v")
    with pytest.raises(tidemark.InvalidName):
        db.table("")
    with pytest.raises(tidemark.ConfigurationError):
        kv.put(b"k", b"v", durability="sometimes")
    with pytest.raises(tidemark.TableNotFound):
        db._native.open_table("nope")
    # Nothing of the refused writes landed.
    assert list(kv.range()) == []
    # A ValueError subclass, as Python code expects of bad arguments.
    assert issubclass(tidemark.KeySizeError, ValueError)
    assert issubclass(tidemark.KeySizeError, tidemark.TidemarkError)


def test_batch_is_atomic(db):
    db.table("kv").put(b"old", b"1")
    with db.batch(durability="fsync") as b:
        b.put("kv", b"x", b"1")
        b.delete("kv", b"old")
        oid = b.insert_one("events", {"x": 1})
        assert len(b) == 3
    assert db.table("kv").get(b"x") == b"1"
    assert db.table("kv").get(b"old") is None
    assert db["events"].find_one({"_id": oid})["x"] == 1
    # An exception inside the block applies nothing.
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b.put("kv", b"y", b"1")
            raise RuntimeError("abandon")
    assert db.table("kv").get(b"y") is None
    # A batch with one bad operation applies none of it.
    b = db.batch()
    b.put("kv", b"z", b"1")
    b.insert_one("events", {"_id": oid})  # duplicate _id
    with pytest.raises(tidemark.DuplicateKeyError):
        b.commit()
    assert db.table("kv").get(b"z") is None
    with pytest.raises(tidemark.InvalidOperation):
        b.commit()


def test_transaction_commit_rollback_and_conflict(db):
    kv = db.table("kv")
    kv.put(b"x", b"v")
    with db.transaction() as t:
        v = t.table("kv").get(b"x")
        t.table("kv").put(b"x", v + b"!")
        # Read-your-own-writes, not yet visible outside.
        assert t.table("kv").get(b"x") == b"v!"
        assert kv.get(b"x") == b"v"
        assert list(t.table("kv").range()) == [(b"x", b"v!")]
    assert kv.get(b"x") == b"v!"
    # An exception rolls back.
    with pytest.raises(KeyError):
        with db.transaction() as t:
            t.put("kv", b"x", b"lost")
            raise KeyError("x")
    assert kv.get(b"x") == b"v!"
    # First committer wins.
    t1, t2 = db.transaction(), db.transaction()
    t1.put("kv", b"x", b"one")
    t2.put("kv", b"x", b"two")
    t1.commit()
    with pytest.raises(tidemark.ConflictError):
        t2.commit()
    assert kv.get(b"x") == b"one"
    assert issubclass(tidemark.ConflictError, tidemark.OperationFailure)
    with pytest.raises(tidemark.InvalidOperation, match="transaction has ended"):
        t2.commit()
    # Every call on an ended transaction says so, reads and writes alike.
    with pytest.raises(tidemark.InvalidOperation, match="transaction has ended"):
        t1.put("kv", b"x", b"late")
    with pytest.raises(tidemark.InvalidOperation, match="transaction has ended"):
        t1.get("kv", b"x")
    assert kv.get(b"x") == b"one"
    # ConflictError from the with block, nothing applied.
    with pytest.raises(tidemark.ConflictError):
        with db.transaction() as t:
            t.delete("kv", b"x")
            kv.put(b"x", b"meanwhile")
    assert kv.get(b"x") == b"meanwhile"
    assert db.stats()["txn_conflicts"] >= 2


def test_snapshot_is_one_consistent_view(db):
    kv = db.table("kv")
    events = db["events"]
    kv.put(b"x", b"1")
    events.insert_many([{"_id": i} for i in range(10)])
    with db.snapshot() as s:
        kv.put(b"x", b"2")
        kv.put(b"y", b"2")
        events.insert_many([{"_id": i} for i in range(10, 20)])
        events.delete_one({"_id": 0})
        assert s.table("kv").get(b"x") == b"1"
        assert list(s.range("kv")) == [(b"x", b"1")]
        assert [d["_id"] for d in s.get_collection("events").find()] == list(range(10))
        assert s.get_collection("events").find_one({"_id": 0}) == {"_id": 0}
        assert s["events"].count_documents({}) == 10
        assert s["events"].count_documents({"_id": {"$gte": 5}}) == 5
        with pytest.raises(tidemark.CollectionNotFound):
            s.get_collection("later")
        assert s.is_valid()
    assert kv.get(b"x") == b"2"
    with pytest.raises(tidemark.InvalidOperation, match="snapshot was released"):
        s.get("kv", b"x")


def test_concurrent_python_threads(db):
    kv = db.table("kv")
    errors = []

    def work(t):
        try:
            for i in range(500):
                kv.put(b"%d-%d" % (t, i), b"v")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(list(kv.range())) == 4000


def test_stats_checkpoint_verify(db):
    db.table("kv").put(b"k", b"v")
    cp = db.checkpoint()
    assert cp["pages_written"] > 0 and cp["idle"] is False
    v = db.verify()
    assert v["ok"] is True and v["problems"] == [] and v["entries"] >= 1
    s = db.stats()
    assert isinstance(s, dict) and s["checkpoints"] >= 1


def test_a_directory_opens_once(tmp_path):
    a = tidemark.open(tmp_path / "x")
    with pytest.raises(tidemark.DatabaseLocked):
        tidemark.open(tmp_path / "x")
    kv = a.table("kv")
    a.close()
    a.close()  # twice is harmless
    with pytest.raises(tidemark.DatabaseClosed):
        kv.put(b"k", b"v")
    b = tidemark.open(tmp_path / "x")
    b.close()


def test_foreign_file_is_not_a_database(tmp_path):
    d = tmp_path / "foreign"
    d.mkdir()
    (d / "data.tdm").write_bytes(b"this is not a database at all " * 400)
    with pytest.raises(tidemark.CorruptionError):
        tidemark.open(d)


def test_statistics_log_backup_and_compact(tmp_path):
    import json
    import time

    with tidemark.open(tmp_path / "db", statistics_log={"interval": 0.1}) as db:
        kv = db.table("kv")
        for i in range(2000):
            kv.put(b"%06d" % i, b"x" * 200)
        time.sleep(0.3)
        info = db.backup(tmp_path / "copy")
        assert info["data_bytes"] > 0
        c = db.compact()
        assert 0 < c["size_after"] <= c["size_before"]
        with pytest.raises(tidemark.ConfigurationError):
            db.backup(tmp_path / "copy")  # not empty any more
    files = sorted((tmp_path / "db").glob("stats.*.jsonl"))
    lines = [json.loads(l) for f in files for l in f.read_text().splitlines()]
    assert len(lines) >= 3
    # The last line is written at close, after every put.
    assert lines[-1]["ops_put"] == 2000
    assert lines[-1]["tables"]["kv"]["writes"] == 2000
    with tidemark.open(tmp_path / "copy") as copy:
        assert len(list(copy.table("kv").range())) == 2000
        assert copy.verify()["ok"]
    with tidemark.open(tmp_path / "off", statistics_log=False) as db:
        db.table("t").put(b"k", b"v")
    assert not list((tmp_path / "off").glob("stats.*"))
    with pytest.raises(tidemark.ConfigurationError):
        tidemark.open(tmp_path / "bad", statistics_log={"every": 1})
