"""A full disk: a typed error, no acknowledged write lost."""

import pytest

import tidemark


def test_full_disk_is_a_typed_error_and_loses_nothing(small_fs):
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * (8 << 20))
    path = small_fs / "db"
    db = tidemark.open(path, cache_size="4MB", log_segment_size="1MB", checkpoint_interval=0)
    c = db["docs"]
    acked = []
    with pytest.raises(tidemark.TidemarkError) as err:
        for i in range(1_000_000):
            c.insert_one({"_id": i, "pad": "z" * 4000})
            acked.append(i)
            if i % 1000 == 999:
                db.checkpoint()
    # The failure is the full disk, typed; both kinds derive from OSError.
    assert isinstance(err.value, tidemark.DiskFullError), repr(err.value)
    assert isinstance(err.value, OSError)
    assert len(acked) > 1000  # tens of MiB went in first
    # Later writes are refused, reads go on.
    with pytest.raises((tidemark.WritesStopped, tidemark.DiskFullError)):
        c.insert_one({"_id": "after"})
    assert c.find_one({"_id": acked[-1]})["_id"] == acked[-1]
    try:
        db.close()
    except tidemark.TidemarkError:
        pass  # the closing checkpoint may not fit either
    # With space again, every acknowledged insert is there.
    filler.unlink()
    with tidemark.open(path, cache_size="4MB") as db:
        ids = [d["_id"] for d in db["docs"].find()]
        assert ids[: len(acked)] == acked
        assert len(ids) <= len(acked) + 1
        assert db.verify()["ok"]
