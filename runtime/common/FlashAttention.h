//===- FlashAttention.h - attention without its s x s matrix ---*- C++ -*-===//
//
// softmax(q k^T / sqrt(d)) v and its backward for one head, one query row
// (or one key row) at a time, with the softmax's running maximum and sum
// (online softmax, as FlashAttention computes it): no s x s probabilities
// are stored, only three floats per query row between the backward's two
// passes. The same code runs in the cuda backend's kernels (one thread per
// row, `__host__ __device__`) and on the host in loomrt-unit-test, which
// checks it against a float64 reference (attention.test). Element type T is
// the storage (float, or bf16 through `Load`/`Store`); every sum is f32.
//
// Rows of q, k, v, dO and the results are `d` contiguous elements; row i of
// a head at element i * d. `causal`: query i reads keys 0..i.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COMMON_FLASHATTENTION_H
#define LOOMRT_COMMON_FLASHATTENTION_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define LOOMRT_HD __host__ __device__
#else
#define LOOMRT_HD
#endif

namespace loomrt::flash {

/// The largest head dimension the row functions hold in registers.
constexpr int64_t kMaxHeadDim = 256;

/// The softmax statistics of one query row, kept between the backward's
/// passes: the scores' maximum, the sum of their exponentials, and
/// D = rowsum(dO * O).
struct RowStats {
  float max, sum, dot;
};

template <class T, class Load>
LOOMRT_HD inline float score(const T *q, const T *k, int64_t i, int64_t j,
                             int64_t d, float scale, Load load) {
  float dot = 0.0f;
  for (int64_t c = 0; c < d; ++c)
    dot += load(q, i * d + c) * load(k, j * d + c);
  return dot * scale;
}

/// Query row i's output, unnormalised, into `acc` (d floats), with its
/// running maximum and sum: out_i = acc / sum.
template <class T, class Load>
LOOMRT_HD inline void forwardRow(const T *q, const T *k, const T *v,
                                 int64_t s, int64_t d, int64_t i, bool causal,
                                 float scale, Load load, float *acc,
                                 float &max, float &sum) {
  max = -INFINITY;
  sum = 0.0f;
  for (int64_t c = 0; c < d; ++c)
    acc[c] = 0.0f;
  int64_t end = causal ? i + 1 : s;
  for (int64_t j = 0; j < end; ++j) {
    float x = score(q, k, i, j, d, scale, load);
    if (x > max) {
      float shrink = expf(max - x);
      sum *= shrink;
      for (int64_t c = 0; c < d; ++c)
        acc[c] *= shrink;
      max = x;
    }
    float p = expf(x - max);
    sum += p;
    for (int64_t c = 0; c < d; ++c)
      acc[c] += p * load(v, j * d + c);
  }
}

/// The forward's row i: out_i = softmax(q_i k^T * scale) v.
template <class T, class Load, class Store>
LOOMRT_HD inline void attentionRow(T *out, const T *q, const T *k, const T *v,
                                   int64_t s, int64_t d, int64_t i,
                                   bool causal, float scale, Load load,
                                   Store store, float *acc) {
  float max, sum;
  forwardRow(q, k, v, s, d, i, causal, scale, load, acc, max, sum);
  for (int64_t c = 0; c < d; ++c)
    store(out, i * d + c, acc[c] / sum);
}

/// The backward's first pass, query row i: its statistics (the forward
/// recomputed, D_i = dO_i . O_i) and dq_i = scale sum_j P_ij (dP_ij - D_i)
/// k_j, where dP_ij = dO_i . v_j. `acc` holds d floats.
template <class T, class Load, class Store>
LOOMRT_HD inline RowStats queryGradRow(T *dq, const T *q, const T *k,
                                       const T *v, const T *grad, int64_t s,
                                       int64_t d, int64_t i, bool causal,
                                       float scale, Load load, Store store,
                                       float *acc) {
  RowStats stats;
  forwardRow(q, k, v, s, d, i, causal, scale, load, acc, stats.max,
             stats.sum);
  stats.dot = 0.0f;
  for (int64_t c = 0; c < d; ++c)
    stats.dot += load(grad, i * d + c) * (acc[c] / stats.sum);
  for (int64_t c = 0; c < d; ++c)
    acc[c] = 0.0f;
  int64_t end = causal ? i + 1 : s;
  for (int64_t j = 0; j < end; ++j) {
    float p = expf(score(q, k, i, j, d, scale, load) - stats.max) / stats.sum;
    float dp = 0.0f;
    for (int64_t c = 0; c < d; ++c)
      dp += load(grad, i * d + c) * load(v, j * d + c);
    float ds = p * (dp - stats.dot);
    for (int64_t c = 0; c < d; ++c)
      acc[c] += ds * load(k, j * d + c);
  }
  for (int64_t c = 0; c < d; ++c)
    store(dq, i * d + c, scale * acc[c]);
  return stats;
}

/// The backward's second pass, key row j, from the query rows' statistics:
/// dk_j = scale sum_i dS_ij q_i and dv_j = sum_i P_ij dO_i. `dkAcc` and
/// `dvAcc` hold d floats each.
template <class T, class Load, class Store>
LOOMRT_HD inline void keyGradRow(T *dk, T *dv, const T *q, const T *k,
                                 const T *v, const T *grad,
                                 const RowStats *stats, int64_t s, int64_t d,
                                 int64_t j, bool causal, float scale, Load load,
                                 Store store, float *dkAcc, float *dvAcc) {
  for (int64_t c = 0; c < d; ++c)
    dkAcc[c] = dvAcc[c] = 0.0f;
  for (int64_t i = causal ? j : 0; i < s; ++i) {
    float p = expf(score(q, k, i, j, d, scale, load) - stats[i].max) /
              stats[i].sum;
    float dp = 0.0f;
    for (int64_t c = 0; c < d; ++c)
      dp += load(grad, i * d + c) * load(v, j * d + c);
    float ds = p * (dp - stats[i].dot);
    for (int64_t c = 0; c < d; ++c) {
      dkAcc[c] += ds * load(q, i * d + c);
      dvAcc[c] += p * load(grad, i * d + c);
    }
  }
  for (int64_t c = 0; c < d; ++c) {
    store(dk, j * d + c, scale * dkAcc[c]);
    store(dv, j * d + c, dvAcc[c]);
  }
}

} // namespace loomrt::flash

#endif // LOOMRT_COMMON_FLASHATTENTION_H
