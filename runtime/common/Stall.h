//===- Stall.h - which rank a timed-out wait is stuck behind ----*- C++ -*-===//
//
// A rank whose wait passed its deadline asks the peer it waited for what
// that peer waits for, and so on, to name the rank that stalls rather than
// a healthy one blocked behind it. The answers are snapshots taken at
// different times, so the search must not read a cycle into them where
// there is none:
// - a rank waits on up to two threads at once (the caller's and the
//   communication thread's): its answer lists every rank it waits for,
//   and the search follows each (one shared record made two threads'
//   waits look like each other's);
// - a rank that has itself timed out no longer waits: it says so, with
//   the rank it found stalled once it knows, and that first verdict is the
//   one repeated (a stopped rank resumed by the launcher's SIGCONT answered
//   that it waited for a rank that had given up on it: a "cycle");
// - a rank whose wait began only after the asker timed out was not waiting
//   when the asker's deadline passed: it was what held the others, and went
//   on late (the same resumed rank, before anyone has named it).
// Pure, so that loomrt-unit-test checks it on scripted answers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COMMON_STALL_H
#define LOOMRT_COMMON_STALL_H

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loomrt {

/// What a rank answers when asked what it waits for.
struct WaitAnswer {
  /// The world ranks its threads wait for (none: it waits for no one).
  std::vector<int> waitsFor;
  /// It has itself timed out and is reporting.
  bool timedOut = false;
  /// Once it has reported: the rank it found stalled, else -1.
  int found = -1;
  /// Its current wait began after the asking rank timed out.
  bool beganLate = false;
};

struct StallVerdict {
  /// "rank A, which waits for rank B, ...": the path of waits from the
  /// peer this rank waited for to the rank blamed.
  std::string chain;
  /// Why the wait failed, naming the rank blamed.
  std::string verdict;
  /// The rank blamed, or -1 for a cycle of waits.
  int blamed = -1;
};

/// Searches the waits from `peer` (which rank `self` waited for; `self`'s
/// own waits are `ownWaits`); `ask` returns a rank's answer, or nothing
/// when it does not answer; `name` names a rank.
StallVerdict findStalledRank(
    int self, int peer, const std::vector<int> &ownWaits,
    const std::function<std::optional<WaitAnswer>(int)> &ask,
    const std::function<std::string(int)> &name);

} // namespace loomrt

#endif // LOOMRT_COMMON_STALL_H
