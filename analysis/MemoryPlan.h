//===- MemoryPlan.h - liveness-based placement of values in an arena --*- C++ -*-===//
//
// Every tensor a function computes lives in one arena at an offset chosen
// here: values whose lifetimes do not overlap share bytes. A reshape
// aliases its input; a `train.repeat` body is planned on its own and its
// arena placed, as one block, where the repeat runs. The peak of the plan is
// the arena size the runtime allocates.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_MEMORYPLAN_H
#define LOOM_ANALYSIS_MEMORYPLAN_H

#include "dialects/train/TrainDialect.h"
#include "dialects/common/Bounds.h"
#include "mlir/IR/Block.h"
#include "mlir/Support/LLVM.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace loom::analysis {

/// Where a value lives.
struct Placement {
  enum Kind { Arena, Persistent } kind = Arena;
  /// Byte offset into the arena, or index into the program's tensor table.
  int64_t where = 0;
};

struct MemoryPlan {
  llvm::DenseMap<mlir::Value, Placement> placements;
  /// Arena bytes at the peak.
  int64_t peakBytes = 0;
  /// Whether the plan runs a pipeline schedule's micro-batch loops by its
  /// driver (their values kept in the schedule's slots); a function
  /// without the backward (the evaluation) runs them in program order.
  bool scheduled = false;
};

/// Test faults the planner can be asked to make, to check the checks.
struct PlanFaults {
  /// Free an asynchronous collective's buffers at its start, not at the
  /// last use of its `dist.wait`.
  bool releaseInFlightAtStart = false;
};

/// Bytes of a ranked tensor (the one helper, dialects/common/Bounds.h).
using loom::tensorBytes;

/// The micro-batch loops a pipeline schedule (`dist.schedule`) runs
/// interleaved, in their order in the model: the forward, its backward and
/// the backward's weight part where it is split; empty without a schedule
/// (or where the schedule does not follow its loops, which the code
/// generator and dist-verify-communication report).
llvm::SmallVector<mlir::Operation *, 3> scheduledLoops(loom::train::ModelOp model);

/// Under a pipeline schedule (`dist.schedule` with `slots` K), a stacked result of the micro-batch loops the schedule runs that
/// one stage makes (its slices come from an op with `dist.stage`) and only
/// those loops read is kept in K slots, indexed by each action's slot,
/// rather than one per micro-batch. Returns K for such a value (when K is
/// below the micro-batch count), 0 otherwise.
int64_t scheduleSlots(mlir::Value stackedResult);

/// The ops of a loop's body `block` that a function running `ops` runs:
/// `ops` itself where it names ops of that block (the evaluation's slice of
/// a loop), null (all of them) where it names none (the step names the
/// model's ops only).
const llvm::DenseSet<mlir::Operation *> *
nestedOps(const llvm::DenseSet<mlir::Operation *> *ops, mlir::Block &block);

/// When `v` is a splat float constant that only starts loops' carries
/// (the zeros of gradient accumulators), its value: it gets no buffer of
/// its own, each loop fills its carry with it.
std::optional<double> carrySeed(mlir::Value v);

/// When `v` is a loop's accumulation (carry + x, which the body yields as
/// the carry's next value and after which nothing reads the carry), or a
/// link of a chain of them (carry + x + y + ..., each link read only by the
/// next), the carry's block argument: `v` is written into the carry's
/// buffer.
mlir::BlockArgument accumulatesInto(mlir::Value v);

/// When `v` is the add that a loop body yields as a stacked slice of a
/// result updatedInPlace (slice + x), the slice's block argument: `v` is
/// written over the slice, which is the accumulator's.
mlir::BlockArgument addsIntoSlice(mlir::Value v);

/// When `r` is a kernel's result that an accumulation adds into its
/// accumulator (accumulatesInto or addsIntoSlice), with nothing reading the
/// accumulator between the kernel and the add, and the kernel can add all
/// its accumulating results in place (KernelOpInterface::
/// getAccumulatingResults): that add. The kernel's accumulating entry
/// writes `r` into the accumulator and the add runs nothing, so a
/// micro-batch's gradient needs no tensor of its own (Megatron-LM's fused
/// gradient accumulation).
loom::train::AddOp accumulatedBy(mlir::Value r);

/// Whether `v` is written into an accumulator's bytes (any of the four
/// above), so that it has none of its own.
bool writtenIntoAccumulator(mlir::Value v);

/// When `v`, made by an op of a loop's body and read by nothing else, is
/// the slice that the body yields for one of the loop's own stacked results
/// (not a residual, not an accumulation over a slice): that result. Where
/// every op of the body runs one after another (no pipeline), the code
/// generator makes `v` in the result's slice for the iteration, with no
/// tensor and no copy of its own (a layer's weight gradient).
mlir::OpResult yieldedIntoResult(mlir::Value v);

/// When `v` is a loop's stacked result that adds each iteration's
/// contribution to the slices of a stacked operand that is an enclosing
/// loop's carry, read last by this loop (a micro-batch's layer gradients
/// added to their accumulator), that carry: `v` is written into it.
mlir::Value updatedInPlace(mlir::Value v);

/// The bytes a plan gives `v`: its type's, or, in a `scheduled` plan, its
/// slots' share.
int64_t plannedBytes(mlir::Value v, bool scheduled);

/// Plans the values defined by `ops` (ops of `block`, in order, with their
/// nested regions). `persistent` gives the values that live in the tensor
/// table (parameters, inputs, results updated in place); values that alias
/// one of them (reshapes) become persistent too. With `runsHere`, the plan
/// is one rank's: an op it rejects (another pipeline stage's) runs nothing
/// there, and its results get bytes only where an op that runs there reads
/// them (zeros).
MemoryPlan planMemory(
    mlir::Block &block, const llvm::DenseSet<mlir::Operation *> &ops,
    const llvm::DenseMap<mlir::Value, int64_t> &persistent,
    PlanFaults faults = {},
    llvm::function_ref<bool(mlir::Operation *)> runsHere = nullptr);

/// Whether `op` runs on the ranks whose coordinate on mesh axis `axis` is
/// `coordinate`: its `dist.on` names another coordinate there, or not.
bool runsAt(mlir::Operation *op, mlir::StringAttr axis, int64_t coordinate);

/// Whether a function running `ops` runs a pipeline schedule's micro-batch
/// loops by its driver: the step does (it runs the backward), the
/// evaluation runs the forward loop in program order.
bool runsSchedule(loom::train::ModelOp model,
                  const llvm::DenseSet<mlir::Operation *> &ops);

/// Whether a function running `ops` (Layout's stepOps or evalOps) runs
/// `op`, at any depth (nestedOps).
bool runsIn(mlir::Operation *op, const llvm::DenseSet<mlir::Operation *> &ops);

/// The plans of one function of `model` (the ops `ops` run, `persistent`
/// in the tensor table): one per pipeline rank, each planning what that
/// rank's stages run, or one without a pipeline. Each is checked by
/// verifyInFlightBuffers.
llvm::FailureOr<llvm::SmallVector<MemoryPlan>>
planFunction(loom::train::ModelOp model,
             const llvm::DenseSet<mlir::Operation *> &ops,
             const llvm::DenseMap<mlir::Value, int64_t> &persistent,
             PlanFaults faults = {});

/// Records `plans` (planFunction's) as the plan of the function `name`:
/// under `name` in `loom.offsets` on every op the function runs that has
/// results (per pipeline rank, one offset per result, -1 for no bytes of
/// the arena) and in `loom.peak_bytes` on the model (per pipeline rank).
void recordPlans(loom::train::ModelOp model, llvm::StringRef name,
                 const llvm::DenseSet<mlir::Operation *> &ops,
                 llvm::ArrayRef<MemoryPlan> plans);

/// The plans recordPlans recorded for the function `name`, read back: arena
/// placements from `loom.offsets`, `persistent` in the tensor table. Fails
/// with a located error where the model has no plan for the function, or
/// an op it runs has none (a pass changed the program after the plan).
llvm::FailureOr<llvm::SmallVector<MemoryPlan>>
recordedPlans(loom::train::ModelOp model, llvm::StringRef name,
              const llvm::DenseSet<mlir::Operation *> &ops,
              const llvm::DenseMap<mlir::Value, int64_t> &persistent);

/// The arena sizes of the function `name` per pipeline rank: those
/// loom-memory-plan recorded, or, where it did not run, planned here
/// (planFunction).
llvm::FailureOr<llvm::SmallVector<int64_t>>
arenaPeaks(loom::train::ModelOp model, llvm::StringRef name,
           const llvm::DenseSet<mlir::Operation *> &ops,
           const llvm::DenseMap<mlir::Value, int64_t> &persistent);

/// Checks that no value an op writes while an asynchronous collective is in
/// flight (after its `dist.all_reduce_start`, before its `dist.wait`) shares
/// bytes with the collective's buffers; reports the first that does at the
/// start, with notes at the writer and the wait.
llvm::LogicalResult verifyInFlightBuffers(mlir::Block &block,
                                          const MemoryPlan &plan);

/// The f32 scratch the runtime's bf16 kernels compute on
/// (runtime/common/Bf16Kernels.cpp): the most any one kernel call widens,
/// its bf16 tensors of rank one or more (scalars stay f32) at 4 bytes an
/// element, each rounded up to 64 bytes; 0 without bf16 kernels. loomc
/// reserves it (loomrt_program::bf16_scratch_bytes) and the report counts
/// it.
int64_t bf16ScratchBytes(loom::train::ModelOp model);

} // namespace loom::analysis

#endif // LOOM_ANALYSIS_MEMORYPLAN_H
