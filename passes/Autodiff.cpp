//===- Autodiff.cpp - train-autodiff ---------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/train/Adjoint.h"

namespace loom {
#define GEN_PASS_DEF_TRAINAUTODIFF
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {
struct TrainAutodiffPass
    : public loom::impl::TrainAutodiffBase<TrainAutodiffPass> {
  using TrainAutodiffBase::TrainAutodiffBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    TrainAutodiffBase::getDependentDialects(registry);
    // The backward of an op on a pipeline stage runs on that stage: dist
    // carries its stage through the train dialect's adjoint hook.
    registry.insert<loom::dist::DistDialect>();
    registry.addExtension(+[](MLIRContext *, TrainDialect *train,
                              loom::dist::DistDialect *) {
      train->addAdjointHook(loom::dist::copyStage);
    });
  }

  void runOnOperation() override {
    if (gradPrecision != "fp32" && gradPrecision != "bf16") {
      emitError(getOperation().getLoc())
          << "train-autodiff: grad-precision must be fp32 or bf16, got '"
          << gradPrecision << "'";
      return signalPassFailure();
    }
    bool failedAny = false;
    getOperation().walk([&](ModelOp model) {
      if (failed(differentiate(model)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult differentiate(ModelOp model) {
    OutputOp output = model.getOutput();
    if (!output.getGrads().empty() || !output.getUpdates().empty())
      return model.emitOpError("is already differentiated");
    Block &body = model.getBody().front();
    SmallVector<ParamOp> params(body.getOps<ParamOp>());
    SmallVector<Value> sources;
    for (ParamOp param : params)
      sources.push_back(param.getResult());

    IRRewriter rewriter(model.getContext());
    DenseSet<Value> active = prepareForBackward(rewriter, body, sources);
    Value loss = output.getLoss();
    if (!active.contains(loss))
      return model.emitOpError("loss does not depend on any parameter");

    size_t before = body.getOperations().size();
    OpBuilder b(output);
    DenseMap<Value, Value> adjoints;
    auto lossType = cast<RankedTensorType>(loss.getType());
    adjoints[loss] = arith::ConstantOp::create(
        b, output.getLoc(), lossType,
        DenseElementsAttr::get(lossType, b.getFloatAttr(
                                             lossType.getElementType(), 1.0)));
    if (failed(backpropagate(b, body, active, adjoints)))
      return failure();

    SmallVector<Value> grads;
    for (ParamOp param : params) {
      Value g = adjoints.lookup(param.getResult());
      grads.push_back(g ? g : zerosLike(b, param.getLoc(), param.getType()));
    }
    // A master's gradient is the widening of its copy's: under bf16
    // gradients the copy's is the gradient instead.
    SmallVector<ConvertOp> unwidened;
    if (gradPrecision == "bf16")
      for (Value &g : grads)
        if (auto widen = g.getDefiningOp<ConvertOp>();
            widen &&
            isBf16GradientOf(widen.getInput().getType(), g.getType())) {
          g = widen.getInput();
          unwidened.push_back(widen);
        }
    OutputOp::create(b, output.getLoc(), loss, grads, ValueRange());
    output.erase();
    for (ConvertOp widen : unwidened)
      if (widen->use_empty())
        widen.erase();
    if (gradPrecision != "bf16")
      widenGradients(body);
    pruneResiduals(model);
    numBackwardOps += body.getOperations().size() - before;
    return success();
  }
};
} // namespace
