#include "egraph/columns.h"

#include "base/status.h"

namespace vyre::egraph {

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
  struct {
    const void* pointer;
    uint64_t count;
    const char* name;
  } columns[] = {
      {d.row_classes, d.row_count, "row_classes"},   {d.row_ops, d.row_count, "row_ops"},
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
                  "%s: %u rows after %u appended rows are more than an image holds (2^30). Fix: "
                  "split the e-graph, or rebuild it in parts.",
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

absl::Status CheckAppendValues(const vyre_egraph_append_desc& d, uint64_t class_total,
                               const char* what) {
  VYRE_RETURN_IF_ERROR(
      CheckClassIds(d.row_classes, d.row_count, 0, class_total, "row_classes", what));
  VYRE_RETURN_IF_ERROR(CheckClassIds(d.children, d.child_count, 0, class_total, "children", what));
  return CheckChildRanges(d.child_offsets, d.child_lengths, d.row_count, 0, d.child_count, 0,
                          d.child_count, what);
}

}  // namespace vyre::egraph
