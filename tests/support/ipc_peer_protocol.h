// What the IPC tests and their peer process (ipc_peer.cc) share: the bytes
// both sides expect from a seed, and the text form of a handle on the pipe.
#ifndef VYRE_TESTS_SUPPORT_IPC_PEER_PROTOCOL_H_
#define VYRE_TESTS_SUPPORT_IPC_PEER_PROTOCOL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "vyre_cuda.h"

namespace vyre_test {

// `bytes` pseudo-random bytes from `seed`, none zero (splitmix64).
inline std::vector<uint8_t> SeededBytes(uint64_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  uint64_t z = 0;
  for (uint64_t i = 0; i < bytes; ++i) {
    if (i % 8 == 0) {  // one splitmix64 output per 8 bytes
      z = seed + (i / 8 + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
    }
    const uint8_t b = static_cast<uint8_t>(z >> (8 * (i % 8)));
    out[i] = b == 0 ? 0x5A : b;
  }
  return out;
}

inline std::string HandleToHex(const vyre_ipc_handle& handle) {
  std::string hex;
  char digits[3];
  for (uint8_t b : handle.bytes) {
    std::snprintf(digits, sizeof(digits), "%02x", b);
    hex += digits;
  }
  return hex;
}

inline bool HandleFromHex(const std::string& hex, vyre_ipc_handle* out) {
  if (hex.size() != 2 * VYRE_IPC_HANDLE_BYTES) return false;
  for (size_t i = 0; i < VYRE_IPC_HANDLE_BYTES; ++i) {
    unsigned value = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &value) != 1) return false;
    out->bytes[i] = static_cast<uint8_t>(value);
  }
  return true;
}

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_IPC_PEER_PROTOCOL_H_
