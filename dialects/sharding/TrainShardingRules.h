//===- TrainShardingRules.h - the train ops' sharding rules -----*- C++ -*-===//

#ifndef LOOM_DIALECTS_SHARDING_TRAINSHARDINGRULES_H
#define LOOM_DIALECTS_SHARDING_TRAINSHARDINGRULES_H

#include "mlir/IR/DialectRegistry.h"

namespace loom {
/// Registers the dist dialect's ShardingRuleOpInterface on every train op
/// that has a sharding rule, for the contexts that load both dialects: the
/// tools call it on their registry, and the passes that read the rules on
/// theirs (getDependentDialects).
void registerTrainShardingRules(mlir::DialectRegistry &registry);
} // namespace loom

#endif // LOOM_DIALECTS_SHARDING_TRAINSHARDINGRULES_H
