// Per-context counters. Relaxed atomics: they are statistics, read as a
// snapshot, and must cost nothing measurable on the dispatch path.
#ifndef VYRE_RUNTIME_CONTEXT_TELEMETRY_H_
#define VYRE_RUNTIME_CONTEXT_TELEMETRY_H_

#include <atomic>
#include <cstdint>

namespace vyre {

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  void Sub(uint64_t n) { value_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

struct Telemetry {
  Counter h2d_bytes, h2d_operations, d2h_bytes, d2h_operations, memset_operations;
  Counter kernel_launches, sync_points, dispatches;
  Counter transient_pool_hits, transient_pool_misses, transient_pool_cached_bytes;
  Counter pinned_pool_hits, pinned_pool_misses, pinned_pool_cached_bytes;
  Counter module_cache_hits, module_cache_misses, module_loads;
  Counter device_bytes_live, pinned_bytes_live;
  Counter live_buffers, live_programs, live_pendings;
  Counter graph_records, graph_replays, graph_uploads_skipped, graph_launches, sequence_runs;
  Counter live_graphs, live_sequences;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_CONTEXT_TELEMETRY_H_
