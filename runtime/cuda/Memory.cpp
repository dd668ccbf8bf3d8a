//===- Memory.cpp - cuda backend: device, allocator, copies, the hooks ----===//
//
// A buffer is a device pointer; views are pointer arithmetic as on the host.
// The allocator caches freed blocks by rounded size and hands them out again
// in compute-stream order (every kernel runs on that stream, so a block
// freed after its last use is safe to reuse by the next kernel). Peak bytes
// count the bytes in use, as on the host backend; reserved bytes (the cache
// included) are reported beside them.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace loomrt;
using namespace loomrt::cuda;

void loomrt::cuda::failCall(const char *call, const std::string &error,
                            const char *file, int line) {
  const char *base = std::strrchr(file, '/');
  fail(std::string(call) + " failed: " + error + " (" +
       (base ? base + 1 : file) + ":" + std::to_string(line) + ")");
}

const char *loomrt::cuda::cublasErrorName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "cuBLAS error";
  }
}

void loomrt::cuda::checkLaunch(const char *what, const char *file, int line) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    failCall(what, cudaGetErrorString(status), file, line);
}

Device &loomrt::cuda::deviceOf(loomrt_ctx *ctx) {
  if (!ctx->device)
    fail("the cuda backend has no device yet: loomrt_init_mesh chooses it");
  return *static_cast<Device *>(ctx->device.get());
}

cudaStream_t loomrt::cuda::computeStream(loomrt_ctx *ctx) {
  return deviceOf(ctx).compute;
}

cudaEvent_t loomrt::cuda::takeEvent(Device &d) {
  if (!d.spareEvents.empty()) {
    cudaEvent_t e = d.spareEvents.back();
    d.spareEvents.pop_back();
    return e;
  }
  cudaEvent_t e;
  LOOMRT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void loomrt::cuda::giveEvent(Device &d, cudaEvent_t event) {
  d.spareEvents.push_back(event);
}

void loomrt::cuda::abortJob(loomrt_ctx *ctx) {
  if (ctx->device)
    for (auto &[mask, comm] : deviceOf(ctx).comms)
      ncclCommAbort(comm);
    for (auto &[mask, comm] : deviceOf(ctx).p2pComms)
      ncclCommAbort(comm);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

static std::string kernelErrorText(const KernelError &e) {
  switch (e.code) {
  case kEmbeddingId:
  case kEmbeddingGradId:
    return std::string(e.code == kEmbeddingId ? "train.embedding"
                                              : "train.embedding_grad") +
           ": id " + std::to_string(e.value) + " at position " +
           std::to_string(e.position) + " is outside the vocabulary [0, " +
           std::to_string(e.bound) + ")";
  case kCrossEntropyLabel:
  case kCrossEntropyGradLabel:
    return std::string(e.code == kCrossEntropyLabel
                           ? "train.cross_entropy"
                           : "train.cross_entropy_grad") +
           ": label " + std::to_string(e.value) + " is outside [0, " +
           std::to_string(e.bound) + ") and is not the ignore index";
  default:
    return "a kernel reported error " + std::to_string(e.code);
  }
}

void loomrt::cuda::synchronize(loomrt_ctx *ctx) {
  Device &d = deviceOf(ctx);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(ctx->timeoutSeconds);
  for (int spins = 0;; ++spins) {
    cudaError_t status = cudaStreamQuery(d.compute);
    if (status == cudaSuccess)
      break;
    if (status != cudaErrorNotReady)
      failCall("cudaStreamQuery(compute)", cudaGetErrorString(status),
               __FILE__, __LINE__);
    for (auto &[mask, comm] : d.comms) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        std::fprintf(stderr,
                     "loomrt: error: rank %d %s: NCCL failed in a collective "
                     "over %s: %s\n",
                     ctx->rank, coordsOf(ctx, ctx->rank).c_str(),
                     groupName(ctx, mask).c_str(), ncclGetErrorString(async));
        abortJob(ctx);
      }
    }
    // A long kernel is not a hang; only a wait behind a collective is.
    if (!d.pending.empty() && std::chrono::steady_clock::now() > deadline) {
      std::string what = "a collective";
      for (const PendingCollective &p : d.pending)
        if (cudaEventQuery(p.done) == cudaErrorNotReady) {
          what = p.what;
          break;
        }
      std::fprintf(stderr,
                   "loomrt: error: rank %d %s: timed out after %g s waiting "
                   "for %s; a peer in its group failed or stalls\n",
                   ctx->rank, coordsOf(ctx, ctx->rank).c_str(),
                   ctx->timeoutSeconds, what.c_str());
      abortJob(ctx);
    }
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (PendingCollective &p : d.pending)
    giveEvent(d, p.done);
  d.pending.clear();
  KernelError error{};
  LOOMRT_CUDA(cudaMemcpy(&error, d.errors, sizeof error,
                         cudaMemcpyDeviceToHost));
  if (error.code)
    fail(kernelErrorText(error));
}

//===----------------------------------------------------------------------===//
// The allocator
//===----------------------------------------------------------------------===//

char *loomrt::allocate(loomrt_ctx *ctx, int64_t bytes) {
  Device &d = deviceOf(ctx);
  // 512-byte granules: every buffer (and every view the memory plan makes
  // at 64-byte offsets) stays aligned for vector loads.
  size_t rounded = size_t((std::max<int64_t>(bytes, 1) + 511) / 512 * 512);
  char *ptr = nullptr;
  auto it = d.freeBlocks.find(rounded);
  if (it != d.freeBlocks.end()) {
    ptr = it->second;
    d.freeBlocks.erase(it);
  } else {
    cudaError_t status = cudaMalloc(&ptr, rounded);
    if (status == cudaErrorMemoryAllocation && !d.freeBlocks.empty()) {
      // Give the cache back and try once more.
      cudaGetLastError();
      LOOMRT_CUDA(cudaStreamSynchronize(d.compute));
      for (auto &[size, block] : d.freeBlocks) {
        LOOMRT_CUDA(cudaFree(block));
        d.reservedBytes -= int64_t(size);
      }
      d.freeBlocks.clear();
      status = cudaMalloc(&ptr, rounded);
    }
    if (status != cudaSuccess) {
      size_t freeBytes = 0, totalBytes = 0;
      cudaGetLastError();
      cudaMemGetInfo(&freeBytes, &totalBytes);
      fail("out of device memory allocating " + std::to_string(bytes) +
           " bytes on device " + std::to_string(d.ordinal) + " (" +
           std::to_string(freeBytes >> 20) + " MiB free of " +
           std::to_string(totalBytes >> 20) + " MiB; " +
           std::to_string(ctx->currentBytes.load() >> 20) +
           " MiB in use by Loom)");
    }
    d.reservedBytes += int64_t(rounded);
  }
  d.live[ptr] = rounded;
  trackBytes(ctx, bytes);
  return ptr;
}

void loomrt::release(loomrt_ctx *ctx, char *ptr, int64_t bytes) {
  Device &d = deviceOf(ctx);
  auto it = d.live.find(ptr);
  if (it == d.live.end())
    fail("release of a pointer the allocator did not hand out");
  d.freeBlocks.emplace(it->second, ptr);
  d.live.erase(it);
  trackBytes(ctx, -bytes);
}

//===----------------------------------------------------------------------===//
// The hooks of the common driver
//===----------------------------------------------------------------------===//

const char *loomrt::backend::name() { return "cuda"; }

void loomrt::backend::prepareProcess(char **) {}

void loomrt::backend::upload(loomrt_ctx *ctx, char *dst, const void *src,
                             int64_t bytes) {
  Device &d = deviceOf(ctx);
  LOOMRT_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyHostToDevice,
                              d.compute));
  // `src` may be gone when this returns.
  synchronize(ctx);
}

void loomrt::backend::download(loomrt_ctx *ctx, void *dst, const char *src,
                               int64_t bytes) {
  Device &d = deviceOf(ctx);
  LOOMRT_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToHost,
                              d.compute));
  synchronize(ctx);
}

std::string loomrt::backend::describe(loomrt_ctx *ctx) {
  Device &d = deviceOf(ctx);
  int nccl = 0;
  ncclGetVersion(&nccl);
  char line[512];
  std::snprintf(line, sizeof line,
                "rank %d on cuda device %d: %s (sm_%d%d, %.0f GiB), NCCL %d.%d.%d%s",
                ctx->rank, d.ordinal, d.properties.name, d.properties.major,
                d.properties.minor,
                double(d.properties.totalGlobalMem) / double(1 << 30),
                nccl / 10000, nccl / 100 % 100, nccl % 100,
                std::getenv("LOOMRT_CUDA_TF32") ? ", TF32 gemms" : "");
  return line;
}

void loomrt::backend::startMesh(loomrt_ctx *ctx) {
  auto device = std::make_shared<Device>();
  Device &d = *device;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    fail("rank " + std::to_string(ctx->rank) +
         ": no CUDA device is visible (" +
         (status != cudaSuccess ? cudaGetErrorString(status)
                                : "cudaGetDeviceCount found 0") +
         "); build with --target=host to run on the CPU");
  d.ordinal = chooseDevice(count, ctx->world > 1 ? ctx->localRank : 0);
  if (d.ordinal < 0)
    fail("rank " + std::to_string(ctx->rank) + " is local rank " +
         std::to_string(ctx->localRank) + " of its node, which shows it " +
         std::to_string(count) + " CUDA device(s): launch at most " +
         std::to_string(count) + " ranks per node (one GPU per rank), or "
         "bind one device per task (srun --gpus-per-task=1)");
  LOOMRT_CUDA(cudaSetDevice(d.ordinal));
  LOOMRT_CUDA(cudaGetDeviceProperties(&d.properties, d.ordinal));
  LOOMRT_CUDA(cudaStreamCreateWithFlags(&d.compute, cudaStreamNonBlocking));
  LOOMRT_CUDA(cudaStreamCreateWithFlags(&d.comm, cudaStreamNonBlocking));
  LOOMRT_CUDA(cudaStreamCreateWithFlags(&d.p2p, cudaStreamNonBlocking));
  LOOMRT_CUBLAS(cublasCreate(&d.blas));
  LOOMRT_CUBLAS(cublasSetStream(d.blas, d.compute));
  // Exact f32 gemms by default (parity with the host backend); TF32 tensor
  // cores when asked.
  LOOMRT_CUBLAS(cublasSetMathMode(d.blas, std::getenv("LOOMRT_CUDA_TF32")
                                              ? CUBLAS_TF32_TENSOR_OP_MATH
                                              : CUBLAS_DEFAULT_MATH));
  LOOMRT_CUDA(cudaMalloc(&d.errors, sizeof(KernelError)));
  LOOMRT_CUDA(cudaMemset(d.errors, 0, sizeof(KernelError)));
  ctx->device = device;
  cuda::startCommunicators(ctx);
}

void loomrt::backend::stopMesh(loomrt_ctx *ctx) {
  if (!ctx->device)
    return;
  synchronize(ctx);
  cuda::stopCommunicators(ctx);
  Device &d = deviceOf(ctx);
  for (cudaEvent_t e : d.spareEvents)
    cudaEventDestroy(e);
  d.spareEvents.clear();
  cublasDestroy(d.blas);
}

extern "C" {

void loomrt_copy(loomrt_ctx *ctx, loomrt_buf *dst, loomrt_buf *src,
                 int64_t bytes) {
  if (dst != src)
    LOOMRT_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes),
                                cudaMemcpyDeviceToDevice, computeStream(ctx)));
}

void loomrt_sync(loomrt_ctx *ctx) { synchronize(ctx); }

} // extern "C"
