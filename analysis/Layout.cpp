//===- Layout.cpp - the persistent tensors of a trained model -------------===//

#include "analysis/Layout.h"
#include "dialects/dist/DistDialect.h"

using namespace mlir;
using namespace loom::analysis;
using namespace loom::train;

// Roles, as in loomrt.h.
enum { kParam = 0, kState = 1, kInput = 2, kIteration = 3, kLoss = 4 };

/// The number of ranks in the runtime group `mask` of `op`'s mesh.
static int64_t groupSize(Operation *op, int64_t mask) {
  loom::dist::MeshAttr mesh = loom::dist::MeshAttr::lookup(op);
  return mesh ? mesh.getGroupSize(mask) : 1;
}

/// The bound of an integer input's values: the vocabulary of the embedding
/// or the class count of the cross-entropy that consumes it (whole where
/// tensor parallelism splits them: vocab-parallel).
static int64_t boundOf(Value input) {
  for (OpOperand &use : input.getUses()) {
    Operation *user = use.getOwner();
    if (auto e = dyn_cast<EmbeddingOp>(user))
      if (use.get() == e.getIds())
        return e.getVocabSize() ? e.getVocabSize()
                                : e.getTable().getType().getDimSize(0) *
                                      groupSize(e, e.getVocabGroup());
    if (auto ce = dyn_cast<CrossEntropyOp>(user))
      if (use.get() == ce.getLabels())
        return ce.getLogits().getType().getShape().back();
    if (auto stats = dyn_cast<CrossEntropyStatsOp>(user))
      if (use.get() == stats.getLabels())
        return stats.getVocabSize()
                   ? stats.getVocabSize()
                   : stats.getLogits().getType().getShape().back() *
                         groupSize(stats, stats.getVocabGroup());
    // Through reshapes, a rank's block and into repeats (micro-batch
    // slices).
    int64_t bound = 0;
    if (auto reshape = dyn_cast<ReshapeOp>(user))
      bound = boundOf(reshape.getResult());
    else if (auto shard = dyn_cast<loom::dist::ShardOp>(user))
      bound = boundOf(shard.getResult());
    else if (auto repeat = dyn_cast<RepeatOp>(user))
      bound = boundOf(repeat.getBodyBlock().getArgument(
          1 + use.getOperandNumber()));
    if (bound)
      return bound;
  }
  return 0;
}

FailureOr<ModelLayout> loom::analysis::layoutModel(ModelOp model) {
  OutputOp output = model.getOutput();
  if (output.getUpdates().empty())
    return model.emitOpError("is not a training step yet (run the Loom "
                             "pipeline: train-autodiff, train-optimizer)");
  Block &body = model.getBody().front();
  ModelLayout layout;
  auto add = [&](Value v, TensorEntry entry) {
    entry.type = cast<RankedTensorType>(v.getType());
    Operation *def = v.getDefiningOp();
    dist::DistDialect &attrs = dist::attrs(def);
    auto global = attrs.getGlobalShapeAttrHelper().getAttr(def);
    auto groups = attrs.getShardGroupsAttrHelper().getAttr(def);
    if (global && groups) {
      entry.globalShape.assign(global.asArrayRef().begin(),
                               global.asArrayRef().end());
      entry.shardGroups.assign(groups.asArrayRef().begin(),
                               groups.asArrayRef().end());
    }
    if (auto part = attrs.getPartAttrHelper().getAttr(def)) {
      entry.partOf = part.getOf().str();
      entry.partWhole.assign(part.getWhole().begin(), part.getWhole().end());
      entry.partOffsets.assign(part.getOffsets().begin(),
                               part.getOffsets().end());
    }
    layout.tensors.push_back(entry);
    int64_t index = layout.tensors.size() - 1;
    layout.stepPersistent[v] = index;
    layout.evalPersistent[v] = index;
    return index;
  };
  // A parameter one pipeline stage uses (and its optimizer state) lives
  // on that stage's ranks only; one that stages on some ranks use (the
  // tied embedding on a longer pipeline) on the ranks that run its update.
  auto pipeline = dist::attrs(model).getPipelineAttrHelper().getAttr(model);
  dist::MeshAttr mesh = dist::MeshAttr::lookup(model);
  int32_t pipelineAxis =
      pipeline && mesh ? mesh.getAxisIndex(dist::AxisRole::Pipeline) : -1;
  llvm::StringMap<int64_t> owners; // the mask of pipeline coordinates
  if (pipelineAxis >= 0) {
    StringAttr axisName = mesh.getAxis(dist::AxisRole::Pipeline);
    for (ParamOp p : body.getOps<ParamOp>()) {
      if (auto stages = dist::attrs(p).getStagesAttrHelper().getAttr(p);
          stages && stages.size() == 1)
        owners[p.getName()] = int64_t(1) << (stages[0] % pipeline.getRanks());
      for (Operation *user : p->getUsers()) {
        if (!isa<SGDUpdateOp, AdamWUpdateOp>(user))
          continue;
        auto on = dist::attrs(user).getOnAttrHelper().getAttr(user);
        if (!on || !on.get(axisName))
          continue;
        int64_t mask = 0;
        for (int64_t c = 0; c < pipeline.getRanks(); ++c)
          if (dist::onAdmits(on.get(axisName), c))
            mask |= int64_t(1) << c;
        owners[p.getName()] = mask;
      }
    }
  }
  auto hold = [&](StringRef param) {
    auto it = owners.find(param);
    if (it == owners.end())
      return;
    layout.tensors.back().heldAxis = pipelineAxis;
    layout.tensors.back().heldMask = it->second;
  };
  int64_t iteration = -1;
  for (Operation &op : body) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      InitAttr init = p.getInit();
      add(p, {p.getName().str(), kParam, {}, int32_t(init.getKind()),
              init.getValue().convertToDouble(), 0});
      hold(p.getName());
    } else if (auto s = dyn_cast<StateOp>(op)) {
      add(s, {s.getName().str(), kState, {}, 0, 0.0, 0});
      hold(s.getOf());
    } else if (auto in = dyn_cast<InputOp>(op)) {
      add(in, {in.getName().str(), kInput, {}, 0, 0.0, boundOf(in)});
    } else if (auto it = dyn_cast<IterationOp>(op)) {
      if (iteration < 0)
        iteration = add(it, {"step", kIteration, {}, 0, 0.0, 0});
      layout.stepPersistent[it] = iteration;
      layout.evalPersistent[it] = iteration;
    }
  }
  TensorEntry loss{"loss", kLoss,
                   cast<RankedTensorType>(output.getLoss().getType()), 0, 0.0,
                   0};
  layout.tensors.push_back(loss);
  layout.lossIndex = layout.tensors.size() - 1;

  for (Operation &op : body.without_terminator())
    layout.stepOps.insert(&op);
  layout.evalOps = evaluationOps(model);

  // An update is written in place when its op is the last to read the value
  // it replaces and nothing else reads the new value, or when it is the
  // gather of updated blocks (ZeRO below stage 3) and everything that reads
  // the value it replaces ran before it.
  DenseMap<Operation *, int64_t> order;
  int64_t n = 0;
  for (Operation &op : body)
    order[&op] = n++;
  for (auto [update, carried] :
       llvm::zip(output.getUpdates(), model.getStateOps())) {
    int64_t index = layout.stepPersistent.lookup(carried->getResult(0));
    Operation *def = update.getDefiningOp();
    bool reads = def && llvm::is_contained(def->getOperands(),
                                           carried->getResult(0));
    bool inPlace = def && def->getBlock() == &body && update.hasOneUse() &&
                   (reads || isa<loom::dist::AllGatherOp>(def));
    if (inPlace)
      for (Operation *user : carried->getResult(0).getUsers()) {
        Operation *anc = body.findAncestorOpInBlock(*user);
        if (!anc || order[anc] > order[def])
          inPlace = false;
      }
    if (inPlace)
      layout.stepPersistent[update] = index;
    else
      layout.copiedUpdates.push_back({index, update});
  }
  return layout;
}

DenseSet<Operation *> loom::analysis::evaluationOps(ModelOp model) {
  DenseSet<Operation *> ops;
  OutputOp output = model.getOutput();
  // Evaluation runs the ops the loss depends on, inside loops too: of a
  // loop that also computes gradients (a micro-batch's forward and
  // backward in one iteration), only the forward.
  SmallVector<Value> work{output.getLoss()};
  DenseSet<Value> needed;
  auto need = [&](Value v) {
    if (needed.insert(v).second)
      work.push_back(v);
  };
  auto mark = [&](Operation *op) {
    for (; op && op != model.getOperation(); op = op->getParentOp())
      ops.insert(op);
  };
  // The slice, then, in every block it reaches, the ops that return
  // nothing (a pipeline's sends, which the receives they pair with need),
  // until nothing more is needed.
  bool grew = true;
  while (grew) {
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto repeat = dyn_cast<RepeatOp>(arg.getOwner()->getParentOp());
      if (!repeat || arg.getArgNumber() == 0)
        continue;
      unsigned n = arg.getArgNumber() - 1;
      need(repeat->getOperand(n));
      if (n < repeat.getCarries().size())
        need(repeat.getYield().getCarries()[n]);
      continue;
    }
    Operation *def = v.getDefiningOp();
    mark(def);
    if (auto repeat = dyn_cast<RepeatOp>(def)) {
      unsigned n = cast<OpResult>(v).getResultNumber();
      size_t carries = repeat.getCarries().size();
      YieldOp yield = repeat.getYield();
      if (n < carries) {
        need(repeat.getCarries()[n]);
        need(yield.getCarries()[n]);
      } else {
        need(yield.getStacked()[n - carries]);
      }
      continue;
    }
    for (Value operand : def->getOperands())
      need(operand);
  }
  grew = false;
  DenseSet<Block *> reached;
  for (Operation *op : ops)
    reached.insert(op->getBlock());
  for (Block *block : reached)
    for (Operation &op : *block)
      if (op.getNumResults() == 0 && !op.hasTrait<OpTrait::IsTerminator>() &&
          ops.insert(&op).second) {
        grew = true;
        for (Value operand : op.getOperands())
          need(operand);
      }
  }

  return ops;
}
