// How the torture test chooses arguments: valid, stale, forged, wrong-type
// and 0 handles, offsets and lengths in and out of range, random bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "torture.h"

namespace vyre_test {
namespace torture {

uint64_t Torture::PickHandle(const std::vector<uint64_t>& live, const std::vector<uint64_t>& dead,
                             HandleChoice* choice, double valid_bias) {
  if (!live.empty() && rng_.Chance(valid_bias)) {
    *choice = HandleChoice::kValid;
    return rng_.Pick(live);
  }
  switch (rng_.Below(4)) {
    case 0:
      if (!dead.empty()) {
        *choice = HandleChoice::kStale;
        return rng_.Pick(dead);
      }
      break;
    case 1: {
      std::vector<uint64_t> others = pop_.LiveBits();
      others.erase(std::remove_if(others.begin(), others.end(),
                                  [&](uint64_t b) {
                                    return std::find(live.begin(), live.end(), b) != live.end();
                                  }),
                   others.end());
      if (!others.empty()) {
        *choice = HandleChoice::kWrongType;
        return rng_.Pick(others);
      }
      break;
    }
    case 2: {
      // Forged: random bits, or a live handle with a few bits flipped.
      uint64_t bits = rng_.Bits();
      if (!live.empty() && rng_.Chance(0.5)) bits = rng_.Pick(live) ^ (uint64_t{1} << rng_.Below(64));
      std::vector<uint64_t> all = pop_.LiveBits();
      if (bits != 0 && std::find(all.begin(), all.end(), bits) == all.end() &&
          std::find(dead.begin(), dead.end(), bits) == dead.end()) {
        *choice = HandleChoice::kForged;
        return bits;
      }
      break;
    }
    default:
      break;
  }
  *choice = HandleChoice::kZero;
  return 0;
}

uint64_t Torture::PickContextHandle(HandleChoice* choice) {
  return PickHandle(pop_.contexts, pop_.dead_contexts, choice, 0.9);
}

// Picks a handle from a population of objects with a `.handle`; *index is
// the picked object's position when the choice is a valid handle, else -1.
template <typename Object>
uint64_t Torture::PickFrom(const std::vector<Object>& objects, const std::vector<uint64_t>& dead,
                           double valid_bias, int* index, HandleChoice* choice) {
  std::vector<uint64_t> live;
  for (const Object& object : objects) live.push_back(object.handle.bits);
  uint64_t bits = PickHandle(live, dead, choice, valid_bias);
  *index = -1;
  if (*choice == HandleChoice::kValid) {
    *index = int(std::find(live.begin(), live.end(), bits) - live.begin());
  }
  return bits;
}

uint64_t Torture::PickBufferHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.buffers, pop_.dead_buffers, 0.85, index, choice);
}

uint64_t Torture::PickProgramHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.programs, pop_.dead_programs, 0.9, index, choice);
}

uint64_t Torture::PickPendingHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.pendings, pop_.dead_pendings, 0.85, index, choice);
}

uint64_t Torture::PickGraphHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.graphs, pop_.dead_graphs, 0.85, index, choice);
}

uint64_t Torture::PickSequenceHandle(int* index, HandleChoice* choice) {
  return PickFrom(pop_.sequences, pop_.dead_sequences, 0.85, index, choice);
}

// Mostly inside [0, size], sometimes just past it, sometimes near UINT64_MAX.
uint64_t Torture::RandomOffset(uint64_t size) {
  switch (rng_.Below(10)) {
    case 0: return size;
    case 1: return size + rng_.Range(1, 64);
    case 2: return UINT64_MAX - rng_.Below(64);
    case 3: return 0;
    default: return rng_.Range(0, size);
  }
}

// A length to copy at `offset`: mostly fitting, sometimes past the end (the
// host side is always allocated to the full length, at most 2x kMaxBufferBytes).
uint64_t Torture::RandomLength(uint64_t size, uint64_t offset) {
  uint64_t room = offset <= size ? size - offset : 0;
  switch (rng_.Below(10)) {
    case 0: return 0;
    case 1: return room + rng_.Range(1, 16);
    case 2: return rng_.Range(1, kMaxBufferBytes);
    default: return room == 0 ? 0 : rng_.Range(1, room);
  }
}

std::vector<uint8_t> Torture::RandomBytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t bits = rng_.Bits();
    std::memcpy(v.data() + i, &bits, std::min<size_t>(8, n - i));
  }
  return v;
}

}  // namespace torture
}  // namespace vyre_test
