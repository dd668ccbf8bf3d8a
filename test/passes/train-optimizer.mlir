// RUN: loom-opt %s -split-input-file -train-autodiff -train-optimizer -verify-diagnostics | FileCheck %s
// The pass alone, on a model's gradients (after train-autodiff):
// RUN: loom-opt %S/Inputs/mlp-grads.mlir -train-optimizer | FileCheck %s --check-prefix=ALONE
// ALONE: train.iteration
// ALONE: train.lr_schedule
// ALONE-COUNT-4: train.sgd_update <momentum = 9.000000e-01>
// ALONE: train.output

// SGD with momentum and weight decay: one momentum state per parameter,
// declared after it; the bias (no_decay) is updated without decay.
// CHECK-LABEL: train.model @sgd
// CHECK: %[[W:.*]] = train.param "w"
// CHECK-NEXT: %[[WM:.*]] = train.state "w.momentum" of "w" : tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = train.param "b"
// CHECK-NEXT: %[[BM:.*]] = train.state "b.momentum" of "b" : tensor<2xf32>
// CHECK: %[[IT:.*]] = train.iteration : tensor<f32>
// CHECK: %[[LR:.*]] = train.lr_schedule <lr = 1.000000e-01> at %[[IT]]
// CHECK-NOT: train.sum_squares
// CHECK: %[[NW:.*]], %[[NWM:.*]] = train.sgd_update <momentum = 9.000000e-01, weight_decay = 1.000000e-02> %[[W]], %{{.*}} momentum(%[[WM]] : tensor<4x2xf32>) lr(%[[LR]])
// CHECK: %[[NB:.*]], %[[NBM:.*]] = train.sgd_update <momentum = 9.000000e-01> %[[B]], %{{.*}} momentum(%[[BM]] : tensor<2xf32>) lr(%[[LR]])
// CHECK: train.output loss(%{{.*}} : tensor<f32>) updates(%[[NW]], %[[NWM]], %[[NB]], %[[NBM]] :
train.model @sgd attributes {optimizer = #train.sgd<momentum = 0.9, weight_decay = 0.01>,
                             schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<4x2xf32>
  %b = train.param "b" init(#train.init<zeros>) no_decay : tensor<2xf32>
  %x = train.input "x" : tensor<3x4xf32>
  %t = train.input "t" : tensor<3xi32>
  %y0 = train.matmul %x, %w : tensor<3x4xf32>, tensor<4x2xf32>
  %y = train.add %y0, %b : tensor<3x2xf32>, tensor<2xf32>
  %l = train.cross_entropy %y, %t : tensor<3x2xf32>, tensor<3xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// Plain SGD keeps no state.
// CHECK-LABEL: train.model @plain_sgd
// CHECK-NOT: train.state
// CHECK: %[[P:.*]] = train.sgd_update <> %{{.*}}, %{{.*}} lr(%{{.*}}) : tensor<4xf32>
// CHECK: train.output loss(%{{.*}} : tensor<f32>) updates(%[[P]] : tensor<4xf32>)
train.model @plain_sgd attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.5>} {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// AdamW with warm-up and cosine decay, clipped by the global norm of all
// gradients: the clip factor scales every gradient before its update, and
// no_decay parameters get decay 0.
// CHECK-LABEL: train.model @adamw
// CHECK: %[[W:.*]] = train.param "w"
// CHECK-NEXT: %[[M:.*]] = train.state "w.m" of "w"
// CHECK-NEXT: %[[V:.*]] = train.state "w.v" of "w"
// CHECK-NEXT: %[[G:.*]] = train.param "g"
// CHECK-NEXT: train.state "g.m" of "g"
// CHECK-NEXT: train.state "g.v" of "g"
// CHECK: %[[IT:.*]] = train.iteration
// CHECK: %[[LR:.*]] = train.lr_schedule <lr = 1.000000e-03, warmup = 10, total = 100, decay = cosine, min_lr = 1.000000e-04> at %[[IT]]
// CHECK: %[[SS:.*]] = train.sum_squares %[[DW:.*]], %[[DG:.*]] : tensor<4x4xf32>, tensor<4xf32>
// CHECK: %[[N:.*]] = train.sqrt %[[SS]] : tensor<f32>
// CHECK: %[[C:.*]] = train.clip_factor %[[N]] max 1.000000e+00
// CHECK: %[[CW:.*]] = train.mul %[[DW]], %[[C]] : tensor<4x4xf32>, tensor<f32>
// CHECK: %[[CG:.*]] = train.mul %[[DG]], %[[C]] : tensor<4xf32>, tensor<f32>
// CHECK: train.adamw_update <beta2 = 5.000000e-01, weight_decay = 1.000000e-01> %[[W]], %[[CW]], %[[M]], %[[V]] lr(%[[LR]]) step(%[[IT]]) decay 1.000000e-01
// CHECK: train.adamw_update <beta2 = 5.000000e-01, weight_decay = 1.000000e-01> %[[G]], %[[CG]], %{{.*}}, %{{.*}} lr(%[[LR]]) step(%[[IT]]) decay 0.000000e+00
// CHECK: train.output loss(%{{.*}} : tensor<f32>) updates(
// CHECK-SAME: : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
train.model @adamw attributes {
    optimizer = #train.adamw<beta2 = 0.5, weight_decay = 0.1>,
    schedule = #train.schedule<lr = 1.0e-3, warmup = 10, total = 100, decay = cosine, min_lr = 1.0e-4>,
    clip_norm = 1.0 : f64} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<4x4xf32>
  %g = train.param "g" init(#train.init<ones>) no_decay : tensor<4xf32>
  %x = train.input "x" : tensor<2x4xf32>
  %t = train.input "t" : tensor<2xi32>
  %h = train.rms_norm %x, %g : tensor<2x4xf32>, tensor<4xf32>
  %y = train.matmul %h, %w : tensor<2x4xf32>, tensor<4x4xf32>
  %l = train.cross_entropy %y, %t : tensor<2x4xf32>, tensor<2xi32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op has no 'optimizer' attribute (#train.sgd or #train.adamw)}}
train.model @no_optimizer attributes {schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op has no 'schedule' attribute (the learning rate, #train.schedule)}}
train.model @no_schedule attributes {optimizer = #train.sgd<>} {
  %w = train.param "w" init(#train.init<ones>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}
