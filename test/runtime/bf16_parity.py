#!/usr/bin/env python3
"""bf16 data, tensor and pipeline parallelism against bf16 on one rank (the
same global batch, dropout and clipping on): dp=2, tp=2, dp=2 x tp=2, tp=2
with sequence parallelism (its reduce-scatters in bf16), dp=4 with ZeRO-1,
2 and 3, every step's loss within 1e-3 relative (bf16 rounds per
rank's share of the work where the one rank rounds the whole: not the
fp32 tolerance); pp=2 under 1F1B and ZB-H1 within 1e-6 of one rank with
their 2 micro-batches (a stage runs the one rank's kernels on the same
values: equal, as in fp32; a gradient lost under 1F1B moved it by 9e-4).
With --grad-precision=bf16 (gradients kept, accumulated and reduced in
bf16): dp=2, dp=4 ZeRO-1 and ZeRO-3 and pp=2 1F1B against bf16 gradients
on one rank, within 1e-3, their bytes half the f32 gradients'.

Bytes each rank sends per step, counted by the PMPI wrapper below the
runtime, equal formulas from the shapes:
- dp=2: one ring all-reduce of the 4-byte (f32) gradient of every
  parameter, plus the rank program's scalar all-reduces (the labelled-token
  counts); bf16 gradients would send half;
- tp=2 on examples/gpt.mlir (b 8, s 64, h 128, L 4, V 256): Megatron-LM's
  four all-reduces of a b s h activation per layer and the vocab-parallel
  embedding's and head's two, all in bf16 (2 bytes), and the
  cross-entropy's statistics (maximum; sum and label logit) and the
  clipping norm in f32 (tp_bytes.py's formula, the activations at half);
- dp=4 ZeRO-1: the reduce-scatter of every f32 gradient and one all-gather
  of every bf16 copy (the masters are blocks: 2 bytes a parameter
  gathered, DeepSpeed's bf16 optimizer's, not the master's 4), and three
  scalars (the loss, its token count, the norm);
- dp=4 ZeRO-3: the reduce-scatter of every gradient where it is made,
  widened to f32 first (the tied embedding's two summed, then scattered
  once), and an all-gather of a bf16 copy for each op that reads one
  (zero.py's count).
Every ZeRO stage reduce-scatters f32 gradients (what the layout checks
say): bf16 gradients would send half.
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

from loomtest import Checks, half, launch, ring_allreduce

STEPS = 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--loom-gen", required=True)
    ap.add_argument("--pmpi", required=True)
    ap.add_argument("--gpt", required=True, help="examples/gpt.mlir")
    args = ap.parse_args()
    check = Checks()
    work = tempfile.mkdtemp(prefix="loom-bf16-parity-")
    model = os.path.join(work, "parity.mlir")
    subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--batch", "8",
                    "--heads", "4", "--dropout", "0.1", "--clip", "0.5", "-o", model],
                   check=True)
    with open(model) as f:
        params = int(re.search(r"([\d,]+) parameters", f.read()).group(1).replace(",", ""))

    def run(name, flags, ranks, pmpi=False, source=None):
        exe = os.path.join(work, name)
        source = source or (args.gpt if name.startswith("gpt") else model)
        phases = os.path.join(work, name + "-phases")
        subprocess.run([args.loomc, source, "-o", exe, "--precision=bf16", "--dump-phases",
                        phases, *flags], check=True)
        metrics = os.path.join(work, name + ".%r.jsonl")
        cmd = [exe, "--steps", str(STEPS), "--metrics", metrics, "--log-every", "0",
               "--timeout", "120"]
        rows, sent = launch(name, cmd, ranks, args.pmpi if pmpi else None)
        losses = [row["loss"] for row in rows]
        rank_program = os.path.join(phases, "2-rank-program.mlir")
        text = open(rank_program).read() if os.path.exists(rank_program) else ""
        return losses, sent, text

    # The whole parameters' shapes, and what ZeRO-3 gathers: every
    # parameter once in the forward and the tied embedding twice (the
    # lookup and the head); in the backward the linear layers' weights,
    # the norms' gains and the tied embedding (zero.py's count).
    with open(model) as f:
        shapes = {name: [int(d) for d in dims.split("x")] for name, dims in
                  re.findall(r'train.param "(\w+)" [^\n]*: tensor<([\dx]+)xf32>', f.read())}
    size = lambda name: math.prod(shapes[name])  # noqa: E731
    forward = params + size("wte")
    backward = sum(size(w) for w in ("w_qkv", "w_o", "w_fc", "w_proj", "ln1_g", "ln2_g",
                                     "lnf_g", "wte"))
    ref, _, _ = run("one", [], 1)
    # Pipelines run micro-batches: against one rank with the same ones.
    ref_m2, _, _ = run("one-m2", ["--micro-batches=2"], 1)
    # bf16 gradients against bf16 gradients on one rank.
    BF16_GRADS = ["--grad-precision=bf16"]
    ref_g, _, _ = run("one-g", BF16_GRADS, 1)
    ref_g_m2, _, _ = run("one-g-m2", ["--micro-batches=2", *BF16_GRADS], 1)
    # AdamW from bf16 gradients (its update reads them in place) against
    # the f32 gradients' update, one rank.
    worst = max(abs(a - b) / abs(b) for a, b in zip(ref_g, ref))
    check("AdamW: bf16 gradients against f32 gradients on one rank",
          len(ref_g) == STEPS and worst <= 1e-2, f"worst relative difference {worst:.2e}")
    for label, flags, ranks in (("dp=2", ["--mesh", "dp=2"], 2),
                                ("tp=2", ["--mesh", "tp=2"], 2),
                                ("dp=2 x tp=2", ["--mesh", "dp=2,tp=2"], 4),
                                ("tp=2 sequence-parallel", ["--mesh", "tp=2",
                                                            "--sequence-parallel"], 2),
                                ("dp=4 ZeRO-1", ["--mesh", "dp=4", "--zero=1"], 4),
                                ("dp=4 ZeRO-2", ["--mesh", "dp=4", "--zero=2"], 4),
                                ("dp=4 ZeRO-3", ["--mesh", "dp=4", "--zero=3"], 4),
                                ("pp=2 M=2 1F1B", ["--mesh", "pp=2", "--micro-batches=2"], 2),
                                ("pp=2 M=2 ZB-H1", ["--mesh", "pp=2", "--micro-batches=2",
                                                    "--schedule=zb"], 2),
                                ("dp=2 bf16 gradients", ["--mesh", "dp=2", *BF16_GRADS], 2),
                                ("dp=4 ZeRO-1 bf16 gradients", ["--mesh", "dp=4", "--zero=1",
                                                                *BF16_GRADS], 4),
                                ("dp=4 ZeRO-3 bf16 gradients", ["--mesh", "dp=4", "--zero=3",
                                                                *BF16_GRADS], 4),
                                ("pp=2 M=2 1F1B bf16 gradients", ["--mesh", "pp=2",
                                                                  "--micro-batches=2",
                                                                  *BF16_GRADS], 2)):
        bf16_grads = label.endswith("bf16 gradients")
        layout = label.removesuffix(" bf16 gradients")
        if label.startswith("pp"):
            reference = ref_g_m2 if bf16_grads else ref_m2
        else:
            reference = ref_g if bf16_grads else ref
        losses, sent, program = run(label.replace(" ", "-").replace("=", ""), flags, ranks,
                                    pmpi=layout in ("dp=2", "dp=4 ZeRO-1", "dp=4 ZeRO-3"))
        worst = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
        # A pipeline with bf16 gradients sums the tied embedding's two in
        # another order (the head's and the lookup's accumulators on their
        # stages, added after the micro-batches; one rank adds them in each
        # micro-batch): each bf16 sum rounds, so 1e-3 as elsewhere.
        bound = 1e-6 if label.startswith("pp") and not bf16_grads else 1e-3
        check(f"{label}: losses against bf16 on one rank", len(losses) == STEPS and worst <= bound,
              f"{STEPS} steps, worst relative difference {worst:.2e}")
        if label == "tp=2 sequence-parallel":
            scatters = re.findall(r"dist\.reduce_scatter.* : (tensor<[^>]*>)", program)
            check("tp=2 sequence-parallel: the activations are reduce-scattered in bf16",
                  scatters and all(t.endswith("xbf16>") for t in scatters),
                  f"{len(scatters)} reduce-scatters: {sorted(set(scatters))}")
        # The gradients' element type and bytes: f32 by default, bf16 (2
        # bytes, half the f32 formula) with --grad-precision=bf16.
        grads = "xbf16>" if bf16_grads else "xf32>"
        narrow = 2 if bf16_grads else 1
        if layout.startswith("dp=4 ZeRO"):
            # The masters are blocks from stage 1: the gradients are
            # reduce-scattered, the bf16 copies gathered (DeepSpeed's
            # bf16 optimizer: 2 bytes a parameter, not the master's 4).
            masters = re.findall(r'train.param "(\w+)".*: tensor<([\dx]+)xf32>', program)
            blocks = sum(1 for name, dims in masters
                         if dims != "x".join(map(str, shapes[name])))
            gathers = re.findall(r"dist\.all_gather(?:_start)? .* : (tensor<[^>]*>)", program)
            scatters = re.findall(r"dist\.reduce_scatter .* : (tensor<[^>]*>)", program)
            # Stage 1 reduce-scatters the gradients once; stages 2 and 3
            # where each is made (f32 ones widened first).
            check(f"{label}: masters stored as blocks, copies gathered in bf16, "
                  f"gradients reduce-scattered in {grads[1:-1]}",
                  blocks == len(masters) and gathers and scatters and
                  all(t.endswith("xbf16>") for t in gathers) and
                  all(t.endswith(grads) for t in scatters),
                  f"{blocks} of {len(masters)} masters split; gathers "
                  f"{sorted(set(gathers))}; reduce-scatters {sorted(set(scatters))}")
        if layout in ("dp=4 ZeRO-1", "dp=4 ZeRO-3"):
            # Per step: the reduce-scatter of every gradient, the norm's
            # and the loss's scalars, and the gathers of the bf16 copies:
            # stage 1 each copy once; stage 3 a copy for each op that reads
            # it (forward, and the backward's products and norm gains).
            scalar = ring_allreduce(1, 4)
            gathered = params if layout.endswith("1") else forward + backward
            # Stage 3 scatters each gradient where it is made, in f32: the
            # tied embedding's two (the lookup's and the head's) summed
            # first, so once, as at stage 1.
            scattered = half(params, 4) // narrow
            want = STEPS * (scattered + half(gathered, 4) // 2 + 3 * scalar)
            check(f"{label}: PMPI bytes of rank 0 equal the formula ({grads[1:-1]} "
                  "gradients, bf16 copies)", sent.get(0) == want, f"{sent.get(0)} vs {want}")
        if layout == "dp=2":
            buckets = re.findall(r"dist\.all_reduce_start (.*) over \[\"dp\"\] : (.*)$", program, re.M)
            grads_reduced = [t for _, types in buckets for t in types.split(", ")
                             if t != "tensor<f32>"]
            scalars = sum(1 for _, types in buckets if types == "tensor<f32>")
            typed = all(t.endswith(grads) for t in grads_reduced)
            check(f"{label}: the gradients are reduced in {grads[1:-1]}", grads_reduced and typed,
                  f"{len(grads_reduced)} gradients, {scalars} scalar all-reduces")
            want = STEPS * (ring_allreduce(params, 2) // narrow +
                            scalars * ring_allreduce(1, 2))
            check(f"{label}: PMPI bytes of rank 0 equal the {grads[1:-1]}-gradient formula",
                  sent.get(0) == want, f"{sent.get(0)} vs {want}")

    # The optimizer's bf16-gradient steps (the norm's sum of squares, the
    # scaling by the clip factor and the update, which read bf16 in place)
    # against the f32 gradients' kernels, on one rank: SGD with a clip norm
    # that scales every step (AdamW would hide a wrong norm), every loss
    # within 1e-2 relative, and clipping visible (without it the losses
    # leave the clipped run's by more than that).
    def sgd_model(clip):
        path = os.path.join(work, f"sgd-clip{clip}.mlir")
        subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--batch", "8",
                        "--heads", "4", "--optimizer", "sgd", "--momentum", "0",
                        "--weight-decay", "0", "--lr", "0.5", "--warmup", "0",
                        "--decay", "constant", "--clip", str(clip), "-o", path], check=True)
        return path
    clipped, unclipped = sgd_model(0.05), sgd_model(0)
    f32_grads, _, _ = run("sgd-f32-grads", [], 1, source=clipped)
    bf16_grads, _, _ = run("sgd-bf16-grads", BF16_GRADS, 1, source=clipped)
    free, _, _ = run("sgd-bf16-grads-unclipped", BF16_GRADS, 1, source=unclipped)
    free_f32, _, _ = run("sgd-f32-grads-unclipped", [], 1, source=unclipped)
    worst = max(abs(a - b) / abs(b) for a, b in zip(bf16_grads, f32_grads))
    effect = max(abs(a - b) / abs(b) for a, b in zip(free, bf16_grads))
    check("SGD, clipped: bf16 gradients against f32 gradients on one rank",
          len(bf16_grads) == STEPS and worst <= 1e-2 and effect > 1e-2,
          f"worst relative difference {worst:.2e}; unclipped leaves it by {effect:.2e}")
    # Unclipped, the step's size is the gradient's own (clipping every step
    # would hide a gradient read at the wrong scale).
    worst = max(abs(a - b) / abs(b) for a, b in zip(free, free_f32))
    check("SGD, unclipped: bf16 gradients against f32 gradients on one rank",
          len(free) == STEPS and worst <= 1e-2, f"worst relative difference {worst:.2e}")

    # tp=2's bytes on the example GPT.
    B, S, H, L = 8, 64, 128, 4
    _, sent, _ = run("gpt-tp2", ["--mesh", "tp=2"], 2, pmpi=True)
    bf16 = lambda e: ring_allreduce(e, 2) // 2
    want = 4 * L * bf16(B * S * H) + 2 * bf16(B * S * H)
    want += ring_allreduce(B * S, 2) + ring_allreduce(2 * B * S, 2) + ring_allreduce(1, 2)
    check("tp=2: PMPI bytes of rank 0 equal Megatron-LM's, activations in bf16",
          sent.get(0) == STEPS * want, f"{sent.get(0)} vs {STEPS * want}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
