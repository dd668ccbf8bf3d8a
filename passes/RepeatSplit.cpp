//===- RepeatSplit.cpp - cutting a layer loop into runs of layers ---------===//

#include "passes/RepeatSplit.h"

#include "dialects/dist/DistDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

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
/// (a new parameter after `after`), else a slice.
Operation *layersOf(OpBuilder &b, Location loc, Value s, int64_t first,
                    int64_t n, const DenseSet<Value> &parts,
                    Operation *&after) {
  auto type = cast<RankedTensorType>(s.getType());
  SmallVector<int64_t> offsets(type.getRank(), 0);
  SmallVector<int64_t> sizes(type.getShape());
  offsets[0] = first;
  sizes[0] = n;
  if (!parts.contains(s))
    return SliceOp::create(b, loc, s, offsets, sizes);
  OpBuilder pb(after);
  pb.setInsertionPointAfter(after);
  after = makeParamPart(pb, s.getDefiningOp<ParamOp>(), offsets, sizes);
  return after;
}

} // namespace

ParamOp loom::makeParamPart(OpBuilder &b, ParamOp param,
                            ArrayRef<int64_t> offsets,
                            ArrayRef<int64_t> sizes) {
  auto type = cast<RankedTensorType>(param.getType());
  dist::DistDialect &attrs = dist::attrs(param.getContext());
  // A part of a part is a part of the whole.
  StringAttr of = param.getNameAttr();
  SmallVector<int64_t> whole(type.getShape()), at(offsets);
  if (auto outer = attrs.getPartAttrHelper().getAttr(param)) {
    of = outer.getOf();
    whole.assign(outer.getWhole().begin(), outer.getWhole().end());
    for (auto [o, base] : llvm::zip(at, outer.getOffsets()))
      o += base;
  }
  auto part = ParamOp::create(
      b, param.getLoc(), RankedTensorType::get(sizes, type.getElementType()),
      b.getStringAttr(dist::partName(of.getValue(), whole, at, sizes)),
      param.getInitAttr(), param.getNoDecayAttr());
  part->setDiscardableAttrs(param->getDiscardableAttrDictionary());
  attrs.getPartAttrHelper().setAttr(
      part, dist::PartAttr::get(param.getContext(), of, whole, at));
  return part;
}

SmallVector<BlockArgument> loom::addStackedSlices(RepeatOp repeat,
                                                  BlockArgument slice,
                                                  ArrayRef<Value> stacks) {
  Block &body = repeat.getBodyBlock();
  SmallVector<BlockArgument> args;
  for (auto [k, stack] : llvm::enumerate(stacks)) {
    auto type = cast<RankedTensorType>(stack.getType());
    args.push_back(
        body.insertArgument(slice.getArgNumber() + 1 + k,
                            RankedTensorType::get(type.getShape().drop_front(),
                                                  type.getElementType()),
                            slice.getLoc()));
  }
  return args;
}

RepeatOp loom::replaceStacked(
    RepeatOp repeat,
    ArrayRef<std::pair<BlockArgument, SmallVector<Value>>> replacements) {
  Block &body = repeat.getBodyBlock();
  unsigned first = 1 + repeat.getCarries().size();
  // Each replaced slice is followed by its replacements' slices.
  SmallVector<Value> stacked;
  unsigned position = first;
  for (Value s : repeat.getStacked()) {
    BlockArgument arg = body.getArgument(position);
    const auto *it = llvm::find_if(
        replacements, [&](const auto &r) { return r.first == arg; });
    if (it == replacements.end()) {
      stacked.push_back(s);
      ++position;
      continue;
    }
    llvm::append_range(stacked, it->second);
    position += 1 + it->second.size();
  }
  for (const auto &[arg, stacks] : replacements) {
    assert(arg.use_empty() && "a replaced slice is still read");
    body.eraseArgument(arg.getArgNumber());
  }
  OpBuilder b(repeat);
  auto rebuilt = RepeatOp::create(
      b, repeat.getLoc(), repeat.getCarryResults().getTypes(),
      repeat.getStackedResults().getTypes(), repeat.getCount(),
      repeat.getReverse(), repeat.getSavesCarries(), repeat.getCarries(),
      stacked, repeat.getInvariants(), repeat.getResidualsAttr());
  rebuilt->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
  rebuilt.getBody().getBlocks().splice(rebuilt.getBody().end(),
                                       repeat.getBody().getBlocks());
  repeat.replaceAllUsesWith(rebuilt.getResults());
  repeat.erase();
  return rebuilt;
}

LogicalResult loom::splitRepeatIntoRuns(
    RepeatOp repeat, ArrayRef<int64_t> keys,
    function_ref<void(RepeatOp, int64_t, int64_t)> onPart,
    function_ref<void(Operation *, int64_t)> onSlice) {
  if (repeat.getReverse() || repeat.getSavesCarries() ||
      !repeat.getStackedResults().empty())
    return repeat.emitOpError(
        "is cut into runs of layers, which needs a forward repeat with no "
        "stacked results");
  for (Value s : repeat.getStacked())
    if (!isa<FloatType>(cast<RankedTensorType>(s.getType()).getElementType()))
      return repeat.emitOpError("stacks a non-float operand, which cannot "
                                "be cut into runs of layers");
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
    while (last + 1 < count && keys[last + 1] == keys[first])
      ++last;
    int64_t n = last - first + 1;
    SmallVector<Value> stacked;
    for (Value s : repeat.getStacked()) {
      Operation *layers = layersOf(b, loc, s, first, n, parts, lastPart[s]);
      onSlice(layers, keys[first]);
      stacked.push_back(layers->getResult(0));
    }
    auto part = RepeatOp::create(b, loc, repeat.getCarryResults().getTypes(),
                                 TypeRange(), n, false, false, carries,
                                 stacked, repeat.getInvariants(),
                                 repeat.getResidualsAttr());
    part->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
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
    onPart(part, keys[first], first);
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

