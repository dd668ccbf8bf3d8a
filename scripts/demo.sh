#!/usr/bin/env bash
# The main job, as far as Loom goes today: installs, builds, then compiles the
# example GPT (examples/gpt.mlir) into its training step (forward, backward,
# AdamW with warm-up, cosine decay and clipping) and prints what it made.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
out=build/gpt.step.mlir
echo "== compiling examples/gpt.mlir with the Loom pipeline"
build/bin/loom-opt examples/gpt.mlir --loom-pipeline \
  --mlir-pass-statistics --mlir-timing -o "$out" 2>&1
echo "== training step written to $out:"
echo "   $(grep -c 'train.param' "$out") parameter tensors," \
     "$(grep -c 'train.state' "$out") optimizer state tensors," \
     "$(grep -c 'train.repeat' "$out") train.repeat (forward and backward of the 4 layers)," \
     "$(wc -l < "$out") lines"
