//===- Stall.cpp - which rank a timed-out wait is stuck behind ------------===//

#include "Stall.h"

#include <algorithm>
#include <deque>
#include <map>

using namespace loomrt;

StallVerdict loomrt::findStalledRank(
    int self, int peer, const std::vector<int> &ownWaits,
    const std::function<std::optional<WaitAnswer>(int)> &ask,
    const std::function<std::string(int)> &name) {
  // Breadth first, so the chain printed is the shortest path of waits.
  std::map<int, int> parent = {{peer, -1}};
  std::deque<int> queue = {peer};
  std::vector<std::pair<int, int>> gaveUp; // (timed-out rank, its first wait)
  auto pathTo = [&](int r) {
    std::vector<int> path;
    for (int at = r; at >= 0; at = parent[at])
      path.push_back(at);
    std::string chain;
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      chain += (chain.empty() ? "" : ", which waits for ") + name(*it);
    return chain;
  };
  while (!queue.empty()) {
    int r = queue.front();
    queue.pop_front();
    std::optional<WaitAnswer> answer;
    if (r == self)
      answer = WaitAnswer{ownWaits, true, -1};
    else
      answer = ask(r);
    if (!answer)
      return {pathTo(r), name(r) + " does not answer: it failed or stalls", r};
    if (answer->timedOut && answer->found >= 0 && r != self)
      return {pathTo(r),
              name(answer->found) + " does not answer: it failed or stalls (" +
                  name(r) + ", which timed out too, found it)",
              answer->found};
    if (answer->beganLate && !answer->timedOut && r != self)
      return {pathTo(r),
              name(r) + " stalled: it began waiting only after " + name(self) +
                  " timed out (it went on late)",
              r};
    if (answer->waitsFor.empty() && !answer->timedOut)
      return {pathTo(r),
              name(r) + " waits for no rank: it is slow, or stuck outside "
                        "communication",
              r};
    if (answer->timedOut && r != self && !answer->waitsFor.empty())
      gaveUp.emplace_back(r, answer->waitsFor.front());
    for (int next : answer->waitsFor)
      if (next >= 0 && parent.emplace(next, r).second)
        queue.push_back(next);
  }
  // Every rank reached answers and waits for another reached one. Where
  // one of them had given up, the ranks waiting on it wait because it
  // did: the rank it gave up on is the one that held it past the timeout
  // (and answers now, so it stalled and went on).
  if (!gaveUp.empty()) {
    auto [quit, on] = gaveUp.front();
    return {pathTo(quit),
            name(on) + " stalled: " + name(quit) +
                " timed out waiting for it (it answers now: it went on late)",
            on};
  }
  return {pathTo(peer), "the ranks wait for each other in a cycle", -1};
}
