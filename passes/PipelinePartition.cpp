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

#include "analysis/Roofline.h"


#include "dialects/dist/DistDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>
#include <limits>

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINEPARTITION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

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
  /// The device, in flop units at the pass's balance (flops per byte).
  analysis::Roofline roofline;
  /// Model-state bytes per parameter byte (weights, gradient, state).
  int64_t stateFactor;
  SmallVector<Unit> units;

  /// Roofline time of one op in flop units: its flops, or its bytes at
  /// the balance when it moves more than it computes.
  double costOf(Operation *op) {
    double cost = 0;
    op->walk([&](CostOpInterface c) {
      cost += roofline.flopEquivalents(
          double(c.getFlops()), double(c.getBytesRead() + c.getBytesWritten()));
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
    Partitioner p{model, analysis::Roofline::ofBalance(balance), factor, {}};
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
