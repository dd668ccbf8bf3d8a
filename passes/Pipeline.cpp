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
  pm.addPass(createTrainVerify());
  if (pipeline) {
    DistPipelinePartitionOptions partition;
    partition.mesh = stagesMesh;
    partition.microBatches = options.microBatches;
    pm.addPass(createDistPipelinePartition(partition));
    pm.addPass(createDistPipelineSplit());
  }
  if (options.microBatches != 1)
    pm.addPass(createTrainGradAccumulation(
        TrainGradAccumulationOptions{options.microBatches}));
  pm.addPass(createTrainAutodiff());
  if (pipeline)
    pm.addPass(createDistPipelineTransfers());
  if (options.optimizer)
    pm.addPass(createTrainOptimizer());
  if (pipeline && !options.mesh.empty()) {
    // Pipelines compose with dp and tp in a later step; a pp mesh's rank
    // program is proved as it is.
    pm.addPass(createDistVerifyCommunication());
    return;
  }
  if (!options.mesh.empty()) {
    pm.addPass(createDistShardingPropagation(
        DistShardingPropagationOptions{options.mesh, options.sharding,
                                       options.sequenceParallel}));
    pm.addPass(createDistPartition());
    pm.addPass(createDistCommOpt());
    pm.addPass(createDistVerifyCommunication());
  }
}

void loom::registerAllPasses() {
  registerLoomPasses();
  mlir::PassPipelineRegistration<LoomOptions>(
      "loom-pipeline",
      "The Loom compilation pipeline: verify the model, derive the backward "
      "pass and the optimizer step",
      buildLoomPipeline);
}
