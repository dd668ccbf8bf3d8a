//===- EmitKernels.cpp - loom-lower-to-runtime: the kernels, constants and reshapes ===//

#include "codegen/Emitter.h"

using namespace loom::codegen::lowering;

namespace loom::codegen::lowering {

StringRef Emitter::fillOf(Type type) {
  return getElementTypeOrSelf(type).isBF16() ? "loomrt_fill_bf16"
                                             : "loomrt_fill";
}

bool Emitter::callsBf16Kernel(Operation *op) {
  if (auto convert = dyn_cast<ConvertOp>(op))
    return convert.getInput().getType() != convert.getType();
  return llvm::any_of(
      llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()),
      [](Type t) { return getElementTypeOrSelf(t).isBF16(); });
}

bool Emitter::hasBf16Kernel(Operation *op) {
  if (auto reduce = dyn_cast<dist::AllReduceOp>(op))
    return !reduce.getMembers() && op->getNumOperands() == 1;
  if (isa<dist::AllReduceStartOp>(op))
    return true;
  if (isa<dist::ReduceScatterOp>(op))
    return op->getNumOperands() == 1;
  if (isa<dist::AllGatherOp, dist::AllGatherStartOp>(op))
    return true;
  return isa<KernelOpInterface>(op) &&
         !isa<LrScheduleOp, ClipFactorOp, LabelCountOp, ConcatOp>(op);
}

LogicalResult Emitter::checkTypes(Operation *op) {
  // The bf16 entries read and write 0-d tensors as f32 (the loss, the
  // learning rate, a norm); a 0-d bf16 tensor is a mul's scale alone
  // (the clip factor of bf16 gradients, scaled natively).
  if (isa<KernelOpInterface>(op) && !isa<ConvertOp>(op) &&
      callsBf16Kernel(op))
    for (OpOperand &operand : op->getOpOperands()) {
      auto tensor = dyn_cast<RankedTensorType>(operand.get().getType());
      if (!tensor || tensor.getRank() != 0 ||
          !tensor.getElementType().isBF16() ||
          (isa<MulOp>(op) && operand.getOperandNumber() == 1))
        continue;
      return op->emitOpError("reads a 0-d bf16 tensor (operand ")
             << operand.getOperandNumber()
             << "), which the runtime's bf16 kernels take as f32: keep "
                "scalars f32";
    }
  for (Type t : llvm::concat<Type>(op->getOperandTypes(),
                                   op->getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor)
      continue;
    Type e = tensor.getElementType();
    // A loop's carries are buffers whatever their type.
    if (e.isBF16() && !isa<RepeatOp>(op) && !hasBf16Kernel(op))
      return op->emitOpError("has a tensor of bf16, for which the runtime "
                             "has no kernel of this op yet");
    if (!e.isF32() && !e.isBF16() && !e.isInteger(32))
      return op->emitOpError("has a tensor of ")
             << e << ", which the runtime does not support "
                     "(f32 and bf16 values, i32 ids)";
  }
  return success();
}

LogicalResult Emitter::emitKernel(KernelOpInterface kernel) {
  Operation *op = kernel.getOperation();
  SmallVector<Value> results, operands;
  SmallVector<Type> resultTypes, operandTypes;
  kernel.getKernelResults(results, resultTypes);
  kernel.getKernelOperands(operands, operandTypes);
  // An accumulation whose contribution its kernel added in place: the
  // accumulator holds the sum already.
  if (auto add = dyn_cast<AddOp>(op);
      add && (accumulatedBy(add.getLhs()) == add ||
              accumulatedBy(add.getRhs()) == add))
    return success();
  bool accumulates = llvm::any_of(
      results, [](Value r) { return r && accumulatedBy(r); });

  SmallVector<StringRef> names;
  for (StringAttr n : op->getName().getAttributeNames())
    if (n.getValue() != "operandSegmentSizes" &&
        n.getValue() != "resultSegmentSizes")
      names.push_back(n.getValue());
  llvm::sort(names);

  auto emitCall = [&](ArrayRef<Value> ops, ArrayRef<Type> types,
                      std::optional<std::pair<int64_t, int64_t>> position)
      -> LogicalResult {
    SmallVector<Value> args{ctx};
    for (Value r : results)
      args.push_back(r ? bufferOf(r) : null());
    for (auto [v, t] : llvm::zip(ops, types)) {
      if (isa<IndexType>(t))
        args.push_back(v ? Value(arith::IndexCastOp::create(
                               b(), loc(), b().getI64Type(), indexOf(v)))
                         : i64(-1));
      else
        args.push_back(v ? bufferOf(v) : null());
    }
    for (auto [v, t] : llvm::zip(results, resultTypes))
      args.push_back(i64(shapeId(cast<RankedTensorType>(t).getShape())));
    for (auto [v, t] : llvm::zip(ops, types))
      if (auto tensor = dyn_cast<RankedTensorType>(t))
        args.push_back(v ? i64(shapeId(tensor.getShape())) : i64(-1));
    if (position)
      args.append({i64(position->first), i64(position->second)});
    for (StringRef name : names)
      if (failed(appendAttribute(
              op, name, op->getInherentAttr(name).value_or(Attribute()),
              &args)))
        return failure();
    call(("loomrt_" + op->getName().stripDialect() +
          (callsBf16Kernel(op) ? "_bf16" : "") +
          (accumulates ? "_accumulate" : ""))
             .str(),
         args);
    return success();
  };

  if (!kernel.isKernelCalledPerOperand())
    return emitCall(operands, operandTypes, std::nullopt);
  for (auto [i, v] : llvm::enumerate(operands))
    if (failed(emitCall({v}, {operandTypes[i]},
                        std::make_pair(int64_t(i), int64_t(operands.size())))))
      return failure();
  return success();
}

LogicalResult Emitter::lowerKernel(Operation *op) {
  defineResults(*op);
  return emitKernel(cast<KernelOpInterface>(op));
}

LogicalResult Emitter::lowerReshape(Operation *op) {
  auto reshape = cast<ReshapeOp>(op);
  buffers[reshape.getResult()] = bufferOf(reshape.getInput());
  return success();
}

LogicalResult Emitter::lowerConstant(Operation *op) {
  auto constant = cast<arith::ConstantOp>(op);
  if (isa<IndexType>(constant.getType())) {
    indices[constant] = arith::ConstantOp::create(
        b(), loc(), constant.getType(), constant.getValue());
    return success();
  }
  if (carrySeed(constant))
    return success();
  auto dense = cast<DenseFPElementsAttr>(constant.getValue());
  Value buf = defineBuffer(constant);
  emitWhen(placedHere(constant), [&] {
    call(fillOf(dense.getType()),
         {ctx, buf, i64(shapeId(dense.getType().getShape())),
          f64(dense.getSplatValue<APFloat>().convertToDouble())});
  });
  return success();
}

} // namespace loom::codegen::lowering
