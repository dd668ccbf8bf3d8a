#!/usr/bin/env bash
# The main job: installs, builds, compiles the example GPT (examples/gpt.mlir:
# 4 layers, d_model 128, byte vocabulary) with loomc and trains it on the CPU
# on Debian's word list, printing the plan's report (memory per rank by
# component, communication, FLOPs, the step time predicted on an H100 node),
# then progress (loss, learning rate, tokens/s, peak memory, held-out loss)
# and a final summary. One process: the runtime runs one process per rank,
# but compiled programs have a one-rank mesh until sharding lands.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
echo "== loomc examples/gpt.mlir -o build/gpt --report"
build/bin/loomc examples/gpt.mlir -o build/gpt --dump-phases=build/gpt-phases \
  --report --cluster clusters/h100-8x-ib.json
echo "   (every phase's IR and the generated C++ are in build/gpt-phases/)"
echo "== build/gpt --steps ${STEPS:-300} --data /usr/share/dict/american-english --eval-every 50"
OPENBLAS_NUM_THREADS=1 build/gpt --steps "${STEPS:-300}" \
  --data /usr/share/dict/american-english --eval-every 50 \
  --metrics build/gpt-metrics.jsonl
