// Validation of e-graph columns, shared by image creation and column writes:
// equal row counts, every child range inside the children array, in row order
// and not overlapping, class ids below the class count, sizes that fit u32.
#ifndef VYRE_EGRAPH_COLUMNS_H_
#define VYRE_EGRAPH_COLUMNS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "vyre_cuda.h"

namespace vyre::egraph {

// Largest row count: row indices are u32 with 0xFFFFFFFF meaning "none", and
// the group table holds four slots per row in a u32-indexed power of two.
inline constexpr uint64_t kMaxRows = uint64_t{1} << 30;

// Checks the counts and pointers of an image descriptor (not the values).
absl::Status CheckShape(const vyre_egraph_image_desc& desc, const char* what);

// Checks class ids: every value below class_count. `column` names it.
absl::Status CheckClassIds(const uint32_t* ids, uint64_t count, uint64_t first,
                           uint64_t class_count, const char* column, const char* what);

// Checks rows [first, first + count): each child range lies inside
// [0, child_count), starts at or after the previous row's range ends
// (`previous_end`, 0 for row 0) and, for the last row, ends at or before
// `next_offset` (child_count when there is no next row).
absl::Status CheckChildRanges(const uint32_t* offsets, const uint32_t* lengths, uint64_t count,
                              uint64_t first, uint64_t child_count, uint64_t previous_end,
                              uint64_t next_offset, const char* what);

// Checks an append's counts and pointers (not the values) against an image
// of `rows` rows, `classes` classes and `children` children: the totals
// after it must fit the image's limits.
absl::Status CheckAppendShape(const vyre_egraph_append_desc& desc, uint64_t rows,
                              uint64_t classes, uint64_t children, const char* what);

// Checks an append's values on the host: class ids below `class_total` (the
// class count after the append) and child ranges inside desc.children.
// Indices in the messages are the desc's.
absl::Status CheckAppendValues(const vyre_egraph_append_desc& desc, uint64_t class_total,
                               const char* what);

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_COLUMNS_H_
