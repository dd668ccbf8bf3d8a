// Interleaved stages of one rank run in different actions of the schedule,
// which keep nothing for each other: stage 2 reading stage 0's value (both
// on rank 0 of 2) is refused, with the op located.
// RUN: loom-opt %s --dist-pipeline-transfers -verify-diagnostics
train.model @skip attributes {dist.mesh = #dist.mesh<["pp" = 2]>, dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 2, unit_costs = [], stage_costs = [], bottleneck = 0>} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<4x8xf32>
  %v = train.param "v" init(#train.init<normal, 0.1>) : tensor<8x8xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %labels = train.input "labels" : tensor<2xi32>
  %a = train.matmul %x, %w {dist.stage = 0 : i64} : tensor<2x4xf32>, tensor<4x8xf32>
  %b = train.matmul %a, %v {dist.stage = 1 : i64} : tensor<2x8xf32>, tensor<8x8xf32>
  // expected-error @+1 {{'train.add' op runs on pipeline stage 2 and reads a value of stage 0, which runs on the same rank; interleaved stages exchange values only with other ranks' stages}}
  %c = train.add %b, %a {dist.stage = 2 : i64} : tensor<2x8xf32>, tensor<2x8xf32>
  %d = train.matmul %c, %v {dist.stage = 3 : i64} : tensor<2x8xf32>, tensor<8x8xf32>
  %loss = train.cross_entropy %d, %labels {dist.stage = 3 : i64} : tensor<2x8xf32>, tensor<2xi32>
  train.output loss(%loss : tensor<f32>)
}
