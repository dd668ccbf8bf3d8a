#!/usr/bin/env python3
"""Reads a training program's Chrome trace (one rank, data parallel) and
checks that the gradient reductions overlap the backward pass: in the step
given, the backward repeat over the layers (the repeat whose iterations
start all-reduces) starts all-reduces in every iteration, so each layer's
gradients are being reduced while the backward pass of the earlier layers
still runs, and none of those reductions waits until the loop is over."""
import collections
import json
import re
import sys

trace, step = sys.argv[1], int(sys.argv[2])
events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
span = next(e for e in events if e["name"] == f"step {step}")
lo, hi = span["ts"], span["ts"] + span["dur"]
inside = [e for e in events if lo <= e["ts"] <= hi]
iterations = collections.defaultdict(dict)
for e in inside:
    m = re.match(r"repeat (\d+) iteration (\d+)$", e["name"])
    if m:
        iterations[int(m.group(1))][int(m.group(2))] = (e["ts"], e["ts"] + e["dur"])
reductions = [e for e in inside if e["name"].startswith("all_reduce")]
best = None
for repeat, its in iterations.items():
    per = {i: sum(1 for r in reductions if b <= r["ts"] <= end) for i, (b, end) in its.items()}
    if best is None or sum(per.values()) > sum(best[1].values()):
        best = (repeat, per, its)
repeat, per, its = best
print(f"repeat {repeat}: {len(its)} iterations, all-reduces started per iteration "
      f"{[per[i] for i in sorted(per, reverse=True)]}")
last_end = max(end for _, end in its.values())
after = sum(1 for r in reductions if r["ts"] > last_end)
print(f"all-reduces after the loop: {after}")
ok = len(its) > 1 and all(n > 0 for n in per.values())
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
