//===- LowerToRuntime.cpp - loom-lower-to-runtime ---------------------------===//

#include "codegen/Emitter.h"
#include "codegen/Passes.h"

#include "mlir/Conversion/ArithToEmitC/ArithToEmitCPass.h"
#include "mlir/Conversion/FuncToEmitC/FuncToEmitCPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToEmitC/SCFToEmitC.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/DialectConversion.h"

namespace loom::codegen {
#define GEN_PASS_DEF_LOOMLOWERTORUNTIME
#include "codegen/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
using namespace loom::codegen;
using namespace loom::codegen::lowering;
using namespace loom::analysis;
using namespace loom::train;
namespace dist = loom::dist;

namespace {

/// The generic pattern: every op with a runtime kernel (any dialect's
/// KernelOpInterface) is one call of `loomrt_<op>` (or one per operand),
/// by the argument rule of loomrt.h.
struct KernelLowering : OpInterfaceConversionPattern<KernelOpInterface> {
  KernelLowering(const TypeConverter &types, MLIRContext *context,
                 Emitter &emitter)
      : OpInterfaceConversionPattern(types, context), emitter(emitter) {}
  LogicalResult
  matchAndRewrite(KernelOpInterface op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    return emitter.lower(op, operands, rewriter, [&](Operation *o) {
      return emitter.lowerKernel(o);
    });
  }
  Emitter &emitter;
};

/// The copy of one of the model's ops (`OpT`) lowered by the Emitter's
/// `emit`: a collective (lowerCollective), a pipeline transfer or the wait
/// of an asynchronous collective (lowerTransfer), a loop (lowerRepeat) and
/// its yield (endIteration), the schedule (lowerSchedule), a constant, a
/// reshape or an index addition.
template <typename OpT, LogicalResult (Emitter::*emit)(Operation *)>
struct CopyLowering : OpConversionPattern<OpT> {
  CopyLowering(const TypeConverter &types, MLIRContext *context,
               Emitter &emitter)
      : OpConversionPattern<OpT>(types, context), emitter(emitter) {}
  LogicalResult
  matchAndRewrite(OpT op, typename OpConversionPattern<OpT>::OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return emitter.lower(op, adaptor.getOperands(), rewriter,
                         [&](Operation *o) { return (emitter.*emit)(o); });
  }
  Emitter &emitter;
};
template <typename OpT>
using CollectiveLowering = CopyLowering<OpT, &Emitter::lowerCollective>;
template <typename OpT>
using TransferLowering = CopyLowering<OpT, &Emitter::lowerTransfer>;

} // namespace

LogicalResult Emitter::convert(func::FuncOp fn) {
  MLIRContext *context = fn.getContext();
  // Tensors are the runtime's buffers; every other type stays.
  TypeConverter types;
  types.addConversion([](Type t) { return t; });
  types.addConversion([&](RankedTensorType) -> Type { return bufType; });
  // A copy of the model's op is illegal, except, until the schedule's
  // driver moves them, the scheduled loops' and the ops in them.
  auto legal = [&](Operation *op) {
    if (!originalOf.count(op))
      return true;
    for (Operation *p = op; p; p = p->getParentOp())
      if (heldLoops.contains(p))
        return true;
    return false;
  };
  ConversionTarget target(*context);
  target.addLegalDialect<func::FuncDialect, scf::SCFDialect,
                         emitc::EmitCDialect>();
  target.addDynamicallyLegalDialect<arith::ArithDialect>(legal);
  target.addLegalOp<UnrealizedConversionCastOp>();
  target.markUnknownOpDynamicallyLegal(legal);
  RewritePatternSet patterns(context);
  patterns.add<KernelLowering, CollectiveLowering<dist::AllReduceOp>,
               CollectiveLowering<dist::AllReduceStartOp>,
               CollectiveLowering<dist::AllGatherOp>,
               CollectiveLowering<dist::AllGatherStartOp>,
               CollectiveLowering<dist::ReduceScatterOp>,
               CollectiveLowering<dist::ShardOp>,
               CollectiveLowering<dist::FillPaddingOp>,
               TransferLowering<dist::SendOp>, TransferLowering<dist::RecvOp>,
               TransferLowering<dist::WaitOp>,
               CopyLowering<RepeatOp, &Emitter::lowerRepeat>,
               CopyLowering<YieldOp, &Emitter::endIteration>,
               CopyLowering<dist::ScheduleOp, &Emitter::lowerSchedule>,
               CopyLowering<arith::ConstantOp, &Emitter::lowerConstant>,
               CopyLowering<arith::AddIOp, &Emitter::lowerIndexAdd>,
               CopyLowering<ReshapeOp, &Emitter::lowerReshape>>(types, context,
                                                               *this);
  FrozenRewritePatternSet frozen(std::move(patterns));
  // The copies are lowered as they are, never folded.
  ConversionConfig config;
  config.foldingMode = DialectConversionFoldingMode::Never;
  if (failed(applyPartialConversion(fn, target, frozen, config)))
    return failure();
  // The bodies the driver moved into its actions, under its stage and slot.
  if (!heldLoops.empty()) {
    heldLoops.clear();
    actionStage = driverStage;
    actionSlot = driverSlot;
    llvm::scope_exit done([&] { actionStage = actionSlot = Value(); });
    if (failed(applyPartialConversion(fn, target, frozen, config)))
      return failure();
  }
  // The casts that carried the buffers to the copies, now read by nothing.
  SmallVector<UnrealizedConversionCastOp> casts;
  fn.walk([&](UnrealizedConversionCastOp cast) { casts.push_back(cast); });
  for (UnrealizedConversionCastOp cast : llvm::reverse(casts))
    if (cast->use_empty())
      cast.erase();
  return success();
}

namespace {

struct LoomLowerToRuntimePass
    : public loom::codegen::impl::LoomLowerToRuntimeBase<
          LoomLowerToRuntimePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ModelOp> models(module.getOps<ModelOp>());
    if (models.size() != 1) {
      module.emitError("code generation needs exactly one 'train.model', "
                       "found ")
          << models.size();
      return signalPassFailure();
    }
    FailureOr<ModelLayout> layout = layoutModel(models.front());
    if (failed(layout))
      return signalPassFailure();
    Emitter emitter(module, models.front(), *layout);
    emitter.placeOnly = placeOnly;
    if (failed(emitter.run()))
      signalPassFailure();
  }
};
} // namespace

void loom::codegen::buildCodegenPipeline(OpPassManager &pm, bool planMemory) {
  if (planMemory)
    pm.addPass(createLoomMemoryPlan());
  pm.addPass(createLoomLowerToRuntime());
  pm.addPass(createSCFToEmitC());
  pm.addPass(createConvertArithToEmitC());
  pm.addPass(createConvertFuncToEmitC());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void loom::codegen::registerCodegenPasses() {
  registerLoomCodegenPasses();
  PassPipelineRegistration<>(
      "loom-to-emitc",
      "Lower a training step to EmitC: loom-memory-plan, "
      "loom-lower-to-runtime, then the upstream SCF, arith and func "
      "conversions to EmitC",
      [](OpPassManager &pm) { buildCodegenPipeline(pm); });
}
