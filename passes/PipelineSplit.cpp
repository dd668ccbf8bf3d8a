//===- PipelineSplit.cpp - dist-pipeline-split -----------------------------===//
//
// Cuts a train.repeat whose layers dist-pipeline-partition put on several
// stages into one repeat per run of layers on one stage.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

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

/// Splits `repeat` into one repeat per run of layers on one stage. Each
/// part takes its layers' slices of the stacked operands, carries what the
/// part before it yields, and numbers its iterations from the layer it
/// starts at (so a dropout keyed by the layer index draws the same mask).
LogicalResult splitRepeat(RepeatOp repeat, ArrayRef<int64_t> stages) {
  if (repeat.getReverse() || repeat.getSavesCarries() ||
      !repeat.getStackedResults().empty())
    return repeat.emitOpError(
        "is cut across pipeline stages, which needs a forward repeat with no "
        "stacked results");
  OpBuilder b(repeat);
  Location loc = repeat.getLoc();
  SmallVector<Value> carries(repeat.getCarries());
  int64_t count = repeat.getCount();
  for (int64_t first = 0; first < count;) {
    int64_t last = first;
    while (last + 1 < count && stages[last + 1] == stages[first])
      ++last;
    int64_t n = last - first + 1;
    SmallVector<Value> stacked;
    for (Value s : repeat.getStacked()) {
      auto type = cast<RankedTensorType>(s.getType());
      if (!isa<FloatType>(type.getElementType()))
        return repeat.emitOpError("stacks a non-float operand, which cannot "
                                  "be cut across pipeline stages");
      SmallVector<int64_t> offsets(type.getRank(), 0);
      SmallVector<int64_t> sizes(type.getShape());
      offsets[0] = first;
      sizes[0] = n;
      stacked.push_back(SliceOp::create(b, loc, s, offsets, sizes));
    }
    auto part = RepeatOp::create(b, loc, repeat.getCarryResults().getTypes(),
                                 TypeRange(), n, false, false, carries,
                                 stacked, repeat.getInvariants());
    auto stage = dist::attrs(part).getStageAttrHelper();
    stage.setAttr(part, b.getI64IntegerAttr(stages[first]));
    for (Value s : stacked)
      stage.setAttr(s.getDefiningOp(), b.getI64IntegerAttr(stages[first]));
    IRMapping map;
    repeat.getBody().cloneInto(&part.getBody(), map);
    Block &body = part.getBodyBlock();
    if (first > 0 && !body.getArgument(0).use_empty()) {
      OpBuilder inner = OpBuilder::atBlockBegin(&body);
      Value offset = arith::ConstantIndexOp::create(inner, loc, first);
      Value layer =
          arith::AddIOp::create(inner, loc, body.getArgument(0), offset);
      body.getArgument(0).replaceAllUsesExcept(layer,
                                               layer.getDefiningOp());
    }
    carries.assign(part.getCarryResults().begin(),
                   part.getCarryResults().end());
    first = last + 1;
  }
  repeat.replaceAllUsesWith(carries);
  repeat.erase();
  return success();
}

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
      if (failed(splitRepeat(repeat, s)))
        return signalPassFailure();
    }
  }
};

} // namespace
