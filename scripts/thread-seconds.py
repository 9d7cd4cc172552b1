#!/usr/bin/env python3
"""Where each second of a benchmark's CPU went, thread by thread.

Records, four times a second, every thread of a running process from
/proc (time on a CPU and time waiting for one, from `schedstat`; context
switches, from `status`), and the machine's CPU split (/proc/stat).
Then sets each second beside the engine's statistics log of the same
run (one line a second): the inserts in it, the time the threads had on
a CPU and waited for one, by thread name, and what an application
thread's eviction took.

    tidemark-bench cache-pressure --json --stats-log DIR > run.json &
    scripts/thread-seconds.py record $! threads.jsonl
    scripts/thread-seconds.py table threads.jsonl DIR

The bench's inserting threads keep the process's name (`tidemark-bench`);
the engine's are named `tidemark-*`. `table` prints, per second: the
rate over the run's median; for the busiest thread names, seconds on a
CPU / seconds waiting for one / voluntary / involuntary switches (summed
over the threads of that name); the machine's user / system / idle
shares; and microseconds per application-thread eviction. Then the
correlation of the rate with each.
"""

import argparse
import collections
import json
import math
import os
import statistics
import sys
import time


def record(pid, out):
    def cpu():
        r = {}
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("cpu"):
                    p = line.split()
                    r[p[0]] = [int(x) for x in p[1:]]
        return r

    nxt = time.time()
    with open(out, "w") as o:
        while True:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except FileNotFoundError:
                break
            tasks = {}
            for tid in tids:
                base = f"/proc/{pid}/task/{tid}"
                try:
                    with open(f"{base}/comm") as f:
                        comm = f.read().strip()
                    with open(f"{base}/schedstat") as f:
                        run_ns, wait_ns, _ = (int(x) for x in f.read().split())
                    vol = inv = 0
                    with open(f"{base}/status") as f:
                        for line in f:
                            if line.startswith("voluntary_ctxt_switches"):
                                vol = int(line.split()[1])
                            elif line.startswith("nonvoluntary_ctxt_switches"):
                                inv = int(line.split()[1])
                    tasks[tid] = [comm, run_ns, wait_ns, vol, inv]
                except (FileNotFoundError, ProcessLookupError):
                    pass
            o.write(json.dumps({"t": time.time(), "tasks": tasks, "cpu": cpu()}) + "\n")
            o.flush()
            nxt += 0.25
            time.sleep(max(0.0, nxt - time.time()))


def corr(a, b):
    if len(a) < 3:
        return float("nan")
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    return sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else float("nan")


def table(samples_path, stats_dir, top):
    samples = [json.loads(l) for l in open(samples_path)]
    lines = []
    for name in sorted(os.listdir(stats_dir)):
        if name.startswith("stats.") and name.endswith(".jsonl"):
            lines += [json.loads(l) for l in open(os.path.join(stats_dir, name))]
    if not samples or len(lines) < 2:
        sys.exit("nothing to set side by side")

    def nearest(t):
        return min(samples, key=lambda s: abs(s["t"] - t))

    rows = []
    for a, b in zip(lines, lines[1:]):
        puts = b["ops_put"] - a["ops_put"]
        if puts <= 0:
            continue
        sa, sb = nearest(a["time"]), nearest(b["time"])
        dt = sb["t"] - sa["t"]
        if dt <= 0.5:
            continue
        by = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
        for tid, v in sb["tasks"].items():
            u = sa["tasks"].get(tid)
            if u is None:
                continue
            g = by[v[0]]
            g[0] += (v[1] - u[1]) / dt / 1e9
            g[1] += (v[2] - u[2]) / dt / 1e9
            g[2] += (v[3] - u[3]) / dt
            g[3] += (v[4] - u[4]) / dt
        x = [q - p for p, q in zip(sa["cpu"]["cpu"], sb["cpu"]["cpu"])]
        tot = sum(x) or 1
        evictions = b["app_thread_evictions"] - a["app_thread_evictions"]
        rows.append(
            {
                "rate": puts / (b["time"] - a["time"]),
                "threads": by,
                "user": x[0] / tot,
                "sys": x[2] / tot,
                "idle": x[3] / tot,
                "evict_us": (b["app_thread_eviction_us"] - a["app_thread_eviction_us"])
                / max(1, evictions),
                "checkpoint": bool(b.get("checkpoint_running")),
            }
        )
    med = statistics.median(r["rate"] for r in rows)
    names = sorted(
        {n for r in rows for n in r["threads"]},
        key=lambda n: -sum(r["threads"].get(n, [0])[0] for r in rows),
    )[:top]
    print("sec rate | " + " | ".join(f"{n[:15]:>15} run/wait/vol/inv" for n in names)
          + " | user/sys/idle | us per app eviction")
    for i, r in enumerate(rows):
        cells = []
        for n in names:
            g = r["threads"].get(n, [0, 0, 0, 0])
            cells.append(f"{g[0]:.2f}/{g[1]:.2f}/{g[2]:5.0f}/{g[3]:5.0f}".rjust(31))
        print(f"{i:3d} {r['rate'] / med:.2f} | " + " | ".join(cells)
              + f" | {r['user']:.2f}/{r['sys']:.2f}/{r['idle']:.2f} | {r['evict_us']:.1f}"
              + (" checkpoint" if r["checkpoint"] else ""))
    # The first seconds fill the cache and the last is partial: left out.
    body = rows[2:-1]
    rate = [r["rate"] / med for r in body]
    print()
    for n in names:
        print(f"rate against {n}'s time on a CPU: {corr(rate, [r['threads'].get(n, [0])[0] for r in body]):.2f}")
    print(f"rate against us per app eviction: {corr(rate, [r['evict_us'] for r in body]):.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="sample a running process until it exits")
    r.add_argument("pid", type=int)
    r.add_argument("out")
    t = sub.add_parser("table", help="set the samples beside the statistics log")
    t.add_argument("samples")
    t.add_argument("stats_dir")
    t.add_argument("--top", type=int, default=4, help="thread names shown (default 4)")
    a = p.parse_args()
    if a.cmd == "record":
        record(a.pid, a.out)
    else:
        table(a.samples, a.stats_dir, a.top)


if __name__ == "__main__":
    main()
