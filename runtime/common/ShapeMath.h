//===- ShapeMath.h - strides and broadcasting, host side -------*- C++ -*-===//
//
// The index arithmetic every backend's kernels start from: row-major
// strides, the strides of an operand broadcast into a result, and the row
// view of a tensor. Evaluated on the host (the cuda backend passes the
// results to its kernels).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COMMON_SHAPEMATH_H
#define LOOMRT_COMMON_SHAPEMATH_H

#include "Formulas.h"
#include "Internal.h"

#include <utility>
#include <vector>

namespace loomrt {

/// Row-major strides of a shape.
inline std::vector<int64_t> stridesOf(const Shape &s) {
  std::vector<int64_t> strides(s.rank, 1);
  for (int64_t i = s.rank - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * s[i + 1];
  return strides;
}

/// Strides of `in` (broadcast into `out`, aligned right): 0 along dimensions
/// where `in` has size 1 or does not exist.
inline std::vector<int64_t> broadcastStrides(const Shape &in,
                                             const Shape &out) {
  std::vector<int64_t> own = stridesOf(in), strides(out.rank, 0);
  int64_t offset = out.rank - in.rank;
  for (int64_t d = 0; d < in.rank; ++d)
    if (in[d] != 1)
      strides[d + offset] = own[d];
  return strides;
}

/// When `in` broadcasts into `out` only along leading dimensions (a bias
/// over a batch), the element count of `in`; 0 otherwise.
inline int64_t leadingBroadcast(const Shape &in, const Shape &out) {
  int64_t offset = out.rank - in.rank, inner = 1;
  bool ones = true; // still inside in's own leading 1s
  for (int64_t d = 0; d < in.rank; ++d) {
    if (ones && in[d] == 1)
      continue;
    ones = false;
    if (in[d] != out[d + offset])
      return 0;
    inner *= in[d];
  }
  return inner;
}

/// Rows of the last dimension: (rows, width).
inline std::pair<int64_t, int64_t> rowsOf(const Shape &s) {
  int64_t width = s.rank ? s.back() : 1;
  return {s.numel() / width, width};
}

/// The reduced-dimension flags of an array attribute.
inline std::vector<bool> reducedDims(loomrt_ctx *ctx, int64_t dims,
                                     int64_t rank) {
  Shape d = shapeOf(ctx, dims);
  std::vector<bool> reduced(rank, false);
  for (int64_t i = 0; i < d.rank; ++i)
    reduced[d[i]] = true;
  return reduced;
}

/// Where this rank's block of a sharded tensor lies in the whole tensor:
/// `global` is the whole tensor's shape and `groups` gives, per dimension,
/// the runtime group whose rank selects the block (0: not split); both
/// empty when the tensor is not sharded.
inline ShardIndex shardIndex(loomrt_ctx *ctx, int64_t localShape,
                             int64_t globalShape, int64_t groupsId) {
  ShardIndex index;
  Shape local = shapeOf(ctx, localShape), global = shapeOf(ctx, globalShape),
        groups = shapeOf(ctx, groupsId);
  if (global.rank == 0)
    return index;
  if (global.rank != local.rank || groups.rank != local.rank ||
      local.rank > ShardIndex::kMaxRank)
    fail("a sharded tensor's global shape and groups do not match its rank (" +
         std::to_string(local.rank) + ", " + std::to_string(global.rank) +
         ", " + std::to_string(groups.rank) + ")");
  index.rank = int32_t(local.rank);
  int64_t stride = 1;
  for (int64_t d = local.rank - 1; d >= 0; --d) {
    index.local[d] = local[d];
    index.stride[d] = stride;
    stride *= global[d];
    int64_t coordinate =
        groups[d] ? loomrt_group_rank(ctx, uint32_t(groups[d])) : 0;
    index.offset[d] = coordinate * local[d];
    index.limit[d] = global[d];
  }
  return index;
}

} // namespace loomrt

#endif // LOOMRT_COMMON_SHAPEMATH_H
