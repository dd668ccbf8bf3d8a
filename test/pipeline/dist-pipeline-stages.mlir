// A chain of an embedding, four layers and a tied head cut into two
// stages: the repeat splits at the cut (layer 3 keeps its dropout stream
// by numbering its iterations from 3) and its stacked weight into one
// parameter per stage, the backward of each op runs on its forward op's
// stage, the carry and its gradient cross between the stages by send and
// receive, and the tied embedding's partial gradients (from both stages)
// and the loss are all-reduced over pp; each stage's own weight keeps its
// gradient where the stage made it.
// RUN: loom-opt %s --dist-mesh="mesh=pp=2" --dist-pipeline-partition --dist-pipeline-split | FileCheck %s --check-prefix=SPLIT
// RUN: loom-opt %s --dist-mesh="mesh=pp=2" --dist-pipeline-partition --dist-pipeline-split --train-autodiff --dist-pipeline-reduce --dist-pipeline-transfers | FileCheck %s --check-prefix=STEP
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2" | FileCheck %s --check-prefix=VERIFIED
// RUN: loom-opt %s --loom-pipeline="mesh=pp=2,dp=2" | FileCheck %s --check-prefix=COMPOSE
// With dp too, each stage's batch is split and its gradients reduced over
// dp, after the pipeline's reduction over pp; one rank per stage still
// stands for the 4.
// COMPOSE: dist.verified = #dist.verified<simulated = {{[0-9]+}}, ranks = 4, class_axes = ["pp"]

// SPLIT:      %[[W0:.*]] = train.param "w[0:3]" {{.*}}dist.stages = array<i64: 0>} : tensor<3x4x4xf32>
// SPLIT-NEXT: %[[W1:.*]] = train.param "w[3:4]" {{.*}}dist.stages = array<i64: 1>} : tensor<1x4x4xf32>
// SPLIT:      train.embedding {{.*}}{dist.stage = 0 : i64}
// SPLIT-NEXT: train.repeat 3 {{.*}}stacked(%[[W0]] : {{.*}}attributes {dist.stage = 0 : i64}
// SPLIT:      train.repeat 1 {{.*}}stacked(%[[W1]] : {{.*}}attributes {dist.stage = 1 : i64}
// SPLIT-NEXT: ^bb0(%[[I:.*]]: index,
// SPLIT-NEXT:   %[[C3:.*]] = arith.constant 3 : index
// SPLIT-NEXT:   %[[L:.*]] = arith.addi %[[I]], %[[C3]] : index
// SPLIT:        train.dropout %{{.*}} stream(%[[L]])
// SPLIT:      train.cross_entropy {{.*}}{dist.stage = 1 : i64}

// STEP:      %[[FWD0:.*]], %{{.*}} = train.repeat 3 saving_carries {{.*}}attributes {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64}
// STEP:      dist.send %[[FWD0]] to "pp" = 1 {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64}
// STEP-NEXT: %[[IN1:.*]] = dist.recv from "pp" = 0 {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// STEP:      train.repeat 1 saving_carries carry(%[[IN1]] : tensor<2x4xf32>)
// STEP:      train.cross_entropy_grad {{.*}}{dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// STEP:      %[[HEAD:.*]] = train.matmul %{{.*}} transpose_lhs {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// STEP:      %[[BWD1:.*]], %[[GW1:.*]] = train.repeat 1 reverse {{.*}}attributes {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// STEP:      dist.send %[[BWD1]] to "pp" = 0 {dist.on = {pp = 1 : i64}, dist.stage = 1 : i64}
// STEP-NEXT: %[[G0:.*]] = dist.recv from "pp" = 1 {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64}
// STEP:      %{{.*}}, %[[GW0:.*]] = train.repeat 3 reverse carry(%[[G0]] : tensor<2x4xf32>) {{.*}}attributes {dist.on = {pp = 0 : i64}, dist.stage = 0 : i64}
// STEP:      %[[EMB:.*]] = train.embedding_grad {{.*}}{dist.on = {pp = 0 : i64}, dist.stage = 0 : i64}
// STEP-NEXT: %[[TIED:.*]] = train.add %[[HEAD]], %[[EMB]] :
// STEP-NEXT: %[[LOSS:.*]] = dist.all_reduce %{{.*}} over ["pp"] : tensor<f32>
// STEP-NEXT: %[[GEMB:.*]] = dist.all_reduce %[[TIED]] over ["pp"] : tensor<8x4xf32>
// STEP-NEXT: train.output loss(%[[LOSS]] : tensor<f32>) grads(%[[GEMB]], %[[GW0]], %[[GW1]] : tensor<8x4xf32>, tensor<3x4x4xf32>, tensor<1x4x4xf32>)

// The whole pipeline proves the rank program: one representative per stage
// (a send, a receive, the stages' gradients reduced over pp in one bucket
// and the loss in another: the evaluation reduces it without the backward).
// VERIFIED: dist.verified = #dist.verified<simulated = 2, ranks = 2, class_axes = ["pp"], ops = 4>
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
