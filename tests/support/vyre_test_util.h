// Shared helpers for the vyre-cuda test suites: status assertions that also
// check the Fix: message, random data, and descriptors for the test kernels.
//
// Uses only the public header, so both the shared-library suites and the
// white-box suites (linked to vyre_cuda_static) can use it.
#ifndef VYRE_TESTS_SUPPORT_VYRE_TEST_UTIL_H_
#define VYRE_TESTS_SUPPORT_VYRE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "descriptors.h"
#include "vyre_cuda.h"

// NUL-terminated PTX of tests/support/test_kernels.cu (vyre_embed_ptx).
extern const char vyre_test_kernels_ptx[];
// The same kernels as an sm_90 cubin and fatbin (tests/support/CMakeLists.txt).
extern const unsigned char vyre_test_kernels_cubin[];
extern const size_t vyre_test_kernels_cubin_size;
extern const unsigned char vyre_test_kernels_fatbin[];
extern const size_t vyre_test_kernels_fatbin_size;

namespace vyre_test {

constexpr uint32_t kPoison = 0xDEADBEEFu;

// ---------------------------------------------------------------------------
// Status assertions
// ---------------------------------------------------------------------------

struct LastError {
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  std::string message;
};

// This thread's last error, read in full.
LastError ReadLastError();
std::string LastErrorMessage();
std::string StatusName(vyre_status status);

// Succeeds when `message` has the layout every vyre-cuda message has: a first
// line (up to the first '\n') of at most 1023 bytes that contains ". Fix: ",
// ends with '.', and does not carry the library's stand-in Fix for errors
// made without one.
::testing::AssertionResult MessageLayoutOk(const std::string& message);

// Succeeds when `actual` is `expected`, vyre_last_error() reports the same
// status, and its message has the layout of MessageLayoutOk.
::testing::AssertionResult ExpectError(vyre_status actual, vyre_status expected);
// ExpectError, and the message's first line begins with "<function>: " (the
// public function that failed), as docs/ERROR_CASES.md's tests assert.
::testing::AssertionResult ExpectErrorFrom(vyre_status actual, vyre_status expected,
                                           const char* function);
// Succeeds when `actual` is OK; otherwise reports the last error's message.
::testing::AssertionResult IsOk(vyre_status actual);

#define EXPECT_VYRE_ERROR(expr, expected) \
  EXPECT_TRUE(::vyre_test::ExpectError((expr), (expected))) << "  in: " #expr
#define ASSERT_VYRE_ERROR(expr, expected) \
  ASSERT_TRUE(::vyre_test::ExpectError((expr), (expected))) << "  in: " #expr
#define EXPECT_VYRE_ERROR_FROM(expr, expected, function)                       \
  EXPECT_TRUE(::vyre_test::ExpectErrorFrom((expr), (expected), (function))) \
      << "  in: " #expr
// As ExpectErrorFrom, and the message's first line is "<function>: ... Fix:
// ..." (the house form: logs may follow on later lines).
::testing::AssertionResult ExpectApiError(vyre_status actual, vyre_status expected,
                                          const char* function);
#define EXPECT_API_ERROR(expr, expected, function)                              \
  EXPECT_TRUE(::vyre_test::ExpectApiError((expr), (expected), (function))) \
      << "  in: " #expr
#define EXPECT_VYRE_OK(expr) EXPECT_TRUE(::vyre_test::IsOk(expr)) << "  in: " #expr
#define ASSERT_VYRE_OK(expr) ASSERT_TRUE(::vyre_test::IsOk(expr)) << "  in: " #expr

// ---------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------

// Random values, none of them zero, reproducible from `seed`.
std::vector<uint32_t> RandomNonZeroU32(size_t count, uint32_t seed);
// Random floats in [-100, -0.5] U [0.5, 100].
std::vector<float> RandomNonZeroF32(size_t count, uint32_t seed);
std::vector<uint8_t> RandomNonZeroBytes(size_t count, uint32_t seed);

std::vector<uint32_t> CpuAdd(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);

// Index of the first difference, or -1 when equal (sizes must match).
int64_t FirstMismatch(const void* a, const void* b, size_t bytes);

#define EXPECT_SAME_BYTES(a, b, bytes)                                               \
  do {                                                                               \
    int64_t mismatch_ = ::vyre_test::FirstMismatch((a), (b), (bytes));               \
    EXPECT_EQ(mismatch_, -1) << "first differing byte of " #a " and " #b " at " << mismatch_; \
  } while (0)

// Compares every element; reports the first few mismatches.
::testing::AssertionResult SameU32(const std::vector<uint32_t>& actual,
                                   const std::vector<uint32_t>& expected);

// ---------------------------------------------------------------------------
// Descriptors for the test kernels
// ---------------------------------------------------------------------------

// Decl, HostIn, HostOut, HostInOut, Resident and ByteSize: descriptors.h.

// A program description that owns its arrays; Desc() points into it, so keep
// the spec alive while the desc is used.
struct ProgramSpec {
  vyre_code_kind code_kind = VYRE_CODE_PTX;
  // The code bytes; for PTX and CUDA source passed NUL-terminated with
  // code_size 0, for binaries with code_size = code.size().
  std::string code = vyre_test_kernels_ptx;
  std::string entry;
  std::vector<vyre_binding_decl> bindings;
  std::vector<vyre_kernel_param> params;
  uint32_t workgroup[3] = {256, 1, 1};
  uint32_t shared_memory_bytes = 0;
  std::vector<std::string> compile_options;

  vyre_program_desc Desc();

 private:
  std::vector<const char*> option_pointers_;
};

// vyre_test_add_u32: a INPUT, b INPUT, out OUTPUT (u32).
ProgramSpec AddSpec();
// vyre_test_inc_u32: data INPUT_OUTPUT (u32).
ProgramSpec IncSpec();
// vyre_test_countdown_u32: data INPUT_OUTPUT, flag INPUT_OUTPUT (u32).
ProgramSpec CountdownSpec();
// vyre_test_saxpy_f32: x INPUT, y INPUT_OUTPUT (f32), explicit params
// {SCALAR32 0, BINDING 0, BINDING 1, SCALAR64 1}.
ProgramSpec SaxpySpec();
// vyre_test_noop_out_u32: out OUTPUT (u32); the kernel writes nothing.
ProgramSpec NoopOutSpec();

// A dispatch description that owns its arrays (see ProgramSpec).
struct DispatchSpec {
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<uint32_t> param_words;
  std::vector<uint64_t> scalars;
  uint32_t flags = 0;
  uint32_t fixpoint_iterations = 1;
  uint64_t element_count = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t shared_memory_bytes = 0;

  vyre_dispatch_desc Desc() const;
};

// A dispatch of IncSpec()'s program over [offset, +bytes) of `buffer`
// (Resident's bytes 0: the rest of the buffer): params[0] = n elements,
// `iterations` fixpoint iterations.
DispatchSpec ResidentInc(vyre_buffer buffer, uint64_t offset, uint64_t bytes, uint32_t n,
                         uint32_t iterations = 1);

// ---------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------

// Each creates an object; on failure it adds a test failure (with the
// message) and returns the 0 handle, so later calls fail loudly too.
vyre_context MakeContext();
vyre_program MakeProgram(vyre_context context, ProgramSpec spec);
vyre_buffer MakeBuffer(vyre_context context, uint64_t bytes);

vyre_telemetry Telemetry(vyre_context context);

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_VYRE_TEST_UTIL_H_
