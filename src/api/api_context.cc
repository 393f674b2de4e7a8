// Devices and contexts.
#include <cstddef>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/api_call.h"
#include "api/foreign_stream.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "driver/device_faults.h"
#include "driver/driver_api.h"
#include "driver/release_report.h"
#include "graph/user_capture.h"
#include "runtime/context/context.h"
#include "runtime/context/selftest.h"

using vyre::Errorf;

extern "C" {

VYRE_API vyre_status vyre_device_count(uint32_t* out_count) {
  return vyre::ApiCall("vyre_device_count", [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut("vyre_device_count", out_count, "out_count"));
    VYRE_RETURN_IF_ERROR(vyre::driver::EnsureLoaded());
    *out_count = static_cast<uint32_t>(vyre::driver::DeviceCount());
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_device_info_get(uint32_t ordinal, vyre_device_info* out) {
  const char* what = "vyre_device_info_get";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(
        vyre::CheckOutStruct(what, "vyre_device_info", out, vyre::kDeviceInfoV1));
    VYRE_RETURN_IF_ERROR(vyre::CheckDeviceOrdinal(what, ordinal));
    vyre_device_info info{};
    VYRE_RETURN_IF_ERROR(vyre::QueryDeviceInfo(what, ordinal, &info));
    return vyre::WriteOutStruct(what, "vyre_device_info", out, info, vyre::kDeviceInfoV1);
  });
}

VYRE_API vyre_status vyre_device_can_access_peer(uint32_t ordinal, uint32_t peer_ordinal,
                                                 uint32_t* out_can_access) {
  const char* what = "vyre_device_can_access_peer";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out_can_access, "out_can_access"));
    *out_can_access = 0;
    VYRE_RETURN_IF_ERROR(vyre::CheckDeviceOrdinal(what, ordinal));
    VYRE_RETURN_IF_ERROR(vyre::CheckDeviceOrdinal(what, peer_ordinal));
    VYRE_ASSIGN_OR_RETURN(bool can_access,
                          vyre::DeviceCanAccessPeer(ordinal, peer_ordinal, what));
    *out_can_access = can_access ? 1u : 0u;
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_context_create(const vyre_context_desc* desc, vyre_context* out) {
  const char* what = "vyre_context_create";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    vyre_context_desc d;
    // Version 1 ended before the staging fields.
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_context_desc", desc, &d,
                                              offsetof(vyre_context_desc, staging_chunk_bytes)));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx, vyre::Context::Create(d));
    // A context is owned by no other: only vyre_context_destroy removes it.
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Contexts(), std::move(ctx), nullptr, what));
    return absl::OkStatus();
  });
}

}  // extern "C"

// C++ helpers: outside the extern "C" block (they return std::string).
namespace {

// The Fix of a context destroy that met a device fault, by what the release
// left: the device reset (this was its last context), other contexts still
// holding it, or a reset that failed.
std::string FaultFixAfterDestroy(CUdevice device, int ordinal, bool ours_released) {
  const vyre::driver::DeviceState state = vyre::driver::QueryDevice(device);
  const std::string name = absl::StrCat("device ", state.ordinal >= 0 ? state.ordinal : ordinal);
  if (state.fault == CUDA_SUCCESS) {
    return absl::StrCat("create a new context to go on (vyre_context_create): this was the last "
                        "vyre context on ",
                        name,
                        ", so the library reset it, which also destroyed what other CUDA users "
                        "in this process held on it");
  }
  const int others = state.live - (ours_released ? 0 : 1);
  if (others > 0) {
    return absl::StrCat("destroy the other ", others, " vyre context(s) on ", name,
                        " as well (vyre_context_destroy), then create a new one; the library "
                        "resets the device when the last one goes");
  }
  if (state.live > 0) {
    return absl::StrCat("let the calls other threads still make on this context return; the "
                        "library then resets ",
                        name, " and vyre_context_create works again");
  }
  return absl::StrCat("call vyre_context_create, which retries the reset of ", name,
                      " that failed (the log says why); if it keeps failing, restart the "
                      "process and check the device (nvidia-smi, Xid errors in the kernel log)");
}

}  // namespace

extern "C" {

VYRE_API vyre_status vyre_context_destroy(vyre_context context) {
  const char* what = "vyre_context_destroy";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    // Everything is released whatever fails on the way; the first device
    // error met is returned afterwards (release_report.h).
    vyre::driver::ReleaseReport report;
    {
      // An open capture holds a stream of the context that the driver may
      // only end on the capturing thread: refuse, destroying nothing.
      VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> open,
                            vyre::Contexts().Lookup(context.bits, what));
      if (vyre::UserCaptureOpen(*open)) {
        return vyre::Errorf(VYRE_STATUS_INVALID_STATE,
                            "%s: the context has an open capture (vyre_capture_begin). Fix: end "
                            "it with vyre_capture_end (on the thread that began it), then "
                            "destroy the context.",
                            what);
      }
    }
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Remove(context.bits, what));
    const CUdevice device = ctx->cu_device();
    const int ordinal = static_cast<int>(ctx->device().ordinal);
    // Before the release: destroying the device's last context resets it.
    vyre::driver::ReleaseReport::NoteContext(ctx->cu());
    // Everything the context owned goes back to its table, in release order
    // (pending work first: it holds graphs, programs and buffers).
    ctx->Close();
    std::weak_ptr<vyre::Context> weak = ctx;
    ctx.reset();
    const char* released = "the context and everything it owned are released";
    if (!report.faulted()) return report.Result(what, released);
    return report.Result(what, released, FaultFixAfterDestroy(device, ordinal, weak.expired()));
  });
}

VYRE_API vyre_status vyre_context_device_info(vyre_context context, vyre_device_info* out) {
  const char* what = "vyre_context_device_info";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    return vyre::WriteOutStruct(what, "vyre_device_info", out, ctx->device(),
                                vyre::kDeviceInfoV1);
  });
}

VYRE_API vyre_status vyre_context_telemetry(vyre_context context, vyre_telemetry* out) {
  const char* what = "vyre_context_telemetry";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    // Callers built against version 1 (before the graph counters) get its fields.
    constexpr size_t kTelemetryV1 = offsetof(vyre_telemetry, live_pendings) + sizeof(uint64_t);
    return vyre::WriteOutStruct(what, "vyre_telemetry", out, ctx->Snapshot(), kTelemetryV1);
  });
}

VYRE_API vyre_status vyre_context_trim(vyre_context context) {
  const char* what = "vyre_context_trim";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    ctx->Trim();
    return absl::OkStatus();
  });
}

}  // extern "C"

extern "C" {

VYRE_API vyre_status vyre_context_wait_stream(vyre_context context, uint64_t cu_stream) {
  const char* what = "vyre_context_wait_stream";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    VYRE_RETURN_IF_ERROR(vyre::CheckForeignStream(what, cu_stream));
    VYRE_RETURN_IF_ERROR(vyre::RefuseCaptureStream(cu_stream, what));
    return ctx->WaitForStream(reinterpret_cast<CUstream>(cu_stream), what);
  });
}

VYRE_API vyre_status vyre_context_signal_stream(vyre_context context, uint64_t cu_stream) {
  const char* what = "vyre_context_signal_stream";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    VYRE_RETURN_IF_ERROR(vyre::CheckForeignStream(what, cu_stream));
    VYRE_RETURN_IF_ERROR(vyre::RefuseCaptureStream(cu_stream, what));
    return ctx->SignalStream(reinterpret_cast<CUstream>(cu_stream), what);
  });
}

VYRE_API vyre_status vyre_context_selftest(vyre_context context) {
  const char* what = "vyre_context_selftest";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    return vyre::RunSelfTest(ctx, what);
  });
}

}  // extern "C"
