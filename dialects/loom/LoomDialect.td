//===- LoomDialect.td - the code generator's facts in the IR -------------===//
//
// The `loom` dialect has no ops: it declares the attributes the code
// generator's passes leave in the IR for each other and for tests (the
// memory plan), with typed helpers, and verifies them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LOOM_DIALECT_TD
#define LOOM_LOOM_DIALECT_TD

include "mlir/IR/OpBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::loom::codegen";
  let summary = "The code generator's facts: the memory plan";
  let description = [{
    `loom-memory-plan` records the arena plan of each training step:
    `loom.offsets` on each op (one byte offset per result, -1 for a value
    outside the arena) and `loom.peak_bytes` on the model (the arena's
    size). The dialect verifies both wherever they are set.
  }];
  let hasOperationAttrVerify = 1;
  let discardableAttrs = (ins
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::IntegerAttr":$peak_bytes
  );
}

#endif // LOOM_LOOM_DIALECT_TD
