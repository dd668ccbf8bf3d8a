//===- Bounds.td - the sizes every pass may assume -------------------------===//
//
// Carried by every train and dist op (dialects/common/Bounds.h): tensors
// have static dimensions of at least 1 and fit in 63 bits of bytes, checked
// before any other verifier or shape inference sees the op.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_BOUNDS_TD
#define LOOM_COMMON_BOUNDS_TD

include "mlir/IR/OpBase.td"

def Loom_BoundedShapes : NativeOpTrait<"BoundedShapes"> {
  let cppNamespace = "::loom";
}

#endif // LOOM_COMMON_BOUNDS_TD
