// RUN: loom-opt %S/Inputs/mlp-step.mlir --loom-memory-plan --loom-lower-to-runtime=place-only | FileCheck %s --check-prefix=PLACED
// RUN: loom-opt %S/Inputs/mlp-step.mlir --loom-memory-plan --loom-lower-to-runtime | FileCheck %s --check-prefix=LOWERED
// RUN: loom-opt %S/../pipeline/Inputs/chain-rank-m2.mlir --dist-pipeline-schedule="schedule=1f1b micro-batches=2" --loom-memory-plan --loom-lower-to-runtime=place-only | FileCheck %s --check-prefix=SPLACED
// RUN: loom-opt %S/../pipeline/Inputs/chain-rank-m2.mlir --dist-pipeline-schedule="schedule=1f1b micro-batches=2" --loom-memory-plan --loom-lower-to-runtime | FileCheck %s --check-prefix=SCHED --implicit-check-not=train. --implicit-check-not=dist. --implicit-check-not=unrealized_conversion_cast

// loom-lower-to-runtime's two steps. The walk copies the ops the function
// runs into it, as they are: a value the function does not make (here the
// tensor table's x and w1) stands in as a cast of its buffer, and the
// copies read each other's results. No buffer is made yet:
// PLACED-LABEL: func.func @loom_step
// PLACED: %[[W1:.*]] = call @loomrt_tensor(%arg0, %c0_i32)
// PLACED: %[[X:.*]] = call @loomrt_tensor(%arg0, %c8_i32)
// PLACED-NOT: loomrt_scratch
// PLACED: %[[XT:.*]] = builtin.unrealized_conversion_cast %[[X]] : !emitc.ptr<!emitc.opaque<"loomrt_buf">> to tensor<8x16xf32>
// PLACED-NEXT: %[[W1T:.*]] = builtin.unrealized_conversion_cast %[[W1]] : !emitc.ptr<!emitc.opaque<"loomrt_buf">> to tensor<16x32xf32>
// PLACED-NEXT: %[[H:.*]] = train.matmul %[[XT]], %[[W1T]]
// PLACED: train.add %[[H]],
// PLACED-NOT: call @loomrt_matmul

// Dialect conversion then lowers each copy by its pattern (here the
// generic KernelOpInterface one), which makes its result's buffer (the
// product at offset 2048 of the recorded plan) and calls the kernel with
// the converted operands, the buffers themselves: no cast and no train op
// is left.
// LOWERED-LABEL: func.func @loom_step
// LOWERED: %[[W1:.*]] = call @loomrt_tensor(%arg0, %c0_i32)
// LOWERED: %[[X:.*]] = call @loomrt_tensor(%arg0, %c8_i32)
// LOWERED: %[[AT:.*]] = arith.constant 2048 : i64
// LOWERED-NEXT: %[[H:.*]] = call @loomrt_scratch(%arg0, %[[AT]])
// LOWERED: call @loomrt_matmul(%arg0, %[[H]], %[[X]], %[[W1]],
// LOWERED-NOT: unrealized_conversion_cast
// LOWERED-NOT: train.

// Loops, guards and the schedule are patterns too. On a 2-stage pipeline
// under 1F1B with 2 micro-batches, the walk copies the micro-batch loops
// with their bodies (the stages' layer loops in them, each op with its
// `dist.on`) and the schedule after them; the function carries the
// model's mesh, against which the copies of dist ops verify:
// SPLACED-LABEL: func.func @loom_step
// SPLACED-SAME: dist.mesh = #dist.mesh<["pp" = 2]>
// SPLACED: train.repeat 2 saving_carries
// SPLACED: train.embedding {{.*}}dist.on = {pp = 0 : i64}
// SPLACED: train.repeat 3 saving_carries
// SPLACED: train.matmul
// SPLACED: train.yield
// SPLACED: train.repeat 2 reverse
// SPLACED: dist.schedule slots 2

// The schedule's pattern builds the driver, a loop over this rank's row of
// the action table, and moves the loops' bodies into its actions: the
// forward's iteration (repeat 0 in the trace) where the action is a
// forward, its embedding under the action's stage (stage 0), its stage's
// layer loop an scf.for of 3 iterations (repeat 1) whose body's matmul is
// a kernel call; the backward's iteration (repeat 3) otherwise. The loops'
// yields copy the carries; nothing of the model's dialects is left.
// SCHED-LABEL: func.func @loom_step
// SCHED: %[[ROWS:.*]] = emitc.get_global @loom_action_rows
// SCHED: scf.for
// SCHED: %[[KIND:.*]] = emitc.load
// SCHED: %[[STAGE:.*]] = emitc.load
// SCHED: call @loomrt_pipeline_trace(%arg0, %[[KIND]], %[[STAGE]],
// SCHED: %[[FWD:.*]] = arith.cmpi eq, %[[KIND]], %c0_i64
// SCHED-NEXT: scf.if %[[FWD]] {
// SCHED: call @loomrt_trace_iteration(%arg0, %c0_i64{{.*}}, %{{.*}}, %c1_i32
// SCHED: %[[S0:.*]] = arith.cmpi eq, %[[STAGE]], %c0_i64
// SCHED: scf.if %[[S0]] {
// SCHED-NEXT: arith.constant
// SCHED: call @loomrt_embedding(
// SCHED: scf.for %{{.*}} = %c0 to %c3 step
// SCHED: call @loomrt_trace_iteration(%arg0, %c1_i64{{.*}}, %{{.*}}, %c1_i32
// SCHED: call @loomrt_matmul(
// SCHED: call @loomrt_trace_iteration(%arg0, %c1_i64{{.*}}, %{{.*}}, %c0_i32
// SCHED: loomrt_copy
// SCHED: } else {
// SCHED: call @loomrt_trace_iteration(%arg0, %c3_i64{{.*}}, %{{.*}}, %c1_i32
// SCHED: call @loomrt_cross_entropy_grad(
// SCHED-LABEL: func.func @loom_eval
