// RUN: monarch-opt %s --split-input-file --monarch-verify-borrows --verify-diagnostics

// A well-formed borrow: no diagnostics.
func.func @ok(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>> {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_first_use %b
  // Both streams may read a read-only borrow.
  %r = monarch.reduce %t2 (gpu) sum : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  %n = monarch.aten "aten::neg"(%t) on %m : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  monarch.borrow_last_use %b
  monarch.borrow_drop %b
  // After the drop the origin may be mutated again.
  %w = monarch.aten "aten::add_.Tensor"(%t, %n, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<4xf32, <gpu = 8>>, !monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  return %w : !monarch.tensor<4xf32, <gpu = 8>>
}

// -----

func.func @dropped(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-note @+1 {{dropped here}}
  monarch.borrow_drop %b
  // expected-error @+1 {{DROPPED: operand #0 is a borrowed tensor used after its borrow was dropped}}
  %r = monarch.reduce %t2 (gpu) sum : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  return
}

// -----

func.func @borrowed(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-note @+1 {{borrowed here}}
  %t2, %b = monarch.borrow %t to %s mutable : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-error @+1 {{BORROWED: operand #0 is mutably borrowed by stream "comm" until its drop}}
  %n = monarch.aten "aten::neg"(%t) on %m : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  monarch.borrow_drop %b
  // After the drop the origin is usable again.
  %k = monarch.aten "aten::neg"(%t) on %m : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  return
}

// -----

// A use in a loop body counts at the loop's position.
func.func @borrowed_in_loop(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>, %lb: index, %ub: index, %st: index) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-note @+1 {{borrowed here}}
  %t2, %b = monarch.borrow %t to %s mutable : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  scf.for %i = %lb to %ub step %st {
    // expected-error @+1 {{BORROWED: operand #0 is mutably borrowed by stream "comm" until its drop}}
    monarch.aten "aten::_print"(%t) on %m : (!monarch.tensor<4xf32, <gpu = 8>>) -> ()
  }
  monarch.borrow_drop %b
  return
}

// -----

func.func @mutate_read_only_origin(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-note @+1 {{borrowed here}}
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-error @+1 {{operand #0 would be mutated, but it is borrowed read-only by stream "comm"}}
  %w = monarch.aten "aten::mul_.Scalar"(%t, #monarch.scalar<2 : i64>) on %m : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  monarch.borrow_drop %b
  return
}

// -----

func.func @mutate_read_only_borrowed(%t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-note @+1 {{borrowed here}}
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-error @+1 {{operand #0 would be mutated, but it is borrowed read-only from the default stream}}
  %r = monarch.reduce %t2 (gpu) sum inplace : !monarch.tensor<4xf32, <gpu = 8>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_drop %b
  return
}

// -----

func.func @mutable_after_read_only(%t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %s2 = monarch.stream_create : !monarch.stream<"other">
  // expected-note @+1 {{borrowed here}}
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-error @+1 {{cannot borrow mutably a tensor that is borrowed read-only by stream "comm"}}
  %t3, %b2 = monarch.borrow %t to %s2 mutable : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "other">
  monarch.borrow_drop %b2
  monarch.borrow_drop %b
  return
}

// -----

func.func @events_out_of_order(%t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-note @+1 {{last use recorded here}}
  monarch.borrow_last_use %b
  // expected-error @+1 {{borrow_first_use after the borrow's borrow_last_use}}
  monarch.borrow_first_use %b
  monarch.borrow_drop %b
  return
}

// -----

func.func @double_drop(%t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-note @+1 {{dropped here}}
  monarch.borrow_drop %b
  // expected-error @+1 {{borrow event after the borrow was dropped}}
  monarch.borrow_drop %b
  return
}

// -----

// A view of the borrowed tensor is its memory: using the view after the drop
// is using the tensor (on a GPU the origin's stream may already have reused
// it), and so is reading either after the borrow's last use.
func.func @view_after_drop(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-note @+1 {{borrowed here}}
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_first_use %b
  %v = monarch.aten "aten::detach"(%t2) on %m : (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  %w = monarch.aten "aten::detach"(%v) on %m : (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  // expected-note @+1 {{dropped here}}
  monarch.borrow_drop %b
  // expected-error @+1 {{DROPPED: operand #0 is a view of a borrowed tensor used after its borrow was dropped (a view shares the tensor's memory)}}
  %r = monarch.aten "aten::neg"(%w) on %m : (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  return
}

// -----

func.func @used_after_last_use(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_first_use %b
  // expected-note @+1 {{last use recorded here}}
  monarch.borrow_last_use %b
  // expected-error @+1 {{operand #0 is a borrowed tensor used after its borrow_last_use}}
  %r = monarch.aten "aten::neg"(%t2) on %m : (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_drop %b
  return
}

// -----

func.func @view_used_after_last_use(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 8>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 8>> -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_first_use %b
  %v = monarch.aten "aten::slice.Tensor"(%t2, 0 : i64, 0 : i64, 2 : i64, 1 : i64) on %m : (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<2xf32, <gpu = 8>, stream = "comm">
  // expected-note @+1 {{last use recorded here}}
  monarch.borrow_last_use %b
  // expected-error @+1 {{operand #0 is a view of a borrowed tensor used after its borrow_last_use}}
  %q = monarch.aten "aten::neg"(%v) on %m : (!monarch.tensor<2xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<2xf32, <gpu = 8>, stream = "comm">
  monarch.borrow_drop %b
  return
}
