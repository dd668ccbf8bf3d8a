// Stage partitions of a small GPT (the parity model's shape: embedding,
// 8 equal layers, final norm, tied head and loss) for pp=2, pp=4 and pp=2
// with 2 virtual stages; the embedding is tied to the head, so it is used
// on the first and the last stage.
// RUN: loom-opt %s --dist-mesh="mesh=pp=2,dp=2" --dist-pipeline-partition | FileCheck %s --check-prefix=PP2
// RUN: loom-opt %s --dist-mesh="mesh=pp=4" --dist-pipeline-partition | FileCheck %s --check-prefix=PP4
// RUN: loom-opt %s --dist-mesh="mesh=pp=2" --dist-pipeline-partition="virtual-stages=2" | FileCheck %s --check-prefix=V2
// RUN: loom-opt %s --dist-mesh="mesh=dp=2" --dist-pipeline-partition | FileCheck %s --check-prefix=NOPP
// The pass alone, on a model that already carries its mesh (dist-mesh):
// RUN: loom-opt %S/Inputs/chain-pp2.mlir --dist-pipeline-partition | FileCheck %s --check-prefix=ALONE
// ALONE: train.param "emb" {{.*}}dist.stages = array<i64: 0, 1>
// ALONE: train.embedding {{.*}}dist.stage = 0
// ALONE: train.repeat 4 {{.*}}dist.stages = array<i64: 0, 0, 0, 1>
// ALONE: train.cross_entropy {{.*}}dist.stage = 1

// PP2: dist.pipeline = #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [84480, 1228800, 1228800, 1228800, 1228800, 1228800, 1228800, 1228800, 1228800, 332880], stage_costs = [4999680, 5248080], bottleneck = 5248080>
// PP2: train.param "wte" {{.*}}dist.stages = array<i64: 0, 1>
// PP2: train.param "w_qkv" {{.*}}dist.stages = array<i64: 0, 1>
// PP2: train.param "lnf_g" {{.*}}dist.stages = array<i64: 1>
// PP2: train.embedding {{.*}}dist.stage = 0
// PP2: train.repeat 8 {{.*}}dist.stages = array<i64: 0, 0, 0, 0, 1, 1, 1, 1>
// PP2: train.layer_norm {{.*}}dist.stage = 1
// PP2: train.cross_entropy {{.*}}dist.stage = 1

// PP4: stage_costs = [2542080, 2457600, 2457600, 2790480]
// PP4: train.param "wte" {{.*}}dist.stages = array<i64: 0, 3>
// PP4: train.repeat 8 {{.*}}dist.stages = array<i64: 0, 0, 1, 1, 2, 2, 3, 3>
// PP4: train.cross_entropy {{.*}}dist.stage = 3

// V2: #dist.pipeline<ranks = 2, virtual_stages = 2,
// V2-SAME: stage_costs = [2542080, 2457600, 2457600, 2790480]
// V2: train.repeat 8 {{.*}}dist.stages = array<i64: 0, 0, 1, 1, 2, 2, 3, 3>

// NOPP-NOT: dist.stage

train.model @gpt attributes {optimizer = #train.adamw<>, schedule = #train.schedule<lr = 0.001>} {
  %wte = train.param "wte" init(#train.init<normal, 0.02>) : tensor<32x16xf32>
  %w_qkv = train.param "w_qkv" init(#train.init<normal, 0.02>) : tensor<8x16x48xf32>
  %w_o = train.param "w_o" init(#train.init<normal, 0.02>) : tensor<8x16x16xf32>
  %w_fc = train.param "w_fc" init(#train.init<normal, 0.02>) : tensor<8x16x32xf32>
  %w_proj = train.param "w_proj" init(#train.init<normal, 0.02>) : tensor<8x32x16xf32>
  %lnf_g = train.param "lnf_g" init(#train.init<ones>) : tensor<16xf32>
  %lnf_b = train.param "lnf_b" init(#train.init<zeros>) : tensor<16xf32>
  %tokens = train.input "tokens" : tensor<4x8xi32>
  %labels = train.input "labels" : tensor<4x8xi32>
  %x0 = train.embedding %wte, %tokens : tensor<32x16xf32>, tensor<4x8xi32>
  %h = train.repeat 8 carry(%x0 : tensor<4x8x16xf32>)
      stacked(%w_qkv, %w_o, %w_fc, %w_proj : tensor<8x16x48xf32>, tensor<8x16x16xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>) : (tensor<4x8x16xf32>) {
  ^bb0(%i: index, %x: tensor<4x8x16xf32>, %wq: tensor<16x48xf32>, %wo: tensor<16x16xf32>, %wf: tensor<16x32xf32>, %wp: tensor<32x16xf32>):
    %qkv = train.matmul %x, %wq : tensor<4x8x16xf32>, tensor<16x48xf32>
    %q = train.slice %qkv offsets [0, 0, 0] sizes [4, 8, 16] : tensor<4x8x48xf32>
    %o = train.matmul %q, %wo : tensor<4x8x16xf32>, tensor<16x16xf32>
    %x1 = train.add %x, %o : tensor<4x8x16xf32>, tensor<4x8x16xf32>
    %f0 = train.matmul %x1, %wf : tensor<4x8x16xf32>, tensor<16x32xf32>
    %f = train.gelu %f0 : tensor<4x8x32xf32>
    %p = train.matmul %f, %wp : tensor<4x8x32xf32>, tensor<32x16xf32>
    %x2 = train.add %x1, %p : tensor<4x8x16xf32>, tensor<4x8x16xf32>
    train.yield carry(%x2 : tensor<4x8x16xf32>)
  }
  %n = train.layer_norm %h, %lnf_g, %lnf_b : tensor<4x8x16xf32>, tensor<16xf32>
  %logits = train.matmul %n, %wte transpose_rhs : tensor<4x8x16xf32>, tensor<32x16xf32>
  %loss = train.cross_entropy %logits, %labels : tensor<4x8x32xf32>, tensor<4x8xi32>
  train.output loss(%loss : tensor<f32>)
}
