// Generation-checked handle tables (the sokol_gfx scheme, widened to 64 bits).
//
// A handle is  [63:56] type tag (8 bits) | [55:24] generation (32 bits) |
//              [23:0] slot index (24 bits).
// The tag makes a handle of the wrong type detectable from any language; the
// generation makes a handle to a destroyed object detectable forever after its
// slot is reused. Objects are held by shared_ptr so a lookup keeps the object
// alive while a call uses it even if another thread destroys the handle.
//
// A handle is never issued twice. Each slot issues generations 1, 2, ...,
// 2^32 - 1, one per object it holds; a slot whose last generation is destroyed
// is retired for good, never reused. Freed slots are reused oldest first
// (FIFO), so a just-destroyed handle's slot is the last to come back. A type
// has at most 2^24 slots (16,777,216 live objects at once); together they
// issue about 7.2e16 handles, 228 years at ten million a second. When no slot
// is free and no new one can be made, creation fails with LIMIT_EXCEEDED.
//
// The public ABI fixes only that a handle is one uint64_t; nothing outside
// this file decodes it (use handle_bits::). The 32/24 split gives the
// generation every bit a generous slot limit leaves over (the slot limit is
// the one the previous 24-bit-generation layout enforced). Tests instantiate
// HandleRegistry with a narrower generation and fewer slots to drive
// retirement and exhaustion in milliseconds; the encoding stays the same.
#ifndef VYRE_BASE_HANDLE_REGISTRY_H_
#define VYRE_BASE_HANDLE_REGISTRY_H_

#include <cstdint>
#include <deque>
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
};

const char* HandleTypeName(HandleType type);
// The create/alloc function that makes handles of this type, for Fix texts.
const char* HandleTypeMaker(HandleType type);

namespace handle_bits {
constexpr unsigned kTagShift = 56;
constexpr unsigned kGenerationBits = 32;  // [55:24]
constexpr unsigned kSlotBits = 24;        // [23:0]
static_assert(kGenerationBits + kSlotBits == kTagShift, "the layout fills 64 bits");
constexpr unsigned kGenerationShift = kSlotBits;
constexpr uint32_t kGenerationMask = 0xFFFFFFFFu;
constexpr uint32_t kSlotMask = (1u << kSlotBits) - 1;
// The most slots one registry can have: every index the slot field holds.
constexpr uint32_t kMaxSlots = 1u << kSlotBits;

// Wider values are cut to their field, never spill into the next one.
inline uint64_t Pack(HandleType type, uint32_t generation, uint32_t slot) {
  return (uint64_t{static_cast<uint8_t>(type)} << kTagShift) |
         (uint64_t{generation & kGenerationMask} << kGenerationShift) | (slot & kSlotMask);
}
inline uint8_t TypeOf(uint64_t bits) { return static_cast<uint8_t>(bits >> kTagShift); }
inline uint32_t GenerationOf(uint64_t bits) {
  return static_cast<uint32_t>(bits >> kGenerationShift) & kGenerationMask;
}
inline uint32_t SlotOf(uint64_t bits) { return static_cast<uint32_t>(bits) & kSlotMask; }
}  // namespace handle_bits

// Describes why `bits` does not name a live object (shared by all registries).
absl::Status HandleError(const char* what, HandleType expected, uint64_t bits, bool stale);

// When a closing context releases the handles of a table: pending work first
// (it holds graphs, programs and buffers until its device work is drained),
// then graphs and sequences (they hold programs and buffers), e-graph images,
// programs, and memory last.
enum class ReleaseRank : uint8_t {
  kPendingWork = 0,
  kGraphs = 1,
  kSequences = 2,
  kEgraphImages = 3,
  kPrograms = 4,
  kMemory = 5,
};

// A table whose handles a context can own. The context records the table
// with each handle it adopts and, when it closes, hands each one back to its
// table, so the context (and whoever closes it) needs no list of handle types.
class OwnedHandleTable {
 public:
  virtual ReleaseRank release_rank() const = 0;
  // Removes `bits` because its context closed (a handle already gone is
  // ignored). The object goes with its last reference: now, or when the call
  // or device work that still holds it is done.
  virtual void ReleaseOwned(uint64_t bits) = 0;

 protected:
  ~OwnedHandleTable() = default;
};

// GenerationBits and MaxSlots are build-time parameters; the defaults are the
// shipped layout (every bit of both fields). Tests narrow them.
template <typename T, unsigned GenerationBits = handle_bits::kGenerationBits,
          uint32_t MaxSlots = handle_bits::kMaxSlots>
class HandleRegistry final : public OwnedHandleTable {
  static_assert(GenerationBits >= 1 && GenerationBits <= handle_bits::kGenerationBits,
                "the generation must fit its field");
  static_assert(MaxSlots >= 1 && MaxSlots <= handle_bits::kMaxSlots,
                "every slot index must fit its field");

 public:
  // The last generation a slot issues before it is retired.
  static constexpr uint32_t kMaxGeneration =
      static_cast<uint32_t>((uint64_t{1} << GenerationBits) - 1);
  static constexpr uint32_t kMaxSlots = MaxSlots;

  // `on_context_closed` runs on an object that its closing context removes
  // (a buffer marks itself freed), outside the registry lock.
  explicit HandleRegistry(HandleType type, ReleaseRank rank = ReleaseRank::kMemory,
                          void (*on_context_closed)(T&) = nullptr)
      : type_(type), rank_(rank), on_context_closed_(on_context_closed) {}
  HandleRegistry(const HandleRegistry&) = delete;
  HandleRegistry& operator=(const HandleRegistry&) = delete;

  absl::StatusOr<uint64_t> Insert(std::shared_ptr<T> object) {
    std::unique_lock lock(mu_);
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.front();  // oldest first
      free_.pop_front();
    } else if (slots_.size() < kMaxSlots) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    } else {
      return Exhausted();
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

  // Removes the object; the handle is stale from now on. The slot goes to the
  // back of the free queue with its next generation, or is retired after its
  // last one.
  absl::StatusOr<std::shared_ptr<T>> Remove(uint64_t bits, const char* what) {
    std::unique_lock lock(mu_);
    Slot* s = const_cast<Slot*>(Find(bits));
    if (s == nullptr || !s->object) return HandleError(what, type_, bits, IsStale(bits));
    std::shared_ptr<T> object = std::move(s->object);
    s->object.reset();
    --live_;
    if (s->generation == kMaxGeneration) {
      ++retired_;  // stays at its last generation, empty, off the free queue
    } else {
      ++s->generation;
      free_.push_back(handle_bits::SlotOf(bits));
    }
    return object;
  }

  ReleaseRank release_rank() const override { return rank_; }

  void ReleaseOwned(uint64_t bits) override {
    absl::StatusOr<std::shared_ptr<T>> removed = Remove(bits, "vyre_context_destroy");
    if (removed.ok() && on_context_closed_ != nullptr) on_context_closed_(**removed);
  }

  size_t live() const {
    std::shared_lock lock(mu_);
    return live_;
  }

  // Slots that issued their last generation and will never be reused.
  size_t retired() const {
    std::shared_lock lock(mu_);
    return retired_;
  }

 private:
  struct Slot {
    uint32_t generation = 1;  // 0 is never issued
    std::shared_ptr<T> object;
  };

  // Called with mu_ held: no free slot and no room for a new one.
  absl::Status Exhausted() const {
    const char* name = HandleTypeName(type_);
    if (retired_ == 0) {
      return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                    "creating a %s handle: the %s handle space is exhausted, all %u slots "
                    "hold live objects. Fix: destroy %s objects that are no longer needed.",
                    name, name, kMaxSlots, name);
    }
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "creating a %s handle: the %s handle space is exhausted, %u of its %u slots "
                  "are retired after issuing all %u of their generations and %u hold live "
                  "objects, so a new handle would repeat a destroyed one. Fix: reuse %s "
                  "objects instead of creating and destroying one per operation, destroy "
                  "those no longer needed, or restart the process for a fresh handle space.",
                  name, name, retired_, kMaxSlots, kMaxGeneration, live_, name);
  }

  const Slot* Find(uint64_t bits) const {
    if (handle_bits::TypeOf(bits) != static_cast<uint8_t>(type_)) return nullptr;
    uint32_t slot = handle_bits::SlotOf(bits);
    if (slot >= slots_.size()) return nullptr;
    const Slot& s = slots_[slot];
    if (s.generation != handle_bits::GenerationOf(bits)) return nullptr;
    return &s;
  }

  // A handle is stale when its slot existed and has moved past its generation
  // (a retired slot keeps its last generation, empty: stale too).
  bool IsStale(uint64_t bits) const {
    if (handle_bits::TypeOf(bits) != static_cast<uint8_t>(type_)) return false;
    uint32_t slot = handle_bits::SlotOf(bits);
    uint32_t generation = handle_bits::GenerationOf(bits);
    if (slot >= slots_.size() || generation == 0) return false;
    return generation < slots_[slot].generation ||
           (generation == slots_[slot].generation && !slots_[slot].object);
  }

  const HandleType type_;
  const ReleaseRank rank_;
  void (*const on_context_closed_)(T&);
  // Every API call looks up one or more handles. The library's locks are the
  // standard library's, not absl::Mutex: Debian's Abseil is built with its
  // debug deadlock detector on (a graph lookup in every lock operation, a
  // third of a resident dispatch's instructions) and without ThreadSanitizer
  // annotations (so TSan cannot see its happens-before edges).
  mutable std::shared_mutex mu_;
  std::vector<Slot> slots_;
  std::deque<uint32_t> free_;  // freed slots, oldest at the front
  size_t live_ = 0;
  size_t retired_ = 0;
};

}  // namespace vyre

#endif  // VYRE_BASE_HANDLE_REGISTRY_H_
