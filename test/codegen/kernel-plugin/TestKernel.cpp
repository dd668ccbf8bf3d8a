//===- TestKernel.cpp - the loomtest dialect, as a dialect plugin ---------===//
//
// loom-opt --load-dialect-plugin=LoomTestKernelDialect.so (and loomc's)
// registers the dialect; its op implements train's KernelOpInterface with
// the interface's defaults, and dist's ShardingRuleOpInterface (an
// elementwise rule) so that it runs on a mesh.
//
//===----------------------------------------------------------------------===//

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"

#include "test/codegen/kernel-plugin/TestKernelDialect.h.inc"

#define GET_OP_CLASSES
#include "test/codegen/kernel-plugin/TestKernelOps.h.inc"

#include "test/codegen/kernel-plugin/TestKernelDialect.cpp.inc"

#define GET_OP_CLASSES
#include "test/codegen/kernel-plugin/TestKernelOps.cpp.inc"

/// Every dimension a factor of its own that the input and the result share;
/// a partial sum in the input stays one in the result.
loom::dist::OpShardingRule loomtest::ScaleByOp::getShardingRule() {
  loom::dist::OpShardingRule rule;
  llvm::SmallVector<int64_t> dims;
  for (int64_t size : getInput().getType().getShape()) {
    dims.push_back(int64_t(rule.factorSizes.size()));
    rule.factorSizes.push_back(size);
    rule.factorKinds.push_back(loom::dist::FactorKind::PassThrough);
  }
  rule.operandFactors = {dims};
  rule.resultFactors = {dims};
  rule.linearity = loom::dist::Linearity::PerOperand;
  rule.linearIn = {true};
  return rule;
}

void loomtest::LoomTestDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "test/codegen/kernel-plugin/TestKernelOps.cpp.inc"
      >();
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "LoomTestKernel", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<loomtest::LoomTestDialect>();
          }};
}
