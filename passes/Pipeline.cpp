//===- Pipeline.cpp - the Loom pipeline and pass registration -------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

void loom::buildLoomPipeline(mlir::OpPassManager &pm,
                             const LoomOptions &options) {
  pm.addPass(createTrainVerify());
  if (options.microBatches != 1)
    pm.addPass(createTrainGradAccumulation(
        TrainGradAccumulationOptions{options.microBatches}));
  pm.addPass(createTrainAutodiff());
  if (options.optimizer)
    pm.addPass(createTrainOptimizer());
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
