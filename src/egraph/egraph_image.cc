#include "egraph/egraph_image.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>

#include "base/checked_math.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "egraph/columns.h"
#include "egraph/cpu_reference.h"
#include "egraph/slab_layout.h"

// The congruence kernels: SASS for common GPUs and PTX for the rest
// (src/CMakeLists.txt, vyre_embed_fatbin).
extern const unsigned char vyre_builtin_egraph_fatbin[];
extern const size_t vyre_builtin_egraph_fatbin_size;

namespace vyre {

using egraph::LayoutOverflow;
using egraph::Place;

namespace {

constexpr uint32_t kBlockThreads = 256;
// The pass's first pair output; it grows to what a pass finds.
constexpr uint64_t kFirstPairCapacity = uint64_t{1} << 16;
// The bucketed pass (congruence.cu): about this many rows per bucket, at
// most this many buckets (two partition levels of at most 256 bins, the
// kernels' kMaxPartBins), at least two table slots per expected row, and
// the block shapes. Two level-1 blocks per multiprocessor (the scatter's
// shape: one block's tile loads overlap the other's sorting) keep each
// block's run of a bin long.
constexpr uint64_t kRowsPerBucket = 2048;
constexpr uint64_t kMaxBuckets = 65536;
constexpr uint64_t kMinBucketSlots = 4096;
constexpr uint32_t kCountThreads = 1024;  // congruence.cu's kPartScatterThreads
constexpr uint64_t kRowsPerCountBlock = 8192;
constexpr uint32_t kBucketPassThreads = 512;  // congruence.cu's kBucketThreads
// Up to this many bucket bits take one partition level; more take two,
// split evenly (at most 8 bits each for kMaxBuckets: congruence.cu's
// kMaxPartBins is 256). 128 bins keep every block's open runs few.
constexpr uint32_t kMaxLevelBits = 7;
static_assert(kMaxBuckets <= uint64_t{1} << 16, "two partition levels of at most 256 bins");
constexpr uint32_t kPartPrefixThreads = 256;  // congruence.cu's kPartThreads
// Bytes of shared memory a bucket table slot takes: (hash, leader row), the
// group's minimum class and its leader's class. 4,096 slots (64 KB) leave
// room for three blocks per SM on an H100.
constexpr uint64_t kBucketSlotBytes = 16;
const char* ColumnName(uint32_t column) {
  switch (column) {
    case VYRE_EGRAPH_COLUMN_ROW_CLASSES: return "ROW_CLASSES";
    case VYRE_EGRAPH_COLUMN_ROW_OPS: return "ROW_OPS";
    case VYRE_EGRAPH_COLUMN_CHILD_OFFSETS: return "CHILD_OFFSETS";
    case VYRE_EGRAPH_COLUMN_CHILD_LENGTHS: return "CHILD_LENGTHS";
    case VYRE_EGRAPH_COLUMN_ROW_SIGNATURES: return "ROW_SIGNATURES";
    case VYRE_EGRAPH_COLUMN_CHILDREN: return "CHILDREN";
    case VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES: return "CANONICAL_CLASSES";
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::shared_ptr<EgraphImage>> EgraphImage::Create(
    const vyre_egraph_image_desc& desc, const char* what) {
  const uint32_t device = RawEnum(desc.device);
  if (device != VYRE_EGRAPH_DEVICE_GPU && device != VYRE_EGRAPH_DEVICE_CPU) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: device %d is not an e-graph device. Fix: use VYRE_EGRAPH_DEVICE_GPU or "
                  "VYRE_EGRAPH_DEVICE_CPU.",
                  what, static_cast<int32_t>(device));
  }
  std::shared_ptr<Context> context;
  if (device == VYRE_EGRAPH_DEVICE_GPU) {
    VYRE_ASSIGN_OR_RETURN(context, Contexts().Lookup(desc.context.bits, what));
  } else if (desc.context.bits != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: a CPU image takes no context, but context is 0x%016x. Fix: pass {0} as "
                  "the context of a VYRE_EGRAPH_DEVICE_CPU image.",
                  what, desc.context.bits);
  }
  VYRE_RETURN_IF_ERROR(egraph::CheckShape(desc, what));
  VYRE_RETURN_IF_ERROR(egraph::CheckCapacity(desc.row_capacity, desc.class_capacity,
                                             desc.child_capacity, what));
  // A GPU image's values are checked on the device, after the upload.
  if (!context) VYRE_RETURN_IF_ERROR(egraph::CheckColumns(egraph::ViewOf(desc), what));
  std::shared_ptr<EgraphImage> image(new EgraphImage());
  image->rows_ = desc.row_count;
  image->classes_ = desc.class_count;
  image->child_count_ = desc.child_count;
  image->canonical_classes_ = desc.class_count;
  if (context) {
    image->context_ = std::move(context);
    VYRE_RETURN_IF_ERROR(image->CreateOnDevice(desc, what));
    image->context_->telemetry().h2d_operations.Add(desc.row_signatures ? 6 : 5);
    return image;
  }
  image->host_ = std::make_unique<egraph::HostImage>(desc);
  return image;
}

absl::Status EgraphImage::LoadKernels(const char* what) {
  Context& ctx = *context_;
  const absl::string_view fatbin(reinterpret_cast<const char*>(vyre_builtin_egraph_fatbin),
                                 vyre_builtin_egraph_fatbin_size);
  VYRE_ASSIGN_OR_RETURN(module_, ctx.modules().GetOrLoad(VYRE_CODE_BINARY, fatbin, {},
                                                          "vyre_eg_insert", what));
  struct {
    CUfunction* slot;
    const char* name;
  } entries[] = {
      {&kernels_.init_parent, "vyre_eg_init_parent"},   {&kernels_.apply_unions, "vyre_eg_apply_unions"},
      {&kernels_.compress, "vyre_eg_compress"},         {&kernels_.settle, "vyre_eg_settle"},
      {&kernels_.relink, "vyre_eg_relink"},
      {&kernels_.signatures, "vyre_eg_signatures"},
      {&kernels_.refresh, "vyre_eg_refresh"},
      {&kernels_.insert, "vyre_eg_insert"},             {&kernels_.round_end, "vyre_eg_round_end"},
      {&kernels_.pass_group, "vyre_eg_pass_group"},     {&kernels_.pass_emit, "vyre_eg_pass_emit"},
      {&kernels_.pack_rows, "vyre_eg_pack_rows"},
      {&kernels_.part_count, "vyre_eg_part_count"},
      {&kernels_.part_prefix, "vyre_eg_part_prefix"},
      {&kernels_.part_scatter, "vyre_eg_part_scatter"},
      {&kernels_.bucket_group, "vyre_eg_bucket_group"},
      {&kernels_.pair_set_clear, "vyre_eg_pair_set_clear"},
      {&kernels_.bucket_emit, "vyre_eg_bucket_emit"},
      {&kernels_.validate, "vyre_eg_validate"},
      {&kernels_.rebase_offsets, "vyre_eg_rebase_offsets"},
      {&kernels_.mark_rows, "vyre_eg_mark_rows"},
      {&kernels_.index_count, "vyre_eg_index_count"},
      {&kernels_.index_scatter, "vyre_eg_index_scatter"},
      {&kernels_.scan_reduce, "vyre_eg_scan_reduce"},
      {&kernels_.scan_top, "vyre_eg_scan_top"},
      {&kernels_.scan_down, "vyre_eg_scan_down"},
      {&kernels_.changed_words, "vyre_eg_changed_words"},
      {&kernels_.changed_emit, "vyre_eg_changed_emit"},
      {&kernels_.mark_parents, "vyre_eg_mark_parents"},
  };
  for (const auto& e : entries) {
    VYRE_CU(what, cuModuleGetFunction, e.slot, module_->get(), e.name);
  }
  // Grid-stride kernels: enough blocks to fill the device, no more, so a
  // kernel that finds the rebuild done returns in microseconds.
  max_blocks_ = std::max<uint32_t>(ctx.device().multiprocessor_count * 8, 1);
  return absl::OkStatus();
}

absl::Status EgraphImage::PlanBuckets(const char* what) {
  Context& ctx = *context_;
  BucketPlan plan;
  const uint64_t rows = std::max<uint64_t>(rows_, 1);
  const uint64_t sms = std::max<uint32_t>(ctx.device().multiprocessor_count, 1);
  const uint64_t buckets =
      std::min(*NextPowerOfTwo((rows + kRowsPerBucket - 1) / kRowsPerBucket), kMaxBuckets);
  const uint64_t per_bucket = (rows + buckets - 1) / buckets;
  const uint64_t slots = std::max(*NextPowerOfTwo(per_bucket * 2), kMinBucketSlots);
  uint32_t bits = 0;
  while ((uint64_t{1} << bits) < buckets) ++bits;
  plan.buckets = static_cast<uint32_t>(buckets);
  plan.slots = static_cast<uint32_t>(std::min<uint64_t>(slots, UINT32_MAX));  // used only if usable
  plan.levels = bits <= kMaxLevelBits ? 1 : 2;
  const uint32_t bits2 = plan.levels == 1 ? 0 : bits / 2;
  const uint32_t bits1 = bits - bits2;
  plan.bins1 = uint32_t{1} << bits1;
  plan.shift1 = 32 - bits1;  // unused with one bin
  plan.bins2 = uint32_t{1} << bits2;
  plan.shift2 = 32 - bits1 - bits2;
  plan.blocks1 = static_cast<uint32_t>(
      std::clamp<uint64_t>((rows + kRowsPerCountBlock - 1) / kRowsPerCountBlock, 1, 2 * sms));
  // All of level 2's blocks in one wave of two per SM: rounding up (320
  // blocks for 264 places on an H100) left a second wave of a fifth of them
  // (170 us for its scatter at 16 M rows).
  plan.blocks2 = static_cast<uint32_t>(std::max<uint64_t>(2 * sms / plan.bins1, 1));
  const uint64_t pass_shared = slots * kBucketSlotBytes;
  int fixed = 0;
  VYRE_CU(what, cuFuncGetAttribute, &fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
          kernels_.bucket_group);
  const uint64_t limit = ctx.device().max_shared_memory_per_block;
  plan.usable = pass_shared + static_cast<uint64_t>(fixed) <= limit;
  int emit_fixed = 0;
  VYRE_CU(what, cuFuncGetAttribute, &emit_fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
          kernels_.bucket_emit);
  if (plan.usable) {
    // Each kernel's own static shared memory comes out of the same budget.
    VYRE_CU(what, cuFuncSetAttribute, kernels_.bucket_group,
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(limit - static_cast<uint64_t>(fixed)));
    plan.pass_shared = static_cast<uint32_t>(pass_shared);
    // An emit block takes two buckets, and has room for the pairs of a
    // range twice their expected size: a larger (skewed) range leaves its
    // pairs in its list places instead.
    plan.emit_buckets = 2;
    const uint64_t room = (limit - std::min<uint64_t>(limit, emit_fixed)) / 8;
    plan.stage = static_cast<uint32_t>(std::min<uint64_t>(per_bucket * 2 * plan.emit_buckets, room));
    plan.emit_shared = plan.stage * 8;
    VYRE_CU(what, cuFuncSetAttribute, kernels_.bucket_emit,
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(limit - static_cast<uint64_t>(emit_fixed)));
  }
  bucket_plan_ = plan;
  return absl::OkStatus();
}

absl::Status EgraphImage::Launch(CUfunction kernel, uint64_t items, const VyreEgArgs& args,
                                 const char* what) const {
  const uint64_t wanted = (std::max<uint64_t>(items, 1) + kBlockThreads - 1) / kBlockThreads;
  const uint32_t blocks = static_cast<uint32_t>(std::min<uint64_t>(wanted, max_blocks_));
  return LaunchShaped(kernel, blocks, kBlockThreads, 0, what, &args);
}

CUDA_KERNEL_NODE_PARAMS EgraphImage::NodeParams(CUfunction kernel, uint64_t items,
                                                void** params) const {
  const uint64_t wanted = (std::max<uint64_t>(items, 1) + kBlockThreads - 1) / kBlockThreads;
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = kernel;
  p.gridDimX = static_cast<uint32_t>(std::min<uint64_t>(wanted, max_blocks_));
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = kBlockThreads;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  return p;
}

VyreEgArgs EgraphImage::PassArgs() const {
  VyreEgArgs pass = args_;
  pass.forms = pass_forms_;
  return pass;
}

absl::Status EgraphImage::LaunchShaped(CUfunction kernel, uint32_t blocks, uint32_t threads,
                                       uint32_t shared_bytes, const char* what,
                                       const VyreEgArgs* args) const {
  VyreEgArgs copy = args != nullptr ? *args : PassArgs();
  void* params[] = {&copy};
  VYRE_CU(what, cuLaunchKernel, kernel, blocks, 1, 1, threads, 1, 1, shared_bytes,
          context_->stream(), params, nullptr);
  context_->telemetry().kernel_launches.Add();
  return absl::OkStatus();
}

absl::Status EgraphImage::EnsureRowRecords(const char* what) {
  if (!records_stale_) return absl::OkStatus();
  VYRE_RETURN_IF_ERROR(Launch(kernels_.pack_rows, rows_, args_, what));
  records_stale_ = false;
  return absl::OkStatus();
}

absl::Status EgraphImage::ResetCounters(const VyreEgCounters& init, const char* what) {
  // The previous read of the pinned block was waited for, so it is free.
  std::memcpy(pinned_counters_.host(), &init, sizeof(init));
  VYRE_CU(what, cuMemcpyHtoDAsync, args_.counters, pinned_counters_.host(), sizeof(init),
          context_->stream());
  context_->telemetry().h2d_operations.Add();
  context_->telemetry().h2d_bytes.Add(sizeof(init));
  return absl::OkStatus();
}

absl::Status EgraphImage::ReadCounters(VyreEgCounters* out, const char* what) {
  VYRE_CU(what, cuMemcpyDtoHAsync, pinned_counters_.host(), args_.counters, sizeof(*out),
          context_->stream());
  context_->telemetry().d2h_operations.Add();
  context_->telemetry().d2h_bytes.Add(sizeof(*out));
  context_->telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, context_->stream());
  std::memcpy(out, pinned_counters_.host(), sizeof(*out));
  return absl::OkStatus();
}

absl::Status EgraphImage::CheckIdle(const char* what) const {
  if (!busy_) return absl::OkStatus();
  return Errorf(VYRE_STATUS_INVALID_STATE,
                "%s: an asynchronous rebuild of this image is still unwaited. Fix: wait on (or "
                "release) its pending handle first.",
                what);
}

uint64_t EgraphImage::ColumnEntries(uint32_t column) const {
  switch (column) {
    case VYRE_EGRAPH_COLUMN_CHILDREN: return child_count_;
    case VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES: return classes_;
    default: return rows_;
  }
}

uint64_t EgraphImage::ColumnOffset(uint32_t column) const {
  switch (column) {
    case VYRE_EGRAPH_COLUMN_ROW_CLASSES: return layout_.row_classes;
    case VYRE_EGRAPH_COLUMN_ROW_OPS: return layout_.row_ops;
    case VYRE_EGRAPH_COLUMN_CHILD_OFFSETS: return layout_.child_offsets;
    case VYRE_EGRAPH_COLUMN_CHILD_LENGTHS: return layout_.child_lengths;
    case VYRE_EGRAPH_COLUMN_ROW_SIGNATURES: return layout_.signatures;
    case VYRE_EGRAPH_COLUMN_CHILDREN: return layout_.children;
    default: return layout_.rep;
  }
}

namespace {

// Pair outputs (pass, changed read): NULL only with capacity 0.
absl::Status CheckPairRoom(const uint32_t* pairs, uint64_t capacity, const char* what) {
  if (capacity > 0 && pairs == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: pairs is NULL but pair_capacity is %u. Fix: pass room for 2 u32 per pair, "
                  "or NULL with capacity 0 to ask the count.",
                  what, capacity);
  }
  return absl::OkStatus();
}

absl::Status CheckColumnRange(const char* what, uint32_t column, uint64_t first, uint64_t count,
                              uint64_t entries, const void* data, const char* data_name) {
  if (ColumnName(column) == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: column %d is not an e-graph column. Fix: use a VYRE_EGRAPH_COLUMN_* "
                  "value.",
                  what, static_cast<int32_t>(column));
  }
  if (!RangeInside(first, count, entries)) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: entries [%u, +%u) of %s end past its %u entries. Fix: keep first + count "
                  "within the column.",
                  what, first, count, ColumnName(column), entries);
  }
  if (count > 0 && data == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %s is NULL but count is %u. Fix: pass room for count u32 values.", what,
                  data_name, count);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EgraphImage::Read(uint32_t column, uint64_t first, uint64_t count, uint32_t* dst,
                               const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckIdle(what));
  VYRE_RETURN_IF_ERROR(
      CheckColumnRange(what, column, first, count, ColumnEntries(column), dst, "dst"));
  if (count == 0) return absl::OkStatus();
  if (!gpu()) {
    std::memcpy(dst, host_->Column(column).data() + first, count * 4);
    return absl::OkStatus();
  }
  Context& ctx = *context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_CU(what, cuMemcpyDtoHAsync, dst, slab_.device() + ColumnOffset(column) + first * 4,
          count * 4, ctx.stream());
  ctx.telemetry().d2h_operations.Add();
  ctx.telemetry().d2h_bytes.Add(count * 4);
  ctx.telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  return absl::OkStatus();
}

absl::Status EgraphImage::Write(uint32_t column, uint64_t first, uint64_t count,
                                const uint32_t* src, const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckIdle(what));
  if (column == VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: CANONICAL_CLASSES is read only: it is the image's union-find. Fix: merge "
                  "classes through vyre_egraph_rebuild's unions, or start again with "
                  "VYRE_EGRAPH_REBUILD_RESET.",
                  what);
  }
  VYRE_RETURN_IF_ERROR(
      CheckColumnRange(what, column, first, count, ColumnEntries(column), src, "src"));
  if (count == 0) return absl::OkStatus();
  if (column == VYRE_EGRAPH_COLUMN_ROW_CLASSES || column == VYRE_EGRAPH_COLUMN_CHILDREN) {
    VYRE_RETURN_IF_ERROR(egraph::CheckClassIds(
        src, count, first, classes_,
        column == VYRE_EGRAPH_COLUMN_CHILDREN ? "children" : "row_classes", what));
  }
  Context* ctx = context_.get();
  std::unique_ptr<driver::ScopedContext> bind;
  if (ctx != nullptr) {
    bind = std::make_unique<driver::ScopedContext>(ctx->cu());
    VYRE_RETURN_IF_ERROR(bind->status(what));
  }
  if (column == VYRE_EGRAPH_COLUMN_CHILD_OFFSETS || column == VYRE_EGRAPH_COLUMN_CHILD_LENGTHS) {
    // The rows' ranges as they will be, against their neighbours.
    const bool offsets = column == VYRE_EGRAPH_COLUMN_CHILD_OFFSETS;
    const uint32_t other = offsets ? VYRE_EGRAPH_COLUMN_CHILD_LENGTHS : VYRE_EGRAPH_COLUMN_CHILD_OFFSETS;
    const uint64_t lo = first > 0 ? first - 1 : first;
    const uint64_t hi = std::min(first + count + 1, rows_);
    std::vector<uint32_t> off(hi - lo), len(hi - lo);
    if (ctx == nullptr) {
      const auto& offsets = host_->Column(VYRE_EGRAPH_COLUMN_CHILD_OFFSETS);
      const auto& lengths = host_->Column(VYRE_EGRAPH_COLUMN_CHILD_LENGTHS);
      std::copy(offsets.begin() + lo, offsets.begin() + hi, off.begin());
      std::copy(lengths.begin() + lo, lengths.begin() + hi, len.begin());
    } else {
      for (auto [col, to] : {std::pair{uint32_t{VYRE_EGRAPH_COLUMN_CHILD_OFFSETS}, &off},
                             std::pair{uint32_t{VYRE_EGRAPH_COLUMN_CHILD_LENGTHS}, &len}}) {
        VYRE_CU(what, cuMemcpyDtoHAsync, to->data(), slab_.device() + ColumnOffset(col) + lo * 4,
                (hi - lo) * 4, ctx->stream());
      }
      ctx->telemetry().sync_points.Add();
      VYRE_CU(what, cuStreamSynchronize, ctx->stream());
    }
    (void)other;
    std::copy(src, src + count, (offsets ? off : len).begin() + (first - lo));
    const uint64_t previous_end = first > 0 ? uint64_t{off[0]} + len[0] : 0;
    const uint64_t next_offset = first + count < rows_ ? off[hi - lo - 1] : child_count_;
    VYRE_RETURN_IF_ERROR(egraph::CheckChildRanges(off.data() + (first - lo),
                                                  len.data() + (first - lo), count, first,
                                                  child_count_, previous_end, next_offset, what));
  }
  if (ctx == nullptr) {
    host_->Write(column, first, count, src);
    return absl::OkStatus();
  }
  if (column != VYRE_EGRAPH_COLUMN_ROW_SIGNATURES) {
    // Set before the copy: a failed copy may have landed in part. Rows'
    // forms change, so the next rebuild starts with a full round; new
    // children or ranges move rows in the parent index.
    if (column != VYRE_EGRAPH_COLUMN_CHILDREN) records_stale_ = true;
    table_valid_ = false;
    if (column != VYRE_EGRAPH_COLUMN_ROW_CLASSES && column != VYRE_EGRAPH_COLUMN_ROW_OPS) {
      index_stale_ = true;
    }
  }
  VYRE_CU(what, cuMemcpyHtoDAsync, slab_.device() + ColumnOffset(column) + first * 4, src,
          count * 4, ctx->stream());
  ctx->telemetry().h2d_operations.Add();
  ctx->telemetry().h2d_bytes.Add(count * 4);
  ctx->telemetry().sync_points.Add();
  VYRE_CU(what, cuStreamSynchronize, ctx->stream());
  return absl::OkStatus();
}

absl::StatusOr<vyre_egraph_image_info> EgraphImage::Info(const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckIdle(what));
  vyre_egraph_image_info info{};
  info.struct_size = sizeof(info);
  info.device = gpu() ? VYRE_EGRAPH_DEVICE_GPU : VYRE_EGRAPH_DEVICE_CPU;
  info.context.bits = gpu() ? context_->handle() : 0;
  info.row_count = rows_;
  info.class_count = classes_;
  info.child_count = child_count_;
  info.canonical_class_count = canonical_classes_;
  if (gpu()) {
    info.bytes = slab_.bytes() + scratch_.bytes() + pass_scratch_.bytes() + index_bytes();
    info.row_capacity = capacity_.rows;
    info.class_capacity = capacity_.classes;
    info.child_capacity = capacity_.children;
    info.changed_class_count = changed_count_;
  } else {
    info.bytes = host_->bytes();
    info.row_capacity = host_->row_capacity();
    info.class_capacity = host_->class_capacity();
    info.child_capacity = host_->child_capacity();
    info.changed_class_count = host_->changed().size();
  }
  return info;
}

absl::Status EgraphImage::PreparePass(const char* what) {
  if (planned_rows_ == rows_) return absl::OkStatus();
  VYRE_RETURN_IF_ERROR(PlanBuckets(what));
  // The bucketed pass's list of (hash, row) and the rows' packed forms live
  // in the table's span (four slots of 8 bytes per row of capacity): the
  // pass and the table never hold anything at once. args_.forms stays 0 so
  // that a rebuild's refresh does not write them; the pass sets it
  // (PassArgs).
  uint64_t cursor = 0;
  Place(&cursor, rows_ * 8, &pass_list_at_);
  Place(&cursor, rows_ * 16, &pass_forms_at_);
  // A table kept through a growth of the rows (Grow) may be too small for
  // them: then they go with the pass's own scratch.
  pass_list_bytes_ = cursor <= scratch_layout_.table_slots * 8 ? 0 : cursor;
  args_.bucket_list = args_.table + pass_list_at_;
  pass_forms_ = args_.table + pass_forms_at_;
  args_.bucket_slots = bucket_plan_.slots;
  args_.bucket_stage = bucket_plan_.stage;
  args_.bucket_count = bucket_plan_.buckets;
  args_.emit_buckets = bucket_plan_.emit_buckets;
  pass_scratch_.reset();  // sized for the rows it was made for
  planned_rows_ = rows_;
  return absl::OkStatus();
}

absl::Status EgraphImage::EnsurePassScratch(uint64_t pairs, const char* what) {
  if (pass_scratch_ && pairs <= pass_pair_capacity_) return absl::OkStatus();
  Context& ctx = *context_;
  const uint64_t capacity = std::max<uint64_t>(pairs, 1);
  // A pass finds at most one pair per row: a set of twice that many slots
  // never fills, whatever the output's capacity.
  const uint64_t set_slots = *NextPowerOfTwo(std::max<uint64_t>(rows_, 1) * 2);
  const BucketPlan& plan = bucket_plan_;
  const uint64_t count_bytes =
      std::max<uint64_t>(uint64_t{plan.blocks1} * plan.bins1,
                         uint64_t{plan.bins1} * plan.blocks2 * plan.bins2) * 4;
  uint64_t cursor = 0, rep = 0, group_min = 0, set = 0, out = 0, counts = 0, segments = 0;
  uint64_t starts = 0;
  const bool ok = Place(&cursor, rows_ * 4, &rep) && Place(&cursor, rows_ * 4, &group_min) &&
                  Place(&cursor, set_slots * 8, &set) && Place(&cursor, capacity * 8, &out) &&
                  Place(&cursor, count_bytes, &counts) &&
                  Place(&cursor, (uint64_t{plan.bins1} + 1) * 4, &segments) &&
                  Place(&cursor, (uint64_t{plan.buckets} + 1) * 4, &starts);
  uint64_t list = 0;
  if (!ok || !Place(&cursor, pass_list_bytes_, &list)) return LayoutOverflow(what);
  pass_scratch_.reset();
  VYRE_ASSIGN_OR_RETURN(pass_scratch_, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                            &ctx.telemetry(), cursor, what));
  pass_pair_capacity_ = capacity;
  const CUdeviceptr base = pass_scratch_.device();
  args_.rep_slot = base + rep;
  args_.group_min = base + group_min;
  args_.pair_set = base + set;
  args_.pairs_out = base + out;
  part_counts_ = base + counts;
  part_segments_ = base + segments;
  args_.bucket_starts = base + starts;
  if (pass_list_bytes_ != 0) {  // as PreparePass lays them out in the table's span
    args_.bucket_list = base + list + pass_list_at_;
    pass_forms_ = base + list + pass_forms_at_;
  }
  args_.pair_set_mask = static_cast<uint32_t>(set_slots - 1);
  args_.pair_capacity = static_cast<uint32_t>(capacity);
  return absl::OkStatus();
}

absl::Status EgraphImage::EnqueuePassGroups(bool bucketed, const char* what) {
  Context& ctx = *context_;
  CUstream stream = ctx.stream();
  VYRE_CU(what, cuMemsetD8Async, args_.counters + offsetof(VyreEgCounters, overflow), 0,
          sizeof(VyreEgCounters::overflow), stream);
  VYRE_CU(what, cuMemsetD8Async, args_.counters + offsetof(VyreEgCounters, candidates), 0,
          sizeof(VyreEgCounters::candidates), stream);
  ctx.telemetry().memset_operations.Add(2);
  if (bucketed) {
    const BucketPlan& p = bucket_plan_;
    // Level 1 reads the hash column; with two levels it writes into the
    // pair set's span, which the pass clears only after the partition.
    VyreEgArgs level = PassArgs();
    level.part_in = 0;
    level.part_out = p.levels == 1 ? args_.bucket_list : args_.pair_set;
    level.part_counts = part_counts_;
    level.part_starts = p.levels == 1 ? args_.bucket_starts : part_segments_;
    level.seg_starts = 0;
    level.part_segments = 1;
    level.part_blocks = p.blocks1;
    level.part_bins = p.bins1;
    level.part_shift = p.shift1;
    for (uint32_t l = 0; l < p.levels; ++l) {
      if (l == 1) {
        level.part_in = args_.pair_set;
        level.part_out = args_.bucket_list;
        level.part_starts = args_.bucket_starts;
        level.seg_starts = part_segments_;
        level.part_segments = p.bins1;
        level.part_blocks = p.blocks2;
        level.part_bins = p.bins2;
        level.part_shift = p.shift2;
      }
      const uint32_t blocks = level.part_segments * level.part_blocks;
      VYRE_RETURN_IF_ERROR(
          LaunchShaped(kernels_.part_count, blocks, kCountThreads, 0, what, &level));
      VYRE_RETURN_IF_ERROR(LaunchShaped(kernels_.part_prefix, level.part_segments,
                                        kPartPrefixThreads, 0, what, &level));
      VYRE_RETURN_IF_ERROR(
          LaunchShaped(kernels_.part_scatter, blocks, kCountThreads, 0, what, &level));
    }
    return LaunchShaped(kernels_.bucket_group, p.buckets, kBucketPassThreads, p.pass_shared, what);
  }
  VYRE_CU(what, cuMemsetD32Async, args_.table, 0xFFFFFFFFu, scratch_layout_.table_slots * 2,
          stream);
  if (rows_ > 0) VYRE_CU(what, cuMemsetD32Async, args_.group_min, 0xFFFFFFFFu, rows_, stream);
  ctx.telemetry().memset_operations.Add(2);
  return Launch(kernels_.pass_group, rows_, args_, what);
}

absl::Status EgraphImage::EnqueuePassPairs(bool bucketed, const char* what) {
  Context& ctx = *context_;
  CUstream stream = ctx.stream();
  VYRE_CU(what, cuMemsetD8Async, args_.counters + offsetof(VyreEgCounters, pair_count), 0,
          sizeof(VyreEgCounters::pair_count), stream);
  ctx.telemetry().memset_operations.Add();
  if (bucketed) {
    // The pair set is cleared on the device, as far as the groups need.
    VYRE_RETURN_IF_ERROR(
        Launch(kernels_.pair_set_clear, uint64_t{args_.pair_set_mask} + 1, PassArgs(), what));
    const BucketPlan& p = bucket_plan_;
    return LaunchShaped(kernels_.bucket_emit, (p.buckets + p.emit_buckets - 1) / p.emit_buckets,
                        kBucketPassThreads, p.emit_shared, what);
  }
  VYRE_CU(what, cuMemsetD32Async, args_.pair_set, 0xFFFFFFFFu,
          (uint64_t{args_.pair_set_mask} + 1) * 2, stream);
  ctx.telemetry().memset_operations.Add();
  return Launch(kernels_.pass_emit, rows_, args_, what);
}

absl::Status EgraphImage::Pass(uint32_t* pairs, uint64_t capacity, uint64_t* out_count,
                               const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckIdle(what));
  VYRE_RETURN_IF_ERROR(CheckPairRoom(pairs, capacity, what));
  std::vector<std::pair<uint32_t, uint32_t>> found;
  uint64_t count = 0;
  if (!gpu()) {
    found = host_->Pass();
    count = found.size();
  } else {
    Context& ctx = *context_;
    driver::ScopedContext bind(ctx.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    VYRE_RETURN_IF_ERROR(PreparePass(what));
    VYRE_RETURN_IF_ERROR(
        EnsurePassScratch(std::min<uint64_t>(std::max<uint64_t>(rows_, 1), kFirstPairCapacity),
                          what));
    // The pass's list and forms live in the group table's span: the next
    // rebuild starts with a full round.
    table_valid_ = false;
    CUstream stream = ctx.stream();
    VyreEgCounters init{};
    init.full = 1;
    VYRE_RETURN_IF_ERROR(ResetCounters(init, what));
    VYRE_RETURN_IF_ERROR(EnsureRowRecords(what));
    args_.parent_state = parent_state_;
    bool bucketed = bucket_plan_.usable && rows_ > 0;
    // Only the bucketed pass reads the packed forms.
    VYRE_RETURN_IF_ERROR(Launch(kernels_.refresh, rows_, bucketed ? PassArgs() : args_, what));
    VyreEgCounters seen{};
    for (int attempt = 0; attempt < 3; ++attempt) {
      // Every attempt groups again: the bucketed pass consumes its list, and
      // a grown output moves the groups' scratch. The canonical children and
      // hashes of the refresh stay.
      VYRE_RETURN_IF_ERROR(EnqueuePassGroups(bucketed, what));
      VYRE_RETURN_IF_ERROR(EnqueuePassPairs(bucketed, what));
      VYRE_RETURN_IF_ERROR(ReadCounters(&seen, what));
      if (bucketed && seen.overflow != 0) {
        // A bucket's distinct forms filled its shared-memory table (never
        // expected; colliding hashes can): the table pass finds the same,
        // after a refresh that writes every row's canonical children.
        bucketed = false;
        VYRE_RETURN_IF_ERROR(Launch(kernels_.refresh, rows_, args_, what));
        continue;
      }
      if (seen.overflow != 0 || seen.pair_count <= pass_pair_capacity_) break;
      // More pairs than the output holds: grow it and run again.
      VYRE_RETURN_IF_ERROR(EnsurePassScratch(seen.pair_count, what));
    }
    if (seen.overflow != 0 || seen.pair_count > pass_pair_capacity_) {
      return Errorf(VYRE_STATUS_INTERNAL,
                    "%s: the congruence pass's scratch overflowed (%u pairs for %u places). Fix: "
                    "report this as a vyre-cuda bug with the e-graph's size.",
                    what, seen.pair_count, pass_pair_capacity_);
    }
    count = seen.pair_count;
    if (count > 0 && count <= capacity) {
      VYRE_CU(what, cuMemcpyDtoHAsync, pairs, args_.pairs_out, count * 8, stream);
      ctx.telemetry().d2h_operations.Add();
      ctx.telemetry().d2h_bytes.Add(count * 8);
      VYRE_CU(what, cuStreamSynchronize, stream);
    }
  }
  if (out_count != nullptr) *out_count = count;
  if (capacity == 0 && pairs == nullptr) return absl::OkStatus();
  if (count > capacity) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: the pass found %u pairs but pairs has room for %u; nothing was written. "
                  "Fix: pass room for at least %u pairs (capacity 0 with NULL asks the count).",
                  what, count, capacity, count);
  }
  if (!gpu()) {
    for (uint64_t i = 0; i < count; ++i) {
      pairs[2 * i] = found[i].first;
      pairs[2 * i + 1] = found[i].second;
    }
    return absl::OkStatus();
  }
  // The device finds pairs in no particular order: sort for one answer.
  auto* begin = reinterpret_cast<std::array<uint32_t, 2>*>(pairs);
  std::sort(begin, begin + count);
  return absl::OkStatus();
}

absl::Status EgraphImage::Append(const vyre_egraph_append_desc& d, const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckIdle(what));
  VYRE_RETURN_IF_ERROR(egraph::CheckAppendShape(d, rows_, classes_, child_count_, what));
  if (gpu()) {
    VYRE_RETURN_IF_ERROR(AppendOnDevice(d, what));
  } else {
    VYRE_RETURN_IF_ERROR(egraph::CheckColumns(egraph::ViewOf(d, classes_ + d.class_count), what));
    host_->Append(d);
  }
  rows_ += d.row_count;
  classes_ += d.class_count;
  child_count_ += d.child_count;
  canonical_classes_ += d.class_count;
  return absl::OkStatus();
}

absl::Status EgraphImage::ReadChanged(uint32_t* pairs, uint64_t capacity, uint64_t* out_count,
                                      const char* what) {
  std::lock_guard lock(mu_);
  VYRE_RETURN_IF_ERROR(CheckIdle(what));
  VYRE_RETURN_IF_ERROR(CheckPairRoom(pairs, capacity, what));
  const uint64_t count = gpu() ? changed_count_ : host_->changed().size();
  *out_count = count;
  if (capacity == 0 && pairs == nullptr) return absl::OkStatus();
  if (count > capacity) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: the last rebuild changed %u classes but pairs has room for %u; nothing was "
                  "written. Fix: pass room for at least %u pairs (capacity 0 with NULL asks the "
                  "count).",
                  what, count, capacity, count);
  }
  if (count == 0) return absl::OkStatus();
  if (!gpu()) {
    const auto& changed = host_->changed();
    for (uint64_t i = 0; i < count; ++i) {
      pairs[2 * i] = changed[i].first;
      pairs[2 * i + 1] = changed[i].second;
    }
    return absl::OkStatus();
  }
  return ReadChangedOnDevice(pairs, count, what);
}

HandleRegistry<EgraphImage>& EgraphImages() {
  static auto* registry =
      new HandleRegistry<EgraphImage>(HandleType::kEgraphImage, ReleaseRank::kEgraphImages);
  return *registry;
}

}  // namespace vyre
