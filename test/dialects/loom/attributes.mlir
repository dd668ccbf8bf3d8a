// The loom dialect declares the memory plan loom-memory-plan records and
// verifies it: per function, one array of offsets per pipeline rank with
// one offset per result, each in that rank's arena or -1, as many ranks as
// the model's arena sizes, and sizes that are not negative; another loom.*
// attribute is an error.
// RUN: loom-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// A plan of two pipeline ranks for the step and the evaluation round-trips.
// CHECK: loom.peak_bytes = {eval = array<i64: 32, 0>, step = array<i64: 64, 32>}
// CHECK: train.exp %{{.*}} {loom.offsets = {eval = [array<i64: 0>, array<i64: -1>], step = [array<i64: 32>, array<i64: 0>]}}
train.model @m attributes {loom.peak_bytes = {step = array<i64: 64, 32>, eval = array<i64: 32, 0>}} {
  %x = train.input "x" : tensor<2x4xf32>
  %e = train.exp %x {loom.offsets = {step = [array<i64: 32>, array<i64: 0>], eval = [array<i64: 0>, array<i64: -1>]}} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {loom.peak_bytes = {step = array<i64: 64>}} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' lists 2 offsets for 1 results}}
  %e = train.exp %x {loom.offsets = {step = [array<i64: 0, 32>]}} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {loom.peak_bytes = {step = array<i64: 64, 128>}} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' places a value of 'step' at 64, outside the arena of 64 bytes}}
  %e = train.exp %x {loom.offsets = {step = [array<i64: 64>, array<i64: 64>]}} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {loom.peak_bytes = {step = array<i64: 64, 128>}} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' lists 1 pipeline ranks for 'step', the model's arena sizes 2}}
  %e = train.exp %x {loom.offsets = {step = [array<i64: 0>]}} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' has the offset -2 (an arena offset, or -1 outside the arena)}}
  %e = train.exp %x {loom.offsets = {eval = [array<i64: -2>]}} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' must be a dictionary of the functions' plans, got array<i64: 0>}}
  %e = train.exp %x {loom.offsets = array<i64: 0>} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.exp' op attribute 'loom.offsets' must list an array<i64> per pipeline rank for 'step', got array<i64: 0>}}
  %e = train.exp %x {loom.offsets = {step = array<i64: 0>}} : tensor<2x4xf32>
  %loss = train.reduce sum %e dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op attribute 'loom.peak_bytes' must not be negative, got -1}}
train.model @m attributes {loom.peak_bytes = {step = array<i64: 64, -1>}} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op attribute 'loom.peak_bytes' must give an array<i64> of arena sizes for 'step', got 64 : i64}}
train.model @m attributes {loom.peak_bytes = {step = 64 : i64}} {
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
