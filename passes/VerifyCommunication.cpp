//===- VerifyCommunication.cpp - dist-verify-communication -----------------===//
//
// Every rank's communication, checked before any process starts: the
// collectives each rank issues over each of its groups, in order, must be
// the same on every member (kind, reduction, element type and count), and
// the ranks' blocking order must be able to complete. A rank program is the
// same on every rank unless an op says otherwise (`dist.ranks`, the world
// ranks that run it), so the ranks are simulated one by one. Where a
// `dist.schedule` runs a pipeline's micro-batch loops, each rank runs them
// as its actions say, in that order: the order that actually runs.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/PipelineLoops.h"

#include <deque>
#include <map>

namespace loom {
#define GEN_PASS_DEF_DISTVERIFYCOMMUNICATION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::train;

namespace {

/// One communication as a rank issues it: a collective over a group, or one
/// half of a point-to-point transfer.
struct Event {
  enum Kind { Collective, Send, Recv } kind;
  Operation *op;
  uint32_t mask = 0;  // a collective's group axes
  int64_t group = 0;  // which group of that mask (the other coordinates)
  int64_t peer = -1;  // a send's or receive's other rank (world rank)
  bool posted = false; // a send that completes without its receiver
  std::string action;  // the schedule's action that issues it ("1F3")
  std::string name;   // op name, with the reduction
  Type element;
  int64_t count = 0;
  Type type;          // a send's or receive's tensor type

  bool sameCollective(const Event &o) const {
    return name == o.name && element == o.element && count == o.count;
  }
};

struct Simulator {
  ModelOp model;
  dist::MeshAttr mesh;
  /// The world ranks simulated: one per class of ranks that run the same
  /// program (all of them with `every-rank`).
  SmallVector<int64_t> simulated;
  DenseMap<int64_t, size_t> slot;
  bool everyRank = false;
  SmallVector<SmallVector<Event>> events;
  /// The mesh axes whose coordinates change what a rank runs.
  SmallVector<StringRef> classAxes;

  Simulator(ModelOp model, dist::MeshAttr mesh) : model(model), mesh(mesh) {}

  SmallVector<int64_t> coordinates(int64_t rank) {
    SmallVector<int64_t> c(mesh.getSizes().size());
    for (int64_t a = int64_t(c.size()) - 1; a >= 0; --a) {
      c[a] = rank % mesh.getSizes()[a];
      rank /= mesh.getSizes()[a];
    }
    return c;
  }

  int64_t rankOf(ArrayRef<int64_t> c) {
    int64_t rank = 0;
    for (auto [a, size] : llvm::enumerate(mesh.getSizes()))
      rank = rank * size + c[a];
    return rank;
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

  /// The rank `rank` talks to through a send or receive.
  int64_t peerOf(int64_t rank, StringRef axis, int64_t peer) {
    SmallVector<int64_t> c = coordinates(rank);
    c[mesh.getAxisIndex(axis)] = peer;
    return rankOf(c);
  }

  /// The micro-batch loops a `dist.schedule` runs (at the schedule, not
  /// where they stand), and the schedule.
  dist::ScheduleOp schedule;
  SmallVector<RepeatOp, 3> scheduled;

  LogicalResult findSchedule() {
    schedule = dist::scheduleOf(model);
    if (!schedule)
      return success();
    FailureOr<SmallVector<RepeatOp, 3>> loops =
        dist::checkedScheduledLoops(schedule, mesh);
    if (failed(loops))
      return failure();
    scheduled = *loops;
    return success();
  }

  /// The communication `rank`'s action `action` issues: one iteration of
  /// its loop (both parts for a whole backward of a split one), only the
  /// ops of its stage and of none. Sends are posted (buffered), as the
  /// runtime posts them: a schedule's steady state sends both ways.
  LogicalResult collectAction(dist::ActionOp action, int64_t rank,
                              SmallVector<Event> &out) {
    SmallVector<RepeatOp, 2> loops;
    bool split = scheduled.size() > 2;
    switch (action.getKind()) {
    case dist::ActionKind::Forward:
      loops.push_back(scheduled[0]);
      break;
    case dist::ActionKind::Backward:
      loops.push_back(scheduled[1]);
      if (split)
        loops.push_back(scheduled[2]);
      break;
    case dist::ActionKind::BackwardInput:
    case dist::ActionKind::BackwardWeight:
      // (checkedScheduledLoops refused parts of a backward not split.)
      loops.push_back(scheduled[action.getKind() ==
                                        dist::ActionKind::BackwardInput
                                    ? 1
                                    : 2]);
      break;
    }
    size_t first = out.size();
    for (RepeatOp loop : loops)
      if (failed(collect(loop.getBodyBlock(), rank, out, action.getStage())))
        return failure();
    std::string name = std::to_string(action.getStage()) +
                       "FBIW"[size_t(action.getKind())] +
                       std::to_string(action.getMicroBatch());
    for (Event &e : MutableArrayRef<Event>(out).drop_front(first)) {
      e.posted = e.kind == Event::Send;
      e.action = name;
    }
    return success();
  }

  /// The communication `rank` issues in `block`, repeats unrolled; within
  /// a schedule's action of stage `stage`, only ops of that stage or none.
  LogicalResult collect(Block &block, int64_t rank, SmallVector<Event> &out,
                        std::optional<int64_t> stage = std::nullopt) {
    for (Operation &op : block) {
      if (!dist::runsOn(&op, mesh, rank))
        continue;
      if (std::optional<int64_t> own = dist::stageOf(&op);
          stage && own && *own != *stage)
        continue;
      if (auto repeat = dyn_cast<RepeatOp>(op);
          repeat && llvm::is_contained(scheduled, repeat))
        continue; // run by the schedule's actions
      if (auto here = dyn_cast<dist::ScheduleOp>(op)) {
        int64_t coordinate =
            coordinates(rank)[mesh.getAxisIndex(dist::AxisRole::Pipeline)];
        for (auto row : here.getBody().front().getOps<dist::RankActionsOp>())
          if (int64_t(row.getRank()) == coordinate)
            for (auto action : row.getBody().front().getOps<dist::ActionOp>())
              if (failed(collectAction(action, rank, out)))
                return failure();
        continue;
      }
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        // Every iteration issues the same events: collected once, then
        // repeated, so a repeat that communicates nothing costs nothing
        // whatever its count.
        SmallVector<Event> body;
        if (failed(collect(repeat.getBodyBlock(), rank, body, stage)))
          return failure();
        if (body.empty())
          continue;
        // ... but for the gathers of the next layer's slice, which the
        // last iterations (past the last slice) skip.
        for (int64_t i = 0, e = repeat.getCount(); i < e; ++i)
          for (const Event &event : body) {
            auto start = dyn_cast<dist::AllGatherStartOp>(event.op);
            if (start && start->getBlock() == &repeat.getBodyBlock() &&
                i >= start.getGatherCount(e))
              continue;
            out.push_back(event);
          }
        continue;
      }
      if (auto send = dyn_cast<dist::SendOp>(op)) {
        Event e{Event::Send, &op};
        e.peer = peerOf(rank, send.getAxis(), send.getPeer());
        e.name = "send";
        e.type = send.getInput().getType();
        out.push_back(e);
        continue;
      }
      if (auto recv = dyn_cast<dist::RecvOp>(op)) {
        Event e{Event::Recv, &op};
        e.peer = peerOf(rank, recv.getAxis(), recv.getPeer());
        e.name = "recv";
        e.type = recv.getType();
        out.push_back(e);
        continue;
      }
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op);
          reduce && reduce.getMembers()) {
        // Two members exchange their tensors: a posted send, a receive.
        ArrayRef<int64_t> members = *reduce.getMembers();
        StringRef axis = cast<StringAttr>(reduce.getAxes()[0]).getValue();
        int64_t here = coordinates(rank)[mesh.getAxisIndex(axis)];
        if (!llvm::is_contained(members, here))
          return op.emitError() << "rank " << rank << " (" << axis << " = "
                                << here << ") runs an all-reduce among "
                                << axis << " = " << members[0] << " and "
                                << members[1] << ", and is neither";
        int64_t peer = peerOf(rank, axis, members[members[0] == here]);
        Event send{Event::Send, &op};
        send.peer = peer;
        send.name = "all_reduce (members' send)";
        send.type = reduce.getInput().getType();
        send.posted = true;
        Event recv = send;
        recv.kind = Event::Recv;
        recv.name = "all_reduce (members' receive)";
        recv.posted = false;
        out.push_back(send);
        out.push_back(recv);
        continue;
      }
      if (!dist::isCommunication(&op))
        continue;
      auto axes = op.getAttrOfType<ArrayAttr>("axes");
      Event e{Event::Collective, &op};
      e.mask = mesh.getGroupMask(llvm::to_vector(axes.getAsRange<StringAttr>()));
      e.group = groupOf(rank, e.mask);
      for (Value v : op.getOperands()) {
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type)
          continue; // a gather's slice index
        if (auto start = dyn_cast<dist::AllGatherStartOp>(op))
          type = start.getBlockType();
        e.count += type.getNumElements();
        e.element = type.getElementType();
      }
      e.name = op.getName().stripDialect().str();
      if (op.hasAttr("max"))
        e.name += " max";
      out.push_back(e);
    }
    return success();
  }

  std::string describe(const Event &e) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "'dist." << e.name << "' of ";
    if (e.kind == Event::Collective)
      os << e.count << " x " << e.element;
    else
      os << e.type << (e.kind == Event::Send ? " to rank " : " from rank ")
         << e.peer;
    return s;
  }

  /// `describe`, with a collective's group and the schedule's action.
  std::string where(const Event &e) {
    return describe(e) +
           (e.kind == Event::Collective ? " over " + axesOf(e.mask) : "") +
           inAction(e);
  }

  static std::string inAction(const Event &e) {
    return e.action.empty() ? "" : " (action " + e.action + ")";
  }

  std::string axesOf(uint32_t mask) {
    std::string s;
    for (auto [a, name] : llvm::enumerate(mesh.getNames()))
      if (mask & (1u << a))
        s += (s.empty() ? "" : "+") + name.getValue().str();
    return s;
  }

  /// Chooses the ranks to simulate. A rank's program depends only on its
  /// coordinates on the axes that `dist.on` and point-to-point ops name
  /// (all axes when an op lists world ranks in `dist.ranks`), so the ranks
  /// whose other coordinates are 0 stand for every class, and the set is
  /// closed under the peers and group members the simulation needs.
  void chooseRanks() {
    uint32_t axes = 0;
    bool allAxes = everyRank;
    auto addAxis = [&](StringRef name) {
      int64_t a = mesh.getAxisIndex(name);
      if (a >= 0)
        axes |= 1u << a;
    };
    dist::DistDialect &attrs = dist::attrs(model);
    model.walk([&](Operation *op) {
      if (attrs.getRanksAttrHelper().isAttrPresent(op))
        allAxes = true;
      if (auto on = attrs.getOnAttrHelper().getAttr(op))
        for (NamedAttribute entry : on)
          addAxis(entry.getName());
      if (auto send = dyn_cast<dist::SendOp>(op))
        addAxis(send.getAxis());
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op);
          reduce && reduce.getMembers())
        addAxis(cast<StringAttr>(reduce.getAxes()[0]).getValue());
      if (auto recv = dyn_cast<dist::RecvOp>(op))
        addAxis(recv.getAxis());
    });
    if (allAxes)
      axes = ~0u;
    for (auto [a, name] : llvm::enumerate(mesh.getNames()))
      if (axes & (1u << a))
        classAxes.push_back(name.getValue());
    for (int64_t r = 0, n = mesh.getNumRanks(); r < n; ++r) {
      SmallVector<int64_t> c = coordinates(r);
      bool representative = true;
      for (auto [a, coordinate] : llvm::enumerate(c))
        if (!(axes & (1u << a)) && coordinate != 0)
          representative = false;
      if (representative) {
        slot[r] = simulated.size();
        simulated.push_back(r);
      }
    }
  }

  const Event *current(int64_t rank, ArrayRef<size_t> pc) {
    size_t s = slot.lookup(rank);
    return pc[s] < events[s].size() ? &events[s][pc[s]] : nullptr;
  }

  /// Posted sends not yet received, per (sender, receiver), in order.
  std::map<std::pair<int64_t, int64_t>, std::deque<const Event *>> channels;

  /// Runs the ranks' blocking order: a collective completes when every
  /// member of its group has reached it; a send when its peer has reached
  /// the matching receive, or at once when it is posted (its receive then
  /// takes it in order); a receive when its send is posted or reached.
  LogicalResult simulate() {
    chooseRanks();
    if (failed(findSchedule()))
      return failure();
    events.resize(simulated.size());
    for (auto [s, r] : llvm::enumerate(simulated))
      if (failed(collect(model.getBody().front(), r, events[s])))
        return failure();
    SmallVector<size_t> pc(simulated.size(), 0);
    auto mismatch = [&](const Event &send, int64_t from, const Event &recv) {
      InFlightDiagnostic d = send.op->emitError()
                             << "rank " << from << " sends " << send.type
                             << " to rank " << send.peer << ", which receives "
                             << recv.type;
      d.attachNote(recv.op->getLoc()) << "rank " << send.peer << "'s receive";
      return failure();
    };
    while (true) {
      bool progress = false, done = true;
      for (auto [s, r] : llvm::enumerate(simulated)) {
        const Event *e = current(r, pc);
        if (!e)
          continue;
        done = false;
        if (e->kind == Event::Recv) {
          // Completed by a posted send, or else by its sender.
          auto &queue = channels[{e->peer, r}];
          if (queue.empty())
            continue;
          if (queue.front()->type != e->type)
            return mismatch(*queue.front(), e->peer, *e);
          queue.pop_front();
          ++pc[s];
          progress = true;
          continue;
        }
        if (e->kind == Event::Send) {
          auto &queue = channels[{r, e->peer}];
          if (e->posted) {
            queue.push_back(e);
            ++pc[s];
            progress = true;
            continue;
          }
          const Event *o = current(e->peer, pc);
          if (!queue.empty() || !o || o->kind != Event::Recv || o->peer != r)
            continue;
          if (o->type != e->type)
            return mismatch(*e, r, *o);
          ++pc[s];
          ++pc[slot.lookup(e->peer)];
          progress = true;
          continue;
        }
        SmallVector<int64_t> members;
        bool ready = true;
        for (int64_t m : simulated) {
          if (groupOf(m, e->mask) != e->group)
            continue;
          members.push_back(m);
          const Event *o = current(m, pc);
          if (!o || o->kind != Event::Collective || o->mask != e->mask ||
              o->group != e->group) {
            ready = false;
            continue;
          }
          if (!e->sameCollective(*o)) {
            InFlightDiagnostic d = e->op->emitError()
                                   << "ranks " << r << " and " << m
                                   << " disagree on collective " << pc[s] + 1
                                   << " over " << axesOf(e->mask)
                                   << ": rank " << r << " issues "
                                   << describe(*e) << inAction(*e)
                                   << ", rank " << m << " issues "
                                   << describe(*o) << inAction(*o);
            d.attachNote(o->op->getLoc()) << "rank " << m << "'s collective";
            return failure();
          }
        }
        if (!ready)
          continue;
        for (int64_t m : members)
          ++pc[slot.lookup(m)];
        progress = true;
      }
      if (done) {
        for (auto &[ends, queue] : channels)
          if (!queue.empty()) {
            const Event &send = *queue.front();
            InFlightDiagnostic d = send.op->emitError()
                                   << "unmatched send: rank " << ends.first
                                   << " posts " << where(send)
                                   << ", which never receives it";
            d.attachNote(model.getLoc())
                << "rank " << ends.second << " has no communication left";
            return failure();
          }
        return success();
      }
      if (!progress)
        return reportStuck(pc);
    }
  }

  /// The rank `rank` waits on: a peer, or the first member of its group
  /// that is elsewhere.
  int64_t waitsOn(int64_t rank, const Event &e, ArrayRef<size_t> pc) {
    if (e.kind != Event::Collective)
      return e.peer;
    for (int64_t m : simulated) {
      if (m == rank || groupOf(m, e.mask) != e.group)
        continue;
      const Event *o = current(m, pc);
      if (!o || o->kind != Event::Collective || o->mask != e.mask)
        return m;
    }
    return rank;
  }

  /// Nobody can move: follows who waits on whom from the first stuck rank,
  /// to a rank with nothing left (an unmatched operation) or around a cycle.
  LogicalResult reportStuck(ArrayRef<size_t> pc) {
    int64_t first = -1;
    for (int64_t r : simulated)
      if (current(r, pc)) {
        first = r;
        break;
      }
    SmallVector<int64_t> chain{first};
    while (true) {
      int64_t r = chain.back();
      const Event &e = *current(r, pc);
      int64_t next = waitsOn(r, e, pc);
      const Event *o = current(next, pc);
      if (!o) {
        InFlightDiagnostic d = e.op->emitError();
        if (e.kind == Event::Collective)
          d << "the ranks' communication cannot complete: rank " << r
            << " waits in " << where(e);
        else
          d << "unmatched " << (e.kind == Event::Send ? "send" : "receive")
            << ": rank " << r << " waits in " << where(e);
        d.attachNote(model.getLoc())
            << "rank " << next << " has no "
            << (e.kind == Event::Collective ? "collective" : "communication")
            << " left";
        return failure();
      }
      auto seen = llvm::find(chain, next);
      if (seen == chain.end()) {
        chain.push_back(next);
        continue;
      }
      // A cycle: every rank in it waits on the next.
      SmallVector<int64_t> cycle(seen, chain.end());
      const Event &head = *current(cycle.front(), pc);
      InFlightDiagnostic d = head.op->emitError();
      bool twoGroups = cycle.size() == 2 && head.kind == Event::Collective &&
                       current(cycle[1], pc)->kind == Event::Collective;
      if (twoGroups) {
        d << "the ranks' communication cannot complete: rank "
          << cycle.front() << " waits in " << where(head);
      } else {
        d << "the ranks' communication cannot complete: ranks";
        for (int64_t r : cycle)
          d << " " << r << " ->";
        d << " " << cycle.front() << " wait on each other in a cycle";
      }
      for (int64_t r : cycle)
        if (r != cycle.front() || cycle.size() == 1)
          d.attachNote(current(r, pc)->op->getLoc())
              << "rank " << r << " is in " << where(*current(r, pc));
      if (cycle.size() > 1 && !twoGroups)
        d.attachNote(head.op->getLoc())
            << "rank " << cycle.front() << " is in " << where(head);
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
      auto mesh = dist::attrs(model).getMeshAttrHelper().getAttr(model);
      if (!mesh)
        continue;
      Simulator sim(model, mesh);
      sim.everyRank = everyRank;
      if (failed(sim.simulate()))
        return signalPassFailure();
      int64_t busiest = 0;
      for (const auto &rank : sim.events)
        busiest = std::max<int64_t>(busiest, rank.size());
      numCollectives = std::max<int64_t>(numCollectives, busiest);
      numRankClasses += sim.simulated.size();
      // What was proved, for the report: how many ranks stood for the
      // mesh, the axes that tell their programs apart, the busiest rank's
      // communication ops.
      Builder b(model.getContext());
      dist::attrs(model).getVerifiedAttrHelper().setAttr(
          model, dist::VerifiedAttr::get(
                     model.getContext(), int64_t(sim.simulated.size()),
                     mesh.getNumRanks(), b.getStrArrayAttr(sim.classAxes),
                     busiest));
    }
  }
};

} // namespace
