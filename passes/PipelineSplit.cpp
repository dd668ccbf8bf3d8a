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

/// The parameters `repeat` may store as one part per run of layers: its
/// stacked operands that are parameters nothing else reads.
DenseSet<Value> partsOf(RepeatOp repeat) {
  DenseSet<Value> parts;
  for (Value s : repeat.getStacked())
    if (s.getDefiningOp<ParamOp>() && s.hasOneUse())
      parts.insert(s);
  return parts;
}

/// Layers [first, first + n) of `s`: the part of a parameter in `parts`
/// (a new parameter of the same name, after `after`), else a slice.
Value layersOf(OpBuilder &b, Location loc, Value s, int64_t first, int64_t n,
               int64_t stage, const DenseSet<Value> &parts,
               Operation *&after) {
  auto type = cast<RankedTensorType>(s.getType());
  SmallVector<int64_t> offsets(type.getRank(), 0);
  SmallVector<int64_t> sizes(type.getShape());
  offsets[0] = first;
  sizes[0] = n;
  dist::DistDialect &attrs = dist::attrs(s.getContext());
  if (!parts.contains(s)) {
    auto slice = SliceOp::create(b, loc, s, offsets, sizes);
    attrs.getStageAttrHelper().setAttr(slice, b.getI64IntegerAttr(stage));
    return slice;
  }
  auto param = s.getDefiningOp<ParamOp>();
  OpBuilder pb(after);
  pb.setInsertionPointAfter(after);
  // Named after its layers, as Python slices them: w_fc[4:8].
  std::string name = (param.getName() + "[" + Twine(first) + ":" +
                      Twine(first + n) + "]")
                         .str();
  auto part = ParamOp::create(
      pb, param.getLoc(), RankedTensorType::get(sizes, type.getElementType()),
      pb.getStringAttr(name), param.getInitAttr(), param.getNoDecayAttr());
  part->setDiscardableAttrs(param->getDiscardableAttrDictionary());
  attrs.getStagesAttrHelper().setAttr(part, pb.getDenseI64ArrayAttr({stage}));
  attrs.getPartAttrHelper().setAttr(
      part, dist::PartAttr::get(s.getContext(), param.getNameAttr(),
                                type.getShape(), offsets));
  after = part;
  return part;
}

/// Splits `repeat` into one repeat per run of layers on one stage. Each
/// part takes its layers of the stacked operands (parameter parts or
/// slices), carries what the part before it yields, and numbers its
/// iterations from the layer it starts at (so a dropout keyed by the layer
/// index draws the same mask).
LogicalResult splitRepeat(RepeatOp repeat, ArrayRef<int64_t> stages) {
  if (repeat.getReverse() || repeat.getSavesCarries() ||
      !repeat.getStackedResults().empty())
    return repeat.emitOpError(
        "is cut across pipeline stages, which needs a forward repeat with no "
        "stacked results");
  for (Value s : repeat.getStacked())
    if (!isa<FloatType>(cast<RankedTensorType>(s.getType()).getElementType()))
      return repeat.emitOpError("stacks a non-float operand, which cannot "
                                "be cut across pipeline stages");
  OpBuilder b(repeat);
  Location loc = repeat.getLoc();
  SmallVector<Value> carries(repeat.getCarries());
  int64_t count = repeat.getCount();
  DenseSet<Value> parts = partsOf(repeat);
  // Where each parameter's next part goes: after the previous one.
  DenseMap<Value, Operation *> lastPart;
  for (Value s : parts)
    lastPart[s] = s.getDefiningOp();
  for (int64_t first = 0; first < count;) {
    int64_t last = first;
    while (last + 1 < count && stages[last + 1] == stages[first])
      ++last;
    int64_t n = last - first + 1;
    SmallVector<Value> stacked;
    for (Value s : repeat.getStacked())
      stacked.push_back(layersOf(b, loc, s, first, n, stages[first], parts,
                                 lastPart[s]));
    auto part = RepeatOp::create(b, loc, repeat.getCarryResults().getTypes(),
                                 TypeRange(), n, false, false, carries,
                                 stacked, repeat.getInvariants(),
                                 repeat.getResidualsAttr());
    dist::attrs(part).getStageAttrHelper().setAttr(
        part, b.getI64IntegerAttr(stages[first]));
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
  for (Value s : parts)
    s.getDefiningOp()->erase();
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
