#!/usr/bin/env bash
# Installs, builds and runs every test: the lit suite (which builds and runs
# programs with loomc), then the loom-opt tests again with every invocation
# under --verify-roundtrip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
LIT="$(llvm-config-22 --prefix)/bin/lit"
status=0
"$LIT" -sv build/test || status=1
echo "== the loom-opt tests again, every invocation under --verify-roundtrip"
LOOM_VERIFY_ROUNDTRIP=1 "$LIT" -sv build/test/dialects build/test/passes \
  build/test/tools build/test/codegen build/test/examples build/test/scale || status=1
echo "== the GPU tests (ctest label gpu; they skip, saying why, without a GPU)"
ctest --test-dir build -L gpu --output-on-failure -V || status=1
exit $status
