// Argument builders the torture operations share: descriptors followed by a
// tail, random struct sizes, raw enum values, range checks and replay
// descriptors.
#ifndef VYRE_TESTS_UNIT_TORTURE_ARGUMENTS_H_
#define VYRE_TESTS_UNIT_TORTURE_ARGUMENTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model.h"
#include "vyre_cuda.h"

namespace vyre_test {
namespace torture {

// A descriptor followed by a tail, so struct_size may claim more than the
// library knows and still point at real memory.
template <typename T>
struct WithTail {
  T value;
  uint8_t tail[32];
};

// `v1_size`: the struct's first released size; sizes from it up to sizeof(T)
// are older versions, accepted with the missing fields read as zero.
template <typename T>
void RandomizeStructSize(Rng* rng, WithTail<T>* d, bool* well_formed,
                         size_t v1_size = sizeof(T)) {
  std::memset(d->tail, 0, sizeof(d->tail));
  uint32_t size = sizeof(T);
  switch (rng->Below(20)) {
    case 0: size = 0; break;
    case 1: size = uint32_t(rng->Range(1, v1_size - 1)); break;
    case 4:
      if (v1_size < sizeof(T)) size = uint32_t(rng->Range(v1_size, sizeof(T) - 1));
      break;
    case 2: size = sizeof(T) + uint32_t(rng->Range(1, sizeof(d->tail))); break;  // zero tail: OK
    case 3:
      size = sizeof(T) + uint32_t(rng->Range(1, sizeof(d->tail)));
      d->tail[rng->Below(size - sizeof(T))] = 1;
      break;
    default: break;
  }
  const bool older_version = size >= v1_size && size < sizeof(T);
  const bool zero_tail = size > sizeof(T) && std::all_of(d->tail, d->tail + sizeof(d->tail),
                                                         [](uint8_t b) { return b == 0; });
  if (size != sizeof(T) && !older_version && !zero_tail) *well_formed = false;
  std::memcpy(&d->value, &size, sizeof(size));  // struct_size is the first member
}

inline bool InRange(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// An enum field set to any 32-bit pattern (0, 7, 0xFFFFFFFF, ...) by memcpy.
template <typename E>
void SetRawEnum(E* field, uint32_t raw) {
  static_assert(sizeof(E) == sizeof(uint32_t), "enums are 32-bit");
  std::memcpy(field, &raw, sizeof(raw));
}

// Reads a role without loading an out-of-range enum value (UBSan -fsanitize=enum).
inline uint32_t RoleOf(const vyre_binding_decl& d) {
  uint32_t raw;
  std::memcpy(&raw, &d.role, sizeof(raw));
  return raw;
}

inline uint32_t RandomBadEnum(Rng* rng) {
  static const std::vector<uint32_t> kBad = {0, 5, 7, 99, 0x7FFFFFFF, 0x80000000u, 0xFFFFFFFFu};
  return rng->Pick(kBad);
}

// A replay descriptor that owns its arrays.
struct ReplaySpecT {
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<uint32_t> param_words;
  uint64_t element_count = 0;
  uint32_t flags = 0;

  vyre_graph_replay_desc Desc() const {
    vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
    desc.flags = flags;
    desc.bindings = bindings.empty() ? nullptr : bindings.data();
    desc.binding_count = bindings.size();
    desc.param_words = param_words.empty() ? nullptr : param_words.data();
    desc.param_word_count = param_words.size();
    desc.element_count = element_count;
    return desc;
  }
};

// Readable memory for bindings whose data never matters.
inline const uint8_t* Scratch() {
  static const std::vector<uint8_t> scratch(64 * 1024 + 4096, 1);
  return scratch.data();
}

inline uint64_t NextPow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace torture
}  // namespace vyre_test

#endif  // VYRE_TESTS_UNIT_TORTURE_ARGUMENTS_H_
