//===- Sharding.cpp - what sharding propagation and partitioning share ----===//

#include "passes/Sharding.h"

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace loom::sharding {

dist::ShardingAttr getSharding(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    auto all = owner ? owner->getAttrOfType<ArrayAttr>(kArgShardingsAttr)
                     : ArrayAttr();
    if (!all || arg.getArgNumber() == 0 ||
        arg.getArgNumber() > all.size())
      return {};
    return dyn_cast<dist::ShardingAttr>(all[arg.getArgNumber() - 1]);
  }
  auto result = cast<OpResult>(v);
  auto all = result.getOwner()->getAttrOfType<ArrayAttr>(kShardingAttr);
  if (!all || result.getResultNumber() >= all.size())
    return {};
  return dyn_cast<dist::ShardingAttr>(all[result.getResultNumber()]);
}

bool isPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  return a.size() <= b.size() && a == b.take_front(a.size());
}

SmallVector<Axes>
factorAxes(const OpShardingRule &rule,
           ArrayRef<const SmallVector<Axes> *> operandDims,
           ArrayRef<const SmallVector<Axes> *> resultDims,
           function_ref<bool(unsigned, int64_t)> frozen, int64_t *conflicts) {
  size_t numFactors = rule.factorSizes.size();
  SmallVector<Axes> axes(numFactors);
  SmallVector<bool> fromFrozen(numFactors, false);
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
        bool isFrozen = frozen(t, int64_t(d));
        Axes &cand = axes[f];
        if (isPrefix(cand, have)) {
          if (!fromFrozen[f] || cand == have)
            cand = have;
        } else if (!isPrefix(have, cand)) {
          if (conflicts)
            ++*conflicts;
          if (isFrozen && !fromFrozen[f])
            cand = have;
        }
        fromFrozen[f] = fromFrozen[f] || (isFrozen && cand == have);
      }
    }
  };
  visit(rule.operandFactors, operandDims);
  visit(rule.resultFactors, resultDims);
  // An axis shards one factor of an op: the first that has it keeps it.
  SmallVector<StringAttr> used;
  for (Axes &cand : axes) {
    size_t keep = 0;
    while (keep < cand.size() && !llvm::is_contained(used, cand[keep]))
      ++keep;
    cand.resize(keep);
    used.append(cand.begin(), cand.end());
  }
  return axes;
}

Axes reductionAxes(const OpShardingRule &rule, ArrayRef<Axes> factorAxes,
                   unsigned result) {
  Axes out;
  ArrayRef<int64_t> own = rule.resultFactors[result];
  for (ArrayRef<int64_t> fs : rule.operandFactors)
    for (int64_t f : fs)
      if (f >= 0 && !llvm::is_contained(own, f))
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
