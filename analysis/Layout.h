//===- Layout.h - the persistent tensors of a trained model -----*- C++ -*-===//
//
// What the runtime owns for a model: parameters, optimizer state, inputs, the
// step counter and the loss (the program's tensor table), which optimizer
// results overwrite their inputs in place, and which ops each generated
// function runs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_LAYOUT_H
#define LOOM_ANALYSIS_LAYOUT_H

#include "dialects/train/TrainDialect.h"

#include <string>

namespace loom::analysis {

struct TensorEntry {
  std::string name;
  /// loomrt_role.
  int32_t role = 0;
  mlir::RankedTensorType type;
  int32_t init = 0;
  double initValue = 0.0;
  /// For integer inputs: the exclusive bound of their values, 0 if unknown.
  int64_t bound = 0;
  /// For a tensor stored as a rank's block: the whole tensor's shape and,
  /// per dimension, the runtime group that selects the block; empty
  /// otherwise.
  llvm::SmallVector<int64_t> globalShape, shardGroups;
  /// For one stage's part of a stacked parameter (dist.part): the whole
  /// tensor's name, shape, and where the part starts in it; empty
  /// otherwise.
  std::string partOf;
  llvm::SmallVector<int64_t> partWhole, partOffsets;
  /// The ranks that hold it: every rank (-1), or those whose coordinate c
  /// on mesh axis `heldAxis` has bit c of `heldMask` set (a pipeline
  /// stage's parameters and their optimizer state).
  int32_t heldAxis = -1;
  int64_t heldMask = 0;
};

struct ModelLayout {
  std::vector<TensorEntry> tensors;
  int32_t lossIndex = -1;
  /// For the training step: values in the tensor table, including optimizer
  /// results written in place over the value they update.
  llvm::DenseMap<mlir::Value, int64_t> stepPersistent;
  /// For evaluation: parameters, state, inputs and the step counter only.
  llvm::DenseMap<mlir::Value, int64_t> evalPersistent;
  /// Updates that are not in place: (tensor index, new value), copied at the
  /// end of the step.
  llvm::SmallVector<std::pair<int64_t, mlir::Value>> copiedUpdates;
  /// The ops each function runs: every op of the model for the step; for
  /// the evaluation, the ops the loss depends on, at every depth (a loop's
  /// body ops that compute no part of the loss are left out).
  llvm::DenseSet<mlir::Operation *> stepOps, evalOps;
};

/// Fails with a diagnostic on the model when it is not a full training step.
llvm::FailureOr<ModelLayout> layoutModel(loom::train::ModelOp model);

/// The ops the evaluation runs, at every depth: those the loss depends on
/// (of a loop that also computes gradients, only the forward), and in every
/// block they reach the ops that return nothing (a pipeline's sends, which
/// the receives they pair with need), until nothing more is needed.
llvm::DenseSet<mlir::Operation *> evaluationOps(loom::train::ModelOp model);

} // namespace loom::analysis

#endif // LOOM_ANALYSIS_LAYOUT_H
