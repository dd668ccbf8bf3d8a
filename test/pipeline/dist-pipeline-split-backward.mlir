// ZB-H1's backward in two parts: the input part runs what the stages'
// transfers need (the gradient sent back and received), the weight part
// the weights' gradients, reading what the forward saved (the micro-batch
// loop keeps residuals) and what the input part kept per micro-batch. A
// stage's layers split the same way: the chain of input gradients stacks
// per layer what the weight gradients read. Nothing of the forward is
// recomputed (no loss), and each stage's own weight (one parameter per
// stage) is read again rather than kept. (The whole pipeline with ZB-H1:
// the split, then dist-pipeline-fold-accumulations, whose layer loops add
// into the stages' accumulators.)
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=zb" | FileCheck %s
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=zb" | FileCheck %s --check-prefix=VERIFIED
// RUN: not loom-opt %s --loom-pipeline="mesh=pp=2" --dist-pipeline-split-backward 2>&1 | FileCheck %s --check-prefix=NOLOOP
// The pass alone, on the rank program of a pipeline with two micro-batches:
// RUN: loom-opt %S/Inputs/chain-rank-m2.mlir --dist-pipeline-split-backward | FileCheck %s --check-prefix=ALONE
// ALONE: train.repeat {{.*}}dist.backward = "input"
// ALONE: train.repeat {{.*}}dist.backward = "weight"

// CHECK-LABEL: train.model @chain
// The input part: stage 1's input gradients through its layer, sent back.
// CHECK:      %{{.*}}, %[[IN:.*]]:3 = train.repeat 2 reverse carry({{.*}} attributes {dist.backward = "input"}
// CHECK-NOT:  train.cross_entropy %
// CHECK:      train.cross_entropy_grad {{.*}}dist.stage = 1
// CHECK:      train.repeat 1 reverse carry(
// CHECK:        train.matmul %{{.*}}, %{{.*}} transpose_rhs :
// CHECK-NOT:    transpose_lhs
// CHECK:        train.yield carry(
// CHECK:      dist.send %{{.*}} to "pp" = 0 {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// CHECK-NEXT: dist.recv from "pp" = 1 {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64}
// CHECK-NEXT: train.yield carry(%{{.*}} : tensor<f32>) stacked(
// CHECK-NEXT: }
// The weight part: it accumulates each stage's part of the gradients in a
// carry of its own, updated on that stage (a layer loop adds its layers'
// gradients into its stage's accumulator), and sends nothing.
// CHECK-NEXT: %[[W:.*]]:4 = train.repeat 2 reverse carry(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<3x4x4xf32>, tensor<1x4x4xf32>) stacked({{.*}}%[[IN]]#0, %[[IN]]#1, %[[IN]]#2 :{{.*}} attributes {dist.backward = "weight"}
// CHECK-NEXT: ^bb0(%arg{{[0-9]+}}: index, %arg{{[0-9]+}}: tensor<8x4xf32>, %arg{{[0-9]+}}: tensor<8x4xf32>, %[[ACC0:arg[0-9]+]]: tensor<3x4x4xf32>, %[[ACC1:arg[0-9]+]]: tensor<1x4x4xf32>,
// CHECK-NOT:  dist.send
// CHECK:      train.matmul %{{.*}}, %{{.*}} transpose_lhs {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// CHECK:      %[[G1:.*]] = train.repeat 1 reverse stacked({{.*}}, %[[ACC1]] :
// CHECK-NEXT: ^bb0(
// CHECK-NEXT:   train.matmul %{{.*}}, %{{.*}} transpose_lhs :
// CHECK-NEXT:   train.add
// CHECK-NEXT:   train.yield stacked(
// CHECK:      %[[G0:.*]] = train.repeat 3 reverse stacked({{.*}}, %[[ACC0]] :
// CHECK:      train.embedding_grad {{.*}}dist.stage = 0
// CHECK-NEXT: train.add %arg1, %{{.*}} {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64} : tensor<8x4xf32>
// CHECK-NEXT: train.add %arg2, %{{.*}} {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64} : tensor<8x4xf32>
// CHECK-NEXT: train.yield carry(%{{.*}}, %{{.*}}, %[[G0]], %[[G1]] :
// CHECK-NEXT: }
// CHECK-NEXT: dist.schedule slots 2 {
// CHECK:      dist.action backward_weight stage 1 micro_batch 1 slot 1
// CHECK-NEXT: }
// CHECK-NEXT: }
// After the loop, once: the loss reduced over pp (on its own: the
// evaluation reduces it without the backward), the tied embedding's parts
// summed (no zeros added) and reduced over pp; each stage's weight
// gradient is its accumulator, updated on its stage, not reduced.
// CHECK-NEXT: dist.all_reduce_start %{{.*}} over ["pp"] : tensor<f32>
// CHECK-NEXT: %[[E:.*]] = train.add %[[W]]#0, %[[W]]#1 : tensor<8x4xf32>
// CHECK-NEXT: dist.all_reduce_start %[[E]] over ["pp"] : tensor<8x4xf32>
// CHECK-NOT:  over ["pp"] : tensor<{{[0-9]}}x4x4xf32>
// CHECK: train.sgd_update <> %{{.*}}, %[[W]]#2 lr(%{{.*}}) {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64} : tensor<3x4x4xf32>
// CHECK-NEXT: train.sgd_update <> %{{.*}}, %[[W]]#3 lr(%{{.*}}) {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64} : tensor<1x4x4xf32>

// NOLOOP: error: 'train.model' op has no micro-batch loop whose backward could be split (a split backward needs --micro-batches above 1)
// Per micro-batch a send and a receive on each rank, the tied embedding's
// all-reduce and the loss's.
// VERIFIED: dist.verified = #dist.verified<simulated = 2, ranks = 2, class_axes = ["pp"], ops = 6>
train.model @chain attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %emb = train.param "emb" init(#train.init<normal, 0.1>) : tensor<8x4xf32>
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<4x4x4xf32>
  %tokens = train.input "tokens" : tensor<2xi32>
  %labels = train.input "labels" : tensor<2xi32>
  %x = train.embedding %emb, %tokens : tensor<8x4xf32>, tensor<2xi32>
  %h = train.repeat 4 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<4x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wl: tensor<4x4xf32>):
    %u = train.matmul %c, %wl : tensor<2x4xf32>, tensor<4x4xf32>
    %d = train.dropout %u stream(%i) rate 0.1 seed 5 : tensor<2x4xf32>
    train.yield carry(%d : tensor<2x4xf32>)
  }
  %logits = train.matmul %h, %emb transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32>
  %loss = train.cross_entropy %logits, %labels : tensor<2x8xf32>, tensor<2xi32>
  train.output loss(%loss : tensor<f32>)
}
