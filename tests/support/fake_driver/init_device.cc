// cuInit, the driver version, error names and strings, and the device
// queries of the fake devices (one, or FAKE_CUDA_DEVICES) and their peer
// access.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "entry_points.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Initialisation, version, errors
// ---------------------------------------------------------------------------

CUresult FakeInit(unsigned int flags) {
  if (CurrentMode() == Mode::kStub) return CUDA_ERROR_STUB_LIBRARY;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentMode() == Mode::kNoDevice) return CUDA_ERROR_NO_DEVICE;
  if (CUresult r = EnvResult("FAKE_CUDA_INIT_RESULT")) return r;
  Lock lock(S().mu);
  if (!S().initialized) {
    S().initialized = true;
    S().capacity = MemoryCapacity();
    const char* defer = std::getenv("FAKE_CUDA_DEFER_COPIES");
    const char* defer_all = std::getenv("FAKE_CUDA_DEFER_ALL");
    S().defer_all = defer_all != nullptr && std::strcmp(defer_all, "1") == 0;
    S().defer_copies = S().defer_all || (defer != nullptr && std::strcmp(defer, "1") == 0);
    const char* devices = std::getenv("FAKE_CUDA_DEVICES");
    if (devices != nullptr && *devices != '\0') {
      const int n = std::atoi(devices);
      if (n < 1 || n > kMaxDevices) {
        std::fprintf(stderr, "fake cuda: FAKE_CUDA_DEVICES='%s' is not 1 to %d; using 1\n",
                     devices, kMaxDevices);
      } else {
        S().device_count = n;
      }
    }
    const char* peers = std::getenv("FAKE_CUDA_PEER_ACCESS");
    S().peer_capable = peers == nullptr || std::strcmp(peers, "0") != 0;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = EnvResult("FAKE_CUDA_VERSION_RESULT")) return r;
  *version = CurrentMode() == Mode::kOld ? 11080 : 13000;
  return CUDA_SUCCESS;
}

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT",
     "the launch timed out and was terminated"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
     "too many blocks in cooperative launch"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS",
     "peer mapping resources exhausted"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

CUresult fake_cuGetErrorName(CUresult error, const char** out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *out = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuGetErrorString(CUresult error, const char** out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *out = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------

CUresult fake_cuDeviceGetCount(int* count) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetCount")) return r;
  if (count == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount: NULL count");
  if (CUresult r = EnvResult("FAKE_CUDA_COUNT_RESULT")) return r;
  *count = S().device_count;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGet")) return r;
  if (device == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet: NULL device");
  if (ordinal < 0 || ordinal >= S().device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char* name, int len, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetName")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceGetName")) return r;
  if (name == nullptr || len <= 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName: NULL name or len %d", len);
  }
  std::snprintf(name, static_cast<size_t>(len), "%s", kDeviceName);
  return CUDA_SUCCESS;
}
namespace {

int DeviceAttribute(CUdevice_attribute attribute) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return kMaxThreadsPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return kMaxBlockDim[0];
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return kMaxBlockDim[1];
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return kMaxBlockDim[2];
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return kMaxGridDim[0];
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return kMaxGridDim[1];
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return kMaxGridDim[2];
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return kSharedBytesPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return kSharedBytesPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 2 * kSharedBytesPerBlock;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return kMultiprocessors;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return kMaxThreadsPerMultiprocessor;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 * 1024 * 1024;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    default: return 0;
  }
}

}  // namespace

CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGetAttribute")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceGetAttribute")) return r;
  if (value == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: NULL");
  *value = DeviceAttribute(attribute);
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceTotalMem")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceTotalMem")) return r;
  if (bytes == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceTotalMem: NULL");
  *bytes = S().capacity;
  return CUDA_SUCCESS;
}

}  // namespace fake_driver

namespace fake_driver {

// ---------------------------------------------------------------------------
// Peer access
// ---------------------------------------------------------------------------

CUresult fake_cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceCanAccessPeer")) return r;
  if (CUresult r = RequireDevice(dev, "cuDeviceCanAccessPeer")) return r;
  if (CUresult r = RequireDevice(peer, "cuDeviceCanAccessPeer")) return r;
  if (can_access == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceCanAccessPeer: NULL");
  }
  *can_access = S().peer_capable && dev != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

// Lets the current context's device reach `peer`'s memory. Asking without
// cuDeviceCanAccessPeer's yes, for the same device or with flags is misuse;
// a second enable answers CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, as the real
// driver does (other CUDA code in the process may have enabled it first).
CUresult fake_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  static constexpr const char* fn = "cuCtxEnablePeerAccess";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  if (flags != 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: flags 0x%x", fn, flags);
  const int peer_device = DeviceOfContext(peer);
  if (peer_device < 0 || S().primary_retains[peer_device] <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s: %p is not a retained primary context", fn,
                  static_cast<void*>(peer));
  }
  const int device = CurrentDevice();
  if (peer_device == device) {
    return Misuse(CUDA_ERROR_INVALID_DEVICE, "%s: the peer is the current context's device", fn);
  }
  if (!S().peer_capable) {
    return Misuse(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                  "%s: device %d cannot access device %d (cuDeviceCanAccessPeer says 0)", fn,
                  device, peer_device);
  }
  if (!S().peer_enabled.insert({device, peer_device}).second) {
    return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  }
  ++S().stats.peer_enables;
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
