#!/usr/bin/env python3
"""Data-, tensor- and pipeline-parallel parity: the parity GPT (8 layers, 4 heads,
dropout on, AdamW with global-norm clipping) trained for 10 steps on dp = 2,
dp = 4, tp = 2 and tp = 4 (Megatron's column- and row-parallel layers, from
the `auto` preset), tp = 2 with sequence parallelism, dp = 2 x tp = 2, dp = 2 with one weight split over dp
(its gradient reduce-scattered), dp = 2 with 4 micro-batches, and
pipelines of 2 and 4 ranks with 4 micro-batches (GPipe's order, 1F1B,
interleaved 1F1B with 2 virtual stages per rank, ZB-H1, and users' CSV
schedules), pp = 2 x tp = 2 under ZB-H1 with sequence parallelism, and
pp = 2 x dp = 2 (interleaved) and pp = 2 x dp = 2 x tp = 2
(8 ranks; 1F1B and ZB-H1) with 2 gives
the single-rank run's losses (within 1e-5 + 1e-4 |loss|) and final
parameters (relative norm error within 1e-4) on the same global batches.
Under a PMPI wrapper, the bytes each rank sends equal the runtime's counters
and loomc --report's bytes per axis, and with 4 micro-batches a step sends
one ring all-reduce of all the gradients (not four) plus a few scalars."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import read_safetensors  # noqa: E402

STEPS = 10
SEED = 7

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
parser.add_argument("--pmpi", required=True, help="the PMPI byte-counting library")
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-dp-parity-")
model = os.path.join(work, "parity.mlir")
subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--batch", "8",
                "--heads", "4", "--dropout", "0.1", "-o", model], check=True)
with open(model) as f:
    text = f.read()
params = int(re.search(r"([\d,]+) parameters", text).group(1).replace(",", ""))
if "train.dropout" not in text:
    sys.exit("the parity model has no dropout")

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def build(name, loomc_args):
    exe = os.path.join(work, name)
    r = subprocess.run([args.loomc, model, "-o", exe, *loomc_args],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc {' '.join(loomc_args)} failed:\n{r.stderr}")
    return exe


def build_phases(name, loomc_args):
    """Builds `name` and returns it with a reader of its phases' IR
    (loomc --dump-phases): phase("2-rank-program.mlir") is its text."""
    phases = os.path.join(work, name + "-phases")
    exe = build(name, loomc_args + ["--dump-phases", phases])

    def phase(file):
        with open(os.path.join(phases, file)) as f:
            return f.read()
    return exe, phase


def reported_bytes(name):
    """The bytes per step and mesh axis that loomc --report-json predicts
    for the executable `name` (built with --report-json name.json)."""
    with open(os.path.join(work, name + ".json")) as f:
        comm = json.load(f)["communication_bytes_per_step"]
    out = {}
    for by_axis in comm.values():
        for axis, b in by_axis.items():
            out[axis] = out.get(axis, 0) + b
    return out


def check_report(label, name, rows, pmpi_bytes):
    """The report's bytes per step equal, over the run, the bytes the PMPI
    wrapper counted on rank 0 and the runtime's counters."""
    want = {axis: b * STEPS for axis, b in reported_bytes(name).items()}
    got = rows[0][-1]["bytes_sent"]
    check(f"{label}: report vs runtime bytes by axis", got == want, f"{got} vs {want}")
    check(f"{label}: report vs PMPI bytes", pmpi_bytes.get(0) == sum(want.values()),
          f"{pmpi_bytes.get(0)} vs {sum(want.values())}")


def run(name, exe, ranks, pmpi=False, export=True, extra=()):
    metrics = os.path.join(work, name + ".%r.jsonl")
    exported = os.path.join(work, name + ".safetensors")
    # The held-out loss every 5 steps runs the evaluation function too
    # (forward only, in program order even under a pipeline schedule);
    # not where the step's bytes are counted.
    cmd = [exe, "--steps", str(STEPS), "--seed", str(SEED), "--metrics", metrics,
           "--timeout", "120"] + ([] if pmpi else ["--eval-every", "5"]) + (["--export", exported] if export else []) + list(extra)
    if ranks > 1 or pmpi:
        extra = ["-x", "LD_PRELOAD=" + args.pmpi] if pmpi else []
        cmd = MPIRUN + ["-n", str(ranks)] + extra + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    rows = []
    for rank in range(ranks):
        with open(metrics.replace("%r", str(rank))) as f:
            rows.append([json.loads(line) for line in f])
    pmpi_bytes = {int(a): int(b) for a, b in
                  re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}
    return rows, read_safetensors(exported) if export else {}, pmpi_bytes


failed = 0


def check(label, ok, detail):
    global failed
    print(f"{label}: {detail} {'ok' if ok else 'FAIL'}")
    failed += not ok


def compare(label, got, ref):
    (rows, weights, _), (ref_rows, ref_weights, _) = got, ref
    worst = 0.0
    for a, b in zip(rows[0], ref_rows[0]):
        bound = 1e-5 + 1e-4 * abs(b["loss"])
        worst = max(worst, abs(a["loss"] - b["loss"]) / bound)
    check(f"{label}: losses", len(rows[0]) == STEPS and worst <= 1.0,
          f"{STEPS} steps, worst |loss - ref| / tolerance {worst:.3g}")
    evals = [(a.get("eval_loss"), b.get("eval_loss")) for a, b in zip(rows[0], ref_rows[0])
             if "eval_loss" in a or "eval_loss" in b]
    paired = all(a is not None and b is not None for a, b in evals)
    worst_eval = max((abs(a - b) / (1e-5 + 1e-4 * abs(b)) for a, b in evals),
                     default=0.0) if paired else float("inf")
    if any("eval_loss" in a for a in rows[0]):  # the runs that evaluate
        check(f"{label}: held-out losses",
              paired and len(evals) == STEPS // 5 and worst_eval <= 1.0,
              f"{len(evals)} evaluations, worst / tolerance {worst_eval:.3g}")
    # Every rank reports the same (all-reduced) loss.
    same = all(abs(r[-1]["loss"] - rows[0][-1]["loss"]) == 0.0 for r in rows)
    check(f"{label}: ranks agree on the loss", same, f"{len(rows)} ranks")
    errs = {n: float(np.linalg.norm(weights[n] - w) / max(np.linalg.norm(w), 1e-30))
            for n, w in ref_weights.items()}
    name = max(errs, key=errs.get)
    check(f"{label}: worst final-parameter relative error",
          errs[name] <= 1e-4 and set(weights) == set(ref_weights),
          f"{errs[name]:.3g} ({name})")


reference_exe = build("ref", [])
reference = run("ref", reference_exe, 1)
reference_m4 = run("ref-m4", build("ref-m4", ["--micro-batches=4"]), 1)
# The parity model really trains with dropout: its loss moves.
check("reference trains", reference[0][0][-1]["loss"] != reference[0][0][0]["loss"],
      f"loss {reference[0][0][0]['loss']:.4f} -> {reference[0][0][-1]['loss']:.4f}")

dp2 = run("dp2", build("dp2", ["--mesh", "dp=2", "--report-json",
                               os.path.join(work, "dp2.json")]), 2, pmpi=True)
compare("dp=2", dp2, reference)
check_report("dp=2", "dp2", dp2[0], dp2[2])
compare("dp=4", run("dp4", build("dp4", ["--mesh", "dp=4"]), 4), reference)
compare("tp=2", run("tp2", build("tp2", ["--mesh", "tp=2"]), 2), reference)
compare("tp=4", run("tp4", build("tp4", ["--mesh", "tp=4"]), 4), reference)
compare("tp=2 sequence-parallel",
        run("tp2sp", build("tp2sp", ["--mesh", "tp=2", "--sequence-parallel"]), 2),
        reference)
# Split parameters stored as blocks load their block of whole weights: from
# the reference's final weights, tp=2 x dp=2 trains as the single rank does.
weights = os.path.join(work, "ref.safetensors")
compare("dp=2 x tp=2 from --init-from",
        run("dp2tp2-init", build("dp2tp2-init", ["--mesh", "dp=2,tp=2"]), 4,
            extra=["--init-from", weights]),
        run("ref-init", reference_exe, 1, extra=["--init-from", weights]))

dp2tp2_exe = build("dp2tp2", ["--mesh", "dp=2,tp=2", "--report-json",
                               os.path.join(work, "dp2tp2.json")])
compare("dp=2 x tp=2", run("dp2tp2", dp2tp2_exe, 4), reference)
# The bytes of the steps alone (exporting gathers the split parameters).
rows, _, pmpi_bytes = run("dp2tp2-bytes", dp2tp2_exe, 4, pmpi=True, export=False)
check_report("dp=2 x tp=2", "dp2tp2", rows, pmpi_bytes)

# A weight annotated as split over dp (ZeRO's layout for one tensor): its
# gradient is reduced and scattered, its update gathered back.
split = os.path.join(work, "split.mlir")
with open(split, "w") as f:
    f.write(re.sub(r'(train.param "w_fc" init\(#train.init<[^>]*>\))',
                   r'\1 {dist.sharding = [#dist.sharding<[{}, {"dp"}, {} ]>]}', text))
phases = os.path.join(work, "split-phases")
r = subprocess.run([args.loomc, split, "--mesh", "dp=2", "-o", os.path.join(work, "split"),
                    "--dump-phases", phases], capture_output=True, text=True)
if r.returncode:
    sys.exit(f"loomc failed on the split weight:\n{r.stderr}")
with open(os.path.join(phases, "2-rank-program.mlir")) as f:
    scatters = f.read().count("dist.reduce_scatter")
check("dp=2, w_fc split: the gradient is reduce-scattered", scatters == 1,
      f"{scatters} reduce_scatter")
compare("dp=2, w_fc split", run("split", os.path.join(work, "split"), 2), reference)

dp2m4 = run("dp2-m4", build("dp2-m4", ["--mesh", "dp=2", "--micro-batches=4",
                                      "--report-json",
                                      os.path.join(work, "dp2-m4.json")]), 2,
            pmpi=True)
compare("dp=2 M=4", dp2m4, reference_m4)
check_report("dp=2 M=4", "dp2-m4", dp2m4[0], dp2m4[2])

rows, _, pmpi_bytes = dp2m4
for rank in range(2):
    counted = rows[rank][-1]["bytes_sent"].get("dp", 0)
    check(f"dp=2 M=4: rank {rank} bytes, PMPI vs runtime", pmpi_bytes.get(rank) == counted,
          f"{pmpi_bytes.get(rank)} vs {counted}")
per_step = rows[0][1]["bytes_sent"]["dp"] - rows[0][0]["bytes_sent"]["dp"]
one_reduction = 2 * (2 - 1) // 2 * 4 * params
check("dp=2 M=4: bytes per step", one_reduction <= per_step < one_reduction + 1024,
      f"{per_step} (one ring all-reduce of {params} f32 gradients: {one_reduction}, "
      f"four would be {4 * one_reduction})")

# Pipelines: the layers cut into 2 and 4 stages, the micro-batch loop run in
# GPipe's order with activations and gradients sent between stages; the
# embedding is tied to the head, so its gradient is summed across the first
# and the last stage.
for pp in (2, 4):
    exe, phase = build_phases(f"pp{pp}", ["--mesh", f"pp={pp}", "--micro-batches=4",
                                          "--schedule=gpipe"])
    tied = re.search(r'train.param "wte" .*dist.stages = array<i64: ([0-9, ]+)>',
                     phase("1-training-step.mlir"))
    check(f"pp={pp}: the tied embedding is used on the first and the last stage",
          tied and [int(v) for v in tied.group(1).split(",")] == [0, pp - 1],
          tied.group(1) if tied else "no stages recorded")
    sends = phase("2-rank-program.mlir").count("dist.send")
    # One activation and one gradient per stage boundary: the backward
    # reads what the forward received instead of sending it again.
    check(f"pp={pp}: activations and gradients cross the stages once",
          sends == 2 * (pp - 1), f"{sends} sends")
    compare(f"pp={pp} M=4", run(f"pp{pp}", exe, pp), reference_m4)

# 1F1B: the code generator runs the micro-batch loops' iterations in each
# rank's order (with buffered sends); and a schedule a user wrote as CSV.
for pp in (2, 4):
    compare(f"pp={pp} M=4 1F1B",
            run(f"pp{pp}-1f1b", build(f"pp{pp}-1f1b", ["--mesh", f"pp={pp}", "--micro-batches=4",
                                                         "--schedule=1f1b"]), pp),
            reference_m4)
# Interleaved 1F1B: 2 virtual stages per rank (stage s on rank s mod pp),
# the code generator running each action's stage only.
for pp in (2, 4):
    exe, phase = build_phases(f"pp{pp}-interleaved",
                              ["--mesh", f"pp={pp}", "--micro-batches=4",
                               "--schedule=interleaved", "--virtual-stages=2"])
    tied = re.search(r'train.param "wte" .*dist.stages = array<i64: ([0-9, ]+)>',
                     phase("1-training-step.mlir"))
    check(f"pp={pp} interleaved: the tied embedding is on stages 0 and {2 * pp - 1}",
          tied and [int(v) for v in tied.group(1).split(",")] == [0, 2 * pp - 1],
          tied.group(1) if tied else "no stages recorded")
    sends = phase("2-rank-program.mlir").count("dist.send")
    check(f"pp={pp} interleaved: activations and gradients cross the {2 * pp} stages once",
          sends == 2 * (2 * pp - 1), f"{sends} sends")
    compare(f"pp={pp} M=4 interleaved (2 virtual stages)",
            run(f"pp{pp}-interleaved", exe, pp), reference_m4)
# ZB-H1: each backward split into its input part (I, what the previous
# stage waits for) and its weight part (W, deferred into the bubble).
for pp in (2, 4):
    exe, phase = build_phases(f"pp{pp}-zb", ["--mesh", f"pp={pp}", "--micro-batches=4",
                                             "--schedule=zb"])
    program = phase("2-rank-program.mlir")
    check(f"pp={pp} ZB-H1: the backward is split into its input and weight parts",
          'dist.backward = "input"' in program and 'dist.backward = "weight"' in program,
          "input and weight repeats")
    compare(f"pp={pp} M=4 ZB-H1", run(f"pp{pp}-zb", exe, pp), reference_m4)
csv = os.path.join(work, "warm3.csv")
with open(csv, "w") as f:
    f.write("0F0,0F1,0F2,0B0,0F3,0B1,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n")
compare("pp=2 M=4 user CSV",
        run("pp2-csv", build("pp2-csv", ["--mesh", "pp=2", "--micro-batches=4",
                                         f"--schedule={csv}"]), 2),
        reference_m4)
# A user's CSV over 2 virtual stages per rank with split backwards.
csv = os.path.join(work, "interleaved-iw.csv")
with open(csv, "w") as f:
    f.write("0F0,0F1,2F0,2F1,0F2,2I0,2W0,0F3,2I1,2W1,2F2,0I0,0W0,2F3,0I1,0W1,"
            "2I2,2W2,2I3,2W3,0I2,0W2,0I3,0W3\n"
            "1F0,1F1,3F0,3I0,3W0,3F1,3I1,3W1,1F2,1I0,1W0,1F3,1I1,1W1,3F2,3I2,"
            "3W2,3F3,3I3,3W3,1I2,1W2,1I3,1W3\n")
compare("pp=2 M=4 user CSV, 2 virtual stages, split backwards",
        run("pp2-csv-iw", build("pp2-csv-iw", ["--mesh", "pp=2", "--micro-batches=4",
                                               f"--schedule={csv}"]), 2),
        reference_m4)

# ZB-H1 over tensor-parallel stages with sequence parallelism.
compare("pp=2 x tp=2 M=4 ZB-H1, sequence-parallel",
        run("pp2tp2-zb-sp", build("pp2tp2-zb-sp", ["--mesh", "pp=2,tp=2", "--micro-batches=4",
                                                   "--schedule=zb", "--sequence-parallel"]), 4),
        reference_m4)

# Pipelines composed with data and tensor parallelism: 2 micro-batches of
# 2 rows (each split over dp), the stages' layers Megatron-split over tp.
reference_m2 = run("ref-m2", build("ref-m2", ["--micro-batches=2"]), 1)
compare("pp=2 x dp=2 M=2 interleaved",
        run("pp2dp2", build("pp2dp2", ["--mesh", "pp=2,dp=2", "--micro-batches=2",
                                       "--schedule=interleaved", "--virtual-stages=2"]), 4),
        reference_m2)
exe, phase = build_phases("pp2dp2tp2", ["--mesh", "pp=2,dp=2,tp=2", "--micro-batches=2"])
program = phase("2-rank-program.mlir")
tp_collectives = program.count('over ["tp"]')
check("pp=2 x dp=2 x tp=2: the layers are split over tp",
      tp_collectives > 0 and "dist.send" in program,
      f"{tp_collectives} collectives over tp")
compare("pp=2 x dp=2 x tp=2 M=2 (8 ranks)", run("pp2dp2tp2", exe, 8), reference_m2)  # 1F1B, the default
compare("pp=2 x dp=2 x tp=2 M=2 ZB-H1 (8 ranks)",
        run("pp2dp2tp2-zb", build("pp2dp2tp2-zb", ["--mesh", "pp=2,dp=2,tp=2",
                                                   "--micro-batches=2", "--schedule=zb"]), 8),
        reference_m2)
# The passes find an axis by its role, not its name: the same layout with
# axes named otherwise (their roles stated) communicates over those names
# and trains to the same parameters.
exe, phase = build_phases("roles", ["--mesh", "stage=2:pipeline,replica=2:data,shard=2:tensor",
                                    "--micro-batches=2"])
program = phase("2-rank-program.mlir")
named = {axis: program.count(f'"{axis}"') for axis in ("stage", "replica", "shard", "pp", "dp", "tp")}
check("stage x replica x shard: collectives and transfers over the named axes",
      all(named[a] > 0 for a in ("stage", "replica", "shard")) and
      not any(named[a] for a in ("pp", "dp", "tp")), str(named))
compare("stage=2:pipeline x replica=2:data x shard=2:tensor M=2 (8 ranks)",
        run("roles", exe, 8), reference_m2)

print(f"{failed} failed")
sys.exit(1 if failed else 0)
