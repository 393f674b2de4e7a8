// The struct_size rule for extensible descriptors (as openat2/clone3 do it):
// a smaller struct than version 1 is refused; a larger one is accepted only
// when every byte past what this library knows is zero, so a newer caller's
// request is never half-understood.
#ifndef VYRE_BASE_STRUCT_SIZE_H_
#define VYRE_BASE_STRUCT_SIZE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "base/status.h"

namespace vyre {

absl::Status CheckStructSize(const char* what, const char* type_name, const void* data,
                             uint32_t struct_size, size_t v1_size, size_t known_size);

// The struct_size of the caller struct at `in` (its first 4 bytes).
inline uint32_t PeekStructSize(const void* in) {
  uint32_t size;
  std::memcpy(&size, in, sizeof(size));
  return size;
}

// Copies a caller descriptor into `*out` (value-initialised first, so fields a
// smaller struct lacks read as zero) after checking its struct_size.
template <typename T>
absl::Status ReadDescriptor(const char* what, const char* type_name, const T* in, T* out,
                            size_t v1_size = sizeof(T)) {
  if (in == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the %s pointer is NULL. Fix: pass a %s initialised with its _INIT macro.",
                  what, type_name, type_name);
  }
  const uint32_t size = PeekStructSize(in);
  if (size == sizeof(T)) {  // the caller's header is this library's: the common case
    std::memcpy(static_cast<void*>(out), in, sizeof(T));
    return absl::OkStatus();
  }
  VYRE_RETURN_IF_ERROR(CheckStructSize(what, type_name, in, size, v1_size, sizeof(T)));
  *out = T{};
  std::memcpy(static_cast<void*>(out), in, size < sizeof(T) ? size : sizeof(T));
  return absl::OkStatus();
}

// Entry `index` of a caller's array of descriptors, strided by the first
// entry's struct_size (`stride`). The entry's struct_size must equal the
// stride, and is checked before ReadDescriptor reads as many bytes as the
// entry claims: a larger claim in the last entry would take that read past
// the caller's array. `noun` names an entry in the message ("binding",
// "step"), `init_macro` the macro that initialises one.
template <typename T>
absl::Status ReadArrayEntry(const char* what, const char* type_name, const char* noun,
                            const char* init_macro, const void* base, size_t index,
                            uint32_t stride, T* out) {
  const auto* raw = static_cast<const unsigned char*>(base) + index * stride;
  const uint32_t size = PeekStructSize(raw);
  if (size != stride) {
    return Errorf(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                  "%s: %s %u has struct_size %u but %s 0 has %u. Fix: initialise every %s "
                  "with %s.",
                  what, noun, index, size, noun, stride, noun, init_macro);
  }
  return ReadDescriptor(what, type_name, reinterpret_cast<const T*>(raw), out);
}

// For output structs: checks that `out` is non-NULL and that the caller's
// struct_size covers version 1.
template <typename T>
absl::Status CheckOutStruct(const char* what, const char* type_name, const T* out,
                            size_t v1_size = sizeof(T)) {
  if (out == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the %s output pointer is NULL. Fix: pass a %s initialised with its "
                  "_INIT macro.",
                  what, type_name, type_name);
  }
  const uint32_t size = PeekStructSize(out);
  if (size < v1_size) {
    return Errorf(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                  "%s: %s.struct_size is %u, smaller than version 1 (%u bytes). Fix: "
                  "initialise it with its _INIT macro.",
                  what, type_name, size, static_cast<unsigned>(v1_size));
  }
  return absl::OkStatus();
}

// Writes only as many bytes as the caller's version of the struct has, and
// keeps the caller's struct_size.
template <typename T>
absl::Status WriteOutStruct(const char* what, const char* type_name, T* out, T value,
                            size_t v1_size = sizeof(T)) {
  VYRE_RETURN_IF_ERROR(CheckOutStruct(what, type_name, out, v1_size));
  const uint32_t size = PeekStructSize(out);
  std::memcpy(&value, &size, sizeof(size));
  std::memcpy(static_cast<void*>(out), &value, size < sizeof(T) ? size : sizeof(T));
  return absl::OkStatus();
}

}  // namespace vyre

#endif  // VYRE_BASE_STRUCT_SIZE_H_
