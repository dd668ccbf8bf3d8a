// dist-pipeline-split alone: a repeat whose layers the partition put on
// stages 0, 0, 0 and 1 becomes one repeat per stage, each taking its
// layers' slice of the stacked weight; the parts keep the chain of carries.
// RUN: loom-opt %S/Inputs/chain-stages.mlir --dist-pipeline-split | FileCheck %s

// CHECK: %[[W:.*]] = train.param "w"
// CHECK: %[[X:.*]] = train.embedding {{.*}}dist.stage = 0
// CHECK: %[[S0:.*]] = train.slice %[[W]] offsets [0, 0, 0] sizes [3, 4, 4] {dist.stage = 0 : i64}
// CHECK: %[[R0:.*]] = train.repeat 3 carry(%[[X]] : tensor<2x4xf32>) stacked(%[[S0]] : tensor<3x4x4xf32>) {{.*}}dist.stage = 0
// CHECK: %[[S1:.*]] = train.slice %[[W]] offsets [3, 0, 0] sizes [1, 4, 4] {dist.stage = 1 : i64}
// CHECK: train.repeat 1 carry(%[[R0]] : tensor<2x4xf32>) stacked(%[[S1]] : tensor<1x4x4xf32>) {{.*}}dist.stage = 1
// CHECK-NOT: dist.stages = array<i64: 0, 0, 0, 1>
