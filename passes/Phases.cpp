//===- Phases.cpp - loom-pipeline: the compilation's phases as passes ----===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

void loom::buildLoomPipeline(mlir::OpPassManager &pm,
                             const LoomOptions &options) {
  bool distributed = !options.mesh.empty();
  auto add = [&](std::unique_ptr<mlir::Pass> pass) {
    std::string argument = pass->getArgument().str();
    pm.addPass(std::move(pass));
    if (options.afterPass)
      options.afterPass(pm, argument);
  };
  if (options.from == Phase::TrainingStep) {
    if (distributed)
      add(createDistMesh(DistMeshOptions{options.mesh}));
    add(createTrainVerify());
    // Megatron's tensor parallelism splits a fused QKV by heads once it is
    // one projection per slice.
    if (distributed &&
        (options.sharding == "auto" || options.sharding == "megatron"))
      add(createDistSplitProjections());
    // Stages are cut on the forward model, before the backward exists.
    if (distributed) {
      DistPipelinePartitionOptions partition;
      partition.microBatches = options.microBatches;
      partition.virtualStages = options.virtualStages;
      add(createDistPipelinePartition(partition));
      add(createDistPipelineSplit());
    }
    // On the parameters as tensor parallelism and the stages split them (a
    // fused QKV in parts, a stacked weight in its stages' parts), before
    // what reads the forward's types: remat and autodiff see the bf16
    // program.
    if (options.microBatches != 1)
      add(createTrainGradAccumulation(
          TrainGradAccumulationOptions{options.microBatches}));
    if (options.precision == "bf16")
      add(createTrainMixedPrecision());
    add(createDistRemat(DistRematOptions{options.remat}));
    add(createTrainAutodiff(TrainAutodiffOptions{options.gradPrecision}));
    if (options.microBatches != 1)
      add(createTrainInterleaveMicroBatches());
    if (distributed)
      add(createDistPipelineReduce());
    if (options.optimizer)
      add(createTrainOptimizer());
  }
  if (options.until == Phase::TrainingStep || !distributed)
    return;
  // A pipeline's stages split the program among ranks once dp and tp have
  // given it per-rank types (the collectives they add run on every rank).
  add(createDistZero(DistZeroOptions{options.zero}));
  add(createDistShardingPropagation(DistShardingPropagationOptions{
      options.sharding, options.sequenceParallel}));
  add(createDistPartition());
  add(createDistPipelineTransfers());
  if (scheduleSplitsBackward(options.schedule))
    add(createDistPipelineSplitBackward());
  add(createDistPipelineFoldAccumulations());
  add(createDistPipelineSchedule(DistPipelineScheduleOptions{
      options.schedule, options.microBatches}));
  DistCommOptOptions commOpt;
  commOpt.overlap = options.commOverlap;
  add(createDistCommOpt(commOpt));
  add(createDistPrefetch());
  add(createDistVerifyCommunication());
}

void loom::registerAllPasses() {
  registerLoomPasses();
  mlir::PassPipelineRegistration<LoomOptions>(
      "loom-pipeline",
      "The Loom compilation pipeline: verify the model, derive the backward "
      "pass and the optimizer step; with a mesh, the program of each rank",
      buildLoomPipeline);
}
