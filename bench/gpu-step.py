#!/usr/bin/env python3
"""Step time and MFU of Loom's cuda backend on one GPU, with the host
backend's step time on the same machine beside it (one process; the host
with all its cores), for examples/gpt.mlir and a GPT-2-small-sized model
from the generator (GPT-2 small's 124M parameters: 12 x 768, its 50,257
tokens). MFU is the model's FLOPs per step (loomc --report-json: its
matmuls and attention, with no recomputation, as --remat=none compiles)
over the step time and the GPU's dense peak in the cluster description:
fp32, tf32 (LOOMRT_CUDA_TF32=1, where cuBLAS may use tensor cores), and
bf16 (--precision=bf16: cuBLAS's bf16 GEMM with f32 compute and the fused
attention) against the bf16 peak.

    python3 bench/gpu-step.py --loomc build/bin/loomc --cluster clusters/h100-8x-ib.json -o results.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..")


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def measure(exe, steps, env):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = run([exe, "--steps", str(steps), "--log-every", "1000000",
                   "--metrics", metrics], env)
        rows = [json.loads(line) for line in open(metrics)]
    # The first steps warm the caching allocator and cuBLAS up.
    skip = min(3, len(rows) - 1)
    tokens = [r["tokens_per_s"] for r in rows[skip:]]
    return {"tokens_per_s": statistics.median(tokens),
            "peak_bytes": rows[-1]["peak_bytes"],
            "first_loss": rows[0]["loss"], "last_loss": rows[-1]["loss"],
            "banner": [l for l in out.splitlines() if l.startswith("loom:")]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomc", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    cluster = json.load(open(args.cluster))
    tmp = tempfile.mkdtemp(prefix="loom-gpu-bench-")
    gen = [sys.executable, os.path.join(root, "tools", "loom-gen", "loom-gen.py")]
    gpt2 = os.path.join(tmp, "gpt2-small.mlir")
    run(gen + ["--layers", "12", "--d-model", "768", "--heads", "12",
               "--context", "512", "--vocab", "50257", "--batch", "8",
               "--name", "gpt2_small", "-o", gpt2])
    models = {"examples/gpt.mlir": os.path.join(root, "examples", "gpt.mlir"),
              "gpt2-small (124M: 12 x 768, vocab 50257, context 512, batch 8)": gpt2}
    results = {"cluster": cluster["name"], "models": {}}
    for label, mlir in models.items():
        report = os.path.join(tmp, "report.json")
        run([args.loomc, mlir, "--remat=none", "--report-json=" + report])
        rep = json.load(open(report))
        flops, tokens = rep["flops_per_step"], rep["tokens_per_step"]
        entry = {"flops_per_step": flops, "tokens_per_step": tokens}
        # MFU counts the model's FLOPs, not a recomputation's (none here).
        flops -= rep["recompute_flops_per_step"]
        entry["flops_per_step"] = flops
        for target in ("host", "cuda"):
            exe = os.path.join(tmp, f"model-{target}")
            run([args.loomc, mlir, f"--target={target}", "--remat=none", "-o", exe])
            variants = [("fp32", {}, exe)]
            if target == "cuda":
                bf16 = exe + "-bf16"
                run([args.loomc, mlir, "--target=cuda", "--remat=none",
                     "--precision=bf16", "-o", bf16])
                variants += [("tf32", {"LOOMRT_CUDA_TF32": "1"}, exe), ("bf16", {}, bf16)]
            for precision, extra, exe in variants:
                env = dict(os.environ, **extra)
                m = measure(exe, args.steps if target == "cuda" else 3, env)
                step_s = tokens / m["tokens_per_s"]
                m["step_ms"] = 1e3 * step_s
                if target == "cuda":
                    peak = cluster["peak_flops"][precision]
                    m["mfu"] = flops / step_s / peak
                entry[f"{target}-{precision}"] = m
                print(f"{label}: {target} {precision}: {m['step_ms']:.2f} ms/step"
                      + (f", MFU {100 * m['mfu']:.2f}% of {precision} peak"
                         if "mfu" in m else ""), flush=True)
        entry["cuda_speedup_over_host"] = (entry["host-fp32"]["step_ms"] /
                                           entry["cuda-fp32"]["step_ms"])
        entry["bf16_speedup_over_fp32"] = (entry["cuda-fp32"]["step_ms"] /
                                           entry["cuda-bf16"]["step_ms"])
        results["models"][label] = entry
    with open(args.output, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
