// RUN: loom-opt %s -split-input-file --dist-prefetch | FileCheck %s

// A layer loop that gathers its layer's parameter blocks (ZeRO-3) gathers
// the next layer's in each iteration instead: started as the iteration's
// first op, before the layer's compute, at iteration + 1 of the blocks (now
// also an invariant), and waited for as its last, into a carry the next
// iteration computes with. The first layer's are gathered before the loop.
// A loop that saves its carries saves the new one too (its slices are never
// read).
// CHECK-LABEL: train.model @forward
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[S0:.*]] = dist.all_gather_start %[[W:.*]] at %[[C0]] over ["dp"] dim 0 : tensor<4x8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[G0:.*]] = dist.wait %[[S0]] : tensor<16x16xf32>
// CHECK-NEXT: %{{.*}}:2, %{{.*}}:3 = train.repeat 4 saving_carries carry(%{{.*}}, %[[G0]] : tensor<2x16xf32>, tensor<16x16xf32>) stacked(%[[W]] : tensor<4x8x16xf32>) invariant(%[[W]] : tensor<4x8x16xf32>) : (tensor<2x16xf32>, tensor<16x16xf32>) stacked(tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x16x16xf32>)
// CHECK-NEXT: ^bb0(%[[I:.*]]: index, %[[X:.*]]: tensor<2x16xf32>, %[[G:.*]]: tensor<16x16xf32>, %{{.*}}: tensor<8x16xf32>, %[[WHOLE:.*]]: tensor<4x8x16xf32>):
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[I]], %[[ONE]] : index
// CHECK-NEXT: %[[S:.*]] = dist.all_gather_start %[[WHOLE]] at %[[NEXT]] over ["dp"] dim 0 : tensor<4x8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[Y:.*]] = train.matmul %[[X]], %[[G]] : tensor<2x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[R:.*]] = train.relu %[[Y]]
// CHECK-NEXT: %[[N:.*]] = dist.wait %[[S]] : tensor<16x16xf32>
// CHECK-NEXT: train.yield carry(%[[R]], %[[N]] : tensor<2x16xf32>, tensor<16x16xf32>) stacked(%[[Y]], %[[X]], %[[G]] : tensor<2x16xf32>, tensor<2x16xf32>, tensor<16x16xf32>)
// CHECK-NOT: dist.all_gather {{.*}}
// CHECK: train.output
train.model @forward attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4x8x16xf32>
  %x = train.input "x" : tensor<2x16xf32>
  %h, %ys, %saved = train.repeat 4 saving_carries carry(%x : tensor<2x16xf32>) stacked(%w : tensor<4x8x16xf32>) : (tensor<2x16xf32>) stacked(tensor<4x2x16xf32>, tensor<4x2x16xf32>) {
  ^bb0(%i: index, %c: tensor<2x16xf32>, %wi: tensor<8x16xf32>):
    %g = dist.all_gather %wi over ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
    %y = train.matmul %c, %g : tensor<2x16xf32>, tensor<16x16xf32>
    %r = train.relu %y : tensor<2x16xf32>
    train.yield carry(%r : tensor<2x16xf32>) stacked(%y, %c : tensor<2x16xf32>, tensor<2x16xf32>)
  }
  %l = train.reduce sum %h dims [0, 1] : tensor<2x16xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A reverse loop gathers layer i-1 in iteration i, the last layer's before
// the loop. A gather of something else than a slice of the loop's stacked
// operands (an activation) stays where it is.
// CHECK-LABEL: train.model @reverse
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT: dist.all_gather_start %{{.*}} at %[[C3]] over ["dp"] dim 1
// CHECK: train.repeat 4 reverse
// CHECK: %[[MINUS:.*]] = arith.constant -1 : index
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %{{.*}}, %[[MINUS]] : index
// CHECK-NEXT: dist.all_gather_start %{{.*}} at %[[NEXT]] over ["dp"] dim 1 : tensor<4x16x8xf32> -> tensor<16x16xf32>
// CHECK-NEXT: dist.all_gather %{{.*}} over ["dp"] dim 0 : tensor<1x16xf32> -> tensor<2x16xf32>
train.model @reverse attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4x16x8xf32>
  %x = train.input "x" : tensor<1x16xf32>
  %h = train.repeat 4 reverse carry(%x : tensor<1x16xf32>) stacked(%w : tensor<4x16x8xf32>) : (tensor<1x16xf32>) {
  ^bb0(%i: index, %c: tensor<1x16xf32>, %wi: tensor<16x8xf32>):
    %a = dist.all_gather %c over ["dp"] dim 0 : tensor<1x16xf32> -> tensor<2x16xf32>
    %g = dist.all_gather %wi over ["dp"] dim 1 : tensor<16x8xf32> -> tensor<16x16xf32>
    %y = train.matmul %a, %g : tensor<2x16xf32>, tensor<16x16xf32>
    %s = train.slice %y offsets [0, 0] sizes [1, 16] : tensor<2x16xf32>
    train.yield carry(%s : tensor<1x16xf32>)
  }
  %l = train.reduce sum %h dims [0, 1] : tensor<1x16xf32>
  train.output loss(%l : tensor<f32>)
}
