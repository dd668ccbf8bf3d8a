//===- Bf16Kernels.cpp - every kernel's bf16 entry, computed in f32 --------===//
//
// `loomrt_<op>_bf16` takes the arguments of `loomrt_<op>`; its non-scalar
// float tensors are bf16 (scalars, 0-d, stay f32, as do the softmax
// statistics of the vocab-parallel cross-entropy). Each entry widens its bf16 operands into
// f32 scratch (exactly), runs the backend's f32 kernel on them and narrows
// its results into place (Bf16.h's rounding, loomrt_convert_bf16): bf16
// storage, f32 compute, one rounding per result, on either backend. An
// accumulating entry widens its accumulator too and narrows the sum.
//
// A backend with native bf16 kernels (cuda's bf16 GEMM with f32 compute
// and its fused attention: backend::matmulBf16, attentionBf16,
// attentionGradBf16) runs them instead of the f32 copies.
//
// The optimizer's steps over whole gradients (sum_squares, the updates and
// a scaling by the clip factor) read bf16 in place, each backend natively:
// a stacked gradient is never copied to f32.
//
// The scratch is the program's reservation (loomrt_program's
// bf16_scratch_bytes, the compiler's count of the largest call), each
// call's copies cut from its start; past it (a program that reserved too
// little), a pool of one buffer per slot, grown to the largest call.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <algorithm>

using namespace loomrt;

namespace {

/// One kernel call's f32 copies of its bf16 tensors.
class Widened {
public:
  explicit Widened(loomrt_ctx *ctx) : ctx(ctx) {}
  Widened(const Widened &) = delete;
  Widened &operator=(const Widened &) = delete;
  ~Widened() {
    for (auto [scratch, target, shape] : narrowed)
      loomrt_convert_bf16(ctx, target, scratch, shape, shape, LOOMRT_BF16);
  }

  /// An operand the kernel reads.
  loomrt_buf *in(loomrt_buf *buf, int64_t shape) {
    if (!buf || isScalar(shape))
      return buf;
    loomrt_buf *scratch = next(shape);
    loomrt_convert_bf16(ctx, scratch, buf, shape, shape, LOOMRT_F32);
    return scratch;
  }
  /// A result the kernel writes.
  loomrt_buf *out(loomrt_buf *buf, int64_t shape) {
    if (!buf || isScalar(shape))
      return buf;
    loomrt_buf *scratch = next(shape);
    narrowed.push_back({scratch, buf, shape});
    return scratch;
  }
  /// A result the kernel adds into.
  loomrt_buf *inout(loomrt_buf *buf, int64_t shape) {
    loomrt_buf *scratch = in(buf, shape);
    if (scratch != buf)
      narrowed.push_back({scratch, buf, shape});
    return scratch;
  }

private:
  bool isScalar(int64_t shape) const {
    return shape < 0 || shapeOf(ctx, shape).rank == 0;
  }
  loomrt_buf *next(int64_t shape) {
    int64_t bytes = shapeOf(ctx, shape).numel() * int64_t(sizeof(float));
    // From the reservation, each copy at a multiple of kBf16ScratchAlign
    // (what analysis::bf16ScratchBytes counts).
    int64_t aligned = (bytes + kBf16ScratchAlign - 1) / kBf16ScratchAlign *
                      kBf16ScratchAlign;
    if (reserved + aligned <= ctx->bf16ReservedBytes) {
      char *at = ctx->bf16Reserved + reserved;
      reserved += aligned;
      return reinterpret_cast<loomrt_buf *>(at);
    }
    auto &pool = ctx->bf16Scratch;
    if (used == pool.size())
      pool.push_back({nullptr, 0});
    auto &[ptr, size] = pool[used++];
    if (size < bytes) {
      if (ptr)
        release(ctx, ptr, size);
      ptr = allocate(ctx, bytes);
      size = bytes;
    }
    return reinterpret_cast<loomrt_buf *>(ptr);
  }

  struct Narrowed {
    loomrt_buf *scratch, *target;
    int64_t shape;
  };
  loomrt_ctx *ctx;
  int64_t reserved = 0;
  size_t used = 0;
  std::vector<Narrowed> narrowed;
};

} // namespace

void loomrt::reserveBf16Scratch(loomrt_ctx *ctx, int64_t bytes) {
  if (bytes <= 0)
    return;
  ctx->bf16Reserved = allocate(ctx, bytes);
  ctx->bf16ReservedBytes = bytes;
}

void loomrt::releaseBf16Scratch(loomrt_ctx *ctx) {
  if (ctx->bf16Reserved)
    release(ctx, ctx->bf16Reserved, ctx->bf16ReservedBytes);
  ctx->bf16Reserved = nullptr;
  ctx->bf16ReservedBytes = 0;
  for (auto [ptr, size] : ctx->bf16Scratch)
    if (ptr)
      release(ctx, ptr, size);
  ctx->bf16Scratch.clear();
}

extern "C" {

void loomrt_matmul_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a,
                        loomrt_buf *b, int64_t so, int64_t sa, int64_t sb,
                        int32_t ta, int32_t tb) {
  if (backend::matmulBf16(c, o, a, b, so, sa, sb, ta, tb, false))
    return;
  Widened w(c);
  loomrt_matmul(c, w.out(o, so), w.in(a, sa), w.in(b, sb), so, sa, sb, ta, tb);
}
void loomrt_matmul_bf16_accumulate(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a,
                                   loomrt_buf *b, int64_t so, int64_t sa,
                                   int64_t sb, int32_t ta, int32_t tb) {
  if (backend::matmulBf16(c, o, a, b, so, sa, sb, ta, tb, true))
    return;
  Widened w(c);
  loomrt_matmul_accumulate(c, w.inout(o, so), w.in(a, sa), w.in(b, sb), so, sa,
                           sb, ta, tb);
}

#define LOOMRT_BINARY_BF16(NAME)                                               \
  void loomrt_##NAME##_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a,       \
                            loomrt_buf *b, int64_t so, int64_t sa,             \
                            int64_t sb) {                                      \
    Widened w(c);                                                              \
    loomrt_##NAME(c, w.out(o, so), w.in(a, sa), w.in(b, sb), so, sa, sb);      \
  }
LOOMRT_BINARY_BF16(sub)
LOOMRT_BINARY_BF16(div)
namespace {
bool sameShape(const Shape &a, const Shape &b) {
  return a.rank == b.rank && std::equal(a.dims, a.dims + a.rank, b.dims);
}
} // namespace

// A sum of two tensors of the result's shape (a tied embedding's two bf16
// gradients, an accumulation) is added in place by the backend, without
// f32 copies.
void loomrt_add_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a,
                     loomrt_buf *b, int64_t so, int64_t sa, int64_t sb) {
  Shape out = shapeOf(c, so);
  if (out.rank > 0 && sameShape(out, shapeOf(c, sa)) &&
      sameShape(out, shapeOf(c, sb))) {
    backend::addBf16(c, o, a, b, out.numel());
    return;
  }
  Widened w(c);
  loomrt_add(c, w.out(o, so), w.in(a, sa), w.in(b, sb), so, sa, sb);
}

// A tensor scaled by a 0-d one (the clipped gradients under
// --grad-precision=bf16: whole stacked gradients, by the narrowed clip
// factor, which is bf16 storage like any bf16 tensor) is scaled in place
// by the backend, without f32 copies.
void loomrt_mul_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *a,
                     loomrt_buf *b, int64_t so, int64_t sa, int64_t sb) {
  Shape out = shapeOf(c, so);
  if (shapeOf(c, sb).rank == 0 && sameShape(out, shapeOf(c, sa))) {
    backend::scaleBf16(c, o, a, out.numel(), b);
    return;
  }
  Widened w(c);
  loomrt_mul(c, w.out(o, so), w.in(a, sa), w.in(b, sb), so, sa, sb);
}
// y = f(x, g): the unary ops' backward.
LOOMRT_BINARY_BF16(relu_grad)
LOOMRT_BINARY_BF16(gelu_grad)
LOOMRT_BINARY_BF16(silu_grad)
LOOMRT_BINARY_BF16(tanh_grad)
LOOMRT_BINARY_BF16(softmax_grad)
#undef LOOMRT_BINARY_BF16

#define LOOMRT_UNARY_BF16(NAME)                                                \
  void loomrt_##NAME##_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,       \
                            int64_t so, int64_t si) {                          \
    Widened w(c);                                                              \
    loomrt_##NAME(c, w.out(o, so), w.in(i, si), so, si);                       \
  }
LOOMRT_UNARY_BF16(relu)
LOOMRT_UNARY_BF16(gelu)
LOOMRT_UNARY_BF16(silu)
LOOMRT_UNARY_BF16(tanh)
LOOMRT_UNARY_BF16(exp)
LOOMRT_UNARY_BF16(log)
LOOMRT_UNARY_BF16(sqrt)
LOOMRT_UNARY_BF16(rsqrt)
LOOMRT_UNARY_BF16(softmax)
LOOMRT_UNARY_BF16(sum_to)
#undef LOOMRT_UNARY_BF16

void loomrt_sum_to_bf16_accumulate(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                                   int64_t so, int64_t si) {
  Widened w(c);
  loomrt_sum_to_accumulate(c, w.inout(o, so), w.in(i, si), so, si);
}

void loomrt_scale_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                       int64_t si, double factor) {
  Widened w(c);
  loomrt_scale(c, w.out(o, so), w.in(i, si), so, si, factor);
}

void loomrt_reduce_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                        int64_t so, int64_t si, int64_t dims, int32_t kind) {
  Widened w(c);
  loomrt_reduce(c, w.out(o, so), w.in(i, si), so, si, dims, kind);
}

void loomrt_broadcast_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                           int64_t so, int64_t si, int64_t dims) {
  Widened w(c);
  loomrt_broadcast(c, w.out(o, so), w.in(i, si), so, si, dims);
}

void loomrt_reduce_max_grad_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                                 loomrt_buf *m, loomrt_buf *g, int64_t so,
                                 int64_t si, int64_t sm, int64_t sg,
                                 int64_t dims) {
  Widened w(c);
  loomrt_reduce_max_grad(c, w.out(o, so), w.in(i, si), w.in(m, sm),
                         w.in(g, sg), so, si, sm, sg, dims);
}

void loomrt_layer_norm_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                            loomrt_buf *g, loomrt_buf *b, int64_t so,
                            int64_t si, int64_t sg, int64_t sb,
                            double epsilon) {
  Widened w(c);
  loomrt_layer_norm(c, w.out(o, so), w.in(i, si), w.in(g, sg), w.in(b, sb), so,
                    si, sg, sb, epsilon);
}

void loomrt_layer_norm_grad_bf16(loomrt_ctx *c, loomrt_buf *dx,
                                 loomrt_buf *dg, loomrt_buf *db, loomrt_buf *i,
                                 loomrt_buf *g, loomrt_buf *gr, int64_t sdx,
                                 int64_t sdg, int64_t sdb, int64_t si,
                                 int64_t sg, int64_t sgr, double epsilon) {
  Widened w(c);
  loomrt_layer_norm_grad(c, w.out(dx, sdx), w.out(dg, sdg), w.out(db, sdb),
                         w.in(i, si), w.in(g, sg), w.in(gr, sgr), sdx, sdg,
                         sdb, si, sg, sgr, epsilon);
}
void loomrt_layer_norm_grad_bf16_accumulate(
    loomrt_ctx *c, loomrt_buf *dx, loomrt_buf *dg, loomrt_buf *db,
    loomrt_buf *i, loomrt_buf *g, loomrt_buf *gr, int64_t sdx, int64_t sdg,
    int64_t sdb, int64_t si, int64_t sg, int64_t sgr, double epsilon) {
  Widened w(c);
  loomrt_layer_norm_grad_accumulate(
      c, w.out(dx, sdx), w.inout(dg, sdg), w.inout(db, sdb), w.in(i, si),
      w.in(g, sg), w.in(gr, sgr), sdx, sdg, sdb, si, sg, sgr, epsilon);
}

void loomrt_rms_norm_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                          loomrt_buf *g, int64_t so, int64_t si, int64_t sg,
                          double epsilon) {
  Widened w(c);
  loomrt_rms_norm(c, w.out(o, so), w.in(i, si), w.in(g, sg), so, si, sg,
                  epsilon);
}

void loomrt_rms_norm_grad_bf16(loomrt_ctx *c, loomrt_buf *dx, loomrt_buf *dg,
                               loomrt_buf *i, loomrt_buf *g, loomrt_buf *gr,
                               int64_t sdx, int64_t sdg, int64_t si, int64_t sg,
                               int64_t sgr, double epsilon) {
  Widened w(c);
  loomrt_rms_norm_grad(c, w.out(dx, sdx), w.out(dg, sdg), w.in(i, si),
                       w.in(g, sg), w.in(gr, sgr), sdx, sdg, si, sg, sgr,
                       epsilon);
}
void loomrt_rms_norm_grad_bf16_accumulate(loomrt_ctx *c, loomrt_buf *dx,
                                          loomrt_buf *dg, loomrt_buf *i,
                                          loomrt_buf *g, loomrt_buf *gr,
                                          int64_t sdx, int64_t sdg, int64_t si,
                                          int64_t sg, int64_t sgr,
                                          double epsilon) {
  Widened w(c);
  loomrt_rms_norm_grad_accumulate(c, w.out(dx, sdx), w.inout(dg, sdg),
                                  w.in(i, si), w.in(g, sg), w.in(gr, sgr), sdx,
                                  sdg, si, sg, sgr, epsilon);
}

void loomrt_attention_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *q,
                           loomrt_buf *k, loomrt_buf *v, int64_t so,
                           int64_t sq, int64_t sk, int64_t sv, int32_t causal) {
  if (backend::attentionBf16(c, o, q, k, v, so, causal))
    return;
  Widened w(c);
  loomrt_attention(c, w.out(o, so), w.in(q, sq), w.in(k, sk), w.in(v, sv), so,
                   sq, sk, sv, causal);
}

void loomrt_attention_grad_bf16(loomrt_ctx *c, loomrt_buf *dq, loomrt_buf *dk,
                                loomrt_buf *dv, loomrt_buf *q, loomrt_buf *k,
                                loomrt_buf *v, loomrt_buf *g, int64_t sdq,
                                int64_t sdk, int64_t sdv, int64_t sq,
                                int64_t sk, int64_t sv, int64_t sg,
                                int32_t causal) {
  if (backend::attentionGradBf16(c, dq, dk, dv, q, k, v, g, sdq, causal))
    return;
  Widened w(c);
  loomrt_attention_grad(c, w.out(dq, sdq), w.out(dk, sdk), w.out(dv, sdv),
                        w.in(q, sq), w.in(k, sk), w.in(v, sv), w.in(g, sg),
                        sdq, sdk, sdv, sq, sk, sv, sg, causal);
}

void loomrt_causal_mask_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                             int64_t so, int64_t si, double fill) {
  Widened w(c);
  loomrt_causal_mask(c, w.out(o, so), w.in(i, si), so, si, fill);
}

void loomrt_embedding_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *t,
                           loomrt_buf *ids, int64_t so, int64_t st,
                           int64_t sids, int64_t vocabGroup,
                           int64_t vocabSize) {
  Widened w(c);
  loomrt_embedding(c, w.out(o, so), w.in(t, st), ids, so, st, sids, vocabGroup,
                   vocabSize);
}

void loomrt_embedding_grad_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *ids,
                                loomrt_buf *g, int64_t so, int64_t sids,
                                int64_t sg, int64_t vocabGroup) {
  Widened w(c);
  loomrt_embedding_grad(c, w.out(o, so), ids, w.in(g, sg), so, sids, sg,
                        vocabGroup);
}
void loomrt_embedding_grad_bf16_accumulate(loomrt_ctx *c, loomrt_buf *o,
                                           loomrt_buf *ids, loomrt_buf *g,
                                           int64_t so, int64_t sids,
                                           int64_t sg, int64_t vocabGroup) {
  Widened w(c);
  loomrt_embedding_grad_accumulate(c, w.inout(o, so), ids, w.in(g, sg), so,
                                   sids, sg, vocabGroup);
}

void loomrt_cross_entropy_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *x,
                               loomrt_buf *labels, int64_t so, int64_t sx,
                               int64_t sl, int64_t ignoreIndex) {
  Widened w(c);
  loomrt_cross_entropy(c, o, w.in(x, sx), labels, so, sx, sl, ignoreIndex);
}

void loomrt_cross_entropy_grad_bf16(loomrt_ctx *c, loomrt_buf *o,
                                    loomrt_buf *x, loomrt_buf *labels,
                                    loomrt_buf *g, int64_t so, int64_t sx,
                                    int64_t sl, int64_t sg,
                                    int64_t ignoreIndex) {
  Widened w(c);
  loomrt_cross_entropy_grad(c, w.out(o, so), w.in(x, sx), labels, g, so, sx,
                            sl, sg, ignoreIndex);
}

// The statistics (max, sum, target) are f32: they are reduced over the
// vocabulary's ranks before the loss is taken (cross_entropy_from_stats has
// no bf16 tensor).
void loomrt_cross_entropy_stats_bf16(loomrt_ctx *c, loomrt_buf *sum,
                                     loomrt_buf *target, loomrt_buf *x,
                                     loomrt_buf *labels, loomrt_buf *max,
                                     int64_t ssum, int64_t starget, int64_t sx,
                                     int64_t sl, int64_t smax,
                                     int64_t ignoreIndex, int64_t vocabGroup,
                                     int64_t vocabSize) {
  Widened w(c);
  loomrt_cross_entropy_stats(c, sum, target, w.in(x, sx), labels, max, ssum,
                             starget, sx, sl, smax, ignoreIndex, vocabGroup,
                             vocabSize);
}

void loomrt_cross_entropy_grad_from_stats_bf16(
    loomrt_ctx *c, loomrt_buf *o, loomrt_buf *x, loomrt_buf *labels,
    loomrt_buf *g, loomrt_buf *max, loomrt_buf *sum, int64_t so, int64_t sx,
    int64_t sl, int64_t sg, int64_t smax, int64_t ssum, int64_t ignoreIndex,
    int64_t vocabGroup) {
  Widened w(c);
  loomrt_cross_entropy_grad_from_stats(c, w.out(o, so), w.in(x, sx), labels, g,
                                       max, sum, so, sx, sl, sg, smax, ssum,
                                       ignoreIndex, vocabGroup);
}

void loomrt_dropout_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                         int64_t stream, int64_t so, int64_t si,
                         int64_t globalShape, double rate, int64_t seed,
                         int64_t shardGroups) {
  Widened w(c);
  loomrt_dropout(c, w.out(o, so), w.in(i, si), stream, so, si, globalShape,
                 rate, seed, shardGroups);
}

void loomrt_transpose_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                           int64_t so, int64_t si, int64_t permutation) {
  Widened w(c);
  loomrt_transpose(c, w.out(o, so), w.in(i, si), so, si, permutation);
}

void loomrt_slice_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i,
                       int64_t so, int64_t si, int64_t offsets,
                       int64_t sizes) {
  Widened w(c);
  loomrt_slice(c, w.out(o, so), w.in(i, si), so, si, offsets, sizes);
}

void loomrt_pad_bf16(loomrt_ctx *c, loomrt_buf *o, loomrt_buf *i, int64_t so,
                     int64_t si, int64_t high, int64_t low) {
  Widened w(c);
  loomrt_pad(c, w.out(o, so), w.in(i, si), so, si, high, low);
}

} // extern "C"
