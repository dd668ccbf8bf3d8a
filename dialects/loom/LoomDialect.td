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
    `loom-memory-plan` records the arena plan of each function of the rank
    program (`step`, the training step, and `eval`, the evaluation), once
    per pipeline rank (each rank plans what its stages run):
    `loom.offsets` on each op with results that the function runs (under
    the function's name, one `array<i64>` per pipeline rank with one byte
    offset per result, -1 for a value with no bytes of the arena) and
    `loom.peak_bytes` on the model (under the function's name, the arena's
    size per pipeline rank). `loom-lower-to-runtime` and the report read
    them. The dialect verifies both wherever they are set.
  }];
  let hasOperationAttrVerify = 1;
  let discardableAttrs = (ins
    "::mlir::DictionaryAttr":$offsets,
    "::mlir::DictionaryAttr":$peak_bytes
  );
}

#endif // LOOM_LOOM_DIALECT_TD
