//===- LoomDialect.h - the code generator's facts in the IR -----*- C++ -*-===//

#ifndef LOOM_DIALECTS_LOOM_LOOMDIALECT_H
#define LOOM_DIALECTS_LOOM_LOOMDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "dialects/loom/LoomDialect.h.inc"

namespace loom::codegen {
/// The loom dialect of `op`'s context (loaded if it was not), whose helpers
/// read and write the memory plan's attributes with their types.
inline LoomDialect &planAttrs(mlir::Operation *op) {
  return *op->getContext()->getOrLoadDialect<LoomDialect>();
}
} // namespace loom::codegen

#endif // LOOM_DIALECTS_LOOM_LOOMDIALECT_H
