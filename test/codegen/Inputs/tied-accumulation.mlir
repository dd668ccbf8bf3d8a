// A token embedding tied to the head, with a layer norm and a position
// embedding between them: every kind of gradient an accumulation adds
// outside a layer loop.
train.model @tied attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %wte = train.param "wte" init(#train.init<normal, 0.02>) : tensor<16x8xf32>
  %wpe = train.param "wpe" init(#train.init<normal, 0.02>) : tensor<4x8xf32>
  %g = train.param "ln_g" init(#train.init<ones>) : tensor<8xf32>
  %b = train.param "ln_b" init(#train.init<zeros>) : tensor<8xf32>
  %tok = train.input "tokens" : tensor<4x4xi32>
  %lab = train.input "labels" : tensor<4x4xi32>
  %e = train.embedding %wte, %tok : tensor<16x8xf32>, tensor<4x4xi32>
  %x = train.add %e, %wpe : tensor<4x4x8xf32>, tensor<4x8xf32>
  %n = train.layer_norm %x, %g, %b : tensor<4x4x8xf32>, tensor<8xf32>
  %y = train.matmul %n, %wte transpose_rhs : tensor<4x4x8xf32>, tensor<16x8xf32>
  %l = train.cross_entropy %y, %lab : tensor<4x4x16xf32>, tensor<4x4xi32>
  train.output loss(%l : tensor<f32>)
}
