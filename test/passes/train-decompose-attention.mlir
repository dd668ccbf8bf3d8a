// RUN: loom-opt %s -split-input-file -train-decompose-attention | FileCheck %s
// RUN: loom-opt %s -split-input-file -train-decompose-attention -train-autodiff | FileCheck %s --check-prefix=GRAD

// Causal attention becomes scores, scale 1/sqrt(head_dim), mask, softmax and
// the product with v.
// CHECK-LABEL: train.model @causal
// CHECK: %[[S:.*]] = train.matmul %[[Q:.*]], %[[K:.*]] transpose_rhs : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
// CHECK: %[[C:.*]] = train.scale %[[S]] by 2.500000e-01 : tensor<2x4x8x8xf32>
// CHECK: %[[M:.*]] = train.causal_mask %[[C]] fill 0xFFF0000000000000 : tensor<2x4x8x8xf32>
// CHECK: %[[P:.*]] = train.softmax %[[M]] : tensor<2x4x8x8xf32>
// CHECK: train.matmul %[[P]], %{{.*}} : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>
// CHECK-NOT: train.attention
// The decomposed graph differentiates through its parts; the mask's backward
// zeroes the masked entries of the gradient.
// GRAD-LABEL: train.model @causal
// GRAD-NOT: train.attention_grad
// GRAD: train.softmax_grad
// GRAD: train.causal_mask %{{.*}} fill 0.000000e+00 : tensor<2x4x8x8xf32>
// GRAD: train.output loss({{.*}}) grads(
train.model @causal {
  %q = train.param "q" init(#train.init<normal, 1.0>) : tensor<2x4x8x16xf32>
  %k = train.input "k" : tensor<2x4x8x16xf32>
  %v = train.input "v" : tensor<2x4x8x16xf32>
  %a = train.attention %q, %k, %v causal : tensor<2x4x8x16xf32>
  %l = train.reduce sum %a dims [0, 1, 2, 3] : tensor<2x4x8x16xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Without `causal` there is no mask.
// CHECK-LABEL: train.model @full
// CHECK: train.scale %{{.*}} by 5.000000e-01
// CHECK-NOT: train.causal_mask
// CHECK: train.softmax
train.model @full {
  %q = train.param "q" init(#train.init<normal, 1.0>) : tensor<1x1x3x4xf32>
  %a = train.attention %q, %q, %q : tensor<1x1x3x4xf32>
  %l = train.reduce sum %a dims [0, 1, 2, 3] : tensor<1x1x3x4xf32>
  train.output loss(%l : tensor<f32>)
}
