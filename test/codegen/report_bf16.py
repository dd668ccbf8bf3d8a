#!/usr/bin/env python3
"""The bf16 report read from the rank program, against formulas written
here from the model's parameter shapes.

--zero-reports R0 R1 R2 R3 (one data axis of N ranks, --mesh dp=N): model
states per rank of P = 2 (bf16 copies), G = 4 (fp32 gradients), K = 12
(fp32 masters and AdamW's two moments) bytes per parameter, split by ZeRO
as the ZeRO paper splits them: stage 1 K / N, stage 2 (G + K) / N, stage 3
(P + G + K) / N, to the byte (the preset's dimensions divide by N).
--grad-bytes 2 (--grad-precision=bf16): G = 2, the ZeRO paper's 16 bytes.

--pipeline-report R --layout pp,dp,tp: each pipeline rank's own parameters
from the shapes (its layers' share of the stacked weights, tensor-split as
Megatron-LM splits them: the QKV and first MLP weights and biases by
columns, the attention output and second MLP weights by rows, norms and
row-parallel biases whole; the first stage the positions, the last the
final norm; and every rank the tied embedding's vocab-parallel block,
which the layout holds on every pipeline rank today, not on the first and
last alone) and its model states: 2 + 4 + 12 / dp bytes per own parameter
(ZeRO-1 over dp), but 2 + 4 + 12 for the column-parallel biases, whose one
dimension tp splits already (ZeRO splits a dimension no other axis does,
and keeps them whole).

--no-remat-reports R1 R2 --layout pp,dp,tp: the same layout without
recomputation at the batch and at twice it (one and two sequences per
micro-batch): every pipeline rank's total (model states, activations, the
bf16 scratch and the inputs) fits 80 GB, and its activations double with
the micro-batch but for at most one layer's bf16 weights (12 h^2 / tp
elements at 2 bytes): no rank holds another stage's bf16 weight copies,
which are that stage's micro-batch loops' invariants (they were 40 GB of
rank 0's 69 GB of activations)."""
import argparse
import json
import math
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("--model", required=True)
p.add_argument("--zero-reports", nargs=4)
p.add_argument("--dp", type=int)
p.add_argument("--grad-bytes", type=int, default=4)
p.add_argument("--pipeline-report")
p.add_argument("--layout", help="pp,dp,tp")
p.add_argument("--no-remat-reports", nargs=2)
a = p.parse_args()

shapes = {name: [int(d) for d in dims.split("x")] for name, dims in
          re.findall(r'train.param "(\w+)" [^\n]*: tensor<([\dx]+)xf32>', open(a.model).read())}
n = sum(math.prod(s) for s in shapes.values())
fails = 0


def check(label, ok, detail):
    global fails
    print(f"{label}: {detail} {'ok' if ok else 'FAIL'}")
    fails += not ok


if a.zero_reports:
    N = a.dp
    for stage, path in enumerate(a.zero_reports):
        m = json.load(open(path))["memory_per_rank_bytes"]
        want = {"parameters": 2 * n // (N if stage >= 3 else 1),
                "gradients": a.grad_bytes * n // (N if stage >= 2 else 1),
                "master_parameters": 4 * n // (N if stage >= 1 else 1),
                "optimizer_state": 8 * n // (N if stage >= 1 else 1)}
        got = {k: m[k] for k in want}
        total = sum(want.values())
        grads = "fp32" if a.grad_bytes == 4 else "bf16"
        check(f"ZeRO-{stage} over dp={N}, {grads} gradients: model states", got == want and m["model_states"] == total,
              f"{m['model_states'] / 1e9:.2f} GB, formula {total / 1e9:.2f} GB "
              f"({total / n:.4g} bytes per parameter)")

if a.pipeline_report:
    pp, dp, tp = map(int, a.layout.split(","))
    layers = shapes["w_qkv"][0]
    per_stage = layers // pp
    column, row = ("w_qkv", "b_qkv", "w_fc", "b_fc"), ("w_o", "w_proj")
    layer = whole = 0
    for name, shape in shapes.items():
        if shape[0] != layers or len(shape) < 2:
            continue
        size = math.prod(shape[1:])
        layer += size // tp if name in column + row else size
        if name in ("b_qkv", "b_fc"):
            whole += size // tp
    vocab, d = shapes["wte"]
    embedding = -(-vocab // tp) * d
    own = [per_stage * layer + embedding for _ in range(pp)]
    own[0] += math.prod(shapes["wpe"])
    own[-1] += math.prod(shapes["lnf_g"]) + math.prod(shapes["lnf_b"])
    ranks = json.load(open(a.pipeline_report))["memory_per_rank_bytes"]["per_pipeline_rank"]
    got = [r["parameter_elements"] for r in ranks]
    check("own parameters per pipeline rank from the shapes", got == own,
          f"{got[0]}, {got[1]} ... {got[-1]}, formula {own[0]}, {own[1]} ... {own[-1]}")
    # Exact in integers: 7.5 bytes of a split parameter is 15/2, of a whole
    # one 18.
    want = [(e - per_stage * whole) * (2 + 4) + (e - per_stage * whole) * 12 // dp +
            per_stage * whole * 18 for e in own]
    states = [r["model_states"] for r in ranks]
    check(f"model states per pipeline rank = (2 + 4 + 12/{dp}) bytes per own parameter",
          states == want, f"{sorted({round(s / e, 4) for s, e in zip(states, own)})} "
          f"bytes per own parameter ({per_stage * whole} column-parallel bias elements whole)")

if a.no_remat_reports:
    pp, dp, tp = map(int, a.layout.split(","))
    h = shapes["w_qkv"][1]
    layer_copy = 2 * 12 * h * h // tp
    one, two = (json.load(open(path))["memory_per_rank_bytes"] for path in a.no_remat_reports)
    extra = one["bf16_scratch"] + one["inputs"]
    totals = [r["model_states"] + r["activations_peak"] + extra
              for r in one["per_pipeline_rank"]]
    check("--remat=none: every pipeline rank's total fits 80 GB", max(totals) < 80e9,
          f"{min(totals) / 1e9:.2f} to {max(totals) / 1e9:.2f} GB")
    fixed = [abs(b["activations_peak"] - 2 * r["activations_peak"])
             for r, b in zip(one["per_pipeline_rank"], two["per_pipeline_rank"])]
    check("--remat=none: activations double with the micro-batch but for one layer's "
          "bf16 weights at most", max(fixed) <= layer_copy,
          f"largest batch-independent part {max(fixed) / 1e9:.3f} GB, "
          f"one layer's bf16 weights {layer_copy / 1e9:.3f} GB")

print(f"{fails} failed")
sys.exit(1 if fails else 0)
