//===- Adjoint.h - reverse-mode differentiation of op sequences -*- C++ -*-===//
//
// The generic core of `train-autodiff`, shared with ops whose backward rule
// differentiates a region (train.repeat): it walks ops backwards and asks
// each for its BackwardOpInterface rule. It never looks at op names.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_TRAIN_ADJOINT_H
#define LOOM_DIALECTS_TRAIN_ADJOINT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace loom::train {

class RepeatOp;

/// The values defined in `block` (its arguments included) that depend on one
/// of `sources` through float-typed data flow.
llvm::DenseSet<mlir::Value> computeActive(mlir::Block &block,
                                          mlir::ValueRange sources);

/// Lets every active op of `block` that has a backward rule prepare for it
/// (BackwardOpInterface::prepareForBackward), then returns the active values
/// again, since prepared ops may have been replaced.
llvm::DenseSet<mlir::Value> prepareForBackward(mlir::RewriterBase &rewriter,
                                               mlir::Block &block,
                                               mlir::ValueRange sources);

/// Builds, at `b`'s insertion point, the adjoint of the non-terminator ops
/// of `block`. On entry `adjoints` holds the seeds; on exit it also holds the
/// gradient of every active value that receives one.
llvm::LogicalResult
backpropagate(mlir::OpBuilder &b, mlir::Block &block,
              const llvm::DenseSet<mlir::Value> &active,
              llvm::DenseMap<mlir::Value, mlir::Value> &adjoints);

/// Erases the ops of `block` whose results nothing reads and that have no
/// effect (a `train.repeat` whose body has none included).
void eraseDeadOps(mlir::Block &block);

/// Drops what repeats that keep residuals (`residuals`) saved and their
/// backward does not read: the backward's stacked operand and the forward's
/// stacked result, in every repeat nested in `root`.
void pruneResiduals(mlir::Operation *root);

/// Re-creates `repeat` with `extra` appended to its stacked operands: its
/// body moves over and gains one slice argument per extra operand, after
/// the other slices (returned in `slices`); the old op's results are
/// replaced and it is erased.
RepeatOp appendStackedOperands(RepeatOp repeat, mlir::ValueRange extra,
                               llvm::SmallVectorImpl<mlir::BlockArgument> &slices);

/// In `loop`'s body, an accumulator `carry + r` where r is a stacked result
/// of an inner loop that nothing else reads (a micro-batch's layer
/// gradients) is computed by the inner loop instead: it reads the carry as
/// one more stacked operand and yields each slice plus its contribution,
/// so the micro-batch's gradients are no tensor of their own and the code
/// generator writes the sum into the accumulator. An accumulator plus a sum
/// (`carry + (x + y)`, a tied parameter's gradients) becomes a chain,
/// `(carry + x) + y`, whose terms the code generator adds in place.
void foldAccumulations(RepeatOp loop);

/// Mixed precision's gradients widened where they are made: in `body`, a
/// widening `train.convert` of a bf16 sum becomes the f32 sum of its
/// widened terms (a tied weight's gradients add in f32, as into
/// Megatron-LM's main_grad), and one of a loop's stacked result that
/// nothing else reads moves into the loop, which yields each slice widened
/// (a layer's weight gradients are f32 tensors from the loop on: their
/// reductions, ZeRO's per-layer reduce-scatters included, move f32).
void widenGradients(mlir::Block &body);

/// a + b, where a null `a` stands for zero.
mlir::Value accumulate(mlir::OpBuilder &b, mlir::Location loc, mlir::Value a,
                       mlir::Value v);

/// A constant zero tensor of `type`.
mlir::Value zerosLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type);

} // namespace loom::train

#endif // LOOM_DIALECTS_TRAIN_ADJOINT_H
