//===- Roofline.h - the one roofline of the cost model ----------*- C++ -*-===//
//
// The time of a piece of work on a device: bound by its compute or by its
// memory traffic. The stage partitioner (in flop-equivalents, at a balance
// of flops per byte) and the report (in seconds, with a cluster's peak and
// bandwidth) both cost ops with it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_ROOFLINE_H
#define LOOM_ANALYSIS_ROOFLINE_H

#include <algorithm>

namespace loom::analysis {

struct Roofline {
  /// Peak flops per second and memory bytes per second.
  double peakFlops = 1.0;
  double bytesPerSecond = 1.0;

  /// A device `balance` flops per byte, in flop units (peak 1).
  static Roofline ofBalance(double balance) { return {1.0, 1.0 / balance}; }

  /// Seconds of `flops` that move `bytes`.
  double seconds(double flops, double bytes) const {
    return std::max(flops / peakFlops, bytes / bytesPerSecond);
  }
  /// The same as flops at peak: the flops, or the bytes at the device's
  /// balance when the work moves more than it computes.
  double flopEquivalents(double flops, double bytes) const {
    return seconds(flops, bytes) * peakFlops;
  }
};

} // namespace loom::analysis

#endif // LOOM_ANALYSIS_ROOFLINE_H
