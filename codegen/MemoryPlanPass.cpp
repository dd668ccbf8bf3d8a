//===- MemoryPlanPass.cpp - loom-memory-plan --------------------------------===//

#include "analysis/Layout.h"
#include "analysis/MemoryPlan.h"
#include "codegen/Passes.h"
#include "dialects/loom/LoomDialect.h"

namespace loom::codegen {
#define GEN_PASS_DEF_LOOMMEMORYPLAN
#include "codegen/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
using namespace loom::codegen;
using namespace loom::analysis;
using namespace loom::train;

namespace {
struct LoomMemoryPlanPass
    : public loom::codegen::impl::LoomMemoryPlanBase<LoomMemoryPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    PlanFaults faults;
    faults.releaseInFlightAtStart = testReleaseInFlightAtStart;
    WalkResult result = getOperation().walk([&](ModelOp model) {
      FailureOr<ModelLayout> layout = layoutModel(model);
      if (failed(layout))
        return WalkResult::interrupt();
      // The step and the evaluation, each planned once per pipeline rank.
      FailureOr<SmallVector<MemoryPlan>> step =
          planFunction(model, layout->stepOps, layout->stepPersistent, faults);
      if (failed(step))
        return WalkResult::interrupt();
      FailureOr<SmallVector<MemoryPlan>> eval =
          planFunction(model, layout->evalOps, layout->evalPersistent, faults);
      if (failed(eval))
        return WalkResult::interrupt();
      recordPlans(model, "step", layout->stepOps, *step);
      recordPlans(model, "eval", layout->evalOps, *eval);
      int64_t peak = 0;
      for (const MemoryPlan &plan :
           llvm::concat<const MemoryPlan>(*step, *eval))
        peak = std::max(peak, plan.peakBytes);
      peakBytes += peak;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
