//===- ExportTrace.cpp - The monarch dialect to a traced program ----------===//
//
// See ExportTrace.h. The program is the plan lowering's, verbatim (its
// meshes and streams declared up front, delete_refs and all: the import
// reads both that and the eager form); this file adds the ref types and the
// mesh origins.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Import/ExportTrace.h"

#include "monarch/Compiler/Import/ImportTrace.h"
#include "monarch/Compiler/Lowering/LowerToPlan.h"
#include "monarch/Dialect/Monarch/IR/MeshLayout.h"
#include "monarch/Dialect/Monarch/IR/MonarchOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/ToolOutputFile.h"

#include <google/protobuf/text_format.h>

#include <functional>

namespace monarch {
#define GEN_PASS_DEF_MONARCHEMITTRACE
#include "monarch/Compiler/Import/TracePasses.h.inc"
} // namespace monarch

using namespace mlir;
using namespace monarch;
using mesh::MeshView;

namespace {

func::FuncOp entryFunction(ModuleOp module, StringRef entry) {
  SymbolTable symbols(module);
  if (!entry.empty())
    return symbols.lookup<func::FuncOp>(entry);
  if (auto main = symbols.lookup<func::FuncOp>("main"))
    return main;
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  return funcs.size() == 1 ? funcs.front() : func::FuncOp();
}

/// Records, for every mesh value of `func` made by a view op that the
/// import can replay, how it derives from its source: the meshes of
/// `program` by view (adding the views no instruction runs on).
void exportOrigins(func::FuncOp func, plan::TracedProgram &trace) {
  plan::Program &program = *trace.mutable_program();
  std::vector<std::pair<MeshView, int64_t>> known;
  std::vector<std::pair<std::string, int64_t>> rootShape;
  for (const plan::MeshDim &d : program.root())
    rootShape.emplace_back(d.name(), d.size());
  if (auto root = MeshView::root(rootShape); root.ok())
    known.emplace_back(root.value(), 0);
  int64_t nextId = 1;
  for (const plan::Mesh &m : program.meshes()) {
    std::vector<mesh::Dim> dims;
    for (const plan::MeshDim &d : m.dims())
      dims.push_back({d.name(), d.size(), d.stride()});
    if (auto view = MeshView::create(m.offset(), dims); view.ok())
      known.emplace_back(view.value(), m.id());
    nextId = std::max(nextId, m.id() + 1);
  }

  DenseMap<Value, int64_t> ids;
  llvm::DenseSet<int64_t> derived;
  std::function<std::optional<int64_t>(Value)> idOf =
      [&](Value mesh) -> std::optional<int64_t> {
    if (auto it = ids.find(mesh); it != ids.end())
      return it->second;
    std::optional<MeshLayout> layout = resolveMeshLayout(mesh);
    if (!layout || !layout->root.getDefiningOp<SpawnProcsOp>())
      return std::nullopt;
    int64_t id = -1;
    for (auto &[view, knownId] : known)
      if (view == layout->view)
        id = knownId;
    if (id < 0) {
      id = nextId++;
      known.emplace_back(layout->view, id);
      plan::Mesh *m = program.add_meshes();
      m->set_id(id);
      m->set_offset(layout->view.offset());
      for (const mesh::Dim &d : layout->view.dims()) {
        plan::MeshDim *dim = m->add_dims();
        dim->set_name(d.name);
        dim->set_size(d.size);
        dim->set_stride(d.stride);
      }
    }
    ids[mesh] = id;
    Operation *def = mesh.getDefiningOp();
    if (id == 0 || derived.contains(id) || !def ||
        !isa<RenameOp, SplitOp, SliceOp, FlattenOp>(def))
      return id;
    std::optional<int64_t> parent = idOf(def->getOperand(0));
    if (!parent)
      return id;
    derived.insert(id);
    plan::MeshOrigin *origin = trace.add_mesh_origins();
    origin->set_mesh(id);
    origin->set_parent(*parent);
    auto strings = [](ArrayAttr a) {
      return llvm::map_range(a.getAsValueRange<StringAttr>(),
                             [](StringRef s) { return s.str(); });
    };
    llvm::TypeSwitch<Operation *>(def)
        .Case<RenameOp>([&](RenameOp r) {
          for (std::string s : strings(r.getFrom()))
            origin->mutable_rename()->add_from(s);
          for (std::string s : strings(r.getTo()))
            origin->mutable_rename()->add_to(s);
        })
        .Case<SplitOp>([&](SplitOp s) {
          plan::Split *split = origin->mutable_split();
          for (auto [from, to] : llvm::zip(s.getFrom(), s.getTo())) {
            plan::Split::Dim *dim = split->add_dims();
            dim->set_name(cast<StringAttr>(from).str());
            for (std::string n : strings(cast<ArrayAttr>(to)))
              dim->add_into(n);
          }
          for (auto [name, size] :
               llvm::zip(strings(s.getSizeNames()), s.getSizeValues())) {
            plan::Split::Size *entry = split->add_sizes();
            entry->set_name(name);
            entry->set_size(size);
          }
        })
        .Case<SliceOp>([&](SliceOp s) {
          plan::SliceMesh *slice = origin->mutable_slice();
          for (auto [dim, start, stop, step] :
               llvm::zip(strings(s.getDims()), s.getStarts(), s.getStops(),
                         s.getSteps())) {
            plan::SliceMesh::Coord *c = slice->add_coords();
            c->set_dim(dim);
            if (step == 0) {
              c->set_index(start);
              continue;
            }
            plan::SliceMesh::Range *r = c->mutable_range();
            if (start != SliceOp::kNone)
              r->set_start(start);
            if (stop != SliceOp::kNone)
              r->set_stop(stop);
            r->set_step(step);
          }
        })
        .Case<FlattenOp>([&](FlattenOp f) {
          origin->mutable_flatten()->set_name(f.getName().str());
        });
    return id;
  };
  func.walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (isa<MeshType>(result.getType()))
        (void)idOf(result);
  });
}

struct EmitTracePass
    : public monarch::impl::MonarchEmitTraceBase<EmitTracePass> {
  using MonarchEmitTraceBase::MonarchEmitTraceBase;

  void runOnOperation() override {
    if (format != "binary" && format != "text") {
      getOperation().emitError("--monarch-emit-trace: unknown format '")
          << format << "' (expected 'binary' or 'text')";
      return signalPassFailure();
    }
    FailureOr<plan::TracedProgram> trace = exportTrace(getOperation(), entry);
    if (failed(trace))
      return signalPassFailure();
    std::string bytes;
    bool written =
        format == "text"
            ? google::protobuf::TextFormat::PrintToString(*trace, &bytes)
            : trace->SerializeToString(&bytes);
    if (!written) {
      getOperation().emitError("--monarch-emit-trace: cannot serialize");
      return signalPassFailure();
    }
    std::string error;
    auto file = openOutputFile(output, &error);
    if (!file) {
      getOperation().emitError("--monarch-emit-trace: ") << error;
      return signalPassFailure();
    }
    file->os() << bytes;
    file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace

FailureOr<plan::TracedProgram> monarch::exportTrace(ModuleOp module,
                                                    StringRef entry) {
  std::map<int64_t, plan::TensorMeta> refTypes;
  FailureOr<plan::Program> program = lowerToPlan(module, entry, refTypes);
  if (failed(program))
    return failure();
  func::FuncOp func = entryFunction(module, entry);
  // Recordings (loops, calls) are the one part of a plan the import does not
  // read yet: refuse them here rather than write a trace that cannot be
  // read back.
  for (const plan::Instruction &inst : program->instructions())
    if (inst.has_define_recording()) {
      Operation *where = func;
      func.walk([&](Operation *op) {
        if (isa<scf::ForOp, func::CallOp>(op) && where == func)
          where = op;
      });
      // The import reads recordings in the frontend's form, whose formals
      // are refs of the caller live at the definition; the lowering's are
      // refs of their own, defined before any caller's (callees first).
      return where->emitError(
          "cannot write a traced program with a loop or call: the plan "
          "lowering's recordings take refs of their own as formals, and the "
          "trace import reads only the frontend's (the caller's refs)");
    }
  plan::TracedProgram trace;
  trace.set_magic(kTraceMagic);
  trace.set_version(kTraceVersion);
  trace.set_entry(func.getSymName().str());
  *trace.mutable_program() = std::move(*program);
  for (auto &[ref, meta] : refTypes) {
    plan::RefType *t = trace.add_refs();
    t->set_ref(ref);
    *t->mutable_meta() = meta;
  }
  exportOrigins(func, trace);
  return trace;
}
