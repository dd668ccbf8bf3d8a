//===- Zero.cpp - dist-zero ------------------------------------------------===//
//
// ZeRO over the mesh's data axis. The decision is the stage, recorded as
// `dist.zero` on the model; what it splits (the optimizer state, the
// gradients, the parameters) is a sharding, so dist-sharding-propagation
// applies it once the data and tensor splits are known, and partitioning
// makes the collectives. Stage 1 keeps each gradient whole and unreduced
// until the optimizer: the reduction is placed here, after each gradient
// the optimizer reads, as an explicit `dist.all_reduce` that propagation
// does not cross and partitioning turns into a reduce-scatter.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Sharding.h"

namespace loom {
#define GEN_PASS_DEF_DISTZERO
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

struct DistZeroPass : public loom::impl::DistZeroBase<DistZeroPass> {
  using Base::Base;

  LogicalResult run(ModelOp model) {
    dist::DistDialect &attrs = dist::attrs(model);
    dist::MeshAttr mesh = attrs.getMeshAttrHelper().getAttr(model);
    if (!mesh)
      return success();
    StringAttr data = mesh.getAxis(dist::AxisRole::Data);
    if (!data)
      return model.emitError("ZeRO stage ")
             << int64_t(stage) << " splits over the data axis; the mesh " << mesh
             << " has none (add dp=N)";
    SmallVector<Operation *> updates;
    model.walk([&](Operation *op) {
      if (sharding::asOptimizerUpdate(op))
        updates.push_back(op);
    });
    if (updates.empty())
      return model.emitError("ZeRO stage ")
             << int64_t(stage)
             << " splits the optimizer step, and this model has none (run "
                "train-optimizer first)";
    Builder b(model);
    attrs.getZeroAttrHelper().setAttr(model, b.getI64IntegerAttr(stage));
    if (stage != 1)
      return success();
    // Stage 1: the gradient is reduced once, where the optimizer reads it.
    DenseSet<Value> reduced;
    for (Operation *op : updates) {
      Value grad = sharding::unclippedGradient(
          sharding::asOptimizerUpdate(op).grad->get());
      if (!reduced.insert(grad).second)
        continue;
      OpBuilder at(model.getContext());
      if (auto arg = dyn_cast<BlockArgument>(grad))
        at.setInsertionPointToStart(arg.getOwner());
      else
        at.setInsertionPointAfter(grad.getDefiningOp());
      auto reduce = dist::AllReduceOp::create(
          at, grad.getLoc(), grad, at.getStrArrayAttr({data.getValue()}),
          false);
      grad.replaceAllUsesExcept(reduce, reduce);
      reduced.insert(reduce);
    }
    return success();
  }

  void runOnOperation() override {
    if (stage < 0 || stage > 3) {
      getOperation().emitError("dist-zero: stage ")
          << int64_t(stage) << " is not a ZeRO stage (0, 1, 2 or 3)";
      return signalPassFailure();
    }
    if (stage == 0)
      return;
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(run(model)))
        return signalPassFailure();
  }
};

} // namespace
