#!/usr/bin/env python3
"""bf16 mixed precision through loomc, on one rank.

- Master weights: w = 1 everywhere, its gradient a constant g = bf16(1e-3),
  below half of bf16's spacing at 1.0 (2^-8): a bf16 weight would round
  1 - g back to 1 and never move. After 20 SGD steps at learning rate 1,
  the exported weight (the f32 master) is 1 - 20 g, and so is the master
  of a run that continues from it (--init-from) one step further, less g.
  The export is F32.
- Training: examples/gpt.mlir on Debian's word list, 50 steps in bf16
  against fp32 from the same initialization: every step's loss within 1e-2
  relative, and the bf16 arena below 3/4 of the fp32 one (activations are
  stored in 2 bytes, not 4).
- One mechanism: the model written in bf16 (every f32 tensor type bf16)
  trains without a flag, with the losses of the f32 model under
  --precision=bf16 bit for bit; --precision=fp32 on it is refused.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

from loomtest import Checks, Program, bf16_round, read_safetensors

MASTER = """train.model @master attributes {optimizer = #train.sgd<>,
    schedule = #train.schedule<lr = 1.0>} {
  %w = train.param "w" init(#train.init<ones>) : tensor<64xf32>
  %s = train.scale %w by 1.0e-3 : tensor<64xf32>
  %l = train.reduce sum %s dims [0] : tensor<64xf32>
  train.output loss(%l : tensor<f32>)
}
"""


def dtypes(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


def losses(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loomc", required=True)
    ap.add_argument("--gpt", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    check = Checks()

    # Master weights.
    g = float(bf16_round(1e-3))
    check("the update is below half of bf16's spacing at 1.0",
          bf16_round(np.float32(1) - np.float32(g)) == 1.0, f"g = {g}")
    program = Program(args.loomc, MASTER, "master", ["--precision=bf16"])
    rows, exported = program.run(steps=20)
    w = exported["w"].astype(np.float64)
    want = np.float32(1)
    for _ in range(20):
        want = np.float32(want - np.float32(g))
    check("the f32 master moves by every update", np.all(w == want),
          f"w = {w[0]!r}, 1 - 20 g in f32 = {want!r}")
    check("the export holds the f32 masters",
          dtypes(os.path.join(program.dir, "export.safetensors")) == {"w": "F32"},
          str(dtypes(os.path.join(program.dir, "export.safetensors"))))
    _, again = program.run(steps=1, params={"w": exported["w"]})
    check("--init-from reads the f32 masters",
          np.all(again["w"] == np.float32(want - np.float32(g))),
          f"w = {again['w'][0]!r}")

    # Training against fp32.
    work = tempfile.mkdtemp(prefix="loom-bf16-")
    runs = {}
    for name, flags in (("fp32", []), ("bf16", ["--precision=bf16"])):
        exe = os.path.join(work, name)
        subprocess.run([args.loomc, args.gpt, "-o", exe, *flags], check=True)
        metrics = os.path.join(work, name + ".jsonl")
        subprocess.run([exe, "--steps", "50", "--data", args.data,
                        "--log-every", "0", "--metrics", metrics],
                       check=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
                       stdout=subprocess.DEVNULL)
        runs[name] = losses(metrics)
    a = np.array([r["loss"] for r in runs["fp32"]])
    b = np.array([r["loss"] for r in runs["bf16"]])
    worst = float(np.max(np.abs(b - a) / np.abs(a)))
    check("50 bf16 steps track fp32 within 1e-2 relative", len(a) == 50 and worst <= 1e-2,
          f"worst {worst:.2e}, fp32 {a[0]:.4f} -> {a[-1]:.4f}, bf16 {b[0]:.4f} -> {b[-1]:.4f}")
    check("the training loss falls", b[-1] < b[0] - 1.0, f"{b[0]:.4f} -> {b[-1]:.4f}")
    arenas = (runs["fp32"][0]["arena_bytes"], runs["bf16"][0]["arena_bytes"])
    check("the bf16 arena is below 3/4 of the fp32 arena", arenas[1] < 0.75 * arenas[0],
          f"fp32 {arenas[0]}, bf16 {arenas[1]} bytes")

    # One mechanism.
    with open(args.gpt) as f:
        text = f.read().replace("xf32>", "xbf16>")
    written = os.path.join(work, "gpt-bf16.mlir")
    with open(written, "w") as f:
        f.write(text)
    exe = os.path.join(work, "written")
    subprocess.run([args.loomc, written, "-o", exe], check=True)
    metrics = os.path.join(work, "written.jsonl")
    subprocess.run([exe, "--steps", "5", "--data", args.data, "--log-every", "0",
                    "--metrics", metrics], check=True,
                   env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), stdout=subprocess.DEVNULL)
    c = [r["loss"] for r in losses(metrics)]
    check("a model written in bf16 trains as the f32 one with --precision=bf16",
          c == list(b[:5]), f"{c} vs {list(b[:5])}")
    refused = subprocess.run([args.loomc, written, "-o", exe, "--precision=fp32"],
                             capture_output=True, text=True)
    check("--precision=fp32 on a bf16 model is refused",
          refused.returncode == 1 and "declares bf16 parameters" in refused.stderr,
          refused.stderr.strip())
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
