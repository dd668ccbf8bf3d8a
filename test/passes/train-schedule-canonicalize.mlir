// RUN: loom-opt %s -canonicalize | FileCheck %s

// The learning-rate schedule, evaluated by folding at constant steps:
// lr = 1, warm-up 10 steps, then decay to 0.1 at step 100.

// CHECK-LABEL: func.func @cosine
// Warm-up: lr * (t + 1) / warmup at t = 0, 4, 9; half-way through the
// decay (t = 55): 0.1 + 0.45 (1 + cos(pi/2)) = 0.55; at and past the end
// (t = 100, 500): min_lr.
// CHECK-DAG: %[[C01:.*]] = arith.constant dense<1.000000e-01>
// CHECK-DAG: %[[C05:.*]] = arith.constant dense<5.000000e-01>
// CHECK-DAG: %[[C1:.*]] = arith.constant dense<1.000000e+00>
// CHECK-DAG: %[[C055:.*]] = arith.constant dense<5.500000e-01>
// CHECK-NOT: train.lr_schedule
// CHECK: return %[[C01]], %[[C05]], %[[C1]], %[[C055]], %[[C01]], %[[C01]] :
func.func @cosine() -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %t0 = arith.constant dense<0.0> : tensor<f32>
  %t4 = arith.constant dense<4.0> : tensor<f32>
  %t9 = arith.constant dense<9.0> : tensor<f32>
  %t55 = arith.constant dense<55.0> : tensor<f32>
  %t100 = arith.constant dense<100.0> : tensor<f32>
  %t500 = arith.constant dense<500.0> : tensor<f32>
  %0 = train.lr_schedule #train.schedule<lr = 1.0, warmup = 10, total = 100, decay = cosine, min_lr = 0.1> at %t0
  %1 = train.lr_schedule #train.schedule<lr = 1.0, warmup = 10, total = 100, decay = cosine, min_lr = 0.1> at %t4
  %2 = train.lr_schedule #train.schedule<lr = 1.0, warmup = 10, total = 100, decay = cosine, min_lr = 0.1> at %t9
  %3 = train.lr_schedule #train.schedule<lr = 1.0, warmup = 10, total = 100, decay = cosine, min_lr = 0.1> at %t55
  %4 = train.lr_schedule #train.schedule<lr = 1.0, warmup = 10, total = 100, decay = cosine, min_lr = 0.1> at %t100
  %5 = train.lr_schedule #train.schedule<lr = 1.0, warmup = 10, total = 100, decay = cosine, min_lr = 0.1> at %t500
  return %0, %1, %2, %3, %4, %5 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @linear
// t = 30 of a linear decay from 2 to 0 over steps 10..50: 2 (1 - 20/40) = 1.
// CHECK: %[[A:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// No warm-up, constant: the base rate at any step.
// CHECK: %[[B:.*]] = arith.constant dense<3.000000e-01> : tensor<f32>
// CHECK: return %[[A]], %[[B]]
func.func @linear() -> (tensor<f32>, tensor<f32>) {
  %t = arith.constant dense<30.0> : tensor<f32>
  %0 = train.lr_schedule #train.schedule<lr = 2.0, warmup = 10, total = 50, decay = linear> at %t
  %1 = train.lr_schedule #train.schedule<lr = 0.3> at %t
  return %0, %1 : tensor<f32>, tensor<f32>
}
