#include "runtime/transfer/copy_workers.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace vyre {

namespace {

// One step of a spin-wait: a pause instruction for the first steps (the
// wait is usually a few microseconds), then a yield to the scheduler, so
// that watching threads never hold a core that a runnable thread (the
// caller, when more copy threads than cores were asked for) needs.
inline void SpinStep(uint32_t step) {
  if (step >= 1024) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// memcpy with streaming (non-temporal) stores where the CPU has them, then
// a store fence: the parts-done counter that follows must not become
// visible before the data (streaming stores are weakly ordered).
void StreamingCopy(unsigned char* dst, const unsigned char* src, uint64_t bytes) {
#if defined(__SSE2__)
  const uint64_t head = std::min<uint64_t>(bytes, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  std::memcpy(dst, src, head);
  uint64_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CopyWorkers::~CopyWorkers() {
  stopping_.store(true);
  WakeSleepers();
  for (std::thread& t : helpers_) t.join();
}

void CopyWorkers::WakeSleepers() {
  // Taking the lock orders this after a sleeper's check of its condition,
  // so the notification cannot fall between its check and its wait.
  { std::lock_guard lock(mu_); }
  wake_.notify_all();
}

void CopyWorkers::Start() {
  helpers_.reserve(threads_ - 1);
  for (uint32_t i = 1; i < threads_; ++i) {
    try {
      helpers_.emplace_back([this] { Run(); });
    } catch (...) {
      // No thread to spare: the copies still complete on fewer threads.
      break;
    }
  }
}

bool CopyWorkers::ReadJob(Job* job) const {
  const uint64_t before = sequence_.load(std::memory_order_acquire);
  if (before & 1u) return false;
  job->dst = job_dst_.load(std::memory_order_relaxed);
  job->src = job_src_.load(std::memory_order_relaxed);
  job->bytes = job_bytes_.load(std::memory_order_relaxed);
  job->part_bytes = job_part_bytes_.load(std::memory_order_relaxed);
  job->parts = job_parts_.load(std::memory_order_relaxed);
  job->streaming = job_streaming_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (sequence_.load(std::memory_order_relaxed) != before) return false;
  job->generation = static_cast<uint32_t>(before / 2);
  return true;
}

void CopyWorkers::Run() {
  uint32_t seen = 0;
  auto next_job = [&] {
    return stopping_.load() || static_cast<uint32_t>(sequence_.load() / 2) != seen;
  };
  for (;;) {
    // Watch for a new copy, then sleep if none came.
    const int64_t deadline = NowNs() + kWatchNs;
    bool arrived = false;
    for (uint32_t step = 0;; ++step) {
      arrived = next_job();
      if (arrived || ((step & 63u) == 0 && NowNs() > deadline)) break;
      SpinStep(step);
    }
    if (!arrived) {
      // Counted first, so that a caller publishing after the check below
      // sees a sleeper and wakes it (both sides sequentially consistent).
      sleepers_.fetch_add(1);
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, next_job);
      }
      sleepers_.fetch_sub(1);
    }
    if (stopping_.load()) return;
    Job job;
    for (uint32_t step = 0; !ReadJob(&job); ++step) SpinStep(step);
    seen = job.generation;
    Work(job);
  }
}

void CopyWorkers::Work(const Job& job) {
  for (uint32_t step = 0;; ++step) {
    uint64_t cursor = cursor_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(cursor >> 32) + 1u == job.generation) {
      SpinStep(step);  // read the job before the caller opened its claims
      continue;
    }
    uint32_t part = 0;
    do {
      if (static_cast<uint32_t>(cursor >> 32) != job.generation) return;
      part = static_cast<uint32_t>(cursor);
      if (part >= job.parts) return;
    } while (!cursor_.compare_exchange_weak(cursor, cursor + 1, std::memory_order_acq_rel));
    const uint64_t begin = uint64_t{part} * job.part_bytes;
    const uint64_t bytes = std::min(job.part_bytes, job.bytes - begin);
    if (job.streaming) {
      StreamingCopy(job.dst + begin, job.src + begin, bytes);
    } else {
      std::memcpy(job.dst + begin, job.src + begin, bytes);
    }
    parts_done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void CopyWorkers::Copy(void* dst, const void* src, uint64_t bytes) {
  StartCopy(dst, src, bytes, /*streaming=*/false);
  FinishCopy();
}

void CopyWorkers::CopyForDevice(void* dst, const void* src, uint64_t bytes) {
  StartCopy(dst, src, bytes, /*streaming=*/true);
  FinishCopy();
}

void CopyWorkers::StartCopy(void* dst, const void* src, uint64_t bytes, bool streaming) {
  Job job;
  job.dst = static_cast<unsigned char*>(dst);
  job.src = static_cast<const unsigned char*>(src);
  job.bytes = bytes;
  job.streaming = streaming;
  job.part_bytes = bytes;
  job.parts = bytes == 0 ? 0 : 1;
  const uint64_t max_parts = std::max<uint64_t>(1, bytes / kMinPartBytes);
  const uint32_t parts = static_cast<uint32_t>(std::min<uint64_t>(threads_, max_parts));
  if (parts <= 1) {
    started_ = job;  // not worth a helper: the caller copies it in FinishCopy
    return;
  }
  if (helpers_.empty()) Start();
  // Parts on 4 KiB boundaries, so no two threads write into one page.
  job.part_bytes = ((bytes + parts - 1) / parts + 4095) & ~uint64_t{4095};
  job.parts = static_cast<uint32_t>((bytes + job.part_bytes - 1) / job.part_bytes);
  // Claims of the previous job are over (it finished), so the counter and
  // the fields may change; the cursor, published last, opens the claims.
  parts_done_.store(0, std::memory_order_relaxed);
  const uint64_t sequence = sequence_.load(std::memory_order_relaxed);
  sequence_.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  job_dst_.store(job.dst, std::memory_order_relaxed);
  job_src_.store(job.src, std::memory_order_relaxed);
  job_bytes_.store(job.bytes, std::memory_order_relaxed);
  job_part_bytes_.store(job.part_bytes, std::memory_order_relaxed);
  job_parts_.store(job.parts, std::memory_order_relaxed);
  job_streaming_.store(job.streaming, std::memory_order_relaxed);
  sequence_.store(sequence + 2);  // sequentially consistent: see Run's sleepers
  job.generation = static_cast<uint32_t>((sequence + 2) / 2);
  cursor_.store(uint64_t{job.generation} << 32, std::memory_order_release);
  if (sleepers_.load() > 0) WakeSleepers();
  started_ = job;
}

void CopyWorkers::FinishCopy() {
  const Job job = started_;
  started_ = Job();
  if (job.parts == 0) return;
  if (job.parts == 1) {  // one part: never handed to the helpers
    if (job.streaming) {
      StreamingCopy(job.dst, job.src, job.bytes);
    } else {
      std::memcpy(job.dst, job.src, job.bytes);
    }
    return;
  }
  Work(job);
  // Parts claimed by helpers may still be copying (microseconds).
  for (uint32_t step = 0; parts_done_.load(std::memory_order_acquire) < job.parts; ++step) {
    SpinStep(step);
  }
}

}  // namespace vyre
