//===- MixedPrecision.cpp - train-mixed-precision --------------------------===//
//
// bf16 compute on the forward model, with f32 master weights (see the
// pass's description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

namespace loom {
#define GEN_PASS_DEF_TRAINMIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {

bool isFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

bool isBf16Tensor(Type t) {
  return isFloatTensor(t) && getElementTypeOrSelf(t).isBF16();
}

bool isScalar(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getRank() == 0;
}

Type withElement(Type t, Type element) {
  return cast<RankedTensorType>(t).clone(element);
}

struct TrainMixedPrecisionPass
    : public loom::impl::TrainMixedPrecisionBase<TrainMixedPrecisionPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation().walk([&](ModelOp model) {
      if (failed(rewrite(model)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }

  Value convert(OpBuilder &b, Location loc, Value v, Type element) {
    return ConvertOp::create(b, loc, v, TypeAttr::get(element));
  }

  LogicalResult rewrite(ModelOp model) {
    Block &body = model.getBody().front();
    if (!model.getOutput().getGrads().empty())
      return model.emitOpError("is differentiated already: run "
                               "train-mixed-precision on the forward model, "
                               "before train-autodiff");
    MLIRContext *context = model.getContext();
    Type f32 = Float32Type::get(context), bf16 = BFloat16Type::get(context);
    // Parameters are the f32 masters; they and the float inputs are
    // narrowed after the last declaration, once for each use.
    Operation *lastDeclaration = nullptr;
    for (Operation &op : body)
      if (isa<ParamOp, InputOp>(op))
        lastDeclaration = &op;
    if (!lastDeclaration)
      return success();
    OpBuilder b(context);
    b.setInsertionPointAfter(lastDeclaration);
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (!isa<ParamOp, InputOp>(op))
        continue;
      Value value = op.getResult(0);
      if (!isFloatTensor(value.getType()))
        continue;
      if (isa<ParamOp>(op))
        value.setType(withElement(value.getType(), f32));
      // One bf16 copy of each (a tied embedding's two reads share it; ZeRO
      // gathers it once): autodiff's widenGradients adds the gradients of
      // its reads in f32, as into Megatron-LM's main_grad.
      if (value.use_empty())
        continue;
      Value copy = convert(b, op.getLoc(), value, bf16);
      value.replaceAllUsesExcept(copy, copy.getDefiningOp());
      ++numNarrowed;
    }
    // The declarations and their converts (inserted before the insertion
    // point) stay as they are; every op from there takes its operands'
    // types.
    for (Operation &op : llvm::make_early_inc_range(
             llvm::make_range(b.getInsertionPoint(), body.end())))
      if (failed(retype(&op)))
        return failure();
    return success();
  }

  /// Gives `op` the result types its (retyped) operands imply.
  LogicalResult retype(Operation *op) {
    if (isa<OutputOp, YieldOp>(op))
      return success();
    if (auto repeat = dyn_cast<RepeatOp>(op))
      return retypeRepeat(repeat);
    bool anyBf16 = llvm::any_of(op->getOperandTypes(), isBf16Tensor);
    if (!anyBf16)
      return success();
    // Scalars are f32 (a loss's type says so; a full reduction would
    // infer bf16, and runs in f32 instead).
    SmallVector<Type> types;
    if (succeeded(inferred(op, types)) &&
        llvm::none_of(types, [](Type t) {
          return isBf16Tensor(t) && isScalar(t);
        })) {
      for (auto [result, type] : llvm::zip(op->getResults(), types))
        result.setType(type);
      return success();
    }
    // In f32, between converts.
    MLIRContext *context = op->getContext();
    Type f32 = Float32Type::get(context), bf16 = BFloat16Type::get(context);
    OpBuilder b(op);
    for (OpOperand &operand : op->getOpOperands())
      if (isBf16Tensor(operand.get().getType()))
        operand.set(convert(b, op->getLoc(), operand.get(), f32));
    types.clear();
    if (failed(inferred(op, types)))
      return op->emitOpError("cannot be computed in f32 either after "
                             "train-mixed-precision widened its operands");
    b.setInsertionPointAfter(op);
    for (auto [result, type] : llvm::zip(op->getResults(), types)) {
      result.setType(type);
      if (!isFloatTensor(type) || isScalar(type) || result.use_empty())
        continue;
      Value narrow = convert(b, op->getLoc(), result, bf16);
      result.replaceAllUsesExcept(narrow, narrow.getDefiningOp());
    }
    ++numWidened;
    return success();
  }

  /// The result types `op` infers from its operands now; an op without
  /// type inference keeps its results' shapes with its float operands'
  /// element type.
  LogicalResult inferred(Operation *op, SmallVectorImpl<Type> &types) {
    if (auto infer = dyn_cast<InferTypeOpInterface>(op))
      return infer.inferReturnTypes(
          op->getContext(), std::nullopt, op->getOperands(),
          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
          op->getRegions(), types);
    Type element;
    for (Type t : op->getOperandTypes())
      if (isFloatTensor(t)) {
        if (element && element != getElementTypeOrSelf(t))
          return failure();
        element = getElementTypeOrSelf(t);
      }
    for (Type t : op->getResultTypes())
      types.push_back(isFloatTensor(t) && element ? withElement(t, element)
                                                  : t);
    return success();
  }

  /// A loop's block arguments take their operands' element types (a
  /// stacked operand's slice, the carries, the invariants), its body is
  /// retyped, and its results are its carries' types; a carry the body
  /// yields in another type is converted back before the yield.
  LogicalResult retypeRepeat(RepeatOp repeat) {
    Block &block = repeat.getBody().front();
    // Block arguments: the index, then carries, stacked slices and
    // invariants in operand order.
    auto args = block.getArguments().drop_front();
    for (auto [arg, operand] : llvm::zip(args, repeat->getOperands()))
      if (isFloatTensor(arg.getType()))
        arg.setType(withElement(arg.getType(),
                                getElementTypeOrSelf(operand.getType())));
    for (Operation &op : llvm::make_early_inc_range(block))
      if (failed(retype(&op)))
        return failure();
    auto yield = cast<YieldOp>(block.getTerminator());
    OpBuilder b(yield);
    for (auto [result, carry, yielded] :
         llvm::zip(repeat.getCarryResults(), repeat.getCarries(),
                   yield.getCarriesMutable())) {
      if (yielded.get().getType() != carry.getType())
        yielded.set(convert(b, yield.getLoc(), yielded.get(),
                            getElementTypeOrSelf(carry.getType())));
      result.setType(carry.getType());
    }
    // A stacked result stacks what the body yields.
    for (auto [result, yielded] :
         llvm::zip(repeat.getStackedResults(), yield.getStacked()))
      if (isFloatTensor(result.getType()))
        result.setType(withElement(result.getType(),
                                   getElementTypeOrSelf(yielded.getType())));
    return success();
  }
};

} // namespace
