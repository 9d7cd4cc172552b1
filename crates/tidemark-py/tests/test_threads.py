"""Python threads reach the engine concurrently: the GIL is released in
every engine call. Prints the figure; asserts only correctness (a shared,
noisy machine makes wall-clock assertions meaningless)."""

import threading
import time

import tidemark

DOCS = 4000


def _insert(db, threads, durability):
    coll = db[f"t{threads}-{durability}"]
    per = DOCS // threads
    barrier = threading.Barrier(threads + 1)

    def work(t):
        barrier.wait()
        for i in range(per):
            coll.insert_one({"_id": t * per + i, "t": t, "pad": "x" * 100}, durability=durability)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    assert coll.count_documents({}) == per * threads
    return per * threads / elapsed


def test_eight_threads_insert_faster_than_one(tmp_path, capsys):
    rows = []
    with tidemark.open(tmp_path / "db", cache_size="64MB") as db:
        for durability in ("fsync", "write"):
            rows.append((durability, *[_insert(db, n, durability) for n in (1, 2, 8)]))
        assert db.verify()["ok"]
    with capsys.disabled():
        print("\n  insert_one from Python threads (docs/s, this machine, this run)")
        print("  durability   1 thread  2 threads  8 threads   8/1")
        for d, one, two, eight in rows:
            print(f"  {d:<10} {one:>10.0f} {two:>10.0f} {eight:>10.0f} {eight / one:>5.2f}x")
