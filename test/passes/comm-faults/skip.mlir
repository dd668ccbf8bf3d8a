// A collective skipped on one rank: rank 3 never joins the tp all-gather, so ranks 0, 2 and 3 wait on each other in three groups.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=skip rank=3 index=1" --dist-verify-communication -verify-diagnostics -o /dev/null

train.model @ranks attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  %a = dist.all_reduce %x over ["tp"] : tensor<4x8xf32>
  // expected-note @+1 {{rank 2 is in 'dist.all_gather' of 32 x f32 over tp}}
  %g = dist.all_gather %a over ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x16xf32>
  // expected-error @+2 {{the ranks' communication cannot complete: ranks 0 -> 2 -> 3 -> 0 wait on each other in a cycle}}
  // expected-note @+1 {{rank 0 is in 'dist.all_reduce' of 64 x f32 over dp}}
  %s = dist.all_reduce %g over ["dp"] : tensor<4x16xf32>
  // expected-note @+1 {{rank 3 is in 'dist.all_reduce max' of 64 x f32 over dp+tp}}
  %m = dist.all_reduce %s over ["dp", "tp"] max : tensor<4x16xf32>
  %l = train.reduce sum %m dims [0, 1] : tensor<4x16xf32>
  train.output loss(%l : tensor<f32>)
}
