// C callers can put any 32-bit value in an enum-typed field; loading such a
// value as the C++ enum type is undefined (UBSan aborts on it). Enum inputs
// are therefore read as their raw bits and validated as integers.
#ifndef VYRE_BASE_RAW_ENUM_H_
#define VYRE_BASE_RAW_ENUM_H_

#include <cstdint>
#include <cstring>

namespace vyre {

template <typename Enum>
uint32_t RawEnum(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(uint32_t), "public enums are 32-bit");
  uint32_t raw;
  std::memcpy(&raw, &value, sizeof(raw));
  return raw;
}

}  // namespace vyre

#endif  // VYRE_BASE_RAW_ENUM_H_
