#!/usr/bin/env python3
"""Global-norm clipping under every parallelism: the parity GPT trained with
SGD (no momentum) and a clip norm small enough that clipping changes every
step, so a wrong norm changes the losses and the parameters (AdamW would
hide it: its update is invariant to the gradient's scale).

On tp = 2, dp = 2 with one weight split over dp (its gradient
reduce-scattered), pp = 2 and pp = 2 x tp = 2 (2 micro-batches), the run
matches the single-rank run of the same global batch (losses within
1e-5 + 1e-4 |loss|, final parameters within 1e-4 relative), and each rank
program computes the norm from the gradient blocks it holds: no operand of
`train.sum_squares` is gathered, and the square root reads one scalar
all-reduce over the axes that split gradients (pp, where each stage holds
its own parameters' gradients), or none where no axis does."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import (Checks, MPIRUN, RUN_ENV, compare_training, definitions,  # noqa: E402
                      read_safetensors)

STEPS = 6
SEED = 11

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-clipping-")
check = Checks()


def generate(name, clip):
    path = os.path.join(work, name + ".mlir")
    subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--batch", "8",
                    "--heads", "4", "--optimizer", "sgd", "--momentum", "0",
                    "--weight-decay", "0", "--lr", "0.5", "--warmup", "0",
                    "--decay", "constant", "--clip", str(clip), "-o", path], check=True)
    return path


def build(name, model, loomc_args):
    exe = os.path.join(work, name)
    phases = os.path.join(work, name + "-phases")
    r = subprocess.run([args.loomc, model, "-o", exe, "--dump-phases", phases, *loomc_args],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc {' '.join(loomc_args)} failed:\n{r.stderr}")
    with open(os.path.join(phases, "2-rank-program.mlir")) as f:
        return exe, f.read()


def run(name, exe, ranks):
    metrics = os.path.join(work, name + ".%r.jsonl")
    exported = os.path.join(work, name + ".safetensors")
    cmd = [exe, "--steps", str(STEPS), "--seed", str(SEED), "--metrics", metrics,
           "--timeout", "120", "--export", exported]
    if ranks > 1:
        cmd = MPIRUN + ["-n", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    with open(metrics.replace("%r", "0")) as f:
        losses = [json.loads(line)["loss"] for line in f]
    return losses, read_safetensors(exported)


def compare(label, got, ref):
    compare_training(check, label, STEPS, got, ref)


def check_norm(label, program, axes):
    """The norm reads the gradient blocks the rank holds (nothing gathered)
    and one scalar all-reduce over `axes` (none when `axes` is empty)."""
    defs = definitions(program)
    sums = [d for d in defs.values() if d.startswith("train.sum_squares")]
    gathered = []
    for d in sums:
        operands = re.match(r"train.sum_squares ([^:]*?)(?: replicated over \d+)? :", d).group(1)
        for v in operands.split(", "):
            if defs.get(v.split("#")[0], "").startswith("dist.all_gather"):
                gathered.append(v)
    check(f"{label}: no gradient gathered for the norm", sums and not gathered,
          f"{len(sums)} sum_squares, {len(gathered)} gathered operands")
    sqrt = [d for d in defs.values() if d.startswith("train.sqrt")]
    reductions = []
    value = re.match(r"train.sqrt (%[\w.#]+)", sqrt[0]).group(1) if len(sqrt) == 1 else None
    while value and not defs.get(value, "").startswith(("train.add", "train.sum_squares")):
        d = defs.get(value.split("#")[0], "")
        m = re.match(r"dist\.(?:all_reduce_start|all_reduce|wait) (%[\w.#]+)(?: over (\[.*?\]))?", d)
        if not m:
            break
        if m.group(2):
            reductions.append(json.loads(m.group(2)))
        value = m.group(1)
    want = [axes] if axes else []
    said = "; ".join("over " + ",".join(r) for r in reductions) or "none"
    check(f"{label}: the norm's scalar all-reduce", sorted(map(sorted, reductions)) ==
          sorted(map(sorted, want)), said)


clipped = generate("clip", 0.05)
unclipped = generate("noclip", 0)

reference = run("ref", build("ref", clipped, [])[0], 1)
free = run("noclip", build("noclip", unclipped, [])[0], 1)
# Clipping is active on every step after the first: the losses move apart.
check("clipping changes the losses", all(a != b for a, b in zip(reference[0][1:], free[0][1:])),
      f"final loss {reference[0][-1]:.5f} clipped, {free[0][-1]:.5f} not")
reference_m2 = run("ref-m2", build("ref-m2", clipped, ["--micro-batches=2"])[0], 1)

exe, program = build("tp2", clipped, ["--mesh", "tp=2"])
check_norm("tp=2", program, ["tp"])
compare("tp=2", run("tp2", exe, 2), reference)

# One weight split over dp: its gradient is reduce-scattered and its norm
# taken from the shard, the replicated gradients counted on one dp rank.
with open(clipped) as f:
    text = f.read()
split = os.path.join(work, "split.mlir")
with open(split, "w") as f:
    f.write(re.sub(r'(train.param "w_fc" init\(#train.init<[^>]*>\))',
                   r'\1 {dist.sharding = [#dist.sharding<[{}, {"dp"}, {} ]>]}', text))
exe, program = build("dp2-split", split, ["--mesh", "dp=2"])
check_norm("dp=2, w_fc split", program, ["dp"])
compare("dp=2, w_fc split", run("dp2-split", exe, 2), reference)

exe, program = build("dp2", clipped, ["--mesh", "dp=2"])
check_norm("dp=2", program, [])
compare("dp=2", run("dp2", exe, 2), reference)

exe, program = build("pp2", clipped, ["--mesh", "pp=2", "--micro-batches=2"])
check_norm("pp=2 M=2", program, ["pp"])
compare("pp=2 M=2", run("pp2", exe, 2), reference_m2)

exe, program = build("pp2tp2", clipped, ["--mesh", "pp=2,tp=2", "--micro-batches=2"])
check_norm("pp=2 x tp=2 M=2", program, ["tp", "pp"])
compare("pp=2 x tp=2 M=2", run("pp2tp2", exe, 4), reference_m2)

check.finish()
