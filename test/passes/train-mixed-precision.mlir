// RUN: loom-opt %s -split-input-file -train-mixed-precision -verify-diagnostics | FileCheck %s
// The whole training step: f32 master weights and AdamW state, bf16
// activations, f32 gradients for the optimizer.
// RUN: loom-opt %S/../../examples/parity.mlir --loom-pipeline="precision=bf16" | FileCheck %s --check-prefix=STEP
// With micro-batches the copy is made once, outside their loop, and each
// gradient accumulates in an f32 carry, widened before it is added.
// RUN: loom-opt %S/../../examples/parity.mlir --loom-pipeline="precision=bf16 micro-batches=2" | FileCheck %s --check-prefix=ACC
// ACC: %[[W:.*]] = train.param "wte" {{.*}} : tensor<32x16xf32>
// ACC: train.convert %[[W]] to bf16 : tensor<32x16xf32>
// ACC-NOT: to bf16 : tensor<32x16xf32>
// ACC: train.repeat 2 carry({{.*}} : tensor<f32>, tensor<f32>, tensor<32x16xf32>, tensor<8x16xf32>
// ACC-SAME: invariant({{.*}} : tensor<32x16xbf16>
// ACC: ^bb0(%{{.*}}: index, %{{.*}}: tensor<f32>, %{{.*}}: tensor<f32>, %[[ACC:.*]]: tensor<32x16xf32>,
// ACC: train.embedding_grad
// ACC-NEXT: %[[HEAD:.*]] = train.convert %{{.*}} to f32 : tensor<32x16xbf16>
// ACC-NEXT: %[[LOOKUP:.*]] = train.convert %{{.*}} to f32 : tensor<32x16xbf16>
// ACC-NEXT: %[[SUM:.*]] = train.add %[[ACC]], %[[HEAD]] : tensor<32x16xf32>, tensor<32x16xf32>
// ACC-NEXT: train.add %[[SUM]], %[[LOOKUP]] : tensor<32x16xf32>, tensor<32x16xf32>
// With grad-precision=bf16 the gradients stay bf16: the micro-batch
// accumulators are bf16 carries, the clipped gradients bf16, and each
// update reads a bf16 gradient of its f32 master and state.
// RUN: loom-opt %S/../../examples/parity.mlir --loom-pipeline="precision=bf16 grad-precision=bf16 micro-batches=2" | FileCheck %s --check-prefix=GRAD
// GRAD: %[[W:.*]] = train.param "wte" {{.*}} : tensor<32x16xf32>
// GRAD: train.repeat 2 carry({{.*}} : tensor<f32>, tensor<f32>, tensor<32x16xbf16>, tensor<8x16xbf16>
// GRAD: ^bb0(%{{.*}}: index, %{{.*}}: tensor<f32>, %{{.*}}: tensor<f32>, %[[BUF:[a-z0-9_]+]]: tensor<32x16xbf16>,
// GRAD: train.embedding_grad
// GRAD-NEXT: %[[SUM:.*]] = train.add %[[BUF]], %{{.*}} : tensor<32x16xbf16>, tensor<32x16xbf16>
// GRAD-NEXT: train.add %[[SUM]], %{{.*}} : tensor<32x16xbf16>, tensor<32x16xbf16>
// GRAD-NOT: to f32 : tensor<32x16xbf16>
// GRAD: train.sum_squares {{.*}} : tensor<32x16xbf16>, tensor<8x16xbf16>
// GRAD: %[[CLIPPED:.*]] = train.mul %{{.*}}, %{{.*}} : tensor<32x16xbf16>, tensor<bf16>
// GRAD: train.adamw_update {{.*}} %[[W]], %[[CLIPPED]], {{.*}} : tensor<32x16xf32>, tensor<32x16xbf16>
// GRAD: train.output loss({{.*}}) updates({{.*}} : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>,
// A bad value is named.
// RUN: not loom-opt %S/../../examples/parity.mlir --loom-pipeline="precision=bf16 grad-precision=fp16" 2>&1 | FileCheck %s --check-prefix=BADGRAD
// BADGRAD: train-autodiff: grad-precision must be fp32 or bf16, got 'fp16'

// A model written in bf16 gives the same program as the f32 model with
// --precision=bf16 (one mechanism):
// RUN: sed -e 's/xf32>/xbf16>/g' %S/../../examples/parity.mlir > %t.bf16.mlir
// RUN: loom-opt %S/../../examples/parity.mlir --loom-pipeline="precision=bf16" > %t.a
// RUN: loom-opt %t.bf16.mlir --loom-pipeline="precision=bf16" > %t.b
// RUN: diff %t.a %t.b

// STEP-LABEL: train.model @gpt
// STEP: %[[WTE:.*]] = train.param "wte" {{.*}} : tensor<32x16xf32>
// STEP-NEXT: train.state "wte.m" of "wte" : tensor<32x16xf32>
// STEP-NEXT: train.state "wte.v" of "wte" : tensor<32x16xf32>
// STEP-NOT: train.param {{.*}}bf16
// STEP-NOT: train.state {{.*}}bf16
// The tied embedding has one bf16 copy, read by the embedding and the head.
// STEP: %[[WTE16:.*]] = train.convert %[[WTE]] to bf16 : tensor<32x16xf32>
// STEP-NOT: train.convert %[[WTE]] to bf16
// STEP: train.embedding %[[WTE16]], %{{.*}} : tensor<32x16xbf16>, tensor<4x8xi32>
// STEP: train.attention {{.*}} : tensor<4x2x8x8xbf16>
// STEP: train.matmul %{{.*}}, %[[WTE16]] transpose_rhs
// STEP: train.cross_entropy %{{.*}}, %{{.*}} : tensor<4x8x32xbf16>, tensor<4x8xi32>
// Its two gradients are widened each and summed in f32 (autodiff's
// widenGradients), as into Megatron-LM's main_grad; the layers' weight
// gradients leave their loop in f32. The master's AdamW step is f32.
// STEP: train.repeat {{.*}} reverse {{.*}} stacked(tensor<8x16xf32>
// STEP: train.embedding_grad
// STEP: %[[HEAD:.*]] = train.convert %{{.*}} to f32 : tensor<32x16xbf16>
// STEP-NEXT: %[[LOOKUP:.*]] = train.convert %{{.*}} to f32 : tensor<32x16xbf16>
// STEP-NEXT: train.add %[[HEAD]], %[[LOOKUP]] : tensor<32x16xf32>, tensor<32x16xf32>
// STEP: train.sum_squares
// STEP: train.adamw_update {{.*}} %[[WTE]], %{{.*}}, %{{.*}}, %{{.*}} lr({{.*}}) {{.*}}: tensor<32x16xf32>

// The forward of an MLP: masters narrowed once, activations bf16, the loss
// f32 from bf16 logits.
// CHECK-LABEL: train.model @mlp
// CHECK: %[[W:.*]] = train.param "w" {{.*}} : tensor<16x4xf32>
// CHECK: %[[X:.*]] = train.input "x" : tensor<8x16xf32>
// CHECK: %[[W16:.*]] = train.convert %[[W]] to bf16 : tensor<16x4xf32>
// CHECK: %[[X16:.*]] = train.convert %[[X]] to bf16 : tensor<8x16xf32>
// CHECK: %[[H:.*]] = train.matmul %[[X16]], %[[W16]] : tensor<8x16xbf16>, tensor<16x4xbf16>
// CHECK: %[[R:.*]] = train.reshape %[[H]] : tensor<8x4xbf16> -> tensor<32xbf16>
// CHECK: %[[L:.*]] = train.cross_entropy %[[H]], %{{.*}} : tensor<8x4xbf16>, tensor<8xi32>
// A full reduction would be a bf16 scalar: it runs in f32.
// CHECK: %[[R32:.*]] = train.convert %[[R]] to f32 : tensor<32xbf16>
// CHECK: %[[S:.*]] = train.reduce sum %[[R32]] dims [0] : tensor<32xf32>
// CHECK: train.add %[[L]], %[[S]] : tensor<f32>, tensor<f32>
train.model @mlp attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %y = train.input "y" : tensor<8xi32>
  %h = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %r = train.reshape %h : tensor<8x4xf32> -> tensor<32xf32>
  %l = train.cross_entropy %h, %y : tensor<8x4xf32>, tensor<8xi32>
  %s = train.reduce sum %r dims [0] : tensor<32xf32>
  %t = train.add %l, %s : tensor<f32>, tensor<f32>
  train.output loss(%t : tensor<f32>)
}

// -----

// A loop: its carries, slices and invariants take their operands' types.
// CHECK-LABEL: train.model @loop
// CHECK: train.repeat 2 carry(%{{.*}} : tensor<2x4xbf16>) stacked(%{{.*}} : tensor<2x4x4xbf16>) : (tensor<2x4xbf16>)
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: tensor<2x4xbf16>, %{{.*}}: tensor<4x4xbf16>):
// CHECK: train.tanh %{{.*}} : tensor<2x4xbf16>
train.model @loop attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %h = train.param "h" init(#train.init<normal, 1.0>) : tensor<2x4xf32>
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<2x4x4xf32>
  %y = train.repeat 2 carry(%h : tensor<2x4xf32>) stacked(%w : tensor<2x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>):
    %m = train.matmul %c, %wi : tensor<2x4xf32>, tensor<4x4xf32>
    %t = train.tanh %m : tensor<2x4xf32>
    train.yield carry(%t : tensor<2x4xf32>)
  }
  %s = train.reduce sum %y dims [0, 1] : tensor<2x4xf32>
  train.output loss(%s : tensor<f32>)
}

// -----

// Only the forward model.
// expected-error @+1 {{'train.model' op is differentiated already: run train-mixed-precision on the forward model, before train-autodiff}}
train.model @step attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<4xf32>
  %s = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%s : tensor<f32>) grads(%w : tensor<4xf32>)
}
