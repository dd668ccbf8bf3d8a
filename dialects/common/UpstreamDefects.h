//===- UpstreamDefects.h - input MLIR 22's parser crashes on ----*- C++ -*-===//
//
// Text that libMLIR 22's own parser crashes on instead of diagnosing, found
// by fuzzing Loom's tools (stock mlir-opt-22 crashes on it the same way).
// Loom cannot fix libMLIR, so its tools (loom-opt, loomc) refuse such input
// with a located error before the parser sees it: a user gets a message
// naming the line, not a stack dump. test/tools/upstream-defects.test pins
// both halves: Loom's tools refuse the input, and stock mlir-opt-22 still
// crashes on it (when it stops crashing, the check here can go).
//
// - `array<index: ...>`: a dense array attribute of `index` elements.
//   `parseDenseArrayAttr` accepts `index` as an element type and then asks
//   it for an integer-or-float bit width, which `index` has not
//   (a segmentation fault in a release libMLIR). The dense array element
//   types MLIR supports are i1, i8, i16, i32, i64, f32 and f64; `index`
//   values are written `array<i64: ...>`.
//
// The scan is lexical: it skips `//` comments and string literals, and
// takes `array` only as a whole word that is not part of a dialect's name
// (`!foo.array<index>` is that dialect's syntax).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_COMMON_UPSTREAMDEFECTS_H
#define LOOM_DIALECTS_COMMON_UPSTREAMDEFECTS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"

#include <cctype>

namespace loom {

/// Reports (through `sourceMgr`, at the offending text) the first construct
/// of buffer `bufferId` that libMLIR's parser would crash on; true when
/// there is one.
inline bool reportUpstreamParserDefects(llvm::SourceMgr &sourceMgr,
                                        unsigned bufferId) {
  llvm::StringRef text = sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
  auto isWordChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '$' || c == '.';
  };
  auto skipSpace = [&](size_t i) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    return i;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && text.substr(i).starts_with("//")) {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        return false;
      continue;
    }
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c != 'a' || !text.substr(i).starts_with("array") ||
        (i > 0 && (isWordChar(text[i - 1]) || text[i - 1] == '!' ||
                   text[i - 1] == '#')))
      continue;
    size_t j = skipSpace(i + 5);
    if (j >= text.size() || text[j] != '<')
      continue;
    j = skipSpace(j + 1);
    if (!text.substr(j).starts_with("index") ||
        (j + 5 < text.size() && isWordChar(text[j + 5])))
      continue;
    sourceMgr.PrintMessage(
        llvm::SMLoc::getFromPointer(text.data() + i), llvm::SourceMgr::DK_Error,
        "a dense array of 'index' elements crashes MLIR 22's parser (an "
        "upstream defect, not diagnosed there); write array<i64: ...>");
    return true;
  }
  return false;
}

} // namespace loom

#endif // LOOM_DIALECTS_COMMON_UPSTREAMDEFECTS_H
