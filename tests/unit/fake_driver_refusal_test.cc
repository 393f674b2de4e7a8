// What the fake CUDA driver refuses, and what the library then says
// (white-box: links vyre_cuda_static for fault injection; ctest entry
// unit.fake_driver_refusal, on the fake driver):
//   - a kernel the fake does not run (neither a test kernel of
//     docs/ENGINE_CONTRACT.md nor one of the library's own) is refused at its
//     launch, live (vyre_dispatch, _async, cooperative, a sequence run) or
//     captured (vyre_graph_record, vyre_sequence_record), with
//     CUDA_ERROR_NOT_SUPPORTED, never run as a silent no-op: DRIVER_ERROR,
//     the message naming the kernel and a Fix that says the fake runs only
//     the contract's test kernels and to run this one on a real GPU; the
//     library's e-graph pass and rebuild kernels get an e-graph Fix;
//   - a CUDA_ERROR_NOT_SUPPORTED the fake did not give for such a refusal
//     (injected into the launch) keeps the table's Fix;
//   - CUDA C++ passed with the default code kind (PTX) is COMPILE_FAILED with
//     a Fix naming VYRE_CODE_CUDA_SOURCE, while genuinely bad PTX is not
//     told so; PTX-kind text with entries but no .version is refused by the
//     fake with a ptxas-like JIT log.
// Each test leaves the fake's objects as it found them, with no driver misuse.
#include <gtest/gtest.h>

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "driver/driver_api.h"
#include "driver/fault_injection.h"
#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using vyre::driver::Entry;
namespace faults = vyre::driver::testing;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string FirstLine(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

// The part of the first line after ". Fix: ".
std::string FixOf(const std::string& message) {
  const std::string first = FirstLine(message);
  const size_t at = first.find(". Fix: ");
  return at == std::string::npos ? std::string() : first.substr(at + 7);
}

// A user's kernel the fake does not implement: an OUTPUT binding and the
// parameter words, as the default convention passes them.
constexpr char kUserKernel[] = "user_scale_u32";
const std::string kUserPtx =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry user_scale_u32(\n"
    "  .param .u64 param_out,\n"
    "  .param .u64 param_words\n"
    ")\n"
    "{\n"
    "  ret;\n"
    "}\n";

ProgramSpec UserSpec() {
  ProgramSpec spec;
  spec.code = kUserPtx;
  spec.entry = kUserKernel;
  spec.bindings = {Decl(VYRE_ROLE_OUTPUT, 4, "out")};
  return spec;
}

class FakeRefusalTest : public FakeDriverTest {
 protected:
  // The last error is the fake's refusal of `kernel` from `function`:
  // DRIVER_ERROR with CUDA_ERROR_NOT_SUPPORTED, the layout, the kernel named,
  // and the Fix that says what the fake runs.
  void ExpectRefused(vyre_status status, const char* function, const std::string& kernel) {
    EXPECT_VYRE_ERROR_FROM(status, VYRE_STATUS_DRIVER_ERROR, function);
    const LastError e = ReadLastError();
    EXPECT_EQ(e.cu_result, CUDA_ERROR_NOT_SUPPORTED) << e.message;
    const std::string first = FirstLine(e.message);
    EXPECT_TRUE(Contains(first, "returned CUDA_ERROR_NOT_SUPPORTED (the fake CUDA driver does "
                                "not run kernel '" + kernel + "')"))
        << e.message;
    const std::string fix = FixOf(e.message);
    EXPECT_EQ(fix.rfind("the fake CUDA driver that VYRE_CUDA_DRIVER_LIBRARY loads runs only the "
                        "test kernels listed in docs/ENGINE_CONTRACT.md",
                        0),
              0u)
        << e.message;
    EXPECT_TRUE(Contains(fix, "tests/support/test_kernels.cu")) << e.message;
    EXPECT_TRUE(Contains(fix, "run this kernel on a real GPU")) << e.message;
  }

  // Nothing ran: no launch was counted since `before`.
  void ExpectNothingRan(const fake_cuda_stats& before) {
    const fake_cuda_stats now = FakeCuda::Stats();
    EXPECT_EQ(now.kernel_launches, before.kernel_launches) << "the refused kernel was counted";
    EXPECT_EQ(now.cooperative_launches, before.cooperative_launches);
  }

  // The context still runs a test kernel: a refusal is no device fault.
  void ExpectContextWorks() {
    vyre_program add = MakeProgram(context_, AddSpec());
    std::vector<uint32_t> a = RandomNonZeroU32(100, 7), b = RandomNonZeroU32(100, 8);
    std::vector<uint32_t> out(100, kPoison);
    DispatchSpec d;
    d.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                  HostOut(out.data(), ByteSize(out))};
    d.param_words = {100};
    vyre_dispatch_desc desc = d.Desc();
    EXPECT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
    EXPECT_TRUE(SameU32(out, CpuAdd(a, b)));
    EXPECT_VYRE_OK(vyre_program_destroy(add));
  }
};

// A program of a kernel the fake does not run is created (its descriptor can
// be tested here); its dispatch is refused and writes nothing.
TEST_F(FakeRefusalTest, DispatchOfAnUnknownKernelIsRefused) {
  vyre_program program = MakeProgram(context_, UserSpec());
  ASSERT_NE(program.bits, 0u);
  std::vector<uint32_t> out(64, kPoison);
  DispatchSpec d;
  d.bindings = {HostOut(out.data(), ByteSize(out))};
  d.param_words = {64};
  const vyre_dispatch_desc desc = d.Desc();
  const fake_cuda_stats before = FakeCuda::Stats();
  ExpectRefused(vyre_dispatch(program, &desc, nullptr), "vyre_dispatch", kUserKernel);
  EXPECT_TRUE(Contains(FirstLine(LastErrorMessage()), "launching 'user_scale_u32'"))
      << LastErrorMessage();
  EXPECT_TRUE(SameU32(out, std::vector<uint32_t>(64, kPoison))) << "a refused dispatch wrote";
  ExpectNothingRan(before);

  // Asynchronously: refused at the enqueue, no pending handed out.
  vyre_pending pending{0};
  ExpectRefused(vyre_dispatch_async(program, &desc, &pending), "vyre_dispatch_async",
                kUserKernel);
  EXPECT_EQ(pending.bits, 0u);

  // Cooperatively: cuLaunchCooperativeKernel refuses it the same way.
  DispatchSpec cooperative = d;
  cooperative.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  const vyre_dispatch_desc cooperative_desc = cooperative.Desc();
  ExpectRefused(vyre_dispatch(program, &cooperative_desc, nullptr), "vyre_dispatch",
                kUserKernel);
  EXPECT_TRUE(Contains(FirstLine(LastErrorMessage()), "cuLaunchCooperativeKernel returned"))
      << LastErrorMessage();
  ExpectNothingRan(before);

  // Over a resident buffer, with several fixpoint iterations: the first
  // launch is refused.
  vyre_buffer buffer = MakeBuffer(context_, 256);
  DispatchSpec resident;
  resident.bindings = {Resident(buffer)};
  resident.param_words = {64};
  resident.fixpoint_iterations = 3;
  const vyre_dispatch_desc resident_desc = resident.Desc();
  ExpectRefused(vyre_dispatch(program, &resident_desc, nullptr), "vyre_dispatch", kUserKernel);
  EXPECT_TRUE(Contains(FirstLine(LastErrorMessage()), "(iteration 1 of 3)")) << LastErrorMessage();
  ExpectNothingRan(before);

  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
  ExpectContextWorks();
}

// Recording captures the launch: the capture refuses it, so no graph of a
// kernel the fake cannot run is ever made (a graph launch of one would be
// refused too).
TEST_F(FakeRefusalTest, RecordingAnUnknownKernelIsRefused) {
  vyre_program program = MakeProgram(context_, UserSpec());
  std::vector<uint32_t> out(64, kPoison);
  DispatchSpec d;
  d.bindings = {HostOut(out.data(), ByteSize(out))};
  d.param_words = {64};
  const vyre_dispatch_desc desc = d.Desc();
  const fake_cuda_stats before = FakeCuda::Stats();
  vyre_graph graph{0};
  ExpectRefused(vyre_graph_record(program, &desc, &graph), "vyre_graph_record", kUserKernel);
  EXPECT_EQ(graph.bits, 0u);
  ExpectNothingRan(before);
  EXPECT_EQ(FakeCuda::Stats().graphs_live, before.graphs_live);
  EXPECT_EQ(FakeCuda::Stats().graph_execs_live, before.graph_execs_live);
  EXPECT_VYRE_OK(vyre_program_destroy(program));
  ExpectContextWorks();
}

// A sequence's dispatch step: refused when the sequence runs and when it is
// recorded; the steps before it ran (run) or were discarded (record).
TEST_F(FakeRefusalTest, SequenceWithAnUnknownKernelIsRefused) {
  vyre_program program = MakeProgram(context_, UserSpec());
  vyre_buffer buffer = MakeBuffer(context_, 256);
  DispatchSpec d;
  d.bindings = {Resident(buffer)};
  d.param_words = {64};
  const vyre_dispatch_desc desc = d.Desc();
  vyre_sequence_step steps[2] = {VYRE_SEQUENCE_STEP_INIT, VYRE_SEQUENCE_STEP_INIT};
  steps[0].kind = VYRE_STEP_FILL;
  steps[0].buffer = buffer;
  steps[0].bytes = 256;
  steps[0].fill_byte = 7;
  steps[1].kind = VYRE_STEP_DISPATCH;
  steps[1].program = program;
  steps[1].dispatch = &desc;
  vyre_sequence_desc sequence_desc = VYRE_SEQUENCE_DESC_INIT;
  sequence_desc.steps = steps;
  sequence_desc.step_count = 2;
  vyre_sequence sequence{0};
  ASSERT_VYRE_OK(vyre_sequence_create(context_, &sequence_desc, &sequence));
  const fake_cuda_stats before = FakeCuda::Stats();
  ExpectRefused(vyre_sequence_run(sequence, nullptr), "vyre_sequence_run", kUserKernel);
  vyre_graph graph{0};
  ExpectRefused(vyre_sequence_record(sequence, &graph), "vyre_sequence_record", kUserKernel);
  EXPECT_EQ(graph.bits, 0u);
  ExpectNothingRan(before);
  EXPECT_VYRE_OK(vyre_sequence_destroy(sequence));
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
  ExpectContextWorks();
}

// Every test kernel of the contract and the library's self-test still run
// (their results are checked by the other suites; here: accepted and run).
TEST_F(FakeRefusalTest, TheContractsTestKernelsAndTheSelfTestRun) {
  const fake_cuda_stats before = FakeCuda::Stats();
  EXPECT_VYRE_OK(vyre_context_selftest(context_));
  vyre_program noop = MakeProgram(context_, NoopOutSpec());
  std::vector<uint32_t> out(32, kPoison);
  DispatchSpec d;
  d.bindings = {HostOut(out.data(), ByteSize(out))};
  d.param_words = {32};
  const vyre_dispatch_desc desc = d.Desc();
  EXPECT_VYRE_OK(vyre_dispatch(noop, &desc, nullptr));
  EXPECT_TRUE(SameU32(out, std::vector<uint32_t>(32, 0u)));  // zeroed, then untouched
  EXPECT_EQ(std::string(FakeCuda::Stats().last_kernel), "vyre_test_noop_out_u32");
  EXPECT_VYRE_OK(vyre_program_destroy(noop));
  ExpectContextWorks();
  EXPECT_EQ(FakeCuda::Stats().kernel_launches, before.kernel_launches + 3);
}

// A CUDA_ERROR_NOT_SUPPORTED that is not the fake's refusal (here injected
// into the launch, as a real driver could return it) keeps the table's Fix:
// the library tells the fake's refusal only by the fake's own word.
TEST_F(FakeRefusalTest, AnotherNotSupportedKeepsTheTablesFix) {
  vyre::driver::testing::InstallFaultInjection();
  vyre_program add = MakeProgram(context_, AddSpec());
  std::vector<uint32_t> a(16, 1), b(16, 2), out(16, kPoison);
  DispatchSpec d;
  d.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                HostOut(out.data(), ByteSize(out))};
  d.param_words = {16};
  const vyre_dispatch_desc desc = d.Desc();
  // A refusal first, left for the library to take, then the injected result.
  vyre_program user = MakeProgram(context_, UserSpec());
  DispatchSpec u;
  std::vector<uint32_t> user_out(16, kPoison);
  u.bindings = {HostOut(user_out.data(), ByteSize(user_out))};
  u.param_words = {16};
  const vyre_dispatch_desc user_desc = u.Desc();
  ExpectRefused(vyre_dispatch(user, &user_desc, nullptr), "vyre_dispatch", kUserKernel);

  faults::FailNthCall(Entry::k_cuLaunchKernel, 1, CUDA_ERROR_NOT_SUPPORTED);
  const vyre_status status = vyre_dispatch(add, &desc, nullptr);
  faults::ClearFaults();
  EXPECT_VYRE_ERROR_FROM(status, VYRE_STATUS_DRIVER_ERROR, "vyre_dispatch");
  const std::string message = LastErrorMessage();
  EXPECT_EQ(ReadLastError().cu_result, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_FALSE(Contains(message, "fake CUDA driver")) << message;
  EXPECT_EQ(FixOf(message).rfind("do without the feature that needs it", 0), 0u) << message;
  EXPECT_VYRE_OK(vyre_program_destroy(user));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
  ExpectContextWorks();
}

// GPU e-graph images: created on the fake (their columns upload and read
// back), but a pass or rebuild needs kernels the fake does not run: refused
// with a Fix pointing at a GPU or a CPU image.
TEST_F(FakeRefusalTest, EgraphPassAndRebuildOnAGpuImageAreRefused) {
  const uint32_t classes[4] = {0, 1, 2, 3}, ops[4] = {1, 2, 10, 10};
  const uint32_t offsets[4] = {0, 0, 0, 2}, lengths[4] = {0, 0, 2, 2};
  const uint32_t children[4] = {0, 1, 0, 1};
  vyre_egraph_image_desc desc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  desc.device = VYRE_EGRAPH_DEVICE_GPU;
  desc.context = context_;
  desc.row_count = 4;
  desc.class_count = 4;
  desc.child_count = 4;
  desc.row_classes = classes;
  desc.row_ops = ops;
  desc.child_offsets = offsets;
  desc.child_lengths = lengths;
  desc.children = children;
  vyre_egraph_image image{0};
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, &image));
  uint32_t read[4] = {};
  EXPECT_VYRE_OK(vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_ROW_OPS, 0, 4, read));
  EXPECT_TRUE(SameU32(std::vector<uint32_t>(read, read + 4), {1, 2, 10, 10}));

  auto expect_egraph_refusal = [](vyre_status status, const char* function) {
    EXPECT_VYRE_ERROR_FROM(status, VYRE_STATUS_DRIVER_ERROR, function);
    const std::string message = LastErrorMessage();
    EXPECT_EQ(ReadLastError().cu_result, CUDA_ERROR_NOT_SUPPORTED) << message;
    EXPECT_TRUE(Contains(FirstLine(message), "(the fake CUDA driver does not run kernel 'vyre_eg_"))
        << message;
    const std::string fix = FixOf(message);
    EXPECT_TRUE(Contains(fix, "runs none of the e-graph pass and rebuild kernels")) << message;
    EXPECT_TRUE(Contains(fix, "VYRE_EGRAPH_DEVICE_CPU")) << message;
  };
  uint32_t pairs[8] = {};
  uint64_t count = 0;
  expect_egraph_refusal(vyre_egraph_pass(image, pairs, 4, &count), "vyre_egraph_pass");
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  expect_egraph_refusal(vyre_egraph_rebuild(image, nullptr, &result), "vyre_egraph_rebuild");
  vyre_pending pending{0};
  expect_egraph_refusal(vyre_egraph_rebuild_async(image, nullptr, &pending),
                        "vyre_egraph_rebuild_async");
  EXPECT_EQ(pending.bits, 0u);
  // The image is still whole and usable for what the fake does.
  EXPECT_VYRE_OK(vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_CHILDREN, 0, 4, read));
  EXPECT_TRUE(SameU32(std::vector<uint32_t>(read, read + 4), {0, 1, 0, 1}));
  EXPECT_VYRE_OK(vyre_egraph_image_destroy(image));
  ExpectContextWorks();
}

// ---------------------------------------------------------------------------
// CUDA C++ given as PTX (the default code kind)
// ---------------------------------------------------------------------------

class CodeKindTest : public FakeDriverTest {
 protected:
  // vyre_program_create of `code` as PTX, entry `entry`.
  vyre_status CreatePtx(const std::string& code, const char* entry = "vyre_test_add_u32") {
    ProgramSpec spec = AddSpec();
    spec.code = code;
    spec.entry = entry;
    vyre_program_desc desc = spec.Desc();
    vyre_program program{0};
    const vyre_status status = vyre_program_create(context_, &desc, &program);
    EXPECT_EQ(program.bits, 0u);
    return status;
  }
};

TEST_F(CodeKindTest, CudaCxxAsPtxNamesTheCudaSourceCodeKind) {
  const std::string sources[] = {
      // The usual mistake: a .cu kernel's text handed over as it is.
      "extern \"C\" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b,\n"
      "                                             unsigned* out, const unsigned* p) {\n"
      "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < p[0]) out[i] = a[i] + b[i];\n"
      "}\n",
      // Only an #include gives it away.
      "#include <cuda_fp16.h>\nvoid f() {}\n",
      // C++ that mentions .entry (in a comment): the fake's JIT now refuses
      // it at its first token, as ptxas does.
      "// the kernel's .entry vyre_test_add_u32 (see its PTX)\n"
      "extern \"C\" __global__ void vyre_test_add_u32() {}\n",
  };
  for (const std::string& source : sources) {
    SCOPED_TRACE(source);
    EXPECT_VYRE_ERROR_FROM(CreatePtx(source), VYRE_STATUS_COMPILE_FAILED, "vyre_program_create");
    const LastError e = ReadLastError();
    EXPECT_EQ(e.cu_result, CUDA_ERROR_INVALID_PTX) << e.message;
    const std::string fix = FixOf(e.message);
    EXPECT_EQ(fix.rfind("this code is CUDA C++ (it has ", 0), 0u) << e.message;
    EXPECT_TRUE(Contains(fix, "create the program with code kind VYRE_CODE_CUDA_SOURCE"))
        << e.message;
    EXPECT_TRUE(Contains(fix, "Code::CudaSource")) << e.message;
    EXPECT_TRUE(Contains(fix, "vyrecuda.CodeCUDASource")) << e.message;
    EXPECT_TRUE(Contains(fix, "CodeKind.CUDA_SOURCE")) << e.message;
    // The JIT's log follows the first line, as on a real driver.
    EXPECT_TRUE(Contains(e.message, "\nfake ptxas")) << e.message;
  }
  // The third one's log is the parse error at its first token.
  EXPECT_TRUE(Contains(LastErrorMessage(),
                       "\nfake ptxas: application ptx input, line 2; fatal   : Parsing error near "
                       "'extern': syntax error\nfake ptxas: fatal   : Ptx assembly aborted due to "
                       "errors"))
      << LastErrorMessage();
}

// Genuinely bad PTX is a code error of its own: the Fix says to correct it,
// never to switch to CUDA source.
TEST_F(CodeKindTest, BadPtxIsNotTakenForCudaCxx) {
  struct Case {
    std::string code;
    std::string log;
  } cases[] = {
      // PTX without entries.
      {".version 8.0\n.target sm_75\n.address_size 64\n// no entries here\n",
       "fake ptxas: no .entry found"},
      // Entries but no .version first (PTX cut at its head).
      {".target sm_75\n.address_size 64\n.visible .entry vyre_test_add_u32(\n"
       ".param .u64 a\n)\n{\nret;\n}\n",
       "fake ptxas: application ptx input, line 1; fatal   : Missing .version directive at start "
       "of file, found '.target'"},
      // Not PTX and not C++ either.
      {"   \n  garbage .entry vyre_test_add_u32( ) { }",
       "fake ptxas: application ptx input, line 2; fatal   : Parsing error near 'garbage': "
       "syntax error"},
      // PTX whose JIT fails with a log.
      {".version 7.0\n.target sm_75\n// fake-jit-log-bytes: 64\n",
       std::string(FAKE_CUDA_JIT_LOG_PATTERN).substr(0, 64)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.code);
    EXPECT_VYRE_ERROR_FROM(CreatePtx(c.code), VYRE_STATUS_COMPILE_FAILED, "vyre_program_create");
    const LastError e = ReadLastError();
    EXPECT_EQ(e.cu_result, CUDA_ERROR_INVALID_PTX) << e.message;
    const std::string fix = FixOf(e.message);
    EXPECT_FALSE(Contains(e.message, "VYRE_CODE_CUDA_SOURCE")) << e.message;
    EXPECT_FALSE(Contains(fix, "CUDA C++")) << e.message;
    EXPECT_EQ(fix.rfind("correct the code errors the JIT log names", 0), 0u) << e.message;
    EXPECT_TRUE(Contains(e.message, "\n" + c.log)) << e.message;
  }
  // The contract's PTX, cubin-free, still loads: comments before .version
  // are fine.
  ProgramSpec spec = AddSpec();
  spec.code = "// a comment\n/* and\n a block */\n" + std::string(vyre_test_kernels_ptx);
  vyre_program program = MakeProgram(context_, spec);
  EXPECT_NE(program.bits, 0u);
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

}  // namespace
}  // namespace vyre_test
