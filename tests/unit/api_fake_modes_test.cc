// Driver situations that need their own process (the driver is loaded once
// per process), each run by its own ctest entry with its own environment:
//   OutOfMemory*   FAKE_CUDA_MEMORY_BYTES=67108864 (a 64 MiB device)
//   NoDevice*      FAKE_CUDA_MODE=no_device
//   OldDriver*     FAKE_CUDA_MODE=old (cuDriverGetVersion says 11080)
//   NoProcDriver*  VYRE_CUDA_DRIVER_LIBRARY=libfake_cuda_noproc.so
//   NoNvrtc*       VYRE_CUDA_NVRTC_LIBRARY=/nonexistent/libnvrtc.so
//   DriverLoad*    VYRE_TEST_DRIVER_CASE=<case> with the environment of that
//                  case (the toolkit's stub library, the fake's stub mode,
//                  FAKE_CUDA_{INIT,VERSION,COUNT}_RESULT): see kLoadCases
// Run without that environment, a suite skips (its ctest entry fails on a skip).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api_fake_fixture.h"

namespace vyre_test {
namespace {

bool EnvIs(const char* name, const char* value) {
  const char* actual = std::getenv(name);
  return actual != nullptr && std::strcmp(actual, value) == 0;
}

bool EnvEndsWith(const char* name, const std::string& suffix) {
  const char* actual = std::getenv(name);
  if (actual == nullptr) return false;
  std::string text = actual;
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------------------
// Out of device memory (a 64 MiB fake device)
// ---------------------------------------------------------------------------

constexpr uint64_t kDeviceBytes = 64ull << 20;
constexpr uint64_t kMiB = 1ull << 20;

class OutOfMemoryTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    if (!EnvIs("FAKE_CUDA_MEMORY_BYTES", std::to_string(kDeviceBytes).c_str())) {
      GTEST_SKIP() << "needs FAKE_CUDA_MEMORY_BYTES=" << kDeviceBytes;
    }
    FakeDriverTest::SetUp();
  }
  void TearDown() override {
    if (IsSkipped()) return;
    FakeDriverTest::TearDown();
  }
};

void ExpectUsable(vyre_context context) {
  vyre_buffer buffer = MakeBuffer(context, kMiB);
  std::vector<uint32_t> data = RandomNonZeroU32(kMiB / 4, 90);
  std::vector<uint32_t> back(kMiB / 4, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), kMiB));
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, 0, back.data(), kMiB));
  EXPECT_TRUE(SameU32(back, data));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(OutOfMemoryTest, DeviceReportsTheCapacity) {
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_context_device_info(context_, &info));
  EXPECT_EQ(info.total_memory_bytes, kDeviceBytes);
}

TEST_F(OutOfMemoryTest, AllocLargerThanTheDevice) {
  vyre_telemetry before = Telemetry(context_);
  for (uint64_t bytes : {2 * kDeviceBytes, kDeviceBytes + 1, uint64_t{1} << 40}) {
    vyre_buffer buffer{0};
    EXPECT_VYRE_ERROR(vyre_buffer_alloc(context_, bytes, &buffer), VYRE_STATUS_OUT_OF_MEMORY);
    EXPECT_NE(LastErrorMessage().find(std::to_string(bytes)), std::string::npos)
        << "the message should give the requested bytes (" << bytes
        << "): " << LastErrorMessage();
    EXPECT_EQ(buffer.bits, 0u);
  }
  vyre_telemetry after = Telemetry(context_);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live);
  EXPECT_EQ(after.live_buffers, before.live_buffers);
  ExpectUsable(context_);
}

TEST_F(OutOfMemoryTest, FillTheDeviceThenFreeAndAllocateAgain) {
  std::vector<vyre_buffer> buffers;
  vyre_status status = VYRE_STATUS_OK;
  for (int i = 0; i < 20 && status == VYRE_STATUS_OK; ++i) {
    vyre_buffer buffer{0};
    status = vyre_buffer_alloc(context_, 8 * kMiB, &buffer);
    if (status == VYRE_STATUS_OK) buffers.push_back(buffer);
  }
  EXPECT_VYRE_ERROR(status, VYRE_STATUS_OUT_OF_MEMORY);
  EXPECT_GE(buffers.size(), 6u) << "a 64 MiB device should hold six or more 8 MiB buffers";
  EXPECT_LE(buffers.size(), 8u);
  ASSERT_FALSE(buffers.empty());
  ASSERT_VYRE_OK(vyre_buffer_free(buffers.back()));
  buffers.pop_back();
  vyre_buffer again{0};
  EXPECT_VYRE_OK(vyre_buffer_alloc(context_, 8 * kMiB, &again));
  if (again.bits != 0) buffers.push_back(again);
  for (vyre_buffer buffer : buffers) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  ExpectUsable(context_);
}

TEST_F(OutOfMemoryTest, DispatchThatDoesNotFitThenOneThatDoes) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_telemetry before = Telemetry(context_);
  {
    const size_t n = 24 * kMiB / 4;  // 3 x 24 MiB > 64 MiB
    std::vector<uint32_t> a = RandomNonZeroU32(n, 91), b = RandomNonZeroU32(n, 92);
    std::vector<uint32_t> out(n, kPoison);
    DispatchSpec spec;
    spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                     HostOut(out.data(), ByteSize(out))};
    spec.param_words = {static_cast<uint32_t>(n)};
    vyre_dispatch_desc desc = spec.Desc();
    EXPECT_VYRE_ERROR(vyre_dispatch(add, &desc, nullptr), VYRE_STATUS_OUT_OF_MEMORY);
    EXPECT_EQ(out[0], kPoison);
    EXPECT_EQ(out[n - 1], kPoison);
  }
  ASSERT_VYRE_OK(vyre_context_trim(context_));
  vyre_telemetry after = Telemetry(context_);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live) << "the failed dispatch leaked";
  EXPECT_EQ(after.live_pendings, 0u);
  {
    const size_t n = 4 * kMiB / 4;
    std::vector<uint32_t> a = RandomNonZeroU32(n, 93), b = RandomNonZeroU32(n, 94);
    std::vector<uint32_t> out(n, kPoison);
    DispatchSpec spec;
    spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                     HostOut(out.data(), ByteSize(out))};
    spec.param_words = {static_cast<uint32_t>(n)};
    vyre_dispatch_desc desc = spec.Desc();
    ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
    EXPECT_TRUE(SameU32(out, CpuAdd(a, b)));
  }
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(OutOfMemoryTest, CachedPoolMemoryIsTrimmedUnderPressure) {
  // A dispatch leaves transient buffers cached; a resident allocation that
  // needs that memory must still succeed (pools trim on pressure).
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 8 * kMiB / 4;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 95), b = RandomNonZeroU32(n, 96);
  std::vector<uint32_t> out(n, kPoison);
  DispatchSpec spec;
  spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                   HostOut(out.data(), ByteSize(out))};
  spec.param_words = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = spec.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
  EXPECT_TRUE(SameU32(out, CpuAdd(a, b)));
  uint64_t cached = Telemetry(context_).transient_pool_cached_bytes;
  vyre_buffer big{0};
  EXPECT_VYRE_OK(vyre_buffer_alloc(context_, kDeviceBytes - 8 * kMiB, &big))
      << "with " << cached << " bytes cached in the transient pool";
  if (big.bits != 0) {
    EXPECT_VYRE_OK(vyre_buffer_free(big));
  }
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ---------------------------------------------------------------------------
// A driver without devices
// ---------------------------------------------------------------------------

class NoDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EnvIs("FAKE_CUDA_MODE", "no_device")) GTEST_SKIP() << "needs FAKE_CUDA_MODE=no_device";
  }
};

TEST_F(NoDeviceTest, DeviceCountIsZero) {
  uint32_t count = 99;
  ASSERT_VYRE_OK(vyre_device_count(&count));
  EXPECT_EQ(count, 0u);
}

TEST_F(NoDeviceTest, ContextCreateSaysNoDevice) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_NO_DEVICE);
  EXPECT_EQ(context.bits, 0u);
}

TEST_F(NoDeviceTest, DeviceInfoSaysNoDevice) {
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  EXPECT_VYRE_ERROR(vyre_device_info_get(0, &info), VYRE_STATUS_NO_DEVICE);
}

// ---------------------------------------------------------------------------
// Drivers older than CUDA 12.0
// ---------------------------------------------------------------------------

void ExpectDriverTooOld() {
  uint32_t count = 0;
  EXPECT_VYRE_ERROR(vyre_device_count(&count), VYRE_STATUS_DRIVER_TOO_OLD);
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  EXPECT_VYRE_ERROR(vyre_device_info_get(0, &info), VYRE_STATUS_DRIVER_TOO_OLD);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_DRIVER_TOO_OLD);
  EXPECT_EQ(context.bits, 0u);
  // The outcome is remembered.
  EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_DRIVER_TOO_OLD);
}

TEST(OldDriverTest, VersionBelow12000IsTooOld) {
  if (!EnvIs("FAKE_CUDA_MODE", "old")) GTEST_SKIP() << "needs FAKE_CUDA_MODE=old";
  ExpectDriverTooOld();
}

TEST(NoProcDriverTest, DriverWithoutGetProcAddressIsTooOld) {
  if (!EnvEndsWith("VYRE_CUDA_DRIVER_LIBRARY", "libfake_cuda_noproc.so")) {
    GTEST_SKIP() << "needs VYRE_CUDA_DRIVER_LIBRARY=.../libfake_cuda_noproc.so";
  }
  ExpectDriverTooOld();
}

// ---------------------------------------------------------------------------
// Loading the driver goes wrong: the status names the cause truly
// ---------------------------------------------------------------------------

struct LoadCase {
  const char* name;      // VYRE_TEST_DRIVER_CASE
  vyre_status status;    // every call that needs the driver
  int32_t cu_result;     // the CUresult the error carries
  std::vector<const char*> says;      // in the first line
  std::vector<const char*> never;     // not in the first line
};

const std::vector<LoadCase>& LoadCases() {
  static const std::vector<LoadCase> cases = {
      // FAKE_CUDA_MODE=stub: every call answers CUDA_ERROR_STUB_LIBRARY, as the
      // toolkit's stub does; VYRE_CUDA_DRIVER_LIBRARY names it.
      {"fake_stub", VYRE_STATUS_NO_DRIVER, 34,
       {"is the CUDA toolkit's link stub", "CUDA_ERROR_STUB_LIBRARY",
        "Fix: load the real driver instead: set VYRE_CUDA_DRIVER_LIBRARY to the NVIDIA "
        "driver's libcuda.so.1"},
       {"DRIVER_TOO_OLD", "is missing", "CUDA 12.0"}},
      // The CUDA toolkit's own lib64/stubs/libcuda.so through
      // VYRE_CUDA_DRIVER_LIBRARY.
      {"toolkit_stub", VYRE_STATUS_NO_DRIVER, 34,
       {"/stubs/libcuda.so\" is the CUDA toolkit's link stub", "VYRE_CUDA_DRIVER_LIBRARY"},
       {"is missing", "CUDA 12.0"}},
      // The stubs directory on LD_LIBRARY_PATH (VYRE_CUDA_DRIVER_LIBRARY empty).
      {"stub_on_loader_path", VYRE_STATUS_NO_DRIVER, 34,
       {"/stubs/libcuda.so.1\" is the CUDA toolkit's link stub",
        "remove the toolkit's stubs directory from LD_LIBRARY_PATH"},
       {"is missing", "CUDA 12.0"}},
      // FAKE_CUDA_INIT_RESULT=803: libcuda and the kernel module differ.
      {"driver_mismatch", VYRE_STATUS_NO_DRIVER, 803,
       {"cuInit returned CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "kernel module"},
       {"older", "install an NVIDIA driver that supports"}},
      // FAKE_CUDA_INIT_RESULT=46: the device is held by another process.
      {"device_unavailable", VYRE_STATUS_NO_DEVICE, 46,
       {"cuInit returned CUDA_ERROR_DEVICE_UNAVAILABLE", "compute mode"},
       {}},
      // FAKE_CUDA_INIT_RESULT=804: a forward-compatibility driver refuses the GPU.
      {"compat_unsupported", VYRE_STATUS_NO_DEVICE, 804,
       {"cuInit returned CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "cuda-compat"},
       {}},
      // FAKE_CUDA_INIT_RESULT=999: cuInit fails for no stated reason.
      {"init_unknown", VYRE_STATUS_NO_DRIVER, 999,
       {"cuInit returned CUDA_ERROR_UNKNOWN", "kernel module is loaded"},
       {}},
      // FAKE_CUDA_COUNT_RESULT=999: counting devices fails; not "0 devices".
      {"count_fails", VYRE_STATUS_DRIVER_ERROR, 999,
       {"cuDeviceGetCount returned CUDA_ERROR_UNKNOWN"},
       {"reports no device"}},
      // FAKE_CUDA_VERSION_RESULT=999: no version; not "supports CUDA 0.0".
      {"version_fails", VYRE_STATUS_DRIVER_ERROR, 999,
       {"cuDriverGetVersion returned CUDA_ERROR_UNKNOWN"},
       {"CUDA 0.0", "older than"}},
  };
  return cases;
}

void ExpectLoadFailure(vyre_status status, const LoadCase& c) {
  EXPECT_VYRE_ERROR(status, c.status);
  const LastError e = ReadLastError();
  EXPECT_EQ(e.cu_result, c.cu_result) << e.message;
  const std::string first_line = e.message.substr(0, e.message.find('\n'));
  for (const char* part : c.says) {
    EXPECT_NE(first_line.find(part), std::string::npos) << "lacks \"" << part << "\": " << e.message;
  }
  for (const char* part : c.never) {
    EXPECT_EQ(first_line.find(part), std::string::npos) << "says \"" << part << "\": " << e.message;
  }
}

TEST(DriverLoadTest, EveryCallNamesTheCause) {
  const char* name = std::getenv("VYRE_TEST_DRIVER_CASE");
  if (name == nullptr) GTEST_SKIP() << "needs VYRE_TEST_DRIVER_CASE (ctest sets it)";
  const LoadCase* found = nullptr;
  for (const LoadCase& c : LoadCases()) {
    if (std::strcmp(c.name, name) == 0) found = &c;
  }
  ASSERT_NE(found, nullptr) << "unknown VYRE_TEST_DRIVER_CASE " << name;
  const LoadCase& c = *found;
  uint32_t count = 7;
  ExpectLoadFailure(vyre_device_count(&count), c);
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  ExpectLoadFailure(vyre_device_info_get(0, &info), c);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  ExpectLoadFailure(vyre_context_create(&desc, &context), c);
  EXPECT_EQ(context.bits, 0u);
  // The outcome is remembered.
  ExpectLoadFailure(vyre_context_create(&desc, &context), c);
}

// ---------------------------------------------------------------------------
// NVRTC missing: a CUDA C++ program cannot be built, everything else works
// ---------------------------------------------------------------------------

class NoNvrtcTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    if (!EnvIs("VYRE_CUDA_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so")) {
      GTEST_SKIP() << "needs VYRE_CUDA_NVRTC_LIBRARY=/nonexistent/libnvrtc.so (ctest sets it)";
    }
    FakeDriverTest::SetUp();
  }
};

TEST_F(NoNvrtcTest, CudaSourceProgramIsNvrtcUnavailable) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_CUDA_SOURCE;
  spec.code = "extern \"C\" __global__ void vyre_test_add_u32() {}";
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program),
                    VYRE_STATUS_NVRTC_UNAVAILABLE);
  EXPECT_EQ(program.bits, 0u);
  // PTX programs do not need NVRTC.
  ProgramSpec ptx = AddSpec();
  vyre_program_desc ptx_desc = ptx.Desc();
  ASSERT_VYRE_OK(vyre_program_create(context_, &ptx_desc, &program));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

}  // namespace
}  // namespace vyre_test
