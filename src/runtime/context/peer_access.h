// Peer access between devices: whether a context's device can reach another
// device's memory, enabled with cuCtxEnablePeerAccess at most once per pair
// of vyre contexts, so a copy between them pays for the driver's answer once.
#ifndef VYRE_RUNTIME_CONTEXT_PEER_ACCESS_H_
#define VYRE_RUNTIME_CONTEXT_PEER_ACCESS_H_

#include <cstdint>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace vyre {

class Context;

// Asks the driver whether device `ordinal` can access device `peer` as a
// peer (cuDeviceCanAccessPeer; false for the same device). The driver must
// be loaded and both ordinals valid.
absl::StatusOr<bool> DeviceCanAccessPeer(uint32_t ordinal, uint32_t peer, const char* what);

// The peers one context has asked about. Keyed by the peer context's handle,
// which is never issued twice, so a destroyed peer context's answer can never
// be taken for a new one (whose device may have been reset since).
class PeerLinks {
 public:
  // True when work of `from` reaches `to`'s memory directly: `to` on another
  // device that `from`'s device can access, with peer access enabled from
  // `from`'s primary context (by this call, or already by other CUDA code in
  // the process). False when the devices cannot be peers or the device's
  // peer mappings are used up (the copy then goes through host memory).
  // Contexts of one device share a primary context: asking about them is a
  // bug of the caller (INTERNAL).
  static absl::StatusOr<bool> Enable(Context& from, Context& to, const char* what);

 private:
  std::mutex mu_;
  absl::flat_hash_map<uint64_t, bool> usable_;  // peer context handle -> usable
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_CONTEXT_PEER_ACCESS_H_
