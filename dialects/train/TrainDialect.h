//===- TrainDialect.h - the train dialect -----------------------*- C++ -*-===//

#ifndef LOOM_DIALECTS_TRAIN_TRAINDIALECT_H
#define LOOM_DIALECTS_TRAIN_TRAINDIALECT_H

#include "dialects/common/Bounds.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

#include "dialects/train/TrainDialect.h.inc"
#include "dialects/train/TrainEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/train/TrainAttrs.h.inc"

namespace loom::train {
/// A pointwise op whose kernel reads element i of each operand before it
/// writes element i of its result: its result may take the buffer of an
/// operand of the same type that nothing reads after it (the memory plan's
/// in-place rule, analysis/MemoryPlan.cpp).
template <typename ConcreteType>
class PointwiseKernel
    : public mlir::OpTrait::TraitBase<ConcreteType, PointwiseKernel> {};
} // namespace loom::train

namespace loom::train::detail {
int64_t defaultFlops(mlir::Operation *op);
int64_t defaultBytesRead(mlir::Operation *op);
int64_t defaultBytesWritten(mlir::Operation *op);
/// Result type of numpy broadcasting of `lhs` and `rhs`, or a diagnostic at
/// `loc` naming `opName` when their shapes or element types are incompatible.
llvm::LogicalResult inferBroadcast(std::optional<mlir::Location> loc,
                                   llvm::StringRef opName, mlir::Type lhs,
                                   mlir::Type rhs,
                                   llvm::SmallVectorImpl<mlir::Type> &types);
} // namespace loom::train::detail

namespace loom::train {
} // namespace loom::train

#include "dialects/train/TrainInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/train/TrainOps.h.inc"

namespace loom::train {
/// The narrowing `train.convert`s (to bf16) that read `param`: a
/// mixed-precision master's bf16 copies (train-mixed-precision makes one).
llvm::SmallVector<ConvertOp> bf16Copies(ParamOp param);
/// Whether `grad` is the bf16 form of the f32 tensor type `param` (a
/// master's gradient under `--grad-precision=bf16`).
bool isBf16GradientOf(mlir::Type grad, mlir::Type param);
} // namespace loom::train

#endif // LOOM_DIALECTS_TRAIN_TRAINDIALECT_H
