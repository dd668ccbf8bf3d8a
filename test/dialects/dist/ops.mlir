// RUN: loom-opt %s | loom-opt | FileCheck %s

// Every collective and the sharding attribute round-trip.
// CHECK-LABEL: train.model @collectives
// CHECK-SAME: dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>
train.model @collectives attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) {dist.sharding = [#dist.sharding<[{"dp", ?}, {"tp"}p0 ], unreduced = {}>]} : tensor<8x8xf32>
  // CHECK: dist.sharding = [#dist.sharding<[{"dp", ?}, {"tp"}p0]>]
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{?}, {} ], unreduced = {"dp"}>]} : tensor<8x8xf32>
  %stack = train.input "stack" : tensor<2x4x8xf32>
  // CHECK: dist.sharding = [#dist.sharding<[{?}, {}], unreduced = {"dp"}>]
  // A dimension split unevenly, in padded blocks.
  // CHECK: dist.sharding = [#dist.sharding<[{"tp"} padded, {}]>]
  %v = train.input "v" {dist.sharding = [#dist.sharding<[{"tp"} padded, {} ]>]} : tensor<7x8xf32>
  // CHECK: dist.all_reduce %{{.*}} over ["dp"] : tensor<8x8xf32>
  %a = dist.all_reduce %x over ["dp"] : tensor<8x8xf32>
  // CHECK: dist.all_reduce %{{.*}} over ["dp", "tp"] max : tensor<8x8xf32>
  %m = dist.all_reduce %x over ["dp", "tp"] max : tensor<8x8xf32>
  // CHECK: dist.all_gather %{{.*}} over ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
  %g = dist.all_gather %a over ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
  // CHECK: dist.reduce_scatter %{{.*}} over ["dp"] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %r = dist.reduce_scatter %x over ["dp"] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  // CHECK: dist.all_to_all %{{.*}} over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  %t = dist.all_to_all %r over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  // CHECK: dist.broadcast %{{.*}} over ["dp"] root 1 : tensor<8x8xf32>
  %b = dist.broadcast %x over ["dp"] root 1 : tensor<8x8xf32>
  // CHECK: dist.collective_permute %{{.*}} over ["tp"] pairs [0, 1, 1, 0] : tensor<8x8xf32>
  %p = dist.collective_permute %x over ["tp"] pairs [0, 1, 1, 0] : tensor<8x8xf32>
  // CHECK: dist.shard %{{.*}} axes {{\[}}["dp"], ["tp"]] : tensor<8x8xf32> -> tensor<4x4xf32>
  %s = dist.shard %x axes [["dp"], ["tp"] ] : tensor<8x8xf32> -> tensor<4x4xf32>
  // CHECK: dist.fill_padding %{{.*}} over ["tp"] dim 0 size 7 value 0.000000e+00 : tensor<4x8xf32>
  %fp = dist.fill_padding %r over ["tp"] dim 0 size 7 value 0.0 : tensor<4x8xf32>
  // CHECK: %[[S:.*]]:2 = dist.all_reduce_start %{{.*}}, %{{.*}} over ["dp"] : tensor<8x8xf32>, tensor<4x8xf32>
  // CHECK-NEXT: dist.wait %[[S]]#0, %[[S]]#1 : tensor<8x8xf32>, tensor<4x8xf32>
  %st:2 = dist.all_reduce_start %x, %r over ["dp"] : tensor<8x8xf32>, tensor<4x8xf32>
  %wt:2 = dist.wait %st#0, %st#1 : tensor<8x8xf32>, tensor<4x8xf32>
  // CHECK: %[[G:.*]] = dist.all_gather_start %{{.*}} over ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
  // CHECK-NEXT: dist.wait %[[G]] : tensor<8x16xf32>
  %gs = dist.all_gather_start %x over ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
  %gw = dist.wait %gs : tensor<8x16xf32>
  // CHECK: %[[L:.*]] = dist.all_gather_start %{{.*}} at %{{.*}} over ["dp"] dim 0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %c1 = arith.constant 1 : index
  %ls = dist.all_gather_start %stack at %c1 over ["dp"] dim 0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %lw8 = dist.wait %ls : tensor<8x8xf32>
  // CHECK: dist.send %{{.*}} to "tp" = 1 {dist.on = {tp = 0 : i64}} : tensor<8x8xf32>
  // CHECK: dist.recv from "tp" = 0 {dist.on = {tp = 1 : i64}} : tensor<8x8xf32>
  dist.send %x to "tp" = 1 {dist.on = {tp = 0}} : tensor<8x8xf32>
  %rv = dist.recv from "tp" = 0 {dist.on = {tp = 1}} : tensor<8x8xf32>
  %l = train.reduce sum %a dims [0, 1] : tensor<8x8xf32>
  %lw = train.reduce sum %w dims [0, 1] : tensor<8x8xf32>
  %loss = train.add %l, %lw : tensor<f32>, tensor<f32>
  train.output loss(%loss : tensor<f32>)
}
