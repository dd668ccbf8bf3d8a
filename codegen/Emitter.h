//===- Emitter.h - loom-lower-to-runtime's emitter ------------*- C++ -*-===//
//
// The state and helpers of loom-lower-to-runtime (LowerToRuntime.cpp: the
// walk, the buffers, the conversion and the pass), whose op families are
// lowered in their own files: EmitKernels.cpp (every KernelOpInterface op,
// constants, reshapes, the bf16 entries), EmitCollectives.cpp (collectives,
// waits and pipeline transfers) and EmitLoops.cpp (train.repeat, its
// iterations and yields, dist.on guards and the pipeline schedule's
// driver). A new collective is one case of emitCollective and one pattern.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_EMITTER_H
#define LOOM_CODEGEN_EMITTER_H

#include "analysis/Layout.h"
#include "analysis/MemoryPlan.h"
#include "dialects/train/Adjoint.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/dist/PipelineLoops.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <sstream>

namespace loom::codegen::lowering {

using namespace mlir;
using namespace loom::analysis;
using namespace loom::train;
namespace dist = loom::dist;

/// loomrt_dtype of an element type, -1 when the runtime has none.
inline int32_t dtypeOf(Type element) {
  if (element.isF32())
    return 0;
  if (element.isBF16())
    return 1;
  if (element.isInteger(32))
    return 2;
  if (element.isInteger(64))
    return 3;
  return -1;
}

inline std::string cString(StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Emitter {
  ModuleOp module;
  ModelOp model;
  const ModelLayout &layout;
  dist::MeshAttr mesh;
  /// The builder of the walk, and the one in use: a conversion pattern
  /// points `active` at its rewriter while it emits.
  OpBuilder base;
  OpBuilder *active = &base;
  OpBuilder &b() { return *active; }
  Type ctxType, bufType, eventType, bucketType, listType;
  std::vector<int64_t> shapeWords;
  std::map<std::vector<int64_t>, int64_t> shapeIds;
  llvm::StringMap<FunctionType> declared;
  Operation *lastDecl = nullptr;

  // Per function.
  Value ctx;
  /// The plan of pipeline rank 0 (of the one rank without a pipeline),
  /// and with a pipeline each pipeline rank's own (`rankPlans[c]`): a
  /// rank plans only what its stages run, so an arena offset depends on
  /// the rank's pipeline coordinate (`pipelineCoordinate`).
  MemoryPlan plan;
  SmallVector<MemoryPlan> rankPlans;
  Value pipelineCoordinate;
  DenseMap<Value, Value> buffers;
  DenseMap<int64_t, Value> tensorHandles;
  DenseMap<Value, Value> indices;
  DenseSet<Value> predefined;
  /// The lowering runs in two steps. The walk (placeBlock) copies each op
  /// the function runs into it, in its loops, and checks each for what its
  /// pattern could not lower. Dialect conversion then lowers the copies,
  /// with a type converter from tensors to the runtime's buffers: one
  /// pattern for every KernelOpInterface op, one per collective, transfer
  /// and wait, and patterns for loops (train.repeat to scf.for, the body
  /// moved into it), their yields, `dist.on` guards (every pattern's op
  /// under its guard: lower), the schedule's driver, constants, reshapes
  /// and index additions. Each value's buffer (the recorded plan's
  /// offsets, the tensor table, views, accumulators) is made where its op
  /// is lowered and replaces the op's result. `originalOf` maps a copy to
  /// the model's op it stands for, `copyOf` back: the patterns read the
  /// model's analyses (the plan, accumulations, stages) on the original.
  DenseMap<Operation *, Operation *> originalOf, copyOf;
  /// The copies of the loops the schedule's driver runs: their bodies wait
  /// (legal) until the driver moves them into its actions (convert).
  DenseSet<Operation *> heldLoops;
  /// The rewriter of the pattern running, null outside the conversion.
  ConversionPatternRewriter *rewriter = nullptr;
  /// While a pattern lowers a copy: the converted values of the original
  /// op's operands (bufferOf, indexOf read them first).
  DenseMap<Value, Value> converted;
  /// Stop after the walk (the pass's `place-only`).
  bool placeOnly = false;
  /// The runtime's event of each asynchronous collective in flight (keyed
  /// by its first result), or its bucket when it reduces several tensors.
  DenseMap<Value, Value> events, bucketsInFlight;
  /// Per all-reduce deferred past its loop, the runtime's list of the
  /// loop's iterations' events (created before the loop, waited after it).
  DenseMap<Operation *, Value> deferredEvents;

  Emitter(ModuleOp module, ModelOp model, const ModelLayout &layout)
      : module(module), model(model), layout(layout),
        mesh(dist::attrs(model).getMeshAttrHelper().getAttr(model)),
        base(module.getContext()) {
    if (!mesh)
      mesh = dist::MeshAttr::get(module.getContext(),
                                 {StringAttr::get(module.getContext(), "world")},
                                 {1}, {dist::AxisRole::Data});
    MLIRContext *c = module.getContext();
    ctxType = emitc::PointerType::get(emitc::OpaqueType::get(c, "loomrt_ctx"));
    bufType = emitc::PointerType::get(emitc::OpaqueType::get(c, "loomrt_buf"));
    eventType = emitc::PointerType::get(
        emitc::OpaqueType::get(c, "loomrt_comm_event"));
    bucketType = emitc::PointerType::get(
        emitc::OpaqueType::get(c, "loomrt_comm_bucket"));
    listType =
        emitc::PointerType::get(emitc::OpaqueType::get(c, "loomrt_comm_list"));
  }

  Location loc() { return model.getLoc(); }

  int64_t shapeId(ArrayRef<int64_t> dims) {
    std::vector<int64_t> key(dims.begin(), dims.end());
    auto [it, inserted] = shapeIds.try_emplace(key, int64_t(shapeWords.size()));
    if (inserted) {
      shapeWords.push_back(int64_t(dims.size()));
      shapeWords.insert(shapeWords.end(), dims.begin(), dims.end());
    }
    return it->second;
  }

  Value i32(int64_t v) {
    return arith::ConstantOp::create(b(), loc(), b().getI32IntegerAttr(v));
  }
  Value i64(int64_t v) {
    return arith::ConstantOp::create(b(), loc(), b().getI64IntegerAttr(v));
  }
  Value f64(double v) {
    return arith::ConstantOp::create(b(), loc(), b().getF64FloatAttr(v));
  }

  /// Calls the runtime function `name`, declaring it on first use.
  Value call(StringRef name, ValueRange args, TypeRange results = {}) {
    auto type = FunctionType::get(b().getContext(), TypeRange(args), results);
    if (!declared.count(name)) {
      declared[name] = type;
      // Declarations come first, in the order of first use.
      OpBuilder::InsertionGuard guard(b());
      if (lastDecl)
        b().setInsertionPointAfter(lastDecl);
      else
        b().setInsertionPointToStart(module.getBody());
      auto decl = func::FuncOp::create(b(), loc(), name, type);
      decl.setPrivate();
      lastDecl = decl;
    }
    auto op = func::CallOp::create(b(), loc(), name, results, args);
    return results.empty() ? Value() : op.getResult(0);
  }

  Value null() { return call("loomrt_null", {ctx}, {bufType}); }

  /// The buffer of a value defined here: persistent or in the arena.
  Value defineBuffer(Value v) {
    // A guarded op's results get their buffers before its guard, so that
    // code after the guard sees them.
    if (predefined.contains(v))
      return buffers.lookup(v);
    // An accumulation is written into its carry.
    if (BlockArgument carry = accumulatesInto(v))
      return buffers[v] = bufferOf(carry);
    if (Value carry = updatedInPlace(v))
      return buffers[v] = bufferOf(carry);
    if (BlockArgument slice = addsIntoSlice(v))
      return buffers[v] = bufferOf(slice);
    // A contribution its kernel adds into the accumulator itself.
    if (AddOp add = accumulatedBy(v)) {
      BlockArgument into = accumulatesInto(add.getResult());
      return buffers[v] = bufferOf(into ? into : addsIntoSlice(add.getResult()));
    }
    // Where each pipeline rank placed it (absent where nothing reads it).
    SmallVector<std::optional<Placement>> where;
    for (const MemoryPlan &p : rankPlans) {
      auto it = p.placements.find(v);
      where.push_back(it == p.placements.end()
                          ? std::nullopt
                          : std::optional<Placement>(it->second));
    }
    auto placed = llvm::find_if(where, [](auto &w) { return w.has_value(); });
    if (placed == where.end())
      return {};
    if ((*placed)->kind == Placement::Persistent) {
      Value buf = tensorHandles.lookup((*placed)->where);
      buffers[v] = buf;
      return buf;
    }
    // The arena offset of this rank's plan: a select on the pipeline
    // coordinate where the ranks' plans differ.
    auto offsetAt = [&](size_t c) { return where[c] ? where[c]->where : 0; };
    Value offset = i64(offsetAt(0));
    for (size_t c = 1; c < where.size(); ++c) {
      if (offsetAt(c) == offsetAt(0))
        continue;
      Value is = arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::eq,
                                       pipelineCoordinate, i64(int64_t(c)));
      offset =
          arith::SelectOp::create(b(), loc(), is, i64(offsetAt(c)), offset);
    }
    Value buf = call("loomrt_scratch", {ctx, offset}, {bufType});
    buffers[v] = buf;
    return buf;
  }

  /// The buffer of `v`: while a conversion pattern lowers an op, its
  /// operands' converted values, else what the walk gave `v`.
  Value bufferOf(Value v) {
    if (Value c = converted.lookup(v))
      return c;
    return buffers.lookup(v);
  }
  /// The C++ index of the index value `v`, likewise.
  Value indexOf(Value v) {
    if (Value c = converted.lookup(v))
      return c;
    return indices.lookup(v);
  }

  Value view(Value base, Value index, int64_t sliceBytes) {
    Value i = arith::IndexCastOp::create(b(), loc(), b().getI64Type(), index);
    Value offset = arith::MulIOp::create(b(), loc(), i, i64(sliceBytes));
    return call("loomrt_view", {ctx, base, offset}, {bufType});
  }

  void copy(Value dst, Value src, Type type) {
    if (dst != src)
      call("loomrt_copy", {ctx, dst, src, i64(tensorBytes(type))});
  }

  /// Appends an attribute's arguments under rule 5 of loomrt.h.
  /// Appends an attribute's arguments under rule 5 of loomrt.h to `args`,
  /// or, with no `args`, checks that it has a runtime representation.
  LogicalResult appendAttribute(Operation *op, StringRef name, Attribute attr,
                                SmallVectorImpl<Value> *args) {
    auto append = [&](auto makeArgs) {
      if (args)
        args->append(makeArgs());
      return success();
    };
    if (!attr || isa<UnitAttr>(attr))
      return append([&] { return SmallVector<Value>{i32(attr ? 1 : 0)}; });
    return TypeSwitch<Attribute, LogicalResult>(attr)
        .Case([&](FloatAttr a) {
          return append(
              [&] { return SmallVector<Value>{f64(a.getValueAsDouble())}; });
        })
        .Case([&](IntegerAttr a) {
          return append([&] { return SmallVector<Value>{i64(a.getInt())}; });
        })
        .Case([&](DenseI64ArrayAttr a) {
          return append(
              [&] { return SmallVector<Value>{i64(shapeId(a.asArrayRef()))}; });
        })
        .Case([&](TypeAttr a) {
          return append(
              [&] { return SmallVector<Value>{i32(dtypeOf(a.getValue()))}; });
        })
        .Case([&](ReduceKindAttr a) {
          return append(
              [&] { return SmallVector<Value>{i32(int32_t(a.getValue()))}; });
        })
        .Case([&](ScheduleAttr a) {
          return append([&] {
            return SmallVector<Value>{f64(a.getLr().convertToDouble()),
                                      i64(a.getWarmup()), i64(a.getTotal()),
                                      i32(int32_t(a.getDecay())),
                                      f64(a.getMinLr().convertToDouble())};
          });
        })
        .Case([&](SGDAttr a) {
          return append([&] {
            return SmallVector<Value>{
                f64(a.getMomentum().convertToDouble()),
                f64(a.getWeightDecay().convertToDouble())};
          });
        })
        .Case([&](AdamWAttr a) {
          return append([&] {
            return SmallVector<Value>{
                f64(a.getBeta1().convertToDouble()),
                f64(a.getBeta2().convertToDouble()),
                f64(a.getEps().convertToDouble()),
                f64(a.getWeightDecay().convertToDouble())};
          });
        })
        .Default([&](Attribute) {
          return op->emitOpError("attribute '")
                 << name << "' has no runtime representation";
        });
  }

  /// The fill of a tensor of `type`'s elements (f32, or bf16 rounded once).
  static StringRef fillOf(Type type);

  /// Whether `op`'s kernel is its bf16 entry (`loomrt_<op>_bf16`): one of
  /// its tensors is bf16. A convert to the type it has is a copy, its f32
  /// entry.
  static bool callsBf16Kernel(Operation *op);

  /// The ops the runtime runs on bf16 tensors: every kernel with a bf16
  /// entry (loomrt.h, Bf16Kernels.cpp: all but those of scalars alone;
  /// the updates' read a bf16 gradient of f32 masters and state); the
  /// all-reduce of one tensor or a bucket (a ring that rounds each step's
  /// sum, as NCCL's does), the reduce-scatter of one tensor (the same ring)
  /// and the all-gathers (copies). Not yet: the pairwise all-reduce, shards
  /// and padding fills.
  static bool hasBf16Kernel(Operation *op);

  LogicalResult checkTypes(Operation *op);

  /// The calls of a kernel op (KernelLowering's): `loomrt_<op>`, or its
  /// `_accumulate` entry where it adds into an accumulator, once or once
  /// per operand, by the argument rule of loomrt.h (its results' buffers
  /// defined before: defineResults).
  LogicalResult emitKernel(KernelOpInterface kernel);

  /// A runtime group (uint32_t in loomrt.h).
  Value group(uint32_t mask);

  /// The calls of a collective (lowerCollective's; its results' buffers
  /// defined before: defineResults).
  LogicalResult emitCollective(Operation *op);

  /// A repeat's result buffers, its carries started from their initial
  /// values.
  LogicalResult emitRepeatPrologue(RepeatOp repeat);

  /// Whether this rank's plan gives `v` bytes (an i1), or null where every
  /// rank's does: a constant or a loop's carry that only another stage's
  /// ops use is not this rank's to write.
  Value placedHere(Value v);

  /// A repeat: its prologue, then an scf.for whose body is the copy's body,
  /// moved (inlineIteration); the copies in it are lowered after it.
  LogicalResult lowerRepeat(Operation *op);

  /// What the end of an iteration (its yield's lowering) needs from its
  /// start: the iteration's index, its trace words, and the slices made in
  /// the loop's result.
  struct Iteration {
    Value index, repeatId, traceIndex;
    DenseSet<Value> madeInResult;
  };
  /// Per repeat of the model, its iteration being lowered.
  DenseMap<Operation *, Iteration> iterations;
  /// Per repeat of the model, its number in the order the lowering emits
  /// them, for the trace (numberRepeats).
  DenseMap<Operation *, int64_t> repeatIds;

  /// A stacked value a schedule keeps in slots is indexed by the action's
  /// slot, every other by the iteration.
  Value sliceIndex(Value stacked, Value index);

  /// Starts iteration `index` of `repeat` (its prologue emitted before):
  /// its arguments' buffers, then the copy of its body, moved to the
  /// insertion point with its arguments replaced by them. The body's
  /// yield ends the iteration (endIteration).
  void inlineIteration(RepeatOp repeat, Value index);

  /// The end of an iteration, its yield's lowering: the slices copied into
  /// the loop's stacked results and the carries into the next iteration's.
  LogicalResult endIteration(Operation *op);

  /// Checks that a loop's yield passes each carry's own argument or a new
  /// value (the lowering's carries are buffers, updated in place).
  LogicalResult checkYield(YieldOp yield);

  /// The ops the function being emitted runs (Layout's stepOps or
  /// evalOps), at every depth.
  const DenseSet<Operation *> *functionOps = nullptr;

  /// The stage of the schedule's action being emitted (an i64), and its
  /// slot (an index: where its micro-batch's saved values live), or null
  /// outside the schedule's driver.
  Value actionStage, actionSlot;
  /// The driver's stage and slot, kept for the conversion of the bodies it
  /// runs (set while those are lowered: actionStage and actionSlot).
  Value driverStage, driverSlot;

  /// Within a schedule's action, whether the action's stage is `op`'s
  /// (`dist.stage`); null outside the driver or for an op of no stage.
  Value actionStageMatches(Operation *op);

  /// All-reduces started under a `dist.on` guard, which complete there.
  DenseSet<Operation *> completedStarts;

  /// Whether the ranks (or actions) that skip the op making `r` must fill
  /// it with zeros: when something that runs there reads it, an op of no
  /// stage (a sum over stages) or, outside a schedule's driver, a yield
  /// (the driver copies a stage's yields in that stage's actions only).
  /// An op of a stage is skipped wherever its operands' ops are.
  /// The output reads no zeros: an op of some ranks that the output reads
  /// updates a tensor that those ranks alone hold.
  /// A loop reads it where its body does.
  bool needsZeros(Value r, bool underAction);

  /// Emits what `emit` emits under `when` (unguarded when null).
  void emitWhen(Value when, llvm::function_ref<void()> emit);

  /// Whether this rank's coordinates are those of `dist.on` (an i1), or
  /// null when `on` is null. With `check`, only checks that each entry
  /// names a mesh axis and coordinates, and emits nothing.
  FailureOr<Value> onRanks(Operation &op, DictionaryAttr on,
                           bool check = false) {
    Value cond;
    for (NamedAttribute entry : on ? on.getValue() : ArrayRef<NamedAttribute>()) {
      int64_t axis = mesh.getAxisIndex(entry.getName());
      SmallVector<int64_t> coordinates;
      if (auto one = dyn_cast<IntegerAttr>(entry.getValue()))
        coordinates.push_back(one.getInt());
      else if (auto list = dyn_cast<DenseI64ArrayAttr>(entry.getValue()))
        coordinates.assign(list.asArrayRef().begin(), list.asArrayRef().end());
      if (axis < 0 || coordinates.empty())
        return op.emitOpError("has a '")
               << dist::attrs(&op).getOnAttrHelper().getNameStr()
               << "' entry that names no mesh axis and coordinate: "
               << entry.getName();
      if (check)
        continue;
      Value here =
          call("loomrt_mesh_coord", {ctx, i32(axis)}, {b().getI64Type()});
      // One of the listed coordinates.
      Value match;
      for (int64_t c : coordinates) {
        Value is = arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::eq,
                                         here, i64(c));
        match = match ? arith::OrIOp::create(b(), loc(), match, is) : is;
      }
      cond = cond ? arith::AndIOp::create(b(), loc(), cond, match) : match;
    }
    return cond;
  }

  /// Whether `op` runs within a loop the schedule's driver runs, where its
  /// guard is its action's stage.
  bool underScheduledLoop(Operation *op);

  /// Checks what emitGuarded would find wrong with `op`'s guard.
  LogicalResult checkGuard(Operation &op, DictionaryAttr on);

  /// Emits `op` (by `emit`) under its `dist.on` guard: the ranks whose
  /// coordinates match run it, the others fill its results with zeros (a
  /// pipeline stage's values are zero off its rank, which makes sums over
  /// the pipeline whole). Within a schedule's action the guard is the
  /// action's stage instead: a rank's other stages' ops are zero too, so
  /// each action adds its own stage's part to the loops' sums.
  LogicalResult emitGuarded(Operation &op, DictionaryAttr on,
                            llvm::function_ref<LogicalResult()> emit);

  /// The pipeline's micro-batch loops, run in the schedule's order: the
  /// forward loop (saving its carries), the reverse loop of its backward
  /// and, where it is split, the backward's weight part; and the
  /// `dist.schedule` after them, where the driver runs them.
  RepeatOp scheduledForward, scheduledBackward, scheduledWeight;
  dist::ScheduleOp schedule;

  /// The loops the plan runs by the schedule's driver (none in a function
  /// without the backward, such as the evaluation).
  LogicalResult findScheduledLoops();

  /// Lays the schedule's actions out as two tables, `loom_actions` (four
  /// words per action: its kind, stage, micro-batch and slot; the ranks'
  /// rows one after another) and `loom_action_rows` (where each pipeline
  /// rank's row starts, and the end), declared before the functions.
  void emitScheduleTables();

  /// A static constant array `name` of `size` `element`s (an EmitC
  /// global, at the builder's insertion point) initialized with `init`.
  void emitTable(StringRef name, Type element, int64_t size, Attribute init);
  /// `values` as a table's initializer.
  Attribute integers(ArrayRef<int64_t> values);

  /// Element `index` (an i64) of the table `name`.
  Value tableEntry(StringRef name, Value index);

  /// Runs this rank's actions of the schedule, in the schedule's order:
  /// iteration `mb` of the forward loop (forward), of the backward loop
  /// (backward: both parts where it is split), or of its input part
  /// (backward_input) or weight part (backward_weight).
  LogicalResult emitScheduleDriver();

  /// Whether `op` is a loop the schedule's driver runs.
  bool isScheduled(Operation *op);
  SmallVector<RepeatOp, 3> scheduledLoops();

  /// Numbers the repeats of `block` that the function runs (`only`) in the
  /// order their iterations are emitted: the scheduled loops' at the
  /// schedule, each loop before the loops in its body.
  void numberRepeats(Block &block, const DenseSet<Operation *> *only,
                     int64_t &next) {
    for (Operation &op : block) {
      if ((only && !only->contains(&op)) || isScheduled(&op))
        continue;
      if (isa<dist::ScheduleOp>(op))
        for (RepeatOp loop : scheduledLoops())
          numberRepeat(loop, next);
      if (auto repeat = dyn_cast<RepeatOp>(op))
        numberRepeat(repeat, next);
    }
  }
  void numberRepeat(RepeatOp repeat, int64_t &next);

  /// The first step of the lowering ("the walk"): copies the ops of `block`
  /// that the function runs (`only`; every op where null) to the insertion
  /// point, a loop with the ops of its body that run, checking each op for
  /// what its pattern could not lower, so that no pattern fails half way.
  /// `map` takes the model's values to the copies'; a value the function
  /// does not compute here (a parameter, the evaluation's skipped ops)
  /// stands in as a cast of its buffer, or of nothing.
  LogicalResult placeBlock(Block &block, const DenseSet<Operation *> *only,
                           IRMapping &map) {
    for (Operation &op : block) {
      if (isa<OutputOp, ParamOp, StateOp, InputOp, IterationOp>(op) ||
          (only && !only->contains(&op) && !isa<YieldOp>(op)))
        continue;
      if (failed(checkOp(op)))
        return failure();
      for (Value v : op.getOperands())
        if (!map.contains(v))
          map.map(v, castOf(v.getType(), buffers.lookup(v)));
      Operation *copy;
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        copy = b().cloneWithoutRegions(op, map);
        Block &body = repeat.getBodyBlock();
        OpBuilder::InsertionGuard guard(b());
        Block *into = b().createBlock(
            &copy->getRegion(0), {}, body.getArgumentTypes(),
            SmallVector<Location>(body.getNumArguments(), loc()));
        map.map(body.getArguments(), into->getArguments());
        if (failed(placeBlock(body, nestedOps(functionOps, body), map)))
          return failure();
        if (isScheduled(repeat))
          heldLoops.insert(copy);
      } else {
        copy = b().clone(op, map);
      }
      originalOf[copy] = &op;
      copyOf[&op] = copy;
    }
    return success();
  }

  /// Checks what `op`'s pattern would find wrong.
  LogicalResult checkOp(Operation &op) {
    if (auto on = dist::attrs(&op).getOnAttrHelper().getAttr(&op))
      if (failed(checkGuard(op, on)))
        return failure();
    if (isa<ReshapeOp, dist::ScheduleOp>(op))
      return success();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
      if (!isa<IndexType>(constant.getType()) && (!dense || !dense.isSplat()))
        return op.emitOpError("only splat float tensor constants can be "
                              "generated");
      return success();
    }
    if (auto add = dyn_cast<arith::AddIOp>(op)) {
      if (!isa<IndexType>(add.getType()))
        return op.emitOpError("only index additions can be generated");
      return success();
    }
    if (auto repeat = dyn_cast<RepeatOp>(op))
      return checkTypes(repeat);
    if (auto yield = dyn_cast<YieldOp>(op))
      return checkYield(yield);
    if (isa<ConcatOp>(op))
      return op.emitOpError("is not supported by the code generator yet");
    if (!isPlaced(op))
      return op.emitOpError("has no runtime kernel");
    return checkPlaced(op);
  }

  /// Whether `op` is a kernel, a collective, a transfer or a wait: an op
  /// whose results get their buffers before its calls (defineResults).
  static bool isPlaced(Operation &op) {
    return isa<KernelOpInterface, dist::AllReduceOp, dist::AllReduceStartOp,
               dist::AllGatherOp, dist::AllGatherStartOp, dist::ReduceScatterOp,
               dist::ShardOp, dist::FillPaddingOp, dist::SendOp, dist::RecvOp,
               dist::WaitOp>(op);
  }

  /// Checks what the patterns would otherwise find wrong, so that they
  /// cannot fail: the element types, a kernel's attributes, a shard's axes.
  LogicalResult checkPlaced(Operation &op) {
    if (isa<dist::SendOp, dist::RecvOp, dist::WaitOp>(op))
      return success();
    if (failed(checkTypes(&op)))
      return failure();
    if (auto shard = dyn_cast<dist::ShardOp>(op))
      for (Attribute list : shard.getAxes())
        if (!mesh.isInDeviceOrder(llvm::to_vector(
                cast<ArrayAttr>(list).getAsRange<StringAttr>())))
          return op.emitOpError("splits a dimension over axes that are not "
                                "in mesh order, which the runtime's groups "
                                "cannot express yet");
    if (!isa<KernelOpInterface>(op))
      return success();
    for (StringAttr name : op.getName().getAttributeNames())
      if (failed(appendAttribute(
              &op, name.getValue(),
              op.getInherentAttr(name.getValue()).value_or(Attribute()),
              /*args=*/nullptr)))
        return failure();
    return success();
  }

  /// The buffers of a kernel's, a collective's or a transfer's results,
  /// defined before its calls.
  void defineResults(Operation &op) {
    SmallVector<Value> results;
    SmallVector<Type> types;
    if (auto kernel = dyn_cast<KernelOpInterface>(op))
      kernel.getKernelResults(results, types);
    else
      results.assign(op.result_begin(), op.result_end());
    for (Value r : results)
      if (r && defineBuffer(r))
        predefined.insert(r);
  }

  /// The second step, each pattern's: lowers `copy`, a copy of the model's
  /// op, with `emit` (the runtime calls of the op it stands for) under the
  /// op's guard, reading its operands from the pattern's converted
  /// `operands`, at the rewriter's insertion point; then replaces the copy
  /// by its results' buffers (a cast of nothing where one has none).
  LogicalResult lower(Operation *copy, ValueRange operands,
                      ConversionPatternRewriter &rw,
                      llvm::function_ref<LogicalResult(Operation *)> emit) {
    Operation *original = originalOf.lookup(copy);
    if (!original)
      return rw.notifyMatchFailure(copy, "not a copy of the model's op");
    for (auto [operand, value] : llvm::zip(original->getOperands(), operands))
      converted[operand] = buffered(value);
    active = &rw;
    rewriter = &rw;
    llvm::scope_exit restore([&] {
      active = &base;
      rewriter = nullptr;
      converted.clear();
    });
    auto body = [&] { return emit(original); };
    DictionaryAttr on = dist::attrs(original).getOnAttrHelper().getAttr(original);
    if (failed(on ? emitGuarded(*original, on, body) : body()))
      return failure();
    replaceCopy(copy, original);
    return success();
  }

  /// Replaces `copy` by the buffers (or C++ indices) of `original`'s
  /// results: a cast of nothing where the function has none.
  void replaceCopy(Operation *copy, Operation *original) {
    SmallVector<Value> values;
    for (Value r : original->getResults()) {
      bool index = isa<IndexType>(r.getType());
      Value v = index ? indices.lookup(r) : buffers.lookup(r);
      values.push_back(v ? v : castOf(index ? r.getType() : bufType, Value()));
    }
    rewriter->replaceOp(copy, values);
    originalOf.erase(copy);
  }

  /// `buffer` cast to `type`, or a cast of nothing where it is null.
  Value castOf(Type type, Value buffer) {
    return UnrealizedConversionCastOp::create(
               b(), loc(), type, buffer ? ValueRange{buffer} : ValueRange{})
        .getResult(0);
  }

  /// The buffer a converted operand is: the one under the casts between
  /// it and its tensor type (null where there is none).
  static Value buffered(Value v) {
    while (auto cast = v.getDefiningOp<UnrealizedConversionCastOp>()) {
      if (cast.getInputs().size() != 1)
        return Value();
      v = cast.getInputs()[0];
    }
    return v;
  }

  LogicalResult lowerKernel(Operation *op);

  /// A reshape is its input's buffer.
  LogicalResult lowerReshape(Operation *op);

  /// A splat tensor constant fills its buffer (where this rank holds it);
  /// one that seeds a loop's carries is filled there instead. An index
  /// constant (a repeat cut across pipeline stages numbers its iterations
  /// from an offset) is a C++ value.
  LogicalResult lowerConstant(Operation *op);

  /// An index addition (a stage's iteration offset).
  LogicalResult lowerIndexAdd(Operation *op) {
    auto add = cast<arith::AddIOp>(op);
    indices[add] = arith::AddIOp::create(b(), loc(), indexOf(add.getLhs()),
                                         indexOf(add.getRhs()));
    return success();
  }

  /// The schedule: each scheduled loop's prologue where the loop stands,
  /// then, here, the driver that runs their iterations (their copies'
  /// bodies moved into its actions); the loops are replaced by their
  /// results' buffers. In a function without the backward, the loops ran
  /// where they stand.
  LogicalResult lowerSchedule(Operation *);

  /// A collective's calls, and, where a guard holds its start, its wait.
  LogicalResult lowerCollective(Operation *op);

  /// Waits for the asynchronous collective `start` began: its event, or its
  /// bucket's.
  void waitFor(Operation *start);

  /// A transfer's or a wait's calls.
  LogicalResult lowerTransfer(Operation *op);

  /// Lowers the copies the walk made in `fn` (see `originalOf`): first all but
  /// the scheduled loops' bodies, then those, moved into the driver.
  LogicalResult convert(func::FuncOp fn);

  /// Emits the function `name` (`loom_<function>`), whose plans
  /// loom-memory-plan recorded under `function`; returns each pipeline
  /// rank's arena bytes (one entry without a pipeline).
  FailureOr<SmallVector<int64_t>>
  emitFunction(StringRef function, const DenseSet<Operation *> &ops,
               const DenseMap<Value, int64_t> &persistent, bool step) {
    Block &body = model.getBody().front();
    StringAttr pipelineAxis = mesh.getAxis(dist::AxisRole::Pipeline);
    int64_t pp = pipelineAxis ? mesh.getSize(dist::AxisRole::Pipeline) : 1;
    // Each pipeline rank's plan of what its stages run.
    FailureOr<SmallVector<MemoryPlan>> recorded =
        recordedPlans(model, function, ops, persistent);
    if (failed(recorded))
      return failure();
    if (int64_t(recorded->size()) != pp)
      return model.emitOpError("has a memory plan of ")
             << recorded->size() << " pipeline ranks for its '" << function
             << "' function, and " << pp << " pipeline ranks";
    rankPlans = std::move(*recorded);
    plan = rankPlans.front();
    buffers.clear();
    tensorHandles.clear();
    indices.clear();
    predefined.clear();
    events.clear();
    bucketsInFlight.clear();
    completedStarts.clear();
    deferredEvents.clear();
    iterations.clear();
    repeatIds.clear();
    copyOf.clear();
    heldLoops.clear();
    driverStage = driverSlot = Value();
    b().setInsertionPoint(model);
    auto fn = func::FuncOp::create(
        b(), loc(), ("loom_" + function).str(),
        FunctionType::get(b().getContext(), {ctxType}, {}));
    Block *entry = fn.addEntryBlock();
    ctx = entry->getArgument(0);
    b().setInsertionPointToStart(entry);
    pipelineCoordinate =
        pp > 1 ? call("loomrt_mesh_coord",
                      {ctx, i32(int32_t(mesh.getAxisIndex(pipelineAxis)))},
                      {b().getI64Type()})
               : Value();
    for (int64_t t = 0, e = layout.tensors.size(); t < e; ++t)
      tensorHandles[t] = call("loomrt_tensor", {ctx, i32(t)}, {bufType});
    for (auto [v, t] : persistent)
      if (!v.getDefiningOp() ||
          isa<ParamOp, StateOp, InputOp, IterationOp>(v.getDefiningOp()))
        buffers[v] = tensorHandles[t];
    functionOps = &ops;
    llvm::scope_exit forget([&] { functionOps = nullptr; });
    if (failed(findScheduledLoops()))
      return failure();
    int64_t numbered = 0;
    numberRepeats(body, &ops, numbered);
    // The walk: the function's ops copied, checked; then their patterns.
    IRMapping map;
    if (failed(placeBlock(body, &ops, map)))
      return failure();
    auto ret = func::ReturnOp::create(b(), loc());
    // The copies of dist ops verify against the mesh of an enclosing op:
    // the function carries the model's.
    if (placeOnly) {
      if (auto modelMesh = dist::attrs(model).getMeshAttrHelper().getAttr(model))
        dist::attrs(model).getMeshAttrHelper().setAttr(fn, modelMesh);
      return SmallVector<int64_t>(rankPlans.size(), 0);
    }
    if (failed(convert(fn)))
      return failure();
    b().setInsertionPoint(ret);
    // Posted sends complete before the step ends.
    bool sends = false;
    model.walk([&](dist::SendOp) { sends = true; });
    if (sends)
      call("loomrt_comm_drain", {ctx});
    OutputOp output = model.getOutput();
    copy(tensorHandles[layout.lossIndex], bufferOf(output.getLoss()),
         output.getLoss().getType());
    // An update that some ranks make is theirs to copy: the others do not
    // hold the tensor.
    if (step)
      for (auto [t, v] : layout.copiedUpdates) {
        Operation *def = v.getDefiningOp();
        FailureOr<Value> here =
            def ? onRanks(*def, dist::attrs(def).getOnAttrHelper().getAttr(def))
                : FailureOr<Value>(Value());
        if (failed(here))
          return failure();
        emitWhen(*here, [&, t = t, v = v] {
          copy(tensorHandles[t], bufferOf(v), v.getType());
        });
      }
    originalOf.clear();
    SmallVector<int64_t> peaks;
    for (const MemoryPlan &p : rankPlans)
      peaks.push_back(p.peakBytes);
    return peaks;
  }

  LogicalResult run() {
    // Counted on the train ops, before they are lowered.
    int64_t bf16ScratchBytes = loom::analysis::bf16ScratchBytes(model);
    FailureOr<SmallVector<int64_t>> stepBytes = emitFunction(
        "step", layout.stepOps, layout.stepPersistent, /*step=*/true);
    if (failed(stepBytes))
      return failure();
    FailureOr<SmallVector<int64_t>> evalBytes = emitFunction(
        "eval", layout.evalOps, layout.evalPersistent, /*step=*/false);
    if (failed(evalBytes))
      return failure();

    // The tensor table's shapes go into the shape table too, so it is
    // written after them.
    std::ostringstream descriptors;
    descriptors << "{";
    for (auto [i, t] : llvm::enumerate(layout.tensors)) {
      int32_t dtype = dtypeOf(t.type.getElementType());
      descriptors << (i ? ",\n  " : "\n  ") << "{" << cString(t.name)
                  << ", " << t.role << ", " << dtype << ", "
                  << shapeId(t.type.getShape()) << ", " << t.init << ", "
                  << t.initValue << ", " << t.bound << ", "
                  << shapeId(t.globalShape) << ", " << shapeId(t.shardGroups)
                  << ", " << (t.partOf.empty() ? "NULL" : cString(t.partOf))
                  << ", " << shapeId(t.partWhole) << ", "
                  << shapeId(t.partOffsets) << ", " << t.heldAxis << ", "
                  << t.heldMask << "}";
    }
    descriptors << "}";
    // Each pipeline rank's arena (its own plan), indexed by its coordinate.
    SmallVector<int64_t> arenaBytes;
    for (size_t c = 0; c < stepBytes->size(); ++c)
      arenaBytes.push_back(std::max((*stepBytes)[c], (*evalBytes)[c]));
    std::ostringstream axisNames;
    axisNames << "{";
    for (auto [i, name] : llvm::enumerate(mesh.getNames()))
      axisNames << (i ? ", " : "") << cString(name.getValue());
    axisNames << "}";

    b().setInsertionPointToStart(module.getBody());
    emitc::IncludeOp::create(b(), loc(), "loomrt/loomrt.h");
    b().setInsertionPointToEnd(module.getBody());
    MLIRContext *c = b().getContext();
    // The tables, static and constant: an array of integers is a dense
    // attribute; one of the runtime's structs its aggregate initializer.
    Type i64 = b().getI64Type();
    emitTable("loom_shapes", i64, shapeWords.size(), integers(shapeWords));
    emitTable("loom_tensors", emitc::OpaqueType::get(c, "loomrt_tensor_desc"),
              layout.tensors.size(),
              emitc::OpaqueAttr::get(c, descriptors.str()));
    emitTable("loom_axis_names",
              emitc::PointerType::get(emitc::OpaqueType::get(c, "char")),
              mesh.getNames().size(),
              emitc::OpaqueAttr::get(c, axisNames.str()));
    emitTable("loom_axis_sizes", i64, mesh.getSizes().size(),
              integers(mesh.getSizes()));
    emitTable("loom_arena_bytes", i64, arenaBytes.size(),
              integers(arenaBytes));
    StringAttr pipelineAxis = mesh.getAxis(dist::AxisRole::Pipeline);
    int64_t arenaAxis = stepBytes->size() > 1
                            ? mesh.getAxisIndex(pipelineAxis)
                            : int64_t(-1);
    std::ostringstream program;
    program << "{" << cString(model.getSymName()) << ", loom_tensors, "
            << layout.tensors.size() << ", loom_shapes, " << shapeWords.size()
            << ", {\"step\", " << llvm::max_element(*stepBytes)[0]
            << ", loom_step}, {\"eval\", " << llvm::max_element(*evalBytes)[0]
            << ", loom_eval}, " << mesh.getNames().size()
            << ", loom_axis_names, loom_axis_sizes, " << arenaAxis
            << ", loom_arena_bytes, " << bf16ScratchBytes
            << "}";
    // The program's description (`const` in its opaque type, so that its
    // address is a pointer to const).
    auto programType = emitc::OpaqueType::get(c, "const loomrt_program");
    emitc::GlobalOp::create(b(), loc(), "loom_program", programType,
                            emitc::OpaqueAttr::get(c, program.str()),
                            /*extern_specifier=*/false,
                            /*static_specifier=*/true,
                            /*const_specifier=*/false);
    // int main(int argc, char **argv): the runtime's training loop.
    Type i32 = b().getI32Type();
    auto argv = emitc::PointerType::get(
        emitc::PointerType::get(emitc::OpaqueType::get(c, "char")));
    auto mainFn = func::FuncOp::create(
        b(), loc(), "main", FunctionType::get(c, {i32, argv}, {i32}));
    Block *entry = mainFn.addEntryBlock();
    OpBuilder::InsertionGuard guard(b());
    b().setInsertionPointToStart(entry);
    Value description = emitc::GetGlobalOp::create(
        b(), loc(), emitc::LValueType::get(programType), "loom_program");
    Value address = emitc::AddressOfOp::create(
        b(), loc(), emitc::PointerType::get(programType), description);
    Value rc =
        emitc::CallOpaqueOp::create(
            b(), loc(), TypeRange{i32}, "loomrt_main",
            ValueRange{entry->getArgument(0), entry->getArgument(1), address})
            .getResult(0);
    func::ReturnOp::create(b(), loc(), rc);
    model.erase();
    return success();
  }
};

} // namespace loom::codegen::lowering

#endif // LOOM_CODEGEN_EMITTER_H
