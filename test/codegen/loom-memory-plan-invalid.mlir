// RUN: loom-opt %s --loom-memory-plan -verify-diagnostics

// expected-error @+1 {{'train.model' op is not a training step yet (run the Loom pipeline: train-autodiff, train-optimizer)}}
train.model @untrained {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}
