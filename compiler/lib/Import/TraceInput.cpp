//===- TraceInput.cpp - Reading a traced program from a file --------------===//
//
// See TraceInput.h.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Import/TraceInput.h"

#include "monarch/Compiler/Import/ImportTrace.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <climits>
#include <vector>

using namespace mlir;
using namespace monarch;
namespace pb = google::protobuf;

TraceFormat monarch::traceFormatOf(const llvm::MemoryBuffer &buffer) {
  StringRef name = buffer.getBufferIdentifier();
  if (name.ends_with(".trace.txt"))
    return TraceFormat::Text;
  if (name.ends_with(".trace"))
    return TraceFormat::Binary;
  // Field 1 (fixed32, tag 0x0d) holding "MONT" little-endian comes first:
  // protobuf writes fields in number order.
  if (buffer.getBuffer().starts_with(StringRef("\x0dTNOM", 5)))
    return TraceFormat::Binary;
  return TraceFormat::None;
}

namespace {

using Positions = llvm::DenseMap<const pb::Message *, std::pair<int, int>>;

/// Protobuf's text parser errors as diagnostics at their line and column.
class DiagnosticCollector : public pb::io::ErrorCollector {
public:
  DiagnosticCollector(MLIRContext &context, StringRef file)
      : context(context), file(file) {}
  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    emitError(FileLineColLoc::get(&context, file, line + 1, column + 1))
        << "invalid traced program: " << message;
  }
  void AddWarning(int line, pb::io::ColumnNumber column,
                  const std::string &message) override {
    emitWarning(FileLineColLoc::get(&context, file, line + 1, column + 1))
        << message;
  }

private:
  MLIRContext &context;
  StringRef file;
};

/// Where every message nested in `message` was written, from the parser's
/// location tree (0-based lines and columns).
void collectPositions(const pb::Message &message,
                      const pb::TextFormat::ParseInfoTree *tree,
                      Positions &positions) {
  if (!tree)
    return;
  const pb::Reflection *reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor *> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor *field : fields) {
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    auto record = [&](const pb::Message &nested, int index) {
      pb::TextFormat::ParseLocation at = tree->GetLocation(field, index);
      if (at.line >= 0)
        positions[&nested] = {at.line, at.column};
      collectPositions(nested, tree->GetTreeForNested(field, index), positions);
    };
    if (field->is_repeated()) {
      for (int i = 0, e = reflection->FieldSize(message, field); i < e; ++i)
        record(reflection->GetRepeatedMessage(message, field, i), i);
    } else {
      record(reflection->GetMessage(message, field), -1);
    }
  }
}

} // namespace

OwningOpRef<ModuleOp>
monarch::importTraceBuffer(const llvm::MemoryBuffer &buffer, TraceFormat format,
                           MLIRContext &context) {
  StringRef file = buffer.getBufferIdentifier();
  StringRef bytes = buffer.getBuffer();
  plan::TracedProgram trace;
  Positions positions;
  TraceImportOptions options;
  if (format == TraceFormat::Text) {
    pb::TextFormat::Parser parser;
    DiagnosticCollector errors(context, file);
    pb::TextFormat::ParseInfoTree tree;
    parser.RecordErrorsTo(&errors);
    parser.WriteLocationsTo(&tree);
    if (bytes.size() > INT_MAX ||
        !parser.ParseFromString(std::string(bytes), &trace))
      return {};
    collectPositions(trace, &tree, positions);
    // The program as a whole is where its first field is written (after
    // any comments), so that its errors point at the trace.
    std::pair<int, int> first = {0, 0};
    std::vector<const pb::FieldDescriptor *> fields;
    trace.GetReflection()->ListFields(trace, &fields);
    for (const pb::FieldDescriptor *field : fields) {
      pb::TextFormat::ParseLocation at =
          tree.GetLocation(field, field->is_repeated() ? 0 : -1);
      if (at.line >= 0 && (first == std::make_pair(0, 0) ||
                           std::make_pair(at.line, at.column) < first))
        first = {at.line, at.column};
    }
    positions[&trace] = first;
    options.locate = [&](const pb::Message &m) -> std::optional<Location> {
      auto it = positions.find(&m);
      if (it == positions.end())
        return std::nullopt;
      return FileLineColLoc::get(&context, file, it->second.first + 1,
                                 it->second.second + 1);
    };
  } else {
    if (bytes.size() > INT_MAX ||
        !trace.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      emitError(FileLineColLoc::get(&context, file, 0, 0))
          << "corrupted traced program: the bytes are not a valid "
             "monarch.plan.TracedProgram (protobuf parse failed)";
      return {};
    }
    // Binary traces have no positions: an instruction is found by its id and
    // source location, everything else by the file.
    options.locate = [&](const pb::Message &m) -> std::optional<Location> {
      if (dynamic_cast<const plan::Instruction *>(&m))
        return std::nullopt;
      return FileLineColLoc::get(&context, file, 0, 0);
    };
  }
  return importTrace(trace, context, options);
}
