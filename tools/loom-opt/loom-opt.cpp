//===- loom-opt.cpp - Loom's opt-style driver ------------------------------===//
//
// MlirOptMain with the train dialect, every Loom pass and the Loom pipeline
// (plus the upstream dialects a Loom program is made of). The input is
// checked first for what MLIR 22's parser crashes on
// (dialects/common/UpstreamDefects.h).
//
//===----------------------------------------------------------------------===//

#include "codegen/Passes.h"
#include "dialects/common/UpstreamDefects.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/sharding/TrainShardingRules.h"
#include "dialects/train/TrainDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

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
  llvm::InitLLVM init(argc, argv);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "Loom optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  // Checked on a copy: MlirOptMain takes the buffer itself.
  llvm::SourceMgr check;
  unsigned id = check.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(input->getMemBufferRef()), llvm::SMLoc());
  if (loom::reportUpstreamParserDefects(check, id))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry,
                                     config)))
    return 1;
  output->keep();
  return 0;
}
