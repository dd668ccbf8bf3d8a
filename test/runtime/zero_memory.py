#!/usr/bin/env python3
"""What ZeRO saves, measured by the operating system: a GPT of 4 layers,
width 512, context 16 and batch 4 (loom-gen, 12.7M parameters: model states
of 204 MB per rank without ZeRO, activations of a few MB), compiled for
dp=4 with --zero=1, 2 and 3 and run for 2 steps.

- The report's per-rank parameters, gradients and optimizer state follow
  the formulas (P+G)Ψ + KΨ/N, PΨ + (G+K)Ψ/N and (P+G+K)Ψ/N.
- The runtime allocator's high-water mark equals the report's total (model
  states and the arena's activations) within 1 KiB at every stage.
- The process's resident high-water mark (getrusage, on rank 0) falls from
  stage to stage by what the report's total falls, within 5% of the model
  states at stage 1 (skipped under the sanitizers, whose allocator adds
  shadow memory to every allocation).

Stage 0 is not compared: its gradients are all-reduced in buckets whose
staging buffers the runtime allocates outside the plan the report reads."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import MPIRUN, RUN_ENV, Checks  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-zero-memory-")
model = os.path.join(work, "gpt.mlir")
subprocess.run([sys.executable, args.loom_gen, "--layers", "4", "--d-model", "512",
                "--heads", "4", "--context", "16", "--vocab", "256", "--batch", "4",
                "-o", model], check=True)
SANITIZED = "ASAN_OPTIONS" in os.environ
N = 4
check = Checks()

report, peak, resident = {}, {}, {}
PRECISIONS = {"fp32": ["--precision=fp32"], "bf16": ["--precision=bf16"],
              "bf16-grads": ["--precision=bf16", "--grad-precision=bf16"]}
for precision, flags in PRECISIONS.items():
    for stage in (1, 2, 3):
        key = stage if precision == "fp32" else (precision, stage)
        exe = os.path.join(work, f"zero{stage}-{precision}")
        subprocess.run([args.loomc, model, "--mesh", f"dp={N}", f"--zero={stage}", *flags,
                        "--report-json", exe + ".json", "-o", exe],
                       check=True)
        report[key] = json.load(open(exe + ".json"))["memory_per_rank_bytes"]
        metrics = exe + ".%r.jsonl"
        subprocess.run(MPIRUN + ["-n", str(N), exe, "--steps", "2", "--metrics", metrics,
                                 "--timeout", "120"],
                       check=True, capture_output=True, env=RUN_ENV)
        row = json.loads(open(metrics.replace("%r", "0")).read().splitlines()[-1])
        peak[key], resident[key] = row["peak_bytes"], row["max_rss_bytes"]

psi = report[3]["parameters"] * N // 4
formulas = {1: (4 * psi, 4 * psi, 8 * psi // N), 2: (4 * psi, 4 * psi // N, 8 * psi // N),
            3: (4 * psi // N, 4 * psi // N, 8 * psi // N)}
total = {}
for stage in (1, 2, 3):
    r = report[stage]
    states = (r["parameters"], r["gradients"], r["optimizer_state"])
    check(f"ZeRO-{stage}: the report's parameters, gradients and optimizer state",
          states == formulas[stage], f"{states} vs {formulas[stage]} bytes")
    total[stage] = sum(states) + r["activations_peak"]
    print(f"ZeRO-{stage}: reported {total[stage]} bytes ({sum(states)} of model states), "
          f"allocator peak {peak[stage]}, resident high-water {resident[stage]}")
    check(f"ZeRO-{stage}: the allocator's peak is the report's total",
          abs(peak[stage] - total[stage]) <= 1024, f"{peak[stage]} vs {total[stage]}")

bound = 0.05 * sum(formulas[1])
check("the model states dominate", sum(formulas[1]) > 4 * report[1]["activations_peak"],
      f"{sum(formulas[1])} of model states, {report[1]['activations_peak']} of activations")
if not SANITIZED:
    for a, b in ((1, 2), (2, 3)):
        want = total[a] - total[b]
        got = resident[a] - resident[b]
        check(f"ZeRO-{a} to ZeRO-{b}: the resident high-water falls as the report says",
              abs(got - want) <= bound,
              f"{got} vs {want} bytes (bound {bound:.0f})")

# bf16: P = 2 (the bf16 copies, gathered whole below stage 3), G = 4 (f32
# gradients), K = 4 + 8 (f32 masters, stored as blocks from stage 1, and
# AdamW's moments); the allocator's peak is the report's total, now with
# the f32 scratch the bf16 kernels compute on (reserved once, counted by the
# report); the resident high-water falls from stage to stage as the total.
keys = ("parameters", "gradients", "master_parameters", "optimizer_state")
# --grad-precision=bf16: G = 2 (bf16 gradients, widened as the update
# reads them, in the scratch).
for precision, G in (("bf16", 4), ("bf16-grads", 2)):
    bf16_formulas = {1: (2 * psi, G * psi, 4 * psi // N, 8 * psi // N),
                     2: (2 * psi, G * psi // N, 4 * psi // N, 8 * psi // N),
                     3: (2 * psi // N, G * psi // N, 4 * psi // N, 8 * psi // N)}
    bf16_total = {}
    for stage in (1, 2, 3):
        r = report[(precision, stage)]
        states = tuple(r[k] for k in keys)
        check(f"{precision} ZeRO-{stage}: the report's parameters, gradients, masters and "
              "optimizer state", states == bf16_formulas[stage],
              f"{states} vs {bf16_formulas[stage]} bytes")
        bf16_total[stage] = sum(states) + r["activations_peak"] + r["bf16_scratch"]
        got = peak[(precision, stage)]
        print(f"{precision} ZeRO-{stage}: reported {bf16_total[stage]} bytes ({sum(states)} of "
              f"model states, {r['bf16_scratch']} of bf16 scratch), allocator peak {got}, "
              f"resident high-water {resident[(precision, stage)]}")
        check(f"{precision} ZeRO-{stage}: the allocator's peak is the report's total",
              abs(got - bf16_total[stage]) <= 1024, f"{got} vs {bf16_total[stage]}")
    if not SANITIZED:
        bound = 0.05 * sum(bf16_formulas[1])
        for a, b in ((1, 2), (2, 3)):
            want = bf16_total[a] - bf16_total[b]
            got = resident[(precision, a)] - resident[(precision, b)]
            check(f"{precision} ZeRO-{a} to ZeRO-{b}: the resident high-water falls as the "
                  "report says", abs(got - want) <= bound,
                  f"{got} vs {want} bytes (bound {bound:.0f})")

check.finish()
