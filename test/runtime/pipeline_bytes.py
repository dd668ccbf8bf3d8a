#!/usr/bin/env python3
"""Bytes a pipeline rank sends per step, counted below the runtime by the
PMPI wrapper, equal to the byte a formula from the example GPT's shapes
(batch b, context s, width h, vocabulary V, 12 h^2 + 13 h parameters per
layer, the embedding tied to the head):

  over pp: the activation (all stages but the last) and its gradient (all
    but the first) of each micro-batch, 4 (b / dp) s h each in all; the
    tied embedding's gradient between the first and the last stage (4 V h:
    a two-rank ring at pp=2, an exchange between those two ranks at pp=4,
    the middle stages neither hold nor send it); the loss and the clipping
    norm's scalar all-reduced over the pipeline's ring;
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
from loomtest import MPIRUN, RUN_ENV, Checks, ring_allreduce, token_counts  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--pmpi", required=True)
args = parser.parse_args()

B, S, H, V, LAYERS = 8, 64, 128, 256, 4
STEPS = 2
PER_LAYER = 12 * H * H + 13 * H
work = tempfile.mkdtemp(prefix="loom-pipeline-bytes-")
check = Checks()


def stage_parameters(program, pp):
    """Each stage's own parameters, from the shapes and its layers: the
    token and position embeddings on the first, the final norm on the
    last, the tied embedding on the first and the last."""
    ranges = [tuple(map(int, m)) for m in re.findall(r'train.param "w_qkv\[(\d+):(\d+)\]"', program)]
    layers = [b - a for a, b in sorted(ranges)]
    assert sum(layers) == LAYERS and len(layers) == pp, ranges
    own = [n * PER_LAYER for n in layers]
    own[0] += V * H + S * H
    own[-1] += 2 * H + V * H
    return own, layers


for mesh, ranks, pp, dp, M in (("pp=2", 2, 2, 1, 2), ("pp=2,dp=2", 4, 2, 2, 2), ("pp=4", 4, 4, 1, 4)):
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
    own, layers = stage_parameters(program, pp)
    metrics = os.path.join(work, name + ".%r.jsonl")
    r = subprocess.run(MPIRUN + ["-n", str(ranks), "-x", "LD_PRELOAD=" + args.pmpi, exe,
                                 "--steps", str(STEPS), "--metrics", metrics, "--timeout", "120"],
                       capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    pmpi = {int(a): int(b) for a, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}
    for rank in range(ranks):
        stage = rank // dp
        # Over pp: the activations forward (all but the last stage), their
        # gradients back (all but the first), the tied embedding's
        # gradient between the first and the last stage (an exchange: the
        # bytes of a two-rank ring), the loss and the clipping norm.
        want = 4 * (B // dp) * S * H * ((stage < pp - 1) + (stage > 0))
        want += 4 * V * H * (stage in (0, pp - 1))
        want += 2 * ring_allreduce(1, pp, stage)
        if dp > 1:
            want += 4 * own[stage] + 4 * (1 + token_counts(program, "dp", stage, M))
        got = pmpi.get(rank, -1)
        check(f"{mesh} M={M} (layers {' + '.join(map(str, layers))}): rank {rank} (stage {stage}) bytes per step",
              got == want * STEPS, f"PMPI {got // STEPS if got >= 0 else got}, formula {want}")
    with open(report) as f:
        predicted = sum(b for by_axis in json.load(f)["communication_bytes_per_step"].values()
                        for b in by_axis.values())
    check(f"{mesh}: the report's bytes for rank 0", predicted * STEPS == pmpi.get(0),
          f"{predicted} per step")

check.finish()
