#!/usr/bin/env python3
"""One training step of examples/gpt.mlir (AdamW, clipping, schedule), one
process and one thread, against the same model in PyTorch eager on the CPU,
timed side by side in one run, and the achieved GFLOP/s against this
machine's single-thread OpenBLAS sgemm rate.

    OPENBLAS_NUM_THREADS=1 python3 bench/step-vs-pytorch.py --loomc build/bin/loomc
"""

import argparse
import ctypes
import ctypes.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

def blas_core():
    """The OpenBLAS core type for this CPU, as the Loom runtime chooses it
    when OpenBLAS misdetects a virtual CPU; PyTorch gets the same."""
    flags = open("/proc/cpuinfo").read().split()
    return "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else ""


os.environ["OPENBLAS_NUM_THREADS"] = "1"
if blas_core():
    os.environ.setdefault("OPENBLAS_CORETYPE", blas_core())
os.environ["OMP_NUM_THREADS"] = "1"
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "runtime"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gpt_torch import torch_loss  # noqa: E402
from loomtest import read_safetensors, write_safetensors  # noqa: E402

L, D, H, FF, V, T, B = 4, 128, 4, 512, 256, 64, 8


def sgemm_gflops(n=1024, reps=5):
    """OpenBLAS's cblas_sgemm on one thread, called directly."""
    blas = ctypes.CDLL(ctypes.util.find_library("openblas"))
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    ptr = lambda x: x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    f = ctypes.c_float
    # CblasRowMajor = 101, CblasNoTrans = 111.
    call = lambda: blas.cblas_sgemm(101, 111, 111, n, n, n, f(1.0), ptr(a), n,
                                    ptr(b), n, f(0.0), ptr(c), n)
    call()
    best = min(timed(call) for _ in range(reps))
    return 2 * n ** 3 / best / 1e9


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loomc", required=True)
    p.add_argument("--steps", type=int, default=20, help="steps per round")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="loom-bench-")
    exe = os.path.join(work, "gpt")
    subprocess.run([a.loomc, os.path.join(here, "..", "examples", "gpt.mlir"), "-o", exe],
                   check=True)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    labels = rng.integers(0, V, (B, T)).astype(np.int32)
    inputs = os.path.join(work, "inputs.safetensors")
    write_safetensors(inputs, {"tokens": tokens, "labels": labels})
    metrics = os.path.join(work, "metrics.jsonl")
    exported = os.path.join(work, "init.safetensors")
    # The initial weights of the Loom run, for PyTorch.
    subprocess.run([exe, "--steps", "0", "--export", exported], check=True,
                   capture_output=True)
    def loom_round():
        subprocess.run([exe, "--steps", str(a.steps), "--inputs", inputs, "--metrics",
                        metrics, "--log-every", "1000000"], check=True,
                       capture_output=True)
        rows = [json.loads(line) for line in open(metrics)]
        return statistics.median(B * T / r["tokens_per_s"] for r in rows[2:])

    w = {k: torch.tensor(v.copy(), requires_grad=True)
         for k, v in read_safetensors(exported).items()}
    no_decay = [k for k in w if w[k].dim() == 1 or k.startswith(("ln", "b_"))]
    opt = torch.optim.AdamW([{"params": [w[k] for k in w if k not in no_decay],
                              "weight_decay": 0.1},
                             {"params": [w[k] for k in no_decay], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    def step():
        opt.zero_grad()
        loss = torch_loss(w, tokens, labels, heads=H)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()

    def torch_round():
        times = [timed(step) for _ in range(a.steps)]
        return statistics.median(times[2:])

    # Alternate the two so that both see the same machine; a shared machine
    # is noisy, so each side's best round is reported.
    loom_rounds, eager_rounds = [], []
    for _ in range(a.rounds):
        loom_rounds.append(loom_round())
        eager_rounds.append(torch_round())
    loom, eager = min(loom_rounds), min(eager_rounds)

    params = sum(v.numel() for v in w.values())
    flops = B * T * (6 * params + 12 * L * D * T)
    gemm = sgemm_gflops()
    print(f"examples/gpt.mlir: {params} parameters, batch {B}x{T}, "
          f"{flops / 1e9:.2f} GFLOP per step (6N + 12LDT per token)")
    print(f"loom          {loom * 1e3:8.1f} ms/step  {B * T / loom:8.0f} tok/s  "
          f"{flops / loom / 1e9:6.1f} GFLOP/s")
    print(f"pytorch eager {eager * 1e3:8.1f} ms/step  {B * T / eager:8.0f} tok/s  "
          f"{flops / eager / 1e9:6.1f} GFLOP/s")
    print(f"speed-up of loom over pytorch eager: {eager / loom:.2f}x "
          f"(best of {a.rounds} alternating rounds of {a.steps} steps each)")
    print(f"single-thread OpenBLAS sgemm (1024^3): {gemm:.1f} GFLOP/s; "
          f"loom reaches {flops / loom / 1e9 / gemm * 100:.0f}% of it")


if __name__ == "__main__":
    main()
