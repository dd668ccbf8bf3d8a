//===- Bounds.h - the sizes every pass may assume ---------------*- C++ -*-===//
//
// What the train and dist verifiers guarantee to every later pass, the code
// generator and the runtime: every tensor has static dimensions of at least
// 1 and at most 2^48 bytes (256 TiB, a thousand times any device's memory;
// the 175B model's largest stacked weight is 2^38 bytes), so element counts,
// byte sizes, offsets and small multiples of them (a cost's 12 FLOPs per
// element, an arena of a few thousand tensors) never overflow `int64_t`.
// Products and sums without such a bound (a matmul's FLOPs, a repeat's
// total) use the saturating helpers below.
//
// Zero-size dimensions are rejected rather than supported: no op of a
// training step has a meaningful empty operand (a batch of 0 has no loss),
// and the runtime's kernels divide by them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_COMMON_BOUNDS_H
#define LOOM_DIALECTS_COMMON_BOUNDS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <limits>
#include <optional>

namespace loom {

/// The largest tensor, in bytes, that any op may have.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
/// The most devices a mesh may have: a simulation or a table per rank stays
/// bounded (the largest training clusters have about 10^5 devices).
inline constexpr int64_t kMaxMeshDevices = int64_t(1) << 20;
/// The most iterations a `train.repeat` may have: passes that look at each
/// layer (the stage partitioner) stay bounded. Layers and micro-batches are
/// in the hundreds or thousands in practice.
inline constexpr int64_t kMaxRepeatCount = int64_t(1) << 20;

/// Bytes of one element of `type` (bits rounded up to bytes).
inline int64_t elementBytes(mlir::Type type) {
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
  return 8; // index, and anything else the ops' constraints reject
}

/// `a * b` and `a + b` that stop at the largest int64_t instead of
/// overflowing; for non-negative sizes.
inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return llvm::MulOverflow(a, b, r) ? std::numeric_limits<int64_t>::max() : r;
}
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  return llvm::AddOverflow(a, b, r) ? std::numeric_limits<int64_t>::max() : r;
}

/// Bytes of a value of `type`: a ranked tensor's elements times their byte
/// width, 0 for anything else. The one byte-size helper of the compiler
/// (passes, the memory plan, the report, the code generator); the
/// verifiers keep a tensor within kMaxTensorBytes.
inline int64_t tensorBytes(mlir::Type type) {
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return tensor.getNumElements() * elementBytes(tensor.getElementType());
}

/// The byte size of a tensor type with static positive dimensions, or none
/// when it does not fit in 63 bits.
inline std::optional<int64_t> checkedTensorBytes(mlir::ShapedType type) {
  int64_t bytes = elementBytes(type.getElementType());
  for (int64_t d : type.getShape())
    if (d <= 0 || llvm::MulOverflow(bytes, d, bytes) || bytes > kMaxTensorBytes)
      return std::nullopt;
  return bytes;
}

/// Why `type` breaks the bounds above, or an empty string.
inline std::string shapeBoundsViolation(mlir::Type type) {
  auto shaped = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!shaped)
    return {};
  for (int64_t d : shaped.getShape()) {
    if (mlir::ShapedType::isDynamic(d))
      return "has a dynamic dimension; Loom needs static shapes";
    if (d == 0)
      return "has a dimension of size 0; every dimension must be at least 1";
    if (d < 0)
      return "has a negative dimension";
  }
  if (!checkedTensorBytes(shaped))
    return "has more than 2^48 bytes, the largest tensor Loom accepts";
  return {};
}

/// Checks every ranked tensor operand and result of `op` against the
/// bounds; a diagnostic names the value and its type.
inline llvm::LogicalResult verifyShapeBounds(mlir::Operation *op) {
  auto check = [&](mlir::Type type, llvm::StringRef what,
                   unsigned index) -> llvm::LogicalResult {
    std::string why = shapeBoundsViolation(type);
    if (why.empty())
      return llvm::success();
    return op->emitOpError() << what << " #" << index << " (" << type << ") "
                             << why;
  };
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", i)))
      return llvm::failure();
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", i)))
      return llvm::failure();
  for (mlir::Region &region : op->getRegions())
    for (mlir::Block &block : region)
      for (auto [i, arg] : llvm::enumerate(block.getArguments()))
        if (failed(check(arg.getType(), "block argument", i)))
          return llvm::failure();
  return llvm::success();
}

/// The trait the train and dist ops carry: `verifyShapeBounds` before any
/// other verifier, shape inference included, looks at the op's types.
template <typename ConcreteType>
class BoundedShapes
    : public mlir::OpTrait::TraitBase<ConcreteType, BoundedShapes> {
public:
  static llvm::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyShapeBounds(op);
  }
};

} // namespace loom

#endif // LOOM_DIALECTS_COMMON_BOUNDS_H
