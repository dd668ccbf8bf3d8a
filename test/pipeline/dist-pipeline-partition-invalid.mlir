// RUN: loom-opt %s -split-input-file --dist-mesh="mesh=pp=4" --dist-pipeline-partition="memory-limit=4096" -verify-diagnostics

// Two units (one layer, then the loss) cannot fill four stages.
// expected-error @below {{'train.model' op cannot fill 4 pipeline stages (pp=4 x 1 virtual stages): it has 1 repeated layers and 1 blocks of other ops, 2 units a stage can take, and every stage needs one}}
train.model @short attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<1x16x16xf32>
  %x = train.input "x" : tensor<4x16xf32>
  %y = train.input "y" : tensor<4xi32>
  %h = train.repeat 1 carry(%x : tensor<4x16xf32>) stacked(%w : tensor<1x16x16xf32>) : (tensor<4x16xf32>) {
  ^bb0(%i: index, %c: tensor<4x16xf32>, %wl: tensor<16x16xf32>):
    %u = train.matmul %c, %wl : tensor<4x16xf32>, tensor<16x16xf32>
    train.yield carry(%u : tensor<4x16xf32>)
  }
  %loss = train.cross_entropy %h, %y : tensor<4x16xf32>, tensor<4xi32>
  train.output loss(%loss : tensor<f32>)
}

// -----

// Each layer's weights alone (1 KiB, 8 KiB of model states with SGD, and
// 256 bytes of activations) are over the 4 KiB a stage may hold.
// expected-error @below {{'train.model' op cannot be cut into 4 pipeline stages of at most 4096 bytes each (model states at 8 bytes per parameter byte, activations of 1 micro-batches in flight; the heaviest unit alone needs 8448 bytes)}}
train.model @heavy attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.1>) : tensor<6x16x16xf32>
  %x = train.input "x" : tensor<4x16xf32>
  %y = train.input "y" : tensor<4xi32>
  %h = train.repeat 6 carry(%x : tensor<4x16xf32>) stacked(%w : tensor<6x16x16xf32>) : (tensor<4x16xf32>) {
  ^bb0(%i: index, %c: tensor<4x16xf32>, %wl: tensor<16x16xf32>):
    %u = train.matmul %c, %wl : tensor<4x16xf32>, tensor<16x16xf32>
    train.yield carry(%u : tensor<4x16xf32>)
  }
  %loss = train.cross_entropy %h, %y : tensor<4x16xf32>, tensor<4xi32>
  train.output loss(%loss : tensor<f32>)
}
