//===- PrintPlan.cpp - Readable text form of a plan -----------------------===//
//
// The text dump of `--monarch-emit-plan="format=text"` (docs/plan.md,
// "Lowering from the dialect"): a header with the root mesh, the meshes and
// the streams, then one line per instruction, recordings with their bodies
// indented. Refs print as `%N`, meshes as `mesh#N`, recordings as `@N`; the
// instruction id ends each line as `// #N`.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Lowering/LowerToPlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

using namespace monarch;

namespace {

void printDims(const google::protobuf::RepeatedPtrField<plan::MeshDim> &dims,
               bool strides, llvm::raw_ostream &os) {
  os << "(";
  llvm::interleaveComma(dims, os, [&](const plan::MeshDim &d) {
    os << d.name() << " = " << d.size();
    if (strides)
      os << ":" << d.stride();
  });
  os << ")";
}

void printRefs(const google::protobuf::RepeatedField<int64_t> &refs,
               llvm::raw_ostream &os) {
  llvm::interleaveComma(refs, os, [&](int64_t r) { os << "%" << r; });
}

void printMeta(const plan::TensorMeta &meta, llvm::raw_ostream &os) {
  os << llvm::StringRef(plan::DType_Name(meta.dtype())).lower() << "[";
  llvm::interleaveComma(meta.shape(), os);
  os << "]";
}

void printValue(const plan::Value &v, llvm::raw_ostream &os) {
  switch (v.kind_case()) {
  case plan::Value::kIntValue:
    os << v.int_value();
    break;
  case plan::Value::kFloatValue:
    os << llvm::format("%g", v.float_value());
    break;
  case plan::Value::kBoolValue:
    os << (v.bool_value() ? "true" : "false");
    break;
  case plan::Value::kStringValue:
    os << "\"";
    os.write_escaped(v.string_value());
    os << "\"";
    break;
  case plan::Value::kIntList:
    os << "[";
    llvm::interleaveComma(v.int_list().values(), os);
    os << "]";
    break;
  case plan::Value::kFloatList:
    os << "[";
    llvm::interleaveComma(v.float_list().values(), os,
                          [&](double d) { os << llvm::format("%g", d); });
    os << "]";
    break;
  case plan::Value::kBoolList:
    os << "[";
    llvm::interleaveComma(v.bool_list().values(), os,
                          [&](bool b) { os << (b ? "true" : "false"); });
    os << "]";
    break;
  case plan::Value::kDtype:
    os << llvm::StringRef(plan::DType_Name(v.dtype())).lower();
    break;
  case plan::Value::kDevice:
    os << "device(\"" << v.device().spec() << "\")";
    break;
  case plan::Value::kLayout:
    os << llvm::StringRef(plan::Layout_Name(v.layout())).lower();
    break;
  case plan::Value::kMemoryFormat:
    os << llvm::StringRef(plan::MemoryFormat_Name(v.memory_format())).lower();
    break;
  case plan::Value::kNone:
    os << "None";
    break;
  case plan::Value::kScalar:
    os << "scalar(";
    if (v.scalar().has_int_value())
      os << v.scalar().int_value();
    else if (v.scalar().has_float_value())
      os << llvm::format("%g", v.scalar().float_value());
    else
      os << (v.scalar().bool_value() ? "true" : "false");
    os << ")";
    break;
  case plan::Value::kRef:
    os << "%" << v.ref();
    break;
  case plan::Value::kRefList:
    os << "[";
    printRefs(v.ref_list().refs(), os);
    os << "]";
    break;
  case plan::Value::kList:
    os << "[";
    llvm::interleaveComma(v.list().values(), os,
                          [&](const plan::Value &e) { printValue(e, os); });
    os << "]";
    break;
  case plan::Value::kOptional:
    os << "optional(";
    if (v.optional().has_value())
      printValue(v.optional().value(), os);
    os << ")";
    break;
  case plan::Value::kTensor:
    os << "tensor(";
    printMeta(
        [&] {
          plan::TensorMeta m;
          m.set_dtype(v.tensor().dtype());
          *m.mutable_shape() = v.tensor().shape();
          return m;
        }(),
        os);
    os << ", " << v.tensor().data().size() << " bytes)";
    break;
  case plan::Value::KIND_NOT_SET:
    os << "<unset>";
    break;
  }
}

void printArgs(const google::protobuf::RepeatedPtrField<plan::Value> &args,
               const google::protobuf::RepeatedPtrField<plan::NamedValue> *kw,
               llvm::raw_ostream &os) {
  os << "(";
  llvm::interleaveComma(args, os,
                        [&](const plan::Value &v) { printValue(v, os); });
  if (kw)
    for (const plan::NamedValue &nv : *kw) {
      os << ", " << nv.name() << " = ";
      printValue(nv.value(), os);
    }
  os << ")";
}

void printResults(const google::protobuf::RepeatedField<int64_t> &results,
                  llvm::raw_ostream &os) {
  if (results.empty())
    return;
  printRefs(results, os);
  os << " = ";
}

void printInstruction(const plan::Instruction &inst, unsigned indent,
                      llvm::raw_ostream &os) {
  os.indent(indent);
  bool placed = true; // print "on mesh#M [stream S]"
  switch (inst.kind_case()) {
  case plan::Instruction::kCreateMesh:
    os << "create_mesh mesh#" << inst.create_mesh().mesh().id() << " offset "
       << inst.create_mesh().mesh().offset() << " ";
    printDims(inst.create_mesh().mesh().dims(), true, os);
    placed = false;
    break;
  case plan::Instruction::kCreateStream:
    os << "create_stream stream " << inst.create_stream().stream().id() << " \""
       << inst.create_stream().stream().name() << "\"";
    placed = false;
    break;
  case plan::Instruction::kRankTensor:
    os << "%" << inst.rank_tensor().result() << " = rank (";
    llvm::interleaveComma(inst.rank_tensor().dims(), os);
    os << ")";
    break;
  case plan::Instruction::kCallOp: {
    const plan::CallOp &c = inst.call_op();
    printResults(c.results(), os);
    os << "aten \"" << c.name();
    if (!c.overload().empty())
      os << "." << c.overload();
    os << "\"";
    printArgs(c.args(), &c.kwargs(), os);
    break;
  }
  case plan::Instruction::kCallFunction: {
    const plan::CallFunction &c = inst.call_function();
    printResults(c.results(), os);
    os << "call_function \"" << c.name() << "\"";
    printArgs(c.args(), nullptr, os);
    break;
  }
  case plan::Instruction::kCallActor: {
    const plan::CallActor &c = inst.call_actor();
    printResults(c.results(), os);
    os << "call_actor \"" << c.actor() << "\" \"" << c.endpoint() << "\"";
    printArgs(c.args(), nullptr, os);
    break;
  }
  case plan::Instruction::kReduce: {
    const plan::Reduce &r = inst.reduce();
    if (r.in_place())
      os << "%" << r.input() << " = ";
    else
      os << "%" << r.result() << " = ";
    os << "reduce %" << r.input() << " (";
    llvm::interleaveComma(r.dims(), os);
    os << ") " << llvm::StringRef(plan::ReduceOp_Name(r.op())).lower();
    if (r.scatter())
      os << " scatter";
    if (r.in_place())
      os << " inplace";
    if (r.has_out())
      os << " into %" << r.out();
    os << " : ";
    printMeta(r.input_meta(), os);
    break;
  }
  case plan::Instruction::kSendTensor: {
    const plan::SendTensor &s = inst.send_tensor();
    os << "%" << s.result() << " = send %" << s.input() << " from mesh#"
       << s.source_mesh() << " to mesh#" << s.dest_mesh() << " : ";
    printMeta(s.meta(), os);
    if (inst.stream())
      os << " stream " << inst.stream();
    placed = false;
    break;
  }
  case plan::Instruction::kBorrowCreate: {
    const plan::BorrowCreate &b = inst.borrow_create();
    os << "%" << b.result() << " = borrow b" << b.borrow() << " %" << b.input()
       << " from stream " << b.from_stream();
    if (b.mutable_())
      os << " mutable";
    break;
  }
  case plan::Instruction::kBorrowFirstUse:
    os << "borrow_first_use b" << inst.borrow_first_use().borrow();
    break;
  case plan::Instruction::kBorrowLastUse:
    os << "borrow_last_use b" << inst.borrow_last_use().borrow();
    break;
  case plan::Instruction::kBorrowDrop:
    os << "borrow_drop b" << inst.borrow_drop().borrow();
    break;
  case plan::Instruction::kDeleteRefs:
    os << "delete ";
    printRefs(inst.delete_refs().refs(), os);
    break;
  case plan::Instruction::kFetch:
    os << "fetch %" << inst.fetch().ref();
    break;
  case plan::Instruction::kRequestStatus:
    os << "request_status";
    break;
  case plan::Instruction::kDefineRecording: {
    const plan::Recording &r = inst.define_recording().recording();
    os << "recording @" << r.id() << "(";
    printRefs(r.formals(), os);
    os << ") -> (";
    printRefs(r.results(), os);
    os << (r.cuda_graph() ? ") cuda_graph {  // #" : ") {  // #") << inst.id()
       << "\n";
    for (const plan::Instruction &b : r.body())
      printInstruction(b, indent + 2, os);
    os.indent(indent) << "}\n";
    return;
  }
  case plan::Instruction::kCallRecording: {
    const plan::CallRecording &c = inst.call_recording();
    printResults(c.results(), os);
    os << "call_recording @" << c.recording() << "(";
    printRefs(c.actuals(), os);
    os << ")";
    placed = false;
    break;
  }
  case plan::Instruction::kLoop: {
    // %r = loop @R trips N carried(...) captured(...)
    //      induction(LOWER + k*STEP on mesh#M [stream S], ...) consumed(...)
    const plan::Loop &l = inst.loop();
    printResults(l.results(), os);
    os << "loop @" << l.recording() << " trips " << l.trips();
    auto clause = [&](const char *name, const auto &refs) {
      if (refs.empty())
        return;
      os << " " << name << "(";
      printRefs(refs, os);
      os << ")";
    };
    clause("carried", l.carried());
    clause("captured", l.captured());
    if (!l.induction().empty()) {
      os << " induction(" << l.lower() << " + k*" << l.step() << " on ";
      llvm::interleaveComma(l.induction(), os, [&](const plan::Induction &i) {
        os << "mesh#" << i.mesh();
        if (i.stream())
          os << " stream " << i.stream();
      });
      os << ")";
    }
    clause("consumed", l.consumed());
    placed = false;
    break;
  }
  case plan::Instruction::KIND_NOT_SET:
    os << "<no kind>";
    break;
  }
  if (placed) {
    os << " on mesh#" << inst.mesh();
    if (inst.stream())
      os << " stream " << inst.stream();
  }
  os << "  // #" << inst.id() << "\n";
}

} // namespace

void monarch::printPlan(const plan::Program &program, llvm::raw_ostream &os) {
  os << "plan version " << program.version() << "\n";
  os << "root ";
  printDims(program.root(), false, os);
  os << "\n";
  for (const plan::Mesh &m : program.meshes()) {
    os << "mesh#" << m.id() << " = offset " << m.offset() << " ";
    printDims(m.dims(), true, os);
    os << "\n";
  }
  for (const plan::Stream &s : program.streams())
    os << "stream " << s.id() << " = \"" << s.name() << "\"\n";
  for (const plan::Instruction &inst : program.instructions())
    printInstruction(inst, 0, os);
}
