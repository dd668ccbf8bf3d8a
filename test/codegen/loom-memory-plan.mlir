// RUN: loom-opt %s --loom-pipeline="remat=full" --loom-memory-plan -split-input-file -verify-diagnostics | FileCheck %s

// Liveness-based reuse, planned for each function of the program: the
// training step (`step`) and the evaluation (`eval`, the forward alone).
// In the step the product dies once exp has read it, and exp, pointwise,
// writes over it (a pointwise op takes the bytes of an operand of its type
// that nothing reads after it); reshapes alias their input; the backward's
// broadcast takes fresh bytes and its two products write over them; the
// parameter update is written in place (outside the arena, -1); the step's
// arena peak is 384 bytes (five 128-byte activations would need 640
// without reuse). The evaluation runs no backward and no update (their
// ops have no `eval` entry), and its arena is 192 bytes.
// CHECK-LABEL: train.model @chain
// CHECK-SAME: loom.peak_bytes = {eval = array<i64: 192>, step = array<i64: 384>}
// CHECK: train.param "w" {{.*}}loom.offsets = {eval = [array<i64: -1>], step = [array<i64: -1>]}
// CHECK: %[[A:.*]] = train.mul {{.*}}eval = [array<i64: 0>], step = [array<i64: 0>]
// CHECK: %[[B:.*]] = train.exp %[[A]] {{.*}}eval = [array<i64: 0>], step = [array<i64: 0>]
// CHECK: train.reshape %[[B]] {{.*}}eval = [array<i64: 0>], step = [array<i64: 0>]
// CHECK: %[[G:.*]] = train.broadcast {{.*}}loom.offsets = {step = [array<i64: 128>]}
// CHECK: %[[GR:.*]] = train.reshape %[[G]] {loom.offsets = {step = [array<i64: 128>]}}
// CHECK: %[[D:.*]] = train.mul %[[GR]], %[[B]] {loom.offsets = {step = [array<i64: 128>]}}
// CHECK: train.mul %[[D]], %{{.*}} {loom.offsets = {step = [array<i64: 128>]}}
// CHECK: train.sgd_update {{.*}}loom.offsets = {step = [array<i64: -1>]}
train.model @chain attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 1.0>) : tensor<4x8xf32>
  %x = train.input "x" : tensor<4x8xf32>
  %a = train.mul %x, %w : tensor<4x8xf32>, tensor<4x8xf32>
  %b = train.exp %a : tensor<4x8xf32>
  %c = train.reshape %b : tensor<4x8xf32> -> tensor<32xf32>
  %l = train.reduce sum %c dims [0] : tensor<32xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A repeat body is planned once, for one iteration: in the step its two
// values share bytes [0, 64) of the arena (tanh writes over the product)
// while the repeat runs, apart from the carry (64) and the saved carries
// (192). The backward's weight gradient, which its body yields and nothing
// else reads, has no bytes of its own (-1): it is made in the loop's
// result.
// CHECK-LABEL: train.model @stack
// CHECK: train.repeat 3 saving_carries {{.*}}step = [array<i64: 64, 192>]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: train.matmul {{.*}}step = [array<i64: 0>]
// CHECK-NEXT: train.tanh {{.*}}step = [array<i64: 0>]
// CHECK: train.repeat 3 reverse
// CHECK: train.matmul %{{.*}}, %{{.*}} transpose_lhs {loom.offsets = {step = [array<i64: -1>]}}
// CHECK-NEXT: train.yield
train.model @stack attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<3x4x4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %h = train.repeat 3 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<3x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>):
    %y = train.matmul %c, %wi : tensor<2x4xf32>, tensor<4x4xf32>
    %t = train.tanh %y : tensor<2x4xf32>
    train.yield carry(%t : tensor<2x4xf32>)
  }
  %l = train.reduce sum %h dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

