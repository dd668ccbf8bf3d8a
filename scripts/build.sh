#!/usr/bin/env bash
# Configures and builds Loom into build/ (Ninja, shared libMLIR; ccache when
# present). The cuda backend is built where nvcc, cuBLAS and NCCL are found
# (LOOM_CUDA=ON requires them, OFF skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
LLVM_PREFIX=$(llvm-config-22 --prefix)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
    -DPython3_EXECUTABLE=/usr/bin/python3 -DLOOM_CUDA="${LOOM_CUDA:-AUTO}" \
    "${launcher[@]}"
fi
ninja -C build -j"${JOBS:-$(nproc)}"
