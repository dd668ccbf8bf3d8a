//===- Adjoint.cpp - reverse-mode differentiation of op sequences ---------===//

#include "dialects/train/Adjoint.h"

#include "llvm/ADT/ScopeExit.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace loom::train;

static bool isDifferentiable(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

DenseSet<Value> loom::train::computeActive(Block &block, ValueRange sources) {
  DenseSet<Value> active;
  for (Value s : sources)
    if (isDifferentiable(s))
      active.insert(s);
  for (Operation &op : block) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return active.contains(v); }))
      continue;
    for (Value r : op.getResults())
      if (isDifferentiable(r))
        active.insert(r);
  }
  return active;
}

DenseSet<Value> loom::train::prepareForBackward(RewriterBase &rewriter,
                                                Block &block,
                                                ValueRange sources) {
  DenseSet<Value> active = computeActive(block, sources);
  SmallVector<BackwardOpInterface> candidates;
  for (Operation &op : block)
    if (auto rule = dyn_cast<BackwardOpInterface>(op))
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return active.contains(v); }))
        candidates.push_back(rule);
  if (candidates.empty())
    return active;
  for (BackwardOpInterface rule : candidates) {
    rewriter.setInsertionPoint(rule);
    rule.prepareForBackward(rewriter);
  }
  return computeActive(block, sources);
}

Value loom::train::zerosLike(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return arith::ConstantOp::create(
      b, loc, tensor,
      DenseElementsAttr::get(tensor,
                             b.getZeroAttr(tensor.getElementType())));
}

Value loom::train::accumulate(OpBuilder &b, Location loc, Value a, Value v) {
  if (!a)
    return v;
  return AddOp::create(b, loc, a, v);
}

namespace {
/// Shows the dialect's adjoint hooks (TrainDialect::addAdjointHook) each op
/// a backward rule builds into `block`, with the forward op it
/// differentiates: how another dialect's annotations (a pipeline stage)
/// reach the backward without this dialect knowing them.
struct HookCaller : public OpBuilder::Listener {
  Block *block = nullptr;
  Operation *forward = nullptr;
  ArrayRef<TrainDialect::AdjointHook> hooks;
  OpBuilder::Listener *previous = nullptr;
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    if (forward && op->getBlock() == block)
      for (const TrainDialect::AdjointHook &hook : hooks)
        hook(forward, op);
    if (previous)
      previous->notifyOperationInserted(op, {});
  }
};
} // namespace

LogicalResult
loom::train::backpropagate(OpBuilder &b, Block &block,
                           const DenseSet<Value> &active,
                           DenseMap<Value, Value> &adjoints) {
  HookCaller stamper;
  stamper.block = &block;
  if (auto *train = block.getParentOp()
                        ->getContext()
                        ->getLoadedDialect<TrainDialect>())
    stamper.hooks = train->getAdjointHooks();
  stamper.previous = b.getListener();
  b.setListener(&stamper);
  llvm::scope_exit restore([&] { b.setListener(stamper.previous); });
  // The adjoint is built into the same block: walk a snapshot of the forward.
  SmallVector<Operation *> forward = llvm::to_vector(llvm::map_range(
      block.without_terminator(), [](Operation &op) { return &op; }));
  for (Operation *opPtr : llvm::reverse(forward)) {
    Operation &op = *opPtr;
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op.getResults()) {
      resultGrads.push_back(adjoints.lookup(r));
      any |= bool(resultGrads.back());
    }
    if (!any)
      continue;
    SmallVector<bool> needed;
    for (Value v : op.getOperands())
      needed.push_back(active.contains(v));
    if (llvm::none_of(needed, [](bool n) { return n; }))
      continue;
    stamper.forward = &op;
    auto rule = dyn_cast<BackwardOpInterface>(op);
    if (!rule)
      return op.emitOpError("has no backward rule, but a gradient flows "
                            "through it to a parameter");
    SmallVector<Value> operandGrads;
    if (failed(rule.buildBackward(b, resultGrads, needed, operandGrads)))
      return failure();
    if (operandGrads.size() != op.getNumOperands())
      return op.emitOpError("backward rule returned ")
             << operandGrads.size() << " gradients for " << op.getNumOperands()
             << " operands";
    // Summing contributions is linear: it runs on every rank, where each
    // stage's part is zero off its own rank.
    stamper.forward = nullptr;
    for (auto [operand, grad, need] :
         llvm::zip(op.getOperands(), operandGrads, needed)) {
      if (!need || !grad)
        continue;
      if (grad.getType() != operand.getType())
        return op.emitOpError("backward rule gave a gradient of type ")
               << grad.getType() << " for an operand of type "
               << operand.getType();
      adjoints[operand] = accumulate(b, op.getLoc(), adjoints.lookup(operand),
                                     grad);
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// train.repeat
//===----------------------------------------------------------------------===//

/// Erases the ops of `block` whose results nothing reads and that have no
/// effect (a loop counts as one when its body has none), last first.
void loom::train::eraseDeadOps(Block &block) {
  auto effectFree = [](Operation *op) {
    return op->walk([&](Operation *nested) {
             if (nested == op && isa<RepeatOp>(op))
               return WalkResult::advance();
             if (nested->hasTrait<OpTrait::IsTerminator>() ||
                 isMemoryEffectFree(nested))
               return WalkResult::advance();
             return WalkResult::interrupt();
           }).wasInterrupted() == false;
  };
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() &&
        effectFree(&op))
      op.erase();
}

/// Whether the backward recomputes `op` rather than read it saved: it
/// computes nothing (a constant) or only views its operand (a reshape).
static bool recomputedFree(Operation &op) {
  return op.getNumOperands() == 0 || isa<ReshapeOp>(op);
}

/// Whether rematerialization chose to recompute `op` (`train.recompute`,
/// dist-remat's selective policy): its results are not saved.
static bool recomputedByChoice(Operation &op) {
  auto *dialect = op.getContext()->getLoadedDialect<TrainDialect>();
  return dialect && dialect->getRecomputeAttrHelper().isAttrPresent(&op);
}

Operation *RepeatOp::prepareForBackward(RewriterBase &rewriter) {
  if (getSavesCarries())
    return getOperation();
  Block &body = getBodyBlock();
  // A repeat that keeps residuals prepares its own body (the loops in it
  // save their carries there, not in a recomputation) and offers the
  // backward every value its ops compute; train-autodiff drops those the
  // backward does not read (pruneResiduals).
  SmallVector<Value> residuals;
  if (keepsResiduals()) {
    loom::train::prepareForBackward(rewriter, body,
                                    body.getArguments().drop_front());
    for (Operation &op : body.without_terminator())
      if (!recomputedFree(op) && !recomputedByChoice(op))
        for (Value r : op.getResults())
          if (isa<RankedTensorType>(r.getType()))
            residuals.push_back(r);
  }
  // Re-create the op with one more stacked result per residual and per
  // carry: the carry as it entered each iteration, which the backward pass
  // recomputes from.
  rewriter.setInsertionPoint(getOperation());
  SmallVector<Value> slices(getYield().getStacked());
  llvm::append_range(slices, residuals);
  llvm::append_range(slices, body.getArguments().slice(1, getCarries().size()));
  Parts parts = getParts();
  parts.savesCarries = true;
  parts.residuals = keepsResiduals()
                        ? rewriter.getI64IntegerAttr(residuals.size())
                        : IntegerAttr();
  RepeatOp saving = rebuild(rewriter, parts, ValueRange(slices));
  SmallVector<Value> replacements(saving.getCarryResults());
  llvm::append_range(replacements, saving.getStackedResults().take_front(
                                       getStackedResults().size()));
  rewriter.replaceOp(getOperation(), replacements);
  return saving;
}

LogicalResult RepeatOp::buildBackward(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (!getSavesCarries())
    return emitOpError("must save its carries (prepareForBackward) before "
                       "its backward pass is built");
  Location loc = getLoc();
  int64_t count = getCount();
  size_t numCarries = getCarries().size(), numStacked = getStacked().size(),
         numInvariants = getInvariants().size();
  size_t numUserStacked = getNumUserStacked();
  size_t numResiduals = getNumResiduals();
  bool residualMode = keepsResiduals();
  for (Value c : getCarries())
    if (!isDifferentiable(c))
      return emitOpError("carries an integer value; only float carries can "
                         "be differentiated");

  auto gradOrZeros = [&](Value grad, Type type) {
    return grad ? grad : zerosLike(b, loc, type);
  };
  // Backward carries: the carry gradients, then one accumulator per
  // invariant that needs a gradient.
  SmallVector<Value> bwdCarries;
  for (size_t i = 0; i < numCarries; ++i)
    bwdCarries.push_back(
        gradOrZeros(resultGrads[i], getCarries()[i].getType()));
  SmallVector<size_t> gradInvariants;
  for (size_t j = 0; j < numInvariants; ++j)
    if (needed[numCarries + numStacked + j]) {
      gradInvariants.push_back(j);
      bwdCarries.push_back(zerosLike(b, loc, getInvariants()[j].getType()));
    }
  // Backward stacked operands: saved carries, forward stacked operands, the
  // gradients of the user's stacked results, the saved residuals.
  SmallVector<Value> bwdStacked(
      getStackedResults().take_back(numCarries));
  llvm::append_range(bwdStacked, getStacked());
  for (size_t y = 0; y < numUserStacked; ++y)
    bwdStacked.push_back(gradOrZeros(resultGrads[numCarries + y],
                                     getStackedResults()[y].getType()));
  llvm::append_range(bwdStacked, getStackedResults().slice(numUserStacked,
                                                           numResiduals));
  SmallVector<size_t> gradStacked;
  SmallVector<Type> bwdStackedResultTypes;
  for (size_t s = 0; s < numStacked; ++s)
    if (needed[numCarries + s] && isDifferentiable(getStacked()[s])) {
      gradStacked.push_back(s);
      bwdStackedResultTypes.push_back(getStacked()[s].getType());
    }

  SmallVector<Type> bwdCarryTypes = llvm::to_vector(
      llvm::map_range(bwdCarries, [](Value v) { return v.getType(); }));
  auto bwd = RepeatOp::create(b, loc, bwdCarryTypes, bwdStackedResultTypes,
                              count, !getReverse(), /*saves_carries=*/false,
                              bwdCarries, bwdStacked, getInvariants(),
                              /*residuals=*/IntegerAttr());

  // Body arguments: index, carry grads, invariant accumulators, saved
  // carries, stacked slices, result-gradient slices, residual slices,
  // invariants.
  Block &fwdBody = getBodyBlock();
  Block *body = new Block();
  bwd.getBody().push_back(body);
  body->addArgument(b.getIndexType(), loc);
  for (Type t : bwdCarryTypes)
    body->addArgument(t, loc);
  for (Value s : bwdStacked)
    body->addArgument(
        RankedTensorType::get(cast<RankedTensorType>(s.getType())
                                  .getShape()
                                  .drop_front(),
                              getElementTypeOrSelf(s.getType())),
        loc);
  for (Value inv : getInvariants())
    body->addArgument(inv.getType(), loc);
  auto args = body->getArguments();
  Value index = args[0];
  auto carryGrads = args.slice(1, numCarries);
  auto accumulators = args.slice(1 + numCarries, gradInvariants.size());
  size_t base = 1 + bwdCarryTypes.size();
  auto savedCarries = args.slice(base, numCarries);
  auto slices = args.slice(base + numCarries, numStacked);
  auto resultGradSlices =
      args.slice(base + numCarries + numStacked, numUserStacked);
  auto residualSlices =
      args.slice(base + numCarries + numStacked + numUserStacked, numResiduals);
  auto invariants = args.slice(
      base + numCarries + numStacked + numUserStacked + numResiduals,
      numInvariants);

  // Recompute the iteration's forward from its saved input (with
  // residuals, a copy that the rules differentiate, whose values are then
  // read from the saved slices and which then goes).
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  IRMapping map;
  map.map(fwdBody.getArgument(0), index);
  for (size_t i = 0; i < numCarries; ++i)
    map.map(fwdBody.getArgument(1 + i), savedCarries[i]);
  for (size_t s = 0; s < numStacked; ++s)
    map.map(fwdBody.getArgument(1 + numCarries + s), slices[s]);
  for (size_t j = 0; j < numInvariants; ++j)
    map.map(fwdBody.getArgument(1 + numCarries + numStacked + j),
            invariants[j]);
  YieldOp fwdYield = getYield();
  auto placeholder = YieldOp::create(b, loc, ValueRange(), ValueRange());
  b.setInsertionPoint(placeholder);
  // The copies that survive (all of them without residuals; with them,
  // those not read from a saved slice) are the backward's recomputation,
  // marked for the report and for readers of the IR.
  auto recompute = cast<TrainDialect>(getOperation()->getDialect())
                       ->getRecomputeAttrHelper();
  for (Operation &op : fwdBody.without_terminator()) {
    Operation *copy = b.clone(op, map);
    if (!recomputedFree(op))
      recompute.setAttr(copy, b.getUnitAttr());
  }

  SmallVector<Value> sources(savedCarries);
  llvm::append_range(sources, slices);
  llvm::append_range(sources, invariants);
  IRRewriter rewriter(b);
  // A body that keeps residuals was prepared in the forward.
  DenseSet<Value> active =
      residualMode ? computeActive(*body, sources)
                   : loom::train::prepareForBackward(rewriter, *body, sources);
  b.setInsertionPoint(placeholder);

  DenseMap<Value, Value> adjoints;
  for (size_t i = 0; i < numCarries; ++i) {
    Value out = map.lookupOrDefault(fwdYield.getCarries()[i]);
    adjoints[out] = accumulate(b, loc, adjoints.lookup(out), carryGrads[i]);
  }
  for (size_t y = 0; y < numUserStacked; ++y) {
    Value out = map.lookupOrDefault(fwdYield.getStacked()[y]);
    adjoints[out] =
        accumulate(b, loc, adjoints.lookup(out), resultGradSlices[y]);
  }
  if (failed(backpropagate(b, *body, active, adjoints)))
    return failure();

  SmallVector<Value> nextCarries;
  for (size_t i = 0; i < numCarries; ++i)
    nextCarries.push_back(gradOrZeros(adjoints.lookup(savedCarries[i]),
                                      savedCarries[i].getType()));
  for (auto [k, j] : llvm::enumerate(gradInvariants)) {
    Value g = adjoints.lookup(invariants[j]);
    nextCarries.push_back(g ? accumulate(b, loc, accumulators[k], g)
                            : Value(accumulators[k]));
  }
  SmallVector<Value> stackedGrads;
  for (size_t s : gradStacked)
    stackedGrads.push_back(
        gradOrZeros(adjoints.lookup(slices[s]), slices[s].getType()));
  YieldOp::create(b, loc, nextCarries, stackedGrads);
  placeholder.erase();
  if (residualMode) {
    for (auto [k, slice] : llvm::enumerate(residualSlices))
      if (Value copy = map.lookupOrNull(
              fwdYield.getStacked()[numUserStacked + k]))
        copy.replaceAllUsesWith(slice);
    eraseDeadOps(*body);
  }

  operandGrads.assign(getNumOperands(), Value());
  for (size_t i = 0; i < numCarries; ++i)
    if (needed[i])
      operandGrads[i] = bwd.getCarryResults()[i];
  for (auto [k, s] : llvm::enumerate(gradStacked))
    operandGrads[numCarries + s] = bwd.getStackedResults()[k];
  for (auto [k, j] : llvm::enumerate(gradInvariants))
    operandGrads[numCarries + numStacked + j] =
        bwd.getCarryResults()[numCarries + k];
  return success();
}


/// Whether `v` is a residual: a stacked result that a repeat keeping
/// residuals saved for its backward.
static bool isResidual(Value v) {
  auto result = dyn_cast<OpResult>(v);
  auto repeat = result ? dyn_cast<RepeatOp>(result.getOwner()) : RepeatOp();
  if (!repeat || !repeat.keepsResiduals())
    return false;
  size_t first = repeat.getCarries().size() + repeat.getNumUserStacked();
  unsigned n = result.getResultNumber();
  return n >= first && n < first + repeat.getNumResiduals();
}

/// Whether `v` carries a residual: it is one, or it is a slice of a
/// stacked operand that carries one (a micro-batch loop's backward hands
/// the layer loops' saved values to their backward this way).
static bool carriesResidual(Value v) {
  if (isResidual(v))
    return true;
  auto arg = dyn_cast<BlockArgument>(v);
  auto repeat =
      arg ? dyn_cast_or_null<RepeatOp>(arg.getOwner()->getParentOp()) : RepeatOp();
  if (!repeat)
    return false;
  size_t first = 1 + repeat.getCarries().size();
  unsigned n = arg.getArgNumber();
  if (n < first || n >= first + repeat.getStacked().size())
    return false;
  return carriesResidual(repeat.getStacked()[n - first]);
}

/// One round of pruneResiduals; whether it dropped anything.
static bool pruneResidualsOnce(Operation *root);

void loom::train::pruneResiduals(Operation *root) {
  // A residual dropped from an enclosing loop leaves the one its body
  // yielded there unread: again until nothing changes.
  while (pruneResidualsOnce(root)) {
  }
}

static bool pruneResidualsOnce(Operation *root) {
  bool changed = false;
  // The backward loops first: a residual slice their body does not read.
  SmallVector<RepeatOp> readers;
  root->walk([&](RepeatOp r) { readers.push_back(r); });
  for (RepeatOp reader : readers) {
    Block &body = reader.getBodyBlock();
    size_t numCarries = reader.getCarries().size();
    SmallVector<Value> stacked;
    SmallVector<unsigned> unread;
    for (auto [i, v] : llvm::enumerate(reader.getStacked())) {
      if (carriesResidual(v) &&
          body.getArgument(1 + numCarries + i).use_empty())
        unread.push_back(1 + numCarries + i);
      else
        stacked.push_back(v);
    }
    if (unread.empty())
      continue;
    changed = true;
    IRRewriter rewriter(reader->getContext());
    rewriter.setInsertionPoint(reader);
    RepeatOp::Parts parts = reader.getParts();
    parts.stacked = stacked;
    RepeatOp copy = reader.rebuild(rewriter, parts);
    for (unsigned arg : llvm::reverse(unread))
      copy.getBodyBlock().eraseArgument(arg);
    reader->replaceAllUsesWith(copy->getResults());
    reader.erase();
  }
  // Then the forward loops: the residuals nothing reads any more.
  SmallVector<RepeatOp> forwards;
  root->walk([&](RepeatOp r) {
    if (r.keepsResiduals())
      forwards.push_back(r);
  });
  for (RepeatOp forward : forwards) {
    size_t numCarries = forward.getCarries().size();
    size_t first = forward.getNumUserStacked();
    size_t numResiduals = forward.getNumResiduals();
    SmallVector<unsigned> kept;
    for (auto [i, r] : llvm::enumerate(forward.getStackedResults()))
      if (i < first || i >= first + numResiduals || !r.use_empty())
        kept.push_back(i);
    if (kept.size() == forward.getStackedResults().size())
      continue;
    changed = true;
    YieldOp yield = forward.getYield();
    SmallVector<Value> slices;
    for (unsigned i : kept)
      slices.push_back(yield.getStacked()[i]);
    size_t dropped = forward.getStackedResults().size() - kept.size();
    IRRewriter rewriter(forward->getContext());
    rewriter.setInsertionPoint(forward);
    RepeatOp::Parts parts = forward.getParts();
    parts.residuals =
        rewriter.getI64IntegerAttr(int64_t(numResiduals - dropped));
    RepeatOp copy = forward.rebuild(rewriter, parts, ValueRange(slices));
    for (size_t i = 0; i < numCarries; ++i)
      forward.getCarryResults()[i].replaceAllUsesWith(copy.getCarryResults()[i]);
    for (auto [k, i] : llvm::enumerate(kept))
      forward.getStackedResults()[i].replaceAllUsesWith(
          copy.getStackedResults()[k]);
    forward.erase();
  }
  return changed;
}

RepeatOp loom::train::appendStackedOperands(RepeatOp repeat, ValueRange extra,
                                            SmallVectorImpl<BlockArgument> &slices) {
  IRRewriter rewriter(repeat->getContext());
  rewriter.setInsertionPoint(repeat);
  RepeatOp::Parts parts = repeat.getParts();
  llvm::append_range(parts.stacked, extra);
  RepeatOp copy = repeat.rebuild(rewriter, parts);
  Block &body = copy.getBodyBlock();
  unsigned at = 1 + repeat.getCarries().size() + repeat.getStacked().size();
  for (Value v : extra) {
    auto t = cast<RankedTensorType>(v.getType());
    slices.push_back(body.insertArgument(
        at++,
        RankedTensorType::get(t.getShape().drop_front(), t.getElementType()),
        v.getLoc()));
  }
  repeat->replaceAllUsesWith(copy->getResults());
  repeat.erase();
  return copy;
}

/// In `loop`'s body, an accumulator `carry + r`, where r is a stacked
/// result of an inner loop that nothing else reads (a micro-batch's layer
/// gradients), is computed by that inner loop: it reads the carry as one
/// more stacked operand and yields each slice plus its contribution. The
/// same adds; the micro-batch's gradients are no longer a tensor of their
/// own, and the code generator writes the sum into the accumulator
/// (analysis::updatedInPlace).
/// The terms of `v`, a sum of adds of one type that nothing else reads.
static void collectTerms(Value v, Block &body, SmallVectorImpl<Value> &terms,
                         SmallVectorImpl<AddOp> &adds) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add || add->getBlock() != &body || !v.hasOneUse() ||
      add.getLhs().getType() != v.getType() ||
      add.getRhs().getType() != v.getType()) {
    terms.push_back(v);
    return;
  }
  adds.push_back(add);
  collectTerms(add.getLhs(), body, terms, adds);
  collectTerms(add.getRhs(), body, terms, adds);
}

void loom::train::widenGradients(Block &body) {
  SmallVector<ConvertOp> worklist;
  auto widens = [](ConvertOp c) {
    return getElementTypeOrSelf(c.getType()).isF32() &&
           getElementTypeOrSelf(c.getInput().getType()).isBF16();
  };
  // The body's own and its loops' (a micro-batch loop's backward).
  for (Operation &op : body)
    op.walk([&](ConvertOp c) {
      if (widens(c))
        worklist.push_back(c);
    });
  while (!worklist.empty()) {
    ConvertOp widen = worklist.pop_back_val();
    auto made = dyn_cast<OpResult>(widen.getInput());
    if (!made || !made.hasOneUse())
      continue;
    Operation *maker = made.getOwner();
    Type f32 = getElementTypeOrSelf(widen.getType());
    if (auto add = dyn_cast<AddOp>(maker);
        add && add.getLhs().getType() == add.getType() &&
        add.getRhs().getType() == add.getType()) {
      OpBuilder b(widen);
      auto lhs = ConvertOp::create(b, widen.getLoc(), add.getLhs(),
                                   TypeAttr::get(f32));
      auto rhs = ConvertOp::create(b, widen.getLoc(), add.getRhs(),
                                   TypeAttr::get(f32));
      widen.replaceAllUsesWith(
          AddOp::create(b, add.getLoc(), lhs, rhs).getResult());
      widen.erase();
      add.erase();
      worklist.append({lhs, rhs});
      continue;
    }
    auto loop = dyn_cast<RepeatOp>(maker);
    if (!loop)
      continue;
    if (made.getResultNumber() < loop.getCarries().size()) {
      // An accumulator from zeros (an invariant's gradient over the
      // micro-batches): it accumulates in f32, each contribution widened.
      unsigned i = made.getResultNumber();
      BlockArgument acc = loop.getBodyBlock().getArgument(1 + i);
      OpOperand &init = loop.getCarriesMutable()[i];
      OpOperand &yielded = loop.getYield().getCarriesMutable()[i];
      auto sum = yielded.get().getDefiningOp<AddOp>();
      auto zeros = init.get().getDefiningOp<arith::ConstantOp>();
      auto dense =
          zeros ? dyn_cast<DenseElementsAttr>(zeros.getValue()) : nullptr;
      if (!sum || !acc.hasOneUse() || !sum->hasOneUse() ||
          (sum.getLhs() != acc && sum.getRhs() != acc) ||
          sum.getLhs() == sum.getRhs() || !dense || !dense.isSplat() ||
          !dense.getSplatValue<APFloat>().isZero())
        continue;
      Value part = sum.getLhs() == acc ? sum.getRhs() : sum.getLhs();
      OpBuilder before(loop);
      init.set(zerosLike(before, loop.getLoc(), widen.getType()));
      if (zeros->use_empty())
        zeros.erase();
      acc.setType(widen.getType());
      OpBuilder inBody(sum);
      auto wide = ConvertOp::create(inBody, widen.getLoc(), part,
                                    TypeAttr::get(f32));
      yielded.set(AddOp::create(inBody, sum.getLoc(), acc, wide).getResult());
      sum.erase();
      made.setType(widen.getType());
      widen.replaceAllUsesWith(made);
      widen.erase();
      worklist.push_back(wide);
      continue;
    }
    size_t slice = made.getResultNumber() - loop.getCarries().size();
    YieldOp yield = loop.getYield();
    OpOperand &yielded = yield.getStackedMutable()[slice];
    OpBuilder y(yield);
    auto inner = ConvertOp::create(y, widen.getLoc(), yielded.get(),
                                   TypeAttr::get(f32));
    yielded.set(inner);
    made.setType(widen.getType());
    widen.replaceAllUsesWith(made);
    widen.erase();
    // Inside the loop the widened slice may be a sum too.
    worklist.push_back(inner);
  }
}

void loom::train::foldAccumulations(RepeatOp loop) {
  Block &body = loop.getBodyBlock();
  YieldOp yield = loop.getYield();
  size_t numCarries = loop.getCarries().size();
  // carry + (x + y) becomes (carry + x) + y: each term is then added into
  // the accumulator in place (analysis::accumulatesInto's chain), where
  // its kernel can write it there itself (analysis::accumulatedBy; the
  // tied embedding's lookup and head gradients).
  for (size_t i = 0; i < numCarries; ++i) {
    auto add = yield.getCarries()[i].getDefiningOp<AddOp>();
    BlockArgument carry = body.getArgument(1 + i);
    if (!add || add->getBlock() != &body || !add->hasOneUse() ||
        add.getType() != carry.getType() ||
        (add.getLhs() != carry && add.getRhs() != carry))
      continue;
    Value sum = add.getLhs() == carry ? add.getRhs() : add.getLhs();
    SmallVector<Value> terms;
    SmallVector<AddOp> inner;
    collectTerms(sum, body, terms, inner);
    if (inner.empty())
      continue;
    OpBuilder b(add);
    Value acc = carry;
    for (Value term : terms)
      acc = AddOp::create(b, add.getLoc(), acc, term);
    add.getResult().replaceAllUsesWith(acc);
    add.erase();
    for (AddOp dead : inner)
      dead.erase();
  }
  for (AddOp add : llvm::make_early_inc_range(body.getOps<AddOp>())) {
    if (!add->hasOneUse() || *add->getUsers().begin() != yield.getOperation())
      continue;
    for (auto [accValue, partValue] :
         {std::pair(add.getLhs(), add.getRhs()),
          std::pair(add.getRhs(), add.getLhs())}) {
      auto acc = dyn_cast<BlockArgument>(accValue);
      auto part = dyn_cast<OpResult>(partValue);
      // A bf16 gradient widened for its f32 accumulator (mixed precision):
      // the inner loop widens each slice before it adds it.
      ConvertOp widen = part ? dyn_cast<ConvertOp>(part.getOwner()) : nullptr;
      if (widen) {
        if (!part.hasOneUse())
          continue;
        part = dyn_cast<OpResult>(widen.getInput());
      }
      auto inner = part ? dyn_cast<RepeatOp>(part.getOwner()) : RepeatOp();
      if (!acc || acc.getOwner() != &body || acc.getArgNumber() == 0 ||
          acc.getArgNumber() > numCarries || !inner ||
          inner->getBlock() != &body || !part.hasOneUse() ||
          acc.getType() != partValue.getType() ||
          part.getResultNumber() < inner.getCarries().size())
        continue;
      // The inner loop's stacked result starts from the accumulator.
      size_t slice = part.getResultNumber() - inner.getCarries().size();
      SmallVector<BlockArgument> accSlices;
      RepeatOp folded = appendStackedOperands(inner, acc, accSlices);
      YieldOp innerYield = folded.getYield();
      OpBuilder y(innerYield);
      Value contribution = innerYield.getStacked()[slice];
      if (widen)
        contribution = ConvertOp::create(y, widen.getLoc(), contribution,
                                         widen.getElementTypeAttr());
      Value sum =
          AddOp::create(y, add.getLoc(), accSlices[0], contribution);
      innerYield.getStackedMutable()[slice].set(sum);
      Value result = folded.getStackedResults()[slice];
      result.setType(acc.getType()); // the accumulator's (f32, widened)
      add.getResult().replaceAllUsesWith(result);
      add.erase();
      if (widen)
        widen.erase();
      break;
    }
  }
}
