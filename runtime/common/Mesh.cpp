//===- Mesh.cpp - processes, the mesh, groups, counters and traces --------===//
//
// What every backend shares about processes: MPI start-up, the mesh and its
// groups (computed from the mesh alone), the launcher's environment, byte
// counters and per-rank Chrome traces. The collectives themselves are the
// backend's (host: rings over MPI; cuda: NCCL).
//
//===----------------------------------------------------------------------===//

#include "Files.h"
#include "Internal.h"

#include <mpi.h>

#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

using namespace loomrt;

namespace {

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  return *end ? fallback : int(n);
}

const char *kindNames[] = {"all_reduce", "all_gather", "reduce_scatter",
                           "all_to_all", "broadcast",  "send"};

} // namespace

int64_t loomrt::elementBytes(int32_t dtype) {
  return dtype == LOOMRT_BF16 ? 2 : dtype == LOOMRT_I64 ? 8 : 4;
}

std::vector<int64_t> loomrt::coordinates(loomrt_ctx *ctx, int worldRank) {
  std::vector<int64_t> coords(ctx->meshSizes.size());
  int64_t rest = worldRank;
  for (int64_t a = int64_t(ctx->meshSizes.size()) - 1; a >= 0; --a) {
    coords[a] = rest % ctx->meshSizes[a];
    rest /= ctx->meshSizes[a];
  }
  return coords;
}

std::string loomrt::coordsOf(loomrt_ctx *ctx, int worldRank) {
  std::vector<int64_t> coords = coordinates(ctx, worldRank);
  std::string s = "(";
  for (size_t a = 0; a < coords.size(); ++a)
    s += (a ? ", " : "") + ctx->axisNames[a] + "=" + std::to_string(coords[a]);
  return s + ")";
}

loomrt::GroupMembers loomrt::groupMembers(loomrt_ctx *ctx, uint32_t mask) {
  if (mask >> ctx->meshSizes.size())
    fail("group mask " + std::to_string(mask) + " names an axis the mesh "
         "does not have");
  // Ranks that agree on every coordinate outside the group's axes form one
  // group, ordered (row-major) by their coordinates on its axes, which is
  // world-rank order.
  GroupMembers g;
  std::vector<int64_t> mine = coordinates(ctx, ctx->rank);
  for (int q = 0; q < ctx->world; ++q) {
    std::vector<int64_t> theirs = coordinates(ctx, q);
    bool same = true;
    for (size_t a = 0; a < mine.size(); ++a)
      same &= (mask & (1u << a)) || theirs[a] == mine[a];
    if (!same)
      continue;
    if (q == ctx->rank)
      g.rank = int(g.worldRanks.size());
    g.worldRanks.push_back(q);
  }
  return g;
}

std::string loomrt::groupName(loomrt_ctx *ctx, uint32_t mask) {
  std::string name;
  for (size_t a = 0; a < ctx->axisNames.size(); ++a)
    if (mask & (1u << a))
      name += (name.empty() ? "" : "+") + ctx->axisNames[a];
  return name.empty() ? "self" : name;
}

void loomrt::countBytes(loomrt_ctx *ctx, int kind, uint32_t mask,
                        int64_t bytes) {
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  ctx->bytesSent[{kind, mask}] += bytes;
}

//===----------------------------------------------------------------------===//
// Tracing
//===----------------------------------------------------------------------===//

loomrt::TraceSpan::TraceSpan(loomrt_ctx *ctx, std::string name,
                             const char *category, int thread, int64_t bytes)
    : ctx(ctx), name(std::move(name)), category(category), thread(thread),
      bytes(bytes), start(std::chrono::steady_clock::now()) {}

void loomrt_trace_span(loomrt_ctx *ctx, const char *name, int32_t begin) {
  if (ctx->tracePath.empty())
    return;
  auto now = std::chrono::steady_clock::now();
  if (begin) {
    ctx->iterationStarts.push_back(now);
    return;
  }
  if (ctx->iterationStarts.empty())
    fail(std::string("loomrt_trace_span: span '") + name +
         "' ends that did not begin");
  auto start = ctx->iterationStarts.back();
  ctx->iterationStarts.pop_back();
  using us = std::chrono::duration<double, std::micro>;
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  ctx->trace.push_back({name, "compute", us(start - ctx->traceStart).count(),
                        us(now - start).count(), 0, 0});
}

void loomrt_trace_iteration(loomrt_ctx *ctx, int64_t repeat, int64_t index,
                            int32_t begin) {
  if (ctx->tracePath.empty())
    return;
  std::string name = "repeat " + std::to_string(repeat) + " iteration " +
                     std::to_string(index);
  loomrt_trace_span(ctx, name.c_str(), begin);
}

loomrt::TraceSpan::~TraceSpan() {
  if (ctx->tracePath.empty())
    return;
  auto end = std::chrono::steady_clock::now();
  using us = std::chrono::duration<double, std::micro>;
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  ctx->trace.push_back({name, category, us(start - ctx->traceStart).count(),
                        us(end - start).count(), thread, bytes});
}


void loomrt::writeTrace(loomrt_ctx *ctx) {  if (ctx->tracePath.empty())
    return;
  std::string path = ctx->tracePath;
  for (size_t at; (at = path.find("%r")) != std::string::npos;)
    path.replace(at, 2, std::to_string(ctx->rank));
  // Streamed to PATH.partial, renamed once complete (Files.h).
  PartialFile file(path);
  std::FILE *out = file.get();
  std::fprintf(out, "{\"traceEvents\": [\n");
  std::fprintf(out,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"args\": {\"name\": \"rank %d\", \"clock_origin_us\": %.3f}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"tid\": 0, \"args\": {\"name\": \"compute\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"tid\": 1, \"args\": {\"name\": \"communication\"}}",
               ctx->rank, ctx->rank,
               // The monotonic clock at the trace's zero: the same clock
               // for every process of a node, so ranks' traces align.
               std::chrono::duration<double, std::micro>(
                   ctx->traceStart.time_since_epoch())
                   .count(),
               ctx->rank, ctx->rank);
  for (const auto &e : ctx->trace)
    std::fprintf(out,
                 ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                 "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, "
                 "\"args\": {\"bytes\": %lld}}",
                 e.name.c_str(), e.category.c_str(), e.startUs, e.durationUs,
                 ctx->rank, e.thread, (long long)e.bytes);
  std::fprintf(out, "\n]}\n");
  file.finish();
}

//===----------------------------------------------------------------------===//
// Start-up
//===----------------------------------------------------------------------===//

loomrt::Launch loomrt::launchFromEnvironment() {
  Launch l;
  struct Source {
    const char *launcher, *rank, *size, *local;
  } sources[] = {
      {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"PMIx", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"},
      {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
  };
  for (const Source &s : sources) {
    int rank = envInt(s.rank, -1);
    if (rank < 0)
      continue;
    l.launcher = s.launcher;
    l.rank = rank;
    l.world = envInt(s.size, 1);
    l.localRank = envInt(s.local, 0);
    return l;
  }
  return l;
}

bool loomrt::faultArmed(const char *point, int rank) {
  const char *fault = std::getenv("LOOMRT_FAULT");
  if (!fault)
    return false;
  std::string spec = fault, prefix = std::string(point) + ":";
  return spec.rfind(prefix, 0) == 0 &&
         std::atoi(spec.c_str() + prefix.size()) == rank;
}

namespace {

/// Bounds a wait that no in-band timeout covers (MPI's start-up, its
/// finalization): unless disarmed (destroyed) within `seconds`, prints
/// `message` and ends the process with exit code 1.
class Watchdog {
public:
  Watchdog(double seconds, std::string message)
      : thread([this, seconds, message = std::move(message)] {
          std::unique_lock<std::mutex> lock(mutex);
          if (wake.wait_for(lock, std::chrono::duration<double>(seconds),
                            [this] { return disarmed; }))
            return;
          std::fprintf(stderr, "%s\n", message.c_str());
          std::fflush(stderr);
          std::_Exit(1);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      disarmed = true;
    }
    wake.notify_all();
    thread.join();
  }

private:
  std::mutex mutex;
  std::condition_variable wake;
  bool disarmed = false;
  std::thread thread;
};

/// LOOMRT_FAULT=stop-before-start:R or stop-at-shutdown:R stops the
/// process of launcher rank R (SIGSTOP) at that point: the tests' fault
/// hook for a rank that stalls where no collective's timeout watches.
void faultPoint(const char *point, int rank) {
  if (faultArmed(point, rank))
    ::raise(SIGSTOP);
}

/// Polls `requests` until all complete, `stop()` says to stop waiting, or
/// the deadline passes; the requests left undone are MPI_REQUEST_NULL-free.
bool pollUntil(std::vector<MPI_Request> &requests,
               std::chrono::steady_clock::time_point deadline,
               const std::function<bool()> &stop = [] { return false; }) {
  for (;;) {
    bool all = true;
    for (MPI_Request &r : requests) {
      int done = 1;
      if (r != MPI_REQUEST_NULL)
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      all &= bool(done);
    }
    if (all)
      return true;
    if (stop() || std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

/// Before MPI_Finalize, which waits for every rank without a bound: every
/// rank tells rank 0 it is done and waits for rank 0's answer, each wait
/// bounded. Rank 0 names the ranks that did not report and tells the
/// others which one it was, so a rank blocked behind rank 0 names the
/// stalled rank rather than rank 0; the others blame rank 0 only when it
/// says nothing for twice the timeout. The messages of a clean shutdown
/// are empty: the bytes each rank sends stay those of its collectives.
void shutdownHandshake(loomrt_ctx *ctx) {
  if (ctx->world == 1)
    return;
  using Clock = std::chrono::steady_clock;
  auto now = Clock::now();
  auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(ctx->timeoutSeconds));
  auto failWith = [&](const std::string &waitedFor, bool plural) {
    std::fprintf(stderr,
                 "loomrt: error: rank %d %s: timed out after %g s at shutdown "
                 "waiting for %s; %s\n",
                 ctx->rank, coordsOf(ctx, ctx->rank).c_str(),
                 ctx->timeoutSeconds, waitedFor.c_str(),
                 plural ? "they failed or stall" : "it failed or stalls");
    std::fflush(stderr);
    std::_Exit(1);
  };
  auto name = [&](int r) {
    return "rank " + std::to_string(r) + " " + coordsOf(ctx, r);
  };
  int token = 0;
  if (ctx->rank != 0) {
    int stalled = -1;
    std::vector<MPI_Request> requests(2);
    MPI_Request failed;
    MPI_Isend(&token, 0, MPI_INT, 0, kShutdownTag, MPI_COMM_WORLD,
              &requests[0]);
    MPI_Irecv(&token, 0, MPI_INT, 0, kShutdownTag, MPI_COMM_WORLD,
              &requests[1]);
    MPI_Irecv(&stalled, 1, MPI_INT, 0, kShutdownFailedTag, MPI_COMM_WORLD,
              &failed);
    auto told = [&] {
      int done = 0;
      MPI_Test(&failed, &done, MPI_STATUS_IGNORE);
      return bool(done);
    };
    // Rank 0 may reach shutdown up to a timeout after this rank (it
    // exports, for one) and then waits a timeout for the others: its
    // verdict comes within twice the timeout, or rank 0 is the one stalled.
    if (pollUntil(requests, now + 2 * timeout, told)) {
      MPI_Cancel(&failed);
      MPI_Request_free(&failed);
      return;
    }
    if (failed == MPI_REQUEST_NULL && stalled >= 0) {
      std::fprintf(stderr,
                   "loomrt: error: rank %d %s: at shutdown, rank 0 found that "
                   "%s failed or stalls\n",
                   ctx->rank, coordsOf(ctx, ctx->rank).c_str(),
                   name(stalled).c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
    failWith(name(0), false);
  }
  std::vector<int> tokens(size_t(ctx->world));
  std::vector<MPI_Request> reports;
  for (int r = 1; r < ctx->world; ++r) {
    reports.emplace_back();
    MPI_Irecv(&tokens[size_t(r)], 0, MPI_INT, r, kShutdownTag, MPI_COMM_WORLD,
              &reports.back());
  }
  bool all = pollUntil(reports, now + timeout);
  std::vector<MPI_Request> answers;
  std::string missing;
  int first = -1, count = 0;
  for (int r = 1; r < ctx->world; ++r)
    if (reports[size_t(r - 1)] != MPI_REQUEST_NULL) {
      missing += (count++ ? ", " : "") + name(r);
      if (first < 0)
        first = r;
    }
  for (int r = 1; r < ctx->world; ++r) {
    if (reports[size_t(r - 1)] != MPI_REQUEST_NULL)
      continue;
    answers.emplace_back();
    if (all)
      MPI_Isend(&token, 0, MPI_INT, r, kShutdownTag, MPI_COMM_WORLD,
                &answers.back());
    else
      MPI_Isend(&first, 1, MPI_INT, r, kShutdownFailedTag, MPI_COMM_WORLD,
                &answers.back());
  }
  if (all) {
    if (!pollUntil(answers, std::chrono::steady_clock::now() + timeout))
      failWith("the other ranks to take its answer", true);
    return;
  }
  // This rank reports first (the launcher may end the job as soon as any
  // rank exits), then the ranks that answered learn who did not and say so
  // in their turn, within a second.
  std::fprintf(stderr,
               "loomrt: error: rank 0 %s: timed out after %g s at shutdown "
               "waiting for %s; %s\n",
               coordsOf(ctx, 0).c_str(), ctx->timeoutSeconds, missing.c_str(),
               count > 1 ? "they failed or stall" : "it failed or stalls");
  std::fflush(stderr);
  pollUntil(answers, std::chrono::steady_clock::now() +
                         std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::_Exit(1);
}

/// A task that srun started without PMIx: OpenMPI cannot start there (it
/// needs PMIx from srun), and says so only in terms of its build.
void checkLauncher() {
  bool srunTask = std::getenv("SLURM_PROCID") && std::getenv("SLURM_STEP_ID");
  bool mpi = std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMIX_RANK");
  if (srunTask && !mpi) {
    std::fprintf(stderr,
                 "loomrt: error: this task was started by srun without PMIx "
                 "(SLURM_PROCID is set, PMIX_RANK is not); Loom's OpenMPI "
                 "starts under srun --mpi=pmix (or mpirun)\n");
    std::fflush(stderr);
    std::_Exit(1);
  }
}

} // namespace

extern "C" {

void loomrt_init_mesh(loomrt_ctx *ctx, int32_t numAxes,
                      const char *const *axisNames, const int64_t *axisSizes) {
  Launch launch = launchFromEnvironment();
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Start-up waits for every rank, with no bound of MPI's own: bounded by
  // --timeout here (until MPI is up no rank can tell which one is missing).
  std::optional<Watchdog> startup;
  if (!initialized) {
    checkLauncher();
    faultPoint("stop-before-start", launch.rank);
    char message[512];
    std::snprintf(message, sizeof message,
                  "loomrt: error: launcher rank %d of %d: start-up timed out "
                  "after %g s: not every rank joined (one failed to start or "
                  "stalls; which one cannot be known before MPI is up)",
                  launch.rank, launch.world, ctx->timeoutSeconds);
    startup.emplace(ctx->timeoutSeconds, message);
    // MPI calls come from the caller's thread and the communication thread.
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE)
      fail("the MPI library does not support MPI_THREAD_MULTIPLE");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx->world);
  ctx->localRank = launch.localRank;
  if (const char *trace = std::getenv("LOOMRT_TRACE"); trace && *trace &&
                                                        ctx->tracePath.empty())
    ctx->tracePath = trace;
  ctx->traceStart = std::chrono::steady_clock::now();
  ctx->meshSizes.assign(axisSizes, axisSizes + numAxes);
  ctx->axisNames.clear();
  int64_t meshSize = 1;
  std::string mesh;
  for (int32_t a = 0; a < numAxes; ++a) {
    ctx->axisNames.push_back(axisNames[a]);
    meshSize *= axisSizes[a];
    mesh += (a ? "," : "") + std::string(axisNames[a]) + "=" +
            std::to_string(axisSizes[a]);
  }
  if (meshSize != ctx->world) {
    if (ctx->rank == 0)
      std::fprintf(stderr,
                   "loomrt: error: the program was compiled for a mesh of %lld "
                   "ranks (%s) but %d were launched; start it with "
                   "mpirun -n %lld (or srun --mpi=pmix -n %lld)\n",
                   (long long)meshSize, mesh.c_str(), ctx->world,
                   (long long)meshSize, (long long)meshSize);
    MPI_Finalize();
    std::exit(1);
  }
  backend::startMesh(ctx);
}

const char *loomrt_launch_info(int32_t *rank, int32_t *world,
                               int32_t *localRank) {
  static Launch launch;
  launch = launchFromEnvironment();
  *rank = launch.rank;
  *world = launch.world;
  *localRank = launch.localRank;
  return launch.launcher.c_str();
}

void loomrt_finalize(loomrt_ctx *ctx) {
  backend::stopMesh(ctx);
  writeTrace(ctx);
  faultPoint("stop-at-shutdown", ctx->rank);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    shutdownHandshake(ctx);
    // Every peer has answered; MPI's own teardown is bounded too.
    char message[256];
    std::snprintf(message, sizeof message,
                  "loomrt: error: rank %d: MPI_Finalize did not finish "
                  "within %g s",
                  ctx->rank, ctx->timeoutSeconds);
    Watchdog finalize(ctx->timeoutSeconds, message);
    MPI_Finalize();
  }
}

int32_t loomrt_rank(loomrt_ctx *ctx) { return ctx->rank; }

int64_t loomrt_peak_bytes(loomrt_ctx *ctx) { return ctx->peakBytes.load(); }

int64_t loomrt_mesh_coord(loomrt_ctx *ctx, int32_t axis) {
  if (axis < 0 || axis >= int32_t(ctx->meshSizes.size()))
    fail("loomrt_mesh_coord: the mesh has no axis " + std::to_string(axis));
  int64_t rest = ctx->rank;
  for (int64_t a = int64_t(ctx->meshSizes.size()) - 1; a > axis; --a)
    rest /= ctx->meshSizes[a];
  return rest % ctx->meshSizes[axis];
}
int32_t loomrt_world_size(loomrt_ctx *ctx) { return ctx->world; }
int32_t loomrt_local_rank(loomrt_ctx *ctx) { return ctx->localRank; }

int32_t loomrt_group_rank(loomrt_ctx *ctx, uint32_t group) {
  return groupMembers(ctx, group).rank;
}
int32_t loomrt_group_size(loomrt_ctx *ctx, uint32_t group) {
  return int32_t(groupMembers(ctx, group).worldRanks.size());
}

int64_t loomrt_bytes_sent(loomrt_ctx *ctx, int32_t kind, uint32_t group) {
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  auto it = ctx->bytesSent.find({kind, group});
  return it == ctx->bytesSent.end() ? 0 : it->second;
}

void loomrt_set_timeout(loomrt_ctx *ctx, double seconds) {
  ctx->timeoutSeconds = seconds;
}

const char *loomrt_collective_name(int32_t kind) {
  return kind >= 0 && kind < 6 ? kindNames[kind] : "unknown";
}

} // extern "C"
