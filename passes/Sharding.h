//===- Sharding.h - what sharding propagation and partitioning share -*- C++ -*-===//

#ifndef LOOM_PASSES_SHARDING_H
#define LOOM_PASSES_SHARDING_H

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"

namespace loom::sharding {

using Axes = llvm::SmallVector<mlir::StringAttr>;

/// The attribute names: per result of an op, and per block argument (but
/// the index) of a train.repeat's body.
constexpr llvm::StringLiteral kShardingAttr = "dist.sharding";
constexpr llvm::StringLiteral kArgShardingsAttr = "dist.arg_shardings";

/// The sharding recorded for `v` (a result or a repeat's block argument),
/// or null.
dist::ShardingAttr getSharding(mlir::Value v);

/// Whether `a` is a prefix of `b`.
bool isPrefix(llvm::ArrayRef<mlir::StringAttr> a,
              llvm::ArrayRef<mlir::StringAttr> b);

/// The axes that shard each factor of `rule`, given the per-dimension axes
/// of the op's operands and results (null entries: not tensors). Where
/// tensors disagree on a factor the longer of two prefix-compatible lists
/// wins, else the first tensor's (in operand, then result order), unless
/// another's is frozen; an axis serves one factor only; need-replication
/// factors get none. `conflicts` counts the disagreements.
llvm::SmallVector<Axes>
factorAxes(const train::OpShardingRule &rule,
           llvm::ArrayRef<const llvm::SmallVector<Axes> *> operandDims,
           llvm::ArrayRef<const llvm::SmallVector<Axes> *> resultDims,
           llvm::function_ref<bool(unsigned tensor, int64_t dim)> frozen,
           int64_t *conflicts = nullptr);

/// The axes over which result `result` is unreduced because the factors
/// that operands have and it lacks are sharded.
Axes reductionAxes(const train::OpShardingRule &rule,
                   llvm::ArrayRef<Axes> factorAxes, unsigned result);

/// Each value that a repeat relates to one of its body's block arguments
/// or results: (outer value, block argument or yielded value, whether the
/// outer value has the extra leading stacked dimension).
struct RepeatLink {
  mlir::Value outer, inner;
  bool stacked;
};
llvm::SmallVector<RepeatLink> repeatLinks(train::RepeatOp repeat);

} // namespace loom::sharding

#endif // LOOM_PASSES_SHARDING_H
