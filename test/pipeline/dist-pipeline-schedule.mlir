// dist-pipeline-schedule alone: on a rank program with a pipeline record
// it checks the schedule against the pipeline and the micro-batches and
// puts it in the program: a dist.schedule right after the micro-batch loops
// it runs, each rank's actions with the slot that keeps each micro-batch's
// saved values, and the slots a stage needs. GPipe (the program order)
// needs none; nor does a pipeline without micro-batch loops (one
// micro-batch); a model without a pipeline is left as it is; a schedule of
// another shape is refused at the model.
// RUN: loom-opt %S/Inputs/chain-rank-m2.mlir --dist-pipeline-schedule="schedule=1f1b micro-batches=2" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %S/Inputs/chain-rank-m2.mlir --dist-pipeline-schedule="schedule=gpipe micro-batches=2" | FileCheck %s --check-prefix=GPIPE
// RUN: loom-opt %s --dist-pipeline-schedule="schedule=1f1b micro-batches=1" | FileCheck %s --check-prefix=GPIPE
// RUN: printf '0F0,0B0\n' > %t.csv
// RUN: not loom-opt %s --dist-pipeline-schedule="schedule=%t.csv micro-batches=1" 2>&1 | FileCheck %s --check-prefix=SHAPE

// ONE:      train.repeat 2 reverse
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
// SHAPE: error: 'train.model' op cannot run schedule '{{.*}}.csv' of 1 ranks x 1 stages and 1 micro-batches: the pipeline has 2 ranks x 1 stages and 1 micro-batches
train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2]>, dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [1, 1], stage_costs = [1, 1], bottleneck = 1>} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}
