#!/usr/bin/env python3
"""Bytes a rank sends per step under tensor and data parallelism, counted
below the runtime by the PMPI wrapper, equal to the byte a formula from the
example GPT's shapes (batch b, context s, width h, L layers, vocabulary V,
the embedding tied to the head, AdamW with global-norm clipping,
--remat=none) that lists every collective:

  over tp (t ranks), Megatron-LM's: two all-reduces of an activation
    (b/dp) s h per layer forward (after the attention's and the MLP's
    row-parallel projections) and two backward (the input gradients of the
    column-parallel QKV and MLP projections); the vocab-parallel
    embedding's lookup (partial sums all-reduced) and the head's input
    gradient; the cross-entropy's per-position maximum, then its sum of
    exponentials and label logit (one bucket); the clipping norm's scalar
    (the sum of squares of the rank's shards). QKV is split by heads (each
    rank projects, attends and back-propagates only its heads; no gather of
    dq, dk, dv) and the logits by the vocabulary (no gather of them).
  over dp (n ranks): one ring all-reduce of the gradients of the rank's
    own tp-local parameters (a column- or row-parallel weight's and the
    embedding's 1/t block, the replicated norms, row-parallel biases and
    position embedding whole), and two scalars: the loss and the
    cross-entropy's labelled-token count, reduced once for the loss and its
    gradient (the gradient reads the loss's share).

At tp=2 and tp=4 a rank also holds exactly its share of the parameters,
and computes 1/t of the single rank's matmul FLOPs (the report's count of
the rank program and this test's own).

With --sequence-parallel (tp=2), Megatron-LM's sequence parallelism: per
layer four reduce-scatters and four all-gathers of an activation (b s h)
where plain tp has four all-reduces, two re-gathers of the saved norm
outputs in the backward, and the partial gradients of the norms and the
row-parallel biases (6h) all-reduced; the head's input gathered along the
sequence and its gradient reduce-scattered, the cross-entropy's statistics,
the final norm's gradients; the embedding table gathered for the lookup and
its gradient reduce-scattered; the clipping norm. The report's re-gather
bytes equal the two per layer.

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
from loomtest import MPIRUN, RUN_ENV, Checks, half, ring_allreduce, token_counts  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--pmpi", required=True)
args = parser.parse_args()

B, S, H, V, LAYERS = 8, 64, 128, 256, 4
STEPS = 2
work = tempfile.mkdtemp(prefix="loom-tp-bytes-")
check = Checks()


def tp_local_parameters(t):
    """The parameters a rank of a tp group of t holds: Megatron's column-
    (w_qkv, b_qkv, w_fc, b_fc) and row-parallel (w_o, w_proj) blocks and
    the vocab-parallel embedding's rows 1/t, the rest whole."""
    split = LAYERS * (3 * H * H + 3 * H + 4 * H * H + 4 * H + H * H + 4 * H * H) + V * H
    whole = LAYERS * (6 * H) + S * H + 2 * H
    assert split % t == 0
    return split // t + whole


def vocab_parallel(tokens, t, rank):
    """Megatron-LM's vocab-parallel embedding and head over t ranks, for
    `tokens` positions: the lookup's partial sums all-reduced (forward),
    the head's input gradient all-reduced (backward), and the
    cross-entropy's per-position maximum, then its sum of exponentials and
    label logit (one bucket), all-reduced."""
    return (2 * ring_allreduce(tokens * H, t, rank) + ring_allreduce(tokens, t, rank) +
            ring_allreduce(2 * tokens, t, rank))


def formula(dp, tp, rank_dp, rank_tp):
    want = 4 * LAYERS * ring_allreduce((B // dp) * S * H, tp, rank_tp)
    want += vocab_parallel((B // dp) * S, tp, rank_tp)
    want += ring_allreduce(1, tp, rank_tp)
    if dp > 1:
        # Buckets of whole layers' gradients: every bucket's element count
        # divides by dp here, so the chunks do not depend on the rank.
        want += 4 * tp_local_parameters(tp) * 2 * (dp - 1) // dp
        want += 2 * ring_allreduce(1, dp, rank_dp)
    return want


def matmul_flops(program):
    """The FLOPs of the train.matmul ops of a rank program (2 M N K per
    product, batched), each times the iterations of the layer loops around
    it (read from their indentation: the rank programs here nest no loops
    in the layer loops)."""
    total = 0
    count = 1
    for line in program.splitlines():
        m = re.match(r"\s*%\S+(?:, %\S+)* = train.repeat (\d+)", line)
        if m:
            count = int(m.group(1))
            continue
        m = re.search(r"train\.matmul %\S+, %\S+( transpose_lhs)?( transpose_rhs)?(?: \{[^}]*\})? : "
                      r"tensor<([\dx]+)xf32>, tensor<([\dx]+)xf32>", line)
        if not m:
            continue
        lhs = [int(d) for d in m.group(3).split("x")]
        rhs = [int(d) for d in m.group(4).split("x")]
        k, rows = (lhs[-2], lhs[-1]) if m.group(1) else (lhs[-1], lhs[-2])
        n = rhs[-2] if m.group(2) else rhs[-1]
        batch = 1
        for d in lhs[:-2]:
            batch *= d
        inside = line.startswith("      ")
        total += 2 * batch * rows * n * k * (count if inside else 1)
    return total


# The single rank's matmul FLOPs, which tensor parallelism divides.
single_report = os.path.join(work, "single.json")
r = subprocess.run([args.loomc, args.model, "--remat=none", "--report-json", single_report],
                   capture_output=True, text=True)
if r.returncode:
    sys.exit(f"loomc --report-json failed:\n{r.stderr}")
with open(single_report) as f:
    single_matmul = json.load(f)["matmul_flops_per_step"]

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
    with open(report) as f:
        reported = json.load(f)
    if dp == 1:
        # Every block matrix and the vocabulary split: the parameters a rank
        # holds, and 1/t of the single rank's matmul FLOPs (the report's
        # count of the rank program, and this test's own count of it).
        held = reported["memory_per_rank_bytes"]["parameters"]
        check(f"{mesh}: parameters per rank", held == 4 * tp_local_parameters(tp),
              f"{held // 4} vs {tp_local_parameters(tp)}")
        counted = matmul_flops(program)
        check(f"{mesh}: matmul FLOPs per rank are 1/{tp} of the single rank's",
              reported["rank_matmul_flops_per_step"] * tp == single_matmul and counted * tp == single_matmul,
              f"report {reported['rank_matmul_flops_per_step']}, counted {counted}, single rank {single_matmul}")
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
    predicted = sum(b for by_axis in reported["communication_bytes_per_step"].values()
                    for b in by_axis.values())
    check(f"{mesh}: the report's bytes for rank 0", predicted * STEPS == pmpi.get(0),
          f"{predicted} per step")

# tp=2 with sequence parallelism: Megatron-LM's, each activation all-reduce a
# reduce-scatter and an all-gather.
T = 2
mesh = "tp=2"
exe = os.path.join(work, "tp2sp")
phases = os.path.join(work, "tp2sp-phases")
report = os.path.join(work, "tp2sp.json")
r = subprocess.run([args.loomc, args.model, "--mesh", mesh, "--sequence-parallel", "--remat=none",
                    "-o", exe, "--dump-phases", phases, "--report-json", report],
                   capture_output=True, text=True)
if r.returncode:
    sys.exit(f"loomc --mesh {mesh} --sequence-parallel failed:\n{r.stderr}")
r = subprocess.run(MPIRUN + ["-n", str(T), "-x", "LD_PRELOAD=" + args.pmpi, exe,
                             "--steps", str(STEPS), "--timeout", "120"],
                   capture_output=True, text=True, env=RUN_ENV)
if r.returncode:
    sys.exit(f"tp=2 --sequence-parallel failed:\n{r.stdout}{r.stderr}")
pmpi = {int(a): int(b) for a, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}


for rank in range(T):
    # Per layer: forward, the all-gathers of the two norms' outputs before
    # the column-parallel projections and the reduce-scatters of the two
    # row-parallel outputs; backward, the all-gathers of the gradients
    # entering the row-parallel layers, the reduce-scatters of the column-
    # parallel layers' input gradients, and the re-gathers of the two
    # saved norm outputs for the weight gradients: 10 of b s h each. The
    # norms' gains and biases and the row-parallel biases, applied to a
    # block of the sequence, have partial gradients: one all-reduce of 6 h.
    want = LAYERS * (10 * half(B * S * H, T) + ring_allreduce(6 * H, T, rank))
    # The head, vocab-parallel: the final norm's output gathered along the
    # sequence before it, its input gradient reduce-scattered back, and the
    # cross-entropy's maximum and (one bucket) sum of exponentials and label
    # logit per position all-reduced; the final norm's gradients (applied
    # to a block of the sequence) all-reduced. The embedding's table is
    # gathered for the lookup of a block of the sequence and its gradient
    # reduce-scattered (not Megatron's vocab-parallel lookup followed by a
    # reduce-scatter: as many bytes here, V h against b s h). The clipping
    # norm's scalar.
    want += 2 * half(B * S * H, T) + ring_allreduce(B * S, T, rank) + ring_allreduce(2 * B * S, T, rank)
    want += ring_allreduce(2 * H, T, rank) + 2 * half(V * H, T)
    want += ring_allreduce(1, T, rank)
    got = pmpi.get(rank, -1)
    check(f"tp=2 sequence-parallel: rank {rank} bytes per step", got == want * STEPS,
          f"PMPI {got // STEPS if got >= 0 else got}, formula {want}")
with open(report) as f:
    reported = json.load(f)
predicted = sum(b for by_axis in reported["communication_bytes_per_step"].values()
                for b in by_axis.values())
check("tp=2 sequence-parallel: the report's bytes for rank 0", predicted * STEPS == pmpi.get(0),
      f"{predicted} per step")
regathers = LAYERS * 2 * half(B * S * H, T)
check("tp=2 sequence-parallel: the report's re-gathers of saved norm outputs",
      reported["regather_communication_bytes_per_step"] == regathers,
      f"{reported['regather_communication_bytes_per_step']:.0f} vs {regathers} (2 per layer)")

# pp=2 x dp=2 x tp=2 (8 ranks, 2 micro-batches, 1F1B): each stage's tp group
# runs its layers' four all-reduces per micro-batch, the pipeline sends each
# micro-batch's activation and its gradient whole on every tp rank (and the
# tied embedding's gradient, a tp rank's rows), and dp reduces the stage's
# own tp-local gradients.
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


for rank in range(8):
    stage, rest = divmod(rank, DP * TP)
    rank_dp, rank_tp = divmod(rest, TP)
    mb = B // DP // M
    # Over pp: the activations forward (all but the last stage) and their
    # gradients back (all but the first), whole on every tp rank; the tied
    # embedding's gradient between the stages; the loss's scalar.
    want = 4 * M * mb * S * H * ((stage < PP - 1) + (stage > 0))
    want += 4 * V * H // TP + ring_allreduce(1, PP, stage)
    # Over tp: four all-reduces per layer and micro-batch; per micro-batch
    # the vocab-parallel lookup's all-reduce on the first stage, and on the
    # last the head's input gradient and the cross-entropy's statistics;
    # the clipping norm's scalar over pp and tp together (the rank's blocks
    # of its stage's gradients; its group rank is stage * TP + rank_tp).
    want += 4 * layers[stage] * M * ring_allreduce(mb * S * H, TP, rank_tp)
    if stage == 0:
        want += M * ring_allreduce(mb * S * H, TP, rank_tp)
    else:
        # The backward, scheduled apart from its micro-batch's forward,
        # reduces the maximum and the sum of exponentials again.
        want += M * (ring_allreduce(mb * S * H, TP, rank_tp) + ring_allreduce(mb * S, TP, rank_tp) +
                     ring_allreduce(2 * mb * S, TP, rank_tp))
        want += M * 2 * ring_allreduce(mb * S, TP, rank_tp)
    want += ring_allreduce(1, PP * TP, stage * TP + rank_tp)
    # Over dp: the stage's own tp-local gradients (the tied embedding's
    # rows on both stages, the position embedding on the first, the final
    # norm on the last), the loss's scalar and the labelled-token counts
    # (once per micro-batch where a micro-batch loop reduces them).
    own = layers[stage] * per_layer + V * H // TP + (S * H if stage == 0 else 2 * H)
    want += 4 * own * 2 * (DP - 1) // DP
    counts = token_counts(program, "dp", stage, M)
    want += (1 + counts) * ring_allreduce(1, DP, rank_dp)
    got = pmpi.get(rank, -1)
    check(f"{mesh} M={M}: rank {rank} (stage {stage}) bytes per step",
          got == want * STEPS,
          f"PMPI {got // STEPS if got >= 0 else got}, formula {want} ({counts} token counts)")

check.finish()
