// dist-mesh sets the mesh, with each axis's role, on every model: the one
// place a mesh enters the IR. dp, tp and pp imply their roles (and print
// without them); other names state theirs. What is wrong with a spec is an
// error naming it; a model that already has another mesh keeps it.
// RUN: loom-opt %s --dist-mesh="mesh=pp=2,dp=2,tp=2" | FileCheck %s --check-prefix=NAMED
// RUN: loom-opt %s --dist-mesh="mesh=stage=2:pipeline,replica=4:data" | FileCheck %s --check-prefix=ROLES
// RUN: loom-opt %s --dist-mesh="mesh=dp=2:tensor" | FileCheck %s --check-prefix=SWAP
// RUN: loom-opt %s --dist-mesh="mesh=dp=2" --dist-mesh="mesh=dp=2" | FileCheck %s --check-prefix=AGAIN
// RUN: loom-opt %s | FileCheck %s --check-prefix=NONE
// RUN: not loom-opt %s --dist-mesh="mesh=x=2" 2>&1 | FileCheck %s --check-prefix=NOROLE
// RUN: not loom-opt %s --dist-mesh="mesh=x=2:model" 2>&1 | FileCheck %s --check-prefix=BADROLE
// RUN: not loom-opt %s --dist-mesh="mesh=dp=2,batch=2:data" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %s --dist-mesh="mesh=dp=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not loom-opt %s --dist-mesh="mesh=dp=2" --dist-mesh="mesh=dp=4" 2>&1 | FileCheck %s --check-prefix=OTHER

// NAMED: train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2, "tp" = 2]>
// ROLES: train.model @m attributes {dist.mesh = #dist.mesh<["stage" = 2 : pipeline, "replica" = 4 : data]>
// SWAP: #dist.mesh<["dp" = 2 : tensor]>
// AGAIN: #dist.mesh<["dp" = 2]>
// NONE-NOT: dist.mesh
// NOROLE: error: dist-mesh: mesh 'x=2': axis 'x' needs a role: x=N:data, :tensor or :pipeline (only dp, tp and pp imply theirs)
// BADROLE: error: dist-mesh: mesh 'x=2:model': axis 'x': unknown role 'model' (data, tensor or pipeline)
// TWICE: error: dist-mesh: mesh 'dp=2,batch=2:data': mesh axes "dp" and "batch" both have the role data (each role is on one axis at most)
// ZERO: error: dist-mesh: mesh 'dp=0': mesh axis "dp" must have at least one rank, got 0
// OTHER: error: 'train.model' op already runs on the mesh #dist.mesh<["dp" = 2]>; dist-mesh sets a model's mesh once, not #dist.mesh<["dp" = 4]>
train.model @m {
  %x = train.input "x" : tensor<2x4xf32>
  %loss = train.reduce sum %x dims [0, 1] : tensor<2x4xf32>
  train.output loss(%loss : tensor<f32>)
}
