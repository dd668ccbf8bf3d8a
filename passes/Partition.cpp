//===- Partition.cpp - dist-partition
//--------------------------------------===//

#include "passes/Passes.h"
#include "passes/Sharding.h"

#include <limits>

namespace loom {
#define GEN_PASS_DEF_DISTPARTITION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::sharding;
using namespace loom::train;

namespace {

struct Partitioner {
  ModelOp model;
  dist::MeshAttr mesh;
  MLIRContext *ctx;
  int64_t shards = 0, gathers = 0, scatters = 0;

  /// How each value of the rank program is split now.
  DenseMap<Value, SmallVector<Axes>> held;
  /// One reshard per (value, wanted split), shared by its uses.
  DenseMap<std::pair<Value, Attribute>, Value> reshards;
  /// The whole shape of each value held in padded blocks (a dimension
  /// split unevenly, its last blocks ending in padding).
  DenseMap<Value, SmallVector<int64_t>> paddedWhole;
  /// One fill of a value's padding per (value, dimension, fill value's
  /// bits).
  DenseMap<std::tuple<Value, int64_t, uint64_t>, Value> fills;

  Partitioner(ModelOp model, dist::MeshAttr mesh)
      : model(model), mesh(mesh), ctx(model.getContext()) {}

  SmallVector<Axes> recorded(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    dist::ShardingAttr s = getSharding(v);
    SmallVector<Axes> dims(type.getRank());
    if (s && s.getRank() == type.getRank())
      for (int64_t d = 0; d < type.getRank(); ++d)
        dims[d] = s.getDimAxes(d);
    return dims;
  }

  /// The block type of `type` split as `dims`: ceil(size / ranks) along a
  /// dimension, the last blocks padded where it does not divide.
  RankedTensorType localType(RankedTensorType type, ArrayRef<Axes> dims) {
    SmallVector<int64_t> shape(type.getShape());
    for (auto [d, axes] : llvm::enumerate(dims))
      shape[d] = llvm::divideCeil(shape[d], mesh.getGroupSize(axes));
    return RankedTensorType::get(shape, type.getElementType());
  }

  /// The shape of the whole tensor `v` holds a block of.
  SmallVector<int64_t> wholeShape(Value v) {
    if (auto it = paddedWhole.find(v); it != paddedWhole.end())
      return it->second;
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    for (auto [d, axes] : llvm::enumerate(held.lookup(v)))
      shape[d] *= mesh.getGroupSize(axes);
    return shape;
  }

  /// Records `v` as held split as `dims` of a whole tensor of `whole`.
  void hold(Value v, ArrayRef<Axes> dims, ArrayRef<int64_t> whole) {
    held[v] = SmallVector<Axes>(dims.begin(), dims.end());
    bool padded = false;
    for (auto [d, axes] : llvm::enumerate(dims))
      padded |= whole[d] % mesh.getGroupSize(axes) != 0;
    if (padded)
      paddedWhole[v] = SmallVector<int64_t>(whole.begin(), whole.end());
  }

  /// Whether dimension `d` of `v` is split in padded blocks.
  bool paddedDim(Value v, int64_t d) {
    SmallVector<Axes> dims = held.lookup(v);
    if (d >= int64_t(dims.size()) || dims[d].empty())
      return false;
    return wholeShape(v)[d] % mesh.getGroupSize(dims[d]) != 0;
  }

  ArrayAttr axesAttr(ArrayRef<Axes> dims) {
    SmallVector<Attribute> lists;
    for (const Axes &axes : dims)
      lists.push_back(ArrayAttr::get(
          ctx, SmallVector<Attribute>(axes.begin(), axes.end())));
    return ArrayAttr::get(ctx, lists);
  }

  /// Sets `v`'s type to its per-rank type under `dims`; a dimension that
  /// does not divide must be one its recorded sharding pads.
  LogicalResult setLocalType(Value v, ArrayRef<Axes> dims, Location loc) {
    auto type = cast<RankedTensorType>(v.getType());
    dist::ShardingAttr recorded = getSharding(v);
    for (auto [d, axes] : llvm::enumerate(dims))
      if (type.getDimSize(d) % mesh.getGroupSize(axes) != 0 &&
          !(recorded && recorded.isPadded(d)))
        return emitError(loc) << "dimension " << d << " of " << type
                              << " does not divide over " << axesAttr(axes)
                              << " (" << mesh.getGroupSize(axes)
                              << " ranks); shard another dimension or pad it";
    v.setType(localType(type, dims));
    hold(v, dims, type.getShape());
    return success();
  }

  /// Whether the padding of dimension `d` of `v` is zero by construction:
  /// a block taken or reduce-scattered from a zero-padded tensor, a fill
  /// with zeros, or sums and products of such blocks (also through a
  /// loop's stacked results). A reduction then needs no fill before it.
  bool zeroPadded(Value v, int64_t d, int depth = 0) {
    if (depth > 16)
      return false;
    auto padsDim = [&](Value in) {
      auto pad = in.getDefiningOp<PadOp>();
      return pad && pad.getHigh()[d] > 0;
    };
    // A stored parameter: the runtime initializes, loads and exports it
    // with zero padding, and its update keeps the padding zero where the
    // gradient's is (a zero gradient moves neither SGD's weight, decay or
    // momentum, nor AdamW's moments, nor its decoupled decay of a zero).
    // An update of something else (a ZeRO-1 shard of it) is not followed.
    if (auto param = v.getDefiningOp<ParamOp>()) {
      bool updated = false;
      for (Operation *user : param->getUsers()) {
        Value grad;
        if (auto sgd = dyn_cast<SGDUpdateOp>(user); sgd && sgd.getParam() == v)
          grad = sgd.getGrad();
        else if (auto adamw = dyn_cast<AdamWUpdateOp>(user);
                 adamw && adamw.getParam() == v)
          grad = adamw.getGrad();
        else
          continue;
        if (!zeroPadded(grad, d, depth + 1))
          return false;
        updated = true;
      }
      return updated;
    }
    if (auto result = dyn_cast<OpResult>(v)) {
      Operation *op = result.getOwner();
      if (auto fill = dyn_cast<dist::FillPaddingOp>(op))
        return fill.getDim() == d && fill.getValue().isZero();
      if (auto rs = dyn_cast<dist::ReduceScatterOp>(op))
        return rs.getDim() == d && padsDim(rs.getInput());
      if (auto shard = dyn_cast<dist::ShardOp>(op))
        return padsDim(shard.getInput());
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op))
        return !reduce.getMax() && zeroPadded(reduce.getInput(), d, depth + 1);
      if (isa<AddOp, SubOp>(op))
        return op->getOperand(0).getType() == op->getOperand(1).getType() &&
               zeroPadded(op->getOperand(0), d, depth + 1) &&
               zeroPadded(op->getOperand(1), d, depth + 1);
      if (isa<ScaleOp>(op))
        return zeroPadded(op->getOperand(0), d, depth + 1);
      // The cross-entropy's gradient over classes whose padding is the
      // lowest float: exp(lowest - max) is 0 and no label names a padded
      // class. An embedding's gradient: no id names a padding row.
      if (auto grad = dyn_cast<CrossEntropyGradFromStatsOp>(op)) {
        auto fill = grad.getLogits().getDefiningOp<dist::FillPaddingOp>();
        return fill && fill.getDim() == d &&
               fill.getValue().convertToDouble() ==
                   double(std::numeric_limits<float>::lowest());
      }
      // (Its rows split in padded blocks are split over the vocabulary, so
      // its kernel skips the ids of other blocks; asked before the op is
      // partitioned, as a parameter's update is, it has no group yet.)
      if (isa<EmbeddingGradOp>(op))
        return d == 0;
      // An op linear in an operand (a product, a reshape, a gradient in
      // its incoming gradient) whose block of that dimension's factor has
      // zero padding: each padding element of the result is a sum of
      // products with those zeros (the other operands finite).
      if (auto it = rules.find(op); it != rules.end()) {
        const OpShardingRule &rule = it->second;
        int64_t f = rule.resultFactors[result.getResultNumber()][d];
        if (rule.linearity == Linearity::PerOperand && f >= 0 &&
            rule.factorKinds[f] == FactorKind::PassThrough)
          for (auto [i, fs] : llvm::enumerate(rule.operandFactors)) {
            if (i >= rule.linearIn.size() || !rule.linearIn[i])
              continue;
            for (auto [e, g] : llvm::enumerate(fs))
              if (g == f && zeroPadded(op->getOperand(i), e, depth + 1))
                return true;
          }
      }
      if (auto repeat = dyn_cast<RepeatOp>(op))
        for (const RepeatLink &link : repeatLinks(repeat))
          if (link.outer == v && link.stacked && d > 0)
            return zeroPadded(link.inner, d - 1, depth + 1);
    }
    return false;
  }

  /// `v` with the padding of its dimension `d` set to `fill` (once per
  /// value, right after its definition; a parameter's right before `at`,
  /// so no copy of it lives across the step).
  Value fillPadding(Value v, int64_t d, double fill, Operation *at) {
    SmallVector<Axes> dims = held.lookup(v);
    SmallVector<int64_t> whole = wholeShape(v);
    bool cached = !v.getDefiningOp<ParamOp>() && !isa<BlockArgument>(v);
    std::tuple<Value, int64_t, uint64_t> key{v, d,
                                             llvm::bit_cast<uint64_t>(fill)};
    if (cached)
      if (Value done = fills.lookup(key))
        return done;
    OpBuilder b(ctx);
    if (!cached)
      b.setInsertionPoint(at);
    else
      b.setInsertionPointAfter(v.getDefiningOp());
    SmallVector<StringRef> names;
    for (StringAttr a : dims[d])
      names.push_back(a.getValue());
    Value filled = dist::FillPaddingOp::create(
        b, v.getLoc(), v, b.getStrArrayAttr(names), b.getI64IntegerAttr(d),
        b.getI64IntegerAttr(whole[d]), b.getF64FloatAttr(fill));
    hold(filled, dims, whole);
    if (cached)
      fills[key] = filled;
    return filled;
  }

  /// `v` (split as `held[v]`) split as `want`, once for all uses, right
  /// after `v`'s definition.
  FailureOr<Value> reshard(Value v, ArrayRef<Axes> want, Location loc) {
    SmallVector<Axes> have = held.lookup(v);
    if (have.empty())
      have.resize(want.size());
    if (ArrayRef<Axes>(have) == want)
      return v;
    Attribute key = axesAttr(want);
    if (Value done = reshards.lookup({v, key}))
      return done;
    OpBuilder b(ctx);
    if (auto arg = dyn_cast<BlockArgument>(v))
      b.setInsertionPointToStart(arg.getOwner());
    else
      b.setInsertionPointAfter(v.getDefiningOp());
    FailureOr<Value> cur = reshardAt(b, v, want, loc);
    if (succeeded(cur))
      reshards[{v, key}] = *cur;
    return cur;
  }

  /// The chain of collectives that splits `v` as `want`, built at `b`. A
  /// dimension in padded blocks is gathered whole and cut to its size, and
  /// one split into padded blocks is padded first: the collectives always
  /// move equal blocks.
  FailureOr<Value> reshardAt(OpBuilder &b, Value v, ArrayRef<Axes> want,
                             Location loc) {
    SmallVector<Axes> have = held.lookup(v);
    if (have.empty())
      have.resize(want.size());
    SmallVector<int64_t> whole = wholeShape(v);
    Value cur = v;
    // Gather the axes a dimension loses, innermost first.
    for (int64_t d = 0, e = want.size(); d < e; ++d) {
      size_t keep = isPrefix(have[d], want[d])   ? have[d].size()
                    : isPrefix(want[d], have[d]) ? want[d].size()
                                                 : 0;
      bool padded = paddedDim(v, d);
      if (padded && keep != 0 && keep != have[d].size())
        return emitError(loc) << "dimension " << d << " of a tensor of "
                              << whole[d] << " elements is split over "
                              << axesAttr(have) << " in padded blocks and "
                              << "cannot be regrouped as " << axesAttr(want);
      bool gathered = have[d].size() > keep;
      while (have[d].size() > keep) {
        StringAttr axis = have[d].pop_back_val();
        auto type = cast<RankedTensorType>(cur.getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[d] *= mesh.getAxisSize(axis.getValue());
        cur = dist::AllGatherOp::create(
            b, loc, RankedTensorType::get(shape, type.getElementType()), cur,
            b.getStrArrayAttr({axis.getValue()}), b.getI64IntegerAttr(d));
        ++gathers;
      }
      if (padded && gathered) {
        auto type = cast<RankedTensorType>(cur.getType());
        SmallVector<int64_t> sizes(type.getShape());
        sizes[d] = whole[d];
        cur = SliceOp::create(b, loc, cur, SmallVector<int64_t>(sizes.size()),
                              sizes);
      }
    }
    // Take the block of the axes a dimension gains, padding a dimension
    // they do not divide.
    SmallVector<Axes> extra(want.size());
    bool any = false;
    SmallVector<int64_t> high(want.size(), 0);
    for (int64_t d = 0, e = want.size(); d < e; ++d) {
      extra[d].assign(want[d].begin() + have[d].size(), want[d].end());
      any |= !extra[d].empty();
      high[d] = paddingToDivide(cast<RankedTensorType>(cur.getType()), d,
                                mesh.getGroupSize(extra[d]));
      if (high[d] && !have[d].empty())
        return emitError(loc)
               << "dimension " << d << " of " << cur.getType()
               << ", split over " << axesAttr(have) << ", does not divide over "
               << axesAttr(extra) << " as well";
    }
    cur = padAtEnd(b, loc, cur, high);
    if (any) {
      cur = dist::ShardOp::create(
          b, loc, localType(cast<RankedTensorType>(cur.getType()), extra), cur,
          axesAttr(extra));
      ++shards;
    }
    hold(cur, want, whole);
    return cur;
  }

  /// `v` is a partial sum over `partial`; the axes its recorded sharding
  /// keeps unreduced stay so, and each other axis, which propagation put on
  /// a dimension of `want` instead, is reduced and scattered onto it.
  FailureOr<Value> reduceInto(Value v, ArrayRef<StringAttr> partial,
                              ArrayRef<Axes> want, Location loc) {
    dist::ShardingAttr recorded = getSharding(v);
    SmallVector<Axes> have = held.lookup(v);
    Value cur = v;
    for (StringAttr axis : partial) {
      if (recorded && llvm::is_contained(recorded.getUnreduced(), axis))
        continue;
      auto type = cast<RankedTensorType>(cur.getType());
      OpBuilder b(ctx);
      b.setInsertionPointAfterValue(cur);
      auto dim =
          llvm::find_if(llvm::seq<int64_t>(0, want.size()), [&](int64_t d) {
            return llvm::is_contained(want[d], axis) &&
                   !llvm::is_contained(have[d], axis);
          });
      if (dim == llvm::seq<int64_t>(0, want.size()).end()) {
        cur = dist::AllReduceOp::create(
            b, loc, cur, b.getStrArrayAttr({axis.getValue()}), false);
        sharding::markRecomputed(v, cur.getDefiningOp());
        held[cur] = have;
        continue;
      }
      SmallVector<int64_t> whole = wholeShape(cur);
      FailureOr<Value> padded = padToDivide(
          b, cur, *dim, have[*dim], mesh.getAxisSize(axis.getValue()), loc);
      if (failed(padded))
        return failure();
      type = cast<RankedTensorType>(padded->getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[*dim] /= mesh.getAxisSize(axis.getValue());
      cur = dist::ReduceScatterOp::create(
          b, loc, RankedTensorType::get(shape, type.getElementType()), *padded,
          b.getStrArrayAttr({axis.getValue()}), b.getI64IntegerAttr(*dim));
      sharding::markRecomputed(v, cur.getDefiningOp());
      have[*dim].push_back(axis);
      hold(cur, have, whole);
      ++scatters;
    }
    return cur;
  }

  /// `v` padded with zeros along `dim` to a multiple of `n` (the input of
  /// a reduce-scatter into padded blocks); `have`: the axes that split the
  /// dimension already, which must be none where it pads.
  FailureOr<Value> padToDivide(OpBuilder &b, Value v, int64_t dim,
                               ArrayRef<StringAttr> have, int64_t n,
                               Location loc) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> high(type.getRank(), 0);
    high[dim] = paddingToDivide(type, dim, n);
    if (high[dim] && !have.empty())
      return emitError(loc)
             << "dimension " << dim << " of " << type
             << " is split already and does not divide over " << n << " ranks";
    return padAtEnd(b, loc, v, high);
  }

  /// The zeros to add at the end of dimension `dim` of `type` for `n`
  /// ranks to divide it.
  static int64_t paddingToDivide(RankedTensorType type, int64_t dim,
                                 int64_t n) {
    int64_t size = type.getDimSize(dim);
    return llvm::divideCeil(size, n) * n - size;
  }

  /// `v` with `high[d]` zeros added at the end of each dimension d (`v`
  /// itself where there are none).
  static Value padAtEnd(OpBuilder &b, Location loc, Value v,
                        ArrayRef<int64_t> high) {
    if (llvm::all_of(high, [](int64_t h) { return h == 0; }))
      return v;
    return PadOp::create(b, loc, v, SmallVector<int64_t>(high.size()), high)
        .getResult();
  }

  LogicalResult use(OpOperand &operand, ArrayRef<Axes> want) {
    Value v = operand.get();
    if (!isa<RankedTensorType>(v.getType()))
      return success();
    // A stored parameter is resharded for each op that reads it, right
    // before it: a parameter split over dp (ZeRO-3) is gathered for each
    // use and its whole copy dies there, and the block an update takes
    // of a whole one is made where the update runs.
    // So is a master's bf16 copy (mixed precision), narrowed from its
    // block: ZeRO-3 gathers the copy, in bf16, for each use.
    auto copy = v.getDefiningOp<ConvertOp>();
    if (v.getDefiningOp<ParamOp>() ||
        (copy && copy.getInput().getDefiningOp<ParamOp>())) {
      SmallVector<Axes> have = held.lookup(v);
      have.resize(want.size());
      if (ArrayRef<Axes>(have) != want) {
        OpBuilder b(operand.getOwner());
        FailureOr<Value> r =
            reshardAt(b, v, want, operand.getOwner()->getLoc());
        if (failed(r))
          return failure();
        operand.set(*r);
      }
      return success();
    }
    FailureOr<Value> r = reshard(v, want, operand.getOwner()->getLoc());
    if (failed(r))
      return failure();
    operand.set(*r);
    return success();
  }

  /// Every op's rule, taken from the global program before any change.
  DenseMap<Operation *, OpShardingRule> rules;

  LogicalResult partitionRuleOp(ShardingRuleOpInterface op) {
    const OpShardingRule &rule = rules[op];
    SmallVector<SmallVector<Axes>> operandDims, resultDims;
    for (Value v : op->getOperands())
      operandDims.push_back(isa<RankedTensorType>(v.getType())
                                ? held.lookup(v)
                                : SmallVector<Axes>());
    for (Value v : op->getResults())
      resultDims.push_back(recorded(v));
    SmallVector<const SmallVector<Axes> *> operandPtrs, resultPtrs;
    for (auto &d : operandDims)
      operandPtrs.push_back(&d);
    for (auto &d : resultDims)
      resultPtrs.push_back(&d);
    // The factors' axes as propagation chose them; operands follow them,
    // and results are resharded where their recorded sharding differs.
    SmallVector<Axes> axes =
        factorAxes(rule, operandPtrs, resultPtrs,
                   [](unsigned, int64_t) -> int64_t { return 1; });
    for (OpOperand &o : op->getOpOperands()) {
      ArrayRef<int64_t> fs = rule.operandFactors[o.getOperandNumber()];
      if (!isa<RankedTensorType>(o.get().getType()))
        continue;
      SmallVector<Axes> want(fs.size());
      for (auto [d, f] : llvm::enumerate(fs))
        if (f >= 0)
          want[d] = axes[f];
      if (failed(use(o, want)))
        return failure();
      // An op reducing over a dimension in padded blocks reads the padding
      // as the reduction's identity: 0 for a sum or a contraction, the
      // lowest float for a maximum or a softmax (the cross-entropy's
      // classes), unless the op never reads it (an embedding's rows).
      for (auto [d, f] : llvm::enumerate(fs)) {
        if (f < 0 || rule.readsNoPadding(f) || !paddedDim(o.get(), d))
          continue;
        if (rule.factorKinds[f] == FactorKind::Reduction &&
            !zeroPadded(o.get(), d))
          o.set(fillPadding(o.get(), d, 0.0, op));
        else if (rule.factorKinds[f] == FactorKind::ReducedByOp)
          o.set(fillPadding(o.get(), d,
                            double(std::numeric_limits<float>::lowest()), op));
      }
    }
    SmallVector<Type> globalTypes(op->getResultTypes());
    for (auto [r, fs, dims] :
         llvm::zip(op->getResults(), rule.resultFactors, resultDims)) {
      // The op computes its results split as its factors say; where the
      // recorded sharding differs (an annotation on a dimension the rule
      // keeps whole), the result is resharded for its uses.
      SmallVector<Axes> computed(dims.size());
      for (auto [d, f] : llvm::enumerate(fs))
        if (f >= 0)
          computed[d] = axes[f];
      SmallVector<OpOperand *> uses;
      for (OpOperand &u : r.getUses())
        uses.push_back(&u);
      if (failed(setLocalType(r, computed, op.getLoc())))
        return failure();
      FailureOr<Value> reduced = reduceInto(
          r, reductionAxes(rule, axes, r.getResultNumber()), dims, op.getLoc());
      if (failed(reduced))
        return failure();
      FailureOr<Value> resharded = reshard(*reduced, dims, op.getLoc());
      if (failed(resharded))
        return failure();
      for (OpOperand *u : uses)
        u->set(*resharded);
    }
    // The sum (or the maximum) of a value over the ranks of `axes`.
    auto reduceOver = [](bool max) {
      return [max](OpBuilder &b, Location loc, Value v,
                   ArrayRef<StringAttr> a) -> Value {
        SmallVector<StringRef> names;
        for (StringAttr axis : a)
          names.push_back(axis.getValue());
        return dist::AllReduceOp::create(b, loc, v, b.getStrArrayAttr(names),
                                         max);
      };
    };
    LocalizeContext context{
        rule,
        axes,
        globalTypes,
        [&](ArrayRef<StringAttr> a) { return mesh.getGroupSize(a); },
        [&](ArrayRef<StringAttr> a) -> int64_t {
          return mesh.isInDeviceOrder(a) ? int64_t(mesh.getGroupMask(a)) : -1;
        },
        reduceOver(false),
        reduceOver(true),
        [&](Value from, Value to) {
          hold(to, held.lookup(from), wholeShape(from));
          from.replaceAllUsesWith(to);
        }};
    // What the localization builds runs where the op runs: its pipeline
    // stage and ranks (the op itself may be replaced).
    struct Made : public OpBuilder::Listener {
      SmallVector<Operation *> ops;
      void notifyOperationInserted(Operation *op,
                                   OpBuilder::InsertPoint) override {
        ops.push_back(op);
      }
    } made;
    dist::DistDialect &attrs = dist::attrs(op->getContext());
    IntegerAttr stage = attrs.getStageAttrHelper().getAttr(op);
    DictionaryAttr on = attrs.getOnAttrHelper().getAttr(op);
    OpBuilder b(op->getContext(), &made);
    b.setInsertionPointAfter(op);
    if (failed(op.localize(b, context)))
      return failure();
    for (Operation *m : made.ops) {
      if (stage && !attrs.getStageAttrHelper().isAttrPresent(m))
        attrs.getStageAttrHelper().setAttr(m, stage);
      if (on && !attrs.getOnAttrHelper().isAttrPresent(m))
        attrs.getOnAttrHelper().setAttr(m, on);
    }
    return success();
  }

  LogicalResult partitionRepeat(RepeatOp repeat) {
    Block &body = repeat.getBodyBlock();
    for (BlockArgument arg : body.getArguments().drop_front())
      if (failed(setLocalType(arg, recorded(arg), repeat.getLoc())))
        return failure();
    auto argDims = [&](unsigned i) { return held.lookup(body.getArgument(i)); };
    auto withLead = [](SmallVector<Axes> dims) {
      dims.insert(dims.begin(), Axes{});
      return dims;
    };
    unsigned next = 1;
    for (OpOperand &o : repeat.getCarriesMutable())
      if (failed(use(o, argDims(next++))))
        return failure();
    for (OpOperand &o : repeat.getStackedMutable())
      if (failed(use(o, withLead(argDims(next++)))))
        return failure();
    for (OpOperand &o : repeat.getInvariantsMutable())
      if (failed(use(o, argDims(next++))))
        return failure();
    if (failed(partitionBlock(body)))
      return failure();
    YieldOp yield = repeat.getYield();
    for (auto [i, o] : llvm::enumerate(yield.getCarriesMutable()))
      if (failed(use(o, argDims(1 + i))))
        return failure();
    for (auto [result, o] :
         llvm::zip(repeat.getStackedResults(), yield.getStackedMutable())) {
      SmallVector<Axes> dims = recorded(result);
      if (failed(use(o, ArrayRef<Axes>(dims).drop_front())))
        return failure();
    }
    for (auto [i, r] : llvm::enumerate(repeat.getCarryResults()))
      if (failed(setLocalType(r, argDims(1 + i), repeat.getLoc())))
        return failure();
    for (Value r : repeat.getStackedResults())
      if (failed(setLocalType(r, recorded(r), repeat.getLoc())))
        return failure();
    return success();
  }

  /// An all-reduce whose result propagation split over an axis it
  /// reduces (ZeRO's reduction of a gradient before the optimizer): a
  /// reduce-scatter onto that dimension where the operand is a partial sum
  /// over the axis, else (nothing to sum) this rank's block. Returns
  /// whether `reduce` was replaced.
  FailureOr<bool> partitionScatteringReduce(dist::AllReduceOp reduce) {
    Value in = reduce.getInput();
    SmallVector<Axes> want = recorded(reduce.getResult());
    SmallVector<Axes> have = held.lookup(in);
    have.resize(want.size());
    int64_t dim = -1;
    StringAttr axis;
    for (auto [d, axes] : llvm::enumerate(want))
      for (StringAttr a : axes)
        if (!llvm::is_contained(have[d], a) &&
            llvm::is_contained(reduce.getAxes(), a)) {
          if (dim >= 0)
            return reduce.emitOpError("splits its result over more than one "
                                      "of the axes it reduces");
          dim = int64_t(d);
          axis = a;
        }
    if (dim < 0)
      return false;
    if (reduce.getAxes().size() != 1 || reduce.getMax() ||
        reduce.getMembers())
      return reduce.emitOpError("reduces over ")
             << reduce.getAxes()
             << " and splits its result over one of them: only a sum over "
                "one axis becomes a reduce-scatter";
    dist::ShardingAttr operand = getSharding(in);
    bool partial =
        operand && llvm::is_contained(operand.getUnreduced(), axis);
    Value local;
    if (partial) {
      SmallVector<Axes> scatteredDims = have;
      scatteredDims[dim].push_back(axis);
      if (ArrayRef<Axes>(scatteredDims) != ArrayRef<Axes>(want))
        return reduce.emitOpError("cannot reduce-scatter into ")
               << axesAttr(want) << " from " << axesAttr(have);
      SmallVector<int64_t> whole = wholeShape(in);
      OpBuilder b(reduce);
      FailureOr<Value> padded =
          padToDivide(b, in, dim, have[dim], mesh.getAxisSize(axis.getValue()),
                      reduce.getLoc());
      if (failed(padded))
        return failure();
      auto type = cast<RankedTensorType>(padded->getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[dim] /= mesh.getAxisSize(axis.getValue());
      auto scatter = dist::ReduceScatterOp::create(
          b, reduce.getLoc(),
          RankedTensorType::get(shape, type.getElementType()), *padded,
          reduce.getAxes(), b.getI64IntegerAttr(dim));
      hold(scatter, want, whole);
      ++scatters;
      local = scatter;
    } else {
      FailureOr<Value> block = reshard(in, want, reduce.getLoc());
      if (failed(block))
        return failure();
      local = *block;
    }
    reduce.getResult().replaceAllUsesWith(local);
    reduce.erase();
    return true;
  }

  LogicalResult partitionBlock(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isa<ParamOp, InputOp, StateOp, IterationOp, dist::ShardOp>(op))
        continue;
      // Index arithmetic (a pipeline stage's layer numbers) has nothing to
      // partition.
      auto isTensor = [](Type t) { return isa<RankedTensorType>(t); };
      if (op.getNumRegions() == 0 &&
          llvm::none_of(op.getResultTypes(), isTensor) &&
          llvm::none_of(op.getOperandTypes(), isTensor))
        continue;
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
        FailureOr<bool> scattered = partitionScatteringReduce(reduce);
        if (failed(scattered))
          return failure();
        if (*scattered)
          continue;
        if (failed(setLocalType(reduce.getResult(),
                                recorded(reduce.getResult()), reduce.getLoc())))
          return failure();
        continue;
      }
      if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
        auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense || !dense.isSplat())
          return op.emitOpError("only splat constants can be partitioned");
        if (failed(setLocalType(constant.getResult(),
                                recorded(constant.getResult()), op.getLoc())))
          return failure();
        constant.setValueAttr(dense.resizeSplat(
            cast<ShapedType>(constant.getResult().getType())));
        continue;
      }
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        if (failed(partitionRepeat(repeat)))
          return failure();
        continue;
      }
      if (isa<YieldOp>(op))
        continue;
      if (auto output = dyn_cast<OutputOp>(op)) {
        // The loss and gradients are whole; each update is stored as the
        // value it replaces.
        DenseMap<OpOperand *, SmallVector<Axes>> wants;
        for (auto [o, carried] :
             llvm::zip(output.getUpdatesMutable(), model.getStateOps()))
          wants[&o] = held.lookup(carried->getResult(0));
        for (OpOperand &o : output->getOpOperands()) {
          auto type = cast<RankedTensorType>(o.get().getType());
          SmallVector<Axes> want = wants.lookup(&o);
          if (want.size() != size_t(type.getRank()))
            want.assign(type.getRank(), Axes{});
          if (failed(use(o, want)))
            return failure();
        }
        continue;
      }
      auto rule = dyn_cast<ShardingRuleOpInterface>(op);
      if (!rule)
        return op.emitOpError("has no sharding rule, so it cannot be "
                              "partitioned");
      if (failed(partitionRuleOp(rule)))
        return failure();
    }
    return success();
  }

  /// A partial sum that every use takes a block of, over the axes it was
  /// summed over, is reduced and scattered at once: each rank receives
  /// only its block (half the bytes of an all-reduce).
  void fuseReduceScatters() {
    SmallVector<dist::AllReduceOp> reduces;
    model.walk([&](dist::AllReduceOp r) {
      if (!r.getMax())
        reduces.push_back(r);
    });
    for (dist::AllReduceOp reduce : reduces) {
      SmallVector<dist::ShardOp> blocks;
      // The padding before blocks of a dimension they do not divide: the
      // same for every use (they take the same blocks).
      SmallVector<PadOp> pads;
      int64_t dim = -1;
      bool fits = !reduce->use_empty();
      for (Operation *user : reduce->getUsers()) {
        auto pad = dyn_cast<PadOp>(user);
        if (pad && pad->hasOneUse()) {
          if (!pads.empty() && (pads.front().getLow() != pad.getLow() ||
                                pads.front().getHigh() != pad.getHigh())) {
            fits = false;
            break;
          }
          pads.push_back(pad);
          user = *pad->getUsers().begin();
        }
        auto shard = dyn_cast<dist::ShardOp>(user);
        if (!shard) {
          fits = false;
          break;
        }
        for (auto [d, list] : llvm::enumerate(shard.getAxes())) {
          if (cast<ArrayAttr>(list).empty())
            continue;
          if (list != reduce.getAxes() || (dim >= 0 && dim != int64_t(d)))
            fits = false;
          dim = int64_t(d);
        }
        blocks.push_back(shard);
      }
      if (!fits || dim < 0 || (!pads.empty() && pads.size() != blocks.size()))
        continue;
      OpBuilder b(reduce);
      Value input = reduce.getInput();
      if (!pads.empty())
        input = PadOp::create(b, reduce.getLoc(), input, pads.front().getLow(),
                              pads.front().getHigh());
      auto scatter = dist::ReduceScatterOp::create(
          b, reduce.getLoc(), blocks.front().getType(), input, reduce.getAxes(),
          b.getI64IntegerAttr(dim));
      for (dist::ShardOp shard : blocks) {
        shard.getResult().replaceAllUsesWith(scatter.getResult());
        shard.erase();
      }
      for (PadOp pad : pads)
        pad.erase();
      reduce.erase();
      ++scatters;
    }
  }

  /// A bf16 partial sum reduce-scattered over the data axis and then
  /// widened (mixed precision's gradients under ZeRO-2/3: each is widened
  /// where it is made) is widened first and reduce-scattered in f32, as
  /// Megatron-LM reduces its `main_grad` buffers: `f32(rs(g))` becomes
  /// `rs(f32(g))`. Widening is exact, so only the sum's rounding changes;
  /// the tensor axis's scatters (activations) stay bf16.
  void widenBeforeScatter() {
    SmallVector<ConvertOp> widened;
    model.walk([&](ConvertOp convert) {
      auto rs = convert.getInput().getDefiningOp<dist::ReduceScatterOp>();
      if (rs && rs->hasOneUse() && rs->getBlock() == convert->getBlock() &&
          rs.getType().getElementType().isBF16() &&
          convert.getType().getElementType().isF32() &&
          llvm::all_of(rs.getAxes().getAsValueRange<StringAttr>(),
                       [&](StringRef a) {
                         return mesh.getRole(a) == dist::AxisRole::Data;
                       }))
        widened.push_back(convert);
    });
    for (ConvertOp convert : widened) {
      auto rs = convert.getInput().getDefiningOp<dist::ReduceScatterOp>();
      OpBuilder b(rs);
      auto wide = ConvertOp::create(
          b, convert.getLoc(), rs.getInput(),
          cast<FloatType>(convert.getType().getElementType()));
      auto scatter = dist::ReduceScatterOp::create(
          b, rs.getLoc(), convert.getType(), wide, rs.getAxes(),
          rs.getDimAttr());
      sharding::markRecomputed(rs.getInput(), scatter);
      convert.getResult().replaceAllUsesWith(scatter.getResult());
      convert.erase();
      rs.erase();
    }
  }

  /// Partial sums reduce-scattered alike and then added are added first
  /// and reduce-scattered once (the embedding tied to the head: its two
  /// gradients are one gradient, reduced once, also where each is added
  /// into a micro-batch accumulator in turn): `rs(x) + rs(y)` becomes
  /// `rs(x + y)`, and `(a + rs(x)) + rs(y)` becomes `a + rs(x + y)`.
  void sumBeforeScatter() {
    auto scattered = [](Value v) {
      auto rs = v.getDefiningOp<dist::ReduceScatterOp>();
      return rs && rs->hasOneUse() ? rs : dist::ReduceScatterOp();
    };
    auto alike = [](dist::ReduceScatterOp a, dist::ReduceScatterOp b) {
      return a && b && a != b && a.getAxes() == b.getAxes() &&
             a.getDim() == b.getDim() &&
             a.getInput().getType() == b.getInput().getType() &&
             a->getBlock() == b->getBlock();
    };
    SmallVector<AddOp> adds;
    model.walk([&](AddOp add) { adds.push_back(add); });
    DenseSet<Operation *> erased;
    for (AddOp add : adds) {
      if (erased.contains(add))
        continue;
      dist::ReduceScatterOp x, y = scattered(add.getRhs());
      Value rest;
      AddOp inner;
      if (auto lhs = scattered(add.getLhs()); alike(lhs, y)) {
        x = lhs;
      } else if ((inner = add.getLhs().getDefiningOp<AddOp>()) &&
                 inner->hasOneUse() && inner->getBlock() == add->getBlock() &&
                 inner.getType() == add.getType()) {
        if (auto r = scattered(inner.getRhs()); alike(r, y)) {
          x = r;
          rest = inner.getLhs();
        } else if (auto l = scattered(inner.getLhs()); alike(l, y)) {
          x = l;
          rest = inner.getRhs();
        }
      }
      if (!x || x->getBlock() != add->getBlock())
        continue;
      OpBuilder b(add);
      auto sum = AddOp::create(b, add.getLoc(), x.getInput(), y.getInput());
      auto scatter = dist::ReduceScatterOp::create(
          b, add.getLoc(), y.getType(), sum, y.getAxes(), y.getDimAttr());
      sharding::markRecomputed(y.getInput(), scatter);
      Value total = scatter;
      if (rest)
        total = AddOp::create(b, add.getLoc(), rest, scatter);
      add.getResult().replaceAllUsesWith(total);
      add.erase();
      if (inner) {
        erased.insert(inner);
        inner.erase();
      }
      x.erase();
      y.erase();
      --scatters;
    }
  }

  LogicalResult run() {
    model.walk(
        [&](ShardingRuleOpInterface op) { rules[op] = op.getShardingRule(); });
    Block &body = model.getBody().front();
    // Parameters and optimizer state split over axes in device order are
    // stored as this rank's block (the runtime initializes, loads and
    // exports them by global index); inputs, and what cannot be stored so,
    // are whole, and a sharded use takes its block.
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (!isa<ParamOp, InputOp, StateOp, IterationOp>(op))
        continue;
      Value v = op.getResult(0);
      SmallVector<Axes> dims = recorded(v);
      if (isa<ParamOp, StateOp>(op) &&
          llvm::all_of(
              dims, [&](const Axes &a) { return mesh.isInDeviceOrder(a); }) &&
          llvm::any_of(dims, [](const Axes &a) { return !a.empty(); })) {
        auto type = cast<RankedTensorType>(v.getType());
        SmallVector<int64_t> groups;
        for (const Axes &a : dims)
          groups.push_back(mesh.getGroupMask(a));
        dist::DistDialect &attrs = dist::attrs(ctx);
        attrs.getGlobalShapeAttrHelper().setAttr(
            &op, DenseI64ArrayAttr::get(ctx, type.getShape()));
        attrs.getShardGroupsAttrHelper().setAttr(
            &op, DenseI64ArrayAttr::get(ctx, groups));
        if (failed(setLocalType(v, dims, op.getLoc())))
          return failure();
        continue;
      }
      held[v] = SmallVector<Axes>(dims.size());
      if (failed(reshard(v, dims, op.getLoc())))
        return failure();
      Value local = reshards.lookup({v, axesAttr(dims)});
      if (local && local != v)
        v.replaceAllUsesExcept(local, local.getDefiningOp());
    }
    if (failed(partitionBlock(body)))
      return failure();
    fuseReduceScatters();
    widenBeforeScatter();
    sumBeforeScatter();
    model.walk([&](Operation *op) {
      op->removeAttr(dist::attrs(op).getShardingAttrHelper().getName());
      op->removeAttr(dist::attrs(op).getArgShardingsAttrHelper().getName());
    });
    return success();
  }
};

struct DistPartitionPass
    : public loom::impl::DistPartitionBase<DistPartitionPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerTrainShardingRules(registry);
  }
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      auto mesh = dist::attrs(model).getMeshAttrHelper().getAttr(model);
      if (!mesh)
        continue;
      Partitioner p(model, mesh);
      if (failed(p.run()))
        return signalPassFailure();
      numShards += p.shards;
      numGathers += p.gathers;
      numReduceScatters += p.scatters;
    }
  }
};

} // namespace
