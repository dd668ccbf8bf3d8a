//===- Passes.td - Loom passes ---------------------------------------------===//

#ifndef LOOM_PASSES_TD
#define LOOM_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainVerify : Pass<"train-verify", "::mlir::ModuleOp"> {
  let summary = "Check that every model is a trainable, well-formed model";
  let description = [{
    Op verifiers check each op on its own (shapes, element types, attribute
    ranges). This pass checks what only the whole model shows, and runs first
    in every pipeline so that a bad model is rejected before any
    transformation, with a diagnostic at the offending op:

    - the body of a `train.model` contains only `train` ops and constants;
    - the loss depends on at least one parameter;
    - a parameter that does not reach the loss gets a warning (its gradient
      would be zero).

    ```mlir
    train.model @m {
      %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
      %l = train.input "l" : tensor<f32>
      // error: 'train.model' loss does not depend on any parameter
      train.output loss(%l : tensor<f32>)
    }
    ```
  }];
  let statistics = [
    Statistic<"numParameters", "parameters", "Number of parameter tensors">,
    Statistic<"numParameterElements", "parameter-elements",
              "Number of scalar parameters">,
  ];
}

def DistRemat : Pass<"dist-remat", "::mlir::ModuleOp"> {
  let summary = "Choose what the backward of each layer loop recomputes";
  let description = [{
    Runs before `train-autodiff`, whose backward rules read the choice.
    `policy=full` (Megatron's full recomputation): the forward
    of a `train.repeat` keeps each iteration's input and its backward
    recomputes the iteration before back-propagating through it. `none`
    (the default):
    every forward repeat that chose nothing yet gets `residuals(0)`, so the
    forward keeps every value its backward reads (one slice per layer) and
    the backward recomputes nothing, the fastest where memory allows.
    `selective`: as `none`, but every op of the forward body other than the
    matmuls and the attention is marked `train.recompute`, so the forward
    keeps the matmuls' and attention's outputs and the backward recomputes
    the pointwise functions, norms, softmax and data movement from them
    (Megatron's selective recomputation recomputes attention's core; Loom's
    fused attention already recomputes its scores in its backward). The
    losses and parameters are the same bit for bit under every policy
    (recomputation runs the same kernels on the same values). A list with
    one of them per layer of the stack (`policy=full,full,selective,none`)
    cuts each layer loop into runs of layers with one policy each, its
    stacked parameters into parts; `loomc --remat=budget` chooses such a
    list.

    ```mlir
    // --dist-remat="policy=none"
    %h = train.repeat 4 residuals(0) carry(%x : tensor<8x16xf32>) ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"none\"",
           "none (the default), selective, full, or one per layer">,
  ];
}

def TrainAutodiff : Pass<"train-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derive the backward pass of every model (reverse mode)";
  let description = [{
    Appends to each `train.model` the gradient of its loss with respect to
    every `train.param`, and lists them in `train.output grads(...)` in
    declaration order. Each op contributes its rule through
    `BackwardOpInterface`; the pass knows no op by name. Gradients of a value
    used more than once are summed (tied embeddings). A `train.repeat`
    differentiates into one reverse `train.repeat` that recomputes each
    iteration from its saved input, so the backward of a 96-layer stack is
    one body too.

    Before:
    ```mlir
    %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
    %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
    train.output loss(%l : tensor<f32>)
    ```
    After:
    ```mlir
    %one = arith.constant dense<1.0> : tensor<f32>
    %dy = train.cross_entropy_grad %y, %t, %one : tensor<8x4xf32>, tensor<8xi32>
    %dw = train.matmul %x, %dy transpose_lhs : tensor<8x16xf32>, tensor<8x4xf32>
    train.output loss(%l : tensor<f32>) grads(%dw : tensor<16x4xf32>)
    ```

    A mixed-precision master's gradient (train-mixed-precision's f32
    parameter read through its bf16 copy) is widened where it is made by
    default (`grad-precision=fp32`): a sum of bf16 terms becomes the f32
    sum of the widened terms, a layer loop widens each slice and a
    micro-batch loop accumulates in f32 (Megatron-LM's `main_grad`).
    `grad-precision=bf16` keeps it bf16 (the ZeRO paper's 2 bytes a
    parameter): accumulated, reduced and read by the update in bf16.
  }];
  let options = [
    Option<"gradPrecision", "grad-precision", "std::string", "\"fp32\"",
           "A mixed-precision master's gradient: fp32 (widened where it is "
           "made, the default) or bf16 (kept, accumulated and reduced in "
           "bf16)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numBackwardOps", "backward-ops",
              "Number of ops the backward pass added">,
  ];
}

def TrainGradAccumulation : Pass<"train-grad-accumulation", "::mlir::ModuleOp"> {
  let summary = "Split the batch into micro-batches whose gradients are summed";
  let description = [{
    Runs before `train-autodiff`. The forward pass becomes a `train.repeat`
    over `micro-batches` slices of the inputs' leading (batch) dimension,
    with the parameters as invariants and the loss as the carry, so that
    autodiff turns it into one backward repeat that accumulates every
    parameter's gradient across micro-batches. The loop keeps residuals
    (`residuals(0)`): its backward reads what each micro-batch's forward
    saved and recomputes none of it. Without a pipeline,
    `train-interleave-micro-batches` then runs each micro-batch's backward
    right after its forward.

    Normalisation is that of the whole batch: a cross-entropy loss (a mean
    over the tokens whose label is not the ignore index) is weighted per
    micro-batch by its share of the batch's labelled tokens
    (`train.label_count`), so unevenly masked micro-batches give exactly the
    big batch's loss and gradients; any other loss must be a mean over the
    batch and is weighted by 1/M.

    ```mlir
    %l = train.cross_entropy %y, %t : tensor<8x4xf32>, tensor<8xi32>
    ```
    becomes, for micro-batches=2,
    ```mlir
    %total = train.label_count %t : tensor<8xi32>
    %l = train.repeat 2 carry(%zero : tensor<f32>) stacked(%x2, %t2 : ...)
           invariant(%w, %total : ...) : (tensor<f32>) {
      ...  // the forward on tensor<4x...> slices
      %c = train.label_count %ti : tensor<4xi32>
      %share = train.div %c, %total ...
      %part = train.mul %lmb, %share ...
      %acc = train.add %carry, %part ...
      train.yield carry(%acc : tensor<f32>)
    }
    ```
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per optimizer step (1: no accumulation)">,
  ];
  let statistics = [
    Statistic<"numMoved", "moved-ops", "Forward ops moved into the micro-batch loop">,
  ];
}


def TrainInterleaveMicroBatches : Pass<"train-interleave-micro-batches", "::mlir::ModuleOp"> {
  let summary = "Run each micro-batch's backward right after its forward";
  let description = [{
    Runs after `train-autodiff`, on models without a pipeline (a pipeline's
    schedule interleaves the two loops itself). The micro-batch loop that
    keeps residuals (`train-grad-accumulation`) and its backward become one
    `train.repeat`: iteration k runs micro-batch k's forward, then its
    backward, which reads the forward's values directly instead of saved
    slices. One micro-batch's activations are live at a time, so the
    activation peak does not grow with the number of micro-batches, and the
    memory plan sees each value's exact lifetime. The backward's order over
    micro-batches changes from last-first to first-first: its carries are
    sums (the gradient accumulators), so only the rounding changes.

    ```mlir
    %l, %saved:2 = train.repeat 2 saving_carries residuals(1) carry(...) ...
    %g:2 = train.repeat 2 reverse carry(...) stacked(%saved#1, ..., %saved#0 ...)
    ```
    becomes
    ```mlir
    %r:3 = train.repeat 2 carry(%zero, %one, %zeros : ...) ... {
      ... // micro-batch k's forward, then its backward
    }
    ```
  }];
  let dependentDialects = ["::loom::train::TrainDialect"];
  let statistics = [
    Statistic<"numInterleaved", "interleaved", "Micro-batch loops fused with their backward">,
  ];
}
def TrainOptimizer : Pass<"train-optimizer", "::mlir::ModuleOp"> {
  let summary = "Add the optimizer step: clipping, schedule, SGD or AdamW";
  let description = [{
    Turns a differentiated model into a full training step. From the model's
    attributes it builds: the learning rate at the current step
    (`train.lr_schedule` over `#train.schedule`: linear warm-up, then
    constant, linear or cosine decay); when `clip_norm` is set, the global
    gradient norm over all parameters (`train.sqrt` of a `train.sum_squares`,
    which a sharded program completes with one scalar all-reduce) and the clip factor that scales every
    gradient; and one update per parameter (`train.sgd_update` with momentum,
    or `train.adamw_update` with decoupled weight decay, none for `no_decay`
    parameters). Optimizer state (momentum, first and second moments) becomes
    named `train.state` values, declared after their parameter; the new value
    of every parameter and state is listed in `train.output updates(...)`.

    ```mlir
    %it = train.iteration : tensor<f32>
    %lr = train.lr_schedule #train.schedule<lr = 1.0e-3, warmup = 10, total = 100, decay = cosine> at %it
    %ss = train.sum_squares %dw : tensor<16x4xf32>
    %n = train.sqrt %ss : tensor<f32>
    %c = train.clip_factor %n max 1.0
    %g = train.mul %dw, %c : tensor<16x4xf32>, tensor<f32>
    %p, %m, %v = train.adamw_update #train.adamw<> %w, %g, %w_m, %w_v lr(%lr) step(%it) decay 0.01 : tensor<16x4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numUpdates", "updates", "Number of parameters updated">,
    Statistic<"numStates", "states", "Number of optimizer state tensors">,
  ];
}

def TrainMixedPrecision : Pass<"train-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "bf16 compute with fp32 master weights, on the forward model";
  let description = [{
    Rewrites a forward model (before `train-autodiff`) to compute in bf16:
    every `train.param` is an f32 master weight (a parameter declared bf16
    becomes f32: an f32 model with this pass and a bf16 model give the same
    program), narrowed once at the top of the model (`train.convert ... to
    bf16`): one bf16 copy that all its reads share (a tied embedding's
    lookup and head; `train-autodiff` sums their gradients in f32); float
    inputs are narrowed too. Run after `train-grad-accumulation`, the copy
    is made once per step, outside the micro-batch loop. Every op then takes
    the element type its operands give it (its type inference; an op
    without one, such as `train.reshape`, takes its operands' type), so
    activations are bf16, and:
    - scalars are f32: a loss takes bf16 logits and returns f32 (its
      kernel computes in f32); an op that would make a bf16 scalar (a full
      reduction) runs in f32, its bf16 operands widened first;
    - an op that cannot take bf16 operands runs in f32 between converts;
    - a loop's carries, slices and invariants take their operands' types.
    The kernels compute in f32 and round each result once (matmuls
    accumulate in f32; norm statistics, softmax and the loss are f32 inside
    their kernels). The backward then follows from autodiff: the
    gradient of each master weight goes back through its convert, widened
    where it is made (autodiff's `widenGradients`), so it is f32 (what
    accumulation, the data-parallel reduction and the optimizer see), and
    the optimizer's state is f32.

    ```mlir
    %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x4xf32>
    %w_bf16 = train.convert %w to bf16 : tensor<16x4xf32>
    %y = train.matmul %x_bf16, %w_bf16 : tensor<8x16xbf16>, tensor<16x4xbf16>
    ```
  }];
  let statistics = [
    Statistic<"numNarrowed", "narrowed", "Parameters and inputs narrowed to bf16">,
    Statistic<"numWidened", "widened", "Ops kept in f32 between converts">,
  ];
}

def TrainDecomposeAttention : Pass<"train-decompose-attention", "::mlir::ModuleOp"> {
  let summary = "Rewrite train.attention into its reference decomposition";
  let description = [{
    Replaces every `train.attention` by the ops that define it: the scores
    q k^T, scaled by 1/sqrt(head_dim), masked above the diagonal when causal,
    a softmax over the keys, and the product with v. The result is the
    reference against which the fused op and its kernels are checked, and a
    way to differentiate attention through its parts.

    ```mlir
    %a = train.attention %q, %k, %v causal : tensor<2x4x8x16xf32>
    ```
    becomes
    ```mlir
    %s = train.matmul %q, %k transpose_rhs : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
    %c = train.scale %s by 2.500000e-01 : tensor<2x4x8x8xf32>
    %m = train.causal_mask %c fill 0xFFF0000000000000 : tensor<2x4x8x8xf32>
    %p = train.softmax %m : tensor<2x4x8x8xf32>
    %a = train.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>
    ```
  }];
  let statistics = [
    Statistic<"numDecomposed", "decomposed", "Number of attention ops rewritten">,
  ];
}

def DistMesh : Pass<"dist-mesh", "::mlir::ModuleOp"> {
  let summary = "Set the device mesh, with each axis's role, on every model";
  let description = [{
    The one place a mesh enters the IR: parses `mesh` as loomc's `--mesh`
    writes it (`pp=2,dp=4,tp=2`; an axis whose name implies no role states
    it, `stage=2:pipeline`) and sets `dist.mesh` on every `train.model`.
    Every later pass, the code generator and the report read the mesh and
    its axes' roles from there (`dist::MeshAttr::lookup`,
    `getAxis(AxisRole::Pipeline)`). A model that already carries another
    mesh is an error; the same mesh again is left as it is.

    ```mlir
    // --dist-mesh="mesh=pp=2,dp=2"
    train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2, "dp" = 2]>}
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "The mesh, AXIS=SIZE[:ROLE],... outermost first">,
  ];
  let dependentDialects = ["::loom::dist::DistDialect"];
}

def DistSplitProjections : Pass<"dist-split-projections", "::mlir::ModuleOp"> {
  let summary = "Store a fused projection whose output is only sliced as one part per slice";
  let description = [{
    Runs on the forward model of a mesh with a tensor axis (of size 2 or
    more; otherwise it does nothing), before the backward exists. A
    `train.matmul` whose weight (a `train.param`, or a layer's slice of one
    stacked into a `train.repeat`) nothing else reads, optionally plus a
    bias vector read only there, and whose output only `train.slice`s of
    its last dimension read, covering it once (QKV: a `[d, 3d]` projection
    sliced into q, k and v), becomes one projection per slice over one
    part of the weight and one of the bias (`dist.part`, the columns of
    the slice: initialization, `--init-from` and `--export` read and write
    the parts' blocks of the tensor the user wrote). Megatron-LM's tensor
    parallelism then splits each projection by its output features (the
    heads): a rank's share of the user's weight is one column range per
    slice, and nothing is gathered for attention. The slices may differ in
    size (grouped-query attention's narrower k and v).

    ```mlir
    %qkv0 = train.matmul %a, %w : tensor<8x16xf32>, tensor<16x48xf32>
    %qkv = train.add %qkv0, %b : tensor<8x48xf32>, tensor<48xf32>
    %q = train.slice %qkv offsets [0, 0] sizes [8, 16] : tensor<8x48xf32>
    ...
    ```
    becomes, with `%w` and `%b` stored as `w[:, 0:16]`, `w[:, 16:32]`,
    `w[:, 32:48]` and `b[0:16]`, ... :
    ```mlir
    %q0 = train.matmul %a, %wq : tensor<8x16xf32>, tensor<16x16xf32>
    %q = train.add %q0, %bq : tensor<8x16xf32>, tensor<16xf32>
    ...
    ```
  }];
  let dependentDialects = ["::loom::dist::DistDialect"];
}

def DistShardingPropagation : Pass<"dist-sharding-propagation", "::mlir::ModuleOp"> {
  let summary = "Give every value of a training step a sharding over the mesh";
  let description = [{
    Runs on the training step (after `train-optimizer`) of every model that
    has a `dist.mesh` (set by `dist-mesh`). Starting from
    the user's annotations (`dist.sharding` on an op: one `#dist.sharding`
    per result; closed dimensions are frozen) and a preset, it sweeps the
    ops forward and backward until nothing changes. Each op's
    `ShardingRuleOpInterface` maps its dimensions to factors: the axes of a
    factor pass between the operands and results that share it, a
    need-replication factor never gets any, and where two tensors disagree
    the longer compatible list wins, else the stronger (a closed
    annotation over a propagated one, a higher priority `pN` over a lower),
    else the first operand's (deterministic; counted as a conflict); an
    axis that two factors of an op claim goes to the one its tensors favour. A `train.repeat` is
    one body: its operands, block arguments, yields and results share their
    shardings, so a 96-layer stack is partitioned once.

    Then partial sums: a result lacking a factor that its operands have and
    that is sharded (a contraction, a sum over the batch) is unreduced over
    those axes; linear ops pass the state on (a sum of partial sums, a
    product with one partial factor, a gradient accumulator across
    micro-batches, whose zero initial value is a partial sum of anything);
    any other use needs the whole value, which becomes an explicit
    `dist.all_reduce` after its definition, shared by all its uses. So with
    `dp` and micro-batches, gradients are reduced once, after the last
    micro-batch.

    Presets: `dp` splits the batch (leading) dimension of every input over
    the mesh's data axis (the rows of each micro-batch when the batch was split
    into micro-batches; a batch that does not divide gets a warning);
    `megatron` splits weights over the tensor axis as Megatron-LM does: a linear layer
    fed (through pointwise and shape ops) by another's output features is
    row-parallel and the other column-parallel (the MLP), and one fed by an
    op that combines several activations on those features (attention's
    heads) is row-parallel (the output projection); `auto` is both, for
    the axes the mesh has. The preset's weight splits are frozen, as a
    user's annotations are. With `sequence-parallel`, the residual stream
    between blocks (each repeat's carries, [batch, sequence, ...]) is split
    along the sequence over the tensor axis as in Megatron-LM's sequence parallelism:
    the norms, dropouts and residual adds work on a block of the sequence,
    column-parallel layers gather it and row-parallel layers reduce-scatter
    onto it.

    ```mlir
    train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
      %x = train.input "x" : tensor<8x16xf32>
      %w = train.param "w" init(#train.init<zeros>) : tensor<16x4xf32>
      %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
      ...
    ```
    with `preset=dp` gives `%x` the sharding `#dist.sharding<[{"dp"}, {} ]>`,
    `%y` the same, and the weight gradient (a contraction over the batch)
    `#dist.sharding<[{}, {} ], unreduced = {"dp"}>`, reduced by a
    `dist.all_reduce %dw over ["dp"]` before the optimizer reads it.
  }];
  let options = [
    Option<"preset", "preset", "std::string", "\"none\"",
           "Annotations to start from: none, dp, megatron or auto">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Split the residual stream between blocks along the sequence over tp">,
  ];
  let dependentDialects = ["::loom::dist::DistDialect"];
  let statistics = [
    Statistic<"numConflicts", "conflicts", "Factors on which two tensors disagreed">,
    Statistic<"numSweeps", "sweeps", "Forward and backward sweeps to the fixpoint">,
    Statistic<"numReductions", "reductions", "All-reduces of partial sums inserted">,
  ];
}

def DistZero : Pass<"dist-zero", "::mlir::ModuleOp"> {
  let summary = "ZeRO: split the optimizer step's state over the data axis";
  let description = [{
    Runs on the training step (after `train-optimizer`), before
    `dist-sharding-propagation`, on every model with a `dist.mesh` that has
    a data axis. It records the stage as `dist.zero` on the model, and
    propagation, once the data and tensor splits have settled, splits what
    the stage names over the data axis, on one dimension of each
    parameter's (for a stacked parameter, of each layer's slice: the
    first dimension that no other axis splits and that divides, as FSDP2
    splits dimension 0 of each parameter):

    - stage 1: the optimizer state. The update runs on this rank's block of
      each parameter, its gradient and its state; the updated blocks are
      all-gathered into the whole parameter. The gradients stay whole and
      unreduced until the optimizer (accumulated in full over
      micro-batches), where each is reduce-scattered once: `dist-zero`
      inserts that reduction (`dist.all_reduce` over the data axis) after
      each gradient the optimizer reads, and partitioning turns it into a
      `dist.reduce_scatter` because its result is split over the axis it
      reduces. Per step the bytes of one all-reduce.
    - stage 2: the gradients too: a gradient is split wherever it is
      made, so each layer's weight gradient is reduce-scattered right
      after the op that makes it, for every micro-batch, into an
      accumulator of one block; the whole gradient is never kept.
    - stage 3: the parameters too: each is stored as its block and
      gathered whole before each use, in the forward and again in the
      backward (inside the layer loops, one layer at a time).

    The clipping norm is summed over the blocks (one scalar all-reduce).
    A parameter with no dimension that divides by the data axis stays
    whole (a remark names it). `stage=0` does nothing.

    ```mlir
    // --dist-zero="stage=1" on a model with dist.mesh = #dist.mesh<["dp" = 4]>
    train.model @m attributes {dist.mesh = ..., dist.zero = 1 : i64} {
      ...
      %g = dist.all_reduce %dw over ["dp"] : tensor<16x4xf32>
      %w1, %m1, %v1 = train.adamw_update %w, %g, %m, %v ...
    ```
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "0",
           "0 (no ZeRO), 1 (optimizer state), 2 (and gradients), 3 (and parameters)">,
  ];
  let dependentDialects = ["::loom::dist::DistDialect"];
}

def DistPartition : Pass<"dist-partition", "::mlir::ModuleOp"> {
  let summary = "Turn a sharded training step into the program of one rank";
  let description = [{
    Runs after `dist-sharding-propagation`. Every value gets its per-rank
    type (each sharded dimension divided by the product of its axes' sizes;
    propagation never splits a dimension unevenly, and an annotation that
    would is rejected there). Where an op needs an operand sharded otherwise
    than it is, the value is resharded once for all such uses: axes dropped
    from a dimension are gathered (`dist.all_gather`), axes added are taken
    locally (`dist.shard`, no communication); a dimension whose axes change
    order is gathered, then split again. A partial sum whose every use takes
    a block over the axes it is summed over becomes one
    `dist.reduce_scatter` (a weight gradient whose update is sharded). Parameters, inputs and optimizer
    state keep their whole shapes in the runtime's tables; a sharded use
    takes its block with `dist.shard`. Ops whose local computation differs
    adjust themselves through `ShardingRuleOpInterface::localize`: a
    cross-entropy over a block of the positions is weighted by its share of
    the labelled tokens (all-reduced), a mean over a sharded dimension is
    divided by the number of blocks, and dropout keys its mask by global
    indices.

    ```mlir
    %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {} ]>]} : tensor<8x16xf32>
    %y = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
    ```
    becomes, on dp = 2,
    ```mlir
    %x = train.input "x" : tensor<8x16xf32>
    %xs = dist.shard %x axes [["dp"], [] ] : tensor<8x16xf32> -> tensor<4x16xf32>
    %y = train.matmul %xs, %w : tensor<4x16xf32>, tensor<16x4xf32>
    ```
  }];
  let dependentDialects = ["::loom::dist::DistDialect"];
  let statistics = [
    Statistic<"numShards", "shards", "dist.shard ops inserted">,
    Statistic<"numGathers", "gathers", "dist.all_gather ops inserted">,
    Statistic<"numReduceScatters", "reduce-scatters",
              "All-reduces whose every use takes a block, made reduce_scatters">,
  ];
}

def DistCommOpt : Pass<"dist-comm-opt", "::mlir::ModuleOp"> {
  let summary = "Overlap collectives with compute";
  let description = [{
    Runs on the rank program (after `dist-partition`). An all-reduce of a
    repeat's stacked result (the gradients of a stack of layers) becomes an
    all-reduce of each slice inside the iteration that yields it, so a
    layer's gradient reduction starts while the backward pass of the
    earlier layers runs; an all-reduce of a gradient accumulated over
    micro-batches stays after the loop (once per step). Then every sum
    all-reduce becomes a `dist.all_reduce_start` right after its operand is
    defined and a `dist.wait` right before its first use, so the runtime's
    communication stream works while the rank computes.

    ```mlir
    %g = train.matmul %x, %dy transpose_lhs : ...
    %r = dist.all_reduce %g over ["dp"] : tensor<16x4xf32>
    %n = train.sum_squares %other : ...
    %u = train.sgd_update ... %r ...
    ```
    becomes
    ```mlir
    %g = train.matmul %x, %dy transpose_lhs : ...
    %s = dist.all_reduce_start %g over ["dp"] : tensor<16x4xf32>
    %n = train.sum_squares %other : ...
    %r = dist.wait %s : tensor<16x4xf32>
    %u = train.sgd_update ... %r ...
    ```
    Then starts over the same axes are merged into buckets of at most
    `bucket-bytes` (as PyTorch DDP's buckets, 25 MiB by default): one
    collective and one ring's latencies for many small gradients. A bucket
    starts where its last member would, so a member joins only while that
    still precedes every member's wait.

    Last, a wait inside a loop whose results the body only yields as
    stacked slices (a layer's reduced gradients) is deferred past the loop:
    the body yields the start's results, and one `dist.wait` on the loop's
    stacked results, right before the first op that reads one (the
    clipping norm, else the optimizer), completes every iteration's
    reduction, so layer i's gradients are reduced during the backward of
    the layers after it. A pipeline's stages (guarded ops) and a schedule's
    loops keep their waits in the iteration. With `overlap=false` every
    wait follows its start instead (blocking collectives: the baseline of
    `bench/comm-overlap.sh`).

    ```mlir
    %g = train.repeat 4 reverse ... {
      ...
      %s = dist.all_reduce_start %dw over ["dp"] : tensor<16x4xf32>
      train.yield ... stacked(%s : tensor<16x4xf32>)
    }
    %r = dist.wait %g : tensor<4x16x4xf32>
    %n = train.sum_squares %r ...
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "25 << 20",
           "Largest bucket of all-reduces merged into one collective">,
    Option<"overlap", "overlap", "bool", "true",
           "Defer waits to where the results are read (false: each wait "
           "right after its start)">,
  ];
  let dependentDialects = ["::loom::dist::DistDialect"];
  let statistics = [
    Statistic<"numMovedIntoRepeats", "moved-into-repeats",
              "All-reduces of stacked results made per-iteration">,
    Statistic<"numAsync", "async", "All-reduces made asynchronous">,
    Statistic<"numBucketed", "bucketed",
              "All-reduces merged into another's bucket">,
    Statistic<"numDeferred", "deferred",
              "Waits deferred past their loop">,
  ];
}

def DistPipelinePartition : Pass<"dist-pipeline-partition", "::mlir::ModuleOp"> {
  let summary = "Cut the forward model into pipeline stages balanced by the cost model";
  let description = [{
    Runs on the forward model (before `train-autodiff`). The model is a
    chain of units: each iteration of a `train.repeat` (a layer) and each
    run of other ops between repeats (the embedding before the layers, the
    head and the loss after them). A unit costs the roofline time of its
    ops from their cost interface (flops, or bytes at `balance` flops per
    byte when an op moves more than it computes) and holds its parameters'
    model states (16 bytes per parameter byte's 4 with AdamW, less with
    SGD) and its activations for the micro-batches in flight (at most the
    pipeline ranks, as 1F1B's first stage holds). The chain is cut into
    P x V contiguous stages (P the size of the mesh's pipeline axis, from
    `dist.mesh`, which `dist-mesh` sets; V virtual stages
    per rank; stage s runs on pipeline rank s mod P) minimising the slowest
    stage's cost with every stage within `memory-limit`: an exact dynamic
    program over the cut points.

    The decision is recorded: `dist.stage` on each op outside repeats,
    `dist.stages` (one per layer) on each repeat, `dist.stages` on each
    parameter (the stages that use it: two for an embedding tied to the
    output projection), and `dist.pipeline` on the model (ranks, virtual
    stages, each unit's cost, each stage's cost, the bottleneck). A model
    with fewer units than stages, or one no cut fits in memory, is an error.
  }];
  let options = [
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Stages per pipeline rank (interleaved schedules)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step (activations in flight)">,
    Option<"memoryLimit", "memory-limit", "int64_t", "0",
           "Bytes a stage may hold (0: no limit)">,
    Option<"balance", "balance", "double", "20.0",
           "Flops per byte of the device (roofline ridge point)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::loom::dist::DistDialect"];
}

def DistPipelineSplit : Pass<"dist-pipeline-split", "::mlir::ModuleOp"> {
  let summary = "Cut repeats at the pipeline stage boundaries the partition chose";
  let description = [{
    After `dist-pipeline-partition`, a `train.repeat` whose layers lie on
    several stages (`dist.stages`) becomes one repeat per run of layers on
    one stage, each with `dist.stage`: it takes its layers' slices of the
    stacked operands (`train.slice`, on that stage), carries what the part
    before it yields, and numbers its iterations from its first layer, so
    ops keyed by the layer index (dropout streams) behave as before. Every
    op of the forward model then runs on one stage, which `train-autodiff`
    passes on to the ops of its backward.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def DistPipelineReduce : Pass<"dist-pipeline-reduce", "::mlir::ModuleOp"> {
  let summary = "Make the pipeline stages' partial gradients and loss whole";
  let description = [{
    Runs after `train-autodiff` (whose backward ops carry their forward
    op's `dist.stage`) and before `train-optimizer`. Each rank will run the
    ops of its stages and hold zeros for the others' (an op on no stage
    runs on every rank), so the loss and the gradients are partial sums
    over the pipeline (an embedding tied to the head gets its two stages'
    parts); one all-reduce over `pp` each makes them whole on every rank,
    which then takes the same optimizer step, global-norm clipping
    included.
  }];
  let dependentDialects = ["::loom::dist::DistDialect"];
}

def DistPipelineTransfers : Pass<"dist-pipeline-transfers", "::mlir::ModuleOp"> {
  let summary = "Send values between pipeline stages; stages become ranks";
  let description = [{
    Runs on the rank program's types: after `dist-pipeline-reduce` on a pp
    mesh, after `dist-partition` when the mesh also has dp or tp (whose
    collectives `dist-partition` adds run on every rank, on zeros off their
    stage). A staged op that reads a value another stage made gets it by
    `dist.send` on the producer's rank and `dist.recv` on its own, placed
    right after the value is made, so every rank meets the pair at the same
    point of the program; an op reading a value several stages hold parts
    of is an error, and so is a value read by another stage on the same
    rank (interleaved stages run in different actions of the schedule).
    Each staged op gets `dist.on`, the ranks that run it (stage modulo the
    pp size), and keeps `dist.stage`; a send carries its producer's stage,
    a receive its reader's. The backward micro-batch loop then accumulates
    each stage's part of a gradient in a carry of its own, updated by an op
    of that stage, instead of adding every stage's part padded to the
    whole parameter in every iteration; the padding and the sum over
    stages happen once after the loop.

    In program order the micro-batch loop of `train-grad-accumulation` runs
    the forwards of all micro-batches, then their backwards (GPipe's
    order). Under a schedule (`dist.schedule`, which loomc records) the code
    generator runs each action's stage and micro-batch instead: iteration
    `mb` of the forward or backward loop, with the ops of `dist.stage` equal
    to the action's stage, the others' results zero.
  }];
  let dependentDialects = ["::loom::dist::DistDialect"];
}

def DistPipelineFoldAccumulations : Pass<"dist-pipeline-fold-accumulations", "::mlir::ModuleOp"> {
  let summary = "A stage's layer loop adds its gradients into the stage's accumulator";
  let description = [{
    After `dist-pipeline-transfers` (and `dist-pipeline-split-backward`,
    which splits the layer loops first): in a pipeline's backward
    micro-batch loop (and its weight part), an accumulator `acc + g`, where
    g is the stacked result of a stage's layer loop that nothing else
    reads, becomes the layer loop's own: it reads the accumulator as one
    more stacked operand and yields each layer's slice plus its gradient,
    as `train-interleave-micro-batches` does without a pipeline. The same
    adds; a micro-batch's layer gradients are no longer a tensor of their
    own in the arena, and the code generator writes each sum into the
    accumulator.
  }];
}

def DistPipelineSchedule : Pass<"dist-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "Record the pipeline schedule the rank program runs";
  let description = [{
    Builds the schedule (`gpipe`, `1f1b`, `interleaved`, `zb`) for the
    pipeline `dist-pipeline-partition` recorded (`dist.pipeline`: ranks and
    virtual stages), or reads it from a CSV file (one row of actions such as
    `1F3` per rank), checks it against the pipeline and by simulation (every
    micro-batch on every stage, on its rank, transfers in order, no
    deadlock), and puts it in the rank program: a `dist.schedule` right
    after the micro-batch loops it runs, with one `dist.rank_actions` per
    pipeline rank listing its `dist.action`s in order, each with the slot
    that keeps its micro-batch's saved values, and the slots a stage needs.
    The code generator's driver runs the actions and its memory plan keeps
    the slots; `dist-verify-communication` proves the order the actions
    run. GPipe's order with one stage per rank is the program order and
    needs no schedule; nor does a pipeline of one micro-batch (no
    micro-batch loop).
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved, zb, or a CSV file">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">
  ];
}

def DistPipelineSplitBackward : Pass<"dist-pipeline-split-backward", "::mlir::ModuleOp"> {
  let summary = "Split the pipeline's backward into input- and weight-gradient parts";
  let description = [{
    For zero-bubble schedules (ZB-H1, after Qi et al. 2024), which run a
    stage's backward as two actions: I, the gradient of the stage's input
    that the previous stage waits for, and W, the gradients of its weights,
    deferred into the bubble. Runs on the rank program after
    `dist-pipeline-transfers`.

    Each stage's layer backward (a reverse repeat on a stage) splits into
    a repeat of the chain of input gradients, which stacks per layer what
    the weight gradients read, and a repeat of the weight gradients. Then
    the backward micro-batch loop splits the same way: its input part
    (`dist.backward = "input"`) runs what the transfers need (the gradients
    a stage receives and sends back), its weight part (`dist.backward =
    "weight"`, right after it) the rest, reading the input part's values
    stacked per micro-batch. Such a value made by an op of no stage takes
    the stage of its operands (an error where they have several), and an
    op of no stage in the weight part (a sum over stages) reads it through
    a copy on its stage. Carries stay with the part that updates them; the
    input part reading the weight part's carry is an error. Index
    arithmetic and slices of the weights are recomputed by each part
    rather than stacked, and ops whose results nothing reads (the loss the
    backward recomputes) are erased before the split.
  }];
  let dependentDialects = ["::loom::dist::DistDialect"];
}

def DistPrefetch : Pass<"dist-prefetch", "::mlir::ModuleOp"> {
  let summary = "Gather a layer loop's next layer while the current one computes";
  let description = [{
    Runs on the rank program (after `dist-partition`). In a `train.repeat`
    (a layer loop, forward or reverse) whose body gathers a block of one of
    its stacked operands (ZeRO-3's parameters, gathered before each use),
    iteration i starts the gather of layer i+1 (i-1 in a reverse loop) as
    its first op and waits for it as its last, so the gather runs on the
    communication stream during layer i's compute, as FSDP's and
    DeepSpeed's prefetch do. The gathered layer reaches the next iteration
    as a carry; the first iteration's is gathered before the loop, and the
    last iteration, which has no next layer, gathers nothing. Each rank
    holds two gathered layers at once instead of one: the report's memory
    plan counts both, and sends the same bytes. A pipeline schedule's
    micro-batch loops, whose iterations run interleaved, are left alone.

    ```mlir
    train.repeat 4 ... stacked(%w : tensor<4x16x96xf32>) ... {
    ^bb0(%i: index, %c: tensor<8x32xf32>, %wi: tensor<16x96xf32>):
      %g = dist.all_gather %wi over ["dp"] dim 0 : tensor<16x96xf32> -> tensor<32x96xf32>
      %y = train.matmul %c, %g : ...
    ```
    becomes
    ```mlir
    %first = arith.constant 0 : index
    %s0 = dist.all_gather_start %w at %first over ["dp"] dim 0 : tensor<4x16x96xf32> -> tensor<32x96xf32>
    %g0 = dist.wait %s0 : tensor<32x96xf32>
    train.repeat 4 ... carry(..., %g0 : ...) stacked(%w : ...) invariant(%w : ...) ... {
    ^bb0(%i: index, %c: tensor<8x32xf32>, %g: tensor<32x96xf32>, %wi: tensor<16x96xf32>, %whole: tensor<4x16x96xf32>):
      %one = arith.constant 1 : index
      %next = arith.addi %i, %one : index
      %s = dist.all_gather_start %whole at %next over ["dp"] dim 0 : tensor<4x16x96xf32> -> tensor<32x96xf32>
      %y = train.matmul %c, %g : ...
      ...
      %n = dist.wait %s : tensor<32x96xf32>
      train.yield carry(..., %n : ...)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::loom::dist::DistDialect"];
}

def DistVerifyCommunication : Pass<"dist-verify-communication", "::mlir::ModuleOp"> {
  let summary = "Prove before launch that every rank's communication matches and completes";
  let description = [{
    Runs on the rank program (after `dist-partition` and `dist-comm-opt`;
    `loomc` runs it on every build). For each rank it lists the
    communication the rank issues, in program order with repeats unrolled:
    collectives over groups of mesh axes, and `dist.send` / `dist.recv`
    halves. An op with `dist.on` (a dictionary of axis coordinates) or
    `dist.ranks` (world ranks) runs only on those ranks. It then simulates
    the blocking order: a collective completes when every member of its
    group (the ranks that differ only on its axes) has reached it; a send
    completes when its peer has reached the matching receive (a rendezvous,
    so an order that only buffering could save is rejected).

    Errors name the ranks, the group and both ops with their locations:
    members of a group that reach different collectives (another kind,
    reduction, element type or element count); a send whose receive has
    another type; a rank whose send, receive or collective can never
    complete because its peer or a member has nothing left (an unmatched
    send); ranks that wait on each other in a cycle, listed in order.

    A rank's program depends only on its coordinates on the axes that
    `dist.on` and point-to-point ops name (every axis when `dist.ranks` is
    used), so the ranks whose other coordinates are 0 stand for their
    classes: a data- and tensor-parallel program is one class whatever the
    mesh, a pipeline one class per stage. What was proved is recorded on
    the model as `dist.verified` (ranks simulated, of how many, the class
    axes, the busiest rank's operations), which `loomc --report` prints.

    ```mlir
    // error: ranks 0 and 1 disagree on collective 2 over dp: rank 0 issues
    //   'dist.all_reduce' of 64 x f32, rank 1 issues 'dist.all_reduce' of 63 x f32
    // error: the ranks' communication cannot complete: ranks 0 -> 2 -> 0
    //   wait on each other in a cycle
    ```

    That asynchronous collectives are waited before their buffers are
    reused is a property of the memory plan, checked where buffers are
    placed (`loom-memory-plan`, `loom-lower-to-runtime`).
  }];
  let options = [
    Option<"everyRank", "every-rank", "bool", "false",
           "Simulate every rank, not one per class of equivalent ranks">,
  ];
  let statistics = [
    Statistic<"numCollectives", "collectives",
              "Communication ops issued by the busiest rank">,
    Statistic<"numRankClasses", "rank-classes",
              "Ranks simulated (one per class of equivalent ranks)">,
  ];
}

def DistInjectCommFault : Pass<"dist-inject-comm-fault", "::mlir::ModuleOp"> {
  let summary = "Test pass: make one rank's communication wrong";
  let description = [{
    Rewrites a valid rank program so that rank `rank` gets communication op
    number `index` (collectives, sends and receives, in program order)
    wrong: `skip` (it does not issue it: a skipped collective, or an
    unmatched send when the op is a receive), `swap` (it issues it after
    the next one it runs: swapped collectives, or a send/receive cycle),
    `count` (over a tensor one element shorter in its last dimension) or
    `type` (over bf16). The other ranks keep the original (`dist.ranks`).
    `dist-verify-communication` must reject each.
  }];
  let options = [
    Option<"fault", "fault", "std::string", "\"skip\"",
           "skip, swap, count or type">,
    Option<"rank", "rank", "int64_t", "1", "The world rank that goes wrong">,
    Option<"index", "index", "int64_t", "0",
           "Which communication op, in program order">,
  ];
}

#endif // LOOM_PASSES_TD
