//===- InjectCommFault.cpp - dist-inject-comm-fault ------------------------===//
//
// Makes one rank's communication wrong, for tests of
// dist-verify-communication: a collective skipped, two swapped, a count or
// a type changed, on one world rank only (`dist.ranks`).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_DISTINJECTCOMMFAULT
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// Makes `op` run only on the world ranks `ranks`.
void restrict(Operation *op, ArrayRef<int64_t> ranks) {
  dist::attrs(op).getRanksAttrHelper().setAttr(
      op, DenseI64ArrayAttr::get(op->getContext(), ranks));
}

struct DistInjectCommFaultPass
    : public loom::impl::DistInjectCommFaultBase<DistInjectCommFaultPass> {
  using Base::Base;
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      auto mesh = dist::attrs(model).getMeshAttrHelper().getAttr(model);
      if (!mesh)
        continue;
      SmallVector<Operation *> collectives;
      model.walk([&](Operation *op) {
        if (dist::isCommunication(op))
          collectives.push_back(op);
      });
      if (index >= int64_t(collectives.size())) {
        model.emitError("dist-inject-comm-fault: the model has ")
            << collectives.size() << " communication ops, no op "
            << int64_t(index);
        return signalPassFailure();
      }
      if (!dist::runsOn(collectives[index], mesh, rank)) {
        collectives[index]->emitError("dist-inject-comm-fault: rank ")
            << int64_t(rank) << " does not run this op";
        return signalPassFailure();
      }
      // The next communication op that rank `rank` runs, for `swap`.
      Operation *next = nullptr;
      for (Operation *later : ArrayRef(collectives).drop_front(index + 1))
        if (dist::runsOn(later, mesh, rank)) {
          next = later;
          break;
        }
      if (fault == "swap" && !next) {
        model.emitError("dist-inject-comm-fault: rank ")
            << int64_t(rank) << " runs no communication after op "
            << int64_t(index);
        return signalPassFailure();
      }
      SmallVector<int64_t> others;
      for (int64_t r = 0; r < mesh.getNumRanks(); ++r)
        if (r != rank)
          others.push_back(r);
      Operation *op = collectives[index];
      if (isa<dist::AllReduceStartOp, dist::WaitOp>(op) ||
          (fault == "swap" && isa<dist::AllReduceStartOp>(next))) {
        op->emitError("dist-inject-comm-fault: inject faults before "
                      "dist-comm-opt, into blocking collectives");
        return signalPassFailure();
      }
      OpBuilder b(op);
      if (fault == "skip") {
        restrict(op, others);
      } else if (fault == "swap") {
        // Rank `rank` issues this op after the next one it runs (a copy,
        // whose result nothing reads: only the order is wrong).
        b.setInsertionPointAfter(next);
        Operation *late = b.clone(*op);
        restrict(late, {rank});
        restrict(op, others);
      } else if (fault == "count" || fault == "type") {
        // Rank `rank` reduces (or sends) a tensor of another size or
        // element type.
        if (op->getNumOperands() == 0) {
          op->emitError("dist-inject-comm-fault: '")
              << fault << "' changes an operand; this op has none";
          return signalPassFailure();
        }
        b.setInsertionPoint(op);
        IRMapping map;
        for (Value v : op->getOperands()) {
          auto type = cast<RankedTensorType>(v.getType());
          Value changed;
          if (fault == "type") {
            changed = ConvertOp::create(b, op->getLoc(), v,
                                        TypeAttr::get(b.getBF16Type()));
          } else {
            SmallVector<int64_t> offsets(type.getRank(), 0),
                sizes(type.getShape());
            if (!sizes.empty() && sizes.back() > 1)
              --sizes.back();
            changed = SliceOp::create(b, op->getLoc(), v, offsets, sizes);
          }
          map.map(v, changed);
        }
        Operation *wrong = b.clone(*op, map);
        for (auto [r, v] : llvm::zip(wrong->getResults(), wrong->getOperands()))
          r.setType(v.getType());
        restrict(wrong, {rank});
        restrict(op, others);
      } else {
        model.emitError("dist-inject-comm-fault: unknown fault '")
            << fault << "' (skip, swap, count or type)";
        return signalPassFailure();
      }
    }
  }
};

} // namespace
