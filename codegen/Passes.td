//===- Passes.td - Loom code generation passes -----------------------------===//

#ifndef LOOM_CODEGEN_PASSES_TD
#define LOOM_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomMemoryPlan : Pass<"loom-memory-plan", "::mlir::ModuleOp"> {
  let summary = "Plan the arena of each function of the rank program (liveness-based reuse)";
  let description = [{
    Places every tensor a function of the rank program computes (the
    training step and the evaluation) in one arena: each value lives from
    the op that defines it to its last use, and values whose lifetimes do
    not overlap share bytes (greedy, largest first, lowest free offset). A
    reshape aliases its input; a `train.repeat` body is planned once and
    occupies its own peak while the repeat runs. Parameters, optimizer
    state and inputs live outside the arena, as do optimizer results
    written in place over the value they replace. With a pipeline each
    pipeline rank plans what its stages run.

    The plan is computed here once and recorded: `loom.offsets` on each op
    a function runs (per function, per pipeline rank, one byte offset per
    result, -1 for no bytes of the arena) and `loom.peak_bytes` on the
    model (per function, per pipeline rank). `loom-lower-to-runtime` and
    `loomc --report` read it.

    It checks the plans it makes: no op between a `dist.all_reduce_start`
    and its `dist.wait` may write bytes of the collective's buffers, which
    the runtime's communication stream owns until the wait.
    `test-release-in-flight-at-start` makes the planner free those buffers
    at the start, to show that the check catches it.
  }];
  let options = [
    Option<"testReleaseInFlightAtStart", "test-release-in-flight-at-start",
           "bool", "false",
           "Test fault: free asynchronous collectives' buffers at their start">,
  ];
  let dependentDialects = ["::loom::codegen::LoomDialect"];
  let statistics = [
    Statistic<"peakBytes", "peak-bytes", "Arena bytes at the peak">,
  ];
}

def LoomLowerToRuntime : Pass<"loom-lower-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower training steps to calls into the Loom runtime";
  let description = [{
    Turns each trained `train.model` (after `train-optimizer` and
    `loom-memory-plan`, whose recorded plan it reads) into the rank
    program: `func.func @loom_step(%ctx)` runs forward, backward and update;
    `func.func @loom_eval(%ctx)` runs the ops the loss needs. Every value is
    a `!emitc.ptr<!emitc.opaque<"loomrt_buf">>` from the tensor table
    (`loomrt_tensor`) or the recorded memory plan (`loomrt_scratch`); every op is a
    `func.call` to `loomrt_<op>` with the arguments of the rule in
    `loomrt.h`; a `train.repeat` is an `scf.for` over views of its stacked
    operands.

    It runs in two steps. A walk copies the ops each function runs into it
    (a loop with the ops of its body that run) and checks each for what its
    pattern could not lower. MLIR's dialect conversion then lowers the
    copies, with a type converter from tensors to buffers: one pattern for
    every op with `KernelOpInterface` (of any dialect), one per collective,
    per transfer and wait, and patterns for loops (an `scf.for` with the
    body moved in), their yields, the pipeline schedule (its driver, the
    scheduled loops' bodies moved into its actions and lowered by a second
    conversion), constants, reshapes and index additions; an op with
    `dist.on` is emitted under its guard. Each pattern makes its results'
    buffers and replaces its op by them. `place-only` stops after the walk.
    The tensor table, the shape table and the program's
    description are `emitc.global`s and `main` a `func.func` calling
    `loomrt_main`. Upstream `convert-scf-to-emitc`,
    `convert-arith-to-emitc` and `convert-func-to-emitc` then give EmitC,
    and `loomc` prints C++ with MLIR's C++ emitter.
  }];
  let options = [
    Option<"placeOnly", "place-only", "bool", "false",
           "Stop after the walk: the functions' ops copied as they are, "
           "for the conversion's patterns to lower (to read and test the "
           "walk)">,
  ];
  let dependentDialects = ["::loom::dist::DistDialect", "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::emitc::EmitCDialect"];
}

#endif // LOOM_CODEGEN_PASSES_TD
