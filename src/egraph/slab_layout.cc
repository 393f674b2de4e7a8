#include "egraph/slab_layout.h"

#include <algorithm>

#include "base/checked_math.h"
#include "base/status.h"
#include "egraph/egraph_image.h"

namespace vyre {
namespace egraph {

bool Place(uint64_t* cursor, uint64_t bytes, uint64_t* at) {
  auto aligned = CheckedAlignUp(*cursor, kSpanAlignment);
  auto end = aligned ? CheckedAdd(*aligned, bytes) : std::nullopt;
  if (!end) return false;
  *at = *aligned;
  *cursor = *end;
  return true;
}

absl::Status LayoutOverflow(const char* what) {
  return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                "%s: the image's columns total more than 2^64 bytes. Fix: split the e-graph.",
                what);
}

}  // namespace egraph

using egraph::kSpanAlignment;
using egraph::LayoutOverflow;
using egraph::Place;
using egraph::TableSlotsFor;

absl::StatusOr<EgraphLayout> LayOutImage(const EgraphCapacity& capacity, const char* what) {
  EgraphLayout l;
  uint64_t cursor = 0;
  auto row_bytes = CheckedMul(capacity.rows, 4);
  auto class_bytes = CheckedMul(capacity.classes, 4);
  auto child_bytes = CheckedMul(capacity.children, 4);
  if (!row_bytes || !class_bytes || !child_bytes) return LayoutOverflow(what);
  const bool ok = Place(&cursor, *row_bytes, &l.row_classes) &&
                  Place(&cursor, *row_bytes, &l.row_ops) &&
                  Place(&cursor, *row_bytes, &l.child_offsets) &&
                  Place(&cursor, *row_bytes, &l.child_lengths) &&
                  Place(&cursor, *row_bytes, &l.signatures) &&
                  Place(&cursor, *child_bytes, &l.children) &&
                  Place(&cursor, *class_bytes, &l.parent) &&
                  Place(&cursor, *class_bytes, &l.rep) &&
                  Place(&cursor, *child_bytes, &l.canon);
  if (!ok) return LayoutOverflow(what);
  l.bytes = std::max<uint64_t>(cursor, kSpanAlignment);
  return l;
}

uint64_t egraph::TableSlotsFor(uint64_t rows) {
  // Four slots per row keep the table at most a quarter full after a full
  // round; later rounds add their changed rows, and a table over half full
  // is cleared by a full round (see congruence.cu).
  return std::max<uint64_t>(*NextPowerOfTwo(std::max<uint64_t>(rows, 1) * 4), 1024);
}

absl::StatusOr<EgraphScratchLayout> LayOutScratch(const EgraphCapacity& capacity,
                                                  uint64_t table_slots, const char* what) {
  EgraphScratchLayout l;
  const uint64_t rows = capacity.rows;
  // Table entries are u64 (hash, table round, row); a row record is 16
  // bytes.
  l.table_slots = table_slots != 0 ? table_slots : TableSlotsFor(rows);
  l.class_words = std::max<uint64_t>((capacity.classes + 31) / 32, 1);
  uint64_t cursor = 0;
  const bool ok = Place(&cursor, l.table_slots * 8, &l.table) &&
                  Place(&cursor, rows * 4, &l.hash) &&
                  Place(&cursor, (rows + 31) / 32 * 4, &l.dirty_rows) &&
                  Place(&cursor, rows * 16, &l.records) &&
                  Place(&cursor, rows, &l.changed_in) &&
                  Place(&cursor, sizeof(VyreEgCounters), &l.counters) &&
                  Place(&cursor, l.class_words * 2 * 4, &l.hooked) &&
                  Place(&cursor, l.class_words * 4, &l.changed_bits) &&
                  Place(&cursor, l.class_words * 4, &l.member_bits);
  if (!ok) return LayoutOverflow(what);
  l.bytes = cursor;
  return l;
}

}  // namespace vyre
