//===- Internal.h - what the runtime's backends share ----------*- C++ -*-===//
//
// The context, shapes, the counter-based generators, the mesh helpers and
// the hooks (namespace loomrt::backend) through which the common driver
// (Driver.cpp, Mesh.cpp) reaches a backend's memory and devices. Buffers in
// `tensors` and `arena` are the backend's: host memory on the host backend,
// device memory on the cuda backend.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_HOST_INTERNAL_H
#define LOOMRT_HOST_INTERNAL_H

#include "Formulas.h"
#include "loomrt/loomrt.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

struct loomrt_ctx {
  const loomrt_program *program = nullptr;
  /// train.sum_squares' running sum across the calls for its operands, in
  /// double: a tensor cut into parts (a pipeline stage's, a recomputation
  /// policy's runs of layers) sums to the same bits as the whole.
  double squaresRunning = 0.0;
  /// Sends posted (loomrt_comm_post) and not yet drained: the event, the
  /// runtime's copy and its size.
  std::vector<std::tuple<loomrt_comm_event *, char *, int64_t>> posted;
  /// One buffer per entry of the program's tensor table.
  std::vector<char *> tensors;
  /// The arena of the running function.
  char *arena = nullptr;
  int64_t step = 0;
  uint64_t seed = 0;
  /// Dropout is the identity outside training.
  bool training = true;
  /// When positive, replaces the schedule's base learning rate (and scales
  /// its minimum alike).
  double lrOverride = 0.0;
  /// The learning rate the last lr_schedule computed.
  double lastLr = 0.0;
  /// Bytes the allocator has handed out, and their high-water mark
  /// (trackBytes: the communication thread allocates too).
  std::atomic<int64_t> currentBytes{0};
  std::atomic<int64_t> peakBytes{0};
  /// The f32 copies bf16 kernels compute on (Bf16Kernels.cpp): the
  /// program's reservation (loomrt_program::bf16_scratch_bytes), each
  /// call's copies cut from its start; beyond it (a program that reserved
  /// too little), one buffer per tensor slot of a call, grown to the
  /// largest call and reused.
  char *bf16Reserved = nullptr;
  int64_t bf16ReservedBytes = 0;
  std::vector<std::pair<char *, int64_t>> bf16Scratch;

  // Processes and the mesh (Comm.cpp).
  int rank = 0, world = 1, localRank = 0;
  std::vector<int64_t> meshSizes;
  std::vector<std::string> axisNames;
  /// Process groups by axis mask, created on first use.
  std::map<uint32_t, std::shared_ptr<void>> groups;
  /// Bytes this rank sent, by (collective kind, group axis mask).
  std::map<std::pair<int, uint32_t>, int64_t> bytesSent;
  /// Bound on any wait for another rank.
  double timeoutSeconds = 60.0;
  /// Guards `groups` and `bytesSent`, which the communication thread and the
  /// caller both touch.
  std::mutex commMutex;
  /// Chrome trace events ("X" complete events) when tracing, written at
  /// loomrt_finalize to `tracePath` ("%r" there becomes the rank).
  struct TraceEvent {
    std::string name, category;
    double startUs, durationUs;
    int thread;
    int64_t bytes;
  };
  std::vector<TraceEvent> trace;
  std::string tracePath;
  std::chrono::steady_clock::time_point traceStart;
  /// Where the spans being traced (repeat iterations, pipeline actions)
  /// began, innermost last.
  std::vector<std::chrono::steady_clock::time_point> iterationStarts;
  /// The thread that runs collectives in issue order (host Comm.cpp).
  std::shared_ptr<void> commStream;
  /// The backend's own state (the cuda backend's device, streams, handles,
  /// allocator and communicators).
  std::shared_ptr<void> device;
};

namespace loomrt {

/// A shape (or integer array) from the program's shape table.
struct Shape {
  int64_t rank = 0;
  const int64_t *dims = nullptr;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t i = 0; i < rank; ++i)
      n *= dims[i];
    return n;
  }
  int64_t operator[](int64_t i) const { return dims[i]; }
  int64_t back() const { return dims[rank - 1]; }
};

Shape shapeOf(loomrt_ctx *ctx, int64_t id);

/// The CUDA device a rank uses of the `visible` ones: the only one when the
/// launcher binds one device per task (srun --gpus-per-task=1, or
/// CUDA_VISIBLE_DEVICES set per rank), else the rank's local rank on its
/// node; -1 when the node shows fewer devices than it runs ranks.
inline int chooseDevice(int visible, int localRank) {
  if (visible == 1)
    return 0;
  return localRank >= 0 && localRank < visible ? localRank : -1;
}

/// MPI tags of the runtime's control messages, above every collective's
/// (a group's tags are mask * 4096 + sequence, below 2^20 for 8 axes):
/// the shutdown handshake, and the question a rank that timed out asks the
/// peer it waited for (what it waits for itself) with its answer.
constexpr int kShutdownTag = 1 << 20, kShutdownFailedTag = (1 << 20) + 1,
              kWhoTag = (1 << 20) + 2, kWhoAnswerTag = (1 << 20) + 3;

/// Prints "loomrt: <message>" and exits non-zero.
[[noreturn]] void fail(const std::string &message);

/// Allocation of backend memory that counts towards the peak.
char *allocate(loomrt_ctx *ctx, int64_t bytes);
/// Reserves the f32 scratch of the bf16 kernels (Bf16Kernels.cpp), whose
/// copies start at multiples of kBf16ScratchAlign (the compiler's
/// analysis::bf16ScratchBytes counts them so).
constexpr int64_t kBf16ScratchAlign = 64;
void reserveBf16Scratch(loomrt_ctx *ctx, int64_t bytes);
void release(loomrt_ctx *ctx, char *ptr, int64_t bytes);

/// Bytes of one element of a loomrt_dtype.
int64_t elementBytes(int32_t dtype);
/// Releases the bf16 kernels' scratch (before the context goes).
void releaseBf16Scratch(loomrt_ctx *ctx);

/// What the common driver needs from a backend.
/// Counts `bytes` more in use (fewer when negative) and the high-water
/// mark, from any thread.
inline void trackBytes(loomrt_ctx *ctx, int64_t bytes) {
  int64_t now = ctx->currentBytes += bytes;
  int64_t peak = ctx->peakBytes.load();
  while (now > peak && !ctx->peakBytes.compare_exchange_weak(peak, now))
    ;
}

namespace backend {
/// All-reduces (sums) the `members` of `dtype` (f32 or bf16; buffers and
/// their element counts, `count` in all) over `group` as one collective:
/// packed into a staging
/// buffer, reduced, unpacked and the staging freed in the communication
/// stream's order, so a bucket's staging lives only while its reduction
/// runs, however late the caller waits (a loop's deferred reductions).
loomrt_comm_event *
bucketAllReduce(loomrt_ctx *ctx, uint32_t group,
                const std::vector<std::pair<loomrt_buf *, int64_t>> &members,
                int64_t count, int32_t dtype);
/// The backend's native bf16 kernels, where it has them (cuda: cuBLAS's
/// bf16 GEMM with f32 compute, the fused attention of FlashAttention.h);
/// false where it has none (the host), and Bf16Kernels.cpp computes on f32
/// copies instead. Arguments as loomrt_matmul's (`accumulate`: its
/// _accumulate form), loomrt_attention's and loomrt_attention_grad's.
bool matmulBf16(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *lhs,
                loomrt_buf *rhs, int64_t so, int64_t sl, int64_t sr,
                int32_t ta, int32_t tb, bool accumulate);
bool attentionBf16(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *q,
                   loomrt_buf *k, loomrt_buf *v, int64_t so, int32_t causal);
bool attentionGradBf16(loomrt_ctx *ctx, loomrt_buf *dq, loomrt_buf *dk,
                       loomrt_buf *dv, loomrt_buf *q, loomrt_buf *k,
                       loomrt_buf *v, loomrt_buf *grad, int64_t sdq,
                       int32_t causal);
/// out = a + b over `n` bf16 elements, each sum rounded once.
void addBf16(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *a, loomrt_buf *b,
             int64_t n);
/// out = in * scale[0] over `n` bf16 elements (scale a bf16 scalar: the
/// clip factor narrowed), each product rounded once: loomrt_mul_bf16 by a
/// 0-d tensor, in place.
void scaleBf16(loomrt_ctx *ctx, loomrt_buf *out, loomrt_buf *in, int64_t n,
               loomrt_buf *scale);
/// The backend's name, for messages ("host", "cuda").
const char *name();
/// Called first in loomrt_main with its argv (the host backend may
/// re-execute the process to pick OpenBLAS's kernels).
void prepareProcess(char **argv);
/// Called once MPI and the mesh are up (device selection, communicators),
/// and before MPI finalizes.
void startMesh(loomrt_ctx *ctx);
void stopMesh(loomrt_ctx *ctx);
/// Copies between host memory and backend memory; both wait for the work
/// enqueued before them (they are the only way the driver reads results).
void upload(loomrt_ctx *ctx, char *dst, const void *src, int64_t bytes);
void download(loomrt_ctx *ctx, void *dst, const char *src, int64_t bytes);
/// A line on the device for the start-of-training banner ("" for none).
std::string describe(loomrt_ctx *ctx);
} // namespace backend

/// Re-executes the process with OPENBLAS_CORETYPE set when OpenBLAS fell back
/// to its Prescott kernels on a CPU with AVX2 or AVX-512 (a virtual CPU with
/// a generic model name); returns when nothing needs doing.
void selectBlasKernels(char **argv);

/// Counter-based generators (hash64 and uniform are in Formulas.h).
uint64_t hashString(const char *s);
/// Standard normal from a key (Box-Muller on two derived uniforms).
double normal(uint64_t key);

/// What the launcher (mpirun, srun, a PMI launcher) says about this
/// process, read from its environment.
struct Launch {
  std::string launcher = "none";
  int rank = 0, world = 1, localRank = 0;
};
Launch launchFromEnvironment();

/// A rank's coordinates on the mesh, and as text "(dp=0, tp=1)".
std::vector<int64_t> coordinates(loomrt_ctx *ctx, int worldRank);
std::string coordsOf(loomrt_ctx *ctx, int worldRank);
/// The members of this rank's group over the axes of `mask`, computed from
/// the mesh alone: this rank's position among them and their world ranks.
struct GroupMembers {
  int rank = 0;
  std::vector<int> worldRanks;
};
GroupMembers groupMembers(loomrt_ctx *ctx, uint32_t mask);
/// The group's axes joined with '+' ("self" for none).
std::string groupName(loomrt_ctx *ctx, uint32_t mask);
/// Adds to the bytes sent in collectives of `kind` over `mask`.
void countBytes(loomrt_ctx *ctx, int kind, uint32_t mask, int64_t bytes);
/// Writes the trace when tracing is on (at loomrt_finalize).
void writeTrace(loomrt_ctx *ctx);
/// Whether the tests' fault hook names `point` for this rank
/// (LOOMRT_FAULT=POINT:RANK).
bool faultArmed(const char *point, int rank);

/// Records a span on the trace when tracing is on: from construction to
/// destruction, on thread `thread` (0: compute, 1: communication).
class TraceSpan {
public:
  TraceSpan(loomrt_ctx *ctx, std::string name, const char *category,
            int thread, int64_t bytes = 0);
  ~TraceSpan();

private:
  loomrt_ctx *ctx;
  std::string name;
  const char *category;
  int thread;
  int64_t bytes;
  std::chrono::steady_clock::time_point start;
};

} // namespace loomrt

#endif // LOOMRT_HOST_INTERNAL_H
