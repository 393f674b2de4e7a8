// A CPU image (VYRE_EGRAPH_DEVICE_CPU): the columns on the host, the
// union-find, and what an incremental rebuild keeps between rebuilds. The
// library's CPU reference behind the same calls as a GPU image; EgraphImage
// delegates to it and does the argument checks and locking.
//
// Rebuilds: the first of an image, any with VYRE_EGRAPH_REBUILD_RESET, the
// first after a column write and the first after a full rebuild that
// max_rounds stopped are full (CpuRebuild: every row in round 1, threads_
// workers). The others are incremental (cpu_incremental.h): the state is
// indexed on the first of them from the fixpoint the full rebuild left (that
// indexing visits no row as a round does, so rows_visited leaves it out) and
// kept from then on; appended rows join it on the next rebuild.
#ifndef VYRE_EGRAPH_HOST_IMAGE_H_
#define VYRE_EGRAPH_HOST_IMAGE_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "egraph/cpu_reference.h"
#include "vyre_cuda.h"

namespace vyre::egraph {

class CpuIncremental;

class HostImage {
 public:
  // `desc` is validated (shape, class ids, child ranges) by the caller.
  explicit HostImage(const vyre_egraph_image_desc& desc);
  ~HostImage();
  HostImage(const HostImage&) = delete;
  HostImage& operator=(const HostImage&) = delete;

  uint64_t rows() const { return row_classes_.size(); }
  uint64_t classes() const { return parent_.size(); }
  uint64_t child_count() const { return children_.size(); }
  uint64_t canonical_classes() const { return canonical_classes_; }
  uint64_t bytes() const;
  // Capacities: what the vectors hold before they reallocate.
  uint64_t row_capacity() const { return row_classes_.capacity(); }
  uint64_t class_capacity() const { return parent_.capacity(); }
  uint64_t child_capacity() const { return children_.capacity(); }

  HostColumns columns() const;
  // A column by VYRE_EGRAPH_COLUMN_* (CANONICAL_CLASSES: the union-find).
  const std::vector<uint32_t>& Column(uint32_t column) const;
  // Overwrites entries of a row column or of the children (validated by the
  // caller); the next rebuild is full.
  void Write(uint32_t column, uint64_t first, uint64_t count, const uint32_t* src);

  // Appends classes and rows (validated by the caller against the class
  // count after the append); the next rebuild visits the new rows.
  void Append(const vyre_egraph_append_desc& desc);

  // Applies desc's unions (validated) and rebuilds to the fixpoint (or
  // desc.max_rounds), incrementally unless desc.flags has RESET or nothing
  // is known yet (see above). Fills rounds, merges, union_merges,
  // rows_visited, classes_before/after, changed_class_count and full_rounds.
  vyre_egraph_rebuild_result Rebuild(const vyre_egraph_rebuild_desc& desc);

  // The pass under the current union-find (see CpuCongruencePairs).
  std::vector<std::pair<uint32_t, uint32_t>> Pass() const;

  // (class, canonical class) for every class the last rebuild changed,
  // sorted by class.
  const std::vector<std::pair<uint32_t, uint32_t>>& changed() const { return changed_; }

 private:
  std::vector<uint32_t>* MutableColumn(uint32_t column);
  // Makes incremental_ fit a rebuild with `weak` hashing; false when only a
  // full rebuild can start from the image's state.
  bool PrepareIncremental(bool weak);
  vyre_egraph_rebuild_result RebuildFull(const vyre_egraph_rebuild_desc& desc);
  vyre_egraph_rebuild_result RebuildIncremental(const vyre_egraph_rebuild_desc& desc);

  unsigned threads_ = 0;
  std::vector<uint32_t> row_classes_, row_ops_, child_offsets_, child_lengths_, signatures_;
  std::vector<uint32_t> children_, parent_;
  uint64_t canonical_classes_ = 0;
  std::vector<std::pair<uint32_t, uint32_t>> changed_;
  // parent_ is the congruence fixpoint over rows [0, closed_rows_): the last
  // rebuild finished, and no column was written since.
  bool closed_ = false;
  uint64_t closed_rows_ = 0;
  // What the incremental rebuilds learned (parent index, canonical forms,
  // hash-cons, pending rows); null until the first incremental rebuild, and
  // after a full rebuild or a column write.
  std::unique_ptr<CpuIncremental> incremental_;
};

// A host hash of one row as given (CPU images compute their signatures here).
uint32_t RowSignature(uint32_t op, const uint32_t* kids, uint32_t len);

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_HOST_IMAGE_H_
