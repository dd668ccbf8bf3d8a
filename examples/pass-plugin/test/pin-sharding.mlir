// The plugin's pass, loaded into the installed loom-opt: the named parameter
// gets a closed sharding on the asked dimension; a parameter or dimension
// that is not there is an error at the model or the parameter.
// RUN: %loom-opt --load-pass-plugin=%plugin --pass-pipeline='builtin.module(pin-sharding{param=w axis=dp dim=1})' %s | FileCheck %s
// RUN: %loom-opt --load-pass-plugin=%plugin --pass-pipeline='builtin.module(pin-sharding{param=w axis=dp dim=2})' %s -verify-diagnostics -o /dev/null

// CHECK: train.param "w" {{.*}}{dist.sharding = [#dist.sharding<[{}, {"dp"}]>]} : tensor<16x4xf32>
// CHECK: train.param "v"
// CHECK-NOT: dist.sharding
train.model @mlp attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  // expected-error @below {{'train.param' op pin-sharding: dimension 2 is outside 'tensor<16x4xf32>'}}
  %w = train.param "w" init(#train.init<normal, 0.25>) : tensor<16x4xf32>
  %v = train.param "v" init(#train.init<zeros>) : tensor<4xf32>
  %x = train.input "x" : tensor<8x16xf32>
  %y = train.input "y" : tensor<8xi32>
  %h = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %l = train.add %h, %v : tensor<8x4xf32>, tensor<4xf32>
  %loss = train.cross_entropy %l, %y : tensor<8x4xf32>, tensor<8xi32>
  train.output loss(%loss : tensor<f32>)
}

