//===- Bf16.h - bfloat16 storage, rounded as CUDA rounds --------*- C++ -*-===//
//
// bf16 is the upper half of an IEEE binary32: the same sign and 8-bit
// exponent, 7 bits of fraction. The host backend stores bf16 tensors as
// those 16 bits and computes in float; a float is narrowed exactly as
// CUDA's __float2bfloat16_rn narrows it (cuda_bf16.hpp), so both backends
// hold the same bits for the same float:
// - round to nearest, ties to even, on the 16 bits dropped;
// - subnormals kept (no flush to zero), rounded like any other value;
// - a value that rounds past the largest finite bf16 becomes infinity;
// - NaN becomes the canonical NaN 0x7fff (sign dropped), never infinity.
// Widening is exact.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COMMON_BF16_H
#define LOOMRT_COMMON_BF16_H

#include <cstdint>
#include <cstring>

namespace loomrt {

inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  uint32_t kept = bits >> 16, dropped = bits << 16;
  if (dropped > 0x80000000u || (dropped == 0x80000000u && (kept & 1u)))
    ++kept; // a carry into the exponent is the correct rounding, up to inf
  return uint16_t(kept);
}

inline float bf16ToFloat(uint16_t value) {
  uint32_t bits = uint32_t(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

} // namespace loomrt

#endif // LOOMRT_COMMON_BF16_H
