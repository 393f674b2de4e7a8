// Device limits on a real GPU: out of memory (and recovery), cooperative
// launches checked against residency.
#include <string>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

class LimitsTest : public GpuTest {
 protected:
  void ExpectVectorAddWorks(size_t n) {
    ProgramHandle add;
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32",
                                  {Decl(VYRE_ROLE_INPUT, 4, "a"),
                                   Decl(VYRE_ROLE_INPUT, 4, "b"),
                                   Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                  256, &add));
    const std::vector<uint32_t> a = rng().NonZeroU32(n);
    const std::vector<uint32_t> b = rng().NonZeroU32(n);
    BufferHandle out_buffer;
    ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &out_buffer));
    const std::vector<vyre_dispatch_binding> bindings = {
        HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
        Resident(out_buffer.get())};
    const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    ASSERT_VYRE_OK(vyre_dispatch(add.get(), &desc, nullptr));
    std::vector<uint32_t> out;
    ASSERT_TRUE(DownloadU32(out_buffer.get(), n, &out));
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return a[i] + b[i]; }, "a + b"));
  }
};

TEST_F(LimitsTest, OutOfMemoryThenRecovery) {
  const uint64_t requested = device().total_memory_bytes * 2;
  ASSERT_GT(requested, 0u);
  const vyre_telemetry before = Telemetry(context());

  BufferHandle huge;
  ASSERT_VYRE_STATUS(VYRE_STATUS_OUT_OF_MEMORY, vyre_buffer_alloc(context(), requested, huge.out()));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:", std::to_string(requested)}))
      << "the message should give the requested bytes (" << requested << ")";
  EXPECT_FALSE(huge.valid());

  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.live_buffers, before.live_buffers);
  EXPECT_EQ(after.device_bytes_live, before.device_bytes_live);

  // The context stays usable.
  ASSERT_NO_FATAL_FAILURE(ExpectVectorAddWorks(size_t{1} << 20));
}

// --- Cooperative launches -----------------------------------------------------

constexpr uint32_t kCooperativeBlock = 256;

class CooperativeTest : public LimitsTest {
 protected:
  void SetUp() override {
    LimitsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (device().cooperative_launch == 0) {
      VYRE_GPU_SKIP_OR_FAIL(device().name << " does not support cooperative launches");
    }
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_grid_sync",
                                  {Decl(VYRE_ROLE_INPUT, 4, "in"),
                                   Decl(VYRE_ROLE_OUTPUT, 4, "scratch"),
                                   Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                  kCooperativeBlock, &grid_sync_));
  }

  ProgramHandle grid_sync_;
};

// One block per multiprocessor is always co-resident: the grid barrier runs
// and every output element holds a value another block wrote before it.
TEST_F(CooperativeTest, ResidentGridSynchronises) {
  const uint32_t blocks = device().multiprocessor_count;
  ASSERT_GT(blocks, 0u);
  const size_t n = size_t{blocks} * kCooperativeBlock;
  const std::vector<uint32_t> input = rng().NonZeroU32(n);
  std::vector<uint32_t> scratch(n, kPoisonU32);
  std::vector<uint32_t> out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(input.data(), ByteSize(input)), HostOut(scratch.data(), ByteSize(scratch)),
      HostOut(out.data(), ByteSize(out))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  desc.grid[0] = blocks;
  desc.grid[1] = 1;
  desc.grid[2] = 1;
  ASSERT_VYRE_OK(vyre_dispatch(grid_sync_.get(), &desc, nullptr));

  EXPECT_TRUE(AllElementsEqual(scratch, [&](size_t i) { return input[i] * 2u; }, "scratch"));
  EXPECT_TRUE(AllElementsEqual(
      out, [&](size_t i) { return input[(i + kCooperativeBlock) % n] * 2u + 1u; },
      "out = neighbour block's scratch + 1"));
}

// No GPU keeps 64 blocks of 256 threads resident per multiprocessor (the
// hardware limit is 32 blocks or 2048 threads): the engine must refuse the
// launch before making it.
TEST_F(CooperativeTest, GridOverResidencyIsLimitExceeded) {
  const uint32_t blocks = device().multiprocessor_count * 64;
  const size_t n = size_t{blocks} * kCooperativeBlock;
  BufferHandle input, scratch, out;
  ASSERT_TRUE(CreateBufferWith(context(), rng().NonZeroU32(n), &input));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * sizeof(uint32_t), scratch.out()));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), n * sizeof(uint32_t), out.out()));
  const std::vector<vyre_dispatch_binding> bindings = {Resident(input.get()),
                                                       Resident(scratch.get()),
                                                       Resident(out.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  desc.grid[0] = blocks;
  desc.grid[1] = 1;
  desc.grid[2] = 1;
  const vyre_telemetry before = Telemetry(context());
  EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_dispatch(grid_sync_.get(), &desc, nullptr));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:"}));
  EXPECT_EQ(Telemetry(context()).kernel_launches, before.kernel_launches)
      << "the residency check comes before the launch";

  // The context stays usable, cooperative launches included.
  ASSERT_NO_FATAL_FAILURE(ExpectVectorAddWorks(4096));
  const uint32_t resident_blocks = device().multiprocessor_count;
  const size_t m = size_t{resident_blocks} * kCooperativeBlock;
  const std::vector<uint32_t> small_params = {static_cast<uint32_t>(m)};
  desc.grid[0] = resident_blocks;
  desc.param_words = small_params.data();
  ASSERT_VYRE_OK(vyre_dispatch(grid_sync_.get(), &desc, nullptr));
  std::vector<uint32_t> input_values, out_values;
  ASSERT_TRUE(DownloadU32(input.get(), n, &input_values));
  ASSERT_TRUE(DownloadU32(out.get(), n, &out_values));
  out_values.resize(m);
  EXPECT_TRUE(AllElementsEqual(
      out_values, [&](size_t i) { return input_values[(i + kCooperativeBlock) % m] * 2u + 1u; },
      "out = neighbour block's scratch + 1"));
}

}  // namespace
}  // namespace vyre_test
