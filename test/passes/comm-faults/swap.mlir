// Two collectives swapped on one rank: rank 2 issues the dp+tp max before the dp sum.
// RUN: loom-opt %s --dist-inject-comm-fault="fault=swap rank=2 index=2" --dist-verify-communication -verify-diagnostics -o /dev/null

train.model @ranks attributes {dist.mesh = #dist.mesh<["dp" = 2, "tp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  %a = dist.all_reduce %x over ["tp"] : tensor<4x8xf32>
  %g = dist.all_gather %a over ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x16xf32>
  // expected-error @+1 {{the ranks' communication cannot complete: rank 0 waits in 'dist.all_reduce' of 64 x f32 over dp}}
  %s = dist.all_reduce %g over ["dp"] : tensor<4x16xf32>
  // expected-note @+1 {{rank 2 is in 'dist.all_reduce max' of 64 x f32 over dp+tp}}
  %m = dist.all_reduce %s over ["dp", "tp"] max : tensor<4x16xf32>
  %l = train.reduce sum %m dims [0, 1] : tensor<4x16xf32>
  train.output loss(%l : tensor<f32>)
}
