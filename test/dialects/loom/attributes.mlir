// The loom dialect declares the memory plan loom-memory-plan records and
// verifies it: one offset per result, each in the arena or -1, and an arena
// size that is not negative; another loom.* attribute is an error.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

train.model @m attributes {loom.peak_bytes = 64 : i64} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' lists 2 offsets for 1 results}}
  %e = train.exp %x {loom.offsets = array<i64: 0, 32>} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {loom.peak_bytes = 64 : i64} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' places a value at 64, outside the arena of 64 bytes}}
  %e = train.exp %x {loom.offsets = array<i64: 64>} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' has the offset -2 (an arena offset, or -1 outside the arena)}}
  %e = train.exp %x {loom.offsets = array<i64: -2>} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op attribute 'loom.peak_bytes' must not be negative, got -1}}
train.model @m attributes {loom.peak_bytes = -1 : i64} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op has the unknown attribute 'loom.peak': the loom dialect declares loom.offsets and loom.peak_bytes}}
train.model @m attributes {loom.peak = 1 : i64} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}
