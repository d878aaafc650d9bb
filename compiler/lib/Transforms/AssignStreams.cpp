//===- AssignStreams.cpp - Collectives on a comm stream, with borrows ----===//
//
// The automatic form of Monarch's hand-written DDP overlap: each collective
// and each to_mesh transfer runs on a comm stream on a borrow of its input,
// and the borrow is dropped just before the origin stream needs the tensor
// again (DESIGN.md §6.4). In-place collectives borrow their tensor mutably;
// copies (to_mesh, out-of-place reduces) borrow their input read-only and
// lend their result back to the default stream with a second borrow.
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

/// The tensor whose storage (and shards) `v` is: storageRoot, also through
/// `slice_mesh` (a slice is the same ref on fewer ranks).
Value shardRoot(Value v) {
  while (true) {
    v = storageRoot(v);
    auto slice = v.getDefiningOp<SliceMeshOp>();
    if (!slice)
      return v;
    v = slice.getInput();
  }
}

/// True when `op` (or an op nested in it) has an operand on `root`'s shards.
bool touches(Operation *op, Value root) {
  return op
      ->walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (isa<DTensorType>(v.getType()) && shardRoot(v) == root)
            return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// True when `op` may write `root` (a read-only borrow of it must be dropped
/// before): an in-place write of it, a mutable borrow of it, or any use by an
/// op with regions or a call, whose effects are not looked into.
bool mayWrite(Operation *op, Value root) {
  if (!touches(op, root))
    return false;
  if (Value written = mutatedOperand(op))
    if (shardRoot(written) == root)
      return true;
  if (auto borrow = dyn_cast<BorrowOp>(op))
    return borrow.getIsMutable();
  return op->getNumRegions() > 0 || isa<CallOpInterface>(op);
}

/// A collective or transfer start (moved onto the stream or not).
bool isStart(Operation *op) { return isa<ReduceStartOp, ToMeshStartOp>(op); }

/// The first op from `from` on that satisfies `stop`, or the block's
/// terminator (null when the block has none).
Operation *firstFrom(Operation *from, function_ref<bool(Operation *)> stop) {
  for (Operation *op = from; op; op = op->getNextNode())
    if (stop(op) || op->hasTrait<OpTrait::IsTerminator>())
      return op;
  return nullptr;
}

struct AssignStreamsPass : monarch::impl::AssignStreamsBase<AssignStreamsPass> {
  using Base::Base;

  /// The handle of stream `name` in the function around `op`, created at
  /// its entry on first need.
  Value streamFor(Operation *op, StringRef name) {
    Region *region = nullptr;
    if (auto fn = op->getParentOfType<FunctionOpInterface>())
      region = &fn.getFunctionBody();
    else
      region = op->getBlock()->getParent();
    Value &handle = handles[{region, name}];
    if (!handle) {
      OpBuilder b(op->getContext());
      b.setInsertionPointToStart(&region->front());
      handle = StreamCreateOp::create(
                   b, op->getLoc(),
                   StreamType::get(op->getContext(), b.getStringAttr(name)))
                   .getResult();
    }
    return handle;
  }

  /// Makes `b` insert before `at`, or at the end of `block` when `at` is
  /// null.
  static void setInsertionBefore(OpBuilder &b, Operation *at, Block *block) {
    if (at)
      b.setInsertionPoint(at);
    else
      b.setInsertionPointToEnd(block);
  }

  /// The wait of `token` when it is its only use, in the same block as
  /// `start`; else null.
  static WaitOp soleWait(Operation *start, Value token) {
    if (!token.hasOneUse())
      return nullptr;
    auto wait = dyn_cast<WaitOp>(*token.getUsers().begin());
    if (!wait || wait->getBlock() != start->getBlock())
      return nullptr;
    return wait;
  }

  /// Only ops on the default stream move, and only on tensors the default
  /// stream owns: one the program already put on a stream (on a borrow of
  /// its own), or a borrow lent to the default stream, stays where it was
  /// written; re-borrowing a borrowed tensor would nest borrows the program
  /// drops in its own order.
  static bool onOwnedDefault(Value input) {
    return cast<DTensorType>(input.getType()).getStreamName().empty() &&
           cast<DTensorType>(shardRoot(input).getType())
               .getStreamName()
               .empty();
  }

  /// Retypes `start`'s token and its wait for the stream.
  void retype(Value token, WaitOp wait) {
    auto valueType =
        cast<DTensorType>(cast<AsyncType>(token.getType()).getValueType())
            .withStream(stream.getValue());
    token.setType(AsyncType::get(token.getContext(), valueType));
    wait.getResult().setType(valueType);
  }

  /// Moves one in-place start and its wait onto the stream; false (and no
  /// change) when that would not be legal.
  bool assignInPlace(ReduceStartOp start) {
    Value origin = start.getInput();
    auto originType = cast<DTensorType>(origin.getType());
    if (!onOwnedDefault(origin))
      return false;
    WaitOp wait = soleWait(start, start.getToken());
    if (!wait)
      return false;
    // The origin is borrowed mutably from the start to the wait: nothing in
    // between may touch it.
    Value root = storageRoot(origin);
    for (Operation *op = start->getNextNode(); op != wait;
         op = op->getNextNode())
      if (usesStorage(op, root))
        return false;

    Value handle = streamFor(start, stream.getValue());
    OpBuilder b(start);
    Location loc = start.getLoc();
    DTensorType borrowedType = originType.withStream(stream.getValue());
    auto borrow =
        BorrowOp::create(b, loc, borrowedType, BorrowType::get(b.getContext()),
                         origin, handle, b.getUnitAttr());
    BorrowFirstUseOp::create(b, loc, borrow.getBorrow());
    start.getInputMutable().assign(borrow.getResult());

    // The reduced value lives in the origin once the borrow is dropped.
    wait.getResult().replaceAllUsesWith(origin);
    retype(start.getToken(), wait);
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
    setInsertionBefore(
        b,
        firstFrom(next, [&](Operation *op) { return usesStorage(op, root); }),
        wait->getBlock());
    BorrowDropOp::create(b, wait.getLoc(), borrow.getBorrow());
    return true;
  }

  /// Moves one copy (a to_mesh transfer, an out-of-place reduce) and its
  /// wait onto the stream: the input is borrowed read-only for the copy, the
  /// result is lent back to the default stream mutably. False (and no
  /// change) when that would not be legal.
  bool assignCopy(Operation *start, OpOperand &input, Value token) {
    Value origin = input.get();
    if (!onOwnedDefault(origin))
      return false;
    WaitOp wait = soleWait(start, token);
    if (!wait)
      return false;
    Block *block = start->getBlock();
    // The result is lent back until the end of the block: none of its uses
    // may leave the block (returned, yielded) past the drop. Its uses are
    // those of its storage: a view or alias of it (`act.detach()`, a slice)
    // reads the same memory, which the comm stream may reuse once the lent
    // borrow is dropped -- on a GPU the caching allocator hands it to the
    // next transfer while the default stream's kernels still read the view.
    Value received = wait.getResult();
    SmallVector<Operation *> users;
    for (Operation *op = wait->getNextNode(); op; op = op->getNextNode()) {
      if (!usesStorage(op, received))
        continue;
      if (op->hasTrait<OpTrait::IsTerminator>())
        return false;
      users.push_back(op);
    }
    for (OpOperand &use : received.getUses())
      if (!block->findAncestorOpInBlock(*use.getOwner()))
        return false;

    Value comm = streamFor(start, stream.getValue());
    OpBuilder b(start);
    Location loc = start->getLoc();
    auto originType = cast<DTensorType>(origin.getType());
    auto borrow =
        BorrowOp::create(b, loc, originType.withStream(stream.getValue()),
                         BorrowType::get(b.getContext()), origin, comm,
                         /*is_mutable=*/UnitAttr());
    BorrowFirstUseOp::create(b, loc, borrow.getBorrow());
    input.set(borrow.getResult());
    retype(token, wait);

    // On the comm stream the wait follows its start at once (see
    // assignInPlace), then the input's last use.
    wait->moveAfter(start);
    b.setInsertionPointAfter(wait);
    auto lastUse =
        BorrowLastUseOp::create(b, wait.getLoc(), borrow.getBorrow());

    if (!users.empty()) {
      // The result, received on the comm stream, lent to the default
      // stream: the default stream waits for the copy only at the first use,
      // and the comm stream takes it back (waiting for the last use) at the
      // next start after that last use: that start's copy waits for the
      // default stream to get there anyway (its input is made after the
      // last use), and a drop left to the end of the block would keep every
      // received tensor of an unrolled program alive to its end.
      b.setInsertionPointAfter(lastUse);
      Value main = streamFor(start, "");
      auto lent = BorrowOp::create(
          b, wait.getLoc(),
          cast<DTensorType>(wait.getResult().getType()).withStream(""),
          BorrowType::get(b.getContext()), wait.getResult(), main,
          b.getUnitAttr());
      wait.getResult().replaceAllUsesExcept(lent.getResult(), lent);
      Operation *first = users.front(), *last = users.front();
      for (Operation *user : users) {
        if (user->isBeforeInBlock(first))
          first = user;
        if (last->isBeforeInBlock(user))
          last = user;
      }
      b.setInsertionPoint(first);
      BorrowFirstUseOp::create(b, wait.getLoc(), lent.getBorrow());
      b.setInsertionPointAfter(last);
      auto lentLastUse =
          BorrowLastUseOp::create(b, wait.getLoc(), lent.getBorrow());
      setInsertionBefore(b, firstFrom(lentLastUse->getNextNode(), isStart),
                         block);
      BorrowDropOp::create(b, wait.getLoc(), lent.getBorrow());
    }

    // Drop the input's borrow as late as correct: the origin may be read
    // meanwhile, so only before it may be written (copy semantics: a later
    // write must not reach the copy), and no later than the next start (the
    // borrow keeps the input alive; see above), or at the end of the block.
    Value root = shardRoot(origin);
    setInsertionBefore(b,
                       firstFrom(lastUse->getNextNode(),
                                 [&](Operation *op) {
                                   return isStart(op) || mayWrite(op, root);
                                 }),
                       block);
    BorrowDropOp::create(b, wait.getLoc(), borrow.getBorrow());
    return true;
  }

  void runOnOperation() override {
    handles.clear();
    // In program order, so that each borrow sees the drops of the borrows
    // before it.
    SmallVector<Operation *> starts;
    getOperation()->walk([&](Operation *op) {
      if (isa<ReduceStartOp, ToMeshStartOp>(op))
        starts.push_back(op);
    });
    for (Operation *op : starts) {
      if (auto copy = dyn_cast<ToMeshStartOp>(op)) {
        if (toMesh)
          assignCopy(copy, copy.getInputMutable(), copy.getToken());
        continue;
      }
      auto reduce = cast<ReduceStartOp>(op);
      if (reduce.getOut())
        continue; // writes its `into` tensor: not a plain copy
      if (reduce.getInplace())
        assignInPlace(reduce);
      else if (outOfPlace)
        assignCopy(reduce, reduce.getInputMutable(), reduce.getToken());
    }
  }

  DenseMap<std::pair<Region *, StringRef>, Value> handles;
};

} // namespace
