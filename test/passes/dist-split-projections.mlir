// RUN: loom-opt %s -split-input-file --dist-split-projections | FileCheck %s

// A layer loop's fused QKV projection (a [d, 3d] weight and its bias, the
// product sliced into q, k and v) becomes three projections over parts of
// the stacked weight and bias, each a column range of the tensor the user
// wrote (`dist.part`), stacked into the loop in the whole one's place.
// CHECK-LABEL: train.model @qkv
// CHECK: %[[WQ:.*]] = train.param "w_qkv[:, :, 0:16]" init(<normal, 2.000000e-02>) {dist.part = #dist.part<of = "w_qkv", whole = [2, 16, 48], offsets = [0, 0, 0]>} : tensor<2x16x16xf32>
// CHECK-NEXT: %[[WK:.*]] = train.param "w_qkv[:, :, 16:32]" {{.*}}offsets = [0, 0, 16]>} : tensor<2x16x16xf32>
// CHECK-NEXT: %[[WV:.*]] = train.param "w_qkv[:, :, 32:48]" {{.*}}offsets = [0, 0, 32]>} : tensor<2x16x16xf32>
// CHECK-NEXT: %[[BQ:.*]] = train.param "b_qkv[:, 0:16]" init(<zeros>) no_decay {dist.part = #dist.part<of = "b_qkv", whole = [2, 48], offsets = [0, 0]>} : tensor<2x16xf32>
// CHECK-NEXT: %[[BK:.*]] = train.param "b_qkv[:, 16:32]"
// CHECK-NEXT: %[[BV:.*]] = train.param "b_qkv[:, 32:48]"
// CHECK-NOT: train.param "w_qkv"
// CHECK-NOT: train.param "b_qkv"
// CHECK: train.repeat 2 carry(%{{.*}} : tensor<2x8x16xf32>) stacked(%[[WQ]], %[[WK]], %[[WV]], %[[BQ]], %[[BK]], %[[BV]], %[[WO:.*]] : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16x16xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: index, %[[X:.*]]: tensor<2x8x16xf32>, %[[Q:.*]]: tensor<16x16xf32>, %[[K:.*]]: tensor<16x16xf32>, %[[V:.*]]: tensor<16x16xf32>, %[[QB:.*]]: tensor<16xf32>, %[[KB:.*]]: tensor<16xf32>, %[[VB:.*]]: tensor<16xf32>, %{{.*}}: tensor<16x16xf32>):
// CHECK-NEXT: %[[Q0:.*]] = train.matmul %[[X]], %[[Q]] : tensor<2x8x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[Q1:.*]] = train.add %[[Q0]], %[[QB]] : tensor<2x8x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[K0:.*]] = train.matmul %[[X]], %[[K]]
// CHECK-NEXT: %[[K1:.*]] = train.add %[[K0]], %[[KB]]
// CHECK-NEXT: %[[V0:.*]] = train.matmul %[[X]], %[[V]]
// CHECK-NEXT: %[[V1:.*]] = train.add %[[V0]], %[[VB]]
// CHECK-NOT: train.slice
// CHECK: train.reshape %[[Q1]]
// CHECK: train.reshape %[[K1]]
// CHECK: train.reshape %[[V1]]
train.model @qkv attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
  %w = train.param "w_qkv" init(#train.init<normal, 0.02>) : tensor<2x16x48xf32>
  %b = train.param "b_qkv" init(#train.init<zeros>) no_decay : tensor<2x48xf32>
  %wo = train.param "w_o" init(#train.init<normal, 0.02>) : tensor<2x16x16xf32>
  %x0 = train.input "x" : tensor<2x8x16xf32>
  %h = train.repeat 2 carry(%x0 : tensor<2x8x16xf32>)
      stacked(%w, %b, %wo : tensor<2x16x48xf32>, tensor<2x48xf32>, tensor<2x16x16xf32>) : (tensor<2x8x16xf32>) {
  ^bb0(%i: index, %x: tensor<2x8x16xf32>, %wl: tensor<16x48xf32>, %bl: tensor<48xf32>, %wol: tensor<16x16xf32>):
    %y0 = train.matmul %x, %wl : tensor<2x8x16xf32>, tensor<16x48xf32>
    %y = train.add %y0, %bl : tensor<2x8x48xf32>, tensor<48xf32>
    %q0 = train.slice %y offsets [0, 0, 0] sizes [2, 8, 16] : tensor<2x8x48xf32>
    %k0 = train.slice %y offsets [0, 0, 16] sizes [2, 8, 16] : tensor<2x8x48xf32>
    %v0 = train.slice %y offsets [0, 0, 32] sizes [2, 8, 16] : tensor<2x8x48xf32>
    %q1 = train.reshape %q0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
    %q = train.transpose %q1 [0, 2, 1, 3] : tensor<2x8x2x8xf32>
    %k1 = train.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
    %k = train.transpose %k1 [0, 2, 1, 3] : tensor<2x8x2x8xf32>
    %v1 = train.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
    %v = train.transpose %v1 [0, 2, 1, 3] : tensor<2x8x2x8xf32>
    %a = train.attention %q, %k, %v causal : tensor<2x2x8x8xf32>
    %a1 = train.transpose %a [0, 2, 1, 3] : tensor<2x2x8x8xf32>
    %a2 = train.reshape %a1 : tensor<2x8x2x8xf32> -> tensor<2x8x16xf32>
    %o = train.matmul %a2, %wol : tensor<2x8x16xf32>, tensor<16x16xf32>
    train.yield carry(%o : tensor<2x8x16xf32>)
  }
  %l = train.reduce sum %h dims [0, 1, 2] : tensor<2x8x16xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Slices of different sizes (grouped-query attention's narrower k and v), a
// weight read directly, without a bias, and stored transposed ([out, in],
// `transpose_rhs`): the parts are row ranges.
// CHECK-LABEL: train.model @gqa
// CHECK: %[[WQ:.*]] = train.param "w[0:16]" {{.*}}offsets = [0, 0]>} : tensor<16x16xf32>
// CHECK-NEXT: %[[WK:.*]] = train.param "w[16:20]" {{.*}}offsets = [16, 0]>} : tensor<4x16xf32>
// CHECK-NEXT: %[[WV:.*]] = train.param "w[20:24]" {{.*}}offsets = [20, 0]>} : tensor<4x16xf32>
// CHECK: %[[Q:.*]] = train.matmul %[[X:.*]], %[[WQ]] transpose_rhs : tensor<8x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[K:.*]] = train.matmul %[[X]], %[[WK]] transpose_rhs : tensor<8x16xf32>, tensor<4x16xf32>
// CHECK-NEXT: %[[V:.*]] = train.matmul %[[X]], %[[WV]] transpose_rhs : tensor<8x16xf32>, tensor<4x16xf32>
// CHECK-NEXT: train.matmul %[[K]], %[[V]] transpose_lhs
// CHECK-NEXT: train.reduce sum %[[Q]]
train.model @gqa attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %x = train.input "x" : tensor<8x16xf32>
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<24x16xf32>
  %y = train.matmul %x, %w transpose_rhs : tensor<8x16xf32>, tensor<24x16xf32>
  %q = train.slice %y offsets [0, 0] sizes [8, 16] : tensor<8x24xf32>
  %k = train.slice %y offsets [0, 16] sizes [8, 4] : tensor<8x24xf32>
  %v = train.slice %y offsets [0, 20] sizes [8, 4] : tensor<8x24xf32>
  %kv = train.matmul %k, %v transpose_lhs : tensor<8x4xf32>, tensor<8x4xf32>
  %l0 = train.reduce sum %q dims [0, 1] : tensor<8x16xf32>
  %l1 = train.reduce sum %kv dims [0, 1] : tensor<4x4xf32>
  %l = train.add %l0, %l1 : tensor<f32>, tensor<f32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Left alone: slices that overlap or leave columns out, a weight read
// twice (tied), a product read whole besides its slices, and any model
// whose mesh has no tensor axis.
// CHECK-LABEL: train.model @kept
// CHECK-COUNT-4: train.param "w{{[0-9]}}" init
// CHECK-NOT: dist.part
train.model @kept attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
  %x = train.input "x" : tensor<8x16xf32>
  %w1 = train.param "w1" init(#train.init<normal, 0.02>) : tensor<16x32xf32>
  %w2 = train.param "w2" init(#train.init<normal, 0.02>) : tensor<16x32xf32>
  %w3 = train.param "w3" init(#train.init<normal, 0.02>) : tensor<16x32xf32>
  %w4 = train.param "w4" init(#train.init<normal, 0.02>) : tensor<16x32xf32>
  %y1 = train.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
  %a1 = train.slice %y1 offsets [0, 0] sizes [8, 16] : tensor<8x32xf32>
  %b1 = train.slice %y1 offsets [0, 8] sizes [8, 24] : tensor<8x32xf32>
  %y2 = train.matmul %x, %w2 : tensor<8x16xf32>, tensor<16x32xf32>
  %a2 = train.slice %y2 offsets [0, 0] sizes [8, 8] : tensor<8x32xf32>
  %b2 = train.slice %y2 offsets [0, 16] sizes [8, 16] : tensor<8x32xf32>
  %y3 = train.matmul %x, %w3 : tensor<8x16xf32>, tensor<16x32xf32>
  %z3 = train.matmul %x, %w3 : tensor<8x16xf32>, tensor<16x32xf32>
  %a3 = train.slice %y3 offsets [0, 0] sizes [8, 16] : tensor<8x32xf32>
  %b3 = train.slice %y3 offsets [0, 16] sizes [8, 16] : tensor<8x32xf32>
  %y4 = train.matmul %x, %w4 : tensor<8x16xf32>, tensor<16x32xf32>
  %a4 = train.slice %y4 offsets [0, 0] sizes [8, 16] : tensor<8x32xf32>
  %b4 = train.slice %y4 offsets [0, 16] sizes [8, 16] : tensor<8x32xf32>
  %s = train.concat %a1, %b1, %a2, %b2, %a3, %b3, %z3, %a4, %b4, %y4 axis 1 : tensor<8x16xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x32xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x32xf32>
  %l = train.reduce sum %s dims [0, 1] : tensor<8x192xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: train.model @no_tensor_axis
// CHECK: train.param "w" init
// CHECK-NOT: dist.part
train.model @no_tensor_axis attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<8x16xf32>
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x32xf32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32>
  %a = train.slice %y offsets [0, 0] sizes [8, 16] : tensor<8x32xf32>
  %b = train.slice %y offsets [0, 16] sizes [8, 16] : tensor<8x32xf32>
  %p = train.matmul %a, %b transpose_lhs : tensor<8x16xf32>, tensor<8x16xf32>
  %l = train.reduce sum %p dims [0, 1] : tensor<16x16xf32>
  train.output loss(%l : tensor<f32>)
}
