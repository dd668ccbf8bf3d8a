// An asynchronous all-reduce's buffer reused before its wait: the planner,
// told to free in-flight buffers at their start, places a value computed
// during the reduction over them, and the plan's own check rejects it. The
// same plan without the fault passes.
// RUN: loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-comm-opt=bucket-bytes=1 --loom-memory-plan -o /dev/null
// RUN: loom-opt %s --loom-pipeline --dist-mesh="mesh=dp=2" --dist-sharding-propagation="preset=dp" --dist-partition --dist-comm-opt=bucket-bytes=1 --loom-memory-plan=test-release-in-flight-at-start -verify-diagnostics -o /dev/null

train.model @m attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<16x16xf32>
  %v = train.param "v" init(#train.init<normal, 0.25>) : tensor<16x4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %t = train.input "t" : tensor<8xi32>
  %h = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32>
  %r = train.relu %h : tensor<8x16xf32>
  %y = train.matmul %r, %v : tensor<8x16xf32>, tensor<16x4xf32>
  // The labelled-token count's all-reduce is started here and waited
  // before the loss's gradient is scaled; the faulty plan puts the local
  // count, made from this op too, in its buffer.
  // expected-error @+3 {{a buffer of this asynchronous collective (arena bytes [448, 452)) is reused by 'train.label_count' before its 'dist.wait'}}
  // expected-note @+2 {{writes arena bytes [448, 452) here}}
  // expected-note @+1 {{the wait}}
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}
