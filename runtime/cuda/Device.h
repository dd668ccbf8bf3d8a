//===- Device.h - cuda backend state and checked calls ----------*- C++ -*-===//
//
// One device per process, chosen by the local rank. Kernels, copies and
// cuBLAS run on the compute stream; NCCL collectives on the communication
// stream, ordered against the compute stream by events. Every CUDA, cuBLAS
// and NCCL call goes through a check that names the call, file and line.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_CUDA_DEVICE_H
#define LOOMRT_CUDA_DEVICE_H

#include "Internal.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loomrt::cuda {

[[noreturn]] void failCall(const char *call, const std::string &error,
                           const char *file, int line);
const char *cublasErrorName(cublasStatus_t status);

#define LOOMRT_CUDA(call)                                                      \
  do {                                                                         \
    cudaError_t loomrtStatus = (call);                                         \
    if (loomrtStatus != cudaSuccess)                                           \
      ::loomrt::cuda::failCall(#call, cudaGetErrorString(loomrtStatus),        \
                               __FILE__, __LINE__);                            \
  } while (0)

#define LOOMRT_CUBLAS(call)                                                    \
  do {                                                                         \
    cublasStatus_t loomrtStatus = (call);                                      \
    if (loomrtStatus != CUBLAS_STATUS_SUCCESS)                                 \
      ::loomrt::cuda::failCall(                                                \
          #call, ::loomrt::cuda::cublasErrorName(loomrtStatus), __FILE__,      \
          __LINE__);                                                           \
  } while (0)

/// A kernel launch: the launch error (a bad configuration) is checked at
/// once; what the kernel itself does wrong surfaces at the next check.
#define LOOMRT_LAUNCHED(what)                                                  \
  ::loomrt::cuda::checkLaunch(what, __FILE__, __LINE__)
void checkLaunch(const char *what, const char *file, int line);

/// Errors a kernel reports (an id or label out of range) through device
/// memory; the host reads them at every download and sync.
struct KernelError {
  int32_t code; // 0: none; see kernelErrorText
  int32_t position;
  int64_t value, bound;
};
enum KernelErrorCode : int32_t {
  kEmbeddingId = 1,
  kEmbeddingGradId = 2,
  kCrossEntropyLabel = 3,
  kCrossEntropyGradLabel = 4,
};

/// A pending collective, for the message when a wait times out.
struct PendingCollective {
  std::string what;
  cudaEvent_t done;
};

struct Device {
  int ordinal = 0;
  cudaDeviceProp properties{};
  /// Compute, collectives, and point-to-point transfers: a pipeline's
  /// sends and receives run on a stream and communicators of their own, so
  /// a receive whose send comes later cannot hold back a collective queued
  /// after it (as the host backend starts them on the caller's thread).
  cudaStream_t compute = nullptr, comm = nullptr, p2p = nullptr;
  cublasHandle_t blas = nullptr;
  KernelError *errors = nullptr; // device memory
  /// Cached blocks by rounded size, free for reuse in compute-stream order.
  std::multimap<size_t, char *> freeBlocks;
  /// Live allocations: pointer -> rounded size.
  std::map<char *, size_t> live;
  int64_t reservedBytes = 0;
  /// One communicator per group mask (all of them created at start-up, as
  /// NCCL's splits are collective over the world).
  std::map<uint32_t, ncclComm_t> comms;
  /// The same groups' communicators for point-to-point transfers (one axis
  /// each: a pipeline's axis, or any other a program sends along).
  std::map<uint32_t, ncclComm_t> p2pComms;
  std::vector<PendingCollective> pending;
  /// Events recycled for stream ordering.
  std::vector<cudaEvent_t> spareEvents;
};

Device &deviceOf(loomrt_ctx *ctx);
cudaStream_t computeStream(loomrt_ctx *ctx);
/// Waits for the compute stream (and the collectives it depends on) within
/// the context's timeout; on a timeout or an NCCL error aborts the
/// communicators and the job naming this rank, its group and the pending
/// collective. Then reports any kernel error.
void synchronize(loomrt_ctx *ctx);
cudaEvent_t takeEvent(Device &d);
void giveEvent(Device &d, cudaEvent_t event);
/// NCCL communicators for every group of the mesh (Comm.cpp).
void startCommunicators(loomrt_ctx *ctx);
void stopCommunicators(loomrt_ctx *ctx);
/// Aborts every communicator and the job (after a message was printed).
[[noreturn]] void abortJob(loomrt_ctx *ctx);

/// Device memory for the duration of one kernel call, returned to the
/// cache when it goes out of scope (reuse is safe in stream order).
class Scratch {
public:
  Scratch(loomrt_ctx *ctx, int64_t bytes)
      : ctx(ctx), bytes(bytes), ptr(allocate(ctx, bytes)) {}
  ~Scratch() { release(ctx, ptr, bytes); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  template <typename T> T *as() const { return reinterpret_cast<T *>(ptr); }

private:
  loomrt_ctx *ctx;
  int64_t bytes;
  char *ptr;
};

} // namespace loomrt::cuda

#endif // LOOMRT_CUDA_DEVICE_H
