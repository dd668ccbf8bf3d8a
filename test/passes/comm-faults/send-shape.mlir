// A send whose receive expects another shape: rank 3 sends 4x7 elements
// where rank 1 receives 4x8.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=count rank=3 index=3" --dist-verify-communication -verify-diagnostics -o /dev/null

train.model @pipe attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  dist.send %x to "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  %y = dist.recv from "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  %g = dist.all_reduce %y over ["dp"] {dist.on = {pp = 1}} : tensor<4x8xf32>
  // expected-error @+1 {{rank 3 sends 'tensor<4x7xf32>' to rank 1, which receives 'tensor<4x8xf32>'}}
  dist.send %g to "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  // expected-note @+1 {{rank 1's receive}}
  %gy = dist.recv from "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  %s = dist.all_reduce %gy over ["dp"] {dist.on = {pp = 0}} : tensor<4x8xf32>
  %l = train.reduce sum %s dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
