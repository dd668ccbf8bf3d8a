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
#include "passes/RepeatSplit.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"
#include "llvm/ADT/StringSwitch.h"

namespace loom {
#define GEN_PASS_DEF_DISTREMAT
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

enum class Policy { None, Selective, Full };

std::optional<Policy> parsePolicy(StringRef name) {
  return llvm::StringSwitch<std::optional<Policy>>(name)
      .Case("none", Policy::None)
      .Case("selective", Policy::Selective)
      .Case("full", Policy::Full)
      .Default(std::nullopt);
}

/// Applies `policy` to a forward loop that chose nothing yet.
void apply(RepeatOp repeat, Policy policy) {
  if (policy == Policy::Full)
    return;
  Builder b(repeat);
  repeat.setResidualsAttr(b.getI64IntegerAttr(0));
  if (policy != Policy::Selective)
    return;
  auto recompute = repeat->getContext()
                       ->getOrLoadDialect<TrainDialect>()
                       ->getRecomputeAttrHelper();
  for (Operation &op : repeat.getBodyBlock().without_terminator())
    if (!isa<MatmulOp, AttentionOp, RepeatOp>(op) &&
        op.getNumOperands() > 0 && !isa<ReshapeOp>(op) &&
        llvm::any_of(op.getResultTypes(),
                     [](Type t) { return isa<RankedTensorType>(t); }))
      recompute.setAttr(&op, b.getUnitAttr());
}

/// The first layer of `repeat` in its model's layer stack: where a
/// pipeline stage's part of the stack starts (its parameters' `dist.part`
/// offsets), else 0.
int64_t firstLayer(RepeatOp repeat) {
  for (Value s : repeat.getStacked()) {
    // Through the loops around it (a micro-batch loop passes the
    // parameters as invariants).
    while (auto arg = dyn_cast<BlockArgument>(s)) {
      auto outer = dyn_cast_or_null<RepeatOp>(arg.getOwner()->getParentOp());
      if (!outer || arg.getArgNumber() == 0)
        break;
      s = outer->getOperand(arg.getArgNumber() - 1);
    }
    if (auto param = s.getDefiningOp<ParamOp>())
      if (auto part = dist::attrs(param).getPartAttrHelper().getAttr(param))
        return part.getOffsets()[0];
  }
  return 0;
}

struct DistRematPass : public loom::impl::DistRematBase<DistRematPass> {
  using Base::Base;

  void runOnOperation() override {
    // One policy for every layer, or one per layer of the stack.
    SmallVector<Policy> perLayer;
    SmallVector<StringRef> names;
    StringRef(policy).split(names, ',');
    for (StringRef name : names) {
      std::optional<Policy> p = parsePolicy(name.trim());
      if (!p) {
        getOperation().emitError("dist-remat: unknown policy '")
            << policy
            << "' (none, selective, full, or one of them per layer: "
               "full,full,selective,none; budget is chosen by loomc)";
        return signalPassFailure();
      }
      perLayer.push_back(*p);
    }
    // Forward loops that chose nothing yet (a backward loop, or a forward
    // one autodiff has already prepared, keeps its form).
    SmallVector<RepeatOp> loops;
    getOperation().walk([&](RepeatOp repeat) {
      if (!repeat.getReverse() && !repeat.getSavesCarries() &&
          !repeat.getResidualsAttr())
        loops.push_back(repeat);
    });
    for (RepeatOp repeat : loops) {
      if (perLayer.size() == 1) {
        apply(repeat, perLayer.front());
        continue;
      }
      int64_t first = firstLayer(repeat), count = repeat.getCount();
      if (first + count > int64_t(perLayer.size())) {
        repeat.emitOpError("has layers [")
            << first << ", " << first + count << ") and dist-remat's policy '"
            << policy << "' names " << perLayer.size() << " layers";
        return signalPassFailure();
      }
      SmallVector<int64_t> keys;
      for (int64_t i = 0; i < count; ++i)
        keys.push_back(int64_t(perLayer[first + i]));
      if (llvm::all_equal(keys)) {
        apply(repeat, Policy(keys.front()));
        continue;
      }
      if (failed(splitRepeatIntoRuns(
              repeat, keys,
              [](RepeatOp part, int64_t key, int64_t) {
                apply(part, Policy(key));
              },
              [](Operation *, int64_t) {})))
        return signalPassFailure();
    }
  }
};

} // namespace
