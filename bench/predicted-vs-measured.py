#!/usr/bin/env python3
"""Predicted against measured step time on the host backend: calibrates
this machine (loomrt-calibrate), asks loomc --report for the predicted step
time of each example on that description, runs the example and compares.

    python3 bench/predicted-vs-measured.py --build build
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(here, "..", "build"))
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    bin_ = os.path.join(a.build, "bin")
    work = tempfile.mkdtemp(prefix="loom-predict-")
    host = os.path.join(work, "host.json")
    subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                    "-n", "2", os.path.join(bin_, "loomrt-calibrate"), "-o", host], check=True)
    desc = json.load(open(host))
    print(f"calibrated: sgemm {desc['peak_flops']['fp32'] / 1e9:.1f} GFLOP/s, "
          f"memory {desc['memory_bandwidth'] / 1e9:.1f} GB/s")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for example in ("mlp", "gpt", "parity"):
        model = os.path.join(here, "..", "examples", example + ".mlir")
        exe = os.path.join(work, example)
        report = os.path.join(work, example + ".json")
        subprocess.run([os.path.join(bin_, "loomc"), model, "-o", exe, "--report-json", report,
                        "--cluster", host], check=True)
        predicted = json.load(open(report))["predicted_step_seconds"]
        metrics = os.path.join(work, example + ".jsonl")
        subprocess.run([exe, "--steps", str(a.steps), "--metrics", metrics, "--log-every",
                        "1000000"], check=True, capture_output=True, env=env)
        rows = [json.loads(line) for line in open(metrics)]
        tokens = json.load(open(report))["tokens_per_step"]
        measured = statistics.median(tokens / r["tokens_per_s"] for r in rows[2:])
        print(f"{example:8s} predicted {predicted * 1e3:9.3f} ms  measured "
              f"{measured * 1e3:9.3f} ms  measured/predicted {measured / predicted:6.2f}")


if __name__ == "__main__":
    main()
