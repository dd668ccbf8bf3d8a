//===- Mesh.cpp - dist-mesh ------------------------------------------------===//
//
// The one place a mesh enters the IR: every later pass reads `dist.mesh`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace loom {
#define GEN_PASS_DEF_DISTMESH
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {
struct DistMeshPass : public loom::impl::DistMeshBase<DistMeshPass> {
  using Base::Base;
  void runOnOperation() override {
    if (mesh.empty())
      return;
    llvm::Expected<dist::MeshAttr> parsed =
        dist::parseMesh(&getContext(), mesh);
    if (!parsed) {
      getOperation().emitError("dist-mesh: ")
          << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    auto helper = dist::attrs(&getContext()).getMeshAttrHelper();
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      dist::MeshAttr already = helper.getAttr(model);
      if (already && already != *parsed) {
        model.emitOpError("already runs on the mesh ")
            << already << "; dist-mesh sets a model's mesh once, not "
            << *parsed;
        return signalPassFailure();
      }
      helper.setAttr(model, *parsed);
    }
  }
};
} // namespace
