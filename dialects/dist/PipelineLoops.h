//===- PipelineLoops.h - a micro-batch loop's backward parts ----*- C++ -*-===//
//
// The repeats a pipeline schedule interleaves: a forward repeat that saves
// its carries, its backward (the reverse repeat that reads them) and, where
// dist-pipeline-split-backward split the backward, its weight part (marked
// `dist.backward = "weight"`), and the `dist.schedule` right after them
// that runs them. The marking is dist's; these helpers read it
// over the train dialect's repeats, header-only, so the train dialect knows
// nothing of it and the dist library links nothing of train.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_DIST_PIPELINELOOPS_H
#define LOOM_DIALECTS_DIST_PIPELINELOOPS_H

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"

namespace loom::dist {

/// Whether `repeat` is the weight part of a split backward (its
/// `dist.backward`, which dist-pipeline-split-backward sets, is "weight").
inline bool isWeightPart(train::RepeatOp repeat) {
  auto part = attrs(repeat).getBackwardAttrHelper().getAttr(repeat);
  return part && part.getValue() == "weight";
}

/// The backward of a forward repeat that saves its carries: the reverse
/// repeat in the same block that reads its saved carries (null if none).
/// Where the backward is split, its input part.
inline train::RepeatOp backwardOf(train::RepeatOp forward) {
  if (!forward.getSavesCarries() || forward.getReverse() ||
      forward.getCarries().empty())
    return {};
  for (mlir::Operation *user : forward.getStackedResults().back().getUsers())
    if (auto r = llvm::dyn_cast<train::RepeatOp>(user);
        r && r.getReverse() && r->getBlock() == forward->getBlock() &&
        !isWeightPart(r))
      return r;
  return {};
}

/// The weight part of a split backward (the repeat right after `backward`),
/// or null.
inline train::RepeatOp weightPartOf(train::RepeatOp backward) {
  auto next =
      llvm::dyn_cast_or_null<train::RepeatOp>(backward->getNextNode());
  return next && isWeightPart(next) ? next : train::RepeatOp();
}

/// The micro-batch loops `schedule` runs (forward, backward and, where the
/// backward is split, its weight part): the loops right before it. Empty
/// when no such loops stand there.
inline llvm::SmallVector<train::RepeatOp, 3>
scheduledLoops(ScheduleOp schedule) {
  for (auto forward : schedule->getBlock()->getOps<train::RepeatOp>())
    if (train::RepeatOp backward = backwardOf(forward)) {
      llvm::SmallVector<train::RepeatOp, 3> loops{forward, backward};
      if (train::RepeatOp weight = weightPartOf(backward))
        loops.push_back(weight);
      if (loops.back()->getNextNode() == schedule.getOperation())
        return loops;
    }
  return {};
}

/// The loops `schedule` runs, checked: an error at the schedule where they
/// do not stand right before it, or where it runs another number of
/// pipeline ranks than `mesh` has or of micro-batches than the loops run.
inline mlir::FailureOr<llvm::SmallVector<train::RepeatOp, 3>>
checkedScheduledLoops(ScheduleOp schedule, MeshAttr mesh) {
  llvm::SmallVector<train::RepeatOp, 3> loops = scheduledLoops(schedule);
  if (loops.empty())
    return schedule.emitOpError("does not stand right after the "
                                "micro-batch loops it runs (a forward "
                                "repeat saving its carries and its "
                                "backward)");
  int64_t pp = mesh.getAxis(AxisRole::Pipeline)
                   ? mesh.getSize(AxisRole::Pipeline)
                   : 0;
  if (schedule.getNumRanks() != pp ||
      schedule.getNumMicroBatches() != int64_t(loops[0].getCount()))
    return schedule.emitOpError("runs ")
           << schedule.getNumMicroBatches() << " micro-batches on "
           << schedule.getNumRanks() << " pipeline ranks; its loops run "
           << loops[0].getCount() << " on a pipeline axis of " << pp;
  // A backward's parts run only where dist-pipeline-split-backward split it.
  if (loops.size() < 3) {
    mlir::WalkResult parts = schedule.walk([&](ActionOp a) {
      if (a.getKind() != ActionKind::BackwardInput &&
          a.getKind() != ActionKind::BackwardWeight)
        return mlir::WalkResult::advance();
      a.emitOpError("runs a part of a backward that is not split "
                    "(dist-pipeline-split-backward splits it)");
      return mlir::WalkResult::interrupt();
    });
    if (parts.wasInterrupted())
      return mlir::failure();
  }
  return loops;
}

/// The `dist.schedule` of a rank program (null without one: no pipeline,
/// or GPipe's order, which is the program order).
inline ScheduleOp scheduleOf(train::ModelOp model) {
  auto schedules = model.getBody().front().getOps<ScheduleOp>();
  return schedules.empty() ? ScheduleOp() : *schedules.begin();
}

/// The op after which the values of `op` are final: `op` itself; for a
/// micro-batch loop a schedule runs, that schedule (the loops' iterations
/// run there); for a forward loop without one, the last part of its
/// backward (the loss is whole when the backward has run).
inline mlir::Operation *finalAfter(mlir::Operation *op) {
  auto loop = llvm::dyn_cast<train::RepeatOp>(op);
  if (!loop)
    return op;
  mlir::Operation *last = op;
  if (train::RepeatOp backward = backwardOf(loop)) {
    train::RepeatOp weight = weightPartOf(backward);
    last = weight ? weight : backward;
  }
  // A backward loop's weight part, or the schedule, stands right after it.
  for (mlir::Operation *next = last->getNextNode();
       llvm::isa_and_nonnull<train::RepeatOp, ScheduleOp>(next);
       next = next->getNextNode())
    if (auto schedule = llvm::dyn_cast<ScheduleOp>(next))
      return llvm::is_contained(scheduledLoops(schedule), loop) ? next : last;
  return last;
}

} // namespace loom::dist

#endif // LOOM_DIALECTS_DIST_PIPELINELOOPS_H
