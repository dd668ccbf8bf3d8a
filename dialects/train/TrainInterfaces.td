//===- TrainInterfaces.td - per-op knowledge that passes query ------------===//
//
// Passes stay generic: whatever an op contributes to autodiff, to the cost
// model or to sharding propagation it says through one of these interfaces.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRAIN_INTERFACES_TD
#define LOOM_TRAIN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_BackwardOpInterface : OpInterface<"BackwardOpInterface"> {
  let cppNamespace = "::loom::train";
  let description = [{
    The reverse-mode rule of an op. `train-autodiff` walks a model backwards
    and asks each op for the gradients of its operands given the gradients of
    its results; it never looks at op names.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradients of this op's
        operands. `resultGrads` has one entry per result (null when no gradient
        flows into that result). `needed[i]` says whether operand i needs a
        gradient; `operandGrads` receives one value per operand, null where
        none is needed or the operand is not differentiable. A rule may refer
        to the op's operands and results (they dominate the backward pass).
      }],
      "::llvm::LogicalResult", "buildBackward",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
    InterfaceMethod<[{
        Called once on every op of a model before the backward pass is built:
        an op whose rule needs values the forward pass does not yet produce
        (the per-iteration inputs of a `train.repeat`) replaces itself here
        and returns the replacement. The default keeps the op.
      }],
      "::mlir::Operation *", "prepareForBackward",
      (ins "::mlir::RewriterBase &":$rewriter), [{}],
      [{ return $_op.getOperation(); }]>,
  ];
}

def Train_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::loom::train";
  let description = [{
    The work of one execution of an op at the shapes it carries: floating-point
    operations and bytes read and written. The cost model, the pipeline
    partitioner and the remat planner read these. The defaults count one
    operation per result element and every operand and result byte once.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations of one execution.",
      "int64_t", "getFlops", (ins), [{}],
      [{ return ::loom::train::detail::defaultFlops($_op.getOperation()); }]>,
    InterfaceMethod<"Bytes read from memory by one execution.",
      "int64_t", "getBytesRead", (ins), [{}],
      [{ return ::loom::train::detail::defaultBytesRead($_op.getOperation()); }]>,
    InterfaceMethod<"Bytes written to memory by one execution.",
      "int64_t", "getBytesWritten", (ins), [{}],
      [{ return ::loom::train::detail::defaultBytesWritten($_op.getOperation()); }]>,
    InterfaceMethod<[{
        The part of `getFlops` that is matrix products with a weight or
        between activations (the report's matmul FLOPs).
      }], "int64_t", "getMatmulFlops", (ins), [{}], [{ return 0; }]>,
    InterfaceMethod<[{
        The part of `getFlops` that is attention's two products (scores and
        their product with the values; the report's attention FLOPs).
      }], "int64_t", "getAttentionFlops", (ins), [{}], [{ return 0; }]>,
  ];
}

def Train_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::loom::train";
  let description = [{
    An op that the code generator lowers to one call of the runtime kernel
    `loomrt_<mnemonic>`, with the arguments of the rule in `loomrt.h`. The
    methods give the kernel's result and operand slots: by default every
    result and operand; an op with an optional operand or result reports a
    null value (with the slot's type) where it is absent.
  }];
  let methods = [
    InterfaceMethod<"The kernel's result slots and their types.",
      "void", "getKernelResults",
      (ins "::llvm::SmallVectorImpl<::mlir::Value> &":$values,
           "::llvm::SmallVectorImpl<::mlir::Type> &":$types), [{}],
      [{
        for (::mlir::Value v : $_op->getResults()) {
          values.push_back(v);
          types.push_back(v.getType());
        }
      }]>,
    InterfaceMethod<"The kernel's operand slots and their types.",
      "void", "getKernelOperands",
      (ins "::llvm::SmallVectorImpl<::mlir::Value> &":$values,
           "::llvm::SmallVectorImpl<::mlir::Type> &":$types), [{}],
      [{
        for (::mlir::Value v : $_op->getOperands()) {
          values.push_back(v);
          types.push_back(v.getType());
        }
      }]>,
    InterfaceMethod<[{
        Whether the kernel is called once per operand (a variadic op), with
        the operand's position and the operand count.
      }],
      "bool", "isKernelCalledPerOperand", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<[{
        The results (by number) that the kernel's accumulating entry
        `loomrt_<mnemonic>_accumulate` adds its values to (out += value,
        the other results written as usual); none when it has no such
        entry. The code generator calls it where an in-place accumulation
        adds those results to an accumulator that nothing else reads in
        between (analysis::accumulatedBy): Megatron-LM's fused gradient
        accumulation, with no tensor for the contribution.
      }],
      "::llvm::SmallVector<unsigned>", "getAccumulatingResults", (ins), [{}],
      [{ return {}; }]>,
  ];
}

#endif // LOOM_TRAIN_INTERFACES_TD
