#!/usr/bin/env bash
# Installs, builds and runs every test: the lit suite, then the whole suite
# again with every loom-opt invocation under --verify-roundtrip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
LIT="$(llvm-config-22 --prefix)/bin/lit"
status=0
"$LIT" -sv build/test || status=1
echo "== again under --verify-roundtrip"
LOOM_VERIFY_ROUNDTRIP=1 "$LIT" -sv build/test || status=1
exit $status
