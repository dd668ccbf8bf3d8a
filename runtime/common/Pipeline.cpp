//===- Pipeline.cpp - buffered sends and the rank's pipeline actions ------===//
//
// A pipeline stage's send must not wait for its receiver: under 1F1B a
// rank sends an activation forward while its successor sends a gradient
// back. loomrt_comm_post copies the tensor into runtime memory and sends
// it in the background; loomrt_comm_drain, at the end of a step, waits for
// every posted send and frees the copies. The program's schedule (the CSV
// of loomc --schedule, one row of actions per pipeline rank) tells each
// rank which stage's forward or backward of which micro-batch to run next.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <sstream>

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

void loomrt_pipeline_schedule(loomrt_ctx *ctx, int32_t axis, const char *csv) {
  int64_t coordinate = loomrt_mesh_coord(ctx, axis);
  std::istringstream rows(csv);
  std::string row;
  for (int64_t r = 0; std::getline(rows, row); ++r) {
    if (r != coordinate)
      continue;
    ctx->actions.clear();
    std::istringstream cells(row);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      size_t at = cell.find_first_of("FBIW");
      if (at == 0 || at == std::string::npos || at + 1 >= cell.size())
        fail("loomrt_pipeline_schedule: '" + cell +
             "' is not an action (stage, F, B, I or W, micro-batch)");
      int32_t kind = std::string("FBIW").find(cell[at]);
      // An optional ".slot": where the micro-batch's saved values live.
      size_t dot = cell.find('.', at);
      int64_t microBatch = std::stoll(cell.substr(at + 1, dot - at - 1));
      int64_t slot = dot == std::string::npos ? microBatch
                                              : std::stoll(cell.substr(dot + 1));
      ctx->actions.push_back(
          {kind, std::stoll(cell.substr(0, at)), microBatch, slot});
    }
    return;
  }
  fail("loomrt_pipeline_schedule: the schedule has no row for pipeline rank " +
       std::to_string(coordinate));
}

int64_t loomrt_pipeline_length(loomrt_ctx *ctx) {
  return int64_t(ctx->actions.size());
}

int32_t loomrt_pipeline_kind(loomrt_ctx *ctx, int64_t k) {
  return ctx->actions.at(size_t(k)).kind;
}

int64_t loomrt_pipeline_stage(loomrt_ctx *ctx, int64_t k) {
  return ctx->actions.at(size_t(k)).stage;
}

int64_t loomrt_pipeline_micro_batch(loomrt_ctx *ctx, int64_t k) {
  return ctx->actions.at(size_t(k)).microBatch;
}

int64_t loomrt_pipeline_slot(loomrt_ctx *ctx, int64_t k) {
  return ctx->actions.at(size_t(k)).slot;
}

void loomrt_pipeline_trace(loomrt_ctx *ctx, int64_t k, int32_t begin) {
  if (ctx->tracePath.empty())
    return;
  const auto &a = ctx->actions.at(size_t(k));
  std::string name = std::to_string(a.stage) + "FBIW"[a.kind] +
                     std::to_string(a.microBatch);
  loomrt_trace_span(ctx, name.c_str(), begin);
}

} // extern "C"
