// What the files of vyre_egraph_bench share: options, errors, timing, the
// graphs, number formatting, and the entry points of issue 20's cases
// (egraph_bench_growing.cc).
#ifndef VYRE_BENCH_EGRAPH_BENCH_COMMON_H_
#define VYRE_BENCH_EGRAPH_BENCH_COMMON_H_

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "egraph/egraph_columns.h"
#include "vyre_cuda.h"

namespace egraph_bench {

// --- Errors -------------------------------------------------------------------

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "vyre_egraph_bench: %s\n", what.c_str());
  std::exit(1);
}

inline std::string VyreLastError() {
  size_t length = 0;
  vyre_status status = VYRE_STATUS_OK;
  vyre_last_error(&status, nullptr, nullptr, 0, &length);
  std::string message(length + 1, '\0');
  vyre_last_error(nullptr, nullptr, message.data(), message.size(), nullptr);
  message.resize(std::strlen(message.c_str()));
  return std::string(vyre_status_name(status)) + ": " + message;
}

inline void CheckVyre(vyre_status status, const char* expression, int line) {
  if (status != VYRE_STATUS_OK) {
    Die(std::string(expression) + " (line " + std::to_string(line) + ") failed with " +
        VyreLastError());
  }
}

#define VYRE_CHECK(expr) ::egraph_bench::CheckVyre((expr), #expr, __LINE__)

// --- Options ------------------------------------------------------------------

struct Options {
  std::vector<double> sizes_millions = {1, 4, 16};
  size_t graphs = 3;
  uint32_t max_arity = 2;
  uint64_t seed = 1;
  double cpu_seconds = 60;
  double gpu_seconds = 0.5;
  double hbm_tbps = 3.35;
  uint64_t unions = 50;
  bool gpu = true;
  // Issue 20's cases, on the largest synthetic size.
  bool skip_create = false;
  bool skip_one_union = false;
  bool skip_loop = false;
  size_t create_reps = 5;
  size_t union_reps = 11;
  size_t loop_steps = 10;
  double loop_percent = 1;
  uint64_t loop_unions = 1000;
};

// --- Measurement --------------------------------------------------------------

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

// --- E-graphs -----------------------------------------------------------------

struct Graph {
  std::string name;
  double million_rows = 0;  // the synthetic size asked for; 0 for files
  vyre::tools::EgraphColumns columns;
  // Pairs of class ids (2 u32 each) every rebuild unions first.
  std::vector<uint32_t> unions;
  uint64_t rows() const { return columns.rows(); }
};

inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Index of the first difference of two canonical arrays, or -1.
inline int64_t FirstDifference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::min(a.size(), b.size()));
  const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin());
  return mismatch.first == a.end() ? -1 : static_cast<int64_t>(mismatch.first - a.begin());
}

// --- Formatting ---------------------------------------------------------------

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline std::string Format(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  return text;
}

inline std::string Count(uint64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return digits;
}

// A duration with a unit that keeps 3 significant figures readable.
inline std::string Duration(double seconds) {
  if (seconds < 1e-3) return Format("%.1f us", seconds * 1e6);
  if (seconds < 1) return Format("%.2f ms", seconds * 1e3);
  return Format("%.2f s", seconds);
}

inline std::string Ratio(double ratio) {
  if (ratio >= 100) return Format("%.0fx", ratio);
  if (ratio >= 10) return Format("%.1fx", ratio);
  return Format("%.2fx", ratio);
}

// --- Issue 20's cases (egraph_bench_growing.cc) -------------------------------

struct GpuTarget {
  bool available = false;
  vyre_context context{};
  std::string name;     // vyre_device_info.name
  std::string why_not;  // when !available
};

// The first vyre_egraph_image_create of the process.
struct FirstCreate {
  bool measured = false;
  double seconds = 0;
  std::string on;     // the case it ran on
  std::string error;  // a failed create
};

// Creates a GPU image of g (pageable columns), timed, and destroys it: the
// process's first e-graph call.
FirstCreate TimeFirstCreate(const GpuTarget& gpu, const Graph& g);

struct GrowingOutput {
  std::string markdown;               // the cases' report sections
  std::vector<std::string> problems;  // failed checks and calls (exit 1)
};

// Image creation at PCIe speed, one union on a closed image and the
// saturation loop on `g` (the largest synthetic case; null: none was run).
GrowingOutput RunGrowingCases(const Options& options, const GpuTarget& gpu,
                              const FirstCreate& first, const Graph* g);

}  // namespace egraph_bench

#endif  // VYRE_BENCH_EGRAPH_BENCH_COMMON_H_
