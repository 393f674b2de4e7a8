// A few threads that split one large memcpy between them. Copying pageable
// memory into pinned chunks on one thread runs at a fraction of PCIe speed;
// several threads together keep up with the DMA engine.
#ifndef VYRE_RUNTIME_COPY_WORKERS_H_
#define VYRE_RUNTIME_COPY_WORKERS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace vyre {

class CopyWorkers {
 public:
  // `threads` counts the calling thread: threads - 1 helpers, started on the
  // first copy large enough to need them.
  explicit CopyWorkers(uint32_t threads) : threads_(threads < 1 ? 1 : threads) {}
  ~CopyWorkers();
  CopyWorkers(const CopyWorkers&) = delete;
  CopyWorkers& operator=(const CopyWorkers&) = delete;

  // memcpy(dst, src, bytes), in parts of at least kMinPartBytes spread over
  // the helpers and the caller; returns once every byte is copied. One copy
  // at a time (callers serialise; the staging ring holds its lock).
  void Copy(void* dst, const void* src, uint64_t bytes);

  uint32_t threads() const { return threads_; }

  // Below this a part is not worth waking a thread for. Parts are claimed
  // as threads arrive, so a helper that wakes late costs nothing: the
  // caller copies what is left. 64 KiB lets the smallest staging piece
  // (1 MiB, staging_ring.cc) spread over every default copy thread.
  static constexpr uint64_t kMinPartBytes = uint64_t{64} << 10;

 private:
  // One memcpy, cut into parts.
  struct Job {
    uint32_t generation = 0;
    unsigned char* dst = nullptr;
    const unsigned char* src = nullptr;
    uint64_t bytes = 0;
    uint64_t part_bytes = 0;
    uint32_t parts = 0;
  };

  void Start();
  void Run();
  // Copies parts of `job` until none is left to claim.
  void Work(const Job& job);

  const uint32_t threads_;
  std::vector<std::thread> helpers_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_

  Job job_;  // the current job; guarded by mu_, copied out by helpers
  // (generation << 32) | next unclaimed part. A helper claims a part only
  // while the generation is its job's, so one that wakes late can never
  // take a part of a later job with an earlier job's pointers.
  std::atomic<uint64_t> cursor_{0};
  std::atomic<uint32_t> parts_done_{0};
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_COPY_WORKERS_H_
