#!/usr/bin/env python3
"""Gradient accumulation against the single big batch: the generated GPT
trained 3 AdamW steps on one fixed global batch of 8 sequences, with M = 1,
2, 4, 8 micro-batches, tokens masked very unevenly across micro-batches
(the first micro-batches almost entirely ignored). Each loss within
1e-5 + 1e-4 |loss| and each final parameter within a relative norm error
of 1e-4 of the M = 1 run; a per-micro-batch normalisation would miss by far
more. The arena peak (activations) that loomc reports must fall as M grows
for a model whose activations dominate its parameters (context 64, width
16); for parameter-heavy models the per-parameter gradient accumulators
outweigh the saving."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from loomtest import Program


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loomc", required=True)
    p.add_argument("--loom-gen", required=True)
    a = p.parse_args()
    text = subprocess.run([sys.executable, a.loom_gen, "--layers", "2", "--d-model", "16",
                           "--heads", "2", "--ffn", "32", "--vocab", "32", "--context", "8",
                           "--batch", "8", "--warmup", "1", "--total", "10", "--lr", "3e-3"],
                          check=True, capture_output=True, text=True).stdout
    long_context = os.path.join(os.path.dirname(Program(a.loomc, text, "probe").mlir),
                                "context64.mlir")
    with open(long_context, "w") as f:
        f.write(subprocess.run([sys.executable, a.loom_gen, "--layers", "2", "--d-model", "16",
                                "--heads", "2", "--ffn", "32", "--vocab", "32", "--context",
                                "64", "--batch", "8"], check=True, capture_output=True,
                               text=True).stdout)
    rng = np.random.default_rng(11)
    tokens = rng.integers(0, 32, (8, 8)).astype(np.int32)
    labels = rng.integers(0, 32, (8, 8)).astype(np.int32)
    labels[0, 1:] = -100          # micro-batch 0 of M=8: one labelled token
    labels[1, :6] = -100
    labels[2:4, ::2] = -100
    inputs = {"tokens": tokens, "labels": labels}
    results, peaks, measured = {}, {}, {}
    failures = []
    for m in (1, 2, 4, 8):
        prog = Program(a.loomc, text, f"gpt_m{m}")
        # Rebuild with the micro-batch count (Program compiles with defaults).
        exe = prog.exe
        subprocess.run([a.loomc, prog.mlir, "-o", exe, "--micro-batches", str(m)],
                       check=True)
        rows, params = prog.run(steps=3, inputs=inputs)
        results[m] = ([r["loss"] for r in rows], params)
        subprocess.run([a.loomc, long_context, "--micro-batches", str(m),
                        "--report-json", exe + ".json", "-o", exe + "-long"], check=True)
        peaks[m] = json.load(open(exe + ".json"))["memory_per_rank_bytes"]["activations_peak"]
        # Measured: the runtime's allocator high-water mark over a step.
        metrics = exe + "-long.jsonl"
        subprocess.run([exe + "-long", "--steps", "1", "--metrics", metrics],
                       check=True, capture_output=True)
        measured[m] = json.loads(open(metrics).readline())["peak_bytes"]
        print(f"M={m}: losses {', '.join(f'{l:.7f}' for l in results[m][0])}; "
              f"context-64 model: reported arena peak {peaks[m]} bytes, "
              f"measured peak {measured[m]} bytes")
    base_losses, base_params = results[1]
    for m in (2, 4, 8):
        losses, params = results[m]
        for step, (got, want) in enumerate(zip(losses, base_losses)):
            if abs(got - want) > 1e-5 + 1e-4 * abs(want):
                failures.append(f"M={m} step {step}: loss {got:.7f} vs {want:.7f}")
        worst = max(np.linalg.norm(params[k].astype(np.float64) - base_params[k]) /
                    max(np.linalg.norm(base_params[k].astype(np.float64)), 1e-30)
                    for k in base_params)
        print(f"M={m}: worst final-parameter relative error {worst:.2e}")
        if worst > 1e-4:
            failures.append(f"M={m}: final parameters differ by {worst:.2e}")
    if not (peaks[1] > peaks[2] > peaks[4] > peaks[8]):
        failures.append(f"the reported arena peak does not fall with M: {peaks}")
    if not (measured[1] > measured[2] > measured[4] > measured[8]):
        failures.append(f"the measured peak does not fall with M: {measured}")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
