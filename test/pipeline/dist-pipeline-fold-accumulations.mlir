// dist-pipeline-fold-accumulations alone, on the rank program of a 2-stage
// pipeline with 2 micro-batches: each stage's layer loop in the backward
// micro-batch loop reads the stage's gradient accumulator as one more
// stacked operand and yields each layer's slice plus its gradient; the
// micro-batch loop yields the layer loop's result as the accumulator's next
// value (no add of a per-micro-batch gradient tensor). The tied embedding's
// accumulators, which no layer loop makes, stay adds.
// RUN: loom-opt %S/Inputs/chain-rank-m2.mlir --dist-pipeline-fold-accumulations | FileCheck %s

// The memory plan (loom-memory-plan plans each pipeline rank's functions
// apart, what its stages run): the layer loops' gradients take no arena
// bytes of their own on the rank that runs them (-1: written into the
// accumulators), and each rank's step arena shrinks: rank 0's from 1408 to
// 1152 bytes, rank 1's from 1216 to 1088 (a stage's per-micro-batch
// gradients, 3 x 4 x 4 and 1 x 4 x 4, no longer live beside the
// accumulators).
// RUN: loom-opt %S/Inputs/chain-rank-m2.mlir --loom-memory-plan | FileCheck %s --check-prefix=UNFOLDED
// RUN: loom-opt %S/Inputs/chain-rank-m2.mlir --dist-pipeline-fold-accumulations --loom-memory-plan | FileCheck %s --check-prefix=FOLDED
// UNFOLDED: loom.peak_bytes = {eval = array<i64: {{[0-9]+}}, {{[0-9]+}}>, step = array<i64: 1408, 1216>}
// UNFOLDED: train.repeat 1 reverse {{.*}}step = [array<i64: -1, -1>, array<i64: {{[0-9]+}}, {{[0-9]+}}>]
// UNFOLDED: train.repeat 3 reverse {{.*}}step = [array<i64: {{[0-9]+}}, {{[0-9]+}}>, array<i64: -1, -1>]
// FOLDED: loom.peak_bytes = {eval = array<i64: {{[0-9]+}}, {{[0-9]+}}>, step = array<i64: 1152, 1088>}
// FOLDED: train.repeat 1 reverse {{.*}}step = [array<i64: -1, -1>, array<i64: {{[0-9]+}}, -1>]
// FOLDED: train.repeat 3 reverse {{.*}}step = [array<i64: {{[0-9]+}}, -1>, array<i64: -1, -1>]

// CHECK:      train.repeat 2 reverse carry(
// CHECK-SAME:   tensor<3x4x4xf32>, tensor<1x4x4xf32>)
// CHECK-NEXT: ^bb0(%arg{{[0-9]+}}: index, %arg{{[0-9]+}}: tensor<f32>, %[[E0:arg[0-9]+]]: tensor<8x4xf32>, %[[E1:arg[0-9]+]]: tensor<8x4xf32>, %[[ACC0:arg[0-9]+]]: tensor<3x4x4xf32>, %[[ACC1:arg[0-9]+]]: tensor<1x4x4xf32>,
// Stage 1's layer loop starts from stage 1's accumulator.
// CHECK:      %{{.*}}, %[[G1:.*]] = train.repeat 1 reverse {{.*}} stacked(%{{.*}}, %{{.*}}, %[[ACC1]] :
// CHECK-SAME:   dist.stage = 1
// CHECK:        %[[S1:.*]] = train.add %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:   train.yield carry(%{{.*}}) stacked(%[[S1]] : tensor<4x4xf32>)
// CHECK:      %{{.*}}, %[[G0:.*]] = train.repeat 3 reverse {{.*}} stacked(%{{.*}}, %{{.*}}, %[[ACC0]] :
// CHECK-SAME:   dist.stage = 0
// CHECK:        %[[S0:.*]] = train.add %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:   train.yield carry(%{{.*}}) stacked(%[[S0]] : tensor<4x4xf32>)
// CHECK:      %[[T0:.*]] = train.add %[[E0]], %{{.*}} {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64} : tensor<8x4xf32>
// CHECK:      %[[T1:.*]] = train.add %[[E1]], %{{.*}} {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64} : tensor<8x4xf32>
// CHECK-NOT:  train.add %[[ACC0]]
// CHECK-NOT:  train.add %[[ACC1]]
// CHECK:      train.yield carry(%{{.*}}, %[[T0]], %[[T1]], %[[G0]], %[[G1]] :
