//===- PipelineSchedule.cpp - dist-pipeline-schedule ----------------------===//
//
// Puts in the rank program the schedule its code runs: a `dist.schedule`
// right after the micro-batch loops, holding each pipeline rank's actions
// (stage, forward/backward/input/weight, micro-batch) with the slot that
// keeps each micro-batch's saved values, which the code generator's driver
// and memory plan and dist-verify-communication read. GPipe's order with
// one stage per rank is the program order, and needs no schedule; so does
// a pipeline of one micro-batch (no micro-batch loop: every schedule runs
// each stage's forward then its backward).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Schedules.h"

#include "dialects/dist/PipelineLoops.h"
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

dist::ActionKind kindOf(pipeline::Work work) {
  switch (work) {
  case pipeline::Work::Forward:
    return dist::ActionKind::Forward;
  case pipeline::Work::Backward:
    return dist::ActionKind::Backward;
  case pipeline::Work::BackwardInput:
    return dist::ActionKind::BackwardInput;
  case pipeline::Work::BackwardWeight:
    return dist::ActionKind::BackwardWeight;
  }
  llvm_unreachable("a kind of work");
}

struct DistPipelineSchedulePass
    : public loom::impl::DistPipelineScheduleBase<DistPipelineSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(record(model)))
        return signalPassFailure();
  }

  LogicalResult record(ModelOp model) {
    dist::PipelineAttr pipelineRecord =
        dist::attrs(model).getPipelineAttrHelper().getAttr(model);
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
    // The micro-batch loops the schedule runs, and the op after which it
    // runs them.
    Operation *last = nullptr;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = dist::backwardOf(forward)) {
        RepeatOp weight = dist::weightPartOf(backward);
        last = weight ? weight : backward;
      }
    if (!last)
      return success();
    if (auto existing = dist::scheduleOf(model))
      existing.erase();
    pipeline::Slots slots = pipeline::assignSlots(*s);
    OpBuilder b = OpBuilder::atBlockBegin(&model.getBody().front());
    b.setInsertionPointAfter(last);
    Location loc = NameLoc::get(b.getStringAttr("schedule " + s->name),
                                model.getLoc());
    auto scheduleOp = dist::ScheduleOp::create(b, loc, slots.count);
    b.setInsertionPointToStart(&scheduleOp.getBody().emplaceBlock());
    // (The order was checked by simulation above; the op's verifier
    // checks completeness again, dist-verify-communication the program.)
    for (auto [r, actions] : llvm::enumerate(s->order)) {
      auto rank = dist::RankActionsOp::create(b, loc, int64_t(r));
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&rank.getBody().emplaceBlock());
      for (auto [k, a] : llvm::enumerate(actions))
        dist::ActionOp::create(b, loc, kindOf(a.work), a.stage, a.microBatch,
                               slots.of[r][k]);
    }
    return success();
  }
};

} // namespace
