//===- RepeatSplit.cpp - cutting a layer loop into runs of layers ---------===//

#include "passes/RepeatSplit.h"

#include "dialects/dist/DistDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

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
  IRRewriter rewriter(repeat->getContext());
  rewriter.setInsertionPoint(repeat);
  RepeatOp::Parts parts = repeat.getParts();
  parts.stacked = stacked;
  RepeatOp rebuilt = repeat.rebuild(rewriter, parts);
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

//===----------------------------------------------------------------------===//
// Splitting a loop around a set of its ops (the backward's I and W parts)
//===----------------------------------------------------------------------===//

/// What each part recomputes where it needs it rather than stack: index
/// arithmetic (a cut repeat's iteration offset), and slices and reshapes of
/// what both parts read whole (a stage's slice of the stacked weights).
bool loom::isRecomputable(Operation *op) {
  if (isa<arith::ConstantOp, arith::AddIOp>(op))
    return llvm::all_of(op->getResultTypes(),
                        [](Type t) { return isa<IndexType>(t); });
  if (!isa<SliceOp, ReshapeOp>(op))
    return false;
  auto repeat = dyn_cast<RepeatOp>(op->getParentOp());
  if (!repeat)
    return false;
  size_t carries = repeat.getCarries().size();
  return llvm::all_of(op->getOperands(), [&](Value v) {
    if (Operation *def = v.getDefiningOp())
      return def->getBlock() == op->getBlock() && isRecomputable(def);
    return cast<BlockArgument>(v).getArgNumber() > carries;
  });
}

/// Erases the ops of `block` (and of the repeats in it) whose results
/// nothing reads and that have no effect: a part's share of the
/// recomputation the other part needs, and the loss the backward
/// recomputes without reading.
void loom::eraseDeadOpsInLoops(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
    if (auto repeat = dyn_cast<RepeatOp>(op))
      eraseDeadOpsInLoops(repeat.getBodyBlock());
    if (isOpTriviallyDead(&op))
      op.erase();
  }
}


/// Splits `repeat` into a repeat running the ops `firstOps` (closed under
/// operands within the body) and one running the others after it.
FailureOr<RepeatHalves> loom::splitRepeat(RepeatOp repeat,
                             const DenseSet<Operation *> &firstOps) {
  if (repeat.getSavesCarries())
    return repeat.emitOpError("saves its carries, which a split backward "
                              "does not");
  Block &body = repeat.getBodyBlock();
  YieldOp yield = repeat.getYield();
  size_t numCarries = repeat.getCarries().size();
  size_t numStacked = repeat.getStacked().size();
  auto inFirst = [&](Operation *op) {
    return firstOps.contains(op) || isRecomputable(op);
  };

  // A carry stays with the part that makes its next value; a value is the
  // first part's when its op is, or it is a first carry, or an argument
  // both parts get (the index, the slices, the invariants).
  SmallVector<bool> carryFirst(numCarries);
  auto isCarryArg = [&](Value v) -> std::optional<size_t> {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body || arg.getArgNumber() == 0 ||
        arg.getArgNumber() > numCarries)
      return std::nullopt;
    return arg.getArgNumber() - 1;
  };
  for (auto [i, next] : llvm::enumerate(yield.getCarries())) {
    if (Operation *def = next.getDefiningOp())
      carryFirst[i] = firstOps.contains(def);
    else if (std::optional<size_t> k = isCarryArg(next); k && *k != i)
      return yield.emitOpError("yields another carry as carry ")
             << i << ", which a split backward does not support";
    else
      carryFirst[i] = true;
  }
  auto firstSide = [&](Value v) {
    if (Operation *def = v.getDefiningOp())
      return firstOps.contains(def);
    if (std::optional<size_t> k = isCarryArg(v))
      return bool(carryFirst[*k]);
    return true;
  };

  // The first part must not read the second's carries.
  for (Operation &op : body.without_terminator())
    if (firstOps.contains(&op))
      for (Value v : op.getOperands())
        if (std::optional<size_t> k = isCarryArg(v); k && !carryFirst[*k])
          return op.emitOpError("reads a carry that accumulates in the "
                                "weight part of a split backward");

  RepeatHalves split;
  DenseSet<Value> seen;
  auto cross = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (firstSide(v) && (def ? !isRecomputable(def) : bool(isCarryArg(v))) &&
        seen.insert(v).second)
      split.crossing.push_back(v);
  };
  for (Operation &op : body.without_terminator())
    if (!inFirst(&op))
      for (Value v : op.getOperands())
        cross(v);
  // A stacked result comes from the part that makes its slices.
  SmallVector<bool> stackedFirst;
  for (Value v : yield.getStacked())
    stackedFirst.push_back(firstSide(v));

  int64_t count = repeat.getCount();
  auto stackedType = [&](Type t) {
    auto tensor = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape{count};
    llvm::append_range(shape, tensor.getShape());
    return RankedTensorType::get(shape, tensor.getElementType());
  };
  OpBuilder b(repeat);
  Location loc = repeat.getLoc();
  auto bodyArgs = body.getArguments();
  ValueRange stackedArgs = bodyArgs.slice(1 + numCarries, numStacked);
  ValueRange invariantArgs = bodyArgs.drop_front(1 + numCarries + numStacked);

  // Builds one part: its carries (by `mine`), all slices and invariants
  // plus `extraStacked`, the ops `runs`, and the yields of `mine`.
  auto build = [&](bool firstPart, ValueRange extraStacked,
                   ArrayRef<Value> extraYields) -> FailureOr<RepeatOp> {
    SmallVector<Value> carries, stacked(repeat.getStacked());
    SmallVector<Type> carryTypes, stackedTypes;
    for (auto [i, init] : llvm::enumerate(repeat.getCarries()))
      if (carryFirst[i] == firstPart) {
        carries.push_back(init);
        carryTypes.push_back(init.getType());
      }
    llvm::append_range(stacked, extraStacked);
    for (auto [i, r] : llvm::enumerate(repeat.getStackedResults()))
      if (stackedFirst[i] == firstPart)
        stackedTypes.push_back(r.getType());
    for (Value v : extraYields)
      stackedTypes.push_back(stackedType(v.getType()));
    auto part = RepeatOp::create(b, loc, carryTypes, stackedTypes, count,
                                 repeat.getReverse(), false, carries, stacked,
                                 repeat.getInvariants(),
                                 repeat.getResidualsAttr());
    part->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
    Block *block = new Block();
    part.getBody().push_back(block);
    IRMapping map;
    map.map(bodyArgs[0], block->addArgument(bodyArgs[0].getType(), loc));
    for (size_t i = 0; i < numCarries; ++i)
      if (carryFirst[i] == firstPart)
        map.map(bodyArgs[1 + i],
                block->addArgument(bodyArgs[1 + i].getType(), loc));
    for (Value a : stackedArgs)
      map.map(a, block->addArgument(a.getType(), loc));
    if (!firstPart)
      for (Value v : split.crossing)
        map.map(v, block->addArgument(v.getType(), loc));
    for (Value a : invariantArgs)
      map.map(a, block->addArgument(a.getType(), loc));

    OpBuilder in = OpBuilder::atBlockEnd(block);
    for (Operation &op : body.without_terminator())
      if (isRecomputable(&op) || firstOps.contains(&op) == firstPart)
        in.clone(op, map);
    SmallVector<Value> nextCarries, slices;
    for (auto [i, next] : llvm::enumerate(yield.getCarries()))
      if (carryFirst[i] == firstPart)
        nextCarries.push_back(map.lookupOrNull(next));
    for (auto [i, v] : llvm::enumerate(yield.getStacked()))
      if (stackedFirst[i] == firstPart)
        slices.push_back(map.lookupOrNull(v));
    for (Value v : extraYields)
      slices.push_back(map.lookupOrNull(v));
    if (llvm::is_contained(nextCarries, Value()) ||
        llvm::is_contained(slices, Value()))
      return repeat.emitOpError("cannot be split into its backward's input "
                                "and weight parts");
    YieldOp::create(in, yield.getLoc(), nextCarries, slices);
    eraseDeadOpsInLoops(*block);
    return part;
  };

  FailureOr<RepeatOp> first = build(true, {}, split.crossing);
  if (failed(first))
    return failure();
  ValueRange crossed =
      first->getStackedResults().take_back(split.crossing.size());
  FailureOr<RepeatOp> second = build(false, crossed, {});
  if (failed(second)) {
    first->erase();
    return failure();
  }
  split.first = *first;
  split.second = *second;

  // The original's results, from the part that makes each.
  size_t c1 = 0, c2 = 0, s1 = 0, s2 = 0;
  for (auto [i, r] : llvm::enumerate(repeat.getCarryResults()))
    r.replaceAllUsesWith(carryFirst[i] ? first->getCarryResults()[c1++]
                                       : second->getCarryResults()[c2++]);
  for (auto [i, r] : llvm::enumerate(repeat.getStackedResults()))
    r.replaceAllUsesWith(stackedFirst[i] ? first->getStackedResults()[s1++]
                                         : second->getStackedResults()[s2++]);
  return split;
}
