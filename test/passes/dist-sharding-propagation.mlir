// RUN: loom-opt %s -split-input-file --dist-sharding-propagation=preset=dp -verify-diagnostics | FileCheck %s
// RUN: loom-opt %s -split-input-file --dist-sharding-propagation=preset=dp --dist-partition -verify-diagnostics | FileCheck %s --check-prefix=PART

// Data parallelism from the dp preset: the batch of every input over dp,
// through the forward and the backward pass; weight gradients are partial
// sums over dp, reduced once before the optimizer. No collective in the
// forward pass but the loss's.
// CHECK-LABEL: train.model @mlp
// CHECK: train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {}]>]}
// CHECK: train.matmul {{.*}} {dist.sharding = [#dist.sharding<[{"dp"}, {}]>]}
// CHECK: %[[DW:.*]] = train.matmul {{.*}} transpose_lhs {dist.sharding = [#dist.sharding<[{}, {}], unreduced = {"dp"}>]}
// CHECK-NEXT: dist.all_reduce %[[DW]] over ["dp"] {dist.sharding = [#dist.sharding<[{}, {}]>]} : tensor<16x4xf32>
// PART-LABEL: train.model @mlp
// PART: %[[X:.*]] = train.input "x" : tensor<8x16xf32>
// PART-NEXT: %[[XS:.*]] = dist.shard %[[X]] axes {{\[}}["dp"], []] : tensor<8x16xf32> -> tensor<4x16xf32>
// PART-NOT: dist.all_reduce
// PART-NOT: dist.all_gather
// PART: %[[Y:.*]] = train.matmul %[[XS]], %{{.*}} : tensor<4x16xf32>, tensor<16x4xf32>
// PART: train.cross_entropy %[[Y]]
// PART: %[[DW:.*]] = train.matmul %[[XS]], %{{.*}} transpose_lhs : tensor<4x16xf32>, tensor<4x4xf32>
// PART-NEXT: %[[G:.*]] = dist.all_reduce %[[DW]] over ["dp"] : tensor<16x4xf32>
// PART-NOT: dist.all_reduce %[[DW]]
// PART: train.sgd_update {{.*}} %[[G]]
// PART-NOT: dist.all_gather
// PART: train.output
train.model @mlp attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<16x4xf32>
  %w_m = train.state "w.momentum" of "w" : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dy = train.cross_entropy_grad %y, %t, %one : tensor<8x4xf32>, tensor<8xi32>
  %dw = train.matmul %x, %dy transpose_lhs : tensor<8x16xf32>, tensor<8x4xf32>
  %it = train.iteration : tensor<f32>
  %lr = train.lr_schedule #train.schedule<lr = 0.1> at %it
  %w1, %m1 = train.sgd_update #train.sgd<momentum = 0.9> %w, %dw momentum(%w_m : tensor<16x4xf32>) lr(%lr) : tensor<16x4xf32>
  train.output loss(%l : tensor<f32>) updates(%w1, %m1 : tensor<16x4xf32>, tensor<16x4xf32>)
}

// -----

// A gradient accumulated over micro-batches stays a partial sum through the
// loop (its zero initial value is a partial sum of anything) and is reduced
// once, after the last micro-batch. The loop stays one body.
// PART-LABEL: train.model @accumulate
// PART: %[[ACC:.*]] = train.repeat 4 carry(%{{.*}} : tensor<16x4xf32>) stacked(%{{.*}} : tensor<4x1x16xf32>)
// PART-NOT: dist.all_reduce
// PART: train.yield
// PART-NEXT: }
// PART-NEXT: %[[G:.*]] = dist.all_reduce %[[ACC]] over ["dp"] : tensor<16x4xf32>
// PART-NOT: train.repeat
// PART: train.output loss({{.*}}) updates(%[[G]] : tensor<16x4xf32>)
train.model @accumulate attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %xs = train.reshape %x : tensor<8x16xf32> -> tensor<4x2x16xf32>
  %zero = arith.constant dense<0.0> : tensor<16x4xf32>
  %acc = train.repeat 4 carry(%zero : tensor<16x4xf32>) stacked(%xs : tensor<4x2x16xf32>) invariant(%w : tensor<16x4xf32>) : (tensor<16x4xf32>) {
  ^bb0(%i: index, %a: tensor<16x4xf32>, %xi: tensor<2x16xf32>, %wi: tensor<16x4xf32>):
    %y = train.matmul %xi, %wi : tensor<2x16xf32>, tensor<16x4xf32>
    %g = train.matmul %xi, %y transpose_lhs : tensor<2x16xf32>, tensor<2x4xf32>
    %s = train.add %a, %g : tensor<16x4xf32>, tensor<16x4xf32>
    train.yield carry(%s : tensor<16x4xf32>)
  }
  %l = train.reduce sum %acc dims [0, 1] : tensor<16x4xf32>
  train.output loss(%l : tensor<f32>) updates(%acc : tensor<16x4xf32>)
}

// -----

// Two users that need a sharded value whole share one all_gather.
// PART-LABEL: train.model @one_reshard
// PART: %[[X:.*]] = dist.shard
// PART-NEXT: %[[W:.*]] = dist.all_gather %[[X]] over ["dp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
// PART-NOT: dist.all_gather
// PART: train.softmax %[[W]]
// PART: train.softmax %[[W]]
train.model @one_reshard attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<8x16xf32>
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{}, {"dp"} ]>]} : tensor<8x16xf32>
  %a = train.softmax %x : tensor<8x16xf32>
  %b = train.softmax %x : tensor<8x16xf32>
  %c = train.add %a, %b : tensor<8x16xf32>, tensor<8x16xf32>
  %d = train.add %c, %w : tensor<8x16xf32>, tensor<8x16xf32>
  %l = train.reduce sum %d dims [0, 1] : tensor<8x16xf32>
  train.output loss(%l : tensor<f32>) updates(%w : tensor<8x16xf32>)
}

// -----

// Conflicting annotations: the operands of an add split different
// dimensions over dp. An axis shards one factor of an op, the first
// operand's; the other operand is resharded (gathered, then split).
// CHECK-LABEL: train.model @conflict
// CHECK: train.add {{.*}} {dist.sharding = [#dist.sharding<[{"dp"}, {}]>]}
// PART-LABEL: train.model @conflict
// PART: %[[B:.*]] = dist.shard %{{.*}} axes {{\[}}[], ["dp"]]
// PART-NEXT: %[[G:.*]] = dist.all_gather %[[B]] over ["dp"] dim 1 : tensor<8x4xf32> -> tensor<8x8xf32>
// PART-NEXT: %[[S:.*]] = dist.shard %[[G]] axes {{\[}}["dp"], []] : tensor<8x8xf32> -> tensor<4x8xf32>
// PART: train.add %{{.*}}, %[[S]] : tensor<4x8xf32>, tensor<4x8xf32>
train.model @conflict attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<8x8xf32>
  %a = train.input "a" {dist.sharding = [#dist.sharding<[{"dp"}, {} ]>]} : tensor<8x8xf32>
  %b = train.input "b" {dist.sharding = [#dist.sharding<[{}, {"dp"} ]>]} : tensor<8x8xf32>
  %c = train.add %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
  %d = train.mul %c, %w : tensor<8x8xf32>, tensor<8x8xf32>
  %l = train.reduce sum %d dims [0, 1] : tensor<8x8xf32>
  train.output loss(%l : tensor<f32>) updates(%w : tensor<8x8xf32>)
}

// -----

// A batch that does not divide over dp stays whole, with a warning (the
// preset splits only what divides); an annotation that would split it unevenly is an error,
// never a truncation.
// CHECK-LABEL: train.model @uneven_preset
// CHECK: train.input "x" {dist.sharding = [#dist.sharding<[{}, {}]>]}
train.model @uneven_preset attributes {dist.mesh = #dist.mesh<["dp" = 4]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<6x4xf32>
  // expected-warning @below {{the batch of input 'x' (6 rows per micro-batch) does not split over dp=4; every rank computes it whole (make the batch a multiple)}}
  %x = train.input "x" : tensor<6x4xf32>
  %d = train.mul %x, %w : tensor<6x4xf32>, tensor<6x4xf32>
  %l = train.reduce sum %d dims [0, 1] : tensor<6x4xf32>
  train.output loss(%l : tensor<f32>) updates(%w : tensor<6x4xf32>)
}

// -----

train.model @uneven_annotation attributes {dist.mesh = #dist.mesh<["dp" = 4]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<6x4xf32>
  // expected-error @below {{dimension 0 of 'tensor<6x4xf32>' (size 6) does not divide into 4 shards over ["dp"]; make it a multiple of 4, shard another dimension or mark it 'padded'}}
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {} ]>]} : tensor<6x4xf32>
  %d = train.mul %x, %w : tensor<6x4xf32>, tensor<6x4xf32>
  %l = train.reduce sum %d dims [0, 1] : tensor<6x4xf32>
  train.output loss(%l : tensor<f32>) updates(%w : tensor<6x4xf32>)
}

// -----

// A weight split over dp (as ZeRO does), stored as its block: its gradient,
// a partial sum over dp, is needed only as the weight's block, so it is
// reduced and scattered at once; the weight is gathered for the forward
// pass and the updated block stays a block.
// PART-LABEL: train.model @scattered_gradient
// PART: %[[DW:.*]] = train.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<4x16xf32>, tensor<4x4xf32>
// PART-NEXT: %[[G:.*]] = dist.reduce_scatter %[[DW]] over ["dp"] dim 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// PART-NOT: dist.all_reduce %[[DW]]
// PART: %[[NEW:.*]], %[[MOM:.*]] = train.sgd_update {{.*}} %[[G]]
// PART-NOT: dist.all_gather
// PART: train.output loss({{.*}}) updates(%[[NEW]], %[[MOM]] : tensor<8x4xf32>, tensor<8x4xf32>)
train.model @scattered_gradient attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) {dist.sharding = [#dist.sharding<[{"dp"}, {} ]>]} : tensor<16x4xf32>
  %w_m = train.state "w.momentum" of "w" : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dy = train.cross_entropy_grad %y, %t, %one : tensor<8x4xf32>, tensor<8xi32>
  %dw = train.matmul %x, %dy transpose_lhs : tensor<8x16xf32>, tensor<8x4xf32>
  %it = train.iteration : tensor<f32>
  %lr = train.lr_schedule #train.schedule<lr = 0.1> at %it
  %w1, %m1 = train.sgd_update #train.sgd<momentum = 0.9> %w, %dw momentum(%w_m : tensor<16x4xf32>) lr(%lr) : tensor<16x4xf32>
  train.output loss(%l : tensor<f32>) updates(%w1, %m1 : tensor<16x4xf32>, tensor<16x4xf32>)
}

// -----

// Conflicting annotations with priorities: the add's operands split
// different dimensions over dp; the higher priority (p0) keeps the axis and
// the other operand is resharded.
// CHECK-LABEL: train.model @priorities
// CHECK: train.add {{.*}} {dist.sharding = [#dist.sharding<[{}, {"dp"}]>]}
// PART-LABEL: train.model @priorities
// PART: %[[A:.*]] = dist.shard %{{.*}} axes {{\[}}["dp"], []]
// PART-NEXT: %[[G:.*]] = dist.all_gather %[[A]] over ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// PART-NEXT: %[[S:.*]] = dist.shard %[[G]] axes {{\[}}[], ["dp"]] : tensor<8x8xf32> -> tensor<8x4xf32>
// PART: train.add %[[S]], %{{.*}} : tensor<8x4xf32>, tensor<8x4xf32>
train.model @priorities attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<8x8xf32>
  %a = train.input "a" {dist.sharding = [#dist.sharding<[{"dp"}p1, {} ]>]} : tensor<8x8xf32>
  %b = train.input "b" {dist.sharding = [#dist.sharding<[{}, {"dp"}p0 ]>]} : tensor<8x8xf32>
  %c = train.add %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
  %d = train.mul %c, %w : tensor<8x8xf32>, tensor<8x8xf32>
  %l = train.reduce sum %d dims [0, 1] : tensor<8x8xf32>
  train.output loss(%l : tensor<f32>) updates(%w : tensor<8x8xf32>)
}
