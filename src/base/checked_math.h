// Overflow-checked size arithmetic: every length that reaches a copy or an
// allocation goes through these, so a hostile length is an error, not a wrap.
#ifndef VYRE_BASE_CHECKED_MATH_H_
#define VYRE_BASE_CHECKED_MATH_H_

#include <cstdint>
#include <optional>

namespace vyre {

inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds `value` up to a multiple of `alignment` (a power of two).
inline std::optional<uint64_t> CheckedAlignUp(uint64_t value, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return std::nullopt;
  auto bumped = CheckedAdd(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

// True when [offset, offset + length) lies inside [0, size).
inline bool RangeInside(uint64_t offset, uint64_t length, uint64_t size) {
  auto end = CheckedAdd(offset, length);
  return end.has_value() && *end <= size;
}

// Smallest power of two >= value (value 0 gives 1); nullopt past 2^63.
inline std::optional<uint64_t> NextPowerOfTwo(uint64_t value) {
  if (value <= 1) return 1;
  if (value > (uint64_t{1} << 63)) return std::nullopt;
  return uint64_t{1} << (64 - __builtin_clzll(value - 1));
}

}  // namespace vyre

#endif  // VYRE_BASE_CHECKED_MATH_H_
