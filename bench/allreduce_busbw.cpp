//===- allreduce_busbw.cpp - the runtime's all-reduce against MPI's ---------===//
//
// mpirun -n N loomrt-allreduce-bench: all-reduce bus bandwidth (nccl-tests'
// busbw = bytes * 2 (N - 1) / N / time) from 1 KiB to 64 MiB, the runtime's
// ring against MPI_Allreduce, side by side in one run. Built against the
// cuda backend (loomrt-allreduce-bench-cuda), the runtime's side is NCCL on
// device memory (timed to completion) and MPI's stays on host memory.
//
//===----------------------------------------------------------------------===//

#include "loomrt/loomrt.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

namespace {
double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Mean seconds per call of `f`, over at least 3 calls and 0.2 s, with the
/// count agreed by all ranks so that they call it equally often.
template <typename F> double timeIt(F f) {
  f();
  int iterations = 3;
  for (;;) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = seconds();
    for (int i = 0; i < iterations; ++i)
      f();
    double local = seconds() - start, slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (slowest > 0.2 || iterations >= 1000)
      return slowest / iterations;
    iterations *= 4;
  }
}
} // namespace

int main() {
  loomrt_ctx *ctx = loomrt_create();
  int world = 0;
  {
    // The mesh is one axis over every launched rank.
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &initialized);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  }
  const char *axis = "dp";
  int64_t size = world;
  loomrt_init_mesh(ctx, 1, &axis, &size);
  int rank = loomrt_rank(ctx);
  if (rank == 0)
    std::printf("%d ranks; busbw in GB/s (10^9 bytes/s)\n%10s %12s %12s %8s\n",
                world, "bytes", "loom ring", "MPI", "ratio");
  for (int64_t bytes = 1024; bytes <= (64 << 20); bytes *= 4) {
    int64_t n = bytes / 4;
    std::vector<float> a(n, 1.0f), b(n, 1.0f);
    loomrt_buf *data = loomrt_alloc(ctx, bytes);
    loomrt_upload(ctx, data, a.data(), bytes);
    double loom = timeIt([&] {
      loomrt_comm_all_reduce(ctx, 1, data, n, LOOMRT_F32, LOOMRT_SUM);
      loomrt_sync(ctx);
    });
    loomrt_free(ctx, data, bytes);
    double mpi = timeIt([&] {
      MPI_Allreduce(MPI_IN_PLACE, b.data(), int(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    double factor = 2.0 * (world - 1) / world;
    if (rank == 0)
      std::printf("%10lld %12.3f %12.3f %8.2f\n", (long long)bytes,
                  bytes * factor / loom / 1e9, bytes * factor / mpi / 1e9,
                  mpi / loom);
  }
  loomrt_finalize(ctx);
  loomrt_destroy(ctx);
  return 0;
}
