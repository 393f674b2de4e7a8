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

// Checks a reservation (or a growth) of `rows`, `classes` and `children`
// against an image's limits.
absl::Status CheckCapacity(uint64_t rows, uint64_t classes, uint64_t children, const char* what);

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

// The value columns of a create or an append, as the caller passed them:
// class ids (row_classes, children) must be below class_count, each row's
// child range inside [0, child_count) and after the previous row's.
struct ColumnsView {
  uint64_t rows = 0, child_count = 0, class_count = 0;
  const uint32_t* row_classes = nullptr;
  const uint32_t* child_offsets = nullptr;
  const uint32_t* child_lengths = nullptr;
  const uint32_t* children = nullptr;
};
ColumnsView ViewOf(const vyre_egraph_image_desc& desc);
// An append's columns; class_total is the class count after it. Indices in
// messages are the desc's.
ColumnsView ViewOf(const vyre_egraph_append_desc& desc, uint64_t class_total);

// The host check of every value: row classes, then children, then ranges.
absl::Status CheckColumns(const ColumnsView& v, const char* what);

// "None found" for ColumnsErrorAt.
inline constexpr uint64_t kNoBadIndex = 0xFFFFFFFFu;
// The error CheckColumns gives, from the first bad index of each check as
// the device found them (kNoBadIndex: none): the same check order, the same
// entry, the same message. OK when all three are kNoBadIndex.
absl::Status ColumnsErrorAt(const ColumnsView& v, uint64_t bad_row_class, uint64_t bad_child,
                            uint64_t bad_range, const char* what);

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_COLUMNS_H_
