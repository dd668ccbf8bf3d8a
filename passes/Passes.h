//===- Passes.h - Loom passes and pipelines ---------------------*- C++ -*-===//

#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "passes/PipelineSchedule.h"

#include <functional>

namespace loom {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

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
      llvm::cl::desc("Device mesh, AXIS=SIZE,... outermost first; with one, "
                     "the step is sharded and partitioned per rank"),
      llvm::cl::init("")};
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
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("Pipeline schedule on a mesh with a pp axis: gpipe, "
                     "1f1b, interleaved, zb, or a CSV file"),
      llvm::cl::init("1f1b")};
  Option<bool> optimizer{*this, "optimizer",
                         llvm::cl::desc("Add the optimizer step after the "
                                        "backward pass"),
                         llvm::cl::init(true)};
  /// The mesh whose pp axis cuts the model into pipeline stages when
  /// `mesh` is not given (loomc shards over dp and tp in a later phase,
  /// but the stages must be cut before the backward pass exists).
  std::string pipelineMesh;
  /// Called after each pass the pipeline adds, with the pass's argument: a
  /// driver inserts a user's passes there (loomc --insert-after).
  std::function<void(mlir::OpPassManager &, llvm::StringRef)> afterPass;
};

/// The passes that turn the training step into the rank program of `mesh`:
/// sharding propagation and partitioning over dp and tp, the pipeline's
/// transfers over pp, communication optimization and its verification
/// (`afterPass`, when set, is called after each).
void buildDistPipeline(
    mlir::OpPassManager &pm, llvm::StringRef mesh, llvm::StringRef sharding,
    bool sequenceParallel,
    const std::function<void(mlir::OpPassManager &, llvm::StringRef)>
        &afterPass,
    llvm::StringRef schedule = "1f1b", int64_t microBatches = 1);

/// The schedule `spec` names (built in) or a CSV file holds, for a pipeline
/// of `ranks` x `virtualStages` stages and `microBatches`.
llvm::Expected<pipeline::Schedule>
loadPipelineSchedule(llvm::StringRef spec, int64_t ranks, int64_t microBatches,
                     int64_t virtualStages, std::vector<std::string> &warnings);

/// Whether the schedule `spec` splits the backward into input and weight
/// parts (false for a CSV that cannot be read: its reader reports that).
bool scheduleSplitsBackward(llvm::StringRef spec);

/// The size of the pp axis of a mesh spec (1 without one or when the spec
/// does not parse).
int64_t pipelineRanks(llvm::StringRef mesh);

/// Verifies the model, splits it into micro-batches when asked, derives its
/// backward pass and (unless disabled) the optimizer step; with a mesh,
/// propagates shardings and partitions the step into the rank program.
void buildLoomPipeline(mlir::OpPassManager &pm, const LoomOptions &options);

/// Registers every Loom pass and the `loom-pipeline` pipeline.
void registerAllPasses();

} // namespace loom

#endif // LOOM_PASSES_PASSES_H
