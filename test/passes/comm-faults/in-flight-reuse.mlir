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
  // The loss's all-reduce is started at the loss and waited at the end of
  // the step; the faulty plan puts the backward's first product (the loss
  // gradient times v), computed while it is in flight, over its buffer.
  // expected-note @+1 {{writes arena bytes [512, 768) here}}
  %y = train.matmul %r, %v : tensor<8x16xf32>, tensor<16x4xf32>
  // expected-error @+2 {{a buffer of this asynchronous collective (arena bytes [512, 516)) is reused by 'train.matmul' before its 'dist.wait'}}
  // expected-note @+1 {{the wait}}
  %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%l : tensor<f32>)
}
