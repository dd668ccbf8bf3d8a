// RUN: loom-opt %S/Inputs/mlp-step.mlir --loom-memory-plan --loom-lower-to-runtime=place-only | FileCheck %s --check-prefix=PLACED
// RUN: loom-opt %S/Inputs/mlp-step.mlir --loom-memory-plan --loom-lower-to-runtime | FileCheck %s --check-prefix=LOWERED

// loom-lower-to-runtime's two steps. The walk gives every value its buffer
// (the first product at offset 2048 of the recorded plan) and leaves the
// op where it runs, reading its operands' buffers (the tensor table's x and
// w1) through casts to their tensor types:
// PLACED-LABEL: func.func @loom_step
// PLACED: %[[W1:.*]] = call @loomrt_tensor(%arg0, %c0_i32)
// PLACED: %[[X:.*]] = call @loomrt_tensor(%arg0, %c8_i32)
// PLACED: %[[AT:.*]] = arith.constant 2048 : i64
// PLACED-NEXT: %[[H:.*]] = call @loomrt_scratch(%arg0, %[[AT]])
// PLACED-NEXT: %[[XT:.*]] = builtin.unrealized_conversion_cast %[[X]] : !emitc.ptr<!emitc.opaque<"loomrt_buf">> to tensor<8x16xf32>
// PLACED-NEXT: %[[W1T:.*]] = builtin.unrealized_conversion_cast %[[W1]] : !emitc.ptr<!emitc.opaque<"loomrt_buf">> to tensor<16x32xf32>
// PLACED-NEXT: train.matmul %[[XT]], %[[W1T]]
// PLACED-NOT: call @loomrt_matmul

// Dialect conversion then lowers it by the generic KernelOpInterface
// pattern, with the converted operands (the buffers themselves) and the
// result's buffer: no cast and no train op is left.
// LOWERED-LABEL: func.func @loom_step
// LOWERED: %[[W1:.*]] = call @loomrt_tensor(%arg0, %c0_i32)
// LOWERED: %[[X:.*]] = call @loomrt_tensor(%arg0, %c8_i32)
// LOWERED: %[[AT:.*]] = arith.constant 2048 : i64
// LOWERED-NEXT: %[[H:.*]] = call @loomrt_scratch(%arg0, %[[AT]])
// LOWERED: call @loomrt_matmul(%arg0, %[[H]], %[[X]], %[[W1]],
// LOWERED-NOT: unrealized_conversion_cast
// LOWERED-NOT: train.
