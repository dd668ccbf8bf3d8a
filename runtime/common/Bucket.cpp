//===- Bucket.cpp - several buffers all-reduced as one collective ---------===//
//
// Backend-independent: the backend packs, reduces and unpacks on its
// communication stream (backend::bucketAllReduce). And lists of events
// waited together (a loop's deferred reductions).
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <vector>

struct loomrt_comm_bucket {
  std::vector<std::pair<loomrt_buf *, int64_t>> members;
  int64_t count = 0;
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
  if (dtype != LOOMRT_F32 && dtype != LOOMRT_BF16)
    fail("loomrt_comm_bucket_all_reduce_async: f32 and bf16 buckets only");
  bucket->event = backend::bucketAllReduce(ctx, group, bucket->members,
                                           bucket->count, dtype);
}

void loomrt_comm_bucket_wait(loomrt_ctx *ctx, loomrt_comm_bucket *bucket) {
  if (!bucket->event)
    fail("loomrt_comm_bucket_wait: the bucket's reduction did not start");
  loomrt_comm_wait(ctx, bucket->event);
  delete bucket;
}

struct loomrt_comm_list {
  /// An event, or a bucket (whose wait frees it), in the order added.
  std::vector<std::pair<loomrt_comm_event *, loomrt_comm_bucket *>> waits;
};

loomrt_comm_list *loomrt_comm_list_create(loomrt_ctx *) {
  return new loomrt_comm_list();
}

void loomrt_comm_list_add(loomrt_ctx *, loomrt_comm_list *list,
                          loomrt_comm_event *event) {
  list->waits.push_back({event, nullptr});
}

void loomrt_comm_list_add_bucket(loomrt_ctx *, loomrt_comm_list *list,
                                 loomrt_comm_bucket *bucket) {
  list->waits.push_back({nullptr, bucket});
}

void loomrt_comm_list_wait(loomrt_ctx *ctx, loomrt_comm_list *list) {
  for (auto [event, bucket] : list->waits) {
    if (bucket)
      loomrt_comm_bucket_wait(ctx, bucket);
    else
      loomrt_comm_wait(ctx, event);
  }
  delete list;
}
