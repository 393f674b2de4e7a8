// What the two-GPU benchmarks (peer_copy_bench.cc, nccl_allreduce_bench.cc)
// share: fail-fast checks of vyre and raw driver calls, a host clock, and
// medians of timed repetitions.
#ifndef VYRE_BENCH_BENCH_UTIL_H_
#define VYRE_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "vyre_cuda.h"

#define CHECK_VYRE(expr)                                                           \
  do {                                                                             \
    vyre_status s_ = (expr);                                                       \
    if (s_ != VYRE_STATUS_OK) {                                                    \
      char m_[1024] = {0};                                                         \
      vyre_last_error(nullptr, nullptr, m_, sizeof m_, nullptr);                   \
      std::fprintf(stderr, "%s failed: %s: %s\n", #expr, vyre_status_name(s_), m_); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
#define CHECK_CU(expr)                                                 \
  do {                                                                 \
    CUresult r_ = (expr);                                              \
    if (r_ != CUDA_SUCCESS) {                                          \
      std::fprintf(stderr, "%s failed: CUresult %d\n", #expr, int(r_)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

namespace vyre_bench {

constexpr int kWarmup = 10;

inline double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Median microseconds of `reps` runs of `body` (each timed alone), after
// kWarmup untimed ones.
inline double MedianUs(int reps, const std::function<void()>& body) {
  for (int i = 0; i < kWarmup; ++i) body();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const double start = NowUs();
    body();
    times.push_back(NowUs() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Prints the report and writes it to $VYRE_BENCH_OUT when set.
inline void Publish(const std::string& report) {
  std::printf("\n%s", report.c_str());
  if (const char* out = std::getenv("VYRE_BENCH_OUT")) {
    if (FILE* f = std::fopen(out, "w")) {
      std::fputs(report.c_str(), f);
      std::fclose(f);
    }
  }
}

}  // namespace vyre_bench

#endif  // VYRE_BENCH_BENCH_UTIL_H_
