// RUN: loom-opt %s -split-input-file --dist-partition | FileCheck %s
// RUN: loom-opt %loom_src/examples/parity.mlir --loom-pipeline="mesh=dp=2,tp=2" | FileCheck %s --check-prefix=BLOCK

// dist-partition on shardings written by hand (as propagation records
// them): each reshard kind.

// Swapping the axes of two dimensions takes several steps: both gathered
// (innermost first), then split the other way, locally.
// CHECK-LABEL: train.model @swap
// CHECK: %[[X:.*]] = train.input "x" : tensor<8x8xf32>
// CHECK-NEXT: %[[S:.*]] = dist.shard %[[X]] axes {{\[}}["dp"], ["tp"]] : tensor<8x8xf32> -> tensor<4x4xf32>
// CHECK: %[[R:.*]] = train.relu %[[S]] : tensor<4x4xf32>
// CHECK-NEXT: %[[G0:.*]] = dist.all_gather %[[R]] over ["dp"] dim 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[G1:.*]] = dist.all_gather %[[G0]] over ["tp"] dim 1 : tensor<8x4xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[T:.*]] = dist.shard %[[G1]] axes {{\[}}["tp"], ["dp"]] : tensor<8x8xf32> -> tensor<4x4xf32>
// CHECK: train.exp %[[T]] : tensor<4x4xf32>
train.model @swap attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<8x8xf32>
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {"tp"} ]>]} : tensor<8x8xf32>
  %r = train.relu %x {dist.sharding = [#dist.sharding<[{"tp"}, {"dp"} ]>]} : tensor<8x8xf32>
  %e = train.exp %r {dist.sharding = [#dist.sharding<[{"tp"}, {"dp"} ]>]} : tensor<8x8xf32>
  %l = train.reduce sum %e dims [0, 1] {dist.sharding = [#dist.sharding<[], unreduced = {"tp", "dp"}>]} : tensor<8x8xf32>
  %a = dist.all_reduce %l over ["dp", "tp"] {dist.sharding = [#dist.sharding<[]>]} : tensor<f32>
  train.output loss(%a : tensor<f32>) updates(%w : tensor<8x8xf32>)
}

// -----

// Taking a block of a whole value is local; a gathered dimension that keeps
// an outer axis loses only the inner one.
// CHECK-LABEL: train.model @nested
// CHECK: %[[S:.*]] = dist.shard %{{.*}} axes {{\[}}["dp", "tp"], []] : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK: %[[R:.*]] = train.relu %[[S]] : tensor<2x4xf32>
// CHECK-NEXT: %[[E:.*]] = train.exp %[[R]] : tensor<2x4xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[E]] over ["tp"] dim 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NOT: dist.all_gather
// CHECK: train.reduce sum %[[G]]
train.model @nested attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<8x4xf32>
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp", "tp"}, {} ]>]} : tensor<8x4xf32>
  %r = train.relu %x {dist.sharding = [#dist.sharding<[{"dp", "tp"}, {} ]>]} : tensor<8x4xf32>
  %e = train.exp %r {dist.sharding = [#dist.sharding<[{"dp"}, {} ]>]} : tensor<8x4xf32>
  %l = train.reduce sum %e dims [0, 1] {dist.sharding = [#dist.sharding<[], unreduced = {"dp"}>]} : tensor<8x4xf32>
  %a = dist.all_reduce %l over ["dp"] {dist.sharding = [#dist.sharding<[]>]} : tensor<f32>
  train.output loss(%a : tensor<f32>) updates(%w : tensor<8x4xf32>)
}

// A repeated block stays one body after partitioning for dp x tp: the
// forward repeat and its reverse, each over the 8 layers once.
// BLOCK-COUNT-2: train.repeat 8
// BLOCK-NOT: train.repeat


// -----

// A dimension split unevenly (`padded`): each rank holds a block of
// ceil(7 / 2) = 4 columns, the last one ending in padding. A whole value is
// padded to 8 columns before its block is taken; the sum over the padded
// columns of exp (1 in the padding) reads them filled with zeros, while a
// product of the zero-padded block needs no fill; a use that needs the
// columns whole (the softmax) gathers the blocks and cuts them to 7.
// CHECK-LABEL: train.model @padded
// CHECK: %[[W:.*]] = train.param "w" {{.*}}dist.global_shape = array<i64: 4, 7>, dist.shard_groups = array<i64: 0, 1>{{.*}} : tensor<4x4xf32>
// CHECK: %[[X:.*]] = train.input "x" : tensor<4x7xf32>
// CHECK-NEXT: %[[P:.*]] = train.pad %[[X]] low [0, 0] high [0, 1] : tensor<4x7xf32>
// CHECK-NEXT: %[[XB:.*]] = dist.shard %[[P]] axes {{\[}}[], ["tp"]] : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[M:.*]] = train.mul %[[XB]], %[[W]] : tensor<4x4xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[M]] over ["tp"] dim 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[C:.*]] = train.slice %[[G]] offsets [0, 0] sizes [4, 7] : tensor<4x8xf32>
// CHECK-NEXT: train.reduce sum %[[M]] dims [0, 1] : tensor<4x4xf32>
// CHECK: %[[E:.*]] = train.exp %[[M]] : tensor<4x4xf32>
// CHECK-NEXT: %[[F:.*]] = dist.fill_padding %[[E]] over ["tp"] dim 1 size 7 value 0.000000e+00 : tensor<4x4xf32>
// CHECK-NEXT: train.reduce sum %[[F]] dims [0, 1] : tensor<4x4xf32>
// CHECK: train.softmax %[[C]] : tensor<4x7xf32>
train.model @padded attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) {dist.sharding = [#dist.sharding<[{}, {"tp"} padded]>]} : tensor<4x7xf32>
  %x = train.input "x" : tensor<4x7xf32>
  %m = train.mul %x, %w {dist.sharding = [#dist.sharding<[{}, {"tp"} padded]>]} : tensor<4x7xf32>, tensor<4x7xf32>
  %s = train.reduce sum %m dims [0, 1] {dist.sharding = [#dist.sharding<[], unreduced = {"tp"}>]} : tensor<4x7xf32>
  %a = dist.all_reduce %s over ["tp"] {dist.sharding = [#dist.sharding<[]>]} : tensor<f32>
  %e = train.exp %m {dist.sharding = [#dist.sharding<[{}, {"tp"} padded]>]} : tensor<4x7xf32>
  %t = train.reduce sum %e dims [0, 1] {dist.sharding = [#dist.sharding<[], unreduced = {"tp"}>]} : tensor<4x7xf32>
  %b = dist.all_reduce %t over ["tp"] {dist.sharding = [#dist.sharding<[]>]} : tensor<f32>
  %p = train.softmax %m {dist.sharding = [#dist.sharding<[{}, {} ]>]} : tensor<4x7xf32>
  %q = train.reduce sum %p dims [0, 1] {dist.sharding = [#dist.sharding<[]>]} : tensor<4x7xf32>
  %ab = train.add %a, %b {dist.sharding = [#dist.sharding<[]>]} : tensor<f32>, tensor<f32>
  %l = train.add %ab, %q {dist.sharding = [#dist.sharding<[]>]} : tensor<f32>, tensor<f32>
  train.output loss(%l : tensor<f32>) updates(%w : tensor<4x7xf32>)
}
