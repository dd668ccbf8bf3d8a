//===- CommOpt.cpp - dist-comm-opt -----------------------------------------===//

#include "passes/Passes.h"

namespace loom {
#define GEN_PASS_DEF_DISTCOMMOPT
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// An all-reduce of a repeat's stacked result is the stack of the
/// all-reduces of its slices: reducing each slice in the iteration that
/// yields it starts a layer's gradient reduction while the backward pass
/// of the earlier layers still runs.
bool reduceInsideRepeat(dist::AllReduceOp reduce) {
  auto result = dyn_cast<OpResult>(reduce.getInput());
  auto repeat = result ? dyn_cast<RepeatOp>(result.getOwner()) : RepeatOp();
  if (!repeat || !result.hasOneUse())
    return false;
  unsigned first = repeat.getCarryResults().size();
  if (result.getResultNumber() < first)
    return false;
  YieldOp yield = repeat.getYield();
  OpOperand &slice =
      yield.getStackedMutable()[result.getResultNumber() - first];
  OpBuilder b(yield);
  auto inner = dist::AllReduceOp::create(b, reduce.getLoc(), slice.get(),
                                         reduce.getAxes(), reduce.getMax());
  slice.set(inner);
  reduce.getResult().replaceAllUsesWith(result);
  reduce.erase();
  return true;
}

/// Splits an all-reduce into its start, right after its operand is
/// defined, and its wait, right before its first use.
void makeAsync(dist::AllReduceOp reduce) {
  Block *block = reduce->getBlock();
  OpBuilder b(reduce);
  Value input = reduce.getInput();
  if (auto arg = dyn_cast<BlockArgument>(input); arg && arg.getOwner() == block)
    b.setInsertionPointToStart(block);
  else if (Operation *def = input.getDefiningOp();
           def && def->getBlock() == block)
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(block);
  auto start = dist::AllReduceStartOp::create(b, reduce.getLoc(), input,
                                              reduce.getAxes());
  Operation *firstUse = block->getTerminator();
  for (Operation *user : reduce->getUsers())
    if (Operation *anc = block->findAncestorOpInBlock(*user);
        anc && anc->isBeforeInBlock(firstUse))
      firstUse = anc;
  b.setInsertionPoint(firstUse);
  auto wait = dist::WaitOp::create(b, reduce.getLoc(), start.getResult());
  reduce.getResult().replaceAllUsesWith(wait.getResult());
  reduce.erase();
}

struct DistCommOptPass
    : public loom::impl::DistCommOptBase<DistCommOptPass> {
  void runOnOperation() override {
    SmallVector<dist::AllReduceOp> reduces;
    getOperation().walk([&](dist::AllReduceOp r) { reduces.push_back(r); });
    for (dist::AllReduceOp r : reduces)
      numMovedIntoRepeats += reduceInsideRepeat(r);
    reduces.clear();
    getOperation().walk([&](dist::AllReduceOp r) {
      if (!r.getMax())
        reduces.push_back(r);
    });
    for (dist::AllReduceOp r : reduces) {
      makeAsync(r);
      ++numAsync;
    }
  }
};

} // namespace
