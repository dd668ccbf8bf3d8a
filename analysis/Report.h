//===- Report.h - the plan's figures (loomc --report) ------------*- C++ -*-===//
//
// Memory per rank by component, FLOPs per step from the ops' cost
// interface, and, given a cluster description, the predicted step time and
// MFU. Computed on the training step without allocating anything, so it
// works for models far larger than this machine (175B).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_REPORT_H
#define LOOM_ANALYSIS_REPORT_H

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::analysis {

/// A cluster description (clusters/*.json).
struct Cluster {
  std::string name;
  int64_t devicesPerNode = 1;
  double peakFlopsFp32 = 0, peakFlopsBf16 = 0;
  double memoryBytes = 0, memoryBandwidth = 0;
  double intraBandwidth = 0, intraLatency = 0;
  double interBandwidth = 0, interLatency = 0;
};

/// Reads a cluster description, or fails with a message naming the file
/// and the missing or malformed field.
llvm::Expected<Cluster> readCluster(llvm::StringRef path);

/// Element precision of the plan. Bf16 is mixed precision: bf16
/// parameters, gradients and activations, an fp32 master copy of the
/// parameters beside the fp32 optimizer state.
enum class Precision { Fp32, Bf16 };

/// The configuration the report describes.
struct Config {
  /// The mesh dist-mesh sets on the model (null: one rank).
  loom::dist::MeshAttr mesh;
  Precision precision = Precision::Fp32;
};

/// Collective kinds, as the runtime counts them.
enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll,
                        Broadcast, Send };
llvm::StringRef collectiveName(Collective kind);

/// Bytes one rank sends in a collective over `groupSize` ranks of a buffer
/// of `bytes` (the whole buffer: for all-gather and reduce-scatter the
/// gathered or scattered total), by the runtime's ring algorithms.
double collectiveBytesSent(Collective kind, double bytes, int64_t groupSize);
/// Seconds of such a collective: one latency per ring step plus the bytes
/// sent over the slowest link (inter-node when the group crosses nodes).
double collectiveSeconds(Collective kind, double bytes, int64_t groupSize,
                         bool crossesNodes, const Cluster &cluster);

/// One kind of collective over one mesh axis, per step.
struct CommLine {
  Collective kind;
  std::string axis;
  int64_t groupSize;
  double bytesSent; // per rank
  double seconds;   // 0 without a cluster
  std::string what;
  int64_t count = 1; // collectives per step (each pays its ring's latencies)
  /// Of bytesSent, what collectives of the backward's recomputation send
  /// (`train.recompute`: a recomputed matmul's partial sums reduced again).
  double recomputeBytesSent = 0;
  /// Of bytesSent, what gathers of activations the forward saved send (the
  /// backward's re-gathers of sequence parallelism's saved norm outputs).
  double regatherBytesSent = 0;
};

struct Report {
  std::string model;
  int64_t ranks = 1;
  Config config;
  int64_t parameterCount = 0;
  int64_t parameterBytes = 0, gradientBytes = 0, optimizerStateBytes = 0;
  /// Peak of the training step's arena less the gradients: activations and
  /// temporaries.
  int64_t arenaPeakBytes = 0;
  int64_t inputBytes = 0;
  int64_t flopsPerStep = 0, bytesAccessedPerStep = 0;
  /// The parts of flopsPerStep that are matrix products and attention's
  /// products (CostOpInterface::getMatmulFlops, getAttentionFlops).
  int64_t matmulFlopsPerStep = 0, attentionFlopsPerStep = 0;
  /// What the first rank computes of them, read in its rank program (0
  /// without one): every op it runs, as many times as its loops run.
  int64_t rankFlopsPerStep = 0, rankMatmulFlopsPerStep = 0;
  /// The rematerialization policy the step was compiled with (loomc's
  /// --remat, or per layer what --remat=budget chose).
  std::string remat;
  /// The ZeRO stage the rank program was compiled with (`dist.zero`; 0
  /// without).
  int64_t zeroStage = 0;
  /// The gathered parameters a layer loop holds at once (ZeRO-3): the
  /// layer it computes and the next one it gathers (dist-prefetch), in the
  /// loop that holds the most; part of the arena (the activations row).
  int64_t gatheredInFlightBytes = 0;
  /// What the backward recomputes (ops of backward loop bodies marked
  /// `train.recompute`, times their loops' counts), within the above.
  int64_t recomputeFlopsPerStep = 0, recomputeMatmulFlopsPerStep = 0,
          recomputeAttentionFlopsPerStep = 0;
  int64_t tokensPerStep = 0;
  /// The f32 masters of mixed precision's parameters (the parameters row
  /// is their bf16 copies, which the step's arena holds).
  int64_t masterBytes = 0;
  /// Under a pipeline: each pipeline rank's own parameters, gradients
  /// and optimizer state (a stage's ranks hold its parameters only); the
  /// rows above are pipeline rank 0's.
  struct StageStates {
    int64_t parameterBytes = 0, gradientBytes = 0, optimizerStateBytes = 0;
    /// Its bf16 masters (mixed precision; the parameters row is their bf16
    /// copies).
    int64_t masterBytes = 0;
    int64_t modelStateBytes() const {
      return parameterBytes + gradientBytes + optimizerStateBytes +
             masterBytes;
    }
    int64_t parameterElements = 0;
    /// Its own arena plan less its gradients.
    int64_t activationBytes = 0;
  };
  std::vector<StageStates> pipelineRanks;
  /// A parameter dimension split unevenly (a vocabulary over tp, a ZeRO
  /// shard over dp): `size` elements in `blocks` blocks of `block`, the
  /// last ones ending in blocks x block - size elements of padding.
  struct Padding {
    std::string tensor;
    int64_t dim = 0, size = 0, blocks = 0, block = 0;
  };
  std::vector<Padding> padding;
  std::vector<CommLine> communication;
  std::optional<Cluster> cluster;
  double computeSeconds = 0, communicationSeconds = 0;
  double predictedStepSeconds = 0, mfu = 0;

  /// Parameters, gradients and optimizer state (the master copy included):
  /// ZeRO's "model states", 16 bytes per parameter with AdamW in mixed
  /// precision.
  int64_t modelStateBytes() const {
    return parameterBytes + gradientBytes + optimizerStateBytes + masterBytes;
  }
  /// The f32 copies the runtime's bf16 kernels compute on, reserved
  /// beside the arena (analysis::bf16ScratchBytes; 0 in fp32).
  int64_t bf16ScratchBytes = 0;
  int64_t totalBytes() const {
    return modelStateBytes() + arenaPeakBytes + bf16ScratchBytes + inputBytes;
  }
  /// The most any rank holds: totalBytes, or under a pipeline its most
  /// loaded rank's states, activations and inputs.
  int64_t worstRankBytes() const {
    int64_t worst = pipelineRanks.empty() ? totalBytes() : 0;
    for (const StageStates &r : pipelineRanks)
      worst = std::max(worst, r.modelStateBytes() + r.activationBytes +
                                  bf16ScratchBytes + inputBytes);
    return worst;
  }
  /// The most bytes of model states and inputs any rank holds.
  int64_t worstRankStateBytes() const {
    int64_t worst = pipelineRanks.empty() ? modelStateBytes() + inputBytes : 0;
    for (const StageStates &r : pipelineRanks)
      worst = std::max(worst, r.modelStateBytes() + inputBytes);
    return worst;
  }
  /// The most activation bytes any rank holds: arenaPeakBytes, or under a
  /// pipeline its most loaded rank's.
  int64_t worstRankActivationBytes() const {
    int64_t worst = pipelineRanks.empty() ? arenaPeakBytes : 0;
    for (const StageStates &r : pipelineRanks)
      worst = std::max(worst, r.activationBytes);
    return worst;
  }
  llvm::json::Value toJSON() const;
  void print(llvm::raw_ostream &os) const;
  /// Replaces the planned communication by `lines` (the rank program's),
  /// and the predicted time and MFU with it.
  void setCommunication(std::vector<CommLine> lines);
  /// Takes the model states (as the rank stores them), the activations (the
  /// rank program's arena less the gradients it holds) and the per-op
  /// roofline time from the rank program: what a mesh that splits more than
  /// the batch needs.
  llvm::LogicalResult useRankProgram(loom::train::ModelOp rank);
  bool activationsFromRankProgram = false;
  /// What dist-verify-communication proved of the rank program (its
  /// `dist.verified` record): the ranks simulated, of how many, and the
  /// axes whose coordinates tell the ranks' programs apart.
  struct Verified {
    int64_t ranks = 0, of = 0, ops = 0;
    std::vector<std::string> classAxes;
  };
  std::optional<Verified> verified;
  /// The simulated pipeline bubble of the worst rank, and the pipeline's
  /// plan for the JSON report (pp meshes).
  std::optional<double> pipelineBubble;
  llvm::json::Object pipeline;
  /// The first pipeline rank's compute stretched over the step's span: the
  /// rank is busy for the rank program's roofline time and idle for its
  /// simulated bubble `firstRankBubble`, a fraction of the span.
  void addPipelineBubble(double firstRankBubble);
  /// The seconds of the first rank's bubble within computeSeconds.
  double bubbleSeconds = 0;
  /// Reads `verified` from the rank program.
  void readVerification(loom::train::ModelOp rank);
};

/// The collectives of a partitioned model (the rank program, after
/// dist-partition), per step, by kind and group of mesh axes (named by its
/// axes joined with '+', as the runtime's metrics name them): the bytes the
/// first rank of each group sends by the runtime's ring algorithms, exact
/// (the ring's chunks included), each collective counted as many times as
/// the repeats around it run.
std::vector<CommLine>
countCommunication(loom::train::ModelOp rankProgram, loom::dist::MeshAttr mesh,
                   const std::optional<Cluster> &cluster);

/// The report of a trained model (after the Loom pipeline) under `config`.
/// Until sharding lands, a mesh is planned as pure data parallelism over
/// its `dp` axis: model states replicated, the gradients all-reduced once
/// per step, the batch (and so the activations) split over dp.
llvm::FailureOr<Report> reportModel(loom::train::ModelOp model,
                                    const Config &config,
                                    const std::optional<Cluster> &cluster);

} // namespace loom::analysis

#endif // LOOM_ANALYSIS_REPORT_H
