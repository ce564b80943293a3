// Declarations of the generated Unicode tables (src/text/unicode_tables.cpp, written by
// tools/gen_unicode_tables.py). Only src/text/unicode.cpp reads them; everyone else uses unicode.h.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mere::unicode::tables {

struct Record {
  uint8_t category;  // index into unicode::Category
  uint8_t ccc;       // canonical combining class (Unicode 9.0)
  uint8_t flags;     // 1 White_Space, 2 NFC_QC=No, 4 NFC_QC=Maybe, 8 has a canonical decomposition
};

constexpr int kBlockShift = 7;  // stage-2 blocks of 128 code points
extern const Record kRecords[];
extern const uint16_t kStage1[];
extern const uint8_t kStage2[];
extern const uint32_t kDecompKeys[];
extern const uint32_t kDecompOffsets[];  // (offset into kDecompData << 4) | length
extern const uint32_t kDecompData[];
extern const uint64_t kCompKeys[];       // (first << 21) | second, sorted
extern const uint32_t kCompValues[];
extern const uint32_t kFoldFrom[];       // simple case folding (C + S), sorted
extern const uint32_t kFoldTo[];
extern const size_t kRecordCount, kStage1Count, kStage2Count, kDecompCount, kDecompDataCount, kCompCount,
    kFoldCount;

}  // namespace mere::unicode::tables
