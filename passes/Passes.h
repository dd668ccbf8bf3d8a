//===- Passes.h - Loom passes and pipelines ---------------------*- C++ -*-===//

#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "passes/Schedules.h"

#include <functional>

namespace loom {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The phases of the compilation pipeline; loomc dumps the IR after each.
enum class Phase {
  /// The single-device training step: the model verified, cut into
  /// pipeline stages where the mesh has a pipeline axis, split into
  /// micro-batches, differentiated, and the optimizer step added.
  TrainingStep,
  /// The program of one rank: shardings propagated, per-rank shapes and
  /// collectives, the pipeline's transfers and schedule, communication
  /// optimized and verified. Needs a mesh.
  RankProgram,
};

/// Options of the whole compilation pipeline, shared by `loom-opt
/// --loom-pipeline` and `loomc`.
struct LoomOptions : public mlir::PassPipelineOptions<LoomOptions> {
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Micro-batches per optimizer step (gradient "
                     "accumulation)"),
      llvm::cl::init(1)};
  Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("Device mesh, AXIS=SIZE[:ROLE],... outermost first "
                     "(dist-mesh sets it on the model first); with one, the "
                     "step is sharded and partitioned per rank"),
      llvm::cl::init("")};
  Option<Phase> from{
      *this, "from", llvm::cl::desc("The first phase to run"),
      llvm::cl::init(Phase::TrainingStep),
      llvm::cl::values(
          clEnumValN(Phase::TrainingStep, "training-step",
                     "From the forward model (the default)"),
          clEnumValN(Phase::RankProgram, "rank-program",
                     "From a training step that carries its mesh"))};
  Option<Phase> until{
      *this, "until", llvm::cl::desc("The last phase to run"),
      llvm::cl::init(Phase::RankProgram),
      llvm::cl::values(
          clEnumValN(Phase::TrainingStep, "training-step",
                     "Stop at the training step"),
          clEnumValN(Phase::RankProgram, "rank-program",
                     "Through the rank program (the default; with a mesh)"))};
  Option<std::string> sharding{
      *this, "sharding",
      llvm::cl::desc("Annotations to start sharding propagation from: none, "
                     "dp, megatron or auto"),
      llvm::cl::init("auto")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Megatron sequence parallelism on the tp axis"),
      llvm::cl::init(false)};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("Pipeline stages per pp rank (interleaved schedules)"),
      llvm::cl::init(1)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("What the backward of each layer loop recomputes: "
                     "none (nothing: the forward keeps what the backward "
                     "reads; the default), selective (the pointwise ops "
                     "and norms from the saved matmul outputs) or full "
                     "(each layer from its input)"),
      llvm::cl::init("none")};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("fp32, or bf16: bf16 compute with fp32 master weights "
                     "(train-mixed-precision on the forward model)"),
      llvm::cl::init("fp32")};
  Option<std::string> gradPrecision{
      *this, "grad-precision",
      llvm::cl::desc("With precision=bf16, the masters' gradients: fp32 "
                     "(Megatron-LM's main_grad, the default) or bf16 "
                     "(accumulated and reduced in bf16: train-autodiff's "
                     "grad-precision)"),
      llvm::cl::init("fp32")};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("ZeRO stage over the data axis: 0 (none), 1 (optimizer "
                     "state split), 2 (and gradients), 3 (and parameters)"),
      llvm::cl::init(0)};
  Option<bool> commOverlap{
      *this, "comm-overlap",
      llvm::cl::desc("Overlap collectives with compute: each wait where the "
                     "results are first read (false: right after its start)"),
      llvm::cl::init(true)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("Pipeline schedule on a mesh with a pp axis: gpipe, "
                     "1f1b, interleaved, zb, or a CSV file"),
      llvm::cl::init("1f1b")};
  Option<bool> optimizer{*this, "optimizer",
                         llvm::cl::desc("Add the optimizer step after the "
                                        "backward pass"),
                         llvm::cl::init(true)};
  /// Called after each pass the pipeline adds, with the pass's argument: a
  /// driver inserts a user's passes there (loomc --insert-after).
  std::function<void(mlir::OpPassManager &, llvm::StringRef)> afterPass;
};

/// The schedule `spec` names (built in) or a CSV file holds, for a pipeline
/// of `ranks` x `virtualStages` stages and `microBatches`.
llvm::Expected<pipeline::Schedule>
loadPipelineSchedule(llvm::StringRef spec, int64_t ranks, int64_t microBatches,
                     int64_t virtualStages, std::vector<std::string> &warnings);

/// Whether the schedule `spec` splits the backward into input and weight
/// parts (false for a CSV that cannot be read: its reader reports that).
bool scheduleSplitsBackward(llvm::StringRef spec);

/// The one pipeline builder, used by `loom-opt --loom-pipeline` and loomc,
/// for the phases `options.from` to `options.until`. The training step:
/// with a mesh, `dist-mesh` sets it on the model first; the model is
/// verified, cut into pipeline stages (where the mesh has a pipeline axis;
/// the pipeline passes do nothing without one), split into micro-batches
/// when asked, differentiated, and the optimizer step added (unless
/// disabled). The rank program (with a mesh): shardings propagated, the
/// step partitioned per rank, the pipeline's transfers and schedule,
/// communication optimized and verified.
void buildLoomPipeline(mlir::OpPassManager &pm, const LoomOptions &options);

/// Registers every Loom pass and the `loom-pipeline` pipeline.
void registerAllPasses();

} // namespace loom

#endif // LOOM_PASSES_PASSES_H
