// Unit checks of the runtime's pure helpers, run by unit.test; with
// `bf16 IN OUT`, narrows the floats of file IN to bf16 as the runtime does
// and writes the bits and their widening back (bf16.test checks them);
// with `attention f32|bf16 IN OUT`, runs FlashAttention.h's rows, forward
// and backward, on the heads of file IN (attention.test checks them).
#include "Bf16.h"
#include "FlashAttention.h"
#include "Internal.h"
#include "Stall.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

using loomrt::chooseDevice;
using loomrt::findStalledRank;
using loomrt::WaitAnswer;

static int failures = 0;
static void expect(bool ok, const char *what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

/// OUT gets, per float of IN, the bf16 bits (uint16) and then, after all
/// of them, each bf16 widened back (float).
static int roundFile(const char *in, const char *out) {
  std::ifstream input(in, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(input)), {});
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  std::vector<uint16_t> narrow;
  std::vector<float> wide;
  for (float v : values) {
    narrow.push_back(loomrt::floatToBf16(v));
    wide.push_back(loomrt::bf16ToFloat(narrow.back()));
  }
  std::ofstream output(out, std::ios::binary);
  output.write(reinterpret_cast<const char *>(narrow.data()),
               std::streamsize(narrow.size() * sizeof(uint16_t)));
  output.write(reinterpret_cast<const char *>(wide.data()),
               std::streamsize(wide.size() * sizeof(float)));
  return output ? 0 : 1;
}

/// IN: int64 heads, s, d, causal, then q, k, v and dO as float32 (heads x
/// s x d each). OUT: out, dq, dk and dv as float32, computed by the
/// FlashAttention.h rows from storage of `T` (bf16: the inputs narrowed
/// first, each result narrowed once), widened back.
template <class T, class Narrow, class Widen>
static int attentionFile(const char *in, const char *out, Narrow narrow,
                         Widen widen) {
  std::ifstream input(in, std::ios::binary);
  int64_t dims[4];
  input.read(reinterpret_cast<char *>(dims), sizeof dims);
  int64_t heads = dims[0], s = dims[1], d = dims[2];
  bool causal = dims[3] != 0;
  if (!input || d > loomrt::flash::kMaxHeadDim)
    return 1;
  int64_t n = heads * s * d;
  std::vector<float> values(4 * size_t(n));
  input.read(reinterpret_cast<char *>(values.data()),
             std::streamsize(values.size() * sizeof(float)));
  if (!input)
    return 1;
  std::vector<T> stored(values.size());
  for (size_t e = 0; e < values.size(); ++e)
    stored[e] = narrow(values[e]);
  const T *q = stored.data(), *k = q + n, *v = k + n, *grad = v + n;
  std::vector<T> results(4 * size_t(n));
  T *o = results.data(), *dq = o + n, *dk = dq + n, *dv = dk + n;
  auto load = [&](const T *x, int64_t e) { return widen(x[e]); };
  auto store = [&](T *x, int64_t e, float value) { x[e] = narrow(value); };
  float scale = float(1.0 / std::sqrt(double(d)));
  std::vector<float> acc(static_cast<size_t>(2 * d));
  std::vector<loomrt::flash::RowStats> stats(static_cast<size_t>(s));
  for (int64_t h = 0; h < heads; ++h) {
    int64_t at = h * s * d;
    for (int64_t i = 0; i < s; ++i) {
      loomrt::flash::attentionRow(o + at, q + at, k + at, v + at, s, d, i,
                                  causal, scale, load, store, acc.data());
      stats[size_t(i)] = loomrt::flash::queryGradRow(
          dq + at, q + at, k + at, v + at, grad + at, s, d, i, causal, scale,
          load, store, acc.data());
    }
    for (int64_t j = 0; j < s; ++j)
      loomrt::flash::keyGradRow(dk + at, dv + at, q + at, k + at, v + at,
                                grad + at, stats.data(), s, d, j, causal,
                                scale, load, store, acc.data(),
                                acc.data() + d);
  }
  std::vector<float> wide(results.size());
  for (size_t e = 0; e < results.size(); ++e)
    wide[e] = widen(results[e]);
  std::ofstream output(out, std::ios::binary);
  output.write(reinterpret_cast<const char *>(wide.data()),
               std::streamsize(wide.size() * sizeof(float)));
  return output ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && std::string(argv[1]) == "bf16")
    return roundFile(argv[2], argv[3]);
  if (argc == 5 && std::string(argv[1]) == "attention") {
    if (std::string(argv[2]) == "bf16")
      return attentionFile<uint16_t>(
          argv[3], argv[4], [](float x) { return loomrt::floatToBf16(x); },
          [](uint16_t x) { return loomrt::bf16ToFloat(x); });
    return attentionFile<float>(
        argv[3], argv[4], [](float x) { return x; }, [](float x) { return x; });
  }
  // srun --gpus-per-task=1: each task sees one device, whatever its local
  // rank (every task but a node's first used to fail).
  expect(chooseDevice(1, 0) == 0, "one visible device, local rank 0");
  expect(chooseDevice(1, 3) == 0, "one visible device, local rank 3");
  // mpirun on a node of 8 GPUs: the local rank picks its device.
  expect(chooseDevice(8, 0) == 0, "8 devices, local rank 0");
  expect(chooseDevice(8, 5) == 5, "8 devices, local rank 5");
  // More ranks than devices on a node: refused.
  expect(chooseDevice(4, 4) == -1, "4 devices, local rank 4");
  expect(chooseDevice(2, 7) == -1, "2 devices, local rank 7");

  // Which rank a timed-out wait is stuck behind, from scripted answers
  // (ranks that do not answer are absent from the script).
  auto search = [](int self, int peer, std::vector<int> own,
                   std::map<int, WaitAnswer> script) {
    return findStalledRank(
        self, peer, own,
        [&](int r) -> std::optional<WaitAnswer> {
          auto it = script.find(r);
          if (it == script.end())
            return std::nullopt;
          return it->second;
        },
        [](int r) { return "rank " + std::to_string(r); });
  };
  // Rank 1 was stopped, rank 3 timed out on it and named it, and then the
  // launcher's SIGCONT resumed rank 1, which now waits for rank 3. Rank 0,
  // reporting later, used to read "0 -> 1 -> 3 -> 1" as a cycle.
  {
    auto v = search(0, 1, {1}, {{1, {{3}, false, -1}}, {3, {{1}, true, 1}}});
    expect(v.blamed == 1, "a resumed rank: the first verdict is repeated");
    expect(v.verdict == "rank 1 does not answer: it failed or stalls (rank 3, "
                        "which timed out too, found it)",
           v.verdict.c_str());
    expect(v.chain == "rank 1, which waits for rank 3", v.chain.c_str());
  }
  // The same before rank 3 has named anyone: rank 3 gave up on rank 1.
  {
    auto v = search(0, 1, {1}, {{1, {{3}, false, -1}}, {3, {{1}, true, -1}}});
    expect(v.blamed == 1, "a resumed rank, no verdict yet: blamed");
  }
  // Rank 1 held its first wait back until rank 3, timed out on it, asked
  // it what it waits for; it now waits for rank 3, a wait that began after
  // rank 3 timed out (LOOMRT_FAULT=late-first-wait, failures.test). The
  // search comes back to rank 3 itself: not a cycle, rank 1 went on late.
  {
    auto v = search(3, 1, {1}, {{1, {{3}, false, -1, true}}});
    expect(v.blamed == 1, "a rank that went on late: blamed");
    expect(v.verdict == "rank 1 stalled: it began waiting only after rank 3 "
                        "timed out (it went on late)",
           v.verdict.c_str());
  }
  // Two threads of rank 2 wait: the caller's on rank 3 (stopped), the
  // communication thread's on rank 0. One shared record showed one or
  // the other; both are followed, and rank 3 is found.
  {
    auto v = search(0, 2, {2}, {{2, {{0, 3}, false, -1}}});
    expect(v.blamed == 3, "two threads' waits: the stopped rank is found");
    expect(v.verdict == "rank 3 does not answer: it failed or stalls",
           v.verdict.c_str());
  }
  // A real cycle of waits among ranks that all still wait.
  {
    auto v = search(0, 1, {1}, {{1, {{2}, false, -1}}, {2, {{0}, false, -1}}});
    expect(v.blamed == -1 &&
               v.verdict == "the ranks wait for each other in a cycle",
           "a real cycle is still one");
  }
  // A rank that waits for no one is slow, or stuck outside communication.
  {
    auto v = search(0, 1, {1}, {{1, {{}, false, -1}}});
    expect(v.blamed == 1 && v.verdict.find("waits for no rank") !=
                                std::string::npos,
           "waits for no rank");
  }
  if (!failures)
    std::printf("unit: ok\n");
  return failures ? 1 : 0;
}
