// The dist dialect declares the attributes one pass leaves for another and
// verifies each where it is set: its type, and what it says against the
// mesh and the pipeline it names. An unknown dist.* attribute is an error.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'train.model' op attribute 'dist.mesh' must be a #dist.mesh, got "dp=2"}}
train.model @m attributes {dist.mesh = "dp=2"} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op has the unknown attribute 'dist.stagez'}}
train.model @m attributes {dist.stagez = 1 : i64} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [], stage_costs = [], bottleneck = 0>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.stage' names stage 2 of a pipeline of 2 stages}}
  %loss = train.reduce sum %x dims [0, 1] {dist.stage = 2 : i64} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.stage' has a negative stage (-1)}}
  %loss = train.reduce sum %x dims [0, 1] {dist.stage = -1 : i64} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.stage' must be an integer, got "0"}}
  %loss = train.reduce sum %x dims [0, 1] {dist.stage = "0"} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2]>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.on' names axis "tp", which the mesh #dist.mesh<["pp" = 2, "dp" = 2]> does not have}}
  %loss = train.reduce sum %x dims [0, 1] {dist.on = {tp = 0 : i64}} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2]>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.on' puts the op at pp = 2, outside the axis of size 2}}
  %loss = train.reduce sum %x dims [0, 1] {dist.on = {pp = 2 : i64}} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// dist.on may list several coordinates of an axis, ascending.
train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 4]>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.on' puts the op at pp = 4, outside the axis of size 4}}
  %loss = train.reduce sum %x dims [0, 1] {dist.on = {pp = array<i64: 0, 4>}} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 4]>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.on' maps axis "pp" to array<i64: 3, 0>, not to an index or an ascending array<i64> of them}}
  %loss = train.reduce sum %x dims [0, 1] {dist.on = {pp = array<i64: 3, 0>}} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.ranks' names rank 2 of a mesh of 2 ranks}}
  %loss = train.reduce sum %x dims [0, 1] {dist.ranks = array<i64: 0, 2>} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  // expected-error @+1 {{'train.input' op attribute 'dist.sharding' lists 2 shardings for 1 results}}
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {}]>, #dist.sharding<[{"dp"}, {}]>]} : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 4]>} {
  // expected-error @+1 {{does not divide}}
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {}]>]} : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  // expected-error @+1 {{'train.param' op attribute 'dist.global_shape' comes with 'dist.shard_groups', which the op lacks}}
  %w = train.param "w" init(#train.init<normal, 0.1>) {dist.global_shape = array<i64: 4, 4>} : tensor<2x4xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  // expected-error @+1 {{'train.param' op attribute 'dist.global_shape' gives a whole shape that blocks of 'tensor<3x4xf32>' do not make over their groups}}
  %w = train.param "w" init(#train.init<normal, 0.1>) {dist.global_shape = array<i64: 4, 4>, dist.shard_groups = array<i64: 1, 0>} : tensor<3x4xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<3x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.reduce' op attribute 'dist.backward' must be "input" or "weight", got "both"}}
  %loss = train.reduce sum %x dims [0, 1] {dist.backward = "both"} : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{lists 3 stage costs for 2 x 1 stages}}
train.model @m attributes {dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [1], stage_costs = [1, 2, 3], bottleneck = 3>} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @+1 {{needs 1 <= simulated <= ranks and ops >= 0}}
train.model @m attributes {dist.verified = #dist.verified<simulated = 4, ranks = 2, class_axes = ["pp"], ops = 3>} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// An axis's role: implied by dp, tp and pp, stated for any other name, and
// each role on one axis at most.
// expected-error @below {{mesh axis "x" needs a role: "x" = N : data, tensor or pipeline}}
train.model @m attributes {dist.mesh = #dist.mesh<["x" = 2]>} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// expected-error @below {{mesh axes "pp" and "stage" both have the role pipeline (each role is on one axis at most)}}
train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2, "stage" = 2 : pipeline]>} {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// A stage's part of a stacked parameter lies inside the whole tensor.
train.model @m {
  // expected-error @+1 {{'train.param' op attribute 'dist.part' puts a part of 'tensor<3x4xf32>' at offsets [2, 0] outside the whole tensor [4, 4]}}
  %w = train.param "w[2:5]" init(#train.init<normal, 0.1>) {dist.part = #dist.part<of = "w", whole = [4, 4], offsets = [2, 0]>} : tensor<3x4xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<3x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// A part of 2^63 - 1 rows: offset + size overflowed (signed overflow in
// the verifier) instead of being refused.
train.model @m {
  // expected-error @+1 {{'train.param' op attribute 'dist.part' puts a part of 'tensor<9223372036854775807x4xf32>' at offsets [2, 0] outside the whole tensor [4, 4]}}
  %w = train.param "w[2:5]" init(#train.init<normal, 0.1>) {dist.part = #dist.part<of = "w", whole = [4, 4], offsets = [2, 0]>} : tensor<9223372036854775807x4xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<9223372036854775807x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  // expected-error @+1 {{'train.param' op attribute 'dist.part' must have one entry per dimension of 'tensor<2x4xf32>'}}
  %w = train.param "w[0:2]" init(#train.init<normal, 0.1>) {dist.part = #dist.part<of = "w", whole = [4, 4, 4], offsets = [0, 0, 0]>} : tensor<2x4xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

train.model @m {
  // expected-error @+1 {{needs one offset per dimension of the whole tensor, got 1 for 2}}
  %w = train.param "w[0:2]" init(#train.init<normal, 0.1>) {dist.part = #dist.part<of = "w", whole = [4, 4], offsets = [0]>} : tensor<2x4xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// The part's extent is the whole of its blocks where it is stored as
// blocks: rows [2, 4) of the stacked tensor, split over tp.
train.model @m {
  %w = train.param "w[2:4]" init(#train.init<normal, 0.1>) {dist.part = #dist.part<of = "w", whole = [4, 4], offsets = [2, 0]>, dist.global_shape = array<i64: 2, 4>, dist.shard_groups = array<i64: 0, 1>} : tensor<2x2xf32>
  %loss = train.reduce sum %w dims [0, 1] : tensor<2x2xf32>
  train.output loss(%loss : tensor<f32>)
}
