//===- Formulas.h - what the host and the device both evaluate -*- C++ -*-===//
//
// The counter-based generators, dropout's key and the learning-rate
// schedule, written once so that every backend computes the same values:
// the cuda backend's dropout masks equal the host backend's bit for bit.
// Compiled by the host compiler and by nvcc (as host and device code).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COMMON_FORMULAS_H
#define LOOMRT_COMMON_FORMULAS_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define LOOMRT_HD __host__ __device__
#else
#define LOOMRT_HD
#endif

namespace loomrt {

/// splitmix64's finalizer: a bijective mix of a 64-bit counter.
LOOMRT_HD inline uint64_t hash64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Uniform in [0, 1) from a key.
LOOMRT_HD inline double uniform(uint64_t key) {
  return double(hash64(key) >> 11) * (1.0 / 9007199254740992.0);
}

/// The key of one dropout op's mask at a step; element i is kept when
/// uniform(key ^ hash64(i)) >= rate.
LOOMRT_HD inline uint64_t dropoutKey(int64_t opSeed, uint64_t runSeed,
                                     int64_t stream, int64_t step) {
  return hash64(hash64(hash64(uint64_t(opSeed) ^ runSeed) ^
                       uint64_t(stream + 1)) ^
                uint64_t(step));
}

/// Maps an element of a rank's block of a sharded tensor to its index in the
/// whole tensor, so that a value keyed by element (dropout's mask) is the
/// same whatever the sharding. Rank 0 or a tensor that is not sharded maps
/// every index to itself. A block of a dimension split unevenly ends in
/// padding: the elements at or past `limit` belong to no whole element.
struct ShardIndex {
  static constexpr int kMaxRank = 8;
  int32_t rank = 0;
  int64_t local[kMaxRank];   /* the block's dimensions */
  int64_t offset[kMaxRank];  /* where the block starts in the whole tensor */
  int64_t stride[kMaxRank];  /* the whole tensor's row-major strides */
  int64_t limit[kMaxRank];   /* where the block's real elements end */

  /// Whether element `i` of the block is padding.
  LOOMRT_HD bool padding(int64_t i) const {
    for (int32_t d = rank - 1; d >= 0; --d) {
      if (i % local[d] + offset[d] >= limit[d])
        return true;
      i /= local[d];
    }
    return false;
  }

  LOOMRT_HD int64_t global(int64_t i) const {
    if (rank == 0)
      return i;
    int64_t g = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      g += (i % local[d] + offset[d]) * stride[d];
      i /= local[d];
    }
    return g;
  }
};

/// The learning rate of a schedule at a step (the formula of
/// #train.schedule): linear warm-up, then constant (decay 0), linear (1) or
/// cosine (2) decay to minLr at `total`.
LOOMRT_HD inline double evaluateSchedule(double lr, int64_t warmup,
                                         int64_t total, int32_t decay,
                                         double minLr, double step) {
  if (step < double(warmup))
    return lr * (step + 1.0) / double(warmup);
  if (decay == 0)
    return lr;
  double progress = (step - double(warmup)) / double(total - warmup);
  progress = progress < 0.0 ? 0.0 : progress > 1.0 ? 1.0 : progress;
  if (decay == 1)
    return minLr + (lr - minLr) * (1.0 - progress);
  return minLr + 0.5 * (lr - minLr) * (1.0 + cos(M_PI * progress));
}

} // namespace loomrt

#endif // LOOMRT_COMMON_FORMULAS_H
