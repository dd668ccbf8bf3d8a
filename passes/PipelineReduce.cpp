//===- PipelineReduce.cpp - dist-pipeline-reduce ---------------------------===//

#include "passes/Passes.h"
#include "passes/PipelineStages.h"

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINEREDUCE
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {
struct DistPipelineReducePass
    : public loom::impl::DistPipelineReduceBase<DistPipelineReducePass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      int64_t ranks = pipelineOf(model);
      if (!ranks)
        continue;
      OutputOp output = model.getOutput();
      if (output.getGrads().empty() || !output.getUpdates().empty()) {
        model.emitOpError("needs its gradients (after train-autodiff, before "
                          "train-optimizer) for dist-pipeline-reduce");
        return signalPassFailure();
      }
      FailureOr<StringAttr> axis = pipelineAxis(model);
      if (failed(axis))
        return signalPassFailure();
      reduceOverStages(model, ranks, *axis);
    }
  }
};
} // namespace
