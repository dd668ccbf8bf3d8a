//===- PipelineSplit.cpp - dist-pipeline-split -----------------------------===//
//
// Cuts a train.repeat whose layers dist-pipeline-partition put on several
// stages into one repeat per run of layers on one stage. A stacked
// parameter that only such a repeat reads becomes one parameter per run
// (`dist.part`), so a stage's parameters, gradients and optimizer state
// are its own tensors.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/RepeatSplit.h"

#include "dialects/dist/DistDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINESPLIT
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

struct DistPipelineSplitPass
    : public loom::impl::DistPipelineSplitBase<DistPipelineSplitPass> {
  void runOnOperation() override {
    auto layerStages = dist::attrs(&getContext()).getStagesAttrHelper();
    SmallVector<RepeatOp> repeats;
    getOperation().walk([&](RepeatOp repeat) {
      if (layerStages.isAttrPresent(repeat))
        repeats.push_back(repeat);
    });
    for (RepeatOp repeat : repeats) {
      ArrayRef<int64_t> s = layerStages.getAttr(repeat).asArrayRef();
      if (int64_t(s.size()) != int64_t(repeat.getCount())) {
        repeat.emitOpError("has ")
            << s.size() << " stages in '" << layerStages.getNameStr()
            << "' for " << repeat.getCount() << " layers";
        return signalPassFailure();
      }
      if (llvm::all_equal(s)) {
        layerStages.removeAttr(repeat);
        dist::attrs(repeat).getStageAttrHelper().setAttr(
            repeat, Builder(repeat).getI64IntegerAttr(s.front()));
        continue;
      }
      dist::DistDialect &attrs = dist::attrs(repeat);
      Builder b(repeat);
      if (failed(splitRepeatIntoRuns(
              repeat, s,
              [&](RepeatOp part, int64_t stage, int64_t) {
                attrs.getStagesAttrHelper().removeAttr(part);
                attrs.getStageAttrHelper().setAttr(
                    part, b.getI64IntegerAttr(stage));
              },
              [&](Operation *layers, int64_t stage) {
                if (isa<SliceOp>(layers))
                  attrs.getStageAttrHelper().setAttr(
                      layers, b.getI64IntegerAttr(stage));
                else
                  attrs.getStagesAttrHelper().setAttr(
                      layers, b.getDenseI64ArrayAttr({stage}));
              })))
        return signalPassFailure();
    }
  }
};

} // namespace
