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
outweigh the saving.

Each micro-batch's backward reads what its forward saved and runs right
after it (train-interleave-micro-batches): for a model with 1,024 tokens
per step, the report's matmul and attention FLOPs are the same for M = 1, 2
and 4 and equal an independent count from the shapes (each layer's
matmuls 2 FLOPs per weight and token forward, 2 more for the layer's own
recomputation in its backward and 4 backward; the tied head 2 + 4;
attention 4 b s^2 h per layer forward, twice, and 2.5 times that
backward), and the total within 0.1% (the accumulators' adds). At a fixed
micro-batch of 8 sequences the reported and the measured arena are the
same for M = 2, 4 and 8, and M = 1's (the whole batch at once) plus at
most the position embedding's gradient and three 64-byte scalars: every
micro-batch gradient is added into its accumulator by the kernel that
makes it (see fixed_micro_batch), here and on the 8-layer width-256 model
at M = 1 and 4."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

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
    failures += flops_check(a) + fixed_micro_batch_check(a) + rms_norm_check(a)
    if not (peaks[1] > peaks[2] > peaks[4] > peaks[8]):
        failures.append(f"the reported arena peak does not fall with M: {peaks}")
    if not (measured[1] > measured[2] > measured[4] > measured[8]):
        failures.append(f"the measured peak does not fall with M: {measured}")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


def generate(a, path, **shape):
    args = [sys.executable, a.loom_gen, "-o", path]
    for k, v in shape.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    subprocess.run(args, check=True)
    return path


def flops_check(a):
    """Matmul and attention FLOPs per step independent of M."""
    L, h, heads, f, V, S, B = 2, 64, 2, 256, 128, 64, 16
    work = tempfile.mkdtemp(prefix="loom-accumulation-")
    model = generate(a, os.path.join(work, "flops.mlir"), layers=L, d_model=h,
                     heads=heads, ffn=f, vocab=V, context=S, batch=B)
    tokens = B * S
    per_layer = h * 3 * h + h * h + h * f + f * h
    failures = []
    # Without recomputation (the default) and with each layer's own (full).
    for remat, again in (("none", 0), ("full", 1)):
        matmul = tokens * ((6 + 2 * again) * L * per_layer + 6 * h * V)
        attention = L * (3.5 + again) * 4 * B * S * S * h
        totals = {}
        for m in (1, 2, 4):
            out = os.path.join(work, f"flops-{remat}-m{m}.json")
            subprocess.run([a.loomc, model, f"--remat={remat}", "--micro-batches", str(m),
                            "--report-json", out], check=True, capture_output=True)
            r = json.load(open(out))
            totals[m] = r["flops_per_step"]
            print(f"--remat={remat} M={m}: matmul FLOPs {r['matmul_flops_per_step']} "
                  f"(count {matmul}), attention {r['attention_flops_per_step']} "
                  f"(count {attention:.0f}), total {r['flops_per_step']}")
            if r["matmul_flops_per_step"] != matmul:
                failures.append(f"{remat} M={m}: matmul FLOPs "
                                f"{r['matmul_flops_per_step']} != {matmul}")
            if r["attention_flops_per_step"] != attention:
                failures.append(f"{remat} M={m}: attention FLOPs "
                                f"{r['attention_flops_per_step']} != {attention:.0f}")
            if abs(totals[m] - totals[1]) > 1e-3 * totals[1]:
                failures.append(f"{remat} M={m}: total FLOPs {totals[m]} vs {totals[1]} at M=1")
    return failures


RMS_MODEL = """
train.model @rms attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.5>} {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<6x6xf32>
  %g = train.param "g" init(#train.init<normal, 1.0>) : tensor<6xf32>
  %h = train.param "h" init(#train.init<normal, 0.5>) : tensor<6x5xf32>
  %x = train.input "x" : tensor<8x6xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x6xf32>, tensor<6x6xf32>
  %n = train.rms_norm %y, %g : tensor<8x6xf32>, tensor<6xf32>
  %z = train.matmul %n, %h : tensor<8x6xf32>, tensor<6x5xf32>
  %l = train.cross_entropy %z, %t : tensor<8x5xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}
"""


def rms_norm_check(a):
    """An RMS norm's gamma gradient is added into its accumulator by the
    norm's kernel (loomrt_rms_norm_grad_accumulate, which the GPT, with
    layer norms, does not reach): M = 2 trains as M = 1 does."""
    rng = np.random.default_rng(5)
    inputs = {"x": rng.standard_normal((8, 6)).astype(np.float32),
              "t": rng.integers(0, 5, 8).astype(np.int32)}
    results = {}
    for m in (1, 2):
        prog = Program(a.loomc, RMS_MODEL, f"rms_m{m}", ("--micro-batches", str(m),
                                                        "--emit=cpp"))
        with open(prog.exe) as f:
            fused = "loomrt_rms_norm_grad_accumulate(" in f.read()
        prog = Program(a.loomc, RMS_MODEL, f"rms_m{m}", ("--micro-batches", str(m)))
        rows, params = prog.run(steps=3, inputs=inputs)
        results[m] = ([r["loss"] for r in rows], params, fused)
    (base, base_params, fused1), (losses, params, fused2) = results[1], results[2]
    worst = max(np.linalg.norm(params[k].astype(np.float64) - base_params[k]) /
                np.linalg.norm(base_params[k].astype(np.float64)) for k in base_params)
    print(f"rms_norm model: M=2 losses {', '.join(f'{l:.7f}' for l in losses)} "
          f"(M=1 {', '.join(f'{l:.7f}' for l in base)}), worst final-parameter relative "
          f"error {worst:.2e}; gamma's gradient accumulated by the kernel: {fused2}")
    failures = []
    if not fused2 or fused1:
        failures.append("rms_norm: loomrt_rms_norm_grad_accumulate is not called at M=2 "
                        "(or is at M=1)")
    if worst > 1e-5 or any(abs(x - y) > 1e-6 + 1e-5 * abs(y) for x, y in zip(losses, base)):
        failures.append(f"rms_norm: M=2 differs from M=1 by {worst:.2e}")
    return failures


def fixed_micro_batch_check(a):
    """The arena at a fixed micro-batch does not grow with M: on a small
    model for M = 1, 2, 4, 8, and on the 8-layer, width-256 model of the
    pipeline-memory test for M = 1 and 4."""
    failures = []
    for remat in ("full", "none"):
        failures += fixed_micro_batch(a, remat, "small", (1, 2, 4, 8), layers=2, d_model=16,
                                      heads=2, ffn=32, vocab=32, context=64)
        failures += fixed_micro_batch(a, remat, "8-layer", (1, 4), layers=8, d_model=256,
                                      heads=4, ffn=1024, vocab=256, context=32)
    return failures


def fixed_micro_batch(a, remat, name, ms, **shape):
    """Each micro-batch's gradients are added into their accumulators by
    the kernels that make them (matmul with beta = 1, embedding_grad, the
    norms' and biases' sums: Megatron-LM's fused accumulation), so M > 1
    holds no gradient of its own beside the accumulators. What differs from
    M = 1 is when the position embedding's gradient exists: at M = 1 it is
    made after the layers' backward (the bytes are the activations' until
    then), at M > 1 its accumulator lives across the micro-batch loop; and
    the micro-batch's loss normalisation keeps three scalars (64 bytes each
    in the arena). That is the whole difference with full recomputation.
    Without recomputation the layers' forward, whose temporaries exceed
    their backward's, also runs beside the accumulators at M > 1 (at M = 1
    before any gradient exists: 1.87 MB more of 36.4 MB on the 8-layer
    model), so there M = 2, 4, 8 are held equal and within a quarter of
    M = 1's."""
    work = tempfile.mkdtemp(prefix="loom-accumulation-")
    h, S = shape["d_model"], shape["context"]
    allowed = S * h * 4 + 3 * 64
    reported, measured, gradients = {}, {}, 0
    for m in ms:
        model = generate(a, os.path.join(work, f"fixed-m{m}.mlir"), batch=8 * m, **shape)
        exe = os.path.join(work, f"fixed-m{m}")
        subprocess.run([a.loomc, model, f"--remat={remat}", "--micro-batches", str(m),
                        "--report-json", exe + ".json", "-o", exe], check=True)
        memory = json.load(open(exe + ".json"))["memory_per_rank_bytes"]
        reported[m], gradients = memory["activations_peak"], memory["gradients"]
        metrics = exe + ".jsonl"
        subprocess.run([exe, "--steps", "1", "--metrics", metrics], check=True,
                       capture_output=True)
        measured[m] = json.loads(open(metrics).readline())["arena_bytes"]
    if remat == "none":
        # The layers' saved values are held once (the micro-batch loop's
        # backward reads the layer loop's directly once interleaved; it
        # used to keep every value the layers compute: 2.4x M = 1's).
        allowed = 0.25 * reported[1]
    print(f"--remat={remat}, {name} model, micro-batch of 8 sequences: reported activations "
          f"{reported}, measured arena {measured}; gradients {gradients} bytes; M > 1 may "
          f"exceed M = 1 by {allowed:.0f} bytes")

    failures = []
    for what, peaks in (("reported activations", reported), ("measured arena", measured)):
        if len({peaks[m] for m in ms if m > 1}) != 1:
            failures.append(f"{remat} {name}: the {what} grows with M at a fixed micro-batch: "
                            f"{peaks}")
        for m in ms[1:]:
            if not peaks[1] <= peaks[m] <= peaks[1] + allowed:
                failures.append(f"{remat} {name}: the {what} at M={m} is not M=1's plus at "
                                f"most {allowed:.0f} bytes: {peaks}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
