#!/usr/bin/env python3
"""Where a benchmark's threads wait when they are off their core.

Reads the text of `perf script` for a system-wide recording of scheduler
switches and wake-ups with call chains, made on a frame-pointer build:

    RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=target/fp \
        cargo build --release -p tidemark-bench
    perf record -a -g -e sched:sched_switch -e sched:sched_wakeup -o w.data -- \
        target/fp/release/tidemark-bench cache-pressure --quick
    perf script -i w.data -F comm,tid,cpu,time,event,trace,ip,sym > w.txt
    scripts/sched-waits.py w.txt --min-ms 2

Every spell a thread named COMM (default: the bench's own threads, which
keep the process name) spends off its core is split in two: asleep (from
the switch away to the wake-up) and waiting for a core (from the wake-up,
or from being preempted, to running again). Spells of at least MIN_MS are
grouped by the state and the stack they left the core with. Then, for the
waits for a core: which tasks ran on the core the thread came back on, and
how often another core was idle for most of the wait.
"""

import argparse
import bisect
import collections
import re
import sys

HEADER = re.compile(r"^(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)$")
SKIP = re.compile(
    r"^(__schedule|schedule|io_schedule|entry_SYSCALL|do_syscall|syscall$|std::|core::|"
    r"<std::|start_thread|__rust_begin|\[unknown\])"
)


def events(path):
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if cur:
                    yield cur
                cur = None
                continue
            m = HEADER.match(line)
            if m and not line.startswith(("\t", " ")):
                if cur:
                    yield cur
                cur = {
                    "tid": int(m.group(2)),
                    "cpu": int(m.group(3)),
                    "t": float(m.group(4)),
                    "ev": m.group(5),
                    "tr": m.group(6),
                    "stack": [],
                }
            elif cur is not None:
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    cur["stack"].append(parts[1])
    if cur:
        yield cur


def field(tr, name):
    m = re.search(r"\b" + name + r"=(.*?)(?= \w+=|$)", tr)
    return m.group(1) if m else None


def signature(stack, depth):
    frames = [s for s in stack if not SKIP.match(s) and "TidemarkWorker" not in s]
    return " <- ".join(frames[:depth])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("script", help="output of perf script (see above)")
    ap.add_argument("--comm", default="tidemark-bench", help="thread name to follow")
    ap.add_argument("--min-ms", type=float, default=1.0, help="shortest spell counted")
    ap.add_argument("--depth", type=int, default=7, help="stack frames shown")
    ap.add_argument("--top", type=int, default=15, help="stack groups shown")
    a = ap.parse_args()

    names = {}
    off = {}  # tid -> (time, state, stack) when it left its core
    woken = {}  # tid -> time of its wake-up
    running = {}  # cpu -> (since, tid)
    ran = collections.defaultdict(list)  # cpu -> [(from, to, tid)]
    spells = []  # (tid, left, woken, back, state, stack, cpu back on)
    for e in events(a.script):
        if e["ev"] == "sched:sched_wakeup":
            pid = int(field(e["tr"], "pid"))
            if pid in off and pid not in woken:
                woken[pid] = e["t"]
        elif e["ev"] == "sched:sched_switch":
            tr = e["tr"]
            prev, nxt = int(field(tr, "prev_pid")), int(field(tr, "next_pid"))
            names[prev] = field(tr, "prev_comm")
            names[nxt] = field(tr, "next_comm")
            cpu = e["cpu"]
            if cpu in running:
                ran[cpu].append((running[cpu][0], e["t"], running[cpu][1]))
            running[cpu] = (e["t"], nxt)
            off[prev] = (e["t"], field(tr, "prev_state").split()[0], e["stack"])
            woken.pop(prev, None)
            if nxt in off:
                left, state, stack = off.pop(nxt)
                w = woken.pop(nxt, None)
                if state.startswith("R"):
                    w = left  # preempted: waiting for a core all along
                elif w is None:
                    w = e["t"]  # no wake-up seen: counted as asleep
                spells.append((nxt, left, w, e["t"], state, stack, cpu))

    groups = collections.defaultdict(lambda: [0, 0.0, 0.0])
    holders = collections.Counter()
    other_idle = [0, 0.0]
    waits = [0, 0.0]
    cpus = sorted(ran)
    # Each core's intervals are in time order; their ends index them.
    ends = {c: [t for _, t, _ in ran[c]] for c in cpus}

    def during(c, a, b):
        """The intervals of core `c` that overlap `a..b`, with the overlap."""
        for f, t, who in ran[c][bisect.bisect_right(ends[c], a) :]:
            if f >= b:
                break
            yield who, min(t, b) - max(f, a)

    for tid, left, w, back, state, stack, cpu in spells:
        if names.get(tid) != a.comm or (back - left) * 1000 < a.min_ms:
            continue
        g = groups[(state, signature(stack, a.depth))]
        g[0] += 1
        g[1] += (w - left) * 1000
        g[2] += (back - w) * 1000
        delay = (back - w) * 1000
        if delay < a.min_ms:
            continue
        waits[0] += 1
        waits[1] += delay
        for who, ov in during(cpu, w, back):
            if ov > 0:
                holders[names.get(who, str(who)) if who else "(idle)"] += ov * 1000
        for c in cpus:
            if c == cpu:
                continue
            idle = sum(max(0, ov) for who, ov in during(c, w, back) if who == 0)
            if idle * 1000 > delay / 2:
                other_idle[0] += 1
                other_idle[1] += delay
                break

    print(f"spells of {a.comm} threads off their core for >= {a.min_ms} ms")
    print(f"{'spells':>7} {'asleep ms':>10} {'core ms':>9}  state  stack")
    for (state, sig), (n, s, d) in sorted(groups.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[: a.top]:
        print(f"{n:7d} {s:10.1f} {d:9.1f}  {state:5}  {sig}")
    print(f"\nwaits for a core of >= {a.min_ms} ms: {waits[0]}, {waits[1]:.1f} ms in all")
    print("on the core the thread came back on, meanwhile (ms):")
    for who, ms in holders.most_common(8):
        print(f"  {ms:9.1f}  {who}")
    print(
        f"another core idle for over half the wait: {other_idle[0]} waits, {other_idle[1]:.1f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
