//===- Comm.cpp - cuda backend: collectives over NCCL ----------------------===//
//
// A world communicator bootstrapped by broadcasting rank 0's unique id over
// MPI (as nccl-tests does), split into one communicator per group of mesh
// axes at start-up. Communicators are non-blocking, so no NCCL call can hang
// the host: every wait polls with the context's timeout and, past it or on
// an NCCL error, aborts the communicators and the job naming this rank.
// Collectives run on the communication stream: it waits for the compute
// work issued before the collective, and the compute stream waits for the
// collective where the program waits for it (loomrt_comm_wait, or at once
// for the blocking forms), so communication overlaps the compute between.
// Point-to-point transfers (a pipeline's sends and receives) do the same on
// a stream and communicators of their own: queued behind a collective, a
// receive whose send comes after that collective on the peer would hold
// the collective back, and on one stream the collective would wait for the
// receive.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace loomrt;
using namespace loomrt::cuda;

struct loomrt_comm_event {
  cudaEvent_t done;
};

namespace {

/// Waits until a non-blocking communicator has finished its last call.
void waitReady(loomrt_ctx *ctx, ncclComm_t comm, const std::string &what) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(ctx->timeoutSeconds);
  for (int spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t status = ncclCommGetAsyncError(comm, &state);
    if (status != ncclSuccess)
      state = status;
    if (state == ncclSuccess)
      return;
    if (state != ncclInProgress) {
      std::fprintf(stderr, "loomrt: error: rank %d %s: %s failed: %s\n",
                   ctx->rank, coordsOf(ctx, ctx->rank).c_str(), what.c_str(),
                   ncclGetErrorString(state));
      abortJob(ctx);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "loomrt: error: rank %d %s: timed out after %g s in %s; a "
                   "peer failed or stalls\n",
                   ctx->rank, coordsOf(ctx, ctx->rank).c_str(),
                   ctx->timeoutSeconds, what.c_str());
      abortJob(ctx);
    }
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// Checks an NCCL call of a non-blocking communicator: in progress is fine
/// (waitReady follows), anything else fails naming the call.
#define LOOMRT_NCCL(call, comm, what)                                          \
  do {                                                                         \
    ncclResult_t loomrtStatus = (call);                                        \
    if (loomrtStatus != ncclSuccess && loomrtStatus != ncclInProgress)         \
      ::loomrt::cuda::failCall(#call, ncclGetErrorString(loomrtStatus),        \
                               __FILE__, __LINE__);                            \
    waitReady(ctx, comm, what);                                                \
  } while (0)

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case LOOMRT_F32:
    return ncclFloat32;
  case LOOMRT_BF16:
    return ncclBfloat16;
  case LOOMRT_I32:
    return ncclInt32;
  default:
    return ncclInt64;
  }
}

/// Chunk i of `n` elements split `parts` ways, as the ring splits it.
int64_t chunkSize(int64_t n, int64_t parts, int64_t i) {
  return n / parts + (i < n % parts);
}

struct Collective {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1;
};

Collective collectiveOf(loomrt_ctx *ctx, uint32_t mask,
                        bool pointToPoint = false) {
  GroupMembers members = groupMembers(ctx, mask);
  Collective c;
  c.rank = members.rank;
  c.size = int(members.worldRanks.size());
  if (c.size > 1) {
    Device &d = deviceOf(ctx);
    auto own = d.p2pComms.find(mask);
    c.comm = pointToPoint && own != d.p2pComms.end() ? own->second
                                                      : d.comms.at(mask);
  }
  return c;
}

/// Issues `enqueue(comm, stream)` on the communication stream (or the
/// point-to-point stream) after the compute work so far; returns the event
/// of its completion.
template <typename Fn>
cudaEvent_t issue(loomrt_ctx *ctx, const Collective &c, const char *kind,
                  uint32_t mask, int64_t bytes, Fn enqueue,
                  bool pointToPoint = false) {
  Device &d = deviceOf(ctx);
  cudaStream_t stream = pointToPoint && d.p2p ? d.p2p : d.comm;
  TraceSpan span(ctx, std::string(kind) + " " + groupName(ctx, mask),
                 "communication", 1, bytes);
  cudaEvent_t ready = takeEvent(d);
  LOOMRT_CUDA(cudaEventRecord(ready, d.compute));
  LOOMRT_CUDA(cudaStreamWaitEvent(stream, ready, 0));
  giveEvent(d, ready); // the wait has captured it
  std::string what = std::string(kind) + " over " + groupName(ctx, mask) +
                     " (" + std::to_string(bytes) + " bytes)";
  if (c.comm)
    enqueue(c.comm, stream, what);
  cudaEvent_t done = takeEvent(d), pendingDone = takeEvent(d);
  LOOMRT_CUDA(cudaEventRecord(done, stream));
  LOOMRT_CUDA(cudaEventRecord(pendingDone, stream));
  d.pending.push_back({what, pendingDone});
  return done;
}

loomrt_comm_event *asEvent(cudaEvent_t done) {
  return new loomrt_comm_event{done};
}

void waitNow(loomrt_ctx *ctx, cudaEvent_t done) {
  Device &d = deviceOf(ctx);
  LOOMRT_CUDA(cudaStreamWaitEvent(d.compute, done, 0));
  giveEvent(d, done);
}

void checkReduction(int32_t dtype, const char *op) {
  if (dtype != LOOMRT_F32 && dtype != LOOMRT_BF16)
    fail(std::string(op) + ": only f32 and bf16 reductions are supported");
}

/// Counts what this rank sends in a ring all-reduce of `count` elements of
/// `size` bytes.
void countAllReduce(loomrt_ctx *ctx, const Collective &c, uint32_t mask,
                    int64_t count, int64_t size) {
  int64_t sent = 0;
  for (int s = 0; s < c.size - 1; ++s)
    sent += chunkSize(count, c.size, (c.rank - s + c.size) % c.size) +
            chunkSize(count, c.size, (c.rank + 1 - s + c.size) % c.size);
  countBytes(ctx, LOOMRT_ALL_REDUCE, mask, c.size > 1 ? sent * size : 0);
}

cudaEvent_t allReduce(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t op) {
  checkReduction(dtype, "all_reduce");
  Collective c = collectiveOf(ctx, mask);
  int64_t size = elementBytes(dtype);
  countAllReduce(ctx, c, mask, count, size);
  return issue(ctx, c, "all_reduce", mask, count * size,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 LOOMRT_NCCL(ncclAllReduce(data, data, size_t(count),
                                           ncclType(dtype),
                                           op == LOOMRT_MAX ? ncclMax : ncclSum,
                                           comm, s),
                             comm, what);
               });
}

cudaEvent_t reduceScatter(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *out,
                          loomrt_buf *in, int64_t count, int32_t dtype,
                          int32_t op) {
  checkReduction(dtype, "reduce_scatter");
  Collective c = collectiveOf(ctx, mask);
  int64_t size = elementBytes(dtype);
  countBytes(ctx, LOOMRT_REDUCE_SCATTER, mask,
             int64_t(c.size - 1) * count * size);
  if (!c.comm)
    loomrt_copy(ctx, out, in, count * size);
  return issue(ctx, c, "reduce_scatter", mask, count * size,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 LOOMRT_NCCL(ncclReduceScatter(
                                 in, out, size_t(count), ncclType(dtype),
                                 op == LOOMRT_MAX ? ncclMax : ncclSum, comm, s),
                             comm, what);
               });
}

cudaEvent_t allGather(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *out,
                      loomrt_buf *in, int64_t count, int32_t dtype) {
  Collective c = collectiveOf(ctx, mask);
  int64_t block = count * elementBytes(dtype);
  countBytes(ctx, LOOMRT_ALL_GATHER, mask, int64_t(c.size - 1) * block);
  if (!c.comm)
    loomrt_copy(ctx, out, in, block);
  return issue(ctx, c, "all_gather", mask, block,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 LOOMRT_NCCL(ncclAllGather(in, out, size_t(count),
                                           ncclType(dtype), comm, s),
                             comm, what);
               });
}

/// Along an inner dimension (`rows` rows per rank's block, placed side by
/// side in `out`): NCCL gathers the blocks one after another into scratch
/// on the communication stream, and strided copies place their rows.
cudaEvent_t allGatherRows(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *out,
                          loomrt_buf *in, int64_t rows, int64_t count,
                          int32_t dtype) {
  Collective c = collectiveOf(ctx, mask);
  int64_t block = count * elementBytes(dtype);
  countBytes(ctx, LOOMRT_ALL_GATHER, mask, int64_t(c.size - 1) * block);
  if (!c.comm)
    loomrt_copy(ctx, out, in, block);
  return issue(ctx, c, "all_gather", mask, block,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 void *scratch = nullptr;
                 LOOMRT_CUDA(cudaMallocAsync(&scratch, size_t(block * c.size), s));
                 LOOMRT_NCCL(ncclAllGather(in, scratch, size_t(count),
                                           ncclType(dtype), comm, s),
                             comm, what);
                 size_t piece = size_t(block / rows);
                 for (int r = 0; r < c.size; ++r)
                   LOOMRT_CUDA(cudaMemcpy2DAsync(
                       static_cast<char *>(static_cast<void *>(out)) + r * piece,
                       piece * size_t(c.size),
                       static_cast<char *>(scratch) + r * block, piece, piece,
                       size_t(rows), cudaMemcpyDeviceToDevice, s));
                 LOOMRT_CUDA(cudaFreeAsync(scratch, s));
               });
}

/// The reduce-scatter along an inner dimension: strided copies pack each
/// rank's rows into scratch, one block after another, for NCCL.
cudaEvent_t reduceScatterRows(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *out,
                              loomrt_buf *in, int64_t rows, int64_t count,
                              int32_t dtype, int32_t op) {
  checkReduction(dtype, "reduce_scatter");
  Collective c = collectiveOf(ctx, mask);
  int64_t size = elementBytes(dtype);
  countBytes(ctx, LOOMRT_REDUCE_SCATTER, mask,
             int64_t(c.size - 1) * count * size);
  if (!c.comm)
    loomrt_copy(ctx, out, in, count * size);
  return issue(ctx, c, "reduce_scatter", mask, count * size,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 void *scratch = nullptr;
                 size_t block = size_t(count * size), piece = block / size_t(rows);
                 LOOMRT_CUDA(cudaMallocAsync(&scratch, block * size_t(c.size), s));
                 for (int r = 0; r < c.size; ++r)
                   LOOMRT_CUDA(cudaMemcpy2DAsync(
                       static_cast<char *>(scratch) + r * block, piece,
                       static_cast<const char *>(static_cast<const void *>(in)) +
                           r * piece,
                       piece * size_t(c.size), piece, size_t(rows),
                       cudaMemcpyDeviceToDevice, s));
                 LOOMRT_NCCL(ncclReduceScatter(
                                 scratch, out, size_t(count), ncclType(dtype),
                                 op == LOOMRT_MAX ? ncclMax : ncclSum, comm, s),
                             comm, what);
                 LOOMRT_CUDA(cudaFreeAsync(scratch, s));
               });
}

cudaEvent_t allToAll(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *out,
                     loomrt_buf *in, int64_t count, int32_t dtype) {
  Collective c = collectiveOf(ctx, mask);
  int64_t block = count * elementBytes(dtype);
  countBytes(ctx, LOOMRT_ALL_TO_ALL, mask, int64_t(c.size - 1) * block);
  if (!c.comm)
    loomrt_copy(ctx, out, in, block);
  return issue(
      ctx, c, "all_to_all", mask, block * c.size,
      [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
        const char *i = reinterpret_cast<const char *>(in);
        char *o = reinterpret_cast<char *>(out);
        LOOMRT_NCCL(ncclGroupStart(), comm, what);
        for (int r = 0; r < c.size; ++r) {
          ncclSend(i + r * block, size_t(count), ncclType(dtype), r, comm, s);
          ncclRecv(o + r * block, size_t(count), ncclType(dtype), r, comm, s);
        }
        LOOMRT_NCCL(ncclGroupEnd(), comm, what);
      });
}

cudaEvent_t broadcast(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t root) {
  Collective c = collectiveOf(ctx, mask);
  int64_t bytes = count * elementBytes(dtype);
  int position = (c.rank - root + c.size) % c.size;
  countBytes(ctx, LOOMRT_BROADCAST, mask,
             c.size > 1 && position != c.size - 1 ? bytes : 0);
  return issue(ctx, c, "broadcast", mask, bytes,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 LOOMRT_NCCL(ncclBroadcast(data, data, size_t(count),
                                           ncclType(dtype), root, comm, s),
                             comm, what);
               });
}

cudaEvent_t pointToPoint(loomrt_ctx *ctx, uint32_t mask, loomrt_buf *data,
                         int64_t count, int32_t dtype, int32_t peer,
                         bool send) {
  Collective c = collectiveOf(ctx, mask, /*pointToPoint=*/true);
  if (peer < 0 || peer >= c.size || peer == c.rank)
    fail(std::string(send ? "send" : "recv") + ": peer " +
         std::to_string(peer) + " is not another rank of the " +
         groupName(ctx, mask) + " group of size " + std::to_string(c.size));
  int64_t bytes = count * elementBytes(dtype);
  if (send)
    countBytes(ctx, LOOMRT_SEND, mask, bytes);
  return issue(ctx, c, send ? "send" : "recv", mask, bytes,
               [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
                 if (send)
                   LOOMRT_NCCL(ncclSend(data, size_t(count), ncclType(dtype),
                                        peer, comm, s),
                               comm, what);
                 else
                   LOOMRT_NCCL(ncclRecv(data, size_t(count), ncclType(dtype),
                                        peer, comm, s),
                               comm, what);
               },
               /*pointToPoint=*/true);
}

} // namespace

void loomrt::cuda::startCommunicators(loomrt_ctx *ctx) {
  if (ctx->world == 1)
    return;
  Device &d = deviceOf(ctx);
  ncclUniqueId id;
  if (ctx->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    fail("ncclGetUniqueId failed on rank 0");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t world = nullptr;
  LOOMRT_NCCL(ncclCommInitRankConfig(&world, ctx->world, id, ctx->rank,
                                     &config),
              world, "ncclCommInitRankConfig");
  uint32_t all = (1u << ctx->meshSizes.size()) - 1;
  // Every rank splits for every group, in the same order: a split is
  // collective over the world.
  for (uint32_t mask = 1; mask <= all; ++mask) {
    GroupMembers members = groupMembers(ctx, mask);
    if (members.worldRanks.size() == size_t(ctx->world)) {
      d.comms[mask] = world;
      continue;
    }
    ncclComm_t comm = nullptr;
    ncclConfig_t splitConfig = NCCL_CONFIG_INITIALIZER;
    splitConfig.blocking = 0;
    // The group's first world rank names it; its members are ordered by
    // group rank.
    ncclResult_t status = ncclCommSplit(world, members.worldRanks.front(),
                                        members.rank, &comm, &splitConfig);
    if (status != ncclSuccess && status != ncclInProgress)
      failCall("ncclCommSplit", ncclGetErrorString(status), __FILE__,
               __LINE__);
    waitReady(ctx, world, "ncclCommSplit for " + groupName(ctx, mask));
    waitReady(ctx, comm, "ncclCommSplit for " + groupName(ctx, mask));
    d.comms[mask] = comm;
  }
  if (!d.comms.count(all))
    d.comms[all] = world;
  // A second communicator per axis for point-to-point transfers (NCCL runs
  // one communicator's operations in order): split the same way, with a
  // color past the collectives' (the world's ranks are below it).
  for (uint32_t mask = 1; mask <= all; mask <<= 1) {
    GroupMembers members = groupMembers(ctx, mask);
    if (members.worldRanks.size() < 2)
      continue;
    ncclComm_t comm = nullptr;
    ncclConfig_t splitConfig = NCCL_CONFIG_INITIALIZER;
    splitConfig.blocking = 0;
    ncclResult_t status =
        ncclCommSplit(world, ctx->world + members.worldRanks.front(),
                      members.rank, &comm, &splitConfig);
    if (status != ncclSuccess && status != ncclInProgress)
      failCall("ncclCommSplit", ncclGetErrorString(status), __FILE__,
               __LINE__);
    waitReady(ctx, world, "ncclCommSplit for transfers over " +
                              groupName(ctx, mask));
    waitReady(ctx, comm, "ncclCommSplit for transfers over " +
                             groupName(ctx, mask));
    d.p2pComms[mask] = comm;
  }
}

void loomrt::cuda::stopCommunicators(loomrt_ctx *ctx) {
  Device &d = deviceOf(ctx);
  std::vector<ncclComm_t> done;
  for (auto &[mask, comm] : d.comms) {
    if (std::find(done.begin(), done.end(), comm) != done.end())
      continue;
    done.push_back(comm);
    ncclCommFinalize(comm);
    waitReady(ctx, comm, "ncclCommFinalize");
    ncclCommDestroy(comm);
  }
  d.comms.clear();
  for (auto &[mask, comm] : d.p2pComms) {
    ncclCommFinalize(comm);
    waitReady(ctx, comm, "ncclCommFinalize");
    ncclCommDestroy(comm);
  }
  d.p2pComms.clear();
}

extern "C" {

void loomrt_comm_wait(loomrt_ctx *ctx, loomrt_comm_event *event) {
  if (!event)
    return;
  waitNow(ctx, event->done);
  delete event;
}

loomrt_comm_event *loomrt_comm_all_reduce_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *data, int64_t count,
                                                int32_t dtype, int32_t op) {
  return asEvent(allReduce(ctx, group, data, count, dtype, op));
}
loomrt_comm_event *loomrt_comm_reduce_scatter_async(
    loomrt_ctx *ctx, uint32_t group, loomrt_buf *out, loomrt_buf *in,
    int64_t countPerRank, int32_t dtype, int32_t op) {
  return asEvent(reduceScatter(ctx, group, out, in, countPerRank, dtype, op));
}
loomrt_comm_event *loomrt_comm_all_gather_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *out, loomrt_buf *in,
                                                int64_t countPerRank,
                                                int32_t dtype) {
  return asEvent(allGather(ctx, group, out, in, countPerRank, dtype));
}
loomrt_comm_event *
loomrt_comm_all_gather_rows_async(loomrt_ctx *ctx, uint32_t group,
                                  loomrt_buf *out, loomrt_buf *in, int64_t rows,
                                  int64_t countPerRank, int32_t dtype) {
  return asEvent(allGatherRows(ctx, group, out, in, rows, countPerRank, dtype));
}
loomrt_comm_event *loomrt_comm_all_to_all_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *out, loomrt_buf *in,
                                                int64_t countPerRank,
                                                int32_t dtype) {
  return asEvent(allToAll(ctx, group, out, in, countPerRank, dtype));
}
loomrt_comm_event *loomrt_comm_broadcast_async(loomrt_ctx *ctx, uint32_t group,
                                               loomrt_buf *data, int64_t count,
                                               int32_t dtype, int32_t root) {
  return asEvent(broadcast(ctx, group, data, count, dtype, root));
}
loomrt_comm_event *loomrt_comm_send_async(loomrt_ctx *ctx, uint32_t group,
                                          loomrt_buf *data, int64_t count,
                                          int32_t dtype, int32_t peer) {
  return asEvent(pointToPoint(ctx, group, data, count, dtype, peer, true));
}
loomrt_comm_event *loomrt_comm_recv_async(loomrt_ctx *ctx, uint32_t group,
                                          loomrt_buf *data, int64_t count,
                                          int32_t dtype, int32_t peer) {
  return asEvent(pointToPoint(ctx, group, data, count, dtype, peer, false));
}

void loomrt_comm_all_reduce(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                            int64_t count, int32_t dtype, int32_t op) {
  waitNow(ctx, allReduce(ctx, group, data, count, dtype, op));
}
void loomrt_comm_reduce_scatter(loomrt_ctx *ctx, uint32_t group,
                                loomrt_buf *out, loomrt_buf *in,
                                int64_t countPerRank, int32_t dtype,
                                int32_t op) {
  waitNow(ctx, reduceScatter(ctx, group, out, in, countPerRank, dtype, op));
}
void loomrt_comm_all_gather(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                            loomrt_buf *in, int64_t countPerRank,
                            int32_t dtype) {
  waitNow(ctx, allGather(ctx, group, out, in, countPerRank, dtype));
}
void loomrt_comm_all_gather_rows(loomrt_ctx *ctx, uint32_t group,
                                 loomrt_buf *out, loomrt_buf *in,
                                 int64_t rows, int64_t countPerRank,
                                 int32_t dtype) {
  waitNow(ctx, allGatherRows(ctx, group, out, in, rows, countPerRank, dtype));
}
void loomrt_comm_reduce_scatter_rows(loomrt_ctx *ctx, uint32_t group,
                                     loomrt_buf *out, loomrt_buf *in,
                                     int64_t rows, int64_t countPerRank,
                                     int32_t dtype, int32_t op) {
  waitNow(ctx, reduceScatterRows(ctx, group, out, in, rows, countPerRank,
                                 dtype, op));
}
void loomrt_comm_all_to_all(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                            loomrt_buf *in, int64_t countPerRank,
                            int32_t dtype) {
  waitNow(ctx, allToAll(ctx, group, out, in, countPerRank, dtype));
}
void loomrt_comm_broadcast(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                           int64_t count, int32_t dtype, int32_t root) {
  waitNow(ctx, broadcast(ctx, group, data, count, dtype, root));
}
void loomrt_comm_send(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t peer) {
  waitNow(ctx, pointToPoint(ctx, group, data, count, dtype, peer, true));
}
void loomrt_comm_recv(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t peer) {
  waitNow(ctx, pointToPoint(ctx, group, data, count, dtype, peer, false));
}
void loomrt_comm_barrier(loomrt_ctx *ctx, uint32_t group) {
  // A one-element all-reduce on a scratch word (no bytes counted, as on the
  // host backend), then a bounded host wait.
  Collective c = collectiveOf(ctx, group);
  Scratch word(ctx, 4);
  float *x = word.as<float>();
  LOOMRT_CUDA(cudaMemsetAsync(x, 0, 4, computeStream(ctx)));
  waitNow(ctx, issue(ctx, c, "barrier", group, 0,
                     [&](ncclComm_t comm, cudaStream_t s,
                         const std::string &what) {
                       LOOMRT_NCCL(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum,
                                                 comm, s),
                                   comm, what);
                     }));
  synchronize(ctx);
}

} // extern "C"

loomrt_comm_event *loomrt::backend::bucketAllReduce(
    loomrt_ctx *ctx, uint32_t group,
    const std::vector<std::pair<loomrt_buf *, int64_t>> &members,
    int64_t count, int32_t dtype) {
  Collective c = collectiveOf(ctx, group);
  size_t size = size_t(elementBytes(dtype));
  countAllReduce(ctx, c, group, count, int64_t(size));
  return asEvent(issue(
      ctx, c, "all_reduce", group, count * int64_t(size),
      [&](ncclComm_t comm, cudaStream_t s, const std::string &what) {
        char *staging = nullptr;
        LOOMRT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&staging),
                                    size_t(count) * size, s));
        size_t offset = 0;
        for (auto [data, n] : members) {
          LOOMRT_CUDA(cudaMemcpyAsync(staging + offset, data, size_t(n) * size,
                                      cudaMemcpyDeviceToDevice, s));
          offset += size_t(n) * size;
        }
        LOOMRT_NCCL(ncclAllReduce(staging, staging, size_t(count),
                                  ncclType(dtype), ncclSum, comm, s),
                    comm, what);
        offset = 0;
        for (auto [data, n] : members) {
          LOOMRT_CUDA(cudaMemcpyAsync(data, staging + offset, size_t(n) * size,
                                      cudaMemcpyDeviceToDevice, s));
          offset += size_t(n) * size;
        }
        LOOMRT_CUDA(cudaFreeAsync(staging, s));
      }));
}
