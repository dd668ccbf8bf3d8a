//===- RepeatSplit.h - the surgery of train.repeat --------------*- C++ -*-===//
//
// The one place a `train.repeat` is cut up: a forward loop into
// consecutive runs of its layers (pipeline stages, dist-pipeline-split,
// and rematerialization policies, dist-remat), a loop into two around a
// set of its ops (the backward's input and weight parts,
// dist-pipeline-split-backward), and a loop's stacked operands replaced
// (dist-split-projections). A loop rebuilt with other operands or slices
// is built from its parts (train::RepeatOp::getParts and rebuild).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_REPEATSPLIT_H
#define LOOM_PASSES_REPEATSPLIT_H

#include "dialects/train/TrainDialect.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace loom {

/// Cuts `repeat` into one repeat per run of consecutive layers with the
/// same key (`keys` has one per layer). Each part takes its layers of the
/// stacked operands: of a parameter only the repeat reads, a parameter
/// part of its own (`dist.part`, named after its layers, `w_fc[4:8]`; a
/// part of a part stays a part of the whole), else a slice; it carries
/// what the part before it yields and numbers its iterations from its first
/// layer (a dropout keyed by the layer index draws the same mask).
/// `onPart` is called with each new repeat, its key and its first layer;
/// `onSlice` with each slice and parameter part made for it. Fails on a
/// repeat that is not a forward loop without stacked results.
mlir::LogicalResult splitRepeatIntoRuns(
    train::RepeatOp repeat, llvm::ArrayRef<int64_t> keys,
    llvm::function_ref<void(train::RepeatOp, int64_t key, int64_t first)>
        onPart,
    llvm::function_ref<void(mlir::Operation *, int64_t key)> onSlice);

/// A new parameter, before `b`'s insertion point, that holds the block of
/// `param` at `offsets` of extent `sizes` (`dist.part`, named as Python
/// slices it, `w_fc[4:8]`; a part of a part is a part of the whole):
/// initialization, `--init-from` and `--export` read and write its block of
/// the whole tensor.
train::ParamOp makeParamPart(mlir::OpBuilder &b, train::ParamOp param,
                             llvm::ArrayRef<int64_t> offsets,
                             llvm::ArrayRef<int64_t> sizes);

/// Stacked operands replaced by others, in two steps, so that the body
/// can be rewritten in between: `addStackedSlices` gives the body one
/// block argument (a layer's slice) per stack in `stacks`, after `slice`,
/// the block argument they replace; once nothing reads the old slices,
/// `replaceStacked` erases them and rebuilds the repeat with each old
/// stacked operand replaced by its stacks, in place (`repeat` is erased).
llvm::SmallVector<mlir::BlockArgument>
addStackedSlices(train::RepeatOp repeat, mlir::BlockArgument slice,
                 llvm::ArrayRef<mlir::Value> stacks);
train::RepeatOp replaceStacked(
    train::RepeatOp repeat,
    llvm::ArrayRef<
        std::pair<mlir::BlockArgument, llvm::SmallVector<mlir::Value>>>
        replacements);

/// A loop split in two (splitRepeat): the first part runs before the
/// second; `crossing` are the first part's values the second reads, in the
/// original body.
struct RepeatHalves {
  train::RepeatOp first, second;
  llvm::SmallVector<mlir::Value> crossing;
};

/// Splits `repeat` into a repeat running the ops `firstOps` (closed under
/// operands within the body) and one running the others after it. Carries
/// stay with the part that makes their next value; every value of the
/// first part the second reads becomes a stacked result of the first and
/// a stacked operand of the second, but what `isRecomputable` accepts,
/// which each part recomputes where it needs it.
mlir::FailureOr<RepeatHalves>
splitRepeat(train::RepeatOp repeat,
            const llvm::DenseSet<mlir::Operation *> &firstOps);

/// What each part of a split recomputes where it needs it rather than
/// stack: index arithmetic (a cut loop's iteration offset), and slices and
/// reshapes of what both parts read whole (a stage's slice of the stacked
/// weights).
bool isRecomputable(mlir::Operation *op);

/// Erases the ops of `block` (and of the loops in it, first) that nothing
/// reads and that are trivially dead (train::eraseDeadOps erases a loop
/// only as a whole).
void eraseDeadOpsInLoops(mlir::Block &block);

} // namespace loom

#endif // LOOM_PASSES_REPEATSPLIT_H
