#include "runtime/context/context.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/device_faults.h"
#include "driver/driver_api.h"
#include "runtime/transfer/memory.h"

namespace vyre {
namespace {

constexpr uint64_t kDefaultPoolLimit = uint64_t{1} << 30;
constexpr uint64_t kZeroParamsBytes = 256;

absl::StatusOr<int> Attribute(const char* what, CUdevice device, CUdevice_attribute attribute) {
  int value = 0;
  VYRE_CU(absl::StrCat(what, ": querying a device attribute"), cuDeviceGetAttribute, &value,
          attribute, device);
  return value;
}

}  // namespace

absl::Status CheckDeviceOrdinal(const char* what, uint32_t ordinal) {
  VYRE_RETURN_IF_ERROR(driver::EnsureLoaded());
  int count = driver::DeviceCount();
  if (count == 0) {
    return Errorf(VYRE_STATUS_NO_DEVICE,
                  "%s: the CUDA driver reports no device. Fix: run on a machine with an NVIDIA "
                  "GPU, and check nvidia-smi and CUDA_VISIBLE_DEVICES.",
                  what);
  }
  if (ordinal >= static_cast<uint32_t>(count)) {
    return Errorf(VYRE_STATUS_NO_DEVICE,
                  "%s: device ordinal %u does not exist; %d device(s) are visible. Fix: pass an "
                  "ordinal below vyre_device_count().",
                  what, ordinal, count);
  }
  return absl::OkStatus();
}

absl::Status QueryDeviceInfo(const char* what, uint32_t ordinal, vyre_device_info* info) {
  CUdevice device = 0;
  VYRE_CU(absl::StrCat(what, ": getting a CUDA device"), cuDeviceGet, &device,
          static_cast<int>(ordinal));
  vyre_device_info out{};
  out.struct_size = sizeof(out);
  out.ordinal = ordinal;
  VYRE_CU(absl::StrCat(what, ": reading the device name"), cuDeviceGetName, out.name,
          sizeof(out.name) - 1, device);
  size_t total = 0;
  VYRE_CU(absl::StrCat(what, ": reading the device memory size"), cuDeviceTotalMem, &total,
          device);
  out.total_memory_bytes = total;
  struct {
    uint32_t* field;
    CUdevice_attribute attribute;
  } attributes[] = {
      {&out.compute_capability_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {&out.compute_capability_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {&out.multiprocessor_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {&out.max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
      {&out.max_block_dim[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X},
      {&out.max_block_dim[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y},
      {&out.max_block_dim[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z},
      {&out.max_grid_dim[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X},
      {&out.max_grid_dim[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y},
      {&out.max_grid_dim[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z},
      {&out.max_shared_memory_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
      {&out.warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
      {&out.cooperative_launch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH},
  };
  for (auto& a : attributes) {
    VYRE_ASSIGN_OR_RETURN(int value, Attribute(what, device, a.attribute));
    *a.field = static_cast<uint32_t>(value);
  }
  out.driver_version = static_cast<uint32_t>(driver::DriverVersion());
  const int count = std::min(driver::DeviceCount(), 64);
  for (int peer = 0; peer < count; ++peer) {
    VYRE_ASSIGN_OR_RETURN(bool can_access,
                          DeviceCanAccessPeer(ordinal, static_cast<uint32_t>(peer), what));
    if (can_access) out.peer_access_mask |= uint64_t{1} << peer;
  }
  *info = out;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Context>> Context::Create(const vyre_context_desc& desc) {
  const char* what = "vyre_context_create";
  VYRE_ASSIGN_OR_RETURN(StagingConfig staging, ResolveStagingConfig(desc, what));
  VYRE_RETURN_IF_ERROR(CheckDeviceOrdinal(what, desc.device_ordinal));
  std::shared_ptr<Context> ctx(new Context());
  CUdevice device = 0;
  VYRE_CU("vyre_context_create: getting the device", cuDeviceGet, &device,
          static_cast<int>(desc.device_ordinal));
  // Counts the context against the device, refuses a faulted device while
  // other contexts of it live, and resets one none of ours holds any more.
  VYRE_ASSIGN_OR_RETURN(CUcontext primary,
                        driver::RetainPrimaryContext(
                            device, static_cast<int>(desc.device_ordinal), what));
  ctx->primary_.Adopt(device, primary);
  driver::ScopedContext bind(primary);
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_RETURN_IF_ERROR(QueryDeviceInfo(what, desc.device_ordinal, &ctx->info_));
  VYRE_CU("vyre_context_create: creating the context's stream", cuStreamCreate,
          ctx->stream_.out(), CU_STREAM_NON_BLOCKING);
  uint64_t transient_limit =
      desc.transient_pool_limit_bytes ? desc.transient_pool_limit_bytes : kDefaultPoolLimit;
  uint64_t pinned_limit =
      desc.pinned_pool_limit_bytes ? desc.pinned_pool_limit_bytes : kDefaultPoolLimit;
  ctx->device_pool_ = std::make_unique<BlockPool>(PoolKind::kDevice, primary, transient_limit,
                                                  &ctx->telemetry_);
  ctx->pinned_pool_ = std::make_unique<BlockPool>(PoolKind::kPinned, primary, pinned_limit,
                                                  &ctx->telemetry_);
  ctx->events_ = std::make_unique<EventPool>(primary);
  ctx->staging_ = std::make_unique<StagingRing>(primary, staging, &ctx->telemetry_);
  ctx->modules_ = std::make_unique<ModuleCache>(
      primary, static_cast<int>(ctx->info_.compute_capability_major),
      static_cast<int>(ctx->info_.compute_capability_minor), &ctx->telemetry_);
  VYRE_ASSIGN_OR_RETURN(uint64_t zero,
                        AllocateDeviceBytes(kZeroParamsBytes, what, &ctx->telemetry_));
  ctx->zero_params_ = static_cast<CUdeviceptr>(zero);
  VYRE_CU("vyre_context_create: clearing the empty parameter block", cuMemsetD8Async,
          ctx->zero_params_, 0, kZeroParamsBytes, ctx->stream_.get());
  VYRE_CU("vyre_context_create: waiting for the context's stream", cuStreamSynchronize,
          ctx->stream_.get());
  return ctx;
}

Context::~Context() {
  if (primary_.get() == nullptr) return;
  driver::ScopedContext bind(primary_.get(), driver::ScopedContext::Purpose::kRelease);
  if (stream_) {
    CUresult r = driver::Api().cuStreamSynchronize(stream_.get());
    if (r != CUDA_SUCCESS) driver::LogReleaseFailure("cuStreamSynchronize", r);
  }
  capture_stream_.reset();
  retired_capture_streams_.clear();
  interop_event_.reset();
  modules_.reset();
  staging_.reset();
  events_.reset();
  pinned_pool_.reset();
  device_pool_.reset();
  if (zero_params_ != 0) FreeDeviceBytes(zero_params_, kZeroParamsBytes, &telemetry_);
  stream_.reset();
}

absl::Status Context::Adopt(OwnedHandleTable& table, uint64_t bits, const char* what) {
  std::lock_guard lock(mu_);
  if (closed_) {
    return Errorf(VYRE_STATUS_STALE_HANDLE,
                  "%s: the context was destroyed while this call ran. Fix: do not destroy a "
                  "context while other threads still use it.",
                  what);
  }
  owned_.insert({&table, bits});
  return absl::OkStatus();
}

void Context::Disown(OwnedHandleTable& table, uint64_t bits) {
  std::lock_guard lock(mu_);
  owned_.erase({&table, bits});
}

bool Context::open() const {
  std::lock_guard lock(mu_);
  return !closed_;
}

void Context::Close() {
  std::vector<std::pair<OwnedHandleTable*, uint64_t>> owned;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    owned.assign(owned_.begin(), owned_.end());
    owned_.clear();
  }
  std::stable_sort(owned.begin(), owned.end(), [](const auto& a, const auto& b) {
    return a.first->release_rank() < b.first->release_rank();
  });
  // Outside the lock: a removed object may be destroyed here.
  for (const auto& [table, bits] : owned) table->ReleaseOwned(bits);
}

absl::StatusOr<CUstream> Context::CaptureStream(const char* what) {
  if (!capture_stream_) {
    VYRE_CU(what, cuStreamCreate, capture_stream_.out(), CU_STREAM_NON_BLOCKING);
  }
  return capture_stream_.get();
}

void Context::RetireCaptureStream() {
  if (!capture_stream_) return;
  Logf(VYRE_LOG_WARNING,
       "the driver would not end a graph capture; its stream is set aside until the context "
       "is destroyed");
  retired_capture_streams_.push_back(std::move(capture_stream_));
}

absl::Status Context::OrderStreams(CUstream first, CUstream then, const char* what,
                                   const char* first_name) {
  driver::ScopedContext bind(cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  std::lock_guard lock(interop_mu_);
  if (!interop_event_) {
    VYRE_CU(absl::StrCat(what, ": creating the context's stream-ordering event"), cuEventCreate,
            interop_event_.out(), CU_EVENT_DISABLE_TIMING);
  }
  // A stream handle the driver refuses is the caller's cu_stream: its Fix
  // says what to pass.
  auto fix_for = [&](CUstream s, CUresult r) -> absl::string_view {
    const bool refused = r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE ||
                         r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (s == stream() || !refused) return {};
    return "pass a live CUstream of the context's device, created in its primary context (the "
           "CUDA runtime's, which CuPy, PyTorch and Numba use), or 1 for the legacy default "
           "stream";
  };
  CUresult r = driver::Api().cuEventRecord(interop_event_.get(), first);
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r, absl::StrCat(what, ": recording an event on ", first_name),
                           "cuEventRecord", fix_for(first, r));
  }
  r = driver::Api().cuStreamWaitEvent(then, interop_event_.get(), 0);
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r,
                           absl::StrCat(what, then == stream()
                                                  ? ": making the context's stream wait for it"
                                                  : ": making cu_stream wait for it"),
                           "cuStreamWaitEvent", fix_for(then, r));
  }
  return absl::OkStatus();
}

absl::Status Context::WaitForStream(CUstream other, const char* what) {
  return OrderStreams(other, stream(), what, "cu_stream");
}

absl::Status Context::SignalStream(CUstream other, const char* what) {
  return OrderStreams(stream(), other, what, "the context's stream");
}

void Context::Trim() {
  driver::ScopedContext bind(cu(), driver::ScopedContext::Purpose::kRelease);
  staging_->Trim();
  device_pool_->Trim();
  pinned_pool_->Trim();
  std::lock_guard lock(interop_mu_);
  interop_event_.reset();
}

vyre_telemetry Context::Snapshot() const {
  const Telemetry& t = telemetry_;
  vyre_telemetry out{};
  out.struct_size = sizeof(out);
  out.h2d_bytes = t.h2d_bytes.Get();
  out.h2d_operations = t.h2d_operations.Get();
  out.d2h_bytes = t.d2h_bytes.Get();
  out.d2h_operations = t.d2h_operations.Get();
  out.memset_operations = t.memset_operations.Get();
  out.kernel_launches = t.kernel_launches.Get();
  out.sync_points = t.sync_points.Get();
  out.dispatches = t.dispatches.Get();
  out.transient_pool_hits = t.transient_pool_hits.Get();
  out.transient_pool_misses = t.transient_pool_misses.Get();
  out.transient_pool_cached_bytes = t.transient_pool_cached_bytes.Get();
  out.pinned_pool_hits = t.pinned_pool_hits.Get();
  out.pinned_pool_misses = t.pinned_pool_misses.Get();
  out.pinned_pool_cached_bytes = t.pinned_pool_cached_bytes.Get();
  out.module_cache_hits = t.module_cache_hits.Get();
  out.module_cache_misses = t.module_cache_misses.Get();
  out.module_loads = t.module_loads.Get();
  out.device_bytes_live = t.device_bytes_live.Get();
  out.pinned_bytes_live = t.pinned_bytes_live.Get();
  out.live_buffers = t.live_buffers.Get();
  out.live_programs = t.live_programs.Get();
  out.live_pendings = t.live_pendings.Get();
  out.graph_records = t.graph_records.Get();
  out.graph_replays = t.graph_replays.Get();
  out.graph_uploads_skipped = t.graph_uploads_skipped.Get();
  out.graph_launches = t.graph_launches.Get();
  out.sequence_runs = t.sequence_runs.Get();
  out.live_graphs = t.live_graphs.Get();
  out.live_sequences = t.live_sequences.Get();
  return out;
}

// Leaked on purpose, as every handle table: handles may be released from
// static destructors of the caller's program, after our own statics are gone.
HandleRegistry<Context>& Contexts() {
  static auto* registry = new HandleRegistry<Context>(HandleType::kContext);
  return *registry;
}

}  // namespace vyre
