// A wrong element type on one rank: rank 0 reduces bf16 where its group reduces f32.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=type rank=0 index=1" --dist-verify-communication -verify-diagnostics -o /dev/null

train.model @ranks attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  %a = dist.all_reduce %x over ["tp"] : tensor<4x8xf32>
  // expected-error @+2 {{ranks 1 and 0 disagree on collective 2 over dp+tp: rank 1 issues 'dist.all_reduce max' of 32 x f32, rank 0 issues 'dist.all_reduce max' of 32 x bf16}}
  // expected-note @+1 {{rank 0's collective}}
  %m = dist.all_reduce %a over ["dp", "tp"] max : tensor<4x8xf32>
  %l = train.reduce sum %m dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
