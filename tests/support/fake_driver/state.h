// The fake driver's shared state: the device it describes, the objects
// behind the opaque handles, and the checks and helpers the entry points of
// every file here share (each declared under the file that defines it).
#ifndef VYRE_TESTS_SUPPORT_FAKE_DRIVER_STATE_H_
#define VYRE_TESTS_SUPPORT_FAKE_DRIVER_STATE_H_

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda_control.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Device description
// ---------------------------------------------------------------------------

constexpr const char* kDeviceName = "Fake CUDA Device";
constexpr int kMultiprocessors = 132;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxBlockDim[3] = {1024, 1024, 64};
constexpr int kMaxGridDim[3] = {2147483647, 65535, 65535};
constexpr int kSharedBytesPerBlock = 48 * 1024;
constexpr int kMaxThreadsPerMultiprocessor = 2048;
constexpr uint64_t kDefaultMemoryBytes = uint64_t{1} << 30;
constexpr size_t kDeviceAlignment = 256;
constexpr unsigned char kFreshMemoryPattern = 0xA5;  // never zero: zeroing must be explicit
constexpr auto kHoldLimit = std::chrono::seconds(5);

// FAKE_CUDA_DEVICES=<n> (1 to kMaxDevices, default 1) describes n identical
// devices, each with its own primary context; FAKE_CUDA_PEER_ACCESS=0 makes
// cuDeviceCanAccessPeer say no for every pair (the default says yes between
// different devices), so the engine's staged path runs.
constexpr int kMaxDevices = 4;

enum class Mode { kOk, kNoDevice, kOld, kStub };

// ---------------------------------------------------------------------------
// Objects behind the opaque handles
// ---------------------------------------------------------------------------

struct FakeContext {
  int device = 0;
};
struct FakeModule {
  std::vector<std::string> entries;
  uint64_t serial = 0;  // unique per load: graph nodes notice an unload and reload
  int static_shared_bytes = 0;  // of every kernel: PTX "fake-static-shared-bytes: <n>"
};
struct FakeFunction {
  FakeModule* module = nullptr;
  std::string name;
  int static_shared_bytes = 0;
  // Without the opt-in, static and dynamic shared memory share the 48 KiB.
  int max_dynamic_shared_bytes = kSharedBytesPerBlock;
};
struct LaunchShape {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
};

// One operation of a captured graph (CUgraphNode points at one of these).
enum class NodeOp { kCopyHtoD, kCopyDtoH, kCopyDtoD, kMemset, kKernel, kChildGraph, kConditional };
struct FakeGraph;
struct FakeGraphNode {
  NodeOp op = NodeOp::kKernel;
  // Copies and memsets.
  CUdeviceptr dst = 0;             // HtoD, DtoD, memset
  CUdeviceptr src = 0;             // DtoH, DtoD
  void* host_dst = nullptr;        // DtoH
  const void* host_src = nullptr;  // HtoD
  bool host_pinned = false;        // the host range was pinned memory at capture
  // Device of the context that enqueued a copy or memset (-1: not recorded),
  // whose memory (or a peer's it enabled) it may touch; cuMemcpyPeerAsync
  // copies (`peer`) may touch both of their contexts' devices.
  int device = -1;
  bool peer = false;
  size_t bytes = 0;
  uint32_t value = 0;              // memset: each element's value
  unsigned element_size = 1;       // memset: 1, 2 or 4 bytes (`bytes` is the total)
  // Kernels: the function is named by its module's load and its name.
  uint64_t module_serial = 0;
  std::string kernel;
  LaunchShape shape{};
  std::vector<unsigned char> args;  // packed like a CU_LAUNCH_PARAM_BUFFER_POINTER block
  CUfunction function = nullptr;      // the handle captured, as cuGraphKernelNodeGetParams gives it
  std::vector<void*> arg_pointers;    // kernelParams view of `args`, for the same call
  // kChildGraph: a copy of the child graph's nodes (graph_build.cc), taken
  // when the node is added. kConditional (WHILE only): its handle, and its
  // body graph while building (`body`), copied at instantiation (`nodes`).
  std::shared_ptr<const std::vector<FakeGraphNode>> nodes;
  CUgraphConditionalHandle handle = 0;
  FakeGraph* body = nullptr;
  CUgraph body_out[1] = {nullptr};  // what phGraph_out points at

  CUgraphNodeType type() const {
    if (op == NodeOp::kChildGraph) return CU_GRAPH_NODE_TYPE_GRAPH;
    if (op == NodeOp::kConditional) return CU_GRAPH_NODE_TYPE_CONDITIONAL;
    if (op == NodeOp::kKernel) return CU_GRAPH_NODE_TYPE_KERNEL;
    return op == NodeOp::kMemset ? CU_GRAPH_NODE_TYPE_MEMSET : CU_GRAPH_NODE_TYPE_MEMCPY;
  }
};
struct FakeGraph {
  std::vector<std::unique_ptr<FakeGraphNode>> nodes;  // in capture order
};
struct FakeGraphExec {
  FakeGraph* source = nullptr;  // null once the graph it came from is destroyed
  std::vector<FakeGraphNode> nodes;
  std::map<const FakeGraphNode*, size_t> index;  // original node -> its copy in `nodes`
};
struct FakeCapture {
  std::unique_ptr<FakeGraph> graph;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;  // the thread that began it
  bool invalidated = false;
};

struct FakeStream {
  unsigned flags = 0;
  int device = 0;  // of the context current at cuStreamCreate
  std::unique_ptr<FakeCapture> capture;  // set while capturing
  // The last cuStreamEndCapture ended an invalidated capture: one more
  // cuStreamEndCapture (the engine's check that the capture is off) answers
  // CUDA_ERROR_ILLEGAL_STATE without counting as misuse.
  bool ended_invalidated = false;
};
struct FakeEvent {
  unsigned flags = 0;
  int device = 0;  // of the context current at cuEventCreate
  bool recorded = false;
  uint64_t stream = 0;    // the stream of the last cuEventRecord (as an integer)
  bool captured = false;  // last recorded in a capturing stream
  std::chrono::steady_clock::time_point time;
};

// cuMemHostAlloc's addresses sit this far past a page boundary, like driver
// 580's, which sub-allocates small requests from pinned pools (512-byte
// aligned); pinned_allocations keys hold those addresses.
constexpr size_t kPinnedPoolOffset = 512;

struct State {
  std::mutex mu;
  std::condition_variable hold_changed;
  bool initialized = false;
  bool hold = false;
  int device_count = 1;       // FAKE_CUDA_DEVICES
  bool peer_capable = true;  // FAKE_CUDA_PEER_ACCESS (not "0")
  FakeContext primaries[kMaxDevices];
  int64_t primary_retains[kMaxDevices] = {};
  // cuCtxEnablePeerAccess: (device of the current context, peer device).
  std::set<std::pair<int, int>> peer_enabled;
  uint64_t capacity = kDefaultMemoryBytes;
  std::map<uintptr_t, size_t> device_allocations;  // base -> bytes
  std::map<uintptr_t, int> allocation_devices;     // base -> device it was allocated on
  uint64_t device_bytes = 0;
  std::map<uintptr_t, size_t> pinned_allocations;
  uint64_t pinned_bytes = 0;
  std::map<uintptr_t, size_t> registered;  // cuMemHostRegister: base -> bytes
  // IPC (ipc.cc). Exported allocations are remapped onto a POSIX shared
  // memory object (base -> its serial in the object's name); imports are
  // mappings of another process's object, also listed in device_allocations
  // so work may touch them (base -> the handle they came from, as bytes).
  std::map<uintptr_t, uint64_t> ipc_exports;
  std::map<uintptr_t, std::string> ipc_imports;
  uint64_t ipc_serial = 0;
  bool defer_copies = false;               // FAKE_CUDA_DEFER_COPIES=1 (or FAKE_CUDA_DEFER_ALL=1)
  bool defer_all = false;                  // FAKE_CUDA_DEFER_ALL=1: memsets and kernels too
  std::vector<FakeGraphNode> deferred;     // host<->device copies not yet run
  std::set<FakeModule*> modules;
  std::map<FakeFunction*, std::unique_ptr<FakeFunction>> functions;
  std::set<FakeStream*> streams;
  std::set<FakeEvent*> events;
  std::map<FakeGraph*, std::unique_ptr<FakeGraph>> graphs;  // handed over by cuStreamEndCapture
  std::set<FakeGraphNode*> graph_nodes;                     // the nodes of `graphs`
  std::map<FakeGraphExec*, std::unique_ptr<FakeGraphExec>> graph_execs;
  // Conditional handles (cuGraphConditionalHandleCreate): each one's default
  // and its value while a graph runs (set by the loop's control kernel).
  struct Conditional {
    unsigned default_value = 0;
    unsigned value = 0;
  };
  std::map<CUgraphConditionalHandle, Conditional> conditionals;
  CUgraphConditionalHandle next_conditional = 1;
  uint64_t module_serial = 0;
  CUresult armed_fault = CUDA_SUCCESS;  // fake_cuda_inject_*fault: the next launch faults
  bool armed_latent = false;            // ... showing only at the next non-enqueue call
  CUresult latent = CUDA_SUCCESS;       // a fault enqueues do not see yet
  CUresult sticky = CUDA_SUCCESS;       // set by a fault until cuDevicePrimaryCtxReset
  fake_cuda_stats stats{};
};

using Lock = std::unique_lock<std::mutex>;

// Calls that only enqueue work (copies, memsets, launches, event records,
// graph launches) pass kEnqueue: a latent fault lets them through (they then
// drop their work); any other call makes it sticky.
constexpr bool kEnqueue = true;

// --- state.cc ---------------------------------------------------------------

Mode CurrentMode();
CUresult EnvResult(const char* variable);
uint64_t MemoryCapacity();
State& S();
// The thread's current context; constant-initialised, so no TU needs a TLS
// init wrapper for it.
inline thread_local CUcontext current_context = nullptr;
CUresult Misuse(CUresult code, const char* format, ...) __attribute__((format(printf, 2, 3)));
CUresult RequireInit(const char* fn);
CUresult RequireContext(const char* fn, bool enqueue = false);
CUresult RequireDevice(CUdevice dev, const char* fn);
// The primary context of `device`, and the device of a primary context (-1
// for anything else).
CUcontext PrimaryOf(int device);
int DeviceOfContext(CUcontext context);
// The device of the current context (0 when none is current).
int CurrentDevice();
// The device that allocated the allocation holding `ptr` (-1: none).
int DeviceOfPointer(CUdeviceptr ptr);
// Memory of `owner` used by work of `device`: its own, or a peer's that
// `device` enabled access to.
bool DeviceMayAccess(int device, int owner);
// Work enqueued on a created stream must come from a context of the
// stream's device.
CUresult CheckStreamDevice(CUstream stream, const char* fn);
bool DeviceRangeValid(CUdeviceptr ptr, uint64_t bytes);
CUresult CheckDeviceRange(CUdeviceptr ptr, uint64_t bytes, const char* fn);
FakeEvent* FindEvent(CUevent event);
FakeFunction* FindFunction(CUfunction function);
void WaitWhileHeld(Lock& lock);

// --- stream_rules.cc --------------------------------------------------------

CUresult CheckStream(CUstream stream, const char* fn);
FakeStream* FindStream(CUstream stream);
bool IsLegacyStream(CUstream stream);
CUresult RejectImplicitCaptureDependency(CUstream stream, const char* fn);
CUresult StreamCapture(CUstream stream, const char* fn, FakeCapture** capture);
CUresult RejectOnCapturingStream(CUstream stream, const char* fn);
CUresult RejectUnsafeDuringCapture(const char* fn);

// --- memory.cc --------------------------------------------------------------

bool PinnedRangeValid(const void* ptr, uint64_t bytes);
// Device memory: page-aligned private mappings, so an export can remap one
// onto shared memory in place (ipc.cc). Release also ends its export.
void* MapDeviceMemory(size_t bytes);
void ReleaseDeviceMemory(uintptr_t base, size_t bytes);
size_t PageRounded(size_t bytes);

// --- ipc.cc -----------------------------------------------------------------

// Unlinks the shared memory object of an exported allocation (S().mu held).
void ForgetIpcExport(uintptr_t base);

// --- transfers.cc -----------------------------------------------------------

// Runs the copies FAKE_CUDA_DEFER_COPIES held back (S().mu held).
void FlushDeferred();
CUresult CheckTransfer(const FakeGraphNode& n, const char* fn);
void RunTransfer(const FakeGraphNode& n);

// --- capture.cc -------------------------------------------------------------

FakeGraph* FindGraph(CUgraph graph);

// --- graph_build.cc ---------------------------------------------------------

// A graph's nodes as an executable graph runs them (WHILE bodies copied in).
std::vector<FakeGraphNode> SnapshotGraph(const FakeGraph& g);
// Forgets the body graphs owned by `g`'s conditional nodes (cuGraphDestroy).
void DestroyOwnedGraphs(const FakeGraph& g);
FakeGraphExec* FindGraphExec(CUgraphExec exec);
FakeGraphNode* FindGraphNode(CUgraphNode node);

}  // namespace fake_driver

#endif  // VYRE_TESTS_SUPPORT_FAKE_DRIVER_STATE_H_
