//===- TestKernelOps.td - a dialect that only the tests load -*- tablegen -*-===//
//
// Ops with a runtime kernel, defined outside Loom and loaded into loom-opt
// and loomc as a dialect plugin: the code generator lowers them with no
// change of its own (test/codegen/kernel-plugin.mlir), and loomc trains a
// model with one (test/runtime/kernel-plugin.test).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_KERNEL_OPS_TD
#define LOOM_TEST_KERNEL_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/train/TrainInterfaces.td"
include "dialects/dist/DistInterfaces.td"

def LoomTest_Dialect : Dialect {
  let name = "loomtest";
  let summary = "Ops the tests add to Loom through a dialect plugin";
  let cppNamespace = "::loomtest";
}

def LoomTest_ScaleByOp : Op<LoomTest_Dialect, "scale_by", [Pure,
    AllTypesMatch<["input", "result"]>, Train_KernelOpInterface,
    DeclareOpInterfaceMethods<Dist_ShardingRuleOpInterface>]> {
  let summary = "input times a constant, lowered to loomrt_scale_by";
  let description = [{
    Elementwise: its sharding rule (dist's interface) passes every dimension
    through and is linear in the input, so it runs on any mesh.
  }];
  let arguments = (ins AnyRankedTensor:$input, F64Attr:$factor);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
}

def LoomTest_ScaleByUnruledOp : Op<LoomTest_Dialect, "scale_by_unruled", [
    Pure, AllTypesMatch<["input", "result"]>, Train_KernelOpInterface]> {
  let summary = "scale_by without a sharding rule: it runs on one rank only";
  let arguments = (ins AnyRankedTensor:$input, F64Attr:$factor);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
}

#endif // LOOM_TEST_KERNEL_OPS_TD
