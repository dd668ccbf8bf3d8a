//===- Prefetch.cpp - dist-prefetch ---------------------------------------===//
//
// A layer loop that gathers its layer's parameter blocks (ZeRO-3) gathers
// them one iteration ahead: iteration i starts the gather of layer i+1
// (i-1 in a reverse loop) before its own compute and waits for it at its
// end, and the gathered layer reaches the next iteration as a carry.
//
//===----------------------------------------------------------------------===//

#include "dialects/dist/PipelineLoops.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace loom {
#define GEN_PASS_DEF_DISTPREFETCH
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// The gathers in `repeat`'s body of a slice of one of its stacked
/// operands: the parameters of the iteration's layer.
SmallVector<dist::AllGatherOp> sliceGathers(RepeatOp repeat) {
  Block &body = repeat.getBodyBlock();
  unsigned first = 1 + repeat.getCarries().size();
  unsigned last = first + repeat.getStacked().size();
  SmallVector<dist::AllGatherOp> gathers;
  for (auto gather : body.getOps<dist::AllGatherOp>()) {
    auto arg = dyn_cast<BlockArgument>(gather.getInput());
    if (arg && arg.getOwner() == &body && arg.getArgNumber() >= first &&
        arg.getArgNumber() < last)
      gathers.push_back(gather);
  }
  return gathers;
}

/// `repeat` with its slice gathers issued one iteration ahead: each
/// becomes a carry (the gathered layer), started before the loop for the
/// first iteration's layer and, in each iteration, for the next one, which
/// the stacked operand, now also an invariant, provides.
void prefetch(RepeatOp repeat, MutableArrayRef<dist::AllGatherOp> gathers) {
  Block &body = repeat.getBodyBlock();
  Location loc = repeat.getLoc();
  unsigned numCarries = repeat.getCarries().size();
  unsigned firstStacked = 1 + numCarries;
  int64_t count = repeat.getCount();
  bool reverse = repeat.getReverse();

  // The first iteration's layers, gathered before the loop (on the ranks
  // and in the stage the loop runs on).
  OpBuilder b(repeat);
  auto place = [&](Operation *op) {
    dist::copyStage(repeat, op);
    auto on = dist::attrs(op).getOnAttrHelper();
    if (auto ranks = on.getAttr(repeat))
      on.setAttr(op, ranks);
  };
  Value firstIndex =
      arith::ConstantIndexOp::create(b, loc, reverse ? count - 1 : 0);
  SmallVector<Value> initial, wholes;
  for (dist::AllGatherOp gather : gathers) {
    auto slice = cast<BlockArgument>(gather.getInput());
    Value whole = repeat.getStacked()[slice.getArgNumber() - firstStacked];
    auto start = dist::AllGatherStartOp::create(
        b, gather.getLoc(), gather.getType(), whole, firstIndex,
        gather.getAxes(), gather.getDim());
    auto wait =
        dist::WaitOp::create(b, gather.getLoc(), TypeRange{gather.getType()},
                             ValueRange{start.getResult()});
    place(start);
    place(wait);
    initial.push_back(wait.getResult(0));
    wholes.push_back(whole);
  }

  // In the body: the layer as a carry, the next one started first and
  // waited last.
  SmallVector<BlockArgument> carried, whole;
  for (auto [k, gather] : llvm::enumerate(gathers))
    carried.push_back(body.insertArgument(firstStacked + k, gather.getType(),
                                          gather.getLoc()));
  for (Value w : wholes)
    whole.push_back(body.addArgument(w.getType(), loc));
  OpBuilder in = OpBuilder::atBlockBegin(&body);
  Value step = arith::ConstantIndexOp::create(in, loc, reverse ? -1 : 1);
  Value next = arith::AddIOp::create(in, loc, body.getArgument(0), step);
  SmallVector<dist::AllGatherStartOp> starts;
  for (auto [k, gather] : llvm::enumerate(gathers)) {
    starts.push_back(dist::AllGatherStartOp::create(
        in, gather.getLoc(), gather.getType(), whole[k], next, gather.getAxes(),
        gather.getDim()));
    dist::copyStage(gather, starts.back());
  }
  // (The gathers are erased once nothing is inserted before them.)
  YieldOp yield = repeat.getYield();
  SmallVector<Value> nextLayers;
  for (auto [gather, start] : llvm::zip(gathers, starts)) {
    OpBuilder atEnd(yield);
    auto wait = dist::WaitOp::create(atEnd, gather.getLoc(),
                                     TypeRange{gather.getType()},
                                     ValueRange{start.getResult()});
    dist::copyStage(gather, wait);
    nextLayers.push_back(wait.getResult(0));
  }
  for (auto [k, gather] : llvm::enumerate(gathers))
    gather.getResult().replaceAllUsesWith(carried[k]);

  // The yield: the next layers as carries and, where the loop saves its
  // carries for the backward, as saved slices (which nothing reads).
  SmallVector<Value> carries(yield.getCarries()), slices(yield.getStacked());
  llvm::append_range(carries, nextLayers);
  if (repeat.getSavesCarries())
    llvm::append_range(slices, carried);
  OpBuilder atYield(yield);
  YieldOp::create(atYield, yield.getLoc(), carries, slices);
  yield.erase();

  for (dist::AllGatherOp gather : gathers)
    gather.erase();
  IRRewriter rewriter(repeat->getContext());
  rewriter.setInsertionPoint(repeat);
  RepeatOp::Parts parts = repeat.getParts();
  llvm::append_range(parts.carries, initial);
  llvm::append_range(parts.invariants, wholes);
  RepeatOp rebuilt = repeat.rebuild(rewriter, parts);
  for (unsigned i = 0; i < numCarries; ++i)
    repeat.getCarryResults()[i].replaceAllUsesWith(
        rebuilt.getCarryResults()[i]);
  for (auto [from, to] :
       llvm::zip(repeat.getStackedResults(), rebuilt.getStackedResults()))
    from.replaceAllUsesWith(to);
  repeat.erase();
}

struct DistPrefetchPass
    : public loom::impl::DistPrefetchBase<DistPrefetchPass> {
  void runOnOperation() override {
    getOperation().walk([&](ModelOp model) {
      // A pipeline schedule's micro-batch loops run their iterations
      // interleaved, not in order: nothing is carried ahead in them.
      SmallVector<RepeatOp> scheduled;
      model.walk([&](dist::ScheduleOp schedule) {
        llvm::append_range(scheduled, dist::scheduledLoops(schedule));
      });
      SmallVector<std::pair<RepeatOp, SmallVector<dist::AllGatherOp>>> work;
      model.walk([&](RepeatOp repeat) {
        if (llvm::is_contained(scheduled, repeat) || repeat.getCount() < 2)
          return;
        SmallVector<dist::AllGatherOp> gathers = sliceGathers(repeat);
        if (!gathers.empty())
          work.push_back({repeat, std::move(gathers)});
      });
      for (auto &[repeat, gathers] : work)
        prefetch(repeat, gathers);
    });
  }
};

} // namespace
