// dist-remat decides, before autodiff, what the backward of each layer loop
// recomputes. policy=full (the default) leaves the loop as written: the
// forward saves each layer's input and the backward recomputes the layer
// (matmul, tanh) before back-propagating. policy=none asks for
// residuals(0): the forward keeps what the backward reads (the tanh's
// output, beside the saved input the weight gradient reads) and the
// backward recomputes nothing. An unknown policy is refused.
// RUN: loom-opt %s --dist-remat="policy=none" | FileCheck %s --check-prefix=MARK
// RUN: loom-opt %s --dist-remat="policy=full" | FileCheck %s --check-prefix=FULLMARK
// RUN: loom-opt %s --dist-remat="policy=none" --train-autodiff | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --dist-remat="policy=full" --train-autodiff | FileCheck %s --check-prefix=FULL
// RUN: not loom-opt %s --dist-remat="policy=selective" 2>&1 | FileCheck %s --check-prefix=BAD

// MARK: train.repeat 4 residuals(0) carry(
// FULLMARK: train.repeat 4 carry(

// NONE:      train.repeat 4 saving_carries residuals(1) carry(
// NONE:        train.tanh
// NONE:        train.yield carry(%[[T:.*]] : tensor<2x4xf32>) stacked(%[[T]], %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>)
// NONE:      train.repeat 4 reverse
// NONE-NOT:    train.tanh %
// NONE-NOT:    train.matmul %arg{{[0-9]+}}, %arg{{[0-9]+}} :
// NONE:        train.tanh_grad
// NONE:        train.yield

// FULL:      train.repeat 4 saving_carries carry(
// FULL:      train.repeat 4 reverse
// FULL-NEXT: ^bb0(
// FULL-NEXT:   train.matmul %arg{{[0-9]+}}, %arg{{[0-9]+}} :
// FULL-NEXT:   train.tanh %
// FULL-NEXT:   train.tanh_grad

// BAD: error: dist-remat: unknown policy 'selective' (full or none; selective and budget are not available yet)
train.model @chain attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<4x4x4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %h = train.repeat 4 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<4x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wl: tensor<4x4xf32>):
    %u = train.matmul %c, %wl : tensor<2x4xf32>, tensor<4x4xf32>
    %t = train.tanh %u : tensor<2x4xf32>
    train.yield carry(%t : tensor<2x4xf32>)
  }
  %loss = train.reduce sum %h dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}
