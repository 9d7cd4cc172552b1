"""Capped collections: the ring, tailable cursors, layout and validate."""

import threading
import time

import pytest

import tidemark
from tidemark import CursorType


def test_capped_ring_keeps_the_newest(db):
    oplog = db.create_collection("oplog", capped={"size": 64 * 1024, "max": None})
    assert oplog.options() == {"capped": True, "size": 64 * 1024}
    assert oplog.is_capped()
    res = oplog.insert_one({"op": "i", "o": {"a": 1}})
    assert oplog.find_one({"_id": res.inserted_id})["o"] == {"a": 1}
    oplog.insert_many([{"_id": i, "pad": "x" * 200} for i in range(1000)])
    ids = [d["_id"] for d in oplog.find()]
    # A contiguous run of the newest, in insertion order.
    assert ids == list(range(1000 - len(ids), 1000))
    assert 100 < len(ids) < 300
    assert [d["_id"] for d in oplog.find(sort=[("$natural", -1)])] == ids[::-1]
    v = oplog.validate()
    assert v["ok"] and v["problems"] == []
    assert v["count"] == len(ids) == v["index_entries"]
    assert v["discontinuities"] == 0 and v["wraps"] <= 1
    assert v["fragmentation"] >= 0.99
    assert v["ring_size"] == 64 * 1024
    layout = oplog.layout()
    assert len(layout) == len(ids)
    # Physical order is natural order, apart from one wrap.
    drops = sum(1 for a, b in zip(layout, layout[1:]) if b < a)
    assert drops <= 1
    assert all(0 <= off < 64 * 1024 for off in layout)


def test_capped_max_and_pymongo_style_options(db):
    c = db.create_collection("m", capped=True, size="1MB", max=5)
    assert c.options() == {"capped": True, "size": 1 << 20, "max": 5}
    c.insert_many([{"_id": i} for i in range(12)])
    assert [d["_id"] for d in c.find()] == list(range(7, 12))
    with pytest.raises(tidemark.ConfigurationError):
        db.create_collection("nosize", capped=True)
    with pytest.raises(tidemark.ConfigurationError):
        db.create_collection("badmax", capped={"size": 4096, "max": -1})
    with pytest.raises(tidemark.ConfigurationError):
        db.create_collection("plain", size=4096)


def test_capped_refusals(db):
    c = db.create_collection("r", capped={"size": 8192})
    c.insert_one({"_id": 1, "v": "aaaa"})
    with pytest.raises(tidemark.CappedOperationError):
        c.delete_one({"_id": 1})
    with pytest.raises(tidemark.CappedOperationError):
        c.delete_one({"_id": 42})
    with pytest.raises(tidemark.CappedOperationError):
        c.replace_one({"_id": 1}, {"v": "a longer value"})
    assert c.replace_one({"_id": 1}, {"v": "bbbb"}).modified_count == 1
    assert c.find_one({"_id": 1})["v"] == "bbbb"
    with pytest.raises(tidemark.CappedRecordTooLarge):
        c.insert_one({"_id": 2, "blob": b"x" * 9000})
    with pytest.raises(tidemark.NotCappedError):
        db["plain"].insert_one({"_id": 1})
        db["plain"].layout()
    with pytest.raises(tidemark.NotCappedError):
        list(db["plain"].find(cursor_type=CursorType.TAILABLE))
    assert [d["_id"] for d in c.find()] == [1]


def test_tailable_await_cursor_sees_new_documents(db):
    oplog = db.create_collection("tail", capped={"size": 1 << 20})
    oplog.insert_one({"_id": 0})
    cur = oplog.find(cursor_type=CursorType.TAILABLE_AWAIT, max_await_ms=500)
    assert [d["_id"] for d in cur] == [0]
    assert cur.alive
    got = []

    def reader():
        deadline = time.monotonic() + 10
        while len(got) < 50 and time.monotonic() < deadline:
            for d in cur:
                got.append(d["_id"])

    t = threading.Thread(target=reader)
    t.start()
    for i in range(1, 51):
        oplog.insert_one({"_id": i})
        if i % 10 == 0:
            time.sleep(0.01)
    t.join()
    assert got == list(range(1, 51))
    # A TAILABLE (non-await) cursor stops at once at the end.
    quick = oplog.find({"_id": {"$gte": 48}}, cursor_type=CursorType.TAILABLE)
    assert [d["_id"] for d in quick] == [48, 49, 50]
    assert quick.alive
    t0 = time.monotonic()
    assert list(quick) == []
    assert time.monotonic() - t0 < 0.4


def test_tailable_cursor_that_falls_behind_reports_it(db):
    c = db.create_collection("small", capped={"size": 16 * 1024})
    c.insert_one({"_id": 0, "pad": "x" * 100})
    cur = c.find(cursor_type=CursorType.TAILABLE)
    assert next(cur)["_id"] == 0
    c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(1, 500)])
    with pytest.raises(tidemark.CappedPositionLost):
        next(cur)
    assert not cur.alive


def test_snapshot_of_a_capped_collection(db):
    c = db.create_collection("snapring", capped={"size": 16 * 1024})
    c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(20)])
    with db.snapshot() as s:
        sc = s.get_collection("snapring")
        c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(20, 25)])
        assert [d["_id"] for d in sc.find()] == list(range(20))
        assert [d["_id"] for d in sc.find(sort=[("$natural", -1)])] == list(range(19, -1, -1))
        c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(25, 300)])
        with pytest.raises(tidemark.CappedPositionLost):
            list(sc.find())


def test_reopen_keeps_the_ring(tmp_path):
    with tidemark.open(tmp_path / "r") as db:
        c = db.create_collection("o", capped={"size": 32 * 1024})
        c.insert_many([{"_id": i, "pad": "y" * 300} for i in range(500)], durability="fsync")
        before = [d["_id"] for d in c.find()]
    with tidemark.open(tmp_path / "r") as db:
        c = db["o"]
        assert c.options()["capped"]
        assert [d["_id"] for d in c.find()] == before
        assert c.validate()["ok"]
        assert db.verify()["ok"]
