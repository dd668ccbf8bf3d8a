//===- Kernels.cpp - host kernels for every train op -----------------------===//
//
// f32 kernels on host memory; gemms through OpenBLAS. Reductions accumulate
// in double. Each kernel follows the argument rule of loomrt.h.
//
//===----------------------------------------------------------------------===//

#include "Bf16.h"
#include "Internal.h"
#include "ShapeMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace loomrt;

namespace {

/// Calls f(outIndex, aIndex, bIndex) for every element of `out`.
template <typename Fn>
void forEachBroadcast(const Shape &out, const std::vector<int64_t> &sa,
                      const std::vector<int64_t> &sb, Fn f) {
  int64_t n = out.numel();
  std::vector<int64_t> index(out.rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < n; ++o) {
    f(o, ia, ib);
    for (int64_t d = out.rank - 1; d >= 0; --d) {
      ++index[d];
      ia += sa[d];
      ib += sb[d];
      if (index[d] < out[d])
        break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      index[d] = 0;
    }
  }
}

float *F(loomrt_buf *b) { return reinterpret_cast<float *>(b); }
const int32_t *I(loomrt_buf *b) { return reinterpret_cast<int32_t *>(b); }

/// y[i] = x[offset of i under `strides`] for every element i of `shape`,
/// or the reverse (scatter) when `scatter` is set; whole rows at once when
/// the last dimension is contiguous on both sides.
void copyStrided(const Shape &shape, const std::vector<int64_t> &strides,
                 const float *x, float *y, bool scatter = false) {
  std::vector<int64_t> zero(shape.rank, 0);
  if (shape.rank > 1 && strides.back() == 1) {
    int64_t row = shape.back();
    Shape rows{shape.rank - 1, shape.dims};
    forEachBroadcast(rows, strides, zero, [&](int64_t i, int64_t is, int64_t) {
      if (scatter)
        std::memcpy(y + is, x + i * row, row * sizeof(float));
      else
        std::memcpy(y + i * row, x + is, row * sizeof(float));
    });
    return;
  }
  forEachBroadcast(shape, strides, zero, [&](int64_t i, int64_t is, int64_t) {
    if (scatter)
      y[is] = x[i];
    else
      y[i] = x[is];
  });
}

template <typename Fn>
void binary(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs,
            int64_t so, int64_t sl, int64_t sr, Fn f) {
  Shape o = shapeOf(ctx, so), l = shapeOf(ctx, sl), r = shapeOf(ctx, sr);
  float *y = F(out);
  const float *a = F(lhs), *b = F(rhs);
  int64_t n = o.numel();
  if (l.numel() == n && r.numel() == n) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = f(a[i], b[i]);
    return;
  }
  if (int64_t inner = l.numel() == n ? leadingBroadcast(r, o) : 0) {
    for (int64_t i = 0; i < n; i += inner)
      for (int64_t j = 0; j < inner; ++j)
        y[i + j] = f(a[i + j], b[j]);
    return;
  }
  forEachBroadcast(o, broadcastStrides(l, o), broadcastStrides(r, o),
                   [&](int64_t i, int64_t ia, int64_t ib) {
                     y[i] = f(a[ia], b[ib]);
                   });
}

template <typename Fn>
void unary(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in, int64_t so,
           Fn f) {
  float *y = F(out);
  const float *x = F(in);
  for (int64_t i = 0, n = shapeOf(ctx, so).numel(); i < n; ++i)
    y[i] = f(x[i]);
}

template <typename Fn>
void unaryGrad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
               loomrt_buf *grad, int64_t so, Fn f) {
  float *y = F(out);
  const float *x = F(in), *g = F(grad);
  for (int64_t i = 0, n = shapeOf(ctx, so).numel(); i < n; ++i)
    y[i] = g[i] * f(x[i]);
}

constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)

/// exp(x) for x in [-87, 87], within 2 ulp: x = n ln2 + r, |r| <= ln2/2,
/// exp(r) by its degree-6 Taylor polynomial, 2^n from the exponent bits.
/// Branch-free, so loops over it vectorize.
inline float vexp(float x) {
  x = std::min(std::max(x, -87.0f), 87.0f);
  float n = std::nearbyint(x * 1.4426950408889634f);
  float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/// tanh through one exp: 1 - 2 / (exp(2x) + 1).
inline float fastTanh(float x) { return 1.0f - 2.0f / (vexp(2.0f * x) + 1.0f); }

float sigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

/// A sum kept in double stored to f32: written, or with `accumulate` added
/// to what is there (the bits train.add gives the rounded sum).
float store(float old, double sum, bool accumulate) {
  return accumulate ? old + float(sum) : float(sum);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float *a, const float *b, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, ta ? m : k, b,
              tb ? k : n, beta, c, n);
}

/// For each input element, the offset of the output element it reduces
/// into (reduced dimensions dropped).
std::vector<int64_t> reductionMap(const Shape &in,
                                  const std::vector<bool> &reduced) {
  std::vector<int64_t> keptStride(in.rank, 0);
  int64_t stride = 1;
  for (int64_t d = in.rank - 1; d >= 0; --d)
    if (!reduced[d]) {
      keptStride[d] = stride;
      stride *= in[d];
    }
  std::vector<int64_t> map(in.numel());
  Shape out{in.rank, in.dims};
  std::vector<int64_t> zero(in.rank, 0);
  forEachBroadcast(out, keptStride, zero,
                   [&](int64_t i, int64_t io, int64_t) { map[i] = io; });
  return map;
}

} // namespace

namespace {
// The optimizer's steps read an f32 gradient, or a bf16 one in place
// (--grad-precision=bf16: a whole stacked gradient, never copied to f32).
float load(const float *x, int64_t i) { return x[i]; }
float load(const uint16_t *x, int64_t i) { return bf16ToFloat(x[i]); }

template <class G>
void sumSquares(loomrt_ctx *c, loomrt_buf *out, const G *x, int64_t si,
                int64_t position, int64_t replicaGroup) {
  // The running sum stays in the context, in double, between the calls
  // for each operand; the output holds it rounded.
  double sum = position == 0 ? 0.0 : c->squaresRunning;
  if (!replicaGroup || loomrt_group_rank(c, uint32_t(replicaGroup)) == 0)
    for (int64_t i = 0, n = shapeOf(c, si).numel(); i < n; ++i) {
      double g = load(x, i);
      sum += g * g;
    }
  c->squaresRunning = sum;
  F(out)[0] = float(sum);
}

template <class G>
void sgdUpdate(loomrt_ctx *c, loomrt_buf *newParam, loomrt_buf *newMomentum,
               loomrt_buf *param, const G *g, loomrt_buf *momentum,
               loomrt_buf *lr, int64_t sp, double momentumF,
               double weightDecay) {
  int64_t n = shapeOf(c, sp).numel();
  float rate = F(lr)[0], mu = float(momentumF), wd = float(weightDecay);
  const float *p = F(param);
  for (int64_t i = 0; i < n; ++i) {
    float d = load(g, i) + wd * p[i];
    if (momentum) {
      d = mu * F(momentum)[i] + d;
      F(newMomentum)[i] = d;
    }
    F(newParam)[i] = p[i] - rate * d;
  }
}

template <class G>
void adamwUpdate(loomrt_ctx *c, loomrt_buf *newParam, loomrt_buf *newM,
                 loomrt_buf *newV, loomrt_buf *param, const G *g,
                 loomrt_buf *m, loomrt_buf *v, loomrt_buf *lr,
                 loomrt_buf *step, int64_t sp, double beta1, double beta2,
                 double eps, double weightDecay) {
  int64_t n = shapeOf(c, sp).numel();
  double t = double(F(step)[0]) + 1.0;
  float rate = F(lr)[0];
  float b1 = float(beta1), b2 = float(beta2);
  float bc1 = float(1.0 - std::pow(beta1, t));
  float sqrtBc2 = float(std::sqrt(1.0 - std::pow(beta2, t)));
  float decay = float(1.0 - double(rate) * weightDecay);
  const float *p = F(param), *mi = F(m), *vi = F(v);
  for (int64_t i = 0; i < n; ++i) {
    float gi = load(g, i);
    float mm = b1 * mi[i] + (1.0f - b1) * gi;
    float vv = b2 * vi[i] + (1.0f - b2) * gi * gi;
    F(newM)[i] = mm;
    F(newV)[i] = vv;
    F(newParam)[i] =
        p[i] * decay - (rate / bc1) * mm / (std::sqrt(vv) / sqrtBc2 + float(eps));
  }
}
} // namespace

// The host computes bf16 matmuls and attention on f32 copies
// (Bf16Kernels.cpp), with OpenBLAS's f32 GEMM.
bool loomrt::backend::matmulBf16(loomrt_ctx *, loomrt_buf *, loomrt_buf *,
                                 loomrt_buf *, int64_t, int64_t, int64_t,
                                 int32_t, int32_t, bool) {
  return false;
}
bool loomrt::backend::attentionBf16(loomrt_ctx *, loomrt_buf *, loomrt_buf *,
                                    loomrt_buf *, loomrt_buf *, int64_t,
                                    int32_t) {
  return false;
}
bool loomrt::backend::attentionGradBf16(loomrt_ctx *, loomrt_buf *,
                                        loomrt_buf *, loomrt_buf *,
                                        loomrt_buf *, loomrt_buf *,
                                        loomrt_buf *, loomrt_buf *, int64_t,
                                        int32_t) {
  return false;
}

void loomrt::backend::addBf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *a,
                              loomrt_buf *b, int64_t n) {
  const uint16_t *x = reinterpret_cast<const uint16_t *>(a);
  const uint16_t *y = reinterpret_cast<const uint16_t *>(b);
  uint16_t *z = reinterpret_cast<uint16_t *>(out);
  for (int64_t i = 0; i < n; ++i)
    z[i] = floatToBf16(bf16ToFloat(x[i]) + bf16ToFloat(y[i]));
}

void loomrt::backend::scaleBf16(loomrt_ctx *c, loomrt_buf *out,
                                loomrt_buf *in, int64_t n,
                                loomrt_buf *scale) {
  float k = bf16ToFloat(*reinterpret_cast<const uint16_t *>(scale));
  const uint16_t *x = reinterpret_cast<const uint16_t *>(in);
  uint16_t *y = reinterpret_cast<uint16_t *>(out);
  for (int64_t i = 0; i < n; ++i)
    y[i] = floatToBf16(bf16ToFloat(x[i]) * k);
}

extern "C" {

namespace {
/// out = lhs x rhs, or out += lhs x rhs with `accumulate` (beta = 1).
void matmul(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs,
            int64_t so, int64_t sl, int64_t sr, int32_t ta, int32_t tb,
            bool accumulate) {
  float beta = accumulate ? 1.0f : 0.0f;
  Shape o = shapeOf(ctx, so), l = shapeOf(ctx, sl), r = shapeOf(ctx, sr);
  int64_t m = o[o.rank - 2], n = o[o.rank - 1];
  int64_t k = ta ? l[l.rank - 2] : l[l.rank - 1];
  int64_t batch = o.numel() / (m * n);
  const float *a = F(lhs), *b = F(rhs);
  float *c = F(out);
  bool sharedRhs = r.rank == 2;
  if (sharedRhs && !ta) {
    gemm(false, tb, batch * m, n, k, 1.0f, a, b, beta, c);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    gemm(ta, tb, m, n, k, 1.0f, a + i * m * k, sharedRhs ? b : b + i * k * n,
         beta, c + i * m * n);
}
} // namespace

void loomrt_matmul(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *lhs,
                   loomrt_buf *rhs, int64_t so, int64_t sl, int64_t sr,
                   int32_t ta, int32_t tb) {
  matmul(ctx, out, lhs, rhs, so, sl, sr, ta, tb, false);
}
void loomrt_matmul_accumulate(loomrt_ctx *ctx, loomrt_buf *out,
                              loomrt_buf *lhs, loomrt_buf *rhs, int64_t so,
                              int64_t sl, int64_t sr, int32_t ta, int32_t tb) {
  matmul(ctx, out, lhs, rhs, so, sl, sr, ta, tb, true);
}

void loomrt_add(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, [](float x, float y) { return x + y; });
}
void loomrt_sub(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, [](float x, float y) { return x - y; });
}
void loomrt_mul(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, [](float x, float y) { return x * y; });
}
void loomrt_div(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, [](float x, float y) { return x / y; });
}

void loomrt_relu(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                 int64_t) {
  unary(c, o, i, so, [](float x) { return x > 0.0f ? x : 0.0f; });
}
void loomrt_gelu(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                 int64_t) {
  unary(c, o, i, so, [](float x) {
    return 0.5f * x * (1.0f + fastTanh(kGeluC * (x + 0.044715f * x * x * x)));
  });
}
void loomrt_silu(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                 int64_t) {
  unary(c, o, i, so, [](float x) { return x * sigmoid(x); });
}
void loomrt_tanh(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                 int64_t) {
  unary(c, o, i, so, [](float x) { return std::tanh(x); });
}
void loomrt_exp(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                int64_t) {
  unary(c, o, i, so, [](float x) { return std::exp(x); });
}
void loomrt_log(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                int64_t) {
  unary(c, o, i, so, [](float x) { return std::log(x); });
}
void loomrt_sqrt(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                 int64_t) {
  unary(c, o, i, so, [](float x) { return std::sqrt(x); });
}
void loomrt_rsqrt(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                  int64_t) {
  unary(c, o, i, so, [](float x) { return 1.0f / std::sqrt(x); });
}

void loomrt_relu_grad(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *x,
                      loomrt_buf *g, int64_t so, int64_t, int64_t) {
  unaryGrad(c, o, x, g, so, [](float v) { return v > 0.0f ? 1.0f : 0.0f; });
}
void loomrt_gelu_grad(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *x,
                      loomrt_buf *g, int64_t so, int64_t, int64_t) {
  unaryGrad(c, o, x, g, so, [](float v) {
    float t = fastTanh(kGeluC * (v + 0.044715f * v * v * v));
    return 0.5f * (1.0f + t) +
           0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
  });
}
void loomrt_silu_grad(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *x,
                      loomrt_buf *g, int64_t so, int64_t, int64_t) {
  unaryGrad(c, o, x, g, so, [](float v) {
    float s = sigmoid(v);
    return s * (1.0f + v * (1.0f - s));
  });
}
void loomrt_tanh_grad(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *y,
                      loomrt_buf *g, int64_t so, int64_t, int64_t) {
  unaryGrad(c, o, y, g, so, [](float v) { return 1.0f - v * v; });
}

void loomrt_scale(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                  int64_t, double factor) {
  float f = float(factor);
  unary(c, o, i, so, [f](float x) { return x * f; });
}

void loomrt_convert(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                    int64_t, int32_t elementType) {
  // To the type it has: a copy.
  std::memmove(o, i, shapeOf(c, so).numel() * elementBytes(elementType));
}

void loomrt_convert_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                         int64_t so, int64_t, int32_t elementType) {
  int64_t n = shapeOf(c, so).numel();
  if (elementType == LOOMRT_BF16) {
    const float *x = F(i);
    uint16_t *y = reinterpret_cast<uint16_t *>(o);
    for (int64_t k = 0; k < n; ++k)
      y[k] = floatToBf16(x[k]);
  } else {
    const uint16_t *x = reinterpret_cast<const uint16_t *>(i);
    float *y = F(o);
    for (int64_t k = 0; k < n; ++k)
      y[k] = bf16ToFloat(x[k]);
  }
}

void loomrt_reduce(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
                   int64_t si, int64_t dims, int32_t kind) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si);
  std::vector<int64_t> map = reductionMap(s, reducedDims(c, dims, s.rank));
  int64_t n = o.numel();
  const float *x = F(in);
  float *y = F(out);
  if (kind == 2) { // max
    std::vector<float> acc(n, -std::numeric_limits<float>::infinity());
    for (size_t i = 0; i < map.size(); ++i)
      acc[map[i]] = std::max(acc[map[i]], x[i]);
    std::copy(acc.begin(), acc.end(), y);
    return;
  }
  std::vector<double> acc(n, 0.0);
  for (size_t i = 0; i < map.size(); ++i)
    acc[map[i]] += x[i];
  double scale = kind == 1 ? double(n) / double(s.numel()) : 1.0;
  for (int64_t i = 0; i < n; ++i)
    y[i] = float(acc[i] * scale);
}

void loomrt_broadcast(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                      int64_t so, int64_t si, int64_t dims) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si), d = shapeOf(c, dims);
  std::vector<int64_t> own = stridesOf(s), strides(o.rank, 0), zero(o.rank, 0);
  for (int64_t i = 0; i < d.rank; ++i)
    strides[d[i]] = own[i];
  const float *x = F(in);
  float *y = F(out);
  forEachBroadcast(o, strides, zero,
                   [&](int64_t i, int64_t ix, int64_t) { y[i] = x[ix]; });
}

namespace {
/// The sums, written to `out` or, with `accumulate`, added to it (each
/// rounded to f32 first: the bits of a sum added by train.add).
void sumTo(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
           int64_t si, bool accumulate) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si);
  std::vector<double> acc(o.numel(), 0.0);
  const float *x = F(in);
  if (int64_t inner = leadingBroadcast(o, s)) {
    for (int64_t i = 0, n = s.numel(); i < n; i += inner)
      for (int64_t j = 0; j < inner; ++j)
        acc[j] += x[i + j];
    for (int64_t j = 0; j < inner; ++j)
      F(out)[j] = store(F(out)[j], acc[j], accumulate);
    return;
  }
  std::vector<int64_t> strides = broadcastStrides(o, s), zero(s.rank, 0);
  forEachBroadcast(s, strides, zero,
                   [&](int64_t i, int64_t io, int64_t) { acc[io] += x[i]; });
  float *y = F(out);
  for (size_t i = 0; i < acc.size(); ++i)
    y[i] = store(y[i], acc[i], accumulate);
}
} // namespace

void loomrt_sum_to(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
                   int64_t si) {
  sumTo(c, out, in, so, si, false);
}
void loomrt_sum_to_accumulate(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                              int64_t so, int64_t si) {
  sumTo(c, out, in, so, si, true);
}

void loomrt_reduce_max_grad(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                            loomrt_buf *max, loomrt_buf *grad, int64_t,
                            int64_t si, int64_t, int64_t, int64_t dims) {
  Shape s = shapeOf(c, si);
  std::vector<int64_t> map = reductionMap(s, reducedDims(c, dims, s.rank));
  const float *x = F(in), *m = F(max), *g = F(grad);
  float *y = F(out);
  for (size_t i = 0; i < map.size(); ++i)
    y[i] = x[i] == m[map[i]] ? g[map[i]] : 0.0f;
}

void loomrt_softmax(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
                    int64_t) {
  auto [rows, w] = rowsOf(shapeOf(c, so));
  const float *x = F(in);
  float *y = F(out);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * w;
    float *yr = y + r * w;
    float mx = *std::max_element(xr, xr + w);
    double sum = 0.0;
    for (int64_t j = 0; j < w; ++j)
      yr[j] = vexp(xr[j] - mx);
    for (int64_t j = 0; j < w; ++j)
      sum += yr[j];
    float inv = float(1.0 / sum);
    for (int64_t j = 0; j < w; ++j)
      yr[j] *= inv;
  }
}

void loomrt_softmax_grad(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *y,
                         loomrt_buf *grad, int64_t so, int64_t, int64_t) {
  auto [rows, w] = rowsOf(shapeOf(c, so));
  const float *p = F(y), *g = F(grad);
  float *d = F(out);
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0.0;
    for (int64_t j = 0; j < w; ++j)
      dot += double(g[r * w + j]) * p[r * w + j];
    for (int64_t j = 0; j < w; ++j)
      d[r * w + j] = p[r * w + j] * (g[r * w + j] - float(dot));
  }
}

void loomrt_layer_norm(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                       loomrt_buf *gamma, loomrt_buf *beta, int64_t so,
                       int64_t, int64_t, int64_t, double epsilon) {
  auto [rows, w] = rowsOf(shapeOf(c, so));
  const float *x = F(in), *g = F(gamma), *b = F(beta);
  float *y = F(out);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * w;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < w; ++j)
      mean += xr[j];
    mean /= w;
    for (int64_t j = 0; j < w; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= w;
    float rstd = float(1.0 / std::sqrt(var + epsilon));
    for (int64_t j = 0; j < w; ++j)
      y[r * w + j] = float(xr[j] - mean) * rstd * g[j] + b[j];
  }
}

namespace {
void layerNormGrad(loomrt_ctx *c, loomrt_buf *dx, loomrt_buf *dgamma,
                   loomrt_buf *dbeta, loomrt_buf *in, loomrt_buf *gamma,
                   loomrt_buf *grad, int64_t sdx, double epsilon,
                   bool accumulate) {
  auto [rows, w] = rowsOf(shapeOf(c, sdx));
  const float *x = F(in), *g = F(gamma), *dy = F(grad);
  std::vector<double> dg(w, 0.0), db(w, 0.0);
  std::vector<float> xhat(w), dxhat(w);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * w, *dyr = dy + r * w;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < w; ++j)
      mean += xr[j];
    mean /= w;
    for (int64_t j = 0; j < w; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= w;
    double rstd = 1.0 / std::sqrt(var + epsilon);
    double meanD = 0.0, meanDX = 0.0;
    for (int64_t j = 0; j < w; ++j) {
      xhat[j] = float((xr[j] - mean) * rstd);
      dxhat[j] = dyr[j] * g[j];
      dg[j] += double(dyr[j]) * xhat[j];
      db[j] += dyr[j];
      meanD += dxhat[j];
      meanDX += double(dxhat[j]) * xhat[j];
    }
    meanD /= w;
    meanDX /= w;
    for (int64_t j = 0; j < w; ++j)
      F(dx)[r * w + j] = float(rstd * (dxhat[j] - meanD - xhat[j] * meanDX));
  }
  for (int64_t j = 0; j < w; ++j) {
    F(dgamma)[j] = store(F(dgamma)[j], dg[j], accumulate);
    F(dbeta)[j] = store(F(dbeta)[j], db[j], accumulate);
  }
}
} // namespace

void loomrt_layer_norm_grad(loomrt_ctx *c, loomrt_buf *dx, loomrt_buf *dgamma,
                            loomrt_buf *dbeta, loomrt_buf *in,
                            loomrt_buf *gamma, loomrt_buf *grad, int64_t sdx,
                            int64_t, int64_t, int64_t, int64_t, int64_t,
                            double epsilon) {
  layerNormGrad(c, dx, dgamma, dbeta, in, gamma, grad, sdx, epsilon, false);
}
void loomrt_layer_norm_grad_accumulate(loomrt_ctx *c, loomrt_buf *dx,
                                       loomrt_buf *dgamma, loomrt_buf *dbeta,
                                       loomrt_buf *in, loomrt_buf *gamma,
                                       loomrt_buf *grad, int64_t sdx, int64_t,
                                       int64_t, int64_t, int64_t, int64_t,
                                       double epsilon) {
  layerNormGrad(c, dx, dgamma, dbeta, in, gamma, grad, sdx, epsilon, true);
}

void loomrt_rms_norm(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                     loomrt_buf *gamma, int64_t so, int64_t, int64_t,
                     double epsilon) {
  auto [rows, w] = rowsOf(shapeOf(c, so));
  const float *x = F(in), *g = F(gamma);
  float *y = F(out);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0.0;
    for (int64_t j = 0; j < w; ++j)
      ms += double(x[r * w + j]) * x[r * w + j];
    float inv = float(1.0 / std::sqrt(ms / w + epsilon));
    for (int64_t j = 0; j < w; ++j)
      y[r * w + j] = x[r * w + j] * inv * g[j];
  }
}

namespace {
void rmsNormGrad(loomrt_ctx *c, loomrt_buf *dx, loomrt_buf *dgamma,
                 loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad,
                 int64_t sdx, double epsilon, bool accumulate) {
  auto [rows, w] = rowsOf(shapeOf(c, sdx));
  const float *x = F(in), *g = F(gamma), *dy = F(grad);
  std::vector<double> dg(w, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0.0;
    for (int64_t j = 0; j < w; ++j)
      ms += double(x[r * w + j]) * x[r * w + j];
    double inv = 1.0 / std::sqrt(ms / w + epsilon);
    double meanDX = 0.0;
    for (int64_t j = 0; j < w; ++j) {
      double xhat = x[r * w + j] * inv;
      dg[j] += dy[r * w + j] * xhat;
      meanDX += dy[r * w + j] * g[j] * xhat;
    }
    meanDX /= w;
    for (int64_t j = 0; j < w; ++j)
      F(dx)[r * w + j] =
          float(inv * (dy[r * w + j] * g[j] - x[r * w + j] * inv * meanDX));
  }
  for (int64_t j = 0; j < w; ++j)
    F(dgamma)[j] = store(F(dgamma)[j], dg[j], accumulate);
}
} // namespace

void loomrt_rms_norm_grad(loomrt_ctx *c, loomrt_buf *dx, loomrt_buf *dgamma,
                          loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad,
                          int64_t sdx, int64_t, int64_t, int64_t, int64_t,
                          double epsilon) {
  rmsNormGrad(c, dx, dgamma, in, gamma, grad, sdx, epsilon, false);
}
void loomrt_rms_norm_grad_accumulate(loomrt_ctx *c, loomrt_buf *dx,
                                     loomrt_buf *dgamma, loomrt_buf *in,
                                     loomrt_buf *gamma, loomrt_buf *grad,
                                     int64_t sdx, int64_t, int64_t, int64_t,
                                     int64_t, double epsilon) {
  rmsNormGrad(c, dx, dgamma, in, gamma, grad, sdx, epsilon, true);
}

namespace {
/// Probabilities of one (batch, head): softmax(q k^T * scale + mask).
void attentionProbs(const float *q, const float *k, int64_t s, int64_t d,
                    bool causal, float *p) {
  gemm(false, true, s, s, d, float(1.0 / std::sqrt(double(d))), q, k, 0.0f, p);
  for (int64_t i = 0; i < s; ++i) {
    float *row = p + i * s;
    int64_t width = causal ? i + 1 : s;
    float mx = *std::max_element(row, row + width);
    double sum = 0.0;
    for (int64_t j = 0; j < width; ++j)
      row[j] = vexp(row[j] - mx);
    for (int64_t j = 0; j < width; ++j)
      sum += row[j];
    for (int64_t j = 0; j < width; ++j)
      row[j] = float(row[j] / sum);
    for (int64_t j = width; j < s; ++j)
      row[j] = 0.0f;
  }
}
} // namespace

void loomrt_attention(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *q,
                      loomrt_buf *k, loomrt_buf *v, int64_t so, int64_t,
                      int64_t, int64_t, int32_t causal) {
  Shape o = shapeOf(c, so);
  int64_t s = o[2], d = o[3], heads = o[0] * o[1];
  std::vector<float> p(s * s);
  for (int64_t h = 0; h < heads; ++h) {
    int64_t off = h * s * d;
    attentionProbs(F(q) + off, F(k) + off, s, d, causal, p.data());
    gemm(false, false, s, d, s, 1.0f, p.data(), F(v) + off, 0.0f,
         F(out) + off);
  }
}

void loomrt_attention_grad(loomrt_ctx *c, loomrt_buf *dq, loomrt_buf *dk,
                           loomrt_buf *dv, loomrt_buf *q, loomrt_buf *k,
                           loomrt_buf *v, loomrt_buf *grad, int64_t sdq,
                           int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int32_t causal) {
  Shape o = shapeOf(c, sdq);
  int64_t s = o[2], d = o[3], heads = o[0] * o[1];
  float scale = float(1.0 / std::sqrt(double(d)));
  std::vector<float> p(s * s), dp(s * s);
  for (int64_t h = 0; h < heads; ++h) {
    int64_t off = h * s * d;
    const float *qh = F(q) + off, *kh = F(k) + off, *vh = F(v) + off,
                *gh = F(grad) + off;
    attentionProbs(qh, kh, s, d, causal, p.data());
    // dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P)).
    gemm(true, false, s, d, s, 1.0f, p.data(), gh, 0.0f, F(dv) + off);
    gemm(false, true, s, s, d, 1.0f, gh, vh, 0.0f, dp.data());
    for (int64_t i = 0; i < s; ++i) {
      double dot = 0.0;
      for (int64_t j = 0; j < s; ++j)
        dot += double(dp[i * s + j]) * p[i * s + j];
      for (int64_t j = 0; j < s; ++j)
        dp[i * s + j] = p[i * s + j] * (dp[i * s + j] - float(dot));
    }
    gemm(false, false, s, d, s, scale, dp.data(), kh, 0.0f, F(dq) + off);
    gemm(true, false, s, d, s, scale, dp.data(), qh, 0.0f, F(dk) + off);
  }
}

void loomrt_causal_mask(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                        int64_t so, int64_t, double fill) {
  Shape o = shapeOf(c, so);
  int64_t sq = o[o.rank - 2], sk = o[o.rank - 1];
  int64_t mats = o.numel() / (sq * sk);
  const float *x = F(in);
  float *y = F(out);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) {
        int64_t e = (m * sq + i) * sk + j;
        y[e] = j > i ? float(fill) : x[e];
      }
}

namespace {
/// The rows of a table of `rows` rows a rank holds: [first, first + rows)
/// of a vocabulary of `vocab` (the whole table, or, with a vocab group,
/// the group's blocks together).
struct VocabBlock {
  int64_t first = 0, rows = 0, vocab = 0;
};
VocabBlock vocabBlock(loomrt_ctx *c, int64_t rows, int64_t group) {
  if (!group)
    return {0, rows, rows};
  return {loomrt_group_rank(c, uint32_t(group)) * rows, rows,
          loomrt_group_size(c, uint32_t(group)) * rows};
}
} // namespace

void loomrt_embedding(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *table,
                      loomrt_buf *ids, int64_t, int64_t st, int64_t sids,
                      int64_t vocab_group,
                      int64_t /*vocab_size: the ids' bound*/) {
  Shape t = shapeOf(c, st);
  int64_t dim = t[1], n = shapeOf(c, sids).numel();
  VocabBlock block = vocabBlock(c, t[0], vocab_group);
  for (int64_t i = 0; i < n; ++i) {
    int32_t id = I(ids)[i];
    if (id < 0 || id >= block.vocab)
      fail("train.embedding: id " + std::to_string(id) + " at position " +
           std::to_string(i) + " is outside the vocabulary [0, " +
           std::to_string(block.vocab) + ")");
    int64_t row = id - block.first;
    if (row < 0 || row >= block.rows)
      std::memset(F(out) + i * dim, 0, dim * sizeof(float));
    else
      std::memcpy(F(out) + i * dim, F(table) + row * dim, dim * sizeof(float));
  }
}

namespace {
/// Each id's row of `out` gets its rows of `grad` added, over zeros or,
/// with `accumulate`, over what `out` holds.
void embeddingGrad(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *ids,
                   loomrt_buf *grad, int64_t so, int64_t sids, int64_t group,
                   bool accumulate) {
  Shape o = shapeOf(c, so);
  int64_t dim = o[1], n = shapeOf(c, sids).numel();
  VocabBlock block = vocabBlock(c, o[0], group);
  if (!accumulate)
    std::memset(out, 0, o.numel() * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    int32_t id = I(ids)[i];
    if (id < 0 || id >= block.vocab)
      fail("train.embedding_grad: id " + std::to_string(id) +
           " is outside the vocabulary [0, " + std::to_string(block.vocab) +
           ")");
    int64_t local = id - block.first;
    if (local < 0 || local >= block.rows)
      continue;
    float *row = F(out) + local * dim;
    const float *g = F(grad) + i * dim;
    for (int64_t j = 0; j < dim; ++j)
      row[j] += g[j];
  }
}
} // namespace

void loomrt_embedding_grad(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *ids,
                           loomrt_buf *grad, int64_t so, int64_t sids, int64_t,
                           int64_t vocab_group) {
  embeddingGrad(c, out, ids, grad, so, sids, vocab_group, false);
}
void loomrt_embedding_grad_accumulate(loomrt_ctx *c, loomrt_buf *out,
                                      loomrt_buf *ids, loomrt_buf *grad,
                                      int64_t so, int64_t sids, int64_t,
                                      int64_t vocab_group) {
  embeddingGrad(c, out, ids, grad, so, sids, vocab_group, true);
}

namespace {
int64_t countLabels(const int32_t *labels, int64_t n, int64_t ignore) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    count += labels[i] != ignore;
  return count;
}

void checkLabel(int32_t label, int64_t classes, const char *op) {
  if (label < 0 || label >= classes)
    fail(std::string(op) + ": label " + std::to_string(label) +
         " is outside [0, " + std::to_string(classes) +
         ") and is not the ignore index");
}
} // namespace

void loomrt_cross_entropy(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *logits,
                          loomrt_buf *labels, int64_t, int64_t sl, int64_t,
                          int64_t ignore) {
  auto [rows, classes] = rowsOf(shapeOf(c, sl));
  const float *x = F(logits);
  const int32_t *y = I(labels);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] == ignore)
      continue;
    checkLabel(y[r], classes, "train.cross_entropy");
    const float *xr = x + r * classes;
    float mx = *std::max_element(xr, xr + classes);
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(double(xr[j] - mx));
    total += std::log(sum) + mx - xr[y[r]];
  }
  int64_t count = countLabels(y, rows, ignore);
  F(out)[0] = count ? float(total / count) : 0.0f;
}

void loomrt_cross_entropy_grad(loomrt_ctx *c, loomrt_buf *out,
                               loomrt_buf *logits, loomrt_buf *labels,
                               loomrt_buf *grad, int64_t, int64_t sl, int64_t,
                               int64_t, int64_t ignore) {
  auto [rows, classes] = rowsOf(shapeOf(c, sl));
  const float *x = F(logits);
  const int32_t *y = I(labels);
  int64_t count = countLabels(y, rows, ignore);
  float scale = count ? F(grad)[0] / float(count) : 0.0f;
  float *d = F(out);
  for (int64_t r = 0; r < rows; ++r) {
    float *dr = d + r * classes;
    if (y[r] == ignore) {
      std::fill(dr, dr + classes, 0.0f);
      continue;
    }
    checkLabel(y[r], classes, "train.cross_entropy_grad");
    const float *xr = x + r * classes;
    float mx = *std::max_element(xr, xr + classes);
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      sum += (dr[j] = std::exp(xr[j] - mx));
    for (int64_t j = 0; j < classes; ++j)
      dr[j] = float(dr[j] / sum) * scale;
    dr[y[r]] -= scale;
  }
}

void loomrt_cross_entropy_stats(loomrt_ctx *c, loomrt_buf *sum,
                                loomrt_buf *target, loomrt_buf *logits,
                                loomrt_buf *labels, loomrt_buf *max, int64_t,
                                int64_t, int64_t sl, int64_t, int64_t,
                                int64_t ignore, int64_t vocab_group,
                                int64_t /*vocab_size: the labels' bound*/) {
  auto [rows, classes] = rowsOf(shapeOf(c, sl));
  VocabBlock block = vocabBlock(c, classes, vocab_group);
  const float *x = F(logits), *m = F(max);
  const int32_t *y = I(labels);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * classes;
    double total = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      total += std::exp(double(xr[j] - m[r]));
    F(sum)[r] = float(total);
    F(target)[r] = 0.0f;
    if (y[r] == ignore)
      continue;
    checkLabel(y[r], block.vocab, "train.cross_entropy_stats");
    int64_t j = y[r] - block.first;
    if (j >= 0 && j < classes)
      F(target)[r] = xr[j];
  }
}

void loomrt_cross_entropy_from_stats(loomrt_ctx *c, loomrt_buf *out,
                                     loomrt_buf *max, loomrt_buf *sum,
                                     loomrt_buf *target, loomrt_buf *labels,
                                     int64_t, int64_t sm, int64_t, int64_t,
                                     int64_t, int64_t ignore) {
  int64_t rows = shapeOf(c, sm).numel();
  const int32_t *y = I(labels);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (y[r] != ignore)
      total += std::log(double(F(sum)[r])) + F(max)[r] - F(target)[r];
  int64_t count = countLabels(y, rows, ignore);
  F(out)[0] = count ? float(total / count) : 0.0f;
}

void loomrt_cross_entropy_grad_from_stats(
    loomrt_ctx *c, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels,
    loomrt_buf *grad, loomrt_buf *max, loomrt_buf *sum, int64_t, int64_t sl,
    int64_t, int64_t, int64_t, int64_t, int64_t ignore, int64_t vocab_group) {
  auto [rows, classes] = rowsOf(shapeOf(c, sl));
  VocabBlock block = vocabBlock(c, classes, vocab_group);
  const float *x = F(logits), *m = F(max), *z = F(sum);
  const int32_t *y = I(labels);
  int64_t count = countLabels(y, rows, ignore);
  float scale = count ? F(grad)[0] / float(count) : 0.0f;
  float *d = F(out);
  for (int64_t r = 0; r < rows; ++r) {
    float *dr = d + r * classes;
    if (y[r] == ignore) {
      std::fill(dr, dr + classes, 0.0f);
      continue;
    }
    checkLabel(y[r], block.vocab, "train.cross_entropy_grad_from_stats");
    const float *xr = x + r * classes;
    for (int64_t j = 0; j < classes; ++j)
      dr[j] = float(std::exp(double(xr[j] - m[r])) / z[r]) * scale;
    int64_t j = y[r] - block.first;
    if (j >= 0 && j < classes)
      dr[j] -= scale;
  }
}

void loomrt_label_count(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *labels,
                        int64_t, int64_t sl, int64_t ignore) {
  int64_t count = countLabels(I(labels), shapeOf(c, sl).numel(), ignore);
  F(out)[0] = float(std::max<int64_t>(count, 1));
}

void loomrt_dropout(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                    int64_t stream, int64_t so, int64_t,
                    int64_t global_shape, double rate, int64_t seed,
                    int64_t shard_groups) {
  int64_t n = shapeOf(c, so).numel();
  const float *x = F(in);
  float *y = F(out);
  if (!c->training || rate == 0.0) {
    std::memmove(y, x, n * sizeof(float));
    return;
  }
  float keepScale = float(1.0 / (1.0 - rate));
  uint64_t key = dropoutKey(seed, c->seed, stream, c->step);
  ShardIndex index = shardIndex(c, so, global_shape, shard_groups);
  for (int64_t i = 0; i < n; ++i)
    y[i] = uniform(key ^ hash64(uint64_t(index.global(i)))) >= rate
               ? x[i] * keepScale
               : 0.0f;
}

void loomrt_transpose(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                      int64_t so, int64_t si, int64_t permutation) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si), p = shapeOf(c, permutation);
  std::vector<int64_t> own = stridesOf(s), strides(o.rank);
  for (int64_t d = 0; d < o.rank; ++d)
    strides[d] = own[p[d]];
  copyStrided(o, strides, F(in), F(out));
}

void loomrt_slice(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
                  int64_t si, int64_t offsets, int64_t) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si), off = shapeOf(c, offsets);
  std::vector<int64_t> strides = stridesOf(s);
  int64_t base = 0;
  for (int64_t d = 0; d < s.rank; ++d)
    base += off[d] * strides[d];
  copyStrided(o, strides, F(in) + base, F(out));
}

void loomrt_shard(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
                  int64_t si, int64_t groups) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si);
  std::vector<int64_t> strides = stridesOf(s);
  int64_t base = 0;
  for (int64_t d = 0; d < s.rank; ++d)
    base += shardIndex(c, so, si, groups).offset[d] * strides[d];
  copyStrided(o, strides, F(in) + base, F(out));
}

void loomrt_fill_padding(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                         int64_t rows, int64_t block, int64_t inner,
                         uint32_t group, int64_t size, double value) {
  int64_t start = int64_t(loomrt_group_rank(c, group)) * block;
  int64_t valid = std::max<int64_t>(0, std::min(block, size - start));
  if (out != in)
    std::memcpy(out, in, size_t(rows * block * inner) * sizeof(float));
  float *y = F(out);
  for (int64_t r = 0; r < rows; ++r)
    std::fill(y + (r * block + valid) * inner, y + (r + 1) * block * inner,
              float(value));
}

void loomrt_pad(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in, int64_t so,
                int64_t si, int64_t, int64_t low) {
  Shape o = shapeOf(c, so), s = shapeOf(c, si), lo = shapeOf(c, low);
  std::vector<int64_t> strides = stridesOf(o);
  int64_t base = 0;
  for (int64_t d = 0; d < o.rank; ++d)
    base += lo[d] * strides[d];
  std::memset(out, 0, o.numel() * sizeof(float));
  copyStrided(s, strides, F(in), F(out) + base, /*scatter=*/true);
}

void loomrt_lr_schedule(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *step,
                        int64_t, int64_t, double lr, int64_t warmup,
                        int64_t total, int32_t decay, double minLr) {
  if (c->lrOverride > 0.0) {
    minLr *= c->lrOverride / lr;
    lr = c->lrOverride;
  }
  c->lastLr = evaluateSchedule(lr, warmup, total, decay, minLr, F(step)[0]);
  F(out)[0] = float(c->lastLr);
}

void loomrt_sum_squares(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                        int64_t, int64_t si, int64_t position, int64_t,
                        int64_t replicaGroup) {
  sumSquares(c, out, reinterpret_cast<const float *>(in), si, position,
             replicaGroup);
}

void loomrt_sum_squares_bf16(loomrt_ctx *c, loomrt_buf *out, loomrt_buf *in,
                             int64_t, int64_t si, int64_t position, int64_t,
                             int64_t replicaGroup) {
  sumSquares(c, out, reinterpret_cast<const uint16_t *>(in), si, position,
             replicaGroup);
}

void loomrt_clip_factor(loomrt_ctx *, loomrt_buf *out, loomrt_buf *norm,
                        int64_t, int64_t, double maxNorm) {
  F(out)[0] = float(std::min(1.0, maxNorm / (double(F(norm)[0]) + 1e-6)));
}

void loomrt_sgd_update(loomrt_ctx *c, loomrt_buf *newParam,
                       loomrt_buf *newMomentum, loomrt_buf *param,
                       loomrt_buf *grad, loomrt_buf *momentum, loomrt_buf *lr,
                       int64_t sp, int64_t, int64_t, int64_t, int64_t, int64_t,
                       double momentumF, double weightDecay) {
  sgdUpdate(c, newParam, newMomentum, param,
            reinterpret_cast<const float *>(grad), momentum, lr, sp, momentumF,
            weightDecay);
}

void loomrt_sgd_update_bf16(loomrt_ctx *c, loomrt_buf *newParam,
                            loomrt_buf *newMomentum, loomrt_buf *param,
                            loomrt_buf *grad, loomrt_buf *momentum,
                            loomrt_buf *lr, int64_t sp, int64_t, int64_t,
                            int64_t, int64_t, int64_t, double momentumF,
                            double weightDecay) {
  sgdUpdate(c, newParam, newMomentum, param,
            reinterpret_cast<const uint16_t *>(grad), momentum, lr, sp,
            momentumF, weightDecay);
}

void loomrt_adamw_update(loomrt_ctx *c, loomrt_buf *newParam, loomrt_buf *newM,
                         loomrt_buf *newV, loomrt_buf *param, loomrt_buf *grad,
                         loomrt_buf *m, loomrt_buf *v, loomrt_buf *lr,
                         loomrt_buf *step, int64_t sp, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         double beta1, double beta2, double eps, double,
                         double weightDecay) {
  adamwUpdate(c, newParam, newM, newV, param,
              reinterpret_cast<const float *>(grad), m, v, lr, step, sp, beta1,
              beta2, eps, weightDecay);
}

void loomrt_adamw_update_bf16(loomrt_ctx *c, loomrt_buf *newParam,
                              loomrt_buf *newM, loomrt_buf *newV,
                              loomrt_buf *param, loomrt_buf *grad,
                              loomrt_buf *m, loomrt_buf *v, loomrt_buf *lr,
                              loomrt_buf *step, int64_t sp, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t,
                              int64_t, double beta1, double beta2, double eps,
                              double, double weightDecay) {
  adamwUpdate(c, newParam, newM, newV, param,
              reinterpret_cast<const uint16_t *>(grad), m, v, lr, step, sp,
              beta1, beta2, eps, weightDecay);
}

} // extern "C"
