//===- Report.h - the plan's figures (loomc --report) ------------*- C++ -*-===//
//
// Memory per rank by component, FLOPs per step from the ops' cost
// interface, and, given a cluster description, the predicted step time and
// MFU. Computed on the training step without allocating anything, so it
// works for models far larger than this machine (175B).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_REPORT_H
#define LOOM_CODEGEN_REPORT_H

#include "dialects/train/TrainDialect.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace loom::codegen {

/// A cluster description (clusters/*.json).
struct Cluster {
  std::string name;
  int64_t devicesPerNode = 1;
  double peakFlopsFp32 = 0, peakFlopsBf16 = 0;
  double memoryBytes = 0, memoryBandwidth = 0;
  double intraBandwidth = 0, intraLatency = 0;
  double interBandwidth = 0, interLatency = 0;
};

/// Reads a cluster description, or fails with a message naming the file
/// and the missing or malformed field.
llvm::Expected<Cluster> readCluster(llvm::StringRef path);

struct Report {
  std::string model;
  int64_t ranks = 1;
  int64_t parameterCount = 0;
  int64_t parameterBytes = 0, gradientBytes = 0, optimizerStateBytes = 0;
  /// Peak of the training step's arena: activations, gradients in flight
  /// and temporaries.
  int64_t arenaPeakBytes = 0;
  int64_t inputBytes = 0;
  int64_t flopsPerStep = 0, bytesAccessedPerStep = 0;
  int64_t tokensPerStep = 0;
  std::optional<Cluster> cluster;
  double predictedStepSeconds = 0, mfu = 0;

  int64_t totalBytes() const {
    return parameterBytes + optimizerStateBytes + arenaPeakBytes + inputBytes;
  }
  llvm::json::Value toJSON() const;
  void print(llvm::raw_ostream &os) const;
};

/// The report of a trained model (after the Loom pipeline).
llvm::FailureOr<Report> reportModel(loom::train::ModelOp model,
                                    const std::optional<Cluster> &cluster);

} // namespace loom::codegen

#endif // LOOM_CODEGEN_REPORT_H
