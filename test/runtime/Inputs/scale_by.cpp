// The host kernel of the test dialect plugin's `loomtest.scale_by`
// (test/codegen/kernel-plugin/TestKernelOps.td), linked into a program with
// loomc --kernels. Its signature is the rule of loomrt.h: the context, the
// result and the operand, their shape ids, the attribute `factor`. It is a
// C++ function (the generated program declares it so), so a signature
// that does not match fails at link time.
#include "loomrt/loomrt.h"

#include <vector>

void loomrt_scale_by(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in,
                     int64_t outShape, int64_t inShape, double factor) {
  const int64_t *dims = nullptr;
  int64_t rank = loomrt_shape(ctx, inShape, &dims);
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= dims[d];
  std::vector<float> values(static_cast<size_t>(n));
  loomrt_download(ctx, values.data(), in, n * int64_t(sizeof(float)));
  for (float &v : values)
    v = float(v * factor);
  loomrt_upload(ctx, out, values.data(), n * int64_t(sizeof(float)));
}
