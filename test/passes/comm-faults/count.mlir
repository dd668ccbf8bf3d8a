// A wrong count on one rank: rank 1 reduces 28 elements where its tp group reduces 32.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=count rank=1 index=0" --dist-verify-communication -verify-diagnostics -o /dev/null

train.model @ranks attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  // expected-error @+2 {{ranks 0 and 1 disagree on collective 1 over tp: rank 0 issues 'dist.all_reduce' of 32 x f32, rank 1 issues 'dist.all_reduce' of 28 x f32}}
  // expected-note @+1 {{rank 1's collective}}
  %a = dist.all_reduce %x over ["tp"] : tensor<4x8xf32>
  %s = dist.all_reduce %a over ["dp"] : tensor<4x8xf32>
  %l = train.reduce sum %s dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
