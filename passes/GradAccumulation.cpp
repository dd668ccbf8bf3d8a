//===- GradAccumulation.cpp - train-grad-accumulation ----------------------===//

#include "passes/Passes.h"

#include "dialects/train/Adjoint.h"

#include "dialects/dist/PipelineLoops.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_TRAINGRADACCUMULATION
#define GEN_PASS_DEF_TRAININTERLEAVEMICROBATCHES
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {

/// Clones forward ops into a micro-batch, where every value derived from
/// the inputs has a leading dimension of `micro` instead of `batch`.
struct MicroBatchCloner {
  int64_t batch, micro;
  IRMapping map;
  DenseSet<Value> batched;

  bool isBatched(Operation &op) {
    return llvm::any_of(op.getOperands(),
                        [&](Value v) { return batched.contains(v); });
  }

  Type shrink(Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || t.getRank() == 0 || t.getDimSize(0) != batch)
      return type;
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = micro;
    return RankedTensorType::get(shape, t.getElementType());
  }

  LogicalResult clone(OpBuilder &b, Operation &op) {
    bool inBatch = isBatched(op);
    if (auto repeat = dyn_cast<RepeatOp>(op))
      return cloneRepeat(b, repeat, inBatch);
    Operation *copy = b.clone(op, map);
    if (!inBatch)
      return success();
    // The one attribute that spells the batch size: a slice that keeps the
    // whole batch keeps the whole micro-batch; one that cuts into the batch
    // cannot be split.
    if (auto slice = dyn_cast<SliceOp>(copy)) {
      ArrayRef<int64_t> sizes = slice.getSizes();
      if (!sizes.empty() && slice.getOffsets()[0] == 0 && sizes[0] == batch) {
        SmallVector<int64_t> micro(sizes);
        micro[0] = this->micro;
        slice.setSizes(micro);
      }
    }
    if (auto infer = dyn_cast<InferTypeOpInterface>(copy)) {
      SmallVector<Type> types;
      // The pass manager verifies the result; a shape that no longer fits
      // fails there, at the op.
      if (failed(infer.inferReturnTypes(
              copy->getContext(), copy->getLoc(), copy->getOperands(),
              copy->getRawDictionaryAttrs(), copy->getPropertiesStorage(),
              copy->getRegions(), types)))
        return op.emitOpError("cannot be split into micro-batches along its "
                              "leading dimension");
      for (auto [r, t] : llvm::zip(copy->getResults(), types))
        r.setType(t);
    } else {
      for (Value r : copy->getResults())
        r.setType(shrink(r.getType()));
    }
    for (Value r : op.getResults())
      batched.insert(r);
    return success();
  }

  LogicalResult cloneRepeat(OpBuilder &b, RepeatOp repeat, bool inBatch) {
    Location loc = repeat.getLoc();
    auto *block = new Block();
    Block &old = repeat.getBodyBlock();
    for (BlockArgument arg : old.getArguments()) {
      Type t = arg.getType();
      // A block argument is batched when the operand it stands for is.
      unsigned n = arg.getArgNumber();
      Value operand = n == 0 ? Value() : repeat->getOperand(n - 1);
      if (operand && batched.contains(operand)) {
        t = shrink(t);
        batched.insert(arg);
      }
      map.map(arg, block->addArgument(t, loc));
    }
    OpBuilder inner(b.getContext());
    inner.setInsertionPointToEnd(block);
    for (Operation &op : old.without_terminator())
      if (failed(clone(inner, op))) {
        delete block;
        return failure();
      }
    YieldOp yield = repeat.getYield();
    SmallVector<Value> carries, slices;
    for (Value v : yield.getCarries())
      carries.push_back(map.lookupOrDefault(v));
    for (Value v : yield.getStacked())
      slices.push_back(map.lookupOrDefault(v));
    YieldOp::create(inner, yield.getLoc(), carries, slices);

    auto mapAll = [&](ValueRange values) {
      return llvm::to_vector(llvm::map_range(
          values, [&](Value v) { return map.lookupOrDefault(v); }));
    };
    RepeatOp::Parts parts = repeat.getParts();
    parts.carries = mapAll(repeat.getCarries());
    parts.stacked = mapAll(repeat.getStacked());
    parts.invariants = mapAll(repeat.getInvariants());
    auto copy = RepeatOp::createWithBody(b, loc, parts, block);
    copy->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
    for (auto [from, to] : llvm::zip(repeat.getResults(), copy.getResults())) {
      map.map(from, to);
      if (inBatch)
        batched.insert(from);
    }
    return success();
  }
};

struct TrainGradAccumulationPass
    : public loom::impl::TrainGradAccumulationBase<TrainGradAccumulationPass> {
  using TrainGradAccumulationBase::TrainGradAccumulationBase;

  void runOnOperation() override {
    if (microBatches < 1) {
      getOperation().emitError("train-grad-accumulation: micro-batches must "
                               "be at least 1, got ")
          << microBatches;
      return signalPassFailure();
    }
    if (microBatches == 1)
      return;
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(split(model)))
        return signalPassFailure();
  }

  LogicalResult split(ModelOp model) {
    int64_t m = microBatches;
    OutputOp output = model.getOutput();
    if (!output.getGrads().empty() || !output.getUpdates().empty())
      return model.emitOpError("must be split into micro-batches before "
                               "train-autodiff");
    Block &body = model.getBody().front();
    SmallVector<InputOp> inputs(body.getOps<InputOp>());
    if (inputs.empty())
      return model.emitOpError("has no inputs to split into micro-batches");
    int64_t batch = -1;
    for (InputOp in : inputs) {
      auto t = cast<RankedTensorType>(in.getType());
      if (t.getRank() == 0)
        return in.emitOpError("is a scalar: there is no batch dimension to "
                              "split into micro-batches");
      if (batch < 0)
        batch = t.getDimSize(0);
      if (t.getDimSize(0) != batch)
        return in.emitOpError("has a leading (batch) dimension of ")
               << t.getDimSize(0) << ", other inputs " << batch;
      if (batch % m)
        return in.emitOpError("has a batch of ")
               << batch << ", which " << m
               << " micro-batches do not divide";
    }
    int64_t micro = batch / m;

    // Everything the loss is computed with moves into the loop.
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      if (!isa<ParamOp, StateOp, InputOp, IterationOp>(op))
        forward.push_back(&op);
    SmallVector<Value> params;
    for (ParamOp p : body.getOps<ParamOp>())
      params.push_back(p);

    OpBuilder b(output);
    Location loc = output.getLoc();
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value zero = arith::ConstantOp::create(
        b, loc, scalar, DenseElementsAttr::get(scalar, b.getF32FloatAttr(0.0f)));
    SmallVector<Value> stacked;
    for (InputOp in : inputs) {
      auto t = cast<RankedTensorType>(in.getType());
      SmallVector<int64_t> shape{m, micro};
      llvm::append_range(shape, t.getShape().drop_front());
      stacked.push_back(ReshapeOp::create(
          b, loc, RankedTensorType::get(shape, t.getElementType()), in));
    }
    auto ce = output.getLoss().getDefiningOp<CrossEntropyOp>();
    SmallVector<Value> invariants(params);
    if (ce) {
      auto labels = dyn_cast_if_present<InputOp>(ce.getLabels().getDefiningOp());
      if (!labels)
        return ce.emitOpError("needs its labels to be a model input to be "
                              "normalised across micro-batches");
      invariants.push_back(LabelCountOp::create(b, loc, labels,
                                                ce.getIgnoreIndexAttr()));
    }

    auto *block = new Block();
    block->addArgument(b.getIndexType(), loc);
    Value acc = block->addArgument(scalar, loc);
    MicroBatchCloner cloner{batch, micro, {}, {}};
    for (auto [in, s] : llvm::zip(inputs, stacked)) {
      auto t = cast<RankedTensorType>(s.getType());
      Value slice = block->addArgument(
          RankedTensorType::get(t.getShape().drop_front(), t.getElementType()),
          loc);
      cloner.map.map(in, slice);
      cloner.batched.insert(in);
    }
    for (Value p : params)
      cloner.map.map(p, block->addArgument(p.getType(), loc));
    Value total = ce ? block->addArgument(scalar, loc) : Value();
    // The step counter (a schedule, a dropout seed read in the forward) is
    // the same in every micro-batch: an invariant of the loop.
    for (IterationOp iteration : body.getOps<IterationOp>()) {
      if (iteration->use_empty())
        continue;
      invariants.push_back(iteration);
      cloner.map.map(iteration.getResult(),
                     block->addArgument(iteration.getType(), loc));
    }

    OpBuilder inner(b.getContext());
    inner.setInsertionPointToEnd(block);
    for (Operation *op : forward)
      if (failed(cloner.clone(inner, *op))) {
        delete block;
        return failure();
      }
    Value part = cloner.map.lookupOrDefault(output.getLoss());
    if (ce) {
      Value labels = cloner.map.lookupOrDefault(ce.getLabels());
      Value count =
          LabelCountOp::create(inner, loc, labels, ce.getIgnoreIndexAttr());
      Value share = DivOp::create(inner, loc, count, total);
      part = MulOp::create(inner, loc, part, share);
    } else {
      part = ScaleOp::create(inner, loc, part,
                             inner.getF64FloatAttr(1.0 / double(m)));
    }
    Value next = AddOp::create(inner, loc, acc, part);
    YieldOp::create(inner, loc, ValueRange{next}, ValueRange());

    // Each micro-batch's backward reads what its forward saved: the loop
    // adds no recomputation (which a layer saves or recomputes is its own
    // repeat's choice).
    auto loop = RepeatOp::create(b, loc, TypeRange{scalar}, TypeRange(), m,
                                 false, false, ValueRange{zero}, stacked,
                                 invariants, b.getI64IntegerAttr(0));
    loop.getBody().push_back(block);
    OutputOp::create(b, loc, loop.getCarryResults()[0], ValueRange(),
                     ValueRange());
    output.erase();
    for (Operation *op : llvm::reverse(forward))
      op->erase();
    numMoved += forward.size();
    return success();
  }
};
} // namespace

namespace {

struct TrainInterleaveMicroBatchesPass
    : public loom::impl::TrainInterleaveMicroBatchesBase<
          TrainInterleaveMicroBatchesPass> {
  using TrainInterleaveMicroBatchesBase::TrainInterleaveMicroBatchesBase;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      // A pipeline's schedule interleaves the loops itself.
      if (loom::pipelineOf(model))
        continue;
      SmallVector<std::pair<RepeatOp, RepeatOp>> pairs;
      for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
        if (forward.keepsResiduals())
          if (RepeatOp backward = loom::dist::backwardOf(forward))
            pairs.push_back({forward, backward});
      for (auto [forward, backward] : pairs)
        if (succeeded(fuse(forward, backward)))
          ++numInterleaved;
      // The backward read the layer loops' saved values through the
      // micro-batch loop's own; now it reads them directly, and what only
      // those slices carried is read by nothing.
      if (!pairs.empty())
        pruneResiduals(model);
    }
  }

  /// One loop whose iteration k runs iteration k of `forward`, then
  /// iteration k of `backward`. Fails (changing nothing) where the
  /// backward reads the forward other than through its saved slices.
  LogicalResult fuse(RepeatOp forward, RepeatOp backward) {
    Operation *f = forward.getOperation();
    auto fromForward = [&](Value v) { return v.getDefiningOp() == f; };
    if (llvm::any_of(backward.getCarries(), fromForward) ||
        llvm::any_of(backward.getInvariants(), fromForward))
      return failure();
    // Only the backward reads what the forward saved.
    size_t numUserStacked = forward.getNumUserStacked();
    for (Value saved :
         forward.getStackedResults().drop_front(numUserStacked))
      if (llvm::any_of(saved.getUsers(), [&](Operation *user) {
            return user != backward.getOperation();
          }))
        return failure();
    // What runs between the two loops must not read the forward's results.
    for (Operation *op = f->getNextNode(); op != backward.getOperation();
         op = op->getNextNode())
      if (llvm::any_of(op->getOperands(), fromForward))
        return failure();

    size_t fCarries = forward.getCarries().size();
    size_t fStacked = forward.getStacked().size();
    size_t numUser = forward.getNumUserStacked();
    size_t bCarries = backward.getCarries().size();
    Location loc = forward.getLoc();

    // The fused loop's operands: the forward's, then the backward's that
    // are not the forward's results (and not already there).
    SmallVector<Value> carries(forward.getCarries());
    llvm::append_range(carries, backward.getCarries());
    SmallVector<Value> stacked(forward.getStacked());
    for (Value v : backward.getStacked())
      if (!fromForward(v) && !llvm::is_contained(stacked, v))
        stacked.push_back(v);
    SmallVector<Value> invariants(forward.getInvariants());
    for (Value v : backward.getInvariants())
      if (!llvm::is_contained(invariants, v))
        invariants.push_back(v);

    auto *block = new Block();
    Value index = block->addArgument(IndexType::get(f->getContext()), loc);
    SmallVector<BlockArgument> carryArgs, stackedArgs, invariantArgs;
    for (Value c : carries)
      carryArgs.push_back(block->addArgument(c.getType(), c.getLoc()));
    for (Value s : stacked) {
      auto t = cast<RankedTensorType>(s.getType());
      stackedArgs.push_back(block->addArgument(
          RankedTensorType::get(t.getShape().drop_front(), t.getElementType()),
          s.getLoc()));
    }
    for (Value v : invariants)
      invariantArgs.push_back(block->addArgument(v.getType(), v.getLoc()));

    OpBuilder b(f->getContext());
    b.setInsertionPointToEnd(block);
    // The forward's iteration.
    Block &fBody = forward.getBodyBlock();
    IRMapping fMap;
    fMap.map(fBody.getArgument(0), index);
    for (size_t i = 0; i < fCarries; ++i)
      fMap.map(fBody.getArgument(1 + i), carryArgs[i]);
    for (size_t s = 0; s < fStacked; ++s)
      fMap.map(fBody.getArgument(1 + fCarries + s), stackedArgs[s]);
    for (auto [j, inv] : llvm::enumerate(forward.getInvariants()))
      fMap.map(fBody.getArgument(1 + fCarries + fStacked + j),
               invariantArgs[j]);
    for (Operation &op : fBody.without_terminator())
      b.clone(op, fMap);
    YieldOp fYield = forward.getYield();

    // The backward's, reading the forward's values where it read their
    // saved slices.
    Block &bBody = backward.getBodyBlock();
    IRMapping bMap;
    bMap.map(bBody.getArgument(0), index);
    for (size_t i = 0; i < bCarries; ++i)
      bMap.map(bBody.getArgument(1 + i), carryArgs[fCarries + i]);
    for (auto [s, v] : llvm::enumerate(backward.getStacked())) {
      BlockArgument arg = bBody.getArgument(1 + bCarries + s);
      if (fromForward(v)) {
        unsigned n = cast<OpResult>(v).getResultNumber() - fCarries;
        bMap.map(arg, fMap.lookupOrDefault(fYield.getStacked()[n]));
      } else {
        bMap.map(arg, stackedArgs[llvm::find(stacked, v) - stacked.begin()]);
      }
    }
    for (auto [j, inv] : llvm::enumerate(backward.getInvariants()))
      bMap.map(bBody.getArgument(1 + bCarries + backward.getStacked().size() +
                                 j),
               invariantArgs[llvm::find(invariants, inv) - invariants.begin()]);
    for (Operation &op : bBody.without_terminator())
      b.clone(op, bMap);
    YieldOp bYield = backward.getYield();

    auto mapped = [](IRMapping &map, ValueRange values) {
      return llvm::to_vector(llvm::map_range(
          values, [&](Value v) { return map.lookupOrDefault(v); }));
    };
    SmallVector<Value> nextCarries = mapped(fMap, fYield.getCarries());
    llvm::append_range(nextCarries, mapped(bMap, bYield.getCarries()));
    SmallVector<Value> slices =
        mapped(fMap, fYield.getStacked().take_front(numUser));
    llvm::append_range(slices, mapped(bMap, bYield.getStacked()));
    YieldOp::create(b, loc, nextCarries, slices);

    SmallVector<Type> carryTypes, stackedTypes;
    for (Value c : carries)
      carryTypes.push_back(c.getType());
    for (Value r : forward.getStackedResults().take_front(numUser))
      stackedTypes.push_back(r.getType());
    for (Value r : backward.getStackedResults())
      stackedTypes.push_back(r.getType());
    OpBuilder at(backward);
    auto fused = RepeatOp::create(at, loc, carryTypes, stackedTypes,
                                  forward.getCount(), /*reverse=*/false,
                                  /*saves_carries=*/false, carries, stacked,
                                  invariants, /*residuals=*/IntegerAttr());
    fused->setDiscardableAttrs(f->getDiscardableAttrDictionary());
    fused.getBody().push_back(block);

    for (size_t i = 0; i < fCarries; ++i)
      forward.getCarryResults()[i].replaceAllUsesWith(
          fused.getCarryResults()[i]);
    for (size_t i = 0; i < bCarries; ++i)
      backward.getCarryResults()[i].replaceAllUsesWith(
          fused.getCarryResults()[fCarries + i]);
    for (size_t y = 0; y < numUser; ++y)
      forward.getStackedResults()[y].replaceAllUsesWith(
          fused.getStackedResults()[y]);
    for (auto [k, r] : llvm::enumerate(backward.getStackedResults()))
      r.replaceAllUsesWith(fused.getStackedResults()[numUser + k]);
    backward.erase();
    forward.erase();
    foldAccumulations(fused);
    return success();
  }
};

} // namespace
