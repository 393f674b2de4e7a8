// vyre_host_transfer_bench: host data through vyre-cuda against the raw CUDA
// driver doing the same work in the same process (issue 7, "Benchmark").
//
// Cases (vector add of u32, two inputs and one output, per-buffer sizes
// 4 KiB, 1 MiB, 16 MiB and 64 MiB unless --sizes says otherwise):
//   dispatch   vyre_dispatch over borrowed pageable host vectors
//              vs raw staged: memcpy into pinned buffers allocated once,
//                 2x cuMemcpyHtoDAsync, cuMemsetD8Async of the output (vyre
//                 zeroes OUTPUT bindings), cuLaunchKernel, cuMemcpyDtoHAsync,
//                 cuStreamSynchronize, memcpy out of pinned
//              vs raw pageable: the same with cuMemcpyHtoDAsync/DtoHAsync
//                 straight from and into the pageable vectors
//              vs the PCIe floor, measured in the same run: pinned
//                 cuMemcpyHtoDAsync of both inputs and cuMemcpyDtoHAsync of
//                 the output on one stream, then sync (no kernel, no memcpy)
//   pinned     the same vyre_dispatch with a, b and out in vyre_host_alloc
//              memory, and in caller memory (aligned_alloc) registered with
//              vyre_host_register
//              vs raw pinned: the raw sequence from and into pinned memory
//                 (no host memcpy), and vs the floor
//   transfer   vyre_buffer_upload / vyre_buffer_download alone of 64 MiB
//              (--transfer-bytes), from pageable and from vyre_host_alloc
//              memory, vs the pinned floor (one cuMemcpyHtoDAsync or
//              DtoHAsync + sync), raw pageable (the same from pageable
//              memory) and raw staged (memcpy into pinned + copy + sync)
//   sweep      64 MiB host dispatch, upload and download on contexts with
//              staging_chunk_bytes x staging_chunk_count x staging_threads
//              over --sweep-chunks (MiB), --sweep-counts and --sweep-threads,
//              each against the floor measured alongside it, to choose the
//              defaults by measurement
//
// Every path's result is checked element by element once before it is
// timed. Each iteration is timed alone on the host clock (every path ends
// synchronised). The cases of one group run interleaved in 8 rounds after 20
// warm-up iterations each, for about --seconds per case (at least 10
// repetitions), so drift falls on all alike; ratios are of medians from the
// same group. The markdown report is printed last and written to
// VYRE_BENCH_OUT if set.
//
// Usage: vyre_host_transfer_bench [--seconds S]
//          [--cases all|dispatch,pinned,transfer,sweep]
//          [--sizes 4K,1M,16M,64M] [--transfer-bytes 64M]
//          [--sweep-chunks 2,4,8,16] [--sweep-counts 4] [--sweep-threads 1,2,4,8]
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "vyre_cuda.h"

extern const char vyre_bench_kernels_ptx[];

namespace {

constexpr const char* kKernelName = "vyre_bench_add_u32";
constexpr unsigned kBlockThreads = 256;
constexpr int kWarmupIterations = 20;
constexpr size_t kMinRepetitions = 10;
constexpr size_t kMaxRepetitions = 100000;
constexpr uint32_t kPoison = 0xFFFFFFFFu;
constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kParamBlockBytes = 256;
constexpr uint64_t kPageBytes = 4096;
constexpr int kWorkCalls = 10;

// The targets on the H100.
constexpr double kTarget64MiBHostUs = 6000;
constexpr double kTarget1MiBHostUs = 150;
constexpr double kTarget4KiBHostUs = 17;
constexpr double kTarget64MiBHostFloorRatio = 1.5;
constexpr double kTarget64MiBPinnedFloorRatio = 1.15;

// --- Error checking -----------------------------------------------------------------

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "vyre_host_transfer_bench: %s\n", what.c_str());
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

// --- Measurement ----------------------------------------------------------------------

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

// Times several cases in alternating blocks (as vyre_cuda_bench does), so that
// clock ramps and drift fall on every case alike.
std::vector<Stats> MeasureInterleaved(const std::vector<std::function<void()>>& cases,
                                      double target_seconds) {
  constexpr size_t kRounds = 8;
  std::vector<size_t> repetitions(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int i = 0; i < kWarmupIterations; ++i) cases[c]();
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
      const size_t block = std::max<size_t>(1, (repetitions[c] + kRounds - 1) / kRounds);
      for (size_t i = 0; i < block; ++i) {
        const Clock::time_point start = Clock::now();
        cases[c]();
        samples[c].push_back(MicrosecondsSince(start));
      }
    }
  }
  std::vector<Stats> stats;
  for (std::vector<double>& case_samples : samples) {
    stats.push_back(Summarise(std::move(case_samples)));
  }
  return stats;
}

// --- Data --------------------------------------------------------------------------------

std::string SizeLabel(uint64_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

struct VectorAddData {
  size_t count = 0;
  uint64_t bytes = 0;
  std::vector<uint32_t> a, b, expected;
};

VectorAddData MakeData(uint64_t bytes, std::mt19937_64& rng) {
  VectorAddData data;
  data.count = bytes / sizeof(uint32_t);
  data.bytes = data.count * sizeof(uint32_t);
  data.a.resize(data.count);
  data.b.resize(data.count);
  data.expected.resize(data.count);
  for (size_t i = 0; i < data.count; ++i) {
    const uint64_t bits = rng();
    data.a[i] = static_cast<uint32_t>(bits) | 1u;            // never zero
    data.b[i] = static_cast<uint32_t>(bits >> 32) | 0x100u;  // never zero
    data.expected[i] = data.a[i] + data.b[i];
  }
  return data;
}

// Dies unless got[0, count) == want[0, count).
void VerifyEqual(const uint32_t* got, const uint32_t* want, size_t count, const std::string& path) {
  size_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < count; ++i) {
    if (got[i] != want[i]) {
      if (mismatches == 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches != 0) {
    Die(path + ": " + std::to_string(mismatches) + " of " + std::to_string(count) +
        " elements wrong; first [" + std::to_string(first) + "] = " + std::to_string(got[first]) +
        ", want " + std::to_string(want[first]));
  }
}

void Poison(uint32_t* out, size_t count) { std::fill(out, out + count, kPoison); }

// --- Host memory the library knows ---------------------------------------------------------

enum class HostKind { kAllocated, kRegistered };

// `bytes` of vyre_host_alloc memory, or of page-aligned caller memory
// registered with vyre_host_register; released with the object.
class KnownHostMemory {
 public:
  KnownHostMemory(vyre_context context, HostKind kind, uint64_t bytes) : kind_(kind) {
    if (kind == HostKind::kAllocated) {
      void* pointer = nullptr;
      VYRE_CHECK(vyre_host_alloc(context, bytes, &pointer));
      data_ = pointer;
    } else {
      const uint64_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
      data_ = std::aligned_alloc(kPageBytes, rounded);
      if (data_ == nullptr) Die("aligned_alloc of " + std::to_string(rounded) + " bytes failed");
      VYRE_CHECK(vyre_host_register(context, data_, rounded));
    }
  }
  ~KnownHostMemory() {
    if (kind_ == HostKind::kAllocated) {
      VYRE_CHECK(vyre_host_free(data_));
    } else {
      VYRE_CHECK(vyre_host_unregister(data_));
      std::free(data_);
    }
  }
  KnownHostMemory(const KnownHostMemory&) = delete;
  KnownHostMemory& operator=(const KnownHostMemory&) = delete;

  uint32_t* u32() const { return static_cast<uint32_t*>(data_); }
  unsigned char* bytes() const { return static_cast<unsigned char*>(data_); }

 private:
  HostKind kind_;
  void* data_ = nullptr;
};

// --- The raw driver path ------------------------------------------------------------------

// The add kernel loaded with cuModuleLoadData, device buffers, pinned buffers
// and one non-blocking stream, all made once.
class RawPath {
 public:
  RawPath(CUcontext context, uint64_t bytes) : context_(context), bytes_(bytes) {
    count_ = bytes / sizeof(uint32_t);
    CU_CHECK(cuCtxSetCurrent(context_));
    CU_CHECK(cuModuleLoadData(&module_, vyre_bench_kernels_ptx));
    CU_CHECK(cuModuleGetFunction(&function_, module_, kKernelName));
    CU_CHECK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&device_a_, bytes_));
    CU_CHECK(cuMemAlloc(&device_b_, bytes_));
    CU_CHECK(cuMemAlloc(&device_out_, bytes_));
    std::vector<uint32_t> params(kParamBlockBytes / sizeof(uint32_t), 0);
    params[0] = static_cast<uint32_t>(count_);
    CU_CHECK(cuMemAlloc(&device_params_, kParamBlockBytes));
    CU_CHECK(cuMemcpyHtoD(device_params_, params.data(), kParamBlockBytes));
    void* pinned = nullptr;
    CU_CHECK(cuMemHostAlloc(&pinned, bytes_, 0));
    pinned_a_ = static_cast<uint32_t*>(pinned);
    CU_CHECK(cuMemHostAlloc(&pinned, bytes_, 0));
    pinned_b_ = static_cast<uint32_t*>(pinned);
    CU_CHECK(cuMemHostAlloc(&pinned, bytes_, 0));
    pinned_out_ = static_cast<uint32_t*>(pinned);
    grid_ = static_cast<unsigned>((count_ + kBlockThreads - 1) / kBlockThreads);
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

  uint32_t* pinned_a() const { return pinned_a_; }
  uint32_t* pinned_b() const { return pinned_b_; }
  uint32_t* pinned_out() const { return pinned_out_; }

  // (a) memcpy into pinned staging, copies, memset, kernel, copy back, memcpy out.
  void Staged(const uint32_t* a, const uint32_t* b, uint32_t* out) {
    std::memcpy(pinned_a_, a, bytes_);
    std::memcpy(pinned_b_, b, bytes_);
    Pinned(pinned_a_, pinned_b_, pinned_out_);
    std::memcpy(out, pinned_out_, bytes_);
  }

  // (b) The same work with the copies straight from and into pageable memory;
  // and the raw pinned sequence, when the pointers are pinned.
  void Pinned(const uint32_t* a, const uint32_t* b, uint32_t* out) {
    CU_CHECK(cuMemcpyHtoDAsync(device_a_, a, bytes_, stream_));
    CU_CHECK(cuMemcpyHtoDAsync(device_b_, b, bytes_, stream_));
    CU_CHECK(cuMemsetD8Async(device_out_, 0, bytes_, stream_));
    void* args[] = {&device_a_, &device_b_, &device_out_, &device_params_};
    CU_CHECK(cuLaunchKernel(function_, grid_, 1, 1, kBlockThreads, 1, 1, 0, stream_, args,
                            nullptr));
    CU_CHECK(cuMemcpyDtoHAsync(out, device_out_, bytes_, stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }
  void Pageable(const uint32_t* a, const uint32_t* b, uint32_t* out) { Pinned(a, b, out); }

  // (c) The floor of a host dispatch: the bytes it must move, pinned, on one
  // stream, nothing else.
  void FloorRoundTrip() {
    CU_CHECK(cuMemcpyHtoDAsync(device_a_, pinned_a_, bytes_, stream_));
    CU_CHECK(cuMemcpyHtoDAsync(device_b_, pinned_b_, bytes_, stream_));
    CU_CHECK(cuMemcpyDtoHAsync(pinned_out_, device_out_, bytes_, stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }

  // One buffer's worth each way, from pinned (the floor), pageable or staged.
  void CopyToDevice(const void* src) {
    CU_CHECK(cuMemcpyHtoDAsync(device_a_, src, bytes_, stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }
  void CopyToHost(void* dst) {
    CU_CHECK(cuMemcpyDtoHAsync(dst, device_a_, bytes_, stream_));
    CU_CHECK(cuStreamSynchronize(stream_));
  }
  void StagedToDevice(const void* src) {
    std::memcpy(pinned_a_, src, bytes_);
    CopyToDevice(pinned_a_);
  }
  void StagedToHost(void* dst) {
    CopyToHost(pinned_a_);
    std::memcpy(dst, pinned_a_, bytes_);
  }

 private:
  CUcontext context_;
  uint64_t bytes_;
  size_t count_ = 0;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr device_a_ = 0, device_b_ = 0, device_out_ = 0, device_params_ = 0;
  uint32_t* pinned_a_ = nullptr;
  uint32_t* pinned_b_ = nullptr;
  uint32_t* pinned_out_ = nullptr;
  unsigned grid_ = 0;
};

// --- The vyre path -------------------------------------------------------------------------

vyre_program CreateAddProgram(vyre_context context) {
  vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                VYRE_BINDING_DECL_INIT};
  decls[0].role = VYRE_ROLE_INPUT;
  decls[0].name = "a";
  decls[1].role = VYRE_ROLE_INPUT;
  decls[1].name = "b";
  decls[2].role = VYRE_ROLE_OUTPUT;
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

vyre_dispatch_binding HostBinding(const void* input, void* output, uint64_t bytes) {
  vyre_dispatch_binding binding = VYRE_DISPATCH_BINDING_INIT;
  binding.source = VYRE_SOURCE_HOST;
  binding.host_input = input;
  binding.host_output = output;
  binding.host_bytes = bytes;
  return binding;
}

// A vector add dispatch over host a, b and out; the descriptor points into
// the object, which stays put.
class HostAdd {
 public:
  HostAdd(vyre_program program, const uint32_t* a, const uint32_t* b, uint32_t* out,
          uint64_t bytes)
      : program_(program),
        bindings_{HostBinding(a, nullptr, bytes), HostBinding(b, nullptr, bytes),
                  HostBinding(nullptr, out, bytes)},
        params_{static_cast<uint32_t>(bytes / sizeof(uint32_t))} {
    desc_.bindings = bindings_;
    desc_.binding_count = 3;
    desc_.param_words = params_;
    desc_.param_word_count = 1;
  }
  HostAdd(const HostAdd&) = delete;
  HostAdd& operator=(const HostAdd&) = delete;

  void Run() const { VYRE_CHECK(vyre_dispatch(program_, &desc_, nullptr)); }

 private:
  vyre_program program_;
  vyre_dispatch_binding bindings_[3];
  uint32_t params_[1];
  vyre_dispatch_desc desc_ = VYRE_DISPATCH_DESC_INIT;
};

vyre_telemetry Telemetry(vyre_context context) {
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  VYRE_CHECK(vyre_context_telemetry(context, &telemetry));
  return telemetry;
}

// Driver work per vyre call, from the telemetry difference over kWorkCalls.
struct DriverWork {
  std::string case_name;
  std::string size;
  double h2d_ops = 0, h2d_mib = 0, d2h_ops = 0, d2h_mib = 0, memsets = 0, launches = 0, syncs = 0;
};

DriverWork CountWork(const std::string& case_name, const std::string& size, vyre_context context,
                     const std::function<void()>& call) {
  const vyre_telemetry before = Telemetry(context);
  for (int i = 0; i < kWorkCalls; ++i) call();
  const vyre_telemetry after = Telemetry(context);
  const double n = kWorkCalls;
  DriverWork w;
  w.case_name = case_name;
  w.size = size;
  w.h2d_ops = static_cast<double>(after.h2d_operations - before.h2d_operations) / n;
  w.h2d_mib = static_cast<double>(after.h2d_bytes - before.h2d_bytes) / n / kMiB;
  w.d2h_ops = static_cast<double>(after.d2h_operations - before.d2h_operations) / n;
  w.d2h_mib = static_cast<double>(after.d2h_bytes - before.d2h_bytes) / n / kMiB;
  w.memsets = static_cast<double>(after.memset_operations - before.memset_operations) / n;
  w.launches = static_cast<double>(after.kernel_launches - before.kernel_launches) / n;
  w.syncs = static_cast<double>(after.sync_points - before.sync_points) / n;
  return w;
}

// --- Report ------------------------------------------------------------------------------

struct Row {
  std::string case_name;
  std::string size;
  Stats vyre;
  std::string baseline;
  Stats base;
};

struct Target {
  std::string what;
  std::string goal;
  double measured = 0;  // what the goal is about (us or a ratio)
  std::string unit;     // "us" or "x floor"
  double limit = 0;
};

struct SweepRow {
  uint64_t chunk_bytes;
  uint32_t chunk_count;
  uint32_t threads;
  Stats dispatch, upload, download, floor_round_trip, floor_h2d, floor_d2h;
};

struct Report {
  std::vector<Row> rows;
  std::vector<Target> targets;
  std::vector<DriverWork> work;
  std::vector<SweepRow> sweep;
  uint64_t sweep_bytes = 0;
};

std::string FormatStats(const Stats& stats) {
  char text[96];
  std::snprintf(text, sizeof(text), "%.1f (%.1f-%.1f)", stats.median_us, stats.p10_us,
                stats.p90_us);
  return text;
}

double GBps(uint64_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0; }

std::string MarkdownReport(const std::string& header, const Report& report) {
  std::string out = header;
  char line[1024];
  if (!report.rows.empty()) {
    out +=
        "\n| case | per buffer | vyre median us (p10-p90) | baseline | baseline median us "
        "(p10-p90) | vyre/baseline |\n|---|---|---|---|---|---|\n";
    for (const Row& row : report.rows) {
      std::snprintf(line, sizeof(line), "| %s | %s | %s | %s | %s | %.2f |\n",
                    row.case_name.c_str(), row.size.c_str(), FormatStats(row.vyre).c_str(),
                    row.baseline.c_str(), FormatStats(row.base).c_str(),
                    row.vyre.median_us / row.base.median_us);
      out += line;
    }
  }
  if (!report.targets.empty()) {
    out += "\nTargets (issue 7, H100):\n\n| target | goal | measured | met |\n|---|---|---|---|\n";
    for (const Target& t : report.targets) {
      std::snprintf(line, sizeof(line), "| %s | %s | %.2f %s | %s |\n", t.what.c_str(),
                    t.goal.c_str(), t.measured, t.unit.c_str(),
                    t.measured <= t.limit ? "yes" : "NO");
      out += line;
    }
  }
  if (!report.work.empty()) {
    out +=
        "\nvyre driver work per call (telemetry over " + std::to_string(kWorkCalls) +
        " calls):\n\n| case | per buffer | H2D copies | H2D MiB | D2H copies | D2H MiB | memsets | "
        "kernel launches | sync points |\n|---|---|---|---|---|---|---|---|---|\n";
    for (const DriverWork& w : report.work) {
      std::snprintf(line, sizeof(line), "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                    w.case_name.c_str(), w.size.c_str(), w.h2d_ops, w.h2d_mib, w.d2h_ops,
                    w.d2h_mib, w.memsets, w.launches, w.syncs);
      out += line;
    }
  }
  if (!report.sweep.empty()) {
    const uint64_t bytes = report.sweep_bytes;
    out += "\nStaging sweep, " + SizeLabel(bytes) +
           " per buffer (pageable host memory; medians in us; x = vyre / the pinned floor "
           "measured alongside):\n\n| chunk | chunks | threads | ring | host dispatch | x floor | "
           "upload | x floor | GB/s | download | x floor | GB/s |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    size_t best_dispatch = 0, best_upload = 0, best_download = 0;
    for (size_t i = 0; i < report.sweep.size(); ++i) {
      const SweepRow& r = report.sweep[i];
      if (r.dispatch.median_us < report.sweep[best_dispatch].dispatch.median_us) best_dispatch = i;
      if (r.upload.median_us < report.sweep[best_upload].upload.median_us) best_upload = i;
      if (r.download.median_us < report.sweep[best_download].download.median_us) best_download = i;
    }
    for (size_t i = 0; i < report.sweep.size(); ++i) {
      const SweepRow& r = report.sweep[i];
      std::snprintf(line, sizeof(line),
                    "| %s | %u | %u | %s | %.1f%s | %.2f | %.1f%s | %.2f | %.1f | %.1f%s | %.2f | "
                    "%.1f |\n",
                    SizeLabel(r.chunk_bytes).c_str(), r.chunk_count, r.threads,
                    SizeLabel(r.chunk_bytes * r.chunk_count).c_str(), r.dispatch.median_us,
                    i == best_dispatch ? " (best)" : "",
                    r.dispatch.median_us / r.floor_round_trip.median_us, r.upload.median_us,
                    i == best_upload ? " (best)" : "", r.upload.median_us / r.floor_h2d.median_us,
                    GBps(bytes, r.upload.median_us), r.download.median_us,
                    i == best_download ? " (best)" : "",
                    r.download.median_us / r.floor_d2h.median_us, GBps(bytes, r.download.median_us));
      out += line;
    }
  }
  return out;
}

// --- Options ---------------------------------------------------------------------------------

struct Options {
  double seconds = 0.5;
  bool dispatch = true, pinned = true, transfer = true, sweep = true;
  std::vector<uint64_t> sizes = {4 * kKiB, 1 * kMiB, 16 * kMiB, 64 * kMiB};
  uint64_t transfer_bytes = 64 * kMiB;
  std::vector<uint64_t> sweep_chunks = {2 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB};
  std::vector<uint64_t> sweep_counts = {4};
  std::vector<uint64_t> sweep_threads = {1, 2, 4, 8};
};

constexpr const char* kUsage =
    " (usage: vyre_host_transfer_bench [--seconds S] "
    "[--cases all|dispatch,pinned,transfer,sweep] [--sizes 4K,1M,16M,64M] "
    "[--transfer-bytes 64M] [--sweep-chunks 2,4,8,16] [--sweep-counts 4] "
    "[--sweep-threads 1,2,4,8])";

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) parts.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

// "4K", "1M", "64M", "4096": bytes; `unit` scales a bare number.
uint64_t ParseSize(const std::string& text, uint64_t unit) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || value == 0) Die("bad size '" + text + "'" + kUsage);
  const std::string suffix(end);
  if (suffix.empty()) return value * unit;
  if (suffix == "K" || suffix == "KiB") return value * kKiB;
  if (suffix == "M" || suffix == "MiB") return value * kMiB;
  if (suffix == "G" || suffix == "GiB") return value * kMiB * 1024;
  Die("bad size '" + text + "'" + kUsage);
}

std::vector<uint64_t> ParseList(const std::string& text, uint64_t unit) {
  std::vector<uint64_t> values;
  for (const std::string& part : SplitCommas(text)) values.push_back(ParseSize(part, unit));
  if (values.empty()) Die("empty list '" + text + "'" + kUsage);
  return values;
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--seconds" && has_value) {
      options.seconds = std::atof(argv[++i]);
    } else if (arg == "--cases" && has_value) {
      options.dispatch = options.pinned = options.transfer = options.sweep = false;
      for (const std::string& c : SplitCommas(argv[++i])) {
        if (c == "all") {
          options.dispatch = options.pinned = options.transfer = options.sweep = true;
        } else if (c == "dispatch") {
          options.dispatch = true;
        } else if (c == "pinned") {
          options.pinned = true;
        } else if (c == "transfer") {
          options.transfer = true;
        } else if (c == "sweep") {
          options.sweep = true;
        } else {
          Die("unknown case '" + c + "'" + kUsage);
        }
      }
    } else if (arg == "--sizes" && has_value) {
      options.sizes = ParseList(argv[++i], 1);
    } else if (arg == "--transfer-bytes" && has_value) {
      options.transfer_bytes = ParseSize(argv[++i], 1);
    } else if (arg == "--sweep-chunks" && has_value) {
      options.sweep_chunks = ParseList(argv[++i], kMiB);
    } else if (arg == "--sweep-counts" && has_value) {
      options.sweep_counts = ParseList(argv[++i], 1);
    } else if (arg == "--sweep-threads" && has_value) {
      options.sweep_threads = ParseList(argv[++i], 1);
    } else {
      Die("unknown argument " + arg + kUsage);
    }
  }
  if (!(options.seconds > 0)) Die("--seconds must be positive");
  for (uint64_t& size : options.sizes) {
    if (size < sizeof(uint32_t) || size % sizeof(uint32_t) != 0) {
      Die("--sizes: " + std::to_string(size) + " is not a positive multiple of 4 bytes");
    }
  }
  if (options.transfer_bytes % sizeof(uint32_t) != 0) Die("--transfer-bytes: a multiple of 4");
  return options;
}

// Everything a group of cases needs.
struct Bench {
  vyre_context context;
  vyre_program add;
  CUcontext raw_context;
  double seconds;
  std::mt19937_64* rng;
  Report* report;
};

// --- Dispatch and pinned cases -----------------------------------------------------------

void RunDispatchCases(const Bench& bench, const Options& options, uint64_t bytes) {
  const VectorAddData data = MakeData(bytes, *bench.rng);
  const size_t count = data.count;
  const std::string size = SizeLabel(bytes);
  Report& report = *bench.report;
  RawPath raw(bench.raw_context, bytes);

  // Pageable.
  std::vector<uint32_t> out(count, kPoison);
  std::vector<uint32_t> raw_out(count, kPoison);
  const HostAdd host(bench.add, data.a.data(), data.b.data(), out.data(), bytes);
  host.Run();
  VerifyEqual(out.data(), data.expected.data(), count, "vyre host " + size);
  raw.MakeCurrent();
  raw.Staged(data.a.data(), data.b.data(), raw_out.data());
  VerifyEqual(raw_out.data(), data.expected.data(), count, "raw staged " + size);
  Poison(raw_out.data(), count);
  raw.Pageable(data.a.data(), data.b.data(), raw_out.data());
  VerifyEqual(raw_out.data(), data.expected.data(), count, "raw pageable " + size);

  // Pinned: vyre_host_alloc, registered, and the raw path's own pinned buffers.
  std::unique_ptr<KnownHostMemory> alloc[3], reg[3];
  std::unique_ptr<HostAdd> pinned_add, registered_add;
  if (options.pinned) {
    for (int k = 0; k < 3; ++k) {
      alloc[k] = std::make_unique<KnownHostMemory>(bench.context, HostKind::kAllocated, bytes);
      reg[k] = std::make_unique<KnownHostMemory>(bench.context, HostKind::kRegistered, bytes);
    }
    for (KnownHostMemory* m : {alloc[0].get(), reg[0].get()}) {
      std::memcpy(m->u32(), data.a.data(), bytes);
    }
    for (KnownHostMemory* m : {alloc[1].get(), reg[1].get()}) {
      std::memcpy(m->u32(), data.b.data(), bytes);
    }
    Poison(alloc[2]->u32(), count);
    Poison(reg[2]->u32(), count);
    pinned_add = std::make_unique<HostAdd>(bench.add, alloc[0]->u32(), alloc[1]->u32(),
                                           alloc[2]->u32(), bytes);
    registered_add = std::make_unique<HostAdd>(bench.add, reg[0]->u32(), reg[1]->u32(),
                                               reg[2]->u32(), bytes);
    pinned_add->Run();
    VerifyEqual(alloc[2]->u32(), data.expected.data(), count, "vyre host, vyre_host_alloc " + size);
    registered_add->Run();
    VerifyEqual(reg[2]->u32(), data.expected.data(), count, "vyre host, registered " + size);
  }
  std::memcpy(raw.pinned_a(), data.a.data(), bytes);
  std::memcpy(raw.pinned_b(), data.b.data(), bytes);
  Poison(raw.pinned_out(), count);
  raw.MakeCurrent();
  raw.Pinned(raw.pinned_a(), raw.pinned_b(), raw.pinned_out());
  VerifyEqual(raw.pinned_out(), data.expected.data(), count, "raw pinned " + size);

  // Timed together: the floor and every path.
  enum : size_t { kFloor, kVyreHost, kStaged, kPageable, kVyrePinned, kVyreRegistered, kRawPinned };
  std::vector<std::function<void()>> cases = {
      [&] { raw.FloorRoundTrip(); },
      [&] { host.Run(); },
      [&] { raw.Staged(data.a.data(), data.b.data(), raw_out.data()); },
      [&] { raw.Pageable(data.a.data(), data.b.data(), raw_out.data()); }};
  if (options.pinned) {
    cases.push_back([&] { pinned_add->Run(); });
    cases.push_back([&] { registered_add->Run(); });
    cases.push_back([&] { raw.Pinned(raw.pinned_a(), raw.pinned_b(), raw.pinned_out()); });
  }
  raw.MakeCurrent();
  const std::vector<Stats> stats = MeasureInterleaved(cases, bench.seconds);
  const Stats& floor = stats[kFloor];
  char floor_text[160];
  std::snprintf(floor_text, sizeof(floor_text),
                "PCIe floor: pinned 2x H2D + D2H of %s each (%.1f GB/s)", size.c_str(),
                GBps(3 * bytes, floor.median_us));
  const std::string floor_name = floor_text;
  if (options.dispatch) {
    report.rows.push_back({"host (pageable)", size, stats[kVyreHost], "raw staged (pinned, reused)",
                           stats[kStaged]});
    report.rows.push_back({"host (pageable)", size, stats[kVyreHost], "raw pageable",
                           stats[kPageable]});
    report.rows.push_back({"host (pageable)", size, stats[kVyreHost], floor_name, floor});
  }
  if (options.pinned) {
    report.rows.push_back({"host (vyre_host_alloc)", size, stats[kVyrePinned],
                           "raw pinned (no host memcpy)", stats[kRawPinned]});
    report.rows.push_back({"host (vyre_host_alloc)", size, stats[kVyrePinned], floor_name, floor});
    report.rows.push_back({"host (vyre_host_register)", size, stats[kVyreRegistered],
                           "raw pinned (no host memcpy)", stats[kRawPinned]});
    report.rows.push_back({"host (vyre_host_register)", size, stats[kVyreRegistered], floor_name,
                           floor});
  }

  // Targets.
  const double host_us = stats[kVyreHost].median_us;
  if (options.dispatch) {
    if (bytes == 64 * kMiB) {
      report.targets.push_back({"64 MiB host dispatch", "<= 6 ms", host_us, "us",
                                kTarget64MiBHostUs});
      report.targets.push_back({"64 MiB host dispatch vs floor", "<= 1.5x floor",
                                host_us / floor.median_us, "x floor", kTarget64MiBHostFloorRatio});
    } else if (bytes == 1 * kMiB) {
      report.targets.push_back({"1 MiB host dispatch", "<= 150 us", host_us, "us",
                                kTarget1MiBHostUs});
    } else if (bytes == 4 * kKiB) {
      report.targets.push_back({"4 KiB host dispatch", "<= 17 us", host_us, "us",
                                kTarget4KiBHostUs});
    }
  }
  if (options.pinned && bytes == 64 * kMiB) {
    report.targets.push_back({"64 MiB host dispatch, vyre_host_alloc", "<= 1.15x floor",
                              stats[kVyrePinned].median_us / floor.median_us, "x floor",
                              kTarget64MiBPinnedFloorRatio});
    report.targets.push_back({"64 MiB host dispatch, vyre_host_register", "<= 1.15x floor",
                              stats[kVyreRegistered].median_us / floor.median_us, "x floor",
                              kTarget64MiBPinnedFloorRatio});
  }

  // Driver work, and the results once more after all the timed runs.
  if (options.dispatch) {
    report.work.push_back(CountWork("host (pageable)", size, bench.context, [&] { host.Run(); }));
  }
  if (options.pinned) {
    report.work.push_back(
        CountWork("host (vyre_host_alloc)", size, bench.context, [&] { pinned_add->Run(); }));
    report.work.push_back(
        CountWork("host (vyre_host_register)", size, bench.context, [&] { registered_add->Run(); }));
  }
  Poison(out.data(), count);
  host.Run();
  VerifyEqual(out.data(), data.expected.data(), count, "vyre host after timing " + size);
  if (options.pinned) {
    Poison(alloc[2]->u32(), count);
    pinned_add->Run();
    VerifyEqual(alloc[2]->u32(), data.expected.data(), count, "vyre pinned after timing " + size);
  }
  registered_add.reset();
  pinned_add.reset();
}

// --- Transfer cases -------------------------------------------------------------------------

void RunTransferCases(const Bench& bench, uint64_t bytes) {
  const VectorAddData data = MakeData(bytes, *bench.rng);  // a: the bytes moved
  const size_t count = data.count;
  const std::string size = SizeLabel(bytes);
  Report& report = *bench.report;
  RawPath raw(bench.raw_context, bytes);
  vyre_buffer buffer = {};
  VYRE_CHECK(vyre_buffer_alloc(bench.context, bytes, &buffer));
  KnownHostMemory pinned_src(bench.context, HostKind::kAllocated, bytes);
  KnownHostMemory pinned_dst(bench.context, HostKind::kAllocated, bytes);
  std::memcpy(pinned_src.u32(), data.a.data(), bytes);
  std::vector<uint32_t> back(count, kPoison);

  // Results once: every upload path, read back by vyre_buffer_download.
  auto upload = [&](const void* src) { VYRE_CHECK(vyre_buffer_upload(buffer, 0, src, bytes)); };
  auto download = [&](void* dst) { VYRE_CHECK(vyre_buffer_download(buffer, 0, dst, bytes)); };
  upload(data.a.data());
  download(back.data());
  VerifyEqual(back.data(), data.a.data(), count, "vyre upload/download, pageable " + size);
  VYRE_CHECK(vyre_buffer_upload(buffer, 0, data.b.data(), bytes));  // something else first
  upload(pinned_src.u32());
  Poison(pinned_dst.u32(), count);
  download(pinned_dst.u32());
  VerifyEqual(pinned_dst.u32(), data.a.data(), count, "vyre upload/download, pinned " + size);
  raw.MakeCurrent();
  std::memcpy(raw.pinned_b(), data.a.data(), bytes);  // the floor's source
  raw.CopyToDevice(raw.pinned_b());
  Poison(raw.pinned_out(), count);
  raw.CopyToHost(raw.pinned_out());
  VerifyEqual(raw.pinned_out(), data.a.data(), count, "raw pinned round trip " + size);
  raw.StagedToDevice(data.b.data());
  Poison(back.data(), count);
  raw.StagedToHost(back.data());
  VerifyEqual(back.data(), data.b.data(), count, "raw staged round trip " + size);
  raw.CopyToDevice(data.a.data());
  Poison(back.data(), count);
  raw.CopyToHost(back.data());
  VerifyEqual(back.data(), data.a.data(), count, "raw pageable round trip " + size);

  enum : size_t {
    kVyreUp, kVyreDown, kVyrePinnedUp, kVyrePinnedDown, kFloorUp, kFloorDown, kPageableUp,
    kPageableDown, kStagedUp, kStagedDown
  };
  raw.MakeCurrent();
  const std::vector<Stats> stats = MeasureInterleaved(
      {[&] { upload(data.a.data()); },
       [&] { download(back.data()); },
       [&] { upload(pinned_src.u32()); },
       [&] { download(pinned_dst.u32()); },
       [&] { raw.CopyToDevice(raw.pinned_b()); },
       [&] { raw.CopyToHost(raw.pinned_out()); },
       [&] { raw.CopyToDevice(data.a.data()); },
       [&] { raw.CopyToHost(back.data()); },
       [&] { raw.StagedToDevice(data.a.data()); },
       [&] { raw.StagedToHost(back.data()); }},
      bench.seconds);
  auto floor_name = [&](const char* what, const Stats& s) {
    char text[128];
    std::snprintf(text, sizeof(text), "PCIe floor: pinned %s (%.1f GB/s)", what,
                  GBps(bytes, s.median_us));
    return std::string(text);
  };
  const std::string up_floor = floor_name("H2D", stats[kFloorUp]);
  const std::string down_floor = floor_name("D2H", stats[kFloorDown]);
  report.rows.push_back({"vyre_buffer_upload (pageable)", size, stats[kVyreUp], up_floor,
                         stats[kFloorUp]});
  report.rows.push_back({"vyre_buffer_upload (pageable)", size, stats[kVyreUp],
                         "raw pageable cuMemcpyHtoDAsync + sync", stats[kPageableUp]});
  report.rows.push_back({"vyre_buffer_upload (pageable)", size, stats[kVyreUp],
                         "raw staged: memcpy into pinned + H2D + sync", stats[kStagedUp]});
  report.rows.push_back({"vyre_buffer_download (pageable)", size, stats[kVyreDown], down_floor,
                         stats[kFloorDown]});
  report.rows.push_back({"vyre_buffer_download (pageable)", size, stats[kVyreDown],
                         "raw pageable cuMemcpyDtoHAsync + sync", stats[kPageableDown]});
  report.rows.push_back({"vyre_buffer_download (pageable)", size, stats[kVyreDown],
                         "raw staged: D2H + sync + memcpy out of pinned", stats[kStagedDown]});
  report.rows.push_back({"vyre_buffer_upload (vyre_host_alloc)", size, stats[kVyrePinnedUp],
                         up_floor, stats[kFloorUp]});
  report.rows.push_back({"vyre_buffer_download (vyre_host_alloc)", size, stats[kVyrePinnedDown],
                         down_floor, stats[kFloorDown]});
  report.work.push_back(CountWork("vyre_buffer_upload (pageable)", size, bench.context,
                                  [&] { upload(data.a.data()); }));
  report.work.push_back(CountWork("vyre_buffer_download (pageable)", size, bench.context,
                                  [&] { download(back.data()); }));
  report.work.push_back(CountWork("vyre_buffer_upload (vyre_host_alloc)", size, bench.context,
                                  [&] { upload(pinned_src.u32()); }));
  report.work.push_back(CountWork("vyre_buffer_download (vyre_host_alloc)", size, bench.context,
                                  [&] { download(pinned_dst.u32()); }));

  Poison(back.data(), count);
  download(back.data());
  VerifyEqual(back.data(), data.a.data(), count, "vyre download after timing " + size);
  VYRE_CHECK(vyre_buffer_free(buffer));
}

// --- Staging sweep ------------------------------------------------------------------------

void RunSweep(const Bench& bench, const Options& options) {
  const uint64_t bytes = options.transfer_bytes;
  const VectorAddData data = MakeData(bytes, *bench.rng);
  const size_t count = data.count;
  Report& report = *bench.report;
  report.sweep_bytes = bytes;
  RawPath raw(bench.raw_context, bytes);
  std::vector<uint32_t> out(count, kPoison);
  std::vector<uint32_t> back(count, kPoison);

  for (const uint64_t chunk : options.sweep_chunks) {
    for (const uint64_t chunks : options.sweep_counts) {
      for (const uint64_t threads : options.sweep_threads) {
        vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
        desc.staging_chunk_bytes = chunk;
        desc.staging_chunk_count = static_cast<uint32_t>(chunks);
        desc.staging_threads = static_cast<uint32_t>(threads);
        vyre_context context = {};
        VYRE_CHECK(vyre_context_create(&desc, &context));
        const vyre_program add = CreateAddProgram(context);
        vyre_buffer buffer = {};
        VYRE_CHECK(vyre_buffer_alloc(context, bytes, &buffer));
        const HostAdd host(add, data.a.data(), data.b.data(), out.data(), bytes);
        const std::string label = "sweep chunk " + SizeLabel(chunk) + " x " +
                                  std::to_string(chunks) + ", " + std::to_string(threads) +
                                  " threads";
        Poison(out.data(), count);
        host.Run();
        VerifyEqual(out.data(), data.expected.data(), count, label + ": host dispatch");
        VYRE_CHECK(vyre_buffer_upload(buffer, 0, data.a.data(), bytes));
        Poison(back.data(), count);
        VYRE_CHECK(vyre_buffer_download(buffer, 0, back.data(), bytes));
        VerifyEqual(back.data(), data.a.data(), count, label + ": upload/download");

        raw.MakeCurrent();
        const std::vector<Stats> stats = MeasureInterleaved(
            {[&] { host.Run(); },
             [&] { VYRE_CHECK(vyre_buffer_upload(buffer, 0, data.a.data(), bytes)); },
             [&] { VYRE_CHECK(vyre_buffer_download(buffer, 0, back.data(), bytes)); },
             [&] { raw.FloorRoundTrip(); },
             [&] { raw.CopyToDevice(raw.pinned_a()); },
             [&] { raw.CopyToHost(raw.pinned_out()); }},
            bench.seconds);
        report.sweep.push_back({chunk, static_cast<uint32_t>(chunks),
                                static_cast<uint32_t>(threads), stats[0], stats[1], stats[2],
                                stats[3], stats[4], stats[5]});
        std::printf("%s: dispatch %.1f us (%.2fx floor), upload %.1f us, download %.1f us\n",
                    label.c_str(), stats[0].median_us, stats[0].median_us / stats[3].median_us,
                    stats[1].median_us, stats[2].median_us);
        std::fflush(stdout);

        VYRE_CHECK(vyre_buffer_free(buffer));
        VYRE_CHECK(vyre_program_destroy(add));
        VYRE_CHECK(vyre_context_destroy(context));
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  const Clock::time_point bench_start = Clock::now();
  std::random_device seed_source;
  const uint64_t seed = (static_cast<uint64_t>(seed_source()) << 32) ^ seed_source();
  std::mt19937_64 rng(seed);

  uint32_t device_count = 0;
  VYRE_CHECK(vyre_device_count(&device_count));
  if (device_count == 0) Die("vyre_device_count reports no CUDA device");
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context = {};
  VYRE_CHECK(vyre_context_create(&context_desc, &context));
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  VYRE_CHECK(vyre_context_device_info(context, &info));
  const vyre_program add = CreateAddProgram(context);

  // The raw side: the same device's primary context.
  CU_CHECK(cuInit(0));
  CUdevice device = 0;
  CU_CHECK(cuDeviceGet(&device, 0));
  CUcontext raw_context = nullptr;
  CU_CHECK(cuDevicePrimaryCtxRetain(&raw_context, device));

  const uint32_t version = vyre_version();
  char header[1024];
  std::snprintf(header, sizeof(header),
                "GPU: %s (sm_%u%u, %u SMs, %.1f GiB), driver %u, vyre-cuda %u.%u.%u, seed %" PRIu64
                ", %u host threads\nvector add (u32): two inputs and one output per dispatch; "
                "times are host wall clock per synchronous iteration, medians (p10-p90) in us; "
                "the floor is measured in the same group; default staging ring unless the "
                "sweep says otherwise\n",
                info.name, info.compute_capability_major, info.compute_capability_minor,
                info.multiprocessor_count,
                static_cast<double>(info.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                info.driver_version, VYRE_VERSION_MAJOR_OF(version),
                VYRE_VERSION_MINOR_OF(version), VYRE_VERSION_PATCH_OF(version), seed,
                std::thread::hardware_concurrency());
  std::printf("%s\n", header);

  Report report;
  const Bench bench = {context, add, raw_context, options.seconds, &rng, &report};
  auto progress = [&](const std::string& what) {
    std::printf("%s done (%.1f s so far)\n", what.c_str(), MicrosecondsSince(bench_start) / 1e6);
    std::fflush(stdout);
  };
  if (options.dispatch || options.pinned) {
    for (const uint64_t bytes : options.sizes) {
      RunDispatchCases(bench, options, bytes);
      progress("dispatch " + SizeLabel(bytes));
    }
  }
  if (options.transfer) {
    RunTransferCases(bench, options.transfer_bytes);
    progress("transfer " + SizeLabel(options.transfer_bytes));
  }
  if (options.sweep) {
    RunSweep(bench, options);
    progress("sweep");
  }

  VYRE_CHECK(vyre_program_destroy(add));
  VYRE_CHECK(vyre_context_destroy(context));
  CU_CHECK(cuDevicePrimaryCtxRelease(device));

  const std::string text = MarkdownReport(header, report);
  std::printf("\n%s", text.c_str());
  if (const char* path = std::getenv("VYRE_BENCH_OUT")) {
    if (FILE* file = std::fopen(path, "w")) {
      std::fputs(text.c_str(), file);
      std::fclose(file);
      std::printf("\nwritten to %s\n", path);
    } else {
      Die(std::string("cannot write VYRE_BENCH_OUT=") + path);
    }
  }
  std::printf("total %.1f s\n", MicrosecondsSince(bench_start) / 1e6);
  return 0;
}
