// dist-zero records the ZeRO stage on the model, and propagation and
// partitioning split what it names over dp. Stage 1: the optimizer state
// is stored as this rank's block, the whole gradient (accumulated in full
// through the backward loop) is reduce-scattered once after it, the update
// runs on blocks and the updated parameter is all-gathered. Stage 2: each
// layer's weight gradient is reduce-scattered inside the backward loop,
// right after the op that makes it; the loop's stacked gradient is the
// block. Stage 3: the parameters are stored as blocks and gathered for
// the layer loops, once in the forward and again in the backward (each
// iteration starting the next layer's gather, dist-prefetch), and at the
// top level before each op that reads one; nothing is gathered after the
// update. At every stage the norm is summed from the
// blocks and all-reduced as one scalar.
// RUN: loom-opt %S/Inputs/stack-step-dp2.mlir --dist-zero="stage=1" | FileCheck %s --check-prefix=ALONE
// RUN: loom-opt %s --loom-pipeline="mesh=dp=2 zero=1" | FileCheck %s --check-prefix=ZERO1
// RUN: loom-opt %s --loom-pipeline="mesh=dp=2 zero=2" | FileCheck %s --check-prefix=ZERO2
// RUN: loom-opt %s --loom-pipeline="mesh=dp=2 zero=3" | FileCheck %s --check-prefix=ZERO3
// RUN: not loom-opt %s --loom-pipeline="mesh=tp=2 zero=1" 2>&1 | FileCheck %s --check-prefix=NODATA
// RUN: not loom-opt %S/Inputs/stack-step-dp2.mlir --dist-zero="stage=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not loom-opt %s --loom-pipeline="mesh=dp=2 zero=2 optimizer=false" 2>&1 | FileCheck %s --check-prefix=NOOPT

// ALONE: train.model @stack attributes {{{.*}}dist.zero = 1 : i64
// ALONE: %[[HG:.*]] = train.matmul {{.*}} transpose_lhs : tensor<8x4xf32>, tensor<8x6xf32>
// ALONE-NEXT: dist.all_reduce %[[HG]] over ["dp"] : tensor<4x6xf32>
// ALONE: train.repeat 2 reverse
// ALONE: dist.all_reduce %stacked_results_1#1 over ["dp"] : tensor<2x8x4xf32>
// ALONE: dist.all_reduce %stacked_results_1#0 over ["dp"] : tensor<2x4x8xf32>

// ZERO1: train.param "w" init(<normal, 1.000000e-01>) : tensor<2x4x8xf32>
// ZERO1-NEXT: train.state "w.m" of "w" {dist.global_shape = array<i64: 2, 4, 8>, dist.shard_groups = array<i64: 0, 1, 0>} : tensor<2x2x8xf32>
// ZERO1: train.repeat 2 reverse
// ZERO1-NOT: dist.reduce_scatter
// ZERO1: train.yield
// ZERO1: %[[G:.*]] = dist.reduce_scatter %stacked_results_1#0 over ["dp"] dim 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// ZERO1: %[[S:.*]] = train.sum_squares %[[G]],
// ZERO1-NEXT: dist.all_reduce_start %[[S]] over ["dp"] : tensor<f32>
// ZERO1: %[[B:.*]] = dist.shard %0 axes {{.*}}"dp"{{.*}} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// ZERO1-NEXT: %[[NEW:.*]], %{{.*}}, %{{.*}} = train.adamw_update {{.*}} %[[B]], %{{.*}}, %1, %2 {{.*}} : tensor<2x2x8xf32>
// ZERO1-NEXT: dist.all_gather %[[NEW]] over ["dp"] dim 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>

// ZERO2: train.repeat 2 reverse
// ZERO2: %[[DW:.*]] = train.matmul %arg2, %{{.*}} transpose_lhs : tensor<4x4xf32>, tensor<4x8xf32>
// ZERO2-NEXT: %[[DWB:.*]] = dist.reduce_scatter %[[DW]] over ["dp"] dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// ZERO2: train.yield carry(%{{.*}}) stacked(%[[DWB]], %{{.*}} : tensor<2x8xf32>, tensor<4x4xf32>)
// ZERO2-NOT: dist.reduce_scatter %stacked_results
// ZERO2: train.sum_squares %stacked_results_1#0, %stacked_results_1#1
// ZERO2: dist.all_gather %new_param over ["dp"] dim 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>

// ZERO3: %0 = train.param "w" init(<normal, 1.000000e-01>) {dist.global_shape = array<i64: 2, 4, 8>, dist.shard_groups = array<i64: 0, 1, 0>} : tensor<2x2x8xf32>
// ZERO3: dist.all_gather_start %0 at %c0 over ["dp"] dim 0 : tensor<2x2x8xf32> -> tensor<4x8xf32>
// ZERO3: train.repeat 2 saving_carries
// ZERO3-NEXT: ^bb0(%arg0: index, %arg1: tensor<4x4xf32>, %arg2: tensor<8x4xf32>, %[[WF:.*]]: tensor<4x8xf32>,
// ZERO3: dist.all_gather_start %{{.*}} at %{{.*}} over ["dp"] dim 0 : tensor<2x2x8xf32> -> tensor<4x8xf32>
// ZERO3-NEXT: train.matmul %arg1, %[[WF]] : tensor<4x4xf32>, tensor<4x8xf32>
// ZERO3: %[[H1:.*]] = dist.all_gather %6 over ["dp"] dim 0 : tensor<2x6xf32> -> tensor<4x6xf32>
// ZERO3-NEXT: train.matmul %carry_results#0, %[[H1]] : tensor<4x4xf32>, tensor<4x6xf32>
// ZERO3: %[[H2:.*]] = dist.all_gather %6 over ["dp"] dim 0 : tensor<2x6xf32> -> tensor<4x6xf32>
// ZERO3-NEXT: train.matmul %{{.*}}, %[[H2]] transpose_rhs
// ZERO3: dist.all_gather_start %0 at %c1 over ["dp"] dim 0 : tensor<2x2x8xf32> -> tensor<4x8xf32>
// ZERO3: train.repeat 2 reverse
// ZERO3: dist.all_gather_start %{{.*}} at %{{.*}} over ["dp"] dim 0 : tensor<2x2x8xf32> -> tensor<4x8xf32>
// ZERO3: dist.reduce_scatter
// ZERO3: train.yield
// ZERO3: train.adamw_update {{.*}} %0, %{{.*}}, %1, %2 {{.*}} : tensor<2x2x8xf32>
// ZERO3-NOT: dist.all_gather %new_param

// NODATA: error: ZeRO stage 1 splits over the data axis; the mesh #dist.mesh<["tp" = 2]> has none (add dp=N)
// STAGE: error: dist-zero: stage 4 is not a ZeRO stage (0, 1, 2 or 3)
// NOOPT: error: ZeRO stage 2 splits the optimizer step, and this model has none (run train-optimizer first)

train.model @stack attributes {optimizer = #train.adamw<beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0>, schedule = #train.schedule<lr = 0.01, warmup = 0, total = 10, decay = constant, min_lr = 0.01>, clip_norm = 1.0 : f64} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<2x4x8xf32>
  %v = train.param "v" init(#train.init<normal, 0.1>) : tensor<2x8x4xf32>
  %head = train.param "head" init(#train.init<normal, 0.1>) : tensor<4x6xf32>
  %x = train.input "x" : tensor<8x4xf32>
  %y = train.input "y" : tensor<8xi32>
  %h = train.repeat 2 carry(%x : tensor<8x4xf32>) stacked(%w, %v : tensor<2x4x8xf32>, tensor<2x8x4xf32>) : (tensor<8x4xf32>) {
  ^bb0(%i: index, %a: tensor<8x4xf32>, %wl: tensor<4x8xf32>, %vl: tensor<8x4xf32>):
    %u = train.matmul %a, %wl : tensor<8x4xf32>, tensor<4x8xf32>
    %t = train.tanh %u : tensor<8x8xf32>
    %o = train.matmul %t, %vl : tensor<8x8xf32>, tensor<8x4xf32>
    %r = train.add %a, %o : tensor<8x4xf32>, tensor<8x4xf32>
    train.yield carry(%r : tensor<8x4xf32>)
  }
  %logits = train.matmul %h, %head : tensor<8x4xf32>, tensor<4x6xf32>
  %loss = train.cross_entropy %logits, %y : tensor<8x6xf32>, tensor<8xi32>
  train.output loss(%loss : tensor<f32>)
}
