// Descriptor builders shared by every test suite: binding declarations,
// dispatch bindings (host input/output, resident) and buffer copies.
//
// Pure functions over the public header: no gtest, no fake driver, no link
// dependency. CMake target: vyre_test_descriptors (INTERFACE).
#ifndef VYRE_TESTS_SUPPORT_DESCRIPTORS_H_
#define VYRE_TESTS_SUPPORT_DESCRIPTORS_H_

#include <cstdint>
#include <vector>

#include "vyre_cuda.h"

namespace vyre_test {

inline vyre_binding_decl Decl(vyre_binding_role role, uint32_t element_size = 4,
                              const char* name = nullptr) {
  vyre_binding_decl decl = VYRE_BINDING_DECL_INIT;
  decl.role = role;
  decl.element_size = element_size;
  decl.name = name;
  return decl;
}

// A vyre_buffer_copy descriptor of `bytes` from src at src_offset to dst at
// dst_offset.
inline vyre_buffer_copy_desc CopyDesc(vyre_buffer src, uint64_t src_offset, vyre_buffer dst,
                                      uint64_t dst_offset, uint64_t bytes, uint32_t flags = 0) {
  vyre_buffer_copy_desc desc = VYRE_BUFFER_COPY_DESC_INIT;
  desc.flags = flags;
  desc.src = src;
  desc.src_offset = src_offset;
  desc.dst = dst;
  desc.dst_offset = dst_offset;
  desc.bytes = bytes;
  return desc;
}

inline vyre_dispatch_binding HostIn(const void* data, uint64_t bytes) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_HOST;
  b.host_input = data;
  b.host_bytes = bytes;
  return b;
}

inline vyre_dispatch_binding HostOut(void* data, uint64_t bytes) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_HOST;
  b.host_output = data;
  b.host_bytes = bytes;
  return b;
}

// host_input and host_output both point at `data`.
inline vyre_dispatch_binding HostInOut(void* data, uint64_t bytes) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_HOST;
  b.host_input = data;
  b.host_output = data;
  b.host_bytes = bytes;
  return b;
}

// length 0 binds from offset to the end of the buffer.
inline vyre_dispatch_binding Resident(vyre_buffer buffer, uint64_t offset = 0,
                                      uint64_t length = 0) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_RESIDENT;
  b.buffer = buffer;
  b.offset = offset;
  b.length = length;
  return b;
}

template <typename T>
uint64_t ByteSize(const std::vector<T>& values) {
  return static_cast<uint64_t>(values.size()) * sizeof(T);
}

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_DESCRIPTORS_H_
