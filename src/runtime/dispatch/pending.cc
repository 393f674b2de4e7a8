#include "runtime/dispatch/pending.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/time/clock.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/checked_math.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "runtime/dispatch/kernel_launch.h"
#include "runtime/transfer/memory.h"

namespace vyre {
namespace {

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

bool TraceOn() { return LogEnabled(VYRE_LOG_TRACE); }

constexpr PendingWork::Words kDispatchWords = {
    "dispatch", "enqueued", "vyre_dispatch_async",
    "wait on a pending dispatch once; read its timing with vyre_pending_timing and release it "
    "with vyre_pending_release."};

}  // namespace

PendingDispatch::PendingDispatch(std::shared_ptr<Program> program, bool synchronous)
    : PendingWork(synchronous, kDispatchWords) {
  Attach(std::move(program));
}

PendingDispatch::~PendingDispatch() { Detach(); }

void PendingDispatch::Attach(std::shared_ptr<Program> program) {
  program_ = std::move(program);
  AttachTo(&program_->context());
  host_timing_ = true;
  stages_ = StageTimes{};
  param_pointer_ = 0;
}

void PendingDispatch::Detach() {
  if (!program_) return;
  DetachFromContext();
  plan_.bindings.clear();  // keeps its storage for the next dispatch
  program_.reset();
}

void PendingDispatch::ReleaseResources() {
  // The slabs may still be read or written by queued copies; they go back
  // to the pools only once the stream has passed them.
  DrainStream();
  device_slab_.reset();
  pinned_slab_.reset();
  done_.reset();
  start_.reset();
  end_.reset();
  for (PlannedBinding& b : plan_.bindings) {
    b.buffer.reset();
    b.input_region.reset();
    b.output_region.reset();
  }
}

absl::Status PendingDispatch::Enqueue(const vyre_dispatch_desc& desc, const char* what) {
  auto lock = Lock();
  host_timing_ = host_timing_ || TraceOn();
  if (host_timing_) started_ns_ = NowNs();
  VYRE_RETURN_IF_ERROR(BuildDispatchPlan(*program_, desc, what, &plan_));
  if (host_timing_) stages_.planned = NowNs();
  absl::Status status = EnqueueLocked(what);
  if (!status.ok()) {
    ReleaseResources();
    return status;
  }
  state_ = State::kInFlight;
  if (host_timing_) {
    stages_.enqueued = NowNs();
    timing_.enqueue_ns = static_cast<uint64_t>(stages_.enqueued - started_ns_);
  }
  context().telemetry().dispatches.Add();
  return absl::OkStatus();
}

absl::Status PendingDispatch::EnqueueLocked(const char* what) {
  Context& ctx = context();
  // Without staged host data the copy would carry only the parameter words:
  // the program's parameter cache usually makes it unnecessary.
  Program::ParamCache& cache = program_->param_cache();
  const bool cached_params = plan_.param_bytes > 0 &&
                             plan_.param_bytes <= Program::kParamCacheBytes &&
                             plan_.h2d_prefix_bytes == *CheckedAlignUp(plan_.param_bytes,
                                                                       kSlabAlignment);
  std::unique_lock<std::mutex> param_lock;
  if (cached_params) param_lock = std::unique_lock<std::mutex>(cache.mu);
  VYRE_RETURN_IF_ERROR(StageOnHost(cached_params, what));

  if (host_timing_) stages_.staged = NowNs();
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CUstream stream = ctx.stream();
  bool timed = (plan_.flags & VYRE_DISPATCH_FLAG_DEVICE_TIMING) || TraceOn();
  if (timed) {
    VYRE_RETURN_IF_ERROR(start_.Acquire(&ctx.events(), /*timing=*/true, what));
    VYRE_RETURN_IF_ERROR(end_.Acquire(&ctx.events(), /*timing=*/true, what));
    VYRE_CU(what, cuEventRecord, start_.get(), stream);
    device_work_pending_ = true;
  }
  if (cached_params) {
    VYRE_RETURN_IF_ERROR(UseParamCache(cache, what));
  } else if (plan_.h2d_prefix_bytes > 0) {
    device_work_pending_ = true;
    VYRE_CU(what, cuMemcpyHtoDAsync, device_slab_.device(), pinned_slab_.host(),
            plan_.h2d_prefix_bytes, stream);
    ctx.telemetry().h2d_operations.Add();
    ctx.telemetry().h2d_bytes.Add(plan_.h2d_prefix_bytes);
  }
  VYRE_RETURN_IF_ERROR(EnqueueLargeInputs(what));
  VYRE_RETURN_IF_ERROR(EnqueueOutputZeroing(what));
  VYRE_RETURN_IF_ERROR(Launch(what));
  VYRE_RETURN_IF_ERROR(EnqueueReadbacks(what));
  if (timed) VYRE_CU(what, cuEventRecord, end_.get(), stream);
  if (!synchronous_) {
    VYRE_RETURN_IF_ERROR(done_.Acquire(&ctx.events(), /*timing=*/false, what));
    VYRE_CU(what, cuEventRecord, done_.get(), stream);
  }
  return absl::OkStatus();
}

absl::Status PendingDispatch::StageOnHost(bool cached_params, const char* what) {
  Context& ctx = context();
  if (plan_.device_slab_bytes > (cached_params ? plan_.h2d_prefix_bytes : 0)) {
    VYRE_ASSIGN_OR_RETURN(device_slab_, ctx.device_pool().Acquire(plan_.device_slab_bytes, what));
  }
  if (plan_.pinned_slab_bytes > 0 && !cached_params) {
    VYRE_ASSIGN_OR_RETURN(pinned_slab_, ctx.pinned_pool().Acquire(plan_.pinned_slab_bytes, what));
    if (plan_.param_bytes > 0) {
      std::memcpy(pinned_slab_.host(), plan_.param_words, plan_.param_bytes);
    }
  }
  param_pointer_ = plan_.param_bytes == 0 ? ctx.zero_params() : device_slab_.device();
  // Stage the small inputs, and zero the small outputs in the same bytes.
  for (const PlannedBinding& b : plan_.bindings) {
    if (!b.host || !b.staged) continue;
    if (b.decl->reads()) {
      std::memcpy(pinned_slab_.host() + b.pinned_offset, b.host_input, b.bytes);
    } else {
      std::memset(pinned_slab_.host() + b.pinned_offset, 0, b.bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status PendingDispatch::EnqueueLargeInputs(const char* what) {
  Context& ctx = context();
  Telemetry& t = ctx.telemetry();
  for (PlannedBinding& b : plan_.bindings) {
    if (!b.host || b.staged) continue;
    if (b.decl->writes()) b.output_region = HostMemory().Find(b.host_output, b.bytes);
    if (!b.decl->reads()) continue;
    device_work_pending_ = true;
    const CUdeviceptr target = device_slab_.device() + b.device_offset;
    b.input_region = HostMemory().Find(b.host_input, b.bytes);
    if (b.input_region) {
      VYRE_CU(what, cuMemcpyHtoDAsync, target, b.host_input, b.bytes, ctx.stream());
      t.h2d_operations.Add();
      t.h2d_bytes.Add(b.bytes);
    } else {
      VYRE_RETURN_IF_ERROR(
          ctx.staging().ToDevice(target, b.host_input, b.bytes, ctx.stream(), what));
    }
  }
  return absl::OkStatus();
}

absl::Status PendingDispatch::EnqueueOutputZeroing(const char* what) {
  Context& ctx = context();
  Telemetry& t = ctx.telemetry();
  if (plan_.output_region_bytes > 0) {
    device_work_pending_ = true;
    VYRE_CU(what, cuMemsetD8Async, device_slab_.device() + plan_.output_region_offset, 0,
            plan_.output_region_bytes, ctx.stream());
    t.memset_operations.Add();
  }
  for (const PlannedBinding& b : plan_.bindings) {
    if (!b.host && b.decl->role == VYRE_ROLE_OUTPUT) {
      device_work_pending_ = true;
      VYRE_CU(what, cuMemsetD8Async, b.buffer->device() + b.offset, 0, b.bytes, ctx.stream());
      t.memset_operations.Add();
    }
  }
  return absl::OkStatus();
}

absl::Status PendingDispatch::UseParamCache(Program::ParamCache& cache, const char* what) {
  Context& ctx = context();
  absl::string_view words(reinterpret_cast<const char*>(plan_.param_words), plan_.param_bytes);
  if (cache.device == 0) {
    VYRE_ASSIGN_OR_RETURN(uint64_t block, AllocateDeviceBytes(Program::kParamCacheBytes, what,
                                                              &ctx.telemetry()));
    cache.device = static_cast<CUdeviceptr>(block);
  }
  param_pointer_ = cache.device;
  if (cache.valid && cache.words == words) return absl::OkStatus();
  // The copy's source must outlive the copy: it lives in this dispatch's
  // pinned slab, released only once the dispatch completes.
  VYRE_ASSIGN_OR_RETURN(pinned_slab_, ctx.pinned_pool().Acquire(plan_.param_bytes, what));
  std::memcpy(pinned_slab_.host(), plan_.param_words, plan_.param_bytes);
  cache.valid = false;
  device_work_pending_ = true;
  VYRE_CU(what, cuMemcpyHtoDAsync, cache.device, pinned_slab_.host(), plan_.param_bytes,
          ctx.stream());
  ctx.telemetry().h2d_operations.Add();
  ctx.telemetry().h2d_bytes.Add(plan_.param_bytes);
  cache.words.assign(words.data(), words.size());
  cache.valid = true;
  return absl::OkStatus();
}

absl::Status PendingDispatch::Launch(const char* what) {
  Context& ctx = context();
  const Program& program = *program_;
  // Values first, then pointers to them: the sizes are fixed before any
  // address is taken, so the inline storage never moves.
  KernelValues values;
  FillKernelValues(
      program,
      [&](uint32_t index) -> uint64_t {
        const PlannedBinding& b = plan_.bindings[index];
        return b.host ? device_slab_.device() + b.device_offset : b.buffer->device() + b.offset;
      },
      param_pointer_, plan_.scalars, &values);
  KernelArgs args;
  PointKernelArgs(values, &args);
  LaunchShape shape;
  for (int a = 0; a < 3; ++a) {
    shape.grid[a] = plan_.grid[a];
    shape.block[a] = plan_.block[a];
  }
  shape.shared_bytes = static_cast<uint32_t>(plan_.shared_memory_bytes);
  VYRE_RETURN_IF_ERROR(OptInSharedMemory(program, shape.shared_bytes, what));
  bool cooperative = plan_.flags & VYRE_DISPATCH_FLAG_COOPERATIVE;
  if (cooperative) {
    int per_sm = 0;
    uint32_t threads = plan_.block[0] * plan_.block[1] * plan_.block[2];
    VYRE_CU(what, cuOccupancyMaxActiveBlocksPerMultiprocessor, &per_sm, program.function(),
            static_cast<int>(threads), shape.shared_bytes);
    uint64_t resident = uint64_t(per_sm) * ctx.device().multiprocessor_count;
    uint64_t blocks = uint64_t{plan_.grid[0]} * plan_.grid[1] * plan_.grid[2];
    if (blocks > resident) {
      return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                    "%s: a cooperative grid of %u blocks cannot be co-resident: at %u threads "
                    "per block the device holds %u blocks at once (%d per SM x %u SMs). Fix: "
                    "launch at most %u blocks, e.g. a grid-stride loop over the data.",
                    what, blocks, threads, resident, per_sm, ctx.device().multiprocessor_count,
                    resident);
    }
  }
  device_work_pending_ = true;
  return LaunchKernel(program, shape, plan_.iterations, args.data(), ctx.stream(), cooperative,
                      &ctx.telemetry(), what);
}

absl::Status PendingDispatch::EnqueueReadbacks(const char* what) {
  Context& ctx = context();
  Telemetry& t = ctx.telemetry();
  for (const PlannedBinding& b : plan_.bindings) {
    if (!b.host || !b.decl->writes()) continue;
    // Large outputs in pageable memory go through the staging ring once the
    // kernel is done (Finish); in pinned memory the DMA writes them in place.
    if (!b.staged && !b.output_region) continue;
    CUdeviceptr source = device_slab_.device() + b.device_offset + b.readback_offset;
    void* target = b.staged ? static_cast<void*>(pinned_slab_.host() + b.pinned_offset +
                                                 b.readback_offset)
                            : static_cast<unsigned char*>(b.host_output) + b.readback_offset;
    device_work_pending_ = true;
    VYRE_CU(what, cuMemcpyDtoHAsync, target, source, b.readback_bytes, ctx.stream());
    t.d2h_operations.Add();
    t.d2h_bytes.Add(b.readback_bytes);
  }
  return absl::OkStatus();
}

absl::Status PendingDispatch::PollInFlight(const char* what) {
  if (!device_work_pending_) return absl::OkStatus();
  driver::ScopedContext bind(context().cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_RETURN_IF_ERROR(
      PollEvent(done_.get(), what, absl::StrFormat("the dispatch of '%s'", program_->entry())));
  // The device is done with resident buffers: a buffer freed while this
  // dispatch ran is released now, not only when the pending is waited on.
  for (PlannedBinding& b : plan_.bindings) {
    if (!b.host) b.buffer.reset();
  }
  return absl::OkStatus();
}

absl::Status PendingDispatch::AwaitDevice(uint64_t timeout_ns, const char* what) {
  Context& ctx = context();
  ctx.telemetry().sync_points.Add();
  if (synchronous_) {
    VYRE_CU(what, cuStreamSynchronize, ctx.stream());
    return absl::OkStatus();
  }
  if (timeout_ns == VYRE_WAIT_FOREVER) return AwaitEvent(done_.get(), timeout_ns, what, {});
  return AwaitEvent(done_.get(), timeout_ns, what,
                    absl::StrFormat("the dispatch of '%s'", program_->entry()));
}

absl::Status PendingDispatch::WaitInFlight(uint64_t timeout_ns, const char* what,
                                           bool* settled) {
  const int64_t wait_start = host_timing_ ? NowNs() : 0;
  *settled = false;
  driver::ScopedContext bind(context().cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  absl::Status status = AwaitDevice(timeout_ns, what);
  if (PublicCode(status) == VYRE_STATUS_TIMEOUT) return status;
  *settled = true;
  if (host_timing_) stages_.completed = NowNs();
  if (status.ok()) status = Finish(what);
  if (host_timing_) {
    const int64_t end = NowNs();
    stages_.read_back = end;
    timing_.wait_ns = static_cast<uint64_t>(end - wait_start);
    timing_.wall_ns = static_cast<uint64_t>(end - started_ns_);
  }
  if (TraceOn()) LogStages(wait_start);
  return status;
}

void PendingDispatch::LogStages(int64_t wait_start) const {
  auto us = [](int64_t from, int64_t to) { return to > from ? (to - from) / 1e3 : 0.0; };
  Logf(VYRE_LOG_TRACE,
       "dispatch '%s': plan %.1f us, stage %.1f us, enqueue %.1f us, wait %.1f us, "
       "read-back %.1f us, device %.1f us, wall %.1f us",
       program_->entry(), us(started_ns_, stages_.planned), us(stages_.planned, stages_.staged),
       us(stages_.staged, stages_.enqueued), us(wait_start, stages_.completed),
       us(stages_.completed, stages_.read_back), timing_.device_ns / 1e3, timing_.wall_ns / 1e3);
}

absl::Status PendingDispatch::Finish(const char* what) {
  device_work_pending_ = false;
  Context& ctx = context();
  ReadDeviceTime();
  // Large outputs in pageable memory were left on the device (an async call
  // returns without blocking on them); fetch them now through the ring.
  for (const PlannedBinding& b : plan_.bindings) {
    if (!b.host || b.staged || !b.decl->writes() || b.output_region) continue;
    device_work_pending_ = true;
    VYRE_RETURN_IF_ERROR(ctx.staging().ToHost(
        static_cast<unsigned char*>(b.host_output) + b.readback_offset,
        device_slab_.device() + b.device_offset + b.readback_offset, b.readback_bytes,
        ctx.stream(), what));
    device_work_pending_ = false;
  }
  for (const PlannedBinding& b : plan_.bindings) {
    if (b.host && b.staged && b.decl->writes()) {
      std::memcpy(static_cast<unsigned char*>(b.host_output) + b.readback_offset,
                  pinned_slab_.host() + b.pinned_offset + b.readback_offset, b.readback_bytes);
    }
  }
  return absl::OkStatus();
}

void PendingDispatch::Recycle(std::shared_ptr<PendingWork> self) {
  if (synchronous_ || !program_) return;
  // Held past Detach: the program keeps the pool, and this may be the last
  // reference to it.
  std::shared_ptr<Program> program = program_;
  if (self.use_count() != 1) return;
  Detach();
  if (!program->context().open()) return;
  // The same object and owner, typed: `self` is this object.
  std::shared_ptr<PendingDispatch> kept(self, this);
  self.reset();
  program->recycled_dispatches().Put(std::move(kept));
}

absl::Status PendingDispatch::AbandonInFlight(const char* what) {
  // Never waited on: what its device work met would go with the handle.
  return AwaitAbandoned(absl::StrFormat("the dispatch of '%s'", program_->entry()), what);
}

}  // namespace vyre
