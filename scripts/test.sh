#!/usr/bin/env bash
# Installs, builds and runs every test through CTest: first the GPU tests
# (label gpu; they skip, saying why, without a CUDA device), then the CPU
# suites (label cpu): the lit suite (which builds and runs programs with
# loomc) and the loom-opt tests again with every invocation under
# --verify-roundtrip; then the sanitized build's suite and a fuzz campaign
# (scripts/test-sanitized.sh). JUnit results: build/test-results-{gpu,cpu}.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
status=0
ctest --test-dir build -L gpu --output-on-failure -V \
  --output-junit "$PWD/build/test-results-gpu.xml" || status=1
ctest --test-dir build -L cpu --output-on-failure -V \
  --output-junit "$PWD/build/test-results-cpu.xml" || status=1
# The same compiler and runtime under AddressSanitizer and
# UndefinedBehaviorSanitizer: the lit suite again, then a bounded fuzz
# campaign (scripts/test-sanitized.sh; FUZZ_INPUTS sizes it).
bash scripts/test-sanitized.sh || status=1
exit $status
