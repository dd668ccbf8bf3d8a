#!/usr/bin/env bash
# Configures and builds Loom with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-san/ (or $1): loom-opt, loomc, the
# runtime and the test programs, stopping at the first report. loomc there
# builds its programs sanitized, against this build's runtime, so a parity
# run sanitizes the runtime too. scripts/test-sanitized.sh runs the tests
# against it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-san}
LLVM_PREFIX=$(llvm-config-22 --prefix)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$dir/build.ninja" ]; then
  # -O1 keeps the sanitized suite fast enough for CI while keeping stacks
  # readable; the cuda backend is not sanitized (nvcc), so it is left out.
  cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" -DCMAKE_C_FLAGS_RELEASE="-O1 -g1" \
    -DLLVM_ENABLE_ASSERTIONS=ON \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
    -DPython3_EXECUTABLE=/usr/bin/python3 -DLOOM_CUDA=OFF -DLOOM_SANITIZE=ON \
    "${launcher[@]}"
fi
ninja -C "$dir" -j"${JOBS:-$(nproc)}" loom-opt loomc loom-schedule loomrt_host \
  loomrt-calibrate loomrt-collectives-test loomrt-pipeline-test loom-pmpi-count \
  loomrt-unit-test LoomTestKernelDialect \
  loom-docs
