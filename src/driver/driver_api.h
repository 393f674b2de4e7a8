// The one table of CUDA driver entry points. Every driver call in the library
// goes through Api(); entries are resolved with cuGetProcAddress at the pinned
// ABI version below, so the library never links libcuda and tests can swap
// entries (fault injection, a fake driver) in one place.
#ifndef VYRE_DRIVER_DRIVER_API_H_
#define VYRE_DRIVER_DRIVER_API_H_

#include <cuda.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace vyre::driver {

// The driver ABI the table is resolved at: CUDA 12.0, the oldest driver the
// library supports. A driver older than this is VYRE_STATUS_DRIVER_TOO_OLD.
constexpr int kPinnedDriverVersion = 12000;

// X(name): every entry point the engine calls. Names are the unversioned API
// names; cuda.h maps the struct members to their _v2 spellings consistently.
// The kernel-node calls take CUDA_KERNEL_NODE_PARAMS_v2, which extends v1 at
// its end, so either version the driver resolves reads and writes a prefix
// of what we pass (kern and ctx stay zero).
#define VYRE_DRIVER_ENTRY_POINTS(X)            \
  X(cuInit)                                    \
  X(cuDriverGetVersion)                        \
  X(cuGetErrorName)                            \
  X(cuGetErrorString)                          \
  X(cuDeviceGetCount)                          \
  X(cuDeviceGet)                               \
  X(cuDeviceGetName)                           \
  X(cuDeviceGetAttribute)                      \
  X(cuDeviceTotalMem)                          \
  X(cuDevicePrimaryCtxRetain)                  \
  X(cuDevicePrimaryCtxRelease)                 \
  X(cuDevicePrimaryCtxReset)                   \
  X(cuCtxGetCurrent)                           \
  X(cuCtxSetCurrent)                           \
  X(cuCtxSynchronize)                          \
  X(cuMemGetInfo)                              \
  X(cuMemAlloc)                                \
  X(cuMemFree)                                 \
  X(cuMemHostAlloc)                            \
  X(cuMemFreeHost)                             \
  X(cuMemHostRegister)                         \
  X(cuMemHostUnregister)                       \
  X(cuMemcpyHtoDAsync)                         \
  X(cuMemcpyDtoHAsync)                         \
  X(cuMemsetD8Async)                           \
  X(cuMemsetD32Async)                          \
  X(cuModuleLoadDataEx)                        \
  X(cuModuleUnload)                            \
  X(cuModuleGetFunction)                       \
  X(cuFuncGetAttribute)                        \
  X(cuFuncSetAttribute)                        \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuLaunchKernel)                            \
  X(cuLaunchCooperativeKernel)                 \
  X(cuStreamCreate)                            \
  X(cuStreamDestroy)                           \
  X(cuStreamSynchronize)                       \
  X(cuStreamQuery)                             \
  X(cuEventCreate)                             \
  X(cuEventDestroy)                            \
  X(cuEventRecord)                             \
  X(cuEventSynchronize)                        \
  X(cuEventQuery)                              \
  X(cuEventElapsedTime)                        \
  X(cuMemcpyDtoDAsync)                         \
  X(cuStreamBeginCapture)                      \
  X(cuStreamEndCapture)                        \
  X(cuGraphInstantiateWithFlags)               \
  X(cuGraphUpload)                             \
  X(cuGraphLaunch)                             \
  X(cuGraphDestroy)                            \
  X(cuGraphExecDestroy)                        \
  X(cuGraphGetNodes)                           \
  X(cuGraphNodeGetType)                        \
  X(cuGraphMemsetNodeGetParams)                \
  X(cuGraphKernelNodeGetParams)                \
  X(cuGraphExecKernelNodeSetParams)            \
  X(cuGraphExecMemsetNodeSetParams)            \
  X(cuPointerGetAttributes)                    \
  X(cuStreamWaitEvent)                         \
  X(cuDeviceCanAccessPeer)                     \
  X(cuCtxEnablePeerAccess)                     \
  X(cuMemcpyPeerAsync)                         \
  X(cuDeviceGetUuid)                           \
  X(cuIpcGetMemHandle)                         \
  X(cuIpcOpenMemHandle)                        \
  X(cuIpcCloseMemHandle)                       \
  X(cuGraphCreate)                             \
  X(cuGraphAddMemsetNode)                      \
  X(cuGraphAddKernelNode)                      \
  X(cuGraphAddChildGraphNode)                  \
  X(cuGraphKernelNodeSetParams)                \
  X(cuGraphMemsetNodeSetParams)                \
  VYRE_DRIVER_OPTIONAL_ENTRY_POINTS(X)

// X(name): entry points of newer drivers (CUDA 12.4, kOptionalDriverVersion)
// that only some features need: resolved when the driver has them, left null
// otherwise; the feature checks HasConditionalGraphs() and says so.
// Last in the table, so the required ones are a prefix.
#define VYRE_DRIVER_OPTIONAL_ENTRY_POINTS(X)   \
  X(cuGraphConditionalHandleCreate)            \
  X(cuGraphAddNode)

constexpr int kOptionalDriverVersion = 12040;

enum class Entry : int {
#define VYRE_DRIVER_ENUM(name) k_##name,
  VYRE_DRIVER_ENTRY_POINTS(VYRE_DRIVER_ENUM)
#undef VYRE_DRIVER_ENUM
  kCount
};

struct DriverApi {
#define VYRE_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  VYRE_DRIVER_ENTRY_POINTS(VYRE_DRIVER_MEMBER)
#undef VYRE_DRIVER_MEMBER
};

// The unversioned name of an entry, e.g. "cuMemAlloc".
const char* EntryName(Entry entry);

// Loads libcuda.so.1 (or $VYRE_CUDA_DRIVER_LIBRARY) once per process and
// calls cuInit. Later calls return the first outcome. A driver that loads but
// sees no device is OK here; DeviceCount() then reports 0.
absl::Status EnsureLoaded();

namespace internal {
// Constant-initialised (all null) and filled once by EnsureLoaded(); read
// directly so that a driver call on the dispatch path costs no function call
// or static-initialisation guard to find its entry.
extern DriverApi g_table;
}  // namespace internal

// The table; only valid after EnsureLoaded() returned OK.
inline const DriverApi& Api() { return internal::g_table; }

// Whether the driver has the conditional-node entry points (CUDA 12.4+).
inline bool HasConditionalGraphs() {
  return Api().cuGraphConditionalHandleCreate != nullptr && Api().cuGraphAddNode != nullptr;
}

// Devices visible after cuInit (0 when cuInit said CUDA_ERROR_NO_DEVICE).
int DeviceCount();
// cuDriverGetVersion() of the loaded driver.
int DriverVersion();

// On the fake CUDA driver of the tests (tests/support/fake_driver, loaded
// through VYRE_CUDA_DRIVER_LIBRARY; it exports fake_cuda_take_refused_kernel),
// a launch of a kernel the fake does not run fails with
// CUDA_ERROR_NOT_SUPPORTED. This returns that kernel's name when the calling
// thread's last launch call (cuLaunchKernel, cuLaunchCooperativeKernel,
// cuGraphLaunch) was such a refusal, and forgets it; "" on any other driver,
// and for every other failure.
std::string TakeFakeDriverRefusedKernel();

// Test seam: the live table, so tests can wrap entries. Not thread-safe
// against concurrent driver calls; swap entries only while idle.
DriverApi& MutableApiForTesting();

}  // namespace vyre::driver

#endif  // VYRE_DRIVER_DRIVER_API_H_
