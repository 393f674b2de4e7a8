// vyre_cuda_bench: vyre-cuda against the raw CUDA driver doing the same work
// in the same process.
//
// Dispatch cases, on vector add (u32) at 4 KiB, 1 MiB and 64 MiB per buffer
// (two inputs, one output):
//   resident OUTPUT     vyre_dispatch, all bindings resident, output zeroed
//                       vs raw cuMemsetD8Async + cuLaunchKernel + cuStreamSynchronize
//   resident IN_OUT     the output bound INPUT_OUTPUT (no memset)
//                       vs raw cuLaunchKernel + cuStreamSynchronize
//   host                vyre_dispatch over borrowed host vectors
//                       vs raw staged: memcpy into pinned staging (allocated once),
//                          2x cuMemcpyHtoDAsync, cuMemsetD8Async, cuLaunchKernel,
//                          cuMemcpyDtoHAsync, cuStreamSynchronize, memcpy out
//                       vs raw pageable: cuMemcpyHtoD x2 from the vectors,
//                          cuMemsetD8Async, cuLaunchKernel, cuMemcpyDtoH (null stream)
//
// Graph cases, at 4 KiB per buffer (docs/PERFORMANCE.md, "Graphs"). Every raw
// graph is captured with the driver API (cuStreamBeginCapture in thread-local
// mode, cuGraphInstantiateWithFlags, cuGraphUpload) and has the same nodes as
// vyre's graph, which is checked (vyre_graph_info_get vs cuGraphGetNodes):
//   graph replay, host          the vector add recorded with vyre_graph_record
//                               over HOST bindings and replayed with new input
//                               data every iteration (two random data sets
//                               alternate, so no replay equals the one before)
//                               vs a raw graph of 2 H2D copies from pinned
//                               staging, a memset of the output, the kernel and
//                               a D2H copy into pinned staging; per iteration:
//                               memcpy into pinned, cuGraphLaunch,
//                               cuStreamSynchronize, memcpy out
//   graph replay, host,         the same data every iteration: vyre finds the
//     unchanged input           inputs equal and runs its graph without input
//                               copies; vs the raw graph without the two H2D
//                               nodes (cuGraphLaunch, sync, memcpy out)
//   graph replay, resident      all bindings resident, vyre_graph_replay(graph,
//                               NULL, NULL); output OUTPUT (memset + kernel)
//                               and INPUT_OUTPUT (kernel only)
//                               vs raw cuGraphLaunch + cuStreamSynchronize of
//                               the same nodes, vs vyre_dispatch of the same
//                               work, vs raw stream launches + sync
//   sequence, 100 kernels       100 dependent increments of one resident 4 KiB
//                               buffer: vyre_sequence_record's graph replayed,
//                               vyre_sequence_run, 100 x vyre_dispatch
//                               vs the raw 100-node graph (cuGraphLaunch +
//                               sync), 100 cuLaunchKernel + 1 sync, and
//                               100 x (cuLaunchKernel + sync)
//   record                      vyre_graph_record + vyre_graph_destroy of the
//                               host vector add vs raw capture + instantiate +
//                               upload + destroy of the same two graphs (with
//                               and without input copies), the buffers
//                               allocated once, or allocated per record as
//                               vyre does; vyre_sequence_record +
//                               vyre_graph_destroy of the 100-step sequence vs
//                               raw capture + instantiate + upload + destroy
//
// Every path's result is checked element by element once per case before it
// is timed. Each iteration is timed alone on the host clock (every path ends
// synchronised); after 20 warm-up iterations the case repeats for about
// --seconds (default 0.5, at least 10 repetitions). Reported: median, p10 and
// p90 in microseconds, vyre/baseline of the medians, and the floor (bytes over
// 50 GB/s PCIe for host cases, over 3 TB/s HBM for device cases).
//
// Usage: vyre_cuda_bench [--seconds S] [--cases all|dispatch|graphs]
// The markdown table is printed last and, if VYRE_BENCH_OUT names a file,
// written there too.
#include <cuda.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "vyre_cuda.h"

extern const char vyre_bench_kernels_ptx[];

namespace {

constexpr const char* kKernelName = "vyre_bench_add_u32";
constexpr const char* kIncrementKernelName = "vyre_bench_inc_u32";
constexpr unsigned kBlockThreads = 256;
constexpr int kWarmupIterations = 20;
constexpr size_t kMinRepetitions = 10;
constexpr size_t kMaxRepetitions = 200000;
constexpr double kPcieBytesPerSecond = 50e9;
constexpr double kDeviceBytesPerSecond = 3e12;
constexpr uint32_t kPoison = 0xFFFFFFFFu;
// The graph cases' buffer size, and the sequence's kernel count.
constexpr uint64_t kGraphBytes = uint64_t{4} << 10;
constexpr int kSequenceSteps = 100;
// vyre's parameter block and slab alignment (a graph's device memory is
// [256-byte parameter block][each HOST binding, 256-byte aligned]).
constexpr uint64_t kParamBlockBytes = 256;
constexpr uint64_t kSlabAlignment = 256;
// Calls per telemetry count of the graph cases' driver work.
constexpr int kWorkCalls = 50;
constexpr int kRecordWorkCalls = 10;

// --- Error checking -----------------------------------------------------------

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "vyre_cuda_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string VyreLastError() {
  size_t length = 0;
  vyre_status status = VYRE_STATUS_OK;
  vyre_last_error(&status, nullptr, nullptr, 0, &length);
  std::string message(length + 1, '\0');
  vyre_last_error(nullptr, nullptr, message.data(), message.size(), nullptr);
  message.resize(std::strlen(message.c_str()));
  return std::string(vyre_status_name(status)) + ": " + message;
}

void CheckVyre(vyre_status status, const char* expression, int line) {
  if (status != VYRE_STATUS_OK) {
    Die(std::string(expression) + " (line " + std::to_string(line) + ") failed with " +
        VyreLastError());
  }
}

void CheckCu(CUresult result, const char* expression, int line) {
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    cuGetErrorName(result, &name);
    cuGetErrorString(result, &text);
    Die(std::string(expression) + " (line " + std::to_string(line) + ") failed with " +
        (name ? name : "?") + ": " + (text ? text : "?"));
  }
}

#define VYRE_CHECK(expr) CheckVyre((expr), #expr, __LINE__)
#define CU_CHECK(expr) CheckCu((expr), #expr, __LINE__)

// --- Measurement ----------------------------------------------------------------

using Clock = std::chrono::steady_clock;

double MicrosecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Stats {
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  size_t repetitions = 0;
};

// q in [0, 1] of ascending `sorted`, interpolating between neighbours.
double Quantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(position);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

Stats Summarise(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  Stats stats;
  stats.median_us = Quantile(samples, 0.5);
  stats.p10_us = Quantile(samples, 0.1);
  stats.p90_us = Quantile(samples, 0.9);
  stats.repetitions = samples.size();
  return stats;
}

// Times several cases in alternating blocks, so that clock ramps, other
// tenants of the host and thermal drift fall on every case alike instead of
// on whichever happened to run first.
std::vector<Stats> MeasureInterleaved(const std::vector<std::function<void()>>& cases,
                                      double target_seconds) {
  constexpr size_t kRounds = 8;
  std::vector<size_t> repetitions(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int i = 0; i < kWarmupIterations; ++i) cases[c]();
    // Calibrate the repetition count on a few warm iterations.
    const Clock::time_point calibration_start = Clock::now();
    constexpr int kCalibrationIterations = 5;
    for (int i = 0; i < kCalibrationIterations; ++i) cases[c]();
    const double per_iteration_us =
        std::max(MicrosecondsSince(calibration_start) / kCalibrationIterations, 0.01);
    repetitions[c] = std::clamp(static_cast<size_t>(target_seconds * 1e6 / per_iteration_us),
                                kMinRepetitions, kMaxRepetitions);
  }
  std::vector<std::vector<double>> samples(cases.size());
  for (size_t round = 0; round < kRounds; ++round) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const size_t block = std::max<size_t>(1, repetitions[c] / kRounds);
      for (size_t i = 0; i < block; ++i) {
        const Clock::time_point start = Clock::now();
        cases[c]();
        samples[c].push_back(MicrosecondsSince(start));
      }
    }
  }
  std::vector<Stats> stats;
  for (std::vector<double>& case_samples : samples) stats.push_back(Summarise(std::move(case_samples)));
  return stats;
}

// --- Data ---------------------------------------------------------------------

struct VectorAddData {
  size_t count = 0;
  uint64_t bytes = 0;
  std::vector<uint32_t> a, b, expected;
};

VectorAddData MakeData(uint64_t bytes_per_buffer, std::mt19937_64& rng) {
  VectorAddData data;
  data.count = bytes_per_buffer / sizeof(uint32_t);
  data.bytes = bytes_per_buffer;
  data.a.resize(data.count);
  data.b.resize(data.count);
  data.expected.resize(data.count);
  for (size_t i = 0; i < data.count; ++i) {
    const uint64_t bits = rng();
    data.a[i] = static_cast<uint32_t>(bits) | 1u;          // never zero
    data.b[i] = static_cast<uint32_t>(bits >> 32) | 0x100u;  // never zero
    data.expected[i] = data.a[i] + data.b[i];
  }
  return data;
}

// Dies unless out[i] == expected[i] at every element.
void VerifyEqual(const std::vector<uint32_t>& out, const std::vector<uint32_t>& expected,
                 const std::string& path) {
  size_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (out[i] != expected[i]) {
      if (mismatches == 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches != 0) {
    Die(path + ": " + std::to_string(mismatches) + " of " + std::to_string(expected.size()) +
        " elements wrong; first [" + std::to_string(first) + "] = " +
        std::to_string(out[first]) + ", want " + std::to_string(expected[first]));
  }
}

// Dies unless out == a + b at every element.
void Verify(const std::vector<uint32_t>& out, const VectorAddData& data, const std::string& path) {
  VerifyEqual(out, data.expected, path);
}

std::string SizeLabel(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

uint64_t AlignUp(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// --- Raw CUDA graphs -------------------------------------------------------------

// An instantiated CUDA graph; destroyed with its owner (the context that
// captured it must be current then).
class RawGraph {
 public:
  RawGraph() = default;
  RawGraph(CUgraph graph, CUgraphExec exec) : graph_(graph), exec_(exec) {}
  ~RawGraph() { Reset(); }
  RawGraph(RawGraph&& other) noexcept
      : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}
  RawGraph& operator=(RawGraph&& other) noexcept {
    if (this != &other) {
      Reset();
      graph_ = std::exchange(other.graph_, nullptr);
      exec_ = std::exchange(other.exec_, nullptr);
    }
    return *this;
  }
  RawGraph(const RawGraph&) = delete;
  RawGraph& operator=(const RawGraph&) = delete;

  void Reset() {
    if (exec_ != nullptr) CU_CHECK(cuGraphExecDestroy(exec_));
    if (graph_ != nullptr) CU_CHECK(cuGraphDestroy(graph_));
    exec_ = nullptr;
    graph_ = nullptr;
  }

  CUgraphExec exec() const { return exec_; }

  uint64_t NodeCount() const {
    size_t count = 0;
    CU_CHECK(cuGraphGetNodes(graph_, nullptr, &count));
    return count;
  }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// Captures what `enqueue(stream)` issues, in thread-local mode as vyre
// records, and instantiates it.
template <typename Enqueue>
RawGraph CaptureRaw(CUstream stream, Enqueue&& enqueue) {
  CU_CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  enqueue(stream);
  CUgraph graph = nullptr;
  CU_CHECK(cuStreamEndCapture(stream, &graph));
  CUgraphExec exec = nullptr;
  CU_CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  return RawGraph(graph, exec);
}

// Dies unless vyre's graph has `raw_nodes` nodes (the "same nodes" claim).
void CheckNodeCount(vyre_graph graph, uint64_t raw_nodes, bool unchanged_input_graph,
                    const std::string& path) {
  vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
  VYRE_CHECK(vyre_graph_info_get(graph, &info));
  const uint64_t nodes = unchanged_input_graph ? info.unchanged_input_node_count : info.node_count;
  if (nodes != raw_nodes) {
    Die(path + ": vyre's graph has " + std::to_string(nodes) + " nodes, the raw graph " +
        std::to_string(raw_nodes) + "; the comparison would not be of the same work");
  }
}

// --- The raw driver path --------------------------------------------------------

// The same kernel loaded with cuModuleLoadData, device buffers and pinned
// staging allocated once per size, one non-blocking stream.
class RawPath {
 public:
  // Where one vector add reads and writes: device buffers, the parameter
  // block and pinned staging.
  struct Operands {
    CUdeviceptr a, b, out, params;
    unsigned char* pinned_a;
    unsigned char* pinned_b;
    unsigned char* pinned_out;
  };

  RawPath(CUcontext context, const VectorAddData& data) : context_(context), data_(data) {
    CU_CHECK(cuCtxSetCurrent(context_));
    CU_CHECK(cuModuleLoadData(&module_, vyre_bench_kernels_ptx));
    CU_CHECK(cuModuleGetFunction(&function_, module_, kKernelName));
    CU_CHECK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&device_a_, data_.bytes));
    CU_CHECK(cuMemAlloc(&device_b_, data_.bytes));
    CU_CHECK(cuMemAlloc(&device_out_, data_.bytes));
    // The kernel reads params[0] = n; 256 bytes like vyre's parameter block.
    params_.assign(kParamBlockBytes / sizeof(uint32_t), 0);
    params_[0] = static_cast<uint32_t>(data_.count);
    CU_CHECK(cuMemAlloc(&device_params_, kParamBlockBytes));
    CU_CHECK(cuMemcpyHtoD(device_params_, params_.data(), kParamBlockBytes));
    CU_CHECK(cuMemHostAlloc(&pinned_a_, data_.bytes, 0));
    CU_CHECK(cuMemHostAlloc(&pinned_b_, data_.bytes, 0));
    CU_CHECK(cuMemHostAlloc(&pinned_out_, data_.bytes, 0));
    grid_ = static_cast<unsigned>((data_.count + kBlockThreads - 1) / kBlockThreads);
  }

  ~RawPath() {
    cuCtxSetCurrent(context_);
    cuStreamSynchronize(stream_);
    cuMemFreeHost(pinned_out_);
    cuMemFreeHost(pinned_b_);
    cuMemFreeHost(pinned_a_);
    cuMemFree(device_params_);
    cuMemFree(device_out_);
    cuMemFree(device_b_);
    cuMemFree(device_a_);
    cuStreamDestroy(stream_);
    cuModuleUnload(module_);
  }

  RawPath(const RawPath&) = delete;
  RawPath& operator=(const RawPath&) = delete;

  void MakeCurrent() { CU_CHECK(cuCtxSetCurrent(context_)); }

  // Inputs resident on the device, output poisoned.
  void UploadInputsAndPoisonOutput() {
    MakeCurrent();
    CU_CHECK(cuMemcpyHtoD(device_a_, data_.a.data(), data_.bytes));
    CU_CHECK(cuMemcpyHtoD(device_b_, data_.b.data(), data_.bytes));
    CU_CHECK(cuMemsetD8(device_out_, 0xFF, data_.bytes));
    CU_CHECK(cuCtxSynchronize());
  }

  std::vector<uint32_t> DownloadOutput() {
    std::vector<uint32_t> out(data_.count, 0);
    CU_CHECK(cuMemcpyDtoH(out.data(), device_out_, data_.bytes));
    return out;
  }

  void ResidentMemsetLaunchSync() {
    CU_CHECK(cuMemsetD8Async(device_out_, 0, data_.bytes, stream_));
    Launch(stream_);
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  void ResidentLaunchSync() {
    Launch(stream_);
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  // The naive driver sequence through pinned staging buffers allocated once.
  void StagedHostRoundTrip(uint32_t* out) {
    std::memcpy(pinned_a_, data_.a.data(), data_.bytes);
    std::memcpy(pinned_b_, data_.b.data(), data_.bytes);
    CU_CHECK(cuMemcpyHtoDAsync(device_a_, pinned_a_, data_.bytes, stream_));
    CU_CHECK(cuMemcpyHtoDAsync(device_b_, pinned_b_, data_.bytes, stream_));
    CU_CHECK(cuMemsetD8Async(device_out_, 0, data_.bytes, stream_));
    Launch(stream_);
    CU_CHECK(cuMemcpyDtoHAsync(pinned_out_, device_out_, data_.bytes, stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
    std::memcpy(out, pinned_out_, data_.bytes);
  }

  // Synchronous copies straight from pageable memory, on the legacy null
  // stream (cuMemcpyDtoH waits for the kernel).
  void PageableHostRoundTrip(uint32_t* out) {
    CU_CHECK(cuMemcpyHtoD(device_a_, data_.a.data(), data_.bytes));
    CU_CHECK(cuMemcpyHtoD(device_b_, data_.b.data(), data_.bytes));
    CU_CHECK(cuMemsetD8Async(device_out_, 0, data_.bytes, nullptr));
    Launch(nullptr);
    CU_CHECK(cuMemcpyDtoH(out, device_out_, data_.bytes));
  }

  // --- Graphs ---

  Operands Own() const {
    return {device_a_,
            device_b_,
            device_out_,
            device_params_,
            static_cast<unsigned char*>(pinned_a_),
            static_cast<unsigned char*>(pinned_b_),
            static_cast<unsigned char*>(pinned_out_)};
  }

  // The device work of StagedHostRoundTrip: the 2 input copies from pinned
  // staging (`with_inputs`), the memset of the output, the kernel and the
  // copy of the output into pinned staging.
  void EnqueueHostWork(CUstream stream, const Operands& o, bool with_inputs) {
    if (with_inputs) {
      CU_CHECK(cuMemcpyHtoDAsync(o.a, o.pinned_a, data_.bytes, stream));
      CU_CHECK(cuMemcpyHtoDAsync(o.b, o.pinned_b, data_.bytes, stream));
    }
    CU_CHECK(cuMemsetD8Async(o.out, 0, data_.bytes, stream));
    LaunchWith(stream, o);
    CU_CHECK(cuMemcpyDtoHAsync(o.pinned_out, o.out, data_.bytes, stream));
  }

  RawGraph CaptureHostGraph(bool with_inputs) {
    const Operands own = Own();
    return CaptureRaw(stream_, [&](CUstream s) { EnqueueHostWork(s, own, with_inputs); });
  }

  // The resident work: (memset of the output,) the kernel.
  RawGraph CaptureResidentGraph(bool memset_output) {
    return CaptureRaw(stream_, [&](CUstream s) {
      if (memset_output) CU_CHECK(cuMemsetD8Async(device_out_, 0, data_.bytes, s));
      Launch(s);
    });
  }

  void Upload(const RawGraph& graph) {
    CU_CHECK(cuGraphUpload(graph.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  // One replay of a host graph: inputs into pinned staging (a and b NULL for
  // the graph without input copies), launch, wait, the output out of pinned.
  void HostGraphRoundTrip(const RawGraph& graph, const uint32_t* a, const uint32_t* b,
                          uint32_t* out) {
    if (a != nullptr) {
      std::memcpy(pinned_a_, a, data_.bytes);
      std::memcpy(pinned_b_, b, data_.bytes);
    }
    CU_CHECK(cuGraphLaunch(graph.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
    std::memcpy(out, pinned_out_, data_.bytes);
  }

  void GraphLaunchSync(const RawGraph& graph) {
    CU_CHECK(cuGraphLaunch(graph.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  void PoisonPinnedOutput() { std::memset(pinned_out_, 0xFF, data_.bytes); }

  // What vyre_graph_record + vyre_graph_destroy of the host dispatch do, with
  // the driver: capture the graph with input copies and the one without,
  // instantiate both, upload both, wait, destroy. With `allocate`, the device
  // memory and pinned staging are allocated (one slab each, laid out as
  // vyre's: parameter block, then a, b, out 256-byte aligned) and the
  // parameter block uploaded, per record; else the buffers made once serve.
  // With `check_out`, the graph also runs once on `check_a`/`check_b` and its
  // result lands there.
  void RecordHostGraphs(bool allocate, const uint32_t* check_a = nullptr,
                        const uint32_t* check_b = nullptr, uint32_t* check_out = nullptr) {
    Operands o = Own();
    CUdeviceptr slab = 0;
    void* pinned = nullptr;
    if (allocate) {
      const uint64_t stride = AlignUp(data_.bytes, kSlabAlignment);
      const uint64_t total = kParamBlockBytes + 3 * stride;
      CU_CHECK(cuMemAlloc(&slab, total));
      CU_CHECK(cuMemHostAlloc(&pinned, total, CU_MEMHOSTALLOC_PORTABLE));
      auto* host = static_cast<unsigned char*>(pinned);
      o = {slab + kParamBlockBytes,
           slab + kParamBlockBytes + stride,
           slab + kParamBlockBytes + 2 * stride,
           slab,
           host + kParamBlockBytes,
           host + kParamBlockBytes + stride,
           host + kParamBlockBytes + 2 * stride};
      std::memcpy(host, params_.data(), kParamBlockBytes);
      CU_CHECK(cuMemcpyHtoDAsync(slab, host, kParamBlockBytes, stream_));
    }
    RawGraph full = CaptureRaw(stream_, [&](CUstream s) { EnqueueHostWork(s, o, true); });
    RawGraph unchanged = CaptureRaw(stream_, [&](CUstream s) { EnqueueHostWork(s, o, false); });
    CU_CHECK(cuGraphUpload(full.exec(), stream_));
    CU_CHECK(cuGraphUpload(unchanged.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
    if (check_out != nullptr) {
      std::memcpy(o.pinned_a, check_a, data_.bytes);
      std::memcpy(o.pinned_b, check_b, data_.bytes);
      std::memset(o.pinned_out, 0xFF, data_.bytes);
      CU_CHECK(cuGraphLaunch(full.exec(), stream_));
      CU_CHECK(cuStreamSynchronize(stream_));
      std::memcpy(check_out, o.pinned_out, data_.bytes);
    }
    unchanged.Reset();
    full.Reset();
    if (allocate) {
      CU_CHECK(cuMemFreeHost(pinned));
      CU_CHECK(cuMemFree(slab));
    }
  }

 private:
  void Launch(CUstream stream) {
    void* args[] = {&device_a_, &device_b_, &device_out_, &device_params_};
    CU_CHECK(cuLaunchKernel(function_, grid_, 1, 1, kBlockThreads, 1, 1, 0, stream, args,
                            nullptr));
  }

  void LaunchWith(CUstream stream, Operands o) {
    void* args[] = {&o.a, &o.b, &o.out, &o.params};
    CU_CHECK(cuLaunchKernel(function_, grid_, 1, 1, kBlockThreads, 1, 1, 0, stream, args,
                            nullptr));
  }

  CUcontext context_;
  const VectorAddData& data_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr device_a_ = 0, device_b_ = 0, device_out_ = 0, device_params_ = 0;
  std::vector<uint32_t> params_;
  void* pinned_a_ = nullptr;
  void* pinned_b_ = nullptr;
  void* pinned_out_ = nullptr;
  unsigned grid_ = 0;
};

// The increment kernel over one device buffer, for the sequence cases.
class RawIncrement {
 public:
  RawIncrement(CUcontext context, size_t count, int steps)
      : context_(context), count_(count), bytes_(count * sizeof(uint32_t)), steps_(steps) {
    CU_CHECK(cuCtxSetCurrent(context_));
    CU_CHECK(cuModuleLoadData(&module_, vyre_bench_kernels_ptx));
    CU_CHECK(cuModuleGetFunction(&function_, module_, kIncrementKernelName));
    CU_CHECK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&device_data_, bytes_));
    std::vector<uint32_t> params(kParamBlockBytes / sizeof(uint32_t), 0);
    params[0] = static_cast<uint32_t>(count_);
    CU_CHECK(cuMemAlloc(&device_params_, kParamBlockBytes));
    CU_CHECK(cuMemcpyHtoD(device_params_, params.data(), kParamBlockBytes));
    grid_ = static_cast<unsigned>((count_ + kBlockThreads - 1) / kBlockThreads);
  }

  ~RawIncrement() {
    cuCtxSetCurrent(context_);
    cuStreamSynchronize(stream_);
    cuMemFree(device_params_);
    cuMemFree(device_data_);
    cuStreamDestroy(stream_);
    cuModuleUnload(module_);
  }

  RawIncrement(const RawIncrement&) = delete;
  RawIncrement& operator=(const RawIncrement&) = delete;

  void MakeCurrent() { CU_CHECK(cuCtxSetCurrent(context_)); }

  void Upload(const std::vector<uint32_t>& data) {
    MakeCurrent();
    CU_CHECK(cuMemcpyHtoD(device_data_, data.data(), bytes_));
  }

  std::vector<uint32_t> Download() {
    std::vector<uint32_t> out(count_, 0);
    CU_CHECK(cuMemcpyDtoH(out.data(), device_data_, bytes_));
    return out;
  }

  // All the steps, then one synchronisation.
  void LaunchesSync() {
    EnqueueSteps(stream_);
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  // A synchronisation after every step (what 100 vyre_dispatch calls do).
  void LaunchSyncEach() {
    for (int i = 0; i < steps_; ++i) {
      Launch(stream_);
      CU_CHECK(cuStreamSynchronize(stream_));
    }
  }

  RawGraph CaptureGraph() {
    return CaptureRaw(stream_, [&](CUstream s) { EnqueueSteps(s); });
  }

  void Upload(const RawGraph& graph) {
    CU_CHECK(cuGraphUpload(graph.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  void GraphLaunchSync(const RawGraph& graph) {
    CU_CHECK(cuGraphLaunch(graph.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  // What vyre_sequence_record + vyre_graph_destroy do, with the driver:
  // capture, instantiate, upload, wait, destroy. With `run_once`, the graph
  // runs once before it is destroyed.
  void RecordGraph(bool run_once = false) {
    RawGraph graph = CaptureGraph();
    CU_CHECK(cuGraphUpload(graph.exec(), stream_));
    if (run_once) CU_CHECK(cuGraphLaunch(graph.exec(), stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }

 private:
  void EnqueueSteps(CUstream stream) {
    for (int i = 0; i < steps_; ++i) Launch(stream);
  }

  void Launch(CUstream stream) {
    void* args[] = {&device_data_, &device_params_};
    CU_CHECK(cuLaunchKernel(function_, grid_, 1, 1, kBlockThreads, 1, 1, 0, stream, args,
                            nullptr));
  }

  CUcontext context_;
  size_t count_;
  uint64_t bytes_;
  int steps_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr device_data_ = 0, device_params_ = 0;
  unsigned grid_ = 0;
};

// --- The vyre path ----------------------------------------------------------------

vyre_program CreateAddProgram(vyre_context context, vyre_binding_role output_role) {
  vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                VYRE_BINDING_DECL_INIT};
  decls[0].role = VYRE_ROLE_INPUT;
  decls[0].name = "a";
  decls[1].role = VYRE_ROLE_INPUT;
  decls[1].name = "b";
  decls[2].role = output_role;
  decls[2].name = "out";
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = VYRE_CODE_PTX;
  desc.code = vyre_bench_kernels_ptx;
  desc.entry = kKernelName;
  desc.bindings = decls;
  desc.binding_count = 3;
  desc.workgroup_size[0] = kBlockThreads;
  vyre_program program = {};
  VYRE_CHECK(vyre_program_create(context, &desc, &program));
  return program;
}

vyre_program CreateIncrementProgram(vyre_context context) {
  vyre_binding_decl decl = VYRE_BINDING_DECL_INIT;
  decl.role = VYRE_ROLE_INPUT_OUTPUT;
  decl.name = "data";
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = VYRE_CODE_PTX;
  desc.code = vyre_bench_kernels_ptx;
  desc.entry = kIncrementKernelName;
  desc.bindings = &decl;
  desc.binding_count = 1;
  desc.workgroup_size[0] = kBlockThreads;
  vyre_program program = {};
  VYRE_CHECK(vyre_program_create(context, &desc, &program));
  return program;
}

vyre_dispatch_binding ResidentBinding(vyre_buffer buffer) {
  vyre_dispatch_binding binding = VYRE_DISPATCH_BINDING_INIT;
  binding.source = VYRE_SOURCE_RESIDENT;
  binding.buffer = buffer;
  return binding;
}

vyre_dispatch_binding HostBinding(const void* input, void* output, uint64_t bytes) {
  vyre_dispatch_binding binding = VYRE_DISPATCH_BINDING_INIT;
  binding.source = VYRE_SOURCE_HOST;
  binding.host_input = input;
  binding.host_output = output;
  binding.host_bytes = bytes;
  return binding;
}

vyre_telemetry Telemetry(vyre_context context) {
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  VYRE_CHECK(vyre_context_telemetry(context, &telemetry));
  return telemetry;
}

// Driver work per vyre call (a dispatch, a replay, a sequence run, a
// record), from the telemetry difference over a number of calls.
struct DriverWork {
  std::string case_name;
  std::string size;
  double h2d_ops = 0, d2h_ops = 0, memsets = 0, launches = 0, graph_launches = 0, syncs = 0;
  double pool_hit_rate = 0;  // transient + pinned pool hits / lookups
};

DriverWork WorkPerCall(const std::string& case_name, const std::string& size,
                       const vyre_telemetry& before, const vyre_telemetry& after,
                       uint64_t calls) {
  DriverWork work;
  work.case_name = case_name;
  work.size = size;
  if (calls == 0) return work;
  const double n = static_cast<double>(calls);
  work.h2d_ops = static_cast<double>(after.h2d_operations - before.h2d_operations) / n;
  work.d2h_ops = static_cast<double>(after.d2h_operations - before.d2h_operations) / n;
  work.memsets = static_cast<double>(after.memset_operations - before.memset_operations) / n;
  work.launches = static_cast<double>(after.kernel_launches - before.kernel_launches) / n;
  work.graph_launches = static_cast<double>(after.graph_launches - before.graph_launches) / n;
  work.syncs = static_cast<double>(after.sync_points - before.sync_points) / n;
  const double hits = static_cast<double>(after.transient_pool_hits - before.transient_pool_hits +
                                          after.pinned_pool_hits - before.pinned_pool_hits);
  const double misses =
      static_cast<double>(after.transient_pool_misses - before.transient_pool_misses +
                          after.pinned_pool_misses - before.pinned_pool_misses);
  work.pool_hit_rate = hits + misses > 0 ? hits / (hits + misses) : 1.0;
  return work;
}

// Per dispatch, over a measurement in which only dispatches ran.
DriverWork PerDispatch(const std::string& case_name, const std::string& size,
                       const vyre_telemetry& before, const vyre_telemetry& after) {
  return WorkPerCall(case_name, size, before, after, after.dispatches - before.dispatches);
}

// Runs `call` `calls` times by itself and counts its driver work.
DriverWork CountWork(const std::string& case_name, const std::string& size, vyre_context context,
                     int calls, const std::function<void()>& call) {
  const vyre_telemetry before = Telemetry(context);
  for (int i = 0; i < calls; ++i) call();
  return WorkPerCall(case_name, size, before, Telemetry(context), static_cast<uint64_t>(calls));
}

// --- Report -------------------------------------------------------------------

struct Row {
  std::string case_name;
  std::string size;
  Stats vyre;
  std::string baseline;  // the raw driver unless it starts with "vyre"
  Stats raw;
  double floor_us = 0;  // negative: no meaningful floor
};

std::string FormatStats(const Stats& stats) {
  char text[96];
  std::snprintf(text, sizeof(text), "%.1f (%.1f-%.1f)", stats.median_us, stats.p10_us,
                stats.p90_us);
  return text;
}

constexpr const char* kGraphNotes =
    "\nGraph cases (4 KiB per buffer): the target is replay <= 1.05x the raw graph with the same "
    "nodes (host with new inputs, host with unchanged inputs, resident, and the 100-kernel "
    "sequence). Host replays pass new input data every iteration (two random data sets "
    "alternate); the unchanged-input replays pass the same data and vyre must find it equal "
    "(checked through telemetry) and run its graph without the input copies. Record rows time "
    "vyre_graph_record + vyre_graph_destroy (vyre allocates the graph's device memory and pinned "
    "staging, uploads the parameter block, captures the graph with and without input copies, "
    "instantiates and uploads both and waits); the raw baselines capture, instantiate, upload and "
    "destroy the same two graphs, with buffers made once or allocated per record. A baseline "
    "starting with 'vyre' is another vyre path, not the raw driver.\n";

std::string MarkdownReport(const std::string& header, const std::vector<Row>& rows,
                           const std::vector<DriverWork>& work, bool graph_rows) {
  std::string report = header;
  report +=
      "\n| case | per buffer | vyre median us (p10-p90) | baseline | baseline median us (p10-p90) "
      "| vyre/baseline | floor us |\n|---|---|---|---|---|---|---|\n";
  for (const Row& row : rows) {
    char floor[32];
    if (row.floor_us < 0) {
      std::snprintf(floor, sizeof(floor), "-");
    } else {
      std::snprintf(floor, sizeof(floor), "%.2f", row.floor_us);
    }
    char line[640];
    std::snprintf(line, sizeof(line), "| %s | %s | %s | %s | %s | %.2f | %s |\n",
                  row.case_name.c_str(), row.size.c_str(), FormatStats(row.vyre).c_str(),
                  row.baseline.c_str(), FormatStats(row.raw).c_str(),
                  row.vyre.median_us / row.raw.median_us, floor);
    report += line;
  }
  if (graph_rows) report += kGraphNotes;
  report +=
      "\nvyre driver work per call (dispatch, replay, sequence run or record; from telemetry):\n\n"
      "| case | per buffer | H2D copies | D2H copies | memsets | kernel launches | graph launches "
      "| sync points | pool hit rate |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const DriverWork& w : work) {
    char line[640];
    std::snprintf(line, sizeof(line),
                  "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f |\n",
                  w.case_name.c_str(), w.size.c_str(), w.h2d_ops, w.d2h_ops, w.memsets,
                  w.launches, w.graph_launches, w.syncs, w.pool_hit_rate);
    report += line;
  }
  return report;
}

struct Options {
  double seconds = 0.5;
  bool dispatch_cases = true;
  bool graph_cases = true;
};

Options ParseOptions(int argc, char** argv) {
  constexpr const char* kUsage =
      " (usage: vyre_cuda_bench [--seconds S] [--cases all|dispatch|graphs])";
  Options options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      options.seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--cases") == 0 && i + 1 < argc) {
      const std::string cases = argv[++i];
      if (cases != "all" && cases != "dispatch" && cases != "graphs") {
        Die("unknown --cases " + cases + kUsage);
      }
      options.dispatch_cases = cases != "graphs";
      options.graph_cases = cases != "dispatch";
    } else {
      Die(std::string("unknown argument ") + argv[i] + kUsage);
    }
  }
  if (!(options.seconds > 0)) Die("--seconds must be positive");
  return options;
}

// Everything a group of cases needs.
struct Bench {
  vyre_context context;
  CUcontext raw_context;
  vyre_program add_output;
  vyre_program add_in_out;
  double target_seconds;
  std::mt19937_64* rng;
  std::vector<Row>* rows;
  std::vector<DriverWork>* work;
};

// --- Dispatch cases -------------------------------------------------------------

void RunDispatchCases(const Bench& bench, uint64_t bytes) {
  const vyre_context context = bench.context;
  const vyre_program add_output = bench.add_output;
  const vyre_program add_in_out = bench.add_in_out;
  const double target_seconds = bench.target_seconds;
  std::vector<Row>& rows = *bench.rows;
  std::vector<DriverWork>& work = *bench.work;

  const VectorAddData data = MakeData(bytes, *bench.rng);
  const std::string size = SizeLabel(bytes);
  const double host_floor_us = 3.0 * static_cast<double>(bytes) / kPcieBytesPerSecond * 1e6;
  const double device_floor_us = 3.0 * static_cast<double>(bytes) / kDeviceBytesPerSecond * 1e6;
  const std::vector<uint32_t> poison(data.count, kPoison);

  // vyre resident buffers.
  vyre_buffer a = {}, b = {}, out = {};
  VYRE_CHECK(vyre_buffer_alloc(context, bytes, &a));
  VYRE_CHECK(vyre_buffer_alloc(context, bytes, &b));
  VYRE_CHECK(vyre_buffer_alloc(context, bytes, &out));
  VYRE_CHECK(vyre_buffer_upload(a, 0, data.a.data(), bytes));
  VYRE_CHECK(vyre_buffer_upload(b, 0, data.b.data(), bytes));
  const std::vector<vyre_dispatch_binding> resident = {ResidentBinding(a), ResidentBinding(b),
                                                       ResidentBinding(out)};
  const uint32_t params[1] = {static_cast<uint32_t>(data.count)};
  vyre_dispatch_desc resident_desc = VYRE_DISPATCH_DESC_INIT;
  resident_desc.bindings = resident.data();
  resident_desc.binding_count = resident.size();
  resident_desc.param_words = params;
  resident_desc.param_word_count = 1;

  RawPath raw(bench.raw_context, data);
  std::vector<uint32_t> result(data.count);

  // (a) resident, output role OUTPUT: memset + launch + sync.
  {
    VYRE_CHECK(vyre_buffer_upload(out, 0, poison.data(), bytes));
    VYRE_CHECK(vyre_dispatch(add_output, &resident_desc, nullptr));
    VYRE_CHECK(vyre_buffer_download(out, 0, result.data(), bytes));
    Verify(result, data, "vyre resident OUTPUT " + size);
    raw.UploadInputsAndPoisonOutput();
    raw.ResidentMemsetLaunchSync();
    Verify(raw.DownloadOutput(), data, "raw memset+launch+sync " + size);

    const vyre_telemetry before = Telemetry(context);
    raw.MakeCurrent();
    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] { VYRE_CHECK(vyre_dispatch(add_output, &resident_desc, nullptr)); },
         [&] { raw.ResidentMemsetLaunchSync(); }},
        target_seconds);
    const Stats& vyre_stats = stats[0];
    const Stats& raw_stats = stats[1];
    work.push_back(PerDispatch("resident OUTPUT", size, before, Telemetry(context)));
    rows.push_back({"resident OUTPUT", size, vyre_stats, "memset+launch+sync", raw_stats,
                    device_floor_us});
  }

  // (a') resident, output role INPUT_OUTPUT: launch + sync.
  {
    VYRE_CHECK(vyre_buffer_upload(out, 0, poison.data(), bytes));
    VYRE_CHECK(vyre_dispatch(add_in_out, &resident_desc, nullptr));
    VYRE_CHECK(vyre_buffer_download(out, 0, result.data(), bytes));
    Verify(result, data, "vyre resident INPUT_OUTPUT " + size);
    raw.UploadInputsAndPoisonOutput();
    raw.ResidentLaunchSync();
    Verify(raw.DownloadOutput(), data, "raw launch+sync " + size);

    const vyre_telemetry before = Telemetry(context);
    raw.MakeCurrent();
    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] { VYRE_CHECK(vyre_dispatch(add_in_out, &resident_desc, nullptr)); },
         [&] { raw.ResidentLaunchSync(); }},
        target_seconds);
    const Stats& vyre_stats = stats[0];
    const Stats& raw_stats = stats[1];
    work.push_back(PerDispatch("resident INPUT_OUTPUT", size, before, Telemetry(context)));
    rows.push_back({"resident INPUT_OUTPUT", size, vyre_stats, "launch+sync", raw_stats,
                    device_floor_us});
  }

  VYRE_CHECK(vyre_buffer_free(out));
  VYRE_CHECK(vyre_buffer_free(b));
  VYRE_CHECK(vyre_buffer_free(a));

  // (b) borrowed host memory.
  {
    std::vector<uint32_t> host_out(data.count, kPoison);
    const std::vector<vyre_dispatch_binding> host = {
        HostBinding(data.a.data(), nullptr, bytes), HostBinding(data.b.data(), nullptr, bytes),
        HostBinding(nullptr, host_out.data(), bytes)};
    vyre_dispatch_desc host_desc = resident_desc;
    host_desc.bindings = host.data();
    host_desc.binding_count = host.size();

    VYRE_CHECK(vyre_dispatch(add_output, &host_desc, nullptr));
    Verify(host_out, data, "vyre host " + size);
    std::fill(result.begin(), result.end(), kPoison);
    raw.MakeCurrent();
    raw.StagedHostRoundTrip(result.data());
    Verify(result, data, "raw staged " + size);
    std::fill(result.begin(), result.end(), kPoison);
    raw.PageableHostRoundTrip(result.data());
    Verify(result, data, "raw pageable " + size);

    const vyre_telemetry before = Telemetry(context);
    raw.MakeCurrent();
    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] { VYRE_CHECK(vyre_dispatch(add_output, &host_desc, nullptr)); },
         [&] { raw.StagedHostRoundTrip(result.data()); },
         [&] { raw.PageableHostRoundTrip(result.data()); }},
        target_seconds);
    const Stats& vyre_stats = stats[0];
    const Stats& staged_stats = stats[1];
    const Stats& pageable_stats = stats[2];
    work.push_back(PerDispatch("host", size, before, Telemetry(context)));
    rows.push_back({"host", size, vyre_stats, "staged (pinned, reused)", staged_stats,
                    host_floor_us});
    rows.push_back({"host", size, vyre_stats, "pageable", pageable_stats, host_floor_us});
  }
}

// --- Graph cases ------------------------------------------------------------------

// A replay descriptor over three HOST bindings (a, b in; out written).
struct HostReplay {
  std::array<vyre_dispatch_binding, 3> bindings;
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;

  HostReplay(const VectorAddData& data, uint32_t* out)
      : bindings{HostBinding(data.a.data(), nullptr, data.bytes),
                 HostBinding(data.b.data(), nullptr, data.bytes),
                 HostBinding(nullptr, out, data.bytes)} {
    desc.bindings = bindings.data();
    desc.binding_count = bindings.size();
  }
  HostReplay(const HostReplay&) = delete;
  HostReplay& operator=(const HostReplay&) = delete;
};

// (a) and (d, host): the host vector add recorded and replayed, and the
// record itself.
void RunHostGraphCases(const Bench& bench) {
  const vyre_context context = bench.context;
  const std::string size = SizeLabel(kGraphBytes);
  // Two data sets, so that consecutive replays pass different inputs.
  const VectorAddData data[2] = {MakeData(kGraphBytes, *bench.rng),
                                 MakeData(kGraphBytes, *bench.rng)};
  const uint64_t bytes = kGraphBytes;
  const double changed_floor_us = 3.0 * static_cast<double>(bytes) / kPcieBytesPerSecond * 1e6;
  const double unchanged_floor_us = static_cast<double>(bytes) / kPcieBytesPerSecond * 1e6;
  std::vector<uint32_t> out(data[0].count, kPoison);
  std::vector<uint32_t> raw_out(data[0].count, kPoison);
  HostReplay replay0(data[0], out.data());
  HostReplay replay1(data[1], out.data());
  const HostReplay* replays[2] = {&replay0, &replay1};

  const uint32_t params[1] = {static_cast<uint32_t>(data[0].count)};
  vyre_dispatch_desc record_desc = VYRE_DISPATCH_DESC_INIT;
  record_desc.bindings = replay0.bindings.data();
  record_desc.binding_count = replay0.bindings.size();
  record_desc.param_words = params;
  record_desc.param_word_count = 1;
  vyre_graph graph = {};
  VYRE_CHECK(vyre_graph_record(bench.add_output, &record_desc, &graph));

  RawPath raw(bench.raw_context, data[0]);
  RawGraph raw_full = raw.CaptureHostGraph(/*with_inputs=*/true);
  RawGraph raw_unchanged = raw.CaptureHostGraph(/*with_inputs=*/false);
  raw.Upload(raw_full);
  raw.Upload(raw_unchanged);
  CheckNodeCount(graph, raw_full.NodeCount(), false, "host graph");
  CheckNodeCount(graph, raw_unchanged.NodeCount(), true, "host graph without input copies");

  // Results: each data set through each path, the second set after the
  // first, so that a copy that did not happen shows.
  for (int k = 0; k < 2; ++k) {
    std::fill(out.begin(), out.end(), kPoison);
    const vyre_telemetry before = Telemetry(context);
    VYRE_CHECK(vyre_graph_replay(graph, &replays[k]->desc, nullptr));
    const vyre_telemetry after = Telemetry(context);
    Verify(out, data[k], "vyre host graph replay, data set " + std::to_string(k));
    if (after.graph_uploads_skipped != before.graph_uploads_skipped) {
      Die("vyre host graph replay with new inputs skipped the input copies");
    }
    raw.MakeCurrent();
    raw.PoisonPinnedOutput();
    std::fill(raw_out.begin(), raw_out.end(), kPoison);
    raw.HostGraphRoundTrip(raw_full, data[k].a.data(), data[k].b.data(), raw_out.data());
    Verify(raw_out, data[k], "raw host graph, data set " + std::to_string(k));
  }

  // Replay with new inputs every iteration.
  {
    raw.MakeCurrent();
    int vyre_next = 0, raw_next = 0;
    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] {
           VYRE_CHECK(vyre_graph_replay(graph, &replays[vyre_next]->desc, nullptr));
           vyre_next ^= 1;
         },
         [&] {
           raw.HostGraphRoundTrip(raw_full, data[raw_next].a.data(), data[raw_next].b.data(),
                                  raw_out.data());
           raw_next ^= 1;
         }},
        bench.target_seconds);
    bench.rows->push_back({"graph replay, host, new inputs", size, stats[0],
                           "graph launch+sync, staged in/out", stats[1], changed_floor_us});
    int next = vyre_next;  // continue the alternation
    bench.work->push_back(CountWork("graph replay, host, new inputs", size, context, kWorkCalls,
                                    [&] {
                                      VYRE_CHECK(vyre_graph_replay(graph, &replays[next]->desc,
                                                                   nullptr));
                                      next ^= 1;
                                    }));
  }

  // Replay with unchanged inputs: the first replay of data set 0 after set 1
  // copies the inputs, the second must not.
  {
    std::fill(out.begin(), out.end(), kPoison);
    VYRE_CHECK(vyre_graph_replay(graph, &replay1.desc, nullptr));
    Verify(out, data[1], "vyre host graph replay, data set 1");
    std::fill(out.begin(), out.end(), kPoison);
    VYRE_CHECK(vyre_graph_replay(graph, &replay0.desc, nullptr));
    Verify(out, data[0], "vyre host graph replay, data set 0");
    std::fill(out.begin(), out.end(), kPoison);
    const vyre_telemetry before = Telemetry(context);
    VYRE_CHECK(vyre_graph_replay(graph, &replay0.desc, nullptr));
    const vyre_telemetry after = Telemetry(context);
    Verify(out, data[0], "vyre host graph replay, unchanged inputs");
    if (after.graph_uploads_skipped != before.graph_uploads_skipped + 1 ||
        after.h2d_operations != before.h2d_operations) {
      Die("vyre host graph replay with unchanged inputs copied them again (telemetry: " +
          std::to_string(after.graph_uploads_skipped - before.graph_uploads_skipped) +
          " uploads skipped, " + std::to_string(after.h2d_operations - before.h2d_operations) +
          " H2D copies)");
    }
    raw.MakeCurrent();
    raw.HostGraphRoundTrip(raw_full, data[0].a.data(), data[0].b.data(), raw_out.data());
    raw.PoisonPinnedOutput();
    std::fill(raw_out.begin(), raw_out.end(), kPoison);
    raw.HostGraphRoundTrip(raw_unchanged, nullptr, nullptr, raw_out.data());
    Verify(raw_out, data[0], "raw host graph without input copies");

    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] { VYRE_CHECK(vyre_graph_replay(graph, &replay0.desc, nullptr)); },
         [&] { raw.HostGraphRoundTrip(raw_unchanged, nullptr, nullptr, raw_out.data()); }},
        bench.target_seconds);
    bench.rows->push_back({"graph replay, host, unchanged inputs", size, stats[0],
                           "graph without input copies, launch+sync, copy out", stats[1],
                           unchanged_floor_us});
    bench.work->push_back(
        CountWork("graph replay, host, unchanged inputs", size, context, kWorkCalls,
                  [&] { VYRE_CHECK(vyre_graph_replay(graph, &replay0.desc, nullptr)); }));
  }
  VYRE_CHECK(vyre_graph_destroy(graph));

  // The record itself. Results first: a fresh record's graph, and the raw
  // allocating record's graph.
  {
    vyre_graph fresh = {};
    VYRE_CHECK(vyre_graph_record(bench.add_output, &record_desc, &fresh));
    std::fill(out.begin(), out.end(), kPoison);
    VYRE_CHECK(vyre_graph_replay(fresh, &replay1.desc, nullptr));
    Verify(out, data[1], "vyre freshly recorded host graph");
    VYRE_CHECK(vyre_graph_destroy(fresh));
    raw.MakeCurrent();
    for (const bool allocate : {false, true}) {
      std::fill(raw_out.begin(), raw_out.end(), kPoison);
      raw.RecordHostGraphs(allocate, data[1].a.data(), data[1].b.data(), raw_out.data());
      Verify(raw_out, data[1], allocate ? "raw allocating record" : "raw record");
    }

    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] {
           vyre_graph recorded = {};
           VYRE_CHECK(vyre_graph_record(bench.add_output, &record_desc, &recorded));
           VYRE_CHECK(vyre_graph_destroy(recorded));
         },
         [&] { raw.RecordHostGraphs(/*allocate=*/false); },
         [&] { raw.RecordHostGraphs(/*allocate=*/true); }},
        bench.target_seconds);
    bench.rows->push_back({"record + destroy, host", size, stats[0],
                           "capture+instantiate+upload x2, buffers reused", stats[1], -1});
    bench.rows->push_back({"record + destroy, host", size, stats[0],
                           "capture+instantiate+upload x2, allocating as vyre", stats[2], -1});
    bench.work->push_back(CountWork("record + destroy, host", size, context, kRecordWorkCalls,
                                    [&] {
                                      vyre_graph recorded = {};
                                      VYRE_CHECK(vyre_graph_record(bench.add_output, &record_desc,
                                                                   &recorded));
                                      VYRE_CHECK(vyre_graph_destroy(recorded));
                                    }));
  }
}

// (b): resident replay vs the raw graph, vyre_dispatch and raw stream work.
void RunResidentGraphCases(const Bench& bench) {
  const vyre_context context = bench.context;
  const std::string size = SizeLabel(kGraphBytes);
  const VectorAddData data = MakeData(kGraphBytes, *bench.rng);
  const uint64_t bytes = kGraphBytes;
  const double device_floor_us = 3.0 * static_cast<double>(bytes) / kDeviceBytesPerSecond * 1e6;
  const std::vector<uint32_t> poison(data.count, kPoison);
  std::vector<uint32_t> result(data.count);

  vyre_buffer a = {}, b = {}, out = {};
  VYRE_CHECK(vyre_buffer_alloc(context, bytes, &a));
  VYRE_CHECK(vyre_buffer_alloc(context, bytes, &b));
  VYRE_CHECK(vyre_buffer_alloc(context, bytes, &out));
  VYRE_CHECK(vyre_buffer_upload(a, 0, data.a.data(), bytes));
  VYRE_CHECK(vyre_buffer_upload(b, 0, data.b.data(), bytes));
  const std::array<vyre_dispatch_binding, 3> resident = {ResidentBinding(a), ResidentBinding(b),
                                                         ResidentBinding(out)};
  const uint32_t params[1] = {static_cast<uint32_t>(data.count)};
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = resident.data();
  desc.binding_count = resident.size();
  desc.param_words = params;
  desc.param_word_count = 1;

  RawPath raw(bench.raw_context, data);

  struct Variant {
    const char* name;
    vyre_program program;
    bool memset_output;
    const char* raw_graph;
    const char* raw_stream;
  };
  const Variant variants[2] = {
      {"OUTPUT", bench.add_output, true, "graph (memset, kernel) launch+sync",
       "memset+launch+sync"},
      {"INPUT_OUTPUT", bench.add_in_out, false, "graph (kernel) launch+sync", "launch+sync"}};
  for (const Variant& v : variants) {
    const std::string name = std::string("graph replay, resident ") + v.name;
    vyre_graph graph = {};
    VYRE_CHECK(vyre_graph_record(v.program, &desc, &graph));
    RawGraph raw_graph = raw.CaptureResidentGraph(v.memset_output);
    raw.Upload(raw_graph);
    CheckNodeCount(graph, raw_graph.NodeCount(), false, name);

    VYRE_CHECK(vyre_buffer_upload(out, 0, poison.data(), bytes));
    VYRE_CHECK(vyre_graph_replay(graph, nullptr, nullptr));
    VYRE_CHECK(vyre_buffer_download(out, 0, result.data(), bytes));
    Verify(result, data, "vyre " + name);
    VYRE_CHECK(vyre_buffer_upload(out, 0, poison.data(), bytes));
    VYRE_CHECK(vyre_dispatch(v.program, &desc, nullptr));
    VYRE_CHECK(vyre_buffer_download(out, 0, result.data(), bytes));
    Verify(result, data, std::string("vyre dispatch, resident ") + v.name);
    raw.UploadInputsAndPoisonOutput();
    raw.GraphLaunchSync(raw_graph);
    Verify(raw.DownloadOutput(), data, std::string("raw ") + v.raw_graph);
    raw.UploadInputsAndPoisonOutput();
    if (v.memset_output) {
      raw.ResidentMemsetLaunchSync();
    } else {
      raw.ResidentLaunchSync();
    }
    Verify(raw.DownloadOutput(), data, std::string("raw ") + v.raw_stream);

    raw.MakeCurrent();
    const bool memset_output = v.memset_output;
    const vyre_program program = v.program;
    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] { VYRE_CHECK(vyre_graph_replay(graph, nullptr, nullptr)); },
         [&] { raw.GraphLaunchSync(raw_graph); },
         [&] { VYRE_CHECK(vyre_dispatch(program, &desc, nullptr)); },
         [&] {
           if (memset_output) {
             raw.ResidentMemsetLaunchSync();
           } else {
             raw.ResidentLaunchSync();
           }
         }},
        bench.target_seconds);
    bench.rows->push_back({name, size, stats[0], v.raw_graph, stats[1], device_floor_us});
    bench.rows->push_back({name, size, stats[0], std::string("vyre_dispatch, resident ") + v.name,
                           stats[2], device_floor_us});
    bench.rows->push_back({name, size, stats[0], v.raw_stream, stats[3], device_floor_us});
    bench.work->push_back(CountWork(name, size, context, kWorkCalls, [&] {
      VYRE_CHECK(vyre_graph_replay(graph, nullptr, nullptr));
    }));
    VYRE_CHECK(vyre_graph_destroy(graph));
  }

  VYRE_CHECK(vyre_buffer_free(out));
  VYRE_CHECK(vyre_buffer_free(b));
  VYRE_CHECK(vyre_buffer_free(a));
}

// (c) and (d, sequence): 100 dependent increments as a sequence graph,
// eagerly, as dispatches, and their record.
void RunSequenceCases(const Bench& bench) {
  const vyre_context context = bench.context;
  const std::string size = SizeLabel(kGraphBytes);
  const size_t count = kGraphBytes / sizeof(uint32_t);
  const double device_floor_us =
      kSequenceSteps * 2.0 * static_cast<double>(kGraphBytes) / kDeviceBytesPerSecond * 1e6;
  std::vector<uint32_t> initial(count);
  std::vector<uint32_t> expected(count);
  for (size_t i = 0; i < count; ++i) {
    initial[i] = static_cast<uint32_t>((*bench.rng)()) | 1u;
    expected[i] = initial[i] + static_cast<uint32_t>(kSequenceSteps);
  }

  const vyre_program increment = CreateIncrementProgram(context);
  vyre_buffer data = {};
  VYRE_CHECK(vyre_buffer_alloc(context, kGraphBytes, &data));
  const vyre_dispatch_binding binding = ResidentBinding(data);
  const uint32_t params[1] = {static_cast<uint32_t>(count)};
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = &binding;
  desc.binding_count = 1;
  desc.param_words = params;
  desc.param_word_count = 1;

  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_DISPATCH;
  step.program = increment;
  step.dispatch = &desc;
  const std::vector<vyre_sequence_step> steps(kSequenceSteps, step);
  vyre_sequence_desc sequence_desc = VYRE_SEQUENCE_DESC_INIT;
  sequence_desc.steps = steps.data();
  sequence_desc.step_count = steps.size();
  vyre_sequence sequence = {};
  VYRE_CHECK(vyre_sequence_create(context, &sequence_desc, &sequence));
  vyre_graph graph = {};
  VYRE_CHECK(vyre_sequence_record(sequence, &graph));

  RawIncrement raw(bench.raw_context, count, kSequenceSteps);
  RawGraph raw_graph = raw.CaptureGraph();
  raw.Upload(raw_graph);
  CheckNodeCount(graph, raw_graph.NodeCount(), false, "sequence graph");

  // Results: each path once from the same initial data.
  std::vector<uint32_t> result(count);
  auto check_vyre = [&](const char* path, const std::function<void()>& run) {
    VYRE_CHECK(vyre_buffer_upload(data, 0, initial.data(), kGraphBytes));
    run();
    VYRE_CHECK(vyre_buffer_download(data, 0, result.data(), kGraphBytes));
    VerifyEqual(result, expected, path);
  };
  auto check_raw = [&](const char* path, const std::function<void()>& run) {
    raw.Upload(initial);
    run();
    VerifyEqual(raw.Download(), expected, path);
  };
  auto dispatches = [&] {
    for (int i = 0; i < kSequenceSteps; ++i) VYRE_CHECK(vyre_dispatch(increment, &desc, nullptr));
  };
  check_vyre("vyre sequence graph replay", [&] { VYRE_CHECK(vyre_graph_replay(graph, nullptr, nullptr)); });
  check_vyre("vyre_sequence_run", [&] { VYRE_CHECK(vyre_sequence_run(sequence, nullptr)); });
  check_vyre("vyre 100 x vyre_dispatch", dispatches);
  check_raw("raw 100-node graph", [&] { raw.GraphLaunchSync(raw_graph); });
  check_raw("raw 100 launches + sync", [&] { raw.LaunchesSync(); });
  check_raw("raw 100 x (launch + sync)", [&] { raw.LaunchSyncEach(); });
  check_raw("raw record", [&] { raw.RecordGraph(/*run_once=*/true); });
  {
    vyre_graph fresh = {};
    VYRE_CHECK(vyre_sequence_record(sequence, &fresh));
    check_vyre("vyre freshly recorded sequence graph",
               [&] { VYRE_CHECK(vyre_graph_replay(fresh, nullptr, nullptr)); });
    VYRE_CHECK(vyre_graph_destroy(fresh));
  }

  {
    raw.MakeCurrent();
    const std::vector<Stats> stats = MeasureInterleaved(
        {[&] { VYRE_CHECK(vyre_graph_replay(graph, nullptr, nullptr)); },
         [&] { raw.GraphLaunchSync(raw_graph); },
         [&] { VYRE_CHECK(vyre_sequence_run(sequence, nullptr)); },
         [&] { raw.LaunchesSync(); },
         dispatches,
         [&] { raw.LaunchSyncEach(); }},
        bench.target_seconds);
    const std::string replay = "sequence graph replay, 100 kernels";
    bench.rows->push_back({replay, size, stats[0], "graph (100 kernel nodes) launch+sync",
                           stats[1], device_floor_us});
    bench.rows->push_back({replay, size, stats[0], "100 launches + sync", stats[3],
                           device_floor_us});
    bench.rows->push_back({replay, size, stats[0], "vyre_sequence_run", stats[2],
                           device_floor_us});
    bench.rows->push_back({replay, size, stats[0], "vyre 100 x vyre_dispatch", stats[4],
                           device_floor_us});
    bench.rows->push_back({"vyre_sequence_run, 100 kernels", size, stats[2],
                           "100 launches + sync", stats[3], device_floor_us});
    bench.rows->push_back({"100 x vyre_dispatch", size, stats[4], "100 x (launch + sync)",
                           stats[5], device_floor_us});
    bench.work->push_back(CountWork(replay, size, context, kWorkCalls, [&] {
      VYRE_CHECK(vyre_graph_replay(graph, nullptr, nullptr));
    }));
    bench.work->push_back(CountWork("vyre_sequence_run, 100 kernels", size, context, kWorkCalls,
                                    [&] { VYRE_CHECK(vyre_sequence_run(sequence, nullptr)); }));
  }

  // The record itself.
  {
    raw.MakeCurrent();
    auto record = [&] {
      vyre_graph recorded = {};
      VYRE_CHECK(vyre_sequence_record(sequence, &recorded));
      VYRE_CHECK(vyre_graph_destroy(recorded));
    };
    const std::vector<Stats> stats =
        MeasureInterleaved({record, [&] { raw.RecordGraph(); }}, bench.target_seconds);
    bench.rows->push_back({"sequence record + destroy, 100 kernels", size, stats[0],
                           "capture+instantiate+upload", stats[1], -1});
    bench.work->push_back(CountWork("sequence record + destroy, 100 kernels", size, context,
                                    kRecordWorkCalls, record));
  }

  VYRE_CHECK(vyre_graph_destroy(graph));
  VYRE_CHECK(vyre_sequence_destroy(sequence));
  VYRE_CHECK(vyre_buffer_free(data));
  VYRE_CHECK(vyre_program_destroy(increment));
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  const Clock::time_point bench_start = Clock::now();

  std::random_device seed_source;
  const uint64_t seed = (static_cast<uint64_t>(seed_source()) << 32) ^ seed_source();
  std::mt19937_64 rng(seed);

  // vyre side.
  uint32_t device_count = 0;
  VYRE_CHECK(vyre_device_count(&device_count));
  if (device_count == 0) Die("vyre_device_count reports no CUDA device");
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context = {};
  VYRE_CHECK(vyre_context_create(&context_desc, &context));
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  VYRE_CHECK(vyre_context_device_info(context, &info));
  const vyre_program add_output = CreateAddProgram(context, VYRE_ROLE_OUTPUT);
  const vyre_program add_in_out = CreateAddProgram(context, VYRE_ROLE_INPUT_OUTPUT);

  // Raw side: the same device's primary context.
  CU_CHECK(cuInit(0));
  CUdevice device = 0;
  CU_CHECK(cuDeviceGet(&device, 0));
  CUcontext raw_context = nullptr;
  CU_CHECK(cuDevicePrimaryCtxRetain(&raw_context, device));

  const uint32_t version = vyre_version();
  char header[768];
  std::snprintf(header, sizeof(header),
                "GPU: %s (sm_%u%u, %u SMs, %.1f GiB), driver %u, vyre-cuda %u.%u.%u, "
                "seed %" PRIu64 "\nfloor: bytes moved (3 buffers) / %.0f GB/s for host cases, "
                "/ %.0f TB/s for device cases; times are host wall clock per synchronous "
                "iteration\n",
                info.name, info.compute_capability_major, info.compute_capability_minor,
                info.multiprocessor_count,
                static_cast<double>(info.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                info.driver_version, VYRE_VERSION_MAJOR_OF(version),
                VYRE_VERSION_MINOR_OF(version), VYRE_VERSION_PATCH_OF(version), seed,
                kPcieBytesPerSecond / 1e9, kDeviceBytesPerSecond / 1e12);
  std::printf("%s\n", header);

  std::vector<Row> rows;
  std::vector<DriverWork> work;
  const Bench bench = {context, raw_context, add_output, add_in_out, options.seconds,
                       &rng,    &rows,       &work};
  auto progress = [&](const std::string& what) {
    std::printf("%s done (%.1f s so far)\n", what.c_str(), MicrosecondsSince(bench_start) / 1e6);
    std::fflush(stdout);
  };
  if (options.dispatch_cases) {
    const uint64_t sizes[] = {uint64_t{4} << 10, uint64_t{1} << 20, uint64_t{64} << 20};
    for (const uint64_t bytes : sizes) {
      RunDispatchCases(bench, bytes);
      progress(SizeLabel(bytes));
    }
  }
  if (options.graph_cases) {
    RunHostGraphCases(bench);
    progress("host graphs");
    RunResidentGraphCases(bench);
    progress("resident graphs");
    RunSequenceCases(bench);
    progress("sequences");
  }

  VYRE_CHECK(vyre_program_destroy(add_in_out));
  VYRE_CHECK(vyre_program_destroy(add_output));
  VYRE_CHECK(vyre_context_destroy(context));
  CU_CHECK(cuDevicePrimaryCtxRelease(device));

  const std::string report = MarkdownReport(header, rows, work, options.graph_cases);
  std::printf("\n%s", report.c_str());
  if (const char* path = std::getenv("VYRE_BENCH_OUT")) {
    if (FILE* file = std::fopen(path, "w")) {
      std::fputs(report.c_str(), file);
      std::fclose(file);
      std::printf("\nwritten to %s\n", path);
    } else {
      Die(std::string("cannot write VYRE_BENCH_OUT=") + path);
    }
  }
  std::printf("total %.1f s\n", MicrosecondsSince(bench_start) / 1e6);
  return 0;
}
