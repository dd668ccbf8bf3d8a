#!/usr/bin/env bash
# The pipeline schedules side by side on the 96-layer GPT-3 175B model
# (loom-gen preset) cut into 8 stages by dist-pipeline-partition: each
# schedule's worst simulated bubble with the stages' real costs, and what
# the first stage holds, both as ratios to GPipe's, for 8, 32 and 64
# micro-batches. Interleaving uses 2 virtual stages per rank.
set -euo pipefail
cd "$(dirname "$0")/.."
LOOMC=${LOOMC:-build/bin/loomc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tools/loom-gen/loom-gen.py --preset 175b --batch 64 -o "$tmp/175b.mlir"
printf '%-4s %-12s %8s %12s %10s %14s\n' m schedule bubble "vs gpipe" "stage-0" "held vs gpipe"
for m in 8 32 64; do
  for schedule in gpipe 1f1b interleaved zb; do
    v=1
    [ "$schedule" = interleaved ] && v=2
    "$LOOMC" "$tmp/175b.mlir" --mesh pp=8 --micro-batches=$m \
      --schedule=$schedule --virtual-stages=$v --report-json "$tmp/$schedule.json" > /dev/null
  done
  python3 - "$tmp" "$m" <<'PY'
import json, sys
tmp, m = sys.argv[1], sys.argv[2]
runs = {s: json.load(open(f"{tmp}/{s}.json")) for s in ("gpipe", "1f1b", "interleaved", "zb")}
base = runs["gpipe"]
for s, r in runs.items():
    # Interleaved counts half-stage chunks: halve them to compare.
    held = r["peak_activations_per_rank"][0] / (2 if s == "interleaved" else 1)
    print(f"{m:<4} {s:<12} {100 * r['bubble_fraction']:7.1f}% "
          f"{r['bubble_fraction'] / base['bubble_fraction']:12.2f} "
          f"{held:10.1f} {held / base['peak_activations_per_rank'][0]:14.2f}")
PY
done
