//===- PipelineSchedule.cpp - dist-pipeline-schedule ----------------------===//
//
// Records on the rank program the schedule its code runs: each pipeline
// rank's actions (stage, F/B/I/W, micro-batch) and the slot that keeps
// each micro-batch's saved values, which the code generator's driver and
// memory plan read. GPipe's order with one stage per rank is the program
// order, and needs no record.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Schedules.h"

#include "dialects/train/TrainDialect.h"
#include "llvm/Support/MemoryBuffer.h"

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINESCHEDULE
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

llvm::Expected<pipeline::Schedule>
loom::loadPipelineSchedule(llvm::StringRef spec, int64_t ranks,
                           int64_t microBatches, int64_t virtualStages,
                           std::vector<std::string> &warnings) {
  if (spec.ends_with(".csv")) {
    auto file = llvm::MemoryBuffer::getFile(spec);
    if (!file)
      return llvm::createStringError("cannot read '" + spec +
                                     "': " + file.getError().message());
    return pipeline::parseScheduleCSV((*file)->getBuffer(), spec);
  }
  return pipeline::buildSchedule(spec, ranks, microBatches, virtualStages,
                                 warnings);
}

bool loom::scheduleSplitsBackward(llvm::StringRef spec) {
  if (!spec.ends_with(".csv"))
    return spec == "zb";
  std::vector<std::string> warnings;
  llvm::Expected<pipeline::Schedule> s =
      loadPipelineSchedule(spec, 1, 1, 1, warnings);
  if (!s) {
    llvm::consumeError(s.takeError());
    return false;
  }
  return s->splitsBackward();
}

namespace {

struct DistPipelineSchedulePass
    : public loom::impl::DistPipelineScheduleBase<DistPipelineSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(record(model)))
        return signalPassFailure();
  }

  LogicalResult record(ModelOp model) {
    dist::DistDialect &attrs = dist::attrs(model);
    dist::PipelineAttr pipelineRecord =
        attrs.getPipelineAttrHelper().getAttr(model);
    if (!pipelineRecord)
      return success();
    int64_t ranks = pipelineRecord.getRanks();
    int64_t virtualStages = pipelineRecord.getVirtualStages();
    std::vector<std::string> warnings;
    llvm::Expected<pipeline::Schedule> s = loadPipelineSchedule(
        schedule, ranks, microBatches, virtualStages, warnings);
    if (!s)
      return model.emitOpError("cannot run schedule '")
             << schedule << "': " << llvm::toString(s.takeError());
    // (What works but wastes, such as 1F1B with fewer micro-batches than
    // ranks, loomc and loom-schedule warn about.)
    if (s->ranks != ranks || s->virtualStages != virtualStages ||
        s->microBatches != microBatches)
      return model.emitOpError("cannot run schedule '")
             << schedule << "' of " << s->ranks << " ranks x "
             << s->virtualStages << " stages and " << s->microBatches
             << " micro-batches: the pipeline has " << ranks << " ranks x "
             << virtualStages << " stages and " << int64_t(microBatches)
             << " micro-batches";
    llvm::Expected<pipeline::Simulation> sim =
        pipeline::simulate(*s, pipeline::Costs::uniform(*s));
    if (!sim)
      return model.emitOpError("cannot run schedule '")
             << schedule << "': " << llvm::toString(sim.takeError());
    if (s->name == "gpipe" && virtualStages == 1)
      return success();
    pipeline::Slots slots = pipeline::assignSlots(*s);
    Builder b(model.getContext());
    attrs.getScheduleAttrHelper().setAttr(
        model, b.getStringAttr(pipeline::printDriverCSV(*s, slots)));
    attrs.getScheduleSlotsAttrHelper().setAttr(
        model, b.getI64IntegerAttr(slots.count));
    return success();
  }
};

} // namespace
