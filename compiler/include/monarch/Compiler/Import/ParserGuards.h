//===- ParserGuards.h - Text the upstream parser crashes on ----*- C++ -*-===//
//
// MLIR 22's asm parser crashes (a segfault in a release build) on a few
// inputs instead of diagnosing them. Every tool that parses .mlir text a user
// or a fuzzer wrote (monarch-opt, through traceOptMain; the fuzz harness)
// checks the text first and reports such a construct as an ordinary error:
//
//   if (failed(rejectParserCrashSyntax(*buffer, llvm::errs())))
//     return failure();
//
// Known constructs (bench/reliability/campaign.py found the first):
//  * `array<index: ...>`: parseDenseArrayAttr asks an index type for its bit
//    width (FloatType::getWidth on a non-float). Dense arrays of index are
//    not a valid attribute anyway (integer or float elements only).
//
// Comments and string literals are skipped, so documentation that mentions
// the construct still parses.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_COMPILER_IMPORT_PARSERGUARDS_H
#define MONARCH_COMPILER_IMPORT_PARSERGUARDS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace monarch {

/// A construct the upstream parser would crash on: where it starts in the
/// text and why it is refused.
struct ParserCrashSyntax {
  size_t offset;
  llvm::StringRef message;
};

/// The first such construct of `text` outside comments and strings.
std::optional<ParserCrashSyntax> findParserCrashSyntax(llvm::StringRef text);

/// Fails, with "<buffer>:line:col: error: ..." on `os`, if `buffer` is text
/// that holds such a construct; succeeds for other text and for bytecode.
mlir::LogicalResult rejectParserCrashSyntax(const llvm::MemoryBuffer &buffer,
                                            llvm::raw_ostream &os);

} // namespace monarch

#endif // MONARCH_COMPILER_IMPORT_PARSERGUARDS_H
