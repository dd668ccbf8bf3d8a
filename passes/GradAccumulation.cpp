//===- GradAccumulation.cpp - train-grad-accumulation ----------------------===//

#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_TRAINGRADACCUMULATION
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

    SmallVector<Type> carryTypes, stackedTypes;
    for (Value v : repeat.getCarries())
      carryTypes.push_back(map.lookupOrDefault(v).getType());
    for (Value v : slices) {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape{int64_t(repeat.getCount())};
      llvm::append_range(shape, t.getShape());
      stackedTypes.push_back(RankedTensorType::get(shape, t.getElementType()));
    }
    auto mapAll = [&](ValueRange values) {
      return llvm::to_vector(llvm::map_range(
          values, [&](Value v) { return map.lookupOrDefault(v); }));
    };
    auto copy = RepeatOp::create(
        b, loc, carryTypes, stackedTypes, repeat.getCount(),
        repeat.getReverse(), repeat.getSavesCarries(),
        mapAll(repeat.getCarries()), mapAll(repeat.getStacked()),
        mapAll(repeat.getInvariants()));
    copy.getBody().push_back(block);
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

    auto loop = RepeatOp::create(b, loc, TypeRange{scalar}, TypeRange(), m,
                                 false, false, ValueRange{zero}, stacked,
                                 invariants);
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
