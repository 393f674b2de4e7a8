// CUDA IPC memory handles between processes, and device UUIDs. An exported
// allocation is moved, in place, onto a POSIX shared memory object named by
// the exporting process and a serial; a handle carries that name, the size
// and the device, and an import maps the object. Freeing the export (or the
// exporter's exit) unlinks the object, so a later import fails as the real
// driver's does, with CUDA_ERROR_INVALID_VALUE.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "entry_points.h"
#include "state.h"

namespace fake_driver {
namespace {

// What the fake writes into CUipcMemHandle's 64 bytes.
struct FakeIpcHandle {
  char tag[8];  // "fakeipc"
  uint64_t pid;
  uint64_t serial;
  uint64_t bytes;
  int32_t device;
};
static_assert(sizeof(FakeIpcHandle) <= sizeof(CUipcMemHandle));
constexpr char kTag[8] = "fakeipc";

std::string ObjectName(uint64_t pid, uint64_t serial) {
  char name[64];
  std::snprintf(name, sizeof(name), "/fake_cuda_ipc_%llu_%llu",
                static_cast<unsigned long long>(pid), static_cast<unsigned long long>(serial));
  return name;
}

// The real driver frees a process's memory when it exits: so do its
// exports' objects here (the process may exit without freeing them).
void UnlinkExportsAtExit() {
  Lock lock(S().mu);
  for (const auto& [base, serial] : S().ipc_exports) {
    shm_unlink(ObjectName(static_cast<uint64_t>(getpid()), serial).c_str());
  }
  S().ipc_exports.clear();
}

// Moves [base, base + bytes) onto a new shared memory object at the same
// address, keeping its contents.
CUresult Share(uintptr_t base, size_t bytes, uint64_t serial) {
  const std::string name = ObjectName(static_cast<uint64_t>(getpid()), serial);
  const size_t rounded = PageRounded(bytes);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Misuse(CUDA_ERROR_OPERATING_SYSTEM, "shm_open(%s) failed", name.c_str());
  bool ok = ftruncate(fd, static_cast<off_t>(rounded)) == 0 &&
            pwrite(fd, reinterpret_cast<void*>(base), rounded, 0) ==
                static_cast<ssize_t>(rounded);
  ok = ok && mmap(reinterpret_cast<void*>(base), rounded, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
  close(fd);
  if (!ok) {
    shm_unlink(name.c_str());
    return Misuse(CUDA_ERROR_OPERATING_SYSTEM, "sharing %s failed", name.c_str());
  }
  return CUDA_SUCCESS;
}

}  // namespace

void ForgetIpcExport(uintptr_t base) {
  auto it = S().ipc_exports.find(base);
  if (it == S().ipc_exports.end()) return;
  shm_unlink(ObjectName(static_cast<uint64_t>(getpid()), it->second).c_str());
  S().ipc_exports.erase(it);
}

// Devices have UUIDs "fake-uuid-dev-<n>": the same in every process, as a
// real device's is.
CUresult fake_cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetUuid")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceGetUuid")) return r;
  if (uuid == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetUuid: NULL");
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  std::memcpy(uuid->bytes, "fake-uuid-dev-", 14);
  uuid->bytes[15] = static_cast<char>('0' + dev);
  return CUDA_SUCCESS;
}

// Like the real driver, the handle names the allocation holding `ptr`;
// only device allocations (not imports) export.
CUresult fake_cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  static constexpr const char* fn = "cuIpcGetMemHandle";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  if (handle == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL handle", fn);
  State& s = S();
  const uintptr_t address = static_cast<uintptr_t>(ptr);
  auto it = s.device_allocations.upper_bound(address);
  if (it == s.device_allocations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (address - it->first >= it->second) return CUDA_ERROR_INVALID_VALUE;
  if (s.ipc_imports.count(it->first) > 0) return CUDA_ERROR_INVALID_VALUE;
  auto exported = s.ipc_exports.find(it->first);
  uint64_t serial = 0;
  if (exported != s.ipc_exports.end()) {
    serial = exported->second;
  } else {
    serial = ++s.ipc_serial;
    if (CUresult r = Share(it->first, it->second, serial)) return r;
    static const bool registered = [] { return std::atexit(UnlinkExportsAtExit) == 0; }();
    (void)registered;
    s.ipc_exports[it->first] = serial;
  }
  FakeIpcHandle h{};
  std::memcpy(h.tag, kTag, sizeof(kTag));
  h.pid = static_cast<uint64_t>(getpid());
  h.serial = serial;
  h.bytes = it->second;
  auto device = s.allocation_devices.find(it->first);
  h.device = device == s.allocation_devices.end() ? 0 : device->second;
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, &h, sizeof(h));
  return CUDA_SUCCESS;
}

// Misuse: opening in the exporting process (the real driver refuses), on
// another device than the memory's, or a handle this context already opened
// (the engine maps a handle once per context).
CUresult fake_cuIpcOpenMemHandle(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int flags) {
  static constexpr const char* fn = "cuIpcOpenMemHandle";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  if (ptr == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL pdptr", fn);
  if (flags != 0 && flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: flags 0x%x", fn, flags);
  }
  FakeIpcHandle h{};
  std::memcpy(&h, handle.reserved, sizeof(h));
  if (std::memcmp(h.tag, kTag, sizeof(kTag)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (h.pid == static_cast<uint64_t>(getpid())) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s: a handle this process exported", fn);
  }
  if (h.device != CurrentDevice()) {
    return Misuse(CUDA_ERROR_INVALID_DEVICE, "%s: memory of device %d opened on device %d", fn,
                  h.device, CurrentDevice());
  }
  State& s = S();
  const std::string key(handle.reserved, sizeof(handle.reserved));
  for (const auto& [base, imported] : s.ipc_imports) {
    if (imported == key && s.allocation_devices[base] == CurrentDevice()) {
      return Misuse(CUDA_ERROR_ALREADY_MAPPED, "%s: the handle is already open here", fn);
    }
  }
  const int fd = shm_open(ObjectName(h.pid, h.serial).c_str(), O_RDWR, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;  // freed, or its process exited
  void* memory = mmap(nullptr, PageRounded(h.bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (memory == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  const uintptr_t base = reinterpret_cast<uintptr_t>(memory);
  s.device_allocations[base] = h.bytes;
  s.allocation_devices[base] = CurrentDevice();
  s.ipc_imports[base] = key;
  *ptr = static_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

CUresult fake_cuIpcCloseMemHandle(CUdeviceptr ptr) {
  static constexpr const char* fn = "cuIpcCloseMemHandle";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  State& s = S();
  auto it = s.ipc_imports.find(static_cast<uintptr_t>(ptr));
  if (it == s.ipc_imports.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s(0x%llx): not an open IPC import", fn,
                  static_cast<unsigned long long>(ptr));
  }
  FlushDeferred();  // like cuMemFree, it waits for work using the memory
  const uintptr_t base = it->first;
  munmap(reinterpret_cast<void*>(base), PageRounded(s.device_allocations[base]));
  s.device_allocations.erase(base);
  s.allocation_devices.erase(base);
  s.ipc_imports.erase(it);
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
