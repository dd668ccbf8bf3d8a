//===- Remat.cpp - dist-remat ----------------------------------------------===//
//
// What the backward of each layer loop recomputes, decided before autodiff
// writes the backward: `full` keeps each iteration's input and recomputes
// the iteration (the backward rule of a `train.repeat` without
// `residuals`); `none` asks every forward repeat for `residuals(0)`, so
// that autodiff saves what the backward reads and recomputes nothing.
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
    if (policy != "none") {
      getOperation().emitError("dist-remat: unknown policy '")
          << policy
          << "' (full or none; selective and budget are not available yet)";
      return signalPassFailure();
    }
    Builder b(&getContext());
    getOperation().walk([&](RepeatOp repeat) {
      // A forward loop that chose nothing yet (a backward loop, or a
      // forward one autodiff has already prepared, keeps its form).
      if (repeat.getReverse() || repeat.getSavesCarries() ||
          repeat.getResidualsAttr())
        return;
      repeat.setResidualsAttr(b.getI64IntegerAttr(0));
    });
  }
};

} // namespace
