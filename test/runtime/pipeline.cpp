//===- pipeline.cpp - a pipeline schedule run with synthetic stages --------===//
//
// Usage: loomrt-pipeline-test SCHEDULE PP MICRO-BATCHES VIRTUAL-STAGES UNIT-MS
// (under mpirun -n PP, with LOOMRT_TRACE set). Every rank builds the
// schedule as loomc does, then runs its actions with stages of fixed
// duration (a forward, a backward-input and a backward-weight part each
// take UNIT-MS over the virtual stages; a whole backward both parts),
// sending each forward's activations to the next stage and each backward's
// input gradient to the previous one through the runtime's point-to-point
// messages. Each action is a span on the trace, between two barriers, and
// the whole step is the span "step". Every transfer carries values that
// name its stage and micro-batch, checked on arrival. Each forward
// allocates its activations (runtime memory) until the backward, or the
// weight part of a split backward, frees them, so the runtime's peak of
// memory measures how many micro-batches a rank holds. Rank 0 prints the
// simulated bubble and peak of every rank, each rank its measured peak;
// the test compares them with what the traces and the peaks measure.
//
//===----------------------------------------------------------------------===//

#include "loomrt/loomrt.h"
#include "passes/Schedules.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

using namespace loom::pipeline;

namespace {

constexpr int64_t kElements = 256; // 1 KiB per transfer
constexpr int64_t kActivationBytes = 64 * 1024; // what a forward holds
constexpr uint32_t kPipelineGroup = 1; // the mesh's only axis, pp

int failures = 0;

/// What a transfer carries: the forward output of (stage, mb) is
/// 1000 mb + stage; the input gradient a backward of (stage, mb) sends
/// back is its negation.
float activation(int64_t stage, int64_t mb) { return 1000.0f * mb + stage; }

struct Message {
  loomrt_buf *buf;
  std::vector<float> host;
};

} // namespace

int main(int argc, char **argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s SCHEDULE PP MICRO-BATCHES VIRTUAL-STAGES "
                         "UNIT-MS\n", argv[0]);
    return 2;
  }
  int64_t pp = std::atoll(argv[2]), m = std::atoll(argv[3]),
          v = std::atoll(argv[4]);
  double unitMs = std::atof(argv[5]);
  loomrt_ctx *ctx = loomrt_create();
  const char *names[] = {"pp"};
  int64_t sizes[] = {pp};
  loomrt_init_mesh(ctx, 1, names, sizes);
  int rank = loomrt_rank(ctx);

  std::vector<std::string> warnings;
  auto schedule = buildSchedule(argv[1], pp, m, v, warnings);
  if (!schedule) {
    std::fprintf(stderr, "%s\n", llvm::toString(schedule.takeError()).c_str());
    return 1;
  }
  Costs costs = Costs::uniform(*schedule);
  auto sim = simulate(*schedule, costs);
  if (!sim) {
    std::fprintf(stderr, "%s\n", llvm::toString(sim.takeError()).c_str());
    return 1;
  }
  if (rank == 0)
    for (int64_t r = 0; r < pp; ++r)
      std::printf("simulated rank %lld bubble %.4f peak %lld\n", (long long)r,
                  sim->bubble(r), (long long)sim->peakActivations[r]);

  int64_t stages = schedule->numStages();
  // Transfers use host memory (a host backend buffer is host memory), so
  // that the runtime's peak counts activations only.
  std::vector<std::vector<float>> inFlight;
  auto send = [&](std::vector<loomrt_comm_event *> &events, float value,
                  int64_t peer) {
    inFlight.emplace_back(kElements, value);
    auto *buf = reinterpret_cast<loomrt_buf *>(inFlight.back().data());
    events.push_back(loomrt_comm_send_async(ctx, kPipelineGroup, buf,
                                            kElements, 0, int32_t(peer)));
  };
  auto receive = [&](float expected, int64_t peer, const Action &a) {
    std::vector<float> host(kElements);
    loomrt_comm_recv(ctx, kPipelineGroup,
                     reinterpret_cast<loomrt_buf *>(host.data()), kElements, 0,
                     int32_t(peer));
    for (float x : host)
      if (x != expected) {
        ++failures;
        std::fprintf(stderr, "FAIL rank %d, %s received %g, expected %g\n",
                     rank, a.str().c_str(), double(x), double(expected));
        break;
      }
  };
  auto work = [&](double units) {
    std::this_thread::sleep_for(
        std::chrono::duration<double, std::milli>(units * unitMs));
  };

  std::vector<loomrt_comm_event *> events;
  std::map<std::pair<int64_t, int64_t>, loomrt_buf *> held;
  int64_t baseline = loomrt_peak_bytes(ctx);
  inFlight.reserve(4 * schedule->order[rank].size());
  loomrt_comm_barrier(ctx, kPipelineGroup);
  loomrt_trace_span(ctx, "step", 1);
  for (const Action &a : schedule->order[rank]) {
    bool gradient = a.work == Work::Backward || a.work == Work::BackwardInput;
    // Receive what the action needs from another rank.
    if (a.work == Work::Forward && a.stage > 0 &&
        schedule->rankOf(a.stage - 1) != rank)
      receive(activation(a.stage - 1, a.microBatch),
              schedule->rankOf(a.stage - 1), a);
    if (gradient && a.stage + 1 < stages &&
        schedule->rankOf(a.stage + 1) != rank)
      receive(-activation(a.stage + 1, a.microBatch),
              schedule->rankOf(a.stage + 1), a);
    std::string name = a.str();
    loomrt_trace_span(ctx, name.c_str(), 1);
    work(costs.of(a));
    auto key = std::make_pair(a.stage, a.microBatch);
    if (a.work == Work::Forward) {
      held[key] = loomrt_alloc(ctx, kActivationBytes);
    } else if (a.work == Work::Backward || a.work == Work::BackwardWeight) {
      loomrt_free(ctx, held[key], kActivationBytes);
      held.erase(key);
    }
    loomrt_trace_span(ctx, name.c_str(), 0);
    if (a.work == Work::Forward && a.stage + 1 < stages &&
        schedule->rankOf(a.stage + 1) != rank)
      send(events, activation(a.stage, a.microBatch),
           schedule->rankOf(a.stage + 1));
    if (gradient && a.stage > 0 && schedule->rankOf(a.stage - 1) != rank)
      send(events, -activation(a.stage, a.microBatch),
           schedule->rankOf(a.stage - 1));
  }
  for (loomrt_comm_event *e : events)
    loomrt_comm_wait(ctx, e);
  loomrt_comm_barrier(ctx, kPipelineGroup);
  loomrt_trace_span(ctx, "step", 0);
  std::printf("measured rank %d peak %lld\n", rank,
              (long long)((loomrt_peak_bytes(ctx) - baseline) /
                          kActivationBytes));
  loomrt_finalize(ctx);
  loomrt_destroy(ctx);
  return failures ? 1 : 0;
}
