// RUN: loom-opt %s -split-input-file -verify-diagnostics -o /dev/null
// What every pass may assume (dialects/common/Bounds.h): dimensions of at
// least 1, tensors of at most 2^48 bytes, meshes of at most 2^20 devices,
// repeats of at most 2^20 iterations, checked where the IR is read, so no
// later pass divides by zero, overflows or allocates without bound.

// A batch of zero: the runtime's matmul divided by it.
train.model @zero_batch attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<4x4xf32>
  // expected-error @+1 {{'train.input' op result #0 ('tensor<0x4xf32>') has a dimension of size 0; every dimension must be at least 1}}
  %x = train.input "x" : tensor<0x4xf32>
  %y = train.matmul %x, %w : tensor<0x4xf32>, tensor<4x4xf32>
  %l = train.reduce sum %y dims [0, 1] : tensor<0x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A zero-size weight: autodiff's batch flattening divided by it.
train.model @zero_weight attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  // expected-error @+1 {{'train.param' op result #0 ('tensor<4x0xf32>') has a dimension of size 0}}
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<4x0xf32>
  %x = train.input "x" : tensor<2x3x4xf32>
  %y = train.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x0xf32>
  %l = train.reduce sum %y dims [0, 1, 2] : tensor<2x3x0xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// 2^63 - 1 rows: element counts, byte sizes and FLOPs overflowed.
train.model @huge attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  // expected-error @+1 {{'train.param' op result #0 ('tensor<9223372036854775807x16xf32>') has more than 2^48 bytes, the largest tensor Loom accepts}}
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<9223372036854775807x16xf32>
  %x = train.input "x" : tensor<4x16xf32>
  %y = train.matmul %x, %w transpose_rhs : tensor<4x16xf32>, tensor<9223372036854775807x16xf32>
  %l = train.reduce sum %y dims [0, 1] : tensor<4x9223372036854775807xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Just over 2^48 bytes (2^46 + 1 floats) in the body of a repeat.
train.model @huge_block_arg attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.repeat' op block argument #1 ('tensor<70368744177665xf32>') has more than 2^48 bytes}}
  %h = train.repeat 2 carry(%x : tensor<2x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<70368744177665xf32>):
    train.yield carry(%c : tensor<70368744177665xf32>)
  }
  %l = train.reduce sum %h dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// An offset of 2^63 - 1: offset plus size overflowed and was accepted.
train.model @slice_overflow attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<4x8xf32>
  // expected-error @+1 {{'train.slice' the box at offset 9223372036854775807 of size 4 in dimension 1 is not a non-empty part of [0, 8)}}
  %s = train.slice %w offsets [0, 9223372036854775807] sizes [4, 4] : tensor<4x8xf32>
  %l = train.reduce sum %s dims [0, 1] : tensor<4x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Padding to more than 63 bits.
train.model @pad_overflow attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<4x8xf32>
  // expected-error @+1 {{'train.pad' padding of dimension 1 makes it larger than 63 bits}}
  %p = train.pad %w low [0, 9223372036854775807] high [0, 1] : tensor<4x8xf32>
  train.output loss(%w : tensor<4x8xf32>)
}

// -----

// An axis of 10^11: the permute's verifier allocated a table per rank.
// expected-error @+1 {{a mesh has at most 1048576 devices; this one has more}}
train.model @huge_axis attributes {dist.mesh = #dist.mesh<["dp" = 100000000000]>} {
  %x = train.input "x" : tensor<8xf32>
  %a = dist.collective_permute %x over ["dp"] pairs [0, 1, 1, 0] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Two axes of 2^63 - 1: the product of the sizes overflowed.
// expected-error @+1 {{a mesh has at most 1048576 devices}}
train.model @overflowing_mesh attributes {dist.mesh = #dist.mesh<["dp" = 9223372036854775807, "tp" = 9223372036854775807]>} {
  %x = train.input "x" : tensor<4x8xf32>
  %l = train.reduce sum %x dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// The largest mesh: its permute checks pairs without a table per rank.
train.model @largest_mesh attributes {dist.mesh = #dist.mesh<["dp" = 1048576]>} {
  %x = train.input "x" : tensor<8xf32>
  %a = dist.collective_permute %x over ["dp"] pairs [0, 1048575, 1048575, 0] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// 2^31 layers: the communication check and the stage partitioner did work
// per layer and never finished.
train.model @deep attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.5>) : tensor<2147483648x4x4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.repeat' op repeats 2147483648 times; a repeat runs at most 1048576 times}}
  %h = train.repeat 2147483648 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<2147483648x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>):
    %y = train.matmul %c, %wi : tensor<2x4xf32>, tensor<4x4xf32>
    train.yield carry(%y : tensor<2x4xf32>)
  }
  %l = train.reduce sum %h dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}
