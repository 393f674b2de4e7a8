// Helpers for the struct_size rule: descriptors smaller than version 1, and
// descriptors from a "newer header" with extra bytes after the known fields.
#ifndef VYRE_TESTS_SUPPORT_STRUCT_SIZE_UTIL_H_
#define VYRE_TESTS_SUPPORT_STRUCT_SIZE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace vyre_test {

// A copy of `value` whose struct_size is `size` (the struct itself unchanged).
template <typename T>
T WithStructSize(T value, uint32_t size) {
  value.struct_size = size;
  return value;
}

// struct_size values below version 1 that every check must refuse.
template <typename T>
std::vector<uint32_t> TooSmallSizes(size_t v1_size = sizeof(T)) {
  return {0u, 4u, static_cast<uint32_t>(v1_size - 1)};
}

// `value` copied into a larger, suitably aligned buffer with struct_size set to
// sizeof(T) + extra_bytes; the tail after sizeof(T) is zero, or holds
// `tail_byte` at its last position when tail_byte != 0.
template <typename T>
class LargerStruct {
 public:
  LargerStruct(const T& value, size_t extra_bytes, uint8_t tail_byte)
      : size_(sizeof(T) + extra_bytes), words_((size_ + 7) / 8, 0) {
    std::memcpy(bytes(), &value, sizeof(T));
    uint32_t struct_size = static_cast<uint32_t>(size_);
    std::memcpy(bytes(), &struct_size, sizeof(struct_size));
    if (tail_byte != 0) bytes()[size_ - 1] = tail_byte;
  }
  // Fills the whole tail with `value` (for output structs: bytes the library
  // must not write).
  void FillTail(uint8_t value) { std::memset(bytes() + sizeof(T), value, size_ - sizeof(T)); }
  bool TailIsAll(uint8_t value) const {
    for (size_t i = sizeof(T); i < size_; ++i) {
      if (bytes()[i] != value) return false;
    }
    return true;
  }

  T* get() { return reinterpret_cast<T*>(words_.data()); }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(words_.data()); }

 private:
  size_t size_;
  std::vector<uint64_t> words_;
};

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_STRUCT_SIZE_UTIL_H_
