//===- LoomDialect.cpp - the code generator's facts in the IR -------------===//

#include "dialects/loom/LoomDialect.h"

using namespace mlir;
using namespace loom::codegen;

#include "dialects/loom/LoomDialect.cpp.inc"

void LoomDialect::initialize() {}

/// The enclosing op's recorded arena sizes of the function `name` (one per
/// pipeline rank), or null.
static DenseI64ArrayAttr enclosingPeaks(LoomDialect &dialect, Operation *op,
                                        StringAttr name) {
  for (op = op->getParentOp(); op; op = op->getParentOp())
    if (DictionaryAttr peaks = dialect.getPeakBytesAttrHelper().getAttr(op))
      return dyn_cast_or_null<DenseI64ArrayAttr>(peaks.get(name));
  return {};
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  StringAttr name = attribute.getName();
  auto fail = [&]() {
    return op->emitOpError("attribute '") << name.getValue() << "' ";
  };
  auto dictionary = dyn_cast<DictionaryAttr>(attribute.getValue());
  bool known = name == getOffsetsAttrHelper().getName() ||
               name == getPeakBytesAttrHelper().getName();
  if (known && !dictionary)
    return fail() << "must be a dictionary of the functions' plans, got "
                  << attribute.getValue();
  if (name == getOffsetsAttrHelper().getName()) {
    for (NamedAttribute function : dictionary) {
      auto ranks = dyn_cast<ArrayAttr>(function.getValue());
      if (!ranks || !llvm::all_of(ranks, llvm::IsaPred<DenseI64ArrayAttr>))
        return fail() << "must list an array<i64> per pipeline rank for '"
                      << function.getName().getValue() << "', got "
                      << function.getValue();
      DenseI64ArrayAttr peaks = enclosingPeaks(*this, op, function.getName());
      if (peaks && peaks.size() != int64_t(ranks.size()))
        return fail() << "lists " << ranks.size() << " pipeline ranks for '"
                      << function.getName().getValue() << "', the model's "
                      << "arena sizes " << peaks.size();
      for (auto [rank, offsetsAttr] : llvm::enumerate(ranks)) {
        ArrayRef<int64_t> offsets =
            cast<DenseI64ArrayAttr>(offsetsAttr).asArrayRef();
        if (int64_t(offsets.size()) != int64_t(op->getNumResults()))
          return fail() << "lists " << offsets.size() << " offsets for "
                        << op->getNumResults() << " results";
        int64_t peak = peaks ? peaks[rank] : -1;
        for (int64_t offset : offsets) {
          if (offset < -1)
            return fail() << "has the offset " << offset
                          << " (an arena offset, or -1 outside the arena)";
          if (peak > 0 && offset >= peak)
            return fail() << "places a value of '"
                          << function.getName().getValue() << "' at " << offset
                          << ", outside the arena of " << peak << " bytes";
        }
      }
    }
    return success();
  }
  if (name == getPeakBytesAttrHelper().getName()) {
    for (NamedAttribute function : dictionary) {
      auto peaks = dyn_cast<DenseI64ArrayAttr>(function.getValue());
      if (!peaks)
        return fail() << "must give an array<i64> of arena sizes for '"
                      << function.getName().getValue() << "', got "
                      << function.getValue();
      for (int64_t peak : peaks.asArrayRef())
        if (peak < 0)
          return fail() << "must not be negative, got " << peak;
    }
    return success();
  }
  return op->emitOpError("has the unknown attribute '")
         << name.getValue()
         << "': the loom dialect declares loom.offsets and loom.peak_bytes";
}
