// dist-remat decides, before autodiff, what the backward of each layer loop
// recomputes. policy=full (the default) leaves the loop as written: the
// forward saves each layer's input and the backward recomputes the layer
// (matmul, tanh) before back-propagating. policy=none asks for
// residuals(0): the forward keeps what the backward reads (the tanh's
// output, beside the saved input the weight gradient reads) and the
// backward recomputes nothing. policy=selective marks every op of the body
// but the matmuls (and attention) train.recompute: the forward keeps the
// matmul's output, the backward recomputes the tanh from it (marked
// train.recompute there too) and no matmul. An unknown policy is refused.
// RUN: loom-opt %s --dist-remat="policy=none" | FileCheck %s --check-prefix=MARK
// RUN: loom-opt %s --dist-remat="policy=full" | FileCheck %s --check-prefix=FULLMARK
// RUN: loom-opt %s --dist-remat="policy=none" --train-autodiff | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --dist-remat="policy=full" --train-autodiff | FileCheck %s --check-prefix=FULL
// RUN: loom-opt %s --dist-remat="policy=selective" --train-autodiff | FileCheck %s --check-prefix=SEL
// RUN: loom-opt %s --dist-remat="policy=full,none,none,selective" | FileCheck %s --check-prefix=LAYERS
// RUN: not loom-opt %s --dist-remat="policy=full,none" 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: not loom-opt %s --dist-remat="policy=budget" 2>&1 | FileCheck %s --check-prefix=BAD

// MARK: train.repeat 4 residuals(0) carry(
// FULLMARK: train.repeat 4 carry(

// NONE:      train.repeat 4 saving_carries residuals(1) carry(
// NONE:        train.tanh
// NONE:        train.yield carry(%[[T:.*]] : tensor<2x4xf32>) stacked(%[[T]], %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>)
// NONE:      train.repeat 4 reverse
// NONE-NOT:    train.recompute
// NONE:        train.tanh_grad
// NONE:        train.yield

// FULL:      train.repeat 4 saving_carries carry(
// FULL:      train.repeat 4 reverse
// FULL-NEXT: ^bb0(
// FULL-NEXT:   train.matmul %arg{{[0-9]+}}, %arg{{[0-9]+}} {train.recompute} :
// FULL-NEXT:   train.tanh %{{.*}} {train.recompute}
// FULL-NEXT:   train.tanh_grad

// SEL:      train.repeat 4 saving_carries residuals(1) carry(
// SEL:        %[[U:.*]] = train.matmul %arg{{[0-9]+}}, %arg{{[0-9]+}} :
// SEL-NEXT:   %[[T:.*]] = train.tanh %[[U]] {train.recompute}
// SEL-NEXT:   train.yield carry(%[[T]] : tensor<2x4xf32>) stacked(%[[U]], %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>)
// SEL:      train.repeat 4 reverse
// SEL-NEXT: ^bb0(
// SEL-NEXT:   train.tanh %arg{{[0-9]+}} {train.recompute}
// SEL-NEXT:   train.tanh_grad
// SEL-NOT:    train.matmul {{.*}}train.recompute
// SEL:        train.yield

// One policy per layer: the loop is cut into runs of layers with one
// policy each, its stacked parameter into parts of the whole (dist.part).
// LAYERS:      train.param "w[0:1]" {{.*}}dist.part = #dist.part<of = "w", whole = [4, 4, 4], offsets = [0, 0, 0]>
// LAYERS:      train.param "w[1:3]" {{.*}}offsets = [1, 0, 0]
// LAYERS:      train.param "w[3:4]" {{.*}}offsets = [3, 0, 0]
// LAYERS:      train.repeat 1 carry(
// LAYERS-NOT:    train.recompute
// LAYERS:      train.repeat 2 residuals(0) carry(
// LAYERS-NOT:    train.recompute
// LAYERS:      train.repeat 1 residuals(0) carry(
// LAYERS:        train.tanh %{{.*}} {train.recompute}

// SHORT: error: 'train.repeat' op has layers [0, 4) and dist-remat's policy 'full,none' names 2 layers
// BAD: error: dist-remat: unknown policy 'budget' (none, selective, full, or one of them per layer: full,full,selective,none; budget is chosen by loomc)
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
