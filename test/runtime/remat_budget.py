#!/usr/bin/env python3
"""--remat=budget against brute force: for a GPT of 3 layers (loom-gen),
every assignment of none, selective and full to its layers (27) is compiled
and its report read: the most loaded rank's activation peak, and the
recomputation it adds (FLOPs, and 20 FLOP-equivalents per byte its
recomputed collectives send, as the budget search counts them). For
budgets strictly between the none and full peaks, --remat=budget's choice
fits and costs exactly the least any fitting assignment costs (so
strictly less than full recomputation wherever a cheaper assignment
fits); a budget below full's peak is refused with
that peak. Run without and with a pipeline (pp=2, 4 micro-batches, where
a stage keeps its in-flight micro-batches' saved values)."""

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import Checks  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-remat-budget-")
LAYERS = 3
model = os.path.join(work, "gpt.mlir")
subprocess.run([sys.executable, args.loom_gen, "--layers", str(LAYERS), "--d-model", "64",
                "--heads", "2", "--context", "32", "--vocab", "64", "--batch", "8",
                "-o", model], check=True)
check = Checks()


def report(flags, name):
    out = os.path.join(work, name + ".json")
    r = subprocess.run([args.loomc, model, *flags, "--report-json", out],
                       capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    return json.load(open(out)), r.stderr


def peak(r):
    rows = r["memory_per_rank_bytes"].get("per_pipeline_rank")
    if rows:
        return max(row["activations_peak"] for row in rows)
    return r["memory_per_rank_bytes"]["activations_peak"]


def cost(r):
    return r["recompute_flops_per_step"] + 20 * r["recompute_communication_bytes_per_step"]


for label, flags in (("one rank", []), ("pp=2 M=4", ["--mesh", "pp=2", "--micro-batches=4"])):
    plans = {}
    for layers in itertools.product(("none", "selective", "full"), repeat=LAYERS):
        policy = ",".join(layers)
        r, err = report(flags + [f"--remat={policy}"], policy)
        assert r, err
        plans[policy] = (peak(r), cost(r))
    none, full = plans[",".join(["none"] * LAYERS)], plans[",".join(["full"] * LAYERS)]
    print(f"{label}: {len(plans)} assignments; activations {none[0]} (none) to {full[0]} "
          f"(full) bytes")
    for step in range(1, 6):
        budget = full[0] + (none[0] - full[0]) * step // 6
        best = min(c for p, c in plans.values() if p <= budget)
        r, err = report(flags + ["--remat=budget", f"--remat-budget={budget}"], f"b{step}")
        if not r:
            check(f"{label}: budget {budget}", False, err.strip())
            continue
        chosen = r["remat"]
        check(f"{label}: budget {budget}: the choice fits", peak(r) <= budget,
              f"{chosen}: {peak(r)} bytes")
        check(f"{label}: budget {budget}: the choice costs the brute-force optimum",
              cost(r) == best, f"{cost(r):.0f} = {best:.0f}")
        # Strictly less than full wherever a cheaper assignment fits (just
        # above full's peak, none may: a pipeline's first stage keeps every
        # in-flight micro-batch's saved values).
        if best < full[1]:
            check(f"{label}: budget {budget}: less recomputation than full",
                  cost(r) < full[1], f"{cost(r):.0f} < {full[1]:.0f}")
    below = full[0] - 1
    r, err = report(flags + ["--remat=budget", f"--remat-budget={below}"], "below")
    check(f"{label}: a budget below full's peak is refused with that peak",
          r is None and f"smallest activation peak any policy reaches, {full[0]} bytes" in err,
          err.strip())
check.finish()
