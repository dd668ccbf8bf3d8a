// dist-pipeline-schedule alone: on a model with a pipeline record it checks
// the schedule against the pipeline and the micro-batches and records the
// driver's actions and the slots a stage needs; GPipe (the program order)
// records nothing; a model without a pipeline is left as it is; a schedule
// of another shape is refused at the model.
// RUN: loom-opt %s --dist-pipeline-schedule="schedule=1f1b micro-batches=4" | FileCheck %s --check-prefix=ONE
// RUN: loom-opt %s --dist-pipeline-schedule="schedule=gpipe micro-batches=4" | FileCheck %s --check-prefix=GPIPE
// RUN: printf '0F0,0B0\n' > %t.csv
// RUN: not loom-opt %s --dist-pipeline-schedule="schedule=%t.csv micro-batches=1" 2>&1 | FileCheck %s --check-prefix=SHAPE

// ONE: dist.schedule = "0F0.0,0F1.1,0B0.0,0F2.0,0B1.1,0F3.1,0B2.0,0B3.1\0A1F0.0,1B0.0,1F1.0,1B1.0,1F2.0,1B2.0,1F3.0,1B3.0\0A", dist.schedule_slots = 2 : i64
// GPIPE-NOT: dist.schedule
// SHAPE: error: 'train.model' op cannot run schedule '{{.*}}.csv' of 1 ranks x 1 stages and 1 micro-batches: the pipeline has 2 ranks x 1 stages and 1 micro-batches
train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2]>, dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [1, 1], stage_costs = [1, 1], bottleneck = 1>} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}
