// RUN: loom-opt --load-dialect-plugin=%loom_obj/lib/LoomTestKernelDialect.so %s --loom-memory-plan --loom-lower-to-runtime | FileCheck %s
// RUN: loom-opt --load-dialect-plugin=%loom_obj/lib/LoomTestKernelDialect.so %s --loom-to-emitc | FileCheck %s --check-prefix=EMITC

// An op that Loom does not define, from a dialect plugin
// (kernel-plugin/TestKernelOps.td: `loomtest.scale_by`, which declares
// train's KernelOpInterface and dist's sharding rule), lowers with no change to the
// code generator: one call of `loomrt_scale_by` with the rule of loomrt.h
// (result, operand, their shape ids, the attribute), its result in the
// arena, read by the product.
// CHECK: func.func @loom_step(%[[CTX:.*]]: !emitc.ptr<!emitc.opaque<"loomrt_ctx">>)
// CHECK: %[[Y:.*]] = call @loomrt_scratch(%[[CTX]], %{{.*}})
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f64
// CHECK-NEXT: call @loomrt_scale_by(%[[CTX]], %[[Y]], %{{.*}}, %{{.*}}, %{{.*}}, %[[TWO]]) : (!emitc.ptr<!emitc.opaque<"loomrt_ctx">>, !emitc.ptr<!emitc.opaque<"loomrt_buf">>, !emitc.ptr<!emitc.opaque<"loomrt_buf">>, i64, i64, f64) -> ()
// CHECK: call @loomrt_matmul(%[[CTX]], %{{.*}}, %[[Y]],
// CHECK-NOT: loomtest.
// EMITC: emitc.func private @loomrt_scale_by({{.*}}) attributes {specifiers = ["extern"]}
// EMITC: call @loomrt_scale_by(
// EMITC-NOT: loomtest.
module {
  train.model @mlp attributes {optimizer = #train.sgd<momentum = 9.000000e-01>, schedule = #train.schedule<lr = 1.000000e-01, warmup = 5, total = 100, decay = linear, min_lr = 1.000000e-02>} {
    %0 = train.param "w1" init(<normal, 2.500000e-01>) : tensor<16x32xf32>
    %1 = train.state "w1.momentum" of "w1" : tensor<16x32xf32>
    %2 = train.param "b1" init(<zeros>) no_decay : tensor<32xf32>
    %3 = train.state "b1.momentum" of "b1" : tensor<32xf32>
    %4 = train.param "w2" init(<normal, 1.800000e-01>) : tensor<32x4xf32>
    %5 = train.state "w2.momentum" of "w2" : tensor<32x4xf32>
    %6 = train.param "b2" init(<zeros>) no_decay : tensor<4xf32>
    %7 = train.state "b2.momentum" of "b2" : tensor<4xf32>
    %8 = train.input "x" : tensor<8x16xf32>
    %9 = train.input "y" : tensor<8xi32>
    %x2 = loomtest.scale_by %8 by 2.0 : tensor<8x16xf32>
    %10 = train.matmul %x2, %0 : tensor<8x16xf32>, tensor<16x32xf32>
    %11 = train.add %10, %2 : tensor<8x32xf32>, tensor<32xf32>
    %12 = train.relu %11 : tensor<8x32xf32>
    %13 = train.matmul %12, %4 : tensor<8x32xf32>, tensor<32x4xf32>
    %14 = train.add %13, %6 : tensor<8x4xf32>, tensor<4xf32>
    %15 = train.cross_entropy %14, %9 : tensor<8x4xf32>, tensor<8xi32>
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %16 = train.cross_entropy_grad %14, %9, %cst : tensor<8x4xf32>, tensor<8xi32>
    %17 = train.sum_to %16 : tensor<8x4xf32> -> tensor<4xf32>
    %18 = train.matmul %16, %4 transpose_rhs : tensor<8x4xf32>, tensor<32x4xf32>
    %19 = train.matmul %12, %16 transpose_lhs : tensor<8x32xf32>, tensor<8x4xf32>
    %20 = train.relu_grad %11, %18 : tensor<8x32xf32>
    %21 = train.sum_to %20 : tensor<8x32xf32> -> tensor<32xf32>
    %22 = train.matmul %x2, %20 transpose_lhs : tensor<8x16xf32>, tensor<8x32xf32>
    %23 = train.iteration : tensor<f32>
    %24 = train.lr_schedule <lr = 1.000000e-01, warmup = 5, total = 100, decay = linear, min_lr = 1.000000e-02> at %23
    %new_param, %new_momentum_buffer = train.sgd_update <momentum = 9.000000e-01> %0, %22 momentum(%1 : tensor<16x32xf32>) lr(%24) : tensor<16x32xf32>
    %new_param_0, %new_momentum_buffer_1 = train.sgd_update <momentum = 9.000000e-01> %2, %21 momentum(%3 : tensor<32xf32>) lr(%24) : tensor<32xf32>
    %new_param_2, %new_momentum_buffer_3 = train.sgd_update <momentum = 9.000000e-01> %4, %19 momentum(%5 : tensor<32x4xf32>) lr(%24) : tensor<32x4xf32>
    %new_param_4, %new_momentum_buffer_5 = train.sgd_update <momentum = 9.000000e-01> %6, %17 momentum(%7 : tensor<4xf32>) lr(%24) : tensor<4xf32>
    train.output loss(%15 : tensor<f32>) updates(%new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3, %new_param_4, %new_momentum_buffer_5 : tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x4xf32>, tensor<32x4xf32>, tensor<4xf32>, tensor<4xf32>)
  }
}

