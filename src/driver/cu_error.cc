#include "driver/cu_error.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status.h"
#include "driver/device_faults.h"
#include "driver/driver_api.h"

namespace vyre::driver {
namespace {

// Fixes shared by several rows.
constexpr char kFixOutOfMemory[] =
    "free buffers or programs you no longer need, call vyre_context_trim, or use smaller sizes";
constexpr char kFixUnexpected[] =
    "vyre-cuda does not expect this result from the call it made: report this message as a "
    "vyre-cuda bug with the driver version (vyre-cuda info), and recreate the context meanwhile";
constexpr char kFixRejectedValue[] =
    "check this call's arguments against the device limits (vyre_device_info_get); if they are "
    "within them, report this message as a vyre-cuda bug";
constexpr char kFixDeviceFault[] =
    "destroy every vyre context on the device (vyre_context_destroy) and create a new one; the "
    "library then resets the device";
constexpr char kFixGraphicsInterop[] =
    "vyre-cuda makes no graphics-interop or array calls: report this message as a vyre-cuda bug";
constexpr char kFixProfiler[] =
    "a profiler attached to the process refused the call: run without it, or update it to one "
    "that supports this driver";
constexpr char kFixCapture[] =
    "if code of yours captures a CUDA stream in global mode (cudaStreamBeginCapture / "
    "cuStreamBeginCapture) on any thread, end that capture before calling vyre-cuda, or capture "
    "in thread-local or relaxed mode; otherwise report this message as a vyre-cuda bug";
constexpr char kFixDriverLibraries[] =
    "the NVIDIA driver's installation is incomplete or mixed: reinstall the NVIDIA driver so "
    "that all of its libraries come from one version";
constexpr char kFixStub[] =
    "load the NVIDIA driver's libcuda.so.1 instead: remove the toolkit's stubs directory from "
    "LD_LIBRARY_PATH, and unset VYRE_CUDA_DRIVER_LIBRARY or point it at the driver's "
    "libcuda.so.1 (ldconfig -p | grep libcuda.so.1 shows where it is); install the NVIDIA "
    "driver if there is none";
constexpr char kFixMps[] =
    "the device is reached through MPS (CUDA Multi-Process Service) and MPS refused the client: "
    "check that nvidia-cuda-mps-control -d runs for this user and its log "
    "(/var/log/nvidia-mps), or unset CUDA_MPS_PIPE_DIRECTORY to run without MPS";
constexpr char kFixModuleContents[] =
    "correct the kernel code the driver refused (the JIT log, when there is one, follows this "
    "line; all of it: vyre_last_error_log)";

// A launch the tests' fake CUDA driver refused because it does not run the
// kernel (TakeFakeDriverRefusedKernel).
constexpr char kFixFakeDriverKernel[] =
    "the fake CUDA driver that VYRE_CUDA_DRIVER_LIBRARY loads runs only the test kernels listed "
    "in docs/ENGINE_CONTRACT.md, \"Test kernels\" (source: tests/support/test_kernels.cu), and "
    "the library's self-test; run this kernel on a real GPU (unset VYRE_CUDA_DRIVER_LIBRARY)";
constexpr char kFixFakeDriverEgraph[] =
    "the fake CUDA driver that VYRE_CUDA_DRIVER_LIBRARY loads creates GPU e-graph images but runs "
    "none of the e-graph pass and rebuild kernels: rebuild on a real GPU (unset "
    "VYRE_CUDA_DRIVER_LIBRARY), or use a CPU image (VYRE_EGRAPH_DEVICE_CPU)";

bool IsLaunchCall(absl::string_view call) {
  return call == "cuLaunchKernel" || call == "cuLaunchCooperativeKernel" ||
         call == "cuGraphLaunch";
}

#define VYRE_R(code, name, status, cause, fix) \
  CuResultInfo { code, #name, VYRE_STATUS_##status, cause, fix }

// Numbers rather than enumerators: the library also builds against older
// cuda.h versions that lack the newest codes.
constexpr CuResultInfo kTable[] = {
    VYRE_R(0, CUDA_SUCCESS, OK, "no error", "nothing to fix"),
    VYRE_R(1, CUDA_ERROR_INVALID_VALUE, DRIVER_ERROR,
           "a parameter of the call is outside the range the driver accepts", kFixRejectedValue),
    VYRE_R(2, CUDA_ERROR_OUT_OF_MEMORY, OUT_OF_MEMORY,
           "the driver could not allocate enough memory or other resources", kFixOutOfMemory),
    VYRE_R(3, CUDA_ERROR_NOT_INITIALIZED, DRIVER_ERROR,
           "the CUDA driver is not initialised in this process",
           "a child process created by fork() cannot use CUDA that its parent initialised: load "
           "vyre-cuda only after the fork (or start the child with exec); otherwise check the "
           "driver with nvidia-smi"),
    VYRE_R(4, CUDA_ERROR_DEINITIALIZED, DRIVER_ERROR, "the CUDA driver is shutting down",
           "make no vyre-cuda calls while the process exits (from static destructors or atexit "
           "handlers that run after CUDA's); destroy vyre objects before returning from main"),
    VYRE_R(5, CUDA_ERROR_PROFILER_DISABLED, DRIVER_ERROR, "the profiler is not initialised",
           kFixProfiler),
    VYRE_R(6, CUDA_ERROR_PROFILER_NOT_INITIALIZED, DRIVER_ERROR,
           "the profiler is not initialised (deprecated result)", kFixProfiler),
    VYRE_R(7, CUDA_ERROR_PROFILER_ALREADY_STARTED, DRIVER_ERROR,
           "the profiler is already started (deprecated result)", kFixProfiler),
    VYRE_R(8, CUDA_ERROR_PROFILER_ALREADY_STOPPED, DRIVER_ERROR,
           "the profiler is already stopped (deprecated result)", kFixProfiler),
    VYRE_R(34, CUDA_ERROR_STUB_LIBRARY, NO_DRIVER,
           "the loaded libcuda is the CUDA toolkit's link stub, not the NVIDIA driver", kFixStub),
    VYRE_R(36, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, DRIVER_TOO_OLD,
           "the call needs a newer CUDA driver than the one installed",
           "install a newer NVIDIA driver (vyre-cuda info shows the CUDA version the installed "
           "one supports)"),
    VYRE_R(46, CUDA_ERROR_DEVICE_UNAVAILABLE, NO_DEVICE,
           "the device is unavailable now: another process holds it in EXCLUSIVE_PROCESS "
           "compute mode, or its compute mode is PROHIBITED",
           "check the compute mode and the processes on the device (nvidia-smi -q -d COMPUTE; "
           "nvidia-smi), stop the process that holds it or set the mode to DEFAULT "
           "(nvidia-smi -c DEFAULT), or use another device (CUDA_VISIBLE_DEVICES, "
           "device_ordinal)"),
    VYRE_R(100, CUDA_ERROR_NO_DEVICE, NO_DEVICE, "the driver detects no CUDA-capable device",
           "run on a machine with an NVIDIA GPU, and check nvidia-smi and CUDA_VISIBLE_DEVICES"),
    VYRE_R(101, CUDA_ERROR_INVALID_DEVICE, NO_DEVICE,
           "the device ordinal names no CUDA device, or the device cannot do what was asked",
           "pass an ordinal below vyre_device_count(), and check CUDA_VISIBLE_DEVICES"),
    VYRE_R(102, CUDA_ERROR_DEVICE_NOT_LICENSED, NO_DEVICE,
           "the device needs a vGPU (GRID) license that is not applied",
           "apply the license (the nvidia-gridd service and its configuration), or use a "
           "device that needs none"),
    VYRE_R(200, CUDA_ERROR_INVALID_IMAGE, COMPILE_FAILED,
           "the kernel image is not a valid module for this driver",
           "rebuild the cubin or fatbin with nvcc (-cubin or -fatbin) for this device's "
           "architecture, with a toolkit no newer than the driver"),
    VYRE_R(201, CUDA_ERROR_INVALID_CONTEXT, DRIVER_ERROR,
           "no valid CUDA context was current for the call",
           "if code of yours destroys or resets contexts (cuCtxDestroy, cuCtxPopCurrent, "
           "cuDevicePrimaryCtxReset, cudaDeviceReset), do not do so while vyre contexts use the "
           "device; otherwise report this message as a vyre-cuda bug"),
    VYRE_R(202, CUDA_ERROR_CONTEXT_ALREADY_CURRENT, DRIVER_ERROR,
           "the context was already current (deprecated result)", kFixUnexpected),
    VYRE_R(205, CUDA_ERROR_MAP_FAILED, DRIVER_ERROR,
           "the driver could not map or page-lock the memory",
           "register only ordinary host memory (not a file mapping, device memory or memory "
           "another API locked), and check the locked-memory limit (ulimit -l)"),
    VYRE_R(206, CUDA_ERROR_UNMAP_FAILED, DRIVER_ERROR,
           "the driver could not unmap or unregister the memory",
           "keep the memory mapped until vyre_host_unregister returns; if it was, report this "
           "message as a vyre-cuda bug"),
    VYRE_R(207, CUDA_ERROR_ARRAY_IS_MAPPED, DRIVER_ERROR, "the array is mapped",
           kFixGraphicsInterop),
    VYRE_R(208, CUDA_ERROR_ALREADY_MAPPED, DRIVER_ERROR, "the resource is already mapped",
           kFixGraphicsInterop),
    VYRE_R(209, CUDA_ERROR_NO_BINARY_FOR_GPU, COMPILE_FAILED,
           "the kernel image holds no code this device can run",
           "compile the code for this device's architecture (nvcc -arch=sm_XY with the compute "
           "capability vyre_device_info_get reports), or include PTX the driver can JIT"),
    VYRE_R(210, CUDA_ERROR_ALREADY_ACQUIRED, DRIVER_ERROR, "the resource is already acquired",
           kFixGraphicsInterop),
    VYRE_R(211, CUDA_ERROR_NOT_MAPPED, DRIVER_ERROR, "the resource is not mapped",
           kFixGraphicsInterop),
    VYRE_R(212, CUDA_ERROR_NOT_MAPPED_AS_ARRAY, DRIVER_ERROR,
           "the mapped resource is not available as an array", kFixGraphicsInterop),
    VYRE_R(213, CUDA_ERROR_NOT_MAPPED_AS_POINTER, DRIVER_ERROR,
           "the mapped resource is not available as a pointer", kFixGraphicsInterop),
    VYRE_R(214, CUDA_ERROR_ECC_UNCORRECTABLE, DEVICE_FAULT,
           "an uncorrectable ECC error was detected during execution", kFixDeviceFault),
    VYRE_R(215, CUDA_ERROR_UNSUPPORTED_LIMIT, DRIVER_ERROR,
           "the device does not support the limit", kFixUnexpected),
    VYRE_R(216, CUDA_ERROR_CONTEXT_ALREADY_IN_USE, DRIVER_ERROR,
           "the context is bound to another CPU thread (EXCLUSIVE_THREAD compute mode)",
           "set the device's compute mode to DEFAULT or EXCLUSIVE_PROCESS (nvidia-smi -c)"),
    VYRE_R(217, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, DRIVER_ERROR,
           "peer access is not supported between the devices", kFixUnexpected),
    VYRE_R(218, CUDA_ERROR_INVALID_PTX, COMPILE_FAILED, "the PTX JIT compilation failed",
           "correct the PTX errors the JIT log names (all of it: vyre_last_error_log), and "
           "target a virtual architecture this device supports"),
    VYRE_R(219, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, DRIVER_ERROR,
           "an OpenGL or DirectX context is invalid", kFixGraphicsInterop),
    VYRE_R(220, CUDA_ERROR_NVLINK_UNCORRECTABLE, DRIVER_ERROR,
           "an uncorrectable NVLink error was detected during execution",
           "check the links (nvidia-smi nvlink -e) and the kernel log for Xid errors, recreate "
           "the context, and have the hardware checked if it recurs"),
    VYRE_R(221, CUDA_ERROR_JIT_COMPILER_NOT_FOUND, COMPILE_FAILED,
           "the driver's PTX JIT compiler library was not found",
           "install the complete NVIDIA driver (libnvidia-ptxjitcompiler.so.1; in a container, "
           "the 'compute' driver capability), or pass a cubin built for this device"),
    VYRE_R(222, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, COMPILE_FAILED,
           "the PTX was produced by a newer CUDA toolkit than this driver's JIT supports",
           "update the NVIDIA driver to one that supports the toolkit that produced the PTX, or "
           "produce the PTX with a toolkit no newer than the driver (vyre-cuda info shows the "
           "CUDA version the driver supports)"),
    VYRE_R(223, CUDA_ERROR_JIT_COMPILATION_DISABLED, COMPILE_FAILED,
           "PTX JIT compilation is disabled",
           "unset CUDA_DISABLE_PTX_JIT (or the setting that disables the JIT), or pass a cubin "
           "built for this device"),
    VYRE_R(224, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, DRIVER_ERROR,
           "the device does not support the execution affinity", kFixUnexpected),
    VYRE_R(225, CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, COMPILE_FAILED,
           "the code calls cudaDeviceSynchronize from the device, which is not supported",
           "remove the device-side cudaDeviceSynchronize call from the kernel code"),
    VYRE_R(226, CUDA_ERROR_CONTAINED, DEVICE_FAULT,
           "a device exception was contained by the GPU's error containment", kFixDeviceFault),
    VYRE_R(300, CUDA_ERROR_INVALID_SOURCE, COMPILE_FAILED, "the device kernel source is invalid",
           kFixModuleContents),
    VYRE_R(301, CUDA_ERROR_FILE_NOT_FOUND, DRIVER_ERROR, "a file was not found", kFixUnexpected),
    VYRE_R(302, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, DRIVER_ERROR,
           "a shared object the driver uses lacks a symbol", kFixDriverLibraries),
    VYRE_R(303, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, DRIVER_ERROR,
           "a shared object the driver uses failed to initialise", kFixDriverLibraries),
    VYRE_R(304, CUDA_ERROR_OPERATING_SYSTEM, DRIVER_ERROR,
           "an operating-system call inside the driver failed",
           "check the kernel log (dmesg), the process's limits (ulimit -a) and that /dev/nvidia* "
           "are accessible to this process"),
    VYRE_R(400, CUDA_ERROR_INVALID_HANDLE, DRIVER_ERROR,
           "a resource handle passed to the call is not valid", kFixUnexpected),
    VYRE_R(401, CUDA_ERROR_ILLEGAL_STATE, DRIVER_ERROR,
           "a resource the call needs is not in a valid state", kFixUnexpected),
    VYRE_R(402, CUDA_ERROR_LOSSY_QUERY, DRIVER_ERROR,
           "the query would discard information", kFixUnexpected),
    VYRE_R(500, CUDA_ERROR_NOT_FOUND, ENTRY_NOT_FOUND, "a named symbol was not found",
           "pass the kernel's exact entry name (declare it extern \"C\" to avoid C++ name "
           "mangling)"),
    VYRE_R(600, CUDA_ERROR_NOT_READY, NOT_READY, "the work has not completed yet",
           "poll again later or call vyre_pending_wait"),
    VYRE_R(700, CUDA_ERROR_ILLEGAL_ADDRESS, DEVICE_FAULT,
           "a kernel loaded or stored at an invalid address", kFixDeviceFault),
    VYRE_R(701, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, LIMIT_EXCEEDED,
           "the launch needs more resources (registers, mostly) than a block of this size has",
           "launch fewer threads per block (workgroup_size or block), or compile the kernel "
           "with a register limit (__launch_bounds__, -maxrregcount)"),
    VYRE_R(702, CUDA_ERROR_LAUNCH_TIMEOUT, DEVICE_FAULT,
           "a kernel ran too long and the watchdog stopped it", kFixDeviceFault),
    VYRE_R(703, CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, DRIVER_ERROR,
           "the launch uses an incompatible texturing mode", kFixUnexpected),
    VYRE_R(704, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, DRIVER_ERROR,
           "peer access is already enabled", kFixUnexpected),
    VYRE_R(705, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, DRIVER_ERROR, "peer access is not enabled",
           kFixUnexpected),
    VYRE_R(708, CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, DRIVER_ERROR,
           "the primary context is already initialised", kFixUnexpected),
    VYRE_R(709, CUDA_ERROR_CONTEXT_IS_DESTROYED, DRIVER_ERROR,
           "the context was destroyed, or is a primary context not initialised",
           "do not reset or destroy the device's primary context (cuDevicePrimaryCtxReset, "
           "cudaDeviceReset) while vyre contexts use it; destroy the vyre context and create a "
           "new one"),
    VYRE_R(710, CUDA_ERROR_ASSERT, DEVICE_FAULT, "a device-side assert failed in a kernel",
           kFixDeviceFault),
    VYRE_R(711, CUDA_ERROR_TOO_MANY_PEERS, DRIVER_ERROR,
           "the peer-access hardware resources are exhausted", kFixUnexpected),
    VYRE_R(712, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, INVALID_ARGUMENT,
           "the host memory range is already registered with CUDA",
           "register a range only once: unregister it where it was registered (other code in "
           "the process may have done so with cudaHostRegister), or use it without registering "
           "it again"),
    VYRE_R(713, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, INVALID_STATE,
           "the host memory range is not registered with CUDA",
           "do not unregister the range elsewhere (cudaHostUnregister) while vyre-cuda holds it; "
           "unregister it with vyre_host_unregister only"),
    VYRE_R(714, CUDA_ERROR_HARDWARE_STACK_ERROR, DEVICE_FAULT,
           "a kernel corrupted or overflowed its stack", kFixDeviceFault),
    VYRE_R(715, CUDA_ERROR_ILLEGAL_INSTRUCTION, DEVICE_FAULT,
           "a kernel executed an illegal instruction", kFixDeviceFault),
    VYRE_R(716, CUDA_ERROR_MISALIGNED_ADDRESS, DEVICE_FAULT,
           "a kernel loaded or stored at a misaligned address", kFixDeviceFault),
    VYRE_R(717, CUDA_ERROR_INVALID_ADDRESS_SPACE, DEVICE_FAULT,
           "a kernel used an address outside the address space its instruction allows",
           kFixDeviceFault),
    VYRE_R(718, CUDA_ERROR_INVALID_PC, DEVICE_FAULT, "a kernel's program counter wrapped",
           kFixDeviceFault),
    VYRE_R(719, CUDA_ERROR_LAUNCH_FAILED, DEVICE_FAULT,
           "an exception occurred on the device while a kernel ran", kFixDeviceFault),
    VYRE_R(720, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, LIMIT_EXCEEDED,
           "the cooperative grid has more blocks than can be co-resident",
           "launch at most as many blocks as the device holds at once (a grid-stride loop over "
           "the data)"),
    VYRE_R(721, CUDA_ERROR_TENSOR_MEMORY_LEAK, DEVICE_FAULT,
           "a kernel exited without freeing its tensor memory", kFixDeviceFault),
    VYRE_R(800, CUDA_ERROR_NOT_PERMITTED, DRIVER_ERROR,
           "the operation is not permitted here",
           "run where the driver permits the operation (not under a restricted MPS client or "
           "container setting); if it should be, report this message as a vyre-cuda bug"),
    VYRE_R(801, CUDA_ERROR_NOT_SUPPORTED, DRIVER_ERROR,
           "the operation is not supported on this system or device",
           "do without the feature that needs it on this device (for example "
           "VYRE_DISPATCH_FLAG_COOPERATIVE, or vyre_host_register), or use a device that "
           "supports it"),
    VYRE_R(802, CUDA_ERROR_SYSTEM_NOT_READY, NO_DEVICE,
           "the system is not ready for CUDA work (a daemon it needs is not running)",
           "start the services the system needs (on NVSwitch systems nvidia-fabricmanager), "
           "check nvidia-smi, then retry"),
    VYRE_R(803, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, NO_DRIVER,
           "the CUDA driver library (libcuda.so.1) and the NVIDIA kernel module are different "
           "versions",
           "make them match: reboot (or reload the nvidia kernel module) after a driver update, "
           "and in a container use the libcuda.so.1 of the host's driver (cat "
           "/proc/driver/nvidia/version shows the kernel module's version)"),
    VYRE_R(804, CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, NO_DEVICE,
           "the forward-compatibility driver in use does not support this device",
           "use the system's NVIDIA driver instead of the cuda-compat libcuda.so.1 (remove the "
           "compat directory from LD_LIBRARY_PATH), or make only supported devices visible "
           "(CUDA_VISIBLE_DEVICES)"),
    VYRE_R(805, CUDA_ERROR_MPS_CONNECTION_FAILED, NO_DEVICE,
           "the MPS client could not connect to the MPS control daemon or server", kFixMps),
    VYRE_R(806, CUDA_ERROR_MPS_RPC_FAILURE, DRIVER_ERROR,
           "a call between the MPS client and server failed",
           "check the MPS server's log (/var/log/nvidia-mps), then destroy the context and "
           "create a new one"),
    VYRE_R(807, CUDA_ERROR_MPS_SERVER_NOT_READY, NO_DEVICE,
           "the MPS server is not ready for new clients", kFixMps),
    VYRE_R(808, CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, NO_DEVICE,
           "MPS has no resources for another client", kFixMps),
    VYRE_R(809, CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, NO_DEVICE,
           "MPS has no resources for another device connection", kFixMps),
    VYRE_R(810, CUDA_ERROR_MPS_CLIENT_TERMINATED, DRIVER_ERROR,
           "the MPS server terminated this client",
           "restart the process (MPS accepts no more work from it), and check the MPS server's "
           "log for the fault that made it terminate clients"),
    VYRE_R(811, CUDA_ERROR_CDP_NOT_SUPPORTED, COMPILE_FAILED,
           "the code uses dynamic parallelism, which this configuration (e.g. MPS) does not "
           "support",
           "launch the child kernels from the host instead, or run without MPS"),
    VYRE_R(812, CUDA_ERROR_CDP_VERSION_MISMATCH, COMPILE_FAILED,
           "the module mixes incompatible versions of dynamic parallelism",
           "build all of the module's code with one CUDA toolkit"),
    VYRE_R(900, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, DRIVER_ERROR,
           "the operation is not permitted while a stream is capturing", kFixCapture),
    VYRE_R(901, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, DRIVER_ERROR,
           "the stream capture was invalidated by an earlier error", kFixCapture),
    VYRE_R(902, CUDA_ERROR_STREAM_CAPTURE_MERGE, DRIVER_ERROR,
           "the operation would merge two independent captures", kFixCapture),
    VYRE_R(903, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, DRIVER_ERROR,
           "the capture was not begun in this stream", kFixCapture),
    VYRE_R(904, CUDA_ERROR_STREAM_CAPTURE_UNJOINED, DRIVER_ERROR,
           "the capture forked a stream that was not joined", kFixCapture),
    VYRE_R(905, CUDA_ERROR_STREAM_CAPTURE_ISOLATION, DRIVER_ERROR,
           "a dependency would cross the capture's boundary", kFixCapture),
    VYRE_R(906, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, DRIVER_ERROR,
           "the legacy stream would depend on a capturing stream", kFixCapture),
    VYRE_R(907, CUDA_ERROR_CAPTURED_EVENT, DRIVER_ERROR,
           "the event was last recorded in a capturing stream", kFixCapture),
    VYRE_R(908, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, DRIVER_ERROR,
           "a thread-local capture was ended from another thread", kFixCapture),
    VYRE_R(909, CUDA_ERROR_TIMEOUT, DRIVER_ERROR, "a driver wait with a timeout timed out",
           kFixUnexpected),
    VYRE_R(910, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, DRIVER_ERROR,
           "the driver refused to update the executable graph in place",
           "record the graph again (vyre_graph_record or vyre_sequence_record) with the new "
           "shape"),
    VYRE_R(911, CUDA_ERROR_EXTERNAL_DEVICE, DEVICE_FAULT,
           "a device outside CUDA signalled an error for data the GPU was to consume",
           kFixDeviceFault),
    VYRE_R(912, CUDA_ERROR_INVALID_CLUSTER_SIZE, LIMIT_EXCEEDED,
           "the launch does not fit the kernel's thread-block cluster size",
           "make the grid a multiple of the kernel's cluster dimensions (__cluster_dims__), or "
           "build the kernel without a cluster size"),
    VYRE_R(913, CUDA_ERROR_FUNCTION_NOT_LOADED, DRIVER_ERROR,
           "the kernel function is not loaded", kFixUnexpected),
    VYRE_R(914, CUDA_ERROR_INVALID_RESOURCE_TYPE, DRIVER_ERROR,
           "a resource passed to the call has the wrong type", kFixUnexpected),
    VYRE_R(915, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, DRIVER_ERROR,
           "the resources passed to the call are insufficient or do not apply", kFixUnexpected),
    VYRE_R(916, CUDA_ERROR_KEY_ROTATION, DRIVER_ERROR,
           "a confidential-computing key rotation failed",
           "destroy the context and create a new one; if it recurs, check the "
           "confidential-computing setup (nvidia-smi conf-compute)"),
    VYRE_R(999, CUDA_ERROR_UNKNOWN, DRIVER_ERROR, "the driver reports an unknown error",
           "retry; if it recurs, check the device (nvidia-smi, Xid errors in the kernel log), "
           "destroy the context and create a new one"),
};

#undef VYRE_R

}  // namespace

absl::Span<const CuResultInfo> CuResultTable() { return kTable; }

const CuResultInfo* FindCuResult(CUresult result) {
  const int32_t code = static_cast<int32_t>(result);
  for (const CuResultInfo& row : kTable) {
    if (row.code == code) return &row;
  }
  return nullptr;
}

vyre_status StatusForCuResult(CUresult result) {
  // Device faults: the context takes no more work until it is reset.
  if (IsStickyResult(result)) return VYRE_STATUS_DEVICE_FAULT;
  const CuResultInfo* row = FindCuResult(result);
  return row != nullptr ? row->status : VYRE_STATUS_DRIVER_ERROR;
}

const char* DefaultFixFor(CUresult result) {
  const CuResultInfo* row = FindCuResult(result);
  if (row != nullptr) return row->fix;
  return "this result is newer than the CUDA 13.0 headers vyre-cuda knows: look it up in your "
         "driver's cuda.h, and report it so vyre-cuda can name it";
}

const char* CuResultName(CUresult result) {
  if (const CuResultInfo* row = FindCuResult(result)) return row->name;
  const char* name = nullptr;
  if (Api().cuGetErrorName != nullptr && Api().cuGetErrorName(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  thread_local char unknown[32];
  std::snprintf(unknown, sizeof unknown, "CUresult %d", static_cast<int>(result));
  return unknown;
}

const char* CuResultDescription(CUresult result) {
  const char* description = nullptr;
  if (Api().cuGetErrorString != nullptr &&
      Api().cuGetErrorString(result, &description) == CUDA_SUCCESS && description != nullptr) {
    return description;
  }
  if (const CuResultInfo* row = FindCuResult(result)) return row->cause;
  return "no description";
}

absl::Status CuError(CUresult result, absl::string_view what, absl::string_view call,
                     absl::string_view fix) {
  const char* description = CuResultDescription(result);
  vyre_status status = StatusForCuResult(result);
  std::string refusal;
  if (result == CUDA_ERROR_NOT_SUPPORTED && IsLaunchCall(call)) {
    // The tests' fake driver refuses a kernel it does not run; on any other
    // driver (or for an injected result) no kernel name comes back.
    const std::string kernel = TakeFakeDriverRefusedKernel();
    if (!kernel.empty()) {
      refusal = absl::StrCat("the fake CUDA driver does not run kernel '", kernel, "'");
      description = refusal.c_str();
      fix = absl::StartsWith(kernel, "vyre_eg_") ? kFixFakeDriverEgraph : kFixFakeDriverKernel;
    }
  }
  std::string fault_fix;
  if (IsStickyResult(result)) {
    // The caller's Fix is about its own call; after a fault only one helps.
    fault_fix = absl::StrCat(DeviceFaultFix(RecordFaultOnCurrentContext(result)),
                             ", which CUDA leaves refusing all work after a fault (to find a "
                             "kernel's bad access, run it under compute-sanitizer)");
    fix = fault_fix;
  }
  std::string message = absl::StrCat(what, ": ", call, " returned ", CuResultName(result), " (",
                                     description, "). Fix: ",
                                     fix.empty() ? DefaultFixFor(result) : fix, ".");
  return MakeError(status, std::move(message), static_cast<int32_t>(result));
}

}  // namespace vyre::driver
