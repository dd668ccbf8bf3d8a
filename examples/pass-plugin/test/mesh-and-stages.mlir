// With a mesh (dist-mesh) the axis defaults to its data axis, whatever its
// name; after dist-pipeline-partition a remark names the stages that use
// the weight, read through the dist dialect's typed accessors.
// RUN: %loom-opt --load-pass-plugin=%plugin --pass-pipeline='builtin.module(dist-mesh{mesh=stage=2:pipeline,replica=2:data},dist-pipeline-partition,pin-sharding{param=emb dim=1})' %s 2>&1 | FileCheck %s --check-prefix=MESH
// MESH: remark: pin-sharding: 'emb' split over 'replica' on stages 0, 1 of the pipeline axis 'stage'
// MESH: train.param "emb" {{.*}}dist.sharding = [#dist.sharding<[{}, {"replica"}]>]
// RUN: not %loom-opt --load-pass-plugin=%plugin --pass-pipeline='builtin.module(dist-mesh{mesh=tp=2},pin-sharding{param=w dim=1})' %s 2>&1 | FileCheck %s --check-prefix=NODATA
// NODATA: error: 'train.param' op pin-sharding: the mesh #dist.mesh<["tp" = 2]> has no data axis
// RUN: not %loom-opt --load-pass-plugin=%plugin --pass-pipeline='builtin.module(dist-mesh{mesh=dp=2},pin-sharding{param=w axis=tp dim=1})' %s 2>&1 | FileCheck %s --check-prefix=NOAXIS
// NOAXIS: error: 'train.param' op pin-sharding: the mesh #dist.mesh<["dp" = 2]> has no axis 'tp'
train.model @chain attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %emb = train.param "emb" init(#train.init<normal, 0.1>) : tensor<8x4xf32>
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<4x4x4xf32>
  %tokens = train.input "tokens" : tensor<2xi32>
  %labels = train.input "labels" : tensor<2xi32>
  %x = train.embedding %emb, %tokens : tensor<8x4xf32>, tensor<2xi32>
  %h = train.repeat 4 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<4x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wl: tensor<4x4xf32>):
    %u = train.matmul %c, %wl : tensor<2x4xf32>, tensor<4x4xf32>
    train.yield carry(%u : tensor<2x4xf32>)
  }
  %logits = train.matmul %h, %emb transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32>
  %loss = train.cross_entropy %logits, %labels : tensor<2x8xf32>, tensor<2xi32>
  train.output loss(%loss : tensor<f32>)
}
