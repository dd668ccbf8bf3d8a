//===- PipelineSplitBackward.cpp - dist-pipeline-split-backward -----------===//
//
// Zero-bubble schedules (ZB-H1, after Qi et al. 2024) run a stage's
// backward as two actions: I, the gradient of the stage's input, which the
// previous stage waits for, and W, the gradients of its weights, which
// nothing downstream waits for and which the schedule defers into the
// bubble. This pass splits the pipeline's backward micro-batch loop into
// those two parts. A part is a `train.repeat` of its own; what W reads of
// I's values is stacked by I per iteration (per micro-batch, and inside a
// stage per layer), which is the activation memory the deferral costs.
//
// A repeat splits around a set of its body's ops closed under operands
// (the first part): carries whose next value the first part makes stay
// with it, the others go to the second part, and every value of the
// first part the second reads becomes a stacked result of the first and a
// stacked operand of the second. Index arithmetic and slices of what both
// parts read whole (a stage's weights) are recomputed where needed
// instead, and what the backward recomputes without reading is erased
// first, so that it is not kept.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/RepeatSplit.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/dist/PipelineLoops.h"
#include "dialects/train/Adjoint.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINESPLITBACKWARD
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;
using loom::dist::backwardOf;
using loom::dist::weightPartOf;

namespace {

using dist::placeOnStage;
using dist::stageOf;

/// The ops of `body` that `roots` need, roots included.
DenseSet<Operation *> closure(Block &body, ArrayRef<Operation *> roots) {
  DenseSet<Operation *> set;
  SmallVector<Operation *> work(roots);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!set.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
        work.push_back(def);
  }
  return set;
}


/// The stage a value of the pipeline's backward loop belongs to: its op's
/// `dist.stage`, or for an op of no stage the one stage its operands have
/// (none when they have none; an error when they have several).
FailureOr<std::optional<int64_t>>
derivedStage(Value v, DenseMap<Value, std::optional<int64_t>> &memo) {
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  std::optional<int64_t> stage;
  Operation *def = v.getDefiningOp();
  if (def && stageOf(def)) {
    stage = stageOf(def);
  } else if (def) {
    for (Value operand : def->getOperands()) {
      FailureOr<std::optional<int64_t>> s = derivedStage(operand, memo);
      if (failed(s))
        return failure();
      if (*s && stage && **s != *stage) {
        def->emitOpError("combines values of pipeline stages ")
            << *stage << " and " << **s
            << ", which a split backward cannot hand from its input part to "
               "its weight part";
        return failure();
      }
      if (*s)
        stage = *s;
    }
  }
  return memo[v] = stage;
}

struct DistPipelineSplitBackwardPass
    : public loom::impl::DistPipelineSplitBackwardBase<
          DistPipelineSplitBackwardPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(splitModel(model)))
        return signalPassFailure();
  }

  LogicalResult splitModel(ModelOp model) {
    auto pipeline = dist::attrs(model).getPipelineAttrHelper();
    dist::PipelineAttr record = pipeline.getAttr(model);
    if (!record)
      return model.emitOpError("has no pipeline (")
             << pipeline.getNameStr()
             << ") whose backward dist-pipeline-split-backward could split";
    int64_t ranks = record.getRanks();
    SmallVector<RepeatOp> backwards;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward);
          backward && !stageOf(forward) && !weightPartOf(backward))
        backwards.push_back(backward);
    if (backwards.empty())
      return model.emitOpError("has no micro-batch loop whose backward "
                               "could be split (a split backward needs "
                               "--micro-batches above 1)");
    for (RepeatOp backward : backwards)
      if (failed(splitMicroBatchBackward(backward, ranks)))
        return failure();
    return success();
  }

  /// Splits each stage's layers' backward (a reverse repeat on a stage)
  /// into the chain of input gradients and the weight gradients.
  LogicalResult splitLayers(Block &body) {
    SmallVector<RepeatOp> layers;
    for (RepeatOp r : body.getOps<RepeatOp>())
      if (stageOf(r) && r.getReverse() && !r.getSavesCarries() &&
          !r.getCarries().empty() && !r.getStackedResults().empty())
        layers.push_back(r);
    for (RepeatOp r : layers) {
      SmallVector<Operation *> roots;
      for (Value next : r.getYield().getCarries())
        if (Operation *def = next.getDefiningOp())
          roots.push_back(def);
      DenseSet<Operation *> input = closure(r.getBodyBlock(), roots);
      if (roots.empty() ||
          input.size() == r.getBodyBlock().getOperations().size() - 1)
        continue;
      FailureOr<RepeatHalves> split = splitRepeat(r, input);
      if (failed(split))
        return failure();
      r.erase();
    }
    return success();
  }

  LogicalResult splitMicroBatchBackward(RepeatOp backward, int64_t ranks) {
    Block &body = backward.getBodyBlock();
    // What the backward recomputes and never reads (the loss, a layer's
    // outputs) would otherwise be kept for the weight part.
    eraseDeadOpsInLoops(body);
    if (failed(splitLayers(body)))
      return failure();
    // The input part: what the stages' transfers need (the gradients a
    // stage sends back and receives).
    SmallVector<Operation *> roots;
    for (Operation &op : body)
      if (isa<dist::SendOp, dist::RecvOp>(op))
        roots.push_back(&op);
    if (roots.empty())
      return backward.emitOpError("sends nothing between pipeline stages; "
                                  "its backward has no input part to split "
                                  "off");
    DenseSet<Operation *> input = closure(body, roots);

    // A value the weight part reads is kept per micro-batch by its stage's
    // input action: an op of no stage that makes one takes the stage its
    // operands have (its value is zero off that stage anyway).
    Builder attrs(backward.getContext());
    DenseMap<Value, std::optional<int64_t>> memo;
    for (Operation &op : body.without_terminator()) {
      if (input.contains(&op) || isRecomputable(&op))
        continue;
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || !input.contains(def) || stageOf(def))
          continue;
        FailureOr<std::optional<int64_t>> stage = derivedStage(v, memo);
        if (failed(stage))
          return failure();
        if (!*stage)
          continue;
        placeOnStage(def, **stage, ranks);
      }
    }

    FailureOr<RepeatHalves> split = splitRepeat(backward, input);
    if (failed(split))
      return failure();
    auto part = dist::attrs(backward).getBackwardAttrHelper();
    part.setAttr(split->first, attrs.getStringAttr("input"));
    part.setAttr(split->second, attrs.getStringAttr("weight"));
    // (The crossing values' stages, read before the original goes.)
    SmallVector<std::optional<int64_t>> crossingStages;
    for (Value v : split->crossing)
      crossingStages.push_back(v.getDefiningOp() ? stageOf(v.getDefiningOp())
                                                 : std::nullopt);
    backward.erase();

    // In the weight part, an op of no stage (a sum over stages) reads a
    // stage's kept value through a copy on that stage, which other stages'
    // actions fill with zeros.
    Block &weight = split->second.getBodyBlock();
    size_t first = 1 + split->second.getCarries().size() +
                   split->second.getStacked().size() - split->crossing.size();
    OpBuilder b = OpBuilder::atBlockBegin(&weight);
    for (auto [k, stage] : llvm::enumerate(crossingStages)) {
      BlockArgument arg = weight.getArgument(first + k);
      if (!stage || llvm::all_of(arg.getUsers(), [](Operation *user) {
            return stageOf(user).has_value();
          }))
        continue;
      auto copy = ScaleOp::create(b, arg.getLoc(), arg.getType(), arg,
                                  b.getF64FloatAttr(1.0));
      placeOnStage(copy, *stage, ranks);
      arg.replaceUsesWithIf(copy.getResult(), [&](OpOperand &use) {
        return use.getOwner() != copy && !stageOf(use.getOwner());
      });
    }
    return success();
  }
};

} // namespace
