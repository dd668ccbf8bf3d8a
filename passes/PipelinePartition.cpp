//===- PipelinePartition.cpp - dist-pipeline-partition ---------------------===//
//
// Layers to pipeline stages. The forward model is a chain of units: each
// iteration of a `train.repeat` is one (a layer), and each run of other
// ops between repeats is one (the embedding before the layers, the head
// and the loss after them). Each unit costs the roofline time of its ops
// (from the ops' cost interface) and holds its parameters' model states
// and its activations. The chain is cut into P·V contiguous stages (P from
// the mesh's pp axis, V virtual stages per rank) so that the slowest stage
// is as fast as possible, every stage within the memory limit: an exact
// dynamic program over cut points, the bottleneck objective of Megatron's
// and Alpa's stage balancing.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/PipelineLoops.h"
#include "dialects/train/Adjoint.h"

#include "dialects/dist/DistDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINEPARTITION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;
using loom::dist::backwardOf;
using loom::dist::weightPartOf;

namespace {

/// A link of the chain the stages cut.
struct Unit {
  /// The repeat and its iteration, or the run of other ops.
  RepeatOp repeat;
  int64_t layer = -1;
  SmallVector<Operation *> ops;
  double cost = 0;
  int64_t paramBytes = 0, activationBytes = 0;
};

struct Partitioner {
  ModelOp model;
  double balance;
  /// Model-state bytes per parameter byte (weights, gradient, state).
  int64_t stateFactor;
  SmallVector<Unit> units;

  /// Roofline time of one op in flop units: its flops, or its bytes at
  /// `balance` flops per byte when it moves more than it computes.
  double costOf(Operation *op) {
    double cost = 0;
    op->walk([&](CostOpInterface c) {
      double bytes = double(c.getBytesRead() + c.getBytesWritten());
      cost += std::max(double(c.getFlops()), bytes * balance);
    });
    return cost;
  }

  int64_t activationsOf(Operation *op) {
    int64_t bytes = 0;
    op->walk([&](Operation *nested) {
      if (isa<CostOpInterface>(nested))
        for (Value r : nested->getResults())
          bytes += tensorBytes(r.getType());
    });
    return bytes;
  }

  void build() {
    Unit run;
    // Parameters a run uses, each counted once per run (a tied embedding
    // is held by both the first and the last stage).
    DenseSet<Operation *> counted;
    auto closeRun = [&]() {
      if (!run.ops.empty())
        units.push_back(std::move(run));
      run = Unit();
      counted.clear();
    };
    for (Operation &op : model.getBody().front()) {
      if (isa<ParamOp, InputOp, OutputOp, arith::ConstantOp>(op))
        continue;
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        closeRun();
        int64_t count = repeat.getCount();
        double cost = 0;
        int64_t activations = 0;
        for (Operation &body : repeat.getBodyBlock()) {
          cost += costOf(&body);
          activations += activationsOf(&body);
        }
        int64_t params = 0;
        for (Value s : repeat.getStacked())
          if (isa_and_nonnull<ParamOp>(s.getDefiningOp()))
            params += tensorBytes(s.getType()) / count;
        for (int64_t i = 0; i < count; ++i) {
          Unit layer;
          layer.repeat = repeat;
          layer.layer = i;
          layer.cost = cost;
          layer.paramBytes = params;
          layer.activationBytes = activations;
          units.push_back(std::move(layer));
        }
        continue;
      }
      run.ops.push_back(&op);
      run.cost += costOf(&op);
      run.activationBytes += activationsOf(&op);
      for (Value operand : op.getOperands())
        if (auto param = operand.getDefiningOp<ParamOp>())
          if (counted.insert(param).second)
            run.paramBytes += tensorBytes(param.getType());
    }
    closeRun();
  }
};

struct DistPipelinePartitionPass
    : public loom::impl::DistPipelinePartitionBase<DistPipelinePartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      dist::MeshAttr mesh = dist::MeshAttr::lookup(model);
      int64_t pp = mesh ? mesh.getSize(dist::AxisRole::Pipeline) : 1;
      if (pp == 1 && virtualStages == 1)
        continue;
      if (!mesh || !mesh.getAxis(dist::AxisRole::Pipeline)) {
        model.emitOpError("has no mesh with a pipeline axis to cut into ")
            << int64_t(virtualStages)
            << " virtual stages (set one with dist-mesh)";
        return signalPassFailure();
      }
      if (failed(partition(model, pp)))
        return signalPassFailure();
    }
  }

  LogicalResult partition(ModelOp model, int64_t pp) {
    if (virtualStages < 1)
      return model.emitOpError("needs at least one virtual stage per rank");
    int64_t stages = pp * virtualStages;
    int64_t factor = 16;
    if (auto sgd = dyn_cast_or_null<SGDAttr>(model.getOptimizerAttr()))
      factor = sgd.getMomentum().isZero() ? 8 : 12;
    // The exact partition below takes stages x units^2 steps: bounded, so
    // that no model makes the compiler run for hours. (A transformer has
    // units in the hundreds: 96 layers on 64 stages take 6 * 10^5 steps.)
    int64_t repeated = 0, others = 0;
    for (Operation &op : model.getBody().front()) {
      if (auto repeat = dyn_cast<RepeatOp>(op))
        repeated = saturatingAdd(repeated, repeat.getCount());
      else if (!isa<ParamOp, InputOp, OutputOp, arith::ConstantOp>(op))
        ++others;
    }
    int64_t upperUnits = saturatingAdd(repeated, others);
    constexpr int64_t kMaxSteps = int64_t(1) << 30;
    if (saturatingMul(stages, saturatingMul(upperUnits, upperUnits)) >
        kMaxSteps)
      return model.emitOpError("has ")
             << repeated << " repeated layers and " << others
             << " other ops to cut into " << stages
             << " pipeline stages; the stage partitioner handles stages x "
                "units^2 up to 2^30 (e.g. 4096 layers on 64 stages)";
    Partitioner p{model, balance, factor, {}};
    p.build();
    int64_t n = p.units.size();
    int64_t layers = llvm::count_if(p.units, [](const Unit &u) {
      return u.layer >= 0;
    });
    if (n < stages)
      return model.emitOpError("cannot fill ")
             << stages << " pipeline stages (pp=" << pp << " x "
             << int64_t(virtualStages) << " virtual stages): it has " << layers
             << " repeated layers and " << n - layers
             << " blocks of other ops, " << n
             << " units a stage can take, and every stage needs one";

    // Prefix sums of cost and memory over the chain.
    SmallVector<double> cost(n + 1, 0);
    SmallVector<int64_t> memory(n + 1, 0);
    int64_t inFlight = std::min<int64_t>(pp, std::max<int64_t>(microBatches, 1));
    for (int64_t i = 0; i < n; ++i) {
      cost[i + 1] = cost[i] + p.units[i].cost;
      memory[i + 1] = memory[i] + p.units[i].paramBytes * factor +
                      p.units[i].activationBytes * inFlight;
    }
    auto fits = [&](int64_t j, int64_t i) {
      return memoryLimit <= 0 || memory[i] - memory[j] <= memoryLimit;
    };
    // best[k][i]: the smallest bottleneck of units [0, i) in k stages.
    constexpr double none = std::numeric_limits<double>::infinity();
    SmallVector<SmallVector<double>> best(
        stages + 1, SmallVector<double>(n + 1, none));
    SmallVector<SmallVector<int64_t>> cut(stages + 1,
                                          SmallVector<int64_t>(n + 1, -1));
    best[0][0] = 0;
    for (int64_t k = 1; k <= stages; ++k)
      for (int64_t i = k; i <= n; ++i)
        for (int64_t j = k - 1; j < i; ++j) {
          if (best[k - 1][j] == none || !fits(j, i))
            continue;
          double bottleneck = std::max(best[k - 1][j], cost[i] - cost[j]);
          if (bottleneck < best[k][i]) {
            best[k][i] = bottleneck;
            cut[k][i] = j;
          }
        }
    if (best[stages][n] == none) {
      int64_t heaviest = 0;
      for (int64_t i = 0; i < n; ++i)
        heaviest = std::max(heaviest, memory[i + 1] - memory[i]);
      return model.emitOpError("cannot be cut into ")
             << stages << " pipeline stages of at most "
             << int64_t(memoryLimit)
             << " bytes each (model states at " << factor
             << " bytes per parameter byte, activations of " << inFlight
             << " micro-batches in flight; the heaviest unit alone needs "
             << heaviest << " bytes)";
    }
    SmallVector<int64_t> stageOf(n);
    SmallVector<double> stageCosts(stages);
    for (int64_t k = stages, i = n; k > 0; --k) {
      int64_t j = cut[k][i];
      for (int64_t u = j; u < i; ++u)
        stageOf[u] = k - 1;
      stageCosts[k - 1] = cost[i] - cost[j];
      i = j;
    }

    // Record the decision: a stage per op, per layer of a repeat, and the
    // stages that use each parameter (two for a tied embedding).
    Builder b(model.getContext());
    dist::DistDialect &attrs = dist::attrs(model);
    DenseMap<Operation *, SmallVector<int64_t>> repeatStages;
    DenseMap<Operation *, int64_t> opStage;
    for (auto [u, unit] : llvm::enumerate(p.units)) {
      if (unit.repeat)
        repeatStages[unit.repeat].push_back(stageOf[u]);
      for (Operation *op : unit.ops) {
        attrs.getStageAttrHelper().setAttr(op,
                                           b.getI64IntegerAttr(stageOf[u]));
        opStage[op] = stageOf[u];
      }
    }
    for (auto &[repeat, layerStages] : repeatStages) {
      attrs.getStagesAttrHelper().setAttr(repeat,
                                          b.getDenseI64ArrayAttr(layerStages));
      for (int64_t s : layerStages)
        opStage.try_emplace(repeat, s);
    }
    model.getBody().walk([&](ParamOp param) {
      SmallVector<int64_t> used;
      for (Operation *user : param->getUsers()) {
        Operation *top = model.getBody().front().findAncestorOpInBlock(*user);
        if (!top)
          continue;
        if (auto it = repeatStages.find(top); it != repeatStages.end())
          llvm::append_range(used, it->second);
        else if (auto s = opStage.find(top); s != opStage.end())
          used.push_back(s->second);
      }
      llvm::sort(used);
      used.erase(llvm::unique(used), used.end());
      attrs.getStagesAttrHelper().setAttr(param, b.getDenseI64ArrayAttr(used));
    });
    // Costs are whole flop counts (flops, and bytes at an integral
    // balance); they are recorded as integers.
    SmallVector<int64_t> unitCosts, wholeStageCosts;
    for (const Unit &u : p.units)
      unitCosts.push_back(std::llround(u.cost));
    for (double c : stageCosts)
      wholeStageCosts.push_back(std::llround(c));
    attrs.getPipelineAttrHelper().setAttr(
        model, dist::PipelineAttr::get(model.getContext(), pp,
                                       int64_t(virtualStages), unitCosts,
                                       wholeStageCosts,
                                       std::llround(best[stages][n])));
    return success();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// dist-pipeline-split
//===----------------------------------------------------------------------===//

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINESPLIT
#include "passes/Passes.h.inc"
} // namespace loom

namespace {

/// Splits `repeat` into one repeat per run of layers on one stage. Each
/// part takes its layers' slices of the stacked operands, carries what the
/// part before it yields, and numbers its iterations from the layer it
/// starts at (so a dropout keyed by the layer index draws the same mask).
LogicalResult splitRepeat(RepeatOp repeat, ArrayRef<int64_t> stages) {
  if (repeat.getReverse() || repeat.getSavesCarries() ||
      !repeat.getStackedResults().empty())
    return repeat.emitOpError(
        "is cut across pipeline stages, which needs a forward repeat with no "
        "stacked results");
  OpBuilder b(repeat);
  Location loc = repeat.getLoc();
  SmallVector<Value> carries(repeat.getCarries());
  int64_t count = repeat.getCount();
  for (int64_t first = 0; first < count;) {
    int64_t last = first;
    while (last + 1 < count && stages[last + 1] == stages[first])
      ++last;
    int64_t n = last - first + 1;
    SmallVector<Value> stacked;
    for (Value s : repeat.getStacked()) {
      auto type = cast<RankedTensorType>(s.getType());
      if (!isa<FloatType>(type.getElementType()))
        return repeat.emitOpError("stacks a non-float operand, which cannot "
                                  "be cut across pipeline stages");
      SmallVector<int64_t> offsets(type.getRank(), 0);
      SmallVector<int64_t> sizes(type.getShape());
      offsets[0] = first;
      sizes[0] = n;
      stacked.push_back(SliceOp::create(b, loc, s, offsets, sizes));
    }
    auto part = RepeatOp::create(b, loc, repeat.getCarryResults().getTypes(),
                                 TypeRange(), n, false, false, carries,
                                 stacked, repeat.getInvariants());
    auto stage = dist::attrs(part).getStageAttrHelper();
    stage.setAttr(part, b.getI64IntegerAttr(stages[first]));
    for (Value s : stacked)
      stage.setAttr(s.getDefiningOp(), b.getI64IntegerAttr(stages[first]));
    IRMapping map;
    repeat.getBody().cloneInto(&part.getBody(), map);
    Block &body = part.getBodyBlock();
    if (first > 0 && !body.getArgument(0).use_empty()) {
      OpBuilder inner = OpBuilder::atBlockBegin(&body);
      Value offset = arith::ConstantIndexOp::create(inner, loc, first);
      Value layer =
          arith::AddIOp::create(inner, loc, body.getArgument(0), offset);
      body.getArgument(0).replaceAllUsesExcept(layer,
                                               layer.getDefiningOp());
    }
    carries.assign(part.getCarryResults().begin(),
                   part.getCarryResults().end());
    first = last + 1;
  }
  repeat.replaceAllUsesWith(carries);
  repeat.erase();
  return success();
}

struct DistPipelineSplitPass
    : public loom::impl::DistPipelineSplitBase<DistPipelineSplitPass> {
  void runOnOperation() override {
    auto layerStages = dist::attrs(&getContext()).getStagesAttrHelper();
    SmallVector<RepeatOp> repeats;
    getOperation().walk([&](RepeatOp repeat) {
      if (layerStages.isAttrPresent(repeat))
        repeats.push_back(repeat);
    });
    for (RepeatOp repeat : repeats) {
      ArrayRef<int64_t> s = layerStages.getAttr(repeat).asArrayRef();
      if (int64_t(s.size()) != int64_t(repeat.getCount())) {
        repeat.emitOpError("has ")
            << s.size() << " stages in '" << layerStages.getNameStr()
            << "' for " << repeat.getCount() << " layers";
        return signalPassFailure();
      }
      if (llvm::all_equal(s)) {
        layerStages.removeAttr(repeat);
        dist::attrs(repeat).getStageAttrHelper().setAttr(
            repeat, Builder(repeat).getI64IntegerAttr(s.front()));
        continue;
      }
      if (failed(splitRepeat(repeat, s)))
        return signalPassFailure();
    }
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// dist-pipeline-transfers
//===----------------------------------------------------------------------===//

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINETRANSFERS
#define GEN_PASS_DEF_DISTPIPELINEREDUCE
#include "passes/Passes.h.inc"
} // namespace loom

namespace {

using dist::placeOnStage;
using dist::stageOf;

struct Transfers {
  Transfers(ModelOp model, int64_t ranks, StringAttr axis)
      : model(model), ranks(ranks), axis(axis) {}

  ModelOp model;
  int64_t ranks;
  /// The mesh's pipeline axis.
  StringAttr axis;
  /// The stages whose ranks hold a value's real contribution: one for an
  /// op on a stage, the union of its operands' for an op on every rank
  /// (which then holds a partial sum: zero where a stage did not run),
  /// none for a value every rank holds whole.
  DenseMap<Value, SmallVector<int64_t, 2>> where;
  /// The received copy of a value on a stage.
  DenseMap<std::pair<Value, int64_t>, Value> received;

  ArrayRef<int64_t> contributors(Value v) {
    auto it = where.find(v);
    if (it != where.end())
      return it->second;
    SmallVector<int64_t, 2> stages;
    if (Operation *def = v.getDefiningOp()) {
      if (auto s = stageOf(def)) {
        stages.push_back(*s);
      } else {
        for (Value operand : def->getOperands())
          llvm::append_range(stages, contributors(operand));
        // A loop on every rank whose body runs ops of stages yields their
        // parts (conservatively: every stage inside it).
        def->walk([&](Operation *nested) {
          if (auto s = stageOf(nested); s && nested != def)
            stages.push_back(*s);
        });
        llvm::sort(stages);
        stages.erase(llvm::unique(stages), stages.end());
      }
    }
    return where[v] = stages;
  }

  /// A copy of `v` on stage `to`, sent from stage `from` right after `v` is
  /// made: both ranks reach the pair at the same point of the program.
  Value transfer(Value v, int64_t from, int64_t to) {
    auto key = std::make_pair(v, to);
    if (Value r = received.lookup(key))
      return r;
    OpBuilder b(v.getContext());
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    Location loc = v.getLoc();
    auto send = dist::SendOp::create(b, loc, v, axis, to % ranks);
    placeOnStage(send, from, ranks);
    auto recv = dist::RecvOp::create(b, loc, v.getType(), axis, from % ranks);
    placeOnStage(recv, to, ranks);
    return received[key] = recv.getResult();
  }

  SmallVector<Operation *> stagedOps() {
    SmallVector<Operation *> staged;
    model.getBody().walk([&](Operation *op) {
      if (stageOf(op))
        staged.push_back(op);
    });
    return staged;
  }

  /// Every rank runs its stages' ops and holds zeros for the others', so
  /// gradients and the loss are partial sums over the pipeline: one
  /// all-reduce over pp makes them whole on every rank, which then takes
  /// the same optimizer step (clipping included) on every parameter.
  void reduce() {
    OutputOp output = model.getOutput();
    OpBuilder b(output);
    auto sum = [&](Value v) -> Value {
      if (contributors(v).empty())
        return v;
      return dist::AllReduceOp::create(b, output.getLoc(), v,
                                       b.getArrayAttr({axis}), false);
    };
    output.getLossMutable().assign(sum(output.getLoss()));
    for (OpOperand &g : output.getGradsMutable())
      g.set(sum(g.get()));
  }

  /// A staged op that reads another stage's value gets a copy sent right
  /// after the value is made; then the stage decides the rank (`dist.on`,
  /// which the verifier and the code generator read).
  /// The forward edges (a stage reading a lower stage's value) at the top
  /// level of `body`, once per value and reading stage, in order.
  SmallVector<std::tuple<Value, int64_t, int64_t>> forwardEdges(Block &body) {
    SmallVector<std::tuple<Value, int64_t, int64_t>> edges;
    DenseSet<std::pair<Value, int64_t>> seen;
    for (Operation &op : body) {
      std::optional<int64_t> stage = stageOf(&op);
      if (!stage)
        continue;
      for (Value v : op.getOperands()) {
        ArrayRef<int64_t> from = contributors(v);
        if (from.size() == 1 && from[0] < *stage &&
            from[0] % ranks != *stage % ranks &&
            seen.insert({v, *stage}).second)
          edges.push_back({v, from[0], *stage});
      }
    }
    return edges;
  }

  /// The backward of the micro-batch loop recomputes each micro-batch's
  /// forward. Across stages that would send the activations again, and
  /// make a stage's backward wait for the earlier stages' recomputation;
  /// instead the forward loop keeps what each stage received (a stacked
  /// result per transfer) and the backward reads it back.
  void saveForwardTransfers(RepeatOp forward, RepeatOp backward) {
    Block &fBody = forward.getBodyBlock(), &bBody = backward.getBodyBlock();
    auto fEdges = forwardEdges(fBody), bEdges = forwardEdges(bBody);
    if (fEdges.empty() || fEdges.size() != bEdges.size())
      return;
    for (auto [f, b] : llvm::zip(fEdges, bEdges))
      if (std::get<0>(f).getType() != std::get<0>(b).getType() ||
          std::get<1>(f) != std::get<1>(b) || std::get<2>(f) != std::get<2>(b))
        return;
    // The forward loop: each transfer's received value, yielded per
    // micro-batch before the saved carries.
    SmallVector<Value> received;
    for (auto [v, from, to] : fEdges) {
      Value r = transfer(v, from, to);
      v.replaceUsesWithIf(r, [&, to = to](OpOperand &use) {
        std::optional<int64_t> s = stageOf(use.getOwner());
        return s && *s == to && use.getOwner() != r.getDefiningOp() &&
               !isa<dist::SendOp>(use.getOwner());
      });
      received.push_back(r);
    }
    int64_t count = forward.getCount();
    size_t numCarries = forward.getCarries().size();
    size_t numUser = forward.getStackedResults().size() - numCarries;
    OpBuilder b(forward);
    SmallVector<Type> stackedTypes;
    for (Value r : forward.getStackedResults().take_front(numUser))
      stackedTypes.push_back(r.getType());
    for (Value r : received) {
      auto t = cast<RankedTensorType>(r.getType());
      SmallVector<int64_t> shape{count};
      llvm::append_range(shape, t.getShape());
      stackedTypes.push_back(RankedTensorType::get(shape, t.getElementType()));
    }
    for (Value r : forward.getStackedResults().take_back(numCarries))
      stackedTypes.push_back(r.getType());
    auto saving = RepeatOp::create(
        b, forward.getLoc(), forward.getCarryResults().getTypes(),
        stackedTypes, count, forward.getReverse(), forward.getSavesCarries(),
        forward.getCarries(), forward.getStacked(), forward.getInvariants());
    saving->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
    saving.getBody().takeBody(forward.getBody());
    YieldOp yield = saving.getYield();
    SmallVector<Value> slices(yield.getStacked().take_front(numUser));
    llvm::append_range(slices, received);
    llvm::append_range(slices, yield.getStacked().take_back(numCarries));
    OpBuilder y(yield);
    YieldOp::create(y, yield.getLoc(), yield.getCarries(), slices);
    yield.erase();
    for (auto [i, r] : llvm::enumerate(forward.getCarryResults()))
      r.replaceAllUsesWith(saving.getCarryResults()[i]);
    for (size_t i = 0; i < numUser; ++i)
      forward.getStackedResults()[i].replaceAllUsesWith(
          saving.getStackedResults()[i]);
    for (size_t i = 0; i < numCarries; ++i)
      forward.getStackedResults()[numUser + i].replaceAllUsesWith(
          saving.getStackedResults()[numUser + received.size() + i]);
    forward.erase();

    // The backward loop reads them as stacked operands.
    size_t bCarries = backward.getCarries().size();
    size_t bStacked = backward.getStacked().size();
    SmallVector<Value> stacked(backward.getStacked());
    for (size_t k = 0; k < received.size(); ++k)
      stacked.push_back(saving.getStackedResults()[numUser + k]);
    OpBuilder bb(backward);
    auto reading = RepeatOp::create(
        bb, backward.getLoc(), backward.getCarryResults().getTypes(),
        backward.getStackedResults().getTypes(), backward.getCount(),
        backward.getReverse(), backward.getSavesCarries(),
        backward.getCarries(), stacked, backward.getInvariants());
    reading->setDiscardableAttrs(backward->getDiscardableAttrDictionary());
    reading.getBody().takeBody(backward.getBody());
    Block &body = reading.getBodyBlock();
    for (auto [k, r] : llvm::enumerate(received)) {
      BlockArgument slice = body.insertArgument(
          1 + bCarries + bStacked + k, r.getType(), r.getLoc());
      auto [v, from, to] = bEdges[k];
      v.replaceUsesWithIf(slice, [&, to = to](OpOperand &use) {
        std::optional<int64_t> s = stageOf(use.getOwner());
        return s && *s == to;
      });
    }
    backward.replaceAllUsesWith(reading.getResults());
    backward.erase();
  }

  /// The micro-batch loop and its backward: a forward repeat saving its
  /// carries whose body runs stages' ops, and the reverse repeat that
  /// reads its saved carries.
  void saveMicroBatchTransfers() {
    SmallVector<std::pair<RepeatOp, RepeatOp>> loops;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward); backward && !stageOf(forward))
        loops.push_back({forward, backward});
    for (auto [forward, backward] : loops)
      saveForwardTransfers(forward, backward);
  }

  LogicalResult transferAll() {
    saveMicroBatchTransfers();
    SmallVector<Operation *> staged = stagedOps();
    for (Operation *op : staged) {
      int64_t stage = *stageOf(op);
      for (OpOperand &use : op->getOpOperands()) {
        ArrayRef<int64_t> from = contributors(use.get());
        if (from.empty() || (from.size() == 1 && from[0] == stage))
          continue;
        if (from.size() > 1)
          return op->emitOpError("runs on pipeline stage ")
                 << stage << " and reads a value that stages "
                 << llvm::make_range(from.begin(), from.end())
                 << " each hold part of, which pipelines do not combine "
                    "yet";
        if (from[0] % ranks == stage % ranks) {
          // Interleaved stages on one rank run in different actions of
          // the schedule, which keep nothing for each other.
          if (from[0] != stage)
            return op->emitOpError("runs on pipeline stage ")
                   << stage << " and reads a value of stage " << from[0]
                   << ", which runs on the same rank; interleaved stages "
                      "exchange values only with other ranks' stages";
          continue;
        }
        use.set(transfer(use.get(), from[0], stage));
      }
    }
    // The stage decides the rank (`dist.on`, which the verifier and the
    // code generator read); `dist.stage` stays for the schedule's actions.
    for (Operation *op : staged)
      placeOnStage(op, *stageOf(op), ranks);
    // Pairs found before any is rewritten: accumulatePerStage replaces the
    // backward repeat, which a walk over the repeats would reach erased.
    SmallVector<RepeatOp> backwards;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward); backward && !stageOf(forward))
        backwards.push_back(backward);
    for (RepeatOp backward : backwards)
      accumulatePerStage(backward);
    return success();
  }

  /// The leaves of a sum over stages: `v` itself when one stage makes it,
  /// or the leaves of an add of no stage; false when `v` is neither.
  bool stageLeaves(Value v, Block &body,
                   SmallVectorImpl<std::pair<Value, int64_t>> &leaves) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body)
      return false;
    if (std::optional<int64_t> s = stageOf(def)) {
      leaves.push_back({v, *s});
      return true;
    }
    auto add = dyn_cast<AddOp>(def);
    return add && add.getLhs().getType() == add.getType() &&
           add.getRhs().getType() == add.getType() && v.hasOneUse() &&
           stageLeaves(add.getLhs(), body, leaves) &&
           stageLeaves(add.getRhs(), body, leaves);
  }

  /// The backward micro-batch loop accumulates each gradient as the sum
  /// over stages of their parts, padded to the whole parameter: every
  /// action would add (and zero-fill) the whole model's gradients. Instead
  /// each stage's part accumulates in a carry of its own, updated by an op
  /// of that stage (so only its actions touch it); the padding and the
  /// sum over stages happen once, after the loop.
  void accumulatePerStage(RepeatOp backward) {
    Block &body = backward.getBodyBlock();
    YieldOp yield = backward.getYield();
    size_t numCarries = backward.getCarries().size();
    struct Part {
      Value value;       ///< the stage's gradient in the loop
      int64_t stage;
      /// Its padding to the whole parameter, if any.
      DenseI64ArrayAttr low, high;
    };
    SmallVector<SmallVector<Part>> parts(numCarries);
    bool any = false;
    for (auto [k, next] : llvm::enumerate(yield.getCarries())) {
      BlockArgument arg = body.getArgument(1 + k);
      auto add = next.getDefiningOp<AddOp>();
      if (!add || stageOf(add) || !arg.hasOneUse() ||
          !next.hasOneUse() || add.getLhs() != arg)
        continue;
      SmallVector<std::pair<Value, int64_t>> leaves;
      if (!stageLeaves(add.getRhs(), body, leaves))
        continue;
      for (auto [v, stage] : leaves) {
        auto pad = v.getDefiningOp<PadOp>();
        if (pad && !v.hasOneUse())
          pad = PadOp();
        if (pad)
          parts[k].push_back(
              {pad.getInput(), stage, pad.getLowAttr(), pad.getHighAttr()});
        else
          parts[k].push_back({v, stage, {}, {}});
      }
      any = true;
    }
    if (!any)
      return;

    // The new loop: the carries kept, then one per stage part.
    OpBuilder b(backward);
    Location loc = backward.getLoc();
    SmallVector<Value> carries;
    SmallVector<Type> carryTypes;
    for (auto [k, init] : llvm::enumerate(backward.getCarries()))
      if (parts[k].empty()) {
        carries.push_back(init);
        carryTypes.push_back(init.getType());
      }
    size_t kept = carries.size();
    for (auto &list : parts)
      for (Part &part : list) {
        carries.push_back(zerosLike(b, loc, part.value.getType()));
        carryTypes.push_back(part.value.getType());
      }
    auto loop = RepeatOp::create(
        b, loc, carryTypes, backward.getStackedResults().getTypes(),
        backward.getCount(), backward.getReverse(), backward.getSavesCarries(),
        carries, backward.getStacked(), backward.getInvariants());
    loop->setDiscardableAttrs(backward->getDiscardableAttrDictionary());
    loop.getBody().takeBody(backward.getBody());

    // In the body: each part's accumulation on its stage.
    OpBuilder in(yield);
    SmallVector<Value> nexts;
    for (auto [k, next] : llvm::enumerate(yield.getCarries()))
      if (parts[k].empty())
        nexts.push_back(next);
    size_t at = 1 + numCarries;
    for (auto &list : parts)
      for (Part &part : list) {
        BlockArgument acc =
            body.insertArgument(at++, part.value.getType(), loc);
        auto sum = AddOp::create(in, loc, acc, part.value);
        placeOnStage(sum, part.stage, ranks);
        nexts.push_back(sum);
      }
    SmallVector<Value> stackedYields(yield.getStacked());
    YieldOp::create(in, yield.getLoc(), nexts, stackedYields);
    // The old accumulations go, then their carries' arguments.
    SmallVector<Operation *> dead;
    for (auto [k, next] : llvm::enumerate(yield.getCarries()))
      if (!parts[k].empty())
        dead.push_back(next.getDefiningOp());
    yield.erase();
    for (Operation *op : dead) {
      SmallVector<Operation *> work{op};
      while (!work.empty()) {
        Operation *o = work.pop_back_val();
        if (!o->use_empty())
          continue;
        SmallVector<Operation *> operands;
        for (Value v : o->getOperands())
          if (Operation *d = v.getDefiningOp();
              d && d->getBlock() == &body && isa<AddOp, PadOp>(d) &&
              !llvm::any_of(parts, [&](auto &list) {
                return llvm::any_of(list, [&](Part &p) {
                  return p.value == d->getResult(0);
                });
              }))
            operands.push_back(d);
        o->erase();
        llvm::append_range(work, operands);
      }
    }
    for (size_t k = numCarries; k-- > 0;)
      if (!parts[k].empty())
        body.eraseArgument(1 + k);

    // After the loop: each gradient is its initial value plus its stages'
    // parts, padded to the whole parameter.
    OpBuilder after(loop);
    after.setInsertionPointAfter(loop);
    size_t keptIndex = 0, partIndex = kept;
    for (auto [k, result] : llvm::enumerate(backward.getCarryResults())) {
      if (parts[k].empty()) {
        result.replaceAllUsesWith(loop.getCarryResults()[keptIndex++]);
        continue;
      }
      Value total = backward.getCarries()[k];
      for (Part &part : parts[k]) {
        Value acc = loop.getCarryResults()[partIndex++];
        if (part.low)
          acc = PadOp::create(after, loc, acc, part.low, part.high);
        total = AddOp::create(after, loc, total, acc);
      }
      result.replaceAllUsesWith(total);
    }
    for (auto [old, now] :
         llvm::zip(backward.getStackedResults(), loop.getStackedResults()))
      old.replaceAllUsesWith(now);
    backward.erase();
  }
};

/// The pipeline axis of the mesh of a model with a pipeline.
FailureOr<StringAttr> pipelineAxis(ModelOp model) {
  dist::MeshAttr mesh = dist::MeshAttr::lookup(model);
  if (StringAttr axis = mesh ? mesh.getAxis(dist::AxisRole::Pipeline)
                             : StringAttr())
    return axis;
  return model.emitOpError("has a pipeline but no mesh with a pipeline axis "
                           "(set one with dist-mesh)");
}

/// The model's pipeline ranks, or 0 when it has no pipeline.
int64_t pipelineOf(ModelOp model) {
  auto record = dist::attrs(model).getPipelineAttrHelper().getAttr(model);
  return record ? record.getRanks() : 0;
}

struct DistPipelineReducePass
    : public loom::impl::DistPipelineReduceBase<DistPipelineReducePass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      int64_t ranks = pipelineOf(model);
      if (!ranks)
        continue;
      OutputOp output = model.getOutput();
      if (output.getGrads().empty() || !output.getUpdates().empty()) {
        model.emitOpError("needs its gradients (after train-autodiff, before "
                          "train-optimizer) for dist-pipeline-reduce");
        return signalPassFailure();
      }
      FailureOr<StringAttr> axis = pipelineAxis(model);
      if (failed(axis))
        return signalPassFailure();
      Transfers t(model, ranks, *axis);
      t.reduce();
    }
  }
};

struct DistPipelineTransfersPass
    : public loom::impl::DistPipelineTransfersBase<DistPipelineTransfersPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      int64_t ranks = pipelineOf(model);
      if (!ranks)
        continue;
      FailureOr<StringAttr> axis = pipelineAxis(model);
      if (failed(axis))
        return signalPassFailure();
      Transfers t(model, ranks, *axis);
      if (failed(t.transferAll()))
        return signalPassFailure();
    }
  }
};

} // namespace
