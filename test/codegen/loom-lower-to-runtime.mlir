// RUN: loom-opt %s --loom-pipeline --loom-memory-plan --loom-lower-to-runtime -split-input-file -verify-diagnostics | FileCheck %s
// The pass alone, on a training step (after the Loom pipeline): every op a
// runtime call, no train op left.
// RUN: loom-opt %S/Inputs/mlp-step.mlir --loom-memory-plan --loom-lower-to-runtime | FileCheck %s --check-prefix=ALONE
// ALONE-NOT: train.
// ALONE: call @loomrt_matmul
// ALONE-NOT: train.

// Every op becomes one call under loomrt.h's rule: results, operands, shape
// ids, attributes in alphabetical order (here transpose_lhs and
// transpose_rhs as i32 flags). Persistent tensors come from loomrt_tensor,
// the rest from the arena.
// CHECK: emitc.include "loomrt/loomrt.h"
// CHECK-NEXT: func.func private @loomrt_tensor
// CHECK: func.func @loom_step(%[[CTX:.*]]: !emitc.ptr<!emitc.opaque<"loomrt_ctx">>)
// CHECK: %[[W:.*]] = call @loomrt_tensor(%[[CTX]], %{{.*}})
// CHECK: %[[Y:.*]] = call @loomrt_scratch(%[[CTX]], %{{.*}})
// CHECK: call @loomrt_matmul(%[[CTX]], %[[Y]], %{{.*}}, %[[W]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!emitc.ptr<!emitc.opaque<"loomrt_ctx">>, !emitc.ptr<!emitc.opaque<"loomrt_buf">>, !emitc.ptr<!emitc.opaque<"loomrt_buf">>, !emitc.ptr<!emitc.opaque<"loomrt_buf">>, i64, i64, i64, i32, i32) -> ()
// CHECK: call @loomrt_cross_entropy(
// CHECK: call @loomrt_cross_entropy_grad(
// CHECK: call @loomrt_sgd_update(
// The loss is copied into its tensor at the end.
// CHECK: call @loomrt_copy(
// CHECK-NEXT: return
// CHECK: func.func @loom_eval
// CHECK-NOT: loomrt_sgd_update
// The tables are EmitC globals, and main calls the runtime's loop.
// CHECK: emitc.global static const @loom_shapes : !emitc.array<{{[0-9]+}}xi64> = dense<
// CHECK: emitc.global static const @loom_tensors : !emitc.array<5x!emitc.opaque<"loomrt_tensor_desc">> = #emitc.opaque<"{
// CHECK: emitc.global static @loom_program : !emitc.opaque<"const loomrt_program"> = #emitc.opaque<"{\22linear\22, loom_tensors, 5,
// CHECK: func.func @main(%[[ARGC:.*]]: i32, %[[ARGV:.*]]: !emitc.ptr<!emitc.ptr<!emitc.opaque<"char">>>) -> i32
// CHECK-NEXT: %[[G:.*]] = emitc.get_global @loom_program
// CHECK-NEXT: %[[P:.*]] = emitc.address_of %[[G]]
// CHECK-NEXT: %[[RC:.*]] = emitc.call_opaque "loomrt_main"(%[[ARGC]], %[[ARGV]], %[[P]])
// CHECK-NEXT: return %[[RC]] : i32
// CHECK-NOT: train.
train.model @linear attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{code generation needs exactly one 'train.model', found 2}}
module {
  train.model @a attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
    %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
    %l = train.reduce sum %w dims [0] : tensor<4xf32>
    train.output loss(%l : tensor<f32>)
  }
  train.model @b attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
    %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
    %l = train.reduce sum %w dims [0] : tensor<4xf32>
    train.output loss(%l : tensor<f32>)
  }
}
