//===- Sharding.cpp - what sharding propagation and partitioning share ----===//

#include "passes/Sharding.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace loom::sharding {

dist::ShardingAttr getSharding(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    auto all = owner ? dist::attrs(owner).getArgShardingsAttrHelper().getAttr(
                           owner)
                     : ArrayAttr();
    if (!all || arg.getArgNumber() == 0 || arg.getArgNumber() > all.size())
      return {};
    return dyn_cast<dist::ShardingAttr>(all[arg.getArgNumber() - 1]);
  }
  auto result = cast<OpResult>(v);
  Operation *owner = result.getOwner();
  auto all = dist::attrs(owner).getShardingAttrHelper().getAttr(owner);
  if (!all || result.getResultNumber() >= all.size())
    return {};
  return dyn_cast<dist::ShardingAttr>(all[result.getResultNumber()]);
}

bool isPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  return a.size() <= b.size() && a == b.take_front(a.size());
}

SmallVector<Axes> factorAxes(const OpShardingRule &rule,
                             ArrayRef<const SmallVector<Axes> *> operandDims,
                             ArrayRef<const SmallVector<Axes> *> resultDims,
                             function_ref<int64_t(unsigned, int64_t)> strength,
                             int64_t *conflicts) {
  size_t numFactors = rule.factorSizes.size();
  SmallVector<Axes> axes(numFactors);
  // The strength of the dimension each factor's axes come from.
  SmallVector<int64_t> held(numFactors, 0);
  // How strongly the tensors hold each (factor, axis), summed.
  DenseMap<std::pair<int64_t, StringAttr>, int64_t> support;
  unsigned tensor = 0;
  auto visit = [&](ArrayRef<SmallVector<int64_t>> factors,
                   ArrayRef<const SmallVector<Axes> *> dims) {
    for (auto [fs, ds] : llvm::zip(factors, dims)) {
      unsigned t = tensor++;
      if (!ds)
        continue;
      for (auto [d, f] : llvm::enumerate(fs)) {
        if (f < 0 || d >= ds->size() ||
            rule.factorKinds[f] == FactorKind::NeedReplication)
          continue;
        const Axes &have = (*ds)[d];
        int64_t s = strength(t, int64_t(d));
        for (StringAttr a : have)
          support[{f, a}] += s;
        Axes &cand = axes[f];
        if (isPrefix(cand, have)) {
          if (held[f] < kFrozen || s >= held[f]) {
            cand = have;
            held[f] = std::max(held[f], s);
          }
        } else if (isPrefix(have, cand)) {
          held[f] = std::max(held[f], std::min(s, kFrozen - 1));
        } else {
          if (conflicts)
            ++*conflicts;
          if (s > held[f]) {
            cand = have;
            held[f] = s;
          }
        }
      }
    }
  };
  visit(rule.operandFactors, operandDims);
  visit(rule.resultFactors, resultDims);
  // An axis shards one factor of an op (of each operand, for a sum over
  // operands): the factor its tensors' summed strengths favour (a frozen
  // one above all) keeps it, the first on a tie; the others keep their
  // axes before it.
  SmallVector<int64_t> groupOf(numFactors, 0);
  if (rule.sumOverOperands)
    for (auto [i, fs] : llvm::enumerate(rule.operandFactors))
      for (int64_t f : fs)
        if (f >= 0)
          groupOf[f] = int64_t(i);
  auto owner = [&](StringAttr a, int64_t group) {
    int64_t best = -1, most = 0;
    for (int64_t f = 0, e = numFactors; f < e; ++f)
      if (groupOf[f] == group && llvm::is_contained(axes[f], a) &&
          support.lookup({f, a}) > most) {
        best = f;
        most = support.lookup({f, a});
      }
    return best;
  };
  SmallVector<size_t> keeps;
  for (int64_t f = 0, e = numFactors; f < e; ++f) {
    size_t keep = 0;
    while (keep < axes[f].size() && owner(axes[f][keep], groupOf[f]) == f)
      ++keep;
    keeps.push_back(keep);
  }
  for (auto [cand, keep] : llvm::zip(axes, keeps))
    cand.resize(keep);
  return axes;
}

Axes reductionAxes(const OpShardingRule &rule, ArrayRef<Axes> factorAxes,
                   unsigned result) {
  Axes out;
  ArrayRef<int64_t> own = rule.resultFactors[result];
  for (ArrayRef<int64_t> fs : rule.operandFactors)
    for (int64_t f : fs)
      if (f >= 0 && !llvm::is_contained(own, f) &&
          rule.factorKinds[f] != FactorKind::ReducedByOp)
        for (StringAttr a : factorAxes[f])
          if (!llvm::is_contained(out, a))
            out.push_back(a);
  return out;
}

SmallVector<RepeatLink> repeatLinks(RepeatOp repeat) {
  SmallVector<RepeatLink> links;
  Block &body = repeat.getBodyBlock();
  YieldOp yield = repeat.getYield();
  unsigned arg = 1;
  for (auto [i, init] : llvm::enumerate(repeat.getCarries())) {
    Value inner = body.getArgument(arg++);
    links.push_back({init, inner, false});
    links.push_back({repeat.getCarryResults()[i], inner, false});
    links.push_back({yield.getCarries()[i], inner, false});
  }
  for (Value s : repeat.getStacked())
    links.push_back({s, body.getArgument(arg++), true});
  for (Value inv : repeat.getInvariants())
    links.push_back({inv, body.getArgument(arg++), false});
  for (auto [result, slice] :
       llvm::zip(repeat.getStackedResults(), yield.getStacked()))
    links.push_back({result, slice, true});
  return links;
}

} // namespace loom::sharding

void loom::sharding::markRecomputed(Value source, Operation *collective) {
  Operation *def = source.getDefiningOp();
  auto recompute = collective->getContext()
                       ->getOrLoadDialect<TrainDialect>()
                       ->getRecomputeAttrHelper();
  if (def && recompute.isAttrPresent(def))
    recompute.setAttr(collective, UnitAttr::get(collective->getContext()));
}

loom::sharding::OptimizerUpdate loom::sharding::asOptimizerUpdate(Operation *op) {
  if (auto u = dyn_cast<SGDUpdateOp>(op))
    return {&u.getParamMutable(), &u.getGradMutable()};
  if (auto u = dyn_cast<AdamWUpdateOp>(op))
    return {&u.getParamMutable(), &u.getGradMutable()};
  return {};
}

Value loom::sharding::unclippedGradient(Value grad) {
  auto mul = grad.getDefiningOp<MulOp>();
  if (!mul)
    return grad;
  auto scalar = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getRank() == 0;
  };
  if (scalar(mul.getRhs()) && !scalar(mul.getLhs()))
    return mul.getLhs();
  return grad;
}
