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

