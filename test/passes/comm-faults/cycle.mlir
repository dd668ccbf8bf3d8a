// A send/receive cycle: rank 0 posts its receive from stage 1 before its
// send to stage 1, so ranks 0 and 2 each wait to receive from the other.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=swap rank=0 index=0" --dist-verify-communication -verify-diagnostics -o /dev/null

train.model @pipe attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  dist.send %x to "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  // expected-note @+1 {{rank 2 is in 'dist.recv' of tensor<4x8xf32> from rank 0}}
  %y = dist.recv from "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  %g = dist.all_reduce %y over ["dp"] {dist.on = {pp = 1}} : tensor<4x8xf32>
  dist.send %g to "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  // expected-error @+2 {{the ranks' communication cannot complete: ranks 0 -> 2 -> 0 wait on each other in a cycle}}
  // expected-note @+1 {{rank 0 is in 'dist.recv' of tensor<4x8xf32> from rank 2}}
  %gy = dist.recv from "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  %s = dist.all_reduce %gy over ["dp"] {dist.on = {pp = 0}} : tensor<4x8xf32>
  %l = train.reduce sum %s dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
