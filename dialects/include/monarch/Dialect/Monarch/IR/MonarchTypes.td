//===- MonarchTypes.td - Types of the monarch dialect ------*- tablegen -*-===//
#ifndef MONARCH_TYPES_TD
#define MONARCH_TYPES_TD

include "monarch/Dialect/Monarch/IR/MonarchBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Monarch_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Monarch_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Monarch_MeshType : Monarch_Type<"Mesh", "mesh"> {
  let summary = "a proc mesh: named dims with sizes";
  let description = [{
    A proc mesh, root or view, with its dims in order (outermost first):
    `!monarch.mesh<host = 2, gpu = 4>`. A 0-d mesh (one proc) is
    `!monarch.mesh<>`. The type holds only the shape; where in the root mesh
    a view's ranks lie is found by the mesh layout analysis.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr", "dim names">:$names,
                        ArrayRefParameter<"int64_t", "dim sizes">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The most procs a mesh may hold (2^20): monarch::mesh::kMaxMeshRanks,
    /// the bound the plan loader and spawn check too.
    static constexpr int64_t kMaxProcs = int64_t{1} << 20;
    /// Number of procs in the mesh.
    int64_t getNumProcs() const;
    /// Index of the named dim, if any.
    std::optional<unsigned> getDimIndex(llvm::StringRef name) const;
    /// The (name, size) pairs, for MeshView::root.
    std::vector<std::pair<std::string, int64_t>> getShape() const;
    /// Prints `host = 2, gpu = 4` (no brackets); used by other types too.
    void printShape(::mlir::AsmPrinter &printer) const;
    /// Parses `<host = 2, gpu = 4>`.
    static MeshType parseShape(::mlir::AsmParser &parser);
  }];
}

def Monarch_TensorType : Monarch_Type<"DTensor", "tensor"> {
  let summary = "a tensor distributed over a proc mesh";
  let description = [{
    One local tensor per rank of a mesh, all of the same local type, owned by
    a stream: `!monarch.tensor<4x4xf32, <host = 2, gpu = 4>>` lives on the
    default stream, `!monarch.tensor<4x4xf32, <gpu = 8>, stream = "comm">` on
    the stream named "comm". A 0-d tensor is `!monarch.tensor<i64, <gpu = 8>>`.
  }];
  let parameters = (ins "::mlir::RankedTensorType":$local,
                        "MeshType":$mesh,
                        DefaultValuedParameter<"::mlir::StringAttr", "{}">:$stream);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::RankedTensorType":$local,
                                        "MeshType":$mesh), [{
      return $_get(local.getContext(), local, mesh, ::mlir::StringAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The local shard's shape.
    ::llvm::ArrayRef<int64_t> getShape() const { return getLocal().getShape(); }
    /// The stream name; "" is the default stream.
    ::llvm::StringRef getStreamName() const {
      return getStream() ? getStream().getValue() : ::llvm::StringRef();
    }
    /// This type on another mesh / stream / with another local type.
    DTensorType withMesh(MeshType mesh) const;
    DTensorType withStream(::llvm::StringRef stream) const;
    DTensorType withLocal(::mlir::RankedTensorType local) const;
  }];
}

def Monarch_ActorMeshType : Monarch_Type<"ActorMesh", "actor"> {
  let summary = "a mesh of actors of one class";
  let description = [{
    One actor per proc of a mesh: `!monarch.actor<"Trainer", <host = 2, gpu = 4>>`.
  }];
  let parameters = (ins "::mlir::StringAttr":$className, "MeshType":$mesh);
  let hasCustomAssemblyFormat = 1;
}

def Monarch_StreamType : Monarch_Type<"Stream", "stream"> {
  let summary = "a named stream of a worker";
  let description = [{
    A stream, named so that tensor types can say which stream owns them:
    `!monarch.stream<"comm">`. The name "" is the default stream.
  }];
  let parameters = (ins "::mlir::StringAttr":$name);
  let assemblyFormat = "`<` $name `>`";
}

def Monarch_BorrowType : Monarch_Type<"Borrow", "borrow"> {
  let summary = "a borrow of a tensor by another stream";
  let description = [{ The token of a `monarch.borrow`: `!monarch.borrow`. }];
}

def Monarch_AsyncType : Monarch_Type<"Async", "async"> {
  let summary = "a started asynchronous operation";
  let description = [{
    The token of a started collective; `monarch.wait` yields its value:
    `!monarch.async<!monarch.tensor<4xf32, <gpu = 8>>>`.
  }];
  let parameters = (ins "::mlir::Type":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

def Monarch_HostType : Monarch_Type<"Host", "host"> {
  let summary = "a value fetched to the controller";
  let description = [{
    A value on the controller (e.g. one rank's shard brought back by
    `monarch.fetch_shard`): `!monarch.host<tensor<4xf32>>`.
  }];
  let parameters = (ins "::mlir::Type":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

def Monarch_AnyMesh : Type<CPred<"::llvm::isa<::monarch::MeshType>($_self)">,
                           "proc mesh", "::monarch::MeshType">;
def Monarch_AnyTensor : Type<CPred<"::llvm::isa<::monarch::DTensorType>($_self)">,
                             "distributed tensor", "::monarch::DTensorType">;

#endif // MONARCH_TYPES_TD
