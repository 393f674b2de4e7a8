// Programs on a real GPU: the module cache (warm dispatches load nothing),
// compile and entry errors, workgroup limits, and CUDA C++ through NVRTC.
#include <string>
#include <vector>

#include "gpu_test_env.h"

namespace vyre_test {
namespace {

// The whole compile log of the last error (vyre_last_error_log).
std::string LastErrorLog() {
  size_t length = 0;
  vyre_last_error_log(nullptr, 0, &length);
  std::string log(length + 1, '\0');
  vyre_last_error_log(&log[0], log.size(), nullptr);
  log.resize(length);
  return log;
}

// The first line of a message is at most 1023 bytes and ends with its Fix.
bool FirstLineHasItsFix(const std::string& message) {
  const std::string first_line = message.substr(0, message.find('\n'));
  return first_line.size() <= 1023 && first_line.find(". Fix: ") != std::string::npos &&
         first_line.back() == '.';
}

std::vector<vyre_binding_decl> AddDecls() {
  return {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
          Decl(VYRE_ROLE_OUTPUT, 4, "out")};
}

// A program desc of NUL-terminated PTX `code`; points into `decls`.
vyre_program_desc PtxDesc(const char* code, const char* entry,
                          const std::vector<vyre_binding_decl>& decls, uint32_t workgroup_x) {
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = VYRE_CODE_PTX;
  desc.code = code;
  desc.entry = entry;
  desc.bindings = decls.data();
  desc.binding_count = decls.size();
  desc.workgroup_size[0] = workgroup_x;
  return desc;
}

class ProgramTest : public GpuTest {
 protected:
  // Runs `program` (three bindings a, b, out; default convention) over fresh
  // random host data and checks every element against expected(a, b).
  template <typename Expected>
  void ExpectBinaryKernelResult(vyre_program program, size_t n, Expected expected) {
    const std::vector<uint32_t> a = rng().NonZeroU32(n);
    const std::vector<uint32_t> b = rng().NonZeroU32(n);
    std::vector<uint32_t> out(n, kPoisonU32);
    const std::vector<vyre_dispatch_binding> bindings = {HostIn(a.data(), ByteSize(a)),
                                                         HostIn(b.data(), ByteSize(b)),
                                                         HostOut(out.data(), ByteSize(out))};
    const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    ASSERT_VYRE_OK(vyre_dispatch(program, &desc, nullptr));
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return expected(a[i], b[i]); },
                                 "kernel result"));
  }

  void ExpectAddStillWorks() {
    ProgramHandle add;
    ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), 256, &add));
    ExpectBinaryKernelResult(add.get(), 1000, [](uint32_t a, uint32_t b) { return a + b; });
  }
};

TEST_F(ProgramTest, WarmDispatchLoadsNoModule) {
  const vyre_telemetry fresh = Telemetry(context());
  ProgramHandle program;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), 256, &program));
  const vyre_telemetry created = Telemetry(context());
  EXPECT_EQ(created.module_loads, fresh.module_loads + 1);
  EXPECT_EQ(created.module_cache_misses, fresh.module_cache_misses + 1);
  EXPECT_EQ(created.live_programs, fresh.live_programs + 1);

  ASSERT_NO_FATAL_FAILURE(ExpectBinaryKernelResult(
      program.get(), 4096, [](uint32_t a, uint32_t b) { return a + b; }));
  const vyre_telemetry warm = Telemetry(context());
  for (int i = 0; i < 10; ++i) {
    ASSERT_NO_FATAL_FAILURE(ExpectBinaryKernelResult(
        program.get(), 4096, [](uint32_t a, uint32_t b) { return a + b; }));
  }
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.module_loads, warm.module_loads) << "warm dispatches must not load modules";
  EXPECT_EQ(after.dispatches, warm.dispatches + 10);
  EXPECT_EQ(after.kernel_launches, warm.kernel_launches + 10);

  // The same code again is a cache hit: no second load.
  ProgramHandle twin;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), 256, &twin));
  const vyre_telemetry twin_created = Telemetry(context());
  EXPECT_EQ(twin_created.module_cache_hits, after.module_cache_hits + 1);
  EXPECT_EQ(twin_created.module_loads, after.module_loads);
  EXPECT_EQ(twin_created.live_programs, after.live_programs + 1);

  // Another entry of the same module is a cache hit as well.
  ProgramHandle inc;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_inc_u32",
                                {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, 256, &inc));
  EXPECT_EQ(Telemetry(context()).module_loads, after.module_loads);

  ASSERT_NO_FATAL_FAILURE(ExpectBinaryKernelResult(
      twin.get(), 4096, [](uint32_t a, uint32_t b) { return a + b; }));

  // Destroying one program leaves the other (and the shared module) usable.
  program.reset();
  EXPECT_EQ(Telemetry(context()).live_programs, twin_created.live_programs);
  ASSERT_NO_FATAL_FAILURE(ExpectBinaryKernelResult(
      twin.get(), 4096, [](uint32_t a, uint32_t b) { return a + b; }));
}

TEST_F(ProgramTest, InvalidPtxIsCompileFailedWithTheJitLog) {
  static const char kBrokenPtx[] =
      ".version 7.5\n"
      ".target sm_75\n"
      ".address_size 64\n"
      ".visible .entry vyre_broken(.param .u64 p)\n"
      "{\n"
      "  bogus_instruction_xyzzy;\n"
      "  ret;\n"
      "}\n";
  const std::vector<vyre_binding_decl> decls = {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")};
  const vyre_program_desc desc = PtxDesc(kBrokenPtx, "vyre_broken", decls, 64);
  ProgramHandle program;
  ASSERT_VYRE_STATUS(VYRE_STATUS_COMPILE_FAILED,
                     vyre_program_create(context(), &desc, program.out()));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:", "bogus_instruction_xyzzy"}))
      << "the message should carry the JIT log";
  EXPECT_TRUE(FirstLineHasItsFix(LastErrorMessage())) << LastErrorMessage();
  EXPECT_NE(LastErrorLog().find("bogus_instruction_xyzzy"), std::string::npos)
      << "vyre_last_error_log should return the driver's JIT log: " << LastErrorLog();
  EXPECT_FALSE(program.valid());
  ASSERT_NO_FATAL_FAILURE(ExpectAddStillWorks());
}

TEST_F(ProgramTest, UnknownEntryIsEntryNotFound) {
  ProgramHandle program;
  const std::vector<vyre_binding_decl> decls = AddDecls();
  const vyre_program_desc desc =
      PtxDesc(vyre_gpu_test_kernels_ptx, "vyre_test_no_such_kernel", decls, 256);
  ASSERT_VYRE_STATUS(VYRE_STATUS_ENTRY_NOT_FOUND,
                     vyre_program_create(context(), &desc, program.out()));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:", "vyre_test_no_such_kernel"}));
  ASSERT_NO_FATAL_FAILURE(ExpectAddStillWorks());
}

TEST_F(ProgramTest, WorkgroupOverDeviceLimitIsLimitExceeded) {
  ASSERT_LT(device().max_threads_per_block, 2048u);
  ProgramHandle program;
  const std::vector<vyre_binding_decl> decls = AddDecls();
  const vyre_program_desc desc =
      PtxDesc(vyre_gpu_test_kernels_ptx, "vyre_test_add_u32", decls, 2048);
  EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED,
                     vyre_program_create(context(), &desc, program.out()));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:"}));
}

TEST_F(ProgramTest, DispatchOverDeviceLimitsIsLimitExceeded) {
  ProgramHandle add;
  ASSERT_TRUE(CreateTestProgram(context(), "vyre_test_add_u32", AddDecls(), 256, &add));
  const size_t n = 1024;
  const std::vector<uint32_t> a = rng().NonZeroU32(n);
  const std::vector<uint32_t> b = rng().NonZeroU32(n);
  std::vector<uint32_t> out(n, kPoisonU32);
  const std::vector<vyre_dispatch_binding> bindings = {HostIn(a.data(), ByteSize(a)),
                                                       HostIn(b.data(), ByteSize(b)),
                                                       HostOut(out.data(), ByteSize(out))};
  const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};

  vyre_dispatch_desc desc = DispatchDesc(bindings, params);
  desc.block[0] = 2048;
  desc.block[1] = 1;
  desc.block[2] = 1;
  EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_dispatch(add.get(), &desc, nullptr))
      << "block of 2048 threads";

  desc = DispatchDesc(bindings, params);
  desc.grid[0] = 1;
  desc.grid[1] = device().max_grid_dim[1] + 1;  // 65536 on current GPUs
  desc.grid[2] = 1;
  ASSERT_GT(desc.grid[1], device().max_grid_dim[1]) << "max_grid_dim[1] overflowed";
  EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_dispatch(add.get(), &desc, nullptr))
      << "grid.y over the device limit";

  desc = DispatchDesc(bindings, params);
  desc.shared_memory_bytes = 16u << 20;  // 16 MiB: more than any GPU's shared memory
  EXPECT_VYRE_STATUS(VYRE_STATUS_LIMIT_EXCEEDED, vyre_dispatch(add.get(), &desc, nullptr))
      << "dynamic shared memory over the device limit";

  // None of that wrote the output or broke the context.
  EXPECT_TRUE(AllElementsEqual(out, [](size_t) { return kPoisonU32; }, "untouched output"));
  desc = DispatchDesc(bindings, params);
  ASSERT_VYRE_OK(vyre_dispatch(add.get(), &desc, nullptr));
  EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return a[i] + b[i]; }, "a + b"));
}

// --- NVRTC ------------------------------------------------------------------

constexpr char kTripleAddSource[] = R"(
extern "C" __global__ void vyre_nvrtc_triple_add(const unsigned* a, const unsigned* b,
                                                 unsigned* out, const unsigned* params) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) out[i] = a[i] * 3u + b[i];
}
)";

constexpr char kBrokenSource[] = R"(
extern "C" __global__ void vyre_nvrtc_broken(const unsigned* a, const unsigned* b,
                                             unsigned* out, const unsigned* params) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = undeclared_identifier_xyzzy + a[i] + b[i];
}
)";

class NvrtcTest : public ProgramTest {
 protected:
  // vyre_program_create for CUDA source; skips (or fails under
  // VYRE_CUDA_REQUIRE_GPU=1) when NVRTC cannot be loaded.
  vyre_status CreateFromSource(const char* source, const char* entry, ProgramHandle* out) {
    static const char* const kOptions[] = {"-std=c++17"};
    const std::vector<vyre_binding_decl> decls = AddDecls();
    vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
    desc.code_kind = VYRE_CODE_CUDA_SOURCE;
    desc.code = source;
    desc.code_size = 0;
    desc.entry = entry;
    desc.bindings = decls.data();
    desc.binding_count = decls.size();
    desc.workgroup_size[0] = 128;
    desc.compile_options = kOptions;
    desc.compile_option_count = 1;
    return vyre_program_create(context(), &desc, out->out());
  }
};

TEST_F(NvrtcTest, CompiledKernelMatchesCpu) {
  ProgramHandle program;
  const vyre_status status = CreateFromSource(kTripleAddSource, "vyre_nvrtc_triple_add", &program);
  if (status == VYRE_STATUS_NVRTC_UNAVAILABLE && !GpuRequired()) {
    VYRE_GPU_SKIP_OR_FAIL("NVRTC unavailable: " << LastErrorMessage());
  }
  ASSERT_TRUE(StatusIs(status, VYRE_STATUS_OK, "vyre_program_create(CUDA source)"));
  ASSERT_NO_FATAL_FAILURE(ExpectBinaryKernelResult(
      program.get(), (size_t{1} << 20) + 17, [](uint32_t a, uint32_t b) { return a * 3u + b; }));

  // The same source again comes from the module cache.
  const vyre_telemetry before = Telemetry(context());
  ProgramHandle twin;
  ASSERT_VYRE_OK(CreateFromSource(kTripleAddSource, "vyre_nvrtc_triple_add", &twin));
  const vyre_telemetry after = Telemetry(context());
  EXPECT_EQ(after.module_cache_hits, before.module_cache_hits + 1);
  EXPECT_EQ(after.module_loads, before.module_loads);
}

TEST_F(NvrtcTest, CompileErrorCarriesTheLog) {
  ProgramHandle program;
  const vyre_status status = CreateFromSource(kBrokenSource, "vyre_nvrtc_broken", &program);
  if (status == VYRE_STATUS_NVRTC_UNAVAILABLE && !GpuRequired()) {
    VYRE_GPU_SKIP_OR_FAIL("NVRTC unavailable: " << LastErrorMessage());
  }
  ASSERT_TRUE(StatusIs(status, VYRE_STATUS_COMPILE_FAILED, "vyre_program_create(broken source)"));
  EXPECT_TRUE(MessageContains(LastErrorMessage(), {"Fix:", "undeclared_identifier_xyzzy"}))
      << "the message should carry the NVRTC log";
  EXPECT_TRUE(FirstLineHasItsFix(LastErrorMessage())) << LastErrorMessage();
  EXPECT_NE(LastErrorLog().find("undeclared_identifier_xyzzy"), std::string::npos)
      << "vyre_last_error_log should return the NVRTC log: " << LastErrorLog();
  EXPECT_FALSE(program.valid());
  ASSERT_NO_FATAL_FAILURE(ExpectAddStillWorks());
}

}  // namespace
}  // namespace vyre_test
