#include "runtime/copy_workers.h"

#include <algorithm>
#include <cstring>

namespace vyre {

CopyWorkers::~CopyWorkers() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
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

void CopyWorkers::Run() {
  uint32_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || job_.generation != seen; });
      if (stopping_) return;
      job = job_;
      seen = job.generation;
    }
    Work(job);
  }
}

void CopyWorkers::Work(const Job& job) {
  for (;;) {
    uint64_t cursor = cursor_.load(std::memory_order_acquire);
    uint32_t part = 0;
    do {
      if (static_cast<uint32_t>(cursor >> 32) != job.generation) return;
      part = static_cast<uint32_t>(cursor);
      if (part >= job.parts) return;
    } while (!cursor_.compare_exchange_weak(cursor, cursor + 1, std::memory_order_acq_rel));
    const uint64_t begin = uint64_t{part} * job.part_bytes;
    const uint64_t bytes = std::min(job.part_bytes, job.bytes - begin);
    std::memcpy(job.dst + begin, job.src + begin, bytes);
    parts_done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void CopyWorkers::Copy(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  const uint64_t max_parts = std::max<uint64_t>(1, bytes / kMinPartBytes);
  const uint32_t parts = static_cast<uint32_t>(std::min<uint64_t>(threads_, max_parts));
  if (parts <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (helpers_.empty()) Start();
  // Parts on 4 KiB boundaries, so no two threads write into one page.
  const uint64_t part_bytes = ((bytes + parts - 1) / parts + 4095) & ~uint64_t{4095};
  Job job;
  {
    std::lock_guard lock(mu_);
    job_.generation += 1;
    job_.dst = static_cast<unsigned char*>(dst);
    job_.src = static_cast<const unsigned char*>(src);
    job_.bytes = bytes;
    job_.part_bytes = part_bytes;
    job_.parts = static_cast<uint32_t>((bytes + part_bytes - 1) / part_bytes);
    parts_done_.store(0, std::memory_order_relaxed);
    cursor_.store(uint64_t{job_.generation} << 32, std::memory_order_release);
    job = job_;
  }
  wake_.notify_all();
  Work(job);
  // Parts claimed by helpers may still be copying.
  while (parts_done_.load(std::memory_order_acquire) < job.parts) std::this_thread::yield();
}

}  // namespace vyre
