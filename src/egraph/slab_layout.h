// How an e-graph image's device memory is laid out: spans placed at
// 256-byte boundaries (Place), the sizes of the slab, the scratch slab and
// the group table, and the parent index's prefix-sum shape (shared with
// src/kernels/egraph_congruence.cu). Internal to src/egraph.
#ifndef VYRE_EGRAPH_SLAB_LAYOUT_H_
#define VYRE_EGRAPH_SLAB_LAYOUT_H_

#include <cstdint>

#include "absl/status/status.h"

namespace vyre::egraph {

inline constexpr uint64_t kSpanAlignment = 256;
// The parent index's prefix sum (congruence.cu's kScanThreads, kScanTile).
inline constexpr uint32_t kScanThreads = 256;
inline constexpr uint64_t kScanTile = 2048;

// Places `bytes` at the cursor (aligned) and advances it; false on overflow.
bool Place(uint64_t* cursor, uint64_t bytes, uint64_t* at);

// OUT_OF_RANGE: the image's spans total more than 2^64 bytes.
absl::Status LayoutOverflow(const char* what);

// Group-table slots for `rows` rows of capacity (a power of two).
uint64_t TableSlotsFor(uint64_t rows);

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_SLAB_LAYOUT_H_
