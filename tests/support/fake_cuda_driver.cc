// A fake CUDA driver on host memory, so CI machines without a GPU can run the
// engine's contexts, buffers, programs, dispatch and error paths.
//
// The engine loads it through VYRE_CUDA_DRIVER_LIBRARY and resolves every
// entry point through cuGetProcAddress_v2, which maps the unversioned API
// names to the fake_* functions below. Device memory is malloc'd (device
// pointers are host addresses), streams are synchronous (every copy, memset
// and kernel runs at once), and the kernels named in docs/ENGINE_CONTRACT.md
// run on the host (vyre_test_add_u32, vyre_test_inc_u32, vyre_test_saxpy_f32,
// the library's vyre_selftest_add_u32, and vyre_test_probe_params, which
// records its arguments); launches of any other kernel do nothing. Modules
// may be PTX text (entries found after ".entry"), cubins (ELF FUNC symbols
// marked as CUDA entries) or fatbins holding either, uncompressed.
//
// Misuse the real driver would reject (no current context, pointers outside
// any allocation, unknown handles, double frees) is rejected here too, printed
// to stderr and counted in fake_cuda_stats.misuse_errors so tests can assert
// the engine never does it.
//
// Stream capture and graphs: cuStreamBeginCapture on a created stream turns
// its memcpys (HtoD, DtoH, DtoD), byte memsets and kernel launches into nodes
// of a linear graph instead of running them. Arguments are validated at
// capture exactly as for a live call; a kernel node copies the argument
// values of the test kernels above (other kernels keep none and do nothing);
// copies keep host pointers, read or written when the graph runs. A failed
// call on a capturing stream invalidates the capture, as do cuStreamSynchronize
// and cuStreamQuery on it, cuLaunchCooperativeKernel, cuGraphLaunch or
// cuGraphUpload into it and cuCtxSynchronize while anything captures. The
// capture modes restrict the "potentially unsafe" calls cuMemAlloc, cuMemFree,
// cuMemHostAlloc, cuMemFreeHost, cuModuleLoadDataEx, cuModuleUnload and
// cuStreamSynchronize: forbidden to a thread with a GLOBAL or THREAD_LOCAL
// capture of its own, and to every thread while some thread captures in
// GLOBAL mode (every thread's interaction mode is GLOBAL, there being no
// cuThreadExchangeStreamCaptureMode); such a call fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures.
// cuEventRecord on a capturing stream succeeds without a node; the event is
// then a "captured event" that cuEventQuery, cuEventSynchronize and
// cuEventElapsedTime reject (CUDA_ERROR_CAPTURED_EVENT) until recorded again
// outside capture. cuStreamEndCapture hands over the graph, or answers
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED with a NULL graph. A CUgraphNode is
// the captured node; cuGraphInstantiateWithFlags copies the nodes into the
// executable graph, whose kernel and memset nodes the cuGraphExec*SetParams
// calls update by naming the original node. cuGraphLaunch runs the nodes in
// order at once, re-validating every range (device ranges, and host ranges
// that were pinned at capture) as a live call would. Every violation above is
// misuse; the errors returned are those of the real driver.
//
// Device faults: fake_cuda_inject_fault(code) makes the next kernel launch
// (live, or a kernel node of a graph launch) fault. The launch itself returns
// success (the real fault is asynchronous) and runs nothing; from then on the
// device is sticky: every call that needs the context, and
// cuDevicePrimaryCtxRetain, returns `code` (cuCtxGetCurrent/SetCurrent,
// cuDevicePrimaryCtxRelease and the device queries still work), until
// cuDevicePrimaryCtxReset clears it and destroys every allocation, module,
// stream, event and graph still live, as the real reset does. A reset while
// a retain is held is counted as misuse: the engine must only reset a
// primary context none of its contexts holds.
// fake_cuda_inject_latent_fault(code) is the same, except that the fault
// shows later, as a real one usually does: calls that only enqueue work
// (copies, memsets, launches, event records, graph launches) still succeed
// (and drop their work) until the first other call (a synchronisation, a
// query, an allocation, ...), which returns `code` and makes it sticky.
//
// Test controls (fake_cuda_control.h): fake_cuda_get_stats, fake_cuda_set_hold,
// fake_cuda_inject_fault, fake_cuda_inject_latent_fault.
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
//   FAKE_CUDA_DEFER_COPIES=1  async host<->device copies run only when the
//                           host waits (a sync, query, free, or a call that
//                           must see the device's memory).
//   FAKE_CUDA_DEFER_ALL=1   the same for every async copy, memset and kernel
//                           launch (cooperative ones excepted), in enqueue
//                           order: a result read before the engine waits for
//                           it is wrong, and a test that checks it fails.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "fake_cuda_control.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

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

enum class Mode { kOk, kNoDevice, kOld, kStub };

Mode CurrentMode() {
  const char* mode = std::getenv("FAKE_CUDA_MODE");
  if (mode == nullptr || std::strcmp(mode, "") == 0 || std::strcmp(mode, "ok") == 0) {
    return Mode::kOk;
  }
  if (std::strcmp(mode, "no_device") == 0) return Mode::kNoDevice;
  if (std::strcmp(mode, "old") == 0) return Mode::kOld;
  if (std::strcmp(mode, "stub") == 0) return Mode::kStub;
  std::fprintf(stderr, "fake cuda: unknown FAKE_CUDA_MODE '%s', using 'ok'\n", mode);
  return Mode::kOk;
}

// FAKE_CUDA_INIT_RESULT, FAKE_CUDA_VERSION_RESULT, FAKE_CUDA_COUNT_RESULT:
// the CUresult cuInit, cuDriverGetVersion or cuDeviceGetCount returns
// instead of succeeding (unset or 0: they work).
CUresult EnvResult(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return CUDA_SUCCESS;
  return static_cast<CUresult>(std::strtol(text, nullptr, 0));
}

uint64_t MemoryCapacity() {
  const char* text = std::getenv("FAKE_CUDA_MEMORY_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultMemoryBytes;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 0);
  if (end == text || *end != '\0') {
    std::fprintf(stderr, "fake cuda: FAKE_CUDA_MEMORY_BYTES='%s' is not a number\n", text);
    return kDefaultMemoryBytes;
  }
  return value;
}

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
enum class NodeOp { kCopyHtoD, kCopyDtoH, kCopyDtoD, kMemset, kKernel };
struct FakeGraphNode {
  NodeOp op = NodeOp::kKernel;
  // Copies and memsets.
  CUdeviceptr dst = 0;             // HtoD, DtoD, memset
  CUdeviceptr src = 0;             // DtoH, DtoD
  void* host_dst = nullptr;        // DtoH
  const void* host_src = nullptr;  // HtoD
  bool host_pinned = false;        // the host range was pinned memory at capture
  size_t bytes = 0;
  unsigned char value = 0;         // memset
  // Kernels: the function is named by its module's load and its name.
  uint64_t module_serial = 0;
  std::string kernel;
  LaunchShape shape{};
  std::vector<unsigned char> args;  // packed like a CU_LAUNCH_PARAM_BUFFER_POINTER block
  CUfunction function = nullptr;      // the handle captured, as cuGraphKernelNodeGetParams gives it
  std::vector<void*> arg_pointers;    // kernelParams view of `args`, for the same call

  CUgraphNodeType type() const {
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
  std::unique_ptr<FakeCapture> capture;  // set while capturing
};
struct FakeEvent {
  unsigned flags = 0;
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
  FakeContext primary;
  int64_t primary_retains = 0;
  uint64_t capacity = kDefaultMemoryBytes;
  std::map<uintptr_t, size_t> device_allocations;  // base -> bytes
  uint64_t device_bytes = 0;
  std::map<uintptr_t, size_t> pinned_allocations;
  uint64_t pinned_bytes = 0;
  std::map<uintptr_t, size_t> registered;  // cuMemHostRegister: base -> bytes
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
  uint64_t module_serial = 0;
  CUresult armed_fault = CUDA_SUCCESS;  // fake_cuda_inject_*fault: the next launch faults
  bool armed_latent = false;            // ... showing only at the next non-enqueue call
  CUresult latent = CUDA_SUCCESS;       // a fault enqueues do not see yet
  CUresult sticky = CUDA_SUCCESS;       // set by a fault until cuDevicePrimaryCtxReset
  fake_cuda_stats stats{};
};

State& S() {
  static State* state = new State();  // never destroyed: engine teardown may run late
  return *state;
}

thread_local CUcontext current_context = nullptr;

using Lock = std::unique_lock<std::mutex>;

// Runs the copies FAKE_CUDA_DEFER_COPIES held back (S().mu held).
void FlushDeferred();

// Reports a call the real driver would reject and the engine should never make.
CUresult Misuse(CUresult code, const char* format, ...) __attribute__((format(printf, 2, 3)));
CUresult Misuse(CUresult code, const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  std::fprintf(stderr, "fake cuda: MISUSE (CUresult %d): %s\n", static_cast<int>(code), text);
  ++S().stats.misuse_errors;
  return code;
}

// Every call but version/error-name queries needs cuInit first.
CUresult RequireInit(const char* fn) {
  if (!S().initialized) return Misuse(CUDA_ERROR_NOT_INITIALIZED, "%s before cuInit", fn);
  return CUDA_SUCCESS;
}

// Calls that only enqueue work (copies, memsets, launches, event records,
// graph launches) pass kEnqueue: a latent fault lets them through (they then
// drop their work); any other call makes it sticky.
constexpr bool kEnqueue = true;

// Calls that act on device state need the primary context current.
CUresult RequireContext(const char* fn, bool enqueue = false) {
  CUresult init = RequireInit(fn);
  if (init != CUDA_SUCCESS) return init;
  if (current_context == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s with no current context on this thread", fn);
  }
  if (current_context != reinterpret_cast<CUcontext>(&S().primary) || S().primary_retains <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s with a current context that is not retained",
                  fn);
  }
  // After a fault the context refuses all work until it is reset. A latent
  // fault shows at the first call that is not an enqueue.
  State& s = S();
  if (s.latent != CUDA_SUCCESS && !enqueue) {
    s.sticky = s.latent;
    s.latent = CUDA_SUCCESS;
  }
  return s.sticky;
}

CUresult RequireDevice(CUdevice dev, const char* fn) {
  if (dev != 0) return Misuse(CUDA_ERROR_INVALID_DEVICE, "%s on device %d", fn, dev);
  return CUDA_SUCCESS;
}

// True when [ptr, ptr + bytes) lies inside one live device allocation.
bool DeviceRangeValid(CUdeviceptr ptr, uint64_t bytes) {
  const auto& allocs = S().device_allocations;
  auto it = allocs.upper_bound(static_cast<uintptr_t>(ptr));
  if (it == allocs.begin()) return false;
  --it;
  uint64_t offset = ptr - it->first;
  return offset <= it->second && bytes <= it->second - offset;
}

CUresult CheckDeviceRange(CUdeviceptr ptr, uint64_t bytes, const char* fn) {
  if (!DeviceRangeValid(ptr, bytes)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "%s: device range [0x%llx, +%llu) is not inside a live allocation", fn,
                  static_cast<unsigned long long>(ptr), static_cast<unsigned long long>(bytes));
  }
  return CUDA_SUCCESS;
}

CUresult CheckStream(CUstream stream, const char* fn) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    return CUDA_SUCCESS;
  }
  if (S().streams.count(reinterpret_cast<FakeStream*>(stream)) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown stream %p", fn,
                  static_cast<void*>(stream));
  }
  return CUDA_SUCCESS;
}

// The object behind a created stream; null for the NULL, legacy and
// per-thread streams (and for unknown handles, which CheckStream rejects).
FakeStream* FindStream(CUstream stream) {
  auto* s = reinterpret_cast<FakeStream*>(stream);
  return S().streams.count(s) ? s : nullptr;
}

bool IsLegacyStream(CUstream stream) { return stream == nullptr || stream == CU_STREAM_LEGACY; }

// Work on the legacy stream waits for every blocking stream; a blocking stream
// that captures would thereby join the capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
// and that capture is invalidated.
CUresult RejectImplicitCaptureDependency(CUstream stream, const char* fn) {
  if (!IsLegacyStream(stream)) return CUDA_SUCCESS;
  bool conflict = false;
  for (FakeStream* s : S().streams) {
    if (s->capture && (s->flags & CU_STREAM_NON_BLOCKING) == 0) {
      s->capture->invalidated = true;
      conflict = true;
    }
  }
  if (!conflict) return CUDA_SUCCESS;
  return Misuse(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                "%s on the legacy stream while a blocking stream captures", fn);
}

// Where work enqueued on `stream` goes: *capture is the capture it joins, or
// null to run it now. A capture already invalidated takes no more work.
CUresult StreamCapture(CUstream stream, const char* fn, FakeCapture** capture) {
  *capture = nullptr;
  if (CUresult r = RejectImplicitCaptureDependency(stream, fn)) return r;
  FakeStream* s = FindStream(stream);
  if (s == nullptr || !s->capture) return CUDA_SUCCESS;
  if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *capture = s->capture.get();
  return CUDA_SUCCESS;
}

// A call that capture does not support, made on a capturing stream: fails and
// invalidates the capture.
CUresult RejectOnCapturingStream(CUstream stream, const char* fn) {
  FakeStream* s = FindStream(stream);
  if (s == nullptr || !s->capture) return CUDA_SUCCESS;
  s->capture->invalidated = true;
  return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s on a capturing stream", fn);
}

// "Potentially unsafe" calls (allocation, freeing, module loading, stream
// synchronisation) are forbidden to a thread with a capture of its own not
// begun in RELAXED mode, and, since every thread's interaction mode is the
// default GLOBAL, to all threads while any capture runs in GLOBAL mode. The
// call fails and invalidates those captures.
CUresult RejectUnsafeDuringCapture(const char* fn) {
  const std::thread::id self = std::this_thread::get_id();
  bool conflict = false;
  for (FakeStream* s : S().streams) {
    FakeCapture* c = s->capture.get();
    if (c == nullptr) continue;
    bool own = c->thread == self && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    if (own || c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
      c->invalidated = true;
      conflict = true;
    }
  }
  if (!conflict) return CUDA_SUCCESS;
  return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "%s during a GLOBAL or THREAD_LOCAL stream capture", fn);
}

FakeEvent* FindEvent(CUevent event) {
  auto* e = reinterpret_cast<FakeEvent*>(event);
  return S().events.count(e) ? e : nullptr;
}

FakeFunction* FindFunction(CUfunction function) {
  auto it = S().functions.find(reinterpret_cast<FakeFunction*>(function));
  return it == S().functions.end() ? nullptr : it->second.get();
}

// Blocks while fake_cuda_set_hold(1) is in force (bounded, counted on expiry).
void WaitWhileHeld(Lock& lock) {
  State& s = S();
  if (!s.hold) return;
  if (!s.hold_changed.wait_for(lock, kHoldLimit, [&] { return !s.hold; })) {
    std::fprintf(stderr, "fake cuda: a synchronisation waited %llds for the hold; giving up\n",
                 static_cast<long long>(kHoldLimit.count()));
    ++s.stats.hold_timeouts;
  }
}

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
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = EnvResult("FAKE_CUDA_VERSION_RESULT")) return r;
  *version = CurrentMode() == Mode::kOld ? 11080 : 13000;
  return CUDA_SUCCESS;
}

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
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

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
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDeviceGet")) return r;
  if (device == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet: NULL device");
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
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

// ---------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxRetain")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxRetain")) return r;
  if (context == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain: NULL");
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  ++S().primary_retains;
  *context = reinterpret_cast<CUcontext>(&S().primary);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxRelease")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxRelease")) return r;
  if (S().primary_retains <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease without a retain");
  }
  --S().primary_retains;
  return CUDA_SUCCESS;
}

// Destroys every object of the primary context and clears a fault; the
// retain count is left alone (callers still release their retains).
CUresult fake_cuDevicePrimaryCtxReset(CUdevice dev) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuDevicePrimaryCtxReset")) return r;
  if (CUresult r = RequireDevice(dev, "cuDevicePrimaryCtxReset")) return r;
  State& s = S();
  if (s.primary_retains > 0) {
    // Legal for the driver, but it destroys what the holders still use.
    Misuse(CUDA_SUCCESS, "cuDevicePrimaryCtxReset while %lld retain(s) are held",
           static_cast<long long>(s.primary_retains));
  }
  uint64_t reclaimed = 0;
  for (auto& [base, bytes] : s.device_allocations) std::free(reinterpret_cast<void*>(base));
  reclaimed += s.device_allocations.size();
  s.device_allocations.clear();
  s.device_bytes = 0;
  for (auto& [base, bytes] : s.pinned_allocations) {
    std::free(reinterpret_cast<unsigned char*>(base) - kPinnedPoolOffset);
  }
  reclaimed += s.pinned_allocations.size();
  s.pinned_allocations.clear();
  s.pinned_bytes = 0;
  for (FakeModule* m : s.modules) delete m;
  reclaimed += s.modules.size();
  s.modules.clear();
  s.functions.clear();
  for (FakeStream* st : s.streams) delete st;
  reclaimed += s.streams.size();
  s.streams.clear();
  for (FakeEvent* e : s.events) delete e;
  reclaimed += s.events.size();
  s.events.clear();
  reclaimed += s.graphs.size() + s.graph_execs.size();
  s.graph_nodes.clear();
  s.graphs.clear();
  s.graph_execs.clear();
  s.deferred.clear();
  s.stats.registered_ranges_live = 0;
  s.stats.registered_bytes_live = 0;
  reclaimed += s.registered.size();
  s.registered.clear();
  s.sticky = CUDA_SUCCESS;
  s.latent = CUDA_SUCCESS;
  ++s.stats.primary_context_resets;
  s.stats.objects_reclaimed_by_reset += reclaimed;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext* context) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuCtxGetCurrent")) return r;
  if (context == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuCtxGetCurrent: NULL");
  *context = current_context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSetCurrent(CUcontext context) {
  Lock lock(S().mu);
  if (CUresult r = RequireInit("cuCtxSetCurrent")) return r;
  if (context != nullptr && context != reinterpret_cast<CUcontext>(&S().primary)) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent: unknown context %p",
                  static_cast<void*>(context));
  }
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize() {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuCtxSynchronize")) return r;
  // It would wait for every stream, capturing ones included: whatever the mode.
  bool capturing = false;
  for (FakeStream* s : S().streams) {
    if (s->capture) {
      s->capture->invalidated = true;
      capturing = true;
    }
  }
  if (capturing) {
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuCtxSynchronize while a stream captures");
  }
  WaitWhileHeld(lock);
  FlushDeferred();
  return CUDA_SUCCESS;
}

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
  void* memory = nullptr;
  size_t rounded = (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
  if (posix_memalign(&memory, kDeviceAlignment, rounded) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, kFreshMemoryPattern, rounded);
  s.device_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
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
  auto it = s.device_allocations.find(static_cast<uintptr_t>(ptr));
  if (it == s.device_allocations.end()) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuMemFree(0x%llx): not a live allocation",
                  static_cast<unsigned long long>(ptr));
  }
  s.device_bytes -= it->second;
  std::free(reinterpret_cast<void*>(it->first));
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

// True when [ptr, ptr + bytes) lies inside one live pinned host allocation.
bool RangeInMap(const std::map<uintptr_t, size_t>& ranges, const void* ptr, uint64_t bytes) {
  auto it = ranges.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == ranges.begin()) return false;
  --it;
  uint64_t offset = reinterpret_cast<uintptr_t>(ptr) - it->first;
  return offset <= it->second && bytes <= it->second - offset;
}

// True when [ptr, ptr + bytes) lies inside one live pinned host allocation or
// one cuMemHostRegister range.
bool PinnedRangeValid(const void* ptr, uint64_t bytes) {
  return RangeInMap(S().pinned_allocations, ptr, bytes) || RangeInMap(S().registered, ptr, bytes);
}

bool RangesOverlap(const std::map<uintptr_t, size_t>& ranges, uintptr_t begin, uint64_t bytes) {
  auto after = ranges.lower_bound(begin);
  if (after != ranges.end() && after->first - begin < bytes) return true;
  if (after == ranges.begin()) return false;
  --after;
  return begin - after->first < after->second;
}

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

// As the real driver documents: a pointer CUDA does not know is no error;
// its attributes read as "none" (memory type 0, a NULL context, range 0; the
// ordinal -2 here). Device allocations are CU_MEMORYTYPE_DEVICE, pinned allocations
// and registered ranges CU_MEMORYTYPE_HOST, all on device 0 in the primary
// context. Attributes this fake does not model are misuse.
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
  if (FindRange(s.device_allocations, address, &base, &bytes)) {
    type = CU_MEMORYTYPE_DEVICE;
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
            known ? reinterpret_cast<CUcontext>(&s.primary) : nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = known ? 0 : -2;
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

// Validates a copy or memset against live memory: when it is called (run at
// once or captured) and again every time a graph holding it runs.
CUresult CheckTransfer(const FakeGraphNode& n, const char* fn) {
  switch (n.op) {
    case NodeOp::kCopyHtoD:
      if (CUresult r = CheckDeviceRange(n.dst, n.bytes, fn)) return r;
      if (n.bytes > 0 && n.host_src == nullptr) {
        return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL src", fn);
      }
      break;
    case NodeOp::kCopyDtoH:
      if (CUresult r = CheckDeviceRange(n.src, n.bytes, fn)) return r;
      if (n.bytes > 0 && n.host_dst == nullptr) {
        return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL dst", fn);
      }
      break;
    case NodeOp::kCopyDtoD:
      if (CUresult r = CheckDeviceRange(n.dst, n.bytes, fn)) return r;
      if (CUresult r = CheckDeviceRange(n.src, n.bytes, fn)) return r;
      break;
    case NodeOp::kMemset:
      if (CUresult r = CheckDeviceRange(n.dst, n.bytes, fn)) return r;
      break;
    case NodeOp::kKernel:
      break;
  }
  if (n.host_pinned) {
    const void* host = n.op == NodeOp::kCopyHtoD ? n.host_src : n.host_dst;
    if (!PinnedRangeValid(host, n.bytes)) {
      return Misuse(CUDA_ERROR_INVALID_VALUE,
                    "%s: pinned host range [%p, +%zu) of a graph's copy is no longer inside a "
                    "live pinned allocation",
                    fn, host, n.bytes);
    }
  }
  return CUDA_SUCCESS;
}

// Performs a validated copy or memset and counts it.
void RunTransfer(const FakeGraphNode& n) {
  fake_cuda_stats& st = S().stats;
  void* dst = reinterpret_cast<void*>(static_cast<uintptr_t>(n.dst));
  const void* src = reinterpret_cast<const void*>(static_cast<uintptr_t>(n.src));
  switch (n.op) {
    case NodeOp::kCopyHtoD:
      if (n.bytes > 0) std::memcpy(dst, n.host_src, n.bytes);
      ++st.memcpy_htod;
      break;
    case NodeOp::kCopyDtoH:
      if (n.bytes > 0) std::memcpy(n.host_dst, src, n.bytes);
      ++st.memcpy_dtoh;
      break;
    case NodeOp::kCopyDtoD:
      if (n.bytes > 0) std::memmove(dst, src, n.bytes);
      ++st.memcpy_dtod;
      break;
    case NodeOp::kMemset:
      if (n.bytes > 0) std::memset(dst, n.value, n.bytes);
      ++st.memsets;
      break;
    case NodeOp::kKernel:
      break;
  }
}

CUresult RunKernelNode(const FakeGraphNode& n);

void FlushDeferred() {
  State& s = S();
  // Swapped out first: a kernel that runs may not flush into this list.
  std::vector<FakeGraphNode> queued;
  queued.swap(s.deferred);
  for (const FakeGraphNode& n : queued) {
    if (n.op == NodeOp::kKernel) {
      // Validated when enqueued; what fails now (its module unloaded, its
      // memory freed before the host waited) is an engine bug.
      if (CUresult r = RunKernelNode(n)) {
        Misuse(CUDA_SUCCESS, "the deferred kernel %s failed with CUresult %d when the host "
               "waited", n.kernel.c_str(), static_cast<int>(r));
      }
      ++s.stats.deferred_kernels;
      continue;
    }
    // Still checked: memory freed before the host waited is an engine bug.
    if (CheckTransfer(n, "a deferred copy") != CUDA_SUCCESS) continue;
    RunTransfer(n);
    ++s.stats.deferred_copies;
  }
}

// A copy or memset enqueued on `stream`: runs at once, or becomes a node of
// the stream's capture. A failed call invalidates the capture.
CUresult SubmitTransfer(CUstream stream, FakeGraphNode node, const char* fn) {
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, fn, &capture)) return r;
  if (CUresult r = CheckTransfer(node, fn)) {
    if (capture != nullptr) capture->invalidated = true;
    return r;
  }
  if (capture == nullptr) {
    if (S().defer_all ||
        (S().defer_copies && (node.op == NodeOp::kCopyHtoD || node.op == NodeOp::kCopyDtoH))) {
      S().deferred.push_back(std::move(node));
      return CUDA_SUCCESS;
    }
    FlushDeferred();
    RunTransfer(node);
    return CUDA_SUCCESS;
  }
  if (node.op == NodeOp::kCopyHtoD) node.host_pinned = PinnedRangeValid(node.host_src, node.bytes);
  if (node.op == NodeOp::kCopyDtoH) node.host_pinned = PinnedRangeValid(node.host_dst, node.bytes);
  capture->graph->nodes.push_back(std::make_unique<FakeGraphNode>(std::move(node)));
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyHtoDAsync", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemcpyHtoDAsync")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kCopyHtoD;
  node.dst = dst;
  node.host_src = src;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemcpyHtoDAsync");
}

CUresult fake_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyDtoHAsync", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemcpyDtoHAsync")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kCopyDtoH;
  node.src = src;
  node.host_dst = dst;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemcpyDtoHAsync");
}

CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyDtoDAsync", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemcpyDtoDAsync")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kCopyDtoD;
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemcpyDtoDAsync");
}

CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemsetD8Async", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemsetD8Async")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kMemset;
  node.dst = dst;
  node.value = value;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemsetD8Async");
}

// 32-bit fills (the engine uses them outside capture only: a capturing stream
// refuses them here, which the engine must never trigger).
CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                               CUstream stream) {
  static constexpr const char* fn = "cuMemsetD32Async";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn, kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, fn)) return r;
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, fn, &capture)) return r;
  if (capture != nullptr) {
    capture->invalidated = true;
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s: captured 32-bit fills are not faked", fn);
  }
  if (dst % 4 != 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: destination not 4-byte aligned", fn);
  if (CUresult r = CheckDeviceRange(dst, uint64_t{count} * 4, fn)) return r;
  uint32_t* p = reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(dst));
  std::fill(p, p + count, value);
  ++S().stats.memsets;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Modules and functions
// ---------------------------------------------------------------------------

// Collects the names after every ".entry"; a name ends at '(' or whitespace.
std::vector<std::string> PtxEntryNames(const char* text, size_t length) {
  std::vector<std::string> names;
  static constexpr char kKeyword[] = ".entry";
  const std::string_view ptx(text, length);
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (size_t at = ptx.find(kKeyword); at != std::string_view::npos;
       at = ptx.find(kKeyword, at)) {
    size_t p = at + sizeof(kKeyword) - 1;
    at = p;
    if (p >= ptx.size() || !is_space(ptx[p])) continue;  // e.g. ".entryfoo"
    while (p < ptx.size() && is_space(ptx[p])) ++p;
    size_t begin = p;
    while (p < ptx.size() && ptx[p] != '(' && !is_space(ptx[p])) ++p;
    if (p > begin) names.emplace_back(ptx.substr(begin, p - begin));
  }
  return names;
}

template <typename T>
T ReadAt(const unsigned char* base, uint64_t offset) {
  T value;
  std::memcpy(&value, base + offset, sizeof(T));
  return value;
}

// Compares byte by byte, stopping at the first difference, so a short
// NUL-terminated PTX string is never read past its end.
bool StartsWith(const unsigned char* image, const unsigned char* magic, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    if (image[i] != magic[i]) return false;
  }
  return true;
}

bool IsElf(const unsigned char* image) {
  static constexpr unsigned char kElfMagic[] = {0x7F, 'E', 'L', 'F'};
  return StartsWith(image, kElfMagic, sizeof(kElfMagic));
}

bool IsFatbin(const unsigned char* image) {
  static constexpr unsigned char kFatbinMagic[] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50
  return StartsWith(image, kFatbinMagic, sizeof(kFatbinMagic));
}

// True when [offset, offset + length) lies inside `size` bytes (no overflow).
bool Inside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// cuModuleLoadDataEx takes no size, so the fake, like the real driver, only
// knows what an image's headers declare (the library proves the image whole
// before it calls). The parsers below never read outside that: a cubin's
// reads are bounded by `size` (a fatbin entry's payload size, or for a
// cubin on its own the extent its headers declare), and forged offsets give
// no entries instead of a wild read.

// The bytes a 64-bit little-endian ELF declares through its headers: the
// ELF header, both header tables and every section with contents. 0 when
// the image is no such ELF or a declared end overflows.
uint64_t ElfDeclaredSize(const unsigned char* elf) {
  if (!IsElf(elf) || elf[4] != 2 /* ELFCLASS64 */ || elf[5] != 1 /* little endian */) return 0;
  const uint64_t program_offset = ReadAt<uint64_t>(elf, 0x20);
  const uint64_t section_offset = ReadAt<uint64_t>(elf, 0x28);
  const uint64_t program_bytes =
      uint64_t{ReadAt<uint16_t>(elf, 0x36)} * ReadAt<uint16_t>(elf, 0x38);
  const uint16_t section_size = ReadAt<uint16_t>(elf, 0x3A);
  const uint16_t section_count = ReadAt<uint16_t>(elf, 0x3C);
  if (section_count > 0 && section_size < 0x40) return 0;
  uint64_t extent = 0x40;
  auto cover = [&](uint64_t offset, uint64_t length) {
    if (offset > UINT64_MAX - length) return false;
    extent = std::max(extent, offset + length);
    return true;
  };
  if (!cover(program_offset, program_bytes) ||
      !cover(section_offset, uint64_t{section_count} * section_size)) {
    return 0;
  }
  for (uint32_t i = 0; i < section_count; ++i) {
    const uint64_t header = section_offset + uint64_t{i} * section_size;
    const uint32_t type = ReadAt<uint32_t>(elf, header + 0x04);
    if (type == 0 /* SHT_NULL */ || type == 8 /* SHT_NOBITS */) continue;
    if (!cover(ReadAt<uint64_t>(elf, header + 0x18), ReadAt<uint64_t>(elf, header + 0x20))) {
      return 0;
    }
  }
  return extent;
}

// Kernel entries of a cubin of `size` bytes: FUNC symbols marked
// STO_CUDA_ENTRY (0x10).
std::vector<std::string> CubinEntryNames(const unsigned char* elf, uint64_t size) {
  std::vector<std::string> names;
  if (size < 0x40 || !IsElf(elf) || elf[4] != 2 /* ELFCLASS64 */ ||
      elf[5] != 1 /* little endian */) {
    return names;
  }
  const uint64_t section_offset = ReadAt<uint64_t>(elf, 0x28);
  const uint16_t section_size = ReadAt<uint16_t>(elf, 0x3A);
  const uint16_t section_count = ReadAt<uint16_t>(elf, 0x3C);
  if (section_size < 0x40 ||
      !Inside(section_offset, uint64_t{section_count} * section_size, size)) {
    return names;
  }
  auto section = [&](uint32_t i) { return section_offset + uint64_t{i} * section_size; };
  for (uint32_t i = 0; i < section_count; ++i) {
    if (ReadAt<uint32_t>(elf, section(i) + 0x04) != 2 /* SHT_SYMTAB */) continue;
    const uint64_t symbols = ReadAt<uint64_t>(elf, section(i) + 0x18);
    const uint64_t symbols_size = ReadAt<uint64_t>(elf, section(i) + 0x20);
    const uint32_t strings_index = ReadAt<uint32_t>(elf, section(i) + 0x28);
    const uint64_t entry_size = ReadAt<uint64_t>(elf, section(i) + 0x38);
    if (entry_size < 24 || strings_index >= section_count ||
        !Inside(symbols, symbols_size, size)) {
      continue;
    }
    const uint64_t strings = ReadAt<uint64_t>(elf, section(strings_index) + 0x18);
    const uint64_t strings_size = ReadAt<uint64_t>(elf, section(strings_index) + 0x20);
    if (!Inside(strings, strings_size, size)) continue;
    for (uint64_t k = 0; k < symbols_size / entry_size; ++k) {
      const uint64_t at = symbols + k * entry_size;
      const uint32_t name = ReadAt<uint32_t>(elf, at);
      const uint8_t info = elf[at + 4];
      const uint8_t other = elf[at + 5];
      if ((info & 0xF) != 2 /* STT_FUNC */ || (other & 0x10) == 0 || name >= strings_size) {
        continue;
      }
      const char* text = reinterpret_cast<const char*>(elf + strings + name);
      names.emplace_back(text, strnlen(text, strings_size - name));
    }
  }
  return names;
}

// A fatbin holds cubins and PTX; collect the entries of every uncompressed
// one. Every entry must lie inside the container's declared size.
std::vector<std::string> FatbinEntryNames(const unsigned char* fatbin) {
  std::vector<std::string> names;
  const uint16_t header_size = ReadAt<uint16_t>(fatbin, 6);
  const uint64_t fat_size = ReadAt<uint64_t>(fatbin, 8);
  if (header_size < 16 || fat_size > UINT64_MAX - header_size) return names;
  const uint64_t end = header_size + fat_size;
  for (uint64_t at = header_size; Inside(at, 16, end);) {
    const uint16_t kind = ReadAt<uint16_t>(fatbin, at);
    const uint32_t entry_header = ReadAt<uint32_t>(fatbin, at + 4);
    const uint64_t payload_size = ReadAt<uint64_t>(fatbin, at + 8);
    if (entry_header < 16 || !Inside(at, entry_header, end) ||
        !Inside(at + entry_header, payload_size, end)) {
      break;
    }
    const unsigned char* payload = fatbin + at + entry_header;
    std::vector<std::string> found;
    if (kind == 2 && payload_size >= 0x40 && IsElf(payload)) {
      found = CubinEntryNames(payload, payload_size);
    }
    if (kind == 1) {
      found = PtxEntryNames(reinterpret_cast<const char*>(payload),
                            static_cast<size_t>(payload_size));
    }
    names.insert(names.end(), found.begin(), found.end());
    at += entry_header + payload_size;
  }
  return names;
}

// The kernel entries of a module image: PTX text, a cubin or a fatbin.
std::vector<std::string> ModuleEntryNames(const void* image) {
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (IsElf(bytes)) return CubinEntryNames(bytes, ElfDeclaredSize(bytes));
  if (IsFatbin(bytes)) return FatbinEntryNames(bytes);
  const char* text = static_cast<const char*>(image);
  return PtxEntryNames(text, std::strlen(text));
}

void WriteJitErrorLog(unsigned int count, const CUjit_option* options, void** values,
                      const char* message) {
  if (options == nullptr || values == nullptr) return;
  char* buffer = nullptr;
  size_t capacity = 0;
  int size_index = -1;
  for (unsigned int i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      capacity = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
      size_index = static_cast<int>(i);
    }
  }
  if (buffer == nullptr || capacity == 0) return;
  size_t written = std::min(capacity - 1, std::strlen(message));
  std::memcpy(buffer, message, written);
  buffer[written] = '\0';
  // Like the real driver, report the bytes used through the size option.
  values[size_index] = reinterpret_cast<void*>(static_cast<uintptr_t>(written + 1));
}

CUresult fake_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count,
                                 CUjit_option* options, void** values) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleLoadDataEx")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuModuleLoadDataEx")) return r;
  if (module == nullptr || image == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: NULL module or image");
  }
  if (count > 0 && (options == nullptr || values == nullptr)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: %u options but NULL arrays",
                  count);
  }
  // PTX text holding "fake-jit-log-bytes: <n>" fails with a JIT error log of
  // n bytes (FAKE_CUDA_JIT_LOG_PATTERN repeated and cut at n), so tests can
  // check how the engine carries a huge log.
  if (!IsElf(static_cast<const unsigned char*>(image)) &&
      !IsFatbin(static_cast<const unsigned char*>(image))) {
    const char* marker = std::strstr(static_cast<const char*>(image), "fake-jit-log-bytes: ");
    if (marker != nullptr) {
      size_t bytes = std::strtoull(marker + std::strlen("fake-jit-log-bytes: "), nullptr, 10);
      // A test asks for a few MiB at most; fuzzed PTX may ask for anything.
      constexpr size_t kMaxJitLogBytes = size_t{16} << 20;
      if (bytes > kMaxJitLogBytes) bytes = kMaxJitLogBytes;
      std::string log;
      log.reserve(bytes);
      while (log.size() < bytes) log += FAKE_CUDA_JIT_LOG_PATTERN;
      log.resize(bytes);
      WriteJitErrorLog(count, options, values, log.c_str());
      return CUDA_ERROR_INVALID_PTX;
    }
  }
  std::vector<std::string> names = ModuleEntryNames(image);
  if (names.empty()) {
    WriteJitErrorLog(count, options, values, "fake ptxas: no .entry found");
    return CUDA_ERROR_INVALID_PTX;
  }
  auto* m = new FakeModule{std::move(names), ++S().module_serial};
  // PTX text holding "fake-static-shared-bytes: <n>": every kernel of the
  // module declares n bytes of static shared memory.
  if (!IsElf(static_cast<const unsigned char*>(image)) &&
      !IsFatbin(static_cast<const unsigned char*>(image))) {
    const char* marker =
        std::strstr(static_cast<const char*>(image), "fake-static-shared-bytes: ");
    if (marker != nullptr) {
      m->static_shared_bytes = static_cast<int>(
          std::strtol(marker + std::strlen("fake-static-shared-bytes: "), nullptr, 10));
    }
  }
  S().modules.insert(m);
  ++S().stats.module_loads;
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleUnload(CUmodule module) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleUnload")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuModuleUnload")) return r;
  State& s = S();
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (s.modules.erase(m) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload: unknown module %p",
                  static_cast<void*>(module));
  }
  for (auto it = s.functions.begin(); it != s.functions.end();) {
    it = it->second->module == m ? s.functions.erase(it) : std::next(it);
  }
  delete m;
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleGetFunction")) return r;
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (S().modules.count(m) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction: unknown module %p",
                  static_cast<void*>(module));
  }
  if (function == nullptr || name == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction: NULL function or name");
  }
  if (std::find(m->entries.begin(), m->entries.end(), name) == m->entries.end()) {
    return CUDA_ERROR_NOT_FOUND;
  }
  auto f = std::make_unique<FakeFunction>();
  f->module = m;
  f->name = name;
  f->static_shared_bytes = m->static_shared_bytes;
  f->max_dynamic_shared_bytes = std::max(0, kSharedBytesPerBlock - m->static_shared_bytes);
  FakeFunction* raw = f.get();
  S().functions.emplace(raw, std::move(f));
  *function = reinterpret_cast<CUfunction>(raw);
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuFuncGetAttribute")) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncGetAttribute: unknown function");
  if (value == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuFuncGetAttribute: NULL");
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = kMaxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = f->max_dynamic_shared_bytes;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = f->static_shared_bytes; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuFuncSetAttribute")) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncSetAttribute: unknown function");
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    // The opt-in maximum less the kernel's static shared memory.
    if (value < 0 || value > kSharedBytesPerBlock - f->static_shared_bytes) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    f->max_dynamic_shared_bytes = value;
  }
  return CUDA_SUCCESS;
}

int MaxActiveBlocksPerMultiprocessor(int block_size, size_t dynamic_shared_bytes) {
  if (dynamic_shared_bytes > static_cast<size_t>(kSharedBytesPerBlock)) return 0;
  return kMaxThreadsPerMultiprocessor / block_size;
}

CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function,
                                                          int block_size, size_t shared_bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuOccupancyMaxActiveBlocksPerMultiprocessor")) return r;
  if (FindFunction(function) == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuOccupancyMaxActiveBlocksPerMultiprocessor: "
                  "unknown function");
  }
  if (blocks == nullptr || block_size <= 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor: NULL or block size %d",
                  block_size);
  }
  *blocks = MaxActiveBlocksPerMultiprocessor(block_size, shared_bytes);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Kernels run on the host
// ---------------------------------------------------------------------------

// Reads kernel arguments either from kernelParams (one pointer per argument)
// or from an `extra` CU_LAUNCH_PARAM_BUFFER_POINTER block (naturally aligned).
class KernelArgs {
 public:
  KernelArgs(void** params, void** extra) : params_(params) {
    if (params_ == nullptr && extra != nullptr) {
      for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer_ = static_cast<const char*>(e[1]);
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
          buffer_size_ = *static_cast<const size_t*>(e[1]);
        }
      }
    }
  }

  bool present() const { return params_ != nullptr || buffer_ != nullptr; }

  // Reads argument `index` of type T, given the types of those before it
  // (`offset_sizes` are their sizes, for the packed-buffer layout).
  template <typename T>
  bool Read(size_t index, std::initializer_list<size_t> previous_sizes, T* out) const {
    size_t offset = 0;
    for (size_t size : previous_sizes) offset = (offset + size - 1) / size * size + size;
    offset = (offset + sizeof(T) - 1) / sizeof(T) * sizeof(T);
    return ReadBytes(index, offset, sizeof(T), out);
  }

  // Reads the `size` bytes of argument `index`, found at `offset` in a packed
  // buffer.
  bool ReadBytes(size_t index, size_t offset, size_t size, void* out) const {
    if (params_ != nullptr) {
      if (params_[index] == nullptr) return false;
      std::memcpy(out, params_[index], size);
      return true;
    }
    if (buffer_ == nullptr || offset + size > buffer_size_) return false;
    std::memcpy(out, buffer_ + offset, size);
    return true;
  }

 private:
  void** params_ = nullptr;
  const char* buffer_ = nullptr;
  size_t buffer_size_ = 0;
};

// Threads in the launch; element i runs when i < min(threads, n).
uint64_t ElementsToRun(uint64_t threads, uint64_t n) { return std::min(threads, n); }

template <typename T>
T* DevicePointer(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

CUresult CheckKernelRange(const char* kernel, const char* arg, CUdeviceptr ptr, uint64_t bytes) {
  if (!DeviceRangeValid(ptr, bytes)) {
    return Misuse(CUDA_ERROR_ILLEGAL_ADDRESS,
                  "%s: argument %s [0x%llx, +%llu bytes) is outside every live allocation",
                  kernel, arg, static_cast<unsigned long long>(ptr),
                  static_cast<unsigned long long>(bytes));
  }
  return CUDA_SUCCESS;
}

CUresult BadArgs(const char* kernel) {
  return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: kernel arguments missing", kernel);
}

// (const u32* a, const u32* b, u32* out, const u32* params): out[i] = a[i] + b[i], i < n
CUresult RunAddU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr a, b, out, params;
  if (!args.Read(0, {}, &a) || !args.Read(1, {8}, &b) || !args.Read(2, {8, 8}, &out) ||
      !args.Read(3, {8, 8, 8}, &params)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "a", a, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "b", b, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "out", out, n * 4)) return r;
  const uint32_t* pa = DevicePointer<uint32_t>(a);
  const uint32_t* pb = DevicePointer<uint32_t>(b);
  uint32_t* pout = DevicePointer<uint32_t>(out);
  for (uint64_t i = 0; i < n; ++i) pout[i] = pa[i] + pb[i];
  return CUDA_SUCCESS;
}

// (u32* data, const u32* params): data[i] += 1, i < n
CUresult RunIncU32(const char* name, const KernelArgs& args, uint64_t threads) {
  CUdeviceptr data, params;
  if (!args.Read(0, {}, &data) || !args.Read(1, {8}, &params)) return BadArgs(name);
  if (CUresult r = CheckKernelRange(name, "params", params, 4)) return r;
  uint64_t n = ElementsToRun(threads, *DevicePointer<uint32_t>(params));
  if (CUresult r = CheckKernelRange(name, "data", data, n * 4)) return r;
  uint32_t* p = DevicePointer<uint32_t>(data);
  for (uint64_t i = 0; i < n; ++i) p[i] += 1;
  return CUDA_SUCCESS;
}

// (float a, const float* x, float* y, unsigned long long n): y[i] = a * x[i] + y[i]
CUresult RunSaxpyF32(const char* name, const KernelArgs& args, uint64_t threads) {
  float a;
  CUdeviceptr x, y;
  unsigned long long count;
  if (!args.Read(0, {}, &a) || !args.Read(1, {4}, &x) || !args.Read(2, {4, 8}, &y) ||
      !args.Read(3, {4, 8, 8}, &count)) {
    return BadArgs(name);
  }
  uint64_t n = ElementsToRun(threads, count);
  if (CUresult r = CheckKernelRange(name, "x", x, n * 4)) return r;
  if (CUresult r = CheckKernelRange(name, "y", y, n * 4)) return r;
  const float* px = DevicePointer<float>(x);
  float* py = DevicePointer<float>(y);
  for (uint64_t i = 0; i < n; ++i) py[i] = a * px[i] + py[i];
  return CUDA_SUCCESS;
}

// (u64 a, const void* b, u32 c, const u32* d): records a, b, c and d[0].
CUresult RunProbeParams(const char* name, const KernelArgs& args) {
  uint64_t a;
  CUdeviceptr b, d;
  uint32_t c;
  if (!args.Read(0, {}, &a) || !args.Read(1, {8}, &b) || !args.Read(2, {8, 8}, &c) ||
      !args.Read(3, {8, 8, 4}, &d)) {
    return BadArgs(name);
  }
  if (CUresult r = CheckKernelRange(name, "d", d, 4)) return r;
  fake_cuda_stats& st = S().stats;
  st.probe_a = a;
  st.probe_b = b;
  st.probe_c = c;
  st.probe_d0 = *DevicePointer<uint32_t>(d);
  ++st.probe_launches;
  return CUDA_SUCCESS;
}

// The vector adds: the tests', the self-test's and the examples'
// (examples/vector_add_ptx.h, so their happy paths run on this driver too).
bool IsAddU32(const std::string& name) {
  return name == "vyre_test_add_u32" || name == "vyre_selftest_add_u32" ||
         name == "vyre_example_add_u32";
}

// The argument sizes of the kernels that run on the host; other kernels do
// nothing, so a graph keeps no arguments for them.
std::vector<size_t> KernelParamSizes(const std::string& name) {
  if (IsAddU32(name)) return {8, 8, 8, 8};
  if (name == "vyre_test_inc_u32") return {8, 8};
  if (name == "vyre_test_saxpy_f32") return {4, 8, 8, 8};
  if (name == "vyre_test_probe_params") return {8, 8, 4, 8};
  return {};
}

// Copies a launch's argument values into a packed buffer (the layout of a
// CU_LAUNCH_PARAM_BUFFER_POINTER block), as a graph's kernel node keeps them.
CUresult PackKernelArgs(const std::string& name, const KernelArgs& args,
                        std::vector<unsigned char>* packed) {
  packed->clear();
  size_t offset = 0;
  const std::vector<size_t> sizes = KernelParamSizes(name);
  for (size_t i = 0; i < sizes.size(); ++i) {
    offset = (offset + sizes[i] - 1) / sizes[i] * sizes[i];
    packed->resize(offset + sizes[i]);
    if (!args.ReadBytes(i, offset, sizes[i], packed->data() + offset)) {
      return BadArgs(name.c_str());
    }
    offset += sizes[i];
  }
  return CUDA_SUCCESS;
}

CUresult RunKernel(const std::string& name, const KernelArgs& args, uint64_t threads) {
  if (IsAddU32(name)) return RunAddU32(name.c_str(), args, threads);
  if (name == "vyre_test_inc_u32") return RunIncU32(name.c_str(), args, threads);
  if (name == "vyre_test_saxpy_f32") return RunSaxpyF32(name.c_str(), args, threads);
  if (name == "vyre_test_probe_params") return RunProbeParams(name.c_str(), args);
  return CUDA_SUCCESS;  // other kernels do nothing
}

CUresult CheckLaunchShape(const FakeFunction& f, const LaunchShape& shape) {
  for (int d = 0; d < 3; ++d) {
    if (shape.grid[d] == 0 || shape.block[d] == 0) return CUDA_ERROR_INVALID_VALUE;
    if (shape.grid[d] > static_cast<unsigned>(kMaxGridDim[d])) return CUDA_ERROR_INVALID_VALUE;
    if (shape.block[d] > static_cast<unsigned>(kMaxBlockDim[d])) return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  if (threads > static_cast<uint64_t>(kMaxThreadsPerBlock)) return CUDA_ERROR_INVALID_VALUE;
  if (shape.shared_bytes > static_cast<unsigned>(f.max_dynamic_shared_bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Counts a launch of `shape` and runs the kernel on the host. An armed fault
// fires instead: the launch succeeds, runs nothing, and the device is sticky.
CUresult RunLaunch(const std::string& name, const LaunchShape& shape, const KernelArgs& args,
                   bool cooperative) {
  fake_cuda_stats& st = S().stats;
  if (S().armed_fault != CUDA_SUCCESS) {
    (S().armed_latent ? S().latent : S().sticky) = S().armed_fault;
    S().armed_fault = CUDA_SUCCESS;
    ++st.faults;
    ++st.kernel_launches;
    return CUDA_SUCCESS;
  }
  ++st.kernel_launches;
  if (cooperative) ++st.cooperative_launches;
  std::copy(shape.grid, shape.grid + 3, st.last_grid);
  std::copy(shape.block, shape.block + 3, st.last_block);
  st.last_shared_bytes = shape.shared_bytes;
  std::snprintf(st.last_kernel, sizeof(st.last_kernel), "%s", name.c_str());
  uint64_t block_threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  return RunKernel(name, args, blocks * block_threads);
}

CUresult LaunchOrCapture(const char* fn, CUfunction function, const LaunchShape& shape,
                         void** params, void** extra, bool cooperative, FakeCapture* capture) {
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown function", fn);
  if (CUresult r = CheckLaunchShape(*f, shape)) {
    return Misuse(r, "%s(%s): grid %ux%ux%u block %ux%ux%u shared %u exceeds device limits", fn,
                  f->name.c_str(), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                  shape.block[1], shape.block[2], shape.shared_bytes);
  }
  uint64_t block_threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  if (cooperative) {
    uint64_t resident = uint64_t(MaxActiveBlocksPerMultiprocessor(int(block_threads),
                                                                  shape.shared_bytes)) *
                        kMultiprocessors;
    if (blocks > resident) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  KernelArgs args(params, extra);
  if (!args.present()) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no kernel parameters", fn);
  if (capture == nullptr && !(S().defer_all && !cooperative)) {
    FlushDeferred();
    return RunLaunch(f->name, shape, args, cooperative);
  }
  auto node = std::make_unique<FakeGraphNode>();
  node->op = NodeOp::kKernel;
  node->module_serial = f->module->serial;
  node->kernel = f->name;
  node->function = function;
  node->shape = shape;
  if (CUresult r = PackKernelArgs(f->name, args, &node->args)) return r;
  if (capture == nullptr) {
    // FAKE_CUDA_DEFER_ALL: the kernel runs, in order, when the host waits.
    S().deferred.push_back(std::move(*node));
    return CUDA_SUCCESS;
  }
  capture->graph->nodes.push_back(std::move(node));
  return CUDA_SUCCESS;
}

CUresult Launch(const char* fn, CUfunction function, const LaunchShape& shape, CUstream stream,
                void** params, void** extra, bool cooperative) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn, kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, fn)) return r;
  if (cooperative) {
    if (CUresult r = RejectOnCapturingStream(stream, fn)) return r;
  }
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, fn, &capture)) return r;
  CUresult r = LaunchOrCapture(fn, function, shape, params, extra, cooperative, capture);
  if (r != CUDA_SUCCESS && capture != nullptr) capture->invalidated = true;
  return r;
}

CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream stream,
                             void** params, void** extra) {
  return Launch("cuLaunchKernel", f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream,
                params, extra, false);
}

CUresult fake_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        CUstream stream, void** params) {
  return Launch("cuLaunchCooperativeKernel", f,
                LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, nullptr, true);
}

// ---------------------------------------------------------------------------
// Streams and events
// ---------------------------------------------------------------------------

CUresult fake_cuStreamCreate(CUstream* stream, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamCreate")) return r;
  if (stream == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: NULL");
  auto* s = new FakeStream{flags};
  S().streams.insert(s);
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamDestroy(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamDestroy")) return r;
  auto* s = reinterpret_cast<FakeStream*>(stream);
  if (S().streams.count(s) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy: unknown stream %p",
                  static_cast<void*>(stream));
  }
  if (s->capture) {
    // Kept alive (and its capture invalidated) so the capture can still be ended.
    s->capture->invalidated = true;
    return Misuse(CUDA_ERROR_ILLEGAL_STATE, "cuStreamDestroy on a capturing stream");
  }
  S().streams.erase(s);
  delete s;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamSynchronize(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamSynchronize")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamSynchronize")) return r;
  if (CUresult r = RejectOnCapturingStream(stream, "cuStreamSynchronize")) return r;
  if (CUresult r = RejectImplicitCaptureDependency(stream, "cuStreamSynchronize")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuStreamSynchronize")) return r;
  WaitWhileHeld(lock);
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamQuery(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamQuery")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamQuery")) return r;
  if (CUresult r = RejectOnCapturingStream(stream, "cuStreamQuery")) return r;
  if (S().hold) return CUDA_ERROR_NOT_READY;
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventCreate(CUevent* event, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventCreate")) return r;
  if (event == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuEventCreate: NULL");
  auto* e = new FakeEvent{};
  e->flags = flags;
  S().events.insert(e);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult fake_cuEventDestroy(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventDestroy")) return r;
  auto* e = reinterpret_cast<FakeEvent*>(event);
  if (S().events.erase(e) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy: unknown event %p",
                  static_cast<void*>(event));
  }
  delete e;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventRecord(CUevent event, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventRecord", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuEventRecord")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord: unknown event");
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, "cuEventRecord", &capture)) return r;
  if (capture != nullptr) {
    // Legal (it orders other streams' work into the capture), but the event
    // then stands for no completed work: waiting on it is an error.
    e->captured = true;
    return CUDA_SUCCESS;
  }
  e->captured = false;
  e->recorded = true;
  e->stream = reinterpret_cast<uint64_t>(stream);
  e->time = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

// Streams run their work at once (or, deferred, in one queue in enqueue
// order), so a wait orders nothing here; it is validated and counted, and the
// streams it joined are kept for tests (fake_cuda_stats.last_wait_*).
CUresult fake_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamWaitEvent", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuStreamWaitEvent")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent: unknown event");
  if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamWaitEvent: flags 0x%x", flags);
  }
  if (!e->recorded && !e->captured) {
    // Legal (the wait is then a no-op), but the engine always records first.
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent on an event never recorded");
  }
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, "cuStreamWaitEvent", &capture)) return r;
  State& s = S();
  ++s.stats.stream_waits;
  s.stats.last_wait_stream = reinterpret_cast<uint64_t>(stream);
  s.stats.last_wait_event_stream = e->stream;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventSynchronize(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventSynchronize")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize: unknown event");
  if (e->captured) {
    return Misuse(CUDA_ERROR_CAPTURED_EVENT,
                  "cuEventSynchronize on an event last recorded in a capturing stream");
  }
  WaitWhileHeld(lock);
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventQuery(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventQuery")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventQuery: unknown event");
  if (e->captured) {
    return Misuse(CUDA_ERROR_CAPTURED_EVENT,
                  "cuEventQuery on an event last recorded in a capturing stream");
  }
  if (S().hold) return CUDA_ERROR_NOT_READY;
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventElapsedTime")) return r;
  FakeEvent* s = FindEvent(start);
  FakeEvent* e = FindEvent(end);
  if (s == nullptr || e == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime: unknown event");
  }
  if (ms == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuEventElapsedTime: NULL");
  if (s->captured || e->captured) {
    return Misuse(CUDA_ERROR_CAPTURED_EVENT,
                  "cuEventElapsedTime on an event last recorded in a capturing stream");
  }
  if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventElapsedTime on an event created with CU_EVENT_DISABLE_TIMING");
  }
  if (!s->recorded || !e->recorded) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime on an unrecorded event");
  }
  if (S().hold) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(e->time - s->time).count();
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Stream capture and graphs
// ---------------------------------------------------------------------------

CUresult fake_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamBeginCapture")) return r;
  if (IsLegacyStream(stream)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamBeginCapture on the legacy stream");
  }
  if (stream == CU_STREAM_PER_THREAD) {
    return Misuse(CUDA_ERROR_NOT_SUPPORTED,
                  "cuStreamBeginCapture: the fake does not capture the per-thread stream");
  }
  if (CUresult r = CheckStream(stream, "cuStreamBeginCapture")) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamBeginCapture: unknown mode %d",
                  static_cast<int>(mode));
  }
  FakeStream* s = FindStream(stream);
  if (s->capture) {
    return Misuse(CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture on a stream already capturing");
  }
  s->capture = std::make_unique<FakeCapture>();
  s->capture->graph = std::make_unique<FakeGraph>();
  s->capture->mode = mode;
  s->capture->thread = std::this_thread::get_id();
  ++S().stats.captures_begun;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamEndCapture")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamEndCapture")) return r;
  if (graph == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamEndCapture: NULL graph");
  FakeStream* s = FindStream(stream);
  if (s == nullptr || !s->capture) {
    return Misuse(CUDA_ERROR_ILLEGAL_STATE, "cuStreamEndCapture on a stream that is not capturing");
  }
  if (s->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      s->capture->thread != std::this_thread::get_id()) {
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                  "cuStreamEndCapture from another thread than cuStreamBeginCapture");
  }
  std::unique_ptr<FakeCapture> capture = std::move(s->capture);
  if (capture->invalidated) {
    *graph = nullptr;  // the partial graph dies with `capture`
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  FakeGraph* g = capture->graph.get();
  for (const auto& node : g->nodes) S().graph_nodes.insert(node.get());
  S().graphs.emplace(g, std::move(capture->graph));
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

FakeGraph* FindGraph(CUgraph graph) {
  auto it = S().graphs.find(reinterpret_cast<FakeGraph*>(graph));
  return it == S().graphs.end() ? nullptr : it->second.get();
}

FakeGraphExec* FindGraphExec(CUgraphExec exec) {
  auto it = S().graph_execs.find(reinterpret_cast<FakeGraphExec*>(exec));
  return it == S().graph_execs.end() ? nullptr : it->second.get();
}

FakeGraphNode* FindGraphNode(CUgraphNode node) {
  auto* n = reinterpret_cast<FakeGraphNode*>(node);
  return S().graph_nodes.count(n) ? n : nullptr;
}

CUresult fake_cuGraphDestroy(CUgraph graph) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphDestroy")) return r;
  FakeGraph* g = FindGraph(graph);
  if (g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphDestroy: unknown graph %p",
                  static_cast<void*>(graph));
  }
  for (const auto& node : g->nodes) S().graph_nodes.erase(node.get());
  for (auto& [handle, exec] : S().graph_execs) {
    if (exec->source == g) exec->source = nullptr;  // its nodes can no longer be named
  }
  S().graphs.erase(g);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphGetNodes")) return r;
  FakeGraph* g = FindGraph(graph);
  if (g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphGetNodes: unknown graph %p",
                  static_cast<void*>(graph));
  }
  if (count == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphGetNodes: NULL count");
  const size_t total = g->nodes.size();
  if (nodes == nullptr) {
    *count = total;
    return CUDA_SUCCESS;
  }
  // Fills *count entries (NULL past the last node) and reports how many nodes
  // it returned.
  for (size_t i = 0; i < *count; ++i) {
    nodes[i] = i < total ? reinterpret_cast<CUgraphNode>(g->nodes[i].get()) : nullptr;
  }
  *count = std::min(*count, total);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphNodeGetType")) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeGetType: unknown node %p",
                  static_cast<void*>(node));
  }
  if (type == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeGetType: NULL type");
  *type = n->type();
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* params) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphMemsetNodeGetParams")) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphMemsetNodeGetParams: unknown node %p",
                  static_cast<void*>(node));
  }
  if (n->op != NodeOp::kMemset) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphMemsetNodeGetParams on a non-memset node");
  }
  if (params == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphMemsetNodeGetParams: NULL params");
  }
  *params = CUDA_MEMSET_NODE_PARAMS{};
  params->dst = n->dst;
  params->pitch = 0;
  params->value = n->value;
  params->elementSize = 1;
  params->width = n->bytes;
  params->height = 1;
  return CUDA_SUCCESS;
}

// Gives the node's function, shape and argument values (kernelParams points
// into the node, valid until the graph is destroyed, as the driver's is).
CUresult fake_cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphKernelNodeGetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphNode* n = FindGraphNode(node);
  if (n == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown node %p", fn, static_cast<void*>(node));
  }
  if (n->op != NodeOp::kKernel) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s on a non-kernel node", fn);
  if (params == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  n->arg_pointers.clear();
  size_t offset = 0;
  for (size_t size : KernelParamSizes(n->kernel)) {
    offset = (offset + size - 1) / size * size;
    n->arg_pointers.push_back(n->args.data() + offset);
    offset += size;
  }
  *params = CUDA_KERNEL_NODE_PARAMS{};
  params->func = n->function;
  params->gridDimX = n->shape.grid[0];
  params->gridDimY = n->shape.grid[1];
  params->gridDimZ = n->shape.grid[2];
  params->blockDimX = n->shape.block[0];
  params->blockDimY = n->shape.block[1];
  params->blockDimZ = n->shape.block[2];
  params->sharedMemBytes = n->shape.shared_bytes;
  params->kernelParams = n->arg_pointers.empty() ? nullptr : n->arg_pointers.data();
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphInstantiateWithFlags")) return r;
  if (exec == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithFlags: NULL exec");
  }
  FakeGraph* g = FindGraph(graph);
  if (g == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithFlags: unknown graph %p",
                  static_cast<void*>(graph));
  }
  constexpr unsigned long long kKnownFlags = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                             CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                             CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  const bool device_launch = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0;
  if ((flags & ~kKnownFlags) != 0 ||
      (device_launch && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0) ||
      (device_launch && g->nodes.empty())) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithFlags: flags 0x%llx", flags);
  }
  auto x = std::make_unique<FakeGraphExec>();
  x->source = g;
  x->nodes.reserve(g->nodes.size());
  for (const auto& node : g->nodes) {
    x->index[node.get()] = x->nodes.size();
    x->nodes.push_back(*node);
  }
  FakeGraphExec* raw = x.get();
  S().graph_execs.emplace(raw, std::move(x));
  *exec = reinterpret_cast<CUgraphExec>(raw);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphExecDestroy(CUgraphExec exec) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphExecDestroy")) return r;
  if (S().graph_execs.erase(reinterpret_cast<FakeGraphExec*>(exec)) == 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuGraphExecDestroy: unknown graph exec %p",
                  static_cast<void*>(exec));
  }
  return CUDA_SUCCESS;
}

// Runs a graph's kernel node with the argument values it holds.
CUresult RunKernelNode(const FakeGraphNode& n) {
  bool module_live = false;
  for (const FakeModule* m : S().modules) module_live |= m->serial == n.module_serial;
  if (!module_live) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuGraphLaunch: kernel node %s: its module has been unloaded", n.kernel.c_str());
  }
  size_t size = n.args.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER,
                   const_cast<unsigned char*>(n.args.data()), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  KernelArgs args(nullptr, n.args.empty() ? nullptr : extra);
  return RunLaunch(n.kernel, n.shape, args, false);
}

// Validates the exec and stream of cuGraphLaunch and cuGraphUpload.
CUresult CheckGraphLaunch(FakeGraphExec* x, CUgraphExec exec, CUstream stream, const char* fn) {
  if (x == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph exec %p", fn,
                  static_cast<void*>(exec));
  }
  if (CUresult r = CheckStream(stream, fn)) return r;
  if (CUresult r = RejectOnCapturingStream(stream, fn)) return r;
  return RejectImplicitCaptureDependency(stream, fn);
}

CUresult fake_cuGraphUpload(CUgraphExec exec, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphUpload", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  return CheckGraphLaunch(FindGraphExec(exec), exec, stream, "cuGraphUpload");
}

CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuGraphLaunch", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  FakeGraphExec* x = FindGraphExec(exec);
  if (CUresult r = CheckGraphLaunch(x, exec, stream, "cuGraphLaunch")) return r;
  FlushDeferred();
  fake_cuda_stats& st = S().stats;
  ++st.graph_launches;
  for (const FakeGraphNode& n : x->nodes) {
    if (S().sticky != CUDA_SUCCESS || S().latent != CUDA_SUCCESS) break;  // a node faulted
    if (n.op == NodeOp::kKernel) {
      if (CUresult r = RunKernelNode(n)) return r;
    } else {
      if (CUresult r = CheckTransfer(n, "cuGraphLaunch")) return r;
      RunTransfer(n);
    }
    ++st.graph_nodes_run;
  }
  return CUDA_SUCCESS;
}

// The exec's copy of original node `node`, which must be of the graph the exec
// was instantiated from (and that graph still alive).
FakeGraphNode* ExecNode(FakeGraphExec* x, CUgraphNode node, const char* fn) {
  if (x->source == nullptr) {
    Misuse(CUDA_ERROR_INVALID_VALUE, "%s: the graph the exec was instantiated from is destroyed",
           fn);
    return nullptr;
  }
  auto it = x->index.find(reinterpret_cast<const FakeGraphNode*>(node));
  if (it == x->index.end()) {
    Misuse(CUDA_ERROR_INVALID_VALUE,
           "%s: node %p is not a node of the graph the exec was instantiated from", fn,
           static_cast<void*>(node));
    return nullptr;
  }
  return &x->nodes[it->second];
}

CUresult fake_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_KERNEL_NODE_PARAMS* params) {
  static constexpr const char* fn = "cuGraphExecKernelNodeSetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphExec* x = FindGraphExec(exec);
  if (x == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph exec %p", fn,
                  static_cast<void*>(exec));
  }
  FakeGraphNode* n = ExecNode(x, node, fn);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (n->op != NodeOp::kKernel) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: not a kernel node", fn);
  if (params == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  if (params->func == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL func (the fake has no CUkernel)", fn);
  }
  FakeFunction* f = FindFunction(params->func);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown function", fn);
  if (f->module->serial != n->module_serial || f->name != n->kernel) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: changes the node's function from %s to %s", fn,
                  n->kernel.c_str(), f->name.c_str());
  }
  const LaunchShape shape{{params->gridDimX, params->gridDimY, params->gridDimZ},
                          {params->blockDimX, params->blockDimY, params->blockDimZ},
                          params->sharedMemBytes};
  if (CUresult r = CheckLaunchShape(*f, shape)) {
    return Misuse(r, "%s(%s): grid %ux%ux%u block %ux%ux%u shared %u exceeds device limits", fn,
                  f->name.c_str(), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                  shape.block[1], shape.block[2], shape.shared_bytes);
  }
  KernelArgs args(params->kernelParams, params->extra);
  if (!args.present()) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no kernel parameters", fn);
  std::vector<unsigned char> packed;
  if (CUresult r = PackKernelArgs(f->name, args, &packed)) return r;
  n->shape = shape;
  n->args = std::move(packed);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_MEMSET_NODE_PARAMS* params,
                                             CUcontext context) {
  static constexpr const char* fn = "cuGraphExecMemsetNodeSetParams";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn)) return r;
  FakeGraphExec* x = FindGraphExec(exec);
  if (x == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: unknown graph exec %p", fn,
                  static_cast<void*>(exec));
  }
  FakeGraphNode* n = ExecNode(x, node, fn);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (n->op != NodeOp::kMemset) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: not a memset node", fn);
  if (params == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL params", fn);
  if (context != reinterpret_cast<CUcontext>(&S().primary)) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s: context %p is not the node's context", fn,
                  static_cast<void*>(context));
  }
  if (params->elementSize != 1 || params->height != 1 || params->width == 0 ||
      params->value > 0xFF) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "%s: elementSize %u height %zu width %zu value 0x%x: a byte memset node stays "
                  "a non-empty one-row byte memset",
                  fn, params->elementSize, params->height, params->width, params->value);
  }
  if (CUresult r = CheckDeviceRange(params->dst, params->width, fn)) return r;
  n->dst = params->dst;
  n->value = static_cast<unsigned char>(params->value);
  n->bytes = params->width;
  return CUDA_SUCCESS;
}

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
};
#undef FAKE_PROC

}  // namespace

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
  for (const ProcEntry& entry : kProcs) {
    if (std::strcmp(entry.name, symbol) == 0) {
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
  st.primary_context_retains = s.primary_retains;
  st.graphs_live = s.graphs.size();
  st.graph_execs_live = s.graph_execs.size();
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

FAKE_EXPORT void fake_cuda_set_hold(int hold) {
  {
    Lock lock(S().mu);
    S().hold = hold != 0;
  }
  S().hold_changed.notify_all();
}
