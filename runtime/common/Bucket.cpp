//===- Bucket.cpp - several buffers all-reduced as one collective ---------===//
//
// Backend-independent: packing and unpacking are the backend's own
// stream-ordered copies, the reduction its asynchronous all-reduce.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <vector>

struct loomrt_comm_bucket {
  std::vector<std::pair<loomrt_buf *, int64_t>> members;
  int64_t count = 0;
  char *staging = nullptr;
  loomrt_comm_event *event = nullptr;
};

using namespace loomrt;

loomrt_comm_bucket *loomrt_comm_bucket_create(loomrt_ctx *) {
  return new loomrt_comm_bucket();
}

void loomrt_comm_bucket_add(loomrt_ctx *, loomrt_comm_bucket *bucket,
                            loomrt_buf *data, int64_t count) {
  if (bucket->event)
    fail("loomrt_comm_bucket_add: the bucket's reduction has started");
  bucket->members.push_back({data, count});
  bucket->count += count;
}

void loomrt_comm_bucket_all_reduce_async(loomrt_ctx *ctx,
                                         loomrt_comm_bucket *bucket,
                                         uint32_t group, int32_t dtype) {
  if (dtype != LOOMRT_F32)
    fail("loomrt_comm_bucket_all_reduce_async: f32 buckets only");
  bucket->staging = allocate(ctx, bucket->count * 4);
  auto *staging = reinterpret_cast<loomrt_buf *>(bucket->staging);
  int64_t offset = 0;
  for (auto [data, count] : bucket->members) {
    loomrt_copy(ctx, loomrt_view(ctx, staging, offset), data, count * 4);
    offset += count * 4;
  }
  bucket->event = loomrt_comm_all_reduce_async(ctx, group, staging,
                                               bucket->count, dtype, 0);
}

void loomrt_comm_bucket_wait(loomrt_ctx *ctx, loomrt_comm_bucket *bucket) {
  if (!bucket->event)
    fail("loomrt_comm_bucket_wait: the bucket's reduction did not start");
  loomrt_comm_wait(ctx, bucket->event);
  auto *staging = reinterpret_cast<loomrt_buf *>(bucket->staging);
  int64_t offset = 0;
  for (auto [data, count] : bucket->members) {
    loomrt_copy(ctx, data, loomrt_view(ctx, staging, offset), count * 4);
    offset += count * 4;
  }
  release(ctx, bucket->staging, bucket->count * 4);
  delete bucket;
}
