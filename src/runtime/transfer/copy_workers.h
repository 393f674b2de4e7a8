// A few threads that split one large memcpy between them. Copying pageable
// memory into pinned chunks on one thread runs at a fraction of PCIe speed;
// several threads together keep up with the DMA engine.
#ifndef VYRE_RUNTIME_TRANSFER_COPY_WORKERS_H_
#define VYRE_RUNTIME_TRANSFER_COPY_WORKERS_H_

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
  // The same into memory the CPU will not read again (pinned staging a DMA
  // reads next): streaming stores, which skip reading each destination line
  // into the cache first and leave the cache to the caller's data.
  void CopyForDevice(void* dst, const void* src, uint64_t bytes);

  // Copy or CopyForDevice in two halves: StartCopy hands the parts to the
  // helpers and returns at once, so that the caller can make driver calls
  // (the previous piece's DMA) while they copy; FinishCopy then copies the
  // parts no helper took and returns once every byte is copied. Every
  // StartCopy is followed by its FinishCopy before the next copy, and
  // before `src` or `dst` may be released.
  void StartCopy(void* dst, const void* src, uint64_t bytes, bool streaming);
  void FinishCopy();

  uint32_t threads() const { return threads_; }

  // Below this a part is not worth waking a thread for. Parts are claimed
  // as threads arrive, so a helper that wakes late costs nothing: the
  // caller copies what is left. 64 KiB lets the smallest staging piece
  // (512 KiB, staging_ring.cc) spread over every default copy thread.
  static constexpr uint64_t kMinPartBytes = uint64_t{64} << 10;

  // How long an idle helper watches for the next copy before it sleeps.
  // The copies of one host dispatch come tens of microseconds apart, and a
  // helper woken from sleep arrived too late to take a part: on an H100
  // host, 8 watching threads copy 1 MiB into pinned memory in 6 us, where
  // with sleeping helpers the caller copied nearly all of a 1 MiB-per-buffer
  // dispatch's two inputs alone (87 us; one thread runs at 13 GB/s).
  static constexpr int64_t kWatchNs = 200'000;

 private:
  // One memcpy, cut into parts.
  struct Job {
    uint32_t generation = 0;
    unsigned char* dst = nullptr;
    const unsigned char* src = nullptr;
    uint64_t bytes = 0;
    uint64_t part_bytes = 0;
    uint32_t parts = 0;
    bool streaming = false;
  };

  void Start();
  void Run();
  void WakeSleepers();
  // The current job, read without a lock (a sequence lock: false while the
  // caller is writing one).
  bool ReadJob(Job* job) const;
  // Copies parts of `job` until none is left to claim.
  void Work(const Job& job);

  const uint32_t threads_;
  std::vector<std::thread> helpers_;

  // Sleeping helpers wait on wake_ for a new sequence or the end. (A
  // standard mutex: ThreadSanitizer sees its ordering, not that of a
  // prebuilt Abseil's.)
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint32_t> sleepers_{0};

  // The job: odd sequence while the caller writes the fields, generation =
  // sequence / 2 once it is even again. No lock: helpers that watched for a
  // job and then queued for a mutex behind each other slept in the kernel
  // (a 1 MiB copy took 20 us on 8 threads where 8 threads reading the job
  // freely took 6).
  std::atomic<uint64_t> sequence_{0};
  std::atomic<unsigned char*> job_dst_{nullptr};
  std::atomic<const unsigned char*> job_src_{nullptr};
  std::atomic<uint64_t> job_bytes_{0}, job_part_bytes_{0};
  std::atomic<uint32_t> job_parts_{0};
  std::atomic<bool> job_streaming_{false};
  // (generation << 32) | next unclaimed part. A helper claims a part only
  // while the generation is its job's, so one that wakes late can never
  // take a part of a later job with an earlier job's pointers. Each counter
  // on its own cache line: every thread writes them.
  alignas(64) std::atomic<uint64_t> cursor_{0};
  alignas(64) std::atomic<uint32_t> parts_done_{0};

  // The caller's copy between StartCopy and FinishCopy (parts == 0: none;
  // parts == 1: the caller copies it all in FinishCopy).
  Job started_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_TRANSFER_COPY_WORKERS_H_
