//===- DistDialect.h - the dist dialect -------------------------*- C++ -*-===//

#ifndef LOOM_DIALECTS_DIST_DISTDIALECT_H
#define LOOM_DIALECTS_DIST_DISTDIALECT_H

#include "dialects/common/Bounds.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Error.h"

namespace loom::dist {
/// The `[1, 2, 3]` lists of the dialect's attributes.
mlir::FailureOr<llvm::SmallVector<int64_t>> parseIntList(mlir::AsmParser &p);
void printIntList(mlir::AsmPrinter &p, llvm::ArrayRef<int64_t> values);
} // namespace loom::dist

// The attributes before the dialect, whose helpers return them by value.
#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.h.inc"

#include "dialects/dist/DistDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.h.inc"

namespace loom::dist {
/// The dist dialect of `ctx` (loaded if it was not), whose helpers read and
/// write its discardable attributes with their types:
/// `dist::attrs(ctx).getStageAttrHelper().setAttr(op, stage)`.
inline DistDialect &attrs(mlir::MLIRContext *ctx) {
  return *ctx->getOrLoadDialect<DistDialect>();
}
inline DistDialect &attrs(mlir::Operation *op) {
  return attrs(op->getContext());
}

/// Parses a mesh written as on loomc's command line, `dp=2,tp=4`, into its
/// axis names and sizes (each axis once, sizes at least 1). The error says
/// what is wrong with `spec`, naming it.
llvm::Error parseMeshSpec(llvm::StringRef spec,
                          llvm::SmallVectorImpl<std::string> &names,
                          llvm::SmallVectorImpl<int64_t> &sizes);

/// The pipeline stage of an op (its `dist.stage`), if it has one.
std::optional<int64_t> stageOf(mlir::Operation *op);

/// Gives `to` the pipeline stage of `from`, if it has one: autodiff's hook
/// (registered by train-autodiff), so a stage runs the backward of its ops.
void copyStage(mlir::Operation *from, mlir::Operation *to);

/// Puts `op` on pipeline stage `stage` of a pipeline over `ranks` ranks of
/// the pp axis: `dist.stage`, and `dist.on`, the ranks that run it.
void placeOnStage(mlir::Operation *op, int64_t stage, int64_t ranks);
} // namespace loom::dist

#endif // LOOM_DIALECTS_DIST_DISTDIALECT_H
