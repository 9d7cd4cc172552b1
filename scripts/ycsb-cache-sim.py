#!/usr/bin/env python3
"""How often YCSB's zipfian requests miss a page cache of a given size.

Replays the request stream of `tidemark-bench ycsb` workload C (YCSB's
scrambled zipfian, constant 0.99, over RECORDS records whose keys are
"user" + FNV-64 of the record number, as `crates/tidemark-bench/src/
ycsb/gen.rs` draws them) against leaves that hold PER_LEAF consecutive
keys in key order, and prints the share of requests whose leaf is not
among FRAMES cached leaves under:

- CLOCK with one reference bit (what `cache/evict.rs` runs),
- GCLOCK with a counter of 2, 3 or 5 (frequency-aware variants),
- LRU,
- the best static choice: the FRAMES leaves requested most in the whole
  stream, known in advance (no replacement policy can beat it by much on
  a stream whose popularity does not change).

    scripts/ycsb-cache-sim.py --per-leaf 11 --frames 3500

It models only which leaf each request touches: no inner pages, no
writes. Its purpose is to tell whether a better replacement policy could
lower the misses of workload C at a cache smaller than the table.
"""

import argparse
import random
from collections import Counter, OrderedDict

THETA = 0.99
SCRAMBLE_ITEMS = 10_000_000_000


def fnv64(v):
    h = 0xCBF29CE484222325
    for _ in range(8):
        h ^= v & 0xFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        v >>= 8
    return h


def zeta(n, theta):
    exact = 4096
    if n <= exact:
        return sum(i ** -theta for i in range(1, n + 1))
    m, nf = float(exact), float(n)
    head = sum(i ** -theta for i in range(1, exact))
    integral = (nf ** (1 - theta) - m ** (1 - theta)) / (1 - theta)
    ends = (m ** -theta + nf ** -theta) / 2
    d1 = theta / 12 * (m ** (-theta - 1) - nf ** (-theta - 1))
    return head + integral + ends + d1


def scrambled_zipfian(records, count, seed):
    rng = random.Random(seed)
    zn = zeta(SCRAMBLE_ITEMS, THETA)
    z2 = zeta(2, THETA)
    alpha = 1 / (1 - THETA)
    eta = (1 - (2 / SCRAMBLE_ITEMS) ** (1 - THETA)) / (1 - z2 / zn)
    for _ in range(count):
        u = rng.random()
        uz = u * zn
        if uz < 1:
            v = 0
        elif uz < 1 + 0.5 ** THETA:
            v = 1
        else:
            v = int(SCRAMBLE_ITEMS * (eta * u - eta + 1) ** alpha)
        yield fnv64(v) % records


def lru(reqs, frames):
    cached, miss = OrderedDict(), 0
    for leaf in reqs:
        if leaf in cached:
            cached.move_to_end(leaf)
            continue
        miss += 1
        cached[leaf] = None
        if len(cached) > frames:
            cached.popitem(last=False)
    return miss / len(reqs)


def gclock(reqs, frames, most):
    """CLOCK whose counter saturates at `most` (1 is plain CLOCK)."""
    where, held, count = {}, [None] * frames, [0] * frames
    hand = used = miss = 0
    for leaf in reqs:
        f = where.get(leaf)
        if f is not None:
            count[f] = min(most, count[f] + 1)
            continue
        miss += 1
        if used < frames:
            f, used = used, used + 1
        else:
            while count[hand] > 0:
                count[hand] -= 1
                hand = (hand + 1) % frames
            f, hand = hand, (hand + 1) % frames
            del where[held[f]]
        held[f], where[leaf], count[f] = leaf, f, 0
    return miss / len(reqs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--per-leaf", type=int, required=True)
    ap.add_argument("--frames", type=int, required=True)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    order = sorted(range(a.records), key=lambda n: "user%d" % fnv64(n))
    leaf_of = [0] * a.records
    for i, n in enumerate(order):
        leaf_of[n] = i // a.per_leaf
    reqs = [leaf_of[r] for r in scrambled_zipfian(a.records, a.requests, a.seed)]
    leaves = (a.records + a.per_leaf - 1) // a.per_leaf
    print(f"{a.records} records, {leaves} leaves of {a.per_leaf}, {a.frames} frames, "
          f"{a.requests} requests: share of requests that miss")
    print(f"  CLOCK        {gclock(reqs, a.frames, 1):.3f}")
    for most in (2, 3, 5):
        print(f"  GCLOCK({most})    {gclock(reqs, a.frames, most):.3f}")
    print(f"  LRU          {lru(reqs, a.frames):.3f}")
    top = sum(c for _, c in Counter(reqs).most_common(a.frames))
    print(f"  best static  {1 - top / len(reqs):.3f}")


if __name__ == "__main__":
    main()
