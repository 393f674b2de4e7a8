#include "base/struct_size.h"

namespace vyre {

absl::Status CheckStructSize(const char* what, const char* type_name, const void* data,
                             uint32_t struct_size, size_t v1_size, size_t known_size) {
  if (struct_size < v1_size) {
    return Errorf(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                  "%s: %s.struct_size is %u, smaller than version 1 (%u bytes). Fix: initialise "
                  "the struct with its _INIT macro.",
                  what, type_name, struct_size, static_cast<unsigned>(v1_size));
  }
  // A caller on a newer header may pass a larger struct; its extra fields must
  // be zero (their defaults) for this older library to honour it.
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = known_size; i < struct_size; ++i) {
    if (bytes[i] != 0) {
      return Errorf(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                    "%s: %s.struct_size is %u but this library knows %u bytes and byte %u of "
                    "the unknown tail is non-zero. Fix: upgrade libvyre_cuda to the header "
                    "version you compiled against, or leave fields it lacks zero.",
                    what, type_name, struct_size, static_cast<unsigned>(known_size),
                    static_cast<unsigned>(i));
    }
  }
  return absl::OkStatus();
}

}  // namespace vyre
