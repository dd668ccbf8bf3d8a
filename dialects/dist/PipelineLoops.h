//===- PipelineLoops.h - a micro-batch loop's backward parts ----*- C++ -*-===//
//
// The repeats a pipeline schedule interleaves: a forward repeat that saves
// its carries, its backward (the reverse repeat that reads them) and, where
// dist-pipeline-split-backward split the backward, its weight part (marked
// `dist.backward = "weight"`). The marking is dist's; these helpers read it
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

} // namespace loom::dist

#endif // LOOM_DIALECTS_DIST_PIPELINELOOPS_H
