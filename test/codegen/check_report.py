#!/usr/bin/env python3
"""Checks a loomc --report-json file against formulas computed here:
model-state bytes (fp32: P = 4, G = 4 bytes per parameter, K = 8 for AdamW,
4 for SGD with momentum, 0 for plain SGD; bf16 mixed precision, after the
ZeRO paper: P = 2, G = 2, and K = 4 of fp32 master parameters plus the fp32
optimizer state, so 16 per parameter with AdamW), the data-parallel
gradient all-reduce (a ring: 2 (N - 1) / N of the gradient bytes sent per
rank, and with a cluster 2 (N - 1) latencies plus those bytes over the
inter-node bandwidth when dp exceeds a node), and the FLOPs of the GPT's
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
p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
p.add_argument("--dp", type=int, default=1)
p.add_argument("--cluster", help="the cluster description the report used")
a = p.parse_args()
r = json.load(open(a.report))
m = r["memory_per_rank_bytes"]
n = a.params
fails = []
width = 2 if a.precision == "bf16" else 4
master = 4 * n if a.precision == "bf16" else 0
states = (2 * width + a.state_bytes_per_param) * n + master
for key, want in [("parameters", width * n), ("gradients", width * n),
                  ("optimizer_state", a.state_bytes_per_param * n),
                  ("master_parameters", master), ("model_states", states),
                  ("total", states + m["activations_peak"] + m["inputs"])]:
    print(f"{key}: {m[key]} formula {want}")
    if m[key] != want:
        fails.append(key)
if r["parameter_count"] != n:
    fails.append("parameter_count")
N = a.dp
want_comm = {"all_reduce": {"dp": 2 * (N - 1) / N * width * n}} if N > 1 else {}
print(f"communication: {r['communication_bytes_per_step']} formula {want_comm}")
if r["communication_bytes_per_step"] != want_comm or r["ranks"] != N:
    fails.append("communication")
if a.cluster and N > 1:
    c = json.load(open(a.cluster))
    link = c["inter_node"] if N > c["devices_per_node"] else c["intra_node"]
    want = 2 * (N - 1) * link["latency"] + 2 * (N - 1) / N * width * n / link["bandwidth"]
    got = r["collectives"][0]["seconds"]
    print(f"all_reduce seconds: {got} formula {want}")
    if abs(got - want) > 1e-9 * want:
        fails.append("all_reduce seconds")
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
