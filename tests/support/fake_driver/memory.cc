// Device memory, pinned host memory, registered host ranges and pointer
// attributes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>

#include <sys/mman.h>
#include <unistd.h>

#include "entry_points.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

CUresult fake_cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemGetInfo")) return r;
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo: NULL");
  }
  *total_bytes = S().capacity;
  *free_bytes = S().capacity - std::min<uint64_t>(S().capacity, S().device_bytes);
  return CUDA_SUCCESS;
}

size_t PageRounded(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void* MapDeviceMemory(size_t bytes) {
  void* memory = mmap(nullptr, PageRounded(bytes), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : memory;
}

void ReleaseDeviceMemory(uintptr_t base, size_t bytes) {
  munmap(reinterpret_cast<void*>(base), PageRounded(bytes));
  ForgetIpcExport(base);
}

CUresult fake_cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemAlloc")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuMemAlloc")) return r;
  if (ptr == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc: NULL dptr");
  if (bytes == 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
  State& s = S();
  if (bytes > s.capacity - std::min<uint64_t>(s.capacity, s.device_bytes)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  static_assert(kDeviceAlignment <= 4096, "pages align device memory");
  void* memory = MapDeviceMemory(bytes);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, kFreshMemoryPattern, bytes);
  s.device_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  s.allocation_devices[reinterpret_cast<uintptr_t>(memory)] = CurrentDevice();
  s.device_bytes += bytes;
  *ptr = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFree(CUdeviceptr ptr) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemFree")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuMemFree")) return r;
  FlushDeferred();  // cuMemFree waits for the device
  State& s = S();
  if (s.ipc_imports.count(static_cast<uintptr_t>(ptr)) > 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "cuMemFree(0x%llx): an IPC import (close it with cuIpcCloseMemHandle)",
                  static_cast<unsigned long long>(ptr));
  }
  auto it = s.device_allocations.find(static_cast<uintptr_t>(ptr));
  if (it == s.device_allocations.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemFree(0x%llx): not a live allocation",
                  static_cast<unsigned long long>(ptr));
  }
  s.device_bytes -= it->second;
  s.allocation_devices.erase(it->first);
  ReleaseDeviceMemory(it->first, it->second);
  s.device_allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  (void)flags;
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemHostAlloc")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuMemHostAlloc")) return r;
  if (ptr == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc: NULL pp");
  if (bytes == 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc of 0 bytes");
  if (bytes > SIZE_MAX - kPinnedPoolOffset) return CUDA_ERROR_OUT_OF_MEMORY;
  void* block = nullptr;
  if (posix_memalign(&block, 4096, bytes + kPinnedPoolOffset) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  unsigned char* memory = static_cast<unsigned char*>(block) + kPinnedPoolOffset;
  std::memset(memory, kFreshMemoryPattern, bytes);
  S().pinned_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  S().pinned_bytes += bytes;
  *ptr = memory;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFreeHost(void* ptr) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemFreeHost")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuMemFreeHost")) return r;
  FlushDeferred();
  State& s = S();
  auto it = s.pinned_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.pinned_allocations.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost(%p): not a live pinned allocation",
                  ptr);
  }
  s.pinned_bytes -= it->second;
  std::free(static_cast<unsigned char*>(ptr) - kPinnedPoolOffset);
  s.pinned_allocations.erase(it);
  return CUDA_SUCCESS;
}

namespace {

// True when [ptr, ptr + bytes) lies inside one live pinned host allocation.
bool RangeInMap(const std::map<uintptr_t, size_t>& ranges, const void* ptr, uint64_t bytes) {
  auto it = ranges.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == ranges.begin()) return false;
  --it;
  uint64_t offset = reinterpret_cast<uintptr_t>(ptr) - it->first;
  return offset <= it->second && bytes <= it->second - offset;
}

}  // namespace

// True when [ptr, ptr + bytes) lies inside one live pinned host allocation or
// one cuMemHostRegister range.
bool PinnedRangeValid(const void* ptr, uint64_t bytes) {
  return RangeInMap(S().pinned_allocations, ptr, bytes) || RangeInMap(S().registered, ptr, bytes);
}

namespace {

bool RangesOverlap(const std::map<uintptr_t, size_t>& ranges, uintptr_t begin, uint64_t bytes) {
  auto after = ranges.lower_bound(begin);
  if (after != ranges.end() && after->first - begin < bytes) return true;
  if (after == ranges.begin()) return false;
  --after;
  return begin - after->first < after->second;
}

}  // namespace

CUresult fake_cuMemHostRegister(void* ptr, size_t bytes, unsigned int flags) {
  (void)flags;
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemHostRegister")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuMemHostRegister")) return r;
  if (ptr == nullptr || bytes == 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister(%p, %zu)", ptr, bytes);
  }
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
  if (RangesOverlap(S().registered, begin, bytes) ||
      RangesOverlap(S().pinned_allocations, begin, bytes)) {
    return Misuse(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                  "cuMemHostRegister(%p, %zu): overlaps page-locked memory", ptr, bytes);
  }
  S().registered[begin] = bytes;
  ++S().stats.registered_ranges_live;
  S().stats.registered_bytes_live += bytes;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostUnregister(void* ptr) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemHostUnregister")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuMemHostUnregister")) return r;
  FlushDeferred();
  auto it = S().registered.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == S().registered.end()) {
    return Misuse(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                  "cuMemHostUnregister(%p): not the start of a registered range", ptr);
  }
  --S().stats.registered_ranges_live;
  S().stats.registered_bytes_live -= it->second;
  S().registered.erase(it);
  return CUDA_SUCCESS;
}

namespace {

// The allocation in `ranges` holding `address`: true with its base and size.
bool FindRange(const std::map<uintptr_t, size_t>& ranges, uintptr_t address, uintptr_t* base,
               size_t* bytes) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return false;
  --it;
  if (address - it->first >= std::max<size_t>(it->second, 1)) return false;
  *base = it->first;
  *bytes = it->second;
  return true;
}

}  // namespace

// As the real driver documents: a pointer CUDA does not know is no error;
// its attributes read as "none" (memory type 0, a NULL context, range 0; the
// ordinal -2 here). Device allocations are CU_MEMORYTYPE_DEVICE, pinned allocations
// and registered ranges CU_MEMORYTYPE_HOST; device memory reports the device
// (and its primary context) it was allocated on, host memory device 0.
// Attributes this fake does not model are misuse.
CUresult fake_cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                     void** data, CUdeviceptr ptr) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuPointerGetAttributes")) return r;
  if (count > 0 && (attributes == nullptr || data == nullptr)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: NULL arrays");
  }
  State& s = S();
  ++s.stats.pointer_queries;
  const uintptr_t address = static_cast<uintptr_t>(ptr);
  uintptr_t base = 0;
  size_t bytes = 0;
  unsigned int type = 0;
  int device = 0;  // pinned memory reports device 0, as before
  if (FindRange(s.device_allocations, address, &base, &bytes)) {
    type = CU_MEMORYTYPE_DEVICE;
    device = std::max(DeviceOfPointer(ptr), 0);
  } else if (FindRange(s.pinned_allocations, address, &base, &bytes) ||
             FindRange(s.registered, address, &base, &bytes)) {
    type = CU_MEMORYTYPE_HOST;
  }
  const bool known = type != 0;
  for (unsigned int i = 0; i < count; ++i) {
    if (data[i] == nullptr) {
      return Misuse(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: NULL data[%u]", i);
    }
    switch (attributes[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned int*>(data[i]) = type;
        break;
      case CU_POINTER_ATTRIBUTE_CONTEXT:
        *static_cast<CUcontext*>(data[i]) =
            known ? PrimaryOf(device) : nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = known ? device : -2;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data[i]) = known ? static_cast<CUdeviceptr>(base) : 0;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<size_t*>(data[i]) = known ? bytes : 0;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned int*>(data[i]) = 0;
        break;
      default:
        return Misuse(CUDA_ERROR_INVALID_VALUE,
                      "cuPointerGetAttributes: attribute %d is not modelled by the fake",
                      static_cast<int>(attributes[i]));
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
