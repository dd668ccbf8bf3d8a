//===- Pipeline.cpp - the Loom pipeline and pass registration -------------===//

#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "mlir/Pass/PassRegistry.h"

int64_t loom::pipelineRanks(llvm::StringRef mesh) {
  llvm::SmallVector<std::string> names;
  llvm::SmallVector<int64_t> sizes;
  if (llvm::Error e = dist::parseMeshSpec(mesh, names, sizes)) {
    llvm::consumeError(std::move(e));
    return 1;
  }
  for (auto [name, size] : llvm::zip(names, sizes))
    if (name == "pp")
      return size;
  return 1;
}

void loom::buildLoomPipeline(mlir::OpPassManager &pm,
                             const LoomOptions &options) {
  std::string stagesMesh =
      options.mesh.empty() ? options.pipelineMesh : std::string(options.mesh);
  bool pipeline = pipelineRanks(stagesMesh) > 1;
  auto add = [&](std::unique_ptr<mlir::Pass> pass) {
    std::string argument = pass->getArgument().str();
    pm.addPass(std::move(pass));
    if (options.afterPass)
      options.afterPass(pm, argument);
  };
  add(createTrainVerify());
  if (pipeline) {
    DistPipelinePartitionOptions partition;
    partition.mesh = stagesMesh;
    partition.microBatches = options.microBatches;
    partition.virtualStages = options.virtualStages;
    add(createDistPipelinePartition(partition));
    add(createDistPipelineSplit());
  }
  if (options.microBatches != 1)
    add(createTrainGradAccumulation(
        TrainGradAccumulationOptions{options.microBatches}));
  add(createTrainAutodiff());
  if (pipeline)
    add(createDistPipelineReduce());
  if (options.optimizer)
    add(createTrainOptimizer());
  // Without `mesh` the driver runs the rank program's passes itself
  // (buildDistPipeline), the pipeline's transfers among them.
  if (!options.mesh.empty())
    buildDistPipeline(pm, options.mesh, options.sharding,
                      options.sequenceParallel, options.afterPass,
                      options.schedule, options.microBatches);
}

void loom::buildDistPipeline(
    mlir::OpPassManager &pm, llvm::StringRef mesh, llvm::StringRef sharding,
    bool sequenceParallel,
    const std::function<void(mlir::OpPassManager &, llvm::StringRef)>
        &afterPass,
    llvm::StringRef schedule, int64_t microBatches) {
  auto add = [&](std::unique_ptr<mlir::Pass> pass) {
    std::string argument = pass->getArgument().str();
    pm.addPass(std::move(pass));
    if (afterPass)
      afterPass(pm, argument);
  };
  // A pipeline's stages split the program among ranks once dp and tp have
  // given it per-rank types (the collectives they add run on every rank).
  add(createDistShardingPropagation(DistShardingPropagationOptions{
      mesh.str(), sharding.str(), sequenceParallel}));
  add(createDistPartition());
  if (pipelineRanks(mesh) > 1) {
    add(createDistPipelineTransfers());
    if (scheduleSplitsBackward(schedule))
      add(createDistPipelineSplitBackward());
    add(createDistPipelineSchedule(
        DistPipelineScheduleOptions{schedule.str(), microBatches}));
  }
  add(createDistCommOpt());
  add(createDistVerifyCommunication());
}

void loom::registerAllPasses() {
  registerLoomPasses();
  mlir::PassPipelineRegistration<LoomOptions>(
      "loom-pipeline",
      "The Loom compilation pipeline: verify the model, derive the backward "
      "pass and the optimizer step",
      buildLoomPipeline);
}
