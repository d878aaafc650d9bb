//===- VerifyBorrows.cpp - Static checks of stream borrows ---------------===//
//
// DESIGN.md §6.4: a borrowed tensor may not be used after its drop
// (DROPPED); the origin of a mutable borrow may not be used until the drop
// (BORROWED); neither side of a read-only borrow may be mutated; a tensor
// borrowed read-only may not be borrowed mutably.
//
//===----------------------------------------------------------------------===//

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
