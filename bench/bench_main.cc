// vyre_cuda_bench: vyre-cuda against the raw CUDA driver doing the same work
// in the same process, on vector add (u32) at 4 KiB, 1 MiB and 64 MiB per
// buffer (two inputs, one output).
//
// Cases:
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
// Every path's result is checked element by element once per case before it
// is timed. Each iteration is timed alone on the host clock (every path ends
// synchronised); after 20 warm-up iterations the case repeats for about
// --seconds (default 0.5, at least 10 repetitions). Reported: median, p10 and
// p90 in microseconds, vyre/raw of the medians, and the floor (bytes over
// 50 GB/s PCIe for host cases, over 3 TB/s HBM for device cases).
//
// Usage: vyre_cuda_bench [--seconds S]
// The markdown table is printed last and, if VYRE_BENCH_OUT names a file,
// written there too.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "vyre_cuda.h"

extern const char vyre_bench_kernels_ptx[];

namespace {

constexpr const char* kKernelName = "vyre_bench_add_u32";
constexpr unsigned kBlockThreads = 256;
constexpr int kWarmupIterations = 20;
constexpr size_t kMinRepetitions = 10;
constexpr size_t kMaxRepetitions = 200000;
constexpr double kPcieBytesPerSecond = 50e9;
constexpr double kDeviceBytesPerSecond = 3e12;
constexpr uint32_t kPoison = 0xFFFFFFFFu;

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

// Dies unless out == a + b at every element.
void Verify(const std::vector<uint32_t>& out, const VectorAddData& data, const std::string& path) {
  size_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < data.count; ++i) {
    if (out[i] != data.expected[i]) {
      if (mismatches == 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches != 0) {
    Die(path + ": " + std::to_string(mismatches) + " of " + std::to_string(data.count) +
        " elements wrong; first [" + std::to_string(first) + "] = " +
        std::to_string(out[first]) + ", want " + std::to_string(data.expected[first]));
  }
}

std::string SizeLabel(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

// --- The raw driver path --------------------------------------------------------

// The same kernel loaded with cuModuleLoadData, device buffers and pinned
// staging allocated once per size, one non-blocking stream.
class RawPath {
 public:
  RawPath(CUcontext context, const VectorAddData& data) : context_(context), data_(data) {
    CU_CHECK(cuCtxSetCurrent(context_));
    CU_CHECK(cuModuleLoadData(&module_, vyre_bench_kernels_ptx));
    CU_CHECK(cuModuleGetFunction(&function_, module_, kKernelName));
    CU_CHECK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&device_a_, data_.bytes));
    CU_CHECK(cuMemAlloc(&device_b_, data_.bytes));
    CU_CHECK(cuMemAlloc(&device_out_, data_.bytes));
    // The kernel reads params[0] = n; 256 bytes like vyre's parameter block.
    std::vector<uint32_t> params(64, 0);
    params[0] = static_cast<uint32_t>(data_.count);
    CU_CHECK(cuMemAlloc(&device_params_, params.size() * sizeof(uint32_t)));
    CU_CHECK(cuMemcpyHtoD(device_params_, params.data(), params.size() * sizeof(uint32_t)));
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

 private:
  void Launch(CUstream stream) {
    void* args[] = {&device_a_, &device_b_, &device_out_, &device_params_};
    CU_CHECK(cuLaunchKernel(function_, grid_, 1, 1, kBlockThreads, 1, 1, 0, stream, args,
                            nullptr));
  }

  CUcontext context_;
  const VectorAddData& data_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr device_a_ = 0, device_b_ = 0, device_out_ = 0, device_params_ = 0;
  void* pinned_a_ = nullptr;
  void* pinned_b_ = nullptr;
  void* pinned_out_ = nullptr;
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

// Driver work per dispatch, from the telemetry difference over a measurement.
struct DriverWork {
  std::string case_name;
  std::string size;
  double h2d_ops = 0, d2h_ops = 0, memsets = 0, launches = 0, syncs = 0;
  double pool_hit_rate = 0;  // transient + pinned pool hits / lookups
};

DriverWork PerDispatch(const std::string& case_name, const std::string& size,
                       const vyre_telemetry& before, const vyre_telemetry& after) {
  DriverWork work;
  work.case_name = case_name;
  work.size = size;
  const double dispatches = static_cast<double>(after.dispatches - before.dispatches);
  if (dispatches == 0) return work;
  work.h2d_ops = static_cast<double>(after.h2d_operations - before.h2d_operations) / dispatches;
  work.d2h_ops = static_cast<double>(after.d2h_operations - before.d2h_operations) / dispatches;
  work.memsets = static_cast<double>(after.memset_operations - before.memset_operations) / dispatches;
  work.launches = static_cast<double>(after.kernel_launches - before.kernel_launches) / dispatches;
  work.syncs = static_cast<double>(after.sync_points - before.sync_points) / dispatches;
  const double hits = static_cast<double>(after.transient_pool_hits - before.transient_pool_hits +
                                          after.pinned_pool_hits - before.pinned_pool_hits);
  const double misses =
      static_cast<double>(after.transient_pool_misses - before.transient_pool_misses +
                          after.pinned_pool_misses - before.pinned_pool_misses);
  work.pool_hit_rate = hits + misses > 0 ? hits / (hits + misses) : 1.0;
  return work;
}

// --- Report -------------------------------------------------------------------

struct Row {
  std::string case_name;
  std::string size;
  Stats vyre;
  std::string baseline;
  Stats raw;
  double floor_us = 0;
};

std::string FormatStats(const Stats& stats) {
  char text[96];
  std::snprintf(text, sizeof(text), "%.1f (%.1f-%.1f)", stats.median_us, stats.p10_us,
                stats.p90_us);
  return text;
}

std::string MarkdownReport(const std::string& header, const std::vector<Row>& rows,
                           const std::vector<DriverWork>& work) {
  std::string report = header;
  report +=
      "\n| case | per buffer | vyre median us (p10-p90) | raw baseline | raw median us (p10-p90) "
      "| vyre/raw | floor us |\n|---|---|---|---|---|---|---|\n";
  for (const Row& row : rows) {
    char line[512];
    std::snprintf(line, sizeof(line), "| %s | %s | %s | %s | %s | %.2f | %.2f |\n",
                  row.case_name.c_str(), row.size.c_str(), FormatStats(row.vyre).c_str(),
                  row.baseline.c_str(), FormatStats(row.raw).c_str(),
                  row.vyre.median_us / row.raw.median_us, row.floor_us);
    report += line;
  }
  report +=
      "\nvyre driver work per dispatch (from telemetry):\n\n"
      "| case | per buffer | H2D copies | D2H copies | memsets | launches | sync points | pool hit "
      "rate |\n|---|---|---|---|---|---|---|---|\n";
  for (const DriverWork& w : work) {
    char line[512];
    std::snprintf(line, sizeof(line), "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f |\n",
                  w.case_name.c_str(), w.size.c_str(), w.h2d_ops, w.d2h_ops, w.memsets,
                  w.launches, w.syncs, w.pool_hit_rate);
    report += line;
  }
  return report;
}

double ParseSeconds(int argc, char** argv) {
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      Die(std::string("unknown argument ") + argv[i] + " (usage: vyre_cuda_bench [--seconds S])");
    }
  }
  if (!(seconds > 0)) Die("--seconds must be positive");
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const double target_seconds = ParseSeconds(argc, argv);
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
  const uint64_t sizes[] = {uint64_t{4} << 10, uint64_t{1} << 20, uint64_t{64} << 20};
  for (const uint64_t bytes : sizes) {
    const VectorAddData data = MakeData(bytes, rng);
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

    RawPath raw(raw_context, data);
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
    std::printf("%s done (%.1f s so far)\n", size.c_str(),
                MicrosecondsSince(bench_start) / 1e6);
    std::fflush(stdout);
  }

  VYRE_CHECK(vyre_program_destroy(add_in_out));
  VYRE_CHECK(vyre_program_destroy(add_output));
  VYRE_CHECK(vyre_context_destroy(context));
  CU_CHECK(cuDevicePrimaryCtxRelease(device));

  const std::string report = MarkdownReport(header, rows, work);
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
