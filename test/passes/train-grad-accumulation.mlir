// RUN: loom-opt %s -split-input-file --train-grad-accumulation=micro-batches=2 -verify-diagnostics | FileCheck %s
// RUN: loom-opt %s -split-input-file --train-grad-accumulation=micro-batches=2 --train-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// The forward becomes a loop over two micro-batches of the inputs, the
// parameters invariant and the loss the carry; each micro-batch's
// cross-entropy is weighted by its share of the batch's labelled tokens.
// The loop keeps residuals: its backward will read what it saved.
// CHECK-LABEL: train.model @linear
// CHECK: %[[W:.*]] = train.param "w"
// CHECK: %[[X:.*]] = train.input "x" : tensor<8x16xf32>
// CHECK: %[[T:.*]] = train.input "t" : tensor<8xi32>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[X2:.*]] = train.reshape %[[X]] : tensor<8x16xf32> -> tensor<2x4x16xf32>
// CHECK: %[[T2:.*]] = train.reshape %[[T]] : tensor<8xi32> -> tensor<2x4xi32>
// CHECK: %[[TOTAL:.*]] = train.label_count %[[T]] : tensor<8xi32>
// CHECK: %[[LOSS:.*]] = train.repeat 2 residuals(0) carry(%[[ZERO]] : tensor<f32>) stacked(%[[X2]], %[[T2]] : tensor<2x4x16xf32>, tensor<2x4xi32>) invariant(%[[W]], %[[TOTAL]] : tensor<16x4xf32>, tensor<f32>) : (tensor<f32>) {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %[[ACC:.*]]: tensor<f32>, %[[XI:.*]]: tensor<4x16xf32>, %[[TI:.*]]: tensor<4xi32>, %[[WI:.*]]: tensor<16x4xf32>, %[[TOT:.*]]: tensor<f32>):
// CHECK-NEXT: %[[Y:.*]] = train.matmul %[[XI]], %[[WI]] : tensor<4x16xf32>, tensor<16x4xf32>
// CHECK-NEXT: %[[CE:.*]] = train.cross_entropy %[[Y]], %[[TI]] : tensor<4x4xf32>, tensor<4xi32>
// CHECK-NEXT: %[[C:.*]] = train.label_count %[[TI]] : tensor<4xi32>
// CHECK-NEXT: %[[SHARE:.*]] = train.div %[[C]], %[[TOT]]
// CHECK-NEXT: %[[PART:.*]] = train.mul %[[CE]], %[[SHARE]]
// CHECK-NEXT: %[[NEXT:.*]] = train.add %[[ACC]], %[[PART]]
// CHECK-NEXT: train.yield carry(%[[NEXT]] : tensor<f32>)
// CHECK: train.output loss(%[[LOSS]] : tensor<f32>)
// The backward is one reverse loop that accumulates the weight's gradient
// as a carry. It recomputes nothing: the forward saves per micro-batch the
// logits and the share (the two residuals the backward reads) before its
// saved carry, and the backward's only matmul is the weight's gradient.
// GRAD-LABEL: train.model @linear
// GRAD: %{{.*}}, %[[SAVED:.*]]:3 = train.repeat 2 saving_carries residuals(2) carry(
// GRAD: %[[Y:.*]] = train.matmul
// GRAD: %[[SHARE:.*]] = train.div
// GRAD: train.yield carry(%{{.*}} : tensor<f32>) stacked(%[[Y]], %[[SHARE]], %{{.*}} : tensor<4x4xf32>, tensor<f32>, tensor<f32>)
// GRAD: train.repeat 2 reverse carry(%{{.*}}, %{{.*}} : tensor<f32>, tensor<16x4xf32>) stacked(%[[SAVED]]#2, %{{.*}}, %{{.*}}, %[[SAVED]]#0, %[[SAVED]]#1 :
// GRAD-NEXT: ^bb0(
// GRAD-NOT: train.cross_entropy %
// GRAD: train.cross_entropy_grad
// GRAD-NEXT: train.matmul %{{.*}}, %{{.*}} transpose_lhs
// GRAD-NEXT: train.add
// GRAD-NEXT: train.yield
// GRAD: train.output loss({{.*}}) grads(%{{.*}}#1 : tensor<16x4xf32>)
train.model @linear attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A loss that is not a cross-entropy is a mean over the batch: 1/M each.
// CHECK-LABEL: train.model @mean
// CHECK: train.reduce mean
// CHECK: train.scale %{{.*}} by 5.000000e-01 : tensor<f32>
train.model @mean {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<4xf32>
  %x = train.input "x" : tensor<6x4xf32>
  %y = train.mul %x, %w : tensor<6x4xf32>, tensor<4xf32>
  %l = train.reduce mean %y dims [0, 1] : tensor<6x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @indivisible {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<4xf32>
  // expected-error @+1 {{'train.input' op has a batch of 5, which 2 micro-batches do not divide}}
  %x = train.input "x" : tensor<5x4xf32>
  %y = train.mul %x, %w : tensor<5x4xf32>, tensor<4xf32>
  %l = train.reduce mean %y dims [0, 1] : tensor<5x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @ragged {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<4xf32>
  %x = train.input "x" : tensor<6x4xf32>
  // expected-error @+1 {{'train.input' op has a leading (batch) dimension of 4, other inputs 6}}
  %z = train.input "z" : tensor<4x4xf32>
  %y = train.mul %x, %w : tensor<6x4xf32>, tensor<4xf32>
  %l = train.reduce mean %y dims [0, 1] : tensor<6x4xf32>
  train.output loss(%l : tensor<f32>)
}
