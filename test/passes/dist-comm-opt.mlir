// RUN: loom-opt %s -split-input-file --dist-comm-opt | FileCheck %s
// RUN: loom-opt %s -split-input-file --dist-comm-opt=overlap=false | FileCheck %s --check-prefix=BLOCK

// The all-reduce of a repeat's stacked result (each iteration's weight
// gradient) moves into the iteration, where it starts as soon as the slice
// is computed; the body yields it in flight and one wait after the loop,
// before the first op that reads the stacked gradients, completes every
// iteration's (so layer i's reduction runs during the later iterations).
// Another all-reduce starts after its operand and is waited for before its
// use. With overlap=false each wait follows its start.
// CHECK-LABEL: train.model @layers
// CHECK: %[[L:.*]] = train.reduce sum %{{.*}} dims [0, 1, 2]
// CHECK-NEXT: %[[LS:.*]] = dist.all_reduce_start %[[L]] over ["dp"] : tensor<f32>
// CHECK: train.repeat 4
// CHECK: %[[G:.*]] = train.matmul %{{.*}} transpose_lhs
// CHECK-NEXT: %[[S:.*]] = dist.all_reduce_start %[[G]] over ["dp"] : tensor<16x4xf32>
// CHECK-NEXT: train.exp
// CHECK-NEXT: train.yield carry(%{{.*}} : tensor<f32>) stacked(%[[S]] : tensor<16x4xf32>)
// CHECK-NEXT: }
// CHECK-NEXT: %[[GW:.*]] = dist.wait %{{.*}} : tensor<4x16x4xf32>
// CHECK-NEXT: train.reduce sum %[[GW]]
// CHECK-NOT: dist.all_reduce
// CHECK: %[[LW:.*]] = dist.wait %[[LS]] : tensor<f32>
// CHECK-NEXT: train.add %[[LW]]
// BLOCK-LABEL: train.model @layers
// BLOCK: %[[LS:.*]] = dist.all_reduce_start
// BLOCK-NEXT: dist.wait %[[LS]] : tensor<f32>
// BLOCK: %[[S:.*]] = dist.all_reduce_start %{{.*}} over ["dp"] : tensor<16x4xf32>
// BLOCK-NEXT: dist.wait %[[S]] : tensor<16x4xf32>
// BLOCK-NEXT: train.exp
train.model @layers attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<16x4xf32>
  %xs = train.input "x" : tensor<4x2x16xf32>
  %l = train.reduce sum %xs dims [0, 1, 2] : tensor<4x2x16xf32>
  %lr = dist.all_reduce %l over ["dp"] : tensor<f32>
  %c, %g = train.repeat 4 carry(%l : tensor<f32>) stacked(%xs : tensor<4x2x16xf32>) invariant(%w : tensor<16x4xf32>) : (tensor<f32>) stacked(tensor<4x16x4xf32>) {
  ^bb0(%i: index, %ci: tensor<f32>, %xi: tensor<2x16xf32>, %wi: tensor<16x4xf32>):
    %y = train.matmul %xi, %wi : tensor<2x16xf32>, tensor<16x4xf32>
    %gi = train.matmul %xi, %y transpose_lhs : tensor<2x16xf32>, tensor<2x4xf32>
    %e = train.exp %y : tensor<2x4xf32>
    train.yield carry(%ci : tensor<f32>) stacked(%gi : tensor<16x4xf32>)
  }
  %r = dist.all_reduce %g over ["dp"] : tensor<4x16x4xf32>
  %n = train.reduce sum %r dims [0, 1, 2] : tensor<4x16x4xf32>
  %t = train.add %lr, %n : tensor<f32>, tensor<f32>
  train.output loss(%t : tensor<f32>)
}

// -----

// Starts over the same axes are bucketed: one collective for the two
// gradients, started where the later one is ready and waited where the
// first result is needed; a bucket never starts after a member's wait.
// CHECK-LABEL: train.model @bucket
// CHECK: %[[A:.*]] = train.matmul %{{.*}} transpose_lhs : tensor<2x16xf32>, tensor<2x4xf32>
// CHECK: %[[B:.*]] = train.reduce sum
// CHECK-NEXT: %[[S:.*]]:2 = dist.all_reduce_start %[[A]], %[[B]] over ["dp"] : tensor<16x4xf32>, tensor<f32>
// CHECK-NEXT: %[[W:.*]]:2 = dist.wait %[[S]]#0, %[[S]]#1 : tensor<16x4xf32>, tensor<f32>
// CHECK-NOT: dist.all_reduce_start
// CHECK: train.output
train.model @bucket attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<2x16xf32>
  %y = train.matmul %x, %w : tensor<2x16xf32>, tensor<16x4xf32>
  %g = train.matmul %x, %y transpose_lhs : tensor<2x16xf32>, tensor<2x4xf32>
  %gr = dist.all_reduce %g over ["dp"] : tensor<16x4xf32>
  %l = train.reduce sum %y dims [0, 1] : tensor<2x4xf32>
  %lr = dist.all_reduce %l over ["dp"] : tensor<f32>
  %n = train.reduce sum %gr dims [0, 1] : tensor<16x4xf32>
  %t = train.add %lr, %n : tensor<f32>, tensor<f32>
  train.output loss(%t : tensor<f32>) updates(%gr : tensor<16x4xf32>)
}
