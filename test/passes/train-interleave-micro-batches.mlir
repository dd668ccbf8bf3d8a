// RUN: loom-opt %s -split-input-file --train-interleave-micro-batches | FileCheck %s

// The micro-batch loop (which kept the logits and the share of labelled
// tokens for its backward) and its backward become one loop: micro-batch
// k's forward, then its backward reading the forward's values directly.
// Nothing is stacked any more; the carries are the loss, the loss's
// gradient and the weight's accumulator.
// CHECK-LABEL: train.model @linear
// CHECK: %[[R:.*]]:3 = train.repeat 2 carry(%{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>, tensor<16x4xf32>) stacked(%{{.*}}, %{{.*}} : tensor<2x4x16xf32>, tensor<2x4xi32>) invariant(%{{.*}}, %{{.*}} : tensor<16x4xf32>, tensor<f32>) : (tensor<f32>, tensor<f32>, tensor<16x4xf32>) {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %[[LOSS:.*]]: tensor<f32>, %[[SEED:.*]]: tensor<f32>, %[[ACC:.*]]: tensor<16x4xf32>, %[[X:.*]]: tensor<4x16xf32>, %[[T:.*]]: tensor<4xi32>, %[[W:.*]]: tensor<16x4xf32>, %{{.*}}: tensor<f32>):
// CHECK-NEXT: %[[Y:.*]] = train.matmul %[[X]], %[[W]]
// CHECK-NEXT: train.cross_entropy %[[Y]], %[[T]]
// CHECK-NEXT: train.label_count
// CHECK-NEXT: %[[SHARE:.*]] = train.div
// CHECK-NEXT: train.mul
// CHECK-NEXT: %[[NEXT:.*]] = train.add %[[LOSS]],
// CHECK-NEXT: %[[DL:.*]] = train.mul %[[SEED]], %[[SHARE]]
// CHECK-NEXT: %[[DY:.*]] = train.cross_entropy_grad %[[Y]], %[[T]], %[[DL]]
// CHECK-NEXT: %[[DW:.*]] = train.matmul %[[X]], %[[DY]] transpose_lhs
// CHECK-NEXT: %[[SUM:.*]] = train.add %[[ACC]], %[[DW]]
// CHECK-NEXT: train.yield carry(%[[NEXT]], %[[SEED]], %[[SUM]] : tensor<f32>, tensor<f32>, tensor<16x4xf32>)
// CHECK-NEXT: }
// CHECK-NEXT: train.output loss(%[[R]]#0 : tensor<f32>) grads(%[[R]]#2 : tensor<16x4xf32>)
train.model @linear attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 1.000000e-01>} {
  %0 = train.param "w" init(<normal, 2.000000e-02>) : tensor<16x4xf32>
  %1 = train.input "x" : tensor<8x16xf32>
  %2 = train.input "t" : tensor<8xi32>
  %cst = arith.constant dense<0.000000e+00> : tensor<f32>
  %3 = train.reshape %1 : tensor<8x16xf32> -> tensor<2x4x16xf32>
  %4 = train.reshape %2 : tensor<8xi32> -> tensor<2x4xi32>
  %5 = train.label_count %2 : tensor<8xi32>
  %carry_results, %stacked_results:3 = train.repeat 2 saving_carries residuals(2) carry(%cst : tensor<f32>) stacked(%3, %4 : tensor<2x4x16xf32>, tensor<2x4xi32>) invariant(%0, %5 : tensor<16x4xf32>, tensor<f32>) : (tensor<f32>) stacked(tensor<2x4x4xf32>, tensor<2xf32>, tensor<2xf32>) {
  ^bb0(%arg0: index, %arg1: tensor<f32>, %arg2: tensor<4x16xf32>, %arg3: tensor<4xi32>, %arg4: tensor<16x4xf32>, %arg5: tensor<f32>):
    %6 = train.matmul %arg2, %arg4 : tensor<4x16xf32>, tensor<16x4xf32>
    %7 = train.cross_entropy %6, %arg3 : tensor<4x4xf32>, tensor<4xi32>
    %8 = train.label_count %arg3 : tensor<4xi32>
    %9 = train.div %8, %arg5 : tensor<f32>, tensor<f32>
    %10 = train.mul %7, %9 : tensor<f32>, tensor<f32>
    %11 = train.add %arg1, %10 : tensor<f32>, tensor<f32>
    train.yield carry(%11 : tensor<f32>) stacked(%6, %9, %arg1 : tensor<4x4xf32>, tensor<f32>, tensor<f32>)
  }
  %cst_0 = arith.constant dense<1.000000e+00> : tensor<f32>
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<16x4xf32>
  %carry_results_2:2 = train.repeat 2 reverse carry(%cst_0, %cst_1 : tensor<f32>, tensor<16x4xf32>) stacked(%stacked_results#2, %3, %4, %stacked_results#0, %stacked_results#1 : tensor<2xf32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4x4xf32>, tensor<2xf32>) invariant(%0, %5 : tensor<16x4xf32>, tensor<f32>) : (tensor<f32>, tensor<16x4xf32>) {
  ^bb0(%arg0: index, %arg1: tensor<f32>, %arg2: tensor<16x4xf32>, %arg3: tensor<f32>, %arg4: tensor<4x16xf32>, %arg5: tensor<4xi32>, %arg6: tensor<4x4xf32>, %arg7: tensor<f32>, %arg8: tensor<16x4xf32>, %arg9: tensor<f32>):
    %6 = train.mul %arg1, %arg7 : tensor<f32>, tensor<f32>
    %7 = train.cross_entropy_grad %arg6, %arg5, %6 : tensor<4x4xf32>, tensor<4xi32>
    %8 = train.matmul %arg4, %7 transpose_lhs : tensor<4x16xf32>, tensor<4x4xf32>
    %9 = train.add %arg2, %8 : tensor<16x4xf32>, tensor<16x4xf32>
    train.yield carry(%arg1, %9 : tensor<f32>, tensor<16x4xf32>)
  }
  train.output loss(%carry_results : tensor<f32>) grads(%carry_results_2#1 : tensor<16x4xf32>)
}

// -----

// A backward that reads the forward's result other than through its saved
// slices (here its loss, as a carry's start) stays a loop of its own; the
// residual its body does not read is pruned all the same.
// CHECK-LABEL: train.model @reads_loss
// CHECK: train.repeat 2 saving_carries residuals(0)
// CHECK: train.repeat 2 reverse
train.model @reads_loss {
  %w = train.param "w" init(<normal, 2.000000e-02>) : tensor<4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %zero = arith.constant dense<0.000000e+00> : tensor<f32>
  %l, %saved:2 = train.repeat 2 saving_carries residuals(1) carry(%zero : tensor<f32>) stacked(%x : tensor<2x4xf32>) invariant(%w : tensor<4xf32>) : (tensor<f32>) stacked(tensor<2x4xf32>, tensor<2xf32>) {
  ^bb0(%i: index, %acc: tensor<f32>, %xi: tensor<4xf32>, %wi: tensor<4xf32>):
    %y = train.mul %xi, %wi : tensor<4xf32>, tensor<4xf32>
    %s = train.reduce sum %y dims [0] : tensor<4xf32>
    %n = train.add %acc, %s : tensor<f32>, tensor<f32>
    train.yield carry(%n : tensor<f32>) stacked(%y, %acc : tensor<4xf32>, tensor<f32>)
  }
  %zeros = arith.constant dense<0.000000e+00> : tensor<4xf32>
  %g:2 = train.repeat 2 reverse carry(%l, %zeros : tensor<f32>, tensor<4xf32>) stacked(%saved#1, %x, %saved#0 : tensor<2xf32>, tensor<2x4xf32>, tensor<2x4xf32>) invariant(%w : tensor<4xf32>) : (tensor<f32>, tensor<4xf32>) {
  ^bb0(%i: index, %dl: tensor<f32>, %gw: tensor<4xf32>, %acc: tensor<f32>, %xi: tensor<4xf32>, %yi: tensor<4xf32>, %wi: tensor<4xf32>):
    %b = train.broadcast %dl dims [] : tensor<f32> -> tensor<4xf32>
    %d = train.mul %b, %xi : tensor<4xf32>, tensor<4xf32>
    %n = train.add %gw, %d : tensor<4xf32>, tensor<4xf32>
    train.yield carry(%dl, %n : tensor<f32>, tensor<4xf32>)
  }
  train.output loss(%l : tensor<f32>) grads(%g#1 : tensor<4xf32>)
}
