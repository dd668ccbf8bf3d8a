// RUN: loom-opt %s --loom-pipeline="mesh=tp=2" | FileCheck %s

// Megatron-LM's vocab-parallel embedding, tied head and cross-entropy over
// tp: the table is stored as a block of its rows; the lookup gives zeros
// for the ids outside the block and the ranks' lookups are summed; the head
// computes the logits of the block's classes; the loss comes from the
// all-reduced per-position maximum, sum of exponentials and label logit,
// and its gradient from the forward's maximum and sum. Nothing gathers the
// logits.
// CHECK-LABEL: train.model @lm
// CHECK: %[[WTE:.*]] = train.param "wte" {{.*}}dist.global_shape = array<i64: 32, 16>, dist.shard_groups = array<i64: 1, 0>} : tensor<16x16xf32>
// CHECK: %[[LOOKUP:.*]] = train.embedding %[[WTE]], %{{.*}} {vocab_group = 1 : i64} : tensor<16x16xf32>, tensor<4x8xi32>
// CHECK-NEXT: dist.all_reduce_start %[[LOOKUP]] over ["tp"] : tensor<4x8x16xf32>
// CHECK: %[[LOGITS:.*]] = train.matmul %{{.*}}, %[[WTE]] transpose_rhs : tensor<4x8x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[LMAX:.*]] = train.reduce max %[[LOGITS]] dims [2] : tensor<4x8x16xf32>
// CHECK-NEXT: %[[MAX:.*]] = dist.all_reduce %[[LMAX]] over ["tp"] max : tensor<4x8xf32>
// CHECK-NEXT: %[[SUM:.*]], %[[TARGET:.*]] = train.cross_entropy_stats %[[LOGITS]], %{{.*}}, %[[MAX]] {vocab_group = 1 : i64}
// CHECK-NEXT: %[[R:.*]]:2 = dist.all_reduce_start %[[TARGET]], %[[SUM]] over ["tp"]
// CHECK-NEXT: %[[W:.*]]:2 = dist.wait %[[R]]#0, %[[R]]#1
// CHECK-NEXT: %[[LOSS:.*]] = train.cross_entropy_from_stats %[[MAX]], %[[W]]#1, %[[W]]#0, %{{.*}} : tensor<4x8xf32>, tensor<4x8xi32> -> tensor<f32>
// CHECK: %[[GRAD:.*]] = train.cross_entropy_grad_from_stats %[[LOGITS]], %{{.*}}, %{{.*}}, %[[MAX]], %[[W]]#1 {vocab_group = 1 : i64}
// CHECK-NEXT: train.matmul %[[GRAD]], %[[WTE]] : tensor<4x8x16xf32>, tensor<16x16xf32>
// CHECK: train.embedding_grad %{{.*}}, %{{.*}} {vocab_group = 1 : i64} : tensor<4x8xi32>, tensor<4x8x16xf32> -> tensor<16x16xf32>
// CHECK: train.output loss(%[[LOSS]] : tensor<f32>)
// CHECK-NOT: dist.all_gather %[[LOGITS]]
train.model @lm attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %wte = train.param "wte" init(#train.init<normal, 0.02>) : tensor<32x16xf32>
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x16xf32>
  %tokens = train.input "tokens" : tensor<4x8xi32>
  %labels = train.input "labels" : tensor<4x8xi32>
  %x = train.embedding %wte, %tokens : tensor<32x16xf32>, tensor<4x8xi32>
  %y = train.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x16xf32>
  %logits = train.matmul %y, %wte transpose_rhs : tensor<4x8x16xf32>, tensor<32x16xf32>
  %loss = train.cross_entropy %logits, %labels : tensor<4x8x32xf32>, tensor<4x8xi32>
  train.output loss(%loss : tensor<f32>)
}
