// An e-graph image: the columns of an e-graph and a union-find over its
// classes, on a context's GPU (one resident slab, scratch reused across
// passes) or on the host (the CPU reference). See vyre_cuda.h, "E-graph
// congruence".
#ifndef VYRE_EGRAPH_EGRAPH_IMAGE_H_
#define VYRE_EGRAPH_EGRAPH_IMAGE_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "egraph/host_image.h"
#include "kernels/egraph_args.h"
#include "runtime/context/context.h"
#include "runtime/transfer/memory.h"
#include "runtime/program/module_cache.h"
#include "vyre_cuda.h"

namespace vyre {

class EgraphRebuild;

// Version 1 of the structs that grew (callers built against it still work).
inline constexpr size_t kEgraphInfoV1 = offsetof(vyre_egraph_image_info, row_capacity);
inline constexpr size_t kRebuildResultV1 = offsetof(vyre_egraph_rebuild_result, changed_class_count);

// Rows, classes and children a GPU image's memory holds.
struct EgraphCapacity {
  uint64_t rows = 0, classes = 0, children = 0;
};

// Byte offsets of the slab's spans (256-byte aligned), sized by capacity.
struct EgraphLayout {
  uint64_t row_classes = 0, row_ops = 0, child_offsets = 0, child_lengths = 0, signatures = 0;
  uint64_t children = 0, parent = 0, rep = 0, canon = 0;
  uint64_t bytes = 0;
};

// Spans of the scratch slab: the group table first (its size may outlive a
// growth of the rows: see Grow), then, sized by capacity, row hashes, the
// worklist bitset ("dirty rows"), the row records, the table round each
// row's form last changed in, the counter block, the two linked-root
// bitsets, the changed-class bitset and the round's member bitset.
struct EgraphScratchLayout {
  uint64_t table = 0, hash = 0, dirty_rows = 0, records = 0, changed_in = 0, counters = 0;
  uint64_t hooked = 0, changed_bits = 0, member_bits = 0;
  uint64_t table_slots = 0, class_words = 0;
  uint64_t bytes = 0;
};

// Lays out the slabs for an image's capacity; OUT_OF_RANGE when they overflow.
absl::StatusOr<EgraphLayout> LayOutImage(const EgraphCapacity& capacity, const char* what);
// table_slots 0: four slots per row of capacity (a power of two).
absl::StatusOr<EgraphScratchLayout> LayOutScratch(const EgraphCapacity& capacity,
                                                  uint64_t table_slots, const char* what);

class EgraphImage {
 public:
  static absl::StatusOr<std::shared_ptr<EgraphImage>> Create(const vyre_egraph_image_desc& desc,
                                                             const char* what);
  ~EgraphImage();
  EgraphImage(const EgraphImage&) = delete;
  EgraphImage& operator=(const EgraphImage&) = delete;

  bool gpu() const { return context_ != nullptr; }
  Context* context() const { return context_.get(); }
  const std::shared_ptr<Context>& context_ref() const { return context_; }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

  absl::Status Read(uint32_t column, uint64_t first, uint64_t count, uint32_t* dst,
                    const char* what);
  absl::Status Write(uint32_t column, uint64_t first, uint64_t count, const uint32_t* src,
                     const char* what);
  absl::StatusOr<vyre_egraph_image_info> Info(const char* what);
  absl::Status Pass(uint32_t* pairs, uint64_t capacity, uint64_t* out_count, const char* what);
  absl::Status Append(const vyre_egraph_append_desc& desc, const char* what);
  absl::Status ReadChanged(uint32_t* pairs, uint64_t capacity, uint64_t* out_count,
                           const char* what);

  // Rebuilds run through EgraphRebuild, which holds mutex() and the image.
  std::mutex& mutex() { return mu_; }
  // An asynchronous rebuild is unwaited: other calls are INVALID_STATE.
  bool busy() const { return busy_; }
  void set_busy(bool busy) { busy_ = busy; }
  absl::Status CheckIdle(const char* what) const;

 private:
  friend class EgraphRebuild;
  EgraphImage() = default;

  absl::Status CreateOnDevice(const vyre_egraph_image_desc& desc, const char* what);
  absl::Status AppendOnDevice(const vyre_egraph_append_desc& desc, const char* what);
  absl::Status ReadChangedOnDevice(uint32_t* pairs, uint64_t count, const char* what);
  uint64_t index_bytes() const { return index_.bytes() + delta_.bytes(); }
  // Allocates slabs for `capacity` and points args_ at them; the old ones
  // (if any) are left to the caller to copy from and drop.
  absl::Status AllocateStorage(const EgraphCapacity& capacity, uint64_t table_slots,
                               OwnedBytes* slab, OwnedBytes* scratch, EgraphLayout* layout,
                               EgraphScratchLayout* scratch_layout, const char* what) const;
  void PointArgs();
  // Grows the slabs to `capacity`, copying what they hold device to device.
  absl::Status Grow(const EgraphCapacity& capacity, const char* what);
  // Runs the validation kernel over the columns in `columns` (rows
  // [first_row, rows), children from child_base) and waits for its verdict.
  absl::Status ValidateOnDevice(const VyreEgArgs& columns, VyreEgCounters* seen,
                                const char* what);
  // Builds the parent index over every row (the first rebuild, or after a
  // column write), or adds the rows appended since (an append).
  absl::Status BuildIndex(const char* what);
  absl::Status UpdateIndex(const char* what);
  absl::Status EnsureIndexMemory(OwnedBytes* memory, EgraphCapacity* sized, CUdeviceptr* offsets,
                                 CUdeviceptr* rows_of, const char* what);
  // Enqueues the inclusive prefix sum of scan.index_offsets[0,
  // scan.scan_count) in place (scan_sums: scan.scan_blocks words).
  absl::Status EnqueuePrefixSum(const VyreEgArgs& scan, const char* what) const;
  // Enqueues the counting sort of rows [first_row, rows_) by child class.
  absl::Status EnqueueIndexBuild(CUdeviceptr offsets, CUdeviceptr rows_of, uint64_t first_row,
                                 CUdeviceptr sums, const char* what);
  // Sizes the pass's buckets and layout for the rows the image has now.
  absl::Status PreparePass(const char* what);
  absl::Status LoadKernels(const char* what);
  // Sizes the bucketed pass for the image's rows and the device.
  absl::Status PlanBuckets(const char* what);
  absl::Status EnsurePassScratch(uint64_t pairs, const char* what);
  // Enqueues the packing of the row records when a column they copy
  // changed since the last packing (the stream orders it before the work).
  absl::Status EnsureRowRecords(const char* what);
  // Launches `kernel` over `items` with the image's arguments.
  absl::Status Launch(CUfunction kernel, uint64_t items, const VyreEgArgs& args,
                      const char* what) const;
  // Launch's shape for `items` as a kernel node's parameters (device rounds:
  // egraph_rebuild.cc); `params` is the node's kernelParams.
  CUDA_KERNEL_NODE_PARAMS NodeParams(CUfunction kernel, uint64_t items, void** params) const;
  // The image's arguments with the pass's packed forms.
  VyreEgArgs PassArgs() const;
  // Launches `kernel` with an explicit shape and dynamic shared memory, with
  // `args` (PassArgs() when null).
  absl::Status LaunchShaped(CUfunction kernel, uint32_t blocks, uint32_t threads,
                            uint32_t shared_bytes, const char* what,
                            const VyreEgArgs* args = nullptr) const;
  // The pass's kernels after refresh: grouping, then (again after a grown
  // output) the pairs; `bucketed` picks the bucketed pass or the table pass.
  absl::Status EnqueuePassGroups(bool bucketed, const char* what);
  absl::Status EnqueuePassPairs(bool bucketed, const char* what);
  absl::Status ResetCounters(const VyreEgCounters& init, const char* what);
  absl::Status ReadCounters(VyreEgCounters* out, const char* what);
  uint64_t ColumnEntries(uint32_t column) const;
  uint64_t ColumnOffset(uint32_t column) const;

  std::shared_ptr<Context> context_;  // null for CPU images; first: outlives the memory
  uint64_t handle_ = 0;
  uint64_t rows_ = 0, classes_ = 0, child_count_ = 0;
  uint64_t canonical_classes_ = 0;
  EgraphCapacity capacity_;
  uint64_t changed_count_ = 0;  // classes the last rebuild changed
  // What the next rebuild may start from (GPU): the group table holds a live
  // entry for every row's form as of the last round (unless a pass, a
  // column write or a growth of the rows' capacity cleared it), built with
  // the weak hash or not; the counters' table round and placed count, and
  // whether the last round asked for a full one next.
  bool table_valid_ = false, table_weak_ = false, next_full_ = false;
  uint32_t table_round_ = 0, placed_ = 0;
  bool index_stale_ = true;    // the parent index misses rows (built at the next rebuild)
  uint64_t planned_rows_ = ~uint64_t{0};  // the rows the pass's plan was made for
  // What the device union-find is known to be (VYRE_EG_PARENT_*): every class
  // its own root from creation until something merges; flat after a finished
  // rebuild; unknown while one runs (or if one stopped part way).
  uint32_t parent_state_ = VYRE_EG_PARENT_IDENTITY;

  // CPU images.
  std::unique_ptr<egraph::HostImage> host_;

  // GPU images.
  EgraphLayout layout_;
  EgraphScratchLayout scratch_layout_;
  OwnedBytes slab_;
  OwnedBytes scratch_;
  OwnedBytes pinned_counters_;  // VyreEgCounters read back / written through here
  // Pass scratch, grown on demand: group slot per row, minimum class per
  // table slot, the pair set and the pair output.
  OwnedBytes pass_scratch_;
  OwnedBytes index_;  // the parent index (offsets, rows, prefix-sum scratch)
  EgraphCapacity index_capacity_;
  uint64_t index_rows_covered_ = 0;  // rows [0, this) are in index_
  CUdeviceptr index_offsets_ = 0, index_rows_of_ = 0;
  OwnedBytes delta_;  // the index of the rows appended since
  EgraphCapacity delta_capacity_;
  CUdeviceptr delta_offsets_ = 0, delta_rows_of_ = 0;
  CUdeviceptr scan_sums_[2] = {0, 0};  // of index_ and of delta_
  uint64_t pass_pair_capacity_ = 0;
  // The pass's list and forms: bytes of them in pass_scratch_ (0: in the
  // table's span), and their places within whichever span holds them.
  uint64_t pass_list_bytes_ = 0;
  uint64_t pass_list_at_ = 0, pass_forms_at_ = 0;
  VyreEgArgs args_{};
  std::shared_ptr<LoadedModule> module_;
  struct Kernels {
    CUfunction init_parent = nullptr, apply_unions = nullptr, compress = nullptr, settle = nullptr;
    CUfunction relink = nullptr;
    CUfunction signatures = nullptr, refresh = nullptr, insert = nullptr;
    CUfunction round_end = nullptr, pass_group = nullptr, pass_emit = nullptr;
    CUfunction pack_rows = nullptr;
    CUfunction part_count = nullptr, part_prefix = nullptr, part_scatter = nullptr;
    CUfunction bucket_group = nullptr, pair_set_clear = nullptr, bucket_emit = nullptr;
    CUfunction validate = nullptr, rebase_offsets = nullptr, mark_rows = nullptr;
    CUfunction index_count = nullptr, index_scatter = nullptr;
    CUfunction scan_reduce = nullptr, scan_top = nullptr, scan_down = nullptr;
    CUfunction changed_words = nullptr, changed_emit = nullptr, mark_parents = nullptr;
  } kernels_;
  // The bucketed pass's shape for this image's rows (see congruence.cu):
  // buckets and their shared-memory table, and the partition's one or two
  // levels (level 1: one segment of every row into bins1 bins, blocks1
  // blocks; level 2: each of those into bins2, blocks2 blocks apiece). Not
  // `usable` when the table would not fit the device's shared memory.
  struct BucketPlan {
    bool usable = false;
    uint32_t buckets = 1, slots = 0, pass_shared = 0, levels = 1;
    uint32_t stage = 0, emit_shared = 0;  // pairs the emit kernel collects in shared memory
    uint32_t emit_buckets = 1;            // buckets per emit block
    uint32_t bins1 = 1, shift1 = 0, blocks1 = 1;
    uint32_t bins2 = 1, shift2 = 0, blocks2 = 1;
  } bucket_plan_;
  // In the pass scratch: the partition's per-block counts and the level-1
  // bins' first places (the level-2 segments).
  CUdeviceptr part_counts_ = 0, part_segments_ = 0;
  CUdeviceptr pass_forms_ = 0;  // in the table's span
  uint32_t max_blocks_ = 1;

  std::mutex mu_;  // serialises calls on the image
  bool busy_ = false;
  bool counted_ = false;
  bool records_stale_ = true;  // a column of the row records changed since they were packed
};

// The process-wide table of e-graph image handles.
HandleRegistry<EgraphImage>& EgraphImages();

}  // namespace vyre

#endif  // VYRE_EGRAPH_EGRAPH_IMAGE_H_
