//===- Schedules.h - pipeline schedules as data ----------------*- C++ -*-===//
//
// A pipeline schedule is, per pipeline rank, the ordered list of compute
// actions it runs: (stage, work, micro-batch), work being a forward, a full
// backward, or a backward split into its input-gradient and weight-gradient
// parts (zero-bubble schedules, after Qi et al. 2024). Stage s lives on
// pipeline rank s mod P (the looped placement of interleaved 1F1B: with V
// virtual stages, rank r holds stages r, r + P, ..., r + (V-1)P). Actions
// print as torch.distributed.pipelining prints them, "1F3" (stage 1,
// forward, micro-batch 3), and a schedule reads from and writes to a CSV
// with one row of actions per rank, so a user's schedule drops in.
//
// Schedules are checked (every micro-batch's forward and backward on every
// stage, on the rank that holds the stage, once) and simulated: each
// action starts when its rank is free and its inputs exist (the previous
// stage's forward, the next stage's backward), which gives the step span,
// each rank's bubble ((span - busy) / span) and its peak of held
// activations, and proves the order cannot deadlock.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_SCHEDULES_H
#define LOOM_PASSES_SCHEDULES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace loom::pipeline {

enum class Work : uint8_t { Forward, Backward, BackwardInput, BackwardWeight };

/// One compute action of a rank.
struct Action {
  int64_t stage = 0;
  Work work = Work::Forward;
  int64_t microBatch = 0;

  /// "1F3": stage, F/B/I/W, micro-batch.
  std::string str() const;
  bool operator==(const Action &o) const {
    return stage == o.stage && work == o.work && microBatch == o.microBatch;
  }
};

/// Parses "1F3"; fails with the reason.
llvm::Expected<Action> parseAction(llvm::StringRef text);

struct Schedule {
  /// gpipe, 1f1b, interleaved, zb, or the CSV file's name.
  std::string name;
  /// Pipeline ranks (the mesh's pp axis).
  int64_t ranks = 1;
  /// Stages per rank.
  int64_t virtualStages = 1;
  int64_t microBatches = 1;
  /// Per pipeline rank, its actions in order.
  std::vector<std::vector<Action>> order;

  int64_t numStages() const { return ranks * virtualStages; }
  /// The pipeline rank that holds `stage`.
  int64_t rankOf(int64_t stage) const { return stage % ranks; }
  /// Whether the backward is split into input and weight parts.
  bool splitsBackward() const;
};

/// Builds a built-in schedule for `ranks` pipeline ranks: `gpipe` (all
/// forwards, then all backwards), `1f1b` (warm-up forwards, then one
/// forward and one backward in turn), `interleaved` (1F1B over
/// `virtualStages` stages per rank, Megatron's order; needs micro-batches
/// a multiple of the ranks), `zb` (ZB-H1: 1F1B with the backward split and
/// weight gradients deferred into what would be bubbles, at most `ranks`
/// micro-batches' activations held on any rank). Impossible requests are
/// errors; `warnings` receives what works but wastes (1F1B with fewer
/// micro-batches than ranks).
llvm::Expected<Schedule> buildSchedule(llvm::StringRef name, int64_t ranks,
                                       int64_t microBatches,
                                       int64_t virtualStages,
                                       std::vector<std::string> &warnings);

/// Reads a schedule from CSV: row r lists rank r's actions. The stage
/// count and micro-batch count are the largest seen plus one; the stages
/// must divide evenly over the rows.
llvm::Expected<Schedule> parseScheduleCSV(llvm::StringRef text,
                                          llvm::StringRef name);

/// The CSV `parseScheduleCSV` reads.
std::string printScheduleCSV(const Schedule &schedule);

/// Where a rank keeps what a micro-batch's forward leaves for its
/// backward: each stage's micro-batches in flight take the lowest free of
/// `count` slots at their forward and free it after their last backward
/// action (B, or W where the backward is split), so a rank keeps `count`
/// micro-batches' worth, not one per micro-batch. `of[r][k]` is the slot
/// of rank r's action k.
struct Slots {
  int64_t count = 0;
  std::vector<std::vector<int64_t>> of;
};
Slots assignSlots(const Schedule &schedule);

/// The cost of each kind of work per stage, in any unit (a full backward
/// costs its input and weight parts together).
struct Costs {
  std::vector<double> forward, backwardInput, backwardWeight;
  /// Durations of single actions ("1F3"), which override their stage's
  /// cost: a run's own timings (loom-schedule --durations).
  std::map<std::string, double> actions;
  /// Every stage the same: a rank's V stages together cost 1 forward, 1
  /// backward-input and 1 backward-weight.
  static Costs uniform(const Schedule &schedule);
  double of(const Action &a) const;
};

/// An action placed in time by the simulation.
struct Span {
  Action action;
  double start = 0, end = 0;
};

struct Simulation {
  /// From the first action's start to the last one's end.
  double span = 0;
  /// Per rank: time spent computing.
  std::vector<double> busy;
  /// Per rank: its actions in time.
  std::vector<std::vector<Span>> spans;
  /// Per rank: the most stage micro-batches whose activations it holds at
  /// once (from a forward to the backward, or the weight part of a split
  /// backward, that frees them).
  std::vector<int64_t> peakActivations;
  /// The most micro-batches' activations stage 0 holds at once.
  int64_t firstStagePeak = 0;

  /// (span - busy) / span of `rank`.
  double bubble(int64_t rank) const;
  /// The largest of the ranks' bubbles.
  double maxBubble() const;
};

/// Checks that every micro-batch runs forward and backward once on every
/// stage, on the stage's rank, then runs the schedule; an order that
/// cannot complete is an error naming each waiting rank, its action and
/// the action it waits for.
llvm::Expected<Simulation> simulate(const Schedule &schedule,
                                    const Costs &costs);

/// The simulated timeline as an SVG picture: one row per rank, one box per
/// action (forward, backward, backward-input and backward-weight in their
/// own colours), labelled with the micro-batch.
std::string drawSVG(const Schedule &schedule, const Simulation &simulation);

} // namespace loom::pipeline

#endif // LOOM_PASSES_SCHEDULES_H
