//===- TrainShardingRules.cpp - the sharding rule of every train op -------===//
//
// The dist dialect's ShardingRuleOpInterface, attached to the train ops as
// external models, one rule per op kind, so that dist-sharding-propagation
// and dist-partition never look at op names. A rule maps every dimension to
// a factor (see dialects/dist/ShardingRule.h). This library is the one that
// depends on both dialects: train knows nothing of dist, and dist nothing
// of train's ops.
//
//===----------------------------------------------------------------------===//

#include "dialects/sharding/TrainShardingRules.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"

#include <map>

using namespace mlir;
using namespace loom::train;
using loom::dist::FactorKind;
using loom::dist::Linearity;
using loom::dist::LocalizeContext;
using loom::dist::OpShardingRule;
using loom::dist::ShardingRuleOpInterface;

namespace {

RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// Builds a rule factor by factor.
struct RuleBuilder {
  OpShardingRule rule;
  Operation *op;

  explicit RuleBuilder(Operation *op) : op(op) {
    rule.operandFactors.resize(op->getNumOperands());
    rule.resultFactors.resize(op->getNumResults());
    rule.linearIn.assign(op->getNumOperands(), false);
  }

  int64_t factor(int64_t size, FactorKind kind = FactorKind::PassThrough) {
    rule.factorSizes.push_back(size);
    rule.factorKinds.push_back(kind);
    return int64_t(rule.factorSizes.size()) - 1;
  }

  void needReplication(int64_t f) {
    if (f >= 0)
      rule.factorKinds[f] = FactorKind::NeedReplication;
  }

  SmallVector<int64_t> &operand(unsigned i) { return rule.operandFactors[i]; }
  SmallVector<int64_t> &result(unsigned i) { return rule.resultFactors[i]; }

  /// One factor per dimension of `shape`.
  SmallVector<int64_t> factors(ArrayRef<int64_t> shape,
                               FactorKind kind = FactorKind::PassThrough) {
    SmallVector<int64_t> fs;
    for (int64_t size : shape)
      fs.push_back(factor(size, kind));
    return fs;
  }

  /// Maps `t` onto `reference` (its factors `refFactors`) aligned from the
  /// right, as numpy broadcasting does: a dimension of another size (1)
  /// belongs to no factor.
  static SmallVector<int64_t> align(RankedTensorType t,
                                    ArrayRef<int64_t> refShape,
                                    ArrayRef<int64_t> refFactors) {
    SmallVector<int64_t> fs;
    int64_t offset = int64_t(refShape.size()) - t.getRank();
    for (int64_t d = 0; d < t.getRank(); ++d) {
      int64_t r = d + offset;
      fs.push_back(r >= 0 && t.getDimSize(d) == refShape[r] ? refFactors[r]
                                                            : -1);
    }
    return fs;
  }

  /// Every tensor operand and result aligned from the right with the
  /// tensor `reference`; its last `replicated` dimensions need replication.
  void elementwise(Value reference, int64_t replicated = 0) {
    ArrayRef<int64_t> shape = tensorType(reference).getShape();
    SmallVector<int64_t> fs = factors(shape);
    for (int64_t i = 0; i < replicated && i < int64_t(fs.size()); ++i)
      needReplication(fs[fs.size() - 1 - i]);
    for (OpOperand &o : op->getOpOperands())
      if (auto t = tensorType(o.get()))
        operand(o.getOperandNumber()) = align(t, shape, fs);
    for (OpResult r : op->getResults())
      if (auto t = tensorType(r))
        result(r.getResultNumber()) = align(t, shape, fs);
  }

  void linearIn(std::initializer_list<unsigned> operands) {
    rule.linearity = Linearity::PerOperand;
    for (unsigned i : operands)
      rule.linearIn[i] = true;
  }
  void linearInAll() {
    rule.linearity = Linearity::PerOperand;
    rule.linearIn.assign(op->getNumOperands(), true);
  }
  void additive() { rule.linearity = Linearity::Additive; }
};

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

OpShardingRule ruleOf(MatmulOp op) {
  RuleBuilder b(op);
  RankedTensorType lhs = tensorType(op.getLhs()), rhs = tensorType(op.getRhs());
  int64_t lr = lhs.getRank(), rr = rhs.getRank();
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  SmallVector<int64_t> batch = b.factors(lhs.getShape().drop_back(2));
  int64_t m = b.factor(lhs.getDimSize(tl ? lr - 1 : lr - 2));
  int64_t k =
      b.factor(lhs.getDimSize(tl ? lr - 2 : lr - 1), FactorKind::Reduction);
  int64_t n = b.factor(rhs.getDimSize(tr ? rr - 2 : rr - 1));
  b.operand(0) = batch;
  b.operand(0).append(tl ? SmallVector<int64_t>{k, m}
                         : SmallVector<int64_t>{m, k});
  if (rr > 2)
    b.operand(1) = batch;
  b.operand(1).append(tr ? SmallVector<int64_t>{n, k}
                         : SmallVector<int64_t>{k, n});
  b.result(0) = batch;
  b.result(0).append({m, n});
  b.linearInAll();
  return b.rule;
}

/// Elementwise (with broadcasting): linear in every operand (a product, a
/// scale), additive (a sum), or neither.
template <typename OpT>
OpShardingRule pointwise(OpT op, Linearity linearity = Linearity::None) {
  RuleBuilder b(op);
  b.elementwise(op->getResult(0));
  if (linearity == Linearity::PerOperand)
    b.linearInAll();
  else if (linearity == Linearity::Additive)
    b.additive();
  return b.rule;
}

OpShardingRule ruleOf(AddOp op) { return pointwise(op, Linearity::Additive); }
OpShardingRule ruleOf(SubOp op) { return pointwise(op, Linearity::Additive); }
OpShardingRule ruleOf(MulOp op) { return pointwise(op, Linearity::PerOperand); }
OpShardingRule ruleOf(DivOp op) {
  RuleBuilder b(op);
  b.elementwise(op.getResult());
  b.linearIn({0});
  return b.rule;
}
OpShardingRule ruleOf(ScaleOp op) {
  return pointwise(op, Linearity::PerOperand);
}
OpShardingRule ruleOf(ConvertOp op) {
  return pointwise(op, Linearity::PerOperand);
}

/// The gradient of a pointwise function: linear in `grad`.
template <typename OpT> OpShardingRule pointwiseGrad(OpT op, unsigned grad) {
  RuleBuilder b(op);
  b.elementwise(op->getResult(0));
  b.linearIn({grad});
  return b.rule;
}

// The pointwise families share one rule each.
#define POINTWISE(OP)                                                          \
  OpShardingRule ruleOf(OP op) { return pointwise(op); }
#define POINTWISE_GRAD(OP)                                                     \
  OpShardingRule ruleOf(OP op) { return pointwiseGrad(op, 1); }
POINTWISE(ReluOp)
POINTWISE(GeluOp)
POINTWISE(SiluOp)
POINTWISE(TanhOp)
POINTWISE(ExpOp)
POINTWISE(LogOp)
POINTWISE(SqrtOp)
POINTWISE(RsqrtOp)
POINTWISE_GRAD(ReluGradOp)
POINTWISE_GRAD(GeluGradOp)
POINTWISE_GRAD(SiluGradOp)
POINTWISE_GRAD(TanhGradOp)
#undef POINTWISE
#undef POINTWISE_GRAD

OpShardingRule ruleOf(ReduceOp op) {
  RuleBuilder b(op);
  RankedTensorType in = tensorType(op.getInput());
  bool max = op.getKind() == ReduceKind::max;
  SmallVector<int64_t> fs = b.factors(in.getShape());
  for (int64_t d : op.getDims())
    b.rule.factorKinds[fs[d]] =
        max ? FactorKind::NeedReplication : FactorKind::Reduction;
  b.operand(0) = fs;
  for (auto [d, f] : llvm::enumerate(fs))
    if (!llvm::is_contained(op.getDims(), int64_t(d)))
      b.result(0).push_back(f);
  if (!max)
    b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(BroadcastOp op) {
  RuleBuilder b(op);
  SmallVector<int64_t> fs = b.factors(tensorType(op.getResult()).getShape());
  b.result(0) = fs;
  for (int64_t d : op.getDims())
    b.operand(0).push_back(fs[d]);
  b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(SumToOp op) {
  RuleBuilder b(op);
  RankedTensorType in = tensorType(op.getInput()),
                   out = tensorType(op.getResult());
  SmallVector<int64_t> fs = b.factors(in.getShape(), FactorKind::Reduction);
  b.operand(0) = fs;
  int64_t offset = in.getRank() - out.getRank();
  for (int64_t d = 0; d < out.getRank(); ++d) {
    bool kept = out.getDimSize(d) == in.getDimSize(d + offset);
    if (kept)
      b.rule.factorKinds[fs[d + offset]] = FactorKind::PassThrough;
    b.result(0).push_back(kept ? fs[d + offset] : -1);
  }
  b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(ReduceMaxGradOp op) {
  RuleBuilder b(op);
  RankedTensorType in = tensorType(op.getInput());
  SmallVector<int64_t> fs = b.factors(in.getShape());
  SmallVector<int64_t> kept;
  for (auto [d, f] : llvm::enumerate(fs)) {
    if (llvm::is_contained(op.getDims(), int64_t(d)))
      b.needReplication(f);
    else
      kept.push_back(f);
  }
  b.operand(0) = fs;
  b.operand(1) = kept;
  b.operand(2) = kept;
  b.result(0) = fs;
  b.linearIn({2});
  return b.rule;
}

OpShardingRule ruleOf(SoftmaxOp op) {
  RuleBuilder b(op);
  b.elementwise(op.getResult(), 1);
  return b.rule;
}
OpShardingRule ruleOf(SoftmaxGradOp op) {
  RuleBuilder b(op);
  b.elementwise(op.getResult(), 1);
  b.linearIn({1});
  return b.rule;
}
OpShardingRule ruleOf(CausalMaskOp op) {
  RuleBuilder b(op);
  b.elementwise(op.getResult(), 2);
  return b.rule;
}

/// layer_norm and rms_norm: the normalized (last) dimension is whole.
template <typename OpT> OpShardingRule norm(OpT op) {
  RuleBuilder b(op);
  b.elementwise(op.getInput(), 1);
  return b.rule;
}
OpShardingRule ruleOf(LayerNormOp op) { return norm(op); }
OpShardingRule ruleOf(RmsNormOp op) { return norm(op); }

/// The norms' gradients: the parameter gradients (of the last dimension's
/// size) sum over the leading dimensions, so they are unreduced over the
/// axes that shard those.
template <typename OpT> OpShardingRule normGrad(OpT op) {
  RuleBuilder b(op);
  b.elementwise(op.getInput(), 1);
  b.linearIn({op->getNumOperands() - 1});
  return b.rule;
}
OpShardingRule ruleOf(LayerNormGradOp op) { return normGrad(op); }
OpShardingRule ruleOf(RmsNormGradOp op) { return normGrad(op); }

/// attention and its gradient: [batch, heads, seq, head_dim]; batch and
/// heads split freely, the sequence and head dimensions are whole.
template <typename OpT> OpShardingRule attention(OpT op) {
  RuleBuilder b(op);
  RankedTensorType q = tensorType(op.getQ()), k = tensorType(op.getK());
  int64_t batch = b.factor(q.getDimSize(0)), heads = b.factor(q.getDimSize(1));
  int64_t sq = b.factor(q.getDimSize(2), FactorKind::NeedReplication);
  int64_t sk = b.factor(k.getDimSize(2), FactorKind::NeedReplication);
  int64_t dh = b.factor(q.getDimSize(3), FactorKind::NeedReplication);
  SmallVector<int64_t> query{batch, heads, sq, dh}, key{batch, heads, sk, dh};
  for (OpOperand &o : op->getOpOperands())
    b.operand(o.getOperandNumber()) = o.getOperandNumber() == 0 ? query : key;
  if (op->getNumOperands() == 4)
    b.operand(3) = query;
  for (OpResult r : op->getResults())
    b.result(r.getResultNumber()) = r.getResultNumber() == 0 ? query : key;
  return b.rule;
}
OpShardingRule ruleOf(AttentionOp op) { return attention(op); }
OpShardingRule ruleOf(AttentionGradOp op) {
  OpShardingRule rule = attention(op);
  rule.linearity = Linearity::PerOperand;
  rule.linearIn = {false, false, false, true};
  return rule;
}

OpShardingRule ruleOf(EmbeddingOp op) {
  RuleBuilder b(op);
  RankedTensorType table = tensorType(op.getTable()),
                   ids = tensorType(op.getIds());
  // The rows a rank holds of a table split by rows (vocab-parallel) give
  // zeros for the ids outside them: the ranks' results sum to the lookup.
  int64_t vocab = b.factor(table.getDimSize(0), FactorKind::Reduction);
  int64_t dim = b.factor(table.getDimSize(1));
  SmallVector<int64_t> lead = b.factors(ids.getShape());
  b.operand(0) = {vocab, dim};
  b.operand(1) = lead;
  b.result(0) = lead;
  b.result(0).push_back(dim);
  b.linearIn({0});
  b.rule.paddingUnread.push_back(vocab);
  return b.rule;
}

OpShardingRule ruleOf(EmbeddingGradOp op) {
  RuleBuilder b(op);
  RankedTensorType ids = tensorType(op.getIds()),
                   out = tensorType(op.getResult());
  SmallVector<int64_t> lead = b.factors(ids.getShape(), FactorKind::Reduction);
  // A rank may compute only its block of the table's rows.
  int64_t vocab = b.factor(out.getDimSize(0));
  int64_t dim = b.factor(out.getDimSize(1));
  b.operand(0) = lead;
  b.operand(1) = lead;
  b.operand(1).push_back(dim);
  b.result(0) = {vocab, dim};
  b.linearIn({1});
  return b.rule;
}

/// The labels' dimensions are the logits' leading ones. The classes may be
/// split (Megatron-LM's vocab-parallel cross-entropy): the op's
/// localization reduces the softmax's statistics over them itself.
template <typename OpT> RuleBuilder crossEntropy(OpT op, FactorKind leadKind) {
  RuleBuilder b(op);
  RankedTensorType labels = tensorType(op.getLabels()),
                   logits = tensorType(op.getLogits());
  SmallVector<int64_t> lead = b.factors(labels.getShape(), leadKind);
  int64_t classes = b.factor(logits.getShape().back(), FactorKind::ReducedByOp);
  b.operand(0) = lead;
  b.operand(0).push_back(classes);
  b.operand(1) = lead;
  return b;
}

OpShardingRule ruleOf(CrossEntropyOp op) {
  return crossEntropy(op, FactorKind::Reduction).rule;
}
OpShardingRule ruleOf(CrossEntropyGradOp op) {
  RuleBuilder b = crossEntropy(op, FactorKind::PassThrough);
  b.result(0) = b.operand(0);
  b.linearIn({2});
  return b.rule;
}
OpShardingRule ruleOf(LabelCountOp op) {
  RuleBuilder b(op);
  b.operand(0) =
      b.factors(tensorType(op.getLabels()).getShape(), FactorKind::Reduction);
  return b.rule;
}

OpShardingRule ruleOf(DropoutOp op) {
  return pointwise(op, Linearity::PerOperand);
}

/// A reshape splits and merges groups of dimensions whose sizes multiply to
/// the same number. A dimension that maps to one dimension keeps its factor;
/// in a group, only the major dimension carries the sharding across (a
/// block of the merged dimension is a block of its major part), and the
/// minor ones must be whole.
OpShardingRule ruleOf(ReshapeOp op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> in = tensorType(op.getInput()).getShape();
  ArrayRef<int64_t> out = tensorType(op.getResult()).getShape();
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // Size-1 dimensions belong to no group.
    if (i < in.size() && in[i] == 1) {
      b.operand(0).push_back(-1);
      ++i;
      continue;
    }
    if (o < out.size() && out[o] == 1) {
      b.result(0).push_back(-1);
      ++o;
      continue;
    }
    if (i >= in.size() || o >= out.size())
      break;
    int64_t major = b.factor(std::min(in[i], out[o]));
    int64_t pi = in[i], po = out[o];
    bool single = pi == po;
    b.operand(0).push_back(pi == std::min(pi, po) || single ? major : -1);
    b.result(0).push_back(po == std::min(pi, po) || single ? major : -1);
    if (!single) {
      // The group's larger side maps to the major factor too; the
      // remaining dimensions of the group must stay whole.
      if (pi > po)
        b.operand(0).back() = major;
      else
        b.result(0).back() = major;
    }
    ++i;
    ++o;
    while (pi != po) {
      if (pi < po) {
        pi *= in[i];
        b.operand(0).push_back(b.factor(in[i], FactorKind::NeedReplication));
        ++i;
      } else {
        po *= out[o];
        b.result(0).push_back(b.factor(out[o], FactorKind::NeedReplication));
        ++o;
      }
    }
  }
  b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(TransposeOp op) {
  RuleBuilder b(op);
  SmallVector<int64_t> fs = b.factors(tensorType(op.getInput()).getShape());
  b.operand(0) = fs;
  for (int64_t p : op.getPermutation())
    b.result(0).push_back(fs[p]);
  b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(SliceOp op) {
  RuleBuilder b(op);
  RankedTensorType in = tensorType(op.getInput());
  b.elementwise(op.getInput());
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (op.getSizes()[d] != in.getDimSize(d))
      b.operand(0)[d] = b.result(0)[d] =
          b.factor(in.getDimSize(d), FactorKind::NeedReplication);
  b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(PadOp op) {
  RuleBuilder b(op);
  RankedTensorType in = tensorType(op.getInput());
  b.elementwise(op.getResult());
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (op.getLow()[d] || op.getHigh()[d]) {
      b.operand(0)[d] = b.factor(in.getDimSize(d), FactorKind::NeedReplication);
      b.result(0)[d] = b.factor(tensorType(op.getResult()).getDimSize(d),
                                FactorKind::NeedReplication);
    }
  b.linearInAll();
  return b.rule;
}

OpShardingRule ruleOf(ConcatOp op) {
  RuleBuilder b(op);
  RankedTensorType out = tensorType(op.getResult());
  SmallVector<int64_t> fs = b.factors(out.getShape());
  for (OpOperand &o : op->getOpOperands()) {
    SmallVector<int64_t> own = fs;
    own[op.getAxis()] = b.factor(tensorType(o.get()).getDimSize(op.getAxis()),
                                 FactorKind::NeedReplication);
    b.operand(o.getOperandNumber()) = own;
  }
  b.needReplication(fs[op.getAxis()]);
  b.result(0) = fs;
  b.additive();
  return b.rule;
}

/// Scalars: nothing to shard.
template <typename OpT> OpShardingRule scalar(OpT op) {
  return RuleBuilder(op).rule;
}
OpShardingRule ruleOf(LrScheduleOp op) { return scalar(op); }
OpShardingRule ruleOf(ClipFactorOp op) { return scalar(op); }

/// A sum of squares reduces every dimension of every operand: each operand
/// has its own factors, so gradients split over different axes (or not at
/// all) meet in one op, and its result is a partial sum over every axis
/// that splits any of them (one scalar all-reduce completes it).
OpShardingRule ruleOf(SumSquaresOp op) {
  RuleBuilder b(op);
  for (OpOperand &o : op->getOpOperands())
    b.operand(o.getOperandNumber()) =
        b.factors(tensorType(o.get()).getShape(), FactorKind::Reduction);
  b.rule.sumOverOperands = true;
  return b.rule;
}

OpShardingRule ruleOf(SGDUpdateOp op) { return pointwise(op); }
OpShardingRule ruleOf(AdamWUpdateOp op) { return pointwise(op); }

//===----------------------------------------------------------------------===//
// Localization: ops whose local computation differs from the global one
//===----------------------------------------------------------------------===//

/// The axes that shard the dimensions of operand `operand`.
SmallVector<StringAttr> axesOf(const LocalizeContext &ctx, unsigned operand) {
  SmallVector<StringAttr> axes;
  for (int64_t f : ctx.rule.operandFactors[operand])
    if (f >= 0)
      axes.append(ctx.factorAxes[f].begin(), ctx.factorAxes[f].end());
  return axes;
}

/// A cross-entropy over a rank's block of the positions is the mean over
/// that block's labelled tokens; weighted by the block's share of all the
/// labelled tokens, the ranks' values sum to the mean over all of them.
/// The share of `op`'s labels that a cross-entropy of the same labels
/// computed before `op` in its block (the forward's, for its gradient): the
/// division of their count by its sum over `axes`; null where none did.
template <typename OpT>
Value earlierLabelShare(OpT op, ArrayRef<StringAttr> axes) {
  auto before = [&](Operation *other) {
    return other->getBlock() == op->getBlock() && other->isBeforeInBlock(op);
  };
  for (Operation *user : op.getLabels().getUsers()) {
    auto count = dyn_cast<LabelCountOp>(user);
    if (!count || !before(count) ||
        count.getIgnoreIndex() != op.getIgnoreIndex())
      continue;
    for (Operation *countUser : count->getUsers()) {
      auto div = dyn_cast<DivOp>(countUser);
      auto total =
          div ? div.getRhs().getDefiningOp<loom::dist::AllReduceOp>()
              : loom::dist::AllReduceOp();
      if (div && before(div) && div.getLhs() == count.getResult() && total &&
          total.getInput() == count.getResult() && !total.getMax() &&
          llvm::equal(total.getAxes().getAsRange<StringAttr>(), axes))
        return div.getResult();
    }
  }
  return Value();
}

template <typename OpT>
Value labelShare(OpT op, OpBuilder &b, const LocalizeContext &ctx,
                 ArrayRef<StringAttr> axes) {
  // The forward's share where it reduced it before this op in the same
  // block (one label count and one all-reduce per step, not two).
  if (Value share = earlierLabelShare(op, axes))
    return share;
  Location loc = op.getLoc();
  Value count =
      LabelCountOp::create(b, loc, op.getLabels(), op.getIgnoreIndexAttr());
  Value total = ctx.allReduce(b, loc, count, axes);
  return DivOp::create(b, loc, count, total);
}

/// The softmax's statistics per position of a cross-entropy whose
/// classes `axes` split: the maximum, the sum of exp(logit - max) and,
/// with `withTarget`, the label's logit, each all-reduced over the axes.
struct SoftmaxStats {
  Value max, sum, target;
};
template <typename OpT>
FailureOr<SoftmaxStats>
vocabParallelStats(OpT op, OpBuilder &b, const LocalizeContext &ctx,
                   ArrayRef<StringAttr> axes, bool withTarget) {
  int64_t group = ctx.groupMask(axes);
  if (group < 0)
    return op.emitOpError("splits the classes over axes not in mesh order; "
                          "their block cannot be found at run time");
  Location loc = op.getLoc();
  int64_t last = tensorType(op.getLogits()).getRank() - 1;
  Value localMax = ReduceOp::create(b, loc, op.getLogits(), ReduceKind::max,
                                    ArrayRef<int64_t>{last});
  // The statistics are f32 whatever the logits' type: they are reduced
  // over the vocabulary's ranks before the loss is taken.
  if (!cast<RankedTensorType>(localMax.getType()).getElementType().isF32())
    localMax = ConvertOp::create(b, loc, localMax,
                                 TypeAttr::get(b.getF32Type()));
  SoftmaxStats stats;
  stats.max = ctx.allReduceMax(b, loc, localMax, axes);
  int64_t classes = ctx.rule.factorSizes[ctx.rule.operandFactors[0].back()];
  int64_t padded = classes % ctx.groupSize(axes) != 0 ? classes : int64_t(0);
  auto local = CrossEntropyStatsOp::create(
      b, loc, stats.max.getType(), stats.max.getType(), op.getLogits(),
      op.getLabels(), stats.max, op.getIgnoreIndex(), group, padded);
  stats.sum = ctx.allReduce(b, loc, local.getSum(), axes);
  if (withTarget)
    stats.target = ctx.allReduce(b, loc, local.getTarget(), axes);
  return stats;
}

/// The statistics the vocab-parallel forward of `grad`'s loss reduced:
/// a `train.cross_entropy_stats` of the same logits and labels before
/// `grad` in its block, its maximum and its all-reduced sum.
FailureOr<SoftmaxStats> forwardStats(CrossEntropyGradOp grad,
                                     ArrayRef<StringAttr> axes) {
  for (Operation *user : grad.getLogits().getUsers()) {
    auto stats = dyn_cast<CrossEntropyStatsOp>(user);
    if (!stats || stats->getBlock() != grad->getBlock() ||
        !stats->isBeforeInBlock(grad) ||
        stats.getLabels() != grad.getLabels() ||
        stats.getIgnoreIndex() != grad.getIgnoreIndex())
      continue;
    for (Operation *reduce : stats.getSum().getUsers()) {
      auto sum = dyn_cast<loom::dist::AllReduceOp>(reduce);
      if (sum && !sum.getMax() &&
          llvm::equal(sum.getAxes().getAsRange<StringAttr>(), axes))
        return SoftmaxStats{stats.getMax(), sum.getResult(), Value()};
    }
  }
  return failure();
}

/// The classes' axes of a cross-entropy (its logits' last dimension).
SmallVector<StringAttr> classAxes(const LocalizeContext &ctx) {
  return ctx.factorAxes[ctx.rule.operandFactors[0].back()];
}

/// Split classes: the loss from the all-reduced statistics (Megatron-LM's
/// vocab-parallel cross-entropy). Split positions: each rank's mean over
/// its block of the positions, weighted by its share of the labelled ones.
LogicalResult localize(CrossEntropyOp op, OpBuilder &b,
                       const LocalizeContext &ctx) {
  Value loss = op.getResult();
  SmallVector<StringAttr> classes = classAxes(ctx);
  if (!classes.empty()) {
    FailureOr<SoftmaxStats> stats =
        vocabParallelStats(op, b, ctx, classes, /*withTarget=*/true);
    if (failed(stats))
      return failure();
    loss = CrossEntropyFromStatsOp::create(
        b, op.getLoc(), op.getType(), stats->max, stats->sum, stats->target,
        op.getLabels(), op.getIgnoreIndex());
  }
  SmallVector<StringAttr> axes = axesOf(ctx, 1);
  Value result = loss;
  if (!axes.empty()) {
    Value share = labelShare(op, b, ctx, axes);
    result = MulOp::create(b, op.getLoc(), loss, share);
  }
  if (result == op.getResult())
    return success();
  op.getResult().replaceAllUsesExcept(result, result.getDefiningOp());
  if (loss != op.getResult())
    op.erase();
  return success();
}

LogicalResult localize(CrossEntropyGradOp op, OpBuilder &b,
                       const LocalizeContext &ctx) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(op);
  SmallVector<StringAttr> axes = axesOf(ctx, 1);
  if (!axes.empty()) {
    Value share = labelShare(op, b, ctx, axes);
    op.getGradMutable().assign(
        MulOp::create(b, op.getLoc(), op.getGrad(), share));
  }
  SmallVector<StringAttr> classes = classAxes(ctx);
  if (classes.empty())
    return success();
  // The forward's statistics where it reduced them before this op in the
  // same block (as Megatron-LM keeps them), else computed again.
  FailureOr<SoftmaxStats> stats = forwardStats(op, classes);
  if (failed(stats))
    stats = vocabParallelStats(op, b, ctx, classes, /*withTarget=*/false);
  if (failed(stats))
    return failure();
  auto grad = CrossEntropyGradFromStatsOp::create(
      b, op.getLoc(), op.getType(), op.getLogits(), op.getLabels(),
      op.getGrad(), stats->max, stats->sum, op.getIgnoreIndex(),
      ctx.groupMask(classes));
  ctx.replace(op.getResult(), grad.getResult());
  op.erase();
  return success();
}

/// A mean over a sharded dimension is the local mean times the block's
/// share of the whole dimension (1 / the number of blocks where they
/// divide it; a padded block's padding is filled with zeros before).
LogicalResult localize(ReduceOp op, OpBuilder &b, const LocalizeContext &ctx) {
  if (op.getKind() != ReduceKind::mean)
    return success();
  double share = 1.0;
  bool split = false;
  RankedTensorType local = tensorType(op.getInput());
  for (int64_t d : op.getDims()) {
    int64_t f = ctx.rule.operandFactors[0][d];
    if (ctx.groupSize(ctx.factorAxes[f]) == 1)
      continue;
    split = true;
    share *= double(local.getDimSize(d)) / double(ctx.rule.factorSizes[f]);
  }
  if (!split)
    return success();
  auto scaled =
      ScaleOp::create(b, op.getLoc(), op.getResult(), b.getF64FloatAttr(share));
  op.getResult().replaceAllUsesExcept(scaled, scaled);
  return success();
}

/// The scalar all-reduce after a sum of squares adds every rank's part
/// over the axes that split any operand; an operand that some of those
/// axes do not split is whole on each of their ranks and would be counted
/// once per rank. The operands are grouped by the axes they are replicated
/// over, and each group's sum is counted by the first rank of that group
/// only, as Megatron-LM counts a tensor-parallel duplicate on tensor rank
/// 0 only.
LogicalResult localize(SumSquaresOp op, OpBuilder &b,
                       const LocalizeContext &ctx) {
  SmallVector<StringAttr> all;
  for (unsigned i = 0, e = op->getNumOperands(); i < e; ++i)
    for (StringAttr a : axesOf(ctx, i))
      if (!llvm::is_contained(all, a))
        all.push_back(a);
  if (all.empty())
    return success();
  // Operands by the group mask of the axes they are replicated over.
  std::map<int64_t, SmallVector<Value>> byGroup;
  for (auto [i, v] : llvm::enumerate(op.getInputs())) {
    SmallVector<StringAttr> own = axesOf(ctx, i);
    int64_t mask = 0;
    for (StringAttr a : all)
      if (!llvm::is_contained(own, a)) {
        int64_t m = ctx.groupMask({a});
        if (m < 0)
          return op.emitOpError("cannot count a replicated operand once over ")
                 << a;
        mask |= m;
      }
    byGroup[mask].push_back(v);
  }
  if (byGroup.size() == 1 && byGroup.begin()->first == 0)
    return success();
  // The op keeps the first group; each other group gets its own sum,
  // added after it.
  auto first = byGroup.begin();
  op.getInputsMutable().assign(first->second);
  op.setReplicaGroup(first->first);
  Value total = op.getResult();
  Operation *firstAdd = nullptr;
  for (auto it = std::next(first); it != byGroup.end(); ++it) {
    auto part = SumSquaresOp::create(b, op.getLoc(), it->second,
                                     b.getI64IntegerAttr(it->first));
    auto add = AddOp::create(b, op.getLoc(), total, part);
    if (!firstAdd)
      firstAdd = add;
    total = add;
  }
  if (firstAdd)
    op.getResult().replaceAllUsesExcept(total, firstAdd);
  return success();
}

/// The mask is keyed by the element's index in the whole tensor.
LogicalResult localize(DropoutOp op, OpBuilder &b, const LocalizeContext &ctx) {
  SmallVector<int64_t> groups;
  bool sharded = false;
  for (int64_t f : ctx.rule.resultFactors[0]) {
    int64_t mask = ctx.groupMask(ctx.factorAxes[f]);
    if (mask < 0)
      return op.emitOpError("is sharded over axes ")
             << ctx.factorAxes[f].size()
             << " not in mesh order; its mask cannot be keyed by global "
                "indices";
    sharded |= mask != 0;
    groups.push_back(mask);
  }
  if (!sharded)
    return success();
  op.setGlobalShape(
      cast<RankedTensorType>(ctx.globalResultTypes[0]).getShape());
  op.setShardGroups(groups);
  return success();
}

/// A table split by rows (vocab-parallel): the lookup gives zeros for ids
/// outside the rank's rows (its results are partial sums over the split's
/// axes), and the gradient is the rank's rows only. `vocab` is the table's
/// row factor.
template <typename OpT>
LogicalResult localizeVocab(OpT op, const LocalizeContext &ctx, int64_t vocab) {
  int64_t mask = ctx.groupMask(ctx.factorAxes[vocab]);
  if (mask < 0)
    return op.emitOpError("splits the table's rows over axes not in mesh "
                          "order; their block cannot be found at run time");
  op.setVocabGroup(mask);
  return success();
}
LogicalResult localize(EmbeddingOp op, OpBuilder &,
                       const LocalizeContext &ctx) {
  int64_t vocab = ctx.rule.operandFactors[0][0];
  int64_t size = ctx.rule.factorSizes[vocab];
  if (size % ctx.groupSize(ctx.factorAxes[vocab]) != 0)
    op.setVocabSize(size);
  return localizeVocab(op, ctx, vocab);
}
LogicalResult localize(EmbeddingGradOp op, OpBuilder &,
                       const LocalizeContext &ctx) {
  return localizeVocab(op, ctx, ctx.rule.resultFactors[0][0]);
}

/// A slice keeps whole the dimensions it cuts; the others are the block's.
LogicalResult localize(SliceOp op, OpBuilder &, const LocalizeContext &) {
  op.setSizes(tensorType(op.getResult()).getShape());
  return success();
}

template <typename OpT>
LogicalResult localize(OpT, OpBuilder &, const LocalizeContext &) {
  return success();
}

template <typename OpT>
struct RuleModel
    : public ShardingRuleOpInterface::ExternalModel<RuleModel<OpT>, OpT> {
  OpShardingRule getShardingRule(Operation *op) const {
    return ruleOf(cast<OpT>(op));
  }
  LogicalResult localize(Operation *op, OpBuilder &b,
                         const LocalizeContext &ctx) const {
    return ::localize(cast<OpT>(op), b, ctx);
  }
};

template <typename... OpTs> void attach(MLIRContext *ctx) {
  (OpTs::template attachInterface<RuleModel<OpTs>>(*ctx), ...);
}

} // namespace

void loom::registerTrainShardingRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, TrainDialect *,
                            loom::dist::DistDialect *) {
    attach<MatmulOp, AddOp, SubOp, MulOp, DivOp, ReluOp, GeluOp, SiluOp, TanhOp,
         ExpOp, LogOp, SqrtOp, RsqrtOp, ScaleOp, ConvertOp, ReduceOp,
         BroadcastOp, SumToOp, ReduceMaxGradOp, SoftmaxOp, SoftmaxGradOp,
         LayerNormOp, LayerNormGradOp, RmsNormOp, RmsNormGradOp, AttentionOp,
         CausalMaskOp, AttentionGradOp, EmbeddingOp, EmbeddingGradOp,
         CrossEntropyOp, CrossEntropyGradOp, LabelCountOp, DropoutOp, ReshapeOp,
         TransposeOp, SliceOp, PadOp, ConcatOp, LrScheduleOp, SumSquaresOp,
         ClipFactorOp, SGDUpdateOp, AdamWUpdateOp, ReluGradOp, GeluGradOp,
         SiluGradOp, TanhGradOp>(ctx);
  });
}
