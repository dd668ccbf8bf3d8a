//===- Sharding.h - what sharding propagation and partitioning share -*- C++
//-*-===//

#ifndef LOOM_PASSES_SHARDING_H
#define LOOM_PASSES_SHARDING_H

#include "dialects/dist/DistDialect.h"
#include "dialects/sharding/TrainShardingRules.h"
#include "dialects/train/TrainDialect.h"

namespace loom::sharding {

/// The rule vocabulary of the dist dialect's ShardingRuleOpInterface, which
/// the sharding passes speak.
using dist::FactorKind;
using dist::Linearity;
using dist::LocalizeContext;
using dist::OpShardingRule;
using dist::ShardingRuleOpInterface;

using Axes = llvm::SmallVector<mlir::StringAttr>;

/// The sharding recorded for `v` (a result or a repeat's block argument),
/// or null.
dist::ShardingAttr getSharding(mlir::Value v);

/// Whether `a` is a prefix of `b`.
bool isPrefix(llvm::ArrayRef<mlir::StringAttr> a,
              llvm::ArrayRef<mlir::StringAttr> b);

/// How strongly a dimension holds its axes in a conflict: an open one
/// (propagated) 1; a closed annotation at least kFrozen, more the higher
/// its priority (p0 the highest).
constexpr int64_t kFrozen = 1000;
inline int64_t annotationStrength(int64_t priority) {
  return kFrozen + (priority >= 0 ? 100 - std::min<int64_t>(priority, 99) : 0);
}

/// The axes that shard each factor of `rule`, given the per-dimension axes
/// of the op's operands and results (null entries: not tensors) and how
/// strongly each holds them (`strength` of tensor t, operands first, and
/// dimension d). Where tensors disagree on a factor the longer of two
/// prefix-compatible lists wins unless a stronger dimension holds the
/// shorter, else the strongest, else the first tensor's; an axis serves one
/// factor only, the one its tensors' summed strengths favour (the first
/// factor on a tie); need-replication factors get none. `conflicts` counts
/// the disagreements.
llvm::SmallVector<Axes>
factorAxes(const dist::OpShardingRule &rule,
           llvm::ArrayRef<const llvm::SmallVector<Axes> *> operandDims,
           llvm::ArrayRef<const llvm::SmallVector<Axes> *> resultDims,
           llvm::function_ref<int64_t(unsigned tensor, int64_t dim)> strength,
           int64_t *conflicts = nullptr);

/// The axes over which result `result` is unreduced because the factors
/// that operands have and it lacks are sharded.
Axes reductionAxes(const dist::OpShardingRule &rule,
                   llvm::ArrayRef<Axes> factorAxes, unsigned result);

/// Each value that a repeat relates to one of its body's block arguments
/// or results: (outer value, block argument or yielded value, whether the
/// outer value has the extra leading stacked dimension).
struct RepeatLink {
  mlir::Value outer, inner;
  bool stacked;
};
llvm::SmallVector<RepeatLink> repeatLinks(train::RepeatOp repeat);

/// Marks `collective`, which reduces `source`, part of the backward's
/// recomputation (`train.recompute`) when `source`'s op is recomputed:
/// Megatron's full recomputation issues the layers' all-reduces again, and
/// the report counts what they send.
void markRecomputed(mlir::Value source, mlir::Operation *collective);

/// The parameter and gradient operands of an optimizer update
/// (`train.sgd_update`, `train.adamw_update`); null for another op.
struct OptimizerUpdate {
  mlir::OpOperand *param = nullptr, *grad = nullptr;
  explicit operator bool() const { return param; }
};
OptimizerUpdate asOptimizerUpdate(mlir::Operation *op);

/// The gradient an update's `grad` operand scales by the clipping factor
/// (a product with a 0-d tensor), or the operand itself.
mlir::Value unclippedGradient(mlir::Value grad);

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_H
