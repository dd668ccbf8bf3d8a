//===- Driver.cpp - the training loop every backend shares ----------------===//
//
// Command line, initialization, data, safetensors, metrics and the loop;
// it touches backend memory only through loomrt::backend::upload and
// download.
//
//===----------------------------------------------------------------------===//

#include "Files.h"
#include "Internal.h"
#include "ShapeMath.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <sstream>

using namespace loomrt;

//===----------------------------------------------------------------------===//
// Basics
//===----------------------------------------------------------------------===//

void loomrt::fail(const std::string &message) {
  std::fprintf(stderr, "loomrt: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(1);
}

Shape loomrt::shapeOf(loomrt_ctx *ctx, int64_t id) {
  const loomrt_program *p = ctx->program;
  if (id < 0 || id >= p->num_shape_words)
    fail("shape id " + std::to_string(id) + " is outside the shape table");
  return Shape{p->shapes[id], p->shapes + id + 1};
}

int64_t loomrt_shape(loomrt_ctx *ctx, int64_t shape, const int64_t **dims) {
  Shape s = shapeOf(ctx, shape);
  if (dims)
    *dims = s.dims;
  return s.rank;
}

uint64_t loomrt::hashString(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a
  for (; *s; ++s)
    h = (h ^ uint64_t(static_cast<unsigned char>(*s))) * 0x100000001b3ULL;
  return hash64(h);
}

double loomrt::normal(uint64_t key) {
  double u1 = uniform(key ^ 0x5851f42d4c957f2dULL);
  double u2 = uniform(key ^ 0x14057b7ef767814fULL);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}

extern "C" {

loomrt_ctx *loomrt_create(void) { return new loomrt_ctx(); }
void loomrt_destroy(loomrt_ctx *ctx) {
  releaseBf16Scratch(ctx);
  delete ctx;
}

loomrt_buf *loomrt_alloc(loomrt_ctx *ctx, int64_t bytes) {
  return reinterpret_cast<loomrt_buf *>(allocate(ctx, bytes));
}
void loomrt_free(loomrt_ctx *ctx, loomrt_buf *buf, int64_t bytes) {
  release(ctx, reinterpret_cast<char *>(buf), bytes);
}
void loomrt_upload(loomrt_ctx *ctx, loomrt_buf *dst, const void *src,
                   int64_t bytes) {
  backend::upload(ctx, reinterpret_cast<char *>(dst), src, bytes);
}
void loomrt_download(loomrt_ctx *ctx, void *dst, loomrt_buf *src,
                     int64_t bytes) {
  backend::download(ctx, dst, reinterpret_cast<const char *>(src), bytes);
}

// Buffers are addresses in the backend's memory on every backend, so views
// are pointer arithmetic.
loomrt_buf *loomrt_tensor(loomrt_ctx *ctx, int32_t index) {
  return reinterpret_cast<loomrt_buf *>(ctx->tensors[index]);
}

loomrt_buf *loomrt_scratch(loomrt_ctx *ctx, int64_t offset) {
  return reinterpret_cast<loomrt_buf *>(ctx->arena + offset);
}

loomrt_buf *loomrt_view(loomrt_ctx *, loomrt_buf *base, int64_t offset) {
  return reinterpret_cast<loomrt_buf *>(reinterpret_cast<char *>(base) +
                                        offset);
}

loomrt_buf *loomrt_null(loomrt_ctx *) { return nullptr; }


} // extern "C"

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

namespace {

struct Options {
  int64_t steps = 100;
  int64_t evalEvery = 0;
  int64_t logEvery = 0;
  uint64_t seed = 0;
  double lr = 0.0;
  double timeout = 60.0;
  std::string data, metrics, initFrom, exportTo, inputs, trace;
};

/// What the options can honour. Steps: the step counter reaches the
/// program as a float32 (the learning-rate schedule and AdamW's bias
/// correction read it), exact up to 2^24. Timeout: deadlines are
/// steady-clock nanoseconds (now plus twice the timeout at shutdown), so a
/// year is far inside 64 bits. Learning rate: the kernels compute in
/// float32, so it must be a positive normal float32.
constexpr int64_t kMaxSteps = int64_t(1) << 24;
constexpr double kMinTimeout = 1e-3, kMaxTimeout = 365.0 * 24 * 3600;
constexpr double kMinLr = 1.17549435e-38, kMaxLr = 3.40282347e+38;

const char *kUsage =
    "usage: %s [options]\n"
    "  --steps N            optimizer steps to run, 1 to 16777216 (2^24;\n"
    "                       default 100)\n"
    "  --data FILE          train on the bytes of FILE (the last 10%% held\n"
    "                       out for evaluation); synthetic text otherwise\n"
    "  --eval-every K       evaluate the held-out loss every K steps (0, the\n"
    "                       default: never; at most 2^63-1)\n"
    "  --log-every K        print progress every K steps (0, the default:\n"
    "                       25 lines a run; at most 2^63-1)\n"
    "  --metrics FILE       write one JSON object per step to FILE (rank 0's;\n"
    "                       every rank's own when FILE has '%%r')\n"
    "  --trace FILE         write a Chrome trace (Perfetto) of this rank to FILE\n"
    "                       ('%%r' in FILE becomes the rank)\n"
    "  --init-from FILE     initial parameters from a safetensors file\n"
    "  --inputs FILE        the inputs of every step from a safetensors file\n"
    "  --export FILE        write the final parameters as safetensors (rank 0)\n"
    "  --seed S             seed of initialization, data order and dropout,\n"
    "                       0 to 2^63-1 (default 0)\n"
    "  --lr X               base learning rate (overrides the model's), a\n"
    "                       positive normal float32: 1.2e-38 to 3.4e38\n"
    "  --timeout SECONDS    bound on any wait for another rank, 0.001 to\n"
    "                       31536000 (a year; default 60)\n";

Options parseOptions(int argc, char **argv) {
  Options o;
  auto value = [&](int &i) -> std::string {
    if (i + 1 >= argc)
      fail(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  // An integer in [lo, hi]; the error states the range.
  auto integer = [&](int &i, int64_t lo, int64_t hi,
                     const std::string &range) -> int64_t {
    std::string flag = argv[i], v = value(i);
    char *end = nullptr;
    errno = 0;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno == ERANGE || n < lo || n > hi)
      fail(flag + " needs an integer from " + range + ", got '" + v + "'");
    return n;
  };
  // A number in [lo, hi] (so finite); the error states the range.
  auto real = [&](int &i, double lo, double hi,
                  const std::string &range) -> double {
    std::string flag = argv[i], v = value(i);
    char *end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(x >= lo && x <= hi))
      fail(flag + " needs a number from " + range + ", got '" + v + "'");
    return x;
  };
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(kUsage, argv[0]);
      std::exit(0);
    } else if (a == "--steps") {
      o.steps = integer(i, 1, kMaxSteps, "1 to 16777216 (2^24)");
    } else if (a == "--eval-every") {
      o.evalEvery = integer(i, 0, kMax, "0 to 2^63-1");
    } else if (a == "--log-every") {
      o.logEvery = integer(i, 0, kMax, "0 to 2^63-1");
    } else if (a == "--seed") {
      o.seed = uint64_t(integer(i, 0, kMax, "0 to 2^63-1"));
    } else if (a == "--lr") {
      o.lr = real(i, kMinLr, kMaxLr,
                  "1.2e-38 to 3.4e38 (a positive normal float32)");
    } else if (a == "--timeout") {
      o.timeout = real(i, kMinTimeout, kMaxTimeout,
                       "0.001 to 31536000 seconds (a year)");
    } else if (a == "--data") {
      o.data = value(i);
    } else if (a == "--trace") {
      o.trace = value(i);
    } else if (a == "--metrics") {
      o.metrics = value(i);
    } else if (a == "--init-from") {
      o.initFrom = value(i);
    } else if (a == "--inputs") {
      o.inputs = value(i);
    } else if (a == "--export") {
      o.exportTo = value(i);
    } else {
      fail("unknown option '" + a + "' (see --help)");
    }
  }
  return o;
}

//===----------------------------------------------------------------------===//
// Safetensors
//===----------------------------------------------------------------------===//

/// The process's resident high-water mark (getrusage), independent of the
/// runtime's allocator.
int64_t maxResidentBytes() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return -1;
  return int64_t(usage.ru_maxrss) * 1024;
}

/// The process's resident bytes now (/proc/self/statm), or -1: what the
/// tensor table costs measured by the operating system, not the allocator.
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  if (!(statm >> pages >> resident))
    return -1;
  return int64_t(resident) * int64_t(sysconf(_SC_PAGESIZE));
}

/// Whether world rank `rank` holds tensor `d` (a pipeline stage's
/// parameters and optimizer state live on its ranks only).
bool holds(loomrt_ctx *ctx, const loomrt_tensor_desc &d, int rank) {
  if (d.held_axis < 0)
    return true;
  if (d.held_axis >= int32_t(ctx->meshSizes.size()))
    fail("tensor '" + std::string(d.name) + "' is held along mesh axis " +
         std::to_string(d.held_axis) + ", which the mesh does not have");
  int64_t c = coordinates(ctx, rank)[size_t(d.held_axis)];
  return c < 64 && ((d.held_mask >> c) & 1);
}

/// The name of the whole tensor `d` is (part of).
const char *wholeName(const loomrt_tensor_desc &d) {
  return d.part_of ? d.part_of : d.name;
}

/// The shape of the whole tensor `d` is (part of): the stacked tensor of a
/// stage's part, else the whole of a rank's block, else its own shape.
Shape wholeShape(loomrt_ctx *ctx, const loomrt_tensor_desc &d) {
  if (d.part_of)
    return shapeOf(ctx, d.part_whole);
  Shape global = shapeOf(ctx, d.global_shape);
  return global.rank ? global : shapeOf(ctx, d.shape);
}

/// Where the block of `d` that world rank `rank` holds lies in the whole
/// tensor (ShardIndex for any rank, not only this one): the rank's block
/// of the tensor, moved to the part's offsets in the stacked tensor when
/// `d` is a stage's part.
ShardIndex blockOf(loomrt_ctx *ctx, const loomrt_tensor_desc &d, int rank) {
  ShardIndex index = shardIndex(ctx, d.shape, d.global_shape, d.shard_groups);
  Shape groups = shapeOf(ctx, d.shard_groups);
  std::vector<int64_t> coords = coordinates(ctx, rank);
  for (int32_t dim = 0; dim < index.rank; ++dim) {
    int64_t coordinate = 0;
    for (size_t a = 0; a < coords.size(); ++a)
      if (groups[dim] & (int64_t(1) << a))
        coordinate = coordinate * ctx->meshSizes[a] + coords[a];
    index.offset[dim] = coordinate * index.local[dim];
  }
  if (!d.part_of)
    return index;
  Shape local = shapeOf(ctx, d.shape), whole = shapeOf(ctx, d.part_whole),
        offsets = shapeOf(ctx, d.part_offsets);
  if (whole.rank != local.rank || offsets.rank != local.rank ||
      local.rank > ShardIndex::kMaxRank)
    fail("tensor '" + std::string(d.name) + "': its part's whole shape and "
         "offsets do not match its rank");
  if (index.rank == 0) {
    index.rank = int32_t(local.rank);
    for (int64_t dim = 0; dim < local.rank; ++dim) {
      index.local[dim] = local[dim];
      index.offset[dim] = 0;
      index.limit[dim] = local[dim];
    }
  }
  int64_t stride = 1;
  for (int64_t dim = local.rank - 1; dim >= 0; --dim) {
    index.offset[dim] += offsets[dim];
    index.limit[dim] += offsets[dim];
    index.stride[dim] = stride;
    stride *= whole[dim];
  }
  return index;
}

/// Reads the tensors of `role` (parameters or inputs) from a safetensors
/// file; each must be there with the model's shape and element type (a
/// stage's part reads its block of the whole tensor).
void loadSafetensors(loomrt_ctx *ctx, const std::string &path, int32_t role) {
  std::string bytes = readWholeFile(path);
  if (bytes.size() < 8)
    fail("'" + path + "' is not a safetensors file (too short)");
  uint64_t headerSize = 0;
  std::memcpy(&headerSize, bytes.data(), 8);
  if (headerSize > bytes.size() - 8)
    fail("'" + path + "': header size exceeds the file");
  // Parsed without exceptions: a malformed header is a discarded value.
  nlohmann::json header = nlohmann::json::parse(
      bytes.data() + 8, bytes.data() + 8 + headerSize, nullptr,
      /*allow_exceptions=*/false);
  if (header.is_discarded())
    fail("'" + path + "': bad header: not JSON");
  if (!header.is_object())
    fail("'" + path + "': the header is not a JSON object");
  // The integer at `v`, or -1 where it is not a non-negative integer.
  auto integer = [](const nlohmann::json &v) -> int64_t {
    return v.is_number_integer() && v.get<int64_t>() >= 0 ? v.get<int64_t>()
                                                          : -1;
  };
  const char *data = bytes.data() + 8 + headerSize;
  size_t dataSize = bytes.size() - 8 - headerSize;
  const loomrt_program *p = ctx->program;
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (d.role != role || !holds(ctx, d, ctx->rank))
      continue;
    std::string name = wholeName(d);
    auto found = header.find(name);
    if (found == header.end() || !found->is_object())
      fail("'" + path + "' has no tensor '" + name + "'");
    const nlohmann::json &e = *found;
    const char *dtype = d.dtype == LOOMRT_I32 ? "I32" : "F32";
    auto type = e.find("dtype");
    if (type == e.end() || !type->is_string() ||
        type->get<std::string>() != dtype)
      fail("'" + path + "': tensor '" + name + "' must be " + dtype);
    Shape s = wholeShape(ctx, d);
    auto shape = e.find("shape");
    bool same = shape != e.end() && shape->is_array() &&
                int64_t(shape->size()) == s.rank;
    for (int64_t i = 0; same && i < s.rank; ++i)
      same = integer((*shape)[size_t(i)]) == s[i];
    if (!same)
      fail("'" + path + "': tensor '" + name +
           "' does not have the model's shape");
    // data_offsets: [begin, end) of the data section, exactly two integers.
    auto offsets = e.find("data_offsets");
    if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2)
      fail("'" + path + "': tensor '" + name +
           "' needs data_offsets of two integers [begin, end]");
    int64_t begin = integer((*offsets)[0]);
    int64_t end = integer((*offsets)[1]);
    int64_t want = s.numel() * elementBytes(d.dtype);
    // Printed as the file has them (a negative or fractional offset, or
    // one past 2^63, is not -1 there).
    if (begin < 0 || end < begin || end - begin != want ||
        uint64_t(end) > dataSize)
      fail("'" + path + "': tensor '" + name + "' has bad data offsets [" +
           (*offsets)[0].dump() + ", " + (*offsets)[1].dump() + "] for " +
           std::to_string(want) + " bytes in a data section of " +
           std::to_string(dataSize));
    Shape local = shapeOf(ctx, d.shape);
    if (local.numel() == s.numel()) {
      backend::upload(ctx, ctx->tensors[t], data + begin, want);
      continue;
    }
    // This rank's block of the whole tensor.
    int64_t size = elementBytes(d.dtype);
    ShardIndex index = blockOf(ctx, d, ctx->rank);
    // Padding (the end of a block of an unevenly split dimension) is zero.
    std::vector<char> block(size_t(local.numel() * size), 0);
    for (int64_t i = 0; i < local.numel(); ++i)
      if (!index.padding(i))
        std::memcpy(block.data() + i * size,
                    data + begin + index.global(i) * size, size_t(size));
    backend::upload(ctx, ctx->tensors[t], block.data(),
                    int64_t(block.size()));
  }
}

/// Puts parameter `t` in place in `whole`, the host copy of the tensor it
/// belongs to: its own buffer, or, when it is stored as blocks or only
/// some ranks hold it, the holders' blocks gathered (a collective: every
/// rank calls it). A stage's part fills its layers of the stacked tensor.
void placeTensor(loomrt_ctx *ctx, int64_t t, float *whole) {
  const loomrt_tensor_desc &d = ctx->program->tensors[t];
  int64_t n = shapeOf(ctx, d.shape).numel();
  if (shapeOf(ctx, d.global_shape).rank == 0 && d.held_axis < 0) {
    std::vector<float> own(static_cast<size_t>(n));
    backend::download(ctx, own.data(), ctx->tensors[t], n * 4);
    ShardIndex index = blockOf(ctx, d, ctx->rank);
    for (int64_t i = 0; i < n; ++i)
      if (!index.padding(i))
        whole[index.global(i)] = own[size_t(i)];
    return;
  }
  uint32_t everyone = (1u << ctx->meshSizes.size()) - 1;
  // A rank that does not hold the tensor sends zeros in its place.
  char *own = ctx->tensors[t];
  if (!own) {
    own = allocate(ctx, n * 4);
    std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    backend::upload(ctx, own, zeros.data(), n * 4);
  }
  char *gathered = allocate(ctx, int64_t(ctx->world) * n * 4);
  loomrt_comm_all_gather(ctx, everyone,
                         reinterpret_cast<loomrt_buf *>(gathered),
                         reinterpret_cast<loomrt_buf *>(own), n, LOOMRT_F32);
  if (own != ctx->tensors[t])
    release(ctx, own, n * 4);
  std::vector<float> blocks(size_t(ctx->world * n));
  backend::download(ctx, blocks.data(), gathered, int64_t(blocks.size() * 4));
  release(ctx, gathered, int64_t(ctx->world) * n * 4);
  for (int rank = 0; rank < ctx->world; ++rank) {
    if (!holds(ctx, d, rank))
      continue;
    ShardIndex index = blockOf(ctx, d, rank);
    for (int64_t i = 0; i < n; ++i)
      if (!index.padding(i))
        whole[index.global(i)] = blocks[size_t(rank * n + i)];
  }
}

/// Writes the parameters, whole, as safetensors; every rank takes part (the
/// blocks of split parameters are gathered, and stages' parts put
/// together), rank 0 writes.
void exportSafetensors(loomrt_ctx *ctx, const std::string &path) {
  const loomrt_program *p = ctx->program;
  // The whole tensors, in the order their first part appears.
  std::vector<std::string> names;
  std::map<std::string, std::vector<float>> tensors;
  std::map<std::string, Shape> shapes;
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (d.role != LOOMRT_PARAM)
      continue;
    std::string name = wholeName(d);
    Shape s = wholeShape(ctx, d);
    auto [it, added] = tensors.try_emplace(name);
    if (added) {
      names.push_back(name);
      shapes[name] = s;
      it->second.assign(size_t(s.numel()), 0.0f);
    }
    placeTensor(ctx, t, it->second.data());
  }
  if (ctx->rank != 0)
    return;
  nlohmann::json header = nlohmann::json::object();
  int64_t offset = 0;
  for (const std::string &name : names) {
    const Shape &s = shapes[name];
    nlohmann::json shape = nlohmann::json::array();
    for (int64_t i = 0; i < s.rank; ++i)
      shape.push_back(s[i]);
    int64_t bytes = s.numel() * 4;
    header[name] = {{"dtype", "F32"},
                    {"shape", std::move(shape)},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8)
    text.push_back(' ');
  // Whole or not at all: a process killed while writing leaves the
  // previous file (Files.h).
  writeAtomically(path, [&](const auto &append) {
    uint64_t size = text.size();
    append(&size, 8);
    append(text.data(), text.size());
    for (const std::string &name : names)
      append(tensors[name].data(), tensors[name].size() * 4);
  });
}

//===----------------------------------------------------------------------===//
// Initialization and data
//===----------------------------------------------------------------------===//

/// Fills a persistent tensor with its initial value (zeros but for
/// parameters), computed here and uploaded.
void initialize(loomrt_ctx *ctx, const loomrt_tensor_desc &d, char *buf) {
  int64_t n = shapeOf(ctx, d.shape).numel();
  // Computed and uploaded in chunks: a temporary of the tensor's size
  // would stay in the heap after it is freed (glibc raises its mmap
  // threshold to what was freed), and the process would hold more than
  // the tensors.
  constexpr int64_t kChunk = 16384;
  std::vector<float> host(size_t(std::min(n, kChunk)));
  if (d.role != LOOMRT_PARAM) {
    int64_t bytes = n * elementBytes(d.dtype);
    std::vector<char> zeros(size_t(std::min(bytes, kChunk * 4)), 0);
    for (int64_t at = 0; at < bytes; at += int64_t(zeros.size()))
      backend::upload(ctx, buf + at, zeros.data(),
                      std::min(bytes - at, int64_t(zeros.size())));
    return;
  }
  uint64_t key = hashString(wholeName(d)) ^ hash64(ctx->seed);
  // Keyed by the element's index in the whole tensor, so a block (or a
  // stage's part) is exactly the slice of the unsplit parameter.
  ShardIndex index = blockOf(ctx, d, ctx->rank);
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    int64_t end = std::min(n, begin + kChunk);
    for (int64_t i = begin; i < end; ++i) {
      uint64_t k =
          key ^ hash64(uint64_t(index.global(i)) * 0x9e3779b97f4a7c15ULL + 1);
      float &x = host[size_t(i - begin)];
      if (index.padding(i)) {
        x = 0.0f;
        continue;
      }
      switch (d.init) {
      case LOOMRT_INIT_NORMAL:
        x = float(d.init_value * normal(k));
        break;
      case LOOMRT_INIT_UNIFORM:
        x = float(d.init_value * (2.0 * uniform(k) - 1.0));
        break;
      case LOOMRT_INIT_ZEROS:
        x = 0.0f;
        break;
      case LOOMRT_INIT_ONES:
        x = 1.0f;
        break;
      default:
        x = float(d.init_value);
      }
    }
    backend::upload(ctx, buf + begin * 4, host.data(), (end - begin) * 4);
  }
}

/// Synthetic text: sentences drawn from a fixed word list by a counter-based
/// generator, so that a language model has structure to learn.
std::string syntheticText(uint64_t seed) {
  static const char *words[] = {
      "the", "loom", "weaves", "a", "model", "across", "many", "devices",
      "gradients", "flow", "back", "through", "every", "layer", "and",
      "shards", "meet", "again", "in", "one", "step", "of", "training"};
  std::string text;
  for (uint64_t i = 0; text.size() < (1u << 18); ++i) {
    text += words[hash64(seed ^ (i * 2654435761ULL)) % std::size(words)];
    text += (hash64(i) % 9 == 0) ? ".\n" : " ";
  }
  return text;
}

struct Data {
  int32_t tokens = -1, labels = -1;
  std::string text;
  size_t trainEnd = 0;
};

Data prepareData(loomrt_ctx *ctx, const Options &o) {
  const loomrt_program *p = ctx->program;
  Data data;
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (d.role != LOOMRT_INPUT)
      continue;
    if (!std::strcmp(d.name, "tokens"))
      data.tokens = int32_t(t);
    if (!std::strcmp(d.name, "labels"))
      data.labels = int32_t(t);
  }
  bool lm = data.tokens >= 0 && data.labels >= 0 &&
            p->tensors[data.tokens].dtype == LOOMRT_I32;
  if (!o.data.empty() && !lm)
    fail("--data needs a language model with i32 inputs 'tokens' and "
         "'labels'");
  if (!lm)
    return data;
  // Text fills the tokens and the labels only; any other input (a RoPE
  // table, a mask) would stay zeros and train the model wrong.
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (d.role == LOOMRT_INPUT && int32_t(t) != data.tokens &&
        int32_t(t) != data.labels)
      fail(std::string("input '") + d.name +
           "' is neither 'tokens' nor 'labels': text (" +
           (o.data.empty() ? std::string("the synthetic text")
                           : "--data " + o.data) +
           ") fills only those, and it would stay all zeros; make it a "
           "parameter or a constant of the model, or give every input with "
           "--inputs FILE.safetensors");
  }
  data.text = o.data.empty() ? syntheticText(o.seed) : readWholeFile(o.data);
  Shape s = shapeOf(ctx, p->tensors[data.tokens].shape);
  size_t context = size_t(s.back());
  data.trainEnd = data.text.size() * 9 / 10;
  if (data.trainEnd < context + 2 || data.text.size() - data.trainEnd < context + 2)
    fail("the data has " + std::to_string(data.text.size()) +
         " bytes, too few for a context of " + std::to_string(context));
  return data;
}

/// Fills the inputs for `step` (from the held-out split for evaluation).
void fillInputs(loomrt_ctx *ctx, const Data &data, int64_t step, bool eval) {
  const loomrt_program *p = ctx->program;
  if (data.tokens >= 0 && !data.text.empty()) {
    const loomrt_tensor_desc &d = p->tensors[data.tokens];
    Shape s = shapeOf(ctx, d.shape);
    int64_t context = s.back(), rows = s.numel() / context;
    int64_t bound = d.bound > 0 ? d.bound : 256;
    size_t begin = eval ? data.trainEnd : 0;
    size_t span = (eval ? data.text.size() : data.trainEnd) - begin -
                  size_t(context) - 1;
    std::vector<int32_t> tokens(size_t(rows * context)),
        labels(size_t(rows * context));
    int32_t *tok = tokens.data(), *lab = labels.data();
    for (int64_t r = 0; r < rows; ++r) {
      uint64_t key = hash64(ctx->seed ^ hash64(uint64_t(step) * 1000003ULL +
                                               uint64_t(r) + (eval ? 7 : 0)));
      size_t start = begin + size_t(key % (span + 1));
      for (int64_t j = 0; j < context; ++j) {
        tok[r * context + j] =
            static_cast<unsigned char>(data.text[start + j]) % bound;
        lab[r * context + j] =
            static_cast<unsigned char>(data.text[start + j + 1]) % bound;
      }
    }
    backend::upload(ctx, ctx->tensors[data.tokens], tok, rows * context * 4);
    backend::upload(ctx, ctx->tensors[data.labels], lab, rows * context * 4);
    return;
  }
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (d.role != LOOMRT_INPUT)
      continue;
    int64_t n = shapeOf(ctx, d.shape).numel();
    uint64_t key = hashString(d.name) ^ hash64(ctx->seed) ^
                   hash64(uint64_t(step) + (eval ? 1ULL << 40 : 0));
    std::vector<float> values(size_t(d.dtype == LOOMRT_F32 ? n : 0));
    std::vector<int32_t> ids(size_t(d.dtype == LOOMRT_F32 ? 0 : n));
    if (d.dtype == LOOMRT_F32) {
      for (int64_t i = 0; i < n; ++i)
        values[i] = float(normal(key ^ hash64(uint64_t(i))));
      backend::upload(ctx, ctx->tensors[t], values.data(), n * 4);
    } else {
      int64_t bound = d.bound > 0 ? d.bound : 2;
      for (int64_t i = 0; i < n; ++i)
        ids[i] = int32_t(hash64(key ^ hash64(uint64_t(i))) % uint64_t(bound));
      backend::upload(ctx, ctx->tensors[t], ids.data(), n * 4);
    }
  }
}

int32_t findRole(const loomrt_program *p, int32_t role) {
  for (int64_t t = 0; t < p->num_tensors; ++t)
    if (p->tensors[t].role == role)
      return int32_t(t);
  return -1;
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  return buf;
}

/// Bytes sent so far, summed over collective kinds, by mesh axis (a group
/// of several axes is named by its axes joined with '+').
nlohmann::json bytesByAxis(loomrt_ctx *ctx) {
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  std::map<std::string, int64_t> byAxis;
  for (auto [key, bytes] : ctx->bytesSent) {
    std::string name;
    for (size_t a = 0; a < ctx->axisNames.size(); ++a)
      if (key.second & (1u << a))
        name += (name.empty() ? "" : "+") + ctx->axisNames[a];
    byAxis[name] += bytes;
  }
  return nlohmann::json(byAxis);
}

/// Bytes this rank has sent so far, over every collective and group.
int64_t totalBytesSent(loomrt_ctx *ctx) {
  std::lock_guard<std::mutex> lock(ctx->commMutex);
  int64_t total = 0;
  for (auto [key, bytes] : ctx->bytesSent)
    total += bytes;
  return total;
}

double evaluate(loomrt_ctx *ctx, const Data &data, int32_t lossIndex) {
  // The mean loss over a fixed set of held-out batches.
  constexpr int kBatches = 4;
  ctx->training = false;
  double total = 0.0;
  for (int b = 0; b < kBatches; ++b) {
    fillInputs(ctx, data, b, /*eval=*/true);
    TraceSpan span(ctx, "eval", "compute", 0);
    ctx->program->eval.run(ctx);
    float loss = 0.0f;
    backend::download(ctx, &loss, ctx->tensors[lossIndex], 4);
    total += loss;
  }
  ctx->training = true;
  return total / kBatches;
}

} // namespace

//===----------------------------------------------------------------------===//
// The training loop
//===----------------------------------------------------------------------===//

static int train(int argc, char **argv, const loomrt_program *program);

int loomrt_main(int argc, char **argv, const loomrt_program *program) {
  // What the C++ library throws (memory that cannot be had, a file system
  // error) is a located error on this rank, not an abort.
  try {
    return train(argc, argv, program);
  } catch (const std::bad_alloc &) {
    fail("out of memory (a host allocation failed)");
  } catch (const std::exception &e) {
    fail(std::string("unexpected error: ") + e.what());
  }
}

static int train(int argc, char **argv, const loomrt_program *program) {
  backend::prepareProcess(argv);
  Options o = parseOptions(argc, argv);
  loomrt_ctx ctx;
  ctx.program = program;
  ctx.seed = o.seed;
  ctx.lrOverride = o.lr;
  ctx.timeoutSeconds = o.timeout;
  ctx.tracePath = o.trace;
  loomrt_init_mesh(&ctx, program->num_axes, program->axis_names,
                   program->axis_sizes);
  const loomrt_program *p = program;
  int64_t residentBefore = residentBytes();
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (!holds(&ctx, d, ctx.rank)) {
      ctx.tensors.push_back(nullptr);
      continue;
    }
    int64_t bytes = shapeOf(&ctx, d.shape).numel() * elementBytes(d.dtype);
    ctx.tensors.push_back(allocate(&ctx, bytes));
    initialize(&ctx, d, ctx.tensors.back());
  }
  // What the allocator holds for this rank's tensor table (a pipeline
  // rank: its stages' parameters and optimizer state only).
  int64_t tensorBytes = ctx.currentBytes;
  // The same measured by the operating system (the host backend's tensors
  // are the process's pages; a device's are not), -1 where unknown.
  int64_t residentAfter = residentBytes();
  int64_t residentTensorBytes = residentBefore >= 0 && residentAfter >= 0
                                    ? residentAfter - residentBefore
                                    : -1;
  if (!o.initFrom.empty())
    loadSafetensors(&ctx, o.initFrom, LOOMRT_PARAM);
  bool fixedInputs = !o.inputs.empty();
  if (fixedInputs)
    loadSafetensors(&ctx, o.inputs, LOOMRT_INPUT);
  int64_t arenaBytes = std::max(p->step.arena_bytes, p->eval.arena_bytes);
  if (p->arena_bytes) {
    int64_t c = p->arena_axis >= 0
                    ? coordinates(&ctx, ctx.rank)[size_t(p->arena_axis)]
                    : 0;
    arenaBytes = p->arena_bytes[c];
  }
  ctx.arena = allocate(&ctx, arenaBytes);
  reserveBf16Scratch(&ctx, p->bf16_scratch_bytes);
  Data data = fixedInputs ? Data() : prepareData(&ctx, o);
  if (fixedInputs && o.evalEvery)
    fail("--eval-every needs held-out data, not fixed --inputs");
  int32_t lossIndex = findRole(p, LOOMRT_LOSS);
  int32_t iterIndex = findRole(p, LOOMRT_ITERATION);
  if (lossIndex < 0 || iterIndex < 0)
    fail("the program has no loss or step counter");

  // Throughput counts tokens for a language model (the elements of its
  // 'tokens' input) and samples (the leading dimension of the first input)
  // otherwise.
  int64_t tokensPerStep = 0, params = 0;
  std::set<std::string> counted;
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    Shape s = shapeOf(&ctx, d.shape);
    if (d.role == LOOMRT_PARAM && counted.insert(wholeName(d)).second)
      params += wholeShape(&ctx, d).numel();
    if (d.role == LOOMRT_INPUT && !std::strcmp(d.name, "tokens"))
      tokensPerStep = s.numel();
  }
  for (int64_t t = 0; t < p->num_tensors && !tokensPerStep; ++t) {
    Shape s = shapeOf(&ctx, p->tensors[t].shape);
    if (p->tensors[t].role == LOOMRT_INPUT)
      tokensPerStep = s.rank ? s[0] : 1;
  }

  // Rank 0 speaks for the job: progress, the summary, the metrics (unless
  // the path asks for every rank's) and the exported weights.
  bool lead = ctx.rank == 0;
  std::string metricsPath = o.metrics;
  bool perRank = metricsPath.find("%r") != std::string::npos;
  for (size_t at; (at = metricsPath.find("%r")) != std::string::npos;)
    metricsPath.replace(at, 2, std::to_string(ctx.rank));
  // Every output path is checked before any work; the metrics stream to
  // FILE.partial until the run ends.
  if (!metricsPath.empty() && (lead || perRank))
    checkWritable(metricsPath, "--metrics");
  if (!o.exportTo.empty() && lead) {
    checkWritable(o.exportTo, "--export");
    // What an export killed mid-write left goes now, not at the next
    // export only (a run that fails first would keep it).
    removeStaleTemporaries(o.exportTo);
  }
  if (!o.trace.empty()) {
    std::string tracePath = o.trace;
    for (size_t at; (at = tracePath.find("%r")) != std::string::npos;)
      tracePath.replace(at, 2, std::to_string(ctx.rank));
    checkWritable(tracePath, "--trace");
  }
  std::optional<PartialFile> metricsFile;
  std::FILE *metrics = nullptr;
  if (!metricsPath.empty() && (lead || perRank)) {
    metricsFile.emplace(metricsPath);
    metrics = metricsFile->get();
  }
  if (!lead && !std::freopen("/dev/null", "w", stdout))
    fail("cannot silence the output of rank " + std::to_string(ctx.rank));
  int64_t logEvery = o.logEvery ? o.logEvery : std::max<int64_t>(1, o.steps / 25);
  std::printf("loom: training %s: %lld parameters, %lld steps, %s of "
              "parameters and optimizer state, %s arena\n",
              p->name, (long long)params, (long long)o.steps,
              formatBytes(double(ctx.currentBytes - arenaBytes)).c_str(),
              formatBytes(double(arenaBytes)).c_str());
  if (std::string device = backend::describe(&ctx); !device.empty())
    std::printf("loom: %s\n", device.c_str());
  std::fflush(stdout);

  double firstLoss = 0.0, lastLoss = 0.0, totalSeconds = 0.0;
  double firstEval = NAN, lastEval = NAN;
  if (o.evalEvery)
    firstEval = evaluate(&ctx, data, lossIndex);
  // LOOMRT_POISON_ARENA=1 fills the arena with NaNs before every step: a
  // value the program reads before it writes it then shows in the loss.
  std::vector<unsigned char> poison;
  if (const char *v = std::getenv("LOOMRT_POISON_ARENA"); v && *v == '1')
    poison.assign(size_t(arenaBytes), 0xff);
  for (int64_t step = 0; step < o.steps; ++step) {
    ctx.step = step;
    if (!poison.empty())
      backend::upload(&ctx, ctx.arena, poison.data(), arenaBytes);
    if (!fixedInputs)
      fillInputs(&ctx, data, step, /*eval=*/false);
    float stepValue = float(step);
    backend::upload(&ctx, ctx.tensors[iterIndex], &stepValue, 4);
    auto start = std::chrono::steady_clock::now();
    {
      TraceSpan span(&ctx, "step " + std::to_string(step), "compute", 0);
      p->step.run(&ctx);
      loomrt_sync(&ctx);
    }
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    totalSeconds += seconds;
    float stepLoss = 0.0f;
    backend::download(&ctx, &stepLoss, ctx.tensors[lossIndex], 4);
    double loss = stepLoss;
    if (!std::isfinite(loss))
      fail("the loss is " + std::to_string(loss) + " at step " +
           std::to_string(step + 1) + " (counted from 1, as the progress "
           "lines count)");
    if (step == 0)
      firstLoss = loss;
    lastLoss = loss;
    bool evalNow = o.evalEvery && ((step + 1) % o.evalEvery == 0 ||
                                   step + 1 == o.steps);
    double evalLoss = evalNow ? evaluate(&ctx, data, lossIndex) : NAN;
    if (evalNow)
      lastEval = evalLoss;
    double tps = double(tokensPerStep) / std::max(seconds, 1e-9);
    if (step % logEvery == 0 || step + 1 == o.steps || evalNow) {
      std::printf("step %5lld/%lld  loss %.4f  lr %.3e  %9.0f tok/s  peak %s",
                  (long long)step + 1, (long long)o.steps, loss, ctx.lastLr,
                  tps, formatBytes(double(ctx.peakBytes)).c_str());
      if (ctx.world > 1)
        std::printf("  sent %s", formatBytes(double(totalBytesSent(&ctx))).c_str());
      if (evalNow)
        std::printf("  eval %.4f", evalLoss);
      std::printf("\n");
      std::fflush(stdout);
    }
    if (metrics) {
      nlohmann::json m = {{"step", step},
                          {"loss", loss},
                          {"lr", ctx.lastLr},
                          {"tokens_per_s", tps},
                          {"peak_bytes", ctx.peakBytes.load()},
                          {"tensor_bytes", tensorBytes},
                          {"resident_tensor_bytes", residentTensorBytes},
                          {"arena_bytes", arenaBytes},
                          {"max_rss_bytes", maxResidentBytes()},
                          {"bytes_sent", bytesByAxis(&ctx)}};
      if (evalNow)
        m["eval_loss"] = evalLoss;
      std::fprintf(metrics, "%s\n", m.dump().c_str());
    }
  }
  if (metricsFile)
    metricsFile->finish();
  if (!o.exportTo.empty())
    exportSafetensors(&ctx, o.exportTo);
  std::printf("loom: done: loss %.4f -> %.4f", firstLoss, lastLoss);
  if (o.evalEvery)
    std::printf(", held-out loss %.4f -> %.4f", firstEval, lastEval);
  std::printf(", %.0f tok/s, peak %s\n",
              double(tokensPerStep) * double(o.steps) /
                  std::max(totalSeconds, 1e-9),
              formatBytes(double(ctx.peakBytes)).c_str());
  // Every buffer goes back before the process ends (the sanitized suite
  // checks that nothing leaks).
  release(&ctx, ctx.arena, arenaBytes);
  releaseBf16Scratch(&ctx);
  for (int64_t t = 0; t < p->num_tensors; ++t) {
    const loomrt_tensor_desc &d = p->tensors[t];
    if (ctx.tensors[t])
      release(&ctx, ctx.tensors[t],
              shapeOf(&ctx, d.shape).numel() * elementBytes(d.dtype));
  }
  ctx.tensors.clear();
  loomrt_finalize(&ctx);
  return 0;
}
