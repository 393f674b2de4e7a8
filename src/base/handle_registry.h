// Generation-checked handle tables (the sokol_gfx scheme, widened to 64 bits).
//
// A handle is  [63:56] type tag | [55:32] generation | [31:0] slot index.
// The tag makes a handle of the wrong type detectable from any language; the
// generation makes a handle to a destroyed object detectable forever after its
// slot is reused. Objects are held by shared_ptr so a lookup keeps the object
// alive while a call uses it even if another thread destroys the handle.
#ifndef VYRE_BASE_HANDLE_REGISTRY_H_
#define VYRE_BASE_HANDLE_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status.h"

namespace vyre {

enum class HandleType : uint8_t {
  kContext = 0x01,
  kBuffer = 0x02,
  kProgram = 0x03,
  kPending = 0x04,
  kGraph = 0x05,
  kSequence = 0x06,
  kEgraphImage = 0x07,
  // Not a handle: pinned host memory a context owns, named by its address.
  kHostMemory = 0x08,
};

const char* HandleTypeName(HandleType type);
// The create/alloc function that makes handles of this type, for Fix texts.
const char* HandleTypeMaker(HandleType type);

namespace handle_bits {
constexpr uint32_t kGenerationMask = 0xFFFFFFu;
inline uint64_t Pack(HandleType type, uint32_t generation, uint32_t slot) {
  return (uint64_t{static_cast<uint8_t>(type)} << 56) |
         (uint64_t{generation & kGenerationMask} << 32) | slot;
}
inline uint8_t TypeOf(uint64_t bits) { return static_cast<uint8_t>(bits >> 56); }
inline uint32_t GenerationOf(uint64_t bits) {
  return static_cast<uint32_t>(bits >> 32) & kGenerationMask;
}
inline uint32_t SlotOf(uint64_t bits) { return static_cast<uint32_t>(bits); }
}  // namespace handle_bits

// Describes why `bits` does not name a live object (shared by all registries).
absl::Status HandleError(const char* what, HandleType expected, uint64_t bits, bool stale);

template <typename T>
class HandleRegistry {
 public:
  explicit HandleRegistry(HandleType type) : type_(type) {}
  HandleRegistry(const HandleRegistry&) = delete;
  HandleRegistry& operator=(const HandleRegistry&) = delete;

  absl::StatusOr<uint64_t> Insert(std::shared_ptr<T> object) {
    std::unique_lock lock(mu_);
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      if (slots_.size() >= kMaxSlots) {
        return Errorf(VYRE_STATUS_OUT_OF_MEMORY,
                      "creating a %s handle: all %u handle slots are in use. Fix: destroy "
                      "%s objects that are no longer needed.",
                      HandleTypeName(type_), kMaxSlots, HandleTypeName(type_));
      }
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    }
    Slot& s = slots_[slot];
    s.object = std::move(object);
    ++live_;
    return handle_bits::Pack(type_, s.generation, slot);
  }

  absl::StatusOr<std::shared_ptr<T>> Lookup(uint64_t bits, const char* what) const {
    std::shared_lock lock(mu_);
    const Slot* s = Find(bits);
    if (s == nullptr || !s->object) return HandleError(what, type_, bits, IsStale(bits));
    return s->object;
  }

  // Removes the object; the handle is stale from now on.
  absl::StatusOr<std::shared_ptr<T>> Remove(uint64_t bits, const char* what) {
    std::unique_lock lock(mu_);
    Slot* s = const_cast<Slot*>(Find(bits));
    if (s == nullptr || !s->object) return HandleError(what, type_, bits, IsStale(bits));
    std::shared_ptr<T> object = std::move(s->object);
    s->object.reset();
    s->generation = NextGeneration(s->generation);
    free_.push_back(handle_bits::SlotOf(bits));
    --live_;
    return object;
  }

  size_t live() const {
    std::shared_lock lock(mu_);
    return live_;
  }

 private:
  static constexpr uint32_t kMaxSlots = 1u << 24;
  struct Slot {
    uint32_t generation = 1;
    std::shared_ptr<T> object;
  };

  static uint32_t NextGeneration(uint32_t g) {
    g = (g + 1) & handle_bits::kGenerationMask;
    return g == 0 ? 1 : g;
  }

  const Slot* Find(uint64_t bits) const {
    if (handle_bits::TypeOf(bits) != static_cast<uint8_t>(type_)) return nullptr;
    uint32_t slot = handle_bits::SlotOf(bits);
    if (slot >= slots_.size()) return nullptr;
    const Slot& s = slots_[slot];
    if (s.generation != handle_bits::GenerationOf(bits)) return nullptr;
    return &s;
  }

  // A handle is stale when its slot existed and has moved past its generation.
  bool IsStale(uint64_t bits) const {
    if (handle_bits::TypeOf(bits) != static_cast<uint8_t>(type_)) return false;
    uint32_t slot = handle_bits::SlotOf(bits);
    uint32_t generation = handle_bits::GenerationOf(bits);
    if (slot >= slots_.size() || generation == 0) return false;
    return generation < slots_[slot].generation ||
           (generation == slots_[slot].generation && !slots_[slot].object);
  }

  const HandleType type_;
  // Every API call looks up one or more handles. The library's locks are the
  // standard library's, not absl::Mutex: Debian's Abseil is built with its
  // debug deadlock detector on (a graph lookup in every lock operation, a
  // third of a resident dispatch's instructions) and without ThreadSanitizer
  // annotations (so TSan cannot see its happens-before edges).
  mutable std::shared_mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace vyre

#endif  // VYRE_BASE_HANDLE_REGISTRY_H_
