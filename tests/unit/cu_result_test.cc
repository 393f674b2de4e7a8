// Every CUresult named truly (white-box, linked to vyre_cuda_static, run on
// the fake driver; ctest entry unit.cu_results):
//   - the table in src/driver/cu_error.cc holds every CUresult of the CUDA
//     toolkit's cuda.h (parsed at run time from the header the build used),
//     by name and number, and nothing else;
//   - each row's status agrees with the device-fault rules, and the points
//     issue 10 names map where they must (the stub library, an unavailable
//     device and a forward-compatibility refusal are environment problems,
//     NO_DRIVER / NO_DEVICE; a driver/kernel-module mismatch is NO_DRIVER, not
//     DRIVER_TOO_OLD; ...);
//   - every CUresult, made the result of a driver call through fault
//     injection, gives its row's status, carries the CUresult and has the
//     message layout "<what failed>: <why>. Fix: <what to do>." (at a buffer
//     allocation and at a module load, whose Fix fits the cause);
//   - NVRTC failures are reported by cause; a wrong self-test result is
//     LAUNCH_FAILED, not INTERNAL; dynamic shared memory is checked against
//     the opt-in maximum less the kernel's static shared memory; binding
//     arrays whose binding 0 is SHARED are strided by a checked struct_size.
#include <gtest/gtest.h>

#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/device_faults.h"
#include "driver/driver_api.h"
#include "driver/fault_injection.h"
#include "driver/nvrtc.h"
#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

#ifndef VYRE_CUDA_H_PATH
#error "VYRE_CUDA_H_PATH must name the cuda.h the library was built with"
#endif

namespace vyre_test {
namespace {

using vyre::driver::CuResultInfo;
using vyre::driver::Entry;
namespace faults = vyre::driver::testing;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string FirstLine(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

// The CUresult enumerators of cuda.h: name -> value.
std::map<std::string, int> ParseCudaHeader() {
  std::ifstream in(VYRE_CUDA_H_PATH);
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  std::map<std::string, int> values;
  const size_t begin = header.find("typedef enum cudaError_enum");
  const size_t end = header.find("} CUresult;", begin);
  if (begin == std::string::npos || end == std::string::npos) return values;
  const std::string body = header.substr(begin, end - begin);
  const std::regex enumerator(R"(\b(CUDA_(?:SUCCESS|ERROR_[A-Z0-9_]+))\s*=\s*(\d+))");
  for (std::sregex_iterator it(body.begin(), body.end(), enumerator), last; it != last; ++it) {
    values[(*it)[1].str()] = std::stoi((*it)[2].str());
  }
  return values;
}

TEST(CuResultTableTest, HoldsEveryCuResultOfCudaH) {
  const std::map<std::string, int> header = ParseCudaHeader();
  ASSERT_GT(header.size(), 90u) << "could not parse the CUresult enum of " << VYRE_CUDA_H_PATH;
  std::map<std::string, int> table;
  std::set<int> codes;
  for (const CuResultInfo& row : vyre::driver::CuResultTable()) {
    EXPECT_TRUE(table.emplace(row.name, row.code).second) << "twice: " << row.name;
    EXPECT_TRUE(codes.insert(row.code).second) << "twice: " << row.code;
  }
  for (const auto& [name, value] : header) {
    auto it = table.find(name);
    if (it == table.end()) {
      ADD_FAILURE() << name << " = " << value << " of cuda.h is not in the table";
      continue;
    }
    EXPECT_EQ(it->second, value) << name;
  }
  for (const auto& [name, value] : table) {
    EXPECT_TRUE(header.count(name)) << name << " = " << value << " is not in cuda.h";
  }
}

TEST(CuResultTableTest, EveryRowIsComplete) {
  for (const CuResultInfo& row : vyre::driver::CuResultTable()) {
    SCOPED_TRACE(row.name);
    const CUresult code = static_cast<CUresult>(row.code);
    EXPECT_EQ(vyre::driver::FindCuResult(code), &row);
    EXPECT_STREQ(vyre::driver::CuResultName(code), row.name);
    EXPECT_EQ(vyre::driver::StatusForCuResult(code), row.status);
    // A device fault exactly when the context is left refusing all work.
    EXPECT_EQ(row.status == VYRE_STATUS_DEVICE_FAULT, vyre::driver::IsStickyResult(code));
    EXPECT_EQ(row.status == VYRE_STATUS_OK, row.code == CUDA_SUCCESS);
    // The Fix is a clause the message ends with ". Fix: <fix>."; the cause a
    // description without its own full stop.
    ASSERT_NE(row.fix, nullptr);
    ASSERT_NE(row.cause, nullptr);
    EXPECT_GT(std::strlen(row.fix), 10u);
    EXPECT_GE(std::strlen(row.cause), 8u);
    EXPECT_NE(row.fix[std::strlen(row.fix) - 1], '.') << row.fix;
    EXPECT_NE(row.cause[std::strlen(row.cause) - 1], '.') << row.cause;
    if (row.code == CUDA_SUCCESS) continue;
    // The message CuError builds from the row (before the driver is loaded:
    // the table's cause stands in for the driver's description).
    const absl::Status error = vyre::driver::CuError(code, "vyre_test_call", "cuTestCall");
    EXPECT_EQ(vyre::PublicCode(error), row.status);
    EXPECT_EQ(vyre::CuResultOf(error), row.code);
    const std::string message(error.message());
    EXPECT_TRUE(MessageLayoutOk(message));
    EXPECT_EQ(message.rfind(std::string("vyre_test_call: cuTestCall returned ") + row.name, 0),
              0u)
        << message;
  }
  // A code newer than the table: DRIVER_ERROR, named by its number, with a Fix.
  const CUresult newer = static_cast<CUresult>(123456);
  EXPECT_EQ(vyre::driver::FindCuResult(newer), nullptr);
  EXPECT_EQ(vyre::driver::StatusForCuResult(newer), VYRE_STATUS_DRIVER_ERROR);
  const std::string message(vyre::driver::CuError(newer, "vyre_test_call", "cuX").message());
  EXPECT_TRUE(MessageLayoutOk(message));
  EXPECT_TRUE(Contains(message, "CUresult 123456")) << message;
}

// The points issue 10 lists, and the CLI's exit code 2 ("this machine cannot
// run CUDA work": NO_DRIVER, DRIVER_TOO_OLD, NO_DEVICE) for environment
// problems.
TEST(CuResultTableTest, EnvironmentProblemsAreNamedAsSuch) {
  struct Expectation {
    int code;
    vyre_status status;
  };
  const std::vector<Expectation> expected = {
      {34, VYRE_STATUS_NO_DRIVER},        // CUDA_ERROR_STUB_LIBRARY
      {803, VYRE_STATUS_NO_DRIVER},       // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: not too old
      {46, VYRE_STATUS_NO_DEVICE},        // CUDA_ERROR_DEVICE_UNAVAILABLE
      {804, VYRE_STATUS_NO_DEVICE},       // CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
      {802, VYRE_STATUS_NO_DEVICE},       // CUDA_ERROR_SYSTEM_NOT_READY
      {100, VYRE_STATUS_NO_DEVICE},       // CUDA_ERROR_NO_DEVICE
      {102, VYRE_STATUS_NO_DEVICE},       // CUDA_ERROR_DEVICE_NOT_LICENSED
      {805, VYRE_STATUS_NO_DEVICE},       // CUDA_ERROR_MPS_CONNECTION_FAILED
      {36, VYRE_STATUS_DRIVER_TOO_OLD},   // CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER
      {2, VYRE_STATUS_OUT_OF_MEMORY},     // CUDA_ERROR_OUT_OF_MEMORY
      {218, VYRE_STATUS_COMPILE_FAILED},  // CUDA_ERROR_INVALID_PTX
      {222, VYRE_STATUS_COMPILE_FAILED},  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
      {209, VYRE_STATUS_COMPILE_FAILED},  // CUDA_ERROR_NO_BINARY_FOR_GPU
      {500, VYRE_STATUS_ENTRY_NOT_FOUND},
      {600, VYRE_STATUS_NOT_READY},
      {701, VYRE_STATUS_LIMIT_EXCEEDED},  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
      {720, VYRE_STATUS_LIMIT_EXCEEDED},  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
      {700, VYRE_STATUS_DEVICE_FAULT},    // CUDA_ERROR_ILLEGAL_ADDRESS
      {226, VYRE_STATUS_DEVICE_FAULT},    // CUDA_ERROR_CONTAINED
      {721, VYRE_STATUS_DEVICE_FAULT},    // CUDA_ERROR_TENSOR_MEMORY_LEAK
      {911, VYRE_STATUS_DEVICE_FAULT},    // CUDA_ERROR_EXTERNAL_DEVICE
      {999, VYRE_STATUS_DRIVER_ERROR},    // CUDA_ERROR_UNKNOWN
  };
  for (const Expectation& e : expected) {
    SCOPED_TRACE(e.code);
    EXPECT_EQ(vyre::driver::StatusForCuResult(static_cast<CUresult>(e.code)), e.status);
  }
  const CuResultInfo* stub = vyre::driver::FindCuResult(CUDA_ERROR_STUB_LIBRARY);
  ASSERT_NE(stub, nullptr);
  EXPECT_TRUE(Contains(stub->cause, "link stub")) << stub->cause;
  EXPECT_TRUE(Contains(stub->fix, "libcuda.so.1")) << stub->fix;
  EXPECT_TRUE(Contains(stub->fix, "LD_LIBRARY_PATH")) << stub->fix;
  EXPECT_TRUE(Contains(stub->fix, "VYRE_CUDA_DRIVER_LIBRARY")) << stub->fix;
  const CuResultInfo* mismatch = vyre::driver::FindCuResult(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
  ASSERT_NE(mismatch, nullptr);
  EXPECT_TRUE(Contains(mismatch->cause, "kernel module")) << mismatch->cause;
}

// NVRTC failures by cause: every nvrtcResult up to CUDA 13.0's.
TEST(NvrtcFailureTest, EveryResultHasItsStatus) {
  const std::map<int, vyre_status> expected = {
      {1, VYRE_STATUS_OUT_OF_MEMORY},      {2, VYRE_STATUS_COMPILE_FAILED},
      {3, VYRE_STATUS_INTERNAL},           {4, VYRE_STATUS_INTERNAL},
      {5, VYRE_STATUS_INVALID_ARGUMENT},   {6, VYRE_STATUS_COMPILE_FAILED},
      {7, VYRE_STATUS_COMPILE_FAILED},     {8, VYRE_STATUS_INTERNAL},
      {9, VYRE_STATUS_INTERNAL},           {10, VYRE_STATUS_INTERNAL},
      {11, VYRE_STATUS_COMPILE_FAILED},    {12, VYRE_STATUS_INVALID_ARGUMENT},
      {13, VYRE_STATUS_COMPILE_FAILED},    {14, VYRE_STATUS_OUT_OF_MEMORY},
      {15, VYRE_STATUS_COMPILE_FAILED},    {16, VYRE_STATUS_INTERNAL},
      {17, VYRE_STATUS_INVALID_ARGUMENT},  {99, VYRE_STATUS_COMPILE_FAILED},
  };
  for (const auto& [result, status] : expected) {
    SCOPED_TRACE(result);
    const vyre::driver::NvrtcFailureInfo failure = vyre::driver::NvrtcFailure(result, true);
    EXPECT_EQ(failure.status, status);
    ASSERT_NE(failure.fix, nullptr);
    EXPECT_NE(failure.fix[std::strlen(failure.fix) - 1], '.');
  }
  // Only a compile error blames the source.
  EXPECT_TRUE(Contains(vyre::driver::NvrtcFailure(6, true).fix, "source"));
  EXPECT_FALSE(Contains(vyre::driver::NvrtcFailure(5, true).fix, "source"));
  EXPECT_FALSE(Contains(vyre::driver::NvrtcFailure(1, true).fix, "source"));
}

// ---------------------------------------------------------------------------
// Through the fake driver
// ---------------------------------------------------------------------------

class CuResultThroughTheDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    uint32_t count = 0;
    ASSERT_EQ(vyre_device_count(&count), VYRE_STATUS_OK) << LastErrorMessage();
    ASSERT_EQ(count, 1u);
    faults::InstallFaultInjection();
  }

  void SetUp() override {
    ASSERT_TRUE(FakeCuda::Available()) << "run through ctest (fake driver)";
    faults::ClearFaults();
    context_ = MakeContext();
    ASSERT_NE(context_.bits, 0u);
  }

  void TearDown() override {
    faults::ClearFaults();
    if (context_.bits != 0) {
      EXPECT_VYRE_OK(vyre_context_destroy(context_));
    }
  }

  // After a sticky result the context may be recorded faulted: replace it.
  void FreshContextAfter(const CuResultInfo& row) {
    const vyre_status destroyed = vyre_context_destroy(context_);
    context_ = vyre_context{0};
    if (row.status == VYRE_STATUS_DEVICE_FAULT) {
      EXPECT_TRUE(ExpectError(destroyed, VYRE_STATUS_DEVICE_FAULT));
    } else {
      EXPECT_VYRE_OK(destroyed);
    }
    context_ = MakeContext();
    ASSERT_NE(context_.bits, 0u);
  }

  // The last error is `row`'s status with its CUresult, in the layout, and
  // the first line names the CUresult and starts with `what`.
  void ExpectReported(vyre_status status, const CuResultInfo& row, const std::string& what) {
    EXPECT_TRUE(ExpectError(status, row.status));
    const LastError e = ReadLastError();
    EXPECT_EQ(e.cu_result, row.code) << e.message;
    const std::string first_line = FirstLine(e.message);
    EXPECT_TRUE(Contains(first_line, row.name)) << e.message;
    EXPECT_EQ(first_line.rfind(what, 0), 0u) << e.message;
  }

  vyre_context context_{0};
};

// Every CUresult from cuMemAlloc (vyre_buffer_alloc).
TEST_F(CuResultThroughTheDriverTest, EveryResultFromAnAllocation) {
  size_t checked = 0;
  for (const CuResultInfo& row : vyre::driver::CuResultTable()) {
    if (row.code == CUDA_SUCCESS) continue;
    SCOPED_TRACE(row.name);
    // Out of memory is retried after a trim: fail the retry too.
    faults::FailNthCall(Entry::k_cuMemAlloc, 1, static_cast<CUresult>(row.code), 2);
    vyre_buffer buffer{0};
    const vyre_status status = vyre_buffer_alloc(context_, 4096, &buffer);
    faults::ClearFaults();
    EXPECT_EQ(buffer.bits, 0u);
    ExpectReported(status, row, "vyre_buffer_alloc: ");
    if (row.status == VYRE_STATUS_DEVICE_FAULT) {
      EXPECT_TRUE(Contains(LastErrorMessage(), "Fix: destroy every vyre context on device 0"))
          << LastErrorMessage();
    }
    FreshContextAfter(row);
    ++checked;
  }
  EXPECT_EQ(checked, vyre::driver::CuResultTable().size() - 1);
}

// Every CUresult from cuModuleLoadDataEx (vyre_program_create of new code):
// the Fix fits the cause; only code errors say to correct the code.
TEST_F(CuResultThroughTheDriverTest, EveryResultFromAModuleLoad) {
  int variant = 0;
  for (const CuResultInfo& row : vyre::driver::CuResultTable()) {
    if (row.code == CUDA_SUCCESS) continue;
    SCOPED_TRACE(row.name);
    ProgramSpec spec = AddSpec();
    spec.code = std::string(vyre_test_kernels_ptx) + "\n// variant " + std::to_string(variant++);
    vyre_program_desc desc = spec.Desc();
    faults::FailNthCall(Entry::k_cuModuleLoadDataEx, 1, static_cast<CUresult>(row.code));
    vyre_program program{0};
    const vyre_status status = vyre_program_create(context_, &desc, &program);
    faults::ClearFaults();
    EXPECT_EQ(program.bits, 0u);
    ExpectReported(status, row, "vyre_program_create: loading the PTX module for entry ");
    const std::string fix = FirstLine(LastErrorMessage()).substr(
        FirstLine(LastErrorMessage()).find(". Fix: "));
    const bool code_error = row.code == CUDA_ERROR_INVALID_PTX ||
                            row.code == CUDA_ERROR_INVALID_SOURCE ||
                            row.code == 225 /* UNSUPPORTED_DEVSIDE_SYNC */ ||
                            row.code == 811 /* CDP_NOT_SUPPORTED */ ||
                            row.code == 812 /* CDP_VERSION_MISMATCH */;
    EXPECT_EQ(Contains(fix, "correct the code"), row.code == CUDA_ERROR_INVALID_PTX ||
                                                      row.code == CUDA_ERROR_INVALID_SOURCE)
        << fix;
    if (!code_error) {
      EXPECT_FALSE(Contains(fix, "correct the")) << fix;
    }
    switch (row.code) {
      case CUDA_ERROR_OUT_OF_MEMORY:
        EXPECT_TRUE(Contains(fix, "vyre_context_trim")) << fix;
        break;
      case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        EXPECT_TRUE(Contains(fix, "update the NVIDIA driver")) << fix;
        break;
      case CUDA_ERROR_NO_BINARY_FOR_GPU:
        EXPECT_TRUE(Contains(fix, "sm_90")) << fix;  // the fake device's architecture
        break;
      case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
        EXPECT_TRUE(Contains(fix, "libnvidia-ptxjitcompiler")) << fix;
        break;
      case CUDA_ERROR_JIT_COMPILATION_DISABLED:
        EXPECT_TRUE(Contains(fix, "CUDA_DISABLE_PTX_JIT")) << fix;
        break;
      case CUDA_ERROR_STUB_LIBRARY:
        EXPECT_TRUE(Contains(fix, "libcuda.so.1")) << fix;
        break;
      default:
        break;
    }
    FreshContextAfter(row);
  }
}

// NVRTC by cause through the API: an option NVRTC rejects is the caller's
// argument, a compile error the source's (skipped, visibly, without NVRTC).
TEST_F(CuResultThroughTheDriverTest, NvrtcFailuresByCause) {
  ProgramSpec bad_option = AddSpec();
  bad_option.code_kind = VYRE_CODE_CUDA_SOURCE;
  bad_option.code = "extern \"C\" __global__ void vyre_test_add_u32() {}";
  bad_option.compile_options = {"--no-such-option"};
  vyre_program_desc desc = bad_option.Desc();
  vyre_program program{0};
  vyre_status status = vyre_program_create(context_, &desc, &program);
  if (status == VYRE_STATUS_NVRTC_UNAVAILABLE) GTEST_SKIP() << "no NVRTC: " << LastErrorMessage();
  EXPECT_TRUE(ExpectError(status, VYRE_STATUS_INVALID_ARGUMENT));
  EXPECT_TRUE(Contains(FirstLine(LastErrorMessage()), "NVRTC_ERROR_INVALID_OPTION"))
      << LastErrorMessage();
  EXPECT_FALSE(Contains(FirstLine(LastErrorMessage()), "correct the source"))
      << LastErrorMessage();

  ProgramSpec broken = AddSpec();
  broken.code_kind = VYRE_CODE_CUDA_SOURCE;
  broken.code = "extern \"C\" __global__ void vyre_test_add_u32() { undeclared_xyz; }";
  desc = broken.Desc();
  status = vyre_program_create(context_, &desc, &program);
  EXPECT_TRUE(ExpectError(status, VYRE_STATUS_COMPILE_FAILED));
  EXPECT_TRUE(Contains(FirstLine(LastErrorMessage()), "correct the source")) << LastErrorMessage();
  EXPECT_TRUE(Contains(LastErrorMessage(), "undeclared_xyz")) << "the log follows";
}

// A self-test whose kernel computed a wrong sum (here: its launch dropped,
// so the output stays zero) is LAUNCH_FAILED naming the element, not INTERNAL
// (which would call it a vyre-cuda bug).
TEST_F(CuResultThroughTheDriverTest, AWrongSelfTestResultIsLaunchFailed) {
  ASSERT_VYRE_OK(vyre_context_selftest(context_));
  faults::FailNthCall(Entry::k_cuLaunchKernel, 1, CUDA_SUCCESS);  // the launch never runs
  const vyre_status status = vyre_context_selftest(context_);
  faults::ClearFaults();
  EXPECT_TRUE(ExpectError(status, VYRE_STATUS_LAUNCH_FAILED));
  const std::string message = LastErrorMessage();
  EXPECT_TRUE(Contains(message, "vyre_context_selftest: the self-test kernel ran but wrote 0 at "
                                "element 0"))
      << message;
  EXPECT_TRUE(Contains(message, "Fix: check the device")) << message;
  ASSERT_VYRE_OK(vyre_context_selftest(context_));
}

// Dynamic shared memory against the opt-in maximum (48 KiB on the fake) less
// the kernel's static shared memory (40000 bytes here): refused before the
// driver would answer the launch with CUDA_ERROR_INVALID_VALUE.
TEST_F(CuResultThroughTheDriverTest, SharedMemoryCountsTheKernelsStaticSharedMemory) {
  const std::string code =
      std::string(vyre_test_kernels_ptx) + "\n// " FAKE_CUDA_STATIC_SHARED_MARKER "40000\n";
  constexpr uint32_t kRoom = 48 * 1024 - 40000;  // 9152
  // At program creation: a SHARED binding that does not fit.
  ProgramSpec with_shared = AddSpec();
  with_shared.code = code;
  vyre_binding_decl shared = Decl(VYRE_ROLE_SHARED, 4, "tile");
  shared.element_count = (kRoom + 4) / 4;
  with_shared.bindings.push_back(shared);
  vyre_program_desc desc = with_shared.Desc();
  vyre_program program{0};
  EXPECT_TRUE(ExpectError(vyre_program_create(context_, &desc, &program),
                          VYRE_STATUS_LIMIT_EXCEEDED));
  EXPECT_TRUE(Contains(LastErrorMessage(), "40000 bytes of static shared memory"))
      << LastErrorMessage();
  EXPECT_TRUE(Contains(LastErrorMessage(), "at or below 9152 bytes")) << LastErrorMessage();
  EXPECT_EQ(program.bits, 0u);

  // At dispatch: the program fits, the dispatch's extra bytes do not.
  ProgramSpec plain = AddSpec();
  plain.code = code;
  vyre_program add = MakeProgram(context_, plain);
  const size_t n = 64;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 1), b = RandomNonZeroU32(n, 2), out(n, kPoison);
  DispatchSpec spec;
  spec.bindings = {HostIn(a.data(), n * 4), HostIn(b.data(), n * 4), HostOut(out.data(), n * 4)};
  spec.param_words = {uint32_t(n)};
  spec.shared_memory_bytes = kRoom + 1;
  const fake_cuda_stats before = FakeCuda::Stats();
  const uint64_t launches = faults::CallCount(Entry::k_cuLaunchKernel);
  vyre_dispatch_desc dispatch = spec.Desc();
  EXPECT_TRUE(ExpectError(vyre_dispatch(add, &dispatch, nullptr), VYRE_STATUS_LIMIT_EXCEEDED));
  EXPECT_TRUE(Contains(LastErrorMessage(), "vyre_dispatch: the dispatch asks for 9153 bytes"))
      << LastErrorMessage();
  EXPECT_EQ(faults::CallCount(Entry::k_cuLaunchKernel), launches) << "the driver saw the launch";
  // What fits runs (with the opt-in above 48 KiB in all).
  spec.shared_memory_bytes = kRoom;
  dispatch = spec.Desc();
  EXPECT_VYRE_OK(vyre_dispatch(add, &dispatch, nullptr));
  EXPECT_TRUE(SameU32(out, CpuAdd(a, b)));
  EXPECT_EQ(FakeCuda::Stats().last_shared_bytes, kRoom);
  EXPECT_EQ(FakeCuda::Stats().misuse_errors, before.misuse_errors);
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

// A SHARED binding in slot 0: its entry's fields are ignored, but its
// struct_size strides the array, so a zeroed entry is refused (naming binding
// 0 and why) instead of making every binding read entry 0; an initialised one
// works, in dispatches and graph replays.
TEST_F(CuResultThroughTheDriverTest, ASharedBindingInSlotZeroDoesNotSetAZeroStride) {
  ProgramSpec spec = AddSpec();
  vyre_binding_decl shared = Decl(VYRE_ROLE_SHARED, 4, "tile");
  shared.element_count = 64;
  spec.bindings.insert(spec.bindings.begin(), shared);
  vyre_program add = MakeProgram(context_, spec);
  const size_t n = 100;
  std::vector<uint32_t> a = RandomNonZeroU32(n, 3), b = RandomNonZeroU32(n, 4), out(n, kPoison);
  DispatchSpec d;
  vyre_dispatch_binding zeroed;
  std::memset(&zeroed, 0, sizeof zeroed);
  d.bindings = {zeroed, HostIn(a.data(), n * 4), HostIn(b.data(), n * 4),
                HostOut(out.data(), n * 4)};
  d.param_words = {uint32_t(n)};
  vyre_dispatch_desc desc = d.Desc();
  EXPECT_TRUE(ExpectError(vyre_dispatch(add, &desc, nullptr),
                          VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE));
  std::string message = LastErrorMessage();
  EXPECT_TRUE(Contains(message, "binding 0 ('tile') is SHARED")) << message;
  EXPECT_TRUE(Contains(message, "stride")) << message;
  EXPECT_TRUE(Contains(message, "VYRE_DISPATCH_BINDING_INIT")) << message;

  // Initialised, the SHARED entry's other fields are ignored.
  vyre_dispatch_binding ignored = VYRE_DISPATCH_BINDING_INIT;
  ignored.source = static_cast<vyre_binding_source>(12345);
  d.bindings[0] = ignored;
  desc = d.Desc();
  ASSERT_VYRE_OK(vyre_dispatch(add, &desc, nullptr));
  EXPECT_TRUE(SameU32(out, CpuAdd(a, b)));

  // A graph replay rebinding with a zeroed slot 0 is refused the same way.
  vyre_graph graph{0};
  ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &graph));
  std::vector<vyre_dispatch_binding> rebind = d.bindings;
  rebind[0] = zeroed;
  vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  replay.bindings = rebind.data();
  replay.binding_count = rebind.size();
  EXPECT_TRUE(ExpectError(vyre_graph_replay(graph, &replay, nullptr),
                          VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE));
  EXPECT_TRUE(Contains(LastErrorMessage(), "binding 0 ('tile') is SHARED")) << LastErrorMessage();
  rebind[0] = ignored;
  out.assign(n, kPoison);
  EXPECT_VYRE_OK(vyre_graph_replay(graph, &replay, nullptr));
  EXPECT_TRUE(SameU32(out, CpuAdd(a, b)));
  EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

}  // namespace
}  // namespace vyre_test
