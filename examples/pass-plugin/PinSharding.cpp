//===- PinSharding.cpp - an out-of-tree Loom pass, loaded as a plugin -----===//
//
// `pin-sharding{param=NAME axis=AXIS dim=D}` pins a sharding on the named
// parameter: dimension D split over mesh axis AXIS, the others whole, as a
// closed annotation `dist-sharding-propagation` starts from (what
// `#dist.sharding` means is in docs/reference/DistDialect.md). With
// `param=w_fc dim=1` on a mesh with a data axis, the weight is stored as
// each rank's block and its gradient reduce-scattered: ZeRO's layout for
// one tensor, chosen by a user's pass.
//
// It reads what Loom's passes left in the IR through the dist dialect's
// typed accessors: the mesh (`MeshAttr::lookup`; without `axis`, its data
// axis) and, after `dist-pipeline-partition`, the pipeline stages that use
// the parameter (`dist.stages`), which a remark reports.
//
// It uses Loom's dialects through their headers only; loom-opt and loomc
// export the dialects' symbols, so the plugin and the tool share them.
//
//===----------------------------------------------------------------------===//

#include "dialects/dist/DistDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

using namespace mlir;

namespace {

struct PinShardingPass
    : public PassWrapper<PinShardingPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PinShardingPass)

  PinShardingPass() = default;
  PinShardingPass(const PinShardingPass &other) : PassWrapper(other) {}

  StringRef getArgument() const override { return "pin-sharding"; }
  StringRef getDescription() const override {
    return "Pin a sharding on a named parameter (an example pass plugin)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<loom::dist::DistDialect>();
  }

  Option<std::string> param{*this, "param",
                            llvm::cl::desc("The parameter's name")};
  Option<std::string> axis{
      *this, "axis",
      llvm::cl::desc("The mesh axis (default: the mesh's data axis)")};
  Option<int64_t> dim{*this, "dim", llvm::cl::desc("The dimension to split"),
                      llvm::cl::init(0)};

  void runOnOperation() override {
    bool found = false;
    getOperation().walk([&](loom::train::ParamOp p) {
      if (p.getName() != param)
        return;
      found = true;
      auto type = cast<RankedTensorType>(p.getType());
      if (dim < 0 || dim >= type.getRank()) {
        p.emitOpError("pin-sharding: dimension ")
            << int64_t(dim) << " is outside " << type;
        return signalPassFailure();
      }
      // The mesh dist-mesh set, if it ran before: the axis must be one of
      // its axes; without `axis`, its data axis.
      loom::dist::MeshAttr mesh = loom::dist::MeshAttr::lookup(p);
      StringAttr split = axis.empty()
                             ? (mesh ? mesh.getAxis(loom::dist::AxisRole::Data)
                                     : StringAttr())
                             : StringAttr::get(&getContext(), axis);
      if (!split || (mesh && mesh.getAxisIndex(split.getValue()) < 0)) {
        InFlightDiagnostic diag = p.emitOpError("pin-sharding: ");
        if (!mesh)
          diag << "no axis= and no mesh to take the data axis from";
        else
          diag << "the mesh " << mesh << " has no "
               << (axis.empty() ? std::string("data axis")
                                : "axis '" + axis + "'");
        return signalPassFailure();
      }
      SmallVector<SmallVector<StringAttr>> dims(type.getRank());
      dims[dim].push_back(split);
      auto sharding =
          loom::dist::ShardingAttr::get(&getContext(), dims, ArrayRef<StringAttr>());
      loom::dist::DistDialect &attrs = loom::dist::attrs(p);
      attrs.getShardingAttrHelper().setAttr(
          p, ArrayAttr::get(&getContext(), {sharding}));
      // Where a pipeline cut the model, the stages that hold the weight.
      if (auto stages = attrs.getStagesAttrHelper().getAttr(p)) {
        InFlightDiagnostic note = p.emitRemark("pin-sharding: '")
                                  << param << "' split over '"
                                  << split.getValue() << "' on stage";
        note << (stages.size() == 1 ? " " : "s ");
        llvm::interleaveComma(stages.asArrayRef(), note);
        note << " of the pipeline axis '"
             << mesh.getAxis(loom::dist::AxisRole::Pipeline).getValue() << "'";
      }
    });
    if (!found) {
      getOperation().emitError("pin-sharding: no parameter named '")
          << param << "'";
      signalPassFailure();
    }
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "LoomPinSharding", "0.1",
          []() { PassRegistration<PinShardingPass>(); }};
}
