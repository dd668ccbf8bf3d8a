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
    WalkResult result = getOperation().walk([&](ModelOp model) {
      FailureOr<ModelLayout> layout = layoutModel(model);
      if (failed(layout))
        return WalkResult::interrupt();
      PlanFaults faults;
      faults.releaseInFlightAtStart = testReleaseInFlightAtStart;
      MemoryPlan plan = planMemory(model.getBody().front(), layout->stepOps,
                                   layout->stepPersistent, faults);
      if (failed(verifyInFlightBuffers(model.getBody().front(), plan)))
        return WalkResult::interrupt();
      Builder b(model.getContext());
      model.getBody().walk([&](Operation *op) {
        if (op->getNumResults() == 0 || isa<ModelOp>(op))
          return;
        SmallVector<int64_t> offsets;
        for (Value r : op->getResults()) {
          auto it = plan.placements.find(r);
          offsets.push_back(it != plan.placements.end() &&
                                    it->second.kind == Placement::Arena
                                ? it->second.where
                                : -1);
        }
        planAttrs(op).getOffsetsAttrHelper().setAttr(
            op, b.getDenseI64ArrayAttr(offsets));
      });
      planAttrs(model).getPeakBytesAttrHelper().setAttr(
          model, b.getI64IntegerAttr(plan.peakBytes));
      peakBytes += plan.peakBytes;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
