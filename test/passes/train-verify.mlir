// RUN: loom-opt %s -split-input-file -train-verify -verify-diagnostics | FileCheck %s

// A well-formed model passes unchanged.
// CHECK-LABEL: train.model @ok
train.model @ok {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op loss does not depend on any parameter}}
train.model @constant_loss {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.input "l" : tensor<f32>
  train.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: train.model @unused
train.model @unused {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  // expected-warning @+1 {{parameter "v" does not affect the loss; its gradient is zero}}
  %v = train.param "v" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @foreign {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  // expected-error @+1 {{'func.call' op is not allowed in a 'train.model': only train ops, arith constants and ops with a runtime kernel (KernelOpInterface) are}}
  %x = func.call @f(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %l = train.reduce sum %x dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}
func.func private @f(tensor<4xf32>) -> tensor<4xf32>
