//===- VerifyCommunication.cpp - dist-verify-communication -----------------===//
//
// Every rank's communication, checked before any process starts: the
// collectives each rank issues over each of its groups, in order, must be
// the same on every member (kind, reduction, element type and count), and
// the ranks' blocking order must be able to complete. A rank program is the
// same on every rank unless an op says otherwise (`dist.ranks`, the world
// ranks that run it), so the ranks are simulated one by one.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"

#include <map>

namespace loom {
#define GEN_PASS_DEF_DISTVERIFYCOMMUNICATION
#define GEN_PASS_DEF_DISTINJECTCOMMFAULT
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

constexpr StringLiteral kRanksAttr = "dist.ranks";

/// Whether world rank `rank` runs `op` (and every op around it).
bool runsOn(Operation *op, int64_t rank) {
  for (; op; op = op->getParentOp())
    if (auto ranks = op->getAttrOfType<DenseI64ArrayAttr>(kRanksAttr))
      if (!llvm::is_contained(ranks.asArrayRef(), rank))
        return false;
  return true;
}

/// One collective as a rank issues it.
struct Event {
  Operation *op;
  uint32_t mask;     // the group's axes
  int64_t group;     // which group of that mask (the other coordinates)
  std::string kind;  // op name, with the reduction
  Type element;
  int64_t count;

  bool sameCollective(const Event &o) const {
    return kind == o.kind && element == o.element && count == o.count;
  }
};

struct Simulator {
  ModelOp model;
  dist::MeshAttr mesh;
  int64_t ranks;
  /// Classes of equivalent ranks simulated (one representative each).
  int64_t classes = 0;
  bool everyRank = false;
  SmallVector<SmallVector<Event>> events;

  Simulator(ModelOp model, dist::MeshAttr mesh)
      : model(model), mesh(mesh), ranks(mesh.getNumRanks()) {}

  SmallVector<int64_t> coordinates(int64_t rank) {
    SmallVector<int64_t> c(mesh.getSizes().size());
    for (int64_t a = int64_t(c.size()) - 1; a >= 0; --a) {
      c[a] = rank % mesh.getSizes()[a];
      rank /= mesh.getSizes()[a];
    }
    return c;
  }

  /// The group of `mask` that `rank` belongs to: its coordinates on the
  /// other axes, as one number.
  int64_t groupOf(int64_t rank, uint32_t mask) {
    SmallVector<int64_t> c = coordinates(rank);
    int64_t id = 0;
    for (auto [a, size] : llvm::enumerate(mesh.getSizes()))
      if (!(mask & (1u << a)))
        id = id * size + c[a];
    return id;
  }

  /// The collectives `rank` issues in `block`, repeats unrolled.
  void collect(Block &block, int64_t rank, SmallVector<Event> &out) {
    for (Operation &op : block) {
      if (!runsOn(&op, rank))
        continue;
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        for (int64_t i = 0, e = repeat.getCount(); i < e; ++i)
          collect(repeat.getBodyBlock(), rank, out);
        continue;
      }
      auto axes = op.getAttrOfType<ArrayAttr>("axes");
      if (!isa_and_nonnull<dist::DistDialect>(op.getDialect()) || !axes ||
          isa<dist::ShardOp>(op))
        continue;
      uint32_t mask = mesh.getGroupMask(
          llvm::to_vector(axes.getAsRange<StringAttr>()));
      int64_t count = 0;
      Type element;
      for (Value v : op.getOperands()) {
        auto type = cast<RankedTensorType>(v.getType());
        count += type.getNumElements();
        element = type.getElementType();
      }
      std::string kind = op.getName().stripDialect().str();
      if (op.hasAttr("max"))
        kind += " max";
      out.push_back({&op, mask, groupOf(rank, mask), kind, element, count});
    }
  }

  std::string describe(const Event &e) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "'dist." << e.kind << "' of " << e.count << " x " << e.element;
    return s;
  }

  std::string axesOf(uint32_t mask) {
    std::string s;
    for (auto [a, name] : llvm::enumerate(mesh.getNames()))
      if (mask & (1u << a))
        s += (s.empty() ? "" : "+") + name.getValue().str();
    return s;
  }

  /// Runs the ranks' blocking order: a collective completes when every
  /// member of its group has reached it.
  LogicalResult simulate() {
    // Ranks whose programs are the same are one class: with no op that
    // runs on some ranks only, every rank issues the same collectives over
    // its own groups, so one representative is all there is to check.
    bool rankDependent = false;
    model.walk([&](Operation *op) {
      if (op->hasAttr(kRanksAttr))
        rankDependent = true;
    });
    if (!rankDependent && !everyRank) {
      ranks = 1;
      classes = 1;
    } else {
      classes = mesh.getNumRanks();
    }
    events.resize(ranks);
    for (int64_t r = 0; r < ranks; ++r)
      collect(model.getBody().front(), r, events[r]);
    SmallVector<size_t> pc(ranks, 0);
    while (true) {
      bool progress = false, done = true;
      for (int64_t r = 0; r < ranks; ++r) {
        if (pc[r] >= events[r].size())
          continue;
        done = false;
        const Event &e = events[r][pc[r]];
        SmallVector<int64_t> members;
        bool ready = true;
        for (int64_t m = 0; m < ranks; ++m) {
          if (groupOf(m, e.mask) != e.group)
            continue;
          members.push_back(m);
          if (pc[m] >= events[m].size()) {
            ready = false;
            continue;
          }
          const Event &o = events[m][pc[m]];
          if (o.mask != e.mask || o.group != e.group) {
            ready = false;
            continue;
          }
          if (!e.sameCollective(o)) {
            InFlightDiagnostic d = e.op->emitError()
                                   << "ranks " << r << " and " << m
                                   << " disagree on collective " << pc[r] + 1
                                   << " over " << axesOf(e.mask)
                                   << ": rank " << r << " issues "
                                   << describe(e) << ", rank " << m
                                   << " issues " << describe(o);
            d.attachNote(o.op->getLoc()) << "rank " << m << "'s collective";
            return failure();
          }
        }
        if (!ready)
          continue;
        for (int64_t m : members)
          ++pc[m];
        progress = true;
      }
      if (done)
        return success();
      if (progress)
        continue;
      // Nobody can move: name each stuck rank and what it waits in.
      for (int64_t r = 0; r < ranks; ++r) {
        if (pc[r] >= events[r].size())
          continue;
        const Event &e = events[r][pc[r]];
        InFlightDiagnostic d = e.op->emitError()
                               << "the ranks' communication cannot complete: "
                               << "rank " << r << " waits in " << describe(e)
                               << " over " << axesOf(e.mask);
        for (int64_t m = 0; m < ranks; ++m) {
          if (m == r || groupOf(m, e.mask) != e.group)
            continue;
          if (pc[m] >= events[m].size())
            d.attachNote(model.getLoc())
                << "rank " << m << " has no collective left";
          else
            d.attachNote(events[m][pc[m]].op->getLoc())
                << "rank " << m << " is in " << describe(events[m][pc[m]])
                << " over " << axesOf(events[m][pc[m]].mask);
        }
        return failure();
      }
      return failure();
    }
  }
};

struct DistVerifyCommunicationPass
    : public loom::impl::DistVerifyCommunicationBase<
          DistVerifyCommunicationPass> {
  using Base::Base;
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      auto mesh = model->getAttrOfType<dist::MeshAttr>("dist.mesh");
      if (!mesh)
        continue;
      Simulator sim(model, mesh);
      sim.everyRank = everyRank;
      if (failed(sim.simulate()))
        return signalPassFailure();
      for (const auto &rank : sim.events)
        numCollectives = std::max<int64_t>(numCollectives, rank.size());
      numRankClasses += sim.classes;
    }
  }
};

/// Makes `op` run only on the world ranks `ranks`.
void restrict(Operation *op, ArrayRef<int64_t> ranks) {
  op->setAttr(kRanksAttr, DenseI64ArrayAttr::get(op->getContext(), ranks));
}

struct DistInjectCommFaultPass
    : public loom::impl::DistInjectCommFaultBase<DistInjectCommFaultPass> {
  using Base::Base;
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      auto mesh = model->getAttrOfType<dist::MeshAttr>("dist.mesh");
      if (!mesh)
        continue;
      SmallVector<Operation *> collectives;
      model.walk([&](Operation *op) {
        if (isa_and_nonnull<dist::DistDialect>(op->getDialect()) &&
            op->hasAttr("axes") &&
            !isa<dist::ShardOp>(op))
          collectives.push_back(op);
      });
      if (index >= int64_t(collectives.size()) ||
          (fault == "swap" && index + 1 >= int64_t(collectives.size()))) {
        model.emitError("dist-inject-comm-fault: the model has ")
            << collectives.size() << " collectives, no collective "
            << int64_t(index);
        return signalPassFailure();
      }
      SmallVector<int64_t> others;
      for (int64_t r = 0; r < mesh.getNumRanks(); ++r)
        if (r != rank)
          others.push_back(r);
      Operation *op = collectives[index];
      if (isa<dist::AllReduceStartOp, dist::WaitOp>(op) ||
          (fault == "swap" &&
           isa<dist::AllReduceStartOp>(collectives[index + 1]))) {
        op->emitError("dist-inject-comm-fault: inject faults before "
                      "dist-comm-opt, into blocking collectives");
        return signalPassFailure();
      }
      OpBuilder b(op);
      if (fault == "skip") {
        restrict(op, others);
      } else if (fault == "swap") {
        // Rank `rank` issues this collective after the next one (a copy,
        // whose result nothing reads: only the order is wrong).
        Operation *next = collectives[index + 1];
        b.setInsertionPointAfter(next);
        Operation *late = b.clone(*op);
        restrict(late, {rank});
        restrict(op, others);
      } else if (fault == "count" || fault == "type") {
        // Rank `rank` reduces a tensor of another size or element type.
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
