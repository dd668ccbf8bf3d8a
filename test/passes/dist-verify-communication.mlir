// A valid rank program passes; each fault injected into one rank's
// communication is rejected with the ranks, the group and the collectives.
// RUN: loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-comm-opt --dist-verify-communication -o /dev/null
// RUN: not loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-inject-comm-fault="fault=skip rank=1 index=1" --dist-verify-communication 2>&1 | FileCheck %s --check-prefix=SKIP
// RUN: not loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-inject-comm-fault="fault=skip rank=1 index=2" --dist-verify-communication 2>&1 | FileCheck %s --check-prefix=STUCK
// RUN: not loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-inject-comm-fault="fault=swap rank=1 index=1" --dist-verify-communication 2>&1 | FileCheck %s --check-prefix=SWAP
// RUN: not loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-inject-comm-fault="fault=count rank=1 index=2" --dist-verify-communication 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-inject-comm-fault="fault=type rank=1 index=1" --dist-verify-communication 2>&1 | FileCheck %s --check-prefix=TYPE

// SKIP: verify-communication.mlir:{{[0-9]+}}:{{[0-9]+}}: error: ranks 1 and 0 disagree on collective 2 over dp: rank 1 issues 'dist.all_reduce' of 64 x f32, rank 0 issues 'dist.all_reduce' of 1 x f32
// SKIP: verify-communication.mlir:{{[0-9]+}}:{{[0-9]+}}: note: rank 0's collective
// STUCK: verify-communication.mlir:{{[0-9]+}}:{{[0-9]+}}: error: the ranks' communication cannot complete: rank 0 waits in 'dist.all_reduce' of 64 x f32 over dp
// STUCK: note: rank 1 has no collective left
// SWAP: error: ranks 1 and 0 disagree on collective 2 over dp: rank 1 issues 'dist.all_reduce' of 64 x f32, rank 0 issues 'dist.all_reduce' of 1 x f32
// COUNT: verify-communication.mlir:{{[0-9]+}}:{{[0-9]+}}: error: ranks 0 and 1 disagree on collective 3 over dp: rank 0 issues 'dist.all_reduce' of 64 x f32, rank 1 issues 'dist.all_reduce' of 48 x f32
// COUNT: note: rank 1's collective
// TYPE: verify-communication.mlir:{{[0-9]+}}:{{[0-9]+}}: error: ranks 1 and 0 disagree on collective 2 over dp: rank 1 issues 'dist.all_reduce' of 1 x bf16, rank 0 issues 'dist.all_reduce' of 1 x f32

train.model @m attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}
