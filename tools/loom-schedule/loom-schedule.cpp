//===- loom-schedule.cpp - print, check, simulate and draw schedules
//-------===//
//
// loom-schedule --schedule=gpipe|1f1b|interleaved|zb|FILE.csv --pp=P
//               --micro-batches=M [--virtual-stages=V] [--costs=F,I,W]
//               [--emit=text|csv] [--svg=FILE]
//
// Builds (or reads) a pipeline schedule, checks it, simulates it with the
// given per-stage costs and prints each rank's actions, the step span, each
// rank's bubble and peak of held activations; --emit=csv writes the
// schedule back in the CSV that --schedule reads, --svg draws the timeline.
// The schedules are those `loomc --schedule` uses.
//
//===----------------------------------------------------------------------===//

#include "passes/Schedules.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom::pipeline;

static cl::OptionCategory scheduleCategory("loom-schedule options");

static cl::opt<std::string>
    scheduleName("schedule",
                 cl::desc("gpipe, 1f1b, interleaved, zb, or a CSV file with "
                          "one row of actions (e.g. 1F3) per pipeline rank"),
                 cl::init("1f1b"), cl::cat(scheduleCategory));
static cl::opt<int64_t> pp("pp", cl::desc("Pipeline ranks"), cl::init(4),
                           cl::cat(scheduleCategory));
static cl::opt<int64_t> microBatches("micro-batches",
                                     cl::desc("Micro-batches per step"),
                                     cl::init(8), cl::cat(scheduleCategory));
static cl::opt<int64_t> virtualStages("virtual-stages",
                                      cl::desc("Stages per rank (interleaved)"),
                                      cl::init(1), cl::cat(scheduleCategory));
static cl::opt<std::string>
    costSpec("costs",
             cl::desc("Per-stage forward, backward-input and backward-weight "
                      "costs: F,I,W for every stage, or F,I,W;F,I,W;... one "
                      "triple per stage (default 1,1,1 per rank, split over "
                      "its virtual stages)"),
             cl::cat(scheduleCategory));
static cl::opt<std::string> durationsFile(
    "durations",
    cl::desc("A file of measured action durations, one 'action duration' "
             "per line ('1F3 2417.5'), which override --costs for those "
             "actions (a run's own timings, as its trace gives them)"),
    cl::cat(scheduleCategory));
static cl::opt<std::string> emit("emit", cl::desc("text or csv"),
                                 cl::init("text"), cl::cat(scheduleCategory));
static cl::opt<std::string> svg("svg",
                                cl::desc("Write the simulated timeline as SVG"),
                                cl::cat(scheduleCategory));

static int fail(const Twine &message) {
  WithColor::error(errs(), "loom-schedule") << message << "\n";
  return 1;
}

/// Parses --costs into `costs` for `stages` stages.
static Error parseCosts(StringRef spec, int64_t stages, Costs &costs) {
  SmallVector<StringRef> triples;
  spec.split(triples, ';');
  if (triples.size() != 1 && int64_t(triples.size()) != stages)
    return createStringError(
        formatv("--costs gives {0} stages' costs; the schedule has {1} "
                "stages (give one F,I,W for all, or one per stage)",
                triples.size(), stages)
            .str());
  costs.forward.clear();
  costs.backwardInput.clear();
  costs.backwardWeight.clear();
  for (int64_t s = 0; s < stages; ++s) {
    StringRef triple = triples[triples.size() == 1 ? 0 : s];
    SmallVector<StringRef> parts;
    triple.split(parts, ',');
    double v[3];
    if (parts.size() != 3)
      return createStringError("--costs: '" + triple.str() + "' is not F,I,W");
    for (int i = 0; i < 3; ++i)
      if (parts[i].trim().getAsDouble(v[i]) || v[i] < 0)
        return createStringError("--costs: '" + parts[i].str() +
                                 "' is not a cost (a number >= 0)");
    costs.forward.push_back(v[0]);
    costs.backwardInput.push_back(v[1]);
    costs.backwardWeight.push_back(v[2]);
  }
  return Error::success();
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(scheduleCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "Loom pipeline schedules: print, check, "
                              "simulate, draw\n");
  Expected<Schedule> schedule = [&]() -> Expected<Schedule> {
    if (StringRef(scheduleName).ends_with(".csv")) {
      auto file = MemoryBuffer::getFile(scheduleName);
      if (!file)
        return createStringError("cannot read '" + scheduleName +
                                 "': " + file.getError().message());
      return parseScheduleCSV((*file)->getBuffer(), scheduleName);
    }
    std::vector<std::string> warnings;
    Expected<Schedule> s =
        buildSchedule(scheduleName, pp, microBatches, virtualStages, warnings);
    for (const std::string &w : warnings)
      WithColor::warning(errs(), "loom-schedule") << w << "\n";
    return s;
  }();
  if (!schedule)
    return fail(toString(schedule.takeError()));
  Costs costs = Costs::uniform(*schedule);
  if (!costSpec.empty())
    if (Error e = parseCosts(costSpec, schedule->numStages(), costs))
      return fail(toString(std::move(e)));
  if (!durationsFile.empty()) {
    auto file = MemoryBuffer::getFile(durationsFile);
    if (!file)
      return fail("cannot read '" + durationsFile +
                  "': " + file.getError().message());
    SmallVector<StringRef> lines;
    (*file)->getBuffer().split(lines, '\n', -1, false);
    for (auto [n, line] : llvm::enumerate(lines)) {
      auto [name, value] = line.trim().split(' ');
      double d = 0;
      Expected<Action> action = parseAction(name);
      if (!action || value.trim().getAsDouble(d) || d < 0) {
        if (!action)
          consumeError(action.takeError());
        return fail(durationsFile + ":" + Twine(n + 1) + ": '" + line +
                    "' is not an action and a duration ('1F3 2417.5')");
      }
      costs.actions[action->str()] = d;
    }
  }
  Expected<Simulation> sim = simulate(*schedule, costs);
  if (!sim)
    return fail(schedule->name + ": " + toString(sim.takeError()));
  if (!svg.empty()) {
    std::error_code ec;
    raw_fd_ostream os(svg, ec);
    if (ec)
      return fail("cannot write '" + svg + "': " + ec.message());
    os << drawSVG(*schedule, *sim);
  }
  if (emit == "csv") {
    outs() << printScheduleCSV(*schedule);
    return 0;
  }
  if (emit != "text")
    return fail("--emit=" + emit + ": expected text or csv");
  outs() << formatv("schedule {0}: {1} ranks, {2} stages, {3} micro-batches\n",
                    schedule->name, schedule->ranks, schedule->numStages(),
                    schedule->microBatches);
  for (auto [r, order] : llvm::enumerate(schedule->order)) {
    SmallVector<std::string> actions;
    for (const Action &a : order)
      actions.push_back(a.str());
    outs() << "rank " << r << ": " << join(actions, " ") << "\n";
  }
  outs() << formatv("step span {0}\n", sim->span);
  for (int64_t r = 0; r < schedule->ranks; ++r)
    outs() << formatv("rank {0}: busy {1}, bubble {2:F4}, peak activations "
                      "{3} stage micro-batches\n",
                      r, sim->busy[r], sim->bubble(r), sim->peakActivations[r]);
  outs() << formatv("bubble {0:F4} (worst rank); stage 0 holds at most {1} "
                    "micro-batches' activations\n",
                    sim->maxBubble(), sim->firstStagePeak);
  outs() << formatv("saved for the backward: {0} micro-batches' worth per "
                    "stage (slots reused as micro-batches finish)\n",
                    assignSlots(*schedule).count);
  return 0;
}
