//===- ShardingRule.h - factor-based sharding rules of ops ------*- C++ -*-===//
//
// The data an op's ShardingRuleOpInterface (the dist dialect's, as in Shardy
// the sharding dialect owns it) returns. Modelled on Shardy's
// OpShardingRuleAttr: each dimension of each operand and result is mapped to a
// factor, and each factor has a size and a kind that says what sharding it
// does to the op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_DIST_SHARDINGRULE_H
#define LOOM_DIALECTS_DIST_SHARDINGRULE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <functional>

namespace loom::dist {

/// What sharding a factor along a mesh axis does to the op.
enum class FactorKind {
  /// Operands and results sharded alike; no communication (batch, heads).
  PassThrough,
  /// Contracted or reduced: results without the factor are unreduced
  /// (partial sums) over the axes that shard it.
  Reduction,
  /// Must be replicated (the softmax axis, a normalized dimension).
  NeedReplication,
  /// Contracted by an op whose localization completes the reduction with
  /// collectives of its own (vocab-parallel cross-entropy's classes): it
  /// may be split, and the results are whole.
  ReducedByOp,
};

/// How a partial sum in an operand passes to the results.
enum class Linearity {
  /// Every unreduced operand must be reduced first (relu, softmax, ...).
  None,
  /// Linear in each operand marked in `linearIn` separately: one of them
  /// may be unreduced, and the results are then unreduced the same way
  /// (matmul, mul, a gradient in its `grad` operand).
  PerOperand,
  /// A sum of its operands (add, sub, concat): the results are unreduced
  /// when every operand is unreduced over the same axes.
  Additive,
};

struct OpShardingRule {
  /// Size and kind of each factor.
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<FactorKind> factorKinds;
  /// For each operand, then each result: per dimension the factor it maps to,
  /// or -1 when the dimension belongs to no factor (a size-1 broadcast). A
  /// non-tensor operand has no dimensions. A result is unreduced over the
  /// axes of every sharded factor that operands have and it has not.
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandFactors;
  llvm::SmallVector<llvm::SmallVector<int64_t>> resultFactors;
  Linearity linearity = Linearity::None;
  /// With Linearity::PerOperand, the operands the op is linear in.
  llvm::SmallVector<bool> linearIn;
  /// The op is a sum over its operands of a reduction of each, with no
  /// factor shared between operands (a sum of squares): one axis may shard
  /// a factor of each operand, and the partial results still add up.
  /// Otherwise an axis shards at most one factor of the op.
  bool sumOverOperands = false;
  /// Factors whose padding (the end of a dimension split unevenly) the op
  /// never reads, so it needs no fill first: an embedding looks up only
  /// the rows its ids name.
  llvm::SmallVector<int64_t> paddingUnread;

  bool readsNoPadding(int64_t factor) const {
    return llvm::is_contained(paddingUnread, factor);
  }
};

/// What `dist-partition` tells an op whose local computation must change
/// when it is sharded (a mean's normalisation, a mask's global indices).
struct LocalizeContext {
  /// The op's rule, as it was on the whole tensors.
  const OpShardingRule &rule;
  /// The mesh axes (major to minor) that shard each factor of the rule.
  llvm::ArrayRef<llvm::SmallVector<mlir::StringAttr>> factorAxes;
  /// The op's result types before partitioning.
  llvm::ArrayRef<mlir::Type> globalResultTypes;
  /// The number of ranks over `axes`.
  std::function<int64_t(llvm::ArrayRef<mlir::StringAttr>)> groupSize;
  /// The runtime's group (bit mask over the mesh axes) of `axes`, or a
  /// negative value when the axes are not in mesh order.
  std::function<int64_t(llvm::ArrayRef<mlir::StringAttr>)> groupMask;
  /// Builds the sum of `value` over the ranks of `axes`.
  std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::Value,
                            llvm::ArrayRef<mlir::StringAttr>)>
      allReduce;
  /// Builds the elementwise maximum of `value` over the ranks of `axes`.
  std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::Value,
                            llvm::ArrayRef<mlir::StringAttr>)>
      allReduceMax;
  /// Replaces every use of `from`, a result of the op, with `to`, a new
  /// value split as `from` is (the op rewritten into others).
  std::function<void(mlir::Value from, mlir::Value to)> replace;
};

} // namespace loom::dist

#endif // LOOM_DIALECTS_DIST_SHARDINGRULE_H
