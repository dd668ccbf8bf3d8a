// examples/mlp.mlir with its input scaled by 3 by Loom's own `train.scale`.
train.model @mlp attributes {
    optimizer = #train.sgd<momentum = 0.9>,
    schedule = #train.schedule<lr = 0.1, warmup = 5, total = 100, decay = linear, min_lr = 0.01>} {
  %w1 = train.param "w1" init(#train.init<normal, 0.25>) : tensor<16x32xf32>
  %b1 = train.param "b1" init(#train.init<zeros>) no_decay : tensor<32xf32>
  %w2 = train.param "w2" init(#train.init<normal, 0.18>) : tensor<32x4xf32>
  %b2 = train.param "b2" init(#train.init<zeros>) no_decay : tensor<4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %y = train.input "y" : tensor<8xi32>
  %xs = train.scale %x by 3.0 : tensor<8x16xf32>
  %h0 = train.matmul %xs, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
  %h1 = train.add %h0, %b1 : tensor<8x32xf32>, tensor<32xf32>
  %h = train.relu %h1 : tensor<8x32xf32>
  %o0 = train.matmul %h, %w2 : tensor<8x32xf32>, tensor<32x4xf32>
  %o = train.add %o0, %b2 : tensor<8x4xf32>, tensor<4xf32>
  %loss = train.cross_entropy %o, %y : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%loss : tensor<f32>)
}
