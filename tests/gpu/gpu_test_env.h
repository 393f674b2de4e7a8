// Shared helpers for the GPU test suite (tests/gpu).
//
// Every test derives from vyre_test::GpuTest. Its SetUp asks vyre_device_count
// whether a GPU is usable; without one the test is skipped, unless the
// environment sets VYRE_CUDA_REQUIRE_GPU=1, in which case it fails with the
// library's last-error message. With a GPU it creates a context on device 0.
//
// Status checks print the status name and vyre_last_error's message:
//   ASSERT_VYRE_OK(vyre_buffer_alloc(ctx, bytes, buffer.out()));
//   EXPECT_VYRE_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_buffer_free(stale));
#ifndef VYRE_TESTS_GPU_GPU_TEST_ENV_H_
#define VYRE_TESTS_GPU_GPU_TEST_ENV_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "descriptors.h"
#include "vyre_cuda.h"

// PTX of tests/gpu/kernels.cu (NUL-terminated), embedded by vyre_embed_ptx.
extern const char vyre_gpu_test_kernels_ptx[];

// Lets gtest print statuses by name in EXPECT_EQ failures.
inline void PrintTo(vyre_status status, std::ostream* os) { *os << vyre_status_name(status); }

namespace vyre_test {

// ---------------------------------------------------------------------------
// Status checking
// ---------------------------------------------------------------------------

// This thread's last-error message (empty when none). Does not clear it.
std::string LastErrorMessage();

// "VYRE_STATUS_X (CUresult N): <message>" for this thread's last error.
std::string DescribeLastError();

// Success when actual == expected; otherwise a failure naming `expression`,
// both statuses and the last-error message. Call it straight after the vyre
// call, before any other vyre call replaces the last error.
::testing::AssertionResult StatusIs(vyre_status actual, vyre_status expected,
                                    const char* expression);

#define ASSERT_VYRE_STATUS(expected, expr) \
  ASSERT_TRUE(::vyre_test::StatusIs((expr), (expected), #expr))
#define EXPECT_VYRE_STATUS(expected, expr) \
  EXPECT_TRUE(::vyre_test::StatusIs((expr), (expected), #expr))
#define ASSERT_VYRE_OK(expr) ASSERT_VYRE_STATUS(VYRE_STATUS_OK, expr)
#define EXPECT_VYRE_OK(expr) EXPECT_VYRE_STATUS(VYRE_STATUS_OK, expr)

// Success when `message` contains every one of `needles`.
::testing::AssertionResult MessageContains(const std::string& message,
                                           const std::vector<std::string>& needles);

// True when VYRE_CUDA_REQUIRE_GPU=1: no usable GPU is then a failure.
bool GpuRequired();

// True when VYRE_CUDA_REQUIRE_GPUS=2 (the 2-GPU machine's run): a test that
// needs two devices then fails instead of skipping with one.
bool TwoGpusRequired();

// In a test's body or SetUp: skips (or, under VYRE_CUDA_REQUIRE_GPUS=2,
// fails) unless vyre_device_count reports at least two devices.
#define VYRE_GPU_NEED_TWO_DEVICES()                                                       \
  do {                                                                                  \
    uint32_t vyre_gpu_count_ = 0;                                                       \
    ASSERT_VYRE_OK(vyre_device_count(&vyre_gpu_count_));                                \
    if (vyre_gpu_count_ < 2) {                                                          \
      if (::vyre_test::TwoGpusRequired()) {                                             \
        FAIL() << "VYRE_CUDA_REQUIRE_GPUS=2 but vyre_device_count reports "             \
               << vyre_gpu_count_ << " device(s); check nvidia-smi and "                \
               << "CUDA_VISIBLE_DEVICES";                                               \
      }                                                                                 \
      GTEST_SKIP() << "needs two GPUs; " << vyre_gpu_count_                             \
                   << " visible (set VYRE_CUDA_REQUIRE_GPUS=2 to fail instead)";        \
    }                                                                                   \
  } while (0)

// For a test this device cannot run (no cooperative launch, too little
// shared memory, no NVRTC): a skip, but with VYRE_CUDA_REQUIRE_GPU=1 a
// failure, so a required GPU run never passes with tests left out.
#define VYRE_GPU_SKIP_OR_FAIL(reason)                                                     \
  do {                                                                                  \
    if (::vyre_test::GpuRequired()) {                                                   \
      FAIL() << "VYRE_CUDA_REQUIRE_GPU=1 but the test cannot run here: " << reason;     \
    } else {                                                                            \
      GTEST_SKIP() << reason;                                                           \
    }                                                                                   \
  } while (0)

// ---------------------------------------------------------------------------
// Handles that release themselves
// ---------------------------------------------------------------------------

template <typename Handle, vyre_status (*Destroy)(Handle)>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle handle) : handle_(handle) {}
  ~UniqueHandle() { reset(); }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(other.release()) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = other.release();
    }
    return *this;
  }

  Handle get() const { return handle_; }
  bool valid() const { return handle_.bits != 0; }
  // Releases any held object and returns where a create call writes the new one.
  Handle* out() {
    reset();
    return &handle_;
  }
  // Gives up ownership without destroying (e.g. after the test freed it itself).
  Handle release() {
    Handle handle = handle_;
    handle_ = Handle{};
    return handle;
  }
  void reset() {
    if (handle_.bits != 0) {
      const vyre_status status = Destroy(handle_);
      EXPECT_EQ(status, VYRE_STATUS_OK) << "releasing a handle in a destructor: "
                                        << DescribeLastError();
      handle_ = Handle{};
    }
  }

 private:
  Handle handle_{};
};

using ContextHandle = UniqueHandle<vyre_context, vyre_context_destroy>;
using BufferHandle = UniqueHandle<vyre_buffer, vyre_buffer_free>;
using ProgramHandle = UniqueHandle<vyre_program, vyre_program_destroy>;
using PendingHandle = UniqueHandle<vyre_pending, vyre_pending_release>;
using GraphHandle = UniqueHandle<vyre_graph, vyre_graph_destroy>;
using SequenceHandle = UniqueHandle<vyre_sequence, vyre_sequence_destroy>;

// ---------------------------------------------------------------------------
// Random data (never zero)
// ---------------------------------------------------------------------------

// A std::mt19937_64 seeded from std::random_device, or from VYRE_TEST_SEED to
// reproduce a run. The seed is printed when the source is made.
class RandomSource {
 public:
  RandomSource();
  explicit RandomSource(uint64_t seed) : seed_(seed), engine_(seed) {}

  uint64_t seed() const { return seed_; }
  std::mt19937_64& engine() { return engine_; }

  std::vector<uint32_t> NonZeroU32(size_t count);
  // Uniform in [low, high).
  std::vector<float> UniformF32(size_t count, float low, float high);
  uint64_t Below(uint64_t bound) { return engine_() % bound; }

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

// ---------------------------------------------------------------------------
// Descriptors
// ---------------------------------------------------------------------------

// Decl, HostIn, HostOut, HostInOut, Resident and ByteSize: descriptors.h
// (tests/support, shared with the CPU suites).

// A dispatch over `bindings` with u32 parameter words `params`. The desc
// points into both vectors: keep them alive and unmoved while it is used.
vyre_dispatch_desc DispatchDesc(const std::vector<vyre_dispatch_binding>& bindings,
                                const std::vector<uint32_t>& params);

// A program of the embedded test PTX with the default calling convention.
::testing::AssertionResult CreateTestProgram(vyre_context context, const char* entry,
                                             const std::vector<vyre_binding_decl>& bindings,
                                             uint32_t workgroup_x, ProgramHandle* out);

// vyre_buffer_alloc + vyre_buffer_upload of `values`.
::testing::AssertionResult CreateBufferWith(vyre_context context,
                                            const std::vector<uint32_t>& values,
                                            BufferHandle* out);

// vyre_buffer_download of the whole buffer into `values` (resized to `count`).
::testing::AssertionResult DownloadU32(vyre_buffer buffer, size_t count,
                                       std::vector<uint32_t>* values);

vyre_telemetry Telemetry(vyre_context context);  // ADD_FAILURE on error

// ---------------------------------------------------------------------------
// Result checks
// ---------------------------------------------------------------------------

// Compares every element of `actual` with expected(i); reports how many differ
// and the first few mismatches.
::testing::AssertionResult AllElementsEqual(const std::vector<uint32_t>& actual,
                                            const std::function<uint32_t(size_t)>& expected,
                                            const char* what);

// The value every byte of which is 0xFF: poison for outputs.
constexpr uint32_t kPoisonU32 = 0xFFFFFFFFu;

// ---------------------------------------------------------------------------
// The fixture
// ---------------------------------------------------------------------------

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;

  vyre_context context() const { return context_.get(); }
  const vyre_device_info& device() const { return device_; }
  RandomSource& rng() { return rng_; }

 private:
  ContextHandle context_;
  vyre_device_info device_ = VYRE_DEVICE_INFO_INIT;
  RandomSource rng_;
};

}  // namespace vyre_test

#endif  // VYRE_TESTS_GPU_GPU_TEST_ENV_H_
