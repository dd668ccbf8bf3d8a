// A pipeline-shaped rank program on 1024 ranks: stage code runs where
// `dist.on` says, activations go forward and gradients back by send and
// receive. Only the pp coordinate tells programs apart, so the verifier
// simulates one representative per stage and records what it proved.
// RUN: loom-opt %s --dist-verify-communication | FileCheck %s
// RUN: loom-opt %s --dist-verify-communication=every-rank=true | FileCheck %s --check-prefix=EVERY

// CHECK: dist.verified = #dist.verified<simulated = 4, ranks = 1024, class_axes = ["pp"], ops = 3>
// EVERY: dist.verified = #dist.verified<simulated = 1024, ranks = 1024, class_axes = ["pp", "dp", "tp"], ops = 3>
train.model @pipe attributes {dist.mesh = #dist.mesh<["pp" = 4, "dp" = 16, "tp" = 16]>} {
  %x = train.input "x" : tensor<4x8xf32>
  dist.send %x to "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
  %a1 = dist.recv from "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
  %t1 = dist.all_reduce %a1 over ["tp"] {dist.on = {pp = 1}} : tensor<4x8xf32>
  dist.send %t1 to "pp" = 2 {dist.on = {pp = 1}} : tensor<4x8xf32>
  %a2 = dist.recv from "pp" = 1 {dist.on = {pp = 2}} : tensor<4x8xf32>
  dist.send %a2 to "pp" = 3 {dist.on = {pp = 2}} : tensor<4x8xf32>
  %a3 = dist.recv from "pp" = 2 {dist.on = {pp = 3}} : tensor<4x8xf32>
  %g = dist.all_reduce %a3 over ["dp"] {dist.on = {pp = 3}} : tensor<4x8xf32>
  %l = train.reduce sum %x dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
