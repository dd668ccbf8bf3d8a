//===- EmitLoops.cpp - loom-lower-to-runtime: loops, guards and the schedule ===//

#include "codegen/Emitter.h"

using namespace loom::codegen::lowering;

namespace loom::codegen::lowering {

LogicalResult Emitter::emitRepeatPrologue(RepeatOp repeat) {
  for (Value r : repeat.getResults())
    defineBuffer(r);
  for (Operation &op : repeat.getBodyBlock())
    if (dist::isDeferredStart(&op))
      deferredEvents[&op] =
          call("loomrt_comm_list_create", {ctx}, {listType});
  // A carry starts where this rank holds it (not another stage's).
  for (auto [init, result] :
       llvm::zip(repeat.getCarries(), repeat.getCarryResults()))
    emitWhen(placedHere(result), [&, init = init, result = result] {
      if (std::optional<double> seed = carrySeed(init))
        call(fillOf(init.getType()),
             {ctx, bufferOf(result),
              i64(shapeId(cast<RankedTensorType>(init.getType()).getShape())),
              f64(*seed)});
      else if (bufferOf(init))
        copy(bufferOf(result), bufferOf(init), init.getType());
    });
  return success();
}

Value Emitter::placedHere(Value v) {
  if (rankPlans.size() < 2)
    return Value();
  // A value written into a loop's carry (an accumulation, a stacked
  // result that starts from an enclosing carry) lives where the carry
  // does.
  while (true) {
    if (AddOp add = accumulatedBy(v))
      v = add.getResult();
    // A slice's accumulation: the loop's stacked result it is yielded as.
    if (addsIntoSlice(v)) {
      auto repeat = cast<RepeatOp>(v.getDefiningOp()->getParentOp());
      auto stacked = repeat.getYield().getStacked();
      v = repeat.getStackedResults()[llvm::find(stacked, v) - stacked.begin()];
    }
    Value carry = updatedInPlace(v);
    if (!carry)
      carry = accumulatesInto(v);
    auto arg = dyn_cast_or_null<BlockArgument>(carry);
    auto outer = arg ? dyn_cast<RepeatOp>(arg.getOwner()->getParentOp())
                     : RepeatOp();
    if (!outer || arg.getArgNumber() == 0 ||
        arg.getArgNumber() > outer.getCarries().size())
      break;
    v = outer.getCarryResults()[arg.getArgNumber() - 1];
  }
  SmallVector<int64_t> at;
  for (auto [c, p] : llvm::enumerate(rankPlans))
    if (p.placements.count(v))
      at.push_back(int64_t(c));
  if (at.size() == rankPlans.size())
    return Value();
  Value cond = arith::ConstantOp::create(b(), loc(), b().getBoolAttr(false));
  for (int64_t c : at)
    cond = arith::OrIOp::create(
        b(), loc(), cond,
        arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::eq,
                              pipelineCoordinate, i64(c)));
  return cond;
}

LogicalResult Emitter::lowerRepeat(Operation *op) {
  auto repeat = cast<RepeatOp>(op);
  if (failed(emitRepeatPrologue(repeat)))
    return failure();
  int64_t count = repeat.getCount();
  Value lb = arith::ConstantIndexOp::create(b(), loc(), 0);
  Value ub = arith::ConstantIndexOp::create(b(), loc(), count);
  Value one = arith::ConstantIndexOp::create(b(), loc(), 1);
  auto loop = scf::ForOp::create(b(), loc(), lb, ub, one);
  OpBuilder::InsertionGuard guard(b());
  b().setInsertionPoint(loop.getBody()->getTerminator());
  Value index = loop.getInductionVar();
  if (repeat.getReverse())
    index = arith::SubIOp::create(
        b(), loc(), arith::ConstantIndexOp::create(b(), loc(), count - 1),
        index);
  inlineIteration(repeat, index);
  return success();
}

Value Emitter::sliceIndex(Value stacked, Value index) {
  return actionSlot && scheduleSlots(stacked) ? actionSlot : index;
}

void Emitter::inlineIteration(RepeatOp repeat, Value index) {
  int64_t count = repeat.getCount();
  size_t numCarries = repeat.getCarries().size();
  Block &body = repeat.getBodyBlock();
  Iteration &iteration = iterations[repeat];
  iteration = Iteration();
  iteration.index = index;
  indices[body.getArgument(0)] = index;
  iteration.repeatId = i64(repeatIds.lookup(repeat));
  iteration.traceIndex =
      arith::IndexCastOp::create(b(), loc(), b().getI64Type(), index);
  call("loomrt_trace_iteration",
       {ctx, iteration.repeatId, iteration.traceIndex, i32(1)});
  for (size_t i = 0; i < numCarries; ++i)
    buffers[body.getArgument(1 + i)] =
        bufferOf(repeat.getCarryResults()[i]);
  for (auto [s, operand] : llvm::enumerate(repeat.getStacked()))
    if (Value whole = bufferOf(operand))
      buffers[body.getArgument(1 + numCarries + s)] =
          view(whole, sliceIndex(operand, index),
               tensorBytes(operand.getType()) / count);
  for (auto [j, inv] : llvm::enumerate(repeat.getInvariants()))
    buffers[body.getArgument(1 + numCarries + repeat.getStacked().size() +
                             j)] = bufferOf(inv);
  // As the memory plan has it: where the body runs whole on every rank,
  // a slice it yields is made in the result's slice.
  YieldOp yield = repeat.getYield();
  if (rankPlans.size() < 2 && !nestedOps(functionOps, body))
    for (Value slice : yield.getStacked())
      if (OpResult result = yieldedIntoResult(slice))
        if (Value whole = bufferOf(result)) {
          buffers[slice] = view(whole, index,
                                tensorBytes(result.getType()) / count);
          predefined.insert(slice);
          iteration.madeInResult.insert(slice);
        }
  // A reduction deferred past the loop is made in its result's slice
  // (it completes after the loop, so nothing may copy it before).
  for (Operation &op : body) {
    if (!dist::isDeferredStart(&op))
      continue;
    for (Value slice : op.getResults()) {
      auto at = yield.getStackedMutable().begin();
      for (; at != yield.getStackedMutable().end() && at->get() != slice;
           ++at)
        ;
      OpResult result = repeat.getStackedResults()[at->getOperandNumber() -
                                                   yield.getCarries().size()];
      buffers[slice] = view(bufferOf(result), index,
                            tensorBytes(result.getType()) / count);
      predefined.insert(slice);
      iteration.madeInResult.insert(slice);
    }
  }
  // The copy's body, here: its arguments are the buffers (cast to their
  // tensor types; an argument this function has no buffer for, such as
  // the evaluation's gradient carries, is a cast of nothing).
  auto copy = cast<RepeatOp>(copyOf.lookup(repeat));
  SmallVector<Value> args{index};
  for (BlockArgument arg : body.getArguments().drop_front())
    args.push_back(castOf(arg.getType(), bufferOf(arg)));
  rewriter->inlineBlockBefore(&copy.getBodyBlock(), b().getInsertionBlock(),
                              b().getInsertionPoint(), args);
}

LogicalResult Emitter::endIteration(Operation *op) {
  auto yield = cast<YieldOp>(op);
  auto repeat = cast<RepeatOp>(yield->getParentOp());
  Iteration &iteration = iterations[repeat];
  int64_t count = repeat.getCount();
  call("loomrt_trace_iteration",
       {ctx, iteration.repeatId, iteration.traceIndex, i32(0)});
  // Under a schedule's action, what one stage made is kept only from
  // that stage's action (the others hold zeros for it).
  // Elsewhere, a result another stage's ops make is not this rank's (it
  // has no bytes here).
  auto keeps = [&](Value made, Value result) {
    Value match = actionStageMatches(made.getDefiningOp());
    return match ? match : placedHere(result);
  };
  for (auto [slice, result] :
       llvm::zip(yield.getStacked(), repeat.getStackedResults())) {
    // A residual this function does not keep, or a slice it does not
    // compute (the evaluation's).
    if (!bufferOf(result) || !bufferOf(slice))
      continue;
    // An accumulation written over its slice, or a slice made in the
    // result, is in the result already.
    if (addsIntoSlice(slice) || iteration.madeInResult.contains(slice))
      continue;
    emitWhen(keeps(slice, result), [&] {
      copy(view(bufferOf(result), sliceIndex(result, iteration.index),
                tensorBytes(result.getType()) / count),
           bufferOf(slice), slice.getType());
    });
  }
  for (auto [i, next] : llvm::enumerate(yield.getCarries())) {
    // A carry this function does not compute (the evaluation's
    // gradient accumulators).
    if (!bufferOf(next))
      continue;
    emitWhen(keeps(next, repeat.getCarryResults()[i]), [&] {
      copy(bufferOf(repeat.getCarryResults()[i]), bufferOf(next),
           next.getType());
    });
  }
  return success();
}

LogicalResult Emitter::checkYield(YieldOp yield) {
  auto repeat = dyn_cast<RepeatOp>(yield->getParentOp());
  if (!repeat)
    return success();
  Block &body = repeat.getBodyBlock();
  for (auto [i, next] : llvm::enumerate(yield.getCarries())) {
    auto arg = dyn_cast<BlockArgument>(next);
    if (arg && arg.getOwner() == &body && arg.getArgNumber() != 1 + i)
      return yield.emitOpError("yields another iteration argument as carry ")
             << i << ", which the code generator does not support";
  }
  return success();
}

Value Emitter::actionStageMatches(Operation *op) {
  std::optional<int64_t> stage = op ? dist::stageOf(op) : std::nullopt;
  if (!actionStage || !stage)
    return Value();
  return arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::eq,
                               actionStage, i64(*stage));
}

bool Emitter::needsZeros(Value r, bool underAction) {
  return llvm::any_of(r.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<OutputOp>(user))
      return false;
    if (auto repeat = dyn_cast<RepeatOp>(user);
        repeat && !dist::stageOf(repeat)) {
      if (use.getOperandNumber() < repeat.getCarries().size())
        return true;
      return needsZeros(
          repeat.getBodyBlock().getArgument(1 + use.getOperandNumber()),
          underAction);
    }
    if (isa<YieldOp>(user))
      return !underAction;
    dist::DistDialect &attrs = dist::attrs(user);
    return !attrs.getStageAttrHelper().isAttrPresent(user) &&
           !attrs.getOnAttrHelper().isAttrPresent(user);
  });
}

void Emitter::emitWhen(Value when, llvm::function_ref<void()> emit) {
  if (!when)
    return emit();
  auto guard = scf::IfOp::create(b(), loc(), when, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard ig(b());
  b().setInsertionPointToStart(&guard.getThenRegion().front());
  emit();
}

bool Emitter::underScheduledLoop(Operation *op) {
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
    if (isScheduled(p))
      return true;
  return false;
}

LogicalResult Emitter::checkGuard(Operation &op, DictionaryAttr on) {
  bool underAction = underScheduledLoop(&op);
  if (!(underAction && dist::stageOf(&op)) &&
      failed(onRanks(op, on, /*check=*/true)))
    return failure();
  for (Value r : op.getResults()) {
    auto type = dyn_cast<RankedTensorType>(r.getType());
    if (!type)
      return op.emitOpError("runs on some ranks only and has a result "
                            "that is not a tensor");
    if (needsZeros(r, underAction) && !writtenIntoAccumulator(r) &&
        !isa<FloatType>(type.getElementType()))
      return op.emitOpError("runs on some ranks only and has a result of ")
             << type << "; the others fill it with zeros, which needs a "
                        "float tensor";
  }
  return success();
}

LogicalResult Emitter::emitGuarded(Operation &op, DictionaryAttr on, llvm::function_ref<LogicalResult()> emit) {
  Value cond = actionStageMatches(&op);
  if (!cond) {
    FailureOr<Value> here = onRanks(op, on);
    if (failed(here))
      return failure();
    cond = *here;
  }
  // Its results' buffers are defined before the guard, so that code
  // after the guard sees them.
  for (Value r : op.getResults())
    if (defineBuffer(r))
      predefined.insert(r);
  auto guard = scf::IfOp::create(b(), loc(), cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard ig(b());
  b().setInsertionPoint(guard.getThenRegion().front().getTerminator());
  // The handle of a collective started here would not reach its wait
  // outside the guard: it completes here (lowerCollective).
  if (isa<dist::AllReduceStartOp, dist::AllGatherStartOp>(op))
    completedStarts.insert(&op);
  if (failed(emit()))
    return failure();
  b().setInsertionPoint(guard.getElseRegion().front().getTerminator());
  for (Value r : op.getResults()) {
    // An accumulation written into its carry leaves the carry as it
    // is where it does not run: zeros (its seed) where the carry is
    // another stage's, and no write where this rank does not hold it.
    if (!needsZeros(r, bool(actionStage)) || writtenIntoAccumulator(r))
      continue;
    if (Value buf = bufferOf(r))
      call(fillOf(r.getType()),
           {ctx, buf,
            i64(shapeId(cast<RankedTensorType>(r.getType()).getShape())),
            f64(0.0)});
  }
  return success();
}

LogicalResult Emitter::findScheduledLoops() {
  scheduledForward = scheduledBackward = scheduledWeight = RepeatOp();
  schedule = dist::scheduleOf(model);
  if (!schedule)
    return success();
  FailureOr<SmallVector<RepeatOp, 3>> checked =
      dist::checkedScheduledLoops(schedule, mesh);
  if (failed(checked))
    return failure();
  SmallVector<RepeatOp, 3> loops = *checked;
  bool split = loops.size() > 2;
  if (!plan.scheduled)
    return success();
  scheduledForward = loops[0];
  scheduledBackward = loops[1];
  if (split)
    scheduledWeight = loops[2];
  for (Operation *op = scheduledForward->getNextNode();
       op != scheduledBackward.getOperation(); op = op->getNextNode())
    for (Value v : op->getOperands())
      if (v.getDefiningOp() == scheduledForward.getOperation())
        return op->emitOpError("reads the micro-batch loop's results "
                               "before its backward, which a pipeline "
                               "schedule runs interleaved with it");
  return success();
}

void Emitter::emitScheduleTables() {
  if (module.lookupSymbol("loom_actions"))
    return;
  SmallVector<int64_t> words, rows{0};
  for (auto rank : schedule.getBody().front().getOps<dist::RankActionsOp>()) {
    for (auto a : rank.getBody().front().getOps<dist::ActionOp>())
      words.append({int64_t(a.getKind()), a.getStage(), a.getMicroBatch(),
                    a.getSlot()});
    rows.push_back(int64_t(words.size()) / 4);
  }
  OpBuilder::InsertionGuard guard(b());
  b().setInsertionPointToStart(module.getBody());
  emitTable("loom_actions", b().getI64Type(), words.size(), integers(words));
  emitTable("loom_action_rows", b().getI64Type(), rows.size(),
            integers(rows));
}

void Emitter::emitTable(StringRef name, Type element, int64_t size, Attribute init) {
  emitc::GlobalOp::create(b(), loc(), name,
                          emitc::ArrayType::get({size}, element), init,
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true,
                          /*const_specifier=*/true);
}

Attribute Emitter::integers(ArrayRef<int64_t> values) {
  return DenseIntElementsAttr::get(
      RankedTensorType::get({int64_t(values.size())}, b().getI64Type()),
      values);
}

Value Emitter::tableEntry(StringRef name, Value index) {
  auto global = cast<emitc::GlobalOp>(module.lookupSymbol(name));
  auto type = cast<emitc::ArrayType>(global.getType());
  Value array = emitc::GetGlobalOp::create(b(), loc(), type, name);
  Value element = emitc::SubscriptOp::create(
      b(), loc(), cast<TypedValue<emitc::ArrayType>>(array),
      ValueRange{index});
  return emitc::LoadOp::create(b(), loc(), b().getI64Type(), element);
}

LogicalResult Emitter::emitScheduleDriver() {
  emitScheduleTables();
  Value rank = pipelineCoordinate;
  Value lb = arith::IndexCastOp::create(b(), loc(), b().getIndexType(),
                                        tableEntry("loom_action_rows", rank));
  Value next = arith::AddIOp::create(b(), loc(), rank, i64(1));
  Value ub = arith::IndexCastOp::create(b(), loc(), b().getIndexType(),
                                        tableEntry("loom_action_rows", next));
  Value one = arith::ConstantIndexOp::create(b(), loc(), 1);
  auto loop = scf::ForOp::create(b(), loc(), lb, ub, one);
  OpBuilder::InsertionGuard guard(b());
  b().setInsertionPointToStart(loop.getBody());
  Value k = arith::IndexCastOp::create(b(), loc(), b().getI64Type(),
                                       loop.getInductionVar());
  Value at = arith::MulIOp::create(b(), loc(), k, i64(4));
  auto word = [&](int64_t w) {
    return tableEntry("loom_actions",
                      arith::AddIOp::create(b(), loc(), at, i64(w)));
  };
  Value kind = word(0);
  actionStage = word(1);
  Value microBatch = word(2);
  actionSlot =
      arith::IndexCastOp::create(b(), loc(), b().getIndexType(), word(3));
  // The bodies moved into the actions are lowered after this function's
  // other ops, under the driver's stage and slot (convert).
  driverStage = actionStage;
  driverSlot = actionSlot;
  llvm::scope_exit done([&] { actionStage = actionSlot = Value(); });
  Value mb =
      arith::IndexCastOp::create(b(), loc(), b().getIndexType(), microBatch);
  auto is = [&](dist::ActionKind k) {
    return arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::eq, kind,
                                 i64(int64_t(k)));
  };
  call("loomrt_pipeline_trace",
       {ctx, kind, actionStage, microBatch, i32(1)});
  auto branch = scf::IfOp::create(b(), loc(), is(dist::ActionKind::Forward),
                                  /*withElseRegion=*/true);
  b().setInsertionPointAfter(branch);
  call("loomrt_pipeline_trace",
       {ctx, kind, actionStage, microBatch, i32(0)});
  b().setInsertionPointToStart(&branch.getThenRegion().front());
  inlineIteration(scheduledForward, mb);
  b().setInsertionPointToStart(&branch.getElseRegion().front());
  if (!scheduledWeight) {
    inlineIteration(scheduledBackward, mb);
    return success();
  }
  // A whole backward runs the input part, then the weight part.
  Value input =
      arith::OrIOp::create(b(), loc(), is(dist::ActionKind::Backward),
                           is(dist::ActionKind::BackwardInput));
  Value weight =
      arith::OrIOp::create(b(), loc(), is(dist::ActionKind::Backward),
                           is(dist::ActionKind::BackwardWeight));
  emitWhen(input, [&] { inlineIteration(scheduledBackward, mb); });
  emitWhen(weight, [&] { inlineIteration(scheduledWeight, mb); });
  return success();
}

bool Emitter::isScheduled(Operation *op) {
  return llvm::any_of(scheduledLoops(), [&](RepeatOp loop) {
    return loop.getOperation() == op;
  });
}

SmallVector<RepeatOp, 3> Emitter::scheduledLoops() {
  SmallVector<RepeatOp, 3> loops;
  for (RepeatOp loop : {scheduledForward, scheduledBackward, scheduledWeight})
    if (loop)
      loops.push_back(loop);
  return loops;
}

void Emitter::numberRepeat(RepeatOp repeat, int64_t &next) {
  repeatIds[repeat] = next++;
  Block &body = repeat.getBodyBlock();
  numberRepeats(body, nestedOps(functionOps, body), next);
}

LogicalResult Emitter::lowerSchedule(Operation *) {
  if (!scheduledForward)
    return success();
  for (RepeatOp loop : scheduledLoops()) {
    OpBuilder::InsertionGuard guard(b());
    b().setInsertionPoint(copyOf.lookup(loop));
    if (failed(emitRepeatPrologue(loop)))
      return failure();
  }
  if (failed(emitScheduleDriver()))
    return failure();
  for (RepeatOp loop : scheduledLoops())
    replaceCopy(copyOf.lookup(loop), loop);
  return success();
}

} // namespace loom::codegen::lowering
