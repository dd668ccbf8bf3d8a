//===- Report.cpp - the plan's figures (loomc --report) -------------------===//

#include "codegen/Report.h"

#include "codegen/Layout.h"
#include "codegen/MemoryPlan.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace loom::codegen;
using namespace loom::train;

llvm::Expected<Cluster> loom::codegen::readCluster(llvm::StringRef path) {
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

FailureOr<Report>
loom::codegen::reportModel(ModelOp model, const std::optional<Cluster> &cluster) {
  FailureOr<ModelLayout> layout = layoutModel(model);
  if (failed(layout))
    return failure();
  Report r;
  r.model = model.getSymName().str();
  r.cluster = cluster;
  Block &body = model.getBody().front();
  for (Operation &op : body) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      r.parameterCount += p.getType().getNumElements();
      r.parameterBytes += tensorBytes(p.getType());
    } else if (auto s = dyn_cast<StateOp>(op)) {
      r.optimizerStateBytes += tensorBytes(s.getType());
    } else if (auto in = dyn_cast<InputOp>(op)) {
      r.inputBytes += tensorBytes(in.getType());
      auto type = cast<RankedTensorType>(in.getType());
      if (in.getName() == "tokens")
        r.tokensPerStep = type.getNumElements();
      else if (!r.tokensPerStep && type.getRank())
        r.tokensPerStep = type.getDimSize(0);
    }
  }
  // One gradient per parameter, of its type: what the optimizer consumes.
  r.gradientBytes = r.parameterBytes;
  r.arenaPeakBytes =
      planMemory(body, layout->stepOps, layout->stepPersistent).peakBytes;

  double seconds = 0;
  for (Operation &op : body) {
    auto cost = dyn_cast<CostOpInterface>(op);
    if (!cost)
      continue;
    int64_t flops = cost.getFlops();
    int64_t bytes = cost.getBytesRead() + cost.getBytesWritten();
    r.flopsPerStep += flops;
    r.bytesAccessedPerStep += bytes;
    // Roofline per op: bound by compute or by memory traffic.
    if (cluster)
      seconds += std::max(double(flops) / cluster->peakFlopsFp32,
                          double(bytes) / cluster->memoryBandwidth);
  }
  if (cluster && seconds > 0) {
    r.predictedStepSeconds = seconds;
    double modelFlops = 6.0 * double(r.parameterCount) * double(r.tokensPerStep);
    r.mfu = modelFlops / (seconds * cluster->peakFlopsFp32);
  }
  return r;
}

llvm::json::Value Report::toJSON() const {
  llvm::json::Object memory{{"parameters", parameterBytes},
                            {"gradients", gradientBytes},
                            {"optimizer_state", optimizerStateBytes},
                            {"activations_peak", arenaPeakBytes},
                            {"inputs", inputBytes},
                            {"total", totalBytes()}};
  llvm::json::Object out{{"model", model},
                         {"ranks", ranks},
                         {"parameter_count", parameterCount},
                         {"memory_per_rank_bytes", std::move(memory)},
                         {"communication_bytes_per_step", llvm::json::Object{}},
                         {"bubble_fraction", 0.0},
                         {"flops_per_step", flopsPerStep},
                         {"bytes_accessed_per_step", bytesAccessedPerStep},
                         {"tokens_per_step", tokensPerStep}};
  if (cluster) {
    out["cluster"] = cluster->name;
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
  os << "loom report: " << model << ", " << ranks << " rank"
     << (ranks == 1 ? "" : "s") << ", " << parameterCount
     << " parameters, fp32\n"
     << "  memory per rank (GB = 10^9 bytes):\n"
     << "    parameters          " << gigabytes(parameterBytes) << "\n"
     << "    gradients           " << gigabytes(gradientBytes) << "\n"
     << "    optimizer state     " << gigabytes(optimizerStateBytes) << "\n"
     << "    activations (peak)  " << gigabytes(arenaPeakBytes)
     << "   (the step's arena: activations, gradients in flight, "
        "temporaries)\n"
     << "    inputs              " << gigabytes(inputBytes) << "\n"
     << "    total               " << gigabytes(totalBytes()) << "\n"
     << "  communication per step: none (one rank)\n"
     << "  pipeline bubble: 0 (no pipeline)\n"
     << llvm::format("  FLOPs per step: %.4g (%.4g per token; 6N = %.4g)\n",
                     double(flopsPerStep),
                     double(flopsPerStep) / double(std::max<int64_t>(tokensPerStep, 1)),
                     6.0 * double(parameterCount));
  if (cluster)
    os << "  on " << cluster->name << ":\n"
       << llvm::format("    predicted step time %.4g s (roofline per op, "
                       "fp32 peak), MFU %.1f%%\n",
                       predictedStepSeconds, 100.0 * mfu);
}
