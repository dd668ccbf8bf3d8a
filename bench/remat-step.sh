#!/usr/bin/env bash
# The rematerialization policies executed side by side: the example GPT
# (4 layers, 834K parameters) on one rank with one BLAS thread, trained for
# STEPS steps with --remat=none, selective and full. Prints each run's
# tokens per second (the median step's) and the runtime's memory
# high-water mark as ratios to none's, with the report's FLOPs per step,
# and checks that every policy ends on none's loss bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
LOOMC=${LOOMC:-build/bin/loomc}
STEPS=${STEPS:-30}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for policy in none selective full; do
  "$LOOMC" examples/gpt.mlir --remat=$policy --report-json "$tmp/$policy.json" \
    -o "$tmp/$policy"
  OPENBLAS_NUM_THREADS=1 "$tmp/$policy" --steps "$STEPS" --log-every "$STEPS" \
    --metrics "$tmp/$policy.jsonl" > "$tmp/$policy.log"
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
runs = {}
for p in ("none", "selective", "full"):
    rows = [json.loads(line) for line in open(f"{tmp}/{p}.jsonl")]
    # Steady state: the median step after the first.
    rates = sorted(r["tokens_per_s"] for r in rows[1:])
    report = json.load(open(f"{tmp}/{p}.json"))
    runs[p] = (rates[len(rates) // 2], max(r["peak_bytes"] for r in rows), rows[-1]["loss"],
               report["flops_per_step"])
base = runs["none"]
print(f"{'policy':<10} {'tok/s':>10} {'vs none':>8} {'peak':>12} {'vs none':>8} "
      f"{'FLOPs/step':>11} {'vs none':>8} {'loss':>10}")
for p, (tps, peak, loss, flops) in runs.items():
    print(f"{p:<10} {tps:10.0f} {tps / base[0]:8.2f} {peak / 2**20:8.2f} MiB "
          f"{peak / base[1]:8.2f} {flops:11.4g} {flops / base[3]:8.2f} {loss:10.4f}")
bad = [p for p, r in runs.items() if r[2] != base[2]]
sys.exit(f"losses differ from none's: {bad}" if bad else 0)
PY
