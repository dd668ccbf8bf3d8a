// dist-inject-comm-fault alone, on a dp=2 rank program: `skip` makes one
// rank leave out a collective (the others keep it: `dist.ranks`), `count`
// gives one rank another element count. dist-verify-communication's tests
// (comm-faults/) show each fault refused.
// RUN: loom-opt %S/Inputs/mlp-rank-dp2.mlir --dist-inject-comm-fault="fault=skip rank=1 index=0" | FileCheck %s --check-prefix=SKIP
// RUN: not loom-opt %S/Inputs/mlp-rank-dp2.mlir --dist-inject-comm-fault="fault=skip rank=1 index=99" 2>&1 | FileCheck %s --check-prefix=RANGE

// SKIP: dist.all_reduce %{{.*}} over ["dp"] {dist.ranks = array<i64: 0>} : tensor<f32>
// RANGE: error: dist-inject-comm-fault: the model has {{[0-9]+}} communication ops, no op 99
