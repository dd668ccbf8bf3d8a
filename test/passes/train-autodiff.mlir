// RUN: loom-opt %s -split-input-file -train-autodiff -verify-diagnostics | FileCheck %s

// A linear classifier: the weight gradient is x^T dlogits; the input needs no
// gradient, so no dx is built.
// CHECK-LABEL: train.model @linear
// CHECK-DAG: %[[W:.*]] = train.param "w"
// CHECK-DAG: %[[X:.*]] = train.input "x"
// CHECK: %[[Y:.*]] = train.matmul %[[X]], %[[W]]
// CHECK: %[[L:.*]] = train.cross_entropy %[[Y]]
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = train.cross_entropy_grad %[[Y]], %{{.*}}, %[[ONE]]
// CHECK-NOT: transpose_rhs
// CHECK: %[[DW:.*]] = train.matmul %[[X]], %[[DY]] transpose_lhs : tensor<8x16xf32>, tensor<8x4xf32>
// CHECK-NOT: train.matmul
// CHECK: train.output loss(%[[L]] : tensor<f32>) grads(%[[DW]] : tensor<16x4xf32>)
train.model @linear {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A bias broadcast over the batch: its gradient sums over the batch.
// CHECK-LABEL: train.model @bias
// CHECK: %[[D:.*]] = train.cross_entropy_grad
// CHECK: %[[DB:.*]] = train.sum_to %[[D]] : tensor<8x4xf32> -> tensor<4xf32>
// CHECK: train.output loss(%{{.*}} : tensor<f32>) grads(%[[DB]] : tensor<4xf32>)
train.model @bias {
  %b = train.param "b" init(#train.init<zeros>) : tensor<4xf32>
  %x = train.input "x" : tensor<8x4xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.add %x, %b : tensor<8x4xf32>, tensor<4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Tied embeddings: one parameter used by the lookup and the output head; its
// gradient is the sum of both contributions.
// CHECK-LABEL: train.model @tied
// CHECK: %[[E:.*]] = train.param "wte"
// CHECK: %[[DLOG:.*]] = train.cross_entropy_grad
// CHECK-DAG: %[[DH:.*]] = train.matmul %[[DLOG]], %[[E]] : tensor<2x3x10xf32>, tensor<10x4xf32>
// CHECK-DAG: %[[HEAD:.*]] = train.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<6x10xf32>, tensor<6x4xf32>
// CHECK: %[[LOOKUP:.*]] = train.embedding_grad %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<10x4xf32>
// CHECK: %[[SUM:.*]] = train.add %[[HEAD]], %[[LOOKUP]] : tensor<10x4xf32>, tensor<10x4xf32>
// CHECK: train.output loss(%{{.*}} : tensor<f32>) grads(%[[SUM]] : tensor<10x4xf32>)
train.model @tied {
  %wte = train.param "wte" init(#train.init<normal, 0.02>) : tensor<10x4xf32>
  %ids = train.input "ids" : tensor<2x3xi32>
  %h = train.embedding %wte, %ids : tensor<10x4xf32>, tensor<2x3xi32>
  %a = train.tanh %h : tensor<2x3x4xf32>
  %logits = train.matmul %a, %wte transpose_rhs : tensor<2x3x4xf32>, tensor<10x4xf32>
  %l = train.cross_entropy %logits, %ids : tensor<2x3x10xf32>, tensor<2x3xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A repeated block: the forward saves each iteration's input carry, and the
// backward is one reverse repeat that recomputes the iteration and yields
// the stacked weight gradient; the invariant bias accumulates as a carry.
// CHECK-LABEL: train.model @stack
// CHECK: %[[H:.*]], %[[SAVED:.*]] = train.repeat 6 saving_carries carry(%{{.*}} : tensor<2x4xf32>) stacked(%[[W:.*]] : tensor<6x4x4xf32>) invariant(%[[B:.*]] : tensor<4xf32>) : (tensor<2x4xf32>) stacked(tensor<6x2x4xf32>)
// CHECK: train.yield carry(%{{.*}} : tensor<2x4xf32>) stacked(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[ZB:.*]] = arith.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %{{.*}}:2, %[[DW:.*]] = train.repeat 6 reverse carry(%{{.*}}, %[[ZB]] : tensor<2x4xf32>, tensor<4xf32>) stacked(%[[SAVED]], %[[W]] : tensor<6x2x4xf32>, tensor<6x4x4xf32>) invariant(%[[B]] : tensor<4xf32>) : (tensor<2x4xf32>, tensor<4xf32>) stacked(tensor<6x4x4xf32>)
// CHECK-NEXT: ^bb0(%[[I:.*]]: index, %[[DC:.*]]: tensor<2x4xf32>, %[[ACC:.*]]: tensor<4xf32>, %[[C:.*]]: tensor<2x4xf32>, %[[WI:.*]]: tensor<4x4xf32>, %[[BI:.*]]: tensor<4xf32>):
// CHECK: %[[Y:.*]] = train.matmul %[[C]], %[[WI]]
// CHECK: %[[Z:.*]] = train.add %[[Y]], %[[BI]]
// CHECK: train.relu_grad %[[Z]], %[[DC]]
// CHECK: %[[DBI:.*]] = train.sum_to
// CHECK: %[[DWI:.*]] = train.matmul %[[C]], %{{.*}} transpose_lhs
// CHECK: %[[ACC2:.*]] = train.add %[[ACC]], %[[DBI]]
// CHECK: train.yield carry(%{{.*}}, %[[ACC2]] : tensor<2x4xf32>, tensor<4xf32>) stacked(%[[DWI]] : tensor<4x4xf32>)
// CHECK: train.output loss(%{{.*}} : tensor<f32>) grads(%[[DW]], %{{.*}} : tensor<6x4x4xf32>, tensor<4xf32>)
train.model @stack {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<6x4x4xf32>
  %b = train.param "b" init(#train.init<zeros>) : tensor<4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %h = train.repeat 6 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<6x4x4xf32>)
      invariant(%b : tensor<4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>, %bi: tensor<4xf32>):
    %y = train.matmul %c, %wi : tensor<2x4xf32>, tensor<4x4xf32>
    %z = train.add %y, %bi : tensor<2x4xf32>, tensor<4xf32>
    %r = train.relu %z : tensor<2x4xf32>
    train.yield carry(%r : tensor<2x4xf32>)
  }
  %l = train.reduce mean %h dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Backward rules of the remaining differentiable ops compose: each op's rule
// appears once.
// CHECK-LABEL: train.model @chain
// CHECK: train.softmax_grad
// CHECK: train.layer_norm_grad
// CHECK: train.attention_grad %{{.*}} causal
// CHECK: train.rms_norm_grad
// CHECK: train.pad %{{.*}} low [0, 0, 0, 0] high [0, 0, 0, 2]
// CHECK: train.gelu_grad
// CHECK: train.silu_grad
// CHECK: train.dropout %{{.*}} rate 5.000000e-01 seed 9
train.model @chain {
  %g = train.param "g" init(#train.init<ones>) : tensor<4xf32>
  %bt = train.param "bt" init(#train.init<zeros>) : tensor<4xf32>
  %x = train.param "x" init(#train.init<normal, 1.0>) : tensor<1x2x3x6xf32>
  %d = train.dropout %x rate 0.5 seed 9 : tensor<1x2x3x6xf32>
  %s0 = train.silu %d : tensor<1x2x3x6xf32>
  %s1 = train.gelu %s0 : tensor<1x2x3x6xf32>
  %s = train.slice %s1 offsets [0, 0, 0, 0] sizes [1, 2, 3, 4] : tensor<1x2x3x6xf32>
  %rn = train.rms_norm %s, %g : tensor<1x2x3x4xf32>, tensor<4xf32>
  %a = train.attention %rn, %rn, %rn causal : tensor<1x2x3x4xf32>
  %ln = train.layer_norm %a, %g, %bt : tensor<1x2x3x4xf32>, tensor<4xf32>
  %sm = train.softmax %ln : tensor<1x2x3x4xf32>
  %l = train.reduce max %sm dims [0, 1, 2, 3] : tensor<1x2x3x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// An op without a backward rule on the path to a parameter.
train.model @no_rule {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  // expected-error @+1 {{'train.relu_grad' op has no backward rule, but a gradient flows through it to a parameter}}
  %r = train.relu_grad %w, %w : tensor<4xf32>
  %l = train.reduce sum %r dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op loss does not depend on any parameter}}
train.model @constant_loss {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.input "l" : tensor<f32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op is already differentiated}}
train.model @twice {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>) grads(%w : tensor<4xf32>)
}

// -----

// A repeat that keeps residuals (the micro-batch loop) around a layer
// loop: the forward prepares its own body (the layer loop saves its
// carries there) and saves, per iteration, what the backward reads (the
// layer loop's saved inputs and its output, which the loss's backward
// reads); the backward recomputes none of the forward: its only layer loop
// is the layer loop's backward (which still recomputes its layer).
// CHECK-LABEL: train.model @residuals
// CHECK: %{{.*}}, %[[SAVED:.*]]:3 = train.repeat 2 saving_carries residuals(2) carry(
// CHECK: %[[H:.*]], %[[IN:.*]] = train.repeat 3 saving_carries carry(
// CHECK: train.yield carry(%{{.*}} : tensor<f32>) stacked(%[[H]], %[[IN]], %{{.*}} : tensor<4xf32>, tensor<3x4xf32>, tensor<f32>)
// CHECK: train.repeat 2 reverse carry({{.*}}) stacked(%[[SAVED]]#2, %{{.*}}, %[[SAVED]]#0, %[[SAVED]]#1 :
// CHECK-NOT: saving_carries
// CHECK: train.repeat 3 reverse
// CHECK-NOT: train.repeat
// CHECK: train.output
train.model @residuals {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<3x4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %zero = arith.constant dense<0.000000e+00> : tensor<f32>
  %l = train.repeat 2 residuals(0) carry(%zero : tensor<f32>) stacked(%x : tensor<2x4xf32>) invariant(%w : tensor<3x4xf32>) : (tensor<f32>) {
  ^bb0(%i: index, %acc: tensor<f32>, %xi: tensor<4xf32>, %ws: tensor<3x4xf32>):
    %h = train.repeat 3 carry(%xi : tensor<4xf32>) stacked(%ws : tensor<3x4xf32>) : (tensor<4xf32>) {
    ^bb0(%j: index, %c: tensor<4xf32>, %wj: tensor<4xf32>):
      %y = train.mul %c, %wj : tensor<4xf32>, tensor<4xf32>
      %t = train.tanh %y : tensor<4xf32>
      train.yield carry(%t : tensor<4xf32>)
    }
    %sq = train.mul %h, %h : tensor<4xf32>, tensor<4xf32>
    %s = train.reduce sum %sq dims [0] : tensor<4xf32>
    %n = train.add %acc, %s : tensor<f32>, tensor<f32>
    train.yield carry(%n : tensor<f32>)
  }
  train.output loss(%l : tensor<f32>)
}
