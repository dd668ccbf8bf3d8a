//===- PipelineTransfers.cpp - dist-pipeline-transfers ---------------------===//
//
// Where each stage's values live and how they reach the stages that read
// them: sends and receives over the pipeline axis (dist-pipeline-transfers),
// and the all-reduce of the partial sums every rank holds after the
// backward (reduceOverStages, which dist-pipeline-reduce runs).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/dist/PipelineLoops.h"
#include "dialects/train/Adjoint.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace loom {
#define GEN_PASS_DEF_DISTPIPELINETRANSFERS
#define GEN_PASS_DEF_DISTPIPELINEFOLDACCUMULATIONS
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;
using loom::dist::backwardOf;

namespace {

using dist::placeOnStage;
using dist::stageOf;

/// The one stage whose rank holds a parameter, when a single stage uses it
/// (its `dist.stages`, which dist-pipeline-partition records).
std::optional<int64_t> ownerOf(ParamOp param) {
  auto stages = dist::attrs(param).getStagesAttrHelper().getAttr(param);
  if (!stages || stages.size() != 1)
    return std::nullopt;
  return stages[0];
}

struct Transfers {
  Transfers(ModelOp model, int64_t ranks, StringAttr axis)
      : model(model), ranks(ranks), axis(axis) {}

  ModelOp model;
  int64_t ranks;
  /// The mesh's pipeline axis.
  StringAttr axis;
  /// The stages whose ranks hold a value's real contribution: one for an
  /// op on a stage, the union of its operands' for an op on every rank
  /// (which then holds a partial sum: zero where a stage did not run),
  /// none for a value every rank holds whole (made of no stage's values,
  /// or all-reduced over the pipeline).
  DenseMap<Value, SmallVector<int64_t, 2>> where;
  /// The received copy of a value on a stage.
  DenseMap<std::pair<Value, int64_t>, Value> received;

  ArrayRef<int64_t> contributors(Value v) {
    auto it = where.find(v);
    if (it != where.end())
      return it->second;
    SmallVector<int64_t, 2> stages;
    if (Operation *def = v.getDefiningOp()) {
      auto reduce = dyn_cast<dist::AllReduceOp>(def);
      if (reduce && llvm::is_contained(reduce.getAxes(), axis)) {
        // Summed over the pipeline: whole on every rank.
      } else if (auto s = stageOf(def)) {
        stages.push_back(*s);
      } else if (auto repeat = dyn_cast<RepeatOp>(def)) {
        // A loop on every rank: a carry holds what its initial value and
        // its body's yields hold, a stacked result what its yields hold.
        where[v] = {};
        unsigned n = cast<OpResult>(v).getResultNumber();
        size_t numCarries = repeat.getCarries().size();
        YieldOp yield = repeat.getYield();
        if (n < numCarries) {
          llvm::append_range(stages, contributors(repeat.getCarries()[n]));
          llvm::append_range(stages, contributors(yield.getCarries()[n]));
        } else {
          llvm::append_range(stages,
                             contributors(yield.getStacked()[n - numCarries]));
        }
        llvm::sort(stages);
        stages.erase(llvm::unique(stages), stages.end());
      } else {
        for (Value operand : def->getOperands())
          llvm::append_range(stages, contributors(operand));
        // A loop on every rank whose body runs ops of stages yields their
        // parts (conservatively: every stage inside it).
        def->walk([&](Operation *nested) {
          if (auto s = stageOf(nested); s && nested != def)
            stages.push_back(*s);
        });
        llvm::sort(stages);
        stages.erase(llvm::unique(stages), stages.end());
      }
    }
    return where[v] = stages;
  }

  /// A copy of `v` on stage `to`, sent from stage `from` right after `v` is
  /// made: both ranks reach the pair at the same point of the program.
  Value transfer(Value v, int64_t from, int64_t to) {
    auto key = std::make_pair(v, to);
    if (Value r = received.lookup(key))
      return r;
    OpBuilder b(v.getContext());
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    Location loc = v.getLoc();
    auto send = dist::SendOp::create(b, loc, v, axis, to % ranks);
    placeOnStage(send, from, ranks);
    auto recv = dist::RecvOp::create(b, loc, v.getType(), axis, from % ranks);
    placeOnStage(recv, to, ranks);
    return received[key] = recv.getResult();
  }

  SmallVector<Operation *> stagedOps() {
    SmallVector<Operation *> staged;
    model.getBody().walk([&](Operation *op) {
      if (stageOf(op))
        staged.push_back(op);
    });
    return staged;
  }

  /// Every rank runs its stages' ops and holds zeros for the others', so
  /// the loss is a partial sum over the pipeline, as is the gradient of a
  /// parameter several stages use (the tied embedding): one all-reduce
  /// over pp makes each whole on every rank. The gradient of a parameter
  /// one stage uses stays where that stage made it: its update runs on
  /// that stage's rank only (dist-pipeline-transfers places it there).
  void reduce() {
    OutputOp output = model.getOutput();
    OpBuilder b(output);
    auto sum = [&](Value v) -> Value {
      if (contributors(v).empty())
        return v;
      return dist::AllReduceOp::create(b, output.getLoc(), v,
                                       b.getArrayAttr({axis}), false);
    };
    output.getLossMutable().assign(sum(output.getLoss()));
    auto params = model.getBody().front().getOps<ParamOp>();
    for (auto [g, param] : llvm::zip(output.getGradsMutable(), params))
      if (!ownerOf(param))
        g.set(sum(g.get()));
  }

  /// A staged op that reads another stage's value gets a copy sent right
  /// after the value is made; then the stage decides the rank (`dist.on`,
  /// which the verifier and the code generator read).
  /// The forward edges (a stage reading a lower stage's value) at the top
  /// level of `body`, once per value and reading stage, in order.
  SmallVector<std::tuple<Value, int64_t, int64_t>> forwardEdges(Block &body) {
    SmallVector<std::tuple<Value, int64_t, int64_t>> edges;
    DenseSet<std::pair<Value, int64_t>> seen;
    for (Operation &op : body) {
      std::optional<int64_t> stage = stageOf(&op);
      if (!stage)
        continue;
      for (Value v : op.getOperands()) {
        ArrayRef<int64_t> from = contributors(v);
        if (from.size() == 1 && from[0] < *stage &&
            from[0] % ranks != *stage % ranks &&
            seen.insert({v, *stage}).second)
          edges.push_back({v, from[0], *stage});
      }
    }
    return edges;
  }

  /// The backward of the micro-batch loop recomputes each micro-batch's
  /// forward. Across stages that would send the activations again, and
  /// make a stage's backward wait for the earlier stages' recomputation;
  /// instead the forward loop keeps what each stage received (a stacked
  /// result per transfer) and the backward reads it back.
  void saveForwardTransfers(RepeatOp forward, RepeatOp backward) {
    Block &fBody = forward.getBodyBlock(), &bBody = backward.getBodyBlock();
    auto fEdges = forwardEdges(fBody), bEdges = forwardEdges(bBody);
    if (fEdges.empty() || fEdges.size() != bEdges.size())
      return;
    for (auto [f, b] : llvm::zip(fEdges, bEdges))
      if (std::get<0>(f).getType() != std::get<0>(b).getType() ||
          std::get<1>(f) != std::get<1>(b) || std::get<2>(f) != std::get<2>(b))
        return;
    // The forward loop: each transfer's received value, yielded per
    // micro-batch before the saved carries.
    SmallVector<Value> received;
    for (auto [v, from, to] : fEdges) {
      Value r = transfer(v, from, to);
      v.replaceUsesWithIf(r, [&, to = to](OpOperand &use) {
        std::optional<int64_t> s = stageOf(use.getOwner());
        return s && *s == to && use.getOwner() != r.getDefiningOp() &&
               !isa<dist::SendOp>(use.getOwner());
      });
      received.push_back(r);
    }
    size_t numCarries = forward.getCarries().size();
    size_t numUser = forward.getStackedResults().size() - numCarries;
    YieldOp yield = forward.getYield();
    SmallVector<Value> slices(yield.getStacked().take_front(numUser));
    llvm::append_range(slices, received);
    llvm::append_range(slices, yield.getStacked().take_back(numCarries));
    IRRewriter rewriter(forward->getContext());
    rewriter.setInsertionPoint(forward);
    RepeatOp saving =
        forward.rebuild(rewriter, forward.getParts(), ValueRange(slices));
    for (auto [i, r] : llvm::enumerate(forward.getCarryResults()))
      r.replaceAllUsesWith(saving.getCarryResults()[i]);
    for (size_t i = 0; i < numUser; ++i)
      forward.getStackedResults()[i].replaceAllUsesWith(
          saving.getStackedResults()[i]);
    for (size_t i = 0; i < numCarries; ++i)
      forward.getStackedResults()[numUser + i].replaceAllUsesWith(
          saving.getStackedResults()[numUser + received.size() + i]);
    forward.erase();

    // The backward loop reads them as stacked operands.
    SmallVector<BlockArgument> readSlices;
    appendStackedOperands(
        backward, saving.getStackedResults().slice(numUser, received.size()),
        readSlices);
    for (auto [k, slice] : llvm::enumerate(readSlices)) {
      auto [v, from, to] = bEdges[k];
      v.replaceUsesWithIf(slice, [&, to = to](OpOperand &use) {
        std::optional<int64_t> s = stageOf(use.getOwner());
        return s && *s == to;
      });
    }
  }

  /// A micro-batch loop that keeps residuals: where its backward reads on
  /// one stage a value another rank's stage made, the forward already
  /// received it there; the forward saves the received copy (one more
  /// residual) and the backward reads that.
  void saveResidualTransfers(RepeatOp forward, RepeatOp backward) {
    size_t numCarries = forward.getCarries().size();
    size_t numUser = forward.getNumUserStacked();
    size_t numResiduals = forward.getNumResiduals();
    YieldOp fYield = forward.getYield();
    Block &bBody = backward.getBodyBlock();
    size_t bCarries = backward.getCarries().size();
    // Each received copy, with the backward's argument it stands in for on
    // its stage.
    struct Edge {
      BlockArgument saved;
      int64_t to;
      Value received;
    };
    SmallVector<Edge> edges;
    for (auto [i, operand] : llvm::enumerate(backward.getStacked())) {
      auto result = dyn_cast<OpResult>(operand);
      if (!result || result.getOwner() != forward.getOperation())
        continue;
      size_t n = result.getResultNumber() - numCarries;
      if (n < numUser || n >= numUser + numResiduals)
        continue;
      Value v = fYield.getStacked()[n];
      std::optional<int64_t> from =
          v.getDefiningOp() ? stageOf(v.getDefiningOp()) : std::nullopt;
      if (!from)
        continue;
      BlockArgument saved = bBody.getArgument(1 + bCarries + i);
      SmallVector<int64_t> readers;
      for (Operation *user : saved.getUsers())
        if (std::optional<int64_t> to = stageOf(user);
            to && *to % ranks != *from % ranks)
          readers.push_back(*to);
      llvm::sort(readers);
      readers.erase(llvm::unique(readers), readers.end());
      for (int64_t to : readers)
        edges.push_back({saved, to, transfer(v, *from, to)});
    }
    if (edges.empty())
      return;

    // The forward: each received copy, one more residual.
    SmallVector<Value> slices(
        fYield.getStacked().take_front(numUser + numResiduals));
    for (Edge &e : edges)
      slices.push_back(e.received);
    llvm::append_range(slices, fYield.getStacked().take_back(numCarries));
    IRRewriter rewriter(forward->getContext());
    rewriter.setInsertionPoint(forward);
    RepeatOp::Parts parts = forward.getParts();
    parts.residuals =
        rewriter.getI64IntegerAttr(int64_t(numResiduals + edges.size()));
    RepeatOp saving = forward.rebuild(rewriter, parts, ValueRange(slices));
    for (auto [i, r] : llvm::enumerate(forward.getCarryResults()))
      r.replaceAllUsesWith(saving.getCarryResults()[i]);
    for (size_t i = 0; i < numUser + numResiduals; ++i)
      forward.getStackedResults()[i].replaceAllUsesWith(
          saving.getStackedResults()[i]);
    for (size_t i = 0; i < numCarries; ++i)
      forward.getStackedResults()[numUser + numResiduals + i]
          .replaceAllUsesWith(saving.getStackedResults()[numUser + numResiduals +
                                                        edges.size() + i]);
    forward.erase();

    // The backward: reads them on the receiving stages.
    SmallVector<BlockArgument> readSlices;
    appendStackedOperands(
        backward,
        saving.getStackedResults().slice(numUser + numResiduals, edges.size()),
        readSlices);
    for (auto [e, slice] : llvm::zip(edges, readSlices))
      e.saved.replaceUsesWithIf(slice, [&, to = e.to](OpOperand &use) {
        std::optional<int64_t> s = stageOf(use.getOwner());
        return s && *s == to;
      });
  }

  /// The micro-batch loop and its backward: a forward repeat saving its
  /// carries whose body runs stages' ops, and the reverse repeat that
  /// reads its saved carries.
  void saveMicroBatchTransfers() {
    SmallVector<std::pair<RepeatOp, RepeatOp>> loops;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward); backward && !stageOf(forward))
        loops.push_back({forward, backward});
    for (auto [forward, backward] : loops) {
      if (forward.keepsResiduals())
        saveResidualTransfers(forward, backward);
      else
        saveForwardTransfers(forward, backward);
    }
  }

  LogicalResult transferAll() {
    saveMicroBatchTransfers();
    SmallVector<Operation *> staged = stagedOps();
    for (Operation *op : staged) {
      int64_t stage = *stageOf(op);
      for (OpOperand &use : op->getOpOperands()) {
        ArrayRef<int64_t> from = contributors(use.get());
        if (from.empty() || (from.size() == 1 && from[0] == stage))
          continue;
        if (from.size() > 1)
          return op->emitOpError("runs on pipeline stage ")
                 << stage << " and reads a value that stages "
                 << llvm::make_range(from.begin(), from.end())
                 << " each hold part of, which pipelines do not combine "
                    "yet";
        if (from[0] % ranks == stage % ranks) {
          // Interleaved stages on one rank run in different actions of
          // the schedule, which keep nothing for each other.
          if (from[0] != stage)
            return op->emitOpError("runs on pipeline stage ")
                   << stage << " and reads a value of stage " << from[0]
                   << ", which runs on the same rank; interleaved stages "
                      "exchange values only with other ranks' stages";
          continue;
        }
        use.set(transfer(use.get(), from[0], stage));
      }
    }
    // The stage decides the rank (`dist.on`, which the verifier and the
    // code generator read); `dist.stage` stays for the schedule's actions.
    for (Operation *op : staged)
      placeOnStage(op, *stageOf(op), ranks);
    // Pairs found before any is rewritten: accumulatePerStage replaces the
    // backward repeat, which a walk over the repeats would reach erased.
    SmallVector<RepeatOp> backwards;
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward); backward && !stageOf(forward))
        backwards.push_back(backward);
    for (RepeatOp backward : backwards)
      accumulatePerStage(backward);
    for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
      if (RepeatOp backward = backwardOf(forward))
        stampStagelessOps({&backward.getBodyBlock(), &forward.getBodyBlock()});
    if (failed(normPerStage()))
      return failure();
    placeUpdates();
    tieGroups();
    return success();
  }

  /// The parts of a sum over stages: `v` itself when one stage makes it,
  /// or the parts of an add of no stage (collected in `adds`) that only
  /// the sum reads.
  bool stageParts(Value v, SmallVectorImpl<std::pair<Value, int64_t>> &parts,
                  SmallVectorImpl<Operation *> &adds) {
    auto add = v.getDefiningOp<AddOp>();
    if (add && !stageOf(add) && add.getLhs().getType() == add.getType() &&
        add.getRhs().getType() == add.getType() && v.hasOneUse()) {
      adds.push_back(add);
      return stageParts(add.getLhs(), parts, adds) &&
             stageParts(add.getRhs(), parts, adds);
    }
    ArrayRef<int64_t> from = contributors(v);
    if (from.size() != 1)
      return false;
    parts.push_back({v, from[0]});
    return true;
  }

  /// A parameter that stages on two ranks of a longer pipeline use (the
  /// embedding tied to the head, on the first and the last stage) lives on
  /// those two ranks only, as Megatron-LM's embedding group does: the sum
  /// of its gradient's parts becomes an exchange between them (an
  /// all-reduce with `members`), and what reads that sum (data
  /// parallelism's reduction, clipping's scaling, the update) runs there
  /// too; the other ranks hold and compute none of it. The layout stores
  /// the parameter and its state where its update runs.
  void tieGroups() {
    if (ranks <= 2)
      return;
    Block &body = model.getBody().front();
    SmallVector<dist::AllReduceOp> reduces(body.getOps<dist::AllReduceOp>());
    for (dist::AllReduceOp reduce : reduces) {
      if (reduce.getAxes().size() != 1 || reduce.getAxes()[0] != axis ||
          reduce.getMembers() || reduce.getMax() ||
          reduce.getInput().getType().getRank() == 0)
        continue;
      SmallVector<std::pair<Value, int64_t>> parts;
      SmallVector<Operation *> adds;
      if (!stageParts(reduce.getInput(), parts, adds))
        continue;
      SmallVector<int64_t> members;
      for (auto [part, stage] : parts)
        members.push_back(stage % ranks);
      llvm::sort(members);
      members.erase(llvm::unique(members), members.end());
      if (members.size() != 2)
        continue;
      // What reads the sum, transitively, at the top level: it must be
      // able to run on the members alone.
      SetVector<Operation *> readers;
      SmallVector<Value> work{reduce.getResult()};
      bool movable = true;
      while (!work.empty() && movable) {
        Value v = work.pop_back_val();
        for (Operation *user : v.getUsers()) {
          if (isa<OutputOp>(user))
            continue;
          if (user->getBlock() != &body || user->getNumRegions()) {
            movable = false;
            break;
          }
          if (std::optional<int64_t> stage = stageOf(user)) {
            movable &= llvm::is_contained(members, *stage % ranks);
            continue;
          }
          if (readers.insert(user))
            llvm::append_range(work, user->getResults());
        }
      }
      // Its parameter and state: read on the members only (through the
      // micro-batch loops, by their stages' ops).
      std::function<bool(Value)> readOnMembers = [&](Value v) {
        return llvm::all_of(v.getUses(), [&](OpOperand &use) {
          Operation *user = use.getOwner();
          if (std::optional<int64_t> stage = stageOf(user))
            return llvm::is_contained(members, *stage % ranks);
          if (readers.contains(user))
            return true;
          auto repeat = dyn_cast<RepeatOp>(user);
          return repeat && readOnMembers(repeat.getBodyBlock().getArgument(
                               1 + use.getOperandNumber()));
        });
      };
      for (Operation *reader : readers)
        if (isa<SGDUpdateOp, AdamWUpdateOp>(reader))
          for (Value held : reader->getOperands())
            if (isa_and_nonnull<ParamOp, StateOp>(held.getDefiningOp()))
              movable &= readOnMembers(held);
      if (!movable)
        continue;
      Builder b(model.getContext());
      reduce.setMembersAttr(b.getDenseI64ArrayAttr(members));
      dist::placeOnRanks(reduce, axis, members);
      for (Operation *op : llvm::concat<Operation *const>(adds, readers))
        dist::placeOnRanks(op, axis, members);
    }
  }

  /// An op of no stage in a micro-batch loop's body runs in every action
  /// of the schedule (and on every rank in the program order): the loss's
  /// normalisation by the micro-batch's label count, the loss times it, its
  /// accumulation, the loss gradient's scale. Such an op becomes one
  /// stage's (so no other stage's action runs it) where
  /// - everything that reads it is that stage's: its ops, or a later loop
  ///   reading a stacked result it yields (the backward reading a
  ///   residual) only by that stage's ops; or
  /// - it is a product with that stage's value, or that product added into
  ///   a carry that starts at zero: where the stage does not run, its value
  ///   is zero either way (a partial sum over stages, as the loss is).
  /// To a fixed point over the loops' bodies (`bodies`, readers' loops
  /// first), since a chain takes its stage op by op.
  void stampStagelessOps(ArrayRef<Block *> bodies) {
    auto ownStage = [&](Value v) -> std::optional<int64_t> {
      Operation *def = v.getDefiningOp();
      return def ? stageOf(def) : std::nullopt;
    };
    // The stage of every op that reads `r`, a loop's stacked result.
    auto stackedReaders = [&](Value r) -> std::optional<int64_t> {
      std::optional<int64_t> stage;
      for (OpOperand &use : r.getUses()) {
        auto loop = dyn_cast<RepeatOp>(use.getOwner());
        if (!loop || use.getOperandNumber() < loop.getCarries().size())
          return std::nullopt;
        for (Operation *user : loop.getBodyBlock()
                                   .getArgument(1 + use.getOperandNumber())
                                   .getUsers()) {
          std::optional<int64_t> s = stageOf(user);
          if (!s || (stage && *stage != *s))
            return std::nullopt;
          stage = s;
        }
      }
      return stage;
    };
    auto readersStage = [&](Operation &op,
                            Block &body) -> std::optional<int64_t> {
      std::optional<int64_t> stage;
      auto loop = cast<RepeatOp>(body.getParentOp());
      for (OpOperand &use : op.getUses()) {
        Operation *user = use.getOwner();
        std::optional<int64_t> s;
        if (user == body.getTerminator()) {
          size_t carries = loop.getCarries().size();
          if (use.getOperandNumber() < carries)
            return std::nullopt;
          s = stackedReaders(
              loop.getStackedResults()[use.getOperandNumber() - carries]);
        } else if (user->getBlock() == &body) {
          s = stageOf(user);
        }
        if (!s || (stage && *stage != *s))
          return std::nullopt;
        stage = s;
      }
      return stage;
    };
    auto partialStage = [&](Operation &op,
                            Block &body) -> std::optional<int64_t> {
      if (auto mul = dyn_cast<MulOp>(op)) {
        std::optional<int64_t> l = ownStage(mul.getLhs()),
                               r = ownStage(mul.getRhs());
        return l && !r ? l : (r && !l ? r : std::nullopt);
      }
      auto add = dyn_cast<AddOp>(op);
      auto loop = cast<RepeatOp>(body.getParentOp());
      if (!add || !add->hasOneUse() ||
          *add->getUsers().begin() != body.getTerminator())
        return std::nullopt;
      for (auto [acc, part] : {std::pair(add.getLhs(), add.getRhs()),
                               std::pair(add.getRhs(), add.getLhs())}) {
        auto arg = dyn_cast<BlockArgument>(acc);
        if (!arg || arg.getOwner() != &body || arg.getArgNumber() == 0 ||
            arg.getArgNumber() > loop.getCarries().size() ||
            // (Read by the add, and saved for the backward at most.)
            !llvm::all_of(arg.getUsers(),
                          [&](Operation *user) {
                            return user == add.getOperation() ||
                                   user == body.getTerminator();
                          }) ||
            loop.getYield().getCarries()[arg.getArgNumber() - 1] != add ||
            !matchPattern(loop.getCarries()[arg.getArgNumber() - 1],
                          m_AnyZeroFloat()))
          continue;
        if (std::optional<int64_t> s = ownStage(part))
          return s;
      }
      return std::nullopt;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (Block *body : bodies)
        for (Operation &op : llvm::reverse(*body)) {
          if (stageOf(&op) || op.getNumRegions() || op.use_empty() ||
              op.hasTrait<OpTrait::IsTerminator>() ||
              isa<arith::ConstantOp, ReshapeOp>(op) ||
              !llvm::all_of(op.getResultTypes(),
                            llvm::IsaPred<RankedTensorType>))
            continue;
          std::optional<int64_t> stage = readersStage(op, *body);
          if (!stage)
            stage = partialStage(op, *body);
          if (!stage)
            continue;
          placeOnStage(&op, *stage, ranks);
          changed = true;
        }
    }
    // What was computed of the values' stages before is stale.
    where.clear();
  }

  /// Whether every rank holds `v` whole: no stage made any of it, or an
  /// all-reduce over the pipeline summed the stages' parts.
  bool wholeEverywhere(Value v) { return contributors(v).empty(); }

  /// Clipping's sum of squares reads every parameter's gradient, and a
  /// stage's gradients live on its rank only: each stage sums the squares
  /// of its own (an op of that stage), what every rank holds whole (the
  /// tied embedding's, reduced over pp) is counted on the first stage, and
  /// the scalar all-reduce after the sum also runs over pp.
  LogicalResult normPerStage() {
    SmallVector<SumSquaresOp> sums(
        model.getBody().front().getOps<SumSquaresOp>());
    for (SumSquaresOp op : sums) {
      std::map<int64_t, SmallVector<Value>> byStage;
      for (Value v : op.getInputs()) {
        ArrayRef<int64_t> from = contributors(v);
        if (wholeEverywhere(v))
          byStage[0].push_back(v);
        else if (from.size() == 1)
          byStage[from[0]].push_back(v);
        else
          return op.emitOpError("reads a gradient that pipeline stages ")
                 << llvm::make_range(from.begin(), from.end())
                 << " each hold part of";
      }
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value total;
      for (auto &[stage, inputs] : byStage) {
        auto part =
            SumSquaresOp::create(b, loc, inputs, op.getReplicaGroup());
        placeOnStage(part, stage, ranks);
        total = total ? Value(AddOp::create(b, loc, total, part))
                      : Value(part);
      }
      op.getResult().replaceAllUsesWith(total);
      op.erase();
      // The sums are partial over pp: the scalar all-reduce that follows
      // the adds of the sums (over the axes that split gradients) takes pp
      // too, or one over pp alone is added.
      while (total.hasOneUse() && isa<AddOp>(*total.getUsers().begin()))
        total = total.getUsers().begin()->getResult(0);
      auto reduce = total.hasOneUse()
                        ? dyn_cast<dist::AllReduceOp>(*total.getUsers().begin())
                        : dist::AllReduceOp();
      if (reduce && llvm::is_contained(reduce.getAxes(), axis))
        continue;
      if (reduce) {
        SmallVector<Attribute> axes(reduce.getAxes().begin(),
                                    reduce.getAxes().end());
        axes.push_back(axis);
        reduce.setAxesAttr(b.getArrayAttr(axes));
        continue;
      }
      b.setInsertionPointAfterValue(total);
      auto whole = dist::AllReduceOp::create(b, loc, total,
                                             b.getArrayAttr({axis}), false);
      total.replaceAllUsesExcept(whole, whole);
    }
    return success();
  }

  /// A parameter one stage uses is updated on that stage's rank only, and
  /// so is everything only its update reads (its gradient's clipping, the
  /// sum of its stage's parts, data parallelism's reduction of it) and
  /// everything that reads it outside the stage's ops (a reshard of its
  /// stored block): the other ranks neither compute nor hold it.
  void placeUpdates() {
    Block &body = model.getBody().front();
    // The stage whose rank alone holds a parameter or its state.
    DenseMap<Value, int64_t> held;
    llvm::StringMap<int64_t> owners;
    for (ParamOp param : body.getOps<ParamOp>())
      if (std::optional<int64_t> owner = ownerOf(param)) {
        held[param] = *owner;
        owners[param.getName()] = *owner;
      }
    for (StateOp state : body.getOps<StateOp>())
      if (auto it = owners.find(state.getOf()); it != owners.end())
        held[state] = it->second;
    for (Operation &op : body) {
      if (!isa<SGDUpdateOp, AdamWUpdateOp>(op))
        continue;
      if (auto it = held.find(op.getOperand(0)); it != held.end())
        placeOnStage(&op, it->second, ranks);
    }
    // Forward from the parameters: an op of no stage (not a loop) that
    // reads a held tensor and nothing of another stage runs on its stage.
    for (Operation &op : body) {
      if (stageOf(&op) || op.getNumRegions() ||
          op.hasTrait<OpTrait::IsTerminator>())
        continue;
      std::optional<int64_t> stage;
      bool one = true;
      for (Value v : op.getOperands()) {
        std::optional<int64_t> s;
        if (auto it = held.find(v); it != held.end())
          s = it->second;
        else if (ArrayRef<int64_t> from = contributors(v); from.size() == 1)
          s = from[0];
        else if (!from.empty())
          one = false;
        if (s) {
          one &= !stage || *stage == *s;
          stage = s;
        }
      }
      if (one && stage && llvm::any_of(op.getOperands(), [&](Value v) {
            return held.count(v);
          })) {
        placeOnStage(&op, *stage, ranks);
        for (Value r : op.getResults()) {
          held[r] = *stage;
          where[r] = {*stage};
        }
      }
    }
    // Back from the updates: an op of no stage whose results only ops of
    // one stage read moves to that stage (constants and pipeline
    // reductions stay where they are).
    for (Operation &op : llvm::reverse(body)) {
      if (stageOf(&op) || op.getNumRegions() || op.getNumOperands() == 0 ||
          op.hasTrait<OpTrait::IsTerminator>() || op.use_empty())
        continue;
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op);
          reduce && llvm::is_contained(reduce.getAxes(), axis))
        continue;
      std::optional<int64_t> stage;
      bool one = true;
      for (Operation *user : op.getUsers()) {
        std::optional<int64_t> s = stageOf(user);
        one &= s && (!stage || *stage == *s) && user->getBlock() == &body;
        stage = s;
      }
      // What it reads must be there: whole on every rank, or the stage's.
      one &= stage && llvm::all_of(op.getOperands(), [&](Value v) {
               ArrayRef<int64_t> from = contributors(v);
               return wholeEverywhere(v) ||
                      (from.size() == 1 && from[0] == *stage);
             });
      if (one) {
        placeOnStage(&op, *stage, ranks);
        for (Value r : op.getResults())
          where[r] = {*stage};
      }
    }
  }

  /// The leaves of a sum over stages: `v` itself when one stage makes it,
  /// or the leaves of an add of no stage; false when `v` is neither.
  bool stageLeaves(Value v, Block &body,
                   SmallVectorImpl<std::pair<Value, int64_t>> &leaves) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body)
      return false;
    if (std::optional<int64_t> s = stageOf(def)) {
      leaves.push_back({v, *s});
      return true;
    }
    auto add = dyn_cast<AddOp>(def);
    return add && add.getLhs().getType() == add.getType() &&
           add.getRhs().getType() == add.getType() && v.hasOneUse() &&
           stageLeaves(add.getLhs(), body, leaves) &&
           stageLeaves(add.getRhs(), body, leaves);
  }

  /// The backward micro-batch loop accumulates each gradient as the sum
  /// over stages of their parts, padded to the whole parameter: every
  /// action would add (and zero-fill) the whole model's gradients. Instead
  /// each stage's part accumulates in a carry of its own, updated by an op
  /// of that stage (so only its actions touch it); the padding and the
  /// sum over stages happen once, after the loop. Returns the loop.
  RepeatOp accumulatePerStage(RepeatOp backward) {
    Block &body = backward.getBodyBlock();
    YieldOp yield = backward.getYield();
    size_t numCarries = backward.getCarries().size();
    struct Part {
      Value value;       ///< the stage's gradient in the loop
      int64_t stage;
      /// Its padding to the whole parameter, if any.
      DenseI64ArrayAttr low, high;
    };
    SmallVector<SmallVector<Part>> parts(numCarries);
    bool any = false;
    for (auto [k, next] : llvm::enumerate(yield.getCarries())) {
      BlockArgument arg = body.getArgument(1 + k);
      auto add = next.getDefiningOp<AddOp>();
      if (!add || stageOf(add) || !arg.hasOneUse() ||
          !next.hasOneUse() || add.getLhs() != arg)
        continue;
      SmallVector<std::pair<Value, int64_t>> leaves;
      if (!stageLeaves(add.getRhs(), body, leaves))
        continue;
      for (auto [v, stage] : leaves) {
        auto pad = v.getDefiningOp<PadOp>();
        if (pad && !v.hasOneUse())
          pad = PadOp();
        if (pad)
          parts[k].push_back(
              {pad.getInput(), stage, pad.getLowAttr(), pad.getHighAttr()});
        else
          parts[k].push_back({v, stage, {}, {}});
      }
      any = true;
    }
    if (!any)
      return backward;

    // The new loop: the carries kept, then one per stage part.
    OpBuilder b(backward);
    Location loc = backward.getLoc();
    SmallVector<Value> carries;
    for (auto [k, init] : llvm::enumerate(backward.getCarries()))
      if (parts[k].empty())
        carries.push_back(init);
    size_t kept = carries.size();
    for (auto &list : parts)
      for (Part &part : list)
        carries.push_back(zerosLike(b, loc, part.value.getType()));
    IRRewriter rewriter(b);
    RepeatOp::Parts loopParts = backward.getParts();
    loopParts.carries = carries;
    RepeatOp loop = backward.rebuild(rewriter, loopParts);

    // In the body: each part's accumulation on its stage.
    OpBuilder in(yield);
    SmallVector<Value> nexts;
    for (auto [k, next] : llvm::enumerate(yield.getCarries()))
      if (parts[k].empty())
        nexts.push_back(next);
    size_t at = 1 + numCarries;
    for (auto &list : parts)
      for (Part &part : list) {
        BlockArgument acc =
            body.insertArgument(at++, part.value.getType(), loc);
        auto sum = AddOp::create(in, loc, acc, part.value);
        placeOnStage(sum, part.stage, ranks);
        nexts.push_back(sum);
      }
    SmallVector<Value> stackedYields(yield.getStacked());
    YieldOp::create(in, yield.getLoc(), nexts, stackedYields);
    // The old accumulations go, then their carries' arguments.
    SmallVector<Operation *> dead;
    for (auto [k, next] : llvm::enumerate(yield.getCarries()))
      if (!parts[k].empty())
        dead.push_back(next.getDefiningOp());
    yield.erase();
    for (Operation *op : dead) {
      SmallVector<Operation *> work{op};
      while (!work.empty()) {
        Operation *o = work.pop_back_val();
        if (!o->use_empty())
          continue;
        SmallVector<Operation *> operands;
        for (Value v : o->getOperands())
          if (Operation *d = v.getDefiningOp();
              d && d->getBlock() == &body && isa<AddOp, PadOp>(d) &&
              !llvm::any_of(parts, [&](auto &list) {
                return llvm::any_of(list, [&](Part &p) {
                  return p.value == d->getResult(0);
                });
              }))
            operands.push_back(d);
        o->erase();
        llvm::append_range(work, operands);
      }
    }
    for (size_t k = numCarries; k-- > 0;)
      if (!parts[k].empty())
        body.eraseArgument(1 + k);

    // After the loop: each gradient is its initial value (unless zero)
    // plus its stages' parts, padded to the whole parameter.
    OpBuilder after(loop);
    after.setInsertionPointAfter(loop);
    size_t keptIndex = 0, partIndex = kept;
    llvm::SetVector<Operation *> zeros;
    for (auto [k, result] : llvm::enumerate(backward.getCarryResults())) {
      if (parts[k].empty()) {
        result.replaceAllUsesWith(loop.getCarryResults()[keptIndex++]);
        continue;
      }
      Value init = backward.getCarries()[k];
      Value total = init;
      if (matchPattern(init, m_AnyZeroFloat())) {
        zeros.insert(init.getDefiningOp());
        total = Value();
      }
      for (Part &part : parts[k]) {
        Value acc = loop.getCarryResults()[partIndex++];
        if (part.low)
          acc = PadOp::create(after, loc, acc, part.low, part.high);
        total = total ? Value(AddOp::create(after, loc, total, acc)) : acc;
      }
      result.replaceAllUsesWith(total);
    }
    for (auto [old, now] :
         llvm::zip(backward.getStackedResults(), loop.getStackedResults()))
      old.replaceAllUsesWith(now);
    backward.erase();
    for (Operation *zero : zeros)
      if (zero->use_empty())
        zero->erase();
    return loop;
  }
};

struct DistPipelineFoldAccumulationsPass
    : public loom::impl::DistPipelineFoldAccumulationsBase<
          DistPipelineFoldAccumulationsPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      if (!pipelineOf(model))
        continue;
      SmallVector<RepeatOp> loops;
      for (RepeatOp forward : model.getBody().front().getOps<RepeatOp>())
        if (RepeatOp backward = backwardOf(forward)) {
          loops.push_back(backward);
          if (RepeatOp weight = dist::weightPartOf(backward))
            loops.push_back(weight);
        }
      for (RepeatOp loop : loops)
        foldAccumulations(loop);
    }
  }
};

struct DistPipelineTransfersPass
    : public loom::impl::DistPipelineTransfersBase<DistPipelineTransfersPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      int64_t ranks = pipelineOf(model);
      if (!ranks)
        continue;
      FailureOr<StringAttr> axis = pipelineAxis(model);
      if (failed(axis))
        return signalPassFailure();
      Transfers t(model, ranks, *axis);
      if (failed(t.transferAll()))
        return signalPassFailure();
    }
  }
};

} // namespace

FailureOr<StringAttr> loom::pipelineAxis(ModelOp model) {
  dist::MeshAttr mesh = dist::MeshAttr::lookup(model);
  if (StringAttr axis = mesh ? mesh.getAxis(dist::AxisRole::Pipeline)
                             : StringAttr())
    return axis;
  return model.emitOpError("has a pipeline but no mesh with a pipeline axis "
                           "(set one with dist-mesh)");
}

int64_t loom::pipelineOf(ModelOp model) {
  auto record = dist::attrs(model).getPipelineAttrHelper().getAttr(model);
  return record ? record.getRanks() : 0;
}

void loom::reduceOverStages(ModelOp model, int64_t ranks, StringAttr axis) {
  Transfers(model, ranks, axis).reduce();
}
