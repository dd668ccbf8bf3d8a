//===- CommOpt.cpp - dist-comm-opt
//-----------------------------------------===//

#include "analysis/Layout.h"
#include "dialects/dist/PipelineLoops.h"
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
  if (reduce.getMembers())
    return false;
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
/// defined (final), and its wait, right before its first use.
void makeAsync(dist::AllReduceOp reduce) {
  Block *block = reduce->getBlock();
  OpBuilder b(reduce);
  Value input = reduce.getInput();
  if (auto arg = dyn_cast<BlockArgument>(input); arg && arg.getOwner() == block)
    b.setInsertionPointToStart(block);
  else if (Operation *def = input.getDefiningOp();
           def && def->getBlock() == block)
    b.setInsertionPointAfter(dist::finalAfter(def));
  else
    b.setInsertionPointToStart(block);
  auto start = dist::AllReduceStartOp::create(
      b, reduce.getLoc(), TypeRange{input.getType()}, ValueRange{input},
      reduce.getAxes());
  // Both halves run where the all-reduce ran (a pipeline stage's ranks).
  start->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
  Operation *firstUse = block->getTerminator();
  for (Operation *user : reduce->getUsers())
    if (Operation *anc = block->findAncestorOpInBlock(*user);
        anc && anc->isBeforeInBlock(firstUse))
      firstUse = anc;
  b.setInsertionPoint(firstUse);
  auto wait = dist::WaitOp::create(
      b, reduce.getLoc(), TypeRange{input.getType()}, start.getResults());
  wait->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
  reduce.getResult().replaceAllUsesWith(wait.getResult(0));
  reduce.erase();
}

/// Merges a block's starts over the same axes and ranks into buckets of at most
/// `cap` bytes: a bucket starts where its last member would and is waited
/// where its first use needs it, so a member joins only while the bucket's
/// start can still precede every member's wait. What the loss depends on
/// (in `evaluated`) and what it does not (the gradients) never share a
/// bucket: the evaluation runs the one without the other.
int64_t bucket(Block &block, int64_t cap,
               const DenseSet<Operation *> &evaluated) {
  int64_t merged = 0;
  SmallVector<dist::AllReduceStartOp> group;
  int64_t bytes = 0;
  auto waitOf = [](dist::AllReduceStartOp s) {
    return cast<dist::WaitOp>(*s.getResult(0).getUsers().begin());
  };
  auto flush = [&]() {
    if (group.size() > 1) {
      dist::AllReduceStartOp last = group.back();
      Operation *firstWait = waitOf(group.front());
      SmallVector<Value> inputs;
      SmallVector<Type> types;
      for (dist::AllReduceStartOp s : group) {
        inputs.push_back(s.getInputs()[0]);
        types.push_back(s.getInputs()[0].getType());
        if (waitOf(s)->isBeforeInBlock(firstWait))
          firstWait = waitOf(s);
      }
      OpBuilder b(last);
      auto start = dist::AllReduceStartOp::create(b, last.getLoc(), types,
                                                  inputs, last.getAxes());
      start->setDiscardableAttrs(last->getDiscardableAttrDictionary());
      b.setInsertionPoint(firstWait);
      auto wait =
          dist::WaitOp::create(b, last.getLoc(), types, start.getResults());
      wait->setDiscardableAttrs(last->getDiscardableAttrDictionary());
      for (auto [i, s] : llvm::enumerate(group)) {
        dist::WaitOp old = waitOf(s);
        old.getResult(0).replaceAllUsesWith(wait.getResult(i));
        old.erase();
        s.erase();
      }
      merged += int64_t(group.size()) - 1;
    }
    group.clear();
    bytes = 0;
  };
  // The starts, listed first: merging erases waits, which may be any op
  // after the one being looked at.
  SmallVector<dist::AllReduceStartOp> starts;
  for (Operation &op : block) {
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        merged += bucket(inner, cap, evaluated);
    // (Not a reduction deferred past its loop: its result is yielded.)
    if (auto start = dyn_cast<dist::AllReduceStartOp>(op);
        start && start.getInputs().size() == 1 &&
        isa<dist::WaitOp>(*start.getResult(0).getUsers().begin()))
      starts.push_back(start);
  }
  for (dist::AllReduceStartOp start : starts) {
    auto type = cast<RankedTensorType>(start.getInputs()[0].getType());
    int64_t size = loom::tensorBytes(type);
    // A bucket's members run on the same ranks (one pipeline stage's, or
    // all).
    bool fits = !group.empty() && group.front().getAxes() == start.getAxes() &&
                evaluated.contains(group.front()) ==
                    evaluated.contains(start) &&
                group.front()->getDiscardableAttrDictionary() ==
                    start->getDiscardableAttrDictionary() &&
                cast<RankedTensorType>(group.front().getInputs()[0].getType())
                        .getElementType() == type.getElementType() &&
                bytes + size <= cap &&
                llvm::all_of(group, [&](dist::AllReduceStartOp s) {
                  return start->isBeforeInBlock(waitOf(s));
                });
    if (!fits)
      flush();
    group.push_back(start);
    bytes += size;
  }
  flush();
  return merged;
}

/// Whether `op` runs on some ranks or in some pipeline stage only.
bool placed(Operation *op) {
  return dist::attrs(op).getOnAttrHelper().isAttrPresent(op) ||
         dist::stageOf(op).has_value();
}

/// Defers the waits of a loop's per-iteration reductions past the loop:
/// where a wait's results are only yielded as stacked slices, the body
/// yields the start's results instead and one wait after the loop, right
/// before the first op that reads any of those stacked results, completes
/// every iteration's reduction. A layer's gradients are then reduced while
/// the backward of the layers after it runs, not only during the rest of
/// its own iteration.
int64_t deferPastLoop(RepeatOp loop) {
  Block &body = loop.getBodyBlock();
  YieldOp yield = loop.getYield();
  unsigned firstStacked = loop.getCarries().size();
  int64_t deferred = 0;
  SmallVector<dist::WaitOp> waits(body.getOps<dist::WaitOp>());
  for (dist::WaitOp wait : waits) {
    auto start = dyn_cast_or_null<dist::AllReduceStartOp>(wait.getStart());
    if (!start || wait.isDeferred() || placed(start) || placed(wait))
      continue;
    // Each result read by the yield alone, as a stacked slice, once.
    SmallVector<unsigned> slots;
    for (Value r : wait.getResults()) {
      if (!r.hasOneUse() || *r.getUsers().begin() != yield.getOperation())
        break;
      unsigned k = r.getUses().begin()->getOperandNumber();
      if (k < firstStacked)
        break;
      slots.push_back(k);
    }
    if (slots.size() != wait.getNumResults())
      continue;
    SmallVector<Value> results;
    for (auto [r, k] : llvm::zip(wait.getResults(), slots)) {
      yield->setOperand(k, start->getResult(r.getResultNumber()));
      results.push_back(loop->getResult(k));
    }
    wait.erase();
    // The one wait after the loop, before the first op that reads one of
    // them (or the block's terminator).
    Block *outer = loop->getBlock();
    Operation *firstUse = outer->getTerminator();
    for (Value r : results)
      for (Operation *user : r.getUsers())
        if (Operation *anc = outer->findAncestorOpInBlock(*user);
            anc && anc->isBeforeInBlock(firstUse))
          firstUse = anc;
    OpBuilder b(firstUse);
    auto after = dist::WaitOp::create(b, start.getLoc(),
                                      ValueRange(results).getTypes(), results);
    for (auto [r, w] : llvm::zip(results, after.getResults()))
      r.replaceAllUsesExcept(w, after);
    ++deferred;
  }
  return deferred;
}

/// Moves each wait right after its start: the collectives block, the
/// baseline `bench/comm-overlap.sh` measures overlap against.
void waitImmediately(Operation *root) {
  root->walk([](dist::WaitOp wait) {
    if (!wait.isDeferred())
      wait->moveAfter(wait.getStart());
  });
}

struct DistCommOptPass : public loom::impl::DistCommOptBase<DistCommOptPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<dist::AllReduceOp> reduces;
    getOperation().walk([&](dist::AllReduceOp r) { reduces.push_back(r); });
    for (dist::AllReduceOp r : reduces)
      numMovedIntoRepeats += reduceInsideRepeat(r);
    reduces.clear();
    // (An exchange between two members is two transfers, not a
    // collective the runtime runs in the background.)
    getOperation().walk([&](dist::AllReduceOp r) {
      if (!r.getMax() && !r.getMembers())
        reduces.push_back(r);
    });
    for (dist::AllReduceOp r : reduces) {
      makeAsync(r);
      ++numAsync;
    }
    for (train::ModelOp model : getOperation().getOps<train::ModelOp>())
      numBucketed += bucket(model.getBody().front(), bucketBytes,
                            analysis::evaluationOps(model));
    // Outside a pipeline's schedule (whose loops run their iterations
    // interleaved by actions), the waits of what a loop only yields go
    // after it.
    if (overlap)
      getOperation().walk([&](train::ModelOp model) {
        // (A pipeline's stages run their ops under guards, which complete
        // what they start.)
        if (auto mesh = dist::attrs(model).getMeshAttrHelper().getAttr(model);
            mesh && mesh.getAxis(dist::AxisRole::Pipeline))
          return;
        SmallVector<RepeatOp> scheduled;
        model.walk([&](dist::ScheduleOp schedule) {
          llvm::append_range(scheduled, dist::scheduledLoops(schedule));
        });
        model.walk([&](RepeatOp loop) {
          if (!llvm::is_contained(scheduled, loop) && !placed(loop))
            numDeferred += deferPastLoop(loop);
        });
      });
    if (!overlap)
      waitImmediately(getOperation());
  }
};

} // namespace
