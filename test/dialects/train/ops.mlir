// RUN: loom-opt %s -split-input-file | FileCheck %s
// RUN: loom-opt %s -split-input-file -mlir-print-op-generic | loom-opt -split-input-file | FileCheck %s

// Round trip of every op of the train dialect, in its custom form and
// through the generic form.

// CHECK-LABEL: train.model @structure
// CHECK-SAME: clip_norm = 1.000000e+00 : f64
// CHECK-SAME: optimizer = #train.adamw<beta1 = 8.000000e-01, weight_decay = 1.000000e-01>
// CHECK-SAME: schedule = #train.schedule<lr = 1.000000e-03, warmup = 2, total = 10, decay = cosine, min_lr = 1.000000e-04>
// CHECK: train.param "w" init(<normal, 2.000000e-02>) : tensor<4x4xf32>
// CHECK: train.param "g" init(<ones>) no_decay : tensor<4xf32>
// CHECK: train.param "u" init(<uniform, 5.000000e-01>) : tensor<4xf32>
// CHECK: train.param "c" init(<constant, -2.000000e+00>) : tensor<4xbf16>
// CHECK: train.state "w.m" of "w" : tensor<4x4xf32>
// CHECK: train.input "x" : tensor<2x4xf32>
// CHECK: train.input "ids" : tensor<2xi32>
// CHECK: train.iteration : tensor<f32>
// CHECK: train.output loss(%{{.*}} : tensor<f32>)
train.model @structure attributes {
    optimizer = #train.adamw<beta1 = 0.8, weight_decay = 0.1>,
    schedule = #train.schedule<lr = 1.0e-3, warmup = 2, total = 10, decay = cosine, min_lr = 1.0e-4>,
    clip_norm = 1.0 : f64} {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<4x4xf32>
  %g = train.param "g" init(#train.init<ones>) no_decay : tensor<4xf32>
  %u = train.param "u" init(#train.init<uniform, 0.5>) : tensor<4xf32>
  %c = train.param "c" init(#train.init<constant, -2.0>) : tensor<4xbf16>
  %m = train.state "w.m" of "w" : tensor<4x4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %ids = train.input "ids" : tensor<2xi32>
  %it = train.iteration : tensor<f32>
  %y = train.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
  %l = train.cross_entropy %y, %ids : tensor<2x4xf32>, tensor<2xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: train.model @compute
// CHECK: train.matmul %{{.*}}, %{{.*}} : tensor<3x2x4xf32>, tensor<4x5xf32>
// CHECK: train.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<3x4x2xf32>, tensor<3x5x4xf32>
// CHECK: train.add %{{.*}}, %{{.*}} : tensor<3x2x5xf32>, tensor<5xf32>
// CHECK: train.sub %{{.*}}, %{{.*}} : tensor<3x2x5xf32>, tensor<1x5xf32>
// CHECK: train.mul
// CHECK: train.div
// CHECK: train.relu
// CHECK: train.gelu
// CHECK: train.silu
// CHECK: train.tanh
// CHECK: train.exp
// CHECK: train.log
// CHECK: train.sqrt
// CHECK: train.rsqrt
// CHECK: train.scale %{{.*}} by 5.000000e-01 : tensor<3x2x5xf32>
// CHECK: train.convert %{{.*}} to bf16 : tensor<3x2x5xf32>
// CHECK: train.reduce sum %{{.*}} dims [1] : tensor<3x2x5xf32>
// CHECK: train.reduce mean %{{.*}} dims [0, 2] : tensor<3x2x5xf32>
// CHECK: train.reduce max %{{.*}} dims [2] : tensor<3x2x5xf32>
// CHECK: train.broadcast %{{.*}} dims [0, 2] : tensor<3x5xf32> -> tensor<3x2x5xf32>
// CHECK: train.sum_to %{{.*}} : tensor<3x2x5xf32> -> tensor<1x5xf32>
// CHECK: train.reduce_max_grad %{{.*}}, %{{.*}}, %{{.*}} dims [2] : tensor<3x2x5xf32>, tensor<3x2xf32>
// CHECK: train.softmax %{{.*}} : tensor<3x2x5xf32>
// CHECK: train.softmax_grad
// CHECK: train.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64} : tensor<3x2x5xf32>, tensor<5xf32>
// CHECK: train.layer_norm_grad
// CHECK: train.rms_norm
// CHECK: train.rms_norm_grad
// CHECK: train.relu_grad
// CHECK: train.gelu_grad
// CHECK: train.silu_grad
// CHECK: train.tanh_grad
train.model @compute {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<4x5xf32>
  %b = train.param "b" init(#train.init<zeros>) : tensor<5xf32>
  %gm = train.param "gm" init(#train.init<ones>) : tensor<5xf32>
  %x = train.input "x" : tensor<3x2x4xf32>
  %xt = train.input "xt" : tensor<3x4x2xf32>
  %wt = train.input "wt" : tensor<3x5x4xf32>
  %r = train.input "r" : tensor<1x5xf32>
  %m0 = train.matmul %x, %w : tensor<3x2x4xf32>, tensor<4x5xf32>
  %m1 = train.matmul %xt, %wt transpose_lhs transpose_rhs : tensor<3x4x2xf32>, tensor<3x5x4xf32>
  %a = train.add %m0, %b : tensor<3x2x5xf32>, tensor<5xf32>
  %s = train.sub %a, %r : tensor<3x2x5xf32>, tensor<1x5xf32>
  %mu = train.mul %s, %m1 : tensor<3x2x5xf32>, tensor<3x2x5xf32>
  %d = train.div %mu, %a : tensor<3x2x5xf32>, tensor<3x2x5xf32>
  %e0 = train.relu %d : tensor<3x2x5xf32>
  %e1 = train.gelu %e0 : tensor<3x2x5xf32>
  %e2 = train.silu %e1 : tensor<3x2x5xf32>
  %e3 = train.tanh %e2 : tensor<3x2x5xf32>
  %e4 = train.exp %e3 : tensor<3x2x5xf32>
  %e5 = train.log %e4 : tensor<3x2x5xf32>
  %e6 = train.sqrt %e5 : tensor<3x2x5xf32>
  %e7 = train.rsqrt %e6 : tensor<3x2x5xf32>
  %sc = train.scale %e7 by 0.5 : tensor<3x2x5xf32>
  %cv = train.convert %sc to bf16 : tensor<3x2x5xf32>
  %r0 = train.reduce sum %sc dims [1] : tensor<3x2x5xf32>
  %r1 = train.reduce mean %sc dims [0, 2] : tensor<3x2x5xf32>
  %r2 = train.reduce max %sc dims [2] : tensor<3x2x5xf32>
  %bc = train.broadcast %r0 dims [0, 2] : tensor<3x5xf32> -> tensor<3x2x5xf32>
  %st = train.sum_to %bc : tensor<3x2x5xf32> -> tensor<1x5xf32>
  %mg = train.reduce_max_grad %sc, %r2, %r2 dims [2] : tensor<3x2x5xf32>, tensor<3x2xf32>
  %sm = train.softmax %bc : tensor<3x2x5xf32>
  %smg = train.softmax_grad %sm, %bc : tensor<3x2x5xf32>
  %ln = train.layer_norm %smg, %gm, %b {epsilon = 1.0e-3 : f64} : tensor<3x2x5xf32>, tensor<5xf32>
  %lg:3 = train.layer_norm_grad %smg, %gm, %ln : tensor<3x2x5xf32>, tensor<5xf32>
  %rn = train.rms_norm %ln, %gm : tensor<3x2x5xf32>, tensor<5xf32>
  %rg:2 = train.rms_norm_grad %ln, %gm, %rn : tensor<3x2x5xf32>, tensor<5xf32>
  %g0 = train.relu_grad %rn, %rn : tensor<3x2x5xf32>
  %g1 = train.gelu_grad %g0, %g0 : tensor<3x2x5xf32>
  %g2 = train.silu_grad %g1, %g1 : tensor<3x2x5xf32>
  %g3 = train.tanh_grad %g2, %g2 : tensor<3x2x5xf32>
  %l = train.reduce sum %g3 dims [0, 1, 2] : tensor<3x2x5xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: train.model @shapes
// CHECK: train.embedding %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<2x4xi32>
// CHECK: train.embedding_grad %{{.*}}, %{{.*}} : tensor<2x4xi32>, tensor<2x4x8xf32> -> tensor<16x8xf32>
// CHECK: train.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
// CHECK: train.transpose %{{.*}} [0, 2, 1, 3] : tensor<2x4x2x4xf32>
// CHECK: train.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x2x4x4xf32>
// CHECK: train.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x2x4x4xf32>
// CHECK: train.causal_mask %{{.*}} fill 0xFFF0000000000000 : tensor<2x2x4x4xf32>
// CHECK: train.slice %{{.*}} offsets [0, 1, 0] sizes [2, 2, 8] : tensor<2x4x8xf32>
// CHECK: train.pad %{{.*}} low [0, 1, 0] high [0, 1, 0] : tensor<2x2x8xf32>
// CHECK: train.concat %{{.*}}, %{{.*}} axis 1 : tensor<2x4x8xf32>, tensor<2x2x8xf32>
// CHECK: train.dropout %{{.*}} rate 1.000000e-01 seed 7 : tensor<2x4x8xf32>
// CHECK: train.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64} : tensor<2x4x16xf32>, tensor<2x4xi32>
// CHECK: train.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x16xf32>, tensor<2x4xi32>
// CHECK: train.embedding %{{.*}}, %{{.*}} {vocab_group = 1 : i64} : tensor<16x8xf32>, tensor<2x4xi32>
// CHECK: %[[M:.*]] = train.reduce max
// CHECK: %[[S:.*]], %[[T:.*]] = train.cross_entropy_stats %{{.*}}, %{{.*}}, %[[M]] {vocab_group = 1 : i64} : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<2x4xf32>
// CHECK: train.cross_entropy_from_stats %[[M]], %[[S]], %[[T]], %{{.*}} : tensor<2x4xf32>, tensor<2x4xi32> -> tensor<f32>
// CHECK: train.cross_entropy_grad_from_stats %{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[S]] {vocab_group = 1 : i64} : tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>
train.model @shapes {
  %wte = train.param "wte" init(#train.init<normal, 0.02>) : tensor<16x8xf32>
  %ids = train.input "ids" : tensor<2x4xi32>
  %e = train.embedding %wte, %ids : tensor<16x8xf32>, tensor<2x4xi32>
  %eg = train.embedding_grad %ids, %e : tensor<2x4xi32>, tensor<2x4x8xf32> -> tensor<16x8xf32>
  %h = train.reshape %e : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = train.transpose %h [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %a = train.attention %q, %q, %q causal : tensor<2x2x4x4xf32>
  %ag:3 = train.attention_grad %q, %q, %q, %a causal : tensor<2x2x4x4xf32>
  %cm = train.causal_mask %a fill 0xFFF0000000000000 : tensor<2x2x4x4xf32>
  %s = train.slice %e offsets [0, 1, 0] sizes [2, 2, 8] : tensor<2x4x8xf32>
  %p = train.pad %s low [0, 1, 0] high [0, 1, 0] : tensor<2x2x8xf32>
  %c = train.concat %p, %s axis 1 : tensor<2x4x8xf32>, tensor<2x2x8xf32>
  %d = train.dropout %p rate 0.1 seed 7 : tensor<2x4x8xf32>
  %logits = train.matmul %d, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32>
  %l = train.cross_entropy %logits, %ids {ignore_index = -1 : i64} : tensor<2x4x16xf32>, tensor<2x4xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %lg = train.cross_entropy_grad %logits, %ids, %one : tensor<2x4x16xf32>, tensor<2x4xi32>
  %ev = train.embedding %wte, %ids {vocab_group = 1} : tensor<16x8xf32>, tensor<2x4xi32>
  %m = train.reduce max %logits dims [2] : tensor<2x4x16xf32>
  %sv, %tv = train.cross_entropy_stats %logits, %ids, %m {vocab_group = 1} : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<2x4xf32>
  %lv = train.cross_entropy_from_stats %m, %sv, %tv, %ids : tensor<2x4xf32>, tensor<2x4xi32> -> tensor<f32>
  %gv = train.cross_entropy_grad_from_stats %logits, %ids, %one, %m, %sv {vocab_group = 1} : tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: train.model @repeat
// CHECK: train.repeat 3 carry(%{{.*}} : tensor<2x4xf32>) stacked(%{{.*}} : tensor<3x4x4xf32>) invariant(%{{.*}} : tensor<4xf32>) : (tensor<2x4xf32>) stacked(tensor<3x2x4xf32>) {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4xf32>):
// CHECK: train.dropout %{{.*}} stream(%{{.*}}) rate
// CHECK: train.yield carry(%{{.*}} : tensor<2x4xf32>) stacked(%{{.*}} : tensor<2x4xf32>)
// CHECK: train.repeat 3 reverse carry
train.model @repeat {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<3x4x4xf32>
  %b = train.param "b" init(#train.init<zeros>) : tensor<4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %h, %ys = train.repeat 3 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<3x4x4xf32>)
      invariant(%b : tensor<4xf32>) : (tensor<2x4xf32>) stacked(tensor<3x2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>, %bi: tensor<4xf32>):
    %y = train.matmul %c, %wi : tensor<2x4xf32>, tensor<4x4xf32>
    %z = train.add %y, %bi : tensor<2x4xf32>, tensor<4xf32>
    %r = train.dropout %z stream(%i) rate 0.1 seed 3 : tensor<2x4xf32>
    train.yield carry(%r : tensor<2x4xf32>) stacked(%y : tensor<2x4xf32>)
  }
  %back = train.repeat 3 reverse carry(%h : tensor<2x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>):
    train.yield carry(%c : tensor<2x4xf32>)
  }
  %l = train.reduce sum %back dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: train.model @optimizer
// CHECK: train.lr_schedule <lr = 1.000000e-01, warmup = 1, total = 5, decay = linear> at %{{.*}}
// CHECK: train.sum_squares %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
// CHECK: train.sum_squares %{{.*}} replicated over 2 : tensor<4xf32>
// CHECK: train.sqrt
// CHECK: train.clip_factor %{{.*}} max 1.000000e+00
// CHECK: train.sgd_update <momentum = 5.000000e-01> %{{.*}}, %{{.*}} momentum(%{{.*}} : tensor<4xf32>) lr(%{{.*}}) : tensor<4xf32>
// CHECK: train.sgd_update <> %{{.*}}, %{{.*}} lr(%{{.*}}) : tensor<4xf32>
// CHECK: train.adamw_update <> %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr(%{{.*}}) step(%{{.*}}) decay 0.000000e+00 : tensor<4xf32>{{$}}
// A bf16 gradient of an f32 master (--grad-precision=bf16) is printed after
// the parameter's type.
// CHECK: train.sgd_update <> %{{.*}}, %{{.*}} lr(%{{.*}}) : tensor<4xf32>, tensor<4xbf16>
// CHECK: train.adamw_update <> %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr(%{{.*}}) step(%{{.*}}) decay 0.000000e+00 : tensor<4xf32>, tensor<4xbf16>
// CHECK: train.output loss(%{{.*}} : tensor<f32>) grads(%{{.*}} : tensor<4xf32>) updates(%{{.*}} : tensor<4xf32>)
train.model @optimizer {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
  %g = train.input "g" : tensor<4xf32>
  %m = train.input "m" : tensor<4xf32>
  %it = train.iteration : tensor<f32>
  %lr = train.lr_schedule #train.schedule<lr = 0.1, warmup = 1, total = 5, decay = linear> at %it
  %ss = train.sum_squares %g, %m : tensor<4xf32>, tensor<4xf32>
  %sr = train.sum_squares %g replicated over 2 : tensor<4xf32>
  %n = train.sqrt %ss : tensor<f32>
  %c = train.clip_factor %n max 1.0
  %p0, %m0 = train.sgd_update #train.sgd<momentum = 0.5> %w, %g momentum(%m : tensor<4xf32>) lr(%lr) : tensor<4xf32>
  %p1 = train.sgd_update #train.sgd<> %w, %g lr(%lr) : tensor<4xf32>
  %p2, %m2, %v2 = train.adamw_update #train.adamw<> %w, %g, %m, %m lr(%lr) step(%it) decay 0.0 : tensor<4xf32>
  %g16 = train.convert %g to bf16 : tensor<4xf32>
  %p3 = train.sgd_update #train.sgd<> %w, %g16 lr(%lr) : tensor<4xf32>, tensor<4xbf16>
  %p4, %m4, %v4 = train.adamw_update #train.adamw<> %w, %g16, %m, %m lr(%lr) step(%it) decay 0.0 : tensor<4xf32>, tensor<4xbf16>
  %l = train.reduce sum %p2 dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>) grads(%g : tensor<4xf32>) updates(%p2 : tensor<4xf32>)
}
