//===- MonarchBase.td - The monarch dialect ----------------*- tablegen -*-===//
//
// The monarch dialect models a single-controller distributed PyTorch program
// (DESIGN.md §4): proc meshes and views of them, tensors distributed over a
// mesh, ATen ops by schema name, collectives, streams and borrows, actors.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_BASE_TD
#define MONARCH_BASE_TD

include "mlir/IR/OpBase.td"

def Monarch_Dialect : Dialect {
  let name = "monarch";
  let cppNamespace = "::monarch";
  let summary = "Single-controller distributed PyTorch programs";
  let description = [{
    A monarch program is run by one controller that drives meshes of
    processes. Values of `!monarch.mesh` are proc meshes (a root spawned by
    `monarch.spawn_procs` or a view of one); values of `!monarch.tensor` are
    tensors with one local shard per rank of a mesh. See docs/dialect.md.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

class Monarch_Op<string mnemonic, list<Trait> traits = []>
    : Op<Monarch_Dialect, mnemonic, traits>;

#endif // MONARCH_BASE_TD
