#!/usr/bin/env bash
# Time of dist-verify-communication on the 96-layer GPT-3 175B model (loom-gen
# preset, batch 64) as the mesh grows: dp x tp = 64, 256 and 1024 ranks.
# Every rank is simulated (no representative classes yet), so the time grows
# with the square of the ranks times the collectives per rank.
set -euo pipefail
cd "$(dirname "$0")/.."
OPT=${LOOM_OPT:-build/bin/loom-opt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tools/loom-gen/loom-gen.py --preset 175b --batch 64 -o "$tmp/175b.mlir"
for mesh in dp=4,tp=16 dp=16,tp=16 dp=64,tp=16; do
  seconds=$("$OPT" "$tmp/175b.mlir" --loom-pipeline="mesh=$mesh" -o /dev/null \
    --mlir-timing 2>&1 | awk '/DistVerifyCommunication$/ {print $1}')
  echo "verify-communication 175B (96 layers) mesh $mesh: ${seconds} s"
done
