// dist-pipeline-schedule puts the schedule the rank program runs in it (a
// dist.schedule after the micro-batch loops: each rank's actions with each
// micro-batch's slot, and the slots a stage needs); 1F1B is the default;
// GPipe's order is the program order and needs none; a schedule that
// cannot complete is refused at the model.
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=1f1b" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=1f1b" | FileCheck %s --check-prefix=VERIFIED
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=gpipe" | FileCheck %s --check-prefix=GPIPE
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2" | FileCheck %s --check-prefix=ONE
// RUN: printf '0B0,0F0,0F1,0B1\n1F0,1B0,1F1,1B1\n' > %t.csv
// RUN: not loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=%t.csv" 2>&1 | FileCheck %s --check-prefix=STUCK
// RUN: printf '0F0,0F1,0F2,0B0,0B1,0B2\n1F0,1F1,1F2,1B0,1B1,1B2\n' > %t.three.csv
// RUN: not loom-opt %s --loom-pipeline="mesh=pp=2 micro-batches=2 schedule=%t.three.csv" 2>&1 | FileCheck %s --check-prefix=COUNT

// ONE:      dist.schedule slots 2 {
// ONE-NEXT:   dist.rank_actions 0 {
// ONE-NEXT:     dist.action forward stage 0 micro_batch 0 slot 0
// ONE-NEXT:     dist.action forward stage 0 micro_batch 1 slot 1
// ONE-NEXT:     dist.action backward stage 0 micro_batch 0 slot 0
// ONE-NEXT:     dist.action backward stage 0 micro_batch 1 slot 1
// ONE-NEXT:   }
// ONE-NEXT:   dist.rank_actions 1 {
// ONE-NEXT:     dist.action forward stage 1 micro_batch 0 slot 0
// ONE-NEXT:     dist.action backward stage 1 micro_batch 0 slot 0
// ONE-NEXT:     dist.action forward stage 1 micro_batch 1 slot 0
// ONE-NEXT:     dist.action backward stage 1 micro_batch 1 slot 0
// ONE-NEXT:   }
// ONE-NEXT: }
// GPIPE-NOT: dist.schedule
// STUCK: error: 'train.model' op cannot run schedule '{{.*}}.csv': the schedule cannot complete: rank 0 waits to run 0B0, which needs 0F0 (rank 0)
// COUNT: error: 'train.model' op cannot run schedule '{{.*}}three.csv' of 2 ranks x 1 stages and 3 micro-batches: the pipeline has 2 ranks x 1 stages and 2 micro-batches
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
