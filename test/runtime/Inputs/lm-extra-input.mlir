// A language model with an input besides its tokens and labels (a mask),
// which text data does not fill.
train.model @lm attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %wte = train.param "wte" init(#train.init<normal, 0.02>) : tensor<256x8xf32>
  %tokens = train.input "tokens" : tensor<2x4xi32>
  %labels = train.input "labels" : tensor<2x4xi32>
  %mask = train.input "mask" : tensor<2x4x8xf32>
  %x = train.embedding %wte, %tokens : tensor<256x8xf32>, tensor<2x4xi32>
  %m = train.mul %x, %mask : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %logits = train.matmul %m, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<256x8xf32>
  %loss = train.cross_entropy %logits, %labels : tensor<2x4x256xf32>, tensor<2x4xi32>
  train.output loss(%loss : tensor<f32>)
}
