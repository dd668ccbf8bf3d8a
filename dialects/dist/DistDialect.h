//===- DistDialect.h - the dist dialect -------------------------*- C++ -*-===//

#ifndef LOOM_DIALECTS_DIST_DISTDIALECT_H
#define LOOM_DIALECTS_DIST_DISTDIALECT_H

#include "dialects/common/Bounds.h"
#include "dialects/dist/ShardingRule.h"
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

#include "dialects/dist/DistEnums.h.inc"

// The attributes before the dialect, whose helpers return them by value.
#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.h.inc"

#include "dialects/dist/DistDialect.h.inc"

#include "dialects/dist/DistInterfaces.h.inc"

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

/// The name of a parameter part (`#dist.part`): the whole tensor's name
/// and, as Python slices it, the ranges the part holds of the dimensions
/// it cuts, trailing whole dimensions left out: `w_fc[4:8]`,
/// `w_qkv[:, :, 128:256]`.
std::string partName(llvm::StringRef of, llvm::ArrayRef<int64_t> whole,
                     llvm::ArrayRef<int64_t> offsets,
                     llvm::ArrayRef<int64_t> sizes);

/// The role an axis name implies: `dp` data, `tp` tensor, `pp` pipeline.
std::optional<AxisRole> conventionalRole(llvm::StringRef axis);

/// Parses a mesh as loomc's --mesh writes it, `pp=2,dp=4,tp=2`, an axis's
/// role after a colon where its name does not imply one
/// (`stage=2:pipeline`). The error says what is wrong, naming `spec`.
/// The one parser of a mesh spec: `dist-mesh` puts what it returns on the
/// models, and everything after reads it from there.
llvm::Expected<MeshAttr> parseMesh(mlir::MLIRContext *ctx,
                                   llvm::StringRef spec);

/// Whether world rank `rank` of `mesh` runs `op` (and every op around it):
/// `dist.ranks` lists world ranks, `dist.on` mesh coordinates.
bool runsOn(mlir::Operation *op, MeshAttr mesh, int64_t rank);

/// Whether a `dist.on` entry (a coordinate, or an ascending array of them;
/// null: no entry) admits `coordinate`.
bool onAdmits(mlir::Attribute entry, int64_t coordinate);

/// Puts `op` on the ranks whose coordinate on `axis` is one of
/// `coordinates` (`dist.on`; with one coordinate, an index).
void placeOnRanks(mlir::Operation *op, mlir::StringAttr axis,
                  llvm::ArrayRef<int64_t> coordinates);

/// Whether `op` is an all-reduce start deferred past its loop: its results
/// yielded as stacked slices of the loop whose body holds it, and waited
/// after the loop (`dist.wait` on the loop's results).
bool isDeferredStart(mlir::Operation *op);

/// Whether `op` communicates: a collective over mesh axes or one half of a
/// point-to-point transfer (not `dist.shard`, which is local).
bool isCommunication(mlir::Operation *op);

/// The pipeline stage of an op (its `dist.stage`), if it has one.
std::optional<int64_t> stageOf(mlir::Operation *op);

/// Gives `to` the pipeline stage of `from`, if it has one: autodiff's hook
/// (registered by train-autodiff), so a stage runs the backward of its ops.
void copyStage(mlir::Operation *from, mlir::Operation *to);

/// Puts `op` on pipeline stage `stage` of a pipeline over `ranks` ranks of
/// the mesh's pipeline axis: `dist.stage`, and `dist.on`, the ranks that
/// run it.
void placeOnStage(mlir::Operation *op, int64_t stage, int64_t ranks);
} // namespace loom::dist

#endif // LOOM_DIALECTS_DIST_DISTDIALECT_H
