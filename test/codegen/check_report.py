#!/usr/bin/env python3
"""Checks a loomc --report-json file against formulas computed here:
model-state bytes (fp32: P = 4, G = 4 bytes per parameter, K = 8 for AdamW,
4 for SGD with momentum, 0 for plain SGD; bf16 mixed precision, as
Megatron-LM keeps it: P = 2 of bf16 parameters, G = 4 of fp32 gradients
(main_grad), and K = 4 of fp32 master parameters plus the fp32 optimizer
state, so 18 per parameter with AdamW), the data-parallel gradient
all-reduce (of the fp32 gradients) (a ring: 2 (N - 1) / N of the gradient bytes sent per
rank, and with a cluster 2 (N - 1) latencies plus those bytes over the
inter-node bandwidth when dp exceeds a node; with --scalar-reductions K,
also K f32 scalars, as an fp32 rank program all-reduces for its loss and
label counts (at most 8 bytes each on rank 0, bucketed or not), and the
ring's latencies once per collective the report counts), and the FLOPs of
the GPT's
matrix products, forward and backward, and with --remat=full the per-block
recompute (the elementwise ops add a few percent on top)."""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("report")
p.add_argument("--params", type=int, required=True)
p.add_argument("--state-bytes-per-param", type=int, required=True)
p.add_argument("--gpt", help="L,D,F,V,T,B: also check the FLOPs")
p.add_argument("--remat", default="none", choices=("none", "full"),
               help="the policy the model was compiled with (loomc's default: none)")
p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
p.add_argument("--dp", type=int, default=1)
p.add_argument("--cluster", help="the cluster description the report used")
p.add_argument("--scalar-reductions", type=int, default=0)

a = p.parse_args()
r = json.load(open(a.report))
m = r["memory_per_rank_bytes"]
n = a.params
fails = []
width = 2 if a.precision == "bf16" else 4
grad_width = 4
master = 4 * n if a.precision == "bf16" else 0
states = (width + grad_width + a.state_bytes_per_param) * n + master
for key, want in [("parameters", width * n), ("gradients", grad_width * n),
                  ("optimizer_state", a.state_bytes_per_param * n),
                  ("master_parameters", master), ("model_states", states),
                  ("total", states + m["activations_peak"] + m["bf16_scratch"] + m["inputs"])]:
    print(f"{key}: {m[key]} formula {want}")
    if m[key] != want:
        fails.append(key)
if r["parameter_count"] != n:
    fails.append("parameter_count")
N = a.dp


def ring_bytes(elements, ranks):
    """Bytes rank 0 sends in a ring all-reduce: the chunks it forwards in
    the reduce-scatter and all-gather halves."""
    def chunk(i):
        return elements // ranks + (1 if i < elements % ranks else 0)
    return 4 * sum(chunk(-s % ranks) + chunk((1 - s) % ranks) for s in range(ranks - 1))


K = a.scalar_reductions
gradient_bytes = 2 * (N - 1) / N * grad_width * n
comm = r["communication_bytes_per_step"]
print(f"communication: {comm} formula {gradient_bytes} + at most {K} scalars")
if N > 1:
    sent = comm.get("all_reduce", {}).get("dp", -1)
    if (list(comm) != ["all_reduce"] or list(comm["all_reduce"]) != ["dp"]
            or not gradient_bytes <= sent <= gradient_bytes + K * 2 * ring_bytes(1, N)):
        fails.append("communication")
elif comm:
    fails.append("communication")
if r["ranks"] != N:
    fails.append("ranks")
if a.cluster and N > 1:
    c = json.load(open(a.cluster))
    link = c["inter_node"] if N > c["devices_per_node"] else c["intra_node"]
    count = r["collectives"][0]["count"]
    want = (count * 2 * (N - 1) * link["latency"]
            + (gradient_bytes + K * 2 * (N - 1) / N * 4) / link["bandwidth"])
    got = r["collectives"][0]["seconds"]
    print(f"all_reduce seconds ({count} collectives): {got} formula {want}")
    if abs(got - want) > 1e-9 * want:
        fails.append("all_reduce seconds")
if a.gpt:
    L, D, F, V, T, B = map(int, a.gpt.split(","))
    tokens = B * T
    layer = D * 3 * D + D * D + 2 * D * F           # matmul weights of a block
    matmul = L * layer + V * D                      # plus the tied output head
    # 2 flops per weight and token forward, 4 backward, and with full
    # recomputation 2 again for the blocks recomputed in the backward;
    # attention 4TD per token and layer forward, 10TD backward, 4TD
    # recomputed.
    want = tokens * (6 * matmul + L * 14 * T * D)
    if a.remat == "full":
        want += tokens * (2 * L * layer + L * 4 * T * D)
    got = r["flops_per_step"]
    print(f"flops: {got} matmul formula {want} ratio {got / want:.4f}")
    if not (1.0 <= got / want <= 1.06):
        fails.append("flops")
print("FAIL " + ", ".join(fails) if fails else "ok")
sys.exit(1 if fails else 0)
