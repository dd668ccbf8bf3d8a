#!/usr/bin/env bash
# The GPU tests (ctest label "gpu"): exits 77, the skip code, saying why,
# where no CUDA device is present or the cuda backend was not built.
set -uo pipefail
build=${1:?usage: run-gpu-tests.sh BUILD_DIR}
if [ ! -x "$build/bin/loomrt-cuda-probe" ]; then
  echo "GPU tests skipped: Loom was built without the cuda backend"
  exit 77
fi
if ! reason=$("$build/bin/loomrt-cuda-probe"); then
  echo "GPU tests skipped: $reason"
  exit 77
fi
echo "$reason"
exec "$(llvm-config-22 --prefix)/bin/lit" -sv "$build/test/gpu"
