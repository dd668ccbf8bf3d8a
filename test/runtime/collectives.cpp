//===- collectives.cpp - every collective on every group of a mesh ---------===//
//
// Usage: loomrt-collectives-test AXIS=N,... [FAIL-RANK MODE TIMEOUT]
// (under mpirun). With a failing rank, that rank exits with an error, kills
// itself or stops itself (MODE exit, kill or stop) just before the first
// all-reduce, and the others must give up within TIMEOUT seconds (MODE none:
// no rank fails by itself; the runtime's LOOMRT_FAULT hook may). For each
// non-empty set of mesh axes, runs every collective of the runtime on that
// group and checks the result against values this program computes itself
// from the mesh coordinates (not from the runtime's groups). Then checks the
// runtime's byte counters against each algorithm's formula and prints this
// rank's total, which the test compares with what a PMPI wrapper counted.
// Buffers are the backend's memory (device memory when built against the
// cuda backend, as loomrt-collectives-test-cuda), mirrored from host vectors.
//
//===----------------------------------------------------------------------===//

#include "loomrt/loomrt.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAIL %s\n", what.c_str());
  }
}

float f(int rank, int64_t i) { return 0.5f * float(rank + 1) + 0.25f * float(i % 7); }

/// Backend memory holding a host vector: uploaded when made, read back into
/// the vector and freed when it goes (after the collectives that use it).
class Mirror {
public:
  Mirror(loomrt_ctx *ctx, std::vector<float> &host)
      : ctx(ctx), host(host), bytes(int64_t(host.size() * sizeof(float))),
        dev(loomrt_alloc(ctx, bytes)) {
    loomrt_upload(ctx, dev, host.data(), bytes);
  }
  ~Mirror() {
    loomrt_download(ctx, host.data(), dev, bytes);
    loomrt_free(ctx, dev, bytes);
  }
  Mirror(const Mirror &) = delete;
  operator loomrt_buf *() const { return dev; }

private:
  loomrt_ctx *ctx;
  std::vector<float> &host;
  int64_t bytes;
  loomrt_buf *dev;
};

loomrt_ctx *context = nullptr;
/// A mirror that lives until the end of the full expression it is made in.
Mirror buf(std::vector<float> &v) { return Mirror(context, v); }

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--launch-info") {
    int32_t r, w, l;
    const char *launcher = loomrt_launch_info(&r, &w, &l);
    std::printf("launcher %s rank %d world %d local %d\n", launcher, r, w, l);
    return 0;
  }
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: %s AXIS=N,... [FAIL-RANK exit|kill|stop|none TIMEOUT]\n",
                 argv[0]);
    return 2;
  }
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::string spec = argv[1];
  for (size_t pos = 0; pos < spec.size();) {
    size_t comma = spec.find(',', pos), eq = spec.find('=', pos);
    if (comma == std::string::npos)
      comma = spec.size();
    names.push_back(spec.substr(pos, eq - pos));
    sizes.push_back(std::atoll(spec.substr(eq + 1, comma - eq - 1).c_str()));
    pos = comma + 1;
  }
  std::vector<const char *> cnames;
  for (auto &n : names)
    cnames.push_back(n.c_str());
  loomrt_ctx *ctx = loomrt_create();
  loomrt_init_mesh(ctx, int32_t(names.size()), cnames.data(), sizes.data());
  context = ctx;
  int rank = loomrt_rank(ctx), axes = int(sizes.size());
  if (argc == 5) {
    loomrt_set_timeout(ctx, std::atof(argv[4]));
    std::string mode = argv[3];
    if (mode != "none" && rank == std::atoi(argv[2])) {
      std::fprintf(stderr, "rank %d: failing (%s)\n", rank, mode.c_str());
      std::fflush(stderr);
      if (mode == "kill")
        raise(SIGKILL);
      if (mode == "stop")
        raise(SIGSTOP);
      std::exit(3);
    }
  }
  std::vector<int64_t> coords(axes);
  for (int a = axes - 1, rest = rank; a >= 0; --a) {
    coords[a] = rest % sizes[a];
    rest /= int(sizes[a]);
  }

  const int64_t n = 840; // divisible by every group size up to 8
  int64_t expectedTotal = 0;
  for (uint32_t mask = 1; mask < (1u << axes); ++mask) {
    // The group, computed here: ranks equal to this one outside `mask`,
    // ordered by their coordinates on `mask`.
    std::vector<int> members;
    int world = loomrt_world_size(ctx);
    for (int q = 0; q < world; ++q) {
      bool same = true;
      for (int a = axes - 1, rest = q; a >= 0; --a) {
        int64_t c = rest % sizes[a];
        rest /= int(sizes[a]);
        if (!(mask & (1u << a)) && c != coords[a])
          same = false;
      }
      if (same)
        members.push_back(q);
    }
    int g = int(std::find(members.begin(), members.end(), rank) - members.begin());
    int N = int(members.size());
    std::string where = "group " + std::to_string(mask) + " rank " + std::to_string(rank);
    expect(loomrt_group_size(ctx, mask) == N && loomrt_group_rank(ctx, mask) == g,
           where + ": group size and rank");

    for (int op = 0; op < 2; ++op) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i)
        x[i] = f(rank, i);
      loomrt_comm_all_reduce(ctx, mask, buf(x), n, LOOMRT_F32, op);
      bool ok = true;
      for (int64_t i = 0; i < n; ++i) {
        float want = op ? f(members.back(), i) : 0.0f;
        if (!op)
          for (int q : members)
            want += f(q, i);
        ok &= x[i] == want;
      }
      expect(ok, where + (op ? ": all_reduce max" : ": all_reduce sum"));
    }

    int64_t cpr = n / N;
    std::vector<float> in(n), out(cpr);
    for (int64_t i = 0; i < n; ++i)
      in[i] = f(rank, i);
    loomrt_comm_reduce_scatter(ctx, mask, buf(out), buf(in), cpr, LOOMRT_F32, 0);
    bool ok = true;
    for (int64_t j = 0; j < cpr; ++j) {
      float want = 0.0f;
      for (int q : members)
        want += f(q, g * cpr + j);
      ok &= out[j] == want;
    }
    expect(ok, where + ": reduce_scatter");

    std::vector<float> mine(cpr), all(n);
    for (int64_t j = 0; j < cpr; ++j)
      mine[j] = f(rank, j);
    loomrt_comm_all_gather(ctx, mask, buf(all), buf(mine), cpr, LOOMRT_F32);
    ok = true;
    for (int b = 0; b < N; ++b)
      for (int64_t j = 0; j < cpr; ++j)
        ok &= all[b * cpr + j] == f(members[b], j);
    expect(ok, where + ": all_gather");

    std::vector<float> send(n), recv(n);
    for (int b = 0; b < N; ++b)
      for (int64_t j = 0; j < cpr; ++j)
        send[b * cpr + j] = float(rank * 100 + b * 10 + j % 10);
    loomrt_comm_all_to_all(ctx, mask, buf(recv), buf(send), cpr, LOOMRT_F32);
    ok = true;
    for (int b = 0; b < N; ++b)
      for (int64_t j = 0; j < cpr; ++j)
        ok &= recv[b * cpr + j] == float(members[b] * 100 + g * 10 + j % 10);
    expect(ok, where + ": all_to_all");

    int root = N - 1;
    std::vector<float> data(n, -1.0f);
    if (g == root)
      for (int64_t i = 0; i < n; ++i)
        data[i] = f(rank, i);
    loomrt_comm_broadcast(ctx, mask, buf(data), n, LOOMRT_F32, root);
    ok = true;
    for (int64_t i = 0; i < n; ++i)
      ok &= data[i] == f(members[root], i);
    expect(ok, where + ": broadcast");

    int64_t p2p = 0;
    if (N % 2 == 0) {
      std::vector<float> msg(n, float(rank));
      if (g % 2 == 0) {
        loomrt_comm_send(ctx, mask, buf(msg), n, LOOMRT_F32, g + 1);
        p2p = n * 4;
      } else {
        loomrt_comm_recv(ctx, mask, buf(msg), n, LOOMRT_F32, g - 1);
        expect(msg[0] == float(members[g - 1]) && msg[n - 1] == float(members[g - 1]),
               where + ": send/recv");
      }
    }
    loomrt_comm_barrier(ctx, mask);

    // A receive in flight does not hold back a collective issued after it:
    // the odd members post their receive, everyone all-reduces, then the
    // even members send (a pipeline stage's transfer across its
    // collectives). Were transfers queued with the collectives, the odd
    // members' all-reduce would wait for a send that comes after it.
    int64_t crossed = 0;
    if (N % 2 == 0) {
      std::vector<float> msg(n, float(rank)), sum(n, 1.0f);
      {
        Mirror dmsg(ctx, msg), dsum(ctx, sum);
        loomrt_comm_event *pending = nullptr;
        if (g % 2 == 1)
          pending = loomrt_comm_recv_async(ctx, mask, dmsg, n, LOOMRT_F32, g - 1);
        loomrt_comm_all_reduce(ctx, mask, dsum, n, LOOMRT_F32, 0);
        if (g % 2 == 0) {
          loomrt_comm_send(ctx, mask, dmsg, n, LOOMRT_F32, g + 1);
          crossed = n * 4;
        } else {
          loomrt_comm_wait(ctx, pending);
        }
      }
      ok = sum[0] == float(N) && sum[n - 1] == float(N) &&
           (g % 2 == 0 || (msg[0] == float(members[g - 1]) &&
                           msg[n - 1] == float(members[g - 1])));
      expect(ok, where + ": a receive in flight across an all-reduce");
    }

    // Asynchronous forms: two collectives in flight while this thread
    // computes, then waited in the other order.
    std::vector<float> ar(n), gathered(n), piece(cpr);
    for (int64_t i = 0; i < n; ++i)
      ar[i] = f(rank, i);
    for (int64_t j = 0; j < cpr; ++j)
      piece[j] = f(rank, j + 1);
    double busy = 0;
    {
      Mirror dar(ctx, ar), dgathered(ctx, gathered), dpiece(ctx, piece);
      loomrt_comm_event *e1 =
          loomrt_comm_all_reduce_async(ctx, mask, dar, n, LOOMRT_F32, 0);
      loomrt_comm_event *e2 = loomrt_comm_all_gather_async(
          ctx, mask, dgathered, dpiece, cpr, LOOMRT_F32);
      for (int64_t i = 0; i < 100000; ++i)
        busy += std::sqrt(double(i));
      loomrt_comm_wait(ctx, e2);
      loomrt_comm_wait(ctx, e1);
    }
    ok = busy > 0;
    for (int64_t i = 0; i < n; ++i) {
      float want = 0.0f;
      for (int q : members)
        want += f(q, i);
      ok &= ar[i] == want;
    }
    for (int b = 0; b < N; ++b)
      for (int64_t j = 0; j < cpr; ++j)
        ok &= gathered[b * cpr + j] == f(members[b], j + 1);
    expect(ok, where + ": asynchronous all_reduce and all_gather");

    // Bytes by the algorithms' formulas.
    int64_t bytes = n * 4;
    int64_t formula[6] = {2 * (N - 1) * bytes / N, (N - 1) * cpr * 4,
                          (N - 1) * cpr * 4, (N - 1) * cpr * 4,
                          (N > 1 && (g - root + N) % N != N - 1) ? bytes : 0,
                          p2p + crossed};
    // Three all-reduces (sum, max, asynchronous; four with the one across
    // a receive) and two all-gathers ran.
    formula[0] = formula[0] * (N % 2 == 0 ? 4 : 3);
    formula[1] *= 2;
    for (int kind = 0; kind < 6; ++kind) {
      int64_t got = loomrt_bytes_sent(ctx, kind, mask);
      expect(got == formula[kind],
             where + ": bytes sent by " + loomrt_collective_name(kind) + " " +
                 std::to_string(got) + ", formula " + std::to_string(formula[kind]));
      expectedTotal += formula[kind];
    }
  }
  std::printf("rank %d sent %lld bytes (%d failures)\n", rank,
              (long long)expectedTotal, failures);
  std::fflush(stdout);
  loomrt_finalize(ctx);
  loomrt_destroy(ctx);
  return failures ? 1 : 0;
}
