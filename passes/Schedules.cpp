//===- Schedules.cpp - pipeline schedules as data --------------------------===//

#include "passes/Schedules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

using namespace llvm;
using namespace loom::pipeline;

static char letter(Work work) {
  switch (work) {
  case Work::Forward:
    return 'F';
  case Work::Backward:
    return 'B';
  case Work::BackwardInput:
    return 'I';
  case Work::BackwardWeight:
    return 'W';
  }
  return '?';
}

std::string Action::str() const {
  return formatv("{0}{1}{2}", stage, letter(work), microBatch).str();
}

Expected<Action> loom::pipeline::parseAction(StringRef text) {
  StringRef s = text.trim();
  size_t at = s.find_first_of("FBIW");
  Action a;
  if (at == StringRef::npos || at == 0 ||
      s.take_front(at).getAsInteger(10, a.stage) ||
      s.drop_front(at + 1).getAsInteger(10, a.microBatch) || a.stage < 0 ||
      a.microBatch < 0)
    return createStringError(
        "'" + s.str() +
        "' is not an action (STAGE then F, B, I or W then MICRO-BATCH, e.g. "
        "1F3)");
  switch (s[at]) {
  case 'F':
    a.work = Work::Forward;
    break;
  case 'B':
    a.work = Work::Backward;
    break;
  case 'I':
    a.work = Work::BackwardInput;
    break;
  default:
    a.work = Work::BackwardWeight;
    break;
  }
  return a;
}

bool Schedule::splitsBackward() const {
  for (const auto &rank : order)
    for (const Action &a : rank)
      if (a.work == Work::BackwardInput)
        return true;
  return false;
}

//===----------------------------------------------------------------------===//
// Built-in schedules
//===----------------------------------------------------------------------===//

namespace {

Action forward(int64_t stage, int64_t mb) { return {stage, Work::Forward, mb}; }
Action backward(int64_t stage, int64_t mb) {
  return {stage, Work::Backward, mb};
}

/// 1F1B on one stage per rank: P - r - 1 warm-up forwards, then a forward
/// and a backward in turn, then the remaining backwards.
std::vector<Action> oneFOneB(int64_t p, int64_t m, int64_t r) {
  std::vector<Action> out;
  int64_t warm = std::min(p - r - 1, m);
  for (int64_t i = 0; i < warm; ++i)
    out.push_back(forward(r, i));
  for (int64_t i = 0; i < m - warm; ++i) {
    out.push_back(forward(r, warm + i));
    out.push_back(backward(r, i));
  }
  for (int64_t i = m - warm; i < m; ++i)
    out.push_back(backward(r, i));
  return out;
}

/// Megatron's interleaved 1F1B: virtual micro-batch k runs chunk
/// (k / P) mod V (forwards; backwards take the chunks in reverse) of
/// micro-batch (k / PV)·P + k mod P; rank r warms up with
/// 2(P - r - 1) + (V - 1)P of them.
std::vector<Action> interleaved(int64_t p, int64_t m, int64_t v, int64_t r) {
  int64_t total = m * v;
  auto microBatch = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
  auto fwd = [&](int64_t k) {
    return forward(((k / p) % v) * p + r, microBatch(k));
  };
  auto bwd = [&](int64_t k) {
    return backward((v - 1 - (k / p) % v) * p + r, microBatch(k));
  };
  std::vector<Action> out;
  int64_t warm = std::min(2 * (p - r - 1) + (v - 1) * p, total);
  for (int64_t k = 0; k < warm; ++k)
    out.push_back(fwd(k));
  for (int64_t i = 0; i < total - warm; ++i) {
    out.push_back(fwd(warm + i));
    out.push_back(bwd(i));
  }
  for (int64_t k = total - warm; k < total; ++k)
    out.push_back(bwd(k));
  return out;
}

/// ZB-H1 (Qi et al. 2024, the schedule with 1F1B's peak memory): 1F1B's
/// order with each backward split, rank r running the weight-gradient part
/// of micro-batch j right after the input-gradient part of micro-batch
/// j + r, and the rest at the end. Input gradients so travel back without
/// waiting for weight gradients, whose deferred work fills what would be
/// the cool-down bubble, and every rank holds at most P micro-batches'
/// activations, as the first rank of 1F1B does.
std::vector<Action> zeroBubbleH1(int64_t p, int64_t m, int64_t r) {
  std::vector<Action> out;
  int64_t nextW = 0;
  for (Action a : oneFOneB(p, m, r)) {
    if (a.work != Work::Backward) {
      out.push_back(a);
      continue;
    }
    out.push_back({r, Work::BackwardInput, a.microBatch});
    if (a.microBatch >= r)
      out.push_back({r, Work::BackwardWeight, nextW++});
  }
  while (nextW < m)
    out.push_back({r, Work::BackwardWeight, nextW++});
  return out;
}

} // namespace

Expected<Schedule>
loom::pipeline::buildSchedule(StringRef name, int64_t ranks,
                              int64_t microBatches, int64_t virtualStages,
                              std::vector<std::string> &warnings) {
  if (ranks < 1 || microBatches < 1 || virtualStages < 1)
    return createStringError(
        formatv("a pipeline needs at least one rank, micro-batch and stage "
                "per rank (got {0} ranks, {1} micro-batches, {2} virtual "
                "stages)",
                ranks, microBatches, virtualStages)
            .str());
  Schedule s;
  s.name = name.str();
  s.ranks = ranks;
  s.microBatches = microBatches;
  s.order.resize(ranks);
  bool isInterleaved = name == "interleaved";
  if (virtualStages > 1 && !isInterleaved)
    return createStringError(
        formatv("--virtual-stages={0} needs the interleaved schedule, not "
                "'{1}'",
                virtualStages, name)
            .str());
  if (isInterleaved) {
    if (microBatches % ranks)
      return createStringError(
          formatv("the interleaved schedule needs micro-batches in multiples "
                  "of the pipeline ranks: {0} micro-batches over {1} ranks "
                  "(use {2} or {3})",
                  microBatches, ranks, microBatches / ranks * ranks,
                  (microBatches / ranks + 1) * ranks)
              .str());
    s.virtualStages = virtualStages;
    for (int64_t r = 0; r < ranks; ++r)
      s.order[r] = virtualStages == 1 ? oneFOneB(ranks, microBatches, r)
                                      : interleaved(ranks, microBatches,
                                                    virtualStages, r);
    return s;
  }
  if (name == "gpipe") {
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t i = 0; i < microBatches; ++i)
        s.order[r].push_back(forward(r, i));
      for (int64_t i = 0; i < microBatches; ++i)
        s.order[r].push_back(backward(r, i));
    }
    return s;
  }
  if (name == "1f1b" || name == "zb") {
    if (microBatches < ranks)
      warnings.push_back(
          formatv("{0} with {1} micro-batches over {2} pipeline ranks never "
                  "reaches its steady state; use at least {2} micro-batches",
                  name, microBatches, ranks)
              .str());
    if (name == "zb") {
      for (int64_t r = 0; r < ranks; ++r)
        s.order[r] = zeroBubbleH1(ranks, microBatches, r);
      return s;
    }
    for (int64_t r = 0; r < ranks; ++r)
      s.order[r] = oneFOneB(ranks, microBatches, r);
    return s;
  }
  return createStringError("unknown pipeline schedule '" + name.str() +
                           "' (gpipe, 1f1b, interleaved, zb or a CSV file)");
}

//===----------------------------------------------------------------------===//
// CSV
//===----------------------------------------------------------------------===//

Expected<Schedule> loom::pipeline::parseScheduleCSV(StringRef text,
                                                    StringRef name) {
  Schedule s;
  s.name = name.str();
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  int64_t stages = 0, microBatches = 0;
  for (auto [row, line] : llvm::enumerate(lines)) {
    line = line.trim();
    if (line.empty())
      continue;
    std::vector<Action> actions;
    SmallVector<StringRef> cells;
    line.split(cells, ',');
    for (auto [column, cell] : llvm::enumerate(cells)) {
      if (cell.trim().empty())
        continue;
      Expected<Action> a = parseAction(cell);
      if (!a)
        return createStringError(formatv("{0}:{1}:{2}: {3}", name, row + 1,
                                         column + 1, toString(a.takeError()))
                                     .str());
      stages = std::max(stages, a->stage + 1);
      microBatches = std::max(microBatches, a->microBatch + 1);
      actions.push_back(*a);
    }
    s.order.push_back(std::move(actions));
  }
  s.ranks = s.order.size();
  if (s.ranks == 0)
    return createStringError(name.str() + ": the schedule lists no rank");
  if (stages % s.ranks)
    return createStringError(
        formatv("{0}: {1} stages do not divide over {2} ranks (stage s lives "
                "on rank s mod {2})",
                name, stages, s.ranks)
            .str());
  s.virtualStages = std::max<int64_t>(stages / s.ranks, 1);
  s.microBatches = microBatches;
  return s;
}

std::string loom::pipeline::printScheduleCSV(const Schedule &schedule) {
  std::string out;
  for (const auto &rank : schedule.order) {
    SmallVector<std::string> cells;
    for (const Action &a : rank)
      cells.push_back(a.str());
    out += join(cells, ",") + "\n";
  }
  return out;
}

Slots loom::pipeline::assignSlots(const Schedule &schedule) {
  Slots slots;
  bool split = schedule.splitsBackward();
  for (const auto &rank : schedule.order) {
    std::map<int64_t, std::vector<bool>> busy; // per stage
    std::map<std::pair<int64_t, int64_t>, int64_t> held;
    std::vector<int64_t> of;
    for (const Action &a : rank) {
      auto key = std::make_pair(a.stage, a.microBatch);
      std::vector<bool> &used = busy[a.stage];
      if (a.work == Work::Forward) {
        size_t free = 0;
        while (free < used.size() && used[free])
          ++free;
        if (free == used.size())
          used.push_back(false);
        used[free] = true;
        held[key] = int64_t(free);
        slots.count = std::max(slots.count, int64_t(used.size()));
      }
      auto it = held.find(key);
      // A backward before its forward is not a schedule the simulation
      // accepts; keep slot 0 so that the caller's check reports it.
      int64_t slot = it == held.end() ? 0 : it->second;
      of.push_back(slot);
      bool last = a.work == Work::Backward ||
                  (split && a.work == Work::BackwardWeight);
      if (last && it != held.end()) {
        used[size_t(slot)] = false;
        held.erase(it);
      }
    }
    slots.of.push_back(std::move(of));
  }
  return slots;
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

Costs Costs::uniform(const Schedule &schedule) {
  Costs c;
  double each = 1.0 / double(schedule.virtualStages);
  c.forward.assign(schedule.numStages(), each);
  c.backwardInput.assign(schedule.numStages(), each);
  c.backwardWeight.assign(schedule.numStages(), each);
  return c;
}

double Costs::of(const Action &a) const {
  if (!actions.empty())
    if (auto it = actions.find(a.str()); it != actions.end())
      return it->second;
  switch (a.work) {
  case Work::Forward:
    return forward[a.stage];
  case Work::Backward:
    return backwardInput[a.stage] + backwardWeight[a.stage];
  case Work::BackwardInput:
    return backwardInput[a.stage];
  case Work::BackwardWeight:
    return backwardWeight[a.stage];
  }
  return 0;
}

double Simulation::bubble(int64_t rank) const {
  return span > 0 ? (span - busy[rank]) / span : 0;
}

double Simulation::maxBubble() const {
  double worst = 0;
  for (size_t r = 0; r < busy.size(); ++r)
    worst = std::max(worst, bubble(r));
  return worst;
}

namespace {
/// The end times of the actions run so far.
struct Done {
  std::map<std::tuple<int64_t, Work, int64_t>, double> at;

  std::optional<double> of(int64_t stage, Work work, int64_t mb) const {
    auto it = at.find({stage, work, mb});
    if (it == at.end())
      return std::nullopt;
    return it->second;
  }
  /// When the input gradient of (stage, mb) exists: its full backward or
  /// its backward-input part.
  std::optional<double> gradient(int64_t stage, int64_t mb) const {
    if (auto b = of(stage, Work::Backward, mb))
      return b;
    return of(stage, Work::BackwardInput, mb);
  }
};

/// The actions `a` needs first, with when each finished (none if not yet).
SmallVector<std::pair<Action, std::optional<double>>>
inputsOf(const Action &a, int64_t stages, const Done &done) {
  SmallVector<std::pair<Action, std::optional<double>>> in;
  switch (a.work) {
  case Work::Forward:
    if (a.stage > 0)
      in.push_back({forward(a.stage - 1, a.microBatch),
                    done.of(a.stage - 1, Work::Forward, a.microBatch)});
    break;
  case Work::Backward:
  case Work::BackwardInput:
    in.push_back({forward(a.stage, a.microBatch),
                  done.of(a.stage, Work::Forward, a.microBatch)});
    if (a.stage + 1 < stages)
      in.push_back({backward(a.stage + 1, a.microBatch),
                    done.gradient(a.stage + 1, a.microBatch)});
    break;
  case Work::BackwardWeight:
    in.push_back({{a.stage, Work::BackwardInput, a.microBatch},
                  done.of(a.stage, Work::BackwardInput, a.microBatch)});
    break;
  }
  return in;
}

/// Every (stage, micro-batch) runs its forward and its backward (whole, or
/// as input and weight parts) once, on the rank that holds the stage.
Error checkComplete(const Schedule &s) {
  int64_t stages = s.numStages();
  std::map<std::tuple<int64_t, Work, int64_t>, int64_t> count;
  for (auto [r, rank] : llvm::enumerate(s.order))
    for (const Action &a : rank) {
      if (a.stage >= stages || a.microBatch >= s.microBatches)
        return createStringError(
            formatv("rank {0} runs {1}, outside {2} stages and {3} "
                    "micro-batches",
                    r, a.str(), stages, s.microBatches)
                .str());
      if (s.rankOf(a.stage) != int64_t(r))
        return createStringError(
            formatv("rank {0} runs {1}, but stage {2} lives on rank {3}", r,
                    a.str(), a.stage, s.rankOf(a.stage))
                .str());
      if (++count[{a.stage, a.work, a.microBatch}] > 1)
        return createStringError(
            formatv("rank {0} runs {1} twice", r, a.str()).str());
    }
  for (int64_t st = 0; st < stages; ++st)
    for (int64_t mb = 0; mb < s.microBatches; ++mb) {
      auto n = [&](Work w) { return count[{st, w, mb}]; };
      if (!n(Work::Forward))
        return createStringError(
            formatv("micro-batch {0} of stage {1} has no forward ({2} is "
                    "missing on rank {3})",
                    mb, st, forward(st, mb).str(), s.rankOf(st))
                .str());
      bool whole = n(Work::Backward), input = n(Work::BackwardInput),
           weight = n(Work::BackwardWeight);
      if (whole && (input || weight))
        return createStringError(
            formatv("micro-batch {0} of stage {1} runs both a whole backward "
                    "and a split one",
                    mb, st)
                .str());
      if (!whole && !(input && weight))
        return createStringError(
            formatv("micro-batch {0} of stage {1} has no {2} (rank {3})", mb,
                    st,
                    input ? "backward-weight part (W)"
                          : (weight ? "backward-input part (I)"
                                    : "backward"),
                    s.rankOf(st))
                .str());
    }
  return Error::success();
}
/// Transfers between ranks match in order (MPI's non-overtaking messages
/// and NCCL's per-pair order): what rank a sends rank b, in a's order,
/// must be what b receives from a, in b's order. A forward sends its
/// activations to the next stage, which receives them before its forward;
/// a backward (or its input part) sends the input gradient to the previous
/// stage, which receives it before its own.
Error checkTransferOrder(const Schedule &s) {
  int64_t stages = s.numStages();
  std::map<std::pair<int64_t, int64_t>, std::vector<Action>> sent, received;
  for (auto [r, rank] : llvm::enumerate(s.order))
    for (const Action &a : rank) {
      bool isGradient =
          a.work == Work::Backward || a.work == Work::BackwardInput;
      if (a.work == Work::Forward && a.stage + 1 < stages &&
          s.rankOf(a.stage + 1) != int64_t(r))
        sent[{r, s.rankOf(a.stage + 1)}].push_back(a);
      if (isGradient && a.stage > 0 && s.rankOf(a.stage - 1) != int64_t(r))
        sent[{r, s.rankOf(a.stage - 1)}].push_back(
            {a.stage, Work::Backward, a.microBatch});
      // What this action receives: the sender's action.
      if (a.work == Work::Forward && a.stage > 0 &&
          s.rankOf(a.stage - 1) != int64_t(r))
        received[{s.rankOf(a.stage - 1), r}].push_back(
            forward(a.stage - 1, a.microBatch));
      if (isGradient && a.stage + 1 < stages &&
          s.rankOf(a.stage + 1) != int64_t(r))
        received[{s.rankOf(a.stage + 1), r}].push_back(
            {a.stage + 1, Work::Backward, a.microBatch});
    }
  for (auto &[pair, sends] : sent) {
    const std::vector<Action> &recvs = received[pair];
    for (size_t i = 0; i < std::min(sends.size(), recvs.size()); ++i)
      if (!(sends[i] == recvs[i]))
        return createStringError(
            formatv("rank {0} sends rank {1} the output of {2} as its "
                    "transfer {3}, but rank {1} expects the output of {4} "
                    "there (transfers between two ranks arrive in the "
                    "order they are sent)",
                    pair.first, pair.second, sends[i].str(), i + 1,
                    recvs[i].str())
                .str());
  }
  return Error::success();
}
} // namespace

Expected<Simulation> loom::pipeline::simulate(const Schedule &schedule,
                                              const Costs &costs) {
  if (Error e = checkComplete(schedule))
    return std::move(e);
  if (Error e = checkTransferOrder(schedule))
    return std::move(e);
  int64_t ranks = schedule.ranks, stages = schedule.numStages();
  Simulation sim;
  sim.busy.assign(ranks, 0);
  sim.spans.resize(ranks);
  sim.peakActivations.assign(ranks, 0);
  Done done;
  std::vector<size_t> next(ranks, 0);
  std::vector<double> freeAt(ranks, 0);
  std::vector<int64_t> held(ranks, 0);
  int64_t firstStageHeld = 0;
  while (true) {
    bool progress = false, finished = true;
    for (int64_t r = 0; r < ranks; ++r) {
      const auto &order = schedule.order[r];
      while (next[r] < order.size()) {
        const Action &a = order[next[r]];
        double start = freeAt[r];
        bool ready = true;
        for (auto &[input, at] : inputsOf(a, stages, done)) {
          if (!at) {
            ready = false;
            break;
          }
          start = std::max(start, *at);
        }
        if (!ready)
          break;
        double end = start + costs.of(a);
        done.at[{a.stage, a.work, a.microBatch}] = end;
        sim.spans[r].push_back({a, start, end});
        sim.busy[r] += end - start;
        sim.span = std::max(sim.span, end);
        freeAt[r] = end;
        // Activations live from the forward to the backward (or its
        // weight part) that frees them.
        int64_t delta = a.work == Work::Forward ? 1
                        : (a.work == Work::Backward ||
                           a.work == Work::BackwardWeight)
                            ? -1
                            : 0;
        held[r] += delta;
        sim.peakActivations[r] = std::max(sim.peakActivations[r], held[r]);
        if (a.stage == 0) {
          firstStageHeld += delta;
          sim.firstStagePeak = std::max(sim.firstStagePeak, firstStageHeld);
        }
        ++next[r];
        progress = true;
      }
      if (next[r] < order.size())
        finished = false;
    }
    if (finished)
      return sim;
    if (progress)
      continue;
    // Every rank with work left waits on an action that has not run.
    std::string why = "the schedule cannot complete:";
    for (int64_t r = 0; r < ranks; ++r) {
      if (next[r] >= schedule.order[r].size())
        continue;
      const Action &a = schedule.order[r][next[r]];
      for (auto &[input, at] : inputsOf(a, stages, done))
        if (!at) {
          why += formatv(" rank {0} waits to run {1}, which needs {2} (rank "
                         "{3});",
                         r, a.str(), input.str(), schedule.rankOf(input.stage))
                     .str();
          break;
        }
    }
    why.pop_back();
    return createStringError(why);
  }
}

//===----------------------------------------------------------------------===//
// Picture
//===----------------------------------------------------------------------===//

std::string loom::pipeline::drawSVG(const Schedule &schedule,
                                    const Simulation &sim) {
  constexpr double unit = 48, row = 28, left = 64, top = 28;
  double width = left + sim.span * unit + 16;
  double height = top + row * schedule.ranks + 36;
  std::string out = formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" font-family=\"monospace\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"4\" y=\"16\">{2}: {3} ranks, {4} stages, {5} micro-batches; "
      "bubble {6:P1} (worst rank)</text>\n",
      width, height, schedule.name, schedule.ranks, schedule.numStages(),
      schedule.microBatches, sim.maxBubble());
  auto colour = [](Work w) {
    switch (w) {
    case Work::Forward:
      return "#7aa6d8";
    case Work::Backward:
      return "#86c48a";
    case Work::BackwardInput:
      return "#b8dfa0";
    case Work::BackwardWeight:
      return "#e8b16a";
    }
    return "#cccccc";
  };
  for (int64_t r = 0; r < schedule.ranks; ++r) {
    double y = top + r * row;
    out += formatv("<text x=\"4\" y=\"{0}\">rank {1}</text>\n", y + 17, r);
    for (const Span &s : sim.spans[r]) {
      double x = left + s.start * unit, w = (s.end - s.start) * unit;
      out += formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
                     "fill=\"{4}\" stroke=\"#333\" stroke-width=\"0.5\">"
                     "<title>{5}: {6} to {7}</title></rect>\n",
                     x, y + 2, w, row - 4, colour(s.action.work),
                     s.action.str(), s.start, s.end);
      out += formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">{2}"
                     "</text>\n",
                     x + w / 2, y + 17,
                     schedule.virtualStages > 1
                         ? s.action.str()
                         : std::to_string(s.action.microBatch));
    }
  }
  double y = top + row * schedule.ranks + 20;
  double x = left;
  for (auto [w, label] :
       {std::pair{Work::Forward, "forward"}, {Work::Backward, "backward"},
        {Work::BackwardInput, "backward-input"},
        {Work::BackwardWeight, "backward-weight"}}) {
    out += formatv("<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"12\" "
                   "fill=\"{2}\"/><text x=\"{3}\" y=\"{4}\">{5}</text>\n",
                   x, y - 10, colour(w), x + 16, y, label);
    x += 130;
  }
  out += "</svg>\n";
  return out;
}
