// loom-to-emitc alone: a training step lowered to EmitC, the step and
// the evaluation as functions, nothing of the train dialect left.
// RUN: loom-opt %S/Inputs/mlp-step.mlir --loom-to-emitc | FileCheck %s

// CHECK-NOT: train.
// CHECK: emitc.func @loom_step
// CHECK: emitc.func @loom_eval
// CHECK-NOT: train.
