#!/usr/bin/env bash
# The main job: installs, builds, compiles the example GPT (examples/gpt.mlir:
# 4 layers, d_model 128, byte vocabulary) with loomc and trains it on the CPU
# on Debian's word list, printing the plan's report (memory per rank by
# component, communication, FLOPs, the step time predicted on an H100 node),
# then progress (loss, learning rate, tokens/s, peak memory, bytes sent,
# held-out loss) and a final summary, on the mesh MESH (default
# pp=2,dp=2,tp=2: a pipeline of 2 stages, each data-parallel over 2 and
# Megatron tensor-parallel over 2, 8 processes launched by mpirun) with
# MICRO_BATCHES micro-batches per step (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MESH=${MESH:-pp=2,dp=2,tp=2}
MICRO_BATCHES=${MICRO_BATCHES:-2}
RANKS=1
for axis in ${MESH//,/ }; do RANKS=$((RANKS * ${axis#*=})); done
echo "== loomc examples/gpt.mlir --mesh $MESH --micro-batches=$MICRO_BATCHES -o build/gpt --report"
build/bin/loomc examples/gpt.mlir --mesh "$MESH" --micro-batches="$MICRO_BATCHES" -o build/gpt \
  --dump-phases=build/gpt-phases --report --cluster clusters/h100-8x-ib.json
echo "   (every phase's IR, the rank program and the generated C++ are in build/gpt-phases/)"
echo "== mpirun -n $RANKS build/gpt --steps ${STEPS:-300} --data /usr/share/dict/american-english --eval-every 50"
mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$RANKS" \
  -x OPENBLAS_NUM_THREADS=1 build/gpt --steps "${STEPS:-300}" \
  --data /usr/share/dict/american-english --eval-every 50 \
  --metrics build/gpt-metrics.jsonl
