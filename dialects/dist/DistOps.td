//===- DistOps.td - the dist dialect: meshes, shardings, collectives ------===//
//
// Modelled on Shardy (named mesh axes in device order; a sharding as data:
// per dimension an ordered list of axes, the unreduced axes, open/closed
// dimensions and priorities), not on MLIR's upstream `shard` dialect.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIST_OPS_TD
#define LOOM_DIST_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "dialects/common/Bounds.td"
include "dialects/dist/DistInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::loom::dist";
  let summary = "Device meshes, shardings and collectives";
  let description = [{
    A `train.model` that runs on several ranks carries its mesh as the
    discardable attribute `dist.mesh`, a `#dist.mesh` of named axes in device
    order (outermost first; the last axis's ranks are adjacent devices).

    Before `dist-partition` values have global shapes and carry shardings
    (`#dist.sharding`, in the discardable attribute `dist.sharding` of their
    defining op, one per result). After it the body is the program of one
    rank: shapes are per-rank and values are combined across ranks by the
    collectives of this dialect, each over a set of mesh axes (the ranks that
    differ only in those coordinates, in row-major order of them).
  }];
  let useDefaultAttributePrinterParser = 1;

  // The facts one pass leaves in the IR for the next, each with a typed
  // helper (`DistDialect::getStageAttrHelper()`, ...; `dist::attrs(op)`
  // reaches the dialect) and checked by `verifyOperationAttribute`. An
  // attribute named `dist.*` that is not listed here is an error.
  let hasOperationAttrVerify = 1;
  let discardableAttrs = (ins
    // On a train.model (or an enclosing module): the device mesh.
    "::loom::dist::MeshAttr":$mesh,
    // On a train.model: how `dist-pipeline-partition` cut it into stages.
    "::loom::dist::PipelineAttr":$pipeline,
    // On an op: the pipeline stage that runs it (0-based, virtual stages
    // counted). On a repeat whose layers span stages, or on a parameter
    // used by several: the stage of each layer, or the stages that use it.
    "::mlir::IntegerAttr":$stage,
    "::mlir::DenseI64ArrayAttr":$stages,
    // On an op of a rank program: the mesh coordinates (axis = index) of
    // the ranks that run it; and the world ranks that run it.
    "::mlir::DictionaryAttr":$on,
    "::mlir::DenseI64ArrayAttr":$ranks,
    // On a micro-batch loop's split backward: "input" or "weight".
    "::mlir::StringAttr":$backward,
    // Before dist-partition: per result the #dist.sharding of an op, and
    // per block argument (but the first) of a repeat's body.
    "::mlir::ArrayAttr":$sharding,
    "::mlir::ArrayAttr":$arg_shardings,
    // On a parameter or optimizer state stored as a rank's block: the
    // whole tensor's shape, and per dimension the runtime group (mesh-axis
    // bit mask) that selects the block.
    "::mlir::DenseI64ArrayAttr":$global_shape,
    "::mlir::DenseI64ArrayAttr":$shard_groups,
    // On a parameter (or its optimizer state) that holds one pipeline
    // stage's layers of a stacked parameter: the whole tensor and where
    // the part starts in it.
    "::loom::dist::PartAttr":$part,
    // On a rank program: what dist-verify-communication proved.
    "::loom::dist::VerifiedAttr":$verified,
    // On a train.model: the ZeRO stage (1 to 3) dist-zero chose over the
    // mesh's data axis; dist-sharding-propagation splits the optimizer
    // state (1), the gradients (2) and the parameters (3) over it.
    "::mlir::IntegerAttr":$zero
  );
}

/// A list of integers written `[1, 2, 3]`.
def Dist_IntList : ArrayRefParameter<"int64_t", "a list of integers"> {
  let parser = [{ ::loom::dist::parseIntList($_parser) }];
  let printer = [{ ::loom::dist::printIntList($_printer, $_self) }];
}

def Dist_PipelineAttr : AttrDef<Dist_Dialect, "Pipeline"> {
  let mnemonic = "pipeline";
  let summary = "How dist-pipeline-partition cut a model into stages";
  let description = [{
    `ranks` pipeline ranks (the pp axis) with `virtual_stages` stages each;
    the predicted cost (FLOP-equivalents) of each unit the partitioner
    placed and of each stage, and the slowest stage's.

    ```mlir
    #dist.pipeline<ranks = 2, virtual_stages = 1, unit_costs = [4, 9, 9],
                   stage_costs = [13, 9], bottleneck = 13>
    ```
  }];
  let parameters = (ins "int64_t":$ranks, "int64_t":$virtual_stages,
                        Dist_IntList:$unit_costs, Dist_IntList:$stage_costs,
                        "int64_t":$bottleneck);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Stages in all: ranks x virtual stages.
    int64_t getNumStages() const { return getRanks() * getVirtualStages(); }
  }];
}

def Dist_PartAttr : AttrDef<Dist_Dialect, "Part"> {
  let mnemonic = "part";
  let summary = "A parameter that is a block of a whole tensor of the same name";
  let description = [{
    `dist-pipeline-split` stores a stacked parameter whose layers several
    pipeline stages run as one parameter per stage, each holding its
    stage's layers and named after them (`w_fc[4:8]`): `of` names the
    tensor the user wrote, `whole` is its shape and `offsets` where the
    part starts in it (the part's own shape, or its `dist.global_shape`
    where tensor or data parallelism store it as blocks, is its extent).
    Initialization, `--init-from` and `--export` read and write the part's
    block of the whole tensor, so the parts together are the parameter of
    the single-rank program.

    ```mlir
    %w1 = train.param "w_fc[4:8]" init(#train.init<normal, 0.02>)
          {dist.part = #dist.part<of = "w_fc", whole = [8, 16, 32],
                                  offsets = [4, 0, 0]>}
          : tensor<4x16x32xf32>
    ```
  }];
  let parameters = (ins "::mlir::StringAttr":$of, Dist_IntList:$whole,
                        Dist_IntList:$offsets);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dist_VerifiedAttr : AttrDef<Dist_Dialect, "Verified"> {
  let mnemonic = "verified";
  let summary = "What dist-verify-communication proved about a rank program";
  let description = [{
    The rank programs of `simulated` classes of ranks stood for the mesh's
    `ranks` ranks (ranks that differ only along axes other than
    `class_axes` run the same program); the busiest issued `ops`
    communication ops, each matched with its peers in order.
  }];
  let parameters = (ins "int64_t":$simulated, "int64_t":$ranks,
                        "::mlir::ArrayAttr":$class_axes, "int64_t":$ops);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dist_AxisRole : I32EnumAttr<"AxisRole", "what a mesh axis parallelizes", [
    I32EnumAttrCase<"Data", 0, "data">,
    I32EnumAttrCase<"Tensor", 1, "tensor">,
    I32EnumAttrCase<"Pipeline", 2, "pipeline">]> {
  let cppNamespace = "::loom::dist";
  let genSpecializedAttr = 0;
}

def Dist_MeshAttr : AttrDef<Dist_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "Named mesh axes with their sizes and roles, in device order";
  let description = [{
    `#dist.mesh<["dp" = 2, "tp" = 4]>`: eight ranks, the `tp` axis
    innermost. Axis names are unique and sizes at least 1. Each axis has a
    role, what it parallelizes: `data`, `tensor` or `pipeline`, each role
    on at most one axis. The axes named `dp`, `tp` and `pp` have those
    roles unless written otherwise; any other name states its role:
    `#dist.mesh<["stage" = 2 : pipeline, "replica" = 4 : data]>`. The
    passes find an axis by its role (`getAxis(AxisRole::Tensor)`), never by
    its name.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$names,
                        ArrayRefParameter<"int64_t">:$sizes,
                        ArrayRefParameter<"::loom::dist::AxisRole">:$roles);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axis of `role`, or null when the mesh has none.
    ::mlir::StringAttr getAxis(AxisRole role) const;
    /// The size of the axis of `role` (1 when the mesh has none).
    int64_t getSize(AxisRole role) const;
    /// The index of the axis of `role`, or -1.
    int64_t getAxisIndex(AxisRole role) const;
    /// The role of `axis`, if the mesh has it.
    std::optional<AxisRole> getRole(::llvm::StringRef axis) const;
    /// Whether the group of `axis` spans several nodes of
    /// `devicesPerNode` devices (the mesh's last axis is innermost).
    bool crossesNodes(::llvm::StringRef axis, int64_t devicesPerNode) const;
    /// The mesh as loomc's --mesh writes it: "pp=2,dp=4", with `:role`
    /// where the name does not imply it.
    std::string getSpec() const;
    /// The number of ranks.
    int64_t getNumRanks() const;
    /// The index of `axis`, or -1.
    int64_t getAxisIndex(::llvm::StringRef axis) const;
    /// The size of `axis` (1 when the mesh has no such axis).
    int64_t getAxisSize(::llvm::StringRef axis) const;
    /// The product of the sizes of `axes`.
    int64_t getGroupSize(::mlir::ArrayRef<::mlir::StringAttr> axes) const;
    /// The number of ranks of the runtime group `mask` (getGroupMask's bit
    /// mask over the mesh's axes): the product of its axes' sizes.
    int64_t getGroupSize(int64_t mask) const;
    /// The runtime's group of `axes`: a bit mask over the mesh's axes. Its
    /// ranks are ordered as the mesh orders the axes, so a list of axes
    /// names the same blocks only when it is in device order.
    uint32_t getGroupMask(::mlir::ArrayRef<::mlir::StringAttr> axes) const;
    /// Whether `axes` are mesh axes listed in device order.
    bool isInDeviceOrder(::mlir::ArrayRef<::mlir::StringAttr> axes) const;
    /// The mesh of the model that holds `op`, or null.
    static MeshAttr lookup(::mlir::Operation *op);
  }];
}

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is spread over the mesh";
  let description = [{
    Per dimension, the ordered list of mesh axes that split it (major to
    minor: `{"dp", "tp"}` splits a dimension of 8 over dp = 2 and tp = 2 into
    blocks of 2, the block of coordinates (d, t) at 2·d + t). A dimension is
    closed (propagation leaves it as written) unless it ends in `?`; a
    priority `pN` orders annotations (0 strongest) when two conflict.
    A dimension marked `padded` may split unevenly: each rank holds a block
    of ceil(size / ranks), and the last blocks end in padding (the whole
    tensor is the blocks' concatenation cut to the size). Loom pads where
    nothing divides (a vocabulary over tp, a ZeRO shard over dp); without
    the mark a split must divide.
    `unreduced` lists the axes over which the value is a partial sum: the
    tensor is the sum of the ranks' values over those axes.

    ```mlir
    #dist.sharding<[{"dp"}, {}, {?} ]>
    #dist.sharding<[{}, {"tp"}p0 ], unreduced = {"dp"}>
    #dist.sharding<[{"tp"} padded, {} ]>
    ```
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::ArrayAttr">:$dims,
    ArrayRefParameter<"bool">:$open,
    ArrayRefParameter<"int64_t">:$priorities,
    ArrayRefParameter<"::mlir::StringAttr">:$unreduced,
    OptionalArrayRefParameter<"bool">:$padded);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins
      "::llvm::ArrayRef<::llvm::SmallVector<::mlir::StringAttr>>":$dims,
      "::llvm::ArrayRef<::mlir::StringAttr>":$unreduced,
      CArg<"::llvm::ArrayRef<bool>", "{}">:$padded)>
  ];
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDims().size(); }
    /// Whether dimension `d` may split unevenly (`padded`).
    bool isPadded(int64_t d) const {
      return d < int64_t(getPadded().size()) && getPadded()[d];
    }
    /// The axes of dimension `d`.
    ::llvm::SmallVector<::mlir::StringAttr> getDimAxes(int64_t d) const;
    /// Checks the sharding against a tensor type and a mesh: known axes,
    /// each used once, dimensions that divide evenly unless padded.
    ::llvm::LogicalResult verifyFor(
        ::mlir::RankedTensorType type, MeshAttr mesh,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError) const;
  }];
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, !listconcat([Loom_BoundedShapes], traits)>;

class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, traits # [Pure]> {
  let hasVerifier = 1;
  code commonDecls = [{
    /// The group as the runtime's bit mask over the mesh's axes.
    uint32_t getGroupMask(MeshAttr mesh) {
      return mesh.getGroupMask(::llvm::to_vector(
          getAxes().getAsRange<::mlir::StringAttr>()));
    }
  }];
  let extraClassDeclaration = commonDecls;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Dist_ShardingRuleOpInterface, ["getShardingRule"]>]> {
  let summary = "Sum (or max) of a tensor over the ranks of mesh axes";
  let description = [{
    Every rank of the group over `axes` gets the elementwise reduction of
    the group's operands: an unreduced value made whole. The runtime's ring
    sends 2 (N - 1) / N of the tensor's bytes per rank.

    With `members`, two coordinates of its one axis, only those ranks of
    the group take part (they alone run it: `dist.on` lists them): each
    sends its tensor to the other and both add the two in coordinate
    order, the same bits on both, the bytes of a two-rank ring. The
    embedding tied to the head, which the first and the last pipeline
    stage hold, reduces its gradient so (Megatron-LM's embedding group).

    ```mlir
    %g = dist.all_reduce %partial over ["dp"] : tensor<16x4xf32>
    %m = dist.all_reduce %x over ["dp", "tp"] max : tensor<f32>
    %e = dist.all_reduce %part over ["pp"] members [0, 3] {dist.on = {pp = array<i64: 0, 3>}} : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       UnitAttr:$max, OptionalAttr<DenseI64ArrayAttr>:$members);
  let results = (outs AnyRankedTensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::ArrayAttr":$axes,
                   CArg<"bool", "false">:$max), [{
      build($_builder, $_state, input.getType(), input, axes,
            max ? $_builder.getUnitAttr() : ::mlir::UnitAttr(),
            ::mlir::DenseI64ArrayAttr());
    }]>
  ];
  let assemblyFormat = [{
    $input `over` $axes (`max` $max^)? (`members` $members^)? attr-dict `:` type($input)
  }];
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "Concatenate the group's blocks along a dimension";
  let description = [{
    The inverse of sharding dimension `dim` over `axes`: each rank's block
    goes to position (its group rank) of the result, whose `dim` is the
    group size times the operand's. Each rank sends (N - 1) / N of the
    result's bytes.

    ```mlir
    %w = dist.all_gather %w_local over ["tp"] dim 1 : tensor<16x8xf32> -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter"> {
  let summary = "Sum over the group, each rank keeping its block of a dimension";
  let description = [{
    An unreduced value over `axes` becomes reduced and sharded on `dim` over
    the same axes: the bytes of half an all-reduce.

    ```mlir
    %g = dist.reduce_scatter %partial over ["dp"] dim 0 : tensor<16x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
  let summary = "Move the split of a tensor from one dimension to another";
  let description = [{
    The operand is split on `split_dim` into group-size blocks; block j goes
    to group rank j and arrives there concatenated along `concat_dim`: a
    tensor sharded on `concat_dim` over `axes` becomes sharded on
    `split_dim`.

    ```mlir
    %y = dist.all_to_all %x over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$split_dim, I64Attr:$concat_dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `split` $split_dim `concat` $concat_dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_BroadcastOp : Dist_CollectiveOp<"broadcast", [SameOperandsAndResultType]> {
  let summary = "Every rank of the group gets the root's tensor";
  let description = [{
    ```mlir
    %x = dist.broadcast %y over ["dp"] root 0 : tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `root` $root attr-dict `:` type($input)
  }];
}

def Dist_CollectivePermuteOp : Dist_CollectiveOp<"collective_permute", [SameOperandsAndResultType]> {
  let summary = "Each rank sends its tensor to another rank of the group";
  let description = [{
    `pairs` lists (source, target) group ranks; every group rank is a source
    at most once and a target at most once. A rank that is no target gets
    zeros.

    ```mlir
    %y = dist.collective_permute %x over ["pp"] pairs [0, 1, 1, 0] : tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$pairs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `pairs` $pairs attr-dict `:` type($input)
  }];
}

def Dist_SendOp : Dist_Op<"send", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Send a tensor to one rank along a mesh axis";
  let description = [{
    Point-to-point: the rank sends `input` to the rank whose coordinate on
    `axis` is `peer` and whose other coordinates are its own (a pipeline
    stage's activations to the next stage). The peer must issue the matching
    `dist.recv` of the same type; `dist-verify-communication` treats the
    pair as a rendezvous (the send completes when the receive is posted), so
    an order that only buffering could save is rejected. Code that only
    some ranks run carries the discardable attribute `dist.on`, a dictionary
    from axis names to the coordinate that runs it.

    ```mlir
    dist.send %x to "pp" = 1 {dist.on = {pp = 0}} : tensor<4x8xf32>
    %y = dist.recv from "pp" = 0 {dist.on = {pp = 1}} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$peer);
  let assemblyFormat = "$input `to` $axis `=` $peer attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Receive a tensor from one rank along a mesh axis";
  let description = [{
    The other half of `dist.send`: the tensor the rank whose coordinate on
    `axis` is `peer` (other coordinates the same) sends.
  }];
  let arguments = (ins StrAttr:$axis, I64Attr:$peer);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`from` $axis `=` $peer attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dist_AllReduceStartOp : Dist_Op<"all_reduce_start", [AllTypesMatch<["inputs", "results"]>]> {
  let summary = "Start all-reduces that run while the rank computes on";
  let description = [{
    The asynchronous form of `dist.all_reduce`, over one or several tensors
    at once (a bucket: one collective, one ring's latencies): the reduction
    starts here on the runtime's communication stream, and its results are
    read only through the one `dist.wait` that ends it, in the same block,
    or, deferred, yielded as stacked slices of the loop whose body holds it
    and waited after the loop (see `dist.wait`). `dist-comm-opt` issues
    starts as early and waits as late as the dependencies allow, so
    communication overlaps compute.

    ```mlir
    %r:2 = dist.all_reduce_start %g, %h over ["dp"] : tensor<16x4xf32>, tensor<4xf32>
    ...
    %s:2 = dist.wait %r#0, %r#1 : tensor<16x4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrArrayAttr:$axes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$inputs `over` $axes attr-dict `:` type($inputs)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The group as the runtime's bit mask over the mesh's axes.
    uint32_t getGroupMask(MeshAttr mesh) {
      return mesh.getGroupMask(::llvm::to_vector(
          getAxes().getAsRange<::mlir::StringAttr>()));
    }
  }];
}

def Dist_AllGatherStartOp : Dist_Op<"all_gather_start"> {
  let summary = "Start an all-gather that runs while the rank computes on";
  let description = [{
    The asynchronous form of `dist.all_gather`: the gather starts here on
    the runtime's communication stream, and its result is read only through
    the one `dist.wait` that ends it, in the same block.

    With `at %j` the operand is a stacked tensor and the gather is of its
    slice `%j` (a view, not a copy), on every rank alike; where `%j` is
    outside the leading dimension nothing is gathered and the wait's result
    is undefined. `%j` is a constant or the enclosing `train.repeat`'s
    iteration plus a constant: `dist-prefetch` gathers the next layer's
    parameters one iteration ahead so, and the last iteration, which has no
    next layer, gathers nothing (its wait's result is never read).

    ```mlir
    %h = dist.all_gather_start %w_blocks at %next over ["dp"] dim 0 : tensor<4x16x96xf32> -> tensor<32x96xf32>
    ...
    %w = dist.wait %h : tensor<32x96xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<Index>:$index,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input (`at` $index^)? `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The group as the runtime's bit mask over the mesh's axes.
    uint32_t getGroupMask(MeshAttr mesh) {
      return mesh.getGroupMask(::llvm::to_vector(
          getAxes().getAsRange<::mlir::StringAttr>()));
    }
    /// The type of what each rank contributes: the operand, or with an
    /// index its slice.
    ::mlir::RankedTensorType getBlockType();
    /// With an index that is the enclosing loop's iteration plus `c`: `c`
    /// (the iterations that gather nothing are the last |c| run).
    std::optional<int64_t> getIterationOffset();
    /// How many times the enclosing `train.repeat` (of `count`
    /// iterations) runs the gather: `count`, less the iterations whose
    /// slice is out of range.
    int64_t getGatherCount(int64_t count);
  }];
}

def Dist_WaitOp : Dist_Op<"wait", [AllTypesMatch<["inputs", "results"]>]> {
  let summary = "Wait for an asynchronous collective; its results";
  let description = [{
    The operands are the results of one asynchronous collective
    (`dist.all_reduce_start` or `dist.all_gather_start`), all of them in
    order, in the same block; the results are the same buffers, now
    complete.

    Deferred past a loop: the operands are stacked results of a
    `train.repeat` whose body yields, for them, all the results of one
    `dist.all_reduce_start` in order. Each iteration starts the reduction
    of its slices, and this wait, after the loop, completes every
    iteration's (`dist-comm-opt` defers so a layer's gradient reduction
    runs during the backward of the layers after it).

    ```mlir
    %g = train.repeat 4 reverse ... {
      ...
      %s = dist.all_reduce_start %dw over ["dp"] : tensor<16x4xf32>
      train.yield ... stacked(%s : tensor<16x4xf32>)
    }
    %r = dist.wait %g : tensor<4x16x4xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let extraClassDeclaration = [{
    /// The collective this wait ends: its operands' op or, for the stacked
    /// results of a loop (a reduction deferred past the loop), the start
    /// in the loop's body whose results the body yields for them.
    ::mlir::Operation *getStart();
    /// Whether it waits for a loop's stacked results: every iteration's
    /// collective, each started in its iteration.
    bool isDeferred() {
      return getStart() && !getInputs().empty() &&
             getStart() != getInputs()[0].getDefiningOp();
    }
  }];
  let hasVerifier = 1;
}

def Dist_ShardOp : Dist_Op<"shard", [Pure]> {
  let summary = "Keep this rank's block of a replicated tensor (no communication)";
  let description = [{
    `axes` holds, per dimension, the mesh axes (major to minor) that split
    it; each rank keeps the block its coordinates on those axes select. Each
    rank holds the whole operand, so nothing is sent: this is how a
    replicated value (an input the data loader gives every rank, a
    replicated activation entering a sharded region) becomes sharded.

    ```mlir
    %x = dist.shard %tokens axes [["dp"], [] ] : tensor<8x16xi32> -> tensor<4x16xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, ArrayAttr:$axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `axes` $axes attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Per dimension, the runtime's group of the axes that split it.
    ::llvm::SmallVector<int64_t> getGroupMasks(MeshAttr mesh);
  }];
}


def Dist_FillPaddingOp : Dist_Op<"fill_padding", [Pure,
    SameOperandsAndResultType]> {
  let summary = "Set the padding of this rank's block of an unevenly split dimension";
  let description = [{
    The operand is this rank's block of a tensor whose dimension `dim`, of
    `size` elements, is split over `axes` in blocks of the operand's extent
    (a `padded` split: the last blocks end past `size`). The result is the
    block with every element past `size` set to `value`: the identity of
    the reduction that reads the block next (0 before a sum or a
    contraction, -inf before a maximum or a softmax), so the padding
    changes nothing. `dist-partition` places it before each op that
    reduces over a padded dimension.

    ```mlir
    %m = dist.fill_padding %logits over ["tp"] dim 1 size 255 value 0xFFF0000000000000 : tensor<8x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$dim, I64Attr:$size, F64Attr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `dim` $dim `size` $size `value` $value attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The group as the runtime's bit mask over the mesh's axes.
    uint32_t getGroupMask(MeshAttr mesh) {
      return mesh.getGroupMask(::llvm::to_vector(
          getAxes().getAsRange<::mlir::StringAttr>()));
    }
  }];
}

def Dist_ActionKind : I32EnumAttr<"ActionKind",
    "what a pipeline action runs of its stage's micro-batch", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    I32EnumAttrCase<"Backward", 1, "backward">,
    I32EnumAttrCase<"BackwardInput", 2, "backward_input">,
    I32EnumAttrCase<"BackwardWeight", 3, "backward_weight">]> {
  let cppNamespace = "::loom::dist";
}

def Dist_ScheduleOp : Dist_Op<"schedule", [NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "Where and in what order a pipeline's micro-batch loops run";
  let description = [{
    The pipeline schedule of a rank program: one `dist.rank_actions` per
    pipeline rank, in coordinate order, each listing the `dist.action`s
    that rank runs, in the order it runs them. It stands right after the
    micro-batch loops it runs (the forward loop, its backward and, where
    the backward is split, its weight part): there every rank runs its
    actions, each one iteration of one of the loops restricted to one
    stage's ops, so the loops' results are final after this op, not after
    the loops. `slots` is how many micro-batches' saved values a stage
    keeps at once; each action names the slot its micro-batch uses.

    `dist-pipeline-schedule` builds it from the schedule (built in, or read
    from a CSV); `dist-verify-communication` runs each rank's actions in
    this order, sends buffered as the runtime posts them; the code
    generator emits it as a table the rank's driver loop reads.

    ```mlir
    dist.schedule slots 2 {
      dist.rank_actions 0 {
        dist.action forward stage 0 micro_batch 0 slot 0
        dist.action forward stage 0 micro_batch 1 slot 1
        dist.action backward stage 0 micro_batch 0 slot 0
        dist.action backward stage 0 micro_batch 1 slot 1
      }
      dist.rank_actions 1 {
        ...
      }
    }
    ```
  }];
  let arguments = (ins I64Attr:$slots);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`slots` $slots $body attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The pipeline ranks (one `dist.rank_actions` each).
    int64_t getNumRanks();
    /// The micro-batches its actions run (the largest named, plus one).
    int64_t getNumMicroBatches();
    /// The stages its actions run (the largest named, plus one).
    int64_t getNumStages();
  }];
}

def Dist_RankActionsOp : Dist_Op<"rank_actions", [NoTerminator, SingleBlock,
    NoRegionArguments, HasParent<"ScheduleOp">]> {
  let summary = "The actions one pipeline rank runs, in order";
  let description = [{
    `rank` is the rank's coordinate on the pipeline axis; the body holds
    its `dist.action`s in the order it runs them.
  }];
  let arguments = (ins I64Attr:$rank);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank $body attr-dict";
}

def Dist_ActionOp : Dist_Op<"action", [HasParent<"RankActionsOp">]> {
  let summary = "One stage's forward, backward or backward part of a micro-batch";
  let description = [{
    Runs iteration `micro_batch` of a micro-batch loop, restricted to the
    ops of stage `stage` (and the ops of no stage): `forward` the forward
    loop, `backward` the backward loop (both parts where it is split),
    `backward_input` its input part, `backward_weight` its weight part.
    The values the micro-batch's forward saves for its backward live in
    slot `slot`. Printed in schedules as torch.distributed.pipelining
    prints actions, `1F3` (stage 1, forward, micro-batch 3; B, I, W).
  }];
  let arguments = (ins Dist_ActionKind:$kind, I64Attr:$stage,
                       I64Attr:$micro_batch, I64Attr:$slot);
  let assemblyFormat = [{
    $kind `stage` $stage `micro_batch` $micro_batch `slot` $slot attr-dict
  }];
}

#endif // LOOM_DIST_OPS_TD
