#!/usr/bin/env python3
"""Builds one model twice, for one rank and for a parallel layout, trains
both on the same global batches and checks that they match as parity.py
does: losses within 1e-5 + 1e-4 |loss|, every rank reporting the same loss,
and the exported final parameters within 1e-4 relative norm error.

    same_training.py --loomc loomc --model M.mlir --ranks 2 --steps 2 \
        --reference-args=--micro-batches=2 --args="--mesh pp=2 --micro-batches=2"
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import Checks, MPIRUN, RUN_ENV, read_safetensors  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--ranks", type=int, required=True)
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--seed", type=int, default=5)
parser.add_argument("--args", default="", help="loomc options of the parallel build")
parser.add_argument("--reference-args", default="", help="loomc options of the one-rank build")
parser.add_argument("--label", default="parallel")
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-same-training-")


def train(name, loomc_args, ranks):
    exe = os.path.join(work, name)
    r = subprocess.run([args.loomc, args.model, "-o", exe, *shlex.split(loomc_args)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc {loomc_args} failed:\n{r.stderr}")
    metrics = os.path.join(work, name + ".%r.jsonl")
    exported = os.path.join(work, name + ".safetensors")
    cmd = [exe, "--steps", str(args.steps), "--seed", str(args.seed), "--metrics", metrics,
           "--timeout", "300", "--export", exported]
    if ranks > 1:
        cmd = MPIRUN + ["-n", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    losses = []
    for rank in range(ranks):
        with open(metrics.replace("%r", str(rank))) as f:
            losses.append([json.loads(line)["loss"] for line in f])
    weights = read_safetensors(exported)
    os.remove(exported)
    return losses, weights


ref_losses, ref_weights = train("ref", args.reference_args, 1)
losses, weights = train("parallel", args.args, args.ranks)
check = Checks(f"{args.label}: ")


worst = max(abs(a - b) / (1e-5 + 1e-4 * abs(b)) for a, b in zip(losses[0], ref_losses[0]))
check("losses", len(losses[0]) == args.steps and worst <= 1.0,
      f"{args.steps} steps, {ref_losses[0][0]:.4f} -> {ref_losses[0][-1]:.4f}, "
      f"worst |loss - ref| / tolerance {worst:.3g}")
check("ranks agree on the loss", all(r == losses[0] for r in losses), f"{len(losses)} ranks")
errs = {n: float(np.linalg.norm(weights[n] - w) / max(np.linalg.norm(w), 1e-30))
        for n, w in ref_weights.items() if n in weights}
name = max(errs, key=errs.get)
check("worst final-parameter relative error",
      errs[name] <= 1e-4 and set(weights) == set(ref_weights), f"{errs[name]:.3g} ({name})")
check.finish()
