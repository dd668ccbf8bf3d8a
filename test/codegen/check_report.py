#!/usr/bin/env python3
"""Checks a loomc --report-json file against formulas computed here:
model-state bytes for fp32 (P = 4, G = 4 bytes per parameter, K = 8 for
AdamW, 4 for SGD with momentum, 0 for plain SGD), and the FLOPs of the GPT's
matrix products, forward, backward and the per-block recompute (the
elementwise ops add a few percent on top)."""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("report")
p.add_argument("--params", type=int, required=True)
p.add_argument("--state-bytes-per-param", type=int, required=True)
p.add_argument("--gpt", help="L,D,F,V,T,B: also check the FLOPs")
a = p.parse_args()
r = json.load(open(a.report))
m = r["memory_per_rank_bytes"]
n = a.params
fails = []
for key, want in [("parameters", 4 * n), ("gradients", 4 * n),
                  ("optimizer_state", a.state_bytes_per_param * n)]:
    print(f"{key}: {m[key]} formula {want}")
    if m[key] != want:
        fails.append(key)
if r["parameter_count"] != n:
    fails.append("parameter_count")
if a.gpt:
    L, D, F, V, T, B = map(int, a.gpt.split(","))
    tokens = B * T
    layer = D * 3 * D + D * D + 2 * D * F           # matmul weights of a block
    matmul = L * layer + V * D                      # plus the tied output head
    # 2 flops per weight and token forward, 4 backward, 2 again for the
    # blocks recomputed in the backward; attention 4TD per token and layer
    # forward, 10TD backward, 4TD recomputed.
    want = tokens * (6 * matmul + 2 * L * layer + L * 18 * T * D)
    got = r["flops_per_step"]
    print(f"flops: {got} matmul formula {want} ratio {got / want:.4f}")
    if not (1.0 <= got / want <= 1.06):
        fails.append("flops")
print("FAIL " + ", ".join(fails) if fails else "ok")
sys.exit(1 if fails else 0)
