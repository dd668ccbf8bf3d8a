//===- PipelineStages.h - what the pipeline passes share --------*- C++ -*-===//

#ifndef LOOM_PASSES_PIPELINESTAGES_H
#define LOOM_PASSES_PIPELINESTAGES_H

#include "dialects/train/TrainDialect.h"

namespace loom {

/// The pipeline ranks of a model (from its #dist.pipeline), or 0 when it
/// has no pipeline.
int64_t pipelineOf(train::ModelOp model);

/// The mesh's pipeline axis, or an error at the model.
mlir::FailureOr<mlir::StringAttr> pipelineAxis(train::ModelOp model);

/// Every rank runs its stages' ops and holds zeros for the others', so the
/// gradients and the loss are partial sums over the pipeline: one
/// all-reduce over `axis` makes each whole on every rank
/// (dist-pipeline-reduce).
void reduceOverStages(train::ModelOp model, int64_t ranks,
                      mlir::StringAttr axis);

} // namespace loom

#endif // LOOM_PASSES_PIPELINESTAGES_H
