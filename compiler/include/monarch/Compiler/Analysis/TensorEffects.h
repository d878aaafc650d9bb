//===- TensorEffects.h - Which tensors an op reads and writes ---*- C++ -*-===//
//
// The storage model shared by the scheduling, stream and simulation passes:
// an in-place ATen op (name ending in `_`) writes its first tensor and
// returns it; `reduce[_start] ... inplace` writes its input, `into %o` writes
// %o; the wait of such a start, a borrow's result and the result of a view op
// (`aten::t`, `aten::view`, ...) alias that storage.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_ANALYSIS_TENSOREFFECTS_H
#define MONARCH_COMPILER_ANALYSIS_TENSOREFFECTS_H

#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

namespace monarch {

/// True for an ATen schema of an in-place op (`aten::add_.Tensor`).
inline bool isInPlaceSchema(llvm::StringRef schema) {
  llvm::StringRef name = schema.substr(0, schema.find('.'));
  return name.ends_with("_") && !name.ends_with("__");
}

/// True for an ATen schema whose result may share its first input's storage
/// (views and aliases): a later in-place write of the input must wait for
/// every reader of the view (a weight's `aten::t` read by a backward matmul
/// before the optimizer's `sub_` of the weight).
inline bool isViewSchema(llvm::StringRef schema) {
  llvm::StringRef name = schema.substr(0, schema.find('.'));
  return llvm::is_contained({"aten::t",
                             "aten::view",
                             "aten::_reshape_alias",
                             "aten::reshape",
                             "aten::expand",
                             "aten::expand_as",
                             "aten::slice",
                             "aten::select",
                             "aten::transpose",
                             "aten::permute",
                             "aten::detach",
                             "aten::alias",
                             "aten::as_strided",
                             "aten::unsqueeze",
                             "aten::squeeze",
                             "aten::split",
                             "aten::split_with_sizes",
                             "aten::chunk",
                             "aten::unbind",
                             "aten::narrow",
                             "aten::diagonal",
                             "aten::unfold",
                             "aten::view_as",
                             "aten::flatten",
                             "aten::unflatten",
                             "aten::_unsafe_view",
                             "aten::numpy_T",
                             "aten::mT",
                             "aten::movedim",
                             "aten::lift_fresh",
                             "aten::contiguous",
                             "aten::real",
                             "aten::imag"},
                            name);
}

/// The operand an op writes in place, if any.
inline mlir::Value mutatedOperand(mlir::Operation *op) {
  if (auto aten = llvm::dyn_cast<AtenOp>(op)) {
    if (isInPlaceSchema(aten.getSchema()) && !aten.getTensors().empty())
      return aten.getTensors()[0];
    return {};
  }
  auto reduceLike = [](auto r) -> mlir::Value {
    if (r.getOut())
      return r.getOut();
    return r.getInplace() ? r.getInput() : mlir::Value();
  };
  if (auto r = llvm::dyn_cast<ReduceOp>(op))
    return reduceLike(r);
  if (auto r = llvm::dyn_cast<ReduceStartOp>(op))
    return reduceLike(r);
  if (auto w = llvm::dyn_cast<WaitOp>(op))
    if (auto r = w.getToken().getDefiningOp<ReduceStartOp>())
      return reduceLike(r);
  return {};
}

/// The value whose storage `v` is: follows in-place results, waits of
/// in-place collectives, borrows and views back to the tensor that owns it.
inline mlir::Value storageRoot(mlir::Value v) {
  while (mlir::Operation *def = v.getDefiningOp()) {
    mlir::Value next;
    if (auto borrow = llvm::dyn_cast<BorrowOp>(def))
      next = v == borrow.getResult() ? borrow.getInput() : mlir::Value();
    else if (llvm::isa<AtenOp, ReduceOp, WaitOp>(def) && v == def->getResult(0))
      next = mutatedOperand(def);
    if (!next)
      if (auto aten = llvm::dyn_cast<AtenOp>(def))
        if (isViewSchema(aten.getSchema()) && !aten.getTensors().empty())
          next = aten.getTensors()[0];
    if (!next)
      break;
    v = next;
  }
  return v;
}

/// True when `op` or an op nested in it has an operand whose storage is
/// `root` (see storageRoot).
inline bool usesStorage(mlir::Operation *op, mlir::Value root) {
  mlir::WalkResult r = op->walk([&](mlir::Operation *nested) {
    for (mlir::Value v : nested->getOperands())
      if (llvm::isa<DTensorType>(v.getType()) && storageRoot(v) == root)
        return mlir::WalkResult::interrupt();
    return mlir::WalkResult::advance();
  });
  return r.wasInterrupted();
}

} // namespace monarch

#endif // MONARCH_COMPILER_ANALYSIS_TENSOREFFECTS_H
