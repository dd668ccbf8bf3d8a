//===- PipelineSplitBackward.cpp - dist-pipeline-split-backward -----------===//
//
// Zero-bubble schedules (ZB-H1, after Qi et al. 2024) run a stage's
// backward as two actions: I, the gradient of the stage's input, which the
// previous stage waits for, and W, the gradients of its weights, which
// nothing downstream waits for and which the schedule defers into the
// bubble. This pass splits the pipeline's backward micro-batch loop into
// those two parts. A part is a `train.repeat` of its own; what W reads of
// I's values is stacked by I per iteration (per micro-batch, and inside a
// stage per layer), which is the activation memory the deferral costs.
//
// A repeat splits around a set of its body's ops closed under operands
// (the first part): carries whose next value the first part makes stay
// with it, the others go to the second part, and every value of the
// first part the second reads becomes a stacked result of the first and a
// stacked operand of the second. Index arithmetic and slices of what both
// parts read whole (a stage's weights) are recomputed where needed
// instead, and what the backward recomputes without reading is erased
// first, so that it is not kept.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/dist/PipelineLoops.h"
#include "dialects/train/Adjoint.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINESPLITBACKWARD
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;
using loom::dist::backwardOf;
using loom::dist::weightPartOf;

namespace {

using dist::placeOnStage;
using dist::stageOf;

/// The ops of `body` that `roots` need, roots included.
DenseSet<Operation *> closure(Block &body, ArrayRef<Operation *> roots) {
  DenseSet<Operation *> set;
  SmallVector<Operation *> work(roots);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!set.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
        work.push_back(def);
  }
  return set;
}

/// What each part recomputes where it needs it rather than stack: index
/// arithmetic (a cut repeat's iteration offset), and slices and reshapes of
/// what both parts read whole (a stage's slice of the stacked weights).
bool isRecomputable(Operation *op) {
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
void eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
    if (auto repeat = dyn_cast<RepeatOp>(op))
      eraseDeadOps(repeat.getBodyBlock());
    if (isOpTriviallyDead(&op))
      op.erase();
  }
}

struct Split {
  RepeatOp first, second;
  /// The first part's values the second reads, in the original body.
  SmallVector<Value> crossing;
};

/// Splits `repeat` into a repeat running the ops `firstOps` (closed under
/// operands within the body) and one running the others after it.
FailureOr<Split> splitRepeat(RepeatOp repeat,
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

  Split split;
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
    eraseDeadOps(*block);
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

/// The stage a value of the pipeline's backward loop belongs to: its op's
/// `dist.stage`, or for an op of no stage the one stage its operands have
/// (none when they have none; an error when they have several).
FailureOr<std::optional<int64_t>>
derivedStage(Value v, DenseMap<Value, std::optional<int64_t>> &memo) {
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  std::optional<int64_t> stage;
  Operation *def = v.getDefiningOp();
  if (def && stageOf(def)) {
    stage = stageOf(def);
  } else if (def) {
    for (Value operand : def->getOperands()) {
      FailureOr<std::optional<int64_t>> s = derivedStage(operand, memo);
      if (failed(s))
        return failure();
      if (*s && stage && **s != *stage) {
        def->emitOpError("combines values of pipeline stages ")
            << *stage << " and " << **s
            << ", which a split backward cannot hand from its input part to "
               "its weight part";
        return failure();
      }
      if (*s)
        stage = *s;
    }
  }
  return memo[v] = stage;
}

struct DistPipelineSplitBackwardPass
    : public loom::impl::DistPipelineSplitBackwardBase<
          DistPipelineSplitBackwardPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(splitModel(model)))
        return signalPassFailure();
  }

  LogicalResult splitModel(ModelOp model) {
    auto pipeline = dist::attrs(model).getPipelineAttrHelper();
    dist::PipelineAttr record = pipeline.getAttr(model);
    if (!record)
      return model.emitOpError("has no pipeline (")
             << pipeline.getNameStr()
             << ") whose backward dist-pipeline-split-backward could split";
    int64_t ranks = record.getRanks();
    SmallVector<RepeatOp> backwards;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward);
          backward && !stageOf(forward) && !weightPartOf(backward))
        backwards.push_back(backward);
    if (backwards.empty())
      return model.emitOpError("has no micro-batch loop whose backward "
                               "could be split (a split backward needs "
                               "--micro-batches above 1)");
    for (RepeatOp backward : backwards)
      if (failed(splitMicroBatchBackward(backward, ranks)))
        return failure();
    return success();
  }

  /// Splits each stage's layers' backward (a reverse repeat on a stage)
  /// into the chain of input gradients and the weight gradients.
  LogicalResult splitLayers(Block &body) {
    SmallVector<RepeatOp> layers;
    for (RepeatOp r : body.getOps<RepeatOp>())
      if (stageOf(r) && r.getReverse() && !r.getSavesCarries() &&
          !r.getCarries().empty() && !r.getStackedResults().empty())
        layers.push_back(r);
    for (RepeatOp r : layers) {
      SmallVector<Operation *> roots;
      for (Value next : r.getYield().getCarries())
        if (Operation *def = next.getDefiningOp())
          roots.push_back(def);
      DenseSet<Operation *> input = closure(r.getBodyBlock(), roots);
      if (roots.empty() ||
          input.size() == r.getBodyBlock().getOperations().size() - 1)
        continue;
      FailureOr<Split> split = splitRepeat(r, input);
      if (failed(split))
        return failure();
      r.erase();
    }
    return success();
  }

  LogicalResult splitMicroBatchBackward(RepeatOp backward, int64_t ranks) {
    Block &body = backward.getBodyBlock();
    // What the backward recomputes and never reads (the loss, a layer's
    // outputs) would otherwise be kept for the weight part.
    eraseDeadOps(body);
    if (failed(splitLayers(body)))
      return failure();
    // The input part: what the stages' transfers need (the gradients a
    // stage sends back and receives).
    SmallVector<Operation *> roots;
    for (Operation &op : body)
      if (isa<dist::SendOp, dist::RecvOp>(op))
        roots.push_back(&op);
    if (roots.empty())
      return backward.emitOpError("sends nothing between pipeline stages; "
                                  "its backward has no input part to split "
                                  "off");
    DenseSet<Operation *> input = closure(body, roots);

    // A value the weight part reads is kept per micro-batch by its stage's
    // input action: an op of no stage that makes one takes the stage its
    // operands have (its value is zero off that stage anyway).
    Builder attrs(backward.getContext());
    DenseMap<Value, std::optional<int64_t>> memo;
    for (Operation &op : body.without_terminator()) {
      if (input.contains(&op) || isRecomputable(&op))
        continue;
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || !input.contains(def) || stageOf(def))
          continue;
        FailureOr<std::optional<int64_t>> stage = derivedStage(v, memo);
        if (failed(stage))
          return failure();
        if (!*stage)
          continue;
        placeOnStage(def, **stage, ranks);
      }
    }

    FailureOr<Split> split = splitRepeat(backward, input);
    if (failed(split))
      return failure();
    auto part = dist::attrs(backward).getBackwardAttrHelper();
    part.setAttr(split->first, attrs.getStringAttr("input"));
    part.setAttr(split->second, attrs.getStringAttr("weight"));
    // (The crossing values' stages, read before the original goes.)
    SmallVector<std::optional<int64_t>> crossingStages;
    for (Value v : split->crossing)
      crossingStages.push_back(v.getDefiningOp() ? stageOf(v.getDefiningOp())
                                                 : std::nullopt);
    backward.erase();

    // In the weight part, an op of no stage (a sum over stages) reads a
    // stage's kept value through a copy on that stage, which other stages'
    // actions fill with zeros.
    Block &weight = split->second.getBodyBlock();
    size_t first = 1 + split->second.getCarries().size() +
                   split->second.getStacked().size() - split->crossing.size();
    OpBuilder b = OpBuilder::atBlockBegin(&weight);
    for (auto [k, stage] : llvm::enumerate(crossingStages)) {
      BlockArgument arg = weight.getArgument(first + k);
      if (!stage || llvm::all_of(arg.getUsers(), [](Operation *user) {
            return stageOf(user).has_value();
          }))
        continue;
      auto copy = ScaleOp::create(b, arg.getLoc(), arg.getType(), arg,
                                  b.getF64FloatAttr(1.0));
      placeOnStage(copy, *stage, ranks);
      arg.replaceUsesWithIf(copy.getResult(), [&](OpOperand &use) {
        return use.getOwner() != copy && !stageOf(use.getOwner());
      });
    }
    return success();
  }
};

} // namespace
