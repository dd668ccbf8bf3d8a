#!/usr/bin/env bash
# The sanitized suite: builds loom-opt, loomc, the runtime and the test
# programs with AddressSanitizer and UndefinedBehaviorSanitizer
# (scripts/build-sanitized.sh, into build-san/), runs the lit suite against
# them (programs loomc builds there are sanitized too, runtime included),
# then a bounded mutation-fuzz campaign (tools/loom-fuzz). Any sanitizer
# report stops the program that made it and fails the run.
#   FUZZ_INPUTS (default 1000) and FUZZ_SEED (default 1) size and
#   pick the campaign; a longer one: FUZZ_INPUTS=100000 bash scripts/test-sanitized.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-sanitized.sh
# verify_asan_link_order=0: the tests preload the PMPI byte counter;
# allocator_may_return_null=1: the runtime reports an allocation that fails.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_odr_violation=0:fast_unwind_on_malloc=0:verify_asan_link_order=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0"
status=0
start=$(date +%s)
# (Not the timing tests: a pipeline's measured bubble means nothing under
# the sanitizers with other tests beside it; CTest's lit-timing runs them.)
"$(llvm-config-22 --bindir)/lit" -sv --filter-out "^LOOM :: timing/" build-san/test || status=1
echo "sanitized lit suite: $(( $(date +%s) - start )) s"
start=$(date +%s)
seed=${FUZZ_SEED:-1}
python3 tools/loom-fuzz/loom-fuzz.py --bin build-san/bin \
  --inputs "${FUZZ_INPUTS:-1000}" --seed "$seed" --out build-san/fuzz-findings \
  || status=1
echo "fuzz campaign: $(( $(date +%s) - start )) s"
exit $status
