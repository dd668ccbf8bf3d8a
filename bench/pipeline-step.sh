#!/usr/bin/env bash
# The pipeline schedules executed side by side: the example GPT (4 layers,
# 834K parameters) on 2 pipeline ranks with 8 micro-batches, trained for
# STEPS steps under GPipe's order, 1F1B, interleaved 1F1B (2 virtual
# stages per rank) and ZB-H1. Prints each run's tokens per second (the
# median step's) and the runtime's memory high-water mark, as ratios to
# GPipe's, and checks that every schedule ends on GPipe's loss. One
# process per pipeline rank: run it where each gets a core of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
LOOMC=${LOOMC:-build/bin/loomc}
STEPS=${STEPS:-30}
MPIRUN=${MPIRUN:-mpirun}
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root --oversubscribe"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-12s %10s %10s %12s %10s %10s\n' schedule tok/s "vs gpipe" peak "vs gpipe" loss
for schedule in gpipe 1f1b interleaved zb; do
  v=1
  [ "$schedule" = interleaved ] && v=2
  "$LOOMC" examples/gpt.mlir --mesh pp=2 --micro-batches=8 \
    --schedule=$schedule --virtual-stages=$v -o "$tmp/$schedule"
  $MPIRUN -n 2 --bind-to none "$tmp/$schedule" --steps "$STEPS" \
    --log-every "$STEPS" --metrics "$tmp/$schedule.%r.jsonl" > "$tmp/$schedule.log"
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
runs = {}
for s in ("gpipe", "1f1b", "interleaved", "zb"):
    rows = [json.loads(line) for line in open(f"{tmp}/{s}.0.jsonl")]
    # Steady state: the median step after the first (which warms caches
    # up); the median shrugs off steps a shared machine slowed down.
    rates = sorted(r["tokens_per_s"] for r in rows[1:])
    tps = rates[len(rates) // 2]
    runs[s] = (tps, max(r["peak_bytes"] for r in rows), rows[-1]["loss"])
base = runs["gpipe"]
for s, (tps, peak, loss) in runs.items():
    print(f"{s:<12} {tps:10.0f} {tps / base[0]:10.2f} {peak / 2**20:10.2f} MiB "
          f"{peak / base[1]:8.2f} {loss:10.4f}")
bad = [s for s, r in runs.items() if abs(r[2] - base[2]) > 1e-5 + 1e-4 * abs(base[2])]
sys.exit(f"losses differ from GPipe's: {bad}" if bad else 0)
PY
