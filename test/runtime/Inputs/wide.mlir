// One 5120 x 5120 weight: 104,857,600 bytes of parameters to export.
train.model @wide attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.01>} {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<5120x5120xf32>
  %x = train.input "x" : tensor<2x5120xf32>
  %y = train.input "y" : tensor<2xi32>
  %logits = train.matmul %x, %w : tensor<2x5120xf32>, tensor<5120x5120xf32>
  %loss = train.cross_entropy %logits, %y : tensor<2x5120xf32>, tensor<2xi32>
  train.output loss(%loss : tensor<f32>)
}
