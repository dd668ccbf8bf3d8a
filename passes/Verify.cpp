//===- Verify.cpp - train-verify -------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/train/Adjoint.h"

namespace loom {
#define GEN_PASS_DEF_TRAINVERIFY
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {
struct TrainVerifyPass : public loom::impl::TrainVerifyBase<TrainVerifyPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation().walk([&](ModelOp model) {
      if (failed(verifyModel(model)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult verifyModel(ModelOp model) {
    Block &body = model.getBody().front();
    WalkResult walk = model.getBody().walk([&](Operation *op) {
      // Another dialect's op runs where it has a runtime kernel (a dialect
      // plugin's, linked with loomc --kernels).
      if (isa<TrainDialect, arith::ArithDialect>(op->getDialect()) ||
          isa<KernelOpInterface>(op))
        return WalkResult::advance();
      op->emitOpError("is not allowed in a 'train.model': only train ops, "
                      "arith constants and ops with a runtime kernel "
                      "(KernelOpInterface) are");
      return WalkResult::interrupt();
    });
    if (walk.wasInterrupted())
      return failure();

    SmallVector<Value> params;
    for (ParamOp param : body.getOps<ParamOp>()) {
      params.push_back(param.getResult());
      ++numParameters;
      numParameterElements +=
          cast<RankedTensorType>(param.getType()).getNumElements();
    }
    OutputOp output = model.getOutput();
    DenseSet<Value> active = computeActive(body, params);
    if (!active.contains(output.getLoss()))
      return model.emitOpError("loss does not depend on any parameter");

    // Parameters that cannot reach the loss: walk uses backwards from it.
    DenseSet<Value> reaching{output.getLoss()};
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (llvm::any_of(op.getResults(),
                       [&](Value r) { return reaching.contains(r); }))
        for (Value v : op.getOperands())
          reaching.insert(v);
    for (ParamOp param : body.getOps<ParamOp>())
      if (!reaching.contains(param.getResult()))
        param.emitWarning("parameter \"")
            << param.getName()
            << "\" does not affect the loss; its gradient is zero";
    return success();
  }
};
} // namespace
