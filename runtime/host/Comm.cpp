//===- Comm.cpp - processes, mesh groups and collectives over MPI ---------===//
//
// One process per rank. Collectives are ring algorithms over MPI
// point-to-point messages (so the bytes each rank sends are those of the
// algorithm: 2(N-1)/N of the buffer for an all-reduce), and every wait is
// bounded: a peer that does not answer within the timeout is named and the
// whole job aborted, so no rank ever hangs.
//
//===----------------------------------------------------------------------===//

#include "Bf16.h"
#include "Internal.h"
#include "Stall.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

using namespace loomrt;

namespace {

/// The world rank each thread of this process waits for, or -1: slot 1 the
/// communication thread's, slot 0 the caller's. What it answers a peer
/// that timed out waiting for it (both: either may be what holds it).
std::atomic<int> waitingFor[2] = {-1, -1};
/// When each thread's current wait began (steady clock, ns).
std::atomic<int64_t> waitBegan[2] = {0, 0};
/// Whether this process has itself timed out, and the rank it then found
/// stalled (-1 until it knows): a peer asking it learns it no longer waits.
std::atomic<bool> timedOut{false};
std::atomic<int> foundStalled{-1};

/// The fault hook LOOMRT_FAULT=late-first-wait:R (tests): rank R holds its
/// first wait back, outside communication, until a peer that timed out asks
/// what it waits for; it then goes on, and answers from inside that wait
/// (waiting for a rank that has given up on it). What a rank stopped and
/// resumed by the launcher's SIGCONT does, without racing signals.
enum class Hold { None, Holding, Released };
std::atomic<Hold> firstWait{Hold::None};

bool onCommThread();
std::atomic<int> &waitSlot() { return waitingFor[onCommThread() ? 1 : 0]; }

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Milliseconds since this rank's youngest current wait began (-1: none).
int youngestWaitMs() {
  int64_t began = -1;
  for (int i = 0; i < 2; ++i)
    if (waitingFor[i].load() >= 0)
      began = std::max(began, waitBegan[i].load());
  return began < 0 ? -1 : int((nowNs() - began) / 1000000);
}

/// The answer to a peer's question, as sent: both threads' waits, whether
/// this rank timed out, the rank it found stalled, how long ago (ms) its
/// youngest wait began.
constexpr int kAnswerInts = 5;

/// Answers the question a timed-out peer asks (kWhoTag: what do you wait
/// for?) from a thread of its own, so that a rank blocked in a collective
/// still answers. Runs while the mesh is up.
class Responder {
public:
  void start() {
    stopping = false;
    thread = std::thread([this] { run(); });
  }
  void stop() {
    if (!thread.joinable())
      return;
    stopping = true;
    thread.join();
  }
  /// A process that exits with the mesh up (an error) leaves the thread
  /// to the exit.
  ~Responder() {
    if (thread.joinable())
      thread.detach();
  }

private:
  void run() {
    std::deque<std::pair<MPI_Request, std::unique_ptr<int[]>>> sent;
    while (!stopping) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kWhoTag, MPI_COMM_WORLD, &flag, &status);
      if (flag) {
        int none = 0;
        MPI_Recv(&none, 0, MPI_INT, status.MPI_SOURCE, kWhoTag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        Hold holding = Hold::Holding;
        if (firstWait.compare_exchange_strong(holding, Hold::Released)) {
          auto until =
              std::chrono::steady_clock::now() + std::chrono::seconds(1);
          while (waitingFor[0].load() < 0 &&
                 std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        auto answer = std::make_unique<int[]>(kAnswerInts);
        answer[0] = waitingFor[0].load();
        answer[1] = waitingFor[1].load();
        answer[2] = timedOut.load() ? 1 : 0;
        answer[3] = foundStalled.load();
        answer[4] = youngestWaitMs();
        sent.emplace_back(MPI_REQUEST_NULL, std::move(answer));
        MPI_Isend(sent.back().second.get(), kAnswerInts, MPI_INT,
                  status.MPI_SOURCE, kWhoAnswerTag, MPI_COMM_WORLD,
                  &sent.back().first);
      }
      while (!sent.empty()) {
        int done = 0;
        MPI_Test(&sent.front().first, &done, MPI_STATUS_IGNORE);
        if (!done)
          break;
        sent.pop_front();
      }
      if (!flag)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto &[request, value] : sent)
      if (request != MPI_REQUEST_NULL) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
      }
  }

  std::thread thread;
  std::atomic<bool> stopping{false};
};
Responder responder;

/// What `rank` answers (its waits, whether it timed out, whom it found
/// stalled, whether its wait began after `timedOutAt`), or nothing when it
/// does not answer within `grace` seconds.
std::optional<WaitAnswer> askWhatItWaitsFor(int rank, double grace,
                                            int64_t timedOutAt) {
  int none = 0;
  // Static: a reply that comes after the grace lands here, not in a frame
  // that is gone (each rank reports once).
  static int answer[kAnswerInts];
  MPI_Request question, reply;
  MPI_Isend(&none, 0, MPI_INT, rank, kWhoTag, MPI_COMM_WORLD, &question);
  MPI_Irecv(answer, kAnswerInts, MPI_INT, rank, kWhoAnswerTag, MPI_COMM_WORLD,
            &reply);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(grace);
  for (;;) {
    int done = 0;
    MPI_Test(&reply, &done, MPI_STATUS_IGNORE);
    if (done) {
      WaitAnswer a;
      for (int i = 0; i < 2; ++i)
        if (answer[i] >= 0 &&
            std::find(a.waitsFor.begin(), a.waitsFor.end(), answer[i]) ==
                a.waitsFor.end())
          a.waitsFor.push_back(answer[i]);
      a.timedOut = answer[2] != 0;
      a.found = answer[3];
      a.beganLate = answer[4] >= 0 &&
                    int64_t(answer[4]) * 1000000 < nowNs() - timedOutAt;
      return a;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      MPI_Cancel(&reply);
      MPI_Request_free(&reply);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// Past a wait's deadline: the waits from `peer` to the rank that does not
/// answer (or waits for no one), asked of each rank in turn
/// (findStalledRank), so the rank named is the one that stalls, not a
/// healthy rank blocked behind it. Ends the job.
[[noreturn]] void reportStall(loomrt_ctx *ctx, int peer, const char *what) {
  int64_t timedOutAt = nowNs();
  auto name = [&](int r) {
    return "rank " + std::to_string(r) + " " + coordsOf(ctx, r);
  };
  timedOut = true;
  std::vector<int> own;
  for (auto &slot : waitingFor)
    if (int r = slot.load(); r >= 0 && r != peer)
      own.push_back(r);
  own.insert(own.begin(), peer);
  double grace = std::min(2.0, ctx->timeoutSeconds / 2);
  StallVerdict v = findStalledRank(
      ctx->rank, peer, own,
      [&](int r) { return askWhatItWaitsFor(r, grace, timedOutAt); }, name);
  foundStalled = v.blamed;
  std::fprintf(stderr,
               "loomrt: error: rank %d %s: timed out after %g s in %s waiting "
               "for %s; %s\n",
               ctx->rank, coordsOf(ctx, ctx->rank).c_str(),
               ctx->timeoutSeconds, what, v.chain.c_str(), v.verdict.c_str());
  std::fflush(stderr);
  // Answer a while longer (the responder thread runs on) before ending
  // the job: a rank whose own search is asking this one meanwhile learns
  // the verdict, instead of finding it gone and blaming it.
  std::this_thread::sleep_for(std::chrono::duration<double>(grace));
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

/// Completes `requests` or, past the deadline, aborts the job naming the
/// rank that stalls (reportStall).
void waitAll(loomrt_ctx *ctx, std::vector<MPI_Request> &requests,
             const std::vector<int> &peers, const char *what) {
  if (!onCommThread() && firstWait.load() == Hold::Holding) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (firstWait.load() == Hold::Holding &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  waitBegan[onCommThread() ? 1 : 0] = nowNs();
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(ctx->timeoutSeconds);
  int spins = 0;
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i] == MPI_REQUEST_NULL)
        continue;
      int done = 0;
      MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      all &= bool(done);
    }
    int peer = -1;
    for (size_t i = 0; i < requests.size() && peer < 0; ++i)
      if (requests[i] != MPI_REQUEST_NULL)
        peer = peers[i];
    if (all) {
      waitSlot() = -1;
      return;
    }
    waitSlot() = peer;
    if (std::chrono::steady_clock::now() > deadline)
      reportStall(ctx, peer, what);
    // Give the core away: ranks are often oversubscribed. Yield first
    // (cheap, keeps latency low), sleep once the wait is clearly long.
    if (++spins < 20000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// A group's members, computed from the mesh alone: no communication, so
/// that making a group can never wait on a rank that failed. Messages go
/// over MPI_COMM_WORLD with tags that carry the group and a sequence number.
struct Group {
  MPI_Comm comm = MPI_COMM_WORLD;
  uint32_t mask = 0;
  int rank = 0, size = 1;
  std::vector<int> worldRanks;
  int sequence = 0;
  int tag = 0;
  /// The next collective's tag; the last one of the group's range is kept
  /// for point-to-point messages.
  void next() {
    sequence = (sequence + 1) % 4095;
    tag = int(mask) * 4096 + sequence;
  }
  int p2pTag() const { return int(mask) * 4096 + 4095; }
};

Group &groupOf(loomrt_ctx *ctx, uint32_t mask) {
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  auto it = ctx->groups.find(mask);
  if (it != ctx->groups.end())
    return *static_cast<Group *>(it->second.get());
  auto group = std::make_shared<Group>();
  GroupMembers members = groupMembers(ctx, mask);
  group->mask = mask;
  group->rank = members.rank;
  group->worldRanks = std::move(members.worldRanks);
  group->size = int(group->worldRanks.size());
  ctx->groups[mask] = group;
  return *group;
}

void count(loomrt_ctx *ctx, int kind, uint32_t mask, int64_t bytes) {
  countBytes(ctx, kind, mask, bytes);
}

/// One step of a ring: send `sendBytes` to the next rank while receiving
/// `recvBytes` from the previous one.
void ringStep(loomrt_ctx *ctx, Group &g, const char *what, const void *send,
              int64_t sendBytes, void *recv, int64_t recvBytes) {
  int next = g.worldRanks[(g.rank + 1) % g.size];
  int prev = g.worldRanks[(g.rank + g.size - 1) % g.size];
  std::vector<MPI_Request> requests(2);
  MPI_Irecv(recv, int(recvBytes), MPI_BYTE, prev, g.tag, g.comm, &requests[0]);
  MPI_Isend(send, int(sendBytes), MPI_BYTE, next, g.tag, g.comm, &requests[1]);
  waitAll(ctx, requests, {prev, next}, what);
}

/// A ring step of one element of `type` each way (a strided block).
void ringStepTyped(loomrt_ctx *ctx, Group &g, const char *what,
                   const void *send, void *recv, MPI_Datatype type) {
  int next = g.worldRanks[(g.rank + 1) % g.size];
  int prev = g.worldRanks[(g.rank + g.size - 1) % g.size];
  std::vector<MPI_Request> requests(2);
  MPI_Irecv(recv, 1, type, prev, g.tag, g.comm, &requests[0]);
  MPI_Isend(send, 1, type, next, g.tag, g.comm, &requests[1]);
  waitAll(ctx, requests, {prev, next}, what);
}

/// Chunk i of `n` elements split `parts` ways: [begin, end).
std::pair<int64_t, int64_t> chunk(int64_t n, int64_t parts, int64_t i) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra)};
}

/// own + incoming, as the all-reduce's ring adds (bf16: in f32, rounded).
inline float combine(float mine, float incoming, int32_t op) {
  return op == 1 ? std::max(mine, incoming) : mine + incoming;
}
inline uint16_t combine(uint16_t mine, uint16_t incoming, int32_t op) {
  return floatToBf16(combine(bf16ToFloat(mine), bf16ToFloat(incoming), op));
}

/// acc[i] = acc[i] + in[i] (or the maximum), element by element.
template <typename T>
void reduceInto(T *acc, const T *in, int64_t n, int32_t op) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] = combine(acc[i], in[i], op);
}

/// The reduce-scatter half of a ring all-reduce over `data` (`n` elements
/// of T: float, or bf16's bits): afterwards chunk (rank + 1) % size holds
/// the full reduction.
template <typename T>
void ringReduceScatter(loomrt_ctx *ctx, Group &g, T *data, int64_t n,
                       int32_t op, const char *what, int kind, uint32_t mask) {
  std::vector<T> incoming(n / g.size + 1);
  constexpr int64_t size = sizeof(T);
  for (int s = 0; s < g.size - 1; ++s) {
    auto [sb, se] = chunk(n, g.size, (g.rank - s + g.size) % g.size);
    auto [rb, re] = chunk(n, g.size, (g.rank - s - 1 + 2 * g.size) % g.size);
    ringStep(ctx, g, what, data + sb, (se - sb) * size, incoming.data(),
             (re - rb) * size);
    count(ctx, kind, mask, (se - sb) * size);
    reduceInto(data + rb, incoming.data(), re - rb, op);
  }
}

/// The all-gather half: each rank starts owning chunk (rank + 1) % size.
template <typename T>
void ringAllGatherChunks(loomrt_ctx *ctx, Group &g, T *data, int64_t n,
                         const char *what, int kind, uint32_t mask) {
  constexpr int64_t size = sizeof(T);
  for (int s = 0; s < g.size - 1; ++s) {
    auto [sb, se] = chunk(n, g.size, (g.rank + 1 - s + g.size) % g.size);
    auto [rb, re] = chunk(n, g.size, (g.rank - s + g.size) % g.size);
    ringStep(ctx, g, what, data + sb, (se - sb) * size, data + rb,
             (re - rb) * size);
    count(ctx, kind, mask, (se - sb) * size);
  }
}


/// The ring of run_reduce_scatter on elements of T (float, or bf16's bits).
template <typename T>
void ringReduceScatterBlocks(loomrt_ctx *ctx, Group &g, uint32_t group,
                                    const T *source, T *result,
                                    int64_t rowCount, int64_t piece,
                                    int32_t op) {
  // The ring runs on segments of at most 256 Ki elements of a block (each
  // row, cut): at step s a rank sends its partial sum of block rank - s - 1
  // and adds its own part to the partial of block rank - s - 2 it
  // receives, so after size - 1 steps it holds its own block's sum. Two
  // segment-sized buffers, not a copy of the input; the same sums in the
  // same order as the all-reduce's ring.
  const int64_t segment = int64_t(1) << 18;
  constexpr int64_t size = sizeof(T);
  std::vector<T> sending(size_t(std::min(piece, segment))),
      incoming(size_t(std::min(piece, segment)));
  for (int64_t r = 0; r < rowCount; ++r)
    for (int64_t begin = 0; begin < piece; begin += segment) {
      int64_t length = std::min(segment, piece - begin);
      auto own = [&](int b) {
        return source + (r * g.size + b) * piece + begin;
      };
      const T *first = own((g.rank - 1 + g.size) % g.size);
      std::copy(first, first + length, sending.begin());
      for (int s = 0; s < g.size - 1; ++s) {
        ringStep(ctx, g, "reduce_scatter", sending.data(), length * size,
                 incoming.data(), length * size);
        count(ctx, 2, group, length * size);
        const T *mine = own((g.rank - s - 2 + 2 * g.size) % g.size);
        for (int64_t i = 0; i < length; ++i)
          incoming[size_t(i)] = combine(mine[i], incoming[size_t(i)], op);
        std::swap(sending, incoming);
      }
      std::copy(sending.begin(), sending.begin() + length,
                result + r * piece + begin);
    }
}

} // namespace

//===----------------------------------------------------------------------===//
// The communication stream
//===----------------------------------------------------------------------===//

/// Collectives run in issue order on one communication thread, so the
/// asynchronous forms overlap the caller's compute and every rank still
/// issues its messages in program order. A blocking collective is its
/// asynchronous form followed by a wait.
struct loomrt_comm_event {
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  /// A point-to-point transfer started on the caller's thread: the MPI
  /// request to complete, and what to count when it does.
  MPI_Request request = MPI_REQUEST_NULL;
  bool direct = false;
  int worldPeer = -1;
  uint32_t group = 0;
  int64_t sentBytes = 0;
  const char *what = "";
};

namespace {
void markCommThread();
}

namespace loomrt {
struct CommStream {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<std::function<void()>, loomrt_comm_event *>> queue;
  bool stopping = false;
  std::thread worker;

  CommStream() : worker([this] { run(); }) {}
  ~CommStream() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    ready.notify_all();
    worker.join();
  }
  void run() {
    markCommThread();
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return;
      auto [work, event] = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      work();
      {
        std::lock_guard<std::mutex> queueLock(mutex);
        --pending;
      }
      std::lock_guard<std::mutex> eventLock(event->mutex);
      event->finished = true;
      event->done.notify_all();
    }
  }
  loomrt_comm_event *enqueue(std::function<void()> work) {
    auto *event = new loomrt_comm_event();
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++pending;
      queue.emplace_back(std::move(work), event);
    }
    ready.notify_one();
    return event;
  }
  /// Runs `work` now on the calling thread when nothing is queued or
  /// running (the order is then the same), else queues it and waits.
  void runInOrder(std::function<void()> work);
  int pending = 0;
};
} // namespace loomrt

void CommStream::runInOrder(std::function<void()> work) {
  std::unique_lock<std::mutex> lock(mutex);
  if (pending == 0) {
    // Nothing can start meanwhile: only this thread enqueues.
    lock.unlock();
    work();
    return;
  }
  lock.unlock();
  loomrt_comm_event *event = enqueue(std::move(work));
  std::unique_lock<std::mutex> eventLock(event->mutex);
  event->done.wait(eventLock, [&] { return event->finished; });
  eventLock.unlock();
  delete event;
}

namespace {
thread_local bool commThread = false;
bool onCommThread() { return commThread; }
void markCommThread() { commThread = true; }

CommStream &streamOf(loomrt_ctx *ctx) {
  if (!ctx->commStream)
    ctx->commStream = std::make_shared<CommStream>();
  return *static_cast<CommStream *>(ctx->commStream.get());
}
} // namespace

void loomrt::backend::stopMesh(loomrt_ctx *ctx) {
  ctx->commStream.reset();
  ctx->groups.clear();
  responder.stop();
}

void loomrt::backend::startMesh(loomrt_ctx *ctx) {
  if (ctx->world > 1) {
    if (faultArmed("late-first-wait", ctx->rank))
      firstWait = Hold::Holding;
    responder.start();
  }
}

extern "C" {

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

static void run_all_reduce(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                       int64_t count, int32_t dtype, int32_t op) {
  TraceSpan span(ctx, std::string("all_reduce") + " group " + std::to_string(group),
                 "communication", onCommThread() ? 1 : 0, count * elementBytes(dtype));
  if (dtype != LOOMRT_F32 && dtype != LOOMRT_BF16)
    fail("all_reduce: only f32 and bf16 reductions are supported");
  Group &g = groupOf(ctx, group);
  if (g.size == 1)
    return;
  g.next();
  if (dtype == LOOMRT_BF16) {
    auto *x = reinterpret_cast<uint16_t *>(data);
    ringReduceScatter(ctx, g, x, count, op, "all_reduce", 0, group);
    ringAllGatherChunks(ctx, g, x, count, "all_reduce", 0, group);
    return;
  }
  float *x = reinterpret_cast<float *>(data);
  ringReduceScatter(ctx, g, x, count, op, "all_reduce", 0, group);
  ringAllGatherChunks(ctx, g, x, count, "all_reduce", 0, group);
}

/// `in` is `rows` rows of the group's blocks side by side (a reduce-scatter
/// along an inner dimension); with one row, the blocks one after another.
static void run_reduce_scatter(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                           loomrt_buf *in, int64_t rows, int64_t countPerRank,
                           int32_t dtype, int32_t op) {
  TraceSpan span(ctx, std::string("reduce_scatter") + " group " + std::to_string(group),
                 "communication", onCommThread() ? 1 : 0, countPerRank * elementBytes(dtype));
  if (dtype != LOOMRT_F32 && dtype != LOOMRT_BF16)
    fail("reduce_scatter: only f32 and bf16 reductions are supported");
  Group &g = groupOf(ctx, group);
  g.next();
  int64_t rowCount = std::max<int64_t>(rows, 1);
  int64_t piece = countPerRank / rowCount;
  if (dtype == LOOMRT_BF16)
    ringReduceScatterBlocks(ctx, g, group,
                            reinterpret_cast<const uint16_t *>(in),
                            reinterpret_cast<uint16_t *>(out), rowCount, piece,
                            op);
  else
    ringReduceScatterBlocks(ctx, g, group, reinterpret_cast<const float *>(in),
                            reinterpret_cast<float *>(out), rowCount, piece,
                            op);
}

/// With `rows` > 1, `out` is `rows` rows of the group's blocks side by side
/// (a gather along an inner dimension): the ring moves each block as one
/// strided element, with no staging copy.
static void run_all_gather(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                       loomrt_buf *in, int64_t rows, int64_t countPerRank,
                       int32_t dtype) {
  TraceSpan span(ctx, std::string("all_gather") + " group " + std::to_string(group),
                 "communication", onCommThread() ? 1 : 0, countPerRank * elementBytes(dtype));
  Group &g = groupOf(ctx, group);
  g.next();
  int64_t block = countPerRank * elementBytes(dtype);
  char *o = reinterpret_cast<char *>(out);
  if (rows > 1) {
    // A block is `rows` pieces a row of the group's blocks apart: MPI moves
    // it as one strided element, in place in `out`.
    int64_t piece = block / rows;
    const char *mine = reinterpret_cast<const char *>(in);
    for (int64_t r = 0; r < rows; ++r)
      std::memmove(o + (r * g.size + g.rank) * piece, mine + r * piece,
                   size_t(piece));
    MPI_Datatype strided;
    MPI_Type_vector(int(rows), int(piece), int(piece * g.size), MPI_BYTE,
                    &strided);
    MPI_Type_commit(&strided);
    for (int s = 0; s < g.size - 1; ++s) {
      int sendBlock = (g.rank - s + g.size) % g.size;
      int recvBlock = (g.rank - s - 1 + g.size) % g.size;
      ringStepTyped(ctx, g, "all_gather", o + sendBlock * piece,
                    o + recvBlock * piece, strided);
      count(ctx, 1, group, block);
    }
    MPI_Type_free(&strided);
    return;
  }
  std::memmove(o + g.rank * block, in, size_t(block));
  for (int s = 0; s < g.size - 1; ++s) {
    int sendBlock = (g.rank - s + g.size) % g.size;
    int recvBlock = (g.rank - s - 1 + g.size) % g.size;
    ringStep(ctx, g, "all_gather", o + sendBlock * block, block,
             o + recvBlock * block, block);
    count(ctx, 1, group, block);
  }
}

static void run_all_to_all(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                       loomrt_buf *in, int64_t countPerRank, int32_t dtype) {
  TraceSpan span(ctx, std::string("all_to_all") + " group " + std::to_string(group),
                 "communication", onCommThread() ? 1 : 0, countPerRank * elementBytes(dtype));
  Group &g = groupOf(ctx, group);
  g.next();
  int64_t block = countPerRank * elementBytes(dtype);
  const char *i = reinterpret_cast<const char *>(in);
  char *o = reinterpret_cast<char *>(out);
  std::memcpy(o + g.rank * block, i + g.rank * block, size_t(block));
  for (int s = 1; s < g.size; ++s) {
    int to = (g.rank + s) % g.size, from = (g.rank - s + g.size) % g.size;
    std::vector<MPI_Request> requests(2);
    MPI_Irecv(o + from * block, int(block), MPI_BYTE, g.worldRanks[from],
              g.tag, g.comm, &requests[0]);
    MPI_Isend(i + to * block, int(block), MPI_BYTE, g.worldRanks[to], g.tag,
              g.comm, &requests[1]);
    waitAll(ctx, requests, {g.worldRanks[from], g.worldRanks[to]},
            "all_to_all");
    count(ctx, 3, group, block);
  }
}

static void run_broadcast(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count_, int32_t dtype, int32_t root) {
  TraceSpan span(ctx, std::string("broadcast") + " group " + std::to_string(group),
                 "communication", onCommThread() ? 1 : 0, count_ * elementBytes(dtype));
  Group &g = groupOf(ctx, group);
  g.next();
  if (g.size == 1)
    return;
  // A chain from the root: every rank but the last forwards the buffer.
  int64_t bytes = count_ * elementBytes(dtype);
  int position = (g.rank - root + g.size) % g.size;
  int prev = (g.rank + g.size - 1) % g.size, next = (g.rank + 1) % g.size;
  std::vector<MPI_Request> requests(1);
  if (position != 0) {
    MPI_Irecv(data, int(bytes), MPI_BYTE, g.worldRanks[prev], g.tag, g.comm,
              &requests[0]);
    waitAll(ctx, requests, {g.worldRanks[prev]}, "broadcast");
  }
  if (position != g.size - 1) {
    MPI_Isend(data, int(bytes), MPI_BYTE, g.worldRanks[next], g.tag, g.comm,
              &requests[0]);
    waitAll(ctx, requests, {g.worldRanks[next]}, "broadcast");
    count(ctx, 4, group, bytes);
  }
}

/// Point-to-point transfers do not go through the communication stream:
/// they are matched by their own tag (per pair of ranks, in the order they
/// are issued), not by their place among the collectives, and queueing a
/// send behind one the peer has not received yet would hold back a
/// pipeline's other transfers. They start at once on the caller's thread.
static loomrt_comm_event *startP2P(loomrt_ctx *ctx, uint32_t group,
                                   loomrt_buf *data, int64_t count_,
                                   int32_t dtype, int32_t peer, bool send) {
  Group &g = groupOf(ctx, group);
  if (peer < 0 || peer >= g.size)
    fail(std::string(send ? "send" : "recv") + ": peer " +
         std::to_string(peer) + " is outside a group of " +
         std::to_string(g.size));
  int64_t bytes = count_ * elementBytes(dtype);
  auto *event = new loomrt_comm_event();
  event->direct = true;
  event->worldPeer = g.worldRanks[peer];
  event->group = group;
  event->what = send ? "send" : "recv";
  if (send) {
    event->sentBytes = bytes;
    MPI_Isend(data, int(bytes), MPI_BYTE, event->worldPeer, g.p2pTag(),
              g.comm, &event->request);
  } else {
    MPI_Irecv(data, int(bytes), MPI_BYTE, event->worldPeer, g.p2pTag(),
              g.comm, &event->request);
  }
  return event;
}

/// Completes a transfer `startP2P` began.
static void finishP2P(loomrt_ctx *ctx, loomrt_comm_event *event) {
  std::vector<MPI_Request> requests{event->request};
  waitAll(ctx, requests, {event->worldPeer}, event->what);
  if (event->sentBytes)
    count(ctx, 5, event->group, event->sentBytes);
  delete event;
}

static void run_barrier(loomrt_ctx *ctx, uint32_t group) {
  TraceSpan span(ctx, std::string("barrier") + " group " + std::to_string(group),
                 "communication", onCommThread() ? 1 : 0, 0);
  // Dissemination barrier: in round k each rank signals the one 2^k ahead
  // and waits for the one 2^k behind; zero-byte messages.
  Group &g = groupOf(ctx, group);
  g.next();
  char token = 0, incoming = 0;
  for (int step = 1; step < g.size; step *= 2) {
    int to = g.worldRanks[(g.rank + step) % g.size];
    int from = g.worldRanks[(g.rank - step + g.size) % g.size];
    std::vector<MPI_Request> requests(2);
    MPI_Irecv(&incoming, 0, MPI_BYTE, from, g.tag, g.comm, &requests[0]);
    MPI_Isend(&token, 0, MPI_BYTE, to, g.tag, g.comm, &requests[1]);
    waitAll(ctx, requests, {from, to}, "barrier");
  }
}

//===----------------------------------------------------------------------===//
// Asynchronous and blocking entry points
//===----------------------------------------------------------------------===//

void loomrt_comm_wait(loomrt_ctx *ctx, loomrt_comm_event *event) {
  if (!event)
    return;
  // The caller's stall, on its thread: where its compute before the wait
  // ended, and how long the collective kept it waiting.
  TraceSpan span(ctx, "wait", "communication", 0);
  if (event->direct)
    return finishP2P(ctx, event);
  {
    std::unique_lock<std::mutex> lock(event->mutex);
    event->done.wait(lock, [&] { return event->finished; });
  }
  delete event;
}

namespace {
/// Where the caller issued an asynchronous collective: a span of no
/// duration on its thread ("start all_gather group 1"); the collective's
/// own span, on the communication thread, begins when it runs.
loomrt_comm_event *issued(loomrt_ctx *ctx, const char *what, uint32_t group,
                          loomrt_comm_event *event) {
  TraceSpan(ctx,
            std::string("start ") + what + " group " + std::to_string(group),
            "communication", 0);
  return event;
}
} // namespace

loomrt_comm_event *loomrt_comm_all_reduce_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *data, int64_t count,
                                                int32_t dtype, int32_t op) {
  return issued(ctx, "all_reduce", group, streamOf(ctx).enqueue([=] {
    run_all_reduce(ctx, group, data, count, dtype, op);
  }));
}
loomrt_comm_event *loomrt_comm_reduce_scatter_async(
    loomrt_ctx *ctx, uint32_t group, loomrt_buf *out, loomrt_buf *in,
    int64_t countPerRank, int32_t dtype, int32_t op) {
  return issued(ctx, "reduce_scatter", group, streamOf(ctx).enqueue([=] {
    run_reduce_scatter(ctx, group, out, in, 1, countPerRank, dtype, op);
  }));
}
loomrt_comm_event *loomrt_comm_all_gather_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *out, loomrt_buf *in,
                                                int64_t countPerRank,
                                                int32_t dtype) {
  return issued(ctx, "all_gather", group, streamOf(ctx).enqueue([=] {
    run_all_gather(ctx, group, out, in, 1, countPerRank, dtype);
  }));
}
loomrt_comm_event *
loomrt_comm_all_gather_rows_async(loomrt_ctx *ctx, uint32_t group,
                                  loomrt_buf *out, loomrt_buf *in, int64_t rows,
                                  int64_t countPerRank, int32_t dtype) {
  return issued(ctx, "all_gather", group, streamOf(ctx).enqueue([=] {
    run_all_gather(ctx, group, out, in, rows, countPerRank, dtype);
  }));
}
loomrt_comm_event *loomrt_comm_all_to_all_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *out, loomrt_buf *in,
                                                int64_t countPerRank,
                                                int32_t dtype) {
  return issued(ctx, "all_to_all", group, streamOf(ctx).enqueue([=] {
    run_all_to_all(ctx, group, out, in, countPerRank, dtype);
  }));
}
loomrt_comm_event *loomrt_comm_broadcast_async(loomrt_ctx *ctx, uint32_t group,
                                               loomrt_buf *data, int64_t count,
                                               int32_t dtype, int32_t root) {
  return issued(ctx, "broadcast", group, streamOf(ctx).enqueue([=] {
    run_broadcast(ctx, group, data, count, dtype, root);
  }));
}
loomrt_comm_event *loomrt_comm_send_async(loomrt_ctx *ctx, uint32_t group,
                                          loomrt_buf *data, int64_t count,
                                          int32_t dtype, int32_t peer) {
  return startP2P(ctx, group, data, count, dtype, peer, true);
}
loomrt_comm_event *loomrt_comm_recv_async(loomrt_ctx *ctx, uint32_t group,
                                          loomrt_buf *data, int64_t count,
                                          int32_t dtype, int32_t peer) {
  return startP2P(ctx, group, data, count, dtype, peer, false);
}

void loomrt_comm_all_reduce(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                            int64_t count, int32_t dtype, int32_t op) {
  streamOf(ctx).runInOrder([=] { run_all_reduce(ctx, group, data, count, dtype, op); });
}
void loomrt_comm_reduce_scatter(loomrt_ctx *ctx, uint32_t group,
                                loomrt_buf *out, loomrt_buf *in,
                                int64_t countPerRank, int32_t dtype,
                                int32_t op) {
  streamOf(ctx).runInOrder([=] { run_reduce_scatter(ctx, group, out, in, 1, countPerRank, dtype, op); });
}
void loomrt_comm_reduce_scatter_rows(loomrt_ctx *ctx, uint32_t group,
                                     loomrt_buf *out, loomrt_buf *in,
                                     int64_t rows, int64_t countPerRank,
                                     int32_t dtype, int32_t op) {
  streamOf(ctx).runInOrder([=] {
    run_reduce_scatter(ctx, group, out, in, rows, countPerRank, dtype, op);
  });
}
void loomrt_comm_all_gather(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                            loomrt_buf *in, int64_t countPerRank,
                            int32_t dtype) {
  streamOf(ctx).runInOrder([=] { run_all_gather(ctx, group, out, in, 1, countPerRank, dtype); });
}
void loomrt_comm_all_gather_rows(loomrt_ctx *ctx, uint32_t group,
                                 loomrt_buf *out, loomrt_buf *in,
                                 int64_t rows, int64_t countPerRank,
                                 int32_t dtype) {
  streamOf(ctx).runInOrder([=] {
    run_all_gather(ctx, group, out, in, rows, countPerRank, dtype);
  });
}
void loomrt_comm_all_to_all(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                            loomrt_buf *in, int64_t countPerRank,
                            int32_t dtype) {
  streamOf(ctx).runInOrder([=] { run_all_to_all(ctx, group, out, in, countPerRank, dtype); });
}
void loomrt_comm_broadcast(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                           int64_t count, int32_t dtype, int32_t root) {
  streamOf(ctx).runInOrder([=] { run_broadcast(ctx, group, data, count, dtype, root); });
}
void loomrt_comm_send(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t peer) {
  TraceSpan span(ctx, "send group " + std::to_string(group), "communication",
                 0, count * elementBytes(dtype));
  finishP2P(ctx, startP2P(ctx, group, data, count, dtype, peer, true));
}
void loomrt_comm_recv(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t peer) {
  TraceSpan span(ctx, "recv group " + std::to_string(group), "communication",
                 0, count * elementBytes(dtype));
  finishP2P(ctx, startP2P(ctx, group, data, count, dtype, peer, false));
}
void loomrt_comm_barrier(loomrt_ctx *ctx, uint32_t group) {
  streamOf(ctx).runInOrder([=] { run_barrier(ctx, group); });
}

} // extern "C"

loomrt_comm_event *loomrt::backend::bucketAllReduce(
    loomrt_ctx *ctx, uint32_t group,
    const std::vector<std::pair<loomrt_buf *, int64_t>> &members,
    int64_t count, int32_t dtype) {
  return issued(ctx, "all_reduce", group, streamOf(ctx).enqueue([=] {
    int64_t size = elementBytes(dtype);
    char *staging = allocate(ctx, count * size);
    int64_t offset = 0;
    for (auto [data, n] : members) {
      std::memcpy(staging + offset, reinterpret_cast<char *>(data), n * size);
      offset += n * size;
    }
    run_all_reduce(ctx, group, reinterpret_cast<loomrt_buf *>(staging), count,
                   dtype, 0);
    offset = 0;
    for (auto [data, n] : members) {
      std::memcpy(reinterpret_cast<char *>(data), staging + offset, n * size);
      offset += n * size;
    }
    release(ctx, staging, count * size);
  }));
}
