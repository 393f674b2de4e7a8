// Eight threads dispatching vector add on one context at once, each over its
// own random data, host and resident bindings mixed, each checking its results.
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

constexpr int kThreads = 8;
constexpr int kIterationsPerThread = 25;

// The first failure any thread saw (threads keep going so none deadlocks).
class FailureLog {
 public:
  void Record(int thread, int iteration, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    if (first_.empty()) {
      first_ = "thread " + std::to_string(thread) + " iteration " + std::to_string(iteration) +
               ": " + what;
    }
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }
  std::string first() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  mutable std::mutex mutex_;
  int count_ = 0;
  std::string first_;
};

// One iteration: a + b over n elements, each binding host or resident at
// random. Returns "" on success, else what went wrong.
std::string RunOneVectorAdd(vyre_context context, vyre_program program, RandomSource& rng) {
  const size_t n = 1 + rng.Below(size_t{1} << 16);
  const unsigned placement = static_cast<unsigned>(rng.Below(8));  // bit k: binding k resident
  const std::vector<uint32_t> a = rng.NonZeroU32(n);
  const std::vector<uint32_t> b = rng.NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);
  const uint64_t bytes = ByteSize(a);

  BufferHandle buffers[3];
  std::vector<vyre_dispatch_binding> bindings;
  const std::vector<uint32_t>* inputs[2] = {&a, &b};
  for (int k = 0; k < 3; ++k) {
    const bool resident = (placement >> k) & 1u;
    const std::vector<uint32_t>& initial = k < 2 ? *inputs[k] : out;
    if (resident) {
      if (vyre_buffer_alloc(context, bytes, buffers[k].out()) != VYRE_STATUS_OK ||
          vyre_buffer_upload(buffers[k].get(), 0, initial.data(), bytes) != VYRE_STATUS_OK) {
        return "resident buffer: " + DescribeLastError();
      }
      bindings.push_back(Resident(buffers[k].get()));
    } else if (k < 2) {
      bindings.push_back(HostIn(initial.data(), bytes));
    } else {
      bindings.push_back(HostOut(out.data(), bytes));
    }
  }

  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  if (vyre_dispatch(program, &desc, nullptr) != VYRE_STATUS_OK) {
    return "vyre_dispatch: " + DescribeLastError();
  }
  if (buffers[2].valid() &&
      vyre_buffer_download(buffers[2].get(), 0, out.data(), bytes) != VYRE_STATUS_OK) {
    return "vyre_buffer_download: " + DescribeLastError();
  }
  const ::testing::AssertionResult match =
      AllElementsEqual(out, [&](size_t i) { return a[i] + b[i]; }, "a + b");
  if (!match) {
    return std::string("placement ") + std::to_string(placement) + ", n " + std::to_string(n) +
           ": " + match.message();
  }
  return "";
}

class ThreadsTest : public GpuTest {};

TEST_F(ThreadsTest, EightThreadsShareOneContext) {
  ProgramHandle add;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                {Decl(VYRE_ROLE_INPUT, 4, "a"),
                                 Decl(VYRE_ROLE_INPUT, 4, "b"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                256, &add));
  const vyre_telemetry before = Telemetry(context());

  FailureLog failures;
  std::atomic<int> completed{0};
  const uint64_t base_seed = rng().seed();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomSource thread_rng(base_seed + 1 + static_cast<uint64_t>(t));
      for (int iteration = 0; iteration < kIterationsPerThread; ++iteration) {
        const std::string failure = RunOneVectorAdd(context(), add.get(), thread_rng);
        if (!failure.empty()) {
          failures.Record(t, iteration, failure);
        } else {
          completed.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  EXPECT_EQ(completed.load(), kThreads * kIterationsPerThread);
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.dispatches - before.dispatches,
            static_cast<uint64_t>(kThreads * kIterationsPerThread));
  EXPECT_EQ(after.live_buffers, before.live_buffers);
  EXPECT_EQ(after.live_pendings, 0u);
}

// Threads waiting on pendings made by other threads: each dispatch_async on
// one thread, its wait on another.
TEST_F(ThreadsTest, PendingWaitedOnAnotherThread) {
  ProgramHandle inc;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &inc));
  constexpr int kDispatches = 16;
  const size_t n = 10000;
  std::vector<std::vector<uint32_t>> initial(kDispatches), data(kDispatches);
  std::vector<vyre_pending> pendings(kDispatches);
  for (int d = 0; d < kDispatches; ++d) {
    initial[d] = rng().NonZeroU32(n);
    data[d] = initial[d];
    const std::vector<vyre_dispatch_binding> bindings = {
        HostInOut(data[d].data(), ByteSize(data[d]))};
    const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    ASSERT_VYRE_OK(vyre_dispatch_async(inc.get(), &desc, &pendings[d]));
  }

  FailureLog failures;
  std::vector<std::thread> waiters;
  for (int t = 0; t < kThreads; ++t) {
    waiters.emplace_back([&, t] {
      for (int d = t; d < kDispatches; d += kThreads) {
        if (vyre_pending_wait(pendings[d], VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
            vyre_pending_release(pendings[d]) != VYRE_STATUS_OK) {
          failures.Record(t, d, DescribeLastError());
        }
      }
    });
  }
  for (std::thread& waiter : waiters) waiter.join();

  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  for (int d = 0; d < kDispatches; ++d) {
    EXPECT_TRUE(AllElementsEqual(data[d], [&](size_t i) { return initial[d][i] + 1u; },
                                 "data + 1"))
        << "dispatch " << d;
  }
}

}  // namespace
}  // namespace vyre_test
