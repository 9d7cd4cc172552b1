"""Python threads reach the engine concurrently: the GIL is released in
every engine call. Prints the figures; asserts only correctness (a shared,
noisy machine makes wall-clock assertions meaningless)."""

import threading
import time

import tidemark

DOCS = 4000


def _insert(db, threads, durability, batch):
    coll = db[f"t{threads}-{durability}-{batch}"]
    per = DOCS // threads
    barrier = threading.Barrier(threads + 1)

    def work(t):
        barrier.wait()
        docs = ({"_id": t * per + i, "t": t, "pad": "x" * 100} for i in range(per))
        if batch == 1:
            for d in docs:
                coll.insert_one(d, durability=durability)
        else:
            docs = list(docs)
            for i in range(0, per, batch):
                coll.insert_many(docs[i : i + batch], durability=durability)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    assert coll.count_documents({}) == per * threads
    assert [d["_id"] for d in coll.find(sort=[("_id", 1)])] == list(range(per * threads))
    return per * threads / elapsed


def test_threads_insert_concurrently(tmp_path, capsys):
    rows = []
    with tidemark.open(tmp_path / "db", cache_size="64MB") as db:
        for durability, batch in (("fsync", 1), ("write", 1), ("write", 100)):
            rows.append((durability, batch, *[_insert(db, n, durability, batch) for n in (1, 2, 8)]))
        assert db.verify()["ok"]
    with capsys.disabled():
        print("\n  documents/s inserted from Python threads (this machine, this run)")
        print("  durability  docs/call   1 thread  2 threads  8 threads    8/1")
        for d, b, one, two, eight in rows:
            print(f"  {d:<10} {b:>10} {one:>10.0f} {two:>10.0f} {eight:>10.0f} {eight / one:>6.2f}x")
