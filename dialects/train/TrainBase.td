//===- TrainBase.td - the train dialect, its enums and attributes ---------===//
//
// The `train` dialect is the level at which a user writes a model: parameters,
// inputs, the forward computation and the loss, for one device and with global
// (unsharded) shapes. Loom derives the backward pass and the optimizer step at
// this level too.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRAIN_BASE_TD
#define LOOM_TRAIN_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::loom::train";
  let summary = "Models, their training step and the optimizer, for one device";
  let description = [{
    A module holds one or more `train.model` ops. A model declares named
    parameters (`train.param`, with a shape, an element type and an
    initializer), named inputs (`train.input`), the forward computation and the
    loss, and carries the optimizer specification as attributes. Shapes are
    static and global: the whole batch, unsharded.

    `train-autodiff` adds the backward pass to a model and `train-optimizer`
    the update of every parameter, so that after both passes the body of a
    `train.model` is one training step. Repeated blocks (the layers of a
    transformer) are written once with `train.repeat` over stacked parameters
    and stay one body through every pass.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let discardableAttrs = (ins
    // On an op of a forward `train.repeat`'s body that keeps residuals:
    // the backward recomputes its results from what the forward saved
    // rather than reading them saved (dist-remat's choice); on an op of a
    // backward body: a forward op the backward recomputes.
    "::mlir::UnitAttr":$recompute
  );
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let extraClassDeclaration = [{
    /// Called by autodiff with a forward op and each op its backward rule
    /// creates beside it: how a dialect that annotates ops (dist: an op's
    /// pipeline stage) carries its annotation to the backward, registered
    /// by that dialect's side (a dialect extension), while this dialect
    /// knows nothing of it.
    using AdjointHook = std::function<void(::mlir::Operation *forward,
                                           ::mlir::Operation *created)>;
    void addAdjointHook(AdjointHook hook) {
      adjointHooks.push_back(std::move(hook));
    }
    ::llvm::ArrayRef<AdjointHook> getAdjointHooks() const {
      return adjointHooks;
    }

  private:
    ::llvm::SmallVector<AdjointHook, 1> adjointHooks;

  public:
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Train_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"uniform", 1>,
    I32EnumAttrCase<"zeros", 2>, I32EnumAttrCase<"ones", 3>,
    I32EnumAttrCase<"constant", 4>]> {
  let cppNamespace = "::loom::train";
  let genSpecializedAttr = 0;
}

def Train_DecayKind : I32EnumAttr<"DecayKind", "learning-rate decay after warm-up", [
    I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"linear", 1>,
    I32EnumAttrCase<"cosine", 2>]> {
  let cppNamespace = "::loom::train";
  let genSpecializedAttr = 0;
}

def Train_ReduceKind : I32EnumAttr<"ReduceKind", "reduction", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::loom::train";
  let genSpecializedAttr = 0;
}

def Train_ReduceKindAttr : EnumAttr<Train_Dialect, Train_ReduceKind, "reduce_kind"> {
  let assemblyFormat = "$value";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// A double parameter, stored as an APFloat so that attributes hash and
// compare bitwise.
class Train_F64Param<string default = ""> : AttrOrTypeParameter<"::llvm::APFloat", "a floating-point number"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
      double value;
      if (::mlir::failed($_parser.parseFloat(value)))
        return ::mlir::failure();
      return ::llvm::APFloat(value);
    }() }];
  let printer = [{ $_printer.printFloat($_self) }];
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let defaultValue = default;
}

class Train_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Train_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Train_InitAttr : Train_Attr<"Init", "init"> {
  let summary = "How a parameter is initialized";
  let description = [{
    `#train.init<normal, 0.02>` draws from N(0, 0.02^2), `uniform, a` from
    U(-a, a), `constant, c` fills with c; `zeros` and `ones` take no value.
    Values come from a counter-based generator keyed by the parameter's name
    and the global element index, so a shard of a parameter is exactly the
    slice of the unsharded one whatever the mesh.
  }];
  let parameters = (ins EnumParameter<Train_InitKind>:$kind,
                        Train_F64Param<"::llvm::APFloat(0.0)">:$value);
  let assemblyFormat = "`<` $kind (`,` $value^)? `>`";
  let genVerifyDecl = 1;
}

def Train_ScheduleAttr : Train_Attr<"Schedule", "schedule"> {
  let summary = "Learning-rate schedule: linear warm-up, then decay";
  let description = [{
    For optimizer step t (0-based), lr(t) = lr * (t + 1) / warmup while
    t < warmup; afterwards the decay runs from lr down to min_lr over the
    remaining total - warmup steps (`constant`, `linear` or `cosine`) and stays
    at min_lr once t >= total.

    ```mlir
    #train.schedule<lr = 3.0e-4, warmup = 10, total = 200, decay = cosine, min_lr = 3.0e-5>
    ```
  }];
  let parameters = (ins Train_F64Param<>:$lr,
                        DefaultValuedParameter<"int64_t", "0">:$warmup,
                        DefaultValuedParameter<"int64_t", "0">:$total,
                        DefaultValuedParameter<"DecayKind", "DecayKind::constant">:$decay,
                        Train_F64Param<"::llvm::APFloat(0.0)">:$min_lr);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The learning rate at optimizer step `step` (0-based).
    double evaluate(double step) const;
  }];
}

def Train_SGDAttr : Train_Attr<"SGD", "sgd"> {
  let summary = "SGD with (optional) momentum and weight decay";
  let description = [{
    m' = momentum * m + (g + weight_decay * p); p' = p - lr * m'
    (the formulation of torch.optim.SGD with dampening 0).
  }];
  let parameters = (ins Train_F64Param<"::llvm::APFloat(0.0)">:$momentum,
                        Train_F64Param<"::llvm::APFloat(0.0)">:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Train_AdamWAttr : Train_Attr<"AdamW", "adamw"> {
  let summary = "AdamW with decoupled weight decay";
  let description = [{
    With t the 1-based step: m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2,
    p' = p - lr * (m' / (1 - b1^t) / (sqrt(v' / (1 - b2^t)) + eps) + wd * p)
    (torch.optim.AdamW). Parameters marked `no_decay` skip the decay term.
  }];
  let parameters = (ins Train_F64Param<"::llvm::APFloat(0.9)">:$beta1,
                        Train_F64Param<"::llvm::APFloat(0.999)">:$beta2,
                        Train_F64Param<"::llvm::APFloat(1.0e-8)">:$eps,
                        Train_F64Param<"::llvm::APFloat(0.01)">:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // LOOM_TRAIN_BASE_TD
