#!/usr/bin/env python3
"""Checks a metrics file: the first training loss is above --initial-above,
and the last training loss and the last held-out loss are below
--final-below."""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("metrics")
p.add_argument("--initial-above", type=float, required=True)
p.add_argument("--final-below", type=float, required=True)
a = p.parse_args()
rows = [json.loads(line) for line in open(a.metrics)]
evals = [r["eval_loss"] for r in rows if "eval_loss" in r]
first, last = rows[0]["loss"], rows[-1]["loss"]
print(f"steps {len(rows)} loss {first:.4f} -> {last:.4f} held-out {evals}")
ok = first > a.initial_above and last < a.final_below and evals and evals[-1] < a.final_below
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
