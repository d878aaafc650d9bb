//===- AssignStreams.cpp - Collectives on a comm stream, with borrows ----===//
//
// The automatic form of Monarch's hand-written DDP overlap: each in-place
// collective runs on a comm stream on a mutable borrow of its tensor, and
// the borrow is dropped just before the origin stream needs the tensor again
// (DESIGN.md §6.4).
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/TensorEffects.h"
#include "monarch/Compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace monarch {
#define GEN_PASS_DEF_ASSIGNSTREAMS
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

struct AssignStreamsPass : monarch::impl::AssignStreamsBase<AssignStreamsPass> {
  using Base::Base;

  /// The stream handle of the function around `op`, created on first need.
  Value streamFor(Operation *op) {
    Region *region = nullptr;
    if (auto fn = op->getParentOfType<FunctionOpInterface>())
      region = &fn.getFunctionBody();
    else
      region = op->getBlock()->getParent();
    Value &handle = handles[region];
    if (!handle) {
      OpBuilder b(op->getContext());
      b.setInsertionPointToStart(&region->front());
      handle = StreamCreateOp::create(
                   b, op->getLoc(),
                   StreamType::get(op->getContext(),
                                   b.getStringAttr(stream.getValue())))
                   .getResult();
    }
    return handle;
  }

  /// Moves one in-place start and its wait onto the stream; false (and no
  /// change) when that would not be legal.
  bool assign(ReduceStartOp start) {
    if (!start.getInplace() || start.getOut())
      return false;
    Value origin = start.getInput();
    auto originType = cast<DTensorType>(origin.getType());
    // Only collectives on the default stream move: one the program already
    // put on a stream (on a borrow of its own) stays where it was written;
    // re-borrowing a borrowed tensor would nest borrows the program drops in
    // its own order.
    if (!originType.getStreamName().empty())
      return false;
    if (!start.getToken().hasOneUse())
      return false;
    auto wait = dyn_cast<WaitOp>(*start.getToken().getUsers().begin());
    if (!wait || wait->getBlock() != start->getBlock())
      return false;
    // The origin is borrowed mutably from the start to the wait: nothing in
    // between may touch it.
    Value root = storageRoot(origin);
    for (Operation *op = start->getNextNode(); op != wait;
         op = op->getNextNode())
      if (usesStorage(op, root))
        return false;

    Value handle = streamFor(start);
    OpBuilder b(start);
    Location loc = start.getLoc();
    DTensorType borrowedType = originType.withStream(stream.getValue());
    auto borrow =
        BorrowOp::create(b, loc, borrowedType, BorrowType::get(b.getContext()),
                         origin, handle, b.getUnitAttr());
    BorrowFirstUseOp::create(b, loc, borrow.getBorrow());
    start.getInputMutable().assign(borrow.getResult());
    auto valueType = cast<DTensorType>(
        cast<AsyncType>(start.getToken().getType()).getValueType());
    DTensorType newValueType = valueType.withStream(stream.getValue());
    start.getToken().setType(AsyncType::get(b.getContext(), newValueType));

    // The reduced value lives in the origin once the borrow is dropped.
    wait.getResult().replaceAllUsesWith(origin);
    wait.getResult().setType(newValueType);
    // On the comm stream the wait (now unused) follows its start at once,
    // with the last use right after: the stream runs its ops in order, so a
    // wait left where the origin needs the value would hold every later
    // borrow's last use behind every earlier collective. The origin still
    // waits only at the drop.
    Operation *next = wait->getNextNode();
    wait->moveAfter(start);
    b.setInsertionPointAfter(wait);
    BorrowLastUseOp::create(b, wait.getLoc(), borrow.getBorrow());

    // Drop as late as correct: just before the origin is used again.
    for (; next; next = next->getNextNode())
      if (usesStorage(next, root) || next->hasTrait<OpTrait::IsTerminator>())
        break;
    if (next)
      b.setInsertionPoint(next);
    else
      b.setInsertionPointToEnd(wait->getBlock());
    BorrowDropOp::create(b, wait.getLoc(), borrow.getBorrow());
    return true;
  }

  void runOnOperation() override {
    handles.clear();
    SmallVector<ReduceStartOp> starts;
    getOperation()->walk([&](ReduceStartOp op) { starts.push_back(op); });
    for (ReduceStartOp start : starts)
      assign(start);
  }

  DenseMap<Region *, Value> handles;
};

} // namespace
