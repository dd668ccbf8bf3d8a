// dist-pipeline-reduce alone: after autodiff every rank holds its stages'
// share of the loss and of each gradient (zeros elsewhere); one all-reduce
// over the pipeline axis each makes them whole before the optimizer.
// RUN: loom-opt %S/Inputs/chain-grads.mlir --dist-pipeline-reduce | FileCheck %s

// CHECK: %[[L:.*]] = dist.all_reduce %{{.*}} over ["pp"] : tensor<f32>
// CHECK: %[[E:.*]] = dist.all_reduce %{{.*}} over ["pp"] : tensor<8x4xf32>
// CHECK: %[[W:.*]] = dist.all_reduce %{{.*}} over ["pp"] : tensor<4x4x4xf32>
// CHECK: train.output loss(%[[L]] : tensor<f32>) grads(%[[E]], %[[W]] : tensor<8x4xf32>, tensor<4x4x4xf32>)
