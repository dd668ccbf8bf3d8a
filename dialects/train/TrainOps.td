//===- TrainOps.td - train dialect operations -----------------------------===//

#ifndef LOOM_TRAIN_OPS_TD
#define LOOM_TRAIN_OPS_TD

include "dialects/train/TrainBase.td"
include "dialects/train/TrainInterfaces.td"
include "dialects/common/Bounds.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Train_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Train_IndexTensor : RankedTensorOf<[I32, I64]>;
def Train_AnyTensor : RankedTensorOf<[F32, BF16, I32, I64]>;
def Train_Scalar : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

//===----------------------------------------------------------------------===//
// Op classes
//===----------------------------------------------------------------------===//

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, !listconcat([Loom_BoundedShapes], traits)>;

// A computation whose result type is inferred in C++ (inferReturnTypes).
// Unless `kernel` is overridden, the op lowers to its runtime kernel with
// the default slots.
class Train_ComputeOp<string mnemonic, list<Trait> traits = [],
                      Trait kernel = Train_KernelOpInterface>
    : Train_Op<mnemonic, !listconcat(traits,
        [Pure, InferTypeOpAdaptor, kernel])>;

// A computation whose result type follows from its type constraints (ODS
// derives the inference); further rules live in its verifier.
class Train_TypedOp<string mnemonic, list<Trait> traits = [],
                    Trait kernel = Train_KernelOpInterface>
    : Train_Op<mnemonic, !listconcat(traits,
        [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>, kernel])>;

// The result may be written over an operand of the same type that nothing
// reads after (TrainDialect.h).
def Train_PointwiseKernel : NativeOpTrait<"PointwiseKernel"> {
  let cppNamespace = "::loom::train";
}

// Pointwise functions of one tensor. Each names its backward rule in C++.
class Train_UnaryOp<string mnemonic, string formula>
    : Train_TypedOp<mnemonic, [SameOperandsAndResultType, Train_PointwiseKernel,
        DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
        Train_CostOpInterface]> {
  let summary = "pointwise " # mnemonic;
  let description = "Elementwise `" # formula # "`.";
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// Elementwise functions of two tensors with numpy broadcasting.
class Train_BinaryOp<string mnemonic, string formula>
    : Train_ComputeOp<mnemonic, [Train_PointwiseKernel,
        DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
        Train_CostOpInterface]> {
  let summary = "elementwise " # mnemonic # " with broadcasting";
  let description = "`" # formula # "`, with numpy broadcasting: dimensions "
    # "are aligned from the right and a dimension of size 1 (or a missing one) "
    # "stretches to the other operand's size. The backward rule sums the "
    # "gradient over broadcast dimensions (`train.sum_to`).";
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::loom::train::detail::inferBroadcast(loc, getOperationName(),
          adaptor.getLhs().getType(), adaptor.getRhs().getType(), types);
    }
  }];
}

// Gradients of pointwise functions: f'(input) * grad.
class Train_UnaryGradOp<string mnemonic, string of>
    : Train_TypedOp<mnemonic, [AllTypesMatch<["input", "grad", "result"]>,
        Train_PointwiseKernel, Train_CostOpInterface]> {
  let summary = "backward of `train." # of # "`";
  let description = "Returns `grad * d" # of # "/dx` evaluated at `input` "
    # "(for tanh, `input` is the forward result).";
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$grad);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def Train_ModelOp : Train_Op<"model", [Symbol, SingleBlock, IsolatedFromAbove,
    NoRegionArguments]> {
  let summary = "a model: parameters, inputs, forward pass, loss, optimizer";
  let description = [{
    The body declares parameters and inputs, computes the loss and ends with
    `train.output`. The optimizer (`#train.sgd` or `#train.adamw`), the
    learning-rate schedule and the global-norm clipping threshold are
    attributes; `train-optimizer` reads them.

    ```mlir
    train.model @mlp attributes {optimizer = #train.sgd<momentum = 0.9>,
                                 schedule = #train.schedule<lr = 0.1>} {
      %w = train.param "w" init(#train.init<normal, 0.02>) : tensor<16x4xf32>
      %x = train.input "x" : tensor<8x16xf32>
      %y = train.input "y" : tensor<8xi32>
      %logits = train.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
      %loss = train.cross_entropy %logits, %y : tensor<8x4xf32>, tensor<8xi32>
      train.output loss(%loss : tensor<f32>)
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<AnyAttrOf<[Train_SGDAttr, Train_AdamWAttr]>>:$optimizer,
                       OptionalAttr<Train_ScheduleAttr>:$schedule,
                       OptionalAttr<F64Attr>:$clip_norm);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The terminator of the body.
    OutputOp getOutput();
    /// The values whose final value is carried from one step to the next, in
    /// body order: `train.param` then `train.state` results interleaved as
    /// they are declared. `train.output`'s updates follow this order.
    ::llvm::SmallVector<::mlir::Operation *> getStateOps();
  }];
}

def Train_ParamOp : Train_Op<"param", [Pure, HasParent<"ModelOp">]> {
  let summary = "a named trainable parameter";
  let description = [{
    Its value at the start of the step. `no_decay` exempts it from weight
    decay (biases and norm gains, by convention). A parameter used twice
    (tied embeddings) is one `train.param` with two uses; its gradient is the
    sum of both.
  }];
  let arguments = (ins StrAttr:$name, Train_InitAttr:$init, UnitAttr:$no_decay);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $name `init` `(` $init `)` (`no_decay` $no_decay^)? attr-dict `:` type($result)
  }];
}

def Train_StateOp : Train_Op<"state", [Pure, HasParent<"ModelOp">]> {
  let summary = "named optimizer state carried between steps";
  let description = [{
    Created by `train-optimizer` (momentum, first and second moments), zero at
    the first step; `of` names the parameter it belongs to.
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$of);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$name `of` $of attr-dict `:` type($result)";
}

def Train_InputOp : Train_Op<"input", [Pure, HasParent<"ModelOp">]> {
  let summary = "a named input of one step (features, token ids, labels)";
  let arguments = (ins StrAttr:$name);
  let results = (outs Train_AnyTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Train_IterationOp : Train_Op<"iteration", [Pure, HasParent<"ModelOp">]> {
  let summary = "the 0-based index of the current optimizer step";
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Train_OutputOp : Train_Op<"output", [Terminator, HasParent<"ModelOp">,
    AttrSizedOperandSegments]> {
  let summary = "ends a model: the loss, then gradients, then updates";
  let description = [{
    A model as written returns its loss. `train-autodiff` adds one gradient
    per `train.param`, in declaration order; `train-optimizer` consumes them
    and adds one new value per carried value (`train.param` and `train.state`,
    in declaration order).
  }];
  let arguments = (ins Train_Scalar:$loss, Variadic<Train_FloatTensor>:$grads,
                       Variadic<Train_FloatTensor>:$updates);
  let assemblyFormat = [{
    `loss` `(` $loss `:` type($loss) `)`
    (`grads` `(` $grads^ `:` type($grads) `)`)?
    (`updates` `(` $updates^ `:` type($updates) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Train_RepeatOp : Train_Op<"repeat", [SingleBlock, IsolatedFromAbove,
    AttrSizedOperandSegments, AttrSizedResultSegments,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface, ["prepareForBackward"]>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops", "getBytesRead", "getBytesWritten", "getMatmulFlops", "getAttentionFlops"]>]> {
  let summary = "a block repeated `count` times over stacked parameters";
  let description = [{
    A scan: the body runs `count` times. `carry` values flow from one
    iteration to the next; each `stacked` operand has a leading dimension of
    size `count` and iteration i sees slice i of it (the parameters of layer
    i); `invariant` values are the same in every iteration. The body's block
    arguments are the iteration index, the carries, the slices and the
    invariants. Its `train.yield` gives the next carries and one slice of each
    stacked result. With `reverse`, iterations run from count-1 down to 0.
    With `saving_carries` (set by `train-autodiff`) the last stacked results
    are the carries as they entered each iteration, kept for the backward
    pass; the body yields them as its last stacked slices.

    With `residuals(n)` the backward reads what the forward saved and
    recomputes nothing of the iteration: the `n` stacked results before the
    saved carries are the values of the body its backward reads (one slice
    per iteration). A repeat written with `residuals(0)` asks
    `train-autodiff` for this (`train-grad-accumulation` asks it for the
    micro-batch loop); the pass chooses the values and sets `n`.

    A transformer of 96 layers is one `train.repeat` of count 96; every pass
    keeps it one body, so IR size and compile time do not grow with depth.
    Its backward rule is a reverse `train.repeat` that recomputes each
    iteration's forward from its saved input (checkpointing at block
    boundaries) and back-propagates through it, or, with `residuals`, reads
    the saved values instead.

    ```mlir
    %h = train.repeat 4 carry(%x : tensor<8x16xf32>)
           stacked(%w : tensor<4x16x16xf32>) : (tensor<8x16xf32>) {
    ^bb0(%i: index, %c: tensor<8x16xf32>, %wi: tensor<16x16xf32>):
      %y = train.matmul %c, %wi : tensor<8x16xf32>, tensor<16x16xf32>
      %r = train.relu %y : tensor<8x16xf32>
      train.yield carry(%r : tensor<8x16xf32>)
    }
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntPositive]>:$count,
                       UnitAttr:$reverse, UnitAttr:$saves_carries,
                       Variadic<Train_AnyTensor>:$carries,
                       Variadic<Train_AnyTensor>:$stacked,
                       Variadic<Train_AnyTensor>:$invariants,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$residuals);
  let results = (outs Variadic<Train_AnyTensor>:$carry_results,
                      Variadic<Train_AnyTensor>:$stacked_results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $count (`reverse` $reverse^)? (`saving_carries` $saves_carries^)?
    (`residuals` `(` $residuals^ `)`)?
    (`carry` `(` $carries^ `:` type($carries) `)`)?
    (`stacked` `(` $stacked^ `:` type($stacked) `)`)?
    (`invariant` `(` $invariants^ `:` type($invariants) `)`)?
    `:` `(` type($carry_results) `)`
    (`stacked` `(` type($stacked_results)^ `)`)? attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    YieldOp getYield();
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// Whether the backward reads saved values instead of recomputing.
    bool keepsResiduals() { return getResiduals().has_value(); }
    /// The number of saved values (`residuals`, 0 when absent).
    size_t getNumResiduals() { return getResiduals().value_or(0); }
    /// The stacked results the user's body yields (neither residuals nor
    /// saved carries).
    size_t getNumUserStacked() {
      return getStackedResults().size() - getNumResiduals() -
             (getSavesCarries() ? getCarries().size() : 0);
    }

    /// The type of `count` slices of type `slice` stacked.
    static ::mlir::RankedTensorType getStackedType(int64_t count,
                                                   ::mlir::Type slice);

    /// What a repeat is built from: its operand lists and attributes.
    /// `getParts` reads them off a repeat, to change and build from
    /// (`rebuild`, `createWithBody`): every pass that changes a loop's
    /// operands or results does it through these two.
    struct Parts {
      ::llvm::SmallVector<::mlir::Value> carries, stacked, invariants;
      int64_t count = 1;
      bool reverse = false, savesCarries = false;
      ::mlir::IntegerAttr residuals;
    };
    Parts getParts();

    /// A repeat of `parts`, at `b`'s insertion point, whose body is `body`
    /// (ending in its yield): its carry results have the types of
    /// `parts.carries`, its stacked results those of the yield's slices
    /// stacked `parts.count` times.
    static RepeatOp createWithBody(::mlir::OpBuilder &b, ::mlir::Location loc,
                                   const Parts &parts, ::mlir::Block *body);

    /// A repeat of `parts`, at the rewriter's insertion point, that takes
    /// this repeat's body (its block arguments are the caller's to change)
    /// and discardable attributes; where `slices` is given, the body's
    /// yield stacks them instead of its own. Result types as in
    /// `createWithBody`. This repeat is left, its body empty, for the
    /// caller to replace and erase.
    RepeatOp rebuild(::mlir::RewriterBase &rewriter, const Parts &parts,
                     std::optional<::mlir::ValueRange> slices = std::nullopt);
  }];
}

def Train_YieldOp : Train_Op<"yield", [Terminator, HasParent<"RepeatOp">,
    Pure, AttrSizedOperandSegments]> {
  let summary = "ends an iteration of train.repeat";
  let arguments = (ins Variadic<Train_AnyTensor>:$carries,
                       Variadic<Train_AnyTensor>:$stacked);
  let assemblyFormat = [{
    (`carry` `(` $carries^ `:` type($carries) `)`)?
    (`stacked` `(` $stacked^ `:` type($stacked) `)`)? attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Train_MatmulOp : Train_ComputeOp<"matmul", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops", "getMatmulFlops"]>],
    DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getAccumulatingResults"]>> {
  let summary = "(batched) matrix product with optional transposes";
  let description = [{
    `lhs` is [..., M, K] (or [..., K, M] with `transpose_lhs`), `rhs` is
    [K, N] or [..., K, N] with the same leading dimensions as `lhs` (or
    [N, K] / [..., N, K] with `transpose_rhs`); the result is [..., M, N].
    A rank-2 `rhs` is shared by every batch (the weight of a linear layer).
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Train_AddOp : Train_BinaryOp<"add", "lhs + rhs">;
def Train_SubOp : Train_BinaryOp<"sub", "lhs - rhs">;
def Train_MulOp : Train_BinaryOp<"mul", "lhs * rhs">;
def Train_DivOp : Train_BinaryOp<"div", "lhs / rhs">;

def Train_ReluOp : Train_UnaryOp<"relu", "max(x, 0)">;
def Train_GeluOp : Train_UnaryOp<"gelu",
  "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (the tanh form of GPT-2)">;
def Train_SiluOp : Train_UnaryOp<"silu", "x * sigmoid(x)">;
def Train_TanhOp : Train_UnaryOp<"tanh", "tanh(x)">;
def Train_ExpOp : Train_UnaryOp<"exp", "exp(x)">;
def Train_LogOp : Train_UnaryOp<"log", "log(x)">;
def Train_SqrtOp : Train_UnaryOp<"sqrt", "sqrt(x)">;
def Train_RsqrtOp : Train_UnaryOp<"rsqrt", "1 / sqrt(x)">;

def Train_ScaleOp : Train_TypedOp<"scale", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    Train_CostOpInterface]> {
  let summary = "multiplication by a compile-time constant";
  let arguments = (ins Train_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
}

def Train_ConvertOp : Train_ComputeOp<"convert", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    Train_CostOpInterface]> {
  let summary = "element type conversion (f32 <-> bf16)";
  let arguments = (ins Train_FloatTensor:$input, TypeAttrOf<AnyFloat>:$element_type);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `to` $element_type attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Reductions and broadcasts
//===----------------------------------------------------------------------===//

def Train_ReduceOp : Train_ComputeOp<"reduce", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    Train_CostOpInterface]> {
  let summary = "sum, mean or max over a set of dimensions";
  let description = [{
    The reduced dimensions are dropped from the result.

    ```mlir
    %s = train.reduce sum %x dims [1] : tensor<8x16xf32>   // tensor<8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input,
                       Train_ReduceKindAttr:$kind,
                       DenseI64ArrayAttr:$dims);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    custom<ReduceKind>($kind) $input `dims` $dims attr-dict `:` type($input)
  }];
}

def Train_BroadcastOp : Train_Op<"broadcast", [Pure, Train_KernelOpInterface,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    Train_CostOpInterface]> {
  let summary = "broadcast into a larger shape";
  let description = [{
    Operand dimension i becomes result dimension `dims[i]` (same size); the
    other result dimensions are new.
  }];
  let arguments = (ins Train_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `dims` $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_SumToOp : Train_Op<"sum_to", [Pure, DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getAccumulatingResults"]>, Train_CostOpInterface]> {
  let summary = "sum a broadcast result back to an operand's shape";
  let description = [{
    The inverse of numpy broadcasting, used by the backward rules of the
    elementwise ops: leading dimensions that the target lacks are summed away
    and target dimensions of size 1 are summed with keepdim.
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_ReduceMaxGradOp : Train_TypedOp<"reduce_max_grad", [
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["max", "grad"]>,
    Train_CostOpInterface]> {
  let summary = "backward of `train.reduce max`";
  let description = "The gradient flows to every element equal to the maximum.";
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$max,
                       Train_FloatTensor:$grad, DenseI64ArrayAttr:$dims);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $max `,` $grad `dims` $dims attr-dict `:` type($input) `,` type($max)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, attention
//===----------------------------------------------------------------------===//

def Train_SoftmaxOp : Train_TypedOp<"softmax", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "softmax over the last dimension";
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Train_SoftmaxGradOp : Train_TypedOp<"softmax_grad", [
    AllTypesMatch<["output", "grad", "result"]>, Train_CostOpInterface]> {
  let summary = "backward of `train.softmax`: y * (g - sum(g * y))";
  let arguments = (ins Train_FloatTensor:$output, Train_FloatTensor:$grad);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($output)";
}

def Train_LayerNormOp : Train_TypedOp<"layer_norm", [
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["gamma", "beta"]>,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "layer normalization over the last dimension";
  let description = "(x - mean) / sqrt(var + epsilon) * gamma + beta, "
    "with the biased variance and gamma, beta of the last dimension's size.";
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$gamma,
                       Train_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Train_LayerNormGradOp : Train_TypedOp<"layer_norm_grad", [
    AllTypesMatch<["input", "grad", "input_grad"]>, AllTypesMatch<["gamma", "gamma_grad", "beta_grad"]>,
    Train_CostOpInterface], DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getAccumulatingResults"]>> {
  let summary = "backward of `train.layer_norm`: input, gamma and beta gradients";
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$gamma,
                       Train_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Train_FloatTensor:$input_grad,
                      Train_FloatTensor:$gamma_grad,
                      Train_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $grad attr-dict `:` type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Train_RmsNormOp : Train_TypedOp<"rms_norm", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "RMS normalization over the last dimension";
  let description = "x / sqrt(mean(x^2) + epsilon) * gamma.";
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` type($input) `,` type($gamma)";
  let hasVerifier = 1;
}

def Train_RmsNormGradOp : Train_TypedOp<"rms_norm_grad", [
    AllTypesMatch<["input", "grad", "input_grad"]>, AllTypesMatch<["gamma", "gamma_grad"]>,
    Train_CostOpInterface], DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getAccumulatingResults"]>> {
  let summary = "backward of `train.rms_norm`: input and gamma gradients";
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$gamma,
                       Train_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon);
  let results = (outs Train_FloatTensor:$input_grad,
                      Train_FloatTensor:$gamma_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $grad attr-dict `:` type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Train_AttentionOp : Train_TypedOp<"attention", [
    AllTypesMatch<["q", "k", "v", "result"]>,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops", "getBytesWritten", "getAttentionFlops"]>]> {
  let summary = "scaled dot-product self-attention, optionally causal";
  let description = [{
    q, k, v and the result are [batch, heads, seq, head_dim]. The result is
    softmax(q k^T / sqrt(head_dim) + mask) v, where with `causal` the mask
    hides every key after the query's position (two `train.matmul`s around
    a masked `train.softmax`, as one op so that kernels need not materialize
    the scores).
  }];
  let arguments = (ins Train_FloatTensor:$q, Train_FloatTensor:$k,
                       Train_FloatTensor:$v, UnitAttr:$causal);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`causal` $causal^)? attr-dict `:` type($q)
  }];
  let hasVerifier = 1;
}

def Train_CausalMaskOp : Train_TypedOp<"causal_mask", [
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    Train_CostOpInterface]> {
  let summary = "replace entries above the diagonal of the last two dimensions";
  let description = [{
    For input [..., S_q, S_k], entry (i, j) with j > i (a key after the
    query) becomes `fill`; the rest pass through. With `fill` = -inf it is the
    causal mask of attention scores; its backward is the same mask with fill
    0 applied to the gradient.
  }];
  let arguments = (ins Train_FloatTensor:$input, F64Attr:$fill);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `fill` $fill attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Train_AttentionGradOp : Train_TypedOp<"attention_grad", [
    AllTypesMatch<["q", "k", "v", "grad", "q_grad", "k_grad", "v_grad"]>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops", "getAttentionFlops"]>]> {
  let summary = "backward of `train.attention`: q, k and v gradients";
  let arguments = (ins Train_FloatTensor:$q, Train_FloatTensor:$k,
                       Train_FloatTensor:$v, Train_FloatTensor:$grad,
                       UnitAttr:$causal);
  let results = (outs Train_FloatTensor:$q_grad, Train_FloatTensor:$k_grad,
                      Train_FloatTensor:$v_grad);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $grad (`causal` $causal^)? attr-dict `:` type($q)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

def Train_EmbeddingOp : Train_ComputeOp<"embedding", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getBytesRead"]>]> {
  let summary = "rows of a table selected by integer ids";
  let description = [{
    table [V, D], ids [...] in [0, V): result [..., D].

    With `vocab_group` (set by `dist-partition` where tensor parallelism
    splits the table's rows: Megatron-LM's vocab-parallel embedding), the
    table is this rank's block of a table of V x (the group's size) rows,
    the block the rank's place in that runtime group selects; an id outside
    the block gives a row of zeros, so the group's results sum to the
    lookup. Where the group's size does not divide the vocabulary, the
    blocks are padded and `vocab_size` gives the vocabulary (the ids' bound;
    no id names a padding row).
  }];
  let arguments = (ins Train_FloatTensor:$table, Train_IndexTensor:$ids,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_group,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_size);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` type($table) `,` type($ids)";
}

def Train_EmbeddingGradOp : Train_Op<"embedding_grad", [Pure, DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getAccumulatingResults"]>,
    Train_CostOpInterface]> {
  let summary = "backward of `train.embedding`: rows scattered and summed";
  let description = [{
    With `vocab_group`, the result is this rank's block of the table's
    gradient (as for `train.embedding`): ids outside the block add nothing.
  }];
  let arguments = (ins Train_IndexTensor:$ids, Train_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_group);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $grad attr-dict `:` type($ids) `,` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Train_CrossEntropyOp : Train_TypedOp<"cross_entropy", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "mean softmax cross-entropy over the tokens that count";
  let description = [{
    logits [..., C], labels [...] with values in [0, C) or `ignore_index`.
    The loss is the sum over labelled positions of -log softmax(logits)[label],
    divided by the number of positions whose label is not `ignore_index`
    (0 when there are none).
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels)
  }];
  let hasVerifier = 1;
}

def Train_CrossEntropyGradOp : Train_TypedOp<"cross_entropy_grad", [
    AllTypesMatch<["logits", "result"]>,
    Train_CostOpInterface]> {
  let summary = "backward of `train.cross_entropy`";
  let description = "(softmax(logits) - onehot(label)) * grad / count, zero "
    "on ignored positions.";
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$labels,
                       Train_Scalar:$grad,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` type($logits) `,` type($labels)
  }];
  let hasVerifier = 1;
}

// Vocab-parallel cross-entropy (Megatron-LM's): `dist-partition` rewrites a
// `train.cross_entropy` (and its gradient) whose classes tensor parallelism
// splits into these, around all-reduces of the per-position maximum, sum of
// exponentials and label logit.

def Train_CrossEntropyStatsOp : Train_Op<"cross_entropy_stats", [Pure,
    AllTypesMatch<["max", "sum", "target"]>, Train_KernelOpInterface,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "a block of the classes' share of the softmax normalizer and of the label's logit";
  let description = [{
    logits [..., C], labels [...], max [...]: the maximum over all the
    classes. Per position, `sum` is the sum over the logits' classes of
    exp(logit - max) and `target` the label's logit where the label is one
    of them, else 0 (0 where the label is `ignore_index`). With
    `vocab_group` the logits are this rank's block of C x (the group's size)
    classes, the block its rank in that runtime group selects: summed over
    the group, `sum` and `target` are the whole softmax's normalizer and
    the label's logit. Where the classes are split in padded blocks,
    `vocab_size` gives their number (the labels' bound) and the padding's
    logits are the lowest float (`dist.fill_padding`), adding nothing.
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$labels,
                       Train_FloatTensor:$max,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_group,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_size);
  let results = (outs Train_FloatTensor:$sum, Train_FloatTensor:$target);
  let assemblyFormat = [{
    $logits `,` $labels `,` $max attr-dict `:` type($logits) `,` type($labels) `->` type($max)
  }];
  let hasVerifier = 1;
}

def Train_CrossEntropyFromStatsOp : Train_Op<"cross_entropy_from_stats", [Pure,
    AllTypesMatch<["max", "sum", "target"]>, Train_KernelOpInterface,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "mean cross-entropy from the softmax's statistics";
  let description = [{
    max, sum, target [...] (the maximum logit, the sum of exp(logit - max)
    and the label's logit per position), labels [...]: the sum over the
    positions whose label is not `ignore_index` of log(sum) + max - target,
    divided by their number (0 when there are none), as
    `train.cross_entropy` computes from the logits.
  }];
  let arguments = (ins Train_FloatTensor:$max, Train_FloatTensor:$sum,
                       Train_FloatTensor:$target, Train_IndexTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = [{
    $max `,` $sum `,` $target `,` $labels attr-dict `:` type($max) `,` type($labels) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Train_CrossEntropyGradFromStatsOp : Train_Op<"cross_entropy_grad_from_stats", [Pure,
    AllTypesMatch<["logits", "result"]>, AllTypesMatch<["max", "sum"]>,
    Train_KernelOpInterface,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "backward of `train.cross_entropy` from the softmax's statistics";
  let description = [{
    (exp(logits - max) / sum - onehot(label)) * grad / count, zero on
    ignored positions, where max and sum [...] are the whole softmax's
    maximum and normalizer per position and count the number of labelled
    positions. With `vocab_group` the logits (and the result) are this
    rank's block of the classes, as for `train.cross_entropy_stats`.
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$labels,
                       Train_Scalar:$grad, Train_FloatTensor:$max,
                       Train_FloatTensor:$sum,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_group);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad `,` $max `,` $sum attr-dict `:` type($logits) `,` type($labels) `,` type($max)
  }];
  let hasVerifier = 1;
}

def Train_LabelCountOp : Train_TypedOp<"label_count", [Train_CostOpInterface]> {
  let summary = "the number of labels that count, at least 1, as f32";
  let description = [{
    The number of elements of `labels` that are not `ignore_index`, or 1
    when there are none: the divisor that turns a sum over labelled tokens
    into their mean. `train-grad-accumulation` weighs each micro-batch's
    loss by its count over the whole batch's.
  }];
  let arguments = (ins Train_IndexTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = "$labels attr-dict `:` type($labels)";
}

def Train_DropoutOp : Train_TypedOp<"dropout", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    Train_CostOpInterface],
    DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getKernelOperands"]>> {
  let summary = "inverted dropout with a counter-based mask";
  let description = [{
    Zeroes each element with probability `rate` and scales the rest by
    1 / (1 - rate). Whether element e is kept is a pure function of
    (`seed`, `stream`, the optimizer step, the global index of e): the same
    mask whatever the sharding, and the backward rule is the same dropout
    applied to the gradient. Inside `train.repeat` the iteration index is
    passed as `stream` so each layer draws its own mask.

    On a rank's block of a sharded tensor (after `dist-partition`),
    `global_shape` is the whole tensor's shape and `shard_groups` gives per
    dimension the runtime group (a bit mask of mesh axes) whose rank selects
    the block; both are empty for a whole tensor.
  }];
  let arguments = (ins Train_FloatTensor:$input, Optional<Index>:$stream,
                       F64Attr:$rate,
                       I64Attr:$seed,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$global_shape,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$shard_groups);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`stream` `(` $stream^ `)`)? `rate` $rate `seed` $seed attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Train_ReshapeOp : Train_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "same elements, new shape (row-major)";
  let arguments = (ins Train_AnyTensor:$input);
  let results = (outs Train_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_TransposeOp : Train_ComputeOp<"transpose", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "permute dimensions: result dim i is input dim permutation[i]";
  let arguments = (ins Train_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input)";
}

def Train_SliceOp : Train_ComputeOp<"slice", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "a static box of a tensor";
  let arguments = (ins Train_FloatTensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `offsets` $offsets `sizes` $sizes attr-dict `:` type($input)
  }];
}

def Train_PadOp : Train_ComputeOp<"pad", [
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "zero padding (the backward of `train.slice`)";
  let arguments = (ins Train_FloatTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `low` $low `high` $high attr-dict `:` type($input)";
}

def Train_ConcatOp : Train_ComputeOp<"concat", [
    DeclareOpInterfaceMethods<Train_BackwardOpInterface>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "concatenation along one dimension";
  let arguments = (ins Variadic<Train_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` type($inputs)";
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Train_LrScheduleOp : Train_TypedOp<"lr_schedule", [
    Train_CostOpInterface]> {
  let summary = "the learning rate at an optimizer step";
  let description = [{
    Evaluates a `#train.schedule` at `step` (0-based); folds when the step is
    a constant.
  }];
  let arguments = (ins Train_Scalar:$step, Train_ScheduleAttr:$schedule);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = "$schedule `at` $step attr-dict";
  let hasFolder = 1;
}

def Train_SumSquaresOp : Train_TypedOp<"sum_squares", [
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>],
    DeclareOpInterfaceMethods<Train_KernelOpInterface, ["isKernelCalledPerOperand"]>> {
  let summary = "the sum of the squares of all elements of all operands";
  let description = [{
    Global-norm clipping's norm is `train.sqrt` of this sum over every
    gradient. Its dimensions are reductions: on a rank holding blocks of
    its operands, the result is the rank's partial sum, and one scalar
    all-reduce over the axes that split any operand gives the whole sum.
    An operand that those axes do not all split (a replicated bias beside a
    split weight) must be counted once: `replica_group` is the runtime
    group (a bit mask over the mesh axes, as `train.dropout`'s
    `shard_groups`) over which the operands are replicated, and only the
    group's first rank adds them (0: every rank counts them).

    ```mlir
    %ss = train.sum_squares %dw, %db : tensor<16x4xf32>, tensor<4xf32>
    %norm = train.sqrt %ss : tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$inputs,
                       DefaultValuedAttr<I64Attr, "0">:$replica_group);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = [{
    $inputs (`replicated` `over` $replica_group^)? attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

def Train_ClipFactorOp : Train_TypedOp<"clip_factor", [
    Train_CostOpInterface]> {
  let summary = "min(1, max_norm / (norm + 1e-6)): the global-norm clip scale";
  let arguments = (ins Train_Scalar:$norm, F64Attr:$max_norm);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = "$norm `max` $max_norm attr-dict";
  let hasVerifier = 1;
}

def Train_SGDUpdateOp : Train_ComputeOp<"sgd_update", [
    AllTypesMatch<["param", "new_param"]>, AllShapesMatch<["param", "grad"]>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>],
    DeclareOpInterfaceMethods<Train_KernelOpInterface, ["getKernelOperands", "getKernelResults"]>> {
  let summary = "one SGD step of one parameter (see #train.sgd)";
  let description = "The gradient has the parameter's type, or is bf16 "
    "for an f32 parameter (mixed precision's `--grad-precision=bf16`: an "
    "f32 master updated from a bf16 gradient, widened as it is read).";
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Optional<Train_FloatTensor>:$momentum_buffer,
                       Train_Scalar:$lr, Train_SGDAttr:$config);
  let results = (outs Train_FloatTensor:$new_param,
                      Optional<Train_FloatTensor>:$new_momentum_buffer);
  let assemblyFormat = [{
    $config $param `,` $grad
    (`momentum` `(` $momentum_buffer^ `:` type($momentum_buffer) `)`)?
    `lr` `(` $lr `)` attr-dict `:` type($param)
    `` custom<GradType>(type($grad), ref(type($param)))
  }];
  let hasVerifier = 1;
}

def Train_AdamWUpdateOp : Train_TypedOp<"adamw_update", [
    AllTypesMatch<["param", "m", "v", "new_param", "new_m", "new_v"]>,
    AllShapesMatch<["param", "grad"]>,
    DeclareOpInterfaceMethods<Train_CostOpInterface, ["getFlops"]>]> {
  let summary = "one AdamW step of one parameter (see #train.adamw)";
  let description = "`step` is the 0-based optimizer step; bias correction "
    "uses step + 1. `weight_decay` overrides the config's (0 for `no_decay`). "
    "The gradient has the parameter's type, or is bf16 for an f32 parameter "
    "(`--grad-precision=bf16`), widened as it is read.";
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$m, Train_FloatTensor:$v,
                       Train_Scalar:$lr, Train_Scalar:$step,
                       Train_AdamWAttr:$config, F64Attr:$weight_decay);
  let results = (outs Train_FloatTensor:$new_param, Train_FloatTensor:$new_m,
                      Train_FloatTensor:$new_v);
  let assemblyFormat = [{
    $config $param `,` $grad `,` $m `,` $v `lr` `(` $lr `)` `step` `(` $step `)`
    `decay` $weight_decay attr-dict `:` type($param)
    `` custom<GradType>(type($grad), ref(type($param)))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pointwise gradients
//===----------------------------------------------------------------------===//

def Train_ReluGradOp : Train_UnaryGradOp<"relu_grad", "relu">;
def Train_GeluGradOp : Train_UnaryGradOp<"gelu_grad", "gelu">;
def Train_SiluGradOp : Train_UnaryGradOp<"silu_grad", "silu">;
def Train_TanhGradOp : Train_UnaryGradOp<"tanh_grad", "tanh">;

#endif // LOOM_TRAIN_OPS_TD
