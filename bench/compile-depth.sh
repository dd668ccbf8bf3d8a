#!/usr/bin/env bash
# Compile time and IR size of the Loom pipeline against depth: GPT-3 175B
# widths at 2, 12, 48 and 96 layers. With the layers one train.repeat, both
# stay flat. Usage: bench/compile-depth.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
printf "%8s %12s %14s %14s\n" layers ir_lines ir_bytes pipeline_ms
for layers in 2 12 48 96; do
  python3 tools/loom-gen/loom-gen.py --preset 175b --layers "$layers" > /tmp/loom-depth.mlir
  start=$(date +%s%N)
  for _ in 1 2 3 4 5; do
    "$build/bin/loom-opt" /tmp/loom-depth.mlir --loom-pipeline -o /tmp/loom-depth.out.mlir
  done
  ms=$(( ($(date +%s%N) - start) / 5000000 ))
  printf "%8d %12d %14d %14d\n" "$layers" "$(wc -l < /tmp/loom-depth.out.mlir)" \
    "$(wc -c < /tmp/loom-depth.out.mlir)" "$ms"
done
