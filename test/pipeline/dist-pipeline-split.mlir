// dist-pipeline-split alone: a repeat whose layers the partition put on
// stages 0, 0, 0 and 1 becomes one repeat per stage; the stacked weight,
// which nothing else reads, becomes one parameter per stage holding its
// layers (named after them, with dist.part giving the whole tensor and
// where the part starts in it); the parts keep the chain of carries.
// RUN: loom-opt %S/Inputs/chain-stages.mlir --dist-pipeline-split | FileCheck %s
// RUN: loom-opt %s --dist-pipeline-split | FileCheck %s --check-prefix=SHARED

// CHECK-NOT: train.param "w" {{.*}}tensor<4x4x4xf32>
// CHECK: %[[W0:.*]] = train.param "w[0:3]" init(<normal, 1.000000e-01>) {dist.part = #dist.part<of = "w", whole = [4, 4, 4], offsets = [0, 0, 0]>, dist.stages = array<i64: 0>} : tensor<3x4x4xf32>
// CHECK-NEXT: %[[W1:.*]] = train.param "w[3:4]" init(<normal, 1.000000e-01>) {dist.part = #dist.part<of = "w", whole = [4, 4, 4], offsets = [3, 0, 0]>, dist.stages = array<i64: 1>} : tensor<1x4x4xf32>
// CHECK: %[[X:.*]] = train.embedding {{.*}}dist.stage = 0
// CHECK-NOT: train.slice
// CHECK: %[[R0:.*]] = train.repeat 3 carry(%[[X]] : tensor<2x4xf32>) stacked(%[[W0]] : tensor<3x4x4xf32>) {{.*}}dist.stage = 0
// CHECK: train.repeat 1 carry(%[[R0]] : tensor<2x4xf32>) stacked(%[[W1]] : tensor<1x4x4xf32>) {{.*}}dist.stage = 1
// CHECK-NOT: dist.stages = array<i64: 0, 0, 0, 1>

// A stacked weight that something else reads too stays whole, and each
// stage takes its layers' slice of it.
// SHARED: %[[W:.*]] = train.param "w" {{.*}}dist.stages = array<i64: 0, 1>} : tensor<4x4x4xf32>
// SHARED-NOT: dist.part
// SHARED: %[[S0:.*]] = train.slice %[[W]] offsets [0, 0, 0] sizes [2, 4, 4] {dist.stage = 0 : i64}
// SHARED: train.repeat {{.*}}stacked(%[[S0]] :
// SHARED: %[[S1:.*]] = train.slice %[[W]] offsets [2, 0, 0] sizes [2, 4, 4] {dist.stage = 1 : i64}
// SHARED: train.repeat {{.*}}stacked(%[[S1]] :
train.model @shared attributes {dist.mesh = #dist.mesh<["pp" = 2]>, dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [1, 1, 1, 1, 1, 1], stage_costs = [3, 3], bottleneck = 3>, optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %emb = train.param "emb" init(#train.init<normal, 0.1>) {dist.stages = array<i64: 0, 1>} : tensor<8x4xf32>
  %w = train.param "w" init(#train.init<normal, 0.1>) {dist.stages = array<i64: 0, 1>} : tensor<4x4x4xf32>
  %tokens = train.input "tokens" : tensor<2xi32>
  %labels = train.input "labels" : tensor<2xi32>
  %x = train.embedding %emb, %tokens {dist.stage = 0 : i64} : tensor<8x4xf32>, tensor<2xi32>
  %h = train.repeat 4 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<4x4x4xf32>) : (tensor<2x4xf32>) attributes {dist.stages = array<i64: 0, 0, 1, 1>} {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wl: tensor<4x4xf32>):
    %u = train.matmul %c, %wl : tensor<2x4xf32>, tensor<4x4xf32>
    train.yield carry(%u : tensor<2x4xf32>)
  }
  %logits = train.matmul %h, %emb transpose_rhs {dist.stage = 1 : i64} : tensor<2x4xf32>, tensor<8x4xf32>
  %ce = train.cross_entropy %logits, %labels {dist.stage = 1 : i64} : tensor<2x8xf32>, tensor<2xi32>
  %w0 = train.slice %w offsets [0, 0, 0] sizes [1, 1, 1] {dist.stage = 1 : i64} : tensor<4x4x4xf32>
  %r = train.reduce sum %w0 dims [0, 1, 2] {dist.stage = 1 : i64} : tensor<1x1x1xf32>
  %loss = train.add %ce, %r {dist.stage = 1 : i64} : tensor<f32>, tensor<f32>
  train.output loss(%loss : tensor<f32>)
}
