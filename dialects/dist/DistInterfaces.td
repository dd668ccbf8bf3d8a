//===- DistInterfaces.td - interfaces the dist dialect defines -----------===//

#ifndef LOOM_DIST_INTERFACES_TD
#define LOOM_DIST_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Dist_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::loom::dist";
  let description = [{
    The factor-based sharding rule of an op (after Shardy's
    OpShardingRuleAttr): every dimension of every operand and result is
    mapped to a factor; a factor is pass-through (sharding it shards the
    result the same way), reduction (sharding it leaves the result unreduced
    over those axes) or need-replication (it cannot be sharded).
    `dist-sharding-propagation` reads these rules. The dist dialect owns the
    interface (as Shardy's sharding dialect owns its rules); the train ops'
    rules are external models registered by `registerTrainShardingRules`
    (`dialects/sharding/`, the one library that depends on both dialects).
  }];
  let methods = [
    InterfaceMethod<"The op's sharding rule.",
      "::loom::dist::OpShardingRule", "getShardingRule", (ins)>,
    InterfaceMethod<[{
        Called by `dist-partition` after the op got its per-rank types, with
        the builder after the op: an op whose local result is not simply the
        op applied to the local operands (a mean over a sharded dimension, a
        mask keyed by global indices) adjusts itself or its users here. The
        default changes nothing.
      }],
      "::llvm::LogicalResult", "localize",
      (ins "::mlir::OpBuilder &":$builder,
           "const ::loom::dist::LocalizeContext &":$context), [{}],
      [{ return ::mlir::success(); }]>,
  ];
}

#endif // LOOM_DIST_INTERFACES_TD
