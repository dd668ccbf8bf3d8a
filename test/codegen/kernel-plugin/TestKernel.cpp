//===- TestKernel.cpp - the loomtest dialect, as a dialect plugin ---------===//
//
// loom-opt --load-dialect-plugin=LoomTestKernelDialect.so registers the
// dialect; its op implements train's KernelOpInterface with the interface's
// defaults and nothing else.
//
//===----------------------------------------------------------------------===//

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
