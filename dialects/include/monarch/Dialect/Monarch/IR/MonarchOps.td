//===- MonarchOps.td - Ops of the monarch dialect ----------*- tablegen -*-===//
#ifndef MONARCH_OPS_TD
#define MONARCH_OPS_TD

include "monarch/Dialect/Monarch/IR/MonarchBase.td"
include "monarch/Dialect/Monarch/IR/MonarchTypes.td"
include "monarch/Dialect/Monarch/IR/MonarchAttrs.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Mesh ops
//===----------------------------------------------------------------------===//

def Monarch_SpawnProcsOp : Monarch_Op<"spawn_procs", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "spawn a root proc mesh";
  let description = [{
    Starts one process per coordinate of the result's shape, ranks in
    row-major order: `spawn_procs({"host": 2, "gpu": 4})` is

    ```mlir
    %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
    ```
  }];
  let results = (outs Monarch_AnyMesh:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

class Monarch_MeshViewOp<string mnemonic, list<Trait> traits = []>
    : Monarch_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let results = (outs Monarch_AnyMesh:$result);
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let hasVerifier = 1;
  code extraViewDecl = [{
    /// Applies this op to a view of its source (the layout arithmetic of
    /// DESIGN.md §6.1); the error names the rule that failed.
    ::monarch::mesh::Result<::monarch::mesh::MeshView>
    apply(const ::monarch::mesh::MeshView &source);
  }];
  let extraClassDeclaration = extraViewDecl;
}

def Monarch_RenameOp : Monarch_MeshViewOp<"rename"> {
  let summary = "rename dims of a mesh";
  let description = [{
    `mesh.rename(host="h")`; equal to a split of each dim into one new name.

    ```mlir
    %r = monarch.rename %m (host -> h) : !monarch.mesh<host = 2, gpu = 4>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$source, StrArrayAttr:$from,
                       StrArrayAttr:$to);
  let assemblyFormat = [{
    $source custom<Renames>($from, $to) attr-dict `:` qualified(type($source))
  }];
}

def Monarch_SplitOp : Monarch_MeshViewOp<"split"> {
  let summary = "split dims of a mesh into several";
  let description = [{
    `mesh.split(host=("dp", "pp"), gpu=("tp",), pp=4)`: each existing dim
    maps to new names (outermost first); other entries give sizes of new
    dims; at most one size per split dim is inferred.

    ```mlir
    %v = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 4)
        : !monarch.mesh<host = 60, gpu = 24>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$source, StrArrayAttr:$from,
                       TypedArrayAttrBase<StrArrayAttr, "array of name lists">:$to,
                       StrArrayAttr:$size_names,
                       DenseI64ArrayAttr:$size_values);
  let assemblyFormat = [{
    $source custom<Split>($from, $to, $size_names, $size_values) attr-dict
    `:` qualified(type($source))
  }];
}

def Monarch_SliceOp : Monarch_MeshViewOp<"slice"> {
  let summary = "slice a mesh by index or range along dims";
  let description = [{
    `mesh.slice(host=1, gpu=slice(0, 2))`: an index removes the dim, a range
    `start:stop:step` (Python semantics, parts optional) keeps it. Entries
    apply left to right.

    ```mlir
    %s = monarch.slice %m (host = 1, gpu = 0:2) : !monarch.mesh<host = 2, gpu = 4>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$source, StrArrayAttr:$dims,
                       DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$stops,
                       DenseI64ArrayAttr:$steps);
  let assemblyFormat = [{
    $source custom<SliceSpec>($dims, $starts, $stops, $steps) attr-dict
    `:` qualified(type($source))
  }];
  let extraClassDeclaration = extraViewDecl # [{
    /// Sentinel in `starts`/`stops` for an omitted bound; a step of 0 marks
    /// an index (the dim is dropped) whose value is in `starts`.
    static constexpr int64_t kNone = INT64_MIN;
  }];
}

def Monarch_FlattenOp : Monarch_MeshViewOp<"flatten"> {
  let summary = "flatten a dense mesh into one dim";
  let description = [{
    `mesh.flatten("ranks")`; the source must be dense (its ranks contiguous
    in row-major order), which the verifier checks where the source's layout
    is known statically.

    ```mlir
    %f = monarch.flatten %m -> ranks : !monarch.mesh<host = 2, gpu = 4>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$source, StrAttr:$name);
  let assemblyFormat = [{
    $source `->` custom<Name>($name) attr-dict `:` qualified(type($source))
  }];
}

def Monarch_ViewOp : Monarch_MeshViewOp<"view"> {
  let summary = "an explicit strided view of a root mesh";
  let description = [{
    The canonical form of every mesh view: named dims with `size:stride`
    over the ranks of the root mesh `%root` (a `spawn_procs` result or a
    block argument), plus an offset. Chains of rename/split/slice/flatten
    canonicalize to one `monarch.view`.

    ```mlir
    %v = monarch.view %m offset 2 (dp = 15:96, pp = 4:24, tp = 24:1)
        : !monarch.mesh<host = 60, gpu = 24>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$source, I64Attr:$offset,
                       StrArrayAttr:$names, DenseI64ArrayAttr:$sizes,
                       DenseI64ArrayAttr:$strides);
  let assemblyFormat = [{
    $source `offset` $offset custom<Layout>($names, $sizes, $strides) attr-dict
    `:` qualified(type($source))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$root, "const ::monarch::mesh::MeshView &":$view)>
  ];
}

//===----------------------------------------------------------------------===//
// Tensor ops
//===----------------------------------------------------------------------===//

def Monarch_AtenOp : Monarch_Op<"aten"> {
  let summary = "call an ATen operator by schema name on every rank";
  let description = [{
    Runs the ATen operator `schema` through the c10 dispatcher on each rank
    of `mesh`. The parenthesised list holds every positional argument in
    schema order: tensor operands (`%x`, or `[%a, %b]` for `Tensor[]`) and
    constants: `3 : i64`, `5.0e-01 : f64`, `true`, `"str"`,
    `array<i64: 1, 2>`, `array<f64: ...>`, `#monarch.dtype<float32>`,
    `#monarch.device<"cpu">`, `#monarch.layout<strided>`, `#monarch.none`,
    `#monarch.scalar<1 : i64>`. Result types are recorded by the frontend.

    ```mlir
    %c = monarch.aten "aten::add.Tensor"(%a, %b, #monarch.scalar<1 : i64>) on %m
        : (!monarch.tensor<4xf32, <gpu = 8>>, !monarch.tensor<4xf32, <gpu = 8>>)
        -> !monarch.tensor<4xf32, <gpu = 8>>
    ```
  }];
  let arguments = (ins StrAttr:$schema, Variadic<Monarch_AnyTensor>:$tensors,
                       ArrayAttr:$args, Monarch_AnyMesh:$mesh);
  let results = (outs Variadic<Monarch_AnyTensor>:$results);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Monarch_CallFunctionOp : Monarch_Op<"call_function"> {
  let summary = "call a user function registered by name on every rank";
  let description = [{
    `remote("pkg.mod.fn", propagate=...)(x, 3)`: runs the function
    registered under `callee` on each rank of `mesh`. Arguments as for
    `monarch.aten`; result types come from `propagate`.

    ```mlir
    %y = monarch.call_function "my_pkg.scale"(%x, 2 : i64) on %m
        : (!monarch.tensor<4xf32, <gpu = 8>>) -> !monarch.tensor<4xf32, <gpu = 8>>
    ```
  }];
  let arguments = (ins StrAttr:$callee, Variadic<Monarch_AnyTensor>:$tensors,
                       ArrayAttr:$args, Monarch_AnyMesh:$mesh);
  let results = (outs Variadic<Monarch_AnyTensor>:$results);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Monarch_RankOp : Monarch_Op<"rank", [Pure,
    TypesMatchWith<"mesh is the result's mesh", "result", "mesh",
                   "::llvm::cast<::monarch::DTensorType>($_self).getMesh()">]> {
  let summary = "each proc's coordinate along dims";
  let description = [{
    `mesh.rank("gpu")`, `mesh.rank(("host", "gpu"))`: a 0-d int64 tensor
    holding each proc's coordinate; for several dims the row-major
    combination (`rank(host) * size(gpu) + rank(gpu)`).

    ```mlir
    %r = monarch.rank %m (host, gpu) : !monarch.tensor<i64, <host = 2, gpu = 4>>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$mesh, StrArrayAttr:$dims);
  let results = (outs Monarch_AnyTensor:$result);
  let assemblyFormat = "$mesh custom<NameList>($dims) attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def Monarch_IndexTensorOp : Monarch_Op<"index_tensor", [Pure,
    TypesMatchWith<"mesh is the result's mesh", "result", "mesh",
                   "::llvm::cast<::monarch::DTensorType>($_self).getMesh()">]> {
  let summary = "an index (a loop's induction variable) as a 0-d int64 tensor";
  let description = [{
    The controller-side `index` as a distributed tensor: a 0-d int64 tensor
    on every proc of `%m`, all holding the same value. It is how a loop body
    computes with its step number (`make_batch(step)`, a learning-rate
    schedule) without the loop being unrolled: the plan lowering makes a
    loop's induction variable, used this way, a tensor formal of the loop's
    recording that the runtime binds to `lower + k * step` in iteration `k`
    (docs/plan.md, `loop`). The index may also be a constant.

    ```mlir
    scf.for %i = %c0 to %c100 step %c1 {
      %step = monarch.index_tensor %i on %m : !monarch.tensor<i64, <gpu = 8>>
      ...
    }
    ```
  }];
  let arguments = (ins Index:$index, Monarch_AnyMesh:$mesh);
  let results = (outs Monarch_AnyTensor:$result);
  let assemblyFormat = "$index `on` $mesh attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//


class Monarch_ReduceBase<string mnemonic> : Monarch_Op<mnemonic> {
  let arguments = (ins Monarch_AnyTensor:$input, StrArrayAttr:$dims,
                       Monarch_ReductionEnumAttr:$reduction,
                       UnitAttr:$scatter, UnitAttr:$inplace,
                       Optional<Monarch_AnyTensor>:$out);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The dims reduced over (all dims of the mesh when `dims` is empty).
    ::llvm::SmallVector<::llvm::StringRef> getEffectiveDims();
  }];
}

def Monarch_ReduceOp : Monarch_ReduceBase<"reduce"> {
  let summary = "reduce a tensor over mesh dims (DESIGN.md §6.2)";
  let description = [{
    `t.reduce(dims, reduction, scatter)`; `inplace` is `t.reduce_(...)`,
    `into %o` is `out=o`. `()` means every dim. sum/avg/min/max/product:
    all-reduce (shape unchanged) or, with `scatter`, reduce-scatter
    (`shape[1:]`, `shape[0]` must be the group size N); `stack`: all-gather
    (`[N, *shape]`) or, with `scatter`, all-to-all (shape unchanged).

    ```mlir
    %s = monarch.reduce %t (gpu) sum : !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
        -> !monarch.tensor<8x4xf32, <host = 2, gpu = 8>>
    ```
  }];
  let results = (outs Monarch_AnyTensor:$result);
  let assemblyFormat = [{
    $input custom<NameList>($dims) $reduction (`scatter` $scatter^)?
    (`inplace` $inplace^)? (`into` $out^)? attr-dict `:` qualified(type($input))
    (`,` qualified(type($out))^)? `->` qualified(type($result))
  }];
}

def Monarch_ReduceStartOp : Monarch_ReduceBase<"reduce_start"> {
  let summary = "start a reduce asynchronously";
  let description = [{
    The asynchronous form of `monarch.reduce` made by the async-collectives
    pass: the same checks; `monarch.wait` on the token yields the result.

    ```mlir
    %tok = monarch.reduce_start %t (gpu) sum : !monarch.tensor<4xf32, <gpu = 8>>
        -> !monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>
    %s = monarch.wait %tok : !monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>
    ```
  }];
  let results = (outs Monarch_AsyncType:$token);
  let assemblyFormat = [{
    $input custom<NameList>($dims) $reduction (`scatter` $scatter^)?
    (`inplace` $inplace^)? (`into` $out^)? attr-dict `:` qualified(type($input))
    (`,` qualified(type($out))^)? `->` qualified(type($token))
  }];
}

def Monarch_WaitOp : Monarch_Op<"wait", [
    TypesMatchWith<"result is the token's value", "token", "result",
                   "::llvm::cast<::monarch::AsyncType>($_self).getValueType()">]> {
  let summary = "wait for an asynchronous operation";
  let description = [{
    ```mlir
    %s = monarch.wait %tok : !monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>
    ```
  }];
  let arguments = (ins Monarch_AsyncType:$token);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$token attr-dict `:` qualified(type($token))";
}

def Monarch_ToMeshOp : Monarch_Op<"to_mesh", [
    TypesMatchWith<"dest is the result's mesh", "result", "dest",
                   "::llvm::cast<::monarch::DTensorType>($_self).getMesh()">]> {
  let summary = "copy a tensor to another mesh";
  let description = [{
    `t.to_mesh(dest)`: every source dim must exist in `dest` with the same
    size; dest dims missing from the source are broadcast.

    ```mlir
    %d = monarch.to_mesh %t to %dest : !monarch.tensor<4xf32, <gpu = 4>>
        -> !monarch.tensor<4xf32, <host = 2, gpu = 4>>
    ```
  }];
  let arguments = (ins Monarch_AnyTensor:$input, Monarch_AnyMesh:$dest);
  let results = (outs Monarch_AnyTensor:$result);
  let assemblyFormat = [{
    $input `to` $dest attr-dict `:` qualified(type($input)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Monarch_ToMeshStartOp : Monarch_Op<"to_mesh_start", [
    // A token of a non-tensor value maps to the 0-d mesh, so that the
    // mismatch is a diagnostic rather than a bad cast.
    TypesMatchWith<"dest is the mesh of the token's tensor", "token", "dest",
      "[&]() -> ::mlir::Type { auto t = ::llvm::dyn_cast<::monarch::DTensorType>("
      "::llvm::cast<::monarch::AsyncType>($_self).getValueType()); return t ? "
      "::mlir::Type(t.getMesh()) : ::mlir::Type(::monarch::MeshType::get("
      "$_self.getContext(), {}, {})); }()">]> {
  let summary = "start a to_mesh copy asynchronously";
  let description = [{
    The asynchronous form of `monarch.to_mesh` made by the async-collectives
    pass: the same checks, with the token's value type in place of the
    result type; `monarch.wait` on the token yields the copy.

    ```mlir
    %tok = monarch.to_mesh_start %t to %dest : !monarch.tensor<4xf32, <gpu = 4>>
        -> !monarch.async<!monarch.tensor<4xf32, <host = 2, gpu = 4>>>
    %d = monarch.wait %tok : !monarch.async<!monarch.tensor<4xf32, <host = 2, gpu = 4>>>
    ```
  }];
  let arguments = (ins Monarch_AnyTensor:$input, Monarch_AnyMesh:$dest);
  let results = (outs Monarch_AsyncType:$token);
  let assemblyFormat = [{
    $input `to` $dest attr-dict `:` qualified(type($input)) `->` qualified(type($token))
  }];
  let hasVerifier = 1;
}

def Monarch_SliceMeshOp : Monarch_Op<"slice_mesh", [Pure]> {
  let summary = "the part of a tensor on a slice of its mesh";
  let description = [{
    `t.slice_mesh(host=0)`: the shards on the ranks of the mesh slice, to be
    moved with `monarch.to_mesh`. Slice entries as in `monarch.slice`.

    ```mlir
    %s = monarch.slice_mesh %t (host = 0) : !monarch.tensor<4xf32, <host = 2, gpu = 4>>
        -> !monarch.tensor<4xf32, <gpu = 4>>
    ```
  }];
  let arguments = (ins Monarch_AnyTensor:$input, StrArrayAttr:$dims,
                       DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$stops,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Monarch_AnyTensor:$result);
  let assemblyFormat = [{
    $input custom<SliceSpec>($dims, $starts, $stops, $steps) attr-dict
    `:` qualified(type($input)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

class Monarch_FetchBase<string mnemonic> : Monarch_Op<mnemonic> {
  let arguments = (ins Monarch_AnyTensor:$input,
                       DefaultValuedAttr<StrArrayAttr, "{}">:$dims,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$coords);
  let results = (outs Monarch_HostType:$result);
  let assemblyFormat = [{
    $input (`at` custom<Coords>($dims, $coords)^)? attr-dict `:` qualified(type($input))
    `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Monarch_FetchShardOp : Monarch_FetchBase<"fetch_shard"> {
  let summary = "bring one rank's shard to the controller";
  let description = [{
    `fetch_shard(t, host=1)`: a future of that rank's value on the CPU of the
    controller; coordinates not given are 0.

    ```mlir
    %f = monarch.fetch_shard %t at (host = 1) : !monarch.tensor<4xf32, <host = 2, gpu = 4>>
        -> !monarch.host<tensor<4xf32>>
    ```
  }];
}

def Monarch_InspectOp : Monarch_FetchBase<"inspect"> {
  let summary = "fetch one rank's shard and wait for it";
  let description = [{
    `inspect(t, gpu=3)` = `fetch_shard(t, gpu=3).get()`.

    ```mlir
    %v = monarch.inspect %t at (gpu = 3) : !monarch.tensor<4xf32, <gpu = 4>>
        -> !monarch.host<tensor<4xf32>>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Streams and borrows
//===----------------------------------------------------------------------===//

def Monarch_StreamCreateOp : Monarch_Op<"stream_create"> {
  let summary = "create a named stream";
  let description = [{
    `monarch.Stream("comm")`; tensors whose type says `stream = "comm"` are
    owned by it. `!monarch.stream<"">` is a handle to the default stream.

    ```mlir
    %s = monarch.stream_create : !monarch.stream<"comm">
    ```
  }];
  let results = (outs Monarch_StreamType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

def Monarch_BorrowOp : Monarch_Op<"borrow", [
    TypesMatchWith<"stream names the result's stream", "result", "stream",
      "::monarch::StreamType::get($_self.getContext(), ::mlir::StringAttr::get("
      "$_self.getContext(), ::llvm::cast<::monarch::DTensorType>($_self)"
      ".getStreamName()))">]> {
  let summary = "borrow a tensor onto another stream";
  let description = [{
    `stream.borrow(t, mutable=...)` -> `(t2, borrow)`. `t2` is `t` owned by
    `stream`; the token ends the borrow with `monarch.borrow_drop`.

    ```mlir
    %t2, %b = monarch.borrow %t to %s mutable : !monarch.tensor<4xf32, <gpu = 8>>
        -> !monarch.tensor<4xf32, <gpu = 8>, stream = "comm">
    ```
  }];
  let arguments = (ins Monarch_AnyTensor:$input, Monarch_StreamType:$stream,
                       UnitAttr:$is_mutable);
  let results = (outs Monarch_AnyTensor:$result, Monarch_BorrowType:$borrow);
  let assemblyFormat = [{
    $input `to` $stream (`mutable` $is_mutable^)? attr-dict `:` qualified(type($input))
    `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

class Monarch_BorrowEventOp<string mnemonic> : Monarch_Op<mnemonic> {
  let arguments = (ins Monarch_BorrowType:$borrow);
  let assemblyFormat = "$borrow attr-dict";
}

def Monarch_BorrowFirstUseOp : Monarch_BorrowEventOp<"borrow_first_use"> {
  let summary = "the borrowing stream waits for the borrowed tensor";
  let description = [{
    Before the first use of a borrowed tensor the borrowing stream waits on
    the event recorded at `monarch.borrow`.

    ```mlir
    monarch.borrow_first_use %b
    ```
  }];
}

def Monarch_BorrowLastUseOp : Monarch_BorrowEventOp<"borrow_last_use"> {
  let summary = "the borrowing stream records its last use";
  let description = [{
    ```mlir
    monarch.borrow_last_use %b
    ```
  }];
}

def Monarch_BorrowDropOp : Monarch_BorrowEventOp<"borrow_drop"> {
  let summary = "end a borrow";
  let description = [{
    `borrow.drop()`: the origin stream waits for the last use and regains
    access; the borrowed value must not be used afterwards.

    ```mlir
    monarch.borrow_drop %b
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Actors
//===----------------------------------------------------------------------===//

def Monarch_SpawnActorOp : Monarch_Op<"spawn_actor", [
    TypesMatchWith<"mesh is the actor mesh's mesh", "result", "mesh",
                   "::llvm::cast<::monarch::ActorMeshType>($_self).getMesh()">]> {
  let summary = "spawn an actor of a class on every proc of a mesh";
  let description = [{
    `mesh.spawn("trainer", Trainer, *args)`: the class is named by the
    result type; `args` are passed to its constructor.

    ```mlir
    %a = monarch.spawn_actor "trainer" on %m : !monarch.actor<"Trainer", <gpu = 8>>
    ```
  }];
  let arguments = (ins Monarch_AnyMesh:$mesh, StrAttr:$name,
                       Variadic<AnyType>:$args);
  let results = (outs Monarch_ActorMeshType:$result);
  let assemblyFormat = [{
    $name `on` $mesh (`args` `(` $args^ `:` qualified(type($args)) `)`)? attr-dict `:`
    qualified(type($result))
  }];
}


def Monarch_EndpointCallOp : Monarch_Op<"endpoint_call"> {
  let summary = "call an endpoint of an actor mesh";
  let description = [{
    `actors.step.call(x)`, `.call_one`, `.broadcast`, `.choose`, `.rref`:
    `call` returns a host value mesh, `call_one` (one-actor mesh) and
    `choose` one host value, `broadcast` nothing, `rref` distributed tensors
    on the actor's mesh (types from the endpoint's `propagate`).

    ```mlir
    %g = monarch.endpoint_call %a "grad" rref(%x) : (!monarch.tensor<4xf32, <gpu = 8>>)
        -> !monarch.tensor<4xf32, <gpu = 8>>
    ```
  }];
  let arguments = (ins Monarch_ActorMeshType:$actor, StrAttr:$endpoint,
                       Monarch_AdverbEnumAttr:$adverb, Variadic<AnyType>:$args);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $actor $endpoint $adverb `(` $args `)` attr-dict `:` qualified(type($actor)) `,`
    functional-type($args, $results)
  }];
  let hasVerifier = 1;
}

#endif // MONARCH_OPS_TD
