// The fake driver's exports: cuInit, cuGetProcAddress_v2 over the table of
// the entry points in this folder, and the test controls.
//
// A fake CUDA driver on host memory, so CI machines without a GPU can run the
// engine's contexts, buffers, programs, dispatch and error paths.
//
// The engine loads it through VYRE_CUDA_DRIVER_LIBRARY and resolves every
// entry point through cuGetProcAddress_v2, which maps the unversioned API
// names to the fake_* functions of this folder (entry_points.h). Device
// memory is malloc'd (device pointers are host addresses), streams are
// synchronous (every copy, memset and kernel runs at once), and the test
// kernels named in docs/ENGINE_CONTRACT.md (tests/support/test_kernels.cu)
// run on the host: vyre_test_add_u32, vyre_test_inc_u32, vyre_test_saxpy_f32,
// vyre_test_noop_out_u32 (which touches nothing), vyre_test_probe_params
// (which records its arguments), the library's vyre_selftest_add_u32 and the
// examples' vyre_example_add_u32. The library's kernels that create a GPU
// e-graph image are accepted without running (kernels.cc). A launch of any
// other kernel, live, deferred, captured or as a graph's kernel node, is
// refused with CUDA_ERROR_NOT_SUPPORTED (and a line on stderr), so a test of
// a kernel the fake cannot run fails instead of passing on nothing; the
// library names it through fake_cuda_take_refused_kernel and gives a Fix
// that says so. Modules may be PTX text (entries found after ".entry"; text
// that has entries but does not start with a .version directive is refused
// with CUDA_ERROR_INVALID_PTX and a ptxas-like log, as the real JIT refuses
// what is not PTX), cubins (ELF FUNC symbols marked as CUDA entries) or
// fatbins holding either, uncompressed.
//
// Misuse the real driver would reject (no current context, pointers outside
// any allocation, unknown handles, double frees) is rejected here too, printed
// to stderr and counted in fake_cuda_stats.misuse_errors so tests can assert
// the engine never does it.
//
// Test controls (fake_cuda_control.h): fake_cuda_get_stats, fake_cuda_set_hold,
// fake_cuda_inject_fault, fake_cuda_inject_latent_fault. For the library:
// fake_cuda_take_refused_kernel (below).
// Environment:
//   FAKE_CUDA_MODE          unset/"ok" normal; "no_device": cuInit says
//                           CUDA_ERROR_NO_DEVICE; "old": driver version 11080;
//                           "stub": every call (cuGetProcAddress_v2 and cuInit
//                           included) returns CUDA_ERROR_STUB_LIBRARY, as the
//                           CUDA toolkit's lib64/stubs/libcuda.so does.
//   FAKE_CUDA_INIT_RESULT, FAKE_CUDA_VERSION_RESULT, FAKE_CUDA_COUNT_RESULT
//                           a CUresult (number) that cuInit, cuDriverGetVersion
//                           or cuDeviceGetCount returns instead of succeeding.
//   FAKE_CUDA_MEMORY_BYTES  device memory capacity (default 1 GiB).
//   FAKE_CUDA_DEVICES=<n>   n devices (1 to 4, default 1), each with its own
//                           primary context; streams, events and allocations
//                           belong to the device whose context was current,
//                           and work touching another device's memory without
//                           peer access (cuCtxEnablePeerAccess) is misuse.
//   FAKE_CUDA_PEER_ACCESS=0 cuDeviceCanAccessPeer says 0 for every pair
//                           (default: 1 between different devices).
//   FAKE_CUDA_DEFER_COPIES=1  async host<->device copies run only when the
//                           host waits (a sync, query, free, or a call that
//                           must see the device's memory).
//   FAKE_CUDA_DEFER_ALL=1   the same for every async copy, memset and kernel
//                           launch (cooperative ones excepted), in enqueue
//                           order: a result read before the engine waits for
//                           it is wrong, and a test that checks it fails.
#include <cuda.h>

#include <cstdlib>
#include <cstring>

#include "entry_points.h"
#include "fake_cuda_control.h"
#include "kernels.h"
#include "state.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace fake_driver {
namespace {

// ---------------------------------------------------------------------------
// Entry-point lookup
// ---------------------------------------------------------------------------

struct ProcEntry {
  const char* name;
  void* function;
};

#define FAKE_PROC(name) {#name, reinterpret_cast<void*>(&fake_##name)}
const ProcEntry kProcs[] = {
    {"cuInit", reinterpret_cast<void*>(&FakeInit)},
    FAKE_PROC(cuDriverGetVersion),
    FAKE_PROC(cuGetErrorName),
    FAKE_PROC(cuGetErrorString),
    FAKE_PROC(cuDeviceGetCount),
    FAKE_PROC(cuDeviceGet),
    FAKE_PROC(cuDeviceGetName),
    FAKE_PROC(cuDeviceGetAttribute),
    FAKE_PROC(cuDeviceTotalMem),
    FAKE_PROC(cuDevicePrimaryCtxRetain),
    FAKE_PROC(cuDevicePrimaryCtxRelease),
    FAKE_PROC(cuDevicePrimaryCtxReset),
    FAKE_PROC(cuCtxGetCurrent),
    FAKE_PROC(cuCtxSetCurrent),
    FAKE_PROC(cuCtxSynchronize),
    FAKE_PROC(cuMemGetInfo),
    FAKE_PROC(cuMemAlloc),
    FAKE_PROC(cuMemFree),
    FAKE_PROC(cuMemHostAlloc),
    FAKE_PROC(cuMemFreeHost),
    FAKE_PROC(cuMemHostRegister),
    FAKE_PROC(cuMemHostUnregister),
    FAKE_PROC(cuMemcpyHtoDAsync),
    FAKE_PROC(cuMemcpyDtoHAsync),
    FAKE_PROC(cuMemsetD8Async),
    FAKE_PROC(cuMemsetD32Async),
    FAKE_PROC(cuModuleLoadDataEx),
    FAKE_PROC(cuModuleUnload),
    FAKE_PROC(cuModuleGetFunction),
    FAKE_PROC(cuFuncGetAttribute),
    FAKE_PROC(cuFuncSetAttribute),
    FAKE_PROC(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    FAKE_PROC(cuLaunchKernel),
    FAKE_PROC(cuLaunchCooperativeKernel),
    FAKE_PROC(cuStreamCreate),
    FAKE_PROC(cuStreamDestroy),
    FAKE_PROC(cuStreamSynchronize),
    FAKE_PROC(cuStreamQuery),
    FAKE_PROC(cuEventCreate),
    FAKE_PROC(cuEventDestroy),
    FAKE_PROC(cuEventRecord),
    FAKE_PROC(cuEventSynchronize),
    FAKE_PROC(cuEventQuery),
    FAKE_PROC(cuEventElapsedTime),
    FAKE_PROC(cuMemcpyDtoDAsync),
    FAKE_PROC(cuStreamBeginCapture),
    FAKE_PROC(cuStreamEndCapture),
    FAKE_PROC(cuGraphInstantiateWithFlags),
    FAKE_PROC(cuGraphUpload),
    FAKE_PROC(cuGraphLaunch),
    FAKE_PROC(cuGraphDestroy),
    FAKE_PROC(cuGraphExecDestroy),
    FAKE_PROC(cuGraphGetNodes),
    FAKE_PROC(cuGraphNodeGetType),
    FAKE_PROC(cuGraphMemsetNodeGetParams),
    FAKE_PROC(cuGraphKernelNodeGetParams),
    FAKE_PROC(cuGraphExecKernelNodeSetParams),
    FAKE_PROC(cuGraphExecMemsetNodeSetParams),
    FAKE_PROC(cuPointerGetAttributes),
    FAKE_PROC(cuStreamWaitEvent),
    FAKE_PROC(cuDeviceCanAccessPeer),
    FAKE_PROC(cuCtxEnablePeerAccess),
    FAKE_PROC(cuMemcpyPeerAsync),
    FAKE_PROC(cuDeviceGetUuid),
    FAKE_PROC(cuIpcGetMemHandle),
    FAKE_PROC(cuIpcOpenMemHandle),
    FAKE_PROC(cuIpcCloseMemHandle),
    FAKE_PROC(cuGraphCreate),
    FAKE_PROC(cuGraphAddMemsetNode),
    FAKE_PROC(cuGraphAddKernelNode),
    FAKE_PROC(cuGraphAddChildGraphNode),
    FAKE_PROC(cuGraphKernelNodeSetParams),
    FAKE_PROC(cuGraphMemsetNodeSetParams),
    // CUDA 12.4's: hidden by FAKE_CUDA_NO_CONDITIONAL=1 (cuGetProcAddress_v2).
    FAKE_PROC(cuGraphConditionalHandleCreate),
    FAKE_PROC(cuGraphAddNode),
};
#undef FAKE_PROC

}  // namespace
}  // namespace fake_driver

using fake_driver::CurrentMode;
using fake_driver::FakeInit;
using fake_driver::kProcs;
using fake_driver::Lock;
using fake_driver::Mode;
using fake_driver::ProcEntry;
using fake_driver::S;
using fake_driver::State;

// ---------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------

FAKE_EXPORT CUresult cuInit(unsigned int flags) { return FakeInit(flags); }

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* symbolStatus) {
  (void)cudaVersion;
  (void)flags;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentMode() == Mode::kStub) {
    // Like the CUDA toolkit's lib64/stubs/libcuda.so: every call, this one
    // included, answers CUDA_ERROR_STUB_LIBRARY.
    *pfn = nullptr;
    if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_STUB_LIBRARY;
  }
  const char* no_conditional = std::getenv("FAKE_CUDA_NO_CONDITIONAL");
  const bool hide = no_conditional != nullptr && std::strcmp(no_conditional, "1") == 0 &&
                    (std::strcmp(symbol, "cuGraphConditionalHandleCreate") == 0 ||
                     std::strcmp(symbol, "cuGraphAddNode") == 0);
  for (const ProcEntry& entry : kProcs) {
    if (!hide && std::strcmp(entry.name, symbol) == 0) {
      *pfn = entry.function;
      if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = nullptr;
  if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT void fake_cuda_get_stats(fake_cuda_stats* out) {
  if (out == nullptr) return;
  Lock lock(S().mu);
  State& s = S();
  fake_cuda_stats st = s.stats;
  st.device_allocations_live = s.device_allocations.size();
  st.device_bytes_live = s.device_bytes;
  st.pinned_allocations_live = s.pinned_allocations.size();
  st.pinned_bytes_live = s.pinned_bytes;
  st.modules_live = s.modules.size();
  st.streams_live = s.streams.size();
  st.events_live = s.events.size();
  st.primary_context_retains = 0;
  for (int64_t retains : s.primary_retains) st.primary_context_retains += retains;
  st.graphs_live = s.graphs.size();
  st.graph_execs_live = s.graph_execs.size();
  st.ipc_imports_live = s.ipc_imports.size();
  st.ipc_exports_live = s.ipc_exports.size();
  *out = st;
}

FAKE_EXPORT void fake_cuda_inject_fault(int cu_result) {
  Lock lock(S().mu);
  S().armed_fault = static_cast<CUresult>(cu_result);
  S().armed_latent = false;
}

FAKE_EXPORT void fake_cuda_inject_latent_fault(int cu_result) {
  Lock lock(S().mu);
  S().armed_fault = static_cast<CUresult>(cu_result);
  S().armed_latent = true;
}

// For the library (src/driver/driver_loader.cc), which also takes this
// export as the sign that it runs on this fake: if the calling thread's last
// cuLaunchKernel, cuLaunchCooperativeKernel or cuGraphLaunch returned
// CUDA_ERROR_NOT_SUPPORTED because the fake does not know the kernel, copies
// the kernel's name into `name` (NUL-terminated, cut to `size`), forgets it
// and returns its length + 1; otherwise returns 0.
FAKE_EXPORT size_t fake_cuda_take_refused_kernel(char* name, size_t size) {
  return fake_driver::TakeRefusedKernel(name, size);
}

FAKE_EXPORT void fake_cuda_set_hold(int hold) {
  {
    Lock lock(S().mu);
    S().hold = hold != 0;
  }
  S().hold_changed.notify_all();
}
