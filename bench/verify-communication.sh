#!/usr/bin/env bash
# Time of dist-verify-communication on the 96-layer GPT-3 175B model (loom-gen
# preset, batch 64) as the mesh grows: dp x tp = 64, 256 and 1024 ranks, as
# loomc runs it (all ranks run the same program: one class, one
# representative) and simulating every rank (what a rank-dependent program
# costs: the square of the ranks times the collectives per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
OPT=${LOOM_OPT:-build/bin/loom-opt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tools/loom-gen/loom-gen.py --preset 175b --batch 64 -o "$tmp/175b.mlir"
"$OPT" "$tmp/175b.mlir" --loom-pipeline -o "$tmp/step.mlir"
for mesh in dp=4,tp=16 dp=16,tp=16 dp=64,tp=16; do
  "$OPT" "$tmp/step.mlir" --dist-mesh="mesh=$mesh" --dist-sharding-propagation="preset=auto" \
    --dist-partition --dist-comm-opt -o "$tmp/rank.mlir"
  for every in false true; do
    seconds=$("$OPT" "$tmp/rank.mlir" \
      --dist-verify-communication="every-rank=$every" -o /dev/null \
      --mlir-timing 2>&1 | awk '/DistVerifyCommunication$/ {print $1}')
    echo "verify-communication 175B (96 layers) mesh $mesh every-rank=$every: ${seconds} s"
  done
done
