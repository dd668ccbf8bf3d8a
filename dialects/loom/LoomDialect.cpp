//===- LoomDialect.cpp - the code generator's facts in the IR -------------===//

#include "dialects/loom/LoomDialect.h"

using namespace mlir;
using namespace loom::codegen;

#include "dialects/loom/LoomDialect.cpp.inc"

void LoomDialect::initialize() {}

/// The enclosing op's recorded arena size, or -1.
static int64_t enclosingPeak(LoomDialect &dialect, Operation *op) {
  for (op = op->getParentOp(); op; op = op->getParentOp())
    if (IntegerAttr peak = dialect.getPeakBytesAttrHelper().getAttr(op))
      return peak.getInt();
  return -1;
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  StringAttr name = attribute.getName();
  auto fail = [&]() {
    return op->emitOpError("attribute '") << name.getValue() << "' ";
  };
  if (name == getOffsetsAttrHelper().getName()) {
    DenseI64ArrayAttr offsets = getOffsetsAttrHelper().getAttr(op);
    if (!offsets)
      return fail() << "must be an array<i64>, got " << attribute.getValue();
    if (int64_t(offsets.size()) != int64_t(op->getNumResults()))
      return fail() << "lists " << offsets.size() << " offsets for "
                    << op->getNumResults() << " results";
    int64_t peak = enclosingPeak(*this, op);
    for (int64_t offset : offsets.asArrayRef()) {
      if (offset < -1)
        return fail() << "has the offset " << offset
                      << " (an arena offset, or -1 outside the arena)";
      if (peak > 0 && offset >= peak)
        return fail() << "places a value at " << offset
                      << ", outside the arena of " << peak << " bytes";
    }
    return success();
  }
  if (name == getPeakBytesAttrHelper().getName()) {
    IntegerAttr peak = getPeakBytesAttrHelper().getAttr(op);
    if (!peak)
      return fail() << "must be an integer, got " << attribute.getValue();
    if (peak.getInt() < 0)
      return fail() << "must not be negative, got " << peak.getInt();
    return success();
  }
  return op->emitOpError("has the unknown attribute '")
         << name.getValue()
         << "': the loom dialect declares loom.offsets and loom.peak_bytes";
}
