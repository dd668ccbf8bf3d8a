//===- Remat.cpp - dist-remat ----------------------------------------------===//
//
// What the backward of each layer loop recomputes, decided before autodiff
// writes the backward: `full` keeps each iteration's input and recomputes
// the iteration (the backward rule of a `train.repeat` without
// `residuals`); `none` asks every forward repeat for `residuals(0)`, so
// that autodiff saves what the backward reads and recomputes nothing;
// `selective` does the same but marks every op of the body other than the
// matmuls and the attention `train.recompute`, so that autodiff saves the
// matmuls' and attention's outputs and the backward recomputes the
// pointwise functions, norms, softmax and data movement from them.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/train/TrainDialect.h"

namespace loom {
#define GEN_PASS_DEF_DISTREMAT
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

struct DistRematPass : public loom::impl::DistRematBase<DistRematPass> {
  using Base::Base;

  void runOnOperation() override {
    if (policy == "full")
      return;
    if (policy != "none" && policy != "selective") {
      getOperation().emitError("dist-remat: unknown policy '")
          << policy
          << "' (full, selective or none; budget is not available yet)";
      return signalPassFailure();
    }
    Builder b(&getContext());
    auto recompute =
        getContext().getOrLoadDialect<TrainDialect>()->getRecomputeAttrHelper();
    getOperation().walk([&](RepeatOp repeat) {
      // A forward loop that chose nothing yet (a backward loop, or a
      // forward one autodiff has already prepared, keeps its form).
      if (repeat.getReverse() || repeat.getSavesCarries() ||
          repeat.getResidualsAttr())
        return;
      repeat.setResidualsAttr(b.getI64IntegerAttr(0));
      if (policy != "selective")
        return;
      for (Operation &op : repeat.getBodyBlock().without_terminator())
        if (!isa<MatmulOp, AttentionOp, RepeatOp>(op) &&
            op.getNumOperands() > 0 && !isa<ReshapeOp>(op) &&
            llvm::any_of(op.getResultTypes(), [](Type t) {
              return isa<RankedTensorType>(t);
            }))
          recompute.setAttr(&op, b.getUnitAttr());
    });
  }
};

} // namespace
