//===- loom-opt.cpp - Loom's opt-style driver ------------------------------===//
//
// MlirOptMain with the train dialect, every Loom pass and the Loom pipeline
// (plus the upstream dialects a Loom program is made of).
//
//===----------------------------------------------------------------------===//

#include "codegen/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/sharding/TrainShardingRules.h"
#include "dialects/train/TrainDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<loom::train::TrainDialect, loom::dist::DistDialect,
                  loom::codegen::LoomDialect,
                  mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::scf::SCFDialect,
                  mlir::emitc::EmitCDialect>();
  loom::registerTrainShardingRules(registry);
  mlir::registerTransformsPasses();
  loom::registerAllPasses();
  loom::codegen::registerCodegenPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
