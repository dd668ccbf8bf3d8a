// An unmatched send: rank 0 (stage 0) never receives the gradient that
// rank 2 (stage 1) sends back.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=skip rank=0 index=4" --dist-verify-communication -verify-diagnostics -o /dev/null

// expected-note @+1 {{rank 0 has no communication left}}
train.model @pipe attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  dist.send %x to "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  %y = dist.recv from "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  %g = dist.all_reduce %y over ["dp"] {dist.on = {pp = 1}} : tensor<4x8xf32>
  // expected-error @+1 {{unmatched send: rank 2 waits in 'dist.send' of tensor<4x8xf32> to rank 0}}
  dist.send %g to "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  %gy = dist.recv from "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  %s = dist.all_reduce %gy over ["dp"] {dist.on = {pp = 0}} : tensor<4x8xf32>
  %l = train.reduce sum %s dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
