//===- DistDialect.cpp - meshes, shardings and collectives
//-----------------===//

#include "dialects/dist/DistDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include <array>
#include <map>

using namespace mlir;
using namespace loom::dist;

#include "dialects/dist/DistDialect.cpp.inc"
#include "dialects/dist/DistEnums.cpp.inc"
#include "dialects/dist/DistInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.cpp.inc"

void DistDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/dist/DistAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/dist/DistOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The discardable attributes
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> loom::dist::parseIntList(AsmParser &p) {
  SmallVector<int64_t> values;
  if (failed(p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        return p.parseInteger(values.emplace_back());
      })))
    return failure();
  return values;
}

void loom::dist::printIntList(AsmPrinter &p, ArrayRef<int64_t> values) {
  p << '[';
  llvm::interleaveComma(values, p);
  p << ']';
}

/// The pipeline record of the model that holds `op`, or null.
static PipelineAttr lookupPipeline(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto pipeline = attrs(op).getPipelineAttrHelper().getAttr(op))
      return pipeline;
  return {};
}

LogicalResult
DistDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  StringAttr name = attribute.getName();
  Attribute value = attribute.getValue();
  auto fail = [&]() {
    return op->emitOpError("attribute '") << name.getValue() << "' ";
  };
  auto nonNegative = [&](ArrayRef<int64_t> values,
                         StringRef what) -> LogicalResult {
    for (int64_t v : values)
      if (v < 0)
        return fail() << "has a negative " << what << " (" << v << ")";
    return success();
  };
  // Each attribute's type first: the helpers' getAttr would read a
  // mistyped one as absent.
  auto typed = [&](auto helper, StringRef type) -> LogicalResult {
    if (name != helper.getName() || helper.isAttrPresent(op))
      return success();
    return fail() << "must be " << type << ", got " << value;
  };
  if (failed(typed(getMeshAttrHelper(), "a #dist.mesh")) ||
      failed(typed(getPipelineAttrHelper(), "a #dist.pipeline")) ||
      failed(typed(getStageAttrHelper(), "an integer")) ||
      failed(typed(getStagesAttrHelper(), "an array<i64>")) ||
      failed(typed(getOnAttrHelper(), "a dictionary")) ||
      failed(typed(getRanksAttrHelper(), "an array<i64>")) ||
      failed(typed(getBackwardAttrHelper(), "a string")) ||
      failed(typed(getShardingAttrHelper(), "an array of #dist.sharding")) ||
      failed(typed(getArgShardingsAttrHelper(),
                   "an array of #dist.sharding")) ||
      failed(typed(getGlobalShapeAttrHelper(), "an array<i64>")) ||
      failed(typed(getShardGroupsAttrHelper(), "an array<i64>")) ||
      failed(typed(getPartAttrHelper(), "a #dist.part")) ||
      failed(typed(getVerifiedAttrHelper(), "a #dist.verified")) ||
      failed(typed(getZeroAttrHelper(), "an integer")))
    return failure();

  MeshAttr mesh = MeshAttr::lookup(op);
  if (name == getMeshAttrHelper().getName() ||
      name == getPipelineAttrHelper().getName() ||
      name == getVerifiedAttrHelper().getName())
    return success(); // Their own verifiers checked them.

  if (name == getZeroAttrHelper().getName()) {
    int64_t stage = getZeroAttrHelper().getAttr(op).getInt();
    if (stage < 1 || stage > 3)
      return fail() << "names ZeRO stage " << stage << "; stages are 1, 2, 3";
    if (!mesh || !mesh.getAxis(AxisRole::Data))
      return fail() << "needs a mesh with a data axis to shard over";
    return success();
  }

  if (name == getStageAttrHelper().getName() ||
      name == getStagesAttrHelper().getName()) {
    // (Both types were checked above.)
    SmallVector<int64_t> stages;
    if (name == getStageAttrHelper().getName())
      stages.push_back(getStageAttrHelper().getAttr(op).getInt());
    else
      llvm::append_range(stages,
                         getStagesAttrHelper().getAttr(op).asArrayRef());
    if (failed(nonNegative(stages, "stage")))
      return failure();
    if (PipelineAttr pipeline = lookupPipeline(op))
      for (int64_t stage : stages)
        if (stage >= pipeline.getNumStages())
          return fail() << "names stage " << stage << " of a pipeline of "
                        << pipeline.getNumStages() << " stages";
    return success();
  }

  if (name == getOnAttrHelper().getName()) {
    for (NamedAttribute coordinate : getOnAttrHelper().getAttr(op)) {
      SmallVector<int64_t> indices;
      if (auto index = dyn_cast<IntegerAttr>(coordinate.getValue()))
        indices.push_back(index.getInt());
      else if (auto list = dyn_cast<DenseI64ArrayAttr>(coordinate.getValue());
               list && !list.empty() && llvm::is_sorted(list.asArrayRef()) &&
               llvm::adjacent_find(list.asArrayRef()) == list.asArrayRef().end())
        indices.assign(list.asArrayRef().begin(), list.asArrayRef().end());
      else
        return fail() << "maps axis \"" << coordinate.getName().getValue()
                      << "\" to " << coordinate.getValue()
                      << ", not to an index or an ascending array<i64> of "
                         "them";
      if (!mesh)
        continue;
      StringRef axis = coordinate.getName().getValue();
      if (mesh.getAxisIndex(axis) < 0)
        return fail() << "names axis \"" << axis << "\", which the mesh "
                      << mesh << " does not have";
      for (int64_t index : indices)
        if (index < 0 || index >= mesh.getAxisSize(axis))
          return fail() << "puts the op at " << axis << " = " << index
                        << ", outside the axis of size "
                        << mesh.getAxisSize(axis);
    }
    return success();
  }

  if (name == getRanksAttrHelper().getName()) {
    ArrayRef<int64_t> ranks = getRanksAttrHelper().getAttr(op).asArrayRef();
    if (failed(nonNegative(ranks, "rank")))
      return failure();
    if (mesh)
      for (int64_t rank : ranks)
        if (rank >= mesh.getNumRanks())
          return fail() << "names rank " << rank << " of a mesh of "
                        << mesh.getNumRanks() << " ranks";
    return success();
  }

  if (name == getBackwardAttrHelper().getName()) {
    StringRef part = getBackwardAttrHelper().getAttr(op).getValue();
    if (part != "input" && part != "weight")
      return fail() << "must be \"input\" or \"weight\", got \"" << part
                    << "\"";
    return success();
  }

  if (name == getShardingAttrHelper().getName() ||
      name == getArgShardingsAttrHelper().getName()) {
    bool results = name == getShardingAttrHelper().getName();
    auto shardings = cast<ArrayAttr>(value);
    // A repeat's body lists its block arguments but the first (the index).
    TypeRange types;
    if (results)
      types = op->getResultTypes();
    else if (op->getNumRegions() == 1 && !op->getRegion(0).empty())
      types = TypeRange(op->getRegion(0).front().getArguments().drop_front());
    else
      return fail() << "is for an op with a body";
    if (shardings.size() != types.size())
      return fail() << "lists " << shardings.size() << " shardings for "
                    << types.size() << (results ? " results" : " arguments");
    for (auto [sharding, type] : llvm::zip(shardings, types)) {
      // A unit entry: a result propagation did not reach.
      if (results && isa<UnitAttr>(sharding))
        continue;
      auto attr = dyn_cast<ShardingAttr>(sharding);
      if (!attr)
        return fail() << "holds " << sharding << ", not a #dist.sharding";
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (mesh && tensor &&
          failed(attr.verifyFor(tensor, mesh, [&] { return fail(); })))
        return failure();
    }
    return success();
  }

  if (name == getGlobalShapeAttrHelper().getName() ||
      name == getShardGroupsAttrHelper().getName()) {
    auto shape = getGlobalShapeAttrHelper().getAttr(op);
    auto groups = getShardGroupsAttrHelper().getAttr(op);
    if (!shape || !groups)
      return fail() << "comes with '"
                    << (shape ? getShardGroupsAttrHelper().getNameStr()
                              : getGlobalShapeAttrHelper().getNameStr())
                    << "', which the op lacks";
    if (op->getNumResults() != 1)
      return fail() << "is for an op with one result";
    auto tensor = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!tensor || tensor.getRank() != shape.size() ||
        groups.size() != shape.size())
      return fail() << "must have one entry per dimension of "
                    << op->getResult(0).getType();
    // Each block is ceil(whole / ranks) of its group (the last ones
    // padded where the ranks do not divide the whole).
    MeshAttr mesh = MeshAttr::lookup(op);
    for (auto [whole, local, mask] : llvm::zip(
             shape.asArrayRef(), tensor.getShape(), groups.asArrayRef())) {
      int64_t ranks = mesh && mask >= 0 ? mesh.getGroupSize(mask) : 0;
      bool fits = whole >= 1 && local >= 1 &&
                  (ranks ? llvm::divideCeil(whole, ranks) == local
                         : whole % local == 0);
      if (!fits)
        return fail() << "gives a whole shape that blocks of "
                      << op->getResult(0).getType()
                      << " do not make over their groups";
    }
    if (failed(nonNegative(groups.asArrayRef(), "group")))
      return failure();
    return success();
  }

  if (name == getPartAttrHelper().getName()) {
    PartAttr part = getPartAttrHelper().getAttr(op);
    if (op->getNumResults() != 1)
      return fail() << "is for an op with one result";
    auto tensor = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!tensor || tensor.getRank() != int64_t(part.getWhole().size()))
      return fail() << "must have one entry per dimension of "
                    << op->getResult(0).getType();
    // The part's extent: the whole of its blocks where it is stored as
    // blocks.
    SmallVector<int64_t> extent(tensor.getShape());
    if (auto global = getGlobalShapeAttrHelper().getAttr(op);
        global && global.size() == extent.size())
      extent.assign(global.asArrayRef().begin(), global.asArrayRef().end());
    // PartAttr::verify keeps 0 <= offset < whole, so `whole - offset` is
    // exact where `offset + size` overflows for a huge size.
    for (auto [whole, offset, size] :
         llvm::zip(part.getWhole(), part.getOffsets(), extent))
      if (size < 1 || size > whole - offset)
        return fail() << "puts a part of " << op->getResult(0).getType()
                      << " at offsets [" << part.getOffsets()
                      << "] outside the whole tensor [" << part.getWhole()
                      << "]";
    return success();
  }

  return op->emitOpError("has the unknown attribute '")
         << name.getValue()
         << "': the dist dialect declares dist.mesh, dist.pipeline, "
            "dist.stage, dist.stages, dist.on, dist.ranks, dist.backward, "
            "dist.sharding, "
            "dist.arg_shardings, dist.global_shape, dist.shard_groups, "
            "dist.part and dist.verified";
}

LogicalResult
PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t ranks, int64_t virtualStages,
                     ArrayRef<int64_t> unitCosts, ArrayRef<int64_t> stageCosts,
                     int64_t bottleneck) {
  if (ranks < 1 || virtualStages < 1)
    return emitError() << "needs at least one rank and one stage per rank";
  if (!stageCosts.empty() &&
      int64_t(stageCosts.size()) != saturatingMul(ranks, virtualStages))
    return emitError() << "lists " << stageCosts.size()
                       << " stage costs for " << ranks << " x "
                       << virtualStages << " stages";
  if (llvm::any_of(unitCosts, [](int64_t c) { return c < 0; }) ||
      llvm::any_of(stageCosts, [](int64_t c) { return c < 0; }) ||
      bottleneck < 0)
    return emitError() << "has a negative cost";
  return success();
}

std::string loom::dist::partName(StringRef of, ArrayRef<int64_t> whole,
                                 ArrayRef<int64_t> offsets,
                                 ArrayRef<int64_t> sizes) {
  size_t cut = whole.size();
  while (cut > 0 && offsets[cut - 1] == 0 && sizes[cut - 1] == whole[cut - 1])
    --cut;
  std::string name = of.str();
  if (cut == 0)
    return name;
  llvm::raw_string_ostream os(name);
  os << "[";
  for (size_t d = 0; d < cut; ++d) {
    if (d)
      os << ", ";
    if (offsets[d] == 0 && sizes[d] == whole[d])
      os << ":";
    else
      os << offsets[d] << ":" << offsets[d] + sizes[d];
  }
  os << "]";
  return name;
}

LogicalResult PartAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringAttr of, ArrayRef<int64_t> whole,
                               ArrayRef<int64_t> offsets) {
  if (!of || of.getValue().empty())
    return emitError() << "needs the name of the whole tensor";
  if (whole.size() != offsets.size())
    return emitError() << "needs one offset per dimension of the whole "
                          "tensor, got "
                       << offsets.size() << " for " << whole.size();
  for (auto [w, o] : llvm::zip(whole, offsets))
    if (w < 1 || o < 0 || o >= w)
      return emitError() << "needs offsets inside the whole tensor's "
                            "positive dimensions";
  return success();
}

LogicalResult
VerifiedAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t simulated, int64_t ranks, ArrayAttr classAxes,
                     int64_t ops) {
  if (simulated < 1 || ranks < simulated || ops < 0)
    return emitError() << "needs 1 <= simulated <= ranks and ops >= 0";
  if (!llvm::all_of(classAxes, [](Attribute a) { return isa<StringAttr>(a); }))
    return emitError() << "class_axes must be axis names";
  return success();
}

//===----------------------------------------------------------------------===//
// #dist.mesh
//===----------------------------------------------------------------------===//

std::optional<AxisRole> loom::dist::conventionalRole(StringRef axis) {
  return llvm::StringSwitch<std::optional<AxisRole>>(axis)
      .Case("dp", AxisRole::Data)
      .Case("tp", AxisRole::Tensor)
      .Case("pp", AxisRole::Pipeline)
      .Default(std::nullopt);
}

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  SmallVector<AxisRole> roles;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    std::optional<AxisRole> role = conventionalRole(name);
    if (succeeded(parser.parseOptionalColon())) {
      std::string keyword;
      SMLoc roleAt = parser.getCurrentLocation();
      if (parser.parseKeywordOrString(&keyword))
        return failure();
      role = symbolizeAxisRole(keyword);
      if (!role)
        return parser.emitError(roleAt, "unknown axis role '")
               << keyword << "' (data, tensor or pipeline)";
    }
    if (!role)
      return parser.emitError(at, "mesh axis \"")
             << name << "\" needs a role: \"" << name
             << "\" = N : data, tensor or pipeline";
    names.push_back(StringAttr::get(parser.getContext(), name));
    sizes.push_back(size);
    roles.push_back(*role);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseAxis) ||
      parser.parseGreater())
    return {};
  return MeshAttr::getChecked(
      [&] { return parser.emitError(parser.getNameLoc()); },
      parser.getContext(), names, sizes, roles);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  for (auto [i, name, size, role] :
       llvm::enumerate(getNames(), getSizes(), getRoles())) {
    printer << (i ? ", " : "") << name << " = " << size;
    if (conventionalRole(name) != role)
      printer << " : " << stringifyAxisRole(role);
  }
  printer << "]>";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names,
                               ArrayRef<int64_t> sizes,
                               ArrayRef<AxisRole> roles) {
  if (names.size() != sizes.size() || names.size() != roles.size())
    return emitError() << "a mesh needs one size and one role per axis";
  if (names.size() > 8)
    return emitError() << "a mesh has at most 8 axes, got " << names.size();
  for (auto [i, name, size] : llvm::enumerate(names, sizes)) {
    if (name.getValue().empty())
      return emitError() << "mesh axis " << i << " has an empty name";
    if (size < 1)
      return emitError() << "mesh axis \"" << name.getValue()
                         << "\" must have at least one rank, got " << size;
    if (llvm::is_contained(names.take_front(i), name))
      return emitError() << "mesh axis \"" << name.getValue()
                         << "\" appears twice";
  }
  for (auto [i, role] : llvm::enumerate(roles))
    if (llvm::is_contained(roles.take_front(i), role))
      return emitError() << "mesh axes \""
                         << names[llvm::find(roles, role) - roles.begin()]
                                .getValue()
                         << "\" and \"" << names[i].getValue()
                         << "\" both have the role "
                         << stringifyAxisRole(role)
                         << " (each role is on one axis at most)";
  // Passes keep tables per rank and per axis: the mesh is bounded (and its
  // rank count fits in 64 bits).
  int64_t devices = 1;
  for (int64_t size : sizes) {
    devices = loom::saturatingMul(devices, size);
    if (devices > loom::kMaxMeshDevices)
      return emitError() << "a mesh has at most " << loom::kMaxMeshDevices
                         << " devices; this one has more";
  }
  return success();
}

int64_t MeshAttr::getNumRanks() const {
  int64_t n = 1;
  for (int64_t size : getSizes())
    n *= size;
  return n;
}

int64_t MeshAttr::getAxisIndex(StringRef axis) const {
  for (auto [i, name] : llvm::enumerate(getNames()))
    if (name.getValue() == axis)
      return int64_t(i);
  return -1;
}

int64_t MeshAttr::getAxisSize(StringRef axis) const {
  int64_t i = getAxisIndex(axis);
  return i < 0 ? 1 : getSizes()[i];
}

int64_t MeshAttr::getGroupSize(ArrayRef<StringAttr> axes) const {
  int64_t n = 1;
  for (StringAttr axis : axes)
    n *= getAxisSize(axis.getValue());
  return n;
}

int64_t MeshAttr::getGroupSize(int64_t mask) const {
  int64_t n = 1;
  for (auto [a, size] : llvm::enumerate(getSizes()))
    if (mask & (int64_t(1) << a))
      n *= size;
  return n;
}

uint32_t MeshAttr::getGroupMask(ArrayRef<StringAttr> axes) const {
  uint32_t mask = 0;
  for (StringAttr axis : axes)
    if (int64_t i = getAxisIndex(axis.getValue()); i >= 0)
      mask |= 1u << i;
  return mask;
}

StringAttr MeshAttr::getAxis(AxisRole role) const {
  int64_t i = getAxisIndex(role);
  return i < 0 ? StringAttr() : getNames()[i];
}

int64_t MeshAttr::getAxisIndex(AxisRole role) const {
  auto it = llvm::find(getRoles(), role);
  return it == getRoles().end() ? -1 : int64_t(it - getRoles().begin());
}

int64_t MeshAttr::getSize(AxisRole role) const {
  int64_t i = getAxisIndex(role);
  return i < 0 ? 1 : getSizes()[i];
}

std::optional<AxisRole> MeshAttr::getRole(StringRef axis) const {
  int64_t i = getAxisIndex(axis);
  if (i < 0)
    return std::nullopt;
  return getRoles()[i];
}

bool MeshAttr::crossesNodes(StringRef axis, int64_t devicesPerNode) const {
  int64_t i = getAxisIndex(axis);
  if (i < 0 || getSizes()[i] == 1)
    return false;
  // The ranks of the axis's group are `stride` apart, where stride is the
  // product of the inner axes' sizes.
  int64_t stride = 1;
  for (int64_t inner = i + 1; inner < int64_t(getSizes().size()); ++inner)
    stride *= getSizes()[inner];
  return stride * getSizes()[i] > devicesPerNode;
}

std::string MeshAttr::getSpec() const {
  std::string spec;
  llvm::raw_string_ostream os(spec);
  for (auto [i, name, size, role] :
       llvm::enumerate(getNames(), getSizes(), getRoles())) {
    os << (i ? "," : "") << name.getValue() << "=" << size;
    if (conventionalRole(name) != role)
      os << ":" << stringifyAxisRole(role);
  }
  return spec;
}

llvm::Expected<MeshAttr> loom::dist::parseMesh(MLIRContext *ctx,
                                               StringRef spec) {
  auto error = [&](const Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "mesh '" + spec + "': " + why);
  };
  ctx->getOrLoadDialect<DistDialect>();
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  SmallVector<AxisRole> roles;
  SmallVector<StringRef> parts;
  spec.split(parts, ',');
  for (StringRef part : parts) {
    auto [axis, rest] = part.trim().split('=');
    auto [value, roleName] = rest.split(':');
    int64_t size = 0;
    StringRef digits = value.trim();
    if (!axis.empty() && !digits.empty() &&
        llvm::all_of(digits, llvm::isDigit) && digits.getAsInteger(10, size))
      return error("axis '" + axis + "': size " + digits +
                   " is out of range (a mesh has 1 to " +
                   Twine(loom::kMaxMeshDevices) + " devices)");
    if (axis.empty() || digits.getAsInteger(10, size))
      return error("expected AXIS=SIZE or AXIS=SIZE:ROLE, got '" + part + "'");
    std::optional<AxisRole> role = conventionalRole(axis);
    if (!roleName.empty()) {
      role = symbolizeAxisRole(roleName.trim());
      if (!role)
        return error("axis '" + axis + "': unknown role '" + roleName +
                     "' (data, tensor or pipeline)");
    }
    if (!role)
      return error("axis '" + axis + "' needs a role: " + axis +
                   "=N:data, :tensor or :pipeline (only dp, tp and pp imply "
                   "theirs)");
    names.push_back(StringAttr::get(ctx, axis));
    sizes.push_back(size);
    roles.push_back(*role);
  }
  // The attribute's verifier says what else is wrong (sizes, repeated
  // axes or roles, the mesh's bound), caught here as the error's text.
  std::string why;
  MeshAttr mesh;
  {
    ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &d) {
      why = d.str();
      return success();
    });
    mesh = MeshAttr::getChecked([&] { return emitError(UnknownLoc::get(ctx)); },
                                ctx, names, sizes, roles);
  }
  if (!mesh)
    return error(why);
  return mesh;
}

bool MeshAttr::isInDeviceOrder(ArrayRef<StringAttr> axes) const {
  int64_t last = -1;
  for (StringAttr axis : axes) {
    int64_t i = getAxisIndex(axis.getValue());
    if (i <= last)
      return false;
    last = i;
  }
  return true;
}

MeshAttr MeshAttr::lookup(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto mesh = attrs(op).getMeshAttrHelper().getAttr(op))
      return mesh;
  return {};
}

//===----------------------------------------------------------------------===//
// #dist.sharding
//===----------------------------------------------------------------------===//

static ParseResult parseAxisList(AsmParser &parser,
                                 SmallVectorImpl<Attribute> &axes, bool *open) {
  if (parser.parseLBrace())
    return failure();
  if (succeeded(parser.parseOptionalRBrace()))
    return success();
  do {
    if (open && succeeded(parser.parseOptionalQuestion())) {
      *open = true;
      break;
    }
    std::string name;
    if (parser.parseString(&name))
      return failure();
    axes.push_back(StringAttr::get(parser.getContext(), name));
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseRBrace();
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SmallVector<ArrayAttr> dims;
  SmallVector<bool> open;
  SmallVector<int64_t> priorities;
  SmallVector<StringAttr> unreduced;
  SmallVector<bool> padded;
  auto parseDim = [&]() -> ParseResult {
    SmallVector<Attribute> axes;
    bool isOpen = false;
    if (parseAxisList(parser, axes, &isOpen))
      return failure();
    int64_t priority = -1;
    bool isPadded = false;
    StringRef keyword;
    llvm::SMLoc at = parser.getCurrentLocation();
    while (succeeded(parser.parseOptionalKeyword(&keyword))) {
      if (keyword == "padded" && !isPadded) {
        isPadded = true;
      } else if (!keyword.consume_front("p") ||
                 keyword.getAsInteger(10, priority)) {
        return parser.emitError(at, "expected a priority 'p<N>' or "
                                    "'padded' after a dimension's axes");
      }
      at = parser.getCurrentLocation();
    }
    dims.push_back(ArrayAttr::get(ctx, axes));
    open.push_back(isOpen);
    priorities.push_back(priority);
    padded.push_back(isPadded);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    SmallVector<Attribute> axes;
    if (parser.parseKeyword("unreduced") || parser.parseEqual() ||
        parseAxisList(parser, axes, nullptr))
      return {};
    for (Attribute a : axes)
      unreduced.push_back(cast<StringAttr>(a));
  }
  if (parser.parseGreater())
    return {};
  if (llvm::none_of(padded, [](bool p) { return p; }))
    padded.clear();
  return ShardingAttr::getChecked(
      [&] { return parser.emitError(parser.getNameLoc()); }, ctx, dims, open,
      priorities, unreduced, padded);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  for (int64_t d = 0, e = getRank(); d < e; ++d) {
    printer << (d ? ", " : "") << "{";
    ArrayAttr axes = getDims()[d];
    llvm::interleaveComma(axes, printer,
                          [&](Attribute a) { printer << cast<StringAttr>(a); });
    if (getOpen()[d])
      printer << (axes.empty() ? "?" : ", ?");
    printer << "}";
    if (getPriorities()[d] >= 0)
      printer << "p" << getPriorities()[d];
    if (isPadded(d))
      printer << " padded";
  }
  printer << "]";
  if (!getUnreduced().empty()) {
    printer << ", unreduced = {";
    llvm::interleaveComma(getUnreduced(), printer,
                          [&](StringAttr a) { printer << a; });
    printer << "}";
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<ArrayAttr> dims,
                                   ArrayRef<bool> open,
                                   ArrayRef<int64_t> priorities,
                                   ArrayRef<StringAttr> unreduced,
                                   ArrayRef<bool> padded) {
  if (open.size() != dims.size() || priorities.size() != dims.size())
    return emitError() << "a sharding needs one open flag and one priority "
                          "per dimension";
  if (!padded.empty() && padded.size() != dims.size())
    return emitError() << "a sharding's padded flags, where given, are one "
                          "per dimension";
  SmallVector<StringRef> seen;
  auto use = [&](StringRef axis) -> LogicalResult {
    if (llvm::is_contained(seen, axis))
      return emitError() << "mesh axis \"" << axis
                         << "\" is used twice in one sharding";
    seen.push_back(axis);
    return success();
  };
  for (ArrayAttr axes : dims)
    for (Attribute a : axes) {
      auto name = dyn_cast<StringAttr>(a);
      if (!name)
        return emitError() << "a dimension's axes must be strings";
      if (failed(use(name.getValue())))
        return failure();
    }
  for (StringAttr a : unreduced)
    if (failed(use(a.getValue())))
      return failure();
  return success();
}

ShardingAttr ShardingAttr::get(MLIRContext *ctx,
                               ArrayRef<SmallVector<StringAttr>> dims,
                               ArrayRef<StringAttr> unreduced,
                               ArrayRef<bool> padded) {
  SmallVector<ArrayAttr> arrays;
  for (const SmallVector<StringAttr> &axes : dims)
    arrays.push_back(
        ArrayAttr::get(ctx, SmallVector<Attribute>(axes.begin(), axes.end())));
  SmallVector<bool> open(dims.size(), false);
  SmallVector<int64_t> priorities(dims.size(), -1);
  SmallVector<bool> marks(padded);
  if (llvm::none_of(marks, [](bool p) { return p; }))
    marks.clear();
  return get(ctx, arrays, open, priorities, unreduced, marks);
}

SmallVector<StringAttr> ShardingAttr::getDimAxes(int64_t d) const {
  return llvm::to_vector(getDims()[d].getAsRange<StringAttr>());
}

LogicalResult
ShardingAttr::verifyFor(RankedTensorType type, MeshAttr mesh,
                        function_ref<InFlightDiagnostic()> emitError) const {
  if (getRank() != type.getRank())
    return emitError() << "sharding " << *this << " has " << getRank()
                       << " dimensions but the tensor " << type << " has "
                       << type.getRank();
  auto known = [&](StringAttr axis) -> LogicalResult {
    if (mesh.getAxisIndex(axis.getValue()) < 0)
      return emitError() << "sharding " << *this << " names mesh axis " << axis
                         << ", which the mesh " << mesh << " does not have";
    return success();
  };
  for (StringAttr a : getUnreduced())
    if (failed(known(a)))
      return failure();
  for (int64_t d = 0; d < getRank(); ++d) {
    SmallVector<StringAttr> axes = getDimAxes(d);
    for (StringAttr a : axes)
      if (failed(known(a)))
        return failure();
    int64_t n = mesh.getGroupSize(axes);
    if (type.getDimSize(d) % n != 0 && !isPadded(d))
      return emitError() << "dimension " << d << " of " << type << " (size "
                         << type.getDimSize(d) << ") does not divide into " << n
                         << " shards over " << getDims()[d]
                         << "; make it a multiple of " << n
                         << ", shard another dimension or mark it 'padded'";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Checks that `axes` are strings naming axes of `mesh`, none of them in
/// `seen` (axes used before by the same op), and adds them to `seen`.
static LogicalResult verifyAxisNames(Operation *op, ArrayAttr axes,
                                     MeshAttr mesh,
                                     SmallVectorImpl<StringRef> &seen) {
  for (Attribute a : axes) {
    auto axis = dyn_cast<StringAttr>(a);
    if (!axis)
      return op->emitOpError("mesh axes must be strings, got ") << a;
    if (mesh.getAxisIndex(axis.getValue()) < 0)
      return op->emitOpError("names mesh axis \"")
             << axis.getValue() << "\", which the mesh " << mesh
             << " does not have";
    if (llvm::is_contained(seen, axis.getValue()))
      return op->emitOpError("names mesh axis \"")
             << axis.getValue() << "\" twice";
    seen.push_back(axis.getValue());
  }
  return success();
}

/// The enclosing model's mesh, or an error at `op`.
static LogicalResult lookupMesh(Operation *op, MeshAttr &mesh) {
  mesh = MeshAttr::lookup(op);
  if (!mesh)
    return op->emitOpError("is not inside a model with a 'dist.mesh'");
  return success();
}

/// Checks a collective's axes against the enclosing model's mesh.
static LogicalResult verifyAxes(Operation *op, ArrayAttr axes, MeshAttr &mesh) {
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  SmallVector<StringRef> seen;
  if (failed(lookupMesh(op, mesh)))
    return failure();
  return verifyAxisNames(op, axes, mesh, seen);
}

static int64_t groupSize(MeshAttr mesh, ArrayAttr axes) {
  return mesh.getGroupSize(llvm::to_vector(axes.getAsRange<StringAttr>()));
}

/// Checks that `result` is `input` with dimension `dim` scaled by
/// `num / den`, every other dimension and the element type unchanged.
static LogicalResult verifyScaledDim(Operation *op, RankedTensorType input,
                                     RankedTensorType result, int64_t dim,
                                     int64_t num, int64_t den, StringRef what) {
  if (dim < 0 || dim >= input.getRank())
    return op->emitOpError("dimension ")
           << dim << " is out of range for " << input;
  if (input.getElementType() != result.getElementType() ||
      input.getRank() != result.getRank())
    return op->emitOpError("result ")
           << result << " must have the operand's rank and element type ("
           << input << ")";
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t want = input.getDimSize(d);
    if (d == dim) {
      int64_t scaled;
      if (llvm::MulOverflow(want, num, scaled) || scaled % den != 0)
        return op->emitOpError("dimension ")
               << dim << " of " << input << " does not divide by " << den;
      want = scaled / den;
    }
    if (result.getDimSize(d) != want)
      return op->emitOpError("result ")
             << result << " must be " << what << " of " << input
             << " (dimension " << d << " of size " << want << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The pipeline schedule
//===----------------------------------------------------------------------===//

int64_t ScheduleOp::getNumRanks() {
  return llvm::range_size(getBody().front().getOps<RankActionsOp>());
}

int64_t ScheduleOp::getNumMicroBatches() {
  int64_t n = 0;
  walk([&](ActionOp a) { n = std::max<int64_t>(n, a.getMicroBatch() + 1); });
  return n;
}

int64_t ScheduleOp::getNumStages() {
  int64_t n = 0;
  walk([&](ActionOp a) { n = std::max<int64_t>(n, a.getStage() + 1); });
  return n;
}

/// A schedule runs every stage's forward and backward of every
/// micro-batch once, each on the rank that holds the stage (stage s on
/// rank s mod P), its slot one of the schedule's. That the order can
/// complete is a property of the program it runs: dist-verify-communication
/// proves it.
LogicalResult ScheduleOp::verify() {
  if (getSlots() < 1)
    return emitOpError("keeps ") << getSlots() << " slots; it needs at least 1";
  int64_t ranks = 0;
  for (Operation &op : getBody().front()) {
    auto rank = dyn_cast<RankActionsOp>(op);
    if (!rank)
      return op.emitOpError("cannot stand in a 'dist.schedule', which holds "
                            "one 'dist.rank_actions' per pipeline rank");
    if (rank.getRank() != ranks)
      return rank.emitOpError("is for pipeline rank ")
             << rank.getRank() << " where rank " << ranks
             << " comes next (one per rank, in order)";
    for (Operation &inner : rank.getBody().front())
      if (!isa<ActionOp>(inner))
        return inner.emitOpError("cannot stand in a 'dist.rank_actions', "
                                 "which holds 'dist.action's");
    ++ranks;
  }
  if (ranks == 0)
    return emitOpError("has no pipeline ranks");
  // Each action on its own first: its stage on its rank, its slot one of
  // the schedule's, its numbers in range.
  constexpr int64_t kLimit = int64_t(1) << 31;
  WalkResult each = walk([&](ActionOp a) {
    int64_t rank = cast<RankActionsOp>(a->getParentOp()).getRank();
    if (a.getStage() < 0 || a.getMicroBatch() < 0 || a.getStage() >= kLimit ||
        a.getMicroBatch() >= kLimit) {
      a.emitOpError("names stage ")
          << a.getStage() << " and micro-batch " << a.getMicroBatch()
          << "; each must lie in [0, 2^31)";
      return WalkResult::interrupt();
    }
    if (a.getStage() % ranks != rank) {
      a.emitOpError("runs stage ")
          << a.getStage() << " on pipeline rank " << rank
          << ", which holds stages " << rank << " mod " << ranks;
      return WalkResult::interrupt();
    }
    if (a.getSlot() < 0 || a.getSlot() >= getSlots()) {
      a.emitOpError("uses slot ")
          << a.getSlot() << " of a schedule of " << getSlots() << " slots";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (each.wasInterrupted())
    return failure();
  int64_t stages = getNumStages(), microBatches = getNumMicroBatches();
  if (stages % ranks != 0)
    return emitOpError("runs ")
           << stages << " stages on " << ranks
           << " ranks; each rank holds as many stages (stage s on rank s mod "
              "P)";
  // Per stage and micro-batch that some action names, how often each kind
  // runs (a map: the numbers are the actions', not the product's).
  std::map<std::pair<int64_t, int64_t>, std::array<int64_t, 4>> seen;
  walk([&](ActionOp a) {
    ++seen[{a.getStage(), a.getMicroBatch()}][size_t(a.getKind())];
  });
  auto incomplete = [&](int64_t s, int64_t m, std::array<int64_t, 4> runs) {
    auto [f, b, i, w] = runs;
    return emitOpError("must run stage ")
           << s << "'s micro-batch " << m
           << " once forward and once backward (whole, or its input and "
              "weight parts once each); it runs "
           << f << " forward, " << b << " backward, " << i
           << " backward_input and " << w << " backward_weight";
  };
  for (auto &[key, runs] : seen) {
    auto [f, b, i, w] = runs;
    if (f != 1 ||
        !((b == 1 && i == 0 && w == 0) || (b == 0 && i == 1 && w == 1)))
      return incomplete(key.first, key.second, runs);
  }
  // Every pair named: the first one missing is among the first
  // `seen.size() + 1` in order.
  if (int64_t(seen.size()) / stages != microBatches ||
      int64_t(seen.size()) % stages != 0)
    for (int64_t s = 0; s < stages; ++s)
      for (int64_t m = 0; m < microBatches; ++m)
        if (!seen.count({s, m}))
          return incomplete(s, m, {});
  return success();
}

LogicalResult AllReduceOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  if (!isa<FloatType>(getInput().getType().getElementType()))
    return emitOpError("reduces float tensors only, got ")
           << getInput().getType().getElementType();
  if (std::optional<ArrayRef<int64_t>> members = getMembers()) {
    if (getAxes().size() != 1 || getMax())
      return emitOpError("sums among members of one axis only");
    if (members->size() != 2 || (*members)[0] < 0 ||
        (*members)[0] >= (*members)[1])
      return emitOpError("exchanges between two ascending coordinates; "
                         "got [")
             << llvm::make_range(members->begin(), members->end()) << "]";
    StringRef axis = cast<StringAttr>(getAxes()[0]).getValue();
    if (mesh && (*members)[1] >= mesh.getAxisSize(axis))
      return emitOpError("names member ")
             << (*members)[1] << " of axis \"" << axis << "\" of size "
             << mesh.getAxisSize(axis);
  }
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  for (Value v : getInputs())
    if (!isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
      return emitOpError("reduces float tensors only, got ") << v.getType();
  // Its results are read by one wait in this block, or, deferred, yielded
  // (each once) by the loop body that holds it.
  Operation *wait = nullptr;
  for (Value r : getResults()) {
    Operation *user = r.hasOneUse() ? *r.getUsers().begin() : nullptr;
    Operation *loop = (*this)->getParentOp();
    bool yielded = user && user == (*this)->getBlock()->getTerminator() &&
                   loop->getNumRegions() == 1 && !isa<WaitOp>(user);
    if (yielded) {
      // ... and the loop's result for it waited after the loop.
      unsigned k = r.getUses().begin()->getOperandNumber();
      yielded = k < loop->getNumResults() && loop->getResult(k).hasOneUse() &&
                isa<WaitOp>(*loop->getResult(k).getUsers().begin());
    }
    if (!user || (!isa<WaitOp>(user) && !yielded) || (wait && wait != user))
      return emitOpError("results must have one use, the one dist.wait that "
                         "ends the collective (or the loop's yield, waited "
                         "after the loop)");
    wait = user;
  }
  return success();
}

Operation *WaitOp::getStart() {
  if (getInputs().empty())
    return nullptr;
  auto result = dyn_cast<OpResult>(getInputs()[0]);
  if (!result)
    return nullptr;
  Operation *def = result.getOwner();
  if (def->getNumRegions() != 1 || def->getRegion(0).empty())
    return def;
  // A loop's result: what its body yields for it.
  Operation *yield = def->getRegion(0).front().getTerminator();
  if (!yield || result.getResultNumber() >= yield->getNumOperands())
    return nullptr;
  return yield->getOperand(result.getResultNumber()).getDefiningOp();
}

RankedTensorType AllGatherStartOp::getBlockType() {
  RankedTensorType input = getInput().getType();
  if (!getIndex() || input.getRank() == 0)
    return input;
  return RankedTensorType::get(input.getShape().drop_front(),
                               input.getElementType());
}

/// The block argument that numbers the iterations of the loop whose body
/// holds `block` (its first), or null.
static BlockArgument iterationOf(Block *block) {
  if (!block || block->getNumArguments() == 0 ||
      !isa<IndexType>(block->getArgument(0).getType()))
    return {};
  return block->getArgument(0);
}

std::optional<int64_t> AllGatherStartOp::getIterationOffset() {
  Value index = getIndex();
  BlockArgument iteration = iterationOf((*this)->getBlock());
  if (!index || !iteration)
    return std::nullopt;
  if (index == iteration)
    return 0;
  auto add = index.getDefiningOp<arith::AddIOp>();
  if (!add)
    return std::nullopt;
  APInt c;
  if (add.getLhs() == iteration &&
      matchPattern(add.getRhs(), m_ConstantInt(&c)))
    return c.getSExtValue();
  if (add.getRhs() == iteration &&
      matchPattern(add.getLhs(), m_ConstantInt(&c)))
    return c.getSExtValue();
  return std::nullopt;
}

int64_t AllGatherStartOp::getGatherCount(int64_t count) {
  Value index = getIndex();
  if (!index)
    return count;
  int64_t slices = getInput().getType().getDimSize(0);
  APInt c;
  if (matchPattern(index, m_ConstantInt(&c)))
    return c.getSExtValue() >= 0 && c.getSExtValue() < slices ? count : 0;
  // The loop runs over the slices (iteration i reads slice i): |offset|
  // iterations have no slice at i + offset.
  int64_t offset = getIterationOffset().value_or(0);
  return count - std::min(count, offset < 0 ? -offset : offset);
}

LogicalResult AllGatherStartOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  if (Value index = getIndex()) {
    if (getInput().getType().getRank() == 0)
      return emitOpError("gathers a slice of a stacked tensor, got ")
             << getInput().getType();
    if (!matchPattern(index, m_Constant()) && !getIterationOffset())
      return emitOpError("slice index must be a constant or the enclosing "
                         "loop's iteration plus a constant");
  }
  if (failed(
          verifyScaledDim(*this, getBlockType(), getResult().getType(),
                          getDim(), groupSize(mesh, getAxes()), 1,
                          "the group's blocks gathered along the dimension")))
    return failure();
  if (!getResult().hasOneUse() || !isa<WaitOp>(*getResult().getUsers().begin()))
    return emitOpError("result must have one use, the one dist.wait that "
                       "ends the collective");
  return success();
}

LogicalResult WaitOp::verify() {
  Operation *start = getStart();
  if (!isa_and_nonnull<AllReduceStartOp, AllGatherStartOp>(start))
    return emitOpError("waits for the results of an asynchronous collective");
  if (isDeferred()) {
    // The loop's stacked results for all the start's results, in order.
    Operation *loop = getInputs()[0].getDefiningOp();
    Operation *yield = loop->getRegion(0).front().getTerminator();
    if (!isa<AllReduceStartOp>(start) ||
        start->getBlock() != &loop->getRegion(0).front() ||
        getInputs().size() != start->getNumResults())
      return emitOpError("waits after a loop for all the results of one "
                         "all-reduce started in its body, in order");
    for (auto [input, made] : llvm::zip(getInputs(), start->getResults())) {
      auto result = dyn_cast<OpResult>(input);
      auto type = cast<RankedTensorType>(input.getType());
      if (!result || result.getOwner() != loop ||
          yield->getOperand(result.getResultNumber()) != made ||
          type.getRank() !=
              cast<RankedTensorType>(made.getType()).getRank() + 1)
        return emitOpError("waits after a loop for all the results of one "
                           "all-reduce started in its body, in order, each "
                           "yielded as a stacked slice");
    }
  } else if (getInputs() != start->getResults()) {
    return emitOpError("must wait for all the results of its collective, in "
                       "order");
  }
  // After the collective (or the loop that starts it), in the same block.
  Operation *before = getInputs()[0].getDefiningOp();
  if (before->getBlock() != (*this)->getBlock() ||
      !before->isBeforeInBlock(*this))
    return emitOpError("must follow the ")
           << (isDeferred() ? "loop" : "collective")
           << " it waits for in the same block";
  return success();
}

LogicalResult AllGatherOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  return verifyScaledDim(*this, getInput().getType(), getResult().getType(),
                         getDim(), groupSize(mesh, getAxes()), 1,
                         "the group's blocks gathered along the dimension");
}

LogicalResult ReduceScatterOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  if (!isa<FloatType>(getInput().getType().getElementType()))
    return emitOpError("reduces float tensors only, got ")
           << getInput().getType().getElementType();
  return verifyScaledDim(*this, getInput().getType(), getResult().getType(),
                         getDim(), 1, groupSize(mesh, getAxes()),
                         "one block of the dimension");
}

LogicalResult AllToAllOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  int64_t n = groupSize(mesh, getAxes());
  int64_t split = getSplitDim(), concat = getConcatDim();
  if (split < 0 || split >= in.getRank() || concat < 0 ||
      concat >= in.getRank())
    return emitOpError("split and concat dimensions must be in range for ")
           << in;
  if (split == concat)
    return emitOpError("split and concat dimensions must differ");
  if (in.getDimSize(split) % n != 0)
    return emitOpError("dimension ")
           << split << " of " << in << " does not divide into " << n
           << " blocks";
  SmallVector<int64_t> want(in.getShape());
  want[split] /= n;
  want[concat] *= n;
  if (out != RankedTensorType::get(want, in.getElementType()))
    return emitOpError("result must be ")
           << RankedTensorType::get(want, in.getElementType()) << ", got "
           << out;
  return success();
}

LogicalResult BroadcastOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  int64_t n = groupSize(mesh, getAxes());
  int64_t root = getRoot();
  if (root < 0 || root >= n)
    return emitOpError("root ") << root << " is not a rank of a group of " << n;
  return success();
}

LogicalResult CollectivePermuteOp::verify() {
  MeshAttr mesh;
  if (failed(verifyAxes(*this, getAxes(), mesh)))
    return failure();
  int64_t n = groupSize(mesh, getAxes());
  ArrayRef<int64_t> pairs = getPairs();
  if (pairs.size() % 2)
    return emitOpError("pairs must list (source, target) group ranks");
  llvm::SmallDenseSet<int64_t> source, target;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    int64_t s = pairs[i], t = pairs[i + 1];
    if (s < 0 || s >= n || t < 0 || t >= n)
      return emitOpError("pair (")
             << s << ", " << t << ") names a rank outside a group of " << n;
    if (!source.insert(s).second || !target.insert(t).second)
      return emitOpError("pair (")
             << s << ", " << t
             << ") repeats a source or a target; each rank sends and "
                "receives at most once";
  }
  return success();
}

/// Checks a point-to-point op's axis and peer coordinate, and its `dist.on`
/// coordinate on that axis when it has one (a rank does not send to itself).
static LogicalResult verifyPeer(Operation *op, StringRef axis, int64_t peer) {
  MeshAttr mesh;
  if (failed(lookupMesh(op, mesh)))
    return failure();
  if (mesh.getAxisIndex(axis) < 0)
    return op->emitOpError("names mesh axis \"")
           << axis << "\", which the mesh " << mesh << " does not have";
  int64_t size = mesh.getAxisSize(axis);
  if (peer < 0 || peer >= size)
    return op->emitOpError("peer ")
           << peer << " is outside axis \"" << axis << "\" of size " << size;
  if (auto on = attrs(op).getOnAttrHelper().getAttr(op))
    if (auto self = on.getAs<IntegerAttr>(axis); self && self.getInt() == peer)
      return op->emitOpError("runs on ")
             << axis << " = " << peer << " and names that rank as its peer";
  return success();
}

LogicalResult SendOp::verify() { return verifyPeer(*this, getAxis(), getPeer()); }

LogicalResult RecvOp::verify() { return verifyPeer(*this, getAxis(), getPeer()); }

LogicalResult ShardOp::verify() {
  MeshAttr mesh;
  if (failed(lookupMesh(*this, mesh)))
    return failure();
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if ((int64_t)getAxes().size() != in.getRank())
    return emitOpError("needs one list of axes per dimension of ") << in;
  SmallVector<StringRef> seen;
  SmallVector<int64_t> want(in.getShape());
  for (auto [d, list] : llvm::enumerate(getAxes())) {
    auto axes = dyn_cast<ArrayAttr>(list);
    if (!axes)
      return emitOpError("dimension ") << d << "'s axes must be a list";
    if (failed(verifyAxisNames(*this, axes, mesh, seen)))
      return failure();
    int64_t n = groupSize(mesh, axes);
    if (want[d] % n != 0)
      return emitOpError("dimension ")
             << d << " of " << in << " does not divide into " << n << " shards";
    want[d] /= n;
  }
  if (out != RankedTensorType::get(want, in.getElementType()))
    return emitOpError("result must be ")
           << RankedTensorType::get(want, in.getElementType()) << ", got "
           << out;
  return success();
}

LogicalResult FillPaddingOp::verify() {
  MeshAttr mesh;
  if (failed(lookupMesh(*this, mesh)))
    return failure();
  SmallVector<StringRef> seen;
  if (failed(verifyAxisNames(*this, getAxes(), mesh, seen)))
    return failure();
  RankedTensorType type = getInput().getType();
  if (getDim() < 0 || getDim() >= type.getRank())
    return emitOpError("dimension ") << getDim() << " is outside " << type;
  int64_t block = type.getDimSize(getDim());
  int64_t n = groupSize(mesh, getAxes());
  // The blocks of ceil(size / n) elements: the last one holds padding.
  // ceil(size / n) without `size + n - 1`, which overflows for a huge size.
  int64_t blocks = getSize() < 1 ? 0 : (getSize() - 1) / n + 1;
  if (getSize() < 1 || blocks != block)
    return emitOpError("a dimension of ")
           << getSize() << " split over " << getAxes() << " (" << n
           << " ranks) has blocks of " << blocks << ", not " << block;
  return success();
}

SmallVector<int64_t> ShardOp::getGroupMasks(MeshAttr mesh) {
  SmallVector<int64_t> masks;
  for (Attribute list : getAxes())
    masks.push_back(mesh.getGroupMask(
        llvm::to_vector(cast<ArrayAttr>(list).getAsRange<StringAttr>())));
  return masks;
}

/// Whether world rank `rank` of `mesh` runs `op` (and every op around it):
/// `dist.ranks` lists world ranks, `dist.on` coordinates.
bool loom::dist::runsOn(Operation *op, MeshAttr mesh, int64_t rank) {
  SmallVector<int64_t> c(mesh.getSizes().size());
  for (int64_t a = int64_t(c.size()) - 1, r = rank; a >= 0; --a) {
    c[a] = r % mesh.getSizes()[a];
    r /= mesh.getSizes()[a];
  }
  DistDialect &attrs = loom::dist::attrs(mesh.getContext());
  for (; op; op = op->getParentOp()) {
    if (auto ranks = attrs.getRanksAttrHelper().getAttr(op))
      if (!llvm::is_contained(ranks.asArrayRef(), rank))
        return false;
    if (auto on = attrs.getOnAttrHelper().getAttr(op))
      for (NamedAttribute entry : on) {
        int64_t axis = mesh.getAxisIndex(entry.getName());
        if (axis >= 0 && !onAdmits(entry.getValue(), c[axis]))
          return false;
      }
  }
  return true;
}

bool loom::dist::onAdmits(Attribute entry, int64_t coordinate) {
  if (auto index = dyn_cast_or_null<IntegerAttr>(entry))
    return index.getInt() == coordinate;
  if (auto list = dyn_cast_or_null<DenseI64ArrayAttr>(entry))
    return llvm::is_contained(list.asArrayRef(), coordinate);
  return true;
}

void loom::dist::placeOnRanks(Operation *op, StringAttr axis,
                              ArrayRef<int64_t> coordinates) {
  Builder b(op->getContext());
  attrs(op).getOnAttrHelper().setAttr(
      op, b.getDictionaryAttr(b.getNamedAttr(
              axis, coordinates.size() == 1
                        ? Attribute(b.getI64IntegerAttr(coordinates[0]))
                        : Attribute(b.getDenseI64ArrayAttr(coordinates)))));
}

bool loom::dist::isDeferredStart(Operation *op) {
  auto start = dyn_cast<AllReduceStartOp>(op);
  return start && start->getNumResults() > 0 &&
         start.getResult(0).hasOneUse() &&
         *start.getResult(0).getUsers().begin() ==
             start->getBlock()->getTerminator();
}

bool loom::dist::isCommunication(Operation *op) {
  return isa<SendOp, RecvOp>(op) ||
         (isa_and_nonnull<DistDialect>(op->getDialect()) &&
          op->hasAttr("axes") && !isa<ShardOp>(op));
}

std::optional<int64_t> loom::dist::stageOf(Operation *op) {
  if (auto s = attrs(op).getStageAttrHelper().getAttr(op))
    return s.getInt();
  return std::nullopt;
}

void loom::dist::copyStage(Operation *from, Operation *to) {
  auto stage = attrs(from).getStageAttrHelper();
  if (IntegerAttr s = stage.getAttr(from))
    stage.setAttr(to, s);
}

void loom::dist::placeOnStage(Operation *op, int64_t stage, int64_t ranks) {
  Builder b(op->getContext());
  DistDialect &dist = attrs(op);
  dist.getStageAttrHelper().setAttr(op, b.getI64IntegerAttr(stage));
  MeshAttr mesh = MeshAttr::lookup(op);
  StringAttr axis = mesh ? mesh.getAxis(AxisRole::Pipeline) : StringAttr();
  assert(axis && "a pipeline stage in a model without a pipeline axis");
  dist.getOnAttrHelper().setAttr(
      op, b.getDictionaryAttr(
              b.getNamedAttr(axis, b.getI64IntegerAttr(stage % ranks))));
}

/// Every dimension passes through, and the op is linear in its operand:
/// the pipeline's all-reduces over its axis, which precede data and tensor
/// partitioning, keep the sharding of what they reduce.
OpShardingRule AllReduceOp::getShardingRule() {
  auto type = cast<RankedTensorType>(getResult().getType());
  OpShardingRule rule;
  SmallVector<int64_t> dims;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    rule.factorSizes.push_back(size);
    rule.factorKinds.push_back(FactorKind::PassThrough);
    dims.push_back(d);
  }
  rule.operandFactors.push_back(dims);
  rule.resultFactors.push_back(dims);
  rule.linearity = Linearity::PerOperand;
  rule.linearIn = {true};
  return rule;
}
