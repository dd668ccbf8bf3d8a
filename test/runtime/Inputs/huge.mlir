// 2^45 floats of weights: 2^47 bytes, more than any machine has.
train.model @huge attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<32768x32768x32768xf32>
  %x = train.input "x" : tensor<2x32768xf32>
  %s = train.slice %w offsets [0, 0, 0] sizes [1, 32768, 4] : tensor<32768x32768x32768xf32>
  %r = train.reshape %s : tensor<1x32768x4xf32> -> tensor<32768x4xf32>
  %y = train.matmul %x, %r : tensor<2x32768xf32>, tensor<32768x4xf32>
  %l = train.reduce sum %y dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}
