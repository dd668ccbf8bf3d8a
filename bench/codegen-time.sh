#!/usr/bin/env bash
# Compile time of loomc through code generation (the rank program, the
# memory plan, the lowering to EmitC and the C++ it prints) on the 175B
# preset at 96 layers, pp=8 x dp=2 x tp=4 with 16 micro-batches, for a
# loomc and a baseline loomc side by side (e.g. one built from an earlier
# commit): best of 5 runs each, and their ratio.
# Usage: bench/codegen-time.sh LOOMC [BASELINE_LOOMC]
set -euo pipefail
cd "$(dirname "$0")/.."
loomc=${1:?usage: bench/codegen-time.sh LOOMC [BASELINE_LOOMC]}
baseline=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 tools/loom-gen/loom-gen.py --preset 175b --layers 96 --batch 64 > "$work/model.mlir"
best() {
  local best_ms=""
  for _ in 1 2 3 4 5; do
    local start end ms
    start=$(date +%s%N)
    "$1" "$work/model.mlir" --mesh pp=8,dp=2,tp=4 --micro-batches=16 --emit=cpp -o "$work/out.cpp"
    end=$(date +%s%N)
    ms=$(( (end - start) / 1000000 ))
    if [ -z "$best_ms" ] || [ "$ms" -lt "$best_ms" ]; then best_ms=$ms; fi
  done
  echo "$best_ms"
}
ms=$(best "$loomc")
printf "%-40s %8s ms  %8s lines of C++\n" "$loomc" "$ms" "$(wc -l < "$work/out.cpp")"
if [ -n "$baseline" ]; then
  base_ms=$(best "$baseline")
  printf "%-40s %8s ms  %8s lines of C++\n" "$baseline" "$base_ms" "$(wc -l < "$work/out.cpp")"
  python3 -c "print(f'ratio (loomc / baseline): {$ms / $base_ms:.2f}')"
fi
