// RUN: monarch-opt %s --split-input-file --verify-diagnostics

// One case per static error of DESIGN.md §6 (and per verifier rule).

// expected-error @+1 {{duplicate mesh dimension 'gpu'}}
func.func @mesh_duplicate_dim(%m: !monarch.mesh<gpu = 2, gpu = 4>)

// -----

// expected-error @+1 {{mesh dimension 'gpu' must have a positive size, got 0}}
func.func @mesh_zero_size(%m: !monarch.mesh<gpu = 0>)

// -----

// expected-error @+1 {{a mesh holds at most 1048576 procs; dimension 'b' brings it past that}}
func.func @mesh_too_many_procs(%m: !monarch.mesh<a = 65536, b = 32768>)

// -----

// One dim past the bound (a million GPUs on one "host" dim).
// expected-error @+1 {{a mesh holds at most 1048576 procs; dimension 'gpu' brings it past that}}
func.func @mesh_one_dim_too_large(%m: !monarch.mesh<gpu = 2000000>)

// -----

// Sizes whose product overflows int64 are refused, not wrapped around.
// expected-error @+1 {{a mesh holds at most 1048576 procs; dimension 'b' brings it past that}}
func.func @mesh_overflowing_product(%m: !monarch.mesh<a = 1048576, b = 9223372036854775807>)

// -----

// The largest mesh verifies.
func.func @mesh_at_the_bound(%m: !monarch.mesh<a = 1024, b = 1024>) {
  return
}

// -----

func.func @rename_unknown_dim(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{invalid rename: KeyError: mesh has no dimension 'cpu'}}
  %r = monarch.rename %m (cpu -> c) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @rename_to_existing_name(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{invalid rename: ValueError: duplicate dimension name 'gpu'}}
  %r = monarch.rename %m (host -> gpu) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @split_not_dividing(%m: !monarch.mesh<host = 60, gpu = 24>) {
  // expected-error @+1 {{invalid split: ValueError}}
  %s = monarch.split %m (host -> [dp, pp], pp = 7) : !monarch.mesh<host = 60, gpu = 24>
  return
}

// -----

func.func @split_two_unknown_sizes(%m: !monarch.mesh<host = 60, gpu = 24>) {
  // expected-error @+1 {{invalid split: ValueError: cannot infer the sizes of both 'dp' and 'pp'}}
  %s = monarch.split %m (host -> [dp, pp]) : !monarch.mesh<host = 60, gpu = 24>
  return
}

// -----

func.func @split_unused_size(%m: !monarch.mesh<host = 60, gpu = 24>) {
  // expected-error @+1 {{invalid split: ValueError: size given for 'zz'}}
  %s = monarch.split %m (host -> [dp, pp], pp = 4, zz = 2) : !monarch.mesh<host = 60, gpu = 24>
  return
}

// -----

func.func @split_duplicate_names(%m: !monarch.mesh<host = 60, gpu = 24>) {
  // expected-error @+1 {{invalid split: ValueError: duplicate dimension name 'dp'}}
  %s = monarch.split %m (host -> [dp, dp], dp = 4) : !monarch.mesh<host = 60, gpu = 24>
  return
}

// -----

func.func @slice_index_out_of_range(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{invalid slice: IndexError: index 2}}
  %s = monarch.slice %m (host = 2) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @slice_unknown_dim(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{invalid slice: KeyError: mesh has no dimension 'tp'}}
  %s = monarch.slice %m (tp = 0:1) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @slice_bad_step(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{slice step must be positive}}
  %s = monarch.slice %m (gpu = 0:4:0) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @flatten_not_dense() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %s = monarch.slice %m (gpu = ::2) : !monarch.mesh<host = 2, gpu = 4>
  // expected-error @+1 {{invalid flatten: ValueError: cannot flatten mesh}}
  %f = monarch.flatten %s -> ranks : !monarch.mesh<host = 2, gpu = 2>
  return
}

// -----

func.func @view_of_view(%m: !monarch.mesh<host = 2, gpu = 4>) {
  %s = monarch.slice %m (host = 0) : !monarch.mesh<host = 2, gpu = 4>
  // expected-error @+1 {{source must be a root mesh (spawn_procs or a block argument), not the result of 'monarch.slice'}}
  %v = monarch.view %s offset 0 (gpu = 4:1) : !monarch.mesh<gpu = 4>
  return
}

// -----

func.func @view_out_of_root(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{view reaches rank 10 but the root mesh has 8 procs}}
  %v = monarch.view %m offset 4 (gpu = 4:2) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @view_bad_layout(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{invalid view: ValueError: duplicate mesh dimension 'a'}}
  %v = monarch.view %m offset 0 (a = 2:1, a = 2:2) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @view_overflow(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // The mesh library refuses a view reaching past the largest mesh before
  // any arithmetic on its ranks could overflow.
  // expected-error @+1 {{invalid view: ValueError: mesh view (offset 9223372036854775807, {gpu=2}) reaches past rank 1048575, the largest a mesh may hold}}
  %v = monarch.view %m offset 9223372036854775807 (gpu = 2:1) : !monarch.mesh<host = 2, gpu = 4>
  return
}

// -----

func.func @aten_bad_schema(%m: !monarch.mesh<gpu = 8>) {
  // expected-error @+1 {{schema must be 'namespace::name[.overload]', got 'add'}}
  monarch.aten "add"() on %m : () -> () in !monarch.mesh<gpu = 8>
  return
}

// -----

func.func @aten_bad_argument(%m: !monarch.mesh<gpu = 8>) {
  // expected-error @+1 {{argument #0 is not a kind ATen accepts: unit}}
  monarch.aten "aten::foo"(unit) on %m : () -> () in !monarch.mesh<gpu = 8>
  return
}

// -----

func.func @aten_no_mesh_type(%m: !monarch.mesh<gpu = 8>) {
  // expected-error @+1 {{expected `in !monarch.mesh<...>`}}
  monarch.aten "aten::foo"() on %m : () -> ()
  return
}

// -----

func.func @wrong_mesh_type(%m: !monarch.mesh<gpu = 8>, %t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{WRONG_MESH: operand #0 lives on '!monarch.mesh<gpu = 4>' but the op runs on '!monarch.mesh<gpu = 8>'}}
  %0 = monarch.aten "aten::neg"(%t) on %m : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  return
}

// -----

func.func @wrong_mesh_result(%m: !monarch.mesh<gpu = 8>) {
  // expected-error @+1 {{WRONG_MESH: result #0 lives on '!monarch.mesh<gpu = 4>' but the op runs on '!monarch.mesh<gpu = 8>'}}
  %0 = monarch.aten "aten::ones"(array<i64: 4>) on %m : () -> !monarch.tensor<4xf32, <gpu = 4>> in !monarch.mesh<gpu = 8>
  return
}

// -----

// Two meshes of the same shape are still different meshes.
func.func @wrong_mesh_layout() {
  %a = monarch.spawn_procs : !monarch.mesh<gpu = 4>
  %b = monarch.spawn_procs : !monarch.mesh<gpu = 4>
  %t = monarch.aten "aten::ones"(array<i64: 4>) on %a : () -> !monarch.tensor<4xf32, <gpu = 4>>
  // expected-error @+1 {{WRONG_MESH: operand #0 was created on mesh [offset=0 gpu=4:1] but the op runs on mesh [offset=0 gpu=4:1]}}
  %u = monarch.aten "aten::neg"(%t) on %b : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

// Same root, different slices of it.
func.func @wrong_mesh_slice() {
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  %h0 = monarch.slice %m (host = 0) : !monarch.mesh<host = 2, gpu = 4>
  %h1 = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  %t = monarch.aten "aten::ones"(array<i64: 4>) on %h0 : () -> !monarch.tensor<4xf32, <gpu = 4>>
  // expected-error @+1 {{WRONG_MESH: operand #0 was created on mesh [offset=0 gpu=4:1] but the op runs on mesh [offset=4 gpu=4:1]}}
  %u = monarch.aten "aten::neg"(%t) on %h1 : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

// The mesh of a tensor is followed through collectives and waits.
func.func @wrong_mesh_after_reduce() {
  %a = monarch.spawn_procs : !monarch.mesh<gpu = 4>
  %b = monarch.spawn_procs : !monarch.mesh<gpu = 4>
  %t = monarch.aten "aten::ones"(array<i64: 4>) on %a : () -> !monarch.tensor<4xf32, <gpu = 4>>
  %tok = monarch.reduce_start %t (gpu) sum : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <gpu = 4>>>
  %r = monarch.wait %tok : !monarch.async<!monarch.tensor<4xf32, <gpu = 4>>>
  %s = monarch.reduce %r (gpu) max : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  // expected-error @+1 {{WRONG_MESH: operand #0 was created on mesh}}
  %u = monarch.aten "aten::neg"(%s) on %b : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @wrong_stream(%m: !monarch.mesh<gpu = 8>, %a: !monarch.tensor<4xf32, <gpu = 8>>, %b: !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) {
  // expected-error @+1 {{WRONG_STREAM: operand #1 is owned by stream "comm" but the op runs on the default stream (from result #0)}}
  %0 = monarch.aten "aten::add.Tensor"(%a, %b, #monarch.scalar<1 : i64>) on %m : (!monarch.tensor<4xf32, <gpu = 8>>, !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> !monarch.tensor<4xf32, <gpu = 8>>
  return
}

// -----

func.func @call_function_wrong_stream(%m: !monarch.mesh<gpu = 8>, %a: !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) {
  // expected-error @+1 {{WRONG_STREAM: result #1 is owned by the default stream but result #0 by stream "comm"}}
  %0:2 = monarch.call_function "pkg.fn"(%a) on %m : (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">) -> (!monarch.tensor<4xf32, <gpu = 8>, stream = "comm">, !monarch.tensor<4xf32, <gpu = 8>>)
  return
}

// -----

func.func @rank_unknown_dim(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{rank over unknown mesh dim 'tp' (the mesh has host, gpu)}}
  %r = monarch.rank %m (tp) : !monarch.tensor<i64, <host = 2, gpu = 4>>
  return
}

// -----

func.func @rank_result_type(%m: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{result must be a 0-d i64 tensor, got 'tensor<f32>'}}
  %r = monarch.rank %m (gpu) : !monarch.tensor<f32, <gpu = 4>>
  return
}

// -----

func.func @index_tensor_result_type(%m: !monarch.mesh<gpu = 4>, %i: index) {
  // expected-error @+1 {{result must be a 0-d i64 tensor, got 'tensor<2xi64>'}}
  %t = monarch.index_tensor %i on %m : !monarch.tensor<2xi64, <gpu = 4>>
  return
}

// -----

func.func @index_tensor_element_type(%m: !monarch.mesh<gpu = 4>, %i: index) {
  // expected-error @+1 {{result must be a 0-d i64 tensor, got 'tensor<i32>'}}
  %t = monarch.index_tensor %i on %m : !monarch.tensor<i32, <gpu = 4>>
  return
}

// -----

func.func @index_tensor_not_an_index(%m: !monarch.mesh<gpu = 4>, %i: i64) {
  // expected-error @+1 {{operand #0 must be index, but got 'i64'}}
  %t = "monarch.index_tensor"(%i, %m) : (i64, !monarch.mesh<gpu = 4>) -> !monarch.tensor<i64, <gpu = 4>>
  return
}

// -----

func.func @index_tensor_wrong_mesh(%m: !monarch.mesh<gpu = 4>, %i: index) {
  // expected-error @+1 {{failed to verify that mesh is the result's mesh}}
  %t = "monarch.index_tensor"(%i, %m) : (index, !monarch.mesh<gpu = 4>) -> !monarch.tensor<i64, <gpu = 2>>
  return
}

// -----

func.func @reduce_unknown_dim(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{reduce over unknown mesh dim 'tp' (the mesh has host, gpu)}}
  %r = monarch.reduce %t (tp) sum : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  return
}

// -----

func.func @reduce_repeated_dim(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{reduce names mesh dim 'gpu' more than once}}
  %r = monarch.reduce %t (gpu, gpu) sum : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  return
}

// -----

func.func @reduce_stack_several_dims(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{reduce with stack over several dims (host, gpu) is not supported; reduce over one dim}}
  %r = monarch.reduce %t (host, gpu) stack : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<8x4xf32, <host = 2, gpu = 4>>
  return
}

// -----

// `()` means every dim: several dims.
func.func @reduce_scatter_all_dims(%t: !monarch.tensor<8xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{reduce with scatter over several dims (host, gpu) is not supported; reduce over one dim}}
  %r = monarch.reduce %t () sum scatter : !monarch.tensor<8xf32, <host = 2, gpu = 4>> -> !monarch.tensor<f32, <host = 2, gpu = 4>>
  return
}

// -----

func.func @reduce_scatter_leading_size(%t: !monarch.tensor<6x2xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{scatter over 'gpu' needs the leading size to equal the group size 4, got 6}}
  %r = monarch.reduce %t (gpu) sum scatter : !monarch.tensor<6x2xf32, <host = 2, gpu = 4>> -> !monarch.tensor<2xf32, <host = 2, gpu = 4>>
  return
}

// -----

func.func @reduce_inplace_scatter(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{in-place reduce cannot scatter}}
  %r = monarch.reduce %t (gpu) sum scatter inplace : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<f32, <gpu = 4>>
  return
}

// -----

func.func @reduce_wrong_out(%t: !monarch.tensor<4xf32, <gpu = 4>>, %o: !monarch.tensor<8xf32, <gpu = 4>>) {
  // expected-error @+1 {{`into` tensor has type '!monarch.tensor<8xf32, <gpu = 4>>' but the reduce produces '!monarch.tensor<4xf32, <gpu = 4>>'}}
  %r = monarch.reduce %t (gpu) sum into %o : !monarch.tensor<4xf32, <gpu = 4>>, !monarch.tensor<8xf32, <gpu = 4>> -> !monarch.tensor<8xf32, <gpu = 4>>
  return
}

// -----

func.func @reduce_wrong_result(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{result type '!monarch.tensor<4xf32, <gpu = 4>>' does not match the reduce's '!monarch.tensor<4x4xf32, <gpu = 4>>'}}
  %r = monarch.reduce %t (gpu) stack : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @reduce_start_wrong_token(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{token type '!monarch.async<!monarch.tensor<4xf32, <gpu = 4>>>' does not match the reduce's '!monarch.tensor<f32, <gpu = 4>>'}}
  %r = monarch.reduce_start %t (gpu) sum scatter : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <gpu = 4>>>
  return
}

// -----

func.func @to_mesh_missing_dim(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>, %d: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{to_mesh between incompatible meshes: source dim 'host' is not in the destination '!monarch.mesh<gpu = 4>'}}
  %r = monarch.to_mesh %t to %d : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @to_mesh_size_mismatch(%t: !monarch.tensor<4xf32, <gpu = 4>>, %d: !monarch.mesh<gpu = 8>) {
  // expected-error @+1 {{to_mesh between incompatible meshes: source dim 'gpu' has size 4 but size 8 in the destination}}
  %r = monarch.to_mesh %t to %d : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 8>>
  return
}

// -----

func.func @to_mesh_start_size_mismatch(%t: !monarch.tensor<4xf32, <gpu = 4>>, %d: !monarch.mesh<gpu = 8>) {
  // expected-error @+1 {{to_mesh between incompatible meshes: source dim 'gpu' has size 4 but size 8 in the destination}}
  %r = monarch.to_mesh_start %t to %d : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>
  return
}

// -----

func.func @to_mesh_start_not_tensor(%t: !monarch.tensor<4xf32, <gpu = 4>>, %d: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{dest is the mesh of the token's tensor}}
  %r = "monarch.to_mesh_start"(%t, %d) : (!monarch.tensor<4xf32, <gpu = 4>>, !monarch.mesh<gpu = 4>) -> !monarch.async<f32>
  return
}

// -----

func.func @slice_mesh_wrong_result(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{result type '!monarch.tensor<4xf32, <host = 2, gpu = 4>>' does not match the slice's '!monarch.tensor<4xf32, <gpu = 4>>'}}
  %r = monarch.slice_mesh %t (host = 0) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
  return
}

// -----

func.func @fetch_out_of_range(%t: !monarch.tensor<4xf32, <host = 2, gpu = 4>>) {
  // expected-error @+1 {{IndexError: coordinate 4 is out of range for dim 'gpu' of size 4}}
  %f = monarch.fetch_shard %t at (gpu = 4) : !monarch.tensor<4xf32, <host = 2, gpu = 4>> -> !monarch.host<tensor<4xf32>>
  return
}

// -----

func.func @fetch_unknown_dim(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{fetch over unknown mesh dim 'host' (the mesh has gpu)}}
  %f = monarch.inspect %t at (host = 0) : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.host<tensor<4xf32>>
  return
}

// -----

func.func @fetch_wrong_type(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{fetched value has type 'tensor<4xf16>' but the shard is 'tensor<4xf32>'}}
  %f = monarch.fetch_shard %t : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.host<tensor<4xf16>>
  return
}

// -----

func.func @borrow_same_stream(%t: !monarch.tensor<4xf32, <gpu = 4>, stream = "comm">) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-error @+1 {{cannot borrow a tensor onto stream "comm", which already owns it}}
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 4>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 4>, stream = "comm">
  return
}

// -----

func.func @borrow_changes_type(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  %s = monarch.stream_create : !monarch.stream<"comm">
  // expected-error @+1 {{borrowed tensor must have type '!monarch.tensor<4xf32, <gpu = 4>, stream = "comm">', got '!monarch.tensor<8xf32, <gpu = 4>, stream = "comm">'}}
  %t2, %b = monarch.borrow %t to %s : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<8xf32, <gpu = 4>, stream = "comm">
  return
}

// -----

func.func @call_one_many_actors(%m: !monarch.mesh<gpu = 4>) {
  %a = monarch.spawn_actor "counter" on %m : !monarch.actor<"Counter", <gpu = 4>>
  // expected-error @+1 {{call_one needs a mesh of one actor, this one has 4}}
  %v = monarch.endpoint_call %a "value" call_one() : !monarch.actor<"Counter", <gpu = 4>>, () -> !monarch.host<i64>
  return
}

// -----

func.func @broadcast_results(%m: !monarch.mesh<gpu = 4>) {
  %a = monarch.spawn_actor "counter" on %m : !monarch.actor<"Counter", <gpu = 4>>
  // expected-error @+1 {{broadcast returns nothing}}
  %v = monarch.endpoint_call %a "incr" broadcast() : !monarch.actor<"Counter", <gpu = 4>>, () -> !monarch.host<i64>
  return
}

// -----

func.func @call_result_not_host(%m: !monarch.mesh<gpu = 4>) {
  %a = monarch.spawn_actor "counter" on %m : !monarch.actor<"Counter", <gpu = 4>>
  // expected-error @+1 {{call result #0 must be a !monarch.host value, got 'i64'}}
  %v = monarch.endpoint_call %a "value" call() : !monarch.actor<"Counter", <gpu = 4>>, () -> i64
  return
}

// -----

func.func @rref_wrong_mesh(%m: !monarch.mesh<gpu = 4>, %x: !monarch.tensor<4xf32, <gpu = 4>>) {
  %a = monarch.spawn_actor "trainer" on %m : !monarch.actor<"Trainer", <gpu = 4>>
  // expected-error @+1 {{WRONG_MESH: rref result #0 lives on '!monarch.mesh<gpu = 8>' but the actors on '!monarch.mesh<gpu = 4>'}}
  %g = monarch.endpoint_call %a "grad" rref(%x) : !monarch.actor<"Trainer", <gpu = 4>>, (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 8>>
  return
}

// -----

func.func @endpoint_wrong_mesh(%m: !monarch.mesh<gpu = 4>, %x: !monarch.tensor<4xf32, <gpu = 8>>) {
  %a = monarch.spawn_actor "trainer" on %m : !monarch.actor<"Trainer", <gpu = 4>>
  // expected-error @+1 {{WRONG_MESH: argument #0 lives on '!monarch.mesh<gpu = 8>' but the actors on '!monarch.mesh<gpu = 4>'}}
  monarch.endpoint_call %a "log" broadcast(%x) : !monarch.actor<"Trainer", <gpu = 4>>, (!monarch.tensor<4xf32, <gpu = 8>>) -> ()
  return
}

// -----

func.func @bad_scalar(%m: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{#monarch.scalar holds an integer, float or bool, got "x"}}
  monarch.aten "aten::foo"(#monarch.scalar<"x">) on %m : () -> () in !monarch.mesh<gpu = 4>
  return
}

// -----

func.func @rename_malformed(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+1 {{needs as many new names as old ones}}
  %r = "monarch.rename"(%m) <{from = ["host", "gpu"], to = ["h"]}> : (!monarch.mesh<host = 2, gpu = 4>) -> !monarch.mesh<h = 2, gpu = 4>
  return
}

// -----

func.func @split_malformed(%m: !monarch.mesh<host = 4, gpu = 4>) {
  // expected-error @+1 {{malformed split specification}}
  %s = "monarch.split"(%m) <{from = ["host"], to = [["a", "b"]], size_names = ["a"], size_values = array<i64>}> : (!monarch.mesh<host = 4, gpu = 4>) -> !monarch.mesh<a = 2, b = 2, gpu = 4>
  return
}

// -----

func.func @slice_malformed(%m: !monarch.mesh<host = 2, gpu = 4>) {
  // expected-error @+2 {{invalid slice: ValueError: slice needs a start, stop and step per dim}}
  // expected-error @+1 {{'monarch.slice' op failed to infer returned types}}
  %s = "monarch.slice"(%m) <{dims = ["host"], starts = array<i64: 0, 1>, stops = array<i64: 1>, steps = array<i64: 1>}> : (!monarch.mesh<host = 2, gpu = 4>) -> !monarch.mesh<host = 1, gpu = 4>
  return
}

// -----

func.func @aten_placeholder_count(%m: !monarch.mesh<gpu = 4>, %t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{argument list names 2 tensor operands but the op has 1}}
  "monarch.aten"(%t, %m) <{schema = "aten::add.Tensor", args = [#monarch.operand, #monarch.operand]}> : (!monarch.tensor<4xf32, <gpu = 4>>, !monarch.mesh<gpu = 4>) -> ()
  return
}

// -----

func.func @call_function_no_name(%m: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{needs the name of a registered function}}
  monarch.call_function ""() on %m : () -> () in !monarch.mesh<gpu = 4>
  return
}

// -----

func.func @rank_no_dims(%m: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{needs at least one mesh dim}}
  %r = monarch.rank %m () : !monarch.tensor<i64, <gpu = 4>>
  return
}

// -----

func.func @reduce_inplace_into(%t: !monarch.tensor<4xf32, <gpu = 4>>, %o: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{in-place reduce cannot also write `into` a tensor}}
  %r = monarch.reduce %t (gpu) sum inplace into %o : !monarch.tensor<4xf32, <gpu = 4>>, !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @reduce_inplace_stack(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{in-place stack changes the shape to 'tensor<4x4xf32>'}}
  %r = monarch.reduce %t (gpu) stack inplace : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @reduce_scatter_scalar(%t: !monarch.tensor<f32, <gpu = 4>>) {
  // expected-error @+1 {{scatter needs a tensor of rank >= 1}}
  %r = monarch.reduce %t (gpu) sum scatter : !monarch.tensor<f32, <gpu = 4>> -> !monarch.tensor<f32, <gpu = 4>>
  return
}

// -----

func.func @to_mesh_wrong_stream(%t: !monarch.tensor<4xf32, <gpu = 4>, stream = "comm">, %d: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{WRONG_STREAM: input is owned by stream "comm" but the result by the default stream}}
  %r = monarch.to_mesh %t to %d : !monarch.tensor<4xf32, <gpu = 4>, stream = "comm"> -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @to_mesh_local_type(%t: !monarch.tensor<4xf32, <gpu = 4>>, %d: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{result's local type 'tensor<4xf16>' differs from the input's 'tensor<4xf32>'}}
  %r = monarch.to_mesh %t to %d : !monarch.tensor<4xf32, <gpu = 4>> -> !monarch.tensor<4xf16, <gpu = 4>>
  return
}

// -----

func.func @fetch_coords_malformed(%t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{needs one coordinate per dim}}
  %f = "monarch.fetch_shard"(%t) <{dims = ["gpu"], coords = array<i64>}> : (!monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.host<tensor<4xf32>>
  return
}

// -----

func.func @rank_wrong_mesh(%m: !monarch.mesh<gpu = 4>) {
  // expected-error @+1 {{mesh is the result's mesh}}
  %r = "monarch.rank"(%m) <{dims = ["gpu"]}> : (!monarch.mesh<gpu = 4>) -> !monarch.tensor<i64, <gpu = 8>>
  return
}

// -----

func.func @aten_list_too_long(%m: !monarch.mesh<gpu = 4>, %t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{argument #0 lists 9223372036854775807 tensors but the op has 1}}
  "monarch.aten"(%t, %m) <{schema = "aten::cat", args = [#monarch.operand_list<9223372036854775807>, 0 : i64]}> : (!monarch.tensor<4xf32, <gpu = 4>>, !monarch.mesh<gpu = 4>) -> ()
  return
}

// -----

func.func @aten_bad_list_entry(%m: !monarch.mesh<gpu = 4>, %t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{expected a tensor operand or #monarch.none in a tensor list}}
  %0 = monarch.aten "aten::index.Tensor"(%t, [%t, 1 : i64]) on %m : (!monarch.tensor<4xf32, <gpu = 4>>, !monarch.tensor<4xf32, <gpu = 4>>) -> !monarch.tensor<4xf32, <gpu = 4>>
  return
}

// -----

func.func @aten_optional_list_count(%m: !monarch.mesh<gpu = 4>, %t: !monarch.tensor<4xf32, <gpu = 4>>) {
  // expected-error @+1 {{argument list names 2 tensor operands but the op has 1}}
  "monarch.aten"(%t, %m) <{schema = "aten::index.Tensor", args = [#monarch.optional_operand_list<[true, false, true]>]}> : (!monarch.tensor<4xf32, <gpu = 4>>, !monarch.mesh<gpu = 4>) -> ()
  return
}
