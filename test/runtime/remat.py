#!/usr/bin/env python3
"""Rematerialization policies against each other: a GPT with dropout (loom-gen
--preset parity) compiled with --remat=none (the forward keeps what the
backward reads), --remat=selective (it keeps the matmuls' and attention's
outputs; the backward recomputes the rest of each layer from them) and
--remat=full (each layer recomputed from its input) gives the same losses
and final parameters bit for bit (recomputation runs the same kernels on
the same values, dropout masks included) on one rank, with micro-batches,
on dp=2 x tp=2, and on pp=2 with 4 micro-batches under GPipe, 1F1B,
interleaved 1F1B (2 virtual stages) and ZB-H1. And the report's FLOPs per
step: with `none` the matmul FLOPs equal an independent count from the
shapes (2 forward and 4 backward FLOPs per matmul weight and token:
4 h^2 + 2 h F per layer and the tied head's V h; embedding lookups, biases
and norms excluded) and the attention FLOPs 4 b s^2 h per layer forward
and 2.5 times that backward (the total within 2% of those on a model of
width 128); `selective` adds no matmul or attention FLOPs
(only the recomputed pointwise ops and norms, the report's "other"), and
`full` adds one forward of the layers' matmuls; the report's recomputation
FLOPs and collective bytes (under tp, full re-issues the layers'
all-reduces) are exactly what each policy adds to `none`. The activation
peak falls from none to selective to full."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import Checks, Program  # noqa: E402

STEPS = 3
SEED = 5

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-remat-")
check = Checks()

model = os.path.join(work, "gpt.mlir")
subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--batch", "8",
                "--heads", "4", "-o", model], check=True)
text = open(model).read()
# The shapes, read from the model: layers, width, feed-forward width,
# vocabulary, context, batch.
L, H = map(int, re.search(r'train.param "w_qkv" [^:]*: tensor<(\d+)x(\d+)x', text).groups())
F = int(re.search(r'train.param "w_fc" [^:]*: tensor<\d+x\d+x(\d+)x', text).group(1))
V = int(re.search(r'train.param "wte" [^:]*: tensor<(\d+)x', text).group(1))
B, S = map(int, re.search(r'train.input "tokens" : tensor<(\d+)x(\d+)xi32>', text).groups())


def build(flags):
    """The model compiled with `flags`, and loomc's report of it."""
    report = os.path.join(work, f"report-{len(os.listdir(work))}.json")
    program = Program(args.loomc, text, "gpt", [*flags, "--report-json", report])
    return program, json.load(open(report))


tokens = B * S
layer_weights = 4 * H * H + 2 * H * F  # w_qkv (3 h^2), w_o (h^2), w_fc and w_proj (h F each)
matmul_none = 6 * (L * layer_weights + V * H) * tokens
attention_forward = L * 4 * B * S * S * H
for label, flags, ranks in (("one rank", [], 1),
                            ("M=2", ["--micro-batches=2"], 1),
                            ("dp=2 x tp=2", ["--mesh", "dp=2,tp=2"], 4),
                            ("pp=2 M=4 GPipe", ["--mesh", "pp=2", "--micro-batches=4",
                                                "--schedule=gpipe"], 2),
                            ("pp=2 M=4 1F1B", ["--mesh", "pp=2", "--micro-batches=4"], 2),
                            ("pp=2 M=4 interleaved", ["--mesh", "pp=2", "--micro-batches=4",
                                                      "--schedule=interleaved",
                                                      "--virtual-stages=2"], 2),
                            ("pp=2 M=4 ZB-H1", ["--mesh", "pp=2", "--micro-batches=4",
                                                "--schedule=zb"], 2)):
    runs, reports = {}, {}
    # And one policy per layer: the layer loop cut into runs of layers,
    # their parameters into parts (exported whole).
    mixed = ",".join(["full", "selective", "none"][i % 3] for i in range(L))
    for policy in ("none", "selective", "full", mixed):
        program, reports[policy] = build(flags + [f"--remat={policy}"])
        rows, params = program.run(steps=STEPS, extra=["--seed", str(SEED)], ranks=ranks)
        runs[policy] = [row["loss"] for row in rows], params
    loss_n, params_n = runs["none"]
    for policy in ("selective", "full", mixed):
        loss_p, params_p = runs[policy]
        check(f"{label}: losses, none = {policy}", loss_n == loss_p,
              f"{loss_n[-1]!r} and {loss_p[-1]!r} after {STEPS} steps")
        same = sorted(params_n) == sorted(params_p) and all(
            np.array_equal(params_n[k], params_p[k]) for k in params_n)
        check(f"{label}: final parameters, none = {policy}", same, f"{len(params_n)} tensors")
    if ranks == 1 or "dp" in label:
        peaks = [reports[p]["memory_per_rank_bytes"]["activations_peak"]
                 for p in ("none", "selective", "full")]
        check(f"{label}: activations fall from none to selective to full",
              peaks[0] > peaks[1] > peaks[2], f"{peaks} bytes")
        for kind in ("matmul", "attention"):
            got = reports["selective"][f"{kind}_flops_per_step"]
            want = reports["none"][f"{kind}_flops_per_step"]
            check(f"{label}: selective adds no {kind} FLOPs", got == want, f"{got} = {want}")
        added = reports["selective"]["flops_per_step"] - reports["none"]["flops_per_step"]
        full_added = reports["full"]["flops_per_step"] - reports["none"]["flops_per_step"]
        check(f"{label}: selective adds other FLOPs only, fewer than full adds",
              0 < added < full_added, f"{added} (full {full_added})")
        # The report's recomputation row: what each policy adds to none.
        for policy, more in (("none", 0), ("selective", added), ("full", full_added)):
            got = reports[policy]["recompute_flops_per_step"]
            check(f"{label}: the report's recomputation FLOPs for {policy}", got == more,
                  f"{got} = {more}")
        got = reports["full"]["recompute_matmul_flops_per_step"]
        check(f"{label}: full recomputes one forward of the layers' matmuls",
              got == 2 * L * layer_weights * tokens, f"{got}")
        # The recomputation's collectives: what each policy sends beyond none.
        def sent(report):
            return sum(v for axes in report["communication_bytes_per_step"].values()
                       for v in axes.values())
        for policy in ("none", "selective", "full"):
            got = reports[policy]["recompute_communication_bytes_per_step"]
            more = sent(reports[policy]) - sent(reports["none"])
            check(f"{label}: the report's recomputed collective bytes for {policy}",
                  got == more and (policy != "full" or "tp" not in label or more > 0),
                  f"{got:.0f} = {more:.0f}")
        got = reports["none"]["matmul_flops_per_step"]
        check(f"{label}: none's matmul FLOPs = 6 x (L (4 h^2 + 2 h F) + V h) x tokens",
              got == matmul_none, f"{got} = {matmul_none}")
        got = reports["none"]["attention_flops_per_step"]
        check(f"{label}: none's attention FLOPs = 3.5 x 4 b s^2 h x layers",
              got == 3.5 * attention_forward, f"{got} = {3.5 * attention_forward:.0f}")
        added = reports["full"]["matmul_flops_per_step"] - matmul_none
        layers_forward = 2 * L * layer_weights * tokens
        check(f"{label}: full adds one forward of the layers' matmuls", added == layers_forward,
              f"{added} = {layers_forward}")

# The total against the independent matmul and attention count (full adds
# one forward of each), the elementwise ops within 2%: on the example GPT's
# shapes (width 128; the parity model's width 16 makes its norms and
# pointwise ops a tenth of its FLOPs).
shape = dict(layers=4, d_model=128, heads=4, ffn=512, vocab=256, context=64, batch=8)
wide = os.path.join(work, "wide.mlir")
subprocess.run([sys.executable, args.loom_gen, "-o", wide] +
               [a for k, v in shape.items() for a in (f"--{k.replace('_', '-')}", str(v))],
               check=True)
tokens = shape["batch"] * shape["context"]
h, F, V, L4, S4 = shape["d_model"], shape["ffn"], shape["vocab"], shape["layers"], shape["context"]
weights = 4 * h * h + 2 * h * F
for policy, again in (("none", 0), ("selective", 0), ("full", 1)):
    out = os.path.join(work, f"wide-{policy}.json")
    subprocess.run([args.loomc, wide, f"--remat={policy}", "--report-json", out], check=True)
    r = json.load(open(out))
    count = (6 + 2 * again) * L4 * weights * tokens + 6 * V * h * tokens + \
        (3.5 + again) * L4 * 4 * shape["batch"] * S4 * S4 * h
    got = r["flops_per_step"]
    check(f"width 128: {policy}'s total FLOPs within 2% of the matmul and attention count",
          count <= got <= 1.02 * count, f"{got} vs {count:.0f} ({got / count - 1:+.2%})")

check.finish()
