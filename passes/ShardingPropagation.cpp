//===- ShardingPropagation.cpp - dist-sharding-propagation
//-----------------===//

#include "passes/Passes.h"

#include "llvm/ADT/StringSet.h"
#include "passes/Sharding.h"

namespace loom {
#define GEN_PASS_DEF_DISTSHARDINGPROPAGATION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::sharding;
using namespace loom::train;

namespace {

bool isZeroSplat(Value v) {
  auto constant = v.getDefiningOp<arith::ConstantOp>();
  auto dense = constant ? dyn_cast<DenseFPElementsAttr>(constant.getValue())
                        : DenseFPElementsAttr();
  return dense && dense.isSplat() && dense.getSplatValue<APFloat>().isZero();
}

struct Propagation {
  ModelOp model;
  dist::MeshAttr mesh;
  Propagation(ModelOp model, dist::MeshAttr mesh) : model(model), mesh(mesh) {}
  int64_t conflicts = 0, sweeps = 0, reductions = 0;
  bool sequenceParallel = false;

  struct State {
    SmallVector<Axes> dims;
    SmallVector<bool> frozen;
    /// Annotations' priorities (-1: none).
    SmallVector<int64_t> priority;
    /// Axes no dimension may take (a parameter that ZeRO below stage 3
    /// keeps whole over the data axis).
    Axes barred;
    /// Dimensions that may split unevenly, in padded blocks: a vocabulary
    /// over tp, a ZeRO shard over dp, and what shares their factor.
    SmallVector<bool> padded;
  };
  DenseMap<Value, State> states;

  bool tracked(Value v) { return states.count(v); }

  void track(Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || states.count(v))
      return;
    State &s = states[v];
    s.dims.resize(t.getRank());
    s.frozen.assign(t.getRank(), false);
    s.priority.assign(t.getRank(), -1);
    s.padded.assign(t.getRank(), false);
  }

  /// The axes of each factor of `rule` as `op`'s tensors have them now;
  /// with `honourFrozen`, a frozen dimension (the higher its priority, the
  /// stronger) wins a conflict, and the conflicts are counted.
  SmallVector<Axes> currentFactorAxes(Operation *op, const OpShardingRule &rule,
                                      bool honourFrozen) {
    SmallVector<Value> tensors(op->getOperands());
    llvm::append_range(tensors, op->getResults());
    SmallVector<const SmallVector<Axes> *> dims;
    for (Value v : tensors)
      dims.push_back(tracked(v) ? &states.find(v)->second.dims : nullptr);
    ArrayRef<const SmallVector<Axes> *> all(dims);
    unsigned numOperands = op->getNumOperands();
    return factorAxes(
        rule, all.take_front(numOperands), all.drop_front(numOperands),
        [&](unsigned t, int64_t d) -> int64_t {
          if (!honourFrozen || !tracked(tensors[t]))
            return 1;
          const State &s = states.find(tensors[t])->second;
          return s.frozen[d] ? annotationStrength(s.priority[d]) : 1;
        },
        honourFrozen ? &conflicts : nullptr);
  }

  /// Whether `axes` can shard dimension `d` of `v`: known, unused by its
  /// other dimensions, and dividing it (or in padded blocks where the
  /// dimension may pad).
  bool fits(Value v, int64_t d, ArrayRef<StringAttr> axes) {
    State &s = states[v];
    for (StringAttr a : axes)
      if (llvm::is_contained(s.barred, a))
        return false;
    for (auto [i, other] : llvm::enumerate(s.dims))
      if (int64_t(i) != d)
        for (StringAttr a : axes)
          if (llvm::is_contained(other, a))
            return false;
    int64_t size = cast<RankedTensorType>(v.getType()).getDimSize(d);
    return size % mesh.getGroupSize(axes) == 0 || s.padded[d];
  }

  /// Grows dimension `d` of `v` to `axes` when they extend what it has;
  /// with `pad` the dimension may take them in padded blocks.
  bool offer(Value v, int64_t d, ArrayRef<StringAttr> axes, bool pad = false) {
    State &s = states[v];
    if (pad && !axes.empty() && !s.padded[d] && !s.frozen[d] &&
        s.dims[d].empty())
      s.padded[d] = true;
    if (s.frozen[d] || axes.size() <= s.dims[d].size() ||
        !isPrefix(s.dims[d], axes) || !fits(v, d, axes))
      return false;
    s.dims[d].assign(axes.begin(), axes.end());
    return true;
  }

  LogicalResult annotate(Value v, dist::ShardingAttr sharding, Operation *at) {
    auto type = cast<RankedTensorType>(v.getType());
    if (failed(
            sharding.verifyFor(type, mesh, [&] { return at->emitOpError(); })))
      return failure();
    if (!sharding.getUnreduced().empty())
      return at->emitOpError("annotation ")
             << sharding
             << " has unreduced axes; annotate how a value is split, the "
                "partial sums follow from the ops";
    State &s = states[v];
    for (int64_t d = 0; d < type.getRank(); ++d) {
      s.dims[d] = sharding.getDimAxes(d);
      s.frozen[d] = !sharding.getOpen()[d];
      s.priority[d] = sharding.getPriorities()[d];
      s.padded[d] = sharding.isPadded(d);
    }
    return success();
  }

  /// The `dp` starting point: the batch (leading) dimension of every
  /// input over `dp`. Where train-grad-accumulation split the batch into
  /// [micro-batches, rows], the rows are split instead, so every rank takes
  /// part in every micro-batch.
  void presetDataParallel() {
    if (!mesh.getAxis(dist::AxisRole::Data))
      return;
    Axes dp{mesh.getAxis(dist::AxisRole::Data)};
    for (InputOp input : model.getBody().front().getOps<InputOp>()) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getRank() == 0)
        continue;
      bool split = false;
      int64_t rows = type.getDimSize(0);
      for (Operation *user : input->getUsers()) {
        auto reshape = dyn_cast<ReshapeOp>(user);
        if (!reshape)
          continue;
        auto out = cast<RankedTensorType>(reshape.getType());
        if (out.getRank() == type.getRank() + 1 &&
            out.getShape().drop_front(2) == type.getShape().drop_front() &&
            out.getDimSize(0) * out.getDimSize(1) == type.getDimSize(0)) {
          split = true;
          rows = out.getDimSize(1);
          offer(reshape.getResult(), 1, dp);
        }
      }
      if (!split)
        offer(input.getResult(), 0, dp);
      if (rows % mesh.getGroupSize(dp) != 0)
        input.emitWarning("the batch of input '")
            << input.getName() << "' (" << rows
            << " rows per micro-batch) does not split over dp="
            << mesh.getGroupSize(dp)
            << "; every rank computes it whole (make the batch a multiple)";
    }
  }

  //===--------------------------------------------------------------------===//
  // The Megatron starting point
  //===--------------------------------------------------------------------===//

  /// Whether `v` is a parameter, or a repeat's slice or copy of one, or a
  /// `train.slice` of one (a pipeline stage's layers of a stacked weight).
  bool isWeight(Value v) {
    for (int depth = 0; depth < 16; ++depth) {
      if (v.getDefiningOp<ParamOp>())
        return true;
      if (auto slice = v.getDefiningOp<SliceOp>()) {
        v = slice.getInput();
        continue;
      }
      // A master weight's bf16 copy (train-mixed-precision).
      if (auto convert = v.getDefiningOp<ConvertOp>()) {
        v = convert.getInput();
        continue;
      }
      auto arg = dyn_cast<BlockArgument>(v);
      auto repeat =
          arg ? dyn_cast<RepeatOp>(arg.getOwner()->getParentOp()) : RepeatOp();
      if (!repeat)
        return false;
      Value outer;
      for (const RepeatLink &link : repeatLinks(repeat))
        if (link.inner == arg && link.outer.getDefiningOp() != repeat) {
          outer = link.outer;
          break;
        }
      if (!outer)
        return false;
      v = outer;
    }
    return false;
  }

  /// A linear layer: an op linear in each of two operands whose second is
  /// a rank-2 weight; `in` and `out` are its weight's dimensions that hold
  /// the contracted (input) and the kept (output) features.
  struct Linear {
    Operation *op = nullptr;
    int64_t in = -1, out = -1;
    int64_t inFactor = -1, outFactor = -1;
  };

  std::optional<Linear> asLinear(ShardingRuleOpInterface op,
                                 const OpShardingRule &rule) {
    if (op->getNumOperands() != 2 || op->getNumResults() != 1 ||
        rule.linearity != Linearity::PerOperand || !rule.linearIn[0] ||
        !rule.linearIn[1] || rule.operandFactors[1].size() != 2 ||
        !isWeight(op->getOperand(1)))
      return std::nullopt;
    Linear l{op};
    for (auto [d, f] : llvm::enumerate(rule.operandFactors[1])) {
      if (f < 0)
        return std::nullopt;
      bool kept = llvm::is_contained(rule.resultFactors[0], f);
      (kept ? l.out : l.in) = int64_t(d);
      (kept ? l.outFactor : l.inFactor) = f;
    }
    if (l.in < 0 || l.out < 0)
      return std::nullopt;
    return l;
  }

  /// Follows dimension `d` of `v` back through the ops that carry it (by
  /// their rules' factors) to the linear layers whose output features it
  /// is: one, or one per activation an op combines on it (attention's q, k
  /// and v, each its own projection), added to `columns`. `mixed` says
  /// whether a carrying op combined several activations on it. A path
  /// that meets a dimension no linear layer produces adds nothing.
  void traceToLinears(Value v, int64_t d, bool &mixed,
                      SmallVectorImpl<Operation *> &columns, int depth = 0) {
    for (int step = 0; step < 64 && depth < 8; ++step) {
      auto op = v.getDefiningOp<ShardingRuleOpInterface>();
      if (!op)
        return;
      OpShardingRule rule = op.getShardingRule();
      int64_t f = rule.resultFactors[cast<OpResult>(v).getResultNumber()][d];
      if (f < 0 || rule.factorKinds[f] == FactorKind::NeedReplication)
        return;
      if (std::optional<Linear> l = asLinear(op, rule)) {
        if (f == l->outFactor && !llvm::is_contained(columns, op))
          columns.push_back(op);
        return;
      }
      SmallVector<std::pair<Value, int64_t>> carriers;
      for (auto [operand, fs] :
           llvm::zip(op->getOperands(), rule.operandFactors))
        if (!isWeight(operand))
          for (auto [i, g] : llvm::enumerate(fs))
            if (g == f)
              carriers.push_back({operand, int64_t(i)});
      if (carriers.empty())
        return;
      bool combines =
          carriers.size() > 1 && rule.linearity != Linearity::Additive;
      mixed |= combines;
      if (combines)
        for (auto [operand, dim] : llvm::drop_begin(carriers))
          traceToLinears(operand, dim, mixed, columns, depth + 1);
      std::tie(v, d) = carriers.front();
    }
  }

  /// Megatron-LM's tensor parallelism over `tp`, from the weights only: a
  /// linear layer fed (through pointwise and shape ops) by another's output
  /// features is row-parallel (its input features split) and the other
  /// column-parallel (its output features split), as in the MLP; a linear
  /// layer fed by an op that combines several activations on those
  /// features (attention's heads) is row-parallel, and the projections of
  /// those activations (q, k and v) column-parallel. Everything else
  /// follows by propagation.
  void presetMegatron() {
    if (!mesh.getAxis(dist::AxisRole::Tensor))
      return;
    Axes tp{mesh.getAxis(dist::AxisRole::Tensor)};
    // Megatron-LM's vocab-parallel embedding, first: the table's rows
    // split (a head tied to it then splits the logits by the vocabulary,
    // and is no layer's row-parallel partner).
    // A vocabulary that does not divide is split in padded blocks.
    model.walk([&](EmbeddingOp op) {
      if (isWeight(op.getTable()))
        pin(op.getTable(), 0, tp, /*pad=*/true);
    });
    model.walk([&](ShardingRuleOpInterface op) {
      OpShardingRule rule = op.getShardingRule();
      std::optional<Linear> row = asLinear(op, rule);
      if (!row)
        return;
      int64_t lhsDim = llvm::find(rule.operandFactors[0], row->inFactor) -
                       rule.operandFactors[0].begin();
      bool mixed = false;
      SmallVector<Operation *> columns;
      traceToLinears(op->getOperand(0), lhsDim, mixed, columns);
      if (columns.empty() && !mixed)
        return;
      for (Operation *column : columns) {
        auto colRule = cast<ShardingRuleOpInterface>(column).getShardingRule();
        std::optional<Linear> col =
            asLinear(cast<ShardingRuleOpInterface>(column), colRule);
        if (!pin(column->getOperand(1), col->out, tp))
          return;
      }
      pin(op->getOperand(1), row->in, tp);
    });
  }

  /// Offers `axes` to dimension `d` of `v` and freezes it there, as a
  /// user's annotation would be: the preset's weight splits win conflicts.
  bool pin(Value v, int64_t d, ArrayRef<StringAttr> axes, bool pad = false) {
    if (!offer(v, d, axes, pad))
      return false;
    states[v].frozen[d] = true;
    return true;
  }

  /// Megatron-LM's sequence parallelism: the residual stream between
  /// blocks (the carries of repeats, [batch, sequence, ...]) split along
  /// the sequence over `tp`, so the norms, dropouts and residual adds
  /// outside the tensor-parallel layers work on a block of the sequence;
  /// the column-parallel layers then gather the sequence and the
  /// row-parallel ones reduce-scatter onto it.
  void presetSequenceParallel() {
    if (!mesh.getAxis(dist::AxisRole::Tensor))
      return;
    Axes tp{mesh.getAxis(dist::AxisRole::Tensor)};
    model.walk([&](RepeatOp repeat) {
      for (Value carry : repeat.getCarries()) {
        auto type = cast<RankedTensorType>(carry.getType());
        if (type.getRank() >= 3 && isa<FloatType>(type.getElementType()))
          offer(carry, 1, tp);
      }
    });
  }

  bool propagateOp(ShardingRuleOpInterface op) {
    OpShardingRule rule = op.getShardingRule();
    SmallVector<Axes> axes = currentFactorAxes(op, rule, /*honourFrozen=*/true);
    // A factor some tensor holds in padded blocks may pad in all of them.
    SmallVector<bool> padded(rule.factorSizes.size(), false);
    auto note = [&](Value v, ArrayRef<int64_t> fs) {
      if (!tracked(v))
        return;
      const State &s = states[v];
      for (auto [d, f] : llvm::enumerate(fs))
        if (f >= 0 && s.padded[d] && !s.dims[d].empty() &&
            ArrayRef<StringAttr>(s.dims[d]) == ArrayRef<StringAttr>(axes[f]))
          padded[f] = true;
    };
    for (auto [v, fs] : llvm::zip(op->getOperands(), rule.operandFactors))
      note(v, fs);
    for (auto [v, fs] : llvm::zip(op->getResults(), rule.resultFactors))
      note(v, fs);
    bool changed = false;
    auto push = [&](Value v, ArrayRef<int64_t> fs) {
      if (!tracked(v))
        return;
      for (auto [d, f] : llvm::enumerate(fs))
        if (f >= 0)
          changed |= offer(v, int64_t(d), axes[f], padded[f]);
    };
    for (auto [v, fs] : llvm::zip(op->getOperands(), rule.operandFactors))
      push(v, fs);
    for (auto [v, fs] : llvm::zip(op->getResults(), rule.resultFactors))
      push(v, fs);
    return changed;
  }

  /// A repeat's operands, block arguments, yields and results that are the
  /// same value seen from outside and inside share their sharding (but for
  /// a stacked value's leading dimension, which stays whole).
  bool propagateRepeat(RepeatOp repeat) {
    bool changed = false;
    for (const RepeatLink &link : repeatLinks(repeat)) {
      if (!tracked(link.outer) || !tracked(link.inner))
        continue;
      int64_t shift = link.stacked ? 1 : 0;
      State &outer = states[link.outer];
      for (int64_t d = 0, e = states[link.inner].dims.size(); d < e; ++d) {
        Axes from = outer.dims[d + shift];
        changed |= offer(link.inner, d, from, outer.padded[d + shift]);
        Axes back = states[link.inner].dims[d];
        changed |=
            offer(link.outer, d + shift, back, states[link.inner].padded[d]);
      }
    }
    return changed;
  }

  /// An all-reduce passes the splits of the axes it does not reduce; the
  /// axes it reduces cannot cross it (its operand is a partial sum over
  /// them, its result may be split over them: a reduce-scatter).
  bool propagateAllReduce(dist::AllReduceOp reduce) {
    Value in = reduce.getInput(), out = reduce.getResult();
    if (!tracked(in) || !tracked(out))
      return false;
    auto kept = [&](const Axes &axes) {
      Axes prefix;
      for (StringAttr a : axes) {
        if (llvm::is_contained(reduce.getAxes(), a))
          break;
        prefix.push_back(a);
      }
      return prefix;
    };
    bool changed = false;
    for (int64_t d = 0, e = states[in].dims.size(); d < e; ++d) {
      changed |= offer(out, d, kept(states[in].dims[d]), states[in].padded[d]);
      changed |= offer(in, d, kept(states[out].dims[d]), states[out].padded[d]);
    }
    return changed;
  }

  bool sweep(bool forward) {
    SmallVector<Operation *> ops;
    model.walk<WalkOrder::PreOrder>([&](Operation *op) { ops.push_back(op); });
    if (!forward)
      std::reverse(ops.begin(), ops.end());
    bool changed = false;
    for (Operation *op : ops) {
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op))
        changed |= propagateAllReduce(reduce);
      else if (auto rule = dyn_cast<ShardingRuleOpInterface>(op))
        changed |= propagateOp(rule);
      else if (auto repeat = dyn_cast<RepeatOp>(op))
        changed |= propagateRepeat(repeat);
    }
    return changed;
  }

  //===--------------------------------------------------------------------===//
  // Partial sums
  //===--------------------------------------------------------------------===//

  /// Unreduced axes per value; a missing entry for a zero constant means
  /// "any" (zeros are a partial sum over any axes).
  DenseMap<Value, Axes> unreduced;
  DenseSet<Value> flexible;
  /// Values that some use needs whole: reduced right after their definition.
  SetVector<Value> mustReduce;
  bool forcedMore = false;

  std::optional<Axes> effective(Value v) {
    if (mustReduce.contains(v))
      return Axes{};
    if (flexible.contains(v))
      return std::nullopt;
    return unreduced.lookup(v);
  }

  void force(Value v) {
    if (mustReduce.insert(v))
      forcedMore = true;
  }

  void forceAllPartial(Operation *op) {
    for (Value v : op->getOperands())
      if (auto u = effective(v); u && !u->empty())
        force(v);
  }

  /// The elements of one rank's block of `v`, as it is split now.
  int64_t localElements(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t n = type.getNumElements();
    if (tracked(v))
      for (const Axes &dim : states[v].dims)
        n /= std::max<int64_t>(mesh.getGroupSize(dim), 1);
    return n;
  }

  /// The elements of one rank's blocks of `op`'s tensor results.
  int64_t resultElements(Operation *op) {
    int64_t n = 0;
    for (Value r : op->getResults())
      if (isa<RankedTensorType>(r.getType()))
        n += localElements(r);
    return n;
  }

  void partialOp(ShardingRuleOpInterface op) {
    OpShardingRule rule = op.getShardingRule();
    SmallVector<Axes> axes =
        currentFactorAxes(op, rule, /*honourFrozen=*/false);
    std::optional<Axes> passed = Axes{};
    switch (rule.linearity) {
    case Linearity::None:
      forceAllPartial(op);
      break;
    case Linearity::PerOperand: {
      bool kept = false;
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        std::optional<Axes> u = effective(v);
        if (!u || u->empty())
          continue;
        // A linear op passes the partial sum on unless its results are
        // larger than the operand (a norm's gradient adds its gains'):
        // then the operand is the cheaper one to reduce.
        if (rule.linearIn[i] && !kept &&
            resultElements(op) <= localElements(v)) {
          kept = true;
          passed = *u;
        } else {
          force(v);
        }
      }
      break;
    }
    case Linearity::Additive: {
      std::optional<Axes> common;
      bool agree = true;
      for (Value v : op->getOperands()) {
        std::optional<Axes> u = effective(v);
        if (!u)
          continue;
        if (common && *common != *u)
          agree = false;
        common = u;
      }
      if (agree) {
        passed = common;
      } else {
        forceAllPartial(op);
        passed = Axes{};
      }
      break;
    }
    }
    for (OpResult r : op->getResults()) {
      if (!tracked(r))
        continue;
      if (!passed) {
        flexible.insert(r);
        continue;
      }
      // Reduction axes that the result's dimensions also carry are reduced
      // and scattered by the op's partition; the rest stay partial.
      auto split = [&](StringAttr a) {
        return llvm::any_of(states[r].dims, [&](const Axes &dim) {
          return llvm::is_contained(dim, a);
        });
      };
      Axes u = *passed;
      for (StringAttr a : reductionAxes(rule, axes, r.getResultNumber()))
        if (!llvm::is_contained(u, a) && !split(a))
          u.push_back(a);
      // A value cannot be split and unreduced over one axis: the partial
      // operand is reduced first.
      bool clash = llvm::any_of(states[r].dims, [&](const Axes &dim) {
        return llvm::any_of(
            dim, [&](StringAttr a) { return llvm::is_contained(*passed, a); });
      });
      if (clash) {
        forceAllPartial(op);
        continue;
      }
      unreduced[r] = u;
    }
  }

  void partialRepeat(RepeatOp repeat) {
    Block &body = repeat.getBodyBlock();
    YieldOp yield = repeat.getYield();
    size_t numCarries = repeat.getCarries().size();
    auto setFrom = [&](Value to, std::optional<Axes> u) {
      if (u) {
        unreduced[to] = *u;
        flexible.erase(to);
      } else {
        flexible.insert(to);
      }
    };
    for (auto [s, operand] : llvm::enumerate(repeat.getStacked()))
      setFrom(body.getArgument(1 + numCarries + s), effective(operand));
    for (auto [j, operand] : llvm::enumerate(repeat.getInvariants()))
      setFrom(body.getArgument(1 + numCarries + repeat.getStacked().size() + j),
              effective(operand));
    for (auto [i, init] : llvm::enumerate(repeat.getCarries()))
      setFrom(body.getArgument(1 + i), effective(init));
    // A carry that starts as zeros takes the partial state its body gives
    // it (gradient accumulators stay unreduced across micro-batches).
    for (int round = 0; round < 3; ++round) {
      partialBlock(body);
      bool again = false;
      for (size_t i = 0; i < numCarries; ++i) {
        Value arg = body.getArgument(1 + i);
        std::optional<Axes> next = effective(yield.getCarries()[i]);
        std::optional<Axes> have = effective(arg);
        if (!next || (have && *have == *next))
          continue;
        if (!have) {
          setFrom(arg, next);
          again = true;
        } else {
          force(yield.getCarries()[i]);
        }
      }
      if (!again)
        break;
    }
    for (size_t i = 0; i < numCarries; ++i)
      setFrom(repeat.getCarryResults()[i], effective(body.getArgument(1 + i)));
    for (auto [result, slice] :
         llvm::zip(repeat.getStackedResults(), yield.getStacked()))
      setFrom(result, effective(slice));
  }

  /// What an all-reduce leaves unreduced: its operand's partial axes but
  /// the ones it reduces.
  void partialAllReduce(dist::AllReduceOp reduce) {
    Value in = reduce.getInput(), out = reduce.getResult();
    std::optional<Axes> u = effective(in);
    if (!u) {
      flexible.insert(out);
      return;
    }
    Axes left;
    for (StringAttr a : *u)
      if (!llvm::is_contained(reduce.getAxes(), a))
        left.push_back(a);
    bool clash = llvm::any_of(states[out].dims, [&](const Axes &dim) {
      return llvm::any_of(
          dim, [&](StringAttr a) { return llvm::is_contained(left, a); });
    });
    if (clash) {
      force(in);
      left.clear();
    }
    unreduced[out] = left;
  }

  //===--------------------------------------------------------------------===//
  // ZeRO
  //===--------------------------------------------------------------------===//

  int64_t zeroStage = 0, wholeUnderZero = 0;
  /// The parameters (by whole name) warned of as kept whole under ZeRO.
  llvm::StringSet<> warnedWhole;

  /// Whether `v` reaches a repeat as a stacked operand (directly or as an
  /// invariant of enclosing loops: a micro-batch loop's layer loop).
  bool reachesAsStacked(Value v, int depth = 0) {
    if (depth > 8)
      return false;
    for (OpOperand &use : v.getUses()) {
      // A master weight reaches its loops through its bf16 copies.
      if (auto convert = dyn_cast<ConvertOp>(use.getOwner())) {
        if (reachesAsStacked(convert.getResult(), depth + 1))
          return true;
        continue;
      }
      auto repeat = dyn_cast<RepeatOp>(use.getOwner());
      if (!repeat)
        continue;
      for (const RepeatLink &link : repeatLinks(repeat))
        if (link.outer == v && link.stacked)
          return true;
      for (const RepeatLink &link : repeatLinks(repeat))
        if (link.outer == v && isa<BlockArgument>(link.inner) &&
            reachesAsStacked(link.inner, depth + 1))
          return true;
    }
    return false;
  }

  /// The dimension ZeRO splits parameter `p` on: the first of each layer's
  /// slice (a stacked parameter's leading layer dimension is kept) that no
  /// axis splits and that divides over the data axis; where none divides,
  /// the largest that no axis splits, in padded blocks (`padded` is set).
  std::optional<int64_t> zeroDim(Value p, StringAttr data, bool &padded) {
    State &s = states[p];
    padded = false;
    if (llvm::any_of(s.dims, [&](const Axes &dim) {
          return llvm::is_contained(dim, data);
        }))
      return std::nullopt;
    auto type = cast<RankedTensorType>(p.getType());
    int64_t n = mesh.getGroupSize(ArrayRef<StringAttr>{data});
    std::optional<int64_t> largest;
    for (int64_t d = reachesAsStacked(p) ? 1 : 0; d < type.getRank(); ++d) {
      if (!s.dims[d].empty() || s.frozen[d])
        continue;
      if (type.getDimSize(d) % n == 0)
        return d;
      if (type.getDimSize(d) > 1 &&
          (!largest || type.getDimSize(d) > type.getDimSize(*largest)))
        largest = d;
    }
    padded = largest.has_value();
    return largest;
  }

  /// Splits what the ZeRO stage names over the data axis: each update's
  /// results (the updated block; the optimizer state follows them), the
  /// gradient it reads (stage 2 and up; stage 1's reduction, placed by
  /// dist-zero, keeps the gradient itself whole) and the parameter
  /// (stage 3; below it the parameter is barred from the axis, and the
  /// update takes its block).
  void applyZero() {
    StringAttr data = mesh.getAxis(dist::AxisRole::Data);
    if (!data)
      return;
    model.walk([&](Operation *op) {
      sharding::OptimizerUpdate update = sharding::asOptimizerUpdate(op);
      if (!update)
        return;
      Value p = update.param->get();
      auto param = p.getDefiningOp<ParamOp>();
      if (!param || !tracked(p))
        return;
      bool pad = false;
      std::optional<int64_t> z = zeroDim(p, data, pad);
      if (!z) {
        if (!llvm::any_of(states[p].dims, [&](const Axes &dim) {
              return llvm::is_contained(dim, data);
            })) {
          ++wholeUnderZero;
          // One warning for a parameter, not one for each of its parts
          // (a fused QKV's, a stacked weight's stages').
          auto part = dist::attrs(param).getPartAttrHelper().getAttr(param);
          StringRef name = part ? part.getOf() : param.getName();
          if (!warnedWhole.insert(name).second)
            return;
          auto diag = param.emitWarning("ZeRO keeps parameter '")
                      << name << "' whole: no dimension of "
                      << (reachesAsStacked(p) ? "its layer slice " : "it ")
                      << "can split over " << data.getValue() << "="
                      << mesh.getGroupSize(ArrayRef<StringAttr>{data});
          if (part)
            diag << " (nor any of its parts)";
        }
        return;
      }
      Axes dp{data};
      // A bf16 master (read by its narrowing converts) is optimizer state
      // in all but name: from stage 1 it is stored as its block, and below
      // stage 3 its bf16 copies are whole, each gathered once, in bf16,
      // from the narrowed block (dist-partition narrows before it
      // gathers), as DeepSpeed's bf16 optimizer gathers its bf16
      // parameters.
      SmallVector<ConvertOp> copies = bf16Copies(param);
      if (zeroStage >= 3 || !copies.empty())
        offer(p, *z, dp, pad);
      else
        states[p].barred.push_back(data);
      if (zeroStage < 3)
        for (ConvertOp copy : copies)
          states[copy.getResult()].barred.push_back(data);
      for (Value r : op->getResults())
        pin(r, *z, dp, pad);
    });
  }

  void partialBlock(Block &block) {
    for (Operation &op : block) {
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        partialRepeat(repeat);
      } else if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
        partialAllReduce(reduce);
      } else if (auto rule = dyn_cast<ShardingRuleOpInterface>(op)) {
        partialOp(rule);
      } else if (isa<YieldOp>(op)) {
        // Carries are handled by the repeat; stacked slices pass through.
      } else {
        forceAllPartial(&op);
        for (Value r : op.getResults())
          if (isZeroSplat(r))
            flexible.insert(r);
      }
    }
  }

  //===--------------------------------------------------------------------===//

  LogicalResult run(StringRef preset) {
    model.walk([&](Operation *op) {
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            track(arg);
      for (Value r : op->getResults())
        track(r);
    });
    // Annotations: the user's, on the values they name.
    WalkResult annotated = model.walk([&](Operation *op) -> WalkResult {
      auto all = dist::attrs(op).getShardingAttrHelper().getAttr(op);
      if (!all)
        return WalkResult::advance();
      if (all.size() != op->getNumResults())
        return op->emitOpError("has ") << all.size() << " shardings for "
                                       << op->getNumResults() << " results";
      for (auto [r, a] : llvm::zip(op->getResults(), all)) {
        auto sharding = dyn_cast<dist::ShardingAttr>(a);
        if (!sharding || !tracked(r))
          return op->emitOpError("'")
                 << dist::attrs(op).getShardingAttrHelper().getNameStr()
                 << "' must hold one #dist.sharding per tensor result";
        if (failed(annotate(r, sharding, op)))
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (annotated.wasInterrupted())
      return failure();
    if (preset == "dp" || preset == "auto")
      presetDataParallel();
    if (preset == "megatron" || preset == "auto")
      presetMegatron();
    if (sequenceParallel)
      presetSequenceParallel();

    bool forward = true;
    for (int idle = 0; idle < 2 && sweeps < 1000; ++sweeps, forward = !forward)
      idle = sweep(forward) ? 0 : idle + 1;
    // ZeRO splits over the data axis once the data and tensor splits have
    // settled (which dimension is free depends on them).
    if (zeroStage > 0) {
      applyZero();
      for (int idle = 0; idle < 2 && sweeps < 2000;
           ++sweeps, forward = !forward)
        idle = sweep(forward) ? 0 : idle + 1;
    }

    do {
      forcedMore = false;
      unreduced.clear();
      flexible.clear();
      partialBlock(model.getBody().front());
    } while (forcedMore);

    record();
    return success();
  }

  /// `v`'s sharding, its uneven splits marked `padded`.
  dist::ShardingAttr shardingOf(Value v) {
    const State &s = states[v];
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<bool> padded;
    for (auto [d, axes] : llvm::enumerate(s.dims))
      padded.push_back(s.padded[d] &&
                       type.getDimSize(d) % mesh.getGroupSize(axes) != 0);
    return dist::ShardingAttr::get(model.getContext(), s.dims,
                                   unreduced.lookup(v), padded);
  }

  /// Writes the shardings into the IR and makes every reduction that a
  /// use needs an explicit all_reduce right after the value's definition.
  void record() {
    MLIRContext *ctx = model.getContext();
    model.walk([&](Operation *op) {
      if (op == model || isa<YieldOp, OutputOp>(op))
        return;
      SmallVector<Attribute> results;
      bool any = false;
      for (Value r : op->getResults()) {
        if (!tracked(r)) {
          results.push_back(UnitAttr::get(ctx));
          continue;
        }
        any = true;
        results.push_back(shardingOf(r));
      }
      if (any)
        dist::attrs(ctx).getShardingAttrHelper().setAttr(
            op, ArrayAttr::get(ctx, results));
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        SmallVector<Attribute> args;
        for (BlockArgument a :
             repeat.getBodyBlock().getArguments().drop_front())
          args.push_back(shardingOf(a));
        dist::attrs(ctx).getArgShardingsAttrHelper().setAttr(
            op, ArrayAttr::get(ctx, args));
      }
    });
    for (Value v : mustReduce) {
      Axes u = unreduced.lookup(v);
      if (u.empty())
        continue;
      OpBuilder b(ctx);
      if (auto arg = dyn_cast<BlockArgument>(v))
        b.setInsertionPointToStart(arg.getOwner());
      else
        b.setInsertionPointAfter(v.getDefiningOp());
      SmallVector<StringRef> names;
      for (StringAttr a : u)
        names.push_back(a.getValue());
      auto reduce = dist::AllReduceOp::create(b, v.getLoc(), v,
                                              b.getStrArrayAttr(names), false);
      sharding::markRecomputed(v, reduce);
      v.replaceAllUsesExcept(reduce, reduce);
      dist::ShardingAttr whole = shardingOf(v);
      dist::attrs(ctx).getShardingAttrHelper().setAttr(
          reduce, b.getArrayAttr({dist::ShardingAttr::get(
                      ctx, states[v].dims, Axes{}, whole.getPadded())}));
      ++reductions;
    }
  }
};

struct DistShardingPropagationPass
    : public loom::impl::DistShardingPropagationBase<
          DistShardingPropagationPass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerTrainShardingRules(registry);
  }
  void runOnOperation() override {
    if (preset != "none" && preset != "dp" && preset != "megatron" &&
        preset != "auto") {
      getOperation().emitError("dist-sharding-propagation: unknown preset '")
          << preset << "' (none, dp, megatron or auto)";
      return signalPassFailure();
    }
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      auto meshAttr = dist::attrs(model).getMeshAttrHelper().getAttr(model);
      if (!meshAttr)
        continue;
      Propagation p(model, meshAttr);
      p.sequenceParallel = sequenceParallel;
      if (auto zero = dist::attrs(model).getZeroAttrHelper().getAttr(model))
        p.zeroStage = zero.getInt();
      if (failed(p.run(preset)))
        return signalPassFailure();
      numConflicts += p.conflicts;
      numSweeps += p.sweeps;
      numReductions += p.reductions;
    }
  }
};

} // namespace
