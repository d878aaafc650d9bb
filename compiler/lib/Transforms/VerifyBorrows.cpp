//===- VerifyBorrows.cpp - Static checks of stream borrows ---------------===//
//
// DESIGN.md §6.4: a borrowed tensor may not be used after its drop
// (DROPPED); the origin of a mutable borrow may not be used until the drop
// (BORROWED); neither side of a read-only borrow may be mutated; a tensor
// borrowed read-only may not be borrowed mutably; nothing reads a borrowed
// tensor after its borrow_last_use. A view of the borrowed tensor
// (`aten::detach`, a slice, ...) is the same memory: its uses count as the
// tensor's -- once the borrow is dropped the origin's stream may free or
// reuse that memory, which on a GPU the caching allocator hands to the next
// kernel of that stream at once.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Analysis/TensorEffects.h"
#include "monarch/Compiler/Transforms/Passes.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/IR/Diagnostics.h"

namespace monarch {
#define GEN_PASS_DEF_VERIFYBORROWS
#include "monarch/Compiler/Transforms/Passes.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;

namespace {

/// True when `user` writes the tensor it gets as operand `operandNumber`.
bool mutatesOperand(Operation *user, unsigned operandNumber) {
  if (auto reduce = dyn_cast<ReduceOp>(user))
    return (reduce.getInplace() && operandNumber == 0) ||
           (reduce.getOut() && operandNumber == 1);
  if (auto start = dyn_cast<ReduceStartOp>(user))
    return (start.getInplace() && operandNumber == 0) ||
           (start.getOut() && operandNumber == 1);
  if (auto aten = dyn_cast<AtenOp>(user)) {
    // In-place ATen ops end in `_` and write their first tensor (`self`).
    StringRef name = aten.getSchema();
    name = name.substr(0, name.find('.'));
    return name.ends_with("_") && !name.ends_with("__") && operandNumber == 0 &&
           !aten.getTensors().empty();
  }
  return false;
}

std::string streamName(StringRef stream) {
  if (stream.empty())
    return "the default stream";
  return "stream \"" + stream.str() + "\"";
}

struct BorrowInterval {
  BorrowOp borrow;
  Operation *drop = nullptr; // In the borrow's block; null: to block end.
};

/// The ancestor of `op` in `block`, or null.
Operation *inBlock(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

/// Strictly after `borrow` and before `drop` (or to the end of the block).
bool within(const BorrowInterval &iv, Operation *op) {
  return iv.borrow->isBeforeInBlock(op) &&
         (!iv.drop || op->isBeforeInBlock(iv.drop));
}

struct VerifyBorrowsPass
    : public monarch::impl::VerifyBorrowsBase<VerifyBorrowsPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation()->walk([&](BorrowOp borrow) {
      if (failed(check(borrow)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
    markAllAnalysesPreserved();
  }

  LogicalResult check(BorrowOp borrow) {
    Block *block = borrow->getBlock();
    StringRef stream = borrow.getResult().getType().getStreamName();
    BorrowInterval iv{borrow};
    LogicalResult result = success();

    // Borrow events: order, and at most one drop.
    Operation *firstUse = nullptr, *lastUse = nullptr;
    SmallVector<Operation *> events;
    for (Operation *user : borrow.getBorrow().getUsers())
      if (Operation *op = inBlock(block, user))
        events.push_back(op);
    llvm::sort(events, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *op : events) {
      if (iv.drop) {
        InFlightDiagnostic diag =
            op->emitError("borrow event after the borrow was dropped");
        diag.attachNote(iv.drop->getLoc()) << "dropped here";
        result = failure();
        continue;
      }
      if (isa<BorrowDropOp>(op))
        iv.drop = op;
      else if (isa<BorrowFirstUseOp>(op))
        firstUse = op;
      else if (isa<BorrowLastUseOp>(op))
        lastUse = op;
    }
    if (firstUse && lastUse && lastUse->isBeforeInBlock(firstUse)) {
      InFlightDiagnostic diag = firstUse->emitError(
          "borrow_first_use after the borrow's borrow_last_use");
      diag.attachNote(lastUse->getLoc()) << "last use recorded here";
      result = failure();
    }

    // The borrowed tensor: not after the drop; not mutated if read-only.
    for (OpOperand &use : borrow.getResult().getUses()) {
      Operation *op = inBlock(block, use.getOwner());
      if (!op)
        continue;
      if (iv.drop && iv.drop->isBeforeInBlock(op)) {
        InFlightDiagnostic diag =
            use.getOwner()->emitError("DROPPED: operand #")
            << use.getOperandNumber()
            << " is a borrowed tensor used after its "
               "borrow was dropped";
        diag.attachNote(iv.drop->getLoc()) << "dropped here";
        result = failure();
      } else if (!borrow.getIsMutable() &&
                 mutatesOperand(use.getOwner(), use.getOperandNumber())) {
        InFlightDiagnostic diag =
            use.getOwner()->emitError("operand #")
            << use.getOperandNumber()
            << " would be mutated, but it is borrowed read-only from "
            << streamName(borrow.getInput().getType().getStreamName());
        diag.attachNote(borrow.getLoc()) << "borrowed here";
        result = failure();
      }
    }

    // Views of the borrowed tensor, transitively: their uses read its memory.
    SmallVector<Value> views;
    SmallVector<Value> work{borrow.getResult()};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        auto aten = dyn_cast<AtenOp>(user);
        if (!aten || !isViewSchema(aten.getSchema()) ||
            aten.getTensors().empty() || aten.getTensors()[0] != v)
          continue;
        for (Value r : aten->getResults())
          if (isa<DTensorType>(r.getType()) &&
              !llvm::is_contained(views, r)) {
            views.push_back(r);
            work.push_back(r);
          }
      }
    }
    for (Value view : views)
      for (OpOperand &use : view.getUses()) {
        Operation *op = inBlock(block, use.getOwner());
        if (!op || !iv.drop || !iv.drop->isBeforeInBlock(op))
          continue;
        InFlightDiagnostic diag =
            use.getOwner()->emitError("DROPPED: operand #")
            << use.getOperandNumber()
            << " is a view of a borrowed tensor used after its borrow was "
               "dropped (a view shares the tensor's memory)";
        diag.attachNote(iv.drop->getLoc()) << "dropped here";
        diag.attachNote(borrow.getLoc()) << "borrowed here";
        result = failure();
      }
    // Nothing reads it once its stream said it was done with it.
    if (lastUse) {
      SmallVector<Value> all{borrow.getResult()};
      llvm::append_range(all, views);
      for (Value v : all)
        for (OpOperand &use : v.getUses()) {
          Operation *op = inBlock(block, use.getOwner());
          if (!op || !lastUse->isBeforeInBlock(op) ||
              (iv.drop && iv.drop->isBeforeInBlock(op)))
            continue; // after the drop: reported above
          InFlightDiagnostic diag =
              use.getOwner()->emitError("operand #")
              << use.getOperandNumber() << " is "
              << (v == borrow.getResult() ? "a borrowed tensor"
                                          : "a view of a borrowed tensor")
              << " used after its borrow_last_use";
          diag.attachNote(lastUse->getLoc()) << "last use recorded here";
          result = failure();
        }
    }

    // The origin, while the borrow lasts.
    for (OpOperand &use : borrow.getInput().getUses()) {
      Operation *op = inBlock(block, use.getOwner());
      if (!op || op == borrow || !within(iv, op))
        continue;
      Operation *owner = use.getOwner();
      if (borrow.getIsMutable()) {
        InFlightDiagnostic diag = owner->emitError("BORROWED: operand #")
                                  << use.getOperandNumber()
                                  << " is mutably borrowed by "
                                  << streamName(stream) << " until its drop";
        diag.attachNote(borrow.getLoc()) << "borrowed here";
        result = failure();
        continue;
      }
      if (auto other = dyn_cast<BorrowOp>(owner);
          other && other.getIsMutable()) {
        InFlightDiagnostic diag =
            owner->emitError(
                "cannot borrow mutably a tensor that is borrowed read-only by ")
            << streamName(stream);
        diag.attachNote(borrow.getLoc()) << "borrowed here";
        result = failure();
        continue;
      }
      if (mutatesOperand(owner, use.getOperandNumber())) {
        InFlightDiagnostic diag = owner->emitError("operand #")
                                  << use.getOperandNumber()
                                  << " would be mutated, but it is borrowed "
                                     "read-only by "
                                  << streamName(stream);
        diag.attachNote(borrow.getLoc()) << "borrowed here";
        result = failure();
      }
    }
    return result;
  }
};
} // namespace
