//===- DecomposeAttention.cpp - train-decompose-attention ------------------===//

#include "passes/Passes.h"

#include <cmath>
#include <limits>

namespace loom {
#define GEN_PASS_DEF_TRAINDECOMPOSEATTENTION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {
struct TrainDecomposeAttentionPass
    : public loom::impl::TrainDecomposeAttentionBase<
          TrainDecomposeAttentionPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto type = cast<RankedTensorType>(op.getQ().getType());
      Value scores = MatmulOp::create(b, loc, op.getQ(), op.getK(),
                                      /*transpose_lhs=*/false,
                                      /*transpose_rhs=*/true);
      double scale = 1.0 / std::sqrt(double(type.getDimSize(3)));
      scores = ScaleOp::create(b, loc, scores, b.getF64FloatAttr(scale));
      if (op.getCausal())
        scores = CausalMaskOp::create(
            b, loc, scores,
            b.getF64FloatAttr(-std::numeric_limits<double>::infinity()));
      Value probs = SoftmaxOp::create(b, loc, scores);
      Value out = MatmulOp::create(b, loc, probs, op.getV(), false, false);
      op.replaceAllUsesWith(out);
      op.erase();
      ++numDecomposed;
    }
  }
};
} // namespace
