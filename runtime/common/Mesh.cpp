//===- Mesh.cpp - processes, the mesh, groups, counters and traces --------===//
//
// What every backend shares about processes: MPI start-up, the mesh and its
// groups (computed from the mesh alone), the launcher's environment, byte
// counters and per-rank Chrome traces. The collectives themselves are the
// backend's (host: rings over MPI; cuda: NCCL).
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

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
  std::FILE *out = std::fopen(path.c_str(), "w");
  if (!out)
    fail("cannot write the trace '" + path + "'");
  std::fprintf(out, "{\"traceEvents\": [\n");
  std::fprintf(out,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"args\": {\"name\": \"rank %d\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"tid\": 0, \"args\": {\"name\": \"compute\"}},\n"
               "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"tid\": 1, \"args\": {\"name\": \"communication\"}}",
               ctx->rank, ctx->rank, ctx->rank, ctx->rank);
  for (const auto &e : ctx->trace)
    std::fprintf(out,
                 ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                 "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, "
                 "\"args\": {\"bytes\": %lld}}",
                 e.name.c_str(), e.category.c_str(), e.startUs, e.durationUs,
                 ctx->rank, e.thread, (long long)e.bytes);
  std::fprintf(out, "\n]}\n");
  std::fclose(out);
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

extern "C" {

void loomrt_init_mesh(loomrt_ctx *ctx, int32_t numAxes,
                      const char *const *axisNames, const int64_t *axisSizes) {
  Launch launch = launchFromEnvironment();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
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
                   "mpirun -n %lld (or srun -n %lld)\n",
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
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

int32_t loomrt_rank(loomrt_ctx *ctx) { return ctx->rank; }

int64_t loomrt_peak_bytes(loomrt_ctx *ctx) { return ctx->peakBytes; }

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
