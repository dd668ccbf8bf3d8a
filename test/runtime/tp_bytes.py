#!/usr/bin/env python3
"""Bytes a rank sends per step under tensor and data parallelism, counted
below the runtime by the PMPI wrapper, equal to the byte a formula from the
example GPT's shapes (batch b, context s, width h, L layers, vocabulary V,
the embedding tied to the head, AdamW with global-norm clipping,
--remat=none) that lists every collective:

  over tp (t ranks): Megatron-LM's two all-reduces of an activation
    (b/dp) s h per layer forward (after the attention's and the MLP's
    row-parallel projections) and two backward (before the layer norms
    that feed the column-parallel QKV and MLP projections: their input
    gradients), and the clipping norm's scalar (the sum of squares of the
    rank's shards). Nothing else: QKV is split by heads (each rank
    projects, attends and back-propagates only its heads; no gather of
    dq, dk, dv), and the vocabulary is whole on every rank, so the
    embedding, the head and the loss send nothing.
  over dp (n ranks): one ring all-reduce of the gradients of the rank's
    own tp-local parameters (a column- or row-parallel weight's 1/t
    block, the replicated norms, row-parallel biases and embeddings
    whole), and three scalars: the loss and the cross-entropy's
    labelled-token count, which the loss and its gradient each reduce.

At pp=2 x dp=2 x tp=2 (2 micro-batches) a stage's tp group runs its
layers' all-reduces per micro-batch, the pipeline sends activations whole
on every tp rank, the clipping norm's scalar is reduced over pp and tp
together, and dp reduces the stage's own tp-local gradients.

The host runtime's ring splits a tensor of e elements into n near-equal
chunks and sends n - 1 of them in its reduce-scatter and n - 1 in its
all-gather; which chunks depends on the rank (a scalar is one rank's
chunk). The rank programs hold each QKV part (w_qkv[:, :, 0:h] ...) as a
block of h/t columns. The report (--report-json) predicts rank 0's bytes
exactly too."""

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
STEPS = 2
work = tempfile.mkdtemp(prefix="loom-tp-bytes-")
check = Checks()


def ring_allreduce(elements, n, rank):
    """Bytes rank `rank` sends in the host runtime's ring all-reduce of
    `elements` f32 values over n ranks: in each of n-1 reduce-scatter and
    n-1 all-gather steps one chunk (n near-equal chunks)."""
    if n == 1:
        return 0

    def chunk(i):
        base, extra = divmod(elements, n)
        return base + (i < extra)
    rs = sum(chunk((rank - s) % n) for s in range(n - 1))
    ag = sum(chunk((rank + 1 - s) % n) for s in range(n - 1))
    return 4 * (rs + ag)


def tp_local_parameters(t):
    """The parameters a rank of a tp group of t holds: Megatron's column-
    (w_qkv, b_qkv, w_fc, b_fc) and row-parallel (w_o, w_proj) blocks 1/t,
    the rest whole."""
    split = LAYERS * (3 * H * H + 3 * H + 4 * H * H + 4 * H + H * H + 4 * H * H)
    whole = LAYERS * (6 * H) + V * H + S * H + 2 * H
    assert split % t == 0
    return split // t + whole


def formula(dp, tp, rank_dp, rank_tp):
    want = 4 * LAYERS * ring_allreduce((B // dp) * S * H, tp, rank_tp)
    want += ring_allreduce(1, tp, rank_tp)
    if dp > 1:
        # Buckets of whole layers' gradients: every bucket's element count
        # divides by dp here, so the chunks do not depend on the rank.
        want += 4 * tp_local_parameters(tp) * 2 * (dp - 1) // dp
        want += 3 * ring_allreduce(1, dp, rank_dp)
    return want


for mesh, dp, tp in (("tp=2", 1, 2), ("tp=4", 1, 4), ("dp=2,tp=2", 2, 2), ("dp=4", 4, 1)):
    name = mesh.replace("=", "").replace(",", "")
    exe = os.path.join(work, name)
    phases = os.path.join(work, name + "-phases")
    report = os.path.join(work, name + ".json")
    r = subprocess.run([args.loomc, args.model, "--mesh", mesh, "--remat=none",
                        "-o", exe, "--dump-phases", phases, "--report-json", report],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc --mesh {mesh} failed:\n{r.stderr}")
    with open(os.path.join(phases, "2-rank-program.mlir")) as f:
        program = f.read()
    if tp > 1:
        parts = re.findall(r'train.param "(w_qkv\[:, :, \d+:\d+\])" .*: tensor<(\d+)x(\d+)x(\d+)xf32>', program)
        check(f"{mesh}: QKV held as three blocks of h/t columns",
              len(parts) == 3 and all((int(a), int(b), int(c)) == (LAYERS, H, H // tp) for _, a, b, c in parts),
              ", ".join(f"{n}: {a}x{b}x{c}" for n, a, b, c in parts))
        gathers = len(re.findall(r"dist\.all_gather", program))
        check(f"{mesh}: nothing gathered", gathers == 0, f"{gathers} all-gathers")
    metrics = os.path.join(work, name + ".%r.jsonl")
    ranks = dp * tp
    r = subprocess.run(MPIRUN + ["-n", str(ranks), "-x", "LD_PRELOAD=" + args.pmpi, exe,
                                 "--steps", str(STEPS), "--metrics", metrics, "--timeout", "120"],
                       capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    pmpi = {int(a): int(b) for a, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}
    for rank in range(ranks):
        # The mesh's last axis is innermost.
        rank_dp, rank_tp = divmod(rank, tp)
        want = formula(dp, tp, rank_dp, rank_tp)
        got = pmpi.get(rank, -1)
        check(f"{mesh}: rank {rank} bytes per step", got == want * STEPS,
              f"PMPI {got // STEPS if got >= 0 else got}, formula {want}")
    with open(report) as f:
        predicted = sum(b for by_axis in json.load(f)["communication_bytes_per_step"].values()
                        for b in by_axis.values())
    check(f"{mesh}: the report's bytes for rank 0", predicted * STEPS == pmpi.get(0),
          f"{predicted} per step")

# pp=2 x dp=2 x tp=2 (8 ranks, 2 micro-batches, 1F1B): each stage's tp group
# runs its layers' four all-reduces per micro-batch, the pipeline sends each
# micro-batch's activation and its gradient whole on every tp rank, and dp
# reduces the stage's own tp-local gradients.
PP, DP, TP, M = 2, 2, 2, 2
mesh = "pp=2,dp=2,tp=2"
exe = os.path.join(work, "pp2dp2tp2")
phases = os.path.join(work, "pp2dp2tp2-phases")
r = subprocess.run([args.loomc, args.model, "--mesh", mesh, f"--micro-batches={M}", "--remat=none",
                    "-o", exe, "--dump-phases", phases], capture_output=True, text=True)
if r.returncode:
    sys.exit(f"loomc --mesh {mesh} failed:\n{r.stderr}")
with open(os.path.join(phases, "2-rank-program.mlir")) as f:
    program = f.read()
ranges = sorted({tuple(map(int, m)) for m in
                 re.findall(r'train.param "w_qkv\[(\d+):(\d+), :, 0:%d\]"' % H, program)})
layers = [b - a for a, b in ranges]
check(f"{mesh}: each stage's QKV parts are its layers' head blocks",
      sum(layers) == LAYERS and len(layers) == PP,
      f"layers {' + '.join(map(str, layers))}")
if sum(layers) != LAYERS or len(layers) != PP:
    check.finish()
r = subprocess.run(MPIRUN + ["-n", "8", "-x", "LD_PRELOAD=" + args.pmpi, exe,
                             "--steps", str(STEPS), "--timeout", "240"],
                   capture_output=True, text=True, env=RUN_ENV)
if r.returncode:
    sys.exit(f"{mesh} failed:\n{r.stdout}{r.stderr}")
pmpi = {int(a): int(b) for a, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}
per_layer = (12 * H * H + 7 * H) // TP + 6 * H


def token_counts(program, stage, M):
    """The cross-entropy's labelled-token counts reduced over dp in one step
    by the ranks of `stage`: the scalar all-reduces over dp inside the
    micro-batch loops (the indented ones), once per micro-batch, of no stage
    or of `stage` (the loss gradient's runs on the last stage only)."""
    def runs_here(line):
        m = re.search(r"dist\.stage = (\d+)", line)
        return m is None or int(m.group(1)) == stage
    return M * sum(1 for line in program.splitlines()
                   if line.startswith("      ") and runs_here(line) and
                   re.search(r'dist\.all_reduce_start .* over \["dp"\] .*: tensor<f32>$', line))


for rank in range(8):
    stage, rest = divmod(rank, DP * TP)
    rank_dp, rank_tp = divmod(rest, TP)
    mb = B // DP // M
    # Over pp: the activations forward (all but the last stage) and their
    # gradients back (all but the first), whole on every tp rank; the tied
    # embedding's gradient between the stages; the loss's scalar.
    want = 4 * M * mb * S * H * ((stage < PP - 1) + (stage > 0))
    want += 4 * V * H + ring_allreduce(1, PP, stage)
    # Over tp: four all-reduces per layer and micro-batch; the clipping
    # norm's scalar over pp and tp together (the rank's blocks of its
    # stage's gradients; its group rank is stage * TP + rank_tp).
    want += 4 * layers[stage] * M * ring_allreduce(mb * S * H, TP, rank_tp)
    want += ring_allreduce(1, PP * TP, stage * TP + rank_tp)
    # Over dp: the stage's own tp-local gradients (the tied embedding on
    # both stages, the position embedding on the first, the final norm on
    # the last), the loss's scalar and the labelled-token counts (once per
    # micro-batch where a micro-batch loop reduces them).
    own = layers[stage] * per_layer + V * H + (S * H if stage == 0 else 2 * H)
    want += 4 * own * 2 * (DP - 1) // DP
    counts = token_counts(program, stage, M)
    want += (1 + counts) * ring_allreduce(1, DP, rank_dp)
    got = pmpi.get(rank, -1)
    check(f"{mesh} M={M}: rank {rank} (stage {stage}) bytes per step",
          got == want * STEPS,
          f"PMPI {got // STEPS if got >= 0 else got}, formula {want} ({counts} token counts)")

check.finish()
