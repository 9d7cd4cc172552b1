"""A full disk: a typed error, no acknowledged write lost, writes resume."""

import pytest

import tidemark


def test_full_disk_is_a_typed_error_and_writes_resume(small_fs):
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
    # Still full: writes go on being refused the same way (the database did
    # not stop accepting writes), and reads go on. One that fits in room the
    # file already has may go in meanwhile (the eviction worker keeps
    # writing pages back, which changes how much room a write must reserve);
    # it is then acknowledged like any other. One is refused before the
    # tries could fit in what the disk has left (8 MiB of documents against
    # at most a few MiB free), and a refused one leaves nothing.
    refused = []
    for j in range(2000):
        doc_id = f"while-full-{j}"
        try:
            c.insert_one({"_id": doc_id, "pad": "z" * 4000})
        except tidemark.DiskFullError:
            refused.append(doc_id)
            break
        acked.append(doc_id)
    assert refused, "a full disk must refuse writes again"
    assert c.find_one({"_id": acked[-1]})["_id"] == acked[-1]
    assert c.find_one({"_id": refused[0]}) is None

    # Space returns: the same handle writes and checkpoints again.
    filler.unlink()
    more = list(range(len(acked) + 1_000_000, len(acked) + 1_000_500))
    for i in more:
        c.insert_one({"_id": i, "pad": "y" * 4000})
    db.checkpoint()
    db.close()

    # Reopened: every acknowledged insert, nothing that was refused.
    with tidemark.open(path, cache_size="4MB") as db:
        ids = [d["_id"] for d in db["docs"].find()]
        assert ids == acked + more
        assert db.verify()["ok"]
