//===- Passes.h - Loom code generation passes -------------------*- C++ -*-===//

#ifndef LOOM_CODEGEN_PASSES_H
#define LOOM_CODEGEN_PASSES_H

#include "dialects/dist/DistDialect.h"
#include "dialects/loom/LoomDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace loom::codegen {

#define GEN_PASS_DECL
#include "codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/Passes.h.inc"

/// Lowers trained models to EmitC: loom-memory-plan (unless `planMemory`
/// is false: the caller ran it), loom-lower-to-runtime, then the upstream
/// SCF, arith and func conversions to EmitC.
void buildCodegenPipeline(mlir::OpPassManager &pm, bool planMemory = true);

/// Registers the code generation passes and the `loom-to-emitc` pipeline.
void registerCodegenPasses();

} // namespace loom::codegen

#endif // LOOM_CODEGEN_PASSES_H
