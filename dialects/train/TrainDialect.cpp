//===- TrainDialect.cpp - train dialect, attributes, shared helpers -------===//

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace loom::train;

#include "dialects/train/TrainDialect.cpp.inc"
#include "dialects/train/TrainEnums.cpp.inc"
#include "dialects/train/TrainInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/train/TrainAttrs.cpp.inc"

void TrainDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/train/TrainAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/train/TrainOps.cpp.inc"
      >();
}

Operation *TrainDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<DenseElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return arith::ConstantOp::create(builder, loc, elements);
}

//===----------------------------------------------------------------------===//
// Attribute verifiers
//===----------------------------------------------------------------------===//

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat scale) {
  double value = scale.convertToDouble();
  switch (kind) {
  case InitKind::normal:
  case InitKind::uniform:
    if (!(value > 0.0))
      return emitError() << "#train.init<" << stringifyInitKind(kind)
                         << "> needs a positive scale, got " << value;
    return success();
  case InitKind::zeros:
  case InitKind::ones:
    if (value != 0.0)
      return emitError() << "#train.init<" << stringifyInitKind(kind)
                         << "> takes no value";
    return success();
  case InitKind::constant:
    return success();
  }
  return success();
}

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   APFloat lrValue, int64_t warmup,
                                   int64_t total, DecayKind decay,
                                   APFloat minLrValue) {
  double lr = lrValue.convertToDouble(), minLr = minLrValue.convertToDouble();
  if (!(lr >= 0.0))
    return emitError() << "#train.schedule: lr must be non-negative, got " << lr;
  if (warmup < 0)
    return emitError() << "#train.schedule: warmup must be non-negative, got "
                       << warmup;
  if (minLr < 0.0 || minLr > lr)
    return emitError() << "#train.schedule: min_lr must lie in [0, lr], got "
                       << minLr;
  if (decay != DecayKind::constant && total <= warmup)
    return emitError() << "#train.schedule: " << stringifyDecayKind(decay)
                       << " decay needs total (" << total
                       << ") greater than warmup (" << warmup << ")";
  return success();
}

double ScheduleAttr::evaluate(double step) const {
  double lr = getLr().convertToDouble(), minLr = getMinLr().convertToDouble();
  double warmup = double(getWarmup()), total = double(getTotal());
  if (step < warmup)
    return lr * (step + 1.0) / warmup;
  if (getDecay() == DecayKind::constant)
    return lr;
  double progress = std::clamp((step - warmup) / (total - warmup), 0.0, 1.0);
  if (getDecay() == DecayKind::linear)
    return minLr + (lr - minLr) * (1.0 - progress);
  return minLr + 0.5 * (lr - minLr) * (1.0 + std::cos(M_PI * progress));
}

LogicalResult SGDAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              APFloat momentumValue,
                              APFloat weightDecayValue) {
  double momentum = momentumValue.convertToDouble();
  double weightDecay = weightDecayValue.convertToDouble();
  if (momentum < 0.0 || momentum >= 1.0)
    return emitError() << "#train.sgd: momentum must lie in [0, 1), got "
                       << momentum;
  if (weightDecay < 0.0)
    return emitError() << "#train.sgd: weight_decay must be non-negative, got "
                       << weightDecay;
  return success();
}

LogicalResult AdamWAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                APFloat beta1Value,
                                APFloat beta2Value,
                                APFloat epsValue,
                                APFloat weightDecayValue) {
  double beta1 = beta1Value.convertToDouble();
  double beta2 = beta2Value.convertToDouble();
  double eps = epsValue.convertToDouble();
  double weightDecay = weightDecayValue.convertToDouble();
  if (beta1 < 0.0 || beta1 >= 1.0 || beta2 < 0.0 || beta2 >= 1.0)
    return emitError() << "#train.adamw: beta1 and beta2 must lie in [0, 1), got "
                       << beta1 << " and " << beta2;
  if (!(eps > 0.0))
    return emitError() << "#train.adamw: eps must be positive, got " << eps;
  if (weightDecay < 0.0)
    return emitError()
           << "#train.adamw: weight_decay must be non-negative, got "
           << weightDecay;
  return success();
}

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

int64_t loom::train::detail::defaultFlops(Operation *op) {
  if (op->getNumResults() == 0)
    return 0;
  auto tensor = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

int64_t loom::train::detail::defaultBytesRead(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes = loom::saturatingAdd(bytes, loom::tensorBytes(type));
  return bytes;
}

int64_t loom::train::detail::defaultBytesWritten(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getResultTypes())
    bytes = loom::saturatingAdd(bytes, loom::tensorBytes(type));
  return bytes;
}

LogicalResult loom::train::detail::inferBroadcast(
    std::optional<Location> loc, StringRef opName, Type lhs, Type rhs,
    SmallVectorImpl<Type> &types) {
  auto lhsType = cast<RankedTensorType>(lhs);
  auto rhsType = cast<RankedTensorType>(rhs);
  if (lhsType.getElementType() != rhsType.getElementType())
    return emitOptionalError(loc, "'", opName,
                             "' operands must have one element type, got ",
                             lhsType.getElementType(), " and ",
                             rhsType.getElementType());
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(lhsType.getShape(),
                                          rhsType.getShape(), shape))
    return emitOptionalError(loc, "'", opName, "' operand shapes ", lhs,
                             " and ", rhs,
                             " are not broadcast-compatible (each dimension, "
                             "aligned from the right, must be equal or 1)");
  types.push_back(RankedTensorType::get(shape, lhsType.getElementType()));
  return success();
}
