// dist-pipeline-reduce alone: after autodiff every rank holds its stages'
// share of the loss and of each gradient (zeros elsewhere). The loss and
// the tied embedding's gradient (both stages use it) are all-reduced over
// the pipeline axis before the optimizer; each stage's own weight part
// keeps its gradient where its stage made it (its update runs there).
// RUN: loom-opt %S/Inputs/chain-grads.mlir --dist-pipeline-reduce | FileCheck %s

// CHECK: %{{.*}}, %[[W1:.*]] = train.repeat 1 reverse
// CHECK: %{{.*}}, %[[W0:.*]] = train.repeat 3 reverse
// CHECK: %[[L:.*]] = dist.all_reduce %{{.*}} over ["pp"] : tensor<f32>
// CHECK: %[[E:.*]] = dist.all_reduce %{{.*}} over ["pp"] : tensor<8x4xf32>
// CHECK-NOT: dist.all_reduce
// CHECK: train.output loss(%[[L]] : tensor<f32>) grads(%[[E]], %[[W0]], %[[W1]] : tensor<8x4xf32>, tensor<3x4x4xf32>, tensor<1x4x4xf32>)
