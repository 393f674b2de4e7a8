// Pinned host memory.
#include "api/api_call.h"
#include "driver/release_report.h"
#include "runtime/context/context.h"
#include "runtime/transfer/host_memory.h"

extern "C" {

VYRE_API vyre_status vyre_host_alloc(vyre_context context, uint64_t bytes, void** out) {
  const char* what = "vyre_host_alloc";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    *out = nullptr;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    VYRE_ASSIGN_OR_RETURN(*out, vyre::HostMemory().Allocate(std::move(ctx), bytes, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_host_free(void* pointer) {
  const char* what = "vyre_host_free";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_RETURN_IF_ERROR(
        vyre::HostMemory().Release(pointer, vyre::HostRegion::Kind::kAllocated, what));
    return report.Result(what, "the pinned memory is freed");
  });
}

VYRE_API vyre_status vyre_host_register(vyre_context context, void* pointer, uint64_t bytes) {
  const char* what = "vyre_host_register";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    return vyre::HostMemory().Register(std::move(ctx), pointer, bytes, what);
  });
}

VYRE_API vyre_status vyre_host_unregister(void* pointer) {
  const char* what = "vyre_host_unregister";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_RETURN_IF_ERROR(
        vyre::HostMemory().Release(pointer, vyre::HostRegion::Kind::kRegistered, what));
    return report.Result(what, "the memory is unregistered");
  });
}

}  // extern "C"
