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
  }];
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
    parameter's gradient across micro-batches and holds the activations of
    one micro-batch at a time (each micro-batch's forward is recomputed in
    the backward pass).

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

def TrainOptimizer : Pass<"train-optimizer", "::mlir::ModuleOp"> {
  let summary = "Add the optimizer step: clipping, schedule, SGD or AdamW";
  let description = [{
    Turns a differentiated model into a full training step. From the model's
    attributes it builds: the learning rate at the current step
    (`train.lr_schedule` over `#train.schedule`: linear warm-up, then
    constant, linear or cosine decay); when `clip_norm` is set, the global
    gradient norm over all parameters and the clip factor that scales every
    gradient; and one update per parameter (`train.sgd_update` with momentum,
    or `train.adamw_update` with decoupled weight decay, none for `no_decay`
    parameters). Optimizer state (momentum, first and second moments) becomes
    named `train.state` values, declared after their parameter; the new value
    of every parameter and state is listed in `train.output updates(...)`.

    ```mlir
    %it = train.iteration : tensor<f32>
    %lr = train.lr_schedule #train.schedule<lr = 1.0e-3, warmup = 10, total = 100, decay = cosine> at %it
    %n = train.global_norm %dw : tensor<16x4xf32>
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

#endif // LOOM_PASSES_TD
