// RUN: loom-opt %s -split-input-file --dist-sharding-propagation=preset=megatron --dist-partition | FileCheck %s
// RUN: loom-opt %s -split-input-file --dist-sharding-propagation=preset=none --dist-partition | FileCheck %s --check-prefix=ANNOTATED

// The Megatron MLP from the preset: the first linear layer column-parallel
// (its output features over tp, the bias with them), the second
// row-parallel, each stored as this rank's block; the forward pass has exactly one collective, the all_reduce
// of the second layer's partial sums, and no gather.
// CHECK-LABEL: train.model @mlp
// CHECK: %[[W1:.*]] = train.param "w1" {{.*}} {dist.global_shape = array<i64: 16, 32>, dist.shard_groups = array<i64: 0, 1>} : tensor<16x16xf32>
// CHECK: %[[B1:.*]] = train.param "b1" {{.*}} {dist.global_shape = array<i64: 32>, dist.shard_groups = array<i64: 1>} : tensor<16xf32>
// CHECK: %[[W2:.*]] = train.param "w2" {{.*}} {dist.global_shape = array<i64: 32, 16>, dist.shard_groups = array<i64: 1, 0>} : tensor<16x16xf32>
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: dist.all_gather
// CHECK: %[[H:.*]] = train.matmul %{{.*}}, %[[W1]] : tensor<8x16xf32>, tensor<16x16xf32>
// CHECK: train.add %[[H]], %[[B1]]
// CHECK: %[[Y:.*]] = train.matmul %{{.*}}, %[[W2]] : tensor<8x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[R:.*]] = dist.all_reduce %[[Y]] over ["tp"] : tensor<8x16xf32>
// CHECK-NOT: dist.
// CHECK: train.layer_norm %[[R]]
// CHECK-NOT: dist.
// CHECK: train.output
train.model @mlp attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
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

// -----

// The same MLP with the weights annotated by hand and no preset: the same
// rank program (the bias and every activation follow by propagation).
// ANNOTATED-LABEL: train.model @annotated
// ANNOTATED: %[[W1:.*]] = train.param "w1" {{.*}} {dist.global_shape = array<i64: 16, 32>, dist.shard_groups = array<i64: 0, 1>} : tensor<16x16xf32>
// ANNOTATED: %[[B1:.*]] = train.param "b1" {{.*}} {dist.global_shape = array<i64: 32>, dist.shard_groups = array<i64: 1>} : tensor<16xf32>
// ANNOTATED: %[[W2:.*]] = train.param "w2" {{.*}} {dist.global_shape = array<i64: 32, 16>, dist.shard_groups = array<i64: 1, 0>} : tensor<16x16xf32>
// ANNOTATED-NOT: dist.all_reduce
// ANNOTATED-NOT: dist.all_gather
// ANNOTATED: %[[Y:.*]] = train.matmul %{{.*}}, %[[W2]] : tensor<8x16xf32>, tensor<16x16xf32>
// ANNOTATED-NEXT: %[[R:.*]] = dist.all_reduce %[[Y]] over ["tp"] : tensor<8x16xf32>
// ANNOTATED-NOT: dist.
// ANNOTATED: train.output
train.model @annotated attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
  %w1 = train.param "w1" init(#train.init<normal, 0.1>) {dist.sharding = [#dist.sharding<[{}, {"tp"} ]>]} : tensor<16x32xf32>
  %b1 = train.param "b1" init(#train.init<zeros>) : tensor<32xf32>
  %w2 = train.param "w2" init(#train.init<normal, 0.1>) {dist.sharding = [#dist.sharding<[{"tp"}, {} ]>]} : tensor<32x16xf32>
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
