// Dispatch results on a real GPU: vector add over host, resident and mixed
// bindings at several sizes, output zeroing, input-output bindings, fixpoint
// iterations, output read-back ranges and an explicit kernel parameter list.
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

std::vector<vyre_binding_decl> AddDecls() {
  return {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
          Decl(VYRE_ROLE_OUTPUT, 4, "out")};
}

// Where each of the add kernel's three bindings lives.
enum class Placement {
  kBorrowed,        // a, b, out: host memory
  kResident,        // a, b, out: resident buffers
  kMixedHostOut,    // a host, b resident, out host
  kMixedResidentOut // a resident, b host, out resident
};

const char* PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kBorrowed: return "Borrowed";
    case Placement::kResident: return "Resident";
    case Placement::kMixedHostOut: return "MixedHostOut";
    case Placement::kMixedResidentOut: return "MixedResidentOut";
  }
  return "Unknown";
}

class VectorAddTest : public GpuTest,
                      public ::testing::WithParamInterface<std::tuple<size_t, Placement>> {};

TEST_P(VectorAddTest, EveryElementMatchesCpu) {
  const size_t n = std::get<0>(GetParam());
  const Placement placement = std::get<1>(GetParam());
  const bool a_host = placement == Placement::kBorrowed || placement == Placement::kMixedHostOut;
  const bool b_host = placement == Placement::kBorrowed || placement == Placement::kMixedResidentOut;
  const bool out_host = placement == Placement::kBorrowed || placement == Placement::kMixedHostOut;

  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), 256, &program));

  const std::vector<uint32_t> a = rng().NonZeroU32(n);
  const std::vector<uint32_t> b = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);
  const uint64_t bytes = ByteSize(a);

  BufferHandle a_buffer, b_buffer, out_buffer;
  std::vector<vyre_dispatch_binding> bindings;
  if (a_host) {
    bindings.push_back(HostIn(a.data(), bytes));
  } else {
    ASSERT_TRUE(CreateBufferWith(context(), a, &a_buffer));
    bindings.push_back(Resident(a_buffer.get()));
  }
  if (b_host) {
    bindings.push_back(HostIn(b.data(), bytes));
  } else {
    ASSERT_TRUE(CreateBufferWith(context(), b, &b_buffer));
    bindings.push_back(Resident(b_buffer.get()));
  }
  if (out_host) {
    bindings.push_back(HostOut(out.data(), bytes));
  } else {
    ASSERT_TRUE(CreateBufferWith(context(), out, &out_buffer));  // poisoned
    bindings.push_back(Resident(out_buffer.get()));
  }

  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  if (!out_host) {
    ASSERT_TRUE(DownloadU32(out_buffer.get(), n, &out));
  }
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return a[i] + b[i]; }, "a + b"));
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndPlacements, VectorAddTest,
    ::testing::Combine(::testing::Values(size_t{1}, size_t{1000}, size_t{1} << 20,
                                         size_t{1} << 26),
                       ::testing::Values(Placement::kBorrowed, Placement::kResident,
                                         Placement::kMixedHostOut,
                                         Placement::kMixedResidentOut)),
    [](const ::testing::TestParamInfo<std::tuple<size_t, Placement>>& info) {
      return std::to_string(std::get<0>(info.param)) + "_" +
             PlacementName(std::get<1>(info.param));
    });

class DispatchTest : public GpuTest {};

// write_even writes only even elements; the odd ones must read 0 because the
// engine zeroes OUTPUT bindings before launch.
TEST_F(DispatchTest, ResidentOutputIsZeroedBeforeLaunch) {
  const size_t n = 4099;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_write_even_u32",
                                {Decl(VYRE_ROLE_INPUT, 4, "in"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                128, &program));
  const std::vector<uint32_t> input = rng().NonZeroU32(n);
  BufferHandle out_buffer;
  ASSERT_TRUE(CreateBufferWith(context(), std::vector<uint32_t>(n, kPoisonU32), &out_buffer));

  const std::vector<vyre_dispatch_binding> bindings = {HostIn(input.data(), ByteSize(input)),
                                                       Resident(out_buffer.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(out_buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return i % 2 == 0 ? input[i] : 0u; },
                               "even: input, odd: zeroed"));
}

TEST_F(DispatchTest, HostOutputIsZeroedBeforeLaunch) {
  const size_t n = 4099;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_write_even_u32",
                                {Decl(VYRE_ROLE_INPUT, 4, "in"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                128, &program));
  const std::vector<uint32_t> input = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);

  const std::vector<vyre_dispatch_binding> bindings = {HostIn(input.data(), ByteSize(input)),
                                                       HostOut(out.data(), ByteSize(out))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return i % 2 == 0 ? input[i] : 0u; },
                               "even: input, odd: zeroed"));
}

// Zeroing covers the bound range only: the rest of the buffer keeps its bytes.
TEST_F(DispatchTest, ResidentOutputZeroingStaysInsideTheBoundRange) {
  const size_t n = 1000;
  const size_t before = 16, after = 48;  // elements outside the bound range
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_write_even_u32",
                                {Decl(VYRE_ROLE_INPUT, 4, "in"),
                                 Decl(VYRE_ROLE_OUTPUT, 4, "out")},
                                128, &program));
  const std::vector<uint32_t> input = rng().NonZeroU32(n);
  const std::vector<uint32_t> initial = rng().NonZeroU32(before + n + after);
  BufferHandle out_buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &out_buffer));

  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(input.data(), ByteSize(input)),
      Resident(out_buffer.get(), before * sizeof(uint32_t), n * sizeof(uint32_t))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(out_buffer.get(), initial.size(), &out));
  EXPECT_TRUE(AllElementsEqual(
      out,
      [&](size_t i) {
        if (i < before || i >= before + n) return initial[i];  // untouched
        const size_t k = i - before;
        return k % 2 == 0 ? input[k] : 0u;
      },
      "outside the range: initial; inside: even input, odd zero"));
}

TEST_F(DispatchTest, ResidentInputOutputIsNotZeroed) {
  const size_t n = 100003;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &program));
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));

  const std::vector<vyre_dispatch_binding> bindings = {Resident(buffer.get())};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + 1u; }, "data + 1"));
}

TEST_F(DispatchTest, HostInputOutputIsNotZeroed) {
  const size_t n = 100003;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &program));
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  std::vector<uint32_t> data = initial;

  const std::vector<vyre_dispatch_binding> bindings = {HostInOut(data.data(), ByteSize(data))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  EXPECT_TRUE(AllElementsEqual(data, [&](size_t i) { return initial[i] + 1u; }, "data + 1"));
}

// A host INPUT_OUTPUT binding may read from one array and write another.
TEST_F(DispatchTest, HostInputOutputWithSeparateArrays) {
  const size_t n = 777;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &program));
  const std::vector<uint32_t> input = rng().NonZeroU32(n);
  std::vector<uint32_t> output(n, kPoisonU32);

  vyre_dispatch_binding binding = HostInOut(nullptr, ByteSize(input));
  binding.host_input = input.data();
  binding.host_output = output.data();
  const std::vector<vyre_dispatch_binding> bindings = {binding};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  EXPECT_TRUE(AllElementsEqual(output, [&](size_t i) { return input[i] + 1u; }, "input + 1"));
}

TEST_F(DispatchTest, FixpointIterationsRunInOrder) {
  const size_t n = 65537;
  const uint32_t kIterations = 7;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &program));
  const std::vector<uint32_t> initial = rng().NonZeroU32(n);
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};

  // Resident.
  BufferHandle buffer;
  ASSERT_TRUE(CreateBufferWith(context(), initial, &buffer));
  const std::vector<vyre_dispatch_binding> resident = {Resident(buffer.get())};
  vyre_dispatch_desc desc = DispatchDesc(resident, params);
  desc.fixpoint_iterations = kIterations;
  const vyre_telemetry before = Telemetry(context());
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.kernel_launches - before.kernel_launches, kIterations);
  std::vector<uint32_t> out;
  ASSERT_TRUE(DownloadU32(buffer.get(), n, &out));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return initial[i] + kIterations; },
                               "resident data + 7"));

  // Host.
  std::vector<uint32_t> data = initial;
  const std::vector<vyre_dispatch_binding> host = {HostInOut(data.data(), ByteSize(data))};
  desc = DispatchDesc(host, params);
  desc.fixpoint_iterations = kIterations;
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));
  EXPECT_TRUE(AllElementsEqual(data, [&](size_t i) { return initial[i] + kIterations; },
                               "host data + 7"));

  // Zero iterations is an argument error.
  desc.fixpoint_iterations = 0;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_dispatch(program.get(), &desc, nullptr));
}

// Only [output_offset, output_offset + output_length) of a host output is
// written back; the rest of the caller's array keeps its poison.
TEST_F(DispatchTest, HostOutputReadBackRangeOnly) {
  const size_t n = 1000;
  const size_t range_first = 100, range_count = 500;
  std::vector<vyre_binding_decl> decls = AddDecls();
  decls[2].output_offset = range_first * sizeof(uint32_t);
  decls[2].output_length = range_count * sizeof(uint32_t);
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", decls, 256, &program));

  const std::vector<uint32_t> a = rng().NonZeroU32(n);
  const std::vector<uint32_t> b = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {HostIn(a.data(), ByteSize(a)),
                                                       HostIn(b.data(), ByteSize(b)),
                                                       HostOut(out.data(), ByteSize(out))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  const vyre_telemetry before = Telemetry(context());
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));
  const vyre_telemetry after = Telemetry(context());

  EXPECT_TRUE(AllElementsEqual(
      out,
      [&](size_t i) {
        const bool in_range = i >= range_first && i < range_first + range_count;
        return in_range ? a[i] + b[i] : kPoisonU32;
      },
      "declared range: a + b; elsewhere: poison"));
  EXPECT_EQ(after.d2h_bytes - before.d2h_bytes, range_count * sizeof(uint32_t))
      << "only the declared range should cross the bus";
}

// output_length 0 means "the whole binding"; a non-zero output_offset with it
// must still never write outside the binding's host_bytes. Accepted: the
// program is refused, or the read-back covers [offset, end) or all of it.
class OutputOffsetWithZeroLengthTest : public GpuTest,
                                       public ::testing::WithParamInterface<size_t> {};

TEST_P(OutputOffsetWithZeroLengthTest, ReadBackStaysInsideTheBinding) {
  const size_t n = GetParam();
  const size_t offset_elements = 16;
  const size_t guard_elements = 64;  // poison after the binding's end
  std::vector<vyre_binding_decl> decls = AddDecls();
  decls[2].output_offset = offset_elements * sizeof(uint32_t);
  decls[2].output_length = 0;
  ProgramHandle program;
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code = vyre_gpu_test_kernels_ptx;
  desc.entry = "vyre_test_add_u32";
  desc.bindings = decls.data();
  desc.binding_count = decls.size();
  desc.workgroup_size[0] = 256;
  const vyre_status created = vyre_program_create(context(), &desc, program.out());
  if (created == VYRE_STATUS_INVALID_ARGUMENT || created == VYRE_STATUS_OUT_OF_RANGE) {
    SUCCEED() << "refused at program creation: " << LastErrorMessage();
    return;
  }
  ASSERT_TRUE(StatusIs(created, VYRE_STATUS_OK, "vyre_program_create"));

  const std::vector<uint32_t> a = rng().NonZeroU32(n);
  const std::vector<uint32_t> b = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n + guard_elements, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {
      HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
      HostOut(out.data(), n * sizeof(uint32_t))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  const vyre_dispatch_desc dispatch = DispatchDesc(bindings, params);
  const vyre_status status = vyre_dispatch(program.get(), &dispatch, nullptr);
  if (status == VYRE_STATUS_INVALID_ARGUMENT || status == VYRE_STATUS_OUT_OF_RANGE) {
    SUCCEED() << "refused at dispatch: " << LastErrorMessage();
    return;
  }
  ASSERT_TRUE(StatusIs(status, VYRE_STATUS_OK, "vyre_dispatch"));
  EXPECT_TRUE(AllElementsEqual(
      std::vector<uint32_t>(out.begin() + static_cast<std::ptrdiff_t>(n), out.end()),
      [](size_t) { return kPoisonU32; }, "host memory past the binding's end"));
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool ok = out[i] == a[i] + b[i] || (i < offset_elements && out[i] == kPoisonU32);
    wrong += ok ? 0 : 1;
  }
  EXPECT_EQ(wrong, 0u) << "elements neither a + b nor (before the offset) untouched";
}

INSTANTIATE_TEST_SUITE_P(StagedAndDirect, OutputOffsetWithZeroLengthTest,
                         ::testing::Values(size_t{1000}, size_t{1} << 20),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::to_string(info.param);
                         });

// y = a * x + y through the explicit parameter list
// {SCALAR32 slot 0, BINDING 0, BINDING 1, SCALAR64 slot 1}.
class SaxpyTest : public GpuTest {
 protected:
  void CreateSaxpyProgram(ProgramHandle* program) {
    const std::vector<vyre_binding_decl> decls = {
        Decl(VYRE_ROLE_INPUT, sizeof(float), "x"),
        Decl(VYRE_ROLE_INPUT_OUTPUT, sizeof(float), "y")};
    const vyre_kernel_param params[] = {{VYRE_PARAM_SCALAR32, 0},
                                        {VYRE_PARAM_BINDING, 0},
                                        {VYRE_PARAM_BINDING, 1},
                                        {VYRE_PARAM_SCALAR64, 1}};
    vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
    desc.code_kind = VYRE_CODE_PTX;
    desc.code = vyre_gpu_test_kernels_ptx;
    desc.entry = "vyre_test_saxpy_f32";
    desc.bindings = decls.data();
    desc.binding_count = decls.size();
    desc.workgroup_size[0] = 256;
    desc.params = params;
    desc.param_count = 4;
    ASSERT_VYRE_OK(vyre_program_create(context(), &desc, program->out()));
  }

  // Positive operands: no cancellation, so float32 lands within 1e-6 relative.
  static ::testing::AssertionResult MatchesCpu(float a, const std::vector<float>& x,
                                               const std::vector<float>& y_before,
                                               const std::vector<float>& y_after) {
    size_t bad = 0;
    std::string first;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = static_cast<double>(a) * x[i] + static_cast<double>(y_before[i]);
      const double error = std::fabs(static_cast<double>(y_after[i]) - want);
      if (!(error <= 1e-6 * std::fabs(want))) {  // NaN fails too
        if (bad++ == 0) {
          first = "[" + std::to_string(i) + "] got " + std::to_string(y_after[i]) + " want " +
                  std::to_string(want);
        }
      }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << x.size()
                                         << " elements off by more than 1e-6 relative; first "
                                         << first;
  }

  static uint64_t FloatBits(float value) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    return bits;
  }
};

TEST_F(SaxpyTest, HostBindingsMatchCpu) {
  const size_t n = (size_t{1} << 20) + 3;
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateSaxpyProgram(&program));
  const float a = rng().UniformF32(1, 0.5f, 4.0f)[0];
  const std::vector<float> x = rng().UniformF32(n, 0.25f, 8.0f);
  const std::vector<float> y_before = rng().UniformF32(n, 0.25f, 8.0f);
  std::vector<float> y = y_before;

  const std::vector<vyre_dispatch_binding> bindings = {HostIn(x.data(), ByteSize(x)),
                                                       HostInOut(y.data(), ByteSize(y))};
  const std::vector<uint64_t> scalars = {FloatBits(a), static_cast<uint64_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, {});
  desc.scalars = scalars.data();
  desc.scalar_count = scalars.size();
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));
  EXPECT_TRUE(MatchesCpu(a, x, y_before, y));
}

TEST_F(SaxpyTest, ResidentBindingsMatchCpu) {
  const size_t n = 300007;
  ProgramHandle program;
  ASSERT_NO_FATAL_FAILURE(CreateSaxpyProgram(&program));
  const float a = rng().UniformF32(1, 0.5f, 4.0f)[0];
  const std::vector<float> x = rng().UniformF32(n, 0.25f, 8.0f);
  const std::vector<float> y_before = rng().UniformF32(n, 0.25f, 8.0f);

  BufferHandle x_buffer, y_buffer;
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), ByteSize(x), x_buffer.out()));
  ASSERT_VYRE_OK(vyre_buffer_upload(x_buffer.get(), 0, x.data(), ByteSize(x)));
  ASSERT_VYRE_OK(vyre_buffer_alloc(context(), ByteSize(y_before), y_buffer.out()));
  ASSERT_VYRE_OK(vyre_buffer_upload(y_buffer.get(), 0, y_before.data(), ByteSize(y_before)));

  const std::vector<vyre_dispatch_binding> bindings = {Resident(x_buffer.get()),
                                                       Resident(y_buffer.get())};
  const std::vector<uint64_t> scalars = {FloatBits(a), static_cast<uint64_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, {});
  desc.scalars = scalars.data();
  desc.scalar_count = scalars.size();
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, nullptr));

  std::vector<float> y(n, std::nanf(""));
  ASSERT_VYRE_OK(vyre_buffer_download(y_buffer.get(), 0, y.data(), ByteSize(y)));
  EXPECT_TRUE(MatchesCpu(a, x, y_before, y));

  // A scalar slot past scalar_count is an argument error.
  desc.scalar_count = 1;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_dispatch(program.get(), &desc, nullptr));
}

TEST_F(DispatchTest, DeviceTimingIsReportedWhenAsked) {
  const size_t n = 1 << 20;
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), 256, &program));
  const std::vector<uint32_t> a = rng().NonZeroU32(n);
  const std::vector<uint32_t> b = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {HostIn(a.data(), ByteSize(a)),
                                                       HostIn(b.data(), ByteSize(b)),
                                                       HostOut(out.data(), ByteSize(out))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  vyre_timing timing = VYRE_TIMING_INIT;
  ASSERT_VYRE_OK(vyre_dispatch(program.get(), &desc, &timing));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return a[i] + b[i]; }, "a + b"));
  EXPECT_GT(timing.wall_ns, 0u);
  EXPECT_GT(timing.device_ns, 0u);
  EXPECT_GT(timing.enqueue_ns, 0u);
  EXPECT_GT(timing.wait_ns, 0u);
  EXPECT_LE(timing.enqueue_ns, timing.wall_ns);
  EXPECT_LE(timing.wait_ns, timing.wall_ns);
}

}  // namespace
}  // namespace vyre_test
