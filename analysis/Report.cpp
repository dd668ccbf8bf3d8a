//===- Report.cpp - the plan's figures (loomc --report) -------------------===//

#include "analysis/Report.h"

#include "analysis/Roofline.h"
#include "dialects/dist/DistDialect.h"

#include "analysis/Layout.h"
#include "analysis/MemoryPlan.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace loom::analysis;
using namespace loom::train;

llvm::Expected<Cluster> loom::analysis::readCluster(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   "cannot read the cluster description '" +
                                       path + "'");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "'" + path + "' is not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *o = json->getAsObject();
  auto missing = [&](llvm::StringRef field) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + path + "': missing or non-numeric '" +
                                       field + "'");
  };
  auto number = [&](const llvm::json::Object *obj, llvm::StringRef key,
                    double &out) -> bool {
    std::optional<double> v = obj ? obj->getNumber(key) : std::nullopt;
    if (!v || !(*v > 0))
      return false;
    out = *v;
    return true;
  };
  Cluster c;
  if (!o)
    return missing("the top-level object");
  if (auto name = o->getString("name"))
    c.name = name->str();
  double devices = 0;
  if (!number(o, "devices_per_node", devices))
    return missing("devices_per_node");
  c.devicesPerNode = int64_t(devices);
  const llvm::json::Object *peak = o->getObject("peak_flops");
  if (!number(peak, "fp32", c.peakFlopsFp32))
    return missing("peak_flops.fp32");
  if (!number(peak, "bf16", c.peakFlopsBf16))
    return missing("peak_flops.bf16");
  if (!number(o, "memory_bytes", c.memoryBytes))
    return missing("memory_bytes");
  if (!number(o, "memory_bandwidth", c.memoryBandwidth))
    return missing("memory_bandwidth");
  const llvm::json::Object *intra = o->getObject("intra_node");
  const llvm::json::Object *inter = o->getObject("inter_node");
  if (!number(intra, "bandwidth", c.intraBandwidth))
    return missing("intra_node.bandwidth");
  if (!number(intra, "latency", c.intraLatency))
    return missing("intra_node.latency");
  if (!number(inter, "bandwidth", c.interBandwidth))
    return missing("inter_node.bandwidth");
  if (!number(inter, "latency", c.interLatency))
    return missing("inter_node.latency");
  return c;
}

using loom::dist::AxisRole;
using loom::dist::MeshAttr;

/// The size of the axis of `role` (1 without a mesh or such an axis).
/// Adds to `r` the FLOPs of the ops that backward loops in `block` run
/// again (`train.recompute`), `times` over.
static void addRecomputation(Block &block, int64_t times, bool backward,
                             Report &r) {
  auto *dialect = block.getParentOp()
                      ->getContext()
                      ->getLoadedDialect<loom::train::TrainDialect>();
  for (Operation &op : block) {
    if (auto repeat = dyn_cast<RepeatOp>(op)) {
      addRecomputation(repeat.getBodyBlock(), times * repeat.getCount(),
                       backward || repeat.getReverse(), r);
      continue;
    }
    auto cost = dyn_cast<CostOpInterface>(op);
    if (!backward || !cost ||
        !dialect->getRecomputeAttrHelper().isAttrPresent(&op))
      continue;
    r.recomputeFlopsPerStep += times * cost.getFlops();
    r.recomputeMatmulFlopsPerStep += times * cost.getMatmulFlops();
    r.recomputeAttentionFlopsPerStep += times * cost.getAttentionFlops();
  }
}

static int64_t axisSize(MeshAttr mesh, AxisRole role) {
  return mesh ? mesh.getSize(role) : 1;
}

llvm::StringRef loom::analysis::collectiveName(Collective kind) {
  static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                "all_to_all", "broadcast",  "send"};
  return names[int(kind)];
}

/// Ring steps of each collective (latencies paid) and the fraction of the
/// buffer each rank sends, over N ranks.
static std::pair<double, double> ringShape(Collective kind, int64_t n) {
  double steps = double(n - 1), share = double(n - 1) / double(n);
  switch (kind) {
  case Collective::AllReduce:
    return {2 * steps, 2 * share};
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return {steps, share};
  case Collective::Broadcast: // a chain: every rank but the last forwards
    return {steps, 1.0};
  case Collective::Send:
    return {1.0, 1.0};
  }
  return {0, 0};
}

double loom::analysis::collectiveBytesSent(Collective kind, double bytes,
                                          int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  return ringShape(kind, groupSize).second * bytes;
}

double loom::analysis::collectiveSeconds(Collective kind, double bytes,
                                        int64_t groupSize, bool crossesNodes,
                                        const Cluster &cluster) {
  if (groupSize <= 1)
    return 0;
  auto [steps, share] = ringShape(kind, groupSize);
  double latency = crossesNodes ? cluster.interLatency : cluster.intraLatency;
  double bandwidth =
      crossesNodes ? cluster.interBandwidth : cluster.intraBandwidth;
  return steps * latency + share * bytes / bandwidth;
}

/// The bytes of `param`'s bf16 copy as the step keeps it between its
/// uses, where it is a mixed-precision master (read by a narrowing
/// `train.convert`): the copy, or the copy gathered whole where the master
/// is a ZeRO block below stage 3 (stage 3 gathers it for each use, and
/// keeps the block); none for any other parameter.
static std::optional<int64_t> bf16CopyBytes(ParamOp param) {
  auto model = param->getParentOfType<ModelOp>();
  auto zero = loom::dist::attrs(model).getZeroAttrHelper().getAttr(model);
  bool gathersForEachUse = zero && zero.getInt() >= 3;
  std::optional<int64_t> bytes;
  for (ConvertOp narrow : bf16Copies(param)) {
    Value copy = narrow.getResult();
    if (copy.hasOneUse() && !gathersForEachUse)
      if (auto gather = dyn_cast<loom::dist::AllGatherOp>(*copy.user_begin()))
        copy = gather.getResult();
    bytes = bytes.value_or(0) + tensorBytes(copy.getType());
  }
  return bytes;
}

/// The gradient an optimizer update reads (null for any other op).
static Value updateGradient(Operation *op) {
  if (auto u = dyn_cast<SGDUpdateOp>(op))
    return u.getGrad();
  if (auto u = dyn_cast<AdamWUpdateOp>(op))
    return u.getGrad();
  return Value();
}

/// The bytes of the gradients the model's optimizer updates read.
static int64_t updatedGradientBytes(ModelOp model) {
  int64_t bytes = 0;
  model.walk([&](Operation *op) {
    if (Value grad = updateGradient(op))
      bytes += tensorBytes(grad.getType());
  });
  return bytes;
}

FailureOr<Report> loom::analysis::reportModel(ModelOp model,
                                             const Config &config,
                                             const std::optional<Cluster> &cluster) {
  FailureOr<ModelLayout> layout = layoutModel(model);
  if (failed(layout))
    return failure();
  Report r;
  r.model = model.getSymName().str();
  r.cluster = cluster;
  r.config = config;
  r.ranks = config.mesh ? config.mesh.getNumRanks() : 1;
  int64_t dp = axisSize(config.mesh, AxisRole::Data);
  bool bf16 = config.precision == Precision::Bf16;
  Block &body = model.getBody().front();
  int64_t batchTokens = 0;
  // Mixed precision's bf16 copies live in the arena (made at the step's
  // start, read until the backward's last use); they are the parameters'
  // row, and their f32 masters a row of their own.
  int64_t copyBytes = 0;
  for (Operation &op : body) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      r.parameterCount += p.getType().getNumElements();
      if (std::optional<int64_t> copy = bf16CopyBytes(p)) {
        r.masterBytes += tensorBytes(p.getType());
        r.parameterBytes += *copy;
        copyBytes += *copy;
      } else {
        r.parameterBytes += tensorBytes(p.getType());
      }
    } else if (auto s = dyn_cast<StateOp>(op)) {
      r.optimizerStateBytes += tensorBytes(s.getType());
    } else if (auto in = dyn_cast<InputOp>(op)) {
      r.inputBytes += tensorBytes(in.getType());
      auto type = cast<RankedTensorType>(in.getType());
      if (dp > 1 && (!type.getRank() || type.getDimSize(0) % dp))
        return in.emitError("the batch dimension of input '")
               << in.getName() << "' ("
               << (type.getRank() ? type.getDimSize(0) : 1)
               << ") does not split over dp=" << dp;
      if (in.getName() == "tokens")
        batchTokens = type.getNumElements();
      else if (!batchTokens && type.getRank())
        batchTokens = type.getDimSize(0);
    }
  }
  r.tokensPerStep = batchTokens;
  // Each rank holds its share of the batch.
  r.inputBytes /= dp;
  // The gradients the optimizer consumes (f32 for a bf16 master, or in
  // --grad-precision), one per parameter where the step has no optimizer.
  r.gradientBytes = updatedGradientBytes(model);
  if (!r.gradientBytes)
    r.gradientBytes = r.parameterBytes;
  // The arena holds the gradients beside the activations; they are counted
  // as gradients (whole, as if all were live at the peak), the rest as
  // activations and temporaries of this rank's share of the batch.
  // The plan loom-memory-plan recorded (the one-rank program loomc
  // compiles), else planned here. A mesh's training step is planned as
  // one rank, whatever its pipeline.
  int64_t arena = 0;
  if (config.mesh && config.mesh.getNumRanks() > 1) {
    arena = planMemory(body, layout->stepOps, layout->stepPersistent).peakBytes;
  } else {
    FailureOr<SmallVector<int64_t>> peaks =
        arenaPeaks(model, "step", layout->stepOps, layout->stepPersistent);
    if (failed(peaks))
      return failure();
    arena = peaks->front();
  }
  r.arenaPeakBytes =
      std::max<int64_t>(arena - r.gradientBytes - copyBytes, 0) / dp;
  r.bf16ScratchBytes = bf16ScratchBytes(model);

  double seconds = 0;
  double peak = cluster ? (bf16 ? cluster->peakFlopsBf16
                                : cluster->peakFlopsFp32)
                        : 0;
  for (Operation &op : body) {
    auto cost = dyn_cast<CostOpInterface>(op);
    if (!cost)
      continue;
    int64_t flops = cost.getFlops();
    int64_t bytes = cost.getBytesRead() + cost.getBytesWritten();
    r.flopsPerStep += flops;
    r.matmulFlopsPerStep += cost.getMatmulFlops();
    r.attentionFlopsPerStep += cost.getAttentionFlops();
    r.bytesAccessedPerStep += bytes;
    // Roofline per op, on this rank's share of the batch (its bytes in
    // its tensors' types).
    if (cluster)
      seconds += Roofline{peak, cluster->memoryBandwidth}.seconds(
          double(flops) / double(dp), double(bytes) / double(dp));
  }
  addRecomputation(body, 1, false, r);
  if (dp > 1) {
    StringRef dataAxis = config.mesh.getAxis(AxisRole::Data).getValue();
    CommLine grads{Collective::AllReduce, dataAxis.str(), dp,
                   collectiveBytesSent(Collective::AllReduce,
                                       double(r.gradientBytes), dp),
                   0.0, "the gradients, once per step"};
    if (cluster)
      grads.seconds = collectiveSeconds(
          Collective::AllReduce, double(r.gradientBytes), dp,
          config.mesh.crossesNodes(dataAxis, cluster->devicesPerNode),
          *cluster);
    r.communication.push_back(grads);
  }
  if (cluster && seconds > 0) {
    r.computeSeconds = seconds;
    for (const CommLine &c : r.communication)
      r.communicationSeconds += c.seconds;
    // Not overlapped: the gradient reduction follows the backward pass.
    r.predictedStepSeconds = r.computeSeconds + r.communicationSeconds;
    double modelFlops = 6.0 * double(r.parameterCount) *
                        double(r.tokensPerStep) / double(dp);
    r.mfu = modelFlops / (r.predictedStepSeconds * peak);
  }
  return r;
}

/// Whether the first rank (coordinate 0 on every axis) runs `op`: a
/// pipeline stage's ops run on its ranks only (`dist.on`).
static bool runsOnFirstRank(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto on = loom::dist::attrs(op).getOnAttrHelper().getAttr(op))
      for (NamedAttribute entry : on)
        if (!loom::dist::onAdmits(entry.getValue(), 0))
          return false;
  return true;
}

LogicalResult Report::useRankProgram(ModelOp rank) {
  FailureOr<ModelLayout> layout = layoutModel(rank);
  if (failed(layout))
    return failure();
  Block &body = rank.getBody().front();
  // Model states as each pipeline rank stores them (split parameters as
  // blocks; a stage's parameters and optimizer state on its ranks only),
  // and the gradients its updates consume. Without a pipeline, one row.
  MeshAttr mesh = loom::dist::MeshAttr::lookup(rank);
  int64_t pipelineAxis =
      mesh ? mesh.getAxisIndex(AxisRole::Pipeline) : int64_t(-1);
  int64_t pp = pipelineAxis >= 0 ? mesh.getSize(AxisRole::Pipeline) : 1;
  StringAttr ppName = pipelineAxis >= 0 ? mesh.getAxis(AxisRole::Pipeline)
                                        : StringAttr();
  pipelineRanks.assign(size_t(pp), StageStates());
  llvm::StringMap<ParamOp> params;
  for (ParamOp p : body.getOps<ParamOp>())
    params[p.getName()] = p;
  // Each rank's bf16 copies, in its arena.
  SmallVector<int64_t> copies(size_t(pp), 0);
  for (const TensorEntry &t : layout->tensors)
    for (int64_t c = 0; c < pp; ++c) {
      if (t.heldAxis >= 0 && !((t.heldMask >> c) & 1))
        continue;
      StageStates &s = pipelineRanks[size_t(c)];
      if (t.role == 0) {
        ParamOp p = params.lookup(t.name);
        if (std::optional<int64_t> copy = p ? bf16CopyBytes(p) : std::nullopt) {
          // Its own parameters are its copy's elements (a ZeRO block's
          // master, below stage 3, is gathered whole in bf16).
          s.masterBytes += tensorBytes(t.type);
          s.parameterBytes += *copy;
          s.parameterElements += *copy / 2;
          copies[size_t(c)] += *copy;
        } else {
          s.parameterBytes += tensorBytes(t.type);
          s.parameterElements += t.type.getNumElements();
        }
      } else if (t.role == 1) {
        s.optimizerStateBytes += tensorBytes(t.type);
      }
    }
  // The parameters' dimensions split in padded blocks.
  padding.clear();
  for (const TensorEntry &t : layout->tensors) {
    if (t.role != 0 || t.globalShape.empty() || !mesh)
      continue;
    for (auto [d, mask] : llvm::enumerate(t.shardGroups)) {
      int64_t blocks = mesh.getGroupSize(mask);
      int64_t block = t.type.getDimSize(d);
      if (blocks * block != t.globalShape[d])
        padding.push_back({t.partOf.empty() ? t.name : t.partOf, int64_t(d),
                           t.globalShape[d], blocks, block});
    }
  }
  if (auto zero = loom::dist::attrs(rank).getZeroAttrHelper().getAttr(rank))
    zeroStage = zero.getInt();
  // The first rank's FLOPs: each op it runs (not a loop, whose ops are
  // counted themselves), times the iterations of the loops around it.
  rankFlopsPerStep = rankMatmulFlopsPerStep = 0;
  rank.walk([&](CostOpInterface cost) {
    if (isa<RepeatOp>(cost) || !runsOnFirstRank(cost))
      return;
    int64_t times = 1;
    for (Operation *p = cost->getParentOp(); p && p != rank;
         p = p->getParentOp())
      if (auto loop = dyn_cast<RepeatOp>(p))
        times *= loop.getCount();
    rankFlopsPerStep += times * cost.getFlops();
    rankMatmulFlopsPerStep += times * cost.getMatmulFlops();
  });
  rank.walk([&](RepeatOp loop) {
    // Each prefetched gather: the carried layer and the next one in flight.
    int64_t held = 0;
    for (auto start :
         loop.getBodyBlock().getOps<loom::dist::AllGatherStartOp>())
      if (start.getIndex())
        held += 2 * tensorBytes(start.getType());
    gatheredInFlightBytes = std::max(gatheredInFlightBytes, held);
  });
  rank.walk([&](Operation *op) {
    Value grad = updateGradient(op);
    if (!grad)
      return;
    // The gradient buffer the rank holds: what an update reads, or, under
    // ZeRO-1, where that is the (clipped) reduce-scatter of a whole
    // gradient in the step's body (its one reduction before the
    // optimizer), the whole gradient it reads.
    if (auto mul = grad.getDefiningOp<MulOp>())
      if (cast<RankedTensorType>(mul.getRhs().getType()).getRank() == 0)
        grad = mul.getLhs();
    if (auto scatter = grad.getDefiningOp<loom::dist::ReduceScatterOp>())
      if (zeroStage == 1 && scatter->getBlock() == &body)
        grad = scatter.getInput();
    auto on = loom::dist::attrs(op).getOnAttrHelper().getAttr(op);
    for (int64_t r = 0; r < pp; ++r)
      if (!on || !ppName || loom::dist::onAdmits(on.get(ppName), r))
        pipelineRanks[size_t(r)].gradientBytes += tensorBytes(grad.getType());
  });
  // Each pipeline rank plans its own arena (what its stages run): the plan
  // loom-memory-plan recorded, or planned here where it did not run. The
  // gradients in it are what its updates consume.
  FailureOr<SmallVector<int64_t>> arenas =
      arenaPeaks(rank, "step", layout->stepOps, layout->stepPersistent);
  if (failed(arenas))
    return failure();
  if (int64_t(arenas->size()) != pp)
    return rank.emitOpError("has a memory plan of ")
           << arenas->size() << " pipeline ranks, and " << pp
           << " pipeline ranks";
  for (int64_t c = 0; c < pp; ++c) {
    int64_t arena = (*arenas)[size_t(c)];
    StageStates &s = pipelineRanks[size_t(c)];
    s.activationBytes =
        std::max<int64_t>(arena - s.gradientBytes - copies[size_t(c)], 0);
  }
  arenaPeakBytes = pipelineRanks[0].activationBytes;
  bf16ScratchBytes = loom::analysis::bf16ScratchBytes(rank);
  activationsFromRankProgram = true;
  parameterBytes = pipelineRanks[0].parameterBytes;
  masterBytes = pipelineRanks[0].masterBytes;
  optimizerStateBytes = pipelineRanks[0].optimizerStateBytes;
  gradientBytes = pipelineRanks[0].gradientBytes;
  if (pp == 1)
    pipelineRanks.clear();
  if (!cluster)
    return success();
  double peak = config.precision == Precision::Bf16 ? cluster->peakFlopsBf16
                                                    : cluster->peakFlopsFp32;
  Roofline device{peak, cluster->memoryBandwidth};
  double seconds = 0;
  for (Operation &op : body)
    if (auto cost = dyn_cast<CostOpInterface>(op); cost && runsOnFirstRank(&op))
      seconds += device.seconds(
          double(cost.getFlops()),
          double(cost.getBytesRead() + cost.getBytesWritten()));
  computeSeconds = seconds;
  predictedStepSeconds = computeSeconds + communicationSeconds;
  double modelFlops = 6.0 * double(parameterCount) * double(tokensPerStep) /
                      double(ranks);
  mfu = modelFlops / (predictedStepSeconds * peak);
  return success();
}

void Report::addPipelineBubble(double firstRankBubble) {
  if (!cluster || computeSeconds <= 0 || firstRankBubble <= 0 ||
      firstRankBubble >= 1)
    return;
  double busy = computeSeconds - bubbleSeconds;
  double before = predictedStepSeconds;
  computeSeconds = busy / (1.0 - firstRankBubble);
  bubbleSeconds = computeSeconds - busy;
  predictedStepSeconds = computeSeconds + communicationSeconds;
  mfu *= before / predictedStepSeconds;
}

void Report::readVerification(ModelOp rank) {
  auto record = loom::dist::attrs(rank).getVerifiedAttrHelper().getAttr(rank);
  if (!record)
    return;
  Verified v;
  v.ranks = record.getSimulated();
  v.of = record.getRanks();
  v.ops = record.getOps();
  for (auto a : record.getClassAxes().getAsRange<StringAttr>())
    v.classAxes.push_back(a.str());
  verified = v;
}

void Report::setCommunication(std::vector<CommLine> lines) {
  communication = std::move(lines);
  double before = predictedStepSeconds;
  communicationSeconds = 0;
  for (const CommLine &c : communication)
    communicationSeconds += c.seconds;
  if (before > 0) {
    predictedStepSeconds = computeSeconds + communicationSeconds;
    mfu *= before / predictedStepSeconds;
  }
}

/// Bytes the group's rank `rank` sends in the runtime's ring all-reduce of
/// `n` f32 elements over `size` ranks: the chunks it forwards in the
/// reduce-scatter and the all-gather halves (chunks differ by one element
/// when `n` does not divide).
static int64_t ringAllReduceBytes(int64_t n, int64_t size, int64_t rank) {
  auto chunk = [&](int64_t i) { return n / size + (i < n % size ? 1 : 0); };
  int64_t sent = 0;
  for (int64_t s = 0; s + 1 < size; ++s)
    sent += chunk((rank - s + size) % size) +
            chunk((rank + 1 - s + size) % size);
  return sent * 4;
}

/// Whether `v` is (a slice of) an activation a forward layer loop saved
/// for the backward (one of its stacked results), followed through the
/// block arguments of the loops that read it.
static bool isSavedActivation(Value v) {
  for (int depth = 0; depth < 16; ++depth) {
    if (auto repeat = v.getDefiningOp<RepeatOp>())
      return !repeat.getReverse() &&
             llvm::is_contained(repeat.getStackedResults(), v);
    if (auto slice = v.getDefiningOp<SliceOp>()) {
      v = slice.getInput();
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(v);
    auto loop =
        arg ? dyn_cast<RepeatOp>(arg.getOwner()->getParentOp()) : RepeatOp();
    if (!loop || arg.getArgNumber() == 0)
      return false;
    // The body's arguments after the iteration are the loop's operands.
    v = loop->getOperand(arg.getArgNumber() - 1);
  }
  return false;
}

std::vector<CommLine>
loom::analysis::countCommunication(ModelOp rankProgram, MeshAttr mesh,
                                  const std::optional<Cluster> &cluster) {
  std::vector<CommLine> lines;
  rankProgram.walk([&](Operation *op) {
    if (!runsOnFirstRank(op))
      return;
    Collective kind;
    Type buffer = op->getNumOperands() ? op->getOperand(0).getType() : Type();
    if (isa<dist::SendOp>(op))
      kind = Collective::Send;
    else if (isa<dist::AllReduceOp, dist::AllReduceStartOp>(op))
      kind = Collective::AllReduce;
    else if (isa<dist::AllGatherOp, dist::AllGatherStartOp>(op)) {
      kind = Collective::AllGather;
      buffer = op->getResult(0).getType();
    } else if (isa<dist::ReduceScatterOp>(op))
      kind = Collective::ReduceScatter;
    else if (isa<dist::AllToAllOp>(op))
      kind = Collective::AllToAll;
    else if (isa<dist::BroadcastOp>(op))
      kind = Collective::Broadcast;
    else
      return;
    Builder b(op->getContext());
    auto axes = isa<dist::SendOp>(op)
                    ? b.getStrArrayAttr({cast<dist::SendOp>(op).getAxis()})
                    : cast<ArrayAttr>(op->getAttr("axes"));
    std::string axis;
    int64_t size = 1;
    for (auto [name, n] : llvm::zip(mesh.getNames(), mesh.getSizes()))
      for (StringRef a : axes.getAsValueRange<StringAttr>())
        if (a == name.getValue()) {
          axis += (axis.empty() ? "" : "+") + name.getValue().str();
          size *= n;
        }
    // Two members of an axis exchange their tensors (each sends it whole).
    auto members = dyn_cast<dist::AllReduceOp>(op)
                       ? cast<dist::AllReduceOp>(op).getMembers()
                       : std::nullopt;
    if (members) {
      axis += " members " + std::to_string((*members)[0]) + "+" +
              std::to_string((*members)[1]);
      size = int64_t(members->size());
    }
    int64_t times = 1;
    for (Operation *p = op->getParentOp(); p && p != rankProgram;
         p = p->getParentOp())
      if (auto repeat = dyn_cast<RepeatOp>(p))
        times *= repeat.getCount();
    // A gather of the next layer's slice runs in every iteration but the
    // last (or not at all, outside a loop, for a slice out of range).
    if (auto start = dyn_cast<dist::AllGatherStartOp>(op)) {
      auto loop = dyn_cast<RepeatOp>(op->getParentOp());
      int64_t count = loop ? loop.getCount() : 1;
      times = times / count * start.getGatherCount(count);
    }
    // A bucket of several tensors is one collective over all of them.
    int64_t elements = 0, bytes = 0;
    SmallVector<Type> buffers{buffer};
    if (isa<dist::AllReduceStartOp>(op))
      buffers.assign(op->getOperandTypes().begin(), op->getOperandTypes().end());
    for (Type t : buffers) {
      elements += cast<RankedTensorType>(t).getNumElements();
      bytes += tensorBytes(t);
    }
    double sent = kind == Collective::AllReduce
                      ? double(ringAllReduceBytes(elements, size, 0))
                      : collectiveBytesSent(kind, double(bytes), size);
    if (kind == Collective::Send || members)
      sent = double(bytes);
    bool crosses = cluster && llvm::any_of(
        axes.getAsValueRange<StringAttr>(), [&](StringRef a) {
          return mesh.crossesNodes(a, cluster->devicesPerNode);
        });
    double seconds = cluster ? collectiveSeconds(kind, double(bytes), size,
                                                 crosses, *cluster)
                             : 0.0;
    auto *train = op->getContext()->getLoadedDialect<TrainDialect>();
    double recomputed =
        train && train->getRecomputeAttrHelper().isAttrPresent(op)
            ? sent * double(times)
            : 0.0;
    double regathered =
        kind == Collective::AllGather && isSavedActivation(op->getOperand(0))
            ? sent * double(times)
            : 0.0;
    for (CommLine &line : lines)
      if (line.kind == kind && line.axis == axis) {
        line.bytesSent += sent * double(times);
        line.seconds += seconds * double(times);
        line.count += times;
        line.recomputeBytesSent += recomputed;
        line.regatherBytesSent += regathered;
        return;
      }
    lines.push_back({kind, axis, size, sent * double(times),
                     seconds * double(times), "counted in the rank program",
                     times, recomputed, regathered});
  });
  return lines;
}

llvm::json::Value Report::toJSON() const {
  llvm::json::Object memory{{"parameters", parameterBytes},
                            {"gradients", gradientBytes},
                            {"optimizer_state", optimizerStateBytes},
                            {"master_parameters", masterBytes},
                            {"model_states", modelStateBytes()},
                            {"activations_peak", arenaPeakBytes},
                            {"bf16_scratch", bf16ScratchBytes},
                            {"inputs", inputBytes},
                            {"total", totalBytes()}};
  if (!pipelineRanks.empty()) {
    llvm::json::Array perRank;
    for (const StageStates &s : pipelineRanks)
      perRank.push_back(llvm::json::Object{
          {"parameters", s.parameterBytes},
          {"parameter_elements", s.parameterElements},
          {"gradients", s.gradientBytes},
          {"optimizer_state", s.optimizerStateBytes},
          {"master_parameters", s.masterBytes},
          {"activations_peak", s.activationBytes},
          {"model_states", s.modelStateBytes()}});
    memory["per_pipeline_rank"] = std::move(perRank);
  }
  llvm::json::Array padded;
  for (const Padding &p : padding)
    padded.push_back(llvm::json::Object{{"tensor", p.tensor},
                                        {"dim", p.dim},
                                        {"size", p.size},
                                        {"blocks", p.blocks},
                                        {"block", p.block}});
  memory["padding"] = std::move(padded);
  // Bytes sent per rank per step, by collective kind and mesh axis.
  llvm::json::Object comm;
  llvm::json::Array collectives;
  for (const CommLine &c : communication) {
    llvm::json::Object *byAxis = comm.getObject(collectiveName(c.kind));
    if (!byAxis) {
      comm[collectiveName(c.kind)] = llvm::json::Object{};
      byAxis = comm.getObject(collectiveName(c.kind));
    }
    double before = byAxis->getNumber(c.axis).value_or(0.0);
    (*byAxis)[c.axis] = before + c.bytesSent;
    collectives.push_back(llvm::json::Object{{"kind", collectiveName(c.kind)},
                                             {"axis", c.axis},
                                             {"group_size", c.groupSize},
                                             {"bytes_sent", c.bytesSent},
                                             {"seconds", c.seconds},
                                             {"count", c.count},
                                             {"what", c.what}});
  }
  llvm::json::Object mesh;
  if (config.mesh)
    for (auto [name, size] :
         llvm::zip(config.mesh.getNames(), config.mesh.getSizes()))
      mesh[name.getValue()] = size;
  llvm::json::Object out{
      {"model", model},
      {"ranks", ranks},
      {"parameter_count", parameterCount},
      {"memory_per_rank_bytes", std::move(memory)},
      {"mesh", std::move(mesh)},
      {"precision",
       config.precision == Precision::Bf16 ? "bf16-mixed" : "fp32"},
      {"communication_bytes_per_step", std::move(comm)},
      {"collectives", std::move(collectives)},
      {"bubble_fraction", pipelineBubble.value_or(0.0)},
      {"flops_per_step", flopsPerStep},
      {"matmul_flops_per_step", matmulFlopsPerStep},
      {"attention_flops_per_step", attentionFlopsPerStep},
      {"rank_flops_per_step", rankFlopsPerStep},
      {"rank_matmul_flops_per_step", rankMatmulFlopsPerStep},
      {"remat", remat},
      {"zero_stage", zeroStage},
      {"gathered_in_flight_bytes", gatheredInFlightBytes},
      {"recompute_flops_per_step", recomputeFlopsPerStep},
      {"recompute_communication_bytes_per_step",
       [&] {
         double sum = 0;
         for (const CommLine &c : communication)
           sum += c.recomputeBytesSent;
         return sum;
       }()},
      {"regather_communication_bytes_per_step",
       [&] {
         double sum = 0;
         for (const CommLine &c : communication)
           sum += c.regatherBytesSent;
         return sum;
       }()},
      {"recompute_matmul_flops_per_step", recomputeMatmulFlopsPerStep},
      {"recompute_attention_flops_per_step", recomputeAttentionFlopsPerStep},
      {"bytes_accessed_per_step", bytesAccessedPerStep},
      {"tokens_per_step", tokensPerStep}};
  if (pipelineBubble)
    out["pipeline"] = llvm::json::Object(pipeline);
  if (verified) {
    llvm::json::Array axes;
    for (const std::string &a : verified->classAxes)
      axes.push_back(a);
    out["communication_verified"] = llvm::json::Object{
        {"ranks_simulated", verified->ranks},
        {"ranks", verified->of},
        {"class_axes", std::move(axes)},
        {"ops_per_rank", verified->ops}};
  }
  if (cluster) {
    out["cluster"] = cluster->name;
    out["compute_seconds"] = computeSeconds;
    out["bubble_seconds"] = bubbleSeconds;
    out["communication_seconds"] = communicationSeconds;
    out["predicted_step_seconds"] = predictedStepSeconds;
    out["mfu"] = mfu;
  }
  return llvm::json::Value(std::move(out));
}

static std::string gigabytes(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.3f GB", double(bytes) / 1e9);
  return s;
}

void Report::print(llvm::raw_ostream &os) const {
  bool bf16 = config.precision == Precision::Bf16;
  int64_t dp = axisSize(config.mesh, AxisRole::Data);
  os << "loom report: " << model << ", " << ranks << " rank"
     << (ranks == 1 ? "" : "s");
  if (config.mesh)
    os << " (" << config.mesh.getSpec() << ")";
  os << ", " << parameterCount << " parameters, "
     << (bf16 ? "bf16 mixed precision" : "fp32") << "\n"
     << "  memory per rank (GB = 10^9 bytes):\n"
     << "    parameters          " << gigabytes(parameterBytes) << "\n"
     << "    gradients           " << gigabytes(gradientBytes) << "\n"
     << "    optimizer state     " << gigabytes(optimizerStateBytes + masterBytes)
     << (bf16 ? "   (fp32: master parameters and the optimizer's state)" : "")
     << "\n"
     << "    model states        " << gigabytes(modelStateBytes())
     << llvm::format("   (%.4g bytes per parameter)\n",
                     double(modelStateBytes()) /
                         double(std::max<int64_t>(parameterCount, 1)))
     << "    activations (peak)  " << gigabytes(arenaPeakBytes)
     << "   (the step's arena less the gradients: activations and "
        "temporaries";
  if (activationsFromRankProgram)
    os << "; the rank program's plan";
  else if (dp > 1)
    os << "; the one-rank plan over dp";
  os << ")\n";
  if (bf16ScratchBytes > 0)
    os << "    bf16 scratch        " << gigabytes(bf16ScratchBytes)
       << "   (the f32 copies of the largest bf16 kernel call's tensors, "
          "reserved once)\n";
  if (!remat.empty())
    os << "    recomputation: " << remat << "\n";
  for (const Padding &p : padding)
    os << "    padded: " << p.tensor << " dimension " << p.dim << " of "
       << p.size << " in " << p.blocks << " blocks of " << p.block << " ("
       << p.blocks * p.block - p.size << " of padding at the end)\n";
  if (zeroStage > 0)
    os << "    ZeRO stage " << zeroStage << " over "
       << config.mesh.getAxis(AxisRole::Data).getValue() << " (" << dp
       << " ranks): "
       << (zeroStage == 1   ? "optimizer state split"
           : zeroStage == 2 ? "optimizer state and gradients split"
                            : "optimizer state, gradients and parameters "
                              "split")
       << "\n";
  if (gatheredInFlightBytes > 0)
    os << "    gathered layers     " << gigabytes(gatheredInFlightBytes)
       << "   (within the activations: the layer computing and the next, "
          "prefetched)\n";
  os << "    inputs              " << gigabytes(inputBytes) << "\n"
     << "    total               " << gigabytes(totalBytes()) << "\n";
  if (!pipelineRanks.empty()) {
    os << "  per pipeline rank (each holds its stages' parameters, gradients "
          "and optimizer state, and plans its own arena; the rows above are "
          "rank 0's):\n";
    for (auto [r, s] : llvm::enumerate(pipelineRanks)) {
      int64_t states = s.modelStateBytes();
      os << "    rank " << r << ": " << s.parameterElements
         << " parameters, " << gigabytes(states)
         << llvm::format(" (%.4g bytes per own parameter)",
                         double(states) /
                             double(std::max<int64_t>(s.parameterElements, 1)))
         << ", activations " << gigabytes(s.activationBytes) << "\n";
    }
  }
  if (communication.empty())
    os << "  communication per step: none (" << (ranks == 1 ? "one rank" : "no collectives") << ")\n";
  else
    os << "  communication per step and rank:\n";
  for (const CommLine &c : communication) {
    os << "    " << collectiveName(c.kind) << " over " << c.axis << " ("
       << c.groupSize << " ranks): " << c.count
       << (c.count == 1 ? " collective, " : " collectives, ")
       << gigabytes(int64_t(c.bytesSent)) << " sent";
    if (cluster)
      os << llvm::format(", %.4g s", c.seconds);
    os << "   (" << c.what << ")\n";
  }
  double recomputed = 0;
  for (const CommLine &c : communication)
    recomputed += c.recomputeBytesSent;
  if (!communication.empty())
    os << "    of which the backward's recomputation sends "
       << gigabytes(int64_t(recomputed)) << "\n";
  double regathered = 0;
  for (const CommLine &c : communication)
    regathered += c.regatherBytesSent;
  if (regathered > 0)
    os << "    of which the backward's gathers of saved activations "
          "(sequence parallelism's norm outputs) send "
       << gigabytes(int64_t(regathered)) << "\n";
  if (verified) {
    os << "  communication verified before launch: " << verified->ops
       << " operations on the busiest rank; " << verified->ranks
       << (verified->ranks == 1 ? " rank" : " ranks") << " simulated for "
       << verified->of << " (";
    if (verified->classAxes.empty())
      os << "every rank runs the same program";
    else
      os << "one per coordinate on " << llvm::join(verified->classAxes, "+");
    os << ")\n";
  }
  if (pipelineBubble)
    os << llvm::format("  pipeline bubble: %.1f%% (simulated, worst rank; "
                       "the plan above)\n",
                       100.0 * *pipelineBubble);
  else
    os << "  pipeline bubble: 0 (no pipeline)\n";
  os << llvm::format("  FLOPs per step: %.4g (%.4g per token; 6N = %.4g)\n",
                     double(flopsPerStep),
                     double(flopsPerStep) /
                         double(std::max<int64_t>(tokensPerStep, 1)),
                     6.0 * double(parameterCount))
     << llvm::format(
            "    matmul %.4g, attention %.4g, other %.4g\n",
            double(matmulFlopsPerStep), double(attentionFlopsPerStep),
            double(flopsPerStep - matmulFlopsPerStep - attentionFlopsPerStep))
     << (rankFlopsPerStep
             ? llvm::formatv(
                   "    rank 0 computes {0} of them (matmul {1}), "
                   "read in its rank program\n",
                   llvm::format("%.4g", double(rankFlopsPerStep)),
                   llvm::format("%.4g", double(rankMatmulFlopsPerStep)))
                   .str()
             : std::string())
     << llvm::format(
            "    of which the backward's recomputation %.4g "
            "(matmul %.4g, attention %.4g, other %.4g)\n",
            double(recomputeFlopsPerStep), double(recomputeMatmulFlopsPerStep),
            double(recomputeAttentionFlopsPerStep),
            double(recomputeFlopsPerStep - recomputeMatmulFlopsPerStep -
                   recomputeAttentionFlopsPerStep));
  auto seconds = [](double s) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.4g", s);
    return std::string(text);
  };
  if (cluster)
    os << "  on " << cluster->name << ":\n"
       << llvm::format("    predicted step time %.4g s (roofline per op, "
                       "%s peak",
                       predictedStepSeconds, bf16 ? "bf16" : "fp32")
       << (communication.empty()
               ? std::string("")
               : llvm::formatv("; compute {0} s{2} + communication {1} s, "
                               "not overlapped",
                               seconds(computeSeconds),
                               seconds(communicationSeconds),
                               bubbleSeconds > 0
                                   ? " (the pipeline's bubble " +
                                         seconds(bubbleSeconds) + " s of it)"
                                   : std::string())
                     .str())
       << llvm::format("), MFU %.1f%%\n", 100.0 * mfu);
}
