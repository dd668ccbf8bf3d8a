// loom-lower-to-runtime reads the memory plan loom-memory-plan recorded,
// and plans nothing itself: an offset and an arena size edited in the
// recorded plan are the ones the rank program uses. Without a plan, or
// with an op the plan does not cover (a pass ran after it), the lowering
// stops with an error that says so.
// RUN: loom-opt %s --loom-pipeline --loom-memory-plan -o %t.planned.mlir
// RUN: loom-opt %t.planned.mlir --loom-lower-to-runtime | FileCheck %s --check-prefix=PLANNED
// RUN: sed -e 's/step = \[array<i64: 256>\]/step = [array<i64: 4096>]/' -e 's/step = array<i64: 384>/step = array<i64: 8192>/' %t.planned.mlir > %t.edited.mlir
// RUN: loom-opt %t.edited.mlir --loom-lower-to-runtime | FileCheck %s --check-prefix=EDITED
// RUN: loom-opt %s --loom-pipeline -o %t.unplanned.mlir
// RUN: not loom-opt %t.unplanned.mlir --loom-lower-to-runtime 2>&1 | FileCheck %s --check-prefix=UNPLANNED
// RUN: sed -e 's/ {loom.offsets = {step = \[array<i64: 320>\]}}//' %t.planned.mlir > %t.stale.mlir
// RUN: not loom-opt %t.stale.mlir --loom-lower-to-runtime 2>&1 | FileCheck %s --check-prefix=STALE

// The step's sum at 256 in its arena of 384 bytes (the evaluation's is 192).
// PLANNED-LABEL: func.func @loom_step
// PLANNED: %[[AT:.*]] = arith.constant 256 : i64
// PLANNED-NEXT: %[[SUM:.*]] = call @loomrt_scratch(%arg0, %[[AT]])
// PLANNED: call @loomrt_reduce(%arg0, %[[SUM]],
// PLANNED: emitc.global static const @loom_arena_bytes : !emitc.array<1xi64> = dense<384>

// EDITED-LABEL: func.func @loom_step
// EDITED: %[[AT:.*]] = arith.constant 4096 : i64
// EDITED-NEXT: %[[SUM:.*]] = call @loomrt_scratch(%arg0, %[[AT]])
// EDITED: call @loomrt_reduce(%arg0, %[[SUM]],
// EDITED: emitc.global static const @loom_arena_bytes : !emitc.array<1xi64> = dense<8192>

// UNPLANNED: error: 'train.model' op has no memory plan for its 'step' function: run loom-memory-plan first

// STALE: error: 'arith.constant' op has no memory plan for the model's 'step' function (a pass changed the program after loom-memory-plan)

train.model @chain attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 1.0>) : tensor<4x8xf32>
  %x = train.input "x" : tensor<4x8xf32>
  %a = train.mul %x, %w : tensor<4x8xf32>, tensor<4x8xf32>
  %b = train.exp %a : tensor<4x8xf32>
  %c = train.reshape %b : tensor<4x8xf32> -> tensor<32xf32>
  %l = train.reduce sum %c dims [0] : tensor<32xf32>
  train.output loss(%l : tensor<f32>)
}
