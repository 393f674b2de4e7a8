// Real results through the fake driver: buffers, dispatch over host and
// resident data (the fake runs the test kernels on the host), output ranges,
// fixpoint iteration, OUTPUT zeroing, pending dispatches, timing, telemetry,
// logging and threads. Every output is poisoned first and compared element by
// element with a CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api_fake_fixture.h"

namespace vyre_test {
namespace {

using ResultsTest = FakeDriverTest;

// Host vector add with poisoned output.
struct HostAdd {
  explicit HostAdd(size_t n, uint32_t seed = 1)
      : a(RandomNonZeroU32(n, seed)), b(RandomNonZeroU32(n, seed + 1000)), out(n, kPoison) {
    spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                     HostOut(out.data(), ByteSize(out))};
    spec.param_words = {static_cast<uint32_t>(n)};
  }
  std::vector<uint32_t> Expected() const { return CpuAdd(a, b); }
  std::vector<uint32_t> a, b, out;
  DispatchSpec spec;
};

vyre_status Dispatch(vyre_program program, const DispatchSpec& spec,
                     vyre_timing* timing = nullptr) {
  vyre_dispatch_desc desc = spec.Desc();
  return vyre_dispatch(program, &desc, timing);
}

vyre_buffer UploadNew(vyre_context context, const std::vector<uint32_t>& data) {
  vyre_buffer buffer = MakeBuffer(context, ByteSize(data));
  EXPECT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), ByteSize(data)));
  return buffer;
}

std::vector<uint32_t> DownloadU32(vyre_buffer buffer, size_t count, uint64_t offset = 0) {
  std::vector<uint32_t> data(count, kPoison);
  EXPECT_VYRE_OK(vyre_buffer_download(buffer, offset, data.data(), ByteSize(data)));
  return data;
}

// ---------------------------------------------------------------------------
// Devices and contexts
// ---------------------------------------------------------------------------

void ExpectFakeDevice(const vyre_device_info& info) {
  EXPECT_EQ(info.struct_size, sizeof(vyre_device_info));
  EXPECT_EQ(info.ordinal, 0u);
  EXPECT_STREQ(info.name, "Fake CUDA Device");
  EXPECT_EQ(info.compute_capability_major, 9u);
  EXPECT_EQ(info.compute_capability_minor, 0u);
  EXPECT_EQ(info.total_memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(info.multiprocessor_count, 132u);
  EXPECT_EQ(info.max_threads_per_block, 1024u);
  EXPECT_EQ(info.max_block_dim[0], 1024u);
  EXPECT_EQ(info.max_block_dim[1], 1024u);
  EXPECT_EQ(info.max_block_dim[2], 64u);
  EXPECT_EQ(info.max_grid_dim[0], 2147483647u);
  EXPECT_EQ(info.max_grid_dim[1], 65535u);
  EXPECT_EQ(info.max_grid_dim[2], 65535u);
  EXPECT_EQ(info.max_shared_memory_per_block, 48u * 1024u);
  EXPECT_EQ(info.warp_size, 32u);
  EXPECT_EQ(info.cooperative_launch, 1u);
  EXPECT_EQ(info.driver_version, 13000u);
}

TEST_F(ResultsTest, DeviceCountAndInfo) {
  uint32_t count = 0;
  ASSERT_VYRE_OK(vyre_device_count(&count));
  EXPECT_EQ(count, 1u);
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_device_info_get(0, &info));
  ExpectFakeDevice(info);
  vyre_device_info from_context = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_context_device_info(context_, &from_context));
  ExpectFakeDevice(from_context);
}

TEST_F(ResultsTest, SelftestPassesOnTheFakeDevice) {
  uint64_t launches = FakeCuda::Stats().kernel_launches;
  EXPECT_VYRE_OK(vyre_context_selftest(context_));
  EXPECT_GT(FakeCuda::Stats().kernel_launches, launches) << "the self-test launched nothing";
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
}

TEST_F(ResultsTest, ContextsAreIndependent) {
  vyre_context other = MakeContext();
  ASSERT_NE(other.bits, context_.bits);
  vyre_buffer mine = UploadNew(context_, RandomNonZeroU32(32, 10));
  vyre_buffer theirs = UploadNew(other, RandomNonZeroU32(32, 11));
  EXPECT_EQ(Telemetry(context_).live_buffers, 1u);
  EXPECT_EQ(Telemetry(other).live_buffers, 1u);
  ASSERT_VYRE_OK(vyre_context_destroy(other));
  EXPECT_TRUE(SameU32(DownloadU32(mine, 32), RandomNonZeroU32(32, 10)));
  EXPECT_VYRE_ERROR(vyre_buffer_free(theirs), VYRE_STATUS_STALE_HANDLE);
  EXPECT_VYRE_OK(vyre_buffer_free(mine));
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

TEST_F(ResultsTest, BufferInfo) {
  vyre_buffer first = MakeBuffer(context_, 100);
  vyre_buffer second = MakeBuffer(context_, 4096);
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  ASSERT_VYRE_OK(vyre_buffer_info_get(first, &info));
  EXPECT_EQ(info.bytes, 100u);
  EXPECT_NE(info.device_pointer, 0u);
  EXPECT_EQ(info.context.bits, context_.bits);
  vyre_buffer_info info2 = VYRE_BUFFER_INFO_INIT;
  ASSERT_VYRE_OK(vyre_buffer_info_get(second, &info2));
  EXPECT_EQ(info2.bytes, 4096u);
  EXPECT_TRUE(info2.device_pointer >= info.device_pointer + 100 ||
              info.device_pointer >= info2.device_pointer + 4096)
      << "two live buffers overlap";
  EXPECT_VYRE_OK(vyre_buffer_free(first));
  EXPECT_VYRE_OK(vyre_buffer_free(second));
}

TEST_F(ResultsTest, UploadDownloadRoundTrip) {
  for (size_t bytes : {size_t{1}, size_t{7}, size_t{4096}, size_t{(1 << 20) + 3}}) {
    SCOPED_TRACE(bytes);
    std::vector<uint8_t> data = RandomNonZeroBytes(bytes, static_cast<uint32_t>(bytes));
    vyre_buffer buffer = MakeBuffer(context_, bytes);
    ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, data.data(), bytes));
    std::vector<uint8_t> back(bytes, 0);
    ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, back.data(), bytes));
    EXPECT_SAME_BYTES(back.data(), data.data(), bytes);
    EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  }
}

TEST_F(ResultsTest, PartialUploadsAndDownloadsAtOffsets) {
  const size_t size = 1000;
  std::vector<uint8_t> expected = RandomNonZeroBytes(size, 20);
  vyre_buffer buffer = MakeBuffer(context_, size);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, expected.data(), size));
  std::vector<uint8_t> patch = RandomNonZeroBytes(333, 21);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 101, patch.data(), patch.size()));
  std::copy(patch.begin(), patch.end(), expected.begin() + 101);

  std::vector<uint8_t> whole(size, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, whole.data(), size));
  EXPECT_SAME_BYTES(whole.data(), expected.data(), size);
  std::vector<uint8_t> tail(77, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, size - 77, tail.data(), 77));
  EXPECT_SAME_BYTES(tail.data(), expected.data() + size - 77, 77);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(ResultsTest, UploadAndDownloadManyRanges) {
  const size_t size = 4096;
  std::vector<uint8_t> expected = RandomNonZeroBytes(size, 30);
  vyre_buffer buffer = MakeBuffer(context_, size);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, expected.data(), size));

  struct Slice {
    uint64_t offset, bytes;
  };
  const std::vector<Slice> slices = {{0, 16}, {100, 900}, {1024, 1}, {2000, 2000}, {4095, 1}};
  std::vector<std::vector<uint8_t>> sources;
  std::vector<vyre_upload_range> uploads;
  for (size_t i = 0; i < slices.size(); ++i) {
    sources.push_back(RandomNonZeroBytes(slices[i].bytes, 31 + uint32_t(i)));
    uploads.push_back({slices[i].offset, slices[i].bytes, sources.back().data()});
    std::copy(sources.back().begin(), sources.back().end(),
              expected.begin() + slices[i].offset);
  }
  uint64_t total_bytes = 0;
  for (const Slice& slice : slices) total_bytes += slice.bytes;
  vyre_telemetry before = Telemetry(context_);
  ASSERT_VYRE_OK(vyre_buffer_upload_ranges(buffer, uploads.data(), uploads.size()));
  vyre_telemetry after = Telemetry(context_);
  EXPECT_EQ(after.sync_points - before.sync_points, 1u) << "ranges upload with one synchronisation";
  EXPECT_GE(after.h2d_bytes - before.h2d_bytes, total_bytes);

  std::vector<std::vector<uint8_t>> destinations;
  std::vector<vyre_download_range> downloads;
  for (const Slice& slice : slices) destinations.emplace_back(slice.bytes, 0);
  for (size_t i = 0; i < slices.size(); ++i) {
    downloads.push_back({slices[i].offset, slices[i].bytes, destinations[i].data()});
  }
  ASSERT_VYRE_OK(vyre_buffer_download_ranges(buffer, downloads.data(), downloads.size()));
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_SAME_BYTES(destinations[i].data(), sources[i].data(), slices[i].bytes);
  }
  // Bytes between the ranges kept their first contents.
  std::vector<uint8_t> whole(size, 0);
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, whole.data(), size));
  EXPECT_SAME_BYTES(whole.data(), expected.data(), size);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

// ---------------------------------------------------------------------------
// Vector add
// ---------------------------------------------------------------------------

class VectorAddTest : public FakeDriverTest, public ::testing::WithParamInterface<size_t> {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    if (HasFatalFailure()) return;
    add_ = MakeProgram(context_, AddSpec());
  }
  void TearDown() override {
    if (add_.bits != 0) {
      EXPECT_VYRE_OK(vyre_program_destroy(add_));
    }
    FakeDriverTest::TearDown();
  }
  vyre_program add_{0};
};

TEST_P(VectorAddTest, HostBindings) {
  HostAdd add(GetParam());
  ASSERT_VYRE_OK(Dispatch(add_, add.spec));
  EXPECT_TRUE(SameU32(add.out, add.Expected()));
}

TEST_P(VectorAddTest, ResidentBindings) {
  const size_t n = GetParam();
  HostAdd host(n);
  vyre_buffer a = UploadNew(context_, host.a);
  vyre_buffer b = UploadNew(context_, host.b);
  vyre_buffer out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
  DispatchSpec spec;
  spec.bindings = {Resident(a), Resident(b), Resident(out)};
  spec.param_words = {static_cast<uint32_t>(n)};
  ASSERT_VYRE_OK(Dispatch(add_, spec));
  EXPECT_TRUE(SameU32(DownloadU32(out, n), host.Expected()));
  // Inputs are unchanged.
  EXPECT_TRUE(SameU32(DownloadU32(a, n), host.a));
  for (vyre_buffer buffer : {a, b, out}) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_P(VectorAddTest, MixedHostAndResidentBindings) {
  const size_t n = GetParam();
  {
    HostAdd host(n, 7);
    vyre_buffer b = UploadNew(context_, host.b);
    host.spec.bindings[1] = Resident(b);
    ASSERT_VYRE_OK(Dispatch(add_, host.spec));
    EXPECT_TRUE(SameU32(host.out, host.Expected())) << "host a, resident b, host out";
    EXPECT_VYRE_OK(vyre_buffer_free(b));
  }
  {
    HostAdd host(n, 8);
    vyre_buffer a = UploadNew(context_, host.a);
    vyre_buffer out = UploadNew(context_, std::vector<uint32_t>(n, kPoison));
    host.spec.bindings[0] = Resident(a);
    host.spec.bindings[2] = Resident(out);
    ASSERT_VYRE_OK(Dispatch(add_, host.spec));
    EXPECT_TRUE(SameU32(DownloadU32(out, n), host.Expected())) << "resident a, host b, resident out";
    EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(n, kPoison)))
        << "host memory not bound as output was written";
    EXPECT_VYRE_OK(vyre_buffer_free(a));
    EXPECT_VYRE_OK(vyre_buffer_free(out));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, VectorAddTest, ::testing::Values(1, 1000, 1 << 16),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST_F(ResultsTest, ResidentSubRangesLeaveTheRestOfTheBufferAlone) {
  vyre_program add = MakeProgram(context_, AddSpec());
  const size_t n = 300, pad = 50;  // elements
  std::vector<uint32_t> a_all = RandomNonZeroU32(n + 2 * pad, 40);
  std::vector<uint32_t> b_all = RandomNonZeroU32(n + 2 * pad, 41);
  std::vector<uint32_t> out_all(n + 2 * pad, kPoison);
  vyre_buffer a = UploadNew(context_, a_all);
  vyre_buffer b = UploadNew(context_, b_all);
  vyre_buffer out = UploadNew(context_, out_all);
  DispatchSpec spec;
  const uint64_t offset = pad * 4, length = n * 4;
  spec.bindings = {Resident(a, offset, length), Resident(b, offset, length),
                   Resident(out, offset, length)};
  spec.param_words = {static_cast<uint32_t>(n)};
  ASSERT_VYRE_OK(Dispatch(add, spec));

  std::vector<uint32_t> expected = out_all;
  for (size_t i = pad; i < pad + n; ++i) expected[i] = a_all[i] + b_all[i];
  EXPECT_TRUE(SameU32(DownloadU32(out, out_all.size()), expected));
  for (vyre_buffer buffer : {a, b, out}) EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, ResidentLengthZeroBindsToTheEnd) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  std::vector<uint32_t> data = RandomNonZeroU32(100, 42);
  vyre_buffer buffer = UploadNew(context_, data);
  DispatchSpec spec;
  spec.bindings = {Resident(buffer, 40 * 4, 0)};  // elements 40..99
  spec.param_words = {60};
  ASSERT_VYRE_OK(Dispatch(inc, spec));
  for (size_t i = 40; i < 100; ++i) data[i] += 1;
  EXPECT_TRUE(SameU32(DownloadU32(buffer, 100), data));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

// ---------------------------------------------------------------------------
// Grid derivation
// ---------------------------------------------------------------------------

TEST_F(ResultsTest, ZeroGridCoversTheLargestBinding) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1000);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  fake_cuda_stats stats = FakeCuda::Stats();
  EXPECT_EQ(stats.last_grid[0], 4u) << "ceil(1000 / 256)";
  EXPECT_EQ(stats.last_grid[1], 1u);
  EXPECT_EQ(stats.last_grid[2], 1u);
  EXPECT_EQ(stats.last_block[0], 256u);
  EXPECT_EQ(stats.last_block[1], 1u);
  EXPECT_EQ(stats.last_block[2], 1u);
  EXPECT_STREQ(stats.last_kernel, "vyre_test_add_u32");
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, ElementCountDecidesTheGrid) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1000);
  host.spec.element_count = 512;  // 2 blocks of 256: elements >= 512 never run
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_EQ(FakeCuda::Stats().last_grid[0], 2u);
  std::vector<uint32_t> expected = host.Expected();
  std::fill(expected.begin() + 512, expected.end(), 0u);  // OUTPUT was zeroed
  EXPECT_TRUE(SameU32(host.out, expected));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, ExplicitGridAndBlock) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1000);
  host.spec.grid[0] = 3;
  host.spec.block[0] = 100;  // 300 threads
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  fake_cuda_stats stats = FakeCuda::Stats();
  EXPECT_EQ(stats.last_grid[0], 3u);
  EXPECT_EQ(stats.last_block[0], 100u);
  EXPECT_EQ(stats.last_block[1], 1u) << "block y of 0 means 1";
  std::vector<uint32_t> expected = host.Expected();
  std::fill(expected.begin() + 300, expected.end(), 0u);
  EXPECT_TRUE(SameU32(host.out, expected));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, WithoutParamWordsTheKernelSeesZeros) {
  // With param_word_count 0 the params pointer points at zero bytes: n = 0.
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(64);
  host.spec.param_words.clear();
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(64, 0u)));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ---------------------------------------------------------------------------
// Output ranges, fixpoints, zeroing
// ---------------------------------------------------------------------------

TEST_F(ResultsTest, OnlyTheDeclaredOutputRangeIsWrittenBack) {
  ProgramSpec spec = AddSpec();
  spec.bindings[2].output_offset = 16;  // elements 4..11
  spec.bindings[2].output_length = 32;
  vyre_program add = MakeProgram(context_, spec);
  HostAdd host(64);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  std::vector<uint32_t> expected(64, kPoison);
  std::vector<uint32_t> sums = host.Expected();
  std::copy(sums.begin() + 4, sums.begin() + 12, expected.begin() + 4);
  EXPECT_TRUE(SameU32(host.out, expected));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, OutputRangeToTheEndWithLengthZero) {
  ProgramSpec spec = AddSpec();
  spec.bindings[2].output_offset = 0;
  spec.bindings[2].output_length = 0;  // the whole binding
  vyre_program add = MakeProgram(context_, spec);
  HostAdd host(33);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, FixpointIterationsOnHostInputOutput) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  std::vector<uint32_t> data = RandomNonZeroU32(1000, 50);
  std::vector<uint32_t> expected = data;
  for (uint32_t& v : expected) v += 5;
  DispatchSpec spec;
  spec.bindings = {HostInOut(data.data(), ByteSize(data))};
  spec.param_words = {1000};
  spec.fixpoint_iterations = 5;
  uint64_t launches_before = Telemetry(context_).kernel_launches;
  uint64_t fake_launches_before = FakeCuda::Stats().kernel_launches;
  ASSERT_VYRE_OK(Dispatch(inc, spec));
  EXPECT_TRUE(SameU32(data, expected));
  EXPECT_EQ(Telemetry(context_).kernel_launches - launches_before, 5u);
  EXPECT_EQ(FakeCuda::Stats().kernel_launches - fake_launches_before, 5u);
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(ResultsTest, FixpointIterationsOnAResidentBuffer) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  std::vector<uint32_t> data = RandomNonZeroU32(4096, 51);
  vyre_buffer buffer = UploadNew(context_, data);
  DispatchSpec spec;
  spec.bindings = {Resident(buffer)};
  spec.param_words = {4096};
  spec.fixpoint_iterations = 5;
  ASSERT_VYRE_OK(Dispatch(inc, spec));
  ASSERT_VYRE_OK(Dispatch(inc, spec));  // INPUT_OUTPUT keeps its contents
  for (uint32_t& v : data) v += 10;
  EXPECT_TRUE(SameU32(DownloadU32(buffer, 4096), data));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(ResultsTest, OutputBindingsAreZeroedBeforeLaunch) {
  // vyre_test_noop_out_u32 writes nothing, so the outputs show the zeroing.
  vyre_program noop = MakeProgram(context_, NoopOutSpec());
  vyre_buffer resident = UploadNew(context_, std::vector<uint32_t>(1000, kPoison));
  DispatchSpec spec;
  spec.bindings = {Resident(resident)};
  spec.param_words = {1000};
  ASSERT_VYRE_OK(Dispatch(noop, spec));
  EXPECT_TRUE(SameU32(DownloadU32(resident, 1000), std::vector<uint32_t>(1000, 0u)))
      << "a resident OUTPUT was not zeroed";

  std::vector<uint32_t> host(1000, kPoison);
  spec.bindings = {HostOut(host.data(), ByteSize(host))};
  ASSERT_VYRE_OK(Dispatch(noop, spec));
  EXPECT_TRUE(SameU32(host, std::vector<uint32_t>(1000, 0u))) << "a host OUTPUT was not zeroed";
  EXPECT_VYRE_OK(vyre_buffer_free(resident));
  EXPECT_VYRE_OK(vyre_program_destroy(noop));
}

TEST_F(ResultsTest, InputOutputBindingsAreNeverZeroed) {
  ProgramSpec spec = NoopOutSpec();
  spec.bindings[0].role = VYRE_ROLE_INPUT_OUTPUT;
  vyre_program noop = MakeProgram(context_, spec);
  std::vector<uint32_t> data = RandomNonZeroU32(1000, 52);
  vyre_buffer resident = UploadNew(context_, data);
  DispatchSpec dispatch;
  dispatch.bindings = {Resident(resident)};
  ASSERT_VYRE_OK(Dispatch(noop, dispatch));
  EXPECT_TRUE(SameU32(DownloadU32(resident, 1000), data));

  std::vector<uint32_t> host = data;
  dispatch.bindings = {HostInOut(host.data(), ByteSize(host))};
  ASSERT_VYRE_OK(Dispatch(noop, dispatch));
  EXPECT_TRUE(SameU32(host, data));
  EXPECT_VYRE_OK(vyre_buffer_free(resident));
  EXPECT_VYRE_OK(vyre_program_destroy(noop));
}

TEST_F(ResultsTest, SeparateHostInputAndOutputForInputOutput) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  std::vector<uint32_t> input = RandomNonZeroU32(500, 53);
  std::vector<uint32_t> output(500, kPoison);
  DispatchSpec spec;
  vyre_dispatch_binding binding = HostIn(input.data(), ByteSize(input));
  binding.host_output = output.data();
  spec.bindings = {binding};
  spec.param_words = {500};
  ASSERT_VYRE_OK(Dispatch(inc, spec));
  std::vector<uint32_t> expected = input;
  for (uint32_t& v : expected) v += 1;
  EXPECT_TRUE(SameU32(output, expected));
  EXPECT_TRUE(SameU32(input, RandomNonZeroU32(500, 53))) << "the input was modified";
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(ResultsTest, SaxpyWithExplicitScalarParameters) {
  vyre_program saxpy = MakeProgram(context_, SaxpySpec());
  const size_t n = 3000;
  std::vector<float> x = RandomNonZeroF32(n, 60);
  std::vector<float> y = RandomNonZeroF32(n, 61);
  const float a = -1.75f;
  std::vector<float> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = a * x[i] + y[i];
  uint32_t a_bits;
  std::memcpy(&a_bits, &a, sizeof(a));
  DispatchSpec spec;
  spec.bindings = {HostIn(x.data(), ByteSize(x)), HostInOut(y.data(), ByteSize(y))};
  spec.scalars = {a_bits, n};
  ASSERT_VYRE_OK(Dispatch(saxpy, spec));
  EXPECT_SAME_BYTES(y.data(), expected.data(), n * sizeof(float));
  EXPECT_VYRE_OK(vyre_program_destroy(saxpy));
}

TEST_F(ResultsTest, SharedBindingsTakeNoPointer) {
  // add(a, b, out, params) with a SHARED binding declared between b and out:
  // it adds dynamic shared memory and no kernel parameter.
  ProgramSpec spec = AddSpec();
  vyre_binding_decl shared = Decl(VYRE_ROLE_SHARED, 4, "scratch");
  shared.element_count = 256;
  spec.bindings.insert(spec.bindings.begin() + 2, shared);
  spec.shared_memory_bytes = 1000;
  vyre_program add = MakeProgram(context_, spec);
  HostAdd host(700);
  vyre_dispatch_binding ignored = VYRE_DISPATCH_BINDING_INIT;
  host.spec.bindings.insert(host.spec.bindings.begin() + 2, ignored);
  host.spec.shared_memory_bytes = 24;
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_EQ(FakeCuda::Stats().last_shared_bytes, 256u * 4u + 1000u + 24u);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, ExplicitParameterKindsAreMarshalled) {
  // probe(u64 a, const void* b, u32 c, const u32* d) with
  // {SCALAR64 0, NULL_POINTER, SCALAR32 1, PARAM_WORDS}; the fake records them.
  ProgramSpec spec;
  spec.entry = "vyre_test_probe_params";
  spec.bindings = {};
  spec.params = {{VYRE_PARAM_SCALAR64, 0},
                 {VYRE_PARAM_NULL_POINTER, 0},
                 {VYRE_PARAM_SCALAR32, 1},
                 {VYRE_PARAM_PARAM_WORDS, 0}};
  vyre_program probe = MakeProgram(context_, spec);
  DispatchSpec dispatch;
  dispatch.scalars = {0x1122334455667788ull, 0x99999999AABBCCDDull};
  dispatch.param_words = {0xC0DE1234u, 7u};
  dispatch.grid[0] = 1;
  dispatch.block[0] = 32;
  uint64_t launches = FakeCuda::Stats().probe_launches;
  ASSERT_VYRE_OK(Dispatch(probe, dispatch));
  fake_cuda_stats stats = FakeCuda::Stats();
  ASSERT_EQ(stats.probe_launches, launches + 1);
  EXPECT_EQ(stats.probe_a, 0x1122334455667788ull) << "SCALAR64";
  EXPECT_EQ(stats.probe_b, 0u) << "NULL_POINTER";
  EXPECT_EQ(stats.probe_c, 0xAABBCCDDu) << "SCALAR32 takes the low 32 bits";
  EXPECT_EQ(stats.probe_d0, 0xC0DE1234u) << "PARAM_WORDS points at the words";
  EXPECT_VYRE_OK(vyre_program_destroy(probe));
}

TEST_F(ResultsTest, ExplicitParamsReproduceTheDefaultConvention) {
  ProgramSpec spec = AddSpec();
  spec.params = {{VYRE_PARAM_BINDING, 0},
                 {VYRE_PARAM_BINDING, 1},
                 {VYRE_PARAM_BINDING, 2},
                 {VYRE_PARAM_PARAM_WORDS, 0}};
  vyre_program add = MakeProgram(context_, spec);
  HostAdd host(999);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, ExplicitParamsMayReorderBindings) {
  // add(a, b, out, params) where the declaration lists out first.
  ProgramSpec spec = AddSpec();
  spec.bindings = {Decl(VYRE_ROLE_OUTPUT, 4, "out"), Decl(VYRE_ROLE_INPUT, 4, "a"),
                   Decl(VYRE_ROLE_INPUT, 4, "b")};
  spec.params = {{VYRE_PARAM_BINDING, 1},
                 {VYRE_PARAM_BINDING, 2},
                 {VYRE_PARAM_BINDING, 0},
                 {VYRE_PARAM_PARAM_WORDS, 0}};
  vyre_program add = MakeProgram(context_, spec);
  HostAdd host(512);
  std::swap(host.spec.bindings[0], host.spec.bindings[2]);  // out, b, a
  std::swap(host.spec.bindings[1], host.spec.bindings[2]);  // out, a, b
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, DestroyingAProgramWithWorkInFlight) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(3000);
  vyre_pending pending{0};
  {
    ScopedHold hold;
    vyre_dispatch_desc desc = host.spec.Desc();
    ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
    ASSERT_VYRE_OK(vyre_program_destroy(add));
    EXPECT_VYRE_ERROR(vyre_program_destroy(add), VYRE_STATUS_STALE_HANDLE);
  }
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_pending_release(pending));
}

TEST_F(ResultsTest, PoolLimitsCapTheCachedBytes) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.transient_pool_limit_bytes = 1 << 20;
  desc.pinned_pool_limit_bytes = 1 << 20;
  vyre_context small = vyre_context{0};
  ASSERT_VYRE_OK(vyre_context_create(&desc, &small));
  vyre_program add = MakeProgram(small, AddSpec());
  for (size_t n : {size_t{1} << 20, size_t{1} << 10, size_t{3} << 18}) {  // 4 MiB, 4 KiB, 3 MiB
    HostAdd host(n);
    ASSERT_VYRE_OK(Dispatch(add, host.spec));
    EXPECT_TRUE(SameU32(host.out, host.Expected()));
    vyre_telemetry t = Telemetry(small);
    EXPECT_LE(t.transient_pool_cached_bytes, desc.transient_pool_limit_bytes) << n;
    EXPECT_LE(t.pinned_pool_cached_bytes, desc.pinned_pool_limit_bytes) << n;
  }
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  EXPECT_VYRE_OK(vyre_context_destroy(small));
}

// A large block coming back to a full pool makes room by freeing the
// largest cached blocks, so the small blocks every call takes stay cached:
// the small dispatch after a large one allocates nothing.
TEST_F(ResultsTest, PoolEvictionKeepsTheSmallBlocks) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.transient_pool_limit_bytes = 2 << 20;
  desc.pinned_pool_limit_bytes = 2 << 20;
  vyre_context small = vyre_context{0};
  ASSERT_VYRE_OK(vyre_context_create(&desc, &small));
  vyre_program add = MakeProgram(small, AddSpec());
  // Each dispatch takes one block of each pool for its three buffers: 3 KiB
  // (a 4 KiB class), 768 KiB (1 MiB) and 1.2 MB (1.25 MiB). The third comes
  // back to a pool holding 4 KiB + 1 MiB: freeing the 1 MiB block makes room.
  HostAdd tiny(1 << 8);
  HostAdd mid(1 << 16);
  HostAdd large(100000);
  ASSERT_VYRE_OK(Dispatch(add, tiny.spec));
  ASSERT_VYRE_OK(Dispatch(add, mid.spec));
  ASSERT_VYRE_OK(Dispatch(add, large.spec));
  EXPECT_TRUE(SameU32(mid.out, mid.Expected()));
  EXPECT_TRUE(SameU32(large.out, large.Expected()));
  const vyre_telemetry before = Telemetry(small);
  std::fill(tiny.out.begin(), tiny.out.end(), kPoison);
  ASSERT_VYRE_OK(Dispatch(add, tiny.spec));
  EXPECT_TRUE(SameU32(tiny.out, tiny.Expected()));
  const vyre_telemetry after = Telemetry(small);
  EXPECT_EQ(after.transient_pool_misses, before.transient_pool_misses);
  EXPECT_EQ(after.pinned_pool_misses, before.pinned_pool_misses);
  EXPECT_LE(after.transient_pool_cached_bytes, desc.transient_pool_limit_bytes);
  EXPECT_LE(after.pinned_pool_cached_bytes, desc.pinned_pool_limit_bytes);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  EXPECT_VYRE_OK(vyre_context_destroy(small));
}

// ---------------------------------------------------------------------------
// Code kinds: binaries and CUDA C++ through NVRTC
// ---------------------------------------------------------------------------

void ExpectAddProgramWorks(vyre_context context, const ProgramSpec& spec) {
  vyre_program add = MakeProgram(context, spec);
  ASSERT_NE(add.bits, 0u);
  HostAdd host(777);
  EXPECT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, CubinProgram) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_BINARY;
  spec.code.assign(reinterpret_cast<const char*>(vyre_test_kernels_cubin),
                   vyre_test_kernels_cubin_size);
  ExpectAddProgramWorks(context_, spec);
}

TEST_F(ResultsTest, FatbinProgram) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_BINARY;
  spec.code.assign(reinterpret_cast<const char*>(vyre_test_kernels_fatbin),
                   vyre_test_kernels_fatbin_size);
  ExpectAddProgramWorks(context_, spec);
}

TEST_F(ResultsTest, BinaryWithoutASizeIsInvalid) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_BINARY;
  spec.code.assign(reinterpret_cast<const char*>(vyre_test_kernels_cubin),
                   vyre_test_kernels_cubin_size);
  vyre_program_desc desc = spec.Desc();
  desc.code_size = 0;  // a binary image has no terminator to find its end by
  vyre_program program{0};
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program),
                    VYRE_STATUS_INVALID_ARGUMENT);
}

constexpr char kAddSource[] = R"(
extern "C" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b,
                                             unsigned* out, const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) out[i] = a[i] + b[i];
}
)";

TEST_F(ResultsTest, CudaSourceThroughNvrtc) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_CUDA_SOURCE;
  spec.code = kAddSource;
  spec.compile_options = {"-std=c++17"};
  vyre_program_desc desc = spec.Desc();
  vyre_program add{0};
  vyre_status status = vyre_program_create(context_, &desc, &add);
  if (status == VYRE_STATUS_NVRTC_UNAVAILABLE) {
    EXPECT_VYRE_ERROR(status, VYRE_STATUS_NVRTC_UNAVAILABLE);
    // That answer is checked; the compile itself could not be.
    GTEST_SKIP() << "no NVRTC on this machine: CUDA source was not compiled";
  }
  ASSERT_VYRE_OK(status);
  HostAdd host(1500);
  EXPECT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, CudaSourceCompileErrorCarriesTheLog) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_CUDA_SOURCE;
  spec.code = "extern \"C\" __global__ void vyre_test_add_u32() { undeclared_identifier_xyz; }";
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  vyre_status status = vyre_program_create(context_, &desc, &program);
  if (status == VYRE_STATUS_NVRTC_UNAVAILABLE) {
    EXPECT_VYRE_ERROR(status, VYRE_STATUS_NVRTC_UNAVAILABLE);
    GTEST_SKIP() << "no NVRTC on this machine: the compile log was not tested";
  }
  EXPECT_VYRE_ERROR(status, VYRE_STATUS_COMPILE_FAILED);
  EXPECT_NE(LastErrorMessage().find("undeclared_identifier_xyz"), std::string::npos)
      << "the NVRTC log is missing: " << LastErrorMessage();
}

// ---------------------------------------------------------------------------
// Pending dispatches and timing
// ---------------------------------------------------------------------------

TEST_F(ResultsTest, AsyncDispatchWritesOutputsOnWait) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(2048);
  vyre_dispatch_desc desc = host.spec.Desc();
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  EXPECT_EQ(Telemetry(context_).live_pendings, 1u);
  // Host inputs were copied before dispatch_async returned.
  std::vector<uint32_t> expected = host.Expected();
  std::fill(host.a.begin(), host.a.end(), 0u);
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(2048, kPoison)))
      << "host outputs are written by vyre_pending_wait, not before";
  EXPECT_VYRE_OK(vyre_pending_poll(pending));  // the fake's streams are synchronous
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SameU32(host.out, expected));
  vyre_timing timing = VYRE_TIMING_INIT;
  ASSERT_VYRE_OK(vyre_pending_timing(pending, &timing));
  EXPECT_GT(timing.wall_ns, 0u);
  EXPECT_GE(timing.wall_ns, timing.wait_ns);
  EXPECT_GE(timing.wall_ns, timing.enqueue_ns);
  EXPECT_EQ(timing.device_ns, 0u) << "device timing was not asked for";
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// FAKE_CUDA_DEFER_ALL=1 (the unit.*.deferred entries run whole suites so):
// the fake driver runs copies, memsets and kernels only when the host waits,
// so a result read before the engine waits for it is wrong. This checks the
// mode itself: an async dispatch enqueues its kernel and returns without
// anything running it, and the wait runs it and delivers the right sum.
TEST_F(ResultsTest, DeferredModeRunsTheKernelWhenTheHostWaits) {
  const char* defer_all = std::getenv("FAKE_CUDA_DEFER_ALL");
  if (defer_all == nullptr || std::string(defer_all) != "1") {
    GTEST_SKIP() << "needs FAKE_CUDA_DEFER_ALL=1 (ctest unit.api_fake_driver.deferred)";
  }
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(4096);
  vyre_dispatch_desc desc = host.spec.Desc();
  const uint64_t kernels_before = FakeCuda::Stats().deferred_kernels;
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  EXPECT_EQ(FakeCuda::Stats().deferred_kernels, kernels_before)
      << "vyre_dispatch_async waited for its own kernel";
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(4096, kPoison)));
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  EXPECT_EQ(FakeCuda::Stats().deferred_kernels, kernels_before + 1);
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, ReleaseWithoutWaitSkipsTheReadBack) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(256);
  vyre_dispatch_desc desc = host.spec.Desc();
  vyre_pending pending{0};
  ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(256, kPoison)));
  EXPECT_EQ(Telemetry(context_).live_pendings, 0u);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, DeviceTimingFlag) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1 << 16);
  host.spec.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  vyre_timing timing = VYRE_TIMING_INIT;
  ASSERT_VYRE_OK(Dispatch(add, host.spec, &timing));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_GT(timing.device_ns, 0u) << "the fake's events were recorded at different times";
  EXPECT_GT(timing.wall_ns, 0u);
  EXPECT_LE(timing.device_ns, timing.wall_ns) << "device time cannot exceed wall time";
  EXPECT_EQ(timing.struct_size, sizeof(vyre_timing));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, PollWaitTimeoutAndWaitAgainWhileTheDeviceIsBusy) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(4096);
  vyre_pending pending{0};
  {
    ScopedHold hold;  // the fake's device work does not complete
    vyre_dispatch_desc desc = host.spec.Desc();
    ASSERT_VYRE_OK(vyre_dispatch_async(add, &desc, &pending));
    EXPECT_VYRE_ERROR(vyre_pending_poll(pending), VYRE_STATUS_NOT_READY);
    auto start = std::chrono::steady_clock::now();
    EXPECT_VYRE_ERROR(vyre_pending_wait(pending, 20'000'000), VYRE_STATUS_TIMEOUT);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3))
        << "a 20 ms wait blocked on the device";
    EXPECT_VYRE_ERROR(vyre_pending_wait(pending, 0), VYRE_STATUS_TIMEOUT);
    vyre_timing timing = VYRE_TIMING_INIT;
    EXPECT_VYRE_ERROR(vyre_pending_timing(pending, &timing), VYRE_STATUS_INVALID_STATE);
    EXPECT_TRUE(SameU32(host.out, std::vector<uint32_t>(4096, kPoison)));
    // A waiter blocked forever is released when the device finishes.
    std::thread device_finishes([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      FakeCuda::SetHold(false);
    });
    EXPECT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
    device_finishes.join();
  }
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_VYRE_ERROR(vyre_pending_wait(pending, VYRE_WAIT_FOREVER), VYRE_STATUS_INVALID_STATE);
  EXPECT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

TEST_F(ResultsTest, FreeingABufferInUseDefersTheRelease) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  std::vector<uint32_t> data = RandomNonZeroU32(1024, 70);
  vyre_buffer buffer = UploadNew(context_, data);
  uint64_t allocations_in_use = 0;
  vyre_pending pending{0};
  {
    ScopedHold hold;
    DispatchSpec spec;
    spec.bindings = {Resident(buffer)};
    spec.param_words = {1024};
    vyre_dispatch_desc desc = spec.Desc();
    ASSERT_VYRE_OK(vyre_dispatch_async(inc, &desc, &pending));
    allocations_in_use = FakeCuda::Stats().device_allocations_live;
    ASSERT_VYRE_OK(vyre_buffer_free(buffer));
    EXPECT_VYRE_ERROR(vyre_buffer_download(buffer, 0, data.data(), 4), VYRE_STATUS_STALE_HANDLE)
        << "the handle is stale at once";
    EXPECT_EQ(FakeCuda::Stats().device_allocations_live, allocations_in_use)
        << "memory still used by a running dispatch was freed";
  }
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  ASSERT_VYRE_OK(vyre_context_trim(context_));
  EXPECT_LT(FakeCuda::Stats().device_allocations_live, allocations_in_use)
      << "the freed buffer's memory was not released after the dispatch completed";
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(ResultsTest, PollThatSeesCompletionReleasesAFreedBuffer) {
  vyre_program inc = MakeProgram(context_, IncSpec());
  std::vector<uint32_t> data = RandomNonZeroU32(1024, 71);
  vyre_buffer buffer = UploadNew(context_, data);
  const uint64_t buffer_bytes = ByteSize(data);
  vyre_pending pending{0};
  uint64_t live_while_running = 0;
  {
    ScopedHold hold;
    DispatchSpec spec;
    spec.bindings = {Resident(buffer)};
    spec.param_words = {1024};
    vyre_dispatch_desc desc = spec.Desc();
    ASSERT_VYRE_OK(vyre_dispatch_async(inc, &desc, &pending));
    ASSERT_VYRE_OK(vyre_buffer_free(buffer));
    EXPECT_VYRE_ERROR(vyre_pending_poll(pending), VYRE_STATUS_NOT_READY);
    live_while_running = Telemetry(context_).device_bytes_live;
  }
  // Not waited on yet: the poll that sees completion lets go of the buffer.
  ASSERT_VYRE_OK(vyre_pending_poll(pending));
  EXPECT_EQ(Telemetry(context_).device_bytes_live, live_while_running - buffer_bytes);
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

// ---------------------------------------------------------------------------
// Telemetry
// ---------------------------------------------------------------------------

TEST_F(ResultsTest, ModuleCacheHitsOnIdenticalCode) {
  vyre_telemetry before = Telemetry(context_);
  uint64_t fake_loads_before = FakeCuda::Stats().module_loads;
  vyre_program first = MakeProgram(context_, AddSpec());
  vyre_telemetry after_first = Telemetry(context_);
  EXPECT_EQ(after_first.module_loads - before.module_loads, 1u);
  EXPECT_EQ(after_first.module_cache_misses - before.module_cache_misses, 1u);

  vyre_program second = MakeProgram(context_, IncSpec());  // same PTX, other entry
  vyre_program third = MakeProgram(context_, AddSpec());
  vyre_telemetry after_third = Telemetry(context_);
  EXPECT_EQ(after_third.module_loads, after_first.module_loads) << "identical code was reloaded";
  EXPECT_EQ(after_third.module_cache_hits - after_first.module_cache_hits, 2u);
  EXPECT_EQ(FakeCuda::Stats().module_loads - fake_loads_before, 1u);
  EXPECT_EQ(after_third.live_programs - before.live_programs, 3u);

  // Dispatches load nothing.
  HostAdd host(100);
  ASSERT_VYRE_OK(Dispatch(first, host.spec));
  ASSERT_VYRE_OK(Dispatch(third, host.spec));
  EXPECT_EQ(Telemetry(context_).module_loads, after_first.module_loads);
  EXPECT_EQ(FakeCuda::Stats().module_loads - fake_loads_before, 1u);

  for (vyre_program p : {first, second, third}) EXPECT_VYRE_OK(vyre_program_destroy(p));
  EXPECT_EQ(Telemetry(context_).live_programs, before.live_programs);
}

TEST_F(ResultsTest, DifferentCodeIsACacheMiss) {
  vyre_program first = MakeProgram(context_, AddSpec());
  vyre_telemetry before = Telemetry(context_);
  ProgramSpec other = AddSpec();
  other.code += "\n// a different module\n";
  vyre_program second = MakeProgram(context_, other);
  vyre_telemetry after = Telemetry(context_);
  EXPECT_EQ(after.module_loads - before.module_loads, 1u);
  EXPECT_EQ(after.module_cache_misses - before.module_cache_misses, 1u);
  EXPECT_VYRE_OK(vyre_program_destroy(first));
  EXPECT_VYRE_OK(vyre_program_destroy(second));
}

TEST_F(ResultsTest, TransferAndDispatchCounters) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_telemetry before = Telemetry(context_);
  HostAdd host(1000);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  vyre_telemetry after = Telemetry(context_);
  EXPECT_EQ(after.dispatches - before.dispatches, 1u);
  EXPECT_EQ(after.kernel_launches - before.kernel_launches, 1u);
  EXPECT_GE(after.h2d_operations - before.h2d_operations, 1u);
  EXPECT_GE(after.h2d_bytes - before.h2d_bytes, 2u * 4000u) << "a and b were uploaded";
  EXPECT_GE(after.d2h_operations - before.d2h_operations, 1u);
  EXPECT_GE(after.d2h_bytes - before.d2h_bytes, 4000u) << "out was read back";
  EXPECT_GE(after.sync_points - before.sync_points, 1u);
  EXPECT_EQ(after.live_pendings, 0u);

  vyre_buffer buffer = MakeBuffer(context_, 4096);
  std::vector<uint8_t> bytes = RandomNonZeroBytes(4096, 71);
  vyre_telemetry before_copy = Telemetry(context_);
  ASSERT_VYRE_OK(vyre_buffer_upload(buffer, 0, bytes.data(), 4096));
  ASSERT_VYRE_OK(vyre_buffer_download(buffer, 0, bytes.data(), 1000));
  vyre_telemetry after_copy = Telemetry(context_);
  EXPECT_EQ(after_copy.h2d_bytes - before_copy.h2d_bytes, 4096u);
  EXPECT_EQ(after_copy.h2d_operations - before_copy.h2d_operations, 1u);
  EXPECT_EQ(after_copy.d2h_bytes - before_copy.d2h_bytes, 1000u);
  EXPECT_EQ(after_copy.d2h_operations - before_copy.d2h_operations, 1u);
  EXPECT_EQ(after_copy.live_buffers, before_copy.live_buffers);
  EXPECT_GE(after_copy.device_bytes_live, 4096u);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// A caller built against the first header (telemetry ending at live_pendings)
// still reads its counters, and the bytes past its struct are left alone.
TEST_F(ResultsTest, VersionOneTelemetryStructIsStillFilled) {
  constexpr size_t kV1 = offsetof(vyre_telemetry, live_pendings) + sizeof(uint64_t);
  ASSERT_EQ(kV1, 184u);
  vyre_buffer buffer = MakeBuffer(context_, 4096);
  unsigned char raw[sizeof(vyre_telemetry)];
  std::memset(raw, 0xEE, sizeof(raw));
  uint32_t v1_size = kV1;
  std::memcpy(raw, &v1_size, sizeof(v1_size));
  ASSERT_VYRE_OK(vyre_context_telemetry(context_, reinterpret_cast<vyre_telemetry*>(raw)));
  vyre_telemetry seen;
  std::memcpy(&seen, raw, sizeof(seen));
  EXPECT_EQ(seen.struct_size, kV1);
  EXPECT_EQ(seen.live_buffers, 1u);
  EXPECT_GE(seen.device_bytes_live, 4096u);
  for (size_t i = kV1; i < sizeof(raw); ++i) ASSERT_EQ(raw[i], 0xEE) << "byte " << i;
  raw[0] = 183;  // one byte short of version 1: refused
  EXPECT_VYRE_ERROR(vyre_context_telemetry(context_, reinterpret_cast<vyre_telemetry*>(raw)),
                    VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
}

TEST_F(ResultsTest, PoolsAreReusedAndTrimmed) {
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(4096);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  vyre_telemetry warm = Telemetry(context_);
  ASSERT_VYRE_OK(Dispatch(add, host.spec));
  vyre_telemetry after = Telemetry(context_);
  EXPECT_GT(after.transient_pool_hits, warm.transient_pool_hits)
      << "a second identical dispatch allocated its device buffers again";
  EXPECT_EQ(after.transient_pool_misses, warm.transient_pool_misses);
  EXPECT_TRUE(SameU32(host.out, host.Expected()));

  ASSERT_VYRE_OK(vyre_context_trim(context_));
  vyre_telemetry trimmed = Telemetry(context_);
  EXPECT_EQ(trimmed.transient_pool_cached_bytes, 0u);
  EXPECT_EQ(trimmed.pinned_pool_cached_bytes, 0u);
  EXPECT_LT(trimmed.device_bytes_live, after.device_bytes_live);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ---------------------------------------------------------------------------
// Logging
// ---------------------------------------------------------------------------

struct LogSink {
  std::mutex mu;
  std::vector<std::pair<vyre_log_level, std::string>> lines;
  static void Callback(void* user_data, vyre_log_level level, const char* message) {
    auto* sink = static_cast<LogSink*>(user_data);
    std::lock_guard<std::mutex> lock(sink->mu);
    sink->lines.emplace_back(level, message ? message : "(null)");
  }
};

TEST_F(ResultsTest, LogCallbackHonoursTheMaximumLevel) {
  LogSink sink;
  ASSERT_VYRE_OK(vyre_set_log_callback(&LogSink::Callback, &sink, VYRE_LOG_WARNING));
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(100);
  EXPECT_VYRE_OK(Dispatch(add, host.spec));
  ProgramSpec bad = AddSpec();
  bad.code = "garbage";
  vyre_program none{0};
  vyre_program_desc desc = bad.Desc();
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &none), VYRE_STATUS_COMPILE_FAILED);
  ASSERT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR));
  for (const auto& [level, line] : sink.lines) {
    EXPECT_LE(level, VYRE_LOG_WARNING) << "delivered above the maximum level: " << line;
  }
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// "VYRE_LOG_TRACE: Per-stage timings; also enabled by the environment
// VYRE_CUDA_TRACE=1": a callback installed at TRACE receives them.
TEST_F(ResultsTest, TraceLevelCallbackReceivesStageTimings) {
  LogSink sink;
  ASSERT_VYRE_OK(vyre_set_log_callback(&LogSink::Callback, &sink, VYRE_LOG_TRACE));
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(100);
  EXPECT_VYRE_OK(Dispatch(add, host.spec));
  ASSERT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR));
  size_t trace_lines = 0;
  for (const auto& entry : sink.lines) trace_lines += entry.first == VYRE_LOG_TRACE;
  EXPECT_GT(trace_lines, 0u) << "a TRACE-level callback received no per-stage lines";
  size_t lines_after_removal = sink.lines.size();
  EXPECT_VYRE_OK(Dispatch(add, host.spec));
  EXPECT_EQ(sink.lines.size(), lines_after_removal) << "a removed callback was called";
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// Run by the unit.api_fake_driver.trace entry with VYRE_CUDA_TRACE=1.
class TraceEnvTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    const char* trace = std::getenv("VYRE_CUDA_TRACE");
    if (trace == nullptr || std::string(trace) != "1") GTEST_SKIP() << "needs VYRE_CUDA_TRACE=1";
    FakeDriverTest::SetUp();
  }
  void TearDown() override {
    if (IsSkipped()) return;
    FakeDriverTest::TearDown();
  }
};

TEST_F(TraceEnvTest, DispatchReportsStageTimingsAndDeviceTime) {
  LogSink sink;
  ASSERT_VYRE_OK(vyre_set_log_callback(&LogSink::Callback, &sink, VYRE_LOG_ERROR));
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1 << 16);
  vyre_timing timing = VYRE_TIMING_INIT;
  EXPECT_VYRE_OK(Dispatch(add, host.spec, &timing));
  ASSERT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR));
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_GT(timing.device_ns, 0u) << "VYRE_CUDA_TRACE turns on device timing";
  size_t trace_lines = 0;
  for (const auto& entry : sink.lines) trace_lines += entry.first == VYRE_LOG_TRACE;
  EXPECT_GT(trace_lines, 0u) << "VYRE_CUDA_TRACE=1 delivered no TRACE lines to the callback";
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// With no callback installed, VYRE_CUDA_TRACE lines go to stderr, one line
// each, prefixed "[vyre-cuda] "; installing a callback takes them off stderr.
TEST_F(TraceEnvTest, WithoutACallbackTraceLinesGoToStderr) {
  ASSERT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR));
  vyre_program add = MakeProgram(context_, AddSpec());
  HostAdd host(1024);
  ::testing::internal::CaptureStderr();
  const vyre_status status = Dispatch(add, host.spec);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_VYRE_OK(status);
  EXPECT_TRUE(SameU32(host.out, host.Expected()));
  EXPECT_NE(err.find("[vyre-cuda] "), std::string::npos)
      << "no trace line reached stderr: '" << err << "'";
  for (size_t at = 0; (at = err.find("[vyre-cuda] ", at)) != std::string::npos; ++at) {
    EXPECT_TRUE(at == 0 || err[at - 1] == '\n') << "a trace line does not start a line: " << err;
  }

  LogSink sink;
  ASSERT_VYRE_OK(vyre_set_log_callback(&LogSink::Callback, &sink, VYRE_LOG_ERROR));
  ::testing::internal::CaptureStderr();
  EXPECT_VYRE_OK(Dispatch(add, host.spec));
  const std::string quiet = ::testing::internal::GetCapturedStderr();
  ASSERT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR));
  EXPECT_EQ(quiet.find("[vyre-cuda] "), std::string::npos)
      << "with a callback, trace lines still went to stderr: " << quiet;
  EXPECT_FALSE(sink.lines.empty()) << "the callback got no trace line";
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// ---------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------

TEST_F(ResultsTest, EightThreadsDispatchOnOneContext) {
  vyre_program add = MakeProgram(context_, AddSpec());
  vyre_program inc = MakeProgram(context_, IncSpec());
  constexpr int kThreads = 8, kRounds = 25;
  std::atomic<int> failures{0};
  auto worker = [&](int id) {
    for (int round = 0; round < kRounds; ++round) {
      const size_t n = 1 + static_cast<size_t>((id * 7919 + round * 104729) % 5000);
      const uint32_t seed = static_cast<uint32_t>(id * 1000 + round);
      HostAdd host(n, seed);
      if (round % 3 == 1) {  // resident b
        vyre_buffer b = UploadNew(context_, host.b);
        host.spec.bindings[1] = Resident(b);
        if (Dispatch(add, host.spec) != VYRE_STATUS_OK) ++failures;
        if (vyre_buffer_free(b) != VYRE_STATUS_OK) ++failures;
      } else if (round % 3 == 2) {  // async
        vyre_dispatch_desc desc = host.spec.Desc();
        vyre_pending pending{0};
        if (vyre_dispatch_async(add, &desc, &pending) != VYRE_STATUS_OK ||
            vyre_pending_wait(pending, VYRE_WAIT_FOREVER) != VYRE_STATUS_OK ||
            vyre_pending_release(pending) != VYRE_STATUS_OK) {
          ++failures;
        }
      } else {
        if (Dispatch(add, host.spec) != VYRE_STATUS_OK) ++failures;
      }
      if (!SameU32(host.out, host.Expected())) ++failures;

      std::vector<uint32_t> data = RandomNonZeroU32(n, seed + 7);
      std::vector<uint32_t> expected = data;
      for (uint32_t& v : expected) v += 2;
      DispatchSpec spec;
      spec.bindings = {HostInOut(data.data(), ByteSize(data))};
      spec.param_words = {static_cast<uint32_t>(n)};
      spec.fixpoint_iterations = 2;
      if (Dispatch(inc, spec) != VYRE_STATUS_OK || data != expected) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  vyre_telemetry telemetry = Telemetry(context_);
  EXPECT_EQ(telemetry.live_pendings, 0u);
  EXPECT_EQ(telemetry.live_buffers, 0u);
  EXPECT_GE(telemetry.dispatches, uint64_t{kThreads} * kRounds * 2);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  EXPECT_VYRE_OK(vyre_program_destroy(inc));
}

TEST_F(ResultsTest, ThreadsCreatingAndDestroyingObjects) {
  constexpr int kThreads = 8, kRounds = 40;
  std::atomic<int> failures{0};
  auto worker = [&](int id) {
    for (int round = 0; round < kRounds; ++round) {
      vyre_buffer buffer{0};
      if (vyre_buffer_alloc(context_, 64 + uint64_t(id) * 4, &buffer) != VYRE_STATUS_OK) {
        ++failures;
        continue;
      }
      std::vector<uint32_t> data = RandomNonZeroU32(16, uint32_t(id * 100 + round));
      std::vector<uint32_t> back(16, kPoison);
      if (vyre_buffer_upload(buffer, 0, data.data(), 64) != VYRE_STATUS_OK ||
          vyre_buffer_download(buffer, 0, back.data(), 64) != VYRE_STATUS_OK || back != data) {
        ++failures;
      }
      if (vyre_buffer_free(buffer) != VYRE_STATUS_OK) ++failures;
      if (vyre_buffer_free(buffer) != VYRE_STATUS_STALE_HANDLE) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Telemetry(context_).live_buffers, 0u);
}

}  // namespace
}  // namespace vyre_test
