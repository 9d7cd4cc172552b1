#!/usr/bin/env python3
"""Where the writer of `tidemark-bench checkpoint` spends its CPU beside
each round's checkpoint, against the seconds before it.

Reads the text of `perf script` for a system-wide CPU profile of a run:

    perf record -a -g -F 999 -o ck.data -- \
        target/release/tidemark-bench checkpoint --json > ck.json
    perf script -i ck.data -F comm,pid,tid,time,ip,sym > ck.txt
    scripts/checkpoint-windows.py ck.txt ck.json --frame copy_folio_from_iter_atomic

The bench runs each round's checkpoint on a thread of its own, named
`bench-ckpt`, and the writer on the process's main thread. A round's
window starts at the first sample of its `bench-ckpt` thread, which
starts the checkpoint at once and takes samples from the start (it
copies pages), and lasts the checkpoint's time as the bench's JSON gives
it (`per_round[].checkpoint_ms`): exact to a sampling interval. Kernel
call chains are whole; the bench's own frames need a build with frame
pointers to be (`RUSTFLAGS="-C force-frame-pointers=yes"`).

For each window, and for the `--before` seconds that end `--gap` seconds
before it: samples a second of each thread (the bench's by name, the
rest as `other:NAME`), and the writer's most frequent call chains (their
first four frames). With `--frame`, a last table: the share of the
writer's samples whose chain holds that symbol, before and beside each
checkpoint. The sampler slows the writer, so a profiled run's p99s are
not the bench's figures; this shows where time went, not how much.
"""

import argparse
import collections
import json
import sys

CHECKPOINT = "bench-ckpt"


def parse(path):
    """Samples as (comm, pid, tid, time, frames), frames innermost first."""
    samples = []
    cur = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                if cur:
                    samples.append(cur)
                    cur = None
                continue
            if not line[0].isspace():
                parts = line.split()
                # `comm pid/tid time:`; a comm may hold spaces, and an
                # unknown thread reads as `pid/-1`.
                at = next(
                    (
                        i
                        for i, p in enumerate(parts)
                        if "/" in p and p.replace("/", "").replace("-", "").isdigit()
                    ),
                    None,
                )
                if at is None or at + 1 >= len(parts):
                    cur = None
                    continue
                pid, tid = (int(x) for x in parts[at].split("/"))
                time = float(parts[at + 1].rstrip(":"))
                cur = (" ".join(parts[:at]), pid, tid, time, [])
            elif cur is not None:
                frame = line.strip().split(None, 1)
                if len(frame) > 1:
                    cur[4].append(frame[1])
    if cur:
        samples.append(cur)
    return samples


def windows(samples, checkpoint_ms):
    """Each round's checkpoint window, (start, end), in time order."""
    first = {}
    for comm, _, tid, time, _ in samples:
        if comm == CHECKPOINT:
            first[tid] = min(time, first.get(tid, time))
    starts = sorted(first.values())
    if len(starts) != len(checkpoint_ms):
        sys.exit(
            f"{len(starts)} `{CHECKPOINT}` threads in the profile, "
            f"{len(checkpoint_ms)} rounds in the bench's JSON: not the same run?"
        )
    return [(t, t + ms / 1000.0) for t, ms in zip(starts, checkpoint_ms)]


def profile(samples, main_pid, lo, hi, top):
    """Threads' samples a second, and the writer's chains, in [lo, hi]."""
    threads = collections.Counter()
    chains = collections.Counter()
    writer = []
    for comm, pid, tid, time, frames in samples:
        if not lo <= time <= hi:
            continue
        if tid == main_pid:
            who = "writer"
            writer.append(frames)
            chains[" < ".join(f[:40] for f in frames[:4])] += 1
        elif pid == main_pid:
            who = comm
        else:
            who = "other:" + comm
        threads[who] += 1
    secs = max(hi - lo, 1e-9)
    rates = {k: round(v / secs) for k, v in threads.most_common(10)}
    n = max(len(writer), 1)
    common = [(100.0 * v / n, k) for k, v in chains.most_common(top)]
    return rates, common, writer


def share(chains, symbol):
    """Percent of the chains that hold `symbol`."""
    if not chains:
        return float("nan")
    return 100.0 * sum(any(symbol in f for f in c) for c in chains) / len(chains)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("perf_script", help="text of `perf script` (see above)")
    ap.add_argument("bench_json", help="the same run's `--json` output")
    ap.add_argument("--before", type=float, default=3.0, help="seconds before each window")
    ap.add_argument("--gap", type=float, default=0.2, help="seconds between those and the window")
    ap.add_argument("--top", type=int, default=8, help="writer's chains shown per window")
    ap.add_argument("--frame", help="symbol whose share of the writer's samples is tabled")
    a = ap.parse_args()

    samples = parse(a.perf_script)
    mains = {pid for comm, pid, tid, _, _ in samples if comm == CHECKPOINT}
    if len(mains) != 1:
        sys.exit(f"expected one process with `{CHECKPOINT}` threads, found {len(mains)}")
    main_pid = mains.pop()
    with open(a.bench_json, encoding="utf-8") as f:
        rounds = json.load(f)["writer"]["per_round"]
    wins = windows(samples, [r["checkpoint_ms"] for r in rounds])
    rows = []
    for i, (start, end) in enumerate(wins, 1):
        print(f"round {i}: checkpoint {start:.2f}-{end:.2f} s ({end - start:.2f} s)")
        spans = [
            ("beside the checkpoint", start, end),
            (f"the {a.before:g} s before", start - a.gap - a.before, start - a.gap),
        ]
        got = {}
        for label, lo, hi in spans:
            rates, common, writer = profile(samples, main_pid, lo, hi, a.top)
            got[label] = writer
            print(f"  {label}: samples a second {rates}")
            for pct, chain in common:
                print(f"    {pct:5.1f} %  {chain}")
        if a.frame:
            rows.append(
                (i, share(got[spans[1][0]], a.frame), share(got[spans[0][0]], a.frame))
            )
    if a.frame:
        print(f"\nwriter's samples holding {a.frame}:")
        print("| round | before | beside the checkpoint |")
        print("|---|---|---|")
        for i, before, beside in rows:
            print(f"| {i} | {before:.1f} % | {beside:.1f} % |")


if __name__ == "__main__":
    main()
