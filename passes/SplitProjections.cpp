//===- SplitProjections.cpp - dist-split-projections ----------------------===//
//
// A fused projection whose output is only ever sliced (QKV: one [d, 3d]
// weight whose product is cut into q, k and v) becomes one projection per
// slice, over one part of the weight (and of its bias) each, so that the
// sharding passes see three linear layers and split each by heads.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/RepeatSplit.h"

#include "dialects/dist/DistDialect.h"

namespace loom {
#define GEN_PASS_DEF_DISTSPLITPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// Where a weight comes from: a parameter that nothing else reads, read
/// directly or, as one slice per layer, by the repeat it is stacked into.
struct Source {
  ParamOp param;
  RepeatOp repeat; // null when read directly
  Value seen;      // what the reading op reads: the parameter or its slice
};

/// The source of `v`, a value read once, if it is a parameter (or the
/// layer's slice of a stacked one) that nothing else reads.
std::optional<Source> sourceOf(Value v) {
  if (!v.hasOneUse())
    return std::nullopt;
  if (auto param = v.getDefiningOp<ParamOp>())
    return Source{param, RepeatOp(), v};
  auto arg = dyn_cast<BlockArgument>(v);
  auto repeat =
      arg ? dyn_cast<RepeatOp>(arg.getOwner()->getParentOp()) : RepeatOp();
  if (!repeat)
    return std::nullopt;
  unsigned first = 1 + repeat.getCarries().size();
  if (arg.getArgNumber() < first ||
      arg.getArgNumber() >= first + repeat.getStacked().size())
    return std::nullopt;
  unsigned index = arg.getArgNumber() - first;
  Value outer = repeat.getStacked()[index];
  auto param = outer.getDefiningOp<ParamOp>();
  if (!param || !outer.hasOneUse())
    return std::nullopt;
  return Source{param, repeat, v};
}

/// A projection `x · w (+ b)` whose output only slices read, each a range
/// of its last dimension, together covering it once.
struct Fused {
  MatmulOp matmul;
  Source weight;
  int64_t weightDim = 0; // the weight's dimension of the output features
  AddOp bias;            // null without a bias
  Source biasSource;
  llvm::SmallVector<SliceOp> slices; // by offset
};

/// The slices that read `v` if they are all its reads and cut its last
/// dimension alone into ranges that cover it once, ordered by offset.
std::optional<SmallVector<SliceOp>> coveringSlices(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t last = type.getRank() - 1, n = type.getDimSize(last);
  SmallVector<SliceOp> slices;
  for (Operation *user : v.getUsers()) {
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice)
      return std::nullopt;
    for (int64_t d = 0; d < last; ++d)
      if (slice.getOffsets()[d] != 0 ||
          slice.getSizes()[d] != type.getDimSize(d))
        return std::nullopt;
    slices.push_back(slice);
  }
  if (slices.size() < 2)
    return std::nullopt;
  llvm::sort(slices, [&](SliceOp a, SliceOp b) {
    return a.getOffsets()[last] < b.getOffsets()[last];
  });
  int64_t next = 0;
  for (SliceOp slice : slices) {
    if (slice.getOffsets()[last] != next)
      return std::nullopt;
    next += slice.getSizes()[last];
  }
  if (next != n)
    return std::nullopt;
  return slices;
}

std::optional<Fused> asFused(MatmulOp matmul) {
  auto rhs = cast<RankedTensorType>(matmul.getRhs().getType());
  if (rhs.getRank() != 2)
    return std::nullopt;
  std::optional<Source> weight = sourceOf(matmul.getRhs());
  if (!weight)
    return std::nullopt;
  Fused f{matmul, *weight, matmul.getTransposeRhs() ? 0 : 1};
  Value out = matmul.getResult();
  auto outType = cast<RankedTensorType>(out.getType());
  int64_t n = outType.getShape().back();
  // A bias: a vector of the output features added once.
  if (out.hasOneUse())
    if (auto add = dyn_cast<AddOp>(*out.getUsers().begin());
        add && add.getLhs() == out && add.getType() == outType) {
      auto biasType = cast<RankedTensorType>(add.getRhs().getType());
      std::optional<Source> bias = sourceOf(add.getRhs());
      if (bias && biasType.getRank() == 1 && biasType.getDimSize(0) == n &&
          bias->param != weight->param &&
          (!bias->repeat || !weight->repeat ||
           bias->repeat == weight->repeat)) {
        f.bias = add;
        f.biasSource = *bias;
        out = add.getResult();
      }
    }
  std::optional<SmallVector<SliceOp>> slices = coveringSlices(out);
  if (!slices)
    return std::nullopt;
  f.slices = std::move(*slices);
  return f;
}

/// A parameter stored as parts: the new parameters, and what the reading
/// op sees of each (the part, or its layer's slice).
struct Parts {
  SmallVector<Value> params, seen;
};

/// Splits `source`'s parameter along `dim` of what the reading op sees
/// (the parameter's dimension `dim`, or `dim + 1` when stacked) into one
/// part per `ranges` entry (offset, size). A stacked parameter's repeat
/// gets a block argument per part; `replaceStacked` finishes it.
Parts splitSource(Source source, int64_t dim,
                  ArrayRef<std::pair<int64_t, int64_t>> ranges) {
  ParamOp param = source.param;
  auto type = cast<RankedTensorType>(param.getType());
  int64_t at = dim + (source.repeat ? 1 : 0);
  OpBuilder b(param);
  Parts parts;
  for (auto [offset, size] : ranges) {
    SmallVector<int64_t> offsets(type.getRank(), 0);
    SmallVector<int64_t> sizes(type.getShape());
    offsets[at] = offset;
    sizes[at] = size;
    parts.params.push_back(makeParamPart(b, param, offsets, sizes));
  }
  if (!source.repeat) {
    parts.seen = parts.params;
    return parts;
  }
  for (BlockArgument arg : addStackedSlices(
           source.repeat, cast<BlockArgument>(source.seen), parts.params))
    parts.seen.push_back(arg);
  return parts;
}

/// Rewrites `f` into one projection per slice, each over its parts of the
/// weight and the bias.
void split(Fused f) {
  int64_t lastDim =
      cast<RankedTensorType>(f.slices.front().getType()).getRank() - 1;
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  for (SliceOp slice : f.slices)
    ranges.push_back({slice.getOffsets()[lastDim], slice.getSizes()[lastDim]});
  MatmulOp matmul = f.matmul;
  // What the projection read of each parameter, and the parts replacing it.
  SmallVector<std::pair<Value, Source>> read{{matmul.getRhs(), f.weight}};
  Parts weights = splitSource(f.weight, f.weightDim, ranges), biases;
  if (f.bias) {
    read.push_back({f.bias.getRhs(), f.biasSource});
    biases = splitSource(f.biasSource, 0, ranges);
  }
  Operation *last = f.bias ? f.bias.getOperation() : matmul.getOperation();
  OpBuilder b(last);
  b.setInsertionPointAfter(last);
  for (auto [k, slice] : llvm::enumerate(f.slices)) {
    Value y =
        MatmulOp::create(b, matmul.getLoc(), matmul.getLhs(), weights.seen[k],
                         matmul.getTransposeLhs(), matmul.getTransposeRhs());
    y.getDefiningOp()->setDiscardableAttrs(
        matmul->getDiscardableAttrDictionary());
    if (f.bias) {
      y = AddOp::create(b, f.bias.getLoc(), y, biases.seen[k]);
      y.getDefiningOp()->setDiscardableAttrs(
          f.bias->getDiscardableAttrDictionary());
    }
    slice.getResult().replaceAllUsesWith(y);
  }
  for (SliceOp slice : f.slices)
    slice.erase();
  if (f.bias)
    f.bias.erase();
  matmul.erase();
  // The whole parameters go; the repeat that stacked them is rebuilt with
  // the parts in their place.
  RepeatOp repeat;
  SmallVector<std::pair<BlockArgument, SmallVector<Value>>> stacked;
  for (auto [k, entry] : llvm::enumerate(read)) {
    auto &[value, source] = entry;
    if (source.repeat) {
      repeat = source.repeat;
      stacked.push_back({cast<BlockArgument>(value),
                         k == 0 ? weights.params : biases.params});
    }
  }
  if (repeat)
    replaceStacked(repeat, stacked);
  for (auto &[value, source] : read)
    source.param.erase();
}

struct DistSplitProjectionsPass
    : public loom::impl::DistSplitProjectionsBase<DistSplitProjectionsPass> {
  void runOnOperation() override {
    getOperation().walk([&](ModelOp model) {
      dist::MeshAttr mesh = dist::MeshAttr::lookup(model);
      if (!mesh || mesh.getSize(dist::AxisRole::Tensor) < 2)
        return;
      // One at a time: splitting rebuilds the repeat that holds the next.
      while (true) {
        std::optional<Fused> found;
        model.walk([&](MatmulOp matmul) {
          found = asFused(matmul);
          return found ? WalkResult::interrupt() : WalkResult::advance();
        });
        if (!found)
          break;
        split(*found);
      }
    });
  }
};

} // namespace
