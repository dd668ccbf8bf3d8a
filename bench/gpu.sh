#!/usr/bin/env bash
# On a machine with a GPU: builds Loom with the cuda backend, runs the GPU
# tests (ctest label "gpu": the conformance list, examples/gpt.mlir host vs
# cuda, NCCL collectives where several GPUs exist) and the GPU benchmarks
# (step time and MFU on one GPU; NCCL all-reduce bus bandwidth against the
# host ring where several GPUs exist), and writes everything to one file.
#
#   bash bench/gpu.sh [RESULTS_FILE]     (default: gpu-results.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-gpu-results.txt}")
: > "$out"
log() { echo "$@" | tee -a "$out"; }
log "== Loom GPU run, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1 | tee -a "$out"
if [ ! -f build/build.ninja ] || ! grep -q loomrt_cuda build/build.ninja; then
  rm -rf build/CMakeCache.txt
fi
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON \
  -DMLIR_DIR="$(llvm-config-22 --prefix)/lib/cmake/mlir" \
  -DLLVM_EXTERNAL_LIT="$(llvm-config-22 --prefix)/bin/lit" \
  -DPython3_EXECUTABLE=/usr/bin/python3 > /dev/null || { log "configure failed"; exit 1; }
ninja -C build -j"$(nproc)" 2>&1 | tail -3 | tee -a "$out"
status=0
log "== GPU tests"
bash test/gpu/run-gpu-tests.sh build 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
log "== step time and MFU (one GPU)"
gpus=$(build/bin/loomrt-cuda-probe | grep -c '^device ' || true)
name=$(build/bin/loomrt-cuda-probe | head -1)
case "$name" in
  *H200*) cluster=clusters/h200-8x-ib.json ;;
  *A100*) cluster=clusters/a100-80gb-8x-ib.json ;;
  *) cluster=clusters/h100-8x-ib.json ;;
esac
/usr/bin/python3 bench/gpu-step.py --loomc build/bin/loomc --cluster "$cluster" \
  -o "${out%.*}-step.json" 2>&1 | tee -a "$out"
cat "${out%.*}-step.json" >> "$out" 2>/dev/null
if [ "${gpus:-0}" -ge 2 ]; then
  log "== NCCL all-reduce bus bandwidth, $gpus GPUs"
  mpirun --allow-run-as-root --bind-to none -n "$gpus" build/bin/loomrt-allreduce-bench-cuda 2>&1 | tee -a "$out"
else
  log "== one GPU: no multi-rank NCCL benchmark"
fi
log "== done, status $status"
exit $status
