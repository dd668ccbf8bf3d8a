//===- loomc.cpp - the Loom driver ------------------------------------------===//
//
// loomc MODEL.mlir [options] -o OUT: runs the Loom pipeline (verify,
// autodiff, optimizer), lowers the training step to EmitC, prints it as C++
// with MLIR's C++ emitter, and compiles and links it against the runtime.
//
//===----------------------------------------------------------------------===//

#include "codegen/Passes.h"
#include "analysis/Report.h"
#include "dialects/common/UpstreamDefects.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/sharding/TrainShardingRules.h"
#include "dialects/train/TrainDialect.h"
#include "passes/Passes.h"
#include "passes/Schedules.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory loomcCategory("loomc options");

/// An integer option that accepts only what the compiler can honour,
/// checked as the command line is read: the error states the range (as
/// the option's --help does).
/// (`long long`: LLVM's parser of it may be derived from, its `long` one
/// may not.)
template <int64_t Lo, int64_t Hi>
class BoundedInt : public cl::parser<long long> {
public:
  BoundedInt(cl::Option &option) : cl::parser<long long>(option) {}
  bool parse(cl::Option &option, StringRef, StringRef arg, long long &value) {
    if (arg.trim().getAsInteger(10, value) || value < Lo || value > Hi)
      return option.error(
          llvm::formatv("expected an integer from {0} to {1}, got '{2}'", Lo,
                        Hi, arg)
              .str());
    return false;
  }
};

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("MODEL.mlir"),
                                      cl::Required, cl::cat(loomcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("OUT"), cl::init("-"),
                                       cl::cat(loomcCategory));

enum class Emit { MLIR, Cpp, Exe };
static cl::opt<Emit> emit(
    "emit", cl::desc("Stop after a phase"), cl::init(Emit::Exe),
    cl::values(clEnumValN(Emit::MLIR, "mlir",
                          "the training step in the train dialect"),
               clEnumValN(Emit::Cpp, "cpp", "the rank program as C++"),
               clEnumValN(Emit::Exe, "exe", "an executable (default)")),
    cl::cat(loomcCategory));

static cl::opt<std::string> dumpPhases(
    "dump-phases", cl::desc("Write every phase's IR into DIR"),
    cl::value_desc("DIR"), cl::cat(loomcCategory));

enum class Target { Host, Cuda };
static cl::opt<Target> target(
    "target", cl::desc("Runtime backend the executable links against"),
    cl::init(Target::Host),
    cl::values(clEnumValN(Target::Host, "host", "OpenBLAS and C++ kernels"),
               clEnumValN(Target::Cuda, "cuda",
                          "cuBLAS, NCCL and CUDA kernels, one GPU per rank "
                          "(linked by nvcc)")),
    cl::cat(loomcCategory));

static cl::opt<bool> report(
    "report",
    cl::desc("Print the plan's figures: memory per rank by component, "
             "communication, bubble, FLOPs, predicted time (with --cluster); "
             "without -o, only the report"),
    cl::cat(loomcCategory));
static cl::opt<std::string> reportJson(
    "report-json", cl::desc("Write the report as JSON to FILE"),
    cl::value_desc("FILE"), cl::cat(loomcCategory));
static cl::opt<std::string> clusterFile(
    "cluster", cl::desc("Cluster description (clusters/*.json) for the "
                        "predicted step time and MFU"),
    cl::value_desc("FILE"), cl::cat(loomcCategory));

static cl::opt<std::string> meshSpec(
    "mesh",
    cl::desc("Device mesh, axes outermost first (e.g. pp=2,dp=2,tp=2); the "
             "product is the number of ranks to launch. dp, tp and pp are "
             "the data, tensor and pipeline axes; another name states its "
             "role: stage=2:pipeline. At most 8 axes and 1048576 ranks"),
    cl::value_desc("AXIS=N,..."), cl::cat(loomcCategory));

static cl::opt<std::string> rematPolicy(
    "remat",
    cl::desc("What the backward recomputes of each layer loop: none (nothing: "
             "the forward keeps what the backward reads; the fastest, the "
             "default), selective (the pointwise functions, norms and "
             "softmax from the saved matmul and attention outputs) or full "
             "(each layer from its saved input; the least memory). With "
             "--cluster and no --remat, a model that does not fit the "
             "device with none is refused, naming the policy that fits"),
    cl::value_desc("none|selective|full"), cl::init("none"),
    cl::cat(loomcCategory));

static cl::opt<bool> commOverlap(
    "comm-overlap",
    cl::desc("Overlap collectives with compute (the default): each wait where "
             "its results are first read; =false waits right after each "
             "start (the baseline bench/comm-overlap.sh compares against)"),
    cl::init(true), cl::cat(loomcCategory));

static cl::opt<long long, false, BoundedInt<0, 3>> zeroStage(
    "zero",
    cl::desc("ZeRO stage over the data axis: 0 (none, the default), 1 (the "
             "optimizer state split over dp; gradients reduce-scattered "
             "once, updated blocks all-gathered), 2 (and the gradients, "
             "reduce-scattered where each is made), 3 (and the parameters, "
             "gathered for each use)"),
    cl::value_desc("0|1|2|3"), cl::init(0), cl::cat(loomcCategory));

static cl::opt<std::string> rematBudget(
    "remat-budget",
    cl::desc("With --remat=budget: the activation bytes a rank may hold "
             "(0 to 2^63-1; K, M, G: powers of 1024); loomc recomputes the "
             "layers that cost least to fit"),
    cl::value_desc("BYTES"), cl::cat(loomcCategory));

static cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Megatron sequence parallelism on the 'tp' axis: the residual "
             "stream split along the sequence between tensor-parallel layers"),
    cl::cat(loomcCategory));

static cl::opt<std::string> shardingPreset(
    "sharding",
    cl::desc("Annotations to start sharding propagation from: dp (the batch "
             "over 'dp'), megatron (Megatron-LM's column- and row-parallel "
             "weights over 'tp') or auto (both, where the mesh has the axis)"),
    cl::value_desc("auto|dp|megatron"), cl::init("auto"),
    cl::cat(loomcCategory));

enum class PrecisionFlag { Fp32, Bf16 };
static cl::opt<PrecisionFlag> precision(
    "precision", cl::desc("Element precision of the plan"),
    cl::init(PrecisionFlag::Fp32),
    cl::values(clEnumValN(PrecisionFlag::Fp32, "fp32", "float32 throughout"),
               clEnumValN(PrecisionFlag::Bf16, "bf16",
                          "mixed precision: bf16 parameters and activations, "
                          "fp32 master weights, gradients and optimizer "
                          "state (the default for a model that declares "
                          "bf16 parameters)")),
    cl::cat(loomcCategory));

static cl::opt<PrecisionFlag> gradPrecision(
    "grad-precision",
    cl::desc("With --precision=bf16, the gradients' precision"),
    cl::init(PrecisionFlag::Fp32),
    cl::values(clEnumValN(PrecisionFlag::Fp32, "fp32",
                          "accumulated and reduced in fp32, as Megatron-LM's "
                          "main_grad buffers (the default: 18 bytes a "
                          "parameter with AdamW)"),
               clEnumValN(PrecisionFlag::Bf16, "bf16",
                          "kept, accumulated and reduced in bf16, each "
                          "widened as the update reads it (the ZeRO paper's "
                          "16 bytes a parameter)")),
    cl::cat(loomcCategory));

static cl::opt<long long, false, BoundedInt<1, loom::kMaxRepeatCount>>
    microBatches(
    "micro-batches",
    cl::desc("Micro-batches per optimizer step: gradients accumulated over "
             "M slices of the batch, normalised as one batch (1 to 1048576)"),
    cl::value_desc("M"), cl::init(1), cl::cat(loomcCategory));

static cl::opt<std::string> scheduleSpec(
    "schedule",
    cl::desc("Pipeline schedule on a mesh with a pp axis: gpipe, 1f1b, "
             "interleaved, zb (ZB-H1), or a CSV file with one row of actions "
             "(stage, F/B/I/W, micro-batch: 1F3) per pipeline rank; 1f1b "
             "by default"),
    cl::value_desc("NAME|FILE.csv"), cl::init("1f1b"), cl::cat(loomcCategory));

static cl::opt<long long, false, BoundedInt<1, loom::kMaxRepeatCount>>
    virtualStages(
    "virtual-stages",
    cl::desc("Pipeline stages per rank (the interleaved schedule; 1 to "
             "1048576)"),
    cl::value_desc("V"), cl::init(1), cl::cat(loomcCategory));

static cl::opt<std::string> scheduleSvg(
    "schedule-svg",
    cl::desc("With --report on a pipeline: draw the simulated schedule's "
             "timeline as SVG into FILE"),
    cl::value_desc("FILE"), cl::cat(loomcCategory));

static cl::list<std::string> passPlugins(
    "load-pass-plugin",
    cl::desc("Load the MLIR pass plugin LIB (a shared library built against "
             "the installed Loom, see examples/pass-plugin)"),
    cl::value_desc("LIB"), cl::cat(loomcCategory));

static cl::list<std::string> dialectPlugins(
    "load-dialect-plugin",
    cl::desc("Load the MLIR dialect plugin LIB: its ops may appear in the "
             "model where they implement train's KernelOpInterface (their "
             "kernels linked with --kernels)"),
    cl::value_desc("LIB"), cl::cat(loomcCategory));

static cl::list<std::string> kernelFiles(
    "kernels",
    cl::desc("Compile and link FILE into the program (C or C++ source, "
             "object or library): the loomrt_<op> kernels of a dialect "
             "plugin's ops"),
    cl::value_desc("FILE"), cl::cat(loomcCategory));

static cl::opt<std::string> insertAfter(
    "insert-after",
    cl::desc("Run --plugin-pipeline right after the pipeline's pass PASS "
             "(e.g. train-verify, train-autodiff, dist-partition)"),
    cl::value_desc("PASS"), cl::cat(loomcCategory));

static cl::opt<std::string> pluginPipeline(
    "plugin-pipeline",
    cl::desc("The passes --insert-after runs, as a textual pipeline "
             "(e.g. 'pin-sharding{param=w_fc axis=dp dim=1}')"),
    cl::value_desc("PIPELINE"), cl::cat(loomcCategory));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "loomc: error: " << message << "\n";
  return 1;
}

/// Fails unless `path` (given by option `flag`) names a file loomc can
/// create or replace: not a directory, in a directory that exists and
/// this process may write.
static int checkWritable(StringRef flag, StringRef path) {
  namespace fs = llvm::sys::fs;
  if (fs::is_directory(path))
    return fail(flag + " " + path + ": is a directory; it names a file to "
                "write");
  StringRef dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  if (!fs::exists(dir))
    return fail(flag + " " + path + ": its directory '" + dir +
                "' does not exist");
  if (!fs::is_directory(dir))
    return fail(flag + " " + path + ": '" + dir + "' is not a directory");
  if (fs::access(dir, fs::AccessMode::Write))
    return fail(flag + " " + path + ": cannot write in '" + dir + "'");
  return 0;
}

static LogicalResult writeFile(StringRef path, StringRef text) {
  std::string error;
  auto out = openOutputFile(path, &error);
  if (!out) {
    llvm::errs() << "loomc: error: " << error << "\n";
    return failure();
  }
  out->os() << text;
  out->keep();
  return success();
}

static std::string print(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

/// Writes `text` as the phase file `name` when --dump-phases is given.
static LogicalResult dumpPhase(StringRef name, StringRef text) {
  if (dumpPhases.empty())
    return success();
  if (std::error_code ec = llvm::sys::fs::create_directories(dumpPhases))
    return fail("cannot create '" + dumpPhases + "': " + ec.message()),
           failure();
  llvm::SmallString<256> path(dumpPhases);
  llvm::sys::path::append(path, name);
  return writeFile(path, text);
}

/// The compiler driver and runtime libraries of a target: the host C++
/// compiler for --target=host, nvcc for --target=cuda (it links the CUDA
/// runtime); an error message when the target cannot be built here.
struct Toolchain {
  std::string driver;
  std::vector<std::string> libraries;
};

/// Where loomc runs from, set in main.
static std::string loomcPath;

/// `installed` (a path under the prefix loomc is installed in) when it
/// exists there, else `built` (the build tree loomc was configured in).
static std::string runtimePath(StringRef installed, StringRef built) {
  llvm::SmallString<256> path(llvm::sys::path::parent_path(
      llvm::sys::path::parent_path(loomcPath)));
  llvm::sys::path::append(path, installed);
  return llvm::sys::fs::exists(path) ? std::string(path) : built.str();
}

static llvm::Expected<Toolchain> toolchainFor(Target t) {
  Toolchain tc;
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (t == Target::Host) {
    const char *cxxEnv = std::getenv("CXX");
    llvm::ErrorOr<std::string> cxx =
        llvm::sys::findProgramByName(cxxEnv && *cxxEnv ? cxxEnv : "c++");
    if (!cxx || !llvm::sys::fs::can_execute(*cxx))
      return error("no C++ compiler found (install g++ or set CXX)");
    tc.driver = *cxx;
    tc.libraries = {runtimePath("lib/libloomrt_host.a",
                                LOOM_RUNTIME_HOST_LIBRARY),
                    LOOM_OPENBLAS_LIBRARY};
    return tc;
  }
#ifdef LOOM_RUNTIME_CUDA_LIBRARY
  if (!llvm::sys::fs::can_execute(LOOM_NVCC))
    return error("nvcc is not at " LOOM_NVCC " (the cuda backend was "
                 "configured with it)");
  tc.driver = LOOM_NVCC;
  tc.libraries = {LOOM_RUNTIME_CUDA_LIBRARY, "-L" LOOM_CUDA_LIBRARY_DIR,
                  "-lcublas", LOOM_NCCL_LIBRARY,
                  "-Xlinker=-rpath," LOOM_CUDA_LIBRARY_DIR};
  return tc;
#else
  return error("this loomc was built without the cuda backend (configure "
               "Loom where nvcc, cuBLAS and NCCL are installed, or use "
               "--target=host)");
#endif
}

/// Compiles `cpp` into the executable `out` with the target's toolchain.
static int buildExecutable(StringRef cpp, StringRef out) {
  llvm::Expected<Toolchain> toolchain = toolchainFor(target);
  if (!toolchain)
    return fail(llvm::toString(toolchain.takeError()));
  llvm::SmallString<128> source;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("loom-program", "cpp", fd, source))
    return fail("cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << cpp;
  }
  llvm::FileRemover remove(source);
  // The runtime's header: installed beside loomc, or in the source tree.
  std::string header = runtimePath("include/loomrt/loomrt.h", "");
  std::string includeFlag =
      header.empty()
          ? std::string("-I" LOOM_RUNTIME_INCLUDE_DIR)
          : "-I" + llvm::sys::path::parent_path(
                       llvm::sys::path::parent_path(header))
                       .str();
  std::vector<std::string> args = {toolchain->driver, "-O2", "-std=c++17",
                                   "-w", includeFlag,
                                   std::string(source)};
  args.insert(args.end(), kernelFiles.begin(), kernelFiles.end());
  bool nvcc = target == Target::Cuda;
  // A sanitized loomc builds sanitized programs: its runtime needs the
  // sanitizers' own runtime, and the program is checked as it trains.
  if (!nvcc) {
    llvm::SmallVector<StringRef> flags;
    StringRef(LOOM_PROGRAM_FLAGS).split(flags, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef flag : flags)
      args.push_back(flag.str());
  }
  args.insert(args.end(), toolchain->libraries.begin(),
              toolchain->libraries.end());
  llvm::SmallVector<StringRef> mpi;
  StringRef(LOOM_MPI_LIBRARIES).split(mpi, ';', -1, /*KeepEmpty=*/false);
  for (StringRef lib : mpi)
    args.push_back(lib.str());
  args.insert(args.end(), {"-lm", "-o", out.str()});
  std::vector<StringRef> argv(args.begin(), args.end());
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(toolchain->driver, argv, std::nullopt, {},
                                     0, 0, &error);
  if (rc != 0)
    return fail("the " + llvm::Twine(nvcc ? "CUDA" : "C++") + " compiler (" +
                toolchain->driver + ") failed" +
                (error.empty() ? llvm::Twine("") : ": " + error) +
                "; the generated C++ is printed by --emit=cpp");
  return 0;
}

/// Checks that the model's first input has a row for each of
/// --micro-batches (train-grad-accumulation checks that they divide it),
/// with the error at that input: a schedule's size grows with them.
static LogicalResult checkMicroBatches(ModuleOp module) {
  for (auto model : module.getOps<loom::train::ModelOp>())
    for (auto input : model.getBody().front().getOps<loom::train::InputOp>()) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getRank() == 0)
        return input.emitOpError("is a scalar: there is no batch dimension "
                                 "to split into micro-batches");
      if (type.getDimSize(0) < microBatches)
        return input.emitOpError("has a batch of ")
               << type.getDimSize(0) << ", fewer rows than the "
               << int64_t(microBatches)
               << " micro-batches (--micro-batches) to split it into";
      break;
    }
  return success();
}

/// A layout that splits nothing over one of its axes would run every rank
/// of that axis on the whole of the same work: refused, naming the axis.
/// Whatever splits a value over an axis communicates over it (a gradient's
/// reduction over dp, a layer's all-reduce over tp), so an axis no
/// collective names split nothing. The tensor axis must also split some
/// parameter evenly: padded blocks of the vocabulary alone would leave
/// every rank the whole of the layers.
static LogicalResult checkEveryAxisSplits(ModuleOp module,
                                          loom::dist::MeshAttr mesh) {
  using loom::dist::AxisRole;
  for (auto model : module.getOps<loom::train::ModelOp>()) {
    llvm::StringSet<> used;
    model.walk([&](Operation *op) {
      if (!isa<loom::dist::DistDialect>(op->getDialect()))
        return;
      if (auto axes = op->getAttrOfType<ArrayAttr>("axes"))
        for (Attribute axis : axes)
          if (auto name = dyn_cast<StringAttr>(axis))
            used.insert(name.getValue());
      if (auto axis = op->getAttrOfType<StringAttr>("axis"))
        used.insert(axis.getValue());
    });
    // The mesh axes (bit masks) that split some parameter's dimension
    // evenly.
    int64_t evenly = 0;
    loom::dist::DistDialect &dist = loom::dist::attrs(module.getContext());
    for (auto param : model.getBody().front().getOps<loom::train::ParamOp>()) {
      auto global = dist.getGlobalShapeAttrHelper().getAttr(param);
      auto groups = dist.getShardGroupsAttrHelper().getAttr(param);
      if (!global || !groups)
        continue;
      for (auto [whole, block, mask] :
           llvm::zip(global.asArrayRef(), param.getType().getShape(),
                     groups.asArrayRef())) {
        if (block * mesh.getGroupSize(mask) == whole)
          evenly |= mask;
      }
    }
    for (auto [index, axis, size, role] :
         llvm::enumerate(mesh.getNames(), mesh.getSizes(), mesh.getRoles())) {
      bool splits = used.contains(axis.getValue()) &&
                    (role != AxisRole::Tensor || (evenly >> index) & 1);
      if (size == 1 || role == AxisRole::Pipeline || splits)
        continue;
      InFlightDiagnostic diag = model.emitOpError("cannot be split over '")
                                << axis.getValue() << "' (--mesh "
                                << mesh.getSpec() << "): ";
      if (role == AxisRole::Data)
        diag << "no input's batch divides into " << size
             << " parts, so every data-parallel rank would train on the "
                "whole batch; make the batch (per micro-batch) a multiple of "
             << size;
      else
        diag << "no weight's dimension that tensor parallelism splits (the "
                "heads, the hidden and feed-forward sizes) divides by "
             << size
             << ", so every tensor-parallel rank would compute the whole "
                "model; choose a size that divides them";
      return failure();
    }
  }
  return success();
}

/// The schedule --schedule names (built in, or read from CSV) for a mesh
/// with `pp` pipeline ranks, checked against the mesh and --micro-batches
/// (its warnings printed).
static llvm::Expected<loom::pipeline::Schedule> pipelineSchedule(int64_t pp) {
  std::vector<std::string> warnings;
  llvm::Expected<loom::pipeline::Schedule> schedule =
      loom::loadPipelineSchedule(scheduleSpec, pp, microBatches,
                                 virtualStages, warnings);
  if (!schedule)
    return schedule.takeError();
  for (const std::string &w : warnings)
    llvm::errs() << "loomc: warning: " << w << "\n";
  if (schedule->ranks != pp)
    return llvm::createStringError(
        llvm::formatv("it lists {0} pipeline ranks; the mesh's pipeline axis "
                      "has {1}",
                      schedule->ranks, pp));
  if (schedule->microBatches != microBatches)
    return llvm::createStringError(
        llvm::formatv("it runs {0} micro-batches; --micro-batches is {1}",
                      schedule->microBatches, int64_t(microBatches)));
  return schedule;
}

/// The pipeline of a mesh with a pipeline axis as --report plans it: the
/// stages dist-pipeline-partition cut (its record on the training step),
/// the schedule (built in or read from CSV), and its simulation with the
/// stages' costs (a backward's input and weight parts each cost the
/// stage's forward).
/// The report of `input` (the model as parsed) compiled with `given`'s
/// options but the rematerialization policy `remat`, to the rank program:
/// what the default policy is checked against, and what --remat=budget
/// chooses from.
static FailureOr<loom::analysis::Report>
planWithRemat(ModuleOp input, const loom::LoomOptions &given,
              StringRef remat, loom::analysis::Config config,
              const std::optional<loom::analysis::Cluster> &cluster,
              bool tensorOrPipeline) {
  OwningOpRef<ModuleOp> module = input.clone();
  loom::LoomOptions options;
  options.copyOptionValuesFrom(given);
  options.afterPass = given.afterPass;
  options.remat = remat.str();
  options.from = loom::Phase::TrainingStep;
  options.until = loom::Phase::TrainingStep;
  PassManager step(input.getContext());
  loom::buildLoomPipeline(step, options);
  if (failed(step.run(*module)))
    return failure();
  auto model = *module->getOps<loom::train::ModelOp>().begin();
  if (loom::dist::MeshAttr mesh = loom::dist::MeshAttr::lookup(model))
    config.mesh = mesh;
  FailureOr<loom::analysis::Report> plan =
      loom::analysis::reportModel(model, config, cluster);
  if (failed(plan))
    return failure();
  if (!config.mesh)
    return plan;
  PassManager rank(input.getContext());
  options.from = loom::Phase::RankProgram;
  options.until = loom::Phase::RankProgram;
  loom::buildLoomPipeline(rank, options);
  if (failed(rank.run(*module)))
    return failure();
  model = *module->getOps<loom::train::ModelOp>().begin();
  plan->setCommunication(
      loom::analysis::countCommunication(model, config.mesh, cluster));
  if (tensorOrPipeline && failed(plan->useRankProgram(model)))
    return failure();
  return plan;
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
static std::optional<int64_t> parseBytes(StringRef text) {
  int64_t scale = 1;
  if (text.ends_with_insensitive("k"))
    scale = int64_t(1) << 10;
  else if (text.ends_with_insensitive("m"))
    scale = int64_t(1) << 20;
  else if (text.ends_with_insensitive("g"))
    scale = int64_t(1) << 30;
  if (scale != 1)
    text = text.drop_back();
  uint64_t n = 0;
  if (text.empty() || text.getAsInteger(10, n) ||
      n > uint64_t(INT64_MAX / scale))
    return std::nullopt;
  return int64_t(n) * scale;
}

/// The layers of the model's layer stack: its longest forward loop.
static int64_t layerCount(ModuleOp module) {
  int64_t layers = 0;
  module.walk([&](loom::train::RepeatOp repeat) {
    if (!repeat.getReverse())
      layers = std::max<int64_t>(layers, repeat.getCount());
  });
  return layers;
}

/// --remat=budget: the per-layer policies (K layers full, then J
/// selective, the rest none) with the least added recomputation, in
/// predicted seconds with a cluster, else FLOP-equivalents (FLOPs, and 20
/// per byte a recomputed collective sends), whose most loaded rank's
/// activations fit `budget`. Layers are alike, so the recomputation of an
/// assignment is K times a full layer's plus J times a selective one's
/// (from the uniform plans); candidates are compiled cheapest first, and
/// the first that fits is the optimum over the K and J. Fails, saying so,
/// where even full recomputation does not fit.
static FailureOr<std::string>
chooseRematForBudget(ModuleOp input, const loom::LoomOptions &options,
                     int64_t budget, const loom::analysis::Config &config,
                     const std::optional<loom::analysis::Cluster> &cluster,
                     bool tensorOrPipeline) {
  int64_t layers = layerCount(input);
  auto plan = [&](StringRef remat) {
    return planWithRemat(input, options, remat, config, cluster,
                         tensorOrPipeline);
  };
  auto added = [&](const loom::analysis::Report &r) {
    double bytes = 0;
    for (const loom::analysis::CommLine &c : r.communication)
      bytes += c.recomputeBytesSent;
    if (cluster)
      return double(r.recomputeFlopsPerStep) /
                 (config.precision == loom::analysis::Precision::Bf16
                      ? cluster->peakFlopsBf16
                      : cluster->peakFlopsFp32) +
             bytes / cluster->intraBandwidth;
    return double(r.recomputeFlopsPerStep) + 20.0 * bytes;
  };
  FailureOr<loom::analysis::Report> full = plan("full");
  FailureOr<loom::analysis::Report> selective = plan("selective");
  if (failed(full) || failed(selective))
    return failure();
  if (full->worstRankActivationBytes() > budget) {
    llvm::errs() << llvm::formatv(
        "loomc: error: --remat-budget={0}: below the smallest activation "
        "peak any policy reaches, {1} bytes on the most loaded rank "
        "(--remat=full)\n",
        budget, full->worstRankActivationBytes());
    return failure();
  }
  double perFull = added(*full) / double(std::max<int64_t>(layers, 1));
  double perSelective =
      added(*selective) / double(std::max<int64_t>(layers, 1));
  struct Candidate {
    int64_t full, selective;
    double cost;
  };
  std::vector<Candidate> candidates;
  for (int64_t k = 0; k <= layers; ++k)
    for (int64_t j = 0; k + j <= layers; ++j)
      candidates.push_back({k, j, double(k) * perFull + double(j) * perSelective});
  llvm::stable_sort(candidates, [](const Candidate &a, const Candidate &b) {
    return a.cost < b.cost;
  });
  for (const Candidate &c : candidates) {
    std::string list;
    for (int64_t l = 0; l < layers; ++l)
      list += std::string(l ? "," : "") +
              (l < c.full ? "full" : l < c.full + c.selective ? "selective"
                                                               : "none");
    FailureOr<loom::analysis::Report> r = plan(list);
    if (failed(r))
      return failure();
    if (r->worstRankActivationBytes() <= budget)
      return list;
  }
  return std::string("full");
}

static constexpr size_t kScheduleShownActions = 64;
static int reportPipeline(ModuleOp step, loom::dist::MeshAttr mesh,
                          int64_t pp,
                          const loom::pipeline::Schedule &schedule,
                          double &worstBubble, double &firstRankBubble,
                          llvm::json::Object &json) {
  using namespace loom::pipeline;
  auto models = llvm::to_vector(step.getOps<loom::train::ModelOp>());
  if (models.size() != 1)
    return fail("the report needs exactly one 'train.model'");
  loom::train::ModelOp model = models.front();
  auto record = loom::dist::attrs(model).getPipelineAttrHelper().getAttr(model);
  Costs costs;
  for (int64_t c : record.getStageCosts()) {
    costs.forward.push_back(double(c) / 1e9);
    costs.backwardInput.push_back(double(c) / 1e9);
    costs.backwardWeight.push_back(double(c) / 1e9);
  }
  llvm::Expected<Simulation> sim = simulate(schedule, costs);
  if (!sim)
    return fail("--schedule=" + scheduleSpec + ": " +
                llvm::toString(sim.takeError()));

  worstBubble = sim->maxBubble();
  firstRankBubble = sim->bubble(0);
  std::string csv = printScheduleCSV(schedule);
  int64_t p = pp, m = microBatches, v = schedule.virtualStages;
  llvm::outs() << llvm::formatv(
      "loom report: {0}, {1} ranks ({2}): pipeline of {3} ranks x {4} "
      "virtual stages ({5} stages), {6} micro-batches, schedule {7}\n",
      models.front().getSymName(), mesh.getNumRanks(), mesh.getSpec(), p, v,
      schedule.numStages(), m, schedule.name);
  llvm::outs() << "  stages (forward GFLOP-equivalents: flops, or bytes at "
                  "20 flops per byte):\n";
  for (auto [s, c] : llvm::enumerate(record.getStageCosts()))
    llvm::outs() << llvm::formatv("    stage {0} on rank {1}: {2:F3}\n", s,
                                  schedule.rankOf(s), double(c) / 1e9);
  llvm::outs() << "  pipeline bubble per rank (simulated with the stages' "
                  "costs):";
  for (int64_t r = 0; r < p; ++r)
    llvm::outs() << llvm::formatv(" {0:P1}", sim->bubble(r));
  llvm::outs() << llvm::formatv(
      "; equal stages would give {0:P1}\n",
      schedule.name == "zb"
          ? double(p - 1) / double(3 * m + p - 1)
          : double(p - 1) / double(v * m + p - 1));
  llvm::outs() << "  peak activations held, in stage micro-batches, per "
                  "rank:";
  for (int64_t held : sim->peakActivations)
    llvm::outs() << " " << held;
  llvm::outs() << llvm::formatv("; stage 0 holds at most {0} micro-batches' activations\n",
                                sim->firstStagePeak);
  int64_t slots = assignSlots(schedule).count;
  llvm::outs() << llvm::formatv(
      "  saved for the backward: {0} micro-batches' worth per stage (slots "
      "reused as micro-batches finish)\n",
      slots);
  // A long schedule (Megatron's 175B layout runs 384 actions per rank)
  // stays out of the text; the JSON carries it whole.
  size_t longest = 0;
  for (const auto &row : schedule.order)
    longest = std::max(longest, row.size());
  if (longest <= kScheduleShownActions)
    llvm::outs() << "  schedule (CSV, as --schedule reads it):\n" << csv;
  else
    llvm::outs() << llvm::formatv(
        "  schedule: up to {0} actions per rank, too long to print (CSV, "
        "as --schedule reads it: --report-json's pipeline.schedule_csv, or "
        "loom-schedule --emit=csv)\n",
        longest);
  if (!scheduleSvg.empty() &&
      failed(writeFile(scheduleSvg, drawSVG(schedule, *sim))))
    return 1;
  {
    llvm::json::Array bubbles, peaks, stagesJson;
    for (int64_t r = 0; r < p; ++r) {
      bubbles.push_back(sim->bubble(r));
      peaks.push_back(sim->peakActivations[r]);
    }
    for (int64_t c : record.getStageCosts())
      stagesJson.push_back(c);
    json = llvm::json::Object{
        {"pipeline_ranks", p},
        {"virtual_stages", v},
        {"micro_batches", m},
        {"schedule", schedule.name},
        {"stage_costs", std::move(stagesJson)},
        {"bubble_per_rank", std::move(bubbles)},
        {"bubble_fraction", sim->maxBubble()},
        {"peak_activations_per_rank", std::move(peaks)},
        {"first_stage_peak_micro_batches", sim->firstStagePeak},
        {"saved_micro_batches_per_stage", slots},
        {"schedule_csv", csv}};
  }
  return 0;
}

/// Loads the --load-dialect-plugin libraries into `registry`, and checks
/// that every --kernels file exists.
static int loadDialectPlugins(DialectRegistry &registry) {
  for (const std::string &path : dialectPlugins) {
    auto plugin = DialectPlugin::load(path);
    if (!plugin)
      return fail("--load-dialect-plugin=" + path + ": " +
                  llvm::toString(plugin.takeError()));
    plugin->registerDialectRegistryCallbacks(registry);
  }
  for (const std::string &path : kernelFiles)
    if (!llvm::sys::fs::exists(path))
      return fail("--kernels=" + path + ": no such file");
  return 0;
}

/// Loads the --load-pass-plugin libraries into the pass registry.
static int loadPassPlugins() {
  for (const std::string &path : passPlugins) {
    auto plugin = PassPlugin::load(path);
    if (!plugin)
      return fail("--load-pass-plugin=" + path + ": " +
                  llvm::toString(plugin.takeError()));
    plugin->registerPassRegistryCallbacks();
  }
  if (insertAfter.empty() != pluginPipeline.empty())
    return fail("--insert-after and --plugin-pipeline go together: where "
                "to insert, and what");
  return 0;
}

/// Whether loomc only reports (--report or --report-json with no -o).
static bool reportOnly() {
  return (report || !reportJson.empty()) && emit == Emit::Exe &&
         outputFile == "-";
}

/// One model through loomc: the options, checked; the model; the pipeline
/// run a phase at a time; the report; the program emitted and linked.
/// Each step returns 0 or the exit status, having printed why.
struct Compilation {
  MLIRContext &context;
  /// The mesh as dist-mesh will set it on the model (the same parser):
  /// what the checks and the report read.
  loom::analysis::Config config;
  std::optional<loom::analysis::Cluster> cluster;
  /// A pipeline's schedule (pp > 1).
  std::optional<loom::pipeline::Schedule> schedule;
  OwningOpRef<ModuleOp> module;
  /// The model as written: what the policy checks and --remat=budget
  /// compile again.
  OwningOpRef<ModuleOp> written;
  loom::LoomOptions options;
  /// A user's passes, inserted after the pass --insert-after names.
  bool inserted = false;
  std::string insertError;
  /// The training step's text (--emit=mlir writes it).
  std::string step;
  /// With more than one rank the report plans from the rank program (what
  /// each rank holds: its share of the batch, tensor and pipeline splits,
  /// ZeRO's blocks), not from the one-rank plan over dp.
  bool tensorOrPipeline = false;
  int64_t pp = 1;
  /// Whether loom-memory-plan has recorded the rank program's plan, which
  /// the report and the code generator read.
  bool planned = false;

  explicit Compilation(MLIRContext &context) : context(context) {}

  int checkOptions();
  int parseModel(llvm::SourceMgr &sourceMgr);
  int checkPipeline();
  int buildOptions();
  int runPhase(loom::Phase from, loom::Phase until);
  int reportAndCheckFit();
  int planMemory();
  int emitAndLink();
};

int Compilation::checkOptions() {
  if (emit == Emit::Exe && outputFile == "-" && !reportOnly())
    return fail("an executable needs an output file (-o OUT)");
  // Every file loomc writes, checked before any work: a bad path is an
  // error naming the option, not the linker's failure at the end.
  for (auto [flag, path] :
       {std::pair<StringRef, StringRef>{"-o", outputFile},
        {"--report-json", reportJson},
        {"--schedule-svg", scheduleSvg}})
    if (!path.empty() && path != "-")
      if (int rc = checkWritable(flag, path))
        return rc;
  if (meshSpec.getNumOccurrences() && meshSpec.empty())
    return fail("--mesh= names no axis: give AXIS=N,... (e.g. --mesh "
                "dp=2), or leave it out for one rank");
  if (!meshSpec.empty()) {
    llvm::Expected<loom::dist::MeshAttr> mesh =
        loom::dist::parseMesh(&context, meshSpec);
    if (!mesh)
      return fail("--" + llvm::toString(mesh.takeError()));
    config.mesh = *mesh;
  }
  config.precision = precision == PrecisionFlag::Bf16
                         ? loom::analysis::Precision::Bf16
                         : loom::analysis::Precision::Fp32;
  if (shardingPreset != "auto" && shardingPreset != "dp" &&
      shardingPreset != "megatron")
    return fail("--sharding=" + shardingPreset +
                ": expected auto, dp or megatron");
  SmallVector<StringRef> names;
  StringRef(rematPolicy).split(names, ',');
  for (StringRef name : names)
    if (name != "full" && name != "selective" && name != "none" &&
        !(name == "budget" && names.size() == 1))
      return fail("--remat=" + rematPolicy +
                  ": expected none, selective, full, budget, or one of "
                  "none, selective and full per layer (full,full,none,none)");
  if ((rematPolicy == "budget") != (rematBudget.getNumOccurrences() > 0))
    return fail("--remat=budget and --remat-budget=BYTES go together");
  if (zeroStage > 0 &&
      (!config.mesh || !config.mesh.getAxis(loom::dist::AxisRole::Data)))
    return fail(llvm::formatv("--zero={0} splits over the data axis: give "
                              "--mesh with one (dp=N)",
                              int(zeroStage))
                    .str());
  pp = config.mesh ? config.mesh.getSize(loom::dist::AxisRole::Pipeline) : 1;
  tensorOrPipeline = config.mesh && config.mesh.getNumRanks() > 1;
  if (!clusterFile.empty()) {
    llvm::Expected<loom::analysis::Cluster> c =
        loom::analysis::readCluster(clusterFile);
    if (!c)
      return fail(llvm::toString(c.takeError()));
    cluster = *c;
  }
  return 0;
}

int Compilation::parseModel(llvm::SourceMgr &sourceMgr) {
  std::string error;
  auto input = openInputFile(inputFile, &error);
  if (!input)
    return fail(error);
  unsigned id = sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  if (loom::reportUpstreamParserDefects(sourceMgr, id))
    return 1;
  module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  if (failed(dumpPhase("0-input.mlir", print(*module))))
    return 1;
  // A model written in bf16 (loom-gen --dtype bf16) is trained in mixed
  // precision, as an f32 model with --precision=bf16 is: one program.
  bool declaresBf16 = false;
  module->walk([&](loom::train::ParamOp param) {
    declaresBf16 |= getElementTypeOrSelf(param.getType()).isBF16();
  });
  if (declaresBf16) {
    if (precision.getNumOccurrences() && precision == PrecisionFlag::Fp32)
      return fail(inputFile + ": the model declares bf16 parameters, which "
                  "--precision=fp32 cannot train (declare them f32)");
    config.precision = loom::analysis::Precision::Bf16;
  }
  written = module->clone();
  return 0;
}

/// A pipeline's schedule, checked before anything is compiled, once the
/// micro-batches are known to split the model's batch (a schedule's size
/// grows with them).
int Compilation::checkPipeline() {
  if (pp <= 1)
    return 0;
  if (failed(checkMicroBatches(*module)))
    return 1;
  if (microBatches < 2)
    return fail(llvm::formatv(
                    "--mesh {0}: a pipeline needs --micro-batches of at "
                    "least 2 (its stages overlap only across micro-batches, "
                    "and {1} or more keep every stage busy)",
                    meshSpec, pp)
                    .str());
  llvm::Expected<loom::pipeline::Schedule> s = pipelineSchedule(pp);
  if (!s)
    return fail("--schedule=" + scheduleSpec + ": " +
                llvm::toString(s.takeError()));
  schedule = std::move(*s);
  return 0;
}

/// The one pipeline's options from loomc's; --remat=budget chooses the
/// policy by compiling the model with each.
int Compilation::buildOptions() {
  options.mesh = meshSpec;
  options.microBatches = microBatches;
  options.virtualStages = schedule ? schedule->virtualStages : 1;
  options.sharding = shardingPreset;
  options.sequenceParallel = sequenceParallel;
  options.remat = rematPolicy;
  options.zero = zeroStage;
  bool bf16 = config.precision == loom::analysis::Precision::Bf16;
  options.precision = bf16 ? "bf16" : "fp32";
  if (gradPrecision == PrecisionFlag::Bf16 && !bf16)
    return fail("--grad-precision=bf16 keeps the gradients of bf16 compute's "
                "f32 masters in bf16: give --precision=bf16 too (an fp32 "
                "plan's gradients are fp32)");
  options.gradPrecision = gradPrecision == PrecisionFlag::Bf16 ? "bf16" : "fp32";
  options.commOverlap = commOverlap;
  options.schedule = scheduleSpec;
  options.afterPass = [this](OpPassManager &passes, StringRef argument) {
    if (insertAfter.empty() || argument != insertAfter || inserted)
      return;
    inserted = true;
    llvm::raw_string_ostream errors(insertError);
    if (failed(parsePassPipeline(pluginPipeline, passes, errors)))
      insertError = "--plugin-pipeline='" + pluginPipeline +
                    "': " + insertError;
  };
  if (rematPolicy != "budget")
    return 0;
  std::optional<int64_t> budget = parseBytes(rematBudget);
  if (!budget)
    return fail("--remat-budget=" + rematBudget +
                ": expected a byte count, with an optional K, M or G "
                "suffix (powers of 1024), from 0 to 2^63-1 bytes");
  FailureOr<std::string> chosen = chooseRematForBudget(
      *written, options, *budget, config, cluster, tensorOrPipeline);
  if (failed(chosen))
    return 1;
  options.remat = *chosen;
  return 0;
}

/// Runs the pipeline's phases from `from` to `until` on the module.
int Compilation::runPhase(loom::Phase from, loom::Phase until) {
  PassManager pm(&context);
  options.from = from;
  options.until = until;
  loom::buildLoomPipeline(pm, options);
  if (!insertError.empty())
    return fail(insertError);
  return failed(pm.run(*module)) ? 1 : 0;
}

/// The report (--report, --report-json) and the check that the model fits
/// the --cluster's device (without --remat): planned from the training
/// step, its memory and communication read in the rank program where there
/// is a mesh. Runs the rank program's phase itself.
int Compilation::reportAndCheckFit() {
  // A pipeline's report starts with its plan: stages, schedule, bubble;
  // the memory and communication per rank follow, from the rank program.
  std::optional<double> pipelineBubble;
  double firstRankBubble = 0;
  llvm::json::Object pipelineJSON;
  if (pp > 1 && (report || !reportJson.empty())) {
    double worst = 0;
    if (int rc = reportPipeline(*module, config.mesh, pp, *schedule, worst,
                                firstRankBubble, pipelineJSON))
      return rc;
    pipelineBubble = worst;
  }
  std::optional<loom::analysis::Report> plan;
  bool checkFits = cluster && rematPolicy.getNumOccurrences() == 0;
  if (report || !reportJson.empty() || checkFits) {
    auto models = llvm::to_vector(module->getOps<loom::train::ModelOp>());
    if (models.size() != 1)
      return fail("the report needs exactly one 'train.model'");
    // One rank: the training step is the rank program, planned once for
    // the report and the code generator.
    if (meshSpec.empty())
      if (int rc = planMemory())
        return rc;
    FailureOr<loom::analysis::Report> r =
        loom::analysis::reportModel(models.front(), config, cluster);
    if (failed(r))
      return 1;
    plan = *r;
  }

  // The rank program: shardings from the mesh, then per-rank shapes and
  // collectives.
  if (!meshSpec.empty() && (emit != Emit::MLIR || plan)) {
    if (int rc = runPhase(loom::Phase::RankProgram, loom::Phase::RankProgram))
      return rc;
    if (failed(checkEveryAxisSplits(*module, config.mesh)))
      return 1;
    if (int rc = planMemory())
      return rc;
  }
  if (!plan)
    return 0;
  // The communication is what the rank program does, in its tensors'
  // types.
  if (!meshSpec.empty()) {
    auto rank = *module->getOps<loom::train::ModelOp>().begin();
    plan->readVerification(rank);
    plan->setCommunication(
        loom::analysis::countCommunication(rank, config.mesh, cluster));
    // A mesh that splits more than the batch: activations and time are
    // the rank program's, not the one-rank plan's over dp.
    if (tensorOrPipeline && failed(plan->useRankProgram(rank)))
      return 1;
  }
  // Printed after the report, which shows where the bytes go.
  std::string fitError;
  if (checkFits && plan->worstRankBytes() > cluster->memoryBytes) {
    // The cheapest policy that fits: selective recomputes the least.
    std::string fits;
    for (const char *policy : {"selective", "full"}) {
      FailureOr<loom::analysis::Report> probe = planWithRemat(
          *written, options, policy, config, cluster, tensorOrPipeline);
      if (failed(probe))
        return 1;
      int64_t bytes = probe->worstRankBytes();
      if (bytes <= cluster->memoryBytes) {
        fits = llvm::formatv("--remat={0} fits, with {1:F3} GB on its "
                             "most loaded rank",
                             policy, double(bytes) / 1e9)
                   .str();
        break;
      }
    }
    if (fits.empty())
      fits = llvm::formatv(
                 "no rematerialization policy fits (model states and "
                 "inputs alone take {0:F3} GB on a rank): use more ranks "
                 "(pp, tp){1}",
                 double(plan->worstRankStateBytes()) / 1e9,
                 plan->worstRankStateBytes() > cluster->memoryBytes
                     ? ""
                     : " or more micro-batches")
                 .str();
    fitError = llvm::formatv(
                   "the model needs {0:F3} GB on its most loaded rank "
                   "without recomputation (--remat=none, the default), "
                   "more than the {1:F3} GB of a device of {2}; {3}",
                   double(plan->worstRankBytes()) / 1e9,
                   cluster->memoryBytes / 1e9, clusterFile, fits)
                   .str();
  }
  plan->remat = options.remat;
  plan->pipelineBubble = pipelineBubble;
  if (pipelineBubble) {
    plan->addPipelineBubble(firstRankBubble);
    plan->pipeline = std::move(pipelineJSON);
  }
  if (report)
    plan->print(llvm::outs());
  if (!reportJson.empty()) {
    std::string text;
    llvm::raw_string_ostream js(text);
    js << llvm::formatv("{0:2}", plan->toJSON()) << "\n";
    if (failed(writeFile(reportJson, js.str())))
      return 1;
  }
  if (!fitError.empty())
    return fail(fitError);
  return 0;
}

/// Plans the rank program's memory once (loom-memory-plan), for the report
/// and the code generator (the phase's dump is the program before it).
int Compilation::planMemory() {
  if (failed(dumpPhase("2-rank-program.mlir", print(*module))))
    return 1;
  PassManager pm(&context);
  pm.addPass(loom::codegen::createLoomMemoryPlan());
  if (failed(pm.run(*module)))
    return 1;
  planned = true;
  return 0;
}

/// Lowers the rank program to EmitC, prints it as C++ and compiles and
/// links it (or writes the C++, --emit=cpp).
int Compilation::emitAndLink() {
  if (!planned)
    if (int rc = planMemory())
      return rc;
  PassManager codegen(&context);
  loom::codegen::buildCodegenPipeline(codegen, /*planMemory=*/false);
  if (failed(codegen.run(*module)))
    return 1;
  if (failed(dumpPhase("3-emitc.mlir", print(*module))))
    return 1;
  std::string cpp;
  llvm::raw_string_ostream os(cpp);
  if (failed(emitc::translateToCpp(*module, os)))
    return 1;
  os.flush();
  if (failed(dumpPhase("4-program.cpp", cpp)))
    return 1;
  if (emit == Emit::Cpp)
    return failed(writeFile(outputFile, cpp)) ? 1 : 0;
  return buildExecutable(cpp, outputFile);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  loomcPath = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&runtimePath));
  cl::HideUnrelatedOptions(loomcCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "loomc: compile a train-dialect model into a "
                              "training executable\n");
  if (int rc = loadPassPlugins())
    return rc;
  DialectRegistry registry;
  registry.insert<loom::train::TrainDialect, loom::dist::DistDialect,
                  loom::codegen::LoomDialect, arith::ArithDialect,
                  func::FuncDialect, scf::SCFDialect, emitc::EmitCDialect>();
  loom::registerTrainShardingRules(registry);
  if (int rc = loadDialectPlugins(registry))
    return rc;
  MLIRContext context(registry);
  // Errors point at the model's lines; the op they are on is not dumped.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  Compilation c(context);
  if (int rc = c.checkOptions())
    return rc;
  if (int rc = c.parseModel(sourceMgr))
    return rc;
  if (int rc = c.checkPipeline())
    return rc;
  if (int rc = c.buildOptions())
    return rc;
  // The one pipeline, run a phase at a time: the report plans from the
  // training step, and --emit=mlir stops there.
  if (int rc = c.runPhase(loom::Phase::TrainingStep, loom::Phase::TrainingStep))
    return rc;
  // From here on the mesh is the one dist-mesh set on the model.
  for (auto model : c.module->getOps<loom::train::ModelOp>())
    if (loom::dist::MeshAttr mesh = loom::dist::MeshAttr::lookup(model))
      c.config.mesh = mesh;
  c.step = print(*c.module);
  if (failed(dumpPhase("1-training-step.mlir", c.step)))
    return 1;
  if (int rc = c.reportAndCheckFit())
    return rc;
  if (reportOnly())
    return 0;
  if (!insertAfter.empty() && !c.inserted)
    return fail("--insert-after=" + insertAfter + ": the pipeline runs no "
                "pass '" + insertAfter + "' (see --dump-phases and "
                "loom-opt --help for the pass names)");
  if (emit == Emit::MLIR)
    return failed(writeFile(outputFile, c.step)) ? 1 : 0;
  return c.emitAndLink();
}
