//===- ParserGuards.cpp - Text the upstream parser crashes on --------------===//
//
// See ParserGuards.h.
//
//===----------------------------------------------------------------------===//

#include "monarch/Compiler/Import/ParserGuards.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SourceMgr.h"

using namespace monarch;

namespace {

bool isIdentChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
}

/// Skips spaces and newlines from `i`.
size_t skipSpace(llvm::StringRef text, size_t i) {
  while (i < text.size() && llvm::isSpace(text[i]))
    ++i;
  return i;
}

/// Whether `array<index` (spaces allowed around `<`) starts at `i`, with
/// `index` a whole keyword.
bool isIndexDenseArray(llvm::StringRef text, size_t i) {
  if (!text.substr(i).starts_with("array") ||
      (i > 0 && isIdentChar(text[i - 1])))
    return false;
  size_t j = skipSpace(text, i + 5);
  if (j >= text.size() || text[j] != '<')
    return false;
  j = skipSpace(text, j + 1);
  return text.substr(j).starts_with("index") &&
         (j + 5 >= text.size() || !isIdentChar(text[j + 5]));
}

} // namespace

std::optional<ParserCrashSyntax>
monarch::findParserCrashSyntax(llvm::StringRef text) {
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      size_t end = text.find('\n', i);
      if (end == llvm::StringRef::npos)
        return std::nullopt;
      i = end;
      continue;
    }
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == 'a' && isIndexDenseArray(text, i))
      return ParserCrashSyntax{
          i, "dense arrays of 'index' are not supported (array<i64: ...> "
             "holds integers); MLIR's parser would crash on this one"};
  }
  return std::nullopt;
}

mlir::LogicalResult
monarch::rejectParserCrashSyntax(const llvm::MemoryBuffer &buffer,
                                 llvm::raw_ostream &os) {
  llvm::StringRef text = buffer.getBuffer();
  if (text.starts_with("ML\xEFR")) // bytecode: not the text parser
    return mlir::success();
  std::optional<ParserCrashSyntax> found = findParserCrashSyntax(text);
  if (!found)
    return mlir::success();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(text, buffer.getBufferIdentifier(),
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  sourceMgr.PrintMessage(os, llvm::SMLoc::getFromPointer(text.data() +
                                                         found->offset),
                         llvm::SourceMgr::DK_Error, found->message);
  return mlir::failure();
}
