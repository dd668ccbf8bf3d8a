// RUN: loom-opt %s -split-input-file --loom-pipeline="mesh=dp=2,tp=2" | FileCheck %s

// Clipping's norm from the gradient blocks each rank holds: the sum of
// squares is split by the axes its operands are replicated over, the
// replicated ones counted by the first rank of those axes only
// (`replicated over` the group mask: dp is bit 0, tp bit 1), and one scalar
// all-reduce over every axis that splits a gradient completes the sum
// before the square root. No gradient is gathered for it.

// The Megatron MLP: w1, b1 and w2 split over tp, the norm's parameters
// whole; the gradients are reduced over dp first, so only tp splits them.
// CHECK-LABEL: train.model @mlp
// CHECK-NOT: dist.all_gather
// CHECK: %[[S:.*]] = train.sum_squares %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[R:.*]] = train.sum_squares %{{.*}}, %{{.*}} replicated over 2 : tensor<16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[A:.*]] = train.add %[[S]], %[[R]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[N:.*]] = dist.all_reduce_start %[[A]] over ["tp"] : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = dist.wait %[[N]] : tensor<f32>
// CHECK-NEXT: train.sqrt %[[W]] : tensor<f32>
// CHECK-NOT: dist.all_gather
// CHECK: train.output
train.model @mlp attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>, clip_norm = 0.01 : f64} {
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

// w2 also split over dp (ZeRO's layout for one tensor), its gradient
// stored as the rank's block: three groups meet in the norm: w2 (split over
// both axes), w1 and b1 (split over tp, replicated over dp: group 1), g
// and b (replicated over both: group 3). One all-reduce over both axes.
// CHECK-LABEL: train.model @zero
// CHECK-NOT: dist.all_gather {{.*}} tensor<16x8xf32> -> tensor<32x16xf32>
// CHECK: %[[S:.*]] = train.sum_squares %{{.*}} : tensor<16x8xf32>
// CHECK: %[[T:.*]] = train.sum_squares %{{.*}}, %{{.*}} replicated over 1 : tensor<16x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[A:.*]] = train.add %[[S]], %[[T]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[U:.*]] = train.sum_squares %{{.*}}, %{{.*}} replicated over 3 : tensor<16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[B:.*]] = train.add %[[A]], %[[U]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[N:.*]] = dist.all_reduce_start %[[B]] over ["tp", "dp"] : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = dist.wait %[[N]] : tensor<f32>
// CHECK-NEXT: train.sqrt %[[W]] : tensor<f32>
train.model @zero attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>, clip_norm = 0.01 : f64} {
  %w1 = train.param "w1" init(#train.init<normal, 0.1>) : tensor<16x32xf32>
  %b1 = train.param "b1" init(#train.init<zeros>) : tensor<32xf32>
  %w2 = train.param "w2" init(#train.init<normal, 0.1>) {dist.sharding = [#dist.sharding<[{"tp"}, {"dp"}]>]} : tensor<32x16xf32>
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
