#include "runtime/context/peer_access.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"
#include "driver/guards.h"
#include "runtime/context/context.h"

namespace vyre {

absl::StatusOr<bool> DeviceCanAccessPeer(uint32_t ordinal, uint32_t peer, const char* what) {
  if (ordinal == peer) return false;
  CUdevice device = 0, peer_device = 0;
  VYRE_CU(absl::StrCat(what, ": getting a CUDA device"), cuDeviceGet, &device,
          static_cast<int>(ordinal));
  VYRE_CU(absl::StrCat(what, ": getting a CUDA device"), cuDeviceGet, &peer_device,
          static_cast<int>(peer));
  int can_access = 0;
  VYRE_CU(absl::StrCat(what, ": asking whether device ", ordinal, " can access device ", peer),
          cuDeviceCanAccessPeer, &can_access, device, peer_device);
  return can_access != 0;
}

absl::StatusOr<bool> PeerLinks::Enable(Context& from, Context& to, const char* what) {
  if (from.cu() == to.cu()) {
    return Errorf(VYRE_STATUS_INTERNAL,
                  "%s: peer access was asked between two contexts of device %u. Fix: report "
                  "this as a vyre-cuda bug.",
                  what, from.device().ordinal);
  }
  PeerLinks& links = from.peers();
  // Held across the driver calls: two threads copying between the same pair
  // for the first time enable it once.
  std::lock_guard lock(links.mu_);
  auto it = links.usable_.find(to.handle());
  if (it != links.usable_.end()) return it->second;
  VYRE_ASSIGN_OR_RETURN(bool can_access,
                        DeviceCanAccessPeer(from.device().ordinal, to.device().ordinal, what));
  bool usable = false;
  if (can_access) {
    driver::ScopedContext bind(from.cu());
    VYRE_RETURN_IF_ERROR(bind.status(what));
    const CUresult r = driver::Api().cuCtxEnablePeerAccess(to.cu(), 0);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
      usable = true;
    } else if (r == CUDA_ERROR_TOO_MANY_PEERS || r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) {
      // A device maps at most 8 peers; copies past that are staged instead.
      Logf(VYRE_LOG_WARNING,
           "%s: device %u cannot map device %u as a peer (%s); copies between them go "
           "through pinned host memory",
           what, from.device().ordinal, to.device().ordinal, driver::CuResultName(r));
    } else {
      return driver::CuError(
          r,
          absl::StrCat(what, ": enabling peer access from device ", from.device().ordinal,
                       " to device ", to.device().ordinal),
          "cuCtxEnablePeerAccess");
    }
  }
  links.usable_[to.handle()] = usable;
  return usable;
}

}  // namespace vyre
