#include "egraph/egraph_rebuild.h"

#include <algorithm>
#include <cstring>

#include "absl/time/clock.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "base/struct_size.h"
#include "egraph/cpu_reference.h"

namespace vyre {
namespace {

constexpr uint32_t kKnownFlags = VYRE_EGRAPH_REBUILD_RESET | VYRE_EGRAPH_REBUILD_DEVICE_TIMING |
                                 VYRE_EGRAPH_REBUILD_COLLIDING_HASH |
                                 VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
// Rounds in the first batch; each later batch doubles, up to the cap. A
// round enqueued past the fixpoint still costs its launches (about 20 us
// on an H100, every kernel finding the rebuild done), more than the host's
// turn between batches. A full rebuild takes depth + 2 rounds (four or
// more); an incremental one after a few unions or appends often one to
// three, so it starts with one and grows 1, 2, 4: no round of the
// one-union case is wasted, and three rounds cost one turn.
constexpr uint32_t kFirstFullBatch = 4;
constexpr uint32_t kFirstIncrementalBatch = 1;
constexpr uint32_t kMaxBatch = 64;
// Up to this many unions, relink walks each linked root's chain directly;
// more are compressed over every class first.
constexpr uint64_t kFewUnions = 4096;

constexpr PendingWork::Words kRebuildWords = {"rebuild", "started", "vyre_egraph_rebuild_async",
                                              "wait on a pending rebuild once, then release it."};

}  // namespace

EgraphRebuild::EgraphRebuild(std::shared_ptr<EgraphImage> image, bool synchronous)
    : PendingWork(synchronous, kRebuildWords), image_(std::move(image)) {
  // A CPU image's rebuild is host work of no context.
  AttachTo(image_->gpu() ? image_->context() : nullptr);
}

EgraphRebuild::~EgraphRebuild() {
  {
    auto lock = Lock();
    if (state_ == State::kInFlight) {
      // Never waited: finish so the image's union-find is whole again.
      Finish(/*read_back=*/false, "vyre_pending_release").IgnoreError();
    }
  }
  DetachFromContext();
}

void EgraphRebuild::ReleaseResources() {
  DrainStream();
  unions_device_.reset();
  unions_pinned_.reset();
  if (loop_exec_.get() != nullptr || loop_.graph.get() != nullptr) {
    // Device rounds: the loop graph and its instance, with the context bound.
    driver::ScopedContext bind(image_->context()->cu(), driver::ScopedContext::Purpose::kRelease);
    loop_exec_.reset();
    loop_ = DeviceLoop{};
  }
  start_.reset();
  end_.reset();
  done_.reset();
  if (claimed_) {
    std::lock_guard image_lock(image_->mutex());
    image_->set_busy(false);
    claimed_ = false;
  }
  if (image_lock_.owns_lock()) image_lock_.unlock();
}

absl::Status EgraphRebuild::Start(const vyre_egraph_rebuild_desc& desc, const char* what) {
  auto lock = Lock();
  started_ns_ = absl::GetCurrentTimeNanos();
  if ((desc.flags & ~kKnownFlags) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x hold unknown bits. Fix: use VYRE_EGRAPH_REBUILD_* values only.",
                  what, desc.flags);
  }
  if ((desc.flags & VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS) != 0 && image_->gpu() &&
      !driver::HasConditionalGraphs()) {
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "%s: VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS needs conditional graph nodes, which the "
                  "installed driver (CUDA %d.%d) lacks. Fix: rebuild without that flag, or "
                  "install an NVIDIA driver that supports CUDA 12.4 or newer.",
                  what, driver::DriverVersion() / 1000, (driver::DriverVersion() % 1000) / 10);
  }
  if (desc.union_count > UINT32_MAX) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: union_count %u is more than one rebuild takes (2^32 - 1). Fix: pass the "
                  "unions in several rebuilds.",
                  what, desc.union_count);
  }
  if (desc.union_count > 0 && desc.unions == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: unions is NULL but union_count is %u. Fix: pass 2 u32 class ids per "
                  "union, or a count of 0.",
                  what, desc.union_count);
  }
  std::unique_lock<std::mutex> image_lock(image_->mutex());
  VYRE_RETURN_IF_ERROR(image_->CheckIdle(what));
  const uint64_t classes = image_->classes_;
  for (uint64_t i = 0; i < desc.union_count * 2; ++i) {
    if (desc.unions[i] >= classes) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: union %u names class %u, not below the image's class_count %u. Fix: "
                    "pass class ids of this image.",
                    what, i / 2, desc.unions[i], classes);
    }
  }
  flags_ = desc.flags;
  canonical_out_ = desc.canonical_out;
  result_out_ = desc.result_out;
  classes_before_ = (desc.flags & VYRE_EGRAPH_REBUILD_RESET) ? classes : image_->canonical_classes_;
  absl::Status started =
      image_->gpu() ? StartOnDevice(desc, what) : StartOnHost(desc, what);
  if (!started.ok()) {
    image_lock.unlock();
    ReleaseResources();
    return started;
  }
  state_ = State::kInFlight;
  if (synchronous_) {
    image_lock_ = std::move(image_lock);
  } else {
    image_->set_busy(true);
    claimed_ = true;
  }
  return absl::OkStatus();
}

absl::Status EgraphRebuild::StartOnHost(const vyre_egraph_rebuild_desc& desc, const char* what) {
  (void)what;
  EgraphImage& im = *image_;
  result_ = im.host_->Rebuild(desc);
  im.classes_ = im.host_->classes();
  im.canonical_classes_ = result_.classes_after;
  return absl::OkStatus();
}

EgraphRebuild::Round::Round(const EgraphImage& im) : refresh_args(im.args_) {
  refresh_args.clears_table = 1;  // a full round's refresh empties the table first
  const uint64_t refresh_items = std::max<uint64_t>(im.rows_, im.scratch_layout_.table_slots / 2);
  steps = {{{im.kernels_.refresh, refresh_items, &refresh_args},
            {im.kernels_.insert, im.rows_, &im.args_},
            {im.kernels_.relink, im.classes_, &im.args_},
            {im.kernels_.mark_parents, im.classes_, &im.args_},
            {im.kernels_.round_end, 1, &im.args_}}};
}

absl::Status EgraphRebuild::EnqueueRounds(uint32_t rounds, const char* what) {
  EgraphImage& im = *image_;
  const Round round(im);
  for (uint32_t i = 0; i < rounds; ++i) {
    for (const Round::Step& step : round.steps) {
      VYRE_RETURN_IF_ERROR(im.Launch(step.kernel, step.items, *step.args, what));
    }
  }
  return ReadCountersBack(what);
}

absl::Status EgraphRebuild::ReadCountersBack(const char* what) {
  // The counters come back with the batch, read once it completes.
  EgraphImage& im = *image_;
  Context& ctx = *im.context();
  VYRE_CU(what, cuMemcpyDtoHAsync, im.pinned_counters_.host(), im.args_.counters,
          sizeof(VyreEgCounters), ctx.stream());
  ctx.telemetry().d2h_operations.Add();
  ctx.telemetry().d2h_bytes.Add(sizeof(VyreEgCounters));
  return absl::OkStatus();
}

absl::Status EgraphRebuild::EnqueueDeviceRounds(const char* what) {
  EgraphImage& im = *image_;
  Context& ctx = *im.context();
  const VyreEgArgs& a = im.args_;
  // One round, as EnqueueRounds launches it; round_end sets `again` while
  // the rebuild is not done.
  const Round round(im);
  const FillLoopBody fill = [&](CUgraph inner, std::vector<CUgraphNode>* last) -> absl::Status {
    CUgraphNode previous = nullptr;
    for (const Round::Step& step : round.steps) {
      VyreEgArgs copy = *step.args;  // the node keeps its own copy
      void* params[] = {&copy};
      const CUDA_KERNEL_NODE_PARAMS node = im.NodeParams(step.kernel, step.items, params);
      CUgraphNode added = nullptr;
      VYRE_CU(what, cuGraphAddKernelNode, &added, inner, previous ? &previous : nullptr,
              previous ? 1 : 0, &node);
      previous = added;
    }
    last->push_back(previous);
    return absl::OkStatus();
  };
  // Every merging round removes a class: class_count + 2 rounds bound any
  // rebuild (Finish calls a loop stopped there a lack of progress).
  const uint32_t bound = static_cast<uint32_t>(std::min<uint64_t>(im.classes_ + 2, UINT32_MAX));
  VYRE_ASSIGN_OR_RETURN(loop_, MakeDeviceLoop(ctx, a.counters + offsetof(VyreEgCounters, again),
                                              a.counters + offsetof(VyreEgCounters, loop_rounds),
                                              bound, fill, what));
  VYRE_CU(what, cuGraphInstantiateWithFlags, loop_exec_.out(), loop_.graph.get(), 0);
  VYRE_CU(what, cuGraphLaunch, loop_exec_.get(), ctx.stream());
  ctx.telemetry().graph_launches.Add();
  return ReadCountersBack(what);
}

absl::Status EgraphRebuild::StartOnDevice(const vyre_egraph_rebuild_desc& desc, const char* what) {
  EgraphImage& im = *image_;
  Context& ctx = *im.context();
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CUstream stream = ctx.stream();
  if (desc.flags & VYRE_EGRAPH_REBUILD_DEVICE_TIMING) {
    VYRE_RETURN_IF_ERROR(start_.Acquire(&ctx.events(), /*timing=*/true, what));
    VYRE_RETURN_IF_ERROR(end_.Acquire(&ctx.events(), /*timing=*/true, what));
  }
  if (!synchronous_) VYRE_RETURN_IF_ERROR(done_.Acquire(&ctx.events(), /*timing=*/false, what));
  if (start_) VYRE_CU(what, cuEventRecord, start_.get(), stream);
  device_work_pending_ = true;
  const bool reset = (desc.flags & VYRE_EGRAPH_REBUILD_RESET) != 0;
  const bool weak = (desc.flags & VYRE_EGRAPH_REBUILD_COLLIDING_HASH) != 0;
  // Incremental unless nothing is known: the table, the rows' forms and the
  // worklist the last rebuild (and the appends since) left.
  const bool incremental = !reset && im.table_valid_ && !im.next_full_ && im.table_weak_ == weak;
  VyreEgCounters init{};
  init.full = incremental ? 0 : 1;
  init.table_round = incremental ? im.table_round_ : 0;
  init.placed = incremental ? im.placed_ : 0;
  init.max_rounds = desc.max_rounds;
  VYRE_RETURN_IF_ERROR(im.ResetCounters(init, what));
  // From here the image's table is in flux until Finish.
  im.table_valid_ = false;
  im.args_.weak_hash = weak ? 1u : 0u;
  VYRE_CU(what, cuMemsetD32Async, im.args_.changed_bits, 0, im.args_.hooked_words, stream);
  ctx.telemetry().memset_operations.Add();
  VYRE_RETURN_IF_ERROR(im.EnsureRowRecords(what));
  if (im.index_stale_) VYRE_RETURN_IF_ERROR(im.BuildIndex(what));
  if (reset) VYRE_RETURN_IF_ERROR(im.Launch(im.kernels_.init_parent, im.classes_, im.args_, what));
  if (desc.union_count > 0) VYRE_RETURN_IF_ERROR(EnqueueUnions(desc, what));
  // The union-find as round 1 finds it; unknown to later calls until this
  // rebuild finishes.
  start_parent_state_ = reset ? VYRE_EG_PARENT_IDENTITY : im.parent_state_;
  if (desc.union_count > 0) start_parent_state_ = VYRE_EG_PARENT_FLAT;  // relink's
  im.args_.parent_state = start_parent_state_;
  im.parent_state_ = VYRE_EG_PARENT_ANY;
  batch_ = incremental ? kFirstIncrementalBatch : kFirstFullBatch;
  device_rounds_ = (desc.flags & VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS) != 0;
  if (device_rounds_) {
    VYRE_RETURN_IF_ERROR(EnqueueDeviceRounds(what));
  } else {
    VYRE_RETURN_IF_ERROR(EnqueueRounds(batch_, what));
  }
  if (done_) VYRE_CU(what, cuEventRecord, done_.get(), stream);
  return absl::OkStatus();
}

absl::Status EgraphRebuild::EnqueueUnions(const vyre_egraph_rebuild_desc& desc, const char* what) {
  EgraphImage& im = *image_;
  Context& ctx = *im.context();
  CUstream stream = ctx.stream();
  const uint64_t bytes = desc.union_count * 8;
  VYRE_ASSIGN_OR_RETURN(unions_pinned_, ctx.pinned_pool().Acquire(bytes, what));
  VYRE_ASSIGN_OR_RETURN(unions_device_, ctx.device_pool().Acquire(bytes, what));
  std::memcpy(unions_pinned_.host(), desc.unions, bytes);
  VYRE_CU(what, cuMemcpyHtoDAsync, unions_device_.device(), unions_pinned_.host(), bytes, stream);
  ctx.telemetry().h2d_operations.Add();
  ctx.telemetry().h2d_bytes.Add(bytes);
  // The roots the unions link are recorded in the hooked set round 1 reads
  // as the round before's (both sets start empty), for relink to move their
  // members and put the rows that name them on round 1's worklist.
  VYRE_CU(what, cuMemsetD32Async, im.args_.hooked, 0, uint64_t{im.args_.hooked_words} * 2, stream);
  ctx.telemetry().memset_operations.Add();
  VyreEgArgs with_unions = im.args_;
  with_unions.unions = unions_device_.device();
  with_unions.union_count = static_cast<uint32_t>(desc.union_count);
  with_unions.union_phase = 1;
  VYRE_RETURN_IF_ERROR(im.Launch(im.kernels_.apply_unions, desc.union_count, with_unions, what));
  if (desc.union_count > kFewUnions) {
    // Many unions can chain roots deeply: halve every path once instead of
    // letting every member of a linked root walk its chain.
    VYRE_RETURN_IF_ERROR(im.Launch(im.kernels_.compress, im.classes_, im.args_, what));
    VYRE_RETURN_IF_ERROR(im.Launch(im.kernels_.settle, im.classes_, im.args_, what));
  }
  VYRE_RETURN_IF_ERROR(im.Launch(im.kernels_.relink, im.classes_, with_unions, what));
  VYRE_RETURN_IF_ERROR(im.Launch(im.kernels_.mark_parents, im.classes_, with_unions, what));
  // Round 1 counts its own links.
  VYRE_CU(what, cuMemsetD32Async, im.args_.counters + offsetof(VyreEgCounters, linked), 0, 1,
          stream);
  ctx.telemetry().memset_operations.Add();
  return absl::OkStatus();
}

absl::Status EgraphRebuild::Finish(bool read_back, const char* what) {
  EgraphImage& im = *image_;
  if (!im.gpu()) {
    if (read_back && canonical_out_ != nullptr && im.classes_ > 0) {
      std::memcpy(canonical_out_, im.host_->Column(VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES).data(),
                  im.classes_ * 4);
    }
    return absl::OkStatus();
  }
  Context& ctx = *im.context();
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CUstream stream = ctx.stream();
  VyreEgCounters seen{};
  uint32_t rounds_before = 0;
  for (;;) {
    ctx.telemetry().sync_points.Add();
    VYRE_CU(what, cuStreamSynchronize, stream);
    std::memcpy(&seen, im.pinned_counters_.host(), sizeof(seen));
    if (seen.done) break;
    if (device_rounds_) {
      return Errorf(VYRE_STATUS_INTERNAL,
                    "%s: the e-graph rounds on the device stopped without a fixpoint (%u rounds, "
                    "%u merges). Fix: report this as a vyre-cuda bug with the e-graph's size; "
                    "rebuild without VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS meanwhile.",
                    what, seen.rounds, seen.merges);
    }
    // Every round that merges removes a class, so a rebuild ends within
    // class_count + 1 rounds; a batch that ran no round at all, or more
    // rounds than that, means the kernels are not doing their work.
    if (seen.rounds == rounds_before || seen.rounds > im.classes_ + 1) {
      return Errorf(VYRE_STATUS_INTERNAL,
                    "%s: the e-graph kernels stopped making progress (%u rounds, %u merges). "
                    "Fix: report this as a vyre-cuda bug with the e-graph's size; the image's "
                    "classes are left as the last round merged them.",
                    what, seen.rounds, seen.merges);
    }
    rounds_before = seen.rounds;
    batch_ = std::min(batch_ * 2, kMaxBatch);
    VYRE_RETURN_IF_ERROR(EnqueueRounds(batch_, what));
  }
  if (end_) VYRE_CU(what, cuEventRecord, end_.get(), stream);
  if (read_back && canonical_out_ != nullptr && im.classes_ > 0) {
    VYRE_CU(what, cuMemcpyDtoHAsync, canonical_out_, im.args_.rep, im.classes_ * 4, stream);
    ctx.telemetry().d2h_operations.Add();
    ctx.telemetry().d2h_bytes.Add(im.classes_ * 4);
  }
  VYRE_CU(what, cuStreamSynchronize, stream);
  device_work_pending_ = false;
  result_ = vyre_egraph_rebuild_result{};
  result_.struct_size = sizeof(result_);
  result_.rounds = seen.rounds;
  result_.merges = seen.merges;
  result_.union_merges = seen.union_merges;
  result_.rows_visited = seen.rows_visited;
  result_.classes_before = classes_before_;
  result_.classes_after = classes_before_ - seen.union_merges - seen.merges;
  result_.changed_class_count = seen.changed_count;
  result_.full_rounds = seen.full_rounds;
  if (start_ && end_) {
    float ms = 0;
    if (driver::Api().cuEventElapsedTime(&ms, start_.get(), end_.get()) == CUDA_SUCCESS) {
      result_.device_ns = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
    }
  }
  {
    // Asynchronous rebuilds hold the image through `busy`, not its mutex.
    std::unique_lock<std::mutex> image_lock;
    if (!synchronous_) image_lock = std::unique_lock<std::mutex>(im.mutex());
    im.canonical_classes_ = result_.classes_after;
    im.changed_count_ = seen.changed_count;
    // What the next rebuild starts from: the table as the last round left
    // it, and the worklist relink built for the round after it.
    im.table_valid_ = true;
    im.table_weak_ = im.args_.weak_hash != 0;
    im.next_full_ = seen.full != 0;
    im.table_round_ = seen.table_round;
    im.placed_ = seen.placed;
    // Every round ends with each entry a root (relink).
    const bool merged = seen.merges != 0 || seen.union_merges != 0;
    im.parent_state_ = start_parent_state_ == VYRE_EG_PARENT_IDENTITY && !merged
                           ? VYRE_EG_PARENT_IDENTITY
                           : VYRE_EG_PARENT_FLAT;
  }
  return absl::OkStatus();
}

absl::Status EgraphRebuild::PollInFlight(const char* what) {
  if (!done_) return absl::OkStatus();
  driver::ScopedContext bind(image_->context()->cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  return PollEvent(done_.get(), what, "the e-graph rebuild");
}

absl::Status EgraphRebuild::WaitInFlight(uint64_t timeout_ns, const char* what, bool* settled) {
  if (done_ && timeout_ns != VYRE_WAIT_FOREVER) {
    *settled = false;
    driver::ScopedContext bind(image_->context()->cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    absl::Status ready = AwaitEvent(done_.get(), timeout_ns, what, "the e-graph rebuild");
    if (PublicCode(ready) == VYRE_STATUS_TIMEOUT) return ready;
    *settled = true;
  }
  absl::Status status = Finish(/*read_back=*/true, what);
  const int64_t end = absl::GetCurrentTimeNanos();
  result_.wall_ns = static_cast<uint64_t>(end - started_ns_);
  timing_ = vyre_timing{};
  timing_.struct_size = sizeof(timing_);
  timing_.wall_ns = result_.wall_ns;
  timing_.device_ns = result_.device_ns;
  if (status.ok() && result_out_ != nullptr) {
    status = WriteOutStruct(what, "vyre_egraph_rebuild_result", result_out_, result_,
                            kRebuildResultV1);
  }
  return status;
}

absl::Status EgraphRebuild::AbandonInFlight(const char* what) {
  // Never waited on: the rebuild's failure would go with the handle.
  return Finish(/*read_back=*/false, what);
}

}  // namespace vyre
