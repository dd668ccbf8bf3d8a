//===- EmitCollectives.cpp - loom-lower-to-runtime: collectives, waits and transfers ===//

#include "codegen/Emitter.h"

using namespace loom::codegen::lowering;

namespace loom::codegen::lowering {

Value Emitter::group(uint32_t mask) {
  return emitc::CastOp::create(
      b(), loc(), b().getIntegerType(32, /*isSigned=*/false), i32(mask));
}

LogicalResult Emitter::emitCollective(Operation *op) {
  Value in = bufferOf(op->getOperand(0));
  Value out = bufferOf(op->getResult(0));
  auto inType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  Value dtype = i32(dtypeOf(inType.getElementType()));
  if (auto reduce = dyn_cast<dist::AllReduceOp>(op);
      reduce && reduce.getMembers()) {
    // Between two coordinates of one axis: each member posts its tensor
    // to the other, receives the other's into the result and adds its
    // own on the side of its coordinate, so both hold lower + upper.
    ArrayRef<int64_t> members = *reduce.getMembers();
    StringAttr axis = cast<StringAttr>(reduce.getAxes()[0]);
    Value here =
        call("loomrt_mesh_coord", {ctx, i32(mesh.getAxisIndex(axis))},
             {b().getI64Type()});
    int64_t shape = shapeId(inType.getShape());
    for (int side = 0; side < 2; ++side) {
      Value mine = arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::eq,
                                         here, i64(members[side]));
      emitWhen(mine, [&] {
        Value peer = i32(members[1 - side]);
        call("loomrt_comm_post",
             {ctx, group(mesh.getGroupMask({axis})), in,
              i64(inType.getNumElements()), dtype, peer});
        call("loomrt_comm_recv",
             {ctx, group(mesh.getGroupMask({axis})), out,
              i64(inType.getNumElements()), dtype, peer});
        Value lhs = side == 0 ? in : out, rhs = side == 0 ? out : in;
        call("loomrt_add", {ctx, out, lhs, rhs, i64(shape), i64(shape),
                            i64(shape)});
      });
    }
    return success();
  }
  if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
    copy(out, in, inType);
    call("loomrt_comm_all_reduce",
         {ctx, group(reduce.getGroupMask(mesh)), out,
          i64(inType.getNumElements()),
          dtype, i32(reduce.getMax() ? 1 : 0)});
    return success();
  }
  if (auto start = dyn_cast<dist::AllReduceStartOp>(op)) {
    if (start.getInputs().size() == 1) {
      copy(out, in, inType);
      Value event = call("loomrt_comm_all_reduce_async",
                         {ctx, group(start.getGroupMask(mesh)), out,
                          i64(inType.getNumElements()), dtype, i32(0)},
                         {eventType});
      // Deferred past the loop: into the loop's list, waited after it.
      if (Value list = deferredEvents.lookup(start))
        call("loomrt_comm_list_add", {ctx, list, event});
      else
        events[start.getResult(0)] = event;
      return success();
    }
    Value bucket = call("loomrt_comm_bucket_create", {ctx}, {bucketType});
    for (auto [input, result] :
         llvm::zip(start.getInputs(), start.getResults())) {
      Value buf = bufferOf(result);
      copy(buf, bufferOf(input), input.getType());
      call("loomrt_comm_bucket_add",
           {ctx, bucket, buf,
            i64(cast<RankedTensorType>(input.getType()).getNumElements())});
    }
    call("loomrt_comm_bucket_all_reduce_async",
         {ctx, bucket, group(start.getGroupMask(mesh)), dtype});
    if (Value list = deferredEvents.lookup(start))
      call("loomrt_comm_list_add_bucket", {ctx, list, bucket});
    else
      bucketsInFlight[start.getResult(0)] = bucket;
    return success();
  }
  // The runtime's blocks split the outermost dimension; along an inner
  // one, each block is the rows before it (the `_rows` forms place them
  // side by side, with no transposed copies).
  auto rowsBefore = [](RankedTensorType type, int64_t dim) {
    int64_t rows = 1;
    for (int64_t d : type.getShape().take_front(dim))
      rows *= d;
    return rows;
  };
  if (auto start = dyn_cast<dist::AllGatherStartOp>(op)) {
    RankedTensorType block = start.getBlockType();
    int64_t rows = rowsBefore(block, start.getDim());
    auto issue = [&](Value input) {
      Value g = group(start.getGroupMask(mesh));
      if (rows > 1)
        return call("loomrt_comm_all_gather_rows_async",
                    {ctx, g, out, input, i64(rows),
                     i64(block.getNumElements()), dtype},
                    {eventType});
      return call("loomrt_comm_all_gather_async",
                  {ctx, g, out, input, i64(block.getNumElements()), dtype},
                  {eventType});
    };
    Value index = start.getIndex();
    if (!index) {
      events[start.getResult()] = issue(in);
      return success();
    }
    // A slice of the stacked operand, where there is one: a loop's last
    // iteration has no next layer to gather (its event is null).
    int64_t slices = inType.getDimSize(0);
    Value j = arith::IndexCastOp::create(b(), loc(), b().getI64Type(),
                                         indexOf(index));
    Value inRange = arith::AndIOp::create(
        b(), loc(),
        arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::sge, j,
                              i64(0)),
        arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::slt, j,
                              i64(slices)));
    auto guard = scf::IfOp::create(b(), loc(), TypeRange{eventType}, inRange,
                                   /*withElseRegion=*/true);
    OpBuilder::InsertionGuard ig(b());
    b().setInsertionPointToStart(&guard.getThenRegion().front());
    Value event =
        issue(view(in, indexOf(index), tensorBytes(inType) / slices));
    scf::YieldOp::create(b(), loc(), event);
    b().setInsertionPointToStart(&guard.getElseRegion().front());
    scf::YieldOp::create(
        b(), loc(),
        emitc::LiteralOp::create(b(), loc(), eventType, "nullptr")
            .getResult());
    events[start.getResult()] = guard.getResult(0);
    return success();
  }
  if (auto gather = dyn_cast<dist::AllGatherOp>(op)) {
    int64_t rows = rowsBefore(inType, gather.getDim());
    if (rows > 1)
      call("loomrt_comm_all_gather_rows",
           {ctx, group(gather.getGroupMask(mesh)), out, in, i64(rows),
            i64(inType.getNumElements()), dtype});
    else
      call("loomrt_comm_all_gather",
           {ctx, group(gather.getGroupMask(mesh)), out, in,
            i64(inType.getNumElements()), dtype});
    return success();
  }
  if (auto scatter = dyn_cast<dist::ReduceScatterOp>(op)) {
    int64_t rows = rowsBefore(outType, scatter.getDim());
    if (rows > 1)
      call("loomrt_comm_reduce_scatter_rows",
           {ctx, group(scatter.getGroupMask(mesh)), out, in, i64(rows),
            i64(outType.getNumElements()), dtype, i32(0)});
    else
      call("loomrt_comm_reduce_scatter",
           {ctx, group(scatter.getGroupMask(mesh)), out, in,
            i64(outType.getNumElements()), dtype, i32(0)});
    return success();
  }
  if (auto fill = dyn_cast<dist::FillPaddingOp>(op)) {
    int64_t rows = rowsBefore(inType, fill.getDim());
    int64_t block = inType.getDimSize(fill.getDim());
    int64_t inner = inType.getNumElements() / (rows * block);
    call("loomrt_fill_padding",
         {ctx, out, in, i64(rows), i64(block), i64(inner),
          group(fill.getGroupMask(mesh)), i64(fill.getSize()),
          f64(fill.getValue().convertToDouble())});
    return success();
  }
  // (checkPlaced checked that its axes are in mesh order.)
  auto shard = cast<dist::ShardOp>(op);
  call("loomrt_shard",
       {ctx, out, in, i64(shapeId(outType.getShape())),
        i64(shapeId(inType.getShape())),
        i64(shapeId(shard.getGroupMasks(mesh)))});
  return success();
}

LogicalResult Emitter::lowerCollective(Operation *op) {
  defineResults(*op);
  if (failed(emitCollective(op)))
    return failure();
  if (completedStarts.contains(op))
    waitFor(op);
  return success();
}

void Emitter::waitFor(Operation *start) {
  if (Value event = events.lookup(start->getResult(0)))
    call("loomrt_comm_wait", {ctx, event});
  else
    call("loomrt_comm_bucket_wait",
         {ctx, bucketsInFlight.lookup(start->getResult(0))});
}

LogicalResult Emitter::lowerTransfer(Operation *op) {
  if (!isa<dist::WaitOp>(op))
    defineResults(*op);
  if (auto wait = dyn_cast<dist::WaitOp>(op)) {
    // Its results are its inputs' buffers, complete.
    for (auto [result, input] :
         llvm::zip(wait.getResults(), wait.getInputs()))
      buffers[result] = bufferOf(input);
    Operation *start = wait.getStart();
    if (wait.isDeferred()) {
      call("loomrt_comm_list_wait", {ctx, deferredEvents.lookup(start)});
      return success();
    }
    if (!completedStarts.contains(start))
      waitFor(start);
    return success();
  }
  if (auto send = dyn_cast<dist::SendOp>(op)) {
    auto type = send.getInput().getType();
    call("loomrt_comm_post",
         {ctx, group(mesh.getGroupMask({send.getAxisAttr()})),
          bufferOf(send.getInput()), i64(type.getNumElements()),
          i32(dtypeOf(type.getElementType())), i32(send.getPeer())});
    return success();
  }
  auto recv = cast<dist::RecvOp>(op);
  auto type = recv.getType();
  call("loomrt_comm_recv",
       {ctx, group(mesh.getGroupMask({recv.getAxisAttr()})),
        bufferOf(recv.getResult()), i64(type.getNumElements()),
        i32(dtypeOf(type.getElementType())), i32(recv.getPeer())});
  return success();
}

} // namespace loom::codegen::lowering
