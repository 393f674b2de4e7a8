// A GPU image's device memory over its life: allocation for a capacity,
// creation (uploads, the device-side check), growth, appends, the parent
// index and the changed-class read-back. The rest of EgraphImage is in
// egraph_image.cc.
#include <algorithm>
#include <cstring>

#include "base/checked_math.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "egraph/columns.h"
#include "egraph/egraph_image.h"
#include "egraph/slab_layout.h"
#include "runtime/transfer/host_upload.h"

namespace vyre {

using egraph::kScanThreads;
using egraph::kScanTile;
using egraph::Place;

absl::Status EgraphImage::AllocateStorage(const EgraphCapacity& capacity, uint64_t table_slots,
                                          OwnedBytes* slab, OwnedBytes* scratch,
                                          EgraphLayout* layout,
                                          EgraphScratchLayout* scratch_layout,
                                          const char* what) const {
  Context& ctx = *context_;
  VYRE_ASSIGN_OR_RETURN(*layout, LayOutImage(capacity, what));
  VYRE_ASSIGN_OR_RETURN(*scratch_layout, LayOutScratch(capacity, table_slots, what));
  VYRE_ASSIGN_OR_RETURN(*slab, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                    &ctx.telemetry(), layout->bytes, what));
  VYRE_ASSIGN_OR_RETURN(*scratch, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                       &ctx.telemetry(), scratch_layout->bytes,
                                                       what));
  // The bitsets start empty: the worklist, the linked roots and the changed
  // classes are only ever set bit by bit.
  const CUdeviceptr base = scratch->device();
  VYRE_CU(what, cuMemsetD32Async, base + scratch_layout->dirty_rows, 0,
          (capacity.rows + 31) / 32, ctx.stream());
  VYRE_CU(what, cuMemsetD32Async, base + scratch_layout->hooked, 0,
          scratch_layout->class_words * 2, ctx.stream());
  VYRE_CU(what, cuMemsetD32Async, base + scratch_layout->changed_bits, 0,
          scratch_layout->class_words, ctx.stream());
  VYRE_CU(what, cuMemsetD32Async, base + scratch_layout->member_bits, 0,
          scratch_layout->class_words, ctx.stream());
  ctx.telemetry().memset_operations.Add(4);
  return absl::OkStatus();
}

void EgraphImage::PointArgs() {
  const CUdeviceptr base = slab_.device();
  const CUdeviceptr scratch = scratch_.device();
  args_.row_classes = base + layout_.row_classes;
  args_.row_ops = base + layout_.row_ops;
  args_.child_offsets = base + layout_.child_offsets;
  args_.child_lengths = base + layout_.child_lengths;
  args_.signatures = base + layout_.signatures;
  args_.children = base + layout_.children;
  args_.parent = base + layout_.parent;
  args_.rep = base + layout_.rep;
  args_.canon = base + layout_.canon;
  args_.hash = scratch + scratch_layout_.hash;
  args_.dirty_rows = scratch + scratch_layout_.dirty_rows;
  args_.changed_in = scratch + scratch_layout_.changed_in;
  args_.table = scratch + scratch_layout_.table;
  args_.records = scratch + scratch_layout_.records;
  args_.counters = scratch + scratch_layout_.counters;
  args_.hooked = scratch + scratch_layout_.hooked;
  args_.changed_bits = scratch + scratch_layout_.changed_bits;
  args_.member_bits = scratch + scratch_layout_.member_bits;
  args_.table_mask = static_cast<uint32_t>(scratch_layout_.table_slots - 1);
  args_.rows = static_cast<uint32_t>(rows_);
  args_.classes = static_cast<uint32_t>(classes_);
  args_.hooked_words = static_cast<uint32_t>(std::max<uint64_t>((classes_ + 31) / 32, 1));
  args_.first_row = args_.first_class = args_.child_base = args_.child_limit = 0;
}

namespace {

VyreEgCounters ValidationCounters() {
  VyreEgCounters init{};
  init.bad_row_class = init.bad_child = init.bad_range = 0xFFFFFFFFu;
  return init;
}

}  // namespace

absl::Status EgraphImage::ValidateOnDevice(const VyreEgArgs& columns, VyreEgCounters* seen,
                                           const char* what) {
  VYRE_RETURN_IF_ERROR(ResetCounters(ValidationCounters(), what));
  const uint64_t items = std::max<uint64_t>(columns.rows - columns.first_row, columns.child_limit);
  VYRE_RETURN_IF_ERROR(Launch(kernels_.validate, items, columns, what));
  return ReadCounters(seen, what);  // waits: the uploads before it read the caller's memory
}

absl::Status EgraphImage::CreateOnDevice(const vyre_egraph_image_desc& desc, const char* what) {
  Context& ctx = *context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  capacity_.rows = std::max(rows_, desc.row_capacity);
  capacity_.classes = std::max(classes_, desc.class_capacity);
  capacity_.children = std::max(child_count_, desc.child_capacity);
  VYRE_RETURN_IF_ERROR(
      AllocateStorage(capacity_, 0, &slab_, &scratch_, &layout_, &scratch_layout_, what));
  VYRE_ASSIGN_OR_RETURN(pinned_counters_,
                        OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, ctx.cu(),
                                             &ctx.telemetry(), sizeof(VyreEgCounters), what));
  VYRE_RETURN_IF_ERROR(LoadKernels(what));
  PointArgs();
  struct {
    const uint32_t* from;
    CUdeviceptr to;
    uint64_t entries;
  } uploads[] = {
      {desc.row_classes, args_.row_classes, rows_},     {desc.row_ops, args_.row_ops, rows_},
      {desc.child_offsets, args_.child_offsets, rows_}, {desc.child_lengths, args_.child_lengths, rows_},
      {desc.row_signatures, args_.signatures, rows_},   {desc.children, args_.children, child_count_},
  };
  HostUploads copies(ctx);
  for (const auto& u : uploads) {
    if (u.from == nullptr) continue;
    absl::Status copied = copies.Add(u.to, u.from, u.entries * 4, what);
    if (!copied.ok()) {
      copies.Wait(what).IgnoreError();  // the copies before it still read the caller's memory
      return copied;
    }
  }
  // The values are checked on the device once they land (no serial host
  // pass over the columns); the verdict's message names the entry exactly
  // as the host checks would.
  VyreEgArgs check = args_;
  check.child_limit = static_cast<uint32_t>(child_count_);
  VyreEgCounters seen{};
  VYRE_RETURN_IF_ERROR(ValidateOnDevice(check, &seen, what));
  VYRE_RETURN_IF_ERROR(egraph::ColumnsErrorAt(egraph::ViewOf(desc), seen.bad_row_class,
                                              seen.bad_child, seen.bad_range, what));
  if (desc.row_signatures == nullptr) {
    VYRE_RETURN_IF_ERROR(Launch(kernels_.signatures, rows_, args_, what));
  }
  VYRE_RETURN_IF_ERROR(Launch(kernels_.init_parent, classes_, args_, what));
  // The rest runs in stream order behind the caller's next call; the
  // parent index waits for the first rebuild (a pass never needs it).
  VYRE_RETURN_IF_ERROR(EnsureRowRecords(what));
  counted_ = true;
  return absl::OkStatus();
}

absl::Status EgraphImage::Grow(const EgraphCapacity& capacity, const char* what) {
  Context& ctx = *context_;
  OwnedBytes slab, scratch;
  EgraphLayout layout;
  EgraphScratchLayout scratch_layout;
  // The table keeps its size while it still has two slots a row of the new
  // capacity (a full round at most half fills it): then it, the rows' forms
  // and the worklist come along, and the next rebuild stays incremental (a
  // table that fills up past half asks for a full round, as always). Past
  // that it grows too, and the next rebuild starts with a full round.
  const uint64_t old_slots = scratch_layout_.table_slots;
  const bool keep_table = capacity.rows * 2 <= old_slots;
  VYRE_RETURN_IF_ERROR(AllocateStorage(capacity, keep_table ? old_slots : 0, &slab, &scratch,
                                       &layout, &scratch_layout, what));
  CUstream stream = ctx.stream();
  struct {
    uint64_t from, to, bytes;
  } spans[] = {
      {layout_.row_classes, layout.row_classes, rows_ * 4},
      {layout_.row_ops, layout.row_ops, rows_ * 4},
      {layout_.child_offsets, layout.child_offsets, rows_ * 4},
      {layout_.child_lengths, layout.child_lengths, rows_ * 4},
      {layout_.signatures, layout.signatures, rows_ * 4},
      {layout_.children, layout.children, child_count_ * 4},
      {layout_.parent, layout.parent, classes_ * 4},
      {layout_.rep, layout.rep, classes_ * 4},
      {layout_.canon, layout.canon, child_count_ * 4},
  };
  for (const auto& span : spans) {
    if (span.bytes == 0) continue;
    VYRE_CU(what, cuMemcpyDtoDAsync, slab.device() + span.to, slab_.device() + span.from,
            span.bytes, stream);
  }
  if (keep_table) {
    struct {
      uint64_t from, to, bytes;
    } rows[] = {
        {scratch_layout_.table, scratch_layout.table, old_slots * 8},
        {scratch_layout_.hash, scratch_layout.hash, rows_ * 4},
        {scratch_layout_.dirty_rows, scratch_layout.dirty_rows, (rows_ + 31) / 32 * 4},
        {scratch_layout_.records, scratch_layout.records, rows_ * 16},
        {scratch_layout_.changed_in, scratch_layout.changed_in, rows_},
    };
    for (const auto& span : rows) {
      if (span.bytes == 0) continue;
      VYRE_CU(what, cuMemcpyDtoDAsync, scratch.device() + span.to, scratch_.device() + span.from,
              span.bytes, stream);
    }
  } else {
    table_valid_ = false;
    records_stale_ = true;
  }
  if (changed_count_ > 0) {  // the last rebuild's changed classes stay readable
    VYRE_CU(what, cuMemcpyDtoDAsync, scratch.device() + scratch_layout.changed_bits,
            scratch_.device() + scratch_layout_.changed_bits, (classes_ + 31) / 32 * 4, stream);
  }
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, stream);  // the old slabs are read until here
  slab_ = std::move(slab);
  scratch_ = std::move(scratch);
  layout_ = layout;
  scratch_layout_ = scratch_layout;
  capacity_ = capacity;
  pass_scratch_.reset();
  planned_rows_ = ~uint64_t{0};
  PointArgs();
  return absl::OkStatus();
}

absl::Status EgraphImage::AppendOnDevice(const vyre_egraph_append_desc& d, const char* what) {
  Context& ctx = *context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  const uint64_t rows = d.row_count, kids = d.child_count;
  // The new rows land in a block of their own first and are checked there:
  // a refused append leaves the image's memory untouched.
  uint64_t cursor = 0, at_classes = 0, at_ops = 0, at_offsets = 0, at_lengths = 0, at_sig = 0,
           at_kids = 0;
  Place(&cursor, rows * 4, &at_classes);
  Place(&cursor, rows * 4, &at_ops);
  Place(&cursor, rows * 4, &at_offsets);
  Place(&cursor, rows * 4, &at_lengths);
  Place(&cursor, rows * 4, &at_sig);
  Place(&cursor, kids * 4, &at_kids);
  VYRE_ASSIGN_OR_RETURN(PoolBlock block, ctx.device_pool().Acquire(std::max<uint64_t>(cursor, 4), what));
  const CUdeviceptr base = block.device();
  struct {
    const uint32_t* from;
    uint64_t at, entries;
    uint32_t column;  // where it goes (ColumnOffset, after any growth)
  } columns[] = {
      {d.row_classes, at_classes, rows, VYRE_EGRAPH_COLUMN_ROW_CLASSES},
      {d.row_ops, at_ops, rows, VYRE_EGRAPH_COLUMN_ROW_OPS},
      {d.child_offsets, at_offsets, rows, VYRE_EGRAPH_COLUMN_CHILD_OFFSETS},
      {d.child_lengths, at_lengths, rows, VYRE_EGRAPH_COLUMN_CHILD_LENGTHS},
      {d.row_signatures, at_sig, rows, VYRE_EGRAPH_COLUMN_ROW_SIGNATURES},
      {d.children, at_kids, kids, VYRE_EGRAPH_COLUMN_CHILDREN},
  };
  HostUploads copies(ctx);
  for (const auto& c : columns) {
    if (c.from == nullptr) continue;
    absl::Status copied = copies.Add(base + c.at, c.from, c.entries * 4, what);
    if (!copied.ok()) {
      copies.Wait(what).IgnoreError();
      return copied;
    }
  }
  VyreEgArgs check = args_;
  check.row_classes = base + at_classes;
  check.child_offsets = base + at_offsets;
  check.child_lengths = base + at_lengths;
  check.children = base + at_kids;
  check.first_row = 0;
  check.rows = static_cast<uint32_t>(rows);
  check.classes = static_cast<uint32_t>(classes_ + d.class_count);
  check.child_base = 0;
  check.child_limit = static_cast<uint32_t>(kids);
  VyreEgCounters seen{};
  VYRE_RETURN_IF_ERROR(ValidateOnDevice(check, &seen, what));
  VYRE_RETURN_IF_ERROR(egraph::ColumnsErrorAt(egraph::ViewOf(d, classes_ + d.class_count),
                                              seen.bad_row_class, seen.bad_child, seen.bad_range,
                                              what));
  const EgraphCapacity needed{rows_ + rows, classes_ + d.class_count, child_count_ + kids};
  if (needed.rows > capacity_.rows || needed.classes > capacity_.classes ||
      needed.children > capacity_.children) {
    // Powers of two: a loop of small appends grows log2 times, not each time.
    EgraphCapacity grown = capacity_;
    if (needed.rows > grown.rows) grown.rows = std::min(*NextPowerOfTwo(needed.rows), egraph::kMaxRows);
    if (needed.classes > grown.classes) {
      grown.classes = std::min<uint64_t>(*NextPowerOfTwo(needed.classes), UINT32_MAX);
    }
    if (needed.children > grown.children) {
      grown.children = std::min<uint64_t>(*NextPowerOfTwo(needed.children), UINT32_MAX);
    }
    VYRE_RETURN_IF_ERROR(Grow(grown, what));
  }
  CUstream stream = ctx.stream();
  for (const auto& c : columns) {
    if (c.from == nullptr || c.entries == 0) continue;
    const uint64_t first = c.column == VYRE_EGRAPH_COLUMN_CHILDREN ? child_count_ : rows_;
    VYRE_CU(what, cuMemcpyDtoDAsync, slab_.device() + ColumnOffset(c.column) + first * 4,
            base + c.at, c.entries * 4, stream);
  }
  const uint64_t first_row = rows_, first_class = classes_, child_base = child_count_;
  rows_ = needed.rows;
  classes_ = needed.classes;
  child_count_ = needed.children;
  PointArgs();
  VyreEgArgs range = args_;
  range.first_row = static_cast<uint32_t>(first_row);
  range.first_class = static_cast<uint32_t>(first_class);
  range.child_base = static_cast<uint32_t>(child_base);
  absl::Status status;
  if (child_base > 0) status = Launch(kernels_.rebase_offsets, rows, range, what);
  if (status.ok() && d.row_signatures == nullptr) {
    status = Launch(kernels_.signatures, rows, range, what);
  }
  if (status.ok()) status = Launch(kernels_.init_parent, d.class_count, range, what);
  if (status.ok()) status = Launch(kernels_.pack_rows, rows, range, what);
  if (status.ok()) status = Launch(kernels_.mark_rows, rows, range, what);
  // The parent index covers the new rows and classes (relink reads the
  // range of every class), so the rebuild that follows costs what changed.
  if (status.ok()) status = UpdateIndex(what);
  ctx.telemetry().sync_points.Add();
  CUresult synced = driver::Api().cuStreamSynchronize(stream);  // the block is read until here
  // The counts moved: EgraphImage::Append adds them again.
  rows_ = first_row;
  classes_ = first_class;
  child_count_ = child_base;
  if (!status.ok()) {
    PointArgs();  // the rows were not taken: the kernels keep the old counts
    return status;
  }
  if (synced != CUDA_SUCCESS) return driver::CuError(synced, what, "cuStreamSynchronize");
  return absl::OkStatus();
}

absl::Status EgraphImage::EnsureIndexMemory(OwnedBytes* memory, EgraphCapacity* sized,
                                            CUdeviceptr* offsets, CUdeviceptr* rows_of,
                                            const char* what) {
  if (*memory && sized->classes >= classes_ && sized->children >= child_count_) {
    return absl::OkStatus();
  }
  Context& ctx = *context_;
  memory->reset();
  *sized = capacity_;
  uint64_t cursor = 0, at_offsets = 0, at_rows = 0, at_sums = 0;
  Place(&cursor, (capacity_.classes + 1) * 4, &at_offsets);
  Place(&cursor, std::max<uint64_t>(capacity_.children, 1) * 4, &at_rows);
  Place(&cursor, (capacity_.classes + 1 + kScanTile - 1) / kScanTile * 4, &at_sums);
  VYRE_ASSIGN_OR_RETURN(*memory, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                      &ctx.telemetry(), cursor, what));
  *offsets = memory->device() + at_offsets;
  *rows_of = memory->device() + at_rows;
  scan_sums_[memory == &index_ ? 0 : 1] = memory->device() + at_sums;
  return absl::OkStatus();
}

absl::Status EgraphImage::EnqueueIndexBuild(CUdeviceptr offsets, CUdeviceptr rows_of,
                                            uint64_t first_row, CUdeviceptr sums,
                                            const char* what) {
  Context& ctx = *context_;
  const uint64_t entries = classes_ + 1;
  VYRE_CU(what, cuMemsetD32Async, offsets, 0, entries, ctx.stream());
  ctx.telemetry().memset_operations.Add();
  VyreEgArgs build = args_;
  build.index_offsets = offsets;
  build.index_rows = rows_of;
  build.scan_sums = sums;
  build.first_row = static_cast<uint32_t>(first_row);
  build.scan_count = static_cast<uint32_t>(entries);
  build.scan_blocks = static_cast<uint32_t>((entries + kScanTile - 1) / kScanTile);
  const uint64_t rows = rows_ - first_row;
  VYRE_RETURN_IF_ERROR(Launch(kernels_.index_count, rows, build, what));
  VYRE_RETURN_IF_ERROR(EnqueuePrefixSum(build, what));
  return Launch(kernels_.index_scatter, rows, build, what);
}

absl::Status EgraphImage::EnqueuePrefixSum(const VyreEgArgs& scan, const char* what) const {
  VYRE_RETURN_IF_ERROR(
      LaunchShaped(kernels_.scan_reduce, scan.scan_blocks, kScanThreads, 0, what, &scan));
  VYRE_RETURN_IF_ERROR(LaunchShaped(kernels_.scan_top, 1, 1024, 0, what, &scan));
  return LaunchShaped(kernels_.scan_down, scan.scan_blocks, kScanThreads, 0, what, &scan);
}

absl::Status EgraphImage::BuildIndex(const char* what) {
  VYRE_RETURN_IF_ERROR(EnsureIndexMemory(&index_, &index_capacity_, &index_offsets_,
                                         &index_rows_of_, what));
  VYRE_RETURN_IF_ERROR(EnqueueIndexBuild(index_offsets_, index_rows_of_, 0, scan_sums_[0], what));
  args_.index_offsets = index_offsets_;
  args_.index_rows = index_rows_of_;
  args_.index_classes = static_cast<uint32_t>(classes_);
  args_.delta_offsets = args_.delta_rows = 0;
  index_rows_covered_ = rows_;
  index_stale_ = false;
  return absl::OkStatus();
}

absl::Status EgraphImage::UpdateIndex(const char* what) {
  if (index_stale_) return absl::OkStatus();  // built whole by the next rebuild
  // The rows appended since the index was built get an index of their own
  // over every class (its prefix sum is the cost: classes + 1 entries),
  // until they are a quarter of the index's rows; then the index is built
  // again over every row, so an append costs what it adds, amortised.
  const uint64_t added = rows_ - index_rows_covered_;
  if (added * 4 > index_rows_covered_) return BuildIndex(what);
  VYRE_RETURN_IF_ERROR(EnsureIndexMemory(&delta_, &delta_capacity_, &delta_offsets_,
                                         &delta_rows_of_, what));
  VYRE_RETURN_IF_ERROR(EnqueueIndexBuild(delta_offsets_, delta_rows_of_, index_rows_covered_,
                                         scan_sums_[1], what));
  args_.delta_offsets = delta_offsets_;
  args_.delta_rows = delta_rows_of_;
  return absl::OkStatus();
}

absl::Status EgraphImage::ReadChangedOnDevice(uint32_t* pairs, uint64_t count, const char* what) {
  Context& ctx = *context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  // The changed-class bitset compacted in class order: each word's count,
  // their prefix sum, then each word's pairs from its start.
  const uint64_t words = (classes_ + 31) / 32;
  const uint64_t blocks = (words + kScanTile - 1) / kScanTile;
  uint64_t cursor = 0, at_counts = 0, at_sums = 0, at_pairs = 0;
  Place(&cursor, words * 4, &at_counts);
  Place(&cursor, blocks * 4, &at_sums);
  Place(&cursor, count * 8, &at_pairs);
  VYRE_ASSIGN_OR_RETURN(PoolBlock block, ctx.device_pool().Acquire(cursor, what));
  VyreEgArgs read = args_;
  read.index_offsets = block.device() + at_counts;
  read.scan_sums = block.device() + at_sums;
  read.pairs_out = block.device() + at_pairs;
  read.scan_count = static_cast<uint32_t>(words);
  read.scan_blocks = static_cast<uint32_t>(blocks);
  VYRE_RETURN_IF_ERROR(Launch(kernels_.changed_words, words, read, what));
  VYRE_RETURN_IF_ERROR(EnqueuePrefixSum(read, what));
  VYRE_RETURN_IF_ERROR(Launch(kernels_.changed_emit, words, read, what));
  VYRE_CU(what, cuMemcpyDtoHAsync, pairs, read.pairs_out, count * 8, ctx.stream());
  ctx.telemetry().d2h_operations.Add();
  ctx.telemetry().d2h_bytes.Add(count * 8);
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  return absl::OkStatus();
}


EgraphImage::~EgraphImage() {
  if (!context_) return;
  driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
  pass_scratch_.reset();
  pinned_counters_.reset();
  scratch_.reset();
  slab_.reset();
}

}  // namespace vyre
