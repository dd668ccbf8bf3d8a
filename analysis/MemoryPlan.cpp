//===- MemoryPlan.cpp - liveness-based placement of values in an arena ----===//

#include "analysis/MemoryPlan.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/dist/PipelineLoops.h"
#include "dialects/loom/LoomDialect.h"
#include "dialects/train/Adjoint.h"
#include "dialects/train/TrainDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

#include <algorithm>

using namespace mlir;
using namespace loom::analysis;
using namespace loom::train;

static constexpr int64_t kAlignment = 64;

static int64_t alignUp(int64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

SmallVector<Operation *, 3> loom::analysis::scheduledLoops(ModelOp model) {
  SmallVector<Operation *, 3> loops;
  if (loom::dist::ScheduleOp schedule = loom::dist::scheduleOf(model))
    for (RepeatOp loop : loom::dist::scheduledLoops(schedule))
      loops.push_back(loop);
  return loops;
}

int64_t loom::analysis::scheduleSlots(Value stackedResult) {
  auto repeat = dyn_cast_or_null<RepeatOp>(stackedResult.getDefiningOp());
  if (!repeat)
    return 0;
  auto model = dyn_cast<ModelOp>(repeat->getParentOp());
  if (!model)
    return 0;
  loom::dist::ScheduleOp schedule = loom::dist::scheduleOf(model);
  int64_t slots = schedule ? schedule.getSlots() : 0;
  auto result = cast<OpResult>(stackedResult);
  size_t carries = repeat.getCarryResults().size();
  if (slots <= 0 || slots >= int64_t(repeat.getCount()) ||
      result.getResultNumber() < carries)
    return 0;
  // Whether `repeat` is a loop the schedule interleaves that stacks for a
  // later one (the forward, or a split backward's input part).
  SmallVector<Operation *, 3> loops = scheduledLoops(model);
  if (loops.empty() || repeat == loops.back() ||
      !llvm::is_contained(loops, repeat.getOperation()))
    return 0;
  unsigned i = result.getResultNumber() - carries;
  Value slice = repeat.getYield().getStacked()[i];
  if (!slice.getDefiningOp() || !dist::stageOf(slice.getDefiningOp()))
    return 0;
  for (Operation *user : stackedResult.getUsers())
    if (!llvm::is_contained(loops, user) || user == repeat.getOperation())
      return 0;
  return slots;
}

int64_t loom::analysis::plannedBytes(Value v, bool scheduled) {
  int64_t bytes = tensorBytes(v.getType());
  if (int64_t slots = scheduled ? scheduleSlots(v) : 0)
    return bytes / cast<RepeatOp>(v.getDefiningOp()).getCount() * slots;
  return bytes;
}

const DenseSet<Operation *> *
loom::analysis::nestedOps(const DenseSet<Operation *> *ops, Block &block) {
  if (!ops || llvm::none_of(block, [&](Operation &op) {
        return ops->contains(&op);
      }))
    return nullptr;
  return ops;
}

std::optional<double> loom::analysis::carrySeed(Value v) {
  auto constant = v.getDefiningOp<arith::ConstantOp>();
  auto dense = constant ? dyn_cast<DenseFPElementsAttr>(constant.getValue())
                        : DenseFPElementsAttr();
  if (!dense || !dense.isSplat() || v.use_empty())
    return std::nullopt;
  for (OpOperand &use : v.getUses()) {
    auto repeat = dyn_cast<RepeatOp>(use.getOwner());
    if (!repeat || use.getOperandNumber() >= repeat.getCarries().size())
      return std::nullopt;
  }
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// The links of the chain of adds that ends in `last` and starts from
/// `arg`, first link first: each link adds one term to the previous link's
/// value (the first to `arg`'s), which nothing else reads. Empty when there
/// is no such chain.
static SmallVector<AddOp> chainFrom(AddOp last, BlockArgument arg) {
  for (Value operand : {last.getLhs(), last.getRhs()}) {
    if (operand.getType() != last.getType())
      continue;
    if (operand == arg)
      return {last};
    auto prev = operand.getDefiningOp<AddOp>();
    if (!prev || prev->getBlock() != last->getBlock() || !operand.hasOneUse())
      continue;
    SmallVector<AddOp> chain = chainFrom(prev, arg);
    if (!chain.empty()) {
      chain.push_back(last);
      return chain;
    }
  }
  return {};
}

/// The carry of `repeat`'s body whose next value `v` is, with the chain of
/// adds from it to `v` (see accumulatesInto).
static std::pair<BlockArgument, SmallVector<AddOp>>
accumulationChain(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  auto repeat = add ? dyn_cast<RepeatOp>(add->getParentOp()) : RepeatOp();
  if (!repeat)
    return {};
  // The chain's last link: each link's one reader is the next.
  AddOp last = add;
  while (true) {
    Value r = last.getResult();
    if (!r.hasOneUse())
      return {};
    Operation *user = *r.getUsers().begin();
    if (isa<YieldOp>(user))
      break;
    auto next = dyn_cast<AddOp>(user);
    if (!next || next->getBlock() != add->getBlock())
      return {};
    last = next;
  }
  YieldOp yield = repeat.getYield();
  Value lastValue = last.getResult();
  if (llvm::count(yield->getOperands(), lastValue) != 1)
    return {};
  auto carries = yield.getCarries();
  auto at = llvm::find(carries, lastValue);
  if (at == carries.end())
    return {};
  Block &body = repeat.getBodyBlock();
  BlockArgument arg = body.getArgument(1 + (at - carries.begin()));
  if (arg.getType() != lastValue.getType())
    return {};
  SmallVector<AddOp> chain = chainFrom(last, arg);
  if (chain.empty() || !llvm::is_contained(chain, add))
    return {};
  // The first link reads the carry last.
  Operation *first = chain.front();
  if (llvm::all_of(arg.getUsers(), [&](Operation *user) {
        Operation *in = body.findAncestorOpInBlock(*user);
        return in && (in == first || in->isBeforeInBlock(first));
      }))
    return {arg, chain};
  return {};
}

BlockArgument loom::analysis::accumulatesInto(Value v) {
  return accumulationChain(v).first;
}

BlockArgument loom::analysis::addsIntoSlice(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  auto repeat = add ? dyn_cast<RepeatOp>(add->getParentOp()) : RepeatOp();
  if (!repeat || !v.hasOneUse() || !isa<YieldOp>(*v.getUsers().begin()))
    return {};
  YieldOp yield = repeat.getYield();
  for (auto [slice, result] :
       llvm::zip(yield.getStacked(), repeat.getStackedResults()))
    if (slice == v && updatedInPlace(result) && !scheduleSlots(result))
      for (Value operand : {add.getLhs(), add.getRhs()})
        if (auto arg = dyn_cast<BlockArgument>(operand);
            arg && arg.getOwner() == &repeat.getBodyBlock() &&
            arg.getArgNumber() > repeat.getCarries().size() && arg.hasOneUse())
          return arg;
  return {};
}

/// The add that `r`, a result its kernel can accumulate, is added by into
/// an accumulator nothing reads between the kernel and the add.
static AddOp accumulatingAdd(OpResult r) {
  Operation *kernel = r.getOwner();
  if (!r.hasOneUse())
    return {};
  auto add = dyn_cast<AddOp>(*r.getUsers().begin());
  if (!add || add->getBlock() != kernel->getBlock() ||
      add.getType() != r.getType() || add.getLhs() == add.getRhs())
    return {};
  Block &body = *add->getBlock();
  // The accumulator the add writes into, and the op that reads it first
  // after the kernel (the add, or the chain's first link).
  BlockArgument into;
  Operation *firstReader = add;
  if (auto [carry, chain] = accumulationChain(add.getResult()); carry) {
    into = carry;
    firstReader = chain.front();
  } else {
    into = addsIntoSlice(add.getResult());
  }
  if (!into)
    return {};
  // Every other reader of the accumulator runs before the kernel writes it.
  if (!llvm::all_of(into.getUsers(), [&](Operation *user) {
        Operation *in = body.findAncestorOpInBlock(*user);
        return in && (in == firstReader || in->isBeforeInBlock(kernel));
      }))
    return {};
  return add;
}

OpResult loom::analysis::yieldedIntoResult(Value v) {
  auto result = dyn_cast<OpResult>(v);
  auto repeat =
      result ? dyn_cast<RepeatOp>(result.getOwner()->getParentOp()) : RepeatOp();
  // A kernel's result (a collective's, a reshape's or a wait's buffer is
  // its operand's or the communicator's).
  if (!repeat || !v.hasOneUse() || !isa<YieldOp>(*v.getUsers().begin()) ||
      !isa<KernelOpInterface>(result.getOwner()) || addsIntoSlice(v))
    return {};
  YieldOp yield = repeat.getYield();
  for (auto [i, slice] : llvm::enumerate(yield.getStacked()))
    if (slice == v && i < repeat.getNumUserStacked())
      return cast<OpResult>(repeat.getStackedResults()[i]);
  return {};
}

bool loom::analysis::writtenIntoAccumulator(Value v) {
  return accumulatesInto(v) || updatedInPlace(v) || addsIntoSlice(v) ||
         accumulatedBy(v);
}

AddOp loom::analysis::accumulatedBy(Value r) {
  auto result = dyn_cast<OpResult>(r);
  auto kernel =
      result ? dyn_cast<KernelOpInterface>(result.getOwner()) : nullptr;
  if (!kernel)
    return {};
  SmallVector<unsigned> accumulating = kernel.getAccumulatingResults();
  if (!llvm::is_contained(accumulating, result.getResultNumber()))
    return {};
  // The accumulating entry adds to all of them, or it is not called.
  for (unsigned n : accumulating)
    if (!accumulatingAdd(kernel->getResult(n)))
      return {};
  return accumulatingAdd(result);
}

Value loom::analysis::updatedInPlace(Value v) {
  auto result = dyn_cast<OpResult>(v);
  auto repeat = result ? dyn_cast<RepeatOp>(result.getOwner()) : RepeatOp();
  if (!repeat)
    return {};
  size_t numCarries = repeat.getCarries().size();
  if (result.getResultNumber() < numCarries)
    return {};
  Value yielded =
      repeat.getYield().getStacked()[result.getResultNumber() - numCarries];
  auto add = yielded.getDefiningOp<AddOp>();
  if (!add || !yielded.hasOneUse())
    return {};
  Block &body = repeat.getBodyBlock();
  for (Value operand : {add.getLhs(), add.getRhs()}) {
    auto slice = dyn_cast<BlockArgument>(operand);
    size_t first = 1 + numCarries;
    if (!slice || slice.getOwner() != &body ||
        slice.getArgNumber() < first ||
        slice.getArgNumber() >= first + repeat.getStacked().size() ||
        !slice.hasOneUse())
      continue;
    Value whole = repeat.getStacked()[slice.getArgNumber() - first];
    // The accumulator: a carry of the enclosing loop that this loop reads
    // last and once.
    auto carry = dyn_cast<BlockArgument>(whole);
    auto outer = carry ? dyn_cast<RepeatOp>(carry.getOwner()->getParentOp())
                       : RepeatOp();
    if (!outer || carry.getArgNumber() == 0 ||
        carry.getArgNumber() > outer.getCarries().size() ||
        whole.getType() != v.getType() ||
        llvm::count(repeat->getOperands(), whole) != 1)
      continue;
    if (llvm::all_of(carry.getUsers(), [&](Operation *user) {
          return user == repeat.getOperation() ||
                 user->isBeforeInBlock(repeat.getOperation());
        }))
      return whole;
  }
  return {};
}

/// Whether `r` is a residual a loop saves for its backward (see
/// train.repeat's `residuals`) that no op of `ops` reads.
static bool isUnreadResidual(Value r, const DenseSet<Operation *> &ops) {
  auto result = cast<OpResult>(r);
  auto repeat = cast<RepeatOp>(result.getOwner());
  size_t first = repeat.getCarries().size() + repeat.getNumUserStacked();
  unsigned n = result.getResultNumber();
  if (!repeat.keepsResiduals() || n < first ||
      n >= first + repeat.getNumResiduals())
    return false;
  Block *block = repeat->getBlock();
  return llvm::none_of(r.getUsers(), [&](Operation *user) {
    Operation *anc = block->findAncestorOpInBlock(*user);
    return anc && ops.contains(anc);
  });
}

namespace {
/// A buffer to place: its size and the op indices where it is live.
struct Interval {
  int64_t size = 0, first = 0, last = 0, offset = 0;
};

/// Greedy placement, largest first, each at the lowest offset free over its
/// lifetime (the arena planner of TFLite and of XLA's heap simulator).
int64_t place(std::vector<Interval> &intervals) {
  std::vector<size_t> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return intervals[a].size > intervals[b].size;
  });
  std::vector<size_t> placed;
  int64_t peak = 0;
  for (size_t i : order) {
    Interval &cur = intervals[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const Interval &o = intervals[j];
      if (o.first <= cur.last && cur.first <= o.last)
        busy.push_back({o.offset, o.offset + o.size});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + cur.size <= begin)
        break;
      offset = std::max(offset, alignUp(end));
    }
    cur.offset = offset;
    peak = std::max(peak, offset + cur.size);
    placed.push_back(i);
  }
  return peak;
}

struct Planner {
  const DenseMap<Value, int64_t> &persistent;
  PlanFaults faults;
  MemoryPlan plan;
  llvm::function_ref<bool(Operation *)> runsHere;
  /// The loops a schedule's driver runs: it copies what a stage's op
  /// yields in that stage's actions only, so another stage's value that
  /// only their yield reads needs no bytes (no zeros) here.
  DenseSet<Operation *> driven;

  bool here(Operation *op) { return !runsHere || runsHere(op); }

  /// Whether an op that runs here reads `v`, counting a loop's use of it
  /// as a carry's initial value only where that carry is this rank's.
  bool neededHere(Value v) {
    return llvm::any_of(v.getUses(), [&](OpOperand &use) {
      Operation *user = use.getOwner();
      if (auto repeat = dyn_cast<RepeatOp>(user);
          repeat && use.getOperandNumber() < repeat.getCarries().size())
        return here(repeat) &&
               heldHere(repeat.getCarryResults()[use.getOperandNumber()]);
      for (Operation *op = user; op; op = op->getParentOp())
        if (!here(op))
          return false;
      return true;
    });
  }

  /// Whether this rank needs result `r` of a loop that runs here: its
  /// body's op that makes it runs here, or an op that runs here reads it.
  bool heldHere(OpResult r) {
    auto repeat = cast<RepeatOp>(r.getOwner());
    size_t carries = repeat.getCarries().size();
    unsigned n = r.getResultNumber();
    YieldOp yield = repeat.getYield();
    Value inner = n < carries ? yield.getCarries()[n]
                              : yield.getStacked()[n - carries];
    Operation *maker = inner.getDefiningOp();
    if (!maker || here(maker))
      return true;
    return llvm::any_of(r.getUses(),
                        [&](OpOperand &use) { return readHere(use); });
  }

  /// Whether `use` reads its value here: its op runs here and, for a
  /// loop's stacked slice or invariant, an op of the body that runs here
  /// reads it (a stage's saved values are read by that stage's backward).
  bool readHere(OpOperand &use) {
    Operation *user = use.getOwner();
    for (Operation *op = user; op; op = op->getParentOp())
      if (!here(op))
        return false;
    auto repeat = dyn_cast<RepeatOp>(user);
    if (!repeat || use.getOperandNumber() < repeat.getCarries().size())
      return true;
    BlockArgument arg =
        repeat.getBodyBlock().getArgument(1 + use.getOperandNumber());
    return llvm::any_of(arg.getUses(),
                        [&](OpOperand &inner) { return readHere(inner); });
  }

  /// Plans `block` with offsets relative to 0; returns its peak. Nested
  /// blocks are planned first and shifted once their base is known.
  int64_t planBlock(Block &block, const DenseSet<Operation *> *only,
                    ArrayRef<Operation *> together = {}) {
    DenseMap<Operation *, int64_t> index;
    int64_t n = 0;
    for (Operation &op : block)
      if (!only || only->contains(&op) || op.hasTrait<OpTrait::IsTerminator>())
        index[&op] = n++;
    // Loops a schedule runs interleaved (their iterations in any order)
    // are one span: what they make and read lives across all of them.
    int64_t spanBegin = n, spanEnd = -1;
    DenseSet<Operation *> spanned;
    for (Operation *op : together)
      if (auto it = index.find(op); it != index.end()) {
        spanned.insert(op);
        spanBegin = std::min(spanBegin, it->second);
        spanEnd = std::max(spanEnd, it->second);
      }

    // Alias roots: a reshape shares its input's buffer.
    DenseMap<Value, Value> root;
    auto rootOf = [&](Value v) {
      while (root.count(v))
        v = root[v];
      return v;
    };
    std::vector<Interval> intervals;
    DenseMap<Value, size_t> intervalOf;
    // Where every op of the block runs here, one after another (no
    // pipeline's ranks or actions, no evaluation's slice), a slice the
    // body yields is made in its loop's result (analysis::yieldedIntoResult).
    bool inPlaceYields = !runsHere && !only;
    SmallVector<std::pair<size_t, SmallVector<Value>>> nestedShifts;
    size_t scratch = SIZE_MAX;

    auto lastUse = [&](Value v, int64_t def) {
      int64_t last = def;
      for (Operation *user : v.getUsers()) {
        Operation *anc = block.findAncestorOpInBlock(*user);
        auto it = anc && here(anc) ? index.find(anc) : index.end();
        if (it != index.end())
          last = std::max(last, spanned.contains(anc) ? spanEnd : it->second);
      }
      return last;
    };

    for (Operation &op : block) {
      auto it = index.find(&op);
      if (it == index.end() || op.hasTrait<OpTrait::IsTerminator>())
        continue;
      bool inSpan = spanned.contains(&op);
      int64_t at = inSpan ? spanBegin : it->second;
      // Another stage's op runs nothing here; what it makes gets bytes only
      // where something that runs here reads it (zeros).
      if (!here(&op)) {
        for (Value r : op.getResults()) {
          if (!isa<RankedTensorType>(r.getType()) || persistent.count(r))
            continue;
          // What it writes into an accumulator is that accumulator's (the
          // other stage's gradients, not this rank's zeros).
          if (writtenIntoAccumulator(r))
            continue;
          // A loop reads it here only where an op of its body that runs
          // here does (another stage's bf16 weight copy, an invariant of
          // the micro-batch loops, is that stage's alone).
          bool drivenYield = driven.contains(block.getParentOp());
          if (!llvm::any_of(r.getUses(), [&](OpOperand &use) {
                Operation *anc = block.findAncestorOpInBlock(*use.getOwner());
                return anc && here(anc) &&
                       !(drivenYield && isa<YieldOp>(anc)) && readHere(use);
              }))
            continue;
          int64_t last = lastUse(r, at);
          intervals.push_back(
              {alignUp(plannedBytes(r, plan.scheduled)), at, last, 0});
          intervalOf[r] = intervals.size() - 1;
        }
        continue;
      }
      // A reshape and the wait of an asynchronous collective are their
      // operand's buffer under another name.
      if (isa<ReshapeOp, loom::dist::WaitOp>(op)) {
        bool release =
            isa<loom::dist::WaitOp>(op) && faults.releaseInFlightAtStart;
        for (auto [result, operand] :
             llvm::zip(op.getResults(), op.getOperands())) {
          Value src = rootOf(operand);
          root[result] = src;
          if (auto p = intervalOf.find(src);
              p != intervalOf.end() && !release)
            intervals[p->second].last =
                std::max(intervals[p->second].last, lastUse(result, at));
        }
        continue;
      }
      // A pointwise op writes its result over an operand of the same type
      // that nothing reads after it (its kernel reads element i before it
      // writes it): a gradient scaled by clipping's factor, an activation
      // function's input.
      if (op.hasTrait<PointwiseKernel>() && op.getNumResults() == 1 &&
          !inSpan && !persistent.count(op.getResult(0)) &&
          !(inPlaceYields && yieldedIntoResult(op.getResult(0)))) {
        Value result = op.getResult(0);
        auto over = llvm::find_if(op.getOperands(), [&](Value operand) {
          auto p = intervalOf.find(rootOf(operand));
          return operand.getType() == result.getType() &&
                 p != intervalOf.end() && intervals[p->second].last == at;
        });
        if (over != op.operand_end()) {
          Value src = rootOf(*over);
          root[result] = src;
          Interval &interval = intervals[intervalOf[src]];
          interval.last = std::max(interval.last, lastUse(result, at));
          continue;
        }
      }
      // An all-reduce reduces its result in place (the runtime copies the
      // operand there first), so a result takes the bytes of an operand
      // that nothing reads after it: a gradient reduced over dp is not
      // held twice. (An exchange between two members posts its operand,
      // which must outlive the receive.)
      // A reduction deferred past its loop is made in the loop's result
      // (its slice): no bytes here.
      if (loom::dist::isDeferredStart(&op))
        continue;
      if (isa<loom::dist::AllReduceStartOp, loom::dist::AllReduceOp>(op) &&
          !inSpan && !faults.releaseInFlightAtStart) {
        auto reduce = dyn_cast<loom::dist::AllReduceOp>(op);
        if (!reduce || !reduce.getMembers())
          for (auto [result, operand] :
               llvm::zip(op.getResults(), op.getOperands())) {
            auto p = intervalOf.find(rootOf(operand));
            if (operand.getType() != result.getType() ||
                persistent.count(result) || p == intervalOf.end() ||
                intervals[p->second].last != at ||
                llvm::count(op.getOperands(), operand) != 1)
              continue;
            root[result] = rootOf(operand);
            intervals[p->second].last =
                std::max(intervals[p->second].last, lastUse(result, at));
          }
      }
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        int64_t inner = alignUp(planBlock(repeat.getBodyBlock(),
                                          nestedOps(only, repeat.getBodyBlock())));
        // The spanned loops' iterations run one at a time (an action), so
        // their bodies share one scratch interval over the span.
        if (!inSpan) {
          intervals.push_back({inner, at, at, 0});
        } else if (scratch == SIZE_MAX) {
          intervals.push_back({inner, spanBegin, spanEnd, 0});
          scratch = intervals.size() - 1;
        } else {
          intervals[scratch].size = std::max(intervals[scratch].size, inner);
        }
        SmallVector<Value> innerValues;
        repeat.getBody().walk([&](Operation *nested) {
          for (Value r : nested->getResults())
            if (plan.placements.count(r) &&
                plan.placements[r].kind == Placement::Arena)
              innerValues.push_back(r);
        });
        nestedShifts.push_back(
            {inSpan ? scratch : intervals.size() - 1, innerValues});
      }
      for (Value r : op.getResults()) {
        if (!isa<RankedTensorType>(r.getType()) || persistent.count(r) ||
            root.count(r))
          continue;
        // A loop's result that another stage's op makes and nothing here
        // reads (that stage's gradient accumulator, its saved activations)
        // is not this rank's.
        if (runsHere && isa<RepeatOp>(op) && !heldHere(cast<OpResult>(r)))
          continue;
        // Nor a stacked result that nothing reads (the saved carries of a
        // loop's prefetched layer: dist-prefetch).
        if (auto repeat = dyn_cast<RepeatOp>(op);
            repeat && r.use_empty() &&
            cast<OpResult>(r).getResultNumber() >= repeat.getCarries().size())
          continue;
        // Nor a residual that nothing in this function reads (the
        // evaluation runs the forward alone).
        if (only && isa<RepeatOp>(op) && isUnreadResidual(r, *only))
          continue;
        // Nor a loop's accumulation written into its carry (or a slice of
        // it), nor a contribution its kernel adds there itself.
        if (writtenIntoAccumulator(r))
          continue;
        // Nor an iteration's slice written into the loop's result.
        if (inPlaceYields && yieldedIntoResult(r))
          continue;
        // Nor a constant that only starts loops' carries: they start
        // filled with it.
        if (isa<arith::ConstantOp>(op) && carrySeed(r))
          continue;
        // Nor a constant that only starts such a result.
        if (runsHere && isa<arith::ConstantOp>(op) && !neededHere(r))
          continue;
        bool release = isa<loom::dist::AllReduceStartOp>(op) &&
                       faults.releaseInFlightAtStart;
        // A spanned loop writes its results (its carries, its stacked
        // slices) across the whole span, used or not.
        int64_t last = release ? at : lastUse(r, at);
        intervals.push_back({alignUp(plannedBytes(r, plan.scheduled)), at,
                             inSpan ? std::max(last, spanEnd) : last, 0});
        intervalOf[r] = intervals.size() - 1;
      }
    }
    int64_t peak = place(intervals);
    for (auto [value, i] : intervalOf)
      plan.placements[value] = {Placement::Arena, intervals[i].offset};
    for (auto &[i, values] : nestedShifts)
      for (Value v : values)
        plan.placements[v].where += intervals[i].offset;
    for (auto [alias, src] : root) {
      Value r = rootOf(src);
      if (auto p = persistent.find(r); p != persistent.end())
        plan.placements[alias] = {Placement::Persistent, p->second};
      else if (auto it = plan.placements.find(r); it != plan.placements.end()) {
        // A copy: inserting `alias` may grow the map under a reference.
        Placement placement = it->second;
        plan.placements[alias] = placement;
      }
    }
    return peak;
  }
};
} // namespace

bool loom::analysis::runsAt(Operation *op, StringAttr axis,
                            int64_t coordinate) {
  auto on = loom::dist::attrs(op).getOnAttrHelper().getAttr(op);
  return !on || !axis || loom::dist::onAdmits(on.get(axis), coordinate);
}

MemoryPlan loom::analysis::planMemory(
    Block &block, const DenseSet<Operation *> &ops,
    const DenseMap<Value, int64_t> &persistent, PlanFaults faults,
    llvm::function_ref<bool(Operation *)> runsHere) {
  Planner planner{persistent, faults, MemoryPlan(), runsHere};
  for (auto [v, t] : persistent)
    planner.plan.placements[v] = {Placement::Persistent, t};
  // A pipeline schedule's micro-batch loops (the forward, its backward
  // and the backward's weight part) run their iterations interleaved.
  SmallVector<Operation *, 3> together;
  if (auto model = dyn_cast<ModelOp>(block.getParentOp());
      model && runsSchedule(model, ops))
    together = scheduledLoops(model);
  planner.plan.scheduled = !together.empty();
  planner.driven.insert(together.begin(), together.end());
  planner.plan.peakBytes = planner.planBlock(block, &ops, together);
  return std::move(planner.plan);
}

bool loom::analysis::runsSchedule(ModelOp model,
                                  const DenseSet<Operation *> &ops) {
  // Only a function with the backward runs the schedule.
  SmallVector<Operation *, 3> loops = scheduledLoops(model);
  return !loops.empty() &&
         llvm::all_of(loops, [&](Operation *op) { return ops.contains(op); });
}

bool loom::analysis::runsIn(Operation *op, const DenseSet<Operation *> &ops) {
  for (; op && !isa<ModelOp>(op); op = op->getParentOp()) {
    const DenseSet<Operation *> *only = nestedOps(&ops, *op->getBlock());
    // The model's own ops are named (the step names nothing nested).
    if (isa<ModelOp>(op->getParentOp()) ? !ops.contains(op)
                                        : only && !only->contains(op))
      return false;
  }
  return true;
}

/// The mesh axis of the pipeline and its size (null and 1 without one).
static std::pair<StringAttr, int64_t> pipelineOf(ModelOp model) {
  loom::dist::MeshAttr mesh =
      loom::dist::attrs(model).getMeshAttrHelper().getAttr(model);
  StringAttr axis =
      mesh ? mesh.getAxis(loom::dist::AxisRole::Pipeline) : StringAttr();
  return {axis, axis ? mesh.getSize(loom::dist::AxisRole::Pipeline) : 1};
}

FailureOr<SmallVector<MemoryPlan>>
loom::analysis::planFunction(ModelOp model, const DenseSet<Operation *> &ops,
                             const DenseMap<Value, int64_t> &persistent,
                             PlanFaults faults) {
  Block &body = model.getBody().front();
  auto [axis, pp] = pipelineOf(model);
  SmallVector<MemoryPlan> plans;
  for (int64_t c = 0; c < pp; ++c) {
    plans.push_back(pp == 1 ? planMemory(body, ops, persistent, faults)
                            : planMemory(body, ops, persistent, faults,
                                         [&, axis = axis](Operation *op) {
                                           return runsAt(op, axis, c);
                                         }));
    if (failed(verifyInFlightBuffers(body, plans.back())))
      return failure();
  }
  return plans;
}

void loom::analysis::recordPlans(ModelOp model, StringRef name,
                                 const DenseSet<Operation *> &ops,
                                 ArrayRef<MemoryPlan> plans) {
  Builder b(model.getContext());
  loom::codegen::LoomDialect &attrs = loom::codegen::planAttrs(model);
  // Sets `name` in the dictionary attribute `helper` keeps on `op`.
  auto set = [&](auto helper, Operation *op, Attribute value) {
    NamedAttrList entries;
    if (DictionaryAttr old = helper.getAttr(op))
      entries.append(old.getValue());
    entries.set(name, value);
    helper.setAttr(op, entries.getDictionary(model.getContext()));
  };
  model.getBody().walk([&](Operation *op) {
    if (op->getNumResults() == 0 || !runsIn(op, ops))
      return;
    SmallVector<Attribute> ranks;
    for (const MemoryPlan &plan : plans) {
      SmallVector<int64_t> offsets;
      for (Value r : op->getResults()) {
        auto it = plan.placements.find(r);
        offsets.push_back(it != plan.placements.end() &&
                                  it->second.kind == Placement::Arena
                              ? it->second.where
                              : -1);
      }
      ranks.push_back(b.getDenseI64ArrayAttr(offsets));
    }
    set(attrs.getOffsetsAttrHelper(), op, b.getArrayAttr(ranks));
  });
  SmallVector<int64_t> peaks;
  for (const MemoryPlan &plan : plans)
    peaks.push_back(plan.peakBytes);
  set(attrs.getPeakBytesAttrHelper(), model, b.getDenseI64ArrayAttr(peaks));
}

FailureOr<SmallVector<MemoryPlan>>
loom::analysis::recordedPlans(ModelOp model, StringRef name,
                              const DenseSet<Operation *> &ops,
                              const DenseMap<Value, int64_t> &persistent) {
  loom::codegen::LoomDialect &attrs = loom::codegen::planAttrs(model);
  DictionaryAttr peaks = attrs.getPeakBytesAttrHelper().getAttr(model);
  auto perRank = peaks ? dyn_cast_or_null<DenseI64ArrayAttr>(peaks.get(name))
                       : DenseI64ArrayAttr();
  if (!perRank)
    return model.emitOpError("has no memory plan for its '")
           << name << "' function: run loom-memory-plan first";
  SmallVector<MemoryPlan> plans(perRank.size());
  bool scheduled = runsSchedule(model, ops);
  for (auto [plan, peak] : llvm::zip(plans, perRank.asArrayRef())) {
    plan.peakBytes = peak;
    plan.scheduled = scheduled;
    for (auto [v, t] : persistent)
      plan.placements[v] = {Placement::Persistent, t};
  }
  WalkResult walked = model.getBody().walk([&](Operation *op) {
    if (op->getNumResults() == 0 || !runsIn(op, ops))
      return WalkResult::advance();
    DictionaryAttr offsets = attrs.getOffsetsAttrHelper().getAttr(op);
    auto ranks =
        offsets ? dyn_cast_or_null<ArrayAttr>(offsets.get(name)) : ArrayAttr();
    if (!ranks || ranks.size() != plans.size()) {
      op->emitOpError("has no memory plan for the model's '")
          << name << "' function (a pass changed the program after "
          << "loom-memory-plan)";
      return WalkResult::interrupt();
    }
    for (auto [plan, rank] : llvm::zip(plans, ranks))
      for (auto [r, offset] : llvm::zip(
               op->getResults(), cast<DenseI64ArrayAttr>(rank).asArrayRef()))
        if (offset >= 0 && !persistent.count(r))
          plan.placements[r] = {Placement::Arena, offset};
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();
  return plans;
}

FailureOr<SmallVector<int64_t>>
loom::analysis::arenaPeaks(ModelOp model, StringRef name,
                           const DenseSet<Operation *> &ops,
                           const DenseMap<Value, int64_t> &persistent) {
  DictionaryAttr recorded =
      loom::codegen::planAttrs(model).getPeakBytesAttrHelper().getAttr(model);
  if (auto peaks = recorded
                       ? dyn_cast_or_null<DenseI64ArrayAttr>(recorded.get(name))
                       : DenseI64ArrayAttr())
    return SmallVector<int64_t>(peaks.asArrayRef());
  FailureOr<SmallVector<MemoryPlan>> plans =
      planFunction(model, ops, persistent);
  if (failed(plans))
    return failure();
  SmallVector<int64_t> peaks;
  for (const MemoryPlan &plan : *plans)
    peaks.push_back(plan.peakBytes);
  return peaks;
}

LogicalResult loom::analysis::verifyInFlightBuffers(Block &block,
                                                   const MemoryPlan &plan) {
  auto arenaBytes = [&](Value v) -> std::pair<int64_t, int64_t> {
    auto it = plan.placements.find(v);
    if (it == plan.placements.end() || it->second.kind != Placement::Arena)
      return {0, 0};
    return {it->second.where,
            it->second.where + plannedBytes(v, plan.scheduled)};
  };
  // The first op after `from` and before `until` (at any depth) that writes
  // arena bytes of one of `busy`, with that value. A reshape or a wait
  // writes nothing: its result is its operand's bytes under another name.
  auto firstWriter = [&](Operation *from, Operation *until,
                         ArrayRef<Value> busy) -> std::pair<Operation *, Value> {
    std::pair<Operation *, Value> found{nullptr, Value()};
    for (Operation *op = from->getNextNode(); op && op != until && !found.first;
         op = op->getNextNode())
      op->walk([&](Operation *writer) {
        if (isa<ReshapeOp, loom::dist::WaitOp>(writer))
          return WalkResult::advance();
        for (Value written : writer->getResults()) {
          auto [begin, end] = arenaBytes(written);
          for (Value b : busy) {
            auto [fb, fe] = arenaBytes(b);
            if (begin == end || fb == fe || end <= fb || fe <= begin)
              continue;
            found = {writer, b};
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
    return found;
  };
  auto bytesOf = [&](Value v) {
    auto [b, e] = arenaBytes(v);
    return "arena bytes [" + std::to_string(b) + ", " + std::to_string(e) +
           ")";
  };
  WalkResult result = block.walk([&](Operation *op) {
    // A start: what the collective reads or writes until its wait (its
    // results and, for a gather, which the stream reads, its operand).
    if (isa<loom::dist::AllReduceStartOp, loom::dist::AllGatherStartOp>(op)) {
      SmallVector<Value> inFlight(op->getResults());
      if (isa<loom::dist::AllGatherStartOp>(op))
        inFlight.push_back(op->getOperand(0));
      Operation *wait = nullptr;
      for (Operation *user : op->getUsers())
        if (isa<loom::dist::WaitOp>(user))
          wait = user;
      if (!wait || wait->getBlock() != op->getBlock())
        return WalkResult::advance();
      auto [writer, busy] = firstWriter(op, wait, inFlight);
      if (!writer)
        return WalkResult::advance();
      InFlightDiagnostic d = op->emitError("a buffer of this asynchronous "
                                           "collective (")
                             << bytesOf(busy) << ") is reused by '"
                             << writer->getName() << "' before its 'dist.wait'";
      d.attachNote(writer->getLoc())
          << "writes " << bytesOf(writer->getResult(0)) << " here";
      d.attachNote(wait->getLoc()) << "the wait";
      return WalkResult::interrupt();
    }
    // A wait of a reduction deferred past its loop: in flight in the loop's
    // results until the wait.
    auto wait = dyn_cast<loom::dist::WaitOp>(op);
    if (!wait || !wait.isDeferred())
      return WalkResult::advance();
    SmallVector<Value> inFlight(wait.getInputs());
    auto [writer, busy] = firstWriter(wait.getInputs()[0].getDefiningOp(),
                                      wait, inFlight);
    if (!writer)
      return WalkResult::advance();
    InFlightDiagnostic d = wait.emitError("the loop's results this wait "
                                          "completes (")
                           << bytesOf(busy) << ") are written by '"
                           << writer->getName() << "' before it";
    d.attachNote(writer->getLoc())
        << "writes " << bytesOf(writer->getResult(0)) << " here";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

int64_t loom::analysis::bf16ScratchBytes(loom::train::ModelOp model) {
  using namespace loom::train;
  int64_t most = 0;
  auto widened = [](Type t) -> int64_t {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor || tensor.getRank() == 0 ||
        !tensor.getElementType().isBF16())
      return 0;
    return (tensor.getNumElements() * 4 + 63) / 64 * 64;
  };
  model.walk([&](KernelOpInterface kernel) {
    // A convert narrows or widens itself, with no copy; the optimizer's
    // steps over whole gradients read bf16 in place (the runtime's native
    // sum_squares, updates, scaling by a scalar and sums of one shape,
    // Bf16Kernels.cpp).
    if (isa<ConvertOp, SumSquaresOp, SGDUpdateOp, AdamWUpdateOp>(kernel))
      return;
    auto shapeOf = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getShape();
    };
    if (auto add = dyn_cast<AddOp>(kernel.getOperation());
        add && !shapeOf(add).empty() && shapeOf(add.getLhs()) == shapeOf(add) &&
        shapeOf(add.getRhs()) == shapeOf(add))
      return;
    if (auto mul = dyn_cast<MulOp>(kernel.getOperation());
        mul && cast<RankedTensorType>(mul.getRhs().getType()).getRank() == 0 &&
        cast<RankedTensorType>(mul.getType()).getShape() ==
            cast<RankedTensorType>(mul.getLhs().getType()).getShape())
      return;
    SmallVector<Value> results, operands;
    SmallVector<Type> resultTypes, operandTypes;
    kernel.getKernelResults(results, resultTypes);
    kernel.getKernelOperands(operands, operandTypes);
    int64_t out = 0;
    for (Type t : resultTypes)
      out += widened(t);
    if (kernel.isKernelCalledPerOperand()) {
      for (Type t : operandTypes)
        most = std::max(most, out + widened(t));
      return;
    }
    for (Type t : operandTypes)
      out += widened(t);
    most = std::max(most, out);
  });
  return most;
}
