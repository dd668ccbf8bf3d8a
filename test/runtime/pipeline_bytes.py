#!/usr/bin/env python3
"""Bytes a pipeline rank sends per step, counted below the runtime by the
PMPI wrapper, equal to the byte a formula from the example GPT's shapes
(batch b, context s, width h, vocabulary V, 12 h^2 + 13 h parameters per
layer, the embedding tied to the head):

  over pp: the activation (stage 0) or its gradient (stage 1) of each
    micro-batch, 4 (b / dp) s h in all; the ring all-reduce over the two
    stages of the tied embedding's gradient (4 V h), the loss and the
    clipping norm's scalar (4 each);
  over dp: the ring all-reduce over two ranks of the gradients of the
    rank's own stage's parameters only (4 bytes each, the tied embedding's
    on both stages), the loss, and the cross-entropy's labelled-token
    counts (scalars, once per micro-batch for each of them in the rank
    program that runs on the rank's stage: the backward's only on the
    last).

Stage 0 holds the token and position embeddings and its layers, stage 1
its layers, the final norm and the tied embedding; the layers each stage
runs are read from its parameters' names (w_qkv[a:b]). The report
(--report-json) predicts rank 0's bytes exactly too."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import MPIRUN, RUN_ENV, Checks  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--pmpi", required=True)
args = parser.parse_args()

B, S, H, V, LAYERS = 8, 64, 128, 256, 4
M = 2
STEPS = 2
PER_LAYER = 12 * H * H + 13 * H
work = tempfile.mkdtemp(prefix="loom-pipeline-bytes-")
check = Checks()


def stage_parameters(program):
    """Each stage's own parameters, from the shapes and its layers."""
    ranges = [tuple(map(int, m)) for m in re.findall(r'train.param "w_qkv\[(\d+):(\d+)\]"', program)]
    layers = [b - a for a, b in sorted(ranges)]
    assert sum(layers) == LAYERS and len(layers) == 2, ranges
    first = V * H + S * H + layers[0] * PER_LAYER
    last = layers[1] * PER_LAYER + 2 * H + V * H
    return [first, last], layers


def token_counts(program, axis, stage):
    """The cross-entropy's labelled-token counts reduced over `axis` in one
    step by the ranks of `stage`: scalar all-reduces inside the micro-batch
    loops, once per micro-batch; those of no stage on every rank, those of a
    stage (the loss gradient's, which only the last stage reads) on its
    ranks only."""
    def runs_here(line):
        m = re.search(r"dist\.stage = (\d+)", line)
        return m is None or int(m.group(1)) == stage
    return M * sum(1 for line in program.splitlines()
                   if line.startswith("      ") and runs_here(line) and
                   re.search(r'dist\.all_reduce_start .* over \["%s"\] .*: tensor<f32>$' % axis, line))


for mesh, ranks, dp in (("pp=2", 2, 1), ("pp=2,dp=2", 4, 2)):
    name = mesh.replace("=", "").replace(",", "")
    exe = os.path.join(work, name)
    phases = os.path.join(work, name + "-phases")
    report = os.path.join(work, name + ".json")
    r = subprocess.run([args.loomc, args.model, "--mesh", mesh, f"--micro-batches={M}",
                        "-o", exe, "--dump-phases", phases, "--report-json", report],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc --mesh {mesh} failed:\n{r.stderr}")
    with open(os.path.join(phases, "2-rank-program.mlir")) as f:
        program = f.read()
    own, layers = stage_parameters(program)
    metrics = os.path.join(work, name + ".%r.jsonl")
    r = subprocess.run(MPIRUN + ["-n", str(ranks), "-x", "LD_PRELOAD=" + args.pmpi, exe,
                                 "--steps", str(STEPS), "--metrics", metrics, "--timeout", "120"],
                       capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    pmpi = {int(a): int(b) for a, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}
    pp_bytes = 4 * (B // dp) * S * H + 4 * (V * H + 2)
    for rank in range(ranks):
        stage = rank // dp
        want = pp_bytes
        if dp > 1:
            want += 4 * own[stage] + 4 * (1 + token_counts(program, "dp", stage))
        got = pmpi.get(rank, -1)
        check(f"{mesh} M={M} (layers {layers[0]} + {layers[1]}): rank {rank} (stage {stage}) bytes per step",
              got == want * STEPS, f"PMPI {got // STEPS if got >= 0 else got}, formula {want}")
    with open(report) as f:
        predicted = sum(b for by_axis in json.load(f)["communication_bytes_per_step"].values()
                        for b in by_axis.values())
    check(f"{mesh}: the report's bytes for rank 0", predicted * STEPS == pmpi.get(0),
          f"{predicted} per step")

check.finish()
