#include "egraph/columns.h"

#include "base/status.h"

namespace vyre::egraph {
namespace {

// A column NULL with entries declared; `Desc` is an image or append desc
// (the same column names).
template <typename Desc>
absl::Status CheckColumnPointers(const Desc& d, const char* what) {
  struct {
    const void* pointer;
    uint64_t count;
    const char* name;
  } columns[] = {
      {d.row_classes, d.row_count, "row_classes"},     {d.row_ops, d.row_count, "row_ops"},
      {d.child_offsets, d.row_count, "child_offsets"}, {d.child_lengths, d.row_count, "child_lengths"},
      {d.children, d.child_count, "children"},
  };
  for (const auto& c : columns) {
    if (c.count > 0 && c.pointer == nullptr) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %s is NULL but %u entries are declared. Fix: pass the column (one u32 "
                    "per entry).",
                    what, c.name, c.count);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckShape(const vyre_egraph_image_desc& d, const char* what) {
  if (d.row_count > kMaxRows) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %u rows are more than an image holds (2^30). Fix: split the e-graph, or "
                  "rebuild it in parts.",
                  what, d.row_count);
  }
  if (d.class_count > UINT32_MAX) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: class_count %u does not fit the u32 class ids. Fix: number e-classes "
                  "densely from 0 with fewer than 2^32 of them.",
                  what, d.class_count);
  }
  if (d.child_count > UINT32_MAX) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: child_count %u does not fit the u32 child offsets. Fix: split the "
                  "e-graph into images of fewer than 2^32 children.",
                  what, d.child_count);
  }
  if (d.row_count > 0 && d.class_count == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %u rows but class_count is 0, so no row can name its class. Fix: pass "
                  "the number of e-classes.",
                  what, d.row_count);
  }
  return CheckColumnPointers(d, what);
}

absl::Status CheckCapacity(uint64_t rows, uint64_t classes, uint64_t children, const char* what) {
  if (rows > kMaxRows || classes > UINT32_MAX || children > UINT32_MAX) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: a capacity of %u rows, %u classes and %u children is past an image's "
                  "limits (2^30 rows, 2^32 - 1 classes and children). Fix: reserve less, or "
                  "split the e-graph.",
                  what, rows, classes, children);
  }
  return absl::OkStatus();
}

absl::Status CheckClassIds(const uint32_t* ids, uint64_t count, uint64_t first,
                           uint64_t class_count, const char* column, const char* what) {
  for (uint64_t i = 0; i < count; ++i) {
    if (ids[i] >= class_count) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %s[%u] is class %u, not below class_count %u. Fix: number e-classes "
                    "from 0 to class_count - 1.",
                    what, column, first + i, ids[i], class_count);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckChildRanges(const uint32_t* offsets, const uint32_t* lengths, uint64_t count,
                              uint64_t first, uint64_t child_count, uint64_t previous_end,
                              uint64_t next_offset, const char* what) {
  uint64_t end = previous_end;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t row = first + i;
    const uint64_t off = offsets[i];
    const uint64_t stop = off + lengths[i];  // both u32: no overflow in 64 bits
    if (stop > child_count) {
      return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                    "%s: row %u's children [%u, +%u) end past the %u entries of children. Fix: "
                    "keep child_offsets[r] + child_lengths[r] within child_count.",
                    what, row, off, lengths[i], child_count);
    }
    if (off < end) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: row %u's children start at %u, before the previous row's end at %u "
                    "(offsets out of order or overlapping). Fix: lay out each row's children "
                    "after the previous row's, in row order.",
                    what, row, off, end);
    }
    end = stop;
  }
  if (count > 0 && end > next_offset) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: row %u's children end at %u, past the next row's start at %u "
                  "(overlapping). Fix: keep each row's children before the next row's.",
                  what, first + count - 1, end, next_offset);
  }
  return absl::OkStatus();
}

absl::Status CheckAppendShape(const vyre_egraph_append_desc& d, uint64_t rows, uint64_t classes,
                              uint64_t children, const char* what) {
  // Each count is below 2^62 when it passes, so the sums cannot wrap.
  if (d.row_count > kMaxRows || rows + d.row_count > kMaxRows) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: the image's %u rows and %u appended ones are more than an image holds "
                  "(2^30). Fix: split the e-graph, or rebuild it in parts.",
                  what, rows, d.row_count);
  }
  if (d.class_count > UINT32_MAX || classes + d.class_count > UINT32_MAX) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %u classes and %u new ones do not fit the u32 class ids (at most 2^32 - "
                  "1). Fix: start a new image for the e-graph's next part.",
                  what, classes, d.class_count);
  }
  if (d.child_count > UINT32_MAX || children + d.child_count > UINT32_MAX) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %u children and %u new ones do not fit the u32 child offsets (at most "
                  "2^32 - 1). Fix: start a new image for the e-graph's next part.",
                  what, children, d.child_count);
  }
  if (d.row_count > 0 && classes + d.class_count == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %u rows but the image has no class and the append adds none, so no row "
                  "can name its class. Fix: pass the new classes in class_count.",
                  what, d.row_count);
  }
  return CheckColumnPointers(d, what);
}

ColumnsView ViewOf(const vyre_egraph_image_desc& d) {
  ColumnsView v;
  v.rows = d.row_count;
  v.child_count = d.child_count;
  v.class_count = d.class_count;
  v.row_classes = d.row_classes;
  v.child_offsets = d.child_offsets;
  v.child_lengths = d.child_lengths;
  v.children = d.children;
  return v;
}

ColumnsView ViewOf(const vyre_egraph_append_desc& d, uint64_t class_total) {
  ColumnsView v;
  v.rows = d.row_count;
  v.child_count = d.child_count;
  v.class_count = class_total;
  v.row_classes = d.row_classes;
  v.child_offsets = d.child_offsets;
  v.child_lengths = d.child_lengths;
  v.children = d.children;
  return v;
}

absl::Status CheckColumns(const ColumnsView& v, const char* what) {
  VYRE_RETURN_IF_ERROR(
      CheckClassIds(v.row_classes, v.rows, 0, v.class_count, "row_classes", what));
  VYRE_RETURN_IF_ERROR(
      CheckClassIds(v.children, v.child_count, 0, v.class_count, "children", what));
  return CheckChildRanges(v.child_offsets, v.child_lengths, v.rows, 0, v.child_count, 0,
                          v.child_count, what);
}

absl::Status ColumnsErrorAt(const ColumnsView& v, uint64_t bad_row_class, uint64_t bad_child,
                            uint64_t bad_range, const char* what) {
  if (bad_row_class < v.rows) {
    return CheckClassIds(v.row_classes + bad_row_class, 1, bad_row_class, v.class_count,
                         "row_classes", what);
  }
  if (bad_child < v.child_count) {
    return CheckClassIds(v.children + bad_child, 1, bad_child, v.class_count, "children", what);
  }
  if (bad_range < v.rows) {
    const uint64_t r = bad_range;
    const uint64_t previous_end =
        r > 0 ? uint64_t{v.child_offsets[r - 1]} + v.child_lengths[r - 1] : 0;
    return CheckChildRanges(v.child_offsets + r, v.child_lengths + r, 1, r, v.child_count,
                            previous_end, v.child_count, what);
  }
  return absl::OkStatus();
}

}  // namespace vyre::egraph
