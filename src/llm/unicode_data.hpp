#pragma once
// The generated tables (src/llm/unicode_data.cpp, written by scripts/gen_unicode_data.py); see that script for
// their layout. Used only by unicode.cpp.
#include <cstddef>
#include <cstdint>

namespace wick::llm::data {

struct CaseRun {
  uint32_t first, count, stride;
  int32_t delta;
};
struct Decomposition {
  uint32_t cp, first, second;  // second == 0: singleton
  uint32_t composes;           // 1: NFC composes (first, second) back into cp
};

extern const char* const kUnicodeVersion;
extern const uint32_t kCategoryRanges[];  // start << 8 | Category
extern const size_t kCategoryRangesSize;
extern const uint32_t kCccRanges[];  // start << 8 | combining class
extern const size_t kCccRangesSize;
extern const CaseRun kLowerRuns[];
extern const size_t kLowerRunsSize;
extern const Decomposition kDecomp[];
extern const size_t kDecompSize;

}  // namespace wick::llm::data
