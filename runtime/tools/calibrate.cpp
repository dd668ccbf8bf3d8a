//===- calibrate.cpp - describe this machine's host backend as a cluster --===//
//
// mpirun -n 2 loomrt-calibrate -o host.json: measures single-thread sgemm
// FLOP/s (the host kernels run on one thread), memory bandwidth, and MPI
// bandwidth and latency between two ranks, and writes a cluster description
// (clusters/*.json schema) of this machine for loomc --cluster.
//
//===----------------------------------------------------------------------===//

#include "../common/Internal.h"

#include <cblas.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {
double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename F> double best(int reps, F f) {
  double t = 1e30;
  for (int i = 0; i < reps; ++i) {
    double start = now();
    f();
    t = std::min(t, now() - start);
  }
  return t;
}
} // namespace

int main(int argc, char **argv) {
  loomrt::selectBlasKernels(argv);
  std::string out = "-";
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
  openblas_set_num_threads(1);
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  const int n = 1024;
  std::vector<float> a(n * n, 1.0f), b(n * n, 1.0f), c(n * n);
  double gemm = best(5, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  double flops = 2.0 * n * n * n / gemm;

  const size_t bytes = size_t(256) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double copy = best(5, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  double memoryBandwidth = 2.0 * double(bytes) / copy; // read + write

  // Ping-pong between ranks 0 and 1: one-way time of a round trip / 2.
  double bandwidth = memoryBandwidth, latency = 1e-6;
  if (world >= 2 && rank < 2) {
    int peer = 1 - rank;
    auto pingpong = [&](size_t size, int reps) {
      std::vector<char> buf(size);
      double start = now();
      for (int i = 0; i < reps; ++i) {
        if (rank == 0) {
          MPI_Send(buf.data(), int(size), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
          MPI_Recv(buf.data(), int(size), MPI_BYTE, peer, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buf.data(), int(size), MPI_BYTE, peer, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
          MPI_Send(buf.data(), int(size), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        }
      }
      return (now() - start) / reps / 2;
    };
    pingpong(8, 10);
    latency = pingpong(8, 1000);
    size_t big = size_t(8) << 20;
    bandwidth = double(big) / pingpong(big, 20);
  }
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (rank == 0) {
    char host[256] = "this machine";
    gethostname(host, sizeof host);
    char text[2048];
    std::snprintf(
        text, sizeof text,
        "{\n  \"name\": \"%s host backend (calibrated: 1 thread, %d MPI rank%s)\",\n"
        "  \"devices_per_node\": %ld,\n"
        "  \"peak_flops\": {\"fp32\": %.4g, \"bf16\": %.4g},\n"
        "  \"memory_bytes\": %.4g,\n  \"memory_bandwidth\": %.4g,\n"
        "  \"intra_node\": {\"bandwidth\": %.4g, \"latency\": %.4g},\n"
        "  \"inter_node\": {\"bandwidth\": %.4g, \"latency\": %.4g},\n"
        "  \"notes\": \"measured by loomrt-calibrate: sgemm 1024^3 on one "
        "thread, memcpy of 256 MiB, MPI ping-pong of 8 MiB and 8 bytes; one "
        "node, so inter_node repeats intra_node\"\n}\n",
        host, world, world == 1 ? "" : "s", sysconf(_SC_NPROCESSORS_ONLN),
        flops, flops, double(pages) * double(pageSize), memoryBandwidth,
        bandwidth, latency, bandwidth, latency);
    if (out == "-") {
      std::fputs(text, stdout);
    } else {
      std::FILE *f = std::fopen(out.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "loomrt-calibrate: error: cannot write '%s'\n",
                     out.c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::fputs(text, f);
      std::fclose(f);
    }
  }
  MPI_Finalize();
  return 0;
}
