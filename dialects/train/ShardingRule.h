//===- ShardingRule.h - factor-based sharding rules of ops ------*- C++ -*-===//
//
// The data an op's ShardingRuleOpInterface returns. Modelled on Shardy's
// OpShardingRuleAttr: each dimension of each operand and result is mapped to a
// factor, and each factor has a size and a kind that says what sharding it
// does to the op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_TRAIN_SHARDINGRULE_H
#define LOOM_DIALECTS_TRAIN_SHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"
#include <cstdint>

namespace loom::train {

/// What sharding a factor along a mesh axis does to the op.
enum class FactorKind {
  /// Operands and results sharded alike; no communication (batch, heads).
  PassThrough,
  /// Contracted or reduced: results are unreduced (partial) over the axis.
  Reduction,
  /// Must be replicated (the softmax axis, a normalized dimension).
  NeedReplication,
};

struct OpShardingRule {
  /// Size and kind of each factor.
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<FactorKind> factorKinds;
  /// For each operand, then each result: per dimension the factor it maps to,
  /// or -1 when the dimension belongs to no factor (a size-1 broadcast).
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandFactors;
  llvm::SmallVector<llvm::SmallVector<int64_t>> resultFactors;
};

} // namespace loom::train

#endif // LOOM_DIALECTS_TRAIN_SHARDINGRULE_H
