//===- TrainOps.cpp - train ops: shape inference, verifiers, rules --------===//
//
// For every op: shape inference (or a verifier where the result type is
// written), its backward rule and its cost. Diagnostics name the op, the
// operand and the rule broken.
//
//===----------------------------------------------------------------------===//

#include "dialects/train/Adjoint.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace loom::train;

/// `sum`, `mean` or `max`, as a bare keyword.
static ParseResult parseReduceKind(OpAsmParser &parser, ReduceKindAttr &kind) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<ReduceKind> value = symbolizeReduceKind(keyword);
  if (!value)
    return parser.emitError(loc, "expected sum, mean or max, got '")
           << keyword << "'";
  kind = ReduceKindAttr::get(parser.getContext(), *value);
  return success();
}

static void printReduceKind(OpAsmPrinter &printer, Operation *,
                            ReduceKindAttr kind) {
  printer << stringifyReduceKind(kind.getValue());
}

/// An update's gradient type: omitted where it is the parameter's, else
/// `, type` after it (a bf16 gradient of an f32 master).
static ParseResult parseGradType(OpAsmParser &parser, Type &grad,
                                 Type param) {
  grad = param;
  if (succeeded(parser.parseOptionalComma()))
    return parser.parseType(grad);
  return success();
}

static void printGradType(OpAsmPrinter &printer, Operation *, Type grad,
                          Type param) {
  if (grad != param)
    printer << ", " << grad;
}

#define GET_OP_CLASSES
#include "dialects/train/TrainOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static int64_t numElements(Value v) { return tensorOf(v).getNumElements(); }

template <typename... Args>
static LogicalResult fail(std::optional<Location> loc, StringRef opName,
                          Args &&...args) {
  return emitOptionalError(loc, "'", opName, "' ", std::forward<Args>(args)...);
}

/// Sums `grad` down to `target`'s shape where a broadcast stretched it.
static Value sumTo(OpBuilder &b, Location loc, Value grad, Type target) {
  if (grad.getType() == target)
    return grad;
  return SumToOp::create(b, loc, target, grad);
}

static Value scaleBy(OpBuilder &b, Location loc, Value v, double factor) {
  return ScaleOp::create(b, loc, v, b.getF64FloatAttr(factor));
}

static LogicalResult checkDims(std::optional<Location> loc, StringRef opName,
                               StringRef what, ArrayRef<int64_t> dims,
                               int64_t rank) {
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      return fail(loc, opName, what, " dimension ", d,
                  " is out of range for rank ", rank);
    if (!seen.insert(d).second)
      return fail(loc, opName, what, " dimension ", d, " is repeated");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

OutputOp ModelOp::getOutput() {
  return dyn_cast<OutputOp>(getBody().front().getTerminator());
}

SmallVector<Operation *> ModelOp::getStateOps() {
  SmallVector<Operation *> ops;
  for (Operation &op : getBody().front())
    if (isa<ParamOp, StateOp>(op))
      ops.push_back(&op);
  return ops;
}

LogicalResult ModelOp::verify() {
  Block &block = getBody().front();
  if (block.empty() || !isa<OutputOp>(block.back()))
    return emitOpError("body must end with 'train.output'");
  llvm::StringMap<Operation *> names;
  for (Operation &op : block) {
    StringRef name;
    if (auto p = dyn_cast<ParamOp>(op))
      name = p.getName();
    else if (auto s = dyn_cast<StateOp>(op))
      name = s.getName();
    else if (auto i = dyn_cast<InputOp>(op))
      name = i.getName();
    else
      continue;
    if (name.empty())
      return op.emitOpError("name must not be empty");
    auto [it, inserted] = names.try_emplace(name, &op);
    if (!inserted) {
      InFlightDiagnostic diag = op.emitOpError("name \"")
                                << name << "\" is already declared";
      diag.attachNote(it->second->getLoc()) << "first declared here";
      return diag;
    }
  }
  SmallVector<ParamOp> params(block.getOps<ParamOp>());
  OutputOp output = getOutput();
  if (!output.getGrads().empty()) {
    if (output.getGrads().size() != params.size())
      return output.emitOpError("has ")
             << output.getGrads().size() << " gradients but the model has "
             << params.size() << " parameters";
    for (auto [grad, param] : llvm::zip(output.getGrads(), params))
      if (grad.getType() != param.getType() &&
          !(isBf16GradientOf(grad.getType(), param.getType())))
        return output.emitOpError("gradient of \"")
               << param.getName() << "\" has type " << grad.getType()
               << ", expected " << param.getType();
  }
  if (!output.getUpdates().empty()) {
    SmallVector<Operation *> state = getStateOps();
    if (output.getUpdates().size() != state.size())
      return output.emitOpError("has ")
             << output.getUpdates().size()
             << " updates but the model carries " << state.size()
             << " values (parameters and optimizer state)";
    for (auto [update, op] : llvm::zip(output.getUpdates(), state))
      if (update.getType() != op->getResult(0).getType())
        return output.emitOpError("update of a carried value has type ")
               << update.getType() << ", expected "
               << op->getResult(0).getType();
  }
  return success();
}

LogicalResult OutputOp::verify() { return success(); }

YieldOp RepeatOp::getYield() {
  return dyn_cast<YieldOp>(getBody().front().getTerminator());
}

RankedTensorType RepeatOp::getStackedType(int64_t count, Type slice) {
  auto t = cast<RankedTensorType>(slice);
  SmallVector<int64_t> shape{count};
  llvm::append_range(shape, t.getShape());
  return RankedTensorType::get(shape, t.getElementType());
}

RepeatOp::Parts RepeatOp::getParts() {
  Parts parts;
  parts.carries.assign(getCarries().begin(), getCarries().end());
  parts.stacked.assign(getStacked().begin(), getStacked().end());
  parts.invariants.assign(getInvariants().begin(), getInvariants().end());
  parts.count = int64_t(getCount());
  parts.reverse = getReverse();
  parts.savesCarries = getSavesCarries();
  parts.residuals = getResidualsAttr();
  return parts;
}

/// The result types of a repeat of `parts` whose body yields `yield`.
static std::pair<SmallVector<Type>, SmallVector<Type>>
resultTypes(const RepeatOp::Parts &parts, YieldOp yield) {
  SmallVector<Type> carryTypes, stackedTypes;
  for (Value v : parts.carries)
    carryTypes.push_back(v.getType());
  for (Value slice : yield.getStacked())
    stackedTypes.push_back(
        RepeatOp::getStackedType(parts.count, slice.getType()));
  return {carryTypes, stackedTypes};
}

RepeatOp RepeatOp::createWithBody(OpBuilder &b, Location loc,
                                  const Parts &parts, Block *body) {
  auto [carryTypes, stackedTypes] =
      resultTypes(parts, cast<YieldOp>(body->getTerminator()));
  auto repeat =
      RepeatOp::create(b, loc, carryTypes, stackedTypes, parts.count,
                       parts.reverse, parts.savesCarries, parts.carries,
                       parts.stacked, parts.invariants, parts.residuals);
  repeat.getBody().push_back(body);
  return repeat;
}

RepeatOp RepeatOp::rebuild(RewriterBase &rewriter, const Parts &parts,
                           std::optional<ValueRange> slices) {
  YieldOp yield = getYield();
  if (slices) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(yield);
    SmallVector<Value> carries(yield.getCarries());
    yield = rewriter.replaceOpWithNewOp<YieldOp>(yield, carries, *slices);
  }
  auto [carryTypes, stackedTypes] = resultTypes(parts, yield);
  auto rebuilt = RepeatOp::create(
      rewriter, getLoc(), carryTypes, stackedTypes, parts.count, parts.reverse,
      parts.savesCarries, parts.carries, parts.stacked, parts.invariants,
      parts.residuals);
  rebuilt->setDiscardableAttrs(getOperation()->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(getBody(), rebuilt.getBody(),
                              rebuilt.getBody().end());
  return rebuilt;
}

LogicalResult RepeatOp::verify() {
  Block &block = getBody().front();
  if (block.empty() || !isa<YieldOp>(block.back()))
    return emitOpError("body must end with 'train.yield'");
  int64_t count = getCount();
  if (count > loom::kMaxRepeatCount)
    return emitOpError("repeats ")
           << count << " times; a repeat runs at most " << loom::kMaxRepeatCount
           << " times";
  SmallVector<Type> expected{IndexType::get(getContext())};
  llvm::append_range(expected, getCarries().getTypes());
  for (auto [i, v] : llvm::enumerate(getStacked())) {
    RankedTensorType t = tensorOf(v);
    if (t.getRank() < 1 || t.getDimSize(0) != count)
      return emitOpError("stacked operand #")
             << i << " of type " << t << " must have a leading dimension of "
             << count << " (the repeat count)";
    expected.push_back(
        RankedTensorType::get(t.getShape().drop_front(), t.getElementType()));
  }
  llvm::append_range(expected, getInvariants().getTypes());
  if (block.getNumArguments() != expected.size())
    return emitOpError("body must take ")
           << expected.size()
           << " arguments (index, carries, stacked slices, invariants), got "
           << block.getNumArguments();
  for (auto [i, arg, type] :
       llvm::enumerate(block.getArguments(), TypeRange(expected)))
    if (arg.getType() != type)
      return emitOpError("body argument #")
             << i << " has type " << arg.getType() << ", expected " << type;
  if (getCarryResults().getTypes() != getCarries().getTypes())
    return emitOpError("carry results must have the types of the carries");
  YieldOp yield = getYield();
  if (yield.getCarries().getTypes() != getCarries().getTypes())
    return yield.emitOpError("carries must have the types of the enclosing "
                             "'train.repeat' carries");
  if (yield.getStacked().size() != getStackedResults().size())
    return yield.emitOpError("yields ")
           << yield.getStacked().size() << " stacked slices but the repeat has "
           << getStackedResults().size() << " stacked results";
  for (auto [slice, result] :
       llvm::zip(yield.getStacked(), getStackedResults())) {
    RankedTensorType s = tensorOf(slice), r = tensorOf(result);
    SmallVector<int64_t> shape{count};
    llvm::append_range(shape, s.getShape());
    if (r != RankedTensorType::get(shape, s.getElementType()))
      return emitOpError("stacked result of type ")
             << r << " must be the yielded slice type " << s
             << " with a leading dimension of " << count;
  }
  if (getSavesCarries()) {
    size_t numCarries = getCarries().size();
    if (getStackedResults().size() < numCarries)
      return emitOpError("saving its carries needs one stacked result per carry");
    for (auto [carry, saved] : llvm::zip(
             getCarries(), getStackedResults().take_back(numCarries)))
      if (saved.getType() !=
          RankedTensorType::get(
              llvm::to_vector(llvm::concat<const int64_t>(
                  ArrayRef<int64_t>{count}, tensorOf(carry).getShape())),
              tensorOf(carry).getElementType()))
        return emitOpError("saved carry of type ")
               << saved.getType() << " is not the stacked carry type";
  }
  size_t saved = getSavesCarries() ? getCarries().size() : 0;
  if (getNumResiduals() + saved > getStackedResults().size())
    return emitOpError("has ")
           << getNumResiduals() << " residuals and " << saved
           << " saved carries but " << getStackedResults().size()
           << " stacked results";
  return success();
}

int64_t RepeatOp::getFlops() {
  int64_t flops = 0;
  getBody().walk([&](CostOpInterface op) {
    if (op->getParentOp() == getOperation())
      flops = loom::saturatingAdd(flops, op.getFlops());
  });
  return loom::saturatingMul(flops, getCount());
}

/// `count` times the sum of `part` over the body's ops (nested loops
/// included through their own cost).
static int64_t bodySum(RepeatOp repeat,
                       llvm::function_ref<int64_t(CostOpInterface)> part) {
  int64_t sum = 0;
  repeat.getBody().walk([&](CostOpInterface op) {
    if (op->getParentOp() == repeat.getOperation())
      sum = loom::saturatingAdd(sum, part(op));
  });
  return loom::saturatingMul(sum, repeat.getCount());
}

int64_t RepeatOp::getMatmulFlops() {
  return bodySum(*this, [](CostOpInterface op) { return op.getMatmulFlops(); });
}

int64_t RepeatOp::getAttentionFlops() {
  return bodySum(*this,
                 [](CostOpInterface op) { return op.getAttentionFlops(); });
}

int64_t RepeatOp::getBytesRead() {
  int64_t bytes = 0;
  getBody().walk([&](CostOpInterface op) {
    if (op->getParentOp() == getOperation())
      bytes = loom::saturatingAdd(bytes, op.getBytesRead());
  });
  return loom::saturatingMul(bytes, getCount());
}

int64_t RepeatOp::getBytesWritten() {
  int64_t bytes = 0;
  getBody().walk([&](CostOpInterface op) {
    if (op->getParentOp() == getOperation())
      bytes = loom::saturatingAdd(bytes, op.getBytesWritten());
  });
  return loom::saturatingMul(bytes, getCount());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                   ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(needed[0] ? sumTo(b, loc, g[0], getLhs().getType()) : Value());
  grads.push_back(needed[1] ? sumTo(b, loc, g[0], getRhs().getType()) : Value());
  return success();
}

LogicalResult SubOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                   ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(needed[0] ? sumTo(b, loc, g[0], getLhs().getType()) : Value());
  grads.push_back(needed[1] ? sumTo(b, loc, scaleBy(b, loc, g[0], -1.0),
                                    getRhs().getType())
                            : Value());
  return success();
}

LogicalResult MulOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                   ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(needed[0] ? sumTo(b, loc, MulOp::create(b, loc, g[0], getRhs()),
                                    getLhs().getType())
                            : Value());
  grads.push_back(needed[1] ? sumTo(b, loc, MulOp::create(b, loc, g[0], getLhs()),
                                    getRhs().getType())
                            : Value());
  return success();
}

LogicalResult DivOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                   ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(needed[0] ? sumTo(b, loc, DivOp::create(b, loc, g[0], getRhs()),
                                    getLhs().getType())
                            : Value());
  // d(l/r)/dr = -(l/r)/r.
  Value dr;
  if (needed[1]) {
    Value t = DivOp::create(b, loc, MulOp::create(b, loc, g[0], getResult()),
                            getRhs());
    dr = sumTo(b, loc, scaleBy(b, loc, t, -1.0), getRhs().getType());
  }
  grads.push_back(dr);
  return success();
}

LogicalResult ReluOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(ReluGradOp::create(b, getLoc(), getInput(), g[0]));
  return success();
}

LogicalResult GeluOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(GeluGradOp::create(b, getLoc(), getInput(), g[0]));
  return success();
}

LogicalResult SiluOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(SiluGradOp::create(b, getLoc(), getInput(), g[0]));
  return success();
}

LogicalResult TanhOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(TanhGradOp::create(b, getLoc(), getResult(), g[0]));
  return success();
}

LogicalResult ExpOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                   ArrayRef<bool>,
                                   SmallVectorImpl<Value> &grads) {
  grads.push_back(MulOp::create(b, getLoc(), g[0], getResult()));
  return success();
}

LogicalResult LogOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                   ArrayRef<bool>,
                                   SmallVectorImpl<Value> &grads) {
  grads.push_back(DivOp::create(b, getLoc(), g[0], getInput()));
  return success();
}

LogicalResult SqrtOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &grads) {
  // d sqrt(x) = 1 / (2 sqrt(x)).
  Location loc = getLoc();
  grads.push_back(scaleBy(b, loc, DivOp::create(b, loc, g[0], getResult()), 0.5));
  return success();
}

LogicalResult RsqrtOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                     ArrayRef<bool>,
                                     SmallVectorImpl<Value> &grads) {
  // d x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2.
  Location loc = getLoc();
  Value y = getResult();
  Value y3 = MulOp::create(b, loc, y, MulOp::create(b, loc, y, y));
  grads.push_back(scaleBy(b, loc, MulOp::create(b, loc, g[0], y3), -0.5));
  return success();
}


LogicalResult ScaleOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                     ArrayRef<bool>,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(scaleBy(b, getLoc(), g[0], getFactor().convertToDouble()));
  return success();
}

LogicalResult ConvertOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  // The raw attribute, not the typed accessor: inference runs before the
  // verifier, and the accessor casts to FloatType unchecked.
  TypeAttr attr = adaptor.getElementTypeAttr();
  Type element = attr ? attr.getValue() : Type();
  if (!element)
    return fail(loc, getOperationName(), "needs an element type to convert to");
  if (!element.isF32() && !element.isBF16())
    return fail(loc, getOperationName(), "converts to f32 or bf16, not ",
                element);
  types.push_back(tensorOf(adaptor.getInput()).clone(element));
  return success();
}

LogicalResult ConvertOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                       ArrayRef<bool>,
                                       SmallVectorImpl<Value> &grads) {
  grads.push_back(ConvertOp::create(b, getLoc(), g[0],
                                    TypeAttr::get(getElementTypeOrSelf(
                                        getInput().getType()))));
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  RankedTensorType lhs = tensorOf(adaptor.getLhs());
  RankedTensorType rhs = tensorOf(adaptor.getRhs());
  if (lhs.getElementType() != rhs.getElementType())
    return fail(loc, name, "operands must have one element type, got ",
                lhs.getElementType(), " and ", rhs.getElementType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return fail(loc, name, "operands must have rank >= 2, got lhs ", lhs,
                " and rhs ", rhs);
  ArrayRef<int64_t> lb = lhs.getShape().drop_back(2);
  ArrayRef<int64_t> rb = rhs.getShape().drop_back(2);
  if (rhs.getRank() != 2 && lb != rb)
    return fail(loc, name, "rhs ", rhs,
                " must be rank 2 or have the batch dimensions of lhs ", lhs);
  int64_t lr = lhs.getRank(), rr = rhs.getRank();
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  int64_t m = lhs.getDimSize(tl ? lr - 1 : lr - 2);
  int64_t kl = lhs.getDimSize(tl ? lr - 2 : lr - 1);
  int64_t kr = rhs.getDimSize(tr ? rr - 1 : rr - 2);
  int64_t n = rhs.getDimSize(tr ? rr - 2 : rr - 1);
  if (kl != kr)
    return fail(loc, name, "contracting dimension of lhs (", kl,
                ") does not match that of rhs (", kr, ")");
  SmallVector<int64_t> shape(lb);
  shape.append({m, n});
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

static Value swapLastTwo(OpBuilder &b, Location loc, Value v) {
  int64_t rank = tensorOf(v).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return TransposeOp::create(b, loc, v, perm);
}

/// Collapses all but the last dimension: [..., X] -> [prod, X].
static Value flattenBatch(OpBuilder &b, Location loc, Value v) {
  RankedTensorType t = tensorOf(v);
  int64_t last = t.getShape().back();
  auto flat =
      RankedTensorType::get({t.getNumElements() / last, last}, t.getElementType());
  return ReshapeOp::create(b, loc, flat, v);
}

LogicalResult MatmulOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value a = getLhs(), w = getRhs(), dc = g[0];
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  bool sharedRhs = tensorOf(w).getRank() == 2 && tensorOf(a).getRank() > 2;
  Value da, dw;
  if (needed[0]) {
    // d op(A) = dC op(B)^T.
    if (!ta)
      da = MatmulOp::create(b, loc, dc, w, false, !tb);
    else if (!sharedRhs)
      da = MatmulOp::create(b, loc, w, dc, tb, true);
    else
      da = swapLastTwo(b, loc, MatmulOp::create(b, loc, dc, w, false, !tb));
  }
  if (needed[1]) {
    // d op(B) = op(A)^T dC, summed over the batch when B is shared.
    if (!sharedRhs) {
      dw = tb ? MatmulOp::create(b, loc, dc, a, true, ta)
              : MatmulOp::create(b, loc, a, dc, !ta, false);
    } else {
      Value a2 = flattenBatch(b, loc, ta ? swapLastTwo(b, loc, a) : a);
      Value dc2 = flattenBatch(b, loc, dc);
      dw = tb ? MatmulOp::create(b, loc, dc2, a2, true, false)
              : MatmulOp::create(b, loc, a2, dc2, true, false);
    }
  }
  grads.push_back(da);
  grads.push_back(dw);
  return success();
}

SmallVector<unsigned> MatmulOp::getAccumulatingResults() { return {0}; }

int64_t MatmulOp::getFlops() {
  RankedTensorType result = tensorOf(getResult());
  RankedTensorType lhs = tensorOf(getLhs());
  int64_t k = lhs.getDimSize(getTransposeLhs() ? lhs.getRank() - 2
                                               : lhs.getRank() - 1);
  return loom::saturatingMul(loom::saturatingMul(2, result.getNumElements()),
                             k);
}

int64_t MatmulOp::getMatmulFlops() { return getFlops(); }

//===----------------------------------------------------------------------===//
// Reductions and broadcasts
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (failed(checkDims(loc, getOperationName(), "reduced", dims,
                       input.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (auto [i, size] : llvm::enumerate(input.getShape()))
    if (!llvm::is_contained(dims, int64_t(i)))
      shape.push_back(size);
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

/// The result dimensions of `input` that a reduction over `dims` keeps.
static SmallVector<int64_t> keptDims(int64_t rank, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept;
  for (int64_t i = 0; i < rank; ++i)
    if (!llvm::is_contained(dims, i))
      kept.push_back(i);
  return kept;
}

LogicalResult ReduceOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                      ArrayRef<bool>,
                                      SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  RankedTensorType input = tensorOf(getInput());
  switch (getKind()) {
  case ReduceKind::sum:
  case ReduceKind::mean: {
    Value spread = BroadcastOp::create(b, loc, input, g[0],
                                       keptDims(input.getRank(), getDims()));
    if (getKind() == ReduceKind::mean) {
      int64_t count = input.getNumElements() / numElements(getResult());
      spread = scaleBy(b, loc, spread, 1.0 / double(count));
    }
    grads.push_back(spread);
    return success();
  }
  case ReduceKind::max:
    grads.push_back(ReduceMaxGradOp::create(b, loc, getInput(), getResult(),
                                            g[0], getDims()));
    return success();
  }
  return failure();
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  ArrayRef<int64_t> dims = getDims();
  if (input.getElementType() != result.getElementType())
    return emitOpError("result element type must equal the input's");
  if (int64_t(dims.size()) != input.getRank())
    return emitOpError("needs one entry in dims per input dimension (")
           << input.getRank() << "), got " << dims.size();
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= result.getRank() || (i > 0 && d <= dims[i - 1]))
      return emitOpError("dims must be increasing result dimensions, got ")
             << d << " at position " << i;
    if (input.getDimSize(i) != result.getDimSize(d))
      return emitOpError("input dimension ")
             << i << " (" << input.getDimSize(i) << ") must equal result dimension "
             << d << " (" << result.getDimSize(d) << ")";
  }
  return success();
}

LogicalResult BroadcastOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                         ArrayRef<bool>,
                                         SmallVectorImpl<Value> &grads) {
  SmallVector<int64_t> added =
      keptDims(tensorOf(getResult()).getRank(), getDims());
  grads.push_back(added.empty()
                      ? g[0]
                      : Value(ReduceOp::create(b, getLoc(), g[0],
                                               ReduceKind::sum, added)));
  return success();
}

SmallVector<unsigned> SumToOp::getAccumulatingResults() { return {0}; }

LogicalResult SumToOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType())
    return emitOpError("result element type must equal the input's");
  int64_t offset = input.getRank() - result.getRank();
  if (offset < 0)
    return emitOpError("result rank ")
           << result.getRank() << " exceeds the input rank " << input.getRank();
  for (int64_t i = 0; i < result.getRank(); ++i) {
    int64_t r = result.getDimSize(i), in = input.getDimSize(i + offset);
    if (r != in && r != 1)
      return emitOpError("result dimension ")
             << i << " (" << r << ") must be 1 or equal input dimension "
             << i + offset << " (" << in << ")";
  }
  return success();
}


LogicalResult ReduceMaxGradOp::verify() {
  RankedTensorType input = tensorOf(getInput());
  if (failed(checkDims(getLoc(), getOperationName(), "reduced", getDims(),
                       input.getRank())))
    return failure();
  SmallVector<int64_t> kept;
  for (auto [i, size] : llvm::enumerate(input.getShape()))
    if (!llvm::is_contained(getDims(), int64_t(i)))
      kept.push_back(size);
  if (tensorOf(getMax()).getShape() != ArrayRef<int64_t>(kept))
    return emitOpError("max ") << getMax().getType()
                               << " must have the input's reduced shape";
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, attention
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  if (tensorOf(getInput()).getRank() < 1)
    return emitOpError("input must have rank >= 1");
  return success();
}

LogicalResult SoftmaxOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                       ArrayRef<bool>,
                                       SmallVectorImpl<Value> &grads) {
  grads.push_back(SoftmaxGradOp::create(b, getLoc(), getResult(), g[0]));
  return success();
}

int64_t SoftmaxOp::getFlops() { return 5 * numElements(getResult()); }


/// Checks that `gamma` is a vector of the last dimension of `input`.
static LogicalResult checkNormGain(std::optional<Location> loc,
                                   StringRef opName, Value input, Value gamma) {
  RankedTensorType x = tensorOf(input), g = tensorOf(gamma);
  if (x.getRank() < 1)
    return fail(loc, opName, "input must have rank >= 1");
  if (g.getRank() != 1 || g.getDimSize(0) != x.getShape().back())
    return fail(loc, opName, "gamma ", g,
                " must be a vector of the input's last dimension (",
                x.getShape().back(), ")");
  if (g.getElementType() != x.getElementType())
    return fail(loc, opName, "gamma must have the input's element type");
  return success();
}

LogicalResult LayerNormOp::verify() {
  return checkNormGain(getLoc(), getOperationName(), getInput(), getGamma());
}

LogicalResult LayerNormOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                         ArrayRef<bool>,
                                         SmallVectorImpl<Value> &grads) {
  auto op = LayerNormGradOp::create(b, getLoc(), getInput(), getGamma(), g[0],
                                    getEpsilonAttr());
  grads.append({op.getInputGrad(), op.getGammaGrad(), op.getBetaGrad()});
  return success();
}

int64_t LayerNormOp::getFlops() { return 8 * numElements(getResult()); }

SmallVector<unsigned> LayerNormGradOp::getAccumulatingResults() { return {1, 2}; }

LogicalResult LayerNormGradOp::verify() {
  return checkNormGain(getLoc(), getOperationName(), getInput(), getGamma());
}

LogicalResult RmsNormOp::verify() {
  return checkNormGain(getLoc(), getOperationName(), getInput(), getGamma());
}

LogicalResult RmsNormOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                       ArrayRef<bool>,
                                       SmallVectorImpl<Value> &grads) {
  auto op = RmsNormGradOp::create(b, getLoc(), getInput(), getGamma(), g[0],
                                  getEpsilonAttr());
  grads.append({op.getInputGrad(), op.getGammaGrad()});
  return success();
}

int64_t RmsNormOp::getFlops() { return 5 * numElements(getResult()); }

SmallVector<unsigned> RmsNormGradOp::getAccumulatingResults() { return {1}; }

LogicalResult RmsNormGradOp::verify() {
  return checkNormGain(getLoc(), getOperationName(), getInput(), getGamma());
}

static LogicalResult checkAttention(std::optional<Location> loc,
                                    StringRef opName, Value q) {
  if (tensorOf(q).getRank() != 4)
    return fail(loc, opName,
                "q, k and v must be [batch, heads, seq, head_dim], got ",
                q.getType());
  return success();
}

LogicalResult AttentionOp::verify() {
  return checkAttention(getLoc(), getOperationName(), getQ());
}

LogicalResult AttentionOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                         ArrayRef<bool>,
                                         SmallVectorImpl<Value> &grads) {
  auto op = AttentionGradOp::create(b, getLoc(), getQ(), getK(), getV(), g[0],
                                    getCausal());
  grads.append({op.getQGrad(), op.getKGrad(), op.getVGrad()});
  return success();
}

/// Flops of q k^T and p v: 2 * (2 B H S S D).
static int64_t attentionFlops(Value q) {
  RankedTensorType t = tensorOf(q);
  return loom::saturatingMul(loom::saturatingMul(4, t.getNumElements()),
                             t.getDimSize(2));
}

int64_t AttentionOp::getFlops() {
  RankedTensorType t = tensorOf(getQ());
  int64_t scores =
      loom::saturatingMul(t.getNumElements() / t.getDimSize(3), t.getDimSize(2));
  return loom::saturatingAdd(attentionFlops(getQ()),
                             loom::saturatingMul(5, scores));
}

int64_t AttentionOp::getAttentionFlops() { return attentionFlops(getQ()); }

int64_t AttentionOp::getBytesWritten() {
  // The scores are not materialized: only the output is written.
  return loom::tensorBytes(getResult().getType());
}

LogicalResult CausalMaskOp::verify() {
  if (tensorOf(getInput()).getRank() < 2)
    return emitOpError("input must have rank >= 2 (queries, keys last)");
  return success();
}

LogicalResult CausalMaskOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                          ArrayRef<bool>,
                                          SmallVectorImpl<Value> &grads) {
  grads.push_back(
      CausalMaskOp::create(b, getLoc(), g[0], b.getF64FloatAttr(0.0)));
  return success();
}

LogicalResult AttentionGradOp::verify() {
  return checkAttention(getLoc(), getOperationName(), getQ());
}

// Recomputing the scores and the four backward products: 2.5x forward.
int64_t AttentionGradOp::getFlops() { return 5 * attentionFlops(getQ()) / 2; }

int64_t AttentionGradOp::getAttentionFlops() { return getFlops(); }

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType table = tensorOf(adaptor.getTable());
  if (table.getRank() != 2)
    return fail(loc, getOperationName(), "table must be [vocab, dim], got ",
                table);
  SmallVector<int64_t> shape(tensorOf(adaptor.getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                         ArrayRef<bool> needed,
                                         SmallVectorImpl<Value> &grads) {
  grads.push_back(needed[0] ? Value(EmbeddingGradOp::create(
                                  b, getLoc(), getTable().getType(), getIds(),
                                  g[0]))
                            : Value());
  grads.push_back(Value());
  return success();
}

int64_t EmbeddingOp::getBytesRead() {
  // Only the selected rows are read.
  return loom::saturatingAdd(detail::defaultBytesWritten(getOperation()),
                             loom::tensorBytes(getIds().getType()));
}

SmallVector<unsigned> EmbeddingGradOp::getAccumulatingResults() { return {0}; }

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType result = tensorOf(getResult()), grad = tensorOf(getGrad());
  if (result.getRank() != 2)
    return emitOpError("result must be [vocab, dim], got ") << result;
  SmallVector<int64_t> expected(tensorOf(getIds()).getShape());
  expected.push_back(result.getDimSize(1));
  if (grad.getShape() != ArrayRef<int64_t>(expected) ||
      grad.getElementType() != result.getElementType())
    return emitOpError("grad ") << grad << " must be ids' shape followed by "
                                << result.getDimSize(1);
  return success();
}

static LogicalResult checkLabels(std::optional<Location> loc, StringRef opName,
                                 Value logits, Value labels) {
  RankedTensorType l = tensorOf(logits), t = tensorOf(labels);
  if (l.getRank() < 1)
    return fail(loc, opName, "logits must have rank >= 1");
  if (t.getShape() != l.getShape().drop_back())
    return fail(loc, opName, "labels ", t, " must have the shape of logits ",
                l, " without its last (class) dimension");
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  return checkLabels(getLoc(), getOperationName(), getLogits(), getLabels());
}

LogicalResult CrossEntropyOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                            ArrayRef<bool>,
                                            SmallVectorImpl<Value> &grads) {
  grads.push_back(CrossEntropyGradOp::create(b, getLoc(), getLogits(),
                                             getLabels(), g[0],
                                             getIgnoreIndexAttr()));
  grads.push_back(Value());
  return success();
}

int64_t CrossEntropyOp::getFlops() { return 4 * numElements(getLogits()); }

LogicalResult CrossEntropyGradOp::verify() {
  return checkLabels(getLoc(), getOperationName(), getLogits(), getLabels());
}

/// The statistics of a softmax per position: the labels' shape.
static LogicalResult checkStats(Operation *op, Value stats, Value labels) {
  RankedTensorType st = tensorOf(stats), t = tensorOf(labels);
  if (st.getShape() != t.getShape())
    return op->emitOpError("statistics ")
           << st << " must have the labels' shape " << t;
  return success();
}

LogicalResult CrossEntropyStatsOp::verify() {
  if (failed(
          checkLabels(getLoc(), getOperationName(), getLogits(), getLabels())))
    return failure();
  if (!tensorOf(getMax()).getElementType().isF32())
    return emitOpError("statistics must be f32, whatever the logits' "
                       "element type");
  return checkStats(*this, getMax(), getLabels());
}

int64_t CrossEntropyStatsOp::getFlops() { return 3 * numElements(getLogits()); }

LogicalResult CrossEntropyFromStatsOp::verify() {
  return checkStats(*this, getMax(), getLabels());
}

int64_t CrossEntropyFromStatsOp::getFlops() {
  return 3 * numElements(getMax());
}

LogicalResult CrossEntropyGradFromStatsOp::verify() {
  if (failed(
          checkLabels(getLoc(), getOperationName(), getLogits(), getLabels())))
    return failure();
  return checkStats(*this, getMax(), getLabels());
}

int64_t CrossEntropyGradFromStatsOp::getFlops() {
  return 4 * numElements(getLogits());
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError("rate must lie in [0, 1), got ") << rate;
  return success();
}

void DropoutOp::getKernelOperands(SmallVectorImpl<Value> &values,
                                  SmallVectorImpl<Type> &types) {
  values.append({getInput(), getStream()});
  types.append({getInput().getType(), IndexType::get(getContext())});
}

LogicalResult DropoutOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &grads) {
  // The mask is a pure function of (seed, stream, step, index): applying the
  // same dropout to the gradient multiplies it by the same mask.
  grads.push_back(DropoutOp::create(b, getLoc(), g[0], getStream(),
                                    getRateAttr(), getSeedAttr()));
  if (getStream())
    grads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType())
    return emitOpError("result element type must equal the input's");
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape ")
           << input << " (" << input.getNumElements() << " elements) to "
           << result << " (" << result.getNumElements() << " elements)";
  return success();
}

LogicalResult ReshapeOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                       ArrayRef<bool>,
                                       SmallVectorImpl<Value> &grads) {
  grads.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), g[0]));
  return success();
}

int64_t ReshapeOp::getFlops() { return 0; }

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (int64_t(perm.size()) != input.getRank())
    return fail(loc, getOperationName(), "permutation has ", perm.size(),
                " entries for an input of rank ", input.getRank());
  if (failed(checkDims(loc, getOperationName(), "permutation", perm,
                       input.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(input.getDimSize(p));
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult TransposeOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                         ArrayRef<bool>,
                                         SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  grads.push_back(TransposeOp::create(b, getLoc(), g[0], inverse));
  return success();
}

int64_t TransposeOp::getFlops() { return 0; }

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes();
  if (int64_t(offsets.size()) != input.getRank() ||
      int64_t(sizes.size()) != input.getRank())
    return fail(loc, getOperationName(),
                "needs one offset and one size per dimension of ", input);
  for (int64_t i = 0; i < input.getRank(); ++i)
    // Compared without adding, which could overflow.
    if (offsets[i] < 0 || sizes[i] < 1 || sizes[i] > input.getDimSize(i) ||
        offsets[i] > input.getDimSize(i) - sizes[i])
      return fail(loc, getOperationName(), "the box at offset ", offsets[i],
                  " of size ", sizes[i], " in dimension ", i,
                  " is not a non-empty part of [0, ", input.getDimSize(i), ")");
  types.push_back(RankedTensorType::get(sizes, input.getElementType()));
  return success();
}

LogicalResult SliceOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                     ArrayRef<bool>,
                                     SmallVectorImpl<Value> &grads) {
  RankedTensorType input = tensorOf(getInput());
  SmallVector<int64_t> high;
  for (int64_t i = 0; i < input.getRank(); ++i)
    high.push_back(input.getDimSize(i) - getOffsets()[i] - getSizes()[i]);
  grads.push_back(PadOp::create(b, getLoc(), g[0], getOffsets(), high));
  return success();
}

int64_t SliceOp::getFlops() { return 0; }

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (int64_t(low.size()) != input.getRank() ||
      int64_t(high.size()) != input.getRank())
    return fail(loc, getOperationName(),
                "needs low and high padding for each dimension of ", input);
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < input.getRank(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      return fail(loc, getOperationName(), "padding must be non-negative");
    int64_t size = loom::saturatingAdd(
        loom::saturatingAdd(input.getDimSize(i), low[i]), high[i]);
    if (size == std::numeric_limits<int64_t>::max())
      return fail(loc, getOperationName(), "padding of dimension ", i,
                  " makes it larger than 63 bits");
    shape.push_back(size);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

int64_t PadOp::getFlops() { return 0; }

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  if (adaptor.getInputs().empty())
    return fail(loc, name, "needs at least one input");
  RankedTensorType first = tensorOf(adaptor.getInputs().front());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return fail(loc, name, "axis ", axis, " is out of range for rank ",
                first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (auto [i, v] : llvm::enumerate(adaptor.getInputs())) {
    RankedTensorType t = tensorOf(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return fail(loc, name, "input #", i, " ", t,
                  " must have the rank and element type of input #0 ", first);
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return fail(loc, name, "input #", i, " ", t,
                    " differs from input #0 outside the concatenated axis");
    shape[axis] = loom::saturatingAdd(shape[axis], t.getDimSize(axis));
  }
  if (shape[axis] == std::numeric_limits<int64_t>::max())
    return fail(loc, name, "the concatenated axis is larger than 63 bits");
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult ConcatOp::buildBackward(OpBuilder &b, ArrayRef<Value> g,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &grads) {
  int64_t axis = getAxis(), offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    RankedTensorType t = tensorOf(input);
    if (needed[i]) {
      SmallVector<int64_t> offsets(t.getRank(), 0);
      offsets[axis] = offset;
      grads.push_back(
          SliceOp::create(b, getLoc(), g[0], offsets, t.getShape()));
    } else {
      grads.push_back(Value());
    }
    offset += t.getDimSize(axis);
  }
  return success();
}

int64_t ConcatOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//


OpFoldResult LrScheduleOp::fold(FoldAdaptor adaptor) {
  auto step = dyn_cast_if_present<DenseFPElementsAttr>(adaptor.getStep());
  if (!step || !step.isSplat())
    return {};
  double lr = getSchedule().evaluate(
      step.getSplatValue<APFloat>().convertToDouble());
  auto type = cast<RankedTensorType>(getType());
  return DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), lr));
}

bool SumSquaresOp::isKernelCalledPerOperand() { return true; }

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (getReplicaGroup() >> 32)
    return emitOpError("replica group must be a group mask of at most 32 "
                       "axes, got ")
           << int64_t(getReplicaGroup());
  return success();
}

int64_t SumSquaresOp::getFlops() {
  int64_t flops = 0;
  for (Value v : getInputs())
    flops += 2 * numElements(v);
  return flops;
}

LogicalResult ClipFactorOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0.0))
    return emitOpError("max norm must be positive, got ")
           << getMaxNorm().convertToDouble();
  return success();
}

LogicalResult SGDUpdateOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Type param = adaptor.getParam().getType();
  types.push_back(param);
  if (Value m = adaptor.getMomentumBuffer()) {
    if (m.getType() != param)
      return fail(loc, getOperationName(), "momentum buffer ", m.getType(),
                  " must have the parameter's type ", param);
    types.push_back(param);
  }
  return success();
}

void SGDUpdateOp::getKernelOperands(SmallVectorImpl<Value> &values,
                                    SmallVectorImpl<Type> &types) {
  values.append({getParam(), getGrad(), getMomentumBuffer(), getLr()});
  types.append({getParam().getType(), getGrad().getType(),
                getParam().getType(), getLr().getType()});
}

void SGDUpdateOp::getKernelResults(SmallVectorImpl<Value> &values,
                                   SmallVectorImpl<Type> &types) {
  values.append({getNewParam(), getNewMomentumBuffer()});
  types.append({getParam().getType(), getParam().getType()});
}

int64_t SGDUpdateOp::getFlops() { return 4 * numElements(getParam()); }

/// A gradient of the parameter's type, or a bf16 one of an f32 parameter.
static LogicalResult verifyUpdateGradient(Operation *op, Value param,
                                          Value grad) {
  Type p = getElementTypeOrSelf(param.getType());
  Type g = getElementTypeOrSelf(grad.getType());
  if (g == p || isBf16GradientOf(grad.getType(), param.getType()))
    return success();
  return op->emitOpError("gradient of element type ")
         << g << " for a parameter of " << p
         << ": expected the parameter's, or bf16 for an f32 master";
}

LogicalResult SGDUpdateOp::verify() {
  return verifyUpdateGradient(*this, getParam(), getGrad());
}

LogicalResult AdamWUpdateOp::verify() {
  return verifyUpdateGradient(*this, getParam(), getGrad());
}


int64_t AdamWUpdateOp::getFlops() { return 12 * numElements(getParam()); }

bool loom::train::isBf16GradientOf(Type grad, Type param) {
  auto g = dyn_cast<RankedTensorType>(grad);
  auto p = dyn_cast<RankedTensorType>(param);
  return g && p && g.getShape() == p.getShape() &&
         g.getElementType().isBF16() && p.getElementType().isF32();
}

SmallVector<ConvertOp> loom::train::bf16Copies(ParamOp param) {
  SmallVector<ConvertOp> copies;
  for (Operation *user : param->getUsers())
    if (auto narrow = dyn_cast<ConvertOp>(user))
      if (getElementTypeOrSelf(narrow.getType()).isBF16())
        copies.push_back(narrow);
  return copies;
}
