//===- Kernels.cu - cuda kernels for every train op ------------------------===//
//
// The same semantics as the host backend's kernels (runtime/host/Kernels.cpp)
// under the argument rule of loomrt.h: f32 tensors in device memory, gemms
// through cuBLAS (strided batched; exact f32 unless LOOMRT_CUDA_TF32 is
// set), reductions accumulated in double in a fixed order (so a run is
// deterministic; embedding_grad's scatter-add alone uses atomics), dropout
// masks from the same counter-based generator (bit-identical to the host's).
// Everything runs on the compute stream; shapes are read on the host from
// the program's shape table and passed by value.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "FlashAttention.h"
#include "ShapeMath.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

constexpr int kThreads = 256;
constexpr int kRowThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;
constexpr int kMaxRank = 8;

float *F(loomrt_buf *b) { return reinterpret_cast<float *>(b); }
const int32_t *I(loomrt_buf *b) { return reinterpret_cast<const int32_t *>(b); }

int64_t blocksFor(int64_t n) { return (n + kThreads - 1) / kThreads; }

#define LAUNCH(kernel, blocks, threads, ...)                                   \
  do {                                                                         \
    int64_t loomrtBlocks = (blocks);                                           \
    if (loomrtBlocks > 0) {                                                    \
      kernel<<<unsigned(std::min<int64_t>(loomrtBlocks, kMaxBlocks)),          \
               (threads), 0, computeStream(ctx)>>>(__VA_ARGS__);               \
      LOOMRT_LAUNCHED(#kernel);                                                \
    }                                                                          \
  } while (0)

#define GRID_LOOP(i, n)                                                        \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);   \
       i += int64_t(gridDim.x) * blockDim.x)

/// A strided view of up to kMaxRank dimensions: element i of `dims`
/// (row-major) is at sum(coord * a) in one operand and sum(coord * b) in
/// another.
struct Index {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a[kMaxRank] = {};
  int64_t b[kMaxRank] = {};
};

Index makeIndex(const Shape &shape, const std::vector<int64_t> &a,
                const std::vector<int64_t> &b = {}) {
  if (shape.rank > kMaxRank)
    fail("the cuda backend's strided kernels take at most " +
         std::to_string(kMaxRank) + " dimensions, got " +
         std::to_string(shape.rank));
  Index ix;
  ix.rank = int(shape.rank);
  for (int d = 0; d < ix.rank; ++d) {
    ix.dims[d] = shape[d];
    ix.a[d] = d < int(a.size()) ? a[d] : 0;
    ix.b[d] = d < int(b.size()) ? b[d] : 0;
  }
  return ix;
}

__device__ inline void offsets(const Index &ix, int64_t i, int64_t &oa,
                               int64_t &ob) {
  oa = 0;
  ob = 0;
  for (int d = ix.rank - 1; d >= 0; --d) {
    int64_t c = i % ix.dims[d];
    i /= ix.dims[d];
    oa += c * ix.a[d];
    ob += c * ix.b[d];
  }
}

//===--- Block reductions --------------------------------------------------===//

template <typename T> __device__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
template <typename T> __device__ T warpMax(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v = max(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

/// The sum (or max) over the block, returned to every thread; the order of
/// the additions is fixed by the block shape.
template <typename T, bool Max> __device__ T blockReduce(T v) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = Max ? warpMax(v) : warpSum(v);
  __syncthreads(); // an earlier call may still read `partial`
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  T identity = Max ? T(-INFINITY) : T(0);
  v = threadIdx.x < warps ? partial[threadIdx.x] : identity;
  if (warp == 0)
    v = Max ? warpMax(v) : warpSum(v);
  if (threadIdx.x == 0)
    partial[0] = v;
  __syncthreads();
  return partial[0];
}
template <typename T> __device__ T blockSum(T v) {
  return blockReduce<T, false>(v);
}
template <typename T> __device__ T blockMax(T v) {
  return blockReduce<T, true>(v);
}

__device__ void report(KernelError *e, int32_t code, int64_t position,
                       int64_t value, int64_t bound) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->position = int32_t(position);
    e->value = value;
    e->bound = bound;
  }
}

//===--- Pointwise ---------------------------------------------------------===//

constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)

struct AddOp {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct SubOp {
  __device__ float operator()(float x, float y) const { return x - y; }
};
struct MulOp {
  __device__ float operator()(float x, float y) const { return x * y; }
};
struct DivOp {
  __device__ float operator()(float x, float y) const { return x / y; }
};

struct ReluOp {
  __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct GeluOp {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + tanhf(kGeluC * (x + 0.044715f * x * x * x)));
  }
};
struct SiluOp {
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct TanhOp {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct ExpOp {
  __device__ float operator()(float x) const { return expf(x); }
};
struct LogOp {
  __device__ float operator()(float x) const { return logf(x); }
};
struct SqrtOp {
  __device__ float operator()(float x) const { return sqrtf(x); }
};
struct RsqrtOp {
  __device__ float operator()(float x) const { return 1.0f / sqrtf(x); }
};
struct ScaleOp {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};

// Derivatives, as functions of the op's saved operand (y for tanh).
struct ReluGradOp {
  __device__ float operator()(float v) const { return v > 0.0f ? 1.0f : 0.0f; }
};
struct GeluGradOp {
  __device__ float operator()(float v) const {
    float t = tanhf(kGeluC * (v + 0.044715f * v * v * v));
    return 0.5f * (1.0f + t) +
           0.5f * v * (1.0f - t * t) * kGeluC *
               (1.0f + 3.0f * 0.044715f * v * v);
  }
};
struct SiluGradOp {
  __device__ float operator()(float v) const {
    float s = 1.0f / (1.0f + expf(-v));
    return s * (1.0f + v * (1.0f - s));
  }
};
struct TanhGradOp {
  __device__ float operator()(float y) const { return 1.0f - y * y; }
};

/// mode 0: same shapes; 1: b repeats every `inner` elements; 2: strided.
template <typename Op>
__global__ void binaryKernel(float *y, const float *a, const float *b,
                             int64_t n, int mode, int64_t inner, Index ix,
                             Op op) {
  GRID_LOOP(i, n) {
    int64_t ia = i, ib = i;
    if (mode == 1)
      ib = i % inner;
    else if (mode == 2)
      offsets(ix, i, ia, ib);
    y[i] = op(a[ia], b[ib]);
  }
}

template <typename Op>
__global__ void unaryKernel(float *y, const float *x, int64_t n, Op op) {
  GRID_LOOP(i, n) { y[i] = op(x[i]); }
}

template <typename Op>
__global__ void unaryGradKernel(float *y, const float *x, const float *g,
                                int64_t n, Op op) {
  GRID_LOOP(i, n) { y[i] = g[i] * op(x[i]); }
}

template <typename Op>
void binary(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs,
            int64_t so, int64_t sl, int64_t sr, Op op) {
  Shape o = shapeOf(ctx, so), l = shapeOf(ctx, sl), r = shapeOf(ctx, sr);
  int64_t n = o.numel(), inner = 0;
  int mode = 2;
  Index ix;
  if (l.numel() == n && r.numel() == n)
    mode = 0;
  else if (l.numel() == n && (inner = leadingBroadcast(r, o)))
    mode = 1;
  else
    ix = makeIndex(o, broadcastStrides(l, o), broadcastStrides(r, o));
  LAUNCH(binaryKernel<Op>, blocksFor(n), kThreads, F(out), F(lhs), F(rhs), n,
         mode, inner, ix, op);
}

template <typename Op>
void unary(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in, int64_t so,
           Op op) {
  int64_t n = shapeOf(ctx, so).numel();
  LAUNCH(unaryKernel<Op>, blocksFor(n), kThreads, F(out), F(in), n, op);
}

template <typename Op>
void unaryGrad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
               loomrt_buf *grad, int64_t so, Op op) {
  int64_t n = shapeOf(ctx, so).numel();
  LAUNCH(unaryGradKernel<Op>, blocksFor(n), kThreads, F(out), F(in), F(grad),
         n, op);
}

__global__ void narrowKernel(__nv_bfloat16 *y, const float *x, int64_t n) {
  GRID_LOOP(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void widenKernel(float *y, const __nv_bfloat16 *x, int64_t n) {
  GRID_LOOP(i, n) y[i] = __bfloat162float(x[i]);
}

__global__ void fillKernel(float *y, int64_t n, float value) {
  GRID_LOOP(i, n) { y[i] = value; }
}

__global__ void fillBf16Kernel(__nv_bfloat16 *y, int64_t n,
                               __nv_bfloat16 value) {
  GRID_LOOP(i, n) { y[i] = value; }
}

//===--- Gathers and scatters ----------------------------------------------===//

/// y[i] = x[offset a of i].
__global__ void gatherKernel(float *y, const float *x, int64_t n, Index ix) {
  GRID_LOOP(i, n) {
    int64_t ia, ib;
    offsets(ix, i, ia, ib);
    y[i] = x[ia];
  }
}

/// y[offset a of i] = x[i].
__global__ void scatterKernel(float *y, const float *x, int64_t n, Index ix) {
  GRID_LOOP(i, n) {
    int64_t ia, ib;
    offsets(ix, i, ia, ib);
    y[ia] = x[i];
  }
}

//===--- Reductions --------------------------------------------------------===//

/// A reduction of `in` over some of its dimensions: the kept dimensions
/// (in order) index the outputs, the reduced ones the terms of each.
struct ReducePlan {
  Index kept;    // dims: kept sizes; a: their strides in the input
  Index reduced; // dims: reduced sizes; a: their strides in the input
  int64_t outputs = 1, terms = 1;
};

ReducePlan makePlan(const Shape &in, const std::vector<bool> &isReduced) {
  std::vector<int64_t> strides = stridesOf(in);
  std::vector<int64_t> keptDims, keptStrides, redDims, redStrides;
  ReducePlan p;
  for (int64_t d = 0; d < in.rank; ++d) {
    if (isReduced[d]) {
      redDims.push_back(in[d]);
      redStrides.push_back(strides[d]);
      p.terms *= in[d];
    } else {
      keptDims.push_back(in[d]);
      keptStrides.push_back(strides[d]);
      p.outputs *= in[d];
    }
  }
  p.kept = makeIndex(Shape{int64_t(keptDims.size()), keptDims.data()},
                     keptStrides);
  p.reduced =
      makeIndex(Shape{int64_t(redDims.size()), redDims.data()}, redStrides);
  return p;
}

/// One block per output element. kind: 0 sum, 1 mean, 2 max; with
/// `accumulate` the (f32-rounded) result is added to y.
__global__ void reduceKernel(float *y, const float *x, ReducePlan p, int kind,
                             bool accumulate) {
  for (int64_t o = blockIdx.x; o < p.outputs; o += gridDim.x) {
    int64_t base, unused;
    offsets(p.kept, o, base, unused);
    double acc = kind == 2 ? -INFINITY : 0.0;
    for (int64_t j = threadIdx.x; j < p.terms; j += blockDim.x) {
      int64_t off;
      offsets(p.reduced, j, off, unused);
      double v = x[base + off];
      acc = kind == 2 ? fmax(acc, v) : acc + v;
    }
    acc = kind == 2 ? blockMax(acc) : blockSum(acc);
    if (threadIdx.x == 0) {
      float r = float(kind == 1 ? acc / double(p.terms) : acc);
      y[o] = accumulate ? y[o] + r : r;
    }
  }
}

void reduceWith(loomrt_ctx *ctx, float *out, const float *in, const Shape &s,
                const std::vector<bool> &isReduced, int kind,
                bool accumulate = false) {
  ReducePlan p = makePlan(s, isReduced);
  LAUNCH(reduceKernel, p.outputs, kRowThreads, out, in, p, kind, accumulate);
}

__global__ void reduceMaxGradKernel(float *y, const float *x, const float *m,
                                    const float *g, int64_t n, Index ix) {
  GRID_LOOP(i, n) {
    int64_t o, unused;
    offsets(ix, i, o, unused);
    y[i] = x[i] == m[o] ? g[o] : 0.0f;
  }
}

//===--- Rows: softmax and the norms ---------------------------------------===//

/// Softmax of each row; with `causal`, row r of each (rows/width)-row matrix
/// covers its first (r mod width) + 1 entries and the rest are 0.
__global__ void softmaxKernel(float *y, const float *x, int64_t rows,
                              int64_t w, int64_t matrixRows, bool causal) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * w;
    float *yr = y + r * w;
    int64_t width = causal ? (r % matrixRows) + 1 : w;
    double mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      mx = fmax(mx, double(xr[j]));
    mx = blockMax(mx);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      sum += exp(double(xr[j]) - mx);
    sum = blockSum(sum);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      yr[j] = j < width ? float(exp(double(xr[j]) - mx) / sum) : 0.0f;
  }
}

/// d = p * (g - rowsum(g * p)), in place when d == g.
__global__ void softmaxGradKernel(float *d, const float *p, const float *g,
                                  int64_t rows, int64_t w) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      dot += double(g[r * w + j]) * p[r * w + j];
    dot = blockSum(dot);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      d[r * w + j] = p[r * w + j] * (g[r * w + j] - float(dot));
  }
}

/// Mean and 1/std of a row, to every thread of the block.
__device__ void rowMoments(const float *xr, int64_t w, double epsilon,
                           double &mean, double &rstd) {
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
    sum += xr[j];
  mean = blockSum(sum) / double(w);
  double var = 0.0;
  for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
    var += (xr[j] - mean) * (xr[j] - mean);
  var = blockSum(var) / double(w);
  rstd = 1.0 / sqrt(var + epsilon);
}

__global__ void layerNormKernel(float *y, const float *x, const float *g,
                                const float *b, int64_t rows, int64_t w,
                                double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double mean, rstd;
    rowMoments(x + r * w, w, epsilon, mean, rstd);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      y[r * w + j] =
          float(x[r * w + j] - mean) * float(rstd) * g[j] + b[j];
  }
}

/// dx per row; saves (mean, rstd) of each row for the parameter gradients.
__global__ void layerNormGradKernel(float *dx, float *stats, const float *x,
                                    const float *g, const float *dy,
                                    int64_t rows, int64_t w, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * w, *dyr = dy + r * w;
    double mean, rstd;
    rowMoments(xr, w, epsilon, mean, rstd);
    double sumD = 0.0, sumDX = 0.0;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) {
      float xhat = float((xr[j] - mean) * rstd);
      float dxhat = dyr[j] * g[j];
      sumD += dxhat;
      sumDX += double(dxhat) * xhat;
    }
    double meanD = blockSum(sumD) / double(w);
    double meanDX = blockSum(sumDX) / double(w);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x) {
      float xhat = float((xr[j] - mean) * rstd);
      float dxhat = dyr[j] * g[j];
      dx[r * w + j] = float(rstd * (dxhat - meanD - xhat * meanDX));
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = float(mean);
      stats[2 * r + 1] = float(rstd);
    }
  }
}

/// Column sums for the norms' parameter gradients: dg[j] = sum_r dy * xhat,
/// db[j] = sum_r dy (db may be null). `stats` holds (mean, scale) per row:
/// xhat = (x - mean) * scale.
__global__ void normParamGradKernel(float *dg, float *db, const float *x,
                                    const float *dy, const float *stats,
                                    int64_t rows, int64_t w, bool accumulate) {
  GRID_LOOP(j, w) {
    double sg = 0.0, sb = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      double xhat = (double(x[r * w + j]) - stats[2 * r]) * stats[2 * r + 1];
      sg += double(dy[r * w + j]) * xhat;
      sb += dy[r * w + j];
    }
    dg[j] = accumulate ? dg[j] + float(sg) : float(sg);
    if (db)
      db[j] = accumulate ? db[j] + float(sb) : float(sb);
  }
}

__global__ void rmsNormKernel(float *y, const float *x, const float *g,
                              int64_t rows, int64_t w, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double ms = 0.0;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      ms += double(x[r * w + j]) * x[r * w + j];
    float inv = float(1.0 / sqrt(blockSum(ms) / double(w) + epsilon));
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      y[r * w + j] = x[r * w + j] * inv * g[j];
  }
}

__global__ void rmsNormGradKernel(float *dx, float *stats, const float *x,
                                  const float *g, const float *dy,
                                  int64_t rows, int64_t w, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double ms = 0.0;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      ms += double(x[r * w + j]) * x[r * w + j];
    double inv = 1.0 / sqrt(blockSum(ms) / double(w) + epsilon);
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      dot += double(dy[r * w + j]) * g[j] * (x[r * w + j] * inv);
    double meanDX = blockSum(dot) / double(w);
    for (int64_t j = threadIdx.x; j < w; j += blockDim.x)
      dx[r * w + j] = float(inv * (dy[r * w + j] * g[j] -
                                   x[r * w + j] * inv * meanDX));
    if (threadIdx.x == 0) {
      stats[2 * r] = 0.0f;
      stats[2 * r + 1] = float(inv);
    }
  }
}

//===--- Gemms -------------------------------------------------------------===//

int cublasInt(int64_t v, const char *what) {
  if (v > INT32_MAX)
    fail(std::string("a gemm's ") + what + " of " + std::to_string(v) +
         " exceeds cuBLAS's 32-bit sizes");
  return int(v);
}

/// The column-major operands of a row-major product (gemm, gemmBf16).
struct GemmDims {
  GemmDims(bool ta, bool tb, int64_t m, int64_t n, int64_t k)
      : opA(ta ? CUBLAS_OP_T : CUBLAS_OP_N),
        opB(tb ? CUBLAS_OP_T : CUBLAS_OP_N), M(cublasInt(m, "m")),
        N(cublasInt(n, "n")), K(cublasInt(k, "k")), lda(ta ? M : K),
        ldb(tb ? K : N) {}
  cublasOperation_t opA, opB;
  int M, N, K, lda, ldb;
};

/// Row-major C = alpha op(A) op(B) + beta C for `batch` matrices at the
/// given element strides (0: the same matrix for every batch), as the
/// column-major product C^T = op(B)^T op(A)^T.
void gemm(loomrt_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t strideA, const float *b,
          int64_t strideB, float beta, float *c, int64_t strideC,
          int64_t batch) {
  if (m == 0 || n == 0 || batch == 0)
    return;
  cublasHandle_t h = deviceOf(ctx).blas;
  GemmDims g(ta, tb, m, n, k);
  if (batch == 1)
    LOOMRT_CUBLAS(cublasSgemm(h, g.opB, g.opA, g.N, g.M, g.K, &alpha, b,
                              g.ldb, a, g.lda, &beta, c, g.N));
  else
    LOOMRT_CUBLAS(cublasSgemmStridedBatched(
        h, g.opB, g.opA, g.N, g.M, g.K, &alpha, b, g.ldb, strideB, a, g.lda,
        strideA, &beta, c, g.N, strideC, cublasInt(batch, "batch")));
}

/// gemm's bf16 form: bf16 operands and result, f32 accumulation and
/// alpha/beta (CUBLAS_COMPUTE_32F: the tensor cores' bf16 rate), the result
/// rounded once (beta = 1 adds into it in f32 first).
void gemmBf16(loomrt_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n,
              int64_t k, float alpha, const __nv_bfloat16 *a, int64_t strideA,
              const __nv_bfloat16 *b, int64_t strideB, float beta,
              __nv_bfloat16 *c, int64_t strideC, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0)
    return;
  cublasHandle_t h = deviceOf(ctx).blas;
  GemmDims g(ta, tb, m, n, k);
  if (batch == 1)
    LOOMRT_CUBLAS(cublasGemmEx(h, g.opB, g.opA, g.N, g.M, g.K, &alpha, b,
                               CUDA_R_16BF, g.ldb, a, CUDA_R_16BF, g.lda, &beta,
                               c, CUDA_R_16BF, g.N, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
  else
    LOOMRT_CUBLAS(cublasGemmStridedBatchedEx(
        h, g.opB, g.opA, g.N, g.M, g.K, &alpha, b, CUDA_R_16BF, g.ldb, strideB,
        a, CUDA_R_16BF, g.lda, strideA, &beta, c, CUDA_R_16BF, g.N, strideC,
        cublasInt(batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

//===--- Losses, embeddings, dropout ---------------------------------------===//

__global__ void causalMaskKernel(float *y, const float *x, int64_t n,
                                 int64_t sq, int64_t sk, float fill) {
  GRID_LOOP(e, n) {
    int64_t j = e % sk, i = (e / sk) % sq;
    y[e] = j > i ? fill : x[e];
  }
}

/// A table of `rows` rows holds rows [first, first + rows) of a vocabulary
/// of `vocab`: ids outside the block give zeros.
__global__ void embeddingKernel(float *y, const float *table,
                                const int32_t *ids, int64_t n, int64_t dim,
                                int64_t first, int64_t rows, int64_t vocab,
                                KernelError *errors) {
  GRID_LOOP(e, n * dim) {
    int64_t i = e / dim, j = e % dim;
    int32_t id = ids[i];
    if (id < 0 || id >= vocab) {
      report(errors, kEmbeddingId, i, id, vocab);
      y[e] = 0.0f;
      continue;
    }
    int64_t row = id - first;
    y[e] = row >= 0 && row < rows ? table[row * dim + j] : 0.0f;
  }
}

__global__ void embeddingGradKernel(float *y, const int32_t *ids,
                                    const float *g, int64_t n, int64_t dim,
                                    int64_t first, int64_t rows,
                                    int64_t vocab, KernelError *errors) {
  GRID_LOOP(e, n * dim) {
    int64_t i = e / dim, j = e % dim;
    int32_t id = ids[i];
    if (id < 0 || id >= vocab) {
      report(errors, kEmbeddingGradId, i, id, vocab);
      continue;
    }
    int64_t row = id - first;
    if (row >= 0 && row < rows)
      atomicAdd(y + row * dim + j, g[e]);
  }
}

/// Per row: the loss of its label (0 when ignored).
__global__ void crossEntropyRowsKernel(double *rowLoss, const float *x,
                                       const int32_t *labels, int64_t rows,
                                       int64_t classes, int64_t ignore,
                                       KernelError *errors) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int32_t label = labels[r];
    if (label == ignore) {
      if (threadIdx.x == 0)
        rowLoss[r] = 0.0;
      continue;
    }
    if (label < 0 || label >= classes) {
      if (threadIdx.x == 0) {
        report(errors, kCrossEntropyLabel, r, label, classes);
        rowLoss[r] = 0.0;
      }
      continue;
    }
    const float *xr = x + r * classes;
    double mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      mx = fmax(mx, double(xr[j]));
    mx = blockMax(mx);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      sum += exp(double(xr[j]) - mx);
    sum = blockSum(sum);
    if (threadIdx.x == 0)
      rowLoss[r] = log(sum) + mx - xr[label];
  }
}

/// One block: the labelled rows' count, and the mean of rowLoss over them
/// when rowLoss is given. out[0] = mean (or max(count, 1) for label_count).
__global__ void labelMeanKernel(float *out, const double *rowLoss,
                                const int32_t *labels, int64_t rows,
                                int64_t ignore, int mode) {
  double total = 0.0, count = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    bool kept = labels[r] != ignore;
    count += kept;
    if (rowLoss && kept)
      total += rowLoss[r];
  }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x != 0)
    return;
  if (mode == 0)
    out[0] = count > 0.0 ? float(total / count) : 0.0f;
  else if (mode == 1)
    out[0] = float(count); // raw count, for cross_entropy_grad
  else
    out[0] = float(fmax(count, 1.0));
}

__global__ void crossEntropyGradKernel(float *d, const float *x,
                                       const int32_t *labels, const float *g,
                                       const float *count, int64_t rows,
                                       int64_t classes, int64_t ignore,
                                       KernelError *errors) {
  float scale = count[0] > 0.0f ? g[0] / count[0] : 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float *dr = d + r * classes;
    int32_t label = labels[r];
    bool bad = label != ignore && (label < 0 || label >= classes);
    if (label == ignore || bad) {
      if (bad && threadIdx.x == 0)
        report(errors, kCrossEntropyGradLabel, r, label, classes);
      for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
        dr[j] = 0.0f;
      continue;
    }
    const float *xr = x + r * classes;
    double mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      mx = fmax(mx, double(xr[j]));
    mx = blockMax(mx);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      sum += exp(double(xr[j]) - mx);
    sum = blockSum(sum);
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      dr[j] = float(exp(double(xr[j]) - mx) / sum) * scale -
              (j == label ? scale : 0.0f);
  }
}

/// Vocab-parallel cross-entropy: per row, over the block [first, first +
/// classes) of a vocabulary of `vocab`, the sum of exp(x - max) and the
/// label's logit where the label lies in the block.
__global__ void crossEntropyStatsKernel(float *sum, float *target,
                                        const float *x, const int32_t *labels,
                                        const float *max, int64_t rows,
                                        int64_t classes, int64_t first,
                                        int64_t vocab, int64_t ignore,
                                        KernelError *errors) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * classes;
    double total = 0.0;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      total += exp(double(xr[j]) - double(max[r]));
    total = blockSum(total);
    if (threadIdx.x != 0)
      continue;
    sum[r] = float(total);
    target[r] = 0.0f;
    int32_t label = labels[r];
    if (label == ignore)
      continue;
    if (label < 0 || label >= vocab) {
      report(errors, kCrossEntropyLabel, r, label, vocab);
      continue;
    }
    int64_t j = label - first;
    if (j >= 0 && j < classes)
      target[r] = xr[j];
  }
}

/// One block: the mean over the labelled rows of log(sum) + max - target.
__global__ void crossEntropyFromStatsKernel(float *out, const float *max,
                                            const float *sum,
                                            const float *target,
                                            const int32_t *labels,
                                            int64_t rows, int64_t ignore) {
  double total = 0.0, count = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (labels[r] != ignore) {
      total += log(double(sum[r])) + max[r] - target[r];
      count += 1.0;
    }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x == 0)
    out[0] = count > 0.0 ? float(total / count) : 0.0f;
}

__global__ void crossEntropyGradFromStatsKernel(
    float *d, const float *x, const int32_t *labels, const float *g,
    const float *count, const float *max, const float *sum, int64_t rows,
    int64_t classes, int64_t first, int64_t vocab, int64_t ignore,
    KernelError *errors) {
  float scale = count[0] > 0.0f ? g[0] / count[0] : 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float *dr = d + r * classes;
    int32_t label = labels[r];
    bool bad = label != ignore && (label < 0 || label >= vocab);
    if (label == ignore || bad) {
      if (bad && threadIdx.x == 0)
        report(errors, kCrossEntropyGradLabel, r, label, vocab);
      for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
        dr[j] = 0.0f;
      continue;
    }
    const float *xr = x + r * classes;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      dr[j] = float(exp(double(xr[j]) - double(max[r])) / double(sum[r])) *
                  scale -
              (j == label - first ? scale : 0.0f);
  }
}

__global__ void dropoutKernel(float *y, const float *x, int64_t n,
                              uint64_t key, double rate, float keepScale,
                              ShardIndex index) {
  GRID_LOOP(i, n) {
    y[i] = uniform(key ^ hash64(uint64_t(index.global(i)))) >= rate
               ? x[i] * keepScale
               : 0.0f;
  }
}

//===--- Optimizer ---------------------------------------------------------===//

__global__ void scheduleKernel(float *out, const float *step, double lr,
                               int64_t warmup, int64_t total, int32_t decay,
                               double minLr) {
  out[0] = float(evaluateSchedule(lr, warmup, total, decay, minLr, step[0]));
}

/// Per-block partial sums of squares.
// The optimizer's steps read an f32 gradient, or a bf16 one in place
// (--grad-precision=bf16: a whole stacked gradient, never copied to f32).
__device__ inline float load(const float *x, int64_t i) { return x[i]; }
__device__ inline float load(const __nv_bfloat16 *x, int64_t i) {
  return __bfloat162float(x[i]);
}

template <class G>
__global__ void squaresKernel(double *partial, const G *x, int64_t n) {
  double sum = 0.0;
  GRID_LOOP(i, n) {
    double g = load(x, i);
    sum += g * g;
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sum;
}

/// out = (first ? 0 : out) + the partials in order.
__global__ void squaresFinishKernel(float *out, const double *partial,
                                    int64_t parts, bool first) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < parts; i += blockDim.x)
    sum += partial[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0) {
    sum += first ? 0.0 : double(out[0]);
    out[0] = float(sum);
  }
}

__global__ void clipKernel(float *out, const float *norm, double maxNorm) {
  out[0] = float(fmin(1.0, maxNorm / (double(norm[0]) + 1e-6)));
}

template <class G>
__global__ void sgdKernel(float *newParam, float *newMomentum,
                          const float *param, const G *grad,
                          const float *momentum, const float *lr, int64_t n,
                          float mu, float wd) {
  float rate = lr[0];
  GRID_LOOP(i, n) {
    float d = load(grad, i) + wd * param[i];
    if (momentum) {
      d = mu * momentum[i] + d;
      newMomentum[i] = d;
    }
    newParam[i] = param[i] - rate * d;
  }
}

template <class G>
__global__ void adamwKernel(float *newParam, float *newM, float *newV,
                            const float *param, const G *grad,
                            const float *m, const float *v, const float *lr,
                            const float *step, int64_t n, double beta1,
                            double beta2, double eps, double weightDecay) {
  double t = double(step[0]) + 1.0;
  float rate = lr[0];
  float b1 = float(beta1), b2 = float(beta2);
  float bc1 = float(1.0 - pow(beta1, t));
  float sqrtBc2 = float(sqrt(1.0 - pow(beta2, t)));
  float decay = float(1.0 - double(rate) * weightDecay);
  GRID_LOOP(i, n) {
    float g = load(grad, i);
    float mm = b1 * m[i] + (1.0f - b1) * g;
    float vv = b2 * v[i] + (1.0f - b2) * g * g;
    newM[i] = mm;
    newV[i] = vv;
    newParam[i] = param[i] * decay -
                  (rate / bc1) * mm / (sqrtf(vv) / sqrtBc2 + float(eps));
  }
}

__global__ void scaleBf16Kernel(__nv_bfloat16 *y, const __nv_bfloat16 *x,
                                int64_t n, const __nv_bfloat16 *scale) {
  float k = __bfloat162float(scale[0]);
  GRID_LOOP(i, n) { y[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * k); }
}

//===--- Fused attention (FlashAttention.h's rows, one thread each) ------===//

struct LoadF32 {
  __device__ float operator()(const float *x, int64_t e) const { return x[e]; }
};
struct StoreF32 {
  __device__ void operator()(float *x, int64_t e, float v) const { x[e] = v; }
};
struct LoadBf16 {
  __device__ float operator()(const __nv_bfloat16 *x, int64_t e) const {
    return __bfloat162float(x[e]);
  }
};
struct StoreBf16 {
  __device__ void operator()(__nv_bfloat16 *x, int64_t e, float v) const {
    x[e] = __float2bfloat16_rn(v);
  }
};

template <class T, class Load, class Store>
__global__ void flashForwardKernel(T *out, const T *q, const T *k, const T *v,
                                   int64_t heads, int64_t s, int64_t d,
                                   bool causal, float scale) {
  float acc[flash::kMaxHeadDim];
  GRID_LOOP(r, heads * s) {
    int64_t at = (r / s) * s * d;
    flash::attentionRow(out + at, q + at, k + at, v + at, s, d, r % s, causal,
                        scale, Load{}, Store{}, acc);
  }
}

template <class T, class Load, class Store>
__global__ void flashQueryGradKernel(T *dq, flash::RowStats *stats,
                                     const T *q, const T *k, const T *v,
                                     const T *grad, int64_t heads, int64_t s,
                                     int64_t d, bool causal, float scale) {
  float acc[flash::kMaxHeadDim];
  GRID_LOOP(r, heads * s) {
    int64_t at = (r / s) * s * d;
    stats[r] = flash::queryGradRow(dq + at, q + at, k + at, v + at, grad + at,
                                   s, d, r % s, causal, scale, Load{}, Store{},
                                   acc);
  }
}

template <class T, class Load, class Store>
__global__ void flashKeyGradKernel(T *dk, T *dv, const flash::RowStats *stats,
                                   const T *q, const T *k, const T *v,
                                   const T *grad, int64_t heads, int64_t s,
                                   int64_t d, bool causal, float scale) {
  float dkAcc[flash::kMaxHeadDim], dvAcc[flash::kMaxHeadDim];
  GRID_LOOP(r, heads * s) {
    int64_t h = r / s, at = h * s * d;
    flash::keyGradRow(dk + at, dv + at, q + at, k + at, v + at, grad + at,
                      stats + h * s, s, d, r % s, causal, scale, Load{},
                      Store{}, dkAcc, dvAcc);
  }
}

__global__ void addBf16Kernel(__nv_bfloat16 *z, const __nv_bfloat16 *x,
                              const __nv_bfloat16 *y, int64_t n) {
  GRID_LOOP(i, n) {
    z[i] = __float2bfloat16_rn(__bfloat162float(x[i]) + __bfloat162float(y[i]));
  }
}

KernelError *errorsOf(loomrt_ctx *ctx) { return deviceOf(ctx).errors; }

/// The running sum of squares over sum_squares' operands (`position` 0
/// starts it): per-block partials in double, added in order into `out`.
template <class G>
void sumSquares(loomrt_ctx *ctx, loomrt_buf *out, const G *x, int64_t si,
                int64_t position, int64_t replicaGroup) {
  // A replica that does not count the operands adds nothing (parts = 0).
  bool counts =
      !replicaGroup || loomrt_group_rank(ctx, uint32_t(replicaGroup)) == 0;
  int64_t n = counts ? shapeOf(ctx, si).numel() : 0;
  int64_t parts = std::max<int64_t>(1, std::min<int64_t>(blocksFor(n), 1024));
  Scratch partial(ctx, parts * 8);
  LOOMRT_CUDA(cudaMemsetAsync(partial.as<char>(), 0, size_t(parts * 8),
                              computeStream(ctx)));
  LAUNCH(squaresKernel<G>, n ? parts : 0, kThreads, partial.as<double>(), x,
         n);
  LAUNCH(squaresFinishKernel, 1, kThreads, F(out), partial.as<double>(), parts,
         position == 0);
}

/// Masked, scaled softmax(q k^T) of every (batch, head) into `p`.
void attentionProbs(loomrt_ctx *ctx, const float *q, const float *k,
                    int64_t heads, int64_t s, int64_t d, bool causal,
                    float *p) {
  gemm(ctx, false, true, s, s, d, float(1.0 / std::sqrt(double(d))), q, s * d,
       k, s * d, 0.0f, p, s * s, heads);
  LAUNCH(softmaxKernel, heads * s, kRowThreads, p, p, heads * s, s, s, causal);
}

/// The fused attention of `heads` heads of s x d (d at most
/// flash::kMaxHeadDim): one thread per query row; no s x s scratch.
template <class T, class Load, class Store>
void fusedAttention(loomrt_ctx *ctx, T *out, const T *q, const T *k,
                    const T *v, int64_t heads, int64_t s, int64_t d,
                    bool causal, Load, Store) {
  float scale = float(1.0 / std::sqrt(double(d)));
  LAUNCH((flashForwardKernel<T, Load, Store>), blocksFor(heads * s), kThreads,
         out, q, k, v, heads, s, d, causal, scale);
}

/// Its backward: per query row its statistics and dq, then per key row dk
/// and dv from them (each a sum of its own, in order: deterministic); the
/// only scratch is three floats per query row.
template <class T, class Load, class Store>
void fusedAttentionGrad(loomrt_ctx *ctx, T *dq, T *dk, T *dv, const T *q,
                        const T *k, const T *v, const T *grad, int64_t heads,
                        int64_t s, int64_t d, bool causal, Load, Store) {
  float scale = float(1.0 / std::sqrt(double(d)));
  Scratch stats(ctx, heads * s * int64_t(sizeof(flash::RowStats)));
  auto *rows = stats.as<flash::RowStats>();
  LAUNCH((flashQueryGradKernel<T, Load, Store>), blocksFor(heads * s),
         kThreads, dq, rows, q, k, v, grad, heads, s, d, causal, scale);
  LAUNCH((flashKeyGradKernel<T, Load, Store>), blocksFor(heads * s), kThreads,
         dk, dv, rows, q, k, v, grad, heads, s, d, causal, scale);
}

} // namespace

bool loomrt::backend::matmulBf16(loomrt_ctx *ctx, loomrt_buf *out,
                                 loomrt_buf *lhs, loomrt_buf *rhs, int64_t so,
                                 int64_t sl, int64_t sr, int32_t ta,
                                 int32_t tb, bool accumulate) {
  using B = __nv_bfloat16;
  float beta = accumulate ? 1.0f : 0.0f;
  Shape o = shapeOf(ctx, so), l = shapeOf(ctx, sl), r = shapeOf(ctx, sr);
  int64_t m = o[o.rank - 2], n = o[o.rank - 1];
  int64_t k = ta ? l[l.rank - 2] : l[l.rank - 1];
  int64_t batch = o.numel() / std::max<int64_t>(m * n, 1);
  auto *a = reinterpret_cast<const B *>(lhs);
  auto *b = reinterpret_cast<const B *>(rhs);
  auto *c = reinterpret_cast<B *>(out);
  bool sharedRhs = r.rank == 2;
  if (sharedRhs && !ta)
    gemmBf16(ctx, false, tb, batch * m, n, k, 1.0f, a, 0, b, 0, beta, c, 0, 1);
  else
    gemmBf16(ctx, ta, tb, m, n, k, 1.0f, a, m * k, b, sharedRhs ? 0 : k * n,
             beta, c, m * n, batch);
  return true;
}

bool loomrt::backend::attentionBf16(loomrt_ctx *ctx, loomrt_buf *out,
                                    loomrt_buf *q, loomrt_buf *k,
                                    loomrt_buf *v, int64_t so,
                                    int32_t causal) {
  using B = __nv_bfloat16;
  Shape o = shapeOf(ctx, so);
  int64_t s = o[2], d = o[3], heads = o[0] * o[1];
  if (d > flash::kMaxHeadDim)
    return false;
  fusedAttention(ctx, reinterpret_cast<B *>(out),
                 reinterpret_cast<const B *>(q), reinterpret_cast<const B *>(k),
                 reinterpret_cast<const B *>(v), heads, s, d, causal,
                 LoadBf16{}, StoreBf16{});
  return true;
}

bool loomrt::backend::attentionGradBf16(loomrt_ctx *ctx, loomrt_buf *dq,
                                        loomrt_buf *dk, loomrt_buf *dv,
                                        loomrt_buf *q, loomrt_buf *k,
                                        loomrt_buf *v, loomrt_buf *grad,
                                        int64_t sdq, int32_t causal) {
  using B = __nv_bfloat16;
  Shape o = shapeOf(ctx, sdq);
  int64_t s = o[2], d = o[3], heads = o[0] * o[1];
  if (d > flash::kMaxHeadDim)
    return false;
  fusedAttentionGrad(
      ctx, reinterpret_cast<B *>(dq), reinterpret_cast<B *>(dk),
      reinterpret_cast<B *>(dv), reinterpret_cast<const B *>(q),
      reinterpret_cast<const B *>(k), reinterpret_cast<const B *>(v),
      reinterpret_cast<const B *>(grad), heads, s, d, causal, LoadBf16{},
      StoreBf16{});
  return true;
}

void loomrt::backend::addBf16(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *a,
                              loomrt_buf *b, int64_t n) {
  using B = __nv_bfloat16;
  LAUNCH(addBf16Kernel, blocksFor(n), kThreads, reinterpret_cast<B *>(out),
         reinterpret_cast<const B *>(a), reinterpret_cast<const B *>(b), n);
}

void loomrt::backend::scaleBf16(loomrt_ctx *ctx, loomrt_buf *out,
                                loomrt_buf *in, int64_t n,
                                loomrt_buf *scale) {
  LAUNCH(scaleBf16Kernel, blocksFor(n), kThreads,
         reinterpret_cast<__nv_bfloat16 *>(out),
         reinterpret_cast<const __nv_bfloat16 *>(in), n,
         reinterpret_cast<const __nv_bfloat16 *>(scale));
}

extern "C" {

void loomrt_fill(loomrt_ctx *ctx, loomrt_buf *dst, int64_t shape,
                 double value) {
  int64_t n = shapeOf(ctx, shape).numel();
  LAUNCH(fillKernel, blocksFor(n), kThreads, F(dst), n, float(value));
}

void loomrt_fill_bf16(loomrt_ctx *ctx, loomrt_buf *dst, int64_t shape,
                      double value) {
  int64_t n = shapeOf(ctx, shape).numel();
  LAUNCH(fillBf16Kernel, blocksFor(n), kThreads,
         reinterpret_cast<__nv_bfloat16 *>(dst), n,
         __float2bfloat16_rn(float(value)));
}

namespace {
/// out = lhs x rhs, or out += lhs x rhs with `accumulate` (beta = 1).
void matmul(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs,
            int64_t so, int64_t sl, int64_t sr, int32_t ta, int32_t tb,
            bool accumulate) {
  float beta = accumulate ? 1.0f : 0.0f;
  Shape o = shapeOf(ctx, so), l = shapeOf(ctx, sl), r = shapeOf(ctx, sr);
  int64_t m = o[o.rank - 2], n = o[o.rank - 1];
  int64_t k = ta ? l[l.rank - 2] : l[l.rank - 1];
  int64_t batch = o.numel() / std::max<int64_t>(m * n, 1);
  bool sharedRhs = r.rank == 2;
  if (sharedRhs && !ta) {
    gemm(ctx, false, tb, batch * m, n, k, 1.0f, F(lhs), 0, F(rhs), 0, beta,
         F(out), 0, 1);
    return;
  }
  gemm(ctx, ta, tb, m, n, k, 1.0f, F(lhs), m * k, F(rhs),
       sharedRhs ? 0 : k * n, beta, F(out), m * n, batch);
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
  binary(c, o, a, b, so, sa, sb, AddOp{});
}
void loomrt_sub(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, SubOp{});
}
void loomrt_mul(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, MulOp{});
}
void loomrt_div(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a, loomrt_buf *b,
                int64_t so, int64_t sa, int64_t sb) {
  binary(c, o, a, b, so, sa, sb, DivOp{});
}

#define LOOMRT_UNARY(name, Op)                                                 \
  void loomrt_##name(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,  \
                     int64_t) {                                                \
    unary(c, o, i, so, Op{});                                                  \
  }
LOOMRT_UNARY(relu, ReluOp)
LOOMRT_UNARY(gelu, GeluOp)
LOOMRT_UNARY(silu, SiluOp)
LOOMRT_UNARY(tanh, TanhOp)
LOOMRT_UNARY(exp, ExpOp)
LOOMRT_UNARY(log, LogOp)
LOOMRT_UNARY(sqrt, SqrtOp)
LOOMRT_UNARY(rsqrt, RsqrtOp)
#undef LOOMRT_UNARY

#define LOOMRT_UNARY_GRAD(name, Op)                                            \
  void loomrt_##name(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *x,              \
                     loomrt_buf *g, int64_t so, int64_t, int64_t) {            \
    unaryGrad(c, o, x, g, so, Op{});                                           \
  }
LOOMRT_UNARY_GRAD(relu_grad, ReluGradOp)
LOOMRT_UNARY_GRAD(gelu_grad, GeluGradOp)
LOOMRT_UNARY_GRAD(silu_grad, SiluGradOp)
LOOMRT_UNARY_GRAD(tanh_grad, TanhGradOp)
#undef LOOMRT_UNARY_GRAD

void loomrt_scale(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                  int64_t, double factor) {
  unary(c, o, i, so, ScaleOp{float(factor)});
}

void loomrt_convert(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                    int64_t, int32_t elementType) {
  // To the type it has: a copy.
  loomrt_copy(c, o, i, shapeOf(c, so).numel() * elementBytes(elementType));
}

void loomrt_convert_bf16(loomrt_ctx *ctx, loomrt_buf *o, loomrt_buf *i,
                         int64_t so, int64_t, int32_t elementType) {
  int64_t n = shapeOf(ctx, so).numel();
  if (elementType == LOOMRT_BF16)
    LAUNCH(narrowKernel, blocksFor(n), kThreads,
           reinterpret_cast<__nv_bfloat16 *>(o), F(i), n);
  else
    LAUNCH(widenKernel, blocksFor(n), kThreads, F(o),
           reinterpret_cast<const __nv_bfloat16 *>(i), n);
}

void loomrt_reduce(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                   int64_t, int64_t si, int64_t dims, int32_t kind) {
  Shape s = shapeOf(ctx, si);
  reduceWith(ctx, F(out), F(in), s, reducedDims(ctx, dims, s.rank), kind);
}

void loomrt_broadcast(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                      int64_t so, int64_t si, int64_t dims) {
  Shape o = shapeOf(ctx, so), s = shapeOf(ctx, si), d = shapeOf(ctx, dims);
  std::vector<int64_t> own = stridesOf(s), strides(o.rank, 0);
  for (int64_t i = 0; i < d.rank; ++i)
    strides[d[i]] = own[i];
  int64_t n = o.numel();
  LAUNCH(gatherKernel, blocksFor(n), kThreads, F(out), F(in), n,
         makeIndex(o, strides));
}

namespace {
void sumTo(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in, int64_t so,
           int64_t si, bool accumulate) {
  Shape o = shapeOf(ctx, so), s = shapeOf(ctx, si);
  // The dimensions `out` does not have, or has as 1 where `in` does not.
  int64_t offset = s.rank - o.rank;
  std::vector<bool> isReduced(s.rank, false);
  for (int64_t d = 0; d < s.rank; ++d)
    isReduced[d] = d < offset || (o[d - offset] == 1 && s[d] != 1);
  reduceWith(ctx, F(out), F(in), s, isReduced, 0, accumulate);
}
} // namespace

void loomrt_sum_to(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                   int64_t so, int64_t si) {
  sumTo(ctx, out, in, so, si, false);
}
void loomrt_sum_to_accumulate(loomrt_ctx *ctx, loomrt_buf *out,
                              loomrt_buf *in, int64_t so, int64_t si) {
  sumTo(ctx, out, in, so, si, true);
}

void loomrt_reduce_max_grad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                            loomrt_buf *max, loomrt_buf *grad, int64_t,
                            int64_t si, int64_t, int64_t, int64_t dims) {
  Shape s = shapeOf(ctx, si);
  std::vector<bool> isReduced = reducedDims(ctx, dims, s.rank);
  // The output offset of every input element: kept dimensions' strides in
  // the output, 0 along reduced ones.
  std::vector<int64_t> keptStride(s.rank, 0);
  int64_t stride = 1;
  for (int64_t d = s.rank - 1; d >= 0; --d)
    if (!isReduced[d]) {
      keptStride[d] = stride;
      stride *= s[d];
    }
  int64_t n = s.numel();
  LAUNCH(reduceMaxGradKernel, blocksFor(n), kThreads, F(out), F(in), F(max),
         F(grad), n, makeIndex(s, keptStride));
}

void loomrt_softmax(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                    int64_t so, int64_t) {
  auto [rows, w] = rowsOf(shapeOf(ctx, so));
  LAUNCH(softmaxKernel, rows, kRowThreads, F(out), F(in), rows, w, w, false);
}

void loomrt_softmax_grad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *y,
                         loomrt_buf *grad, int64_t so, int64_t, int64_t) {
  auto [rows, w] = rowsOf(shapeOf(ctx, so));
  LAUNCH(softmaxGradKernel, rows, kRowThreads, F(out), F(y), F(grad), rows, w);
}

void loomrt_layer_norm(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                       loomrt_buf *gamma, loomrt_buf *beta, int64_t so,
                       int64_t, int64_t, int64_t, double epsilon) {
  auto [rows, w] = rowsOf(shapeOf(ctx, so));
  LAUNCH(layerNormKernel, rows, kRowThreads, F(out), F(in), F(gamma), F(beta),
         rows, w, epsilon);
}

namespace {
void layerNormGrad(loomrt_ctx *ctx, loomrt_buf *dx, loomrt_buf *dgamma,
                   loomrt_buf *dbeta, loomrt_buf *in, loomrt_buf *gamma,
                   loomrt_buf *grad, int64_t sdx, double epsilon,
                   bool accumulate) {
  auto [rows, w] = rowsOf(shapeOf(ctx, sdx));
  Scratch stats(ctx, rows * 2 * 4);
  LAUNCH(layerNormGradKernel, rows, kRowThreads, F(dx), stats.as<float>(),
         F(in), F(gamma), F(grad), rows, w, epsilon);
  LAUNCH(normParamGradKernel, blocksFor(w), kThreads, F(dgamma), F(dbeta),
         F(in), F(grad), stats.as<float>(), rows, w, accumulate);
}
} // namespace

void loomrt_layer_norm_grad(loomrt_ctx *ctx, loomrt_buf *dx,
                            loomrt_buf *dgamma, loomrt_buf *dbeta,
                            loomrt_buf *in, loomrt_buf *gamma,
                            loomrt_buf *grad, int64_t sdx, int64_t, int64_t,
                            int64_t, int64_t, int64_t, double epsilon) {
  layerNormGrad(ctx, dx, dgamma, dbeta, in, gamma, grad, sdx, epsilon, false);
}
void loomrt_layer_norm_grad_accumulate(loomrt_ctx *ctx, loomrt_buf *dx,
                                       loomrt_buf *dgamma, loomrt_buf *dbeta,
                                       loomrt_buf *in, loomrt_buf *gamma,
                                       loomrt_buf *grad, int64_t sdx, int64_t,
                                       int64_t, int64_t, int64_t, int64_t,
                                       double epsilon) {
  layerNormGrad(ctx, dx, dgamma, dbeta, in, gamma, grad, sdx, epsilon, true);
}

void loomrt_rms_norm(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                     loomrt_buf *gamma, int64_t so, int64_t, int64_t,
                     double epsilon) {
  auto [rows, w] = rowsOf(shapeOf(ctx, so));
  LAUNCH(rmsNormKernel, rows, kRowThreads, F(out), F(in), F(gamma), rows, w,
         epsilon);
}

namespace {
void rmsNormGrad(loomrt_ctx *ctx, loomrt_buf *dx, loomrt_buf *dgamma,
                 loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad,
                 int64_t sdx, double epsilon, bool accumulate) {
  auto [rows, w] = rowsOf(shapeOf(ctx, sdx));
  Scratch stats(ctx, rows * 2 * 4);
  LAUNCH(rmsNormGradKernel, rows, kRowThreads, F(dx), stats.as<float>(),
         F(in), F(gamma), F(grad), rows, w, epsilon);
  LAUNCH(normParamGradKernel, blocksFor(w), kThreads, F(dgamma),
         static_cast<float *>(nullptr), F(in), F(grad), stats.as<float>(),
         rows, w, accumulate);
}
} // namespace

void loomrt_rms_norm_grad(loomrt_ctx *ctx, loomrt_buf *dx, loomrt_buf *dgamma,
                          loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad,
                          int64_t sdx, int64_t, int64_t, int64_t, int64_t,
                          double epsilon) {
  rmsNormGrad(ctx, dx, dgamma, in, gamma, grad, sdx, epsilon, false);
}
void loomrt_rms_norm_grad_accumulate(loomrt_ctx *ctx, loomrt_buf *dx,
                                     loomrt_buf *dgamma, loomrt_buf *in,
                                     loomrt_buf *gamma, loomrt_buf *grad,
                                     int64_t sdx, int64_t, int64_t, int64_t,
                                     int64_t, double epsilon) {
  rmsNormGrad(ctx, dx, dgamma, in, gamma, grad, sdx, epsilon, true);
}

void loomrt_attention(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *q,
                      loomrt_buf *k, loomrt_buf *v, int64_t so, int64_t,
                      int64_t, int64_t, int32_t causal) {
  Shape o = shapeOf(ctx, so);
  int64_t s = o[2], d = o[3], heads = o[0] * o[1];
  if (d <= flash::kMaxHeadDim) {
    fusedAttention(ctx, F(out), F(q), F(k), F(v), heads, s, d, causal,
                   LoadF32{}, StoreF32{});
    return;
  }
  Scratch p(ctx, heads * s * s * 4);
  attentionProbs(ctx, F(q), F(k), heads, s, d, causal, p.as<float>());
  gemm(ctx, false, false, s, d, s, 1.0f, p.as<float>(), s * s, F(v), s * d,
       0.0f, F(out), s * d, heads);
}

void loomrt_attention_grad(loomrt_ctx *ctx, loomrt_buf *dq, loomrt_buf *dk,
                           loomrt_buf *dv, loomrt_buf *q, loomrt_buf *k,
                           loomrt_buf *v, loomrt_buf *grad, int64_t sdq,
                           int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int32_t causal) {
  Shape o = shapeOf(ctx, sdq);
  int64_t s = o[2], d = o[3], heads = o[0] * o[1];
  float scale = float(1.0 / std::sqrt(double(d)));
  if (d <= flash::kMaxHeadDim) {
    fusedAttentionGrad(ctx, F(dq), F(dk), F(dv), F(q), F(k), F(v), F(grad),
                       heads, s, d, causal, LoadF32{}, StoreF32{});
    return;
  }
  // A head wider than the fused rows hold: the probabilities materialised.
  Scratch p(ctx, heads * s * s * 4), dp(ctx, heads * s * s * 4);
  float *P = p.as<float>(), *dP = dp.as<float>();
  attentionProbs(ctx, F(q), F(k), heads, s, d, causal, P);
  // dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P)).
  gemm(ctx, true, false, s, d, s, 1.0f, P, s * s, F(grad), s * d, 0.0f, F(dv),
       s * d, heads);
  gemm(ctx, false, true, s, s, d, 1.0f, F(grad), s * d, F(v), s * d, 0.0f, dP,
       s * s, heads);
  LAUNCH(softmaxGradKernel, heads * s, kRowThreads, dP, P, dP, heads * s, s);
  gemm(ctx, false, false, s, d, s, scale, dP, s * s, F(k), s * d, 0.0f, F(dq),
       s * d, heads);
  gemm(ctx, true, false, s, d, s, scale, dP, s * s, F(q), s * d, 0.0f, F(dk),
       s * d, heads);
}

void loomrt_causal_mask(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                        int64_t so, int64_t, double fill) {
  Shape o = shapeOf(ctx, so);
  int64_t n = o.numel();
  LAUNCH(causalMaskKernel, blocksFor(n), kThreads, F(out), F(in), n,
         o[o.rank - 2], o[o.rank - 1], float(fill));
}

namespace {
/// The first row a table of `rows` rows holds, and the vocabulary's size:
/// the whole table, or with a vocab group its rank's block.
std::pair<int64_t, int64_t> vocabBlock(loomrt_ctx *ctx, int64_t rows,
                                       int64_t group) {
  if (!group)
    return {0, rows};
  return {loomrt_group_rank(ctx, uint32_t(group)) * rows,
          loomrt_group_size(ctx, uint32_t(group)) * rows};
}
} // namespace

void loomrt_embedding(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *table,
                      loomrt_buf *ids, int64_t, int64_t st, int64_t sids,
                      int64_t vocab_group,
                      int64_t /*vocab_size: the ids' bound*/) {
  Shape t = shapeOf(ctx, st);
  int64_t dim = t[1], n = shapeOf(ctx, sids).numel();
  auto [first, vocab] = vocabBlock(ctx, t[0], vocab_group);
  LAUNCH(embeddingKernel, blocksFor(n * dim), kThreads, F(out), F(table),
         I(ids), n, dim, first, t[0], vocab, errorsOf(ctx));
}

namespace {
/// The rows scattered and added: over zeros, or with `accumulate` over
/// what `out` holds.
void embeddingGrad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *ids,
                   loomrt_buf *grad, int64_t so, int64_t sids, int64_t group,
                   bool accumulate) {
  Shape o = shapeOf(ctx, so);
  int64_t dim = o[1], n = shapeOf(ctx, sids).numel();
  auto [first, vocab] = vocabBlock(ctx, o[0], group);
  if (!accumulate)
    LOOMRT_CUDA(cudaMemsetAsync(out, 0, size_t(o.numel() * 4),
                                computeStream(ctx)));
  LAUNCH(embeddingGradKernel, blocksFor(n * dim), kThreads, F(out), I(ids),
         F(grad), n, dim, first, o[0], vocab, errorsOf(ctx));
}
} // namespace

void loomrt_embedding_grad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *ids,
                           loomrt_buf *grad, int64_t so, int64_t sids, int64_t,
                           int64_t vocab_group) {
  embeddingGrad(ctx, out, ids, grad, so, sids, vocab_group, false);
}
void loomrt_embedding_grad_accumulate(loomrt_ctx *ctx, loomrt_buf *out,
                                      loomrt_buf *ids, loomrt_buf *grad,
                                      int64_t so, int64_t sids, int64_t,
                                      int64_t vocab_group) {
  embeddingGrad(ctx, out, ids, grad, so, sids, vocab_group, true);
}

void loomrt_cross_entropy(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *logits,
                          loomrt_buf *labels, int64_t, int64_t sl, int64_t,
                          int64_t ignore) {
  auto [rows, classes] = rowsOf(shapeOf(ctx, sl));
  Scratch rowLoss(ctx, std::max<int64_t>(rows, 1) * 8);
  LAUNCH(crossEntropyRowsKernel, rows, kRowThreads, rowLoss.as<double>(),
         F(logits), I(labels), rows, classes, ignore, errorsOf(ctx));
  LAUNCH(labelMeanKernel, 1, 1024, F(out), rowLoss.as<double>(), I(labels),
         rows, ignore, 0);
}

void loomrt_cross_entropy_grad(loomrt_ctx *ctx, loomrt_buf *out,
                               loomrt_buf *logits, loomrt_buf *labels,
                               loomrt_buf *grad, int64_t, int64_t sl, int64_t,
                               int64_t, int64_t ignore) {
  auto [rows, classes] = rowsOf(shapeOf(ctx, sl));
  Scratch count(ctx, 4);
  LAUNCH(labelMeanKernel, 1, 1024, count.as<float>(),
         static_cast<const double *>(nullptr), I(labels), rows, ignore, 1);
  LAUNCH(crossEntropyGradKernel, rows, kRowThreads, F(out), F(logits),
         I(labels), F(grad), count.as<float>(), rows, classes, ignore,
         errorsOf(ctx));
}

void loomrt_cross_entropy_stats(loomrt_ctx *ctx, loomrt_buf *sum,
                                loomrt_buf *target, loomrt_buf *logits,
                                loomrt_buf *labels, loomrt_buf *max, int64_t,
                                int64_t, int64_t sl, int64_t, int64_t,
                                int64_t ignore, int64_t vocab_group,
                                int64_t /*vocab_size: the labels' bound*/) {
  auto [rows, classes] = rowsOf(shapeOf(ctx, sl));
  auto [first, vocab] = vocabBlock(ctx, classes, vocab_group);
  LAUNCH(crossEntropyStatsKernel, rows, kRowThreads, F(sum), F(target),
         F(logits), I(labels), F(max), rows, classes, first, vocab, ignore,
         errorsOf(ctx));
}

void loomrt_cross_entropy_from_stats(loomrt_ctx *ctx, loomrt_buf *out,
                                     loomrt_buf *max, loomrt_buf *sum,
                                     loomrt_buf *target, loomrt_buf *labels,
                                     int64_t, int64_t sm, int64_t, int64_t,
                                     int64_t, int64_t ignore) {
  int64_t rows = shapeOf(ctx, sm).numel();
  LAUNCH(crossEntropyFromStatsKernel, 1, 1024, F(out), F(max), F(sum),
         F(target), I(labels), rows, ignore);
}

void loomrt_cross_entropy_grad_from_stats(
    loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels,
    loomrt_buf *grad, loomrt_buf *max, loomrt_buf *sum, int64_t, int64_t sl,
    int64_t, int64_t, int64_t, int64_t, int64_t ignore, int64_t vocab_group) {
  auto [rows, classes] = rowsOf(shapeOf(ctx, sl));
  auto [first, vocab] = vocabBlock(ctx, classes, vocab_group);
  Scratch count(ctx, 4);
  LAUNCH(labelMeanKernel, 1, 1024, count.as<float>(),
         static_cast<const double *>(nullptr), I(labels), rows, ignore, 1);
  LAUNCH(crossEntropyGradFromStatsKernel, rows, kRowThreads, F(out),
         F(logits), I(labels), F(grad), count.as<float>(), F(max), F(sum),
         rows, classes, first, vocab, ignore, errorsOf(ctx));
}

void loomrt_label_count(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *labels,
                        int64_t, int64_t sl, int64_t ignore) {
  int64_t n = shapeOf(ctx, sl).numel();
  LAUNCH(labelMeanKernel, 1, 1024, F(out),
         static_cast<const double *>(nullptr), I(labels), n, ignore, 2);
}

void loomrt_dropout(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                    int64_t stream, int64_t so, int64_t,
                    int64_t global_shape, double rate, int64_t seed,
                    int64_t shard_groups) {
  int64_t n = shapeOf(ctx, so).numel();
  if (!ctx->training || rate == 0.0) {
    loomrt_copy(ctx, out, in, n * 4);
    return;
  }
  LAUNCH(dropoutKernel, blocksFor(n), kThreads, F(out), F(in), n,
         dropoutKey(seed, ctx->seed, stream, ctx->step), rate,
         float(1.0 / (1.0 - rate)),
         shardIndex(ctx, so, global_shape, shard_groups));
}

void loomrt_transpose(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                      int64_t so, int64_t si, int64_t permutation) {
  Shape o = shapeOf(ctx, so), s = shapeOf(ctx, si),
        p = shapeOf(ctx, permutation);
  std::vector<int64_t> own = stridesOf(s), strides(o.rank);
  for (int64_t d = 0; d < o.rank; ++d)
    strides[d] = own[p[d]];
  int64_t n = o.numel();
  LAUNCH(gatherKernel, blocksFor(n), kThreads, F(out), F(in), n,
         makeIndex(o, strides));
}

void loomrt_slice(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in, int64_t so,
                  int64_t si, int64_t offsets, int64_t) {
  Shape o = shapeOf(ctx, so), s = shapeOf(ctx, si),
        off = shapeOf(ctx, offsets);
  std::vector<int64_t> strides = stridesOf(s);
  int64_t base = 0;
  for (int64_t d = 0; d < s.rank; ++d)
    base += off[d] * strides[d];
  int64_t n = o.numel();
  LAUNCH(gatherKernel, blocksFor(n), kThreads, F(out), F(in) + base, n,
         makeIndex(o, strides));
}

void loomrt_shard(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                  int64_t so, int64_t si, int64_t groups) {
  Shape o = shapeOf(ctx, so), s = shapeOf(ctx, si);
  std::vector<int64_t> strides = stridesOf(s);
  ShardIndex index = shardIndex(ctx, so, si, groups);
  int64_t base = 0;
  for (int64_t d = 0; d < s.rank; ++d)
    base += index.offset[d] * strides[d];
  int64_t n = o.numel();
  LAUNCH(gatherKernel, blocksFor(n), kThreads, F(out), F(in) + base, n,
         makeIndex(o, strides));
}

__global__ void fillPaddingKernel(float *y, const float *x, int64_t n,
                                  int64_t block, int64_t inner, int64_t valid,
                                  float value) {
  GRID_LOOP(i, n) { y[i] = (i / inner) % block < valid ? x[i] : value; }
}

void loomrt_fill_padding(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                         int64_t rows, int64_t block, int64_t inner,
                         uint32_t group, int64_t size, double value) {
  int64_t start = int64_t(loomrt_group_rank(ctx, group)) * block;
  int64_t valid = std::max<int64_t>(0, std::min(block, size - start));
  int64_t n = rows * block * inner;
  LAUNCH(fillPaddingKernel, blocksFor(n), kThreads, F(out), F(in), n, block,
         inner, valid, float(value));
}

void loomrt_pad(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in, int64_t so,
                int64_t si, int64_t, int64_t low) {
  Shape o = shapeOf(ctx, so), s = shapeOf(ctx, si), lo = shapeOf(ctx, low);
  std::vector<int64_t> strides = stridesOf(o);
  int64_t base = 0;
  for (int64_t d = 0; d < o.rank; ++d)
    base += lo[d] * strides[d];
  LOOMRT_CUDA(cudaMemsetAsync(out, 0, size_t(o.numel() * 4),
                              computeStream(ctx)));
  int64_t n = s.numel();
  LAUNCH(scatterKernel, blocksFor(n), kThreads, F(out) + base, F(in), n,
         makeIndex(s, strides));
}

void loomrt_lr_schedule(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *step,
                        int64_t, int64_t, double lr, int64_t warmup,
                        int64_t total, int32_t decay, double minLr) {
  if (ctx->lrOverride > 0.0) {
    minLr *= ctx->lrOverride / lr;
    lr = ctx->lrOverride;
  }
  // The step counter the kernel reads is the driver's step; the host's copy
  // of the rate is for the log.
  ctx->lastLr =
      evaluateSchedule(lr, warmup, total, decay, minLr, double(ctx->step));
  LAUNCH(scheduleKernel, 1, 1, F(out), F(step), lr, warmup, total, decay,
         minLr);
}

void loomrt_sum_squares(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                        int64_t, int64_t si, int64_t position, int64_t,
                        int64_t replicaGroup) {
  sumSquares(ctx, out, F(in), si, position, replicaGroup);
}

void loomrt_sum_squares_bf16(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                             int64_t, int64_t si, int64_t position, int64_t,
                             int64_t replicaGroup) {
  sumSquares(ctx, out, reinterpret_cast<const __nv_bfloat16 *>(in), si,
             position, replicaGroup);
}

void loomrt_clip_factor(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *norm,
                        int64_t, int64_t, double maxNorm) {
  LAUNCH(clipKernel, 1, 1, F(out), F(norm), maxNorm);
}

void loomrt_sgd_update(loomrt_ctx *ctx, loomrt_buf *newParam,
                       loomrt_buf *newMomentum, loomrt_buf *param,
                       loomrt_buf *grad, loomrt_buf *momentum, loomrt_buf *lr,
                       int64_t sp, int64_t, int64_t, int64_t, int64_t, int64_t,
                       double momentumF, double weightDecay) {
  int64_t n = shapeOf(ctx, sp).numel();
  LAUNCH(sgdKernel<float>, blocksFor(n), kThreads, F(newParam),
         F(newMomentum), F(param), F(grad), F(momentum), F(lr), n,
         float(momentumF), float(weightDecay));
}

void loomrt_sgd_update_bf16(loomrt_ctx *ctx, loomrt_buf *newParam,
                            loomrt_buf *newMomentum, loomrt_buf *param,
                            loomrt_buf *grad, loomrt_buf *momentum,
                            loomrt_buf *lr, int64_t sp, int64_t, int64_t,
                            int64_t, int64_t, int64_t, double momentumF,
                            double weightDecay) {
  int64_t n = shapeOf(ctx, sp).numel();
  LAUNCH(sgdKernel<__nv_bfloat16>, blocksFor(n), kThreads, F(newParam),
         F(newMomentum), F(param),
         reinterpret_cast<const __nv_bfloat16 *>(grad), F(momentum), F(lr), n,
         float(momentumF), float(weightDecay));
}

void loomrt_adamw_update(loomrt_ctx *ctx, loomrt_buf *newParam,
                         loomrt_buf *newM, loomrt_buf *newV, loomrt_buf *param,
                         loomrt_buf *grad, loomrt_buf *m, loomrt_buf *v,
                         loomrt_buf *lr, loomrt_buf *step, int64_t sp, int64_t,
                         int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, double beta1, double beta2, double eps,
                         double, double weightDecay) {
  int64_t n = shapeOf(ctx, sp).numel();
  LAUNCH(adamwKernel<float>, blocksFor(n), kThreads, F(newParam), F(newM),
         F(newV), F(param), F(grad), F(m), F(v), F(lr), F(step), n, beta1,
         beta2, eps, weightDecay);
}

void loomrt_adamw_update_bf16(loomrt_ctx *ctx, loomrt_buf *newParam,
                              loomrt_buf *newM, loomrt_buf *newV,
                              loomrt_buf *param, loomrt_buf *grad,
                              loomrt_buf *m, loomrt_buf *v, loomrt_buf *lr,
                              loomrt_buf *step, int64_t sp, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t,
                              int64_t, double beta1, double beta2, double eps,
                              double, double weightDecay) {
  int64_t n = shapeOf(ctx, sp).numel();
  LAUNCH(adamwKernel<__nv_bfloat16>, blocksFor(n), kThreads, F(newParam),
         F(newM), F(newV), F(param),
         reinterpret_cast<const __nv_bfloat16 *>(grad), F(m), F(v), F(lr),
         F(step), n, beta1, beta2, eps, weightDecay);
}

} // extern "C"
