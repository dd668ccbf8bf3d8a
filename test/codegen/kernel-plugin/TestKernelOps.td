//===- TestKernelOps.td - a dialect that only the tests load -*- tablegen -*-===//
//
// An op with a runtime kernel, defined outside Loom and loaded into
// loom-opt as a dialect plugin: the code generator lowers it with no
// change of its own (test/codegen/kernel-plugin.mlir).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_KERNEL_OPS_TD
#define LOOM_TEST_KERNEL_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/train/TrainInterfaces.td"

def LoomTest_Dialect : Dialect {
  let name = "loomtest";
  let summary = "Ops the tests add to Loom through a dialect plugin";
  let cppNamespace = "::loomtest";
}

def LoomTest_ScaleByOp : Op<LoomTest_Dialect, "scale_by", [Pure,
    AllTypesMatch<["input", "result"]>, Train_KernelOpInterface]> {
  let summary = "input times a constant, lowered to loomrt_scale_by";
  let arguments = (ins AnyRankedTensor:$input, F64Attr:$factor);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
}

#endif // LOOM_TEST_KERNEL_OPS_TD
