//===- RepeatSplit.h - cutting a layer loop into runs of layers -*- C++ -*-===//
//
// The one place a forward `train.repeat` is cut into consecutive runs of
// its layers: pipeline stages (dist-pipeline-split) and rematerialization
// policies (dist-remat) both cut a layer loop this way.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_REPEATSPLIT_H
#define LOOM_PASSES_REPEATSPLIT_H

#include "dialects/train/TrainDialect.h"

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

} // namespace loom

#endif // LOOM_PASSES_REPEATSPLIT_H
