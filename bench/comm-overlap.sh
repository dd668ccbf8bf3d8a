#!/usr/bin/env bash
# Data parallelism with and without overlap, side by side: the example GPT
# (4 layers, 834K parameters) on dp=2 with one BLAS thread per rank,
# compiled with the default (each layer's gradient reduction started in its
# backward iteration and waited for after the loop) and with
# --comm-overlap=false (each wait right after its start: blocking
# collectives), trained for STEPS steps. Prints each run's tokens per second
# (the median step's, rank 0) as a ratio to the blocking run's and checks
# that both end on the same loss bit for bit. Overlap needs a core for each
# rank's communication thread beside its compute: on a machine with fewer
# cores than 2 x the ranks expect no gain.
set -euo pipefail
cd "$(dirname "$0")/.."
LOOMC=${LOOMC:-build/bin/loomc}
STEPS=${STEPS:-30}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores"
for mode in overlap blocking; do
  flag=$([ $mode = overlap ] && echo --comm-overlap=true || echo --comm-overlap=false)
  "$LOOMC" examples/gpt.mlir --mesh dp=2 $flag -o "$tmp/$mode"
  $MPIRUN -n 2 -x OPENBLAS_NUM_THREADS=1 "$tmp/$mode" --steps "$STEPS" \
    --log-every "$STEPS" --metrics "$tmp/$mode.%r.jsonl" > "$tmp/$mode.log"
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
runs = {}
for mode in ("overlap", "blocking"):
    rows = [json.loads(line) for line in open(f"{tmp}/{mode}.0.jsonl")]
    rates = sorted(r["tokens_per_s"] for r in rows[1:])
    runs[mode] = (rates[len(rates) // 2], rows[-1]["loss"])
base = runs["blocking"]
print(f"{'mode':<10} {'tok/s':>10} {'vs blocking':>12} {'loss':>10}")
for mode, (tps, loss) in runs.items():
    print(f"{mode:<10} {tps:10.0f} {tps / base[0]:12.2f} {loss:10.4f}")
sys.exit("losses differ" if runs["overlap"][1] != base[1] else 0)
PY
