//===- Optimizer.cpp - train-optimizer -------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"

namespace loom {
#define GEN_PASS_DEF_TRAINOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {
struct TrainOptimizerPass
    : public loom::impl::TrainOptimizerBase<TrainOptimizerPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation().walk([&](ModelOp model) {
      if (failed(addOptimizer(model)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult addOptimizer(ModelOp model) {
    OutputOp output = model.getOutput();
    if (!output.getUpdates().empty())
      return model.emitOpError("already has an optimizer step");
    Block &body = model.getBody().front();
    SmallVector<ParamOp> params(body.getOps<ParamOp>());
    if (output.getGrads().size() != params.size() || params.empty())
      return model.emitOpError("needs its gradients first (run train-autodiff "
                               "before train-optimizer)");
    // The optimizer declares its own state; a model that declares some
    // already was written for another optimizer step (or by hand).
    if (auto states = body.getOps<StateOp>(); !states.empty())
      return (*states.begin()).emitOpError("declares optimizer state '")
             << (*states.begin()).getName()
             << "' before train-optimizer, which declares the optimizer's "
                "state itself; remove it from the model";
    Attribute optimizer = model.getOptimizerAttr();
    if (!optimizer)
      return model.emitOpError("has no 'optimizer' attribute (#train.sgd or "
                               "#train.adamw)");
    ScheduleAttr schedule = model.getScheduleAttr();
    if (!schedule)
      return model.emitOpError("has no 'schedule' attribute (the learning "
                               "rate, #train.schedule)");

    Location loc = output.getLoc();
    OpBuilder b(output);
    Value step = IterationOp::create(b, loc);
    Value lr = LrScheduleOp::create(b, loc, step, schedule);

    SmallVector<Value> grads(output.getGrads());
    if (FloatAttr maxNorm = model.getClipNormAttr()) {
      // The norm's square is a sum over every gradient element: sharded
      // gradients give partial sums that one scalar all-reduce completes
      // (dist-partition), before the square root.
      Value norm =
          SqrtOp::create(b, loc, SumSquaresOp::create(b, loc, grads,
                                                     /*replica_group=*/0));
      Value factor = ClipFactorOp::create(b, loc, norm,
                                          maxNorm);
      for (Value &g : grads) {
        Type element = getElementTypeOrSelf(g.getType());
        Value f = factor;
        if (element != getElementTypeOrSelf(factor.getType()))
          f = ConvertOp::create(b, loc, factor, TypeAttr::get(element));
        g = MulOp::create(b, loc, g, f);
      }
    }

    // New values of parameters and states, keyed by the op that declares
    // them, then listed in declaration order.
    DenseMap<Operation *, Value> updates;
    auto declareState = [&](ParamOp param, StringRef suffix) {
      OpBuilder sb(param->getBlock(), std::next(param->getIterator()));
      // Keep a parameter's states in order right after it.
      while (auto next = dyn_cast<StateOp>(&*sb.getInsertionPoint()))
        sb.setInsertionPointAfter(next);
      ++numStates;
      return StateOp::create(sb, param.getLoc(), param.getType(),
                             (param.getName() + "." + suffix).str(),
                             param.getName());
    };

    for (auto [param, grad] : llvm::zip(params, grads)) {
      ++numUpdates;
      if (auto sgd = dyn_cast<SGDAttr>(optimizer)) {
        SGDAttr config = sgd;
        if (param.getNoDecay() && !sgd.getWeightDecay().isZero())
          config = SGDAttr::get(b.getContext(), sgd.getMomentum(),
                                APFloat(0.0));
        Value momentum;
        StateOp state;
        if (!sgd.getMomentum().isZero()) {
          state = declareState(param, "momentum");
          momentum = state;
        }
        auto update =
            SGDUpdateOp::create(b, param.getLoc(), param, grad, momentum, lr,
                                config);
        updates[param] = update.getNewParam();
        if (state)
          updates[state] = update.getNewMomentumBuffer();
        continue;
      }
      auto adamw = cast<AdamWAttr>(optimizer);
      StateOp m = declareState(param, "m");
      StateOp v = declareState(param, "v");
      double decay = param.getNoDecay()
                         ? 0.0
                         : adamw.getWeightDecay().convertToDouble();
      auto update = AdamWUpdateOp::create(b, param.getLoc(), param, grad, m, v,
                                          lr, step, adamw,
                                          b.getF64FloatAttr(decay));
      updates[param] = update.getNewParam();
      updates[m] = update.getNewM();
      updates[v] = update.getNewV();
    }

    SmallVector<Value> ordered;
    for (Operation *op : model.getStateOps())
      ordered.push_back(updates.lookup(op));
    OutputOp::create(b, loc, output.getLoss(), ValueRange(), ordered);
    output.erase();
    return success();
  }
};
} // namespace
