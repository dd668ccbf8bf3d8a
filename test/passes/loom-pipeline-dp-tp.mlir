// RUN: loom-opt %s --loom-pipeline="mesh=dp=2,tp=2" | FileCheck %s

// The Megatron MLP on a 2 x 2 mesh, dp outer, tp inner: the batch split
// over dp, the layers over tp. The forward pass has one collective, the
// row-parallel layer's all-reduce over tp; the gradients are reduced over
// dp in one asynchronous bucket, the loss in one of its own (the evaluation
// reduces it without running the backward); the weights are stored as
// their blocks, so nothing is gathered.
// CHECK-LABEL: train.model @mlp2x2
// CHECK: train.param "w1" {{.*}} {dist.global_shape = array<i64: 16, 32>, dist.shard_groups = array<i64: 0, 2>} : tensor<16x16xf32>
// CHECK: %[[X:.*]] = dist.shard %{{.*}} axes {{\[}}["dp"], []] : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: dist.all_reduce
// CHECK: train.gelu
// CHECK-NEXT: %[[Y:.*]] = train.matmul %{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[R:.*]] = dist.all_reduce_start %[[Y]] over ["tp"] : tensor<4x16xf32>
// CHECK-NEXT: %[[W:.*]] = dist.wait %[[R]] : tensor<4x16xf32>
// CHECK-NEXT: train.layer_norm %[[W]]
// CHECK-NOT: over ["tp"]
// CHECK: dist.all_reduce_start %{{.*}} over ["dp"] : tensor<f32>
// CHECK: dist.all_reduce_start {{.*}} over ["dp"] : tensor<16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>
// CHECK-NOT: dist.all_reduce_start
// CHECK-NOT: dist.all_gather
// CHECK: train.output
train.model @mlp2x2 attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w1 = train.param "w1" init(#train.init<normal, 0.1>) : tensor<16x32xf32>
  %b1 = train.param "b1" init(#train.init<zeros>) : tensor<32xf32>
  %w2 = train.param "w2" init(#train.init<normal, 0.1>) : tensor<32x16xf32>
  %g = train.param "g" init(#train.init<ones>) : tensor<16xf32>
  %b = train.param "b" init(#train.init<zeros>) : tensor<16xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %h0 = train.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
  %h1 = train.add %h0, %b1 : tensor<8x32xf32>, tensor<32xf32>
  %h = train.gelu %h1 : tensor<8x32xf32>
  %y = train.matmul %h, %w2 : tensor<8x32xf32>, tensor<32x16xf32>
  %n = train.layer_norm %y, %g, %b : tensor<8x16xf32>, tensor<16xf32>
  %l = train.reduce mean %n dims [0, 1] : tensor<8x16xf32>
  train.output loss(%l : tensor<f32>)
}
