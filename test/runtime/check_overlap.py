#!/usr/bin/env python3
"""Reads a training program's Chrome trace (one rank, data parallel) and
checks that the gradient reductions overlap the backward pass: in the step
given, the backward repeat over the layers (the repeat whose iterations
start all-reduces) starts all-reduces in every iteration, and each started
in an iteration but the last is waited for only after another backward
iteration has computed: between its start (the "start all_reduce" span the
runtime records where the rank issues it) and the first wait (a "wait"
span on the compute thread) after it lies a whole later iteration."""
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
starts = [e for e in inside if e["name"].startswith("start all_reduce") and e["tid"] == 0]
waits = sorted(e["ts"] for e in inside if e["name"] == "wait" and e["tid"] == 0)
best = None
for repeat, its in iterations.items():
    per = {i: [s for s in starts if b <= s["ts"] <= end] for i, (b, end) in its.items()}
    if best is None or sum(map(len, per.values())) > sum(map(len, best[1].values())):
        best = (repeat, per, its)
repeat, per, its = best
print(f"repeat {repeat}: {len(its)} iterations, all-reduces started per iteration "
      f"{[len(per[i]) for i in sorted(per, key=lambda i: its[i][0])]}")
order = sorted(its, key=lambda i: its[i][0])
overlapped, checked = 0, 0
for i in order[:-1]:
    for s in per[i]:
        checked += 1
        wait = next((w for w in waits if w > s["ts"]), float("inf"))
        if any(s["ts"] < b and end < wait for b, end in its.values()):
            overlapped += 1
print(f"started in an iteration but the last, waited after a later backward iteration: "
      f"{overlapped} of {checked}")
ok = len(its) > 1 and all(per.values()) and checked > 0 and overlapped == checked
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
