//===- Pipeline.cpp - buffered sends and the rank's pipeline actions ------===//
//
// A pipeline stage's send must not wait for its receiver: under 1F1B a
// rank sends an activation forward while its successor sends a gradient
// back. loomrt_comm_post copies the tensor into runtime memory and sends
// it in the background; loomrt_comm_drain, at the end of a step, waits for
// every posted send and frees the copies. The program's schedule is its
// own (a table of each pipeline rank's actions that the code generator
// emits from the rank program's `dist.schedule`); the runtime names each
// action's span in the trace.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <string>

using namespace loomrt;

extern "C" {

void loomrt_comm_post(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t peer) {
  int64_t bytes = count * elementBytes(dtype);
  char *copy = allocate(ctx, bytes);
  auto *buf = reinterpret_cast<loomrt_buf *>(copy);
  loomrt_copy(ctx, buf, data, bytes);
  ctx->posted.push_back(
      {loomrt_comm_send_async(ctx, group, buf, count, dtype, peer), copy,
       bytes});
}

void loomrt_comm_drain(loomrt_ctx *ctx) {
  for (auto &[event, copy, bytes] : ctx->posted) {
    loomrt_comm_wait(ctx, event);
    release(ctx, copy, bytes);
  }
  ctx->posted.clear();
}

void loomrt_pipeline_trace(loomrt_ctx *ctx, int64_t kind, int64_t stage,
                           int64_t microBatch, int32_t begin) {
  if (ctx->tracePath.empty())
    return;
  if (kind < 0 || kind > 3)
    fail("loomrt_pipeline_trace: action kind " + std::to_string(kind) +
         " is none of forward (0), backward (1), input (2) or weight (3)");
  std::string name =
      std::to_string(stage) + "FBIW"[kind] + std::to_string(microBatch);
  loomrt_trace_span(ctx, name.c_str(), begin);
}

} // extern "C"
