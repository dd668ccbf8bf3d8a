// Gradient accumulation adds each micro-batch's gradients into the
// accumulators with the kernels that make them (Megatron-LM's fused
// gradient accumulation): no gradient tensor per micro-batch.
// RUN: loom-opt %S/Inputs/tied-accumulation.mlir --loom-pipeline="micro-batches=2" | FileCheck %s --check-prefix=IR
// RUN: loom-opt %S/Inputs/tied-accumulation.mlir --loom-pipeline="micro-batches=2" --loom-memory-plan --loom-lower-to-runtime | FileCheck %s

// The tied embedding's accumulator plus the sum of its two gradients (the
// head's and the lookup's) becomes a chain: accumulator + head + lookup.
// IR: ^bb0(%{{.*}}: index, %{{.*}}: tensor<f32>, %{{.*}}: tensor<f32>, %[[WTE:[a-z0-9]+]]: tensor<16x8xf32>,
// IR: %[[HEAD:.*]] = train.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<8x16xf32>, tensor<8x8xf32>
// IR: %[[LOOKUP:.*]] = train.embedding_grad
// IR: %[[LINK:.*]] = train.add %[[WTE]], %[[HEAD]] : tensor<16x8xf32>
// IR-NEXT: %[[SUM:.*]] = train.add %[[LINK]], %[[LOOKUP]] : tensor<16x8xf32>
// IR: train.yield carry(%{{.*}}, %{{.*}}, %[[SUM]],

// In the micro-batch loop's backward, the head's weight gradient is a gemm
// with beta = 1 into the accumulator, the norm's gamma and beta gradients,
// the position embedding's sum and the lookup's scatter are added there by
// their kernels, and no add runs for any of them (the only adds of the
// loop are the forward's and the loss's).
// CHECK-LABEL: func.func @loom_step
// CHECK: call @loomrt_embedding(
// CHECK: call @loomrt_add(
// CHECK: call @loomrt_add(
// CHECK: call @loomrt_cross_entropy_grad(
// CHECK-NOT: call @loomrt_add(
// CHECK: call @loomrt_matmul(
// CHECK-NOT: call @loomrt_add(
// CHECK: call @loomrt_matmul_accumulate(
// CHECK-NOT: call @loomrt_add(
// CHECK: call @loomrt_layer_norm_grad_accumulate(
// CHECK-NOT: call @loomrt_add(
// CHECK: call @loomrt_sum_to_accumulate(
// CHECK-NOT: call @loomrt_add(
// CHECK: call @loomrt_embedding_grad_accumulate(
// CHECK-NOT: call @loomrt_add(
// CHECK: call @loomrt_sgd_update(
// CHECK-LABEL: func.func @loom_eval
// CHECK-NOT: _accumulate(
