//===- Memory.cpp - host backend: buffers, copies and the device hooks ----===//
//
// On the host backend a buffer is host memory (64-byte aligned), so the
// generated code's buffer arithmetic is pointer arithmetic and uploads and
// downloads are copies.
//
//===----------------------------------------------------------------------===//

#include "Bf16.h"
#include "Internal.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace loomrt;

char *loomrt::allocate(loomrt_ctx *ctx, int64_t bytes) {
  size_t rounded = size_t((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  char *ptr = static_cast<char *>(std::aligned_alloc(64, rounded));
  if (!ptr)
    fail("out of memory allocating " + std::to_string(bytes) + " bytes");
  trackBytes(ctx, bytes);
  return ptr;
}

void loomrt::release(loomrt_ctx *ctx, char *ptr, int64_t bytes) {
  std::free(ptr);
  trackBytes(ctx, -bytes);
}

/// OpenBLAS picks its kernels from the CPU model name, and under some
/// hypervisors (a generic "Intel Xeon Processor") it falls back to the
/// Prescott kernels, several times slower. When it did and the CPU has AVX2
/// or AVX-512, run again with the core type named; OPENBLAS_CORETYPE set by
/// the user is kept.
void loomrt::selectBlasKernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE") ||
      std::strcmp(openblas_get_corename(), "Prescott") != 0)
    return;
  const char *core = __builtin_cpu_supports("avx512f")  ? "SkylakeX"
                     : __builtin_cpu_supports("avx2") ? "Haswell"
                                                      : nullptr;
  if (!core)
    return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);
}

const char *loomrt::backend::name() { return "host"; }

void loomrt::backend::prepareProcess(char **argv) { selectBlasKernels(argv); }

void loomrt::backend::upload(loomrt_ctx *, char *dst, const void *src,
                             int64_t bytes) {
  std::memcpy(dst, src, size_t(bytes));
}

void loomrt::backend::download(loomrt_ctx *, void *dst, const char *src,
                               int64_t bytes) {
  std::memcpy(dst, src, size_t(bytes));
}

std::string loomrt::backend::describe(loomrt_ctx *) { return ""; }

extern "C" {

void loomrt_copy(loomrt_ctx *, loomrt_buf *dst, loomrt_buf *src,
                 int64_t bytes) {
  if (dst != src)
    std::memmove(dst, src, size_t(bytes));
}

void loomrt_fill(loomrt_ctx *ctx, loomrt_buf *dst, int64_t shape,
                 double value) {
  float *y = reinterpret_cast<float *>(dst);
  std::fill(y, y + shapeOf(ctx, shape).numel(), float(value));
}

void loomrt_fill_bf16(loomrt_ctx *ctx, loomrt_buf *dst, int64_t shape,
                      double value) {
  uint16_t *y = reinterpret_cast<uint16_t *>(dst);
  std::fill(y, y + shapeOf(ctx, shape).numel(), floatToBf16(float(value)));
}

void loomrt_sync(loomrt_ctx *) {}

} // extern "C"
