// The message layout through the public API: for every status path these
// suites reach (bad handles on every handle-taking call, caller-controlled
// names of 10 KiB, compile and JIT failures with huge logs, no driver at all)
// the first line is at most 1023 bytes, holds ". Fix: " and ends with '.', so
// a caller reading the message into a 1 KiB buffer sees the whole Fix; and
// vyre_last_error_log returns a compile log whole, byte for byte.
//
// Suites (tests/unit/CMakeLists.txt):
//   MessagesTest.*              the fake driver   (unit.api_messages)
//   NoDriverMessagesTest.*      no libcuda         (unit.api_messages.no_driver)
//   LongDriverPathTest.*        a 3000-byte VYRE_CUDA_DRIVER_LIBRARY path
//                                                  (unit.api_messages.long_driver_path)
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "api_handle_calls.h"
#include "fake_cuda_control.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

constexpr size_t kLongName = 10 * 1024;

std::string Repeat(const std::string& piece, size_t bytes) {
  std::string out;
  while (out.size() < bytes) out += piece;
  return out;
}

std::string FirstLine(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

bool ValidUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string LastErrorLog() {
  size_t length = 0;
  vyre_last_error_log(nullptr, 0, &length);
  std::vector<char> log(length + 1, '\x7f');
  vyre_last_error_log(log.data(), log.size(), nullptr);
  EXPECT_EQ(log[length], '\0');
  return std::string(log.data(), length);
}

// `status` is `expected` (ExpectError: status, last error, layout) and a
// caller with a 1 KiB buffer receives the whole first line, Fix included.
::testing::AssertionResult MessageFits(vyre_status status, vyre_status expected) {
  ::testing::AssertionResult error = ExpectError(status, expected);
  if (!error) return error;
  std::string message = LastErrorMessage();
  if (!ValidUtf8(message)) return ::testing::AssertionFailure() << "invalid UTF-8: " << message;
  char small[1024];
  std::memset(small, 'x', sizeof(small));
  size_t length = 0;
  vyre_last_error(nullptr, nullptr, small, sizeof(small), &length);
  if (length != message.size()) {
    return ::testing::AssertionFailure() << "out_message_length " << length << " for "
                                         << message.size() << " bytes";
  }
  std::string seen(small);
  std::string first_line = FirstLine(message);
  if (seen.compare(0, first_line.size(), first_line) != 0) {
    return ::testing::AssertionFailure() << "a 1 KiB buffer got \"" << seen
                                         << "\" instead of the first line \"" << first_line
                                         << "\"";
  }
  if (seen.find(". Fix: ") == std::string::npos) {
    return ::testing::AssertionFailure() << "no Fix in a 1 KiB buffer: " << seen;
  }
  return ::testing::AssertionSuccess();
}

#define EXPECT_MESSAGE_FITS(expr, expected) \
  EXPECT_TRUE(MessageFits((expr), (expected))) << "  in: " #expr

vyre_status CreateProgram(vyre_context context, ProgramSpec& spec, vyre_program* out) {
  vyre_program_desc desc = spec.Desc();
  return vyre_program_create(context, &desc, out);
}

// ---------------------------------------------------------------------------
// The fake driver
// ---------------------------------------------------------------------------

class MessagesTest : public FakeDriverTest {};

TEST_F(MessagesTest, EveryHandleCallWithABadHandle) {
  vyre_program program = MakeProgram(context_, AddSpec());
  vyre_buffer buffer = MakeBuffer(context_, 64);
  vyre_context dead_context = MakeContext();
  ASSERT_VYRE_OK(vyre_context_destroy(dead_context));
  vyre_buffer dead_buffer = MakeBuffer(context_, 64);
  ASSERT_VYRE_OK(vyre_buffer_free(dead_buffer));
  vyre_program dead_program = MakeProgram(context_, AddSpec());
  ASSERT_VYRE_OK(vyre_program_destroy(dead_program));

  std::vector<HandleCall> calls = AllHandleCalls();
  calls.push_back(ResidentBindingCall(program));
  calls.push_back(SequenceStepBufferCall(context_));
  calls.push_back(SequenceStepProgramCall(context_, buffer));
  size_t checked = 0;
  for (const HandleCall& call : calls) {
    SCOPED_TRACE(call.function);
    EXPECT_MESSAGE_FITS(call.call(0), VYRE_STATUS_INVALID_HANDLE);
    for (uint64_t bits : ForgedHandleBits()) {
      EXPECT_MESSAGE_FITS(call.call(bits), VYRE_STATUS_INVALID_HANDLE) << std::hex << bits;
    }
    uint64_t wrong = call.kind == HandleKind::kContext ? buffer.bits : context_.bits;
    EXPECT_MESSAGE_FITS(call.call(wrong), VYRE_STATUS_INVALID_HANDLE);
    uint64_t dead = call.kind == HandleKind::kContext  ? dead_context.bits
                    : call.kind == HandleKind::kBuffer ? dead_buffer.bits
                    : call.kind == HandleKind::kProgram ? dead_program.bits
                                                        : 0;
    if (dead != 0) {
      EXPECT_MESSAGE_FITS(call.call(dead), VYRE_STATUS_STALE_HANDLE);
    }
    ++checked;
  }
  EXPECT_GT(checked, 30u) << "AllHandleCalls() lost its calls";
  EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(MessagesTest, LongEntryNames) {
  for (const std::string& piece :
       {std::string("k"), std::string("\xC3\xA9"), std::string("\xE2\x9C\x93"),
        std::string("\xF0\x9F\x98\x80"), std::string("a\xE2\x9C\x93")}) {
    ProgramSpec spec = AddSpec();
    spec.entry = Repeat(piece, kLongName);
    vyre_program program{0};
    EXPECT_MESSAGE_FITS(CreateProgram(context_, spec, &program), VYRE_STATUS_ENTRY_NOT_FOUND)
        << piece.size() << "-byte characters";
    std::string message = LastErrorMessage();
    EXPECT_EQ(message.rfind("vyre_program_create: the module has no kernel named '", 0), 0u)
        << message;
    EXPECT_NE(message.find(" bytes elided ...] "), std::string::npos) << message;
  }
}

TEST_F(MessagesTest, LongBindingNamesInProgramDescriptors) {
  const std::string name = Repeat("binding_\xC3\xA9_", kLongName);
  struct Case {
    const char* what;
    void (*spoil)(vyre_binding_decl*);
    vyre_status expected;
  };
  const Case cases[] = {
      {"role", [](vyre_binding_decl* d) { d->role = static_cast<vyre_binding_role>(77); },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"element_size 0", [](vyre_binding_decl* d) { d->element_size = 0; },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"overflow",
       [](vyre_binding_decl* d) {
         d->element_size = 1u << 20;
         d->element_count = UINT64_MAX / 2;
       },
       VYRE_STATUS_OUT_OF_RANGE},
      {"output range on an input", [](vyre_binding_decl* d) { d->output_length = 4; },
       VYRE_STATUS_INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    ProgramSpec spec = AddSpec();
    for (vyre_binding_decl& decl : spec.bindings) decl.name = name.c_str();
    c.spoil(&spec.bindings[0]);
    vyre_program program{0};
    EXPECT_MESSAGE_FITS(CreateProgram(context_, spec, &program), c.expected) << c.what;
  }
}

TEST_F(MessagesTest, LongBindingNamesAtDispatch) {
  const std::string name = Repeat("n\xE2\x9C\x93", kLongName);
  ProgramSpec spec = AddSpec();
  for (vyre_binding_decl& decl : spec.bindings) decl.name = name.c_str();
  vyre_program program = MakeProgram(context_, spec);
  ASSERT_NE(program.bits, 0u);
  std::vector<uint32_t> a(4, 1), b(4, 2), out(4, 0);
  vyre_buffer freed = MakeBuffer(context_, 16);
  ASSERT_VYRE_OK(vyre_buffer_free(freed));
  vyre_buffer small = MakeBuffer(context_, 16);

  struct Case {
    const char* what;
    DispatchSpec spec;
    vyre_status expected;
  };
  std::vector<Case> cases;
  cases.push_back({"host_bytes 0",
                   {{HostIn(a.data(), 0), HostIn(b.data(), 16), HostOut(out.data(), 16)}},
                   VYRE_STATUS_INVALID_ARGUMENT});
  cases.push_back({"NULL host_input",
                   {{HostIn(nullptr, 16), HostIn(b.data(), 16), HostOut(out.data(), 16)}},
                   VYRE_STATUS_INVALID_ARGUMENT});
  cases.push_back({"a freed buffer",
                   {{Resident(freed), HostIn(b.data(), 16), HostOut(out.data(), 16)}},
                   VYRE_STATUS_STALE_HANDLE});
  cases.push_back({"offset past the buffer",
                   {{Resident(small, 64), HostIn(b.data(), 16), HostOut(out.data(), 16)}},
                   VYRE_STATUS_OUT_OF_RANGE});
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.spec.param_words = {4};
    vyre_dispatch_desc desc = c.spec.Desc();
    vyre_timing timing = VYRE_TIMING_INIT;
    EXPECT_MESSAGE_FITS(vyre_dispatch(program, &desc, &timing), c.expected);
    vyre_pending pending{0};
    EXPECT_MESSAGE_FITS(vyre_dispatch_async(program, &desc, &pending), c.expected);
    vyre_graph graph{0};
    EXPECT_MESSAGE_FITS(vyre_graph_record(program, &desc, &graph), c.expected);
  }
  EXPECT_VYRE_OK(vyre_buffer_free(small));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

TEST_F(MessagesTest, LongCompileOptions) {
  ProgramSpec spec = AddSpec();
  spec.code_kind = VYRE_CODE_CUDA_SOURCE;
  spec.code = "extern \"C\" __global__ void vyre_test_add_u32() { undeclared_identifier_xyz; }";
  spec.compile_options = {"-DLONG=" + std::string(kLongName, 'o'), "--no-such-option"};
  vyre_program program{0};
  vyre_status status = CreateProgram(context_, spec, &program);
  if (status == VYRE_STATUS_NVRTC_UNAVAILABLE) {
    EXPECT_MESSAGE_FITS(status, VYRE_STATUS_NVRTC_UNAVAILABLE);
    GTEST_SKIP() << "no NVRTC on this machine: the compile log's layout was not tested";
  }
  // NVRTC rejects the option before compiling: the caller's argument.
  EXPECT_MESSAGE_FITS(status, VYRE_STATUS_INVALID_ARGUMENT);
}

TEST_F(MessagesTest, AHugeJitLogKeepsTheFixAndIsReadWhole) {
  constexpr size_t kLogBytes = 200000;  // > 64 KiB
  std::string expected_log = Repeat(FAKE_CUDA_JIT_LOG_PATTERN, kLogBytes);
  expected_log.resize(kLogBytes);
  for (const std::string& entry : {std::string("vyre_test_add_u32"), std::string(kLongName, 'e')}) {
    SCOPED_TRACE(entry.size());
    ProgramSpec spec = AddSpec();
    spec.entry = entry;
    spec.code = ".version 7.0\n.target sm_75\n// fake-jit-log-bytes: " +
                std::to_string(kLogBytes) + "\n";
    vyre_program program{0};
    EXPECT_MESSAGE_FITS(CreateProgram(context_, spec, &program), VYRE_STATUS_COMPILE_FAILED);
    EXPECT_EQ(program.bits, 0u);

    std::string message = LastErrorMessage();
    std::string first_line = FirstLine(message);
    EXPECT_EQ(first_line.rfind("vyre_program_create: loading the PTX module for entry '", 0), 0u)
        << first_line;
    EXPECT_NE(first_line.find("vyre_last_error_log"), std::string::npos) << first_line;
    // The log follows, capped, with a note saying how much was left out.
    EXPECT_LE(message.size(), 8191u);
    ASSERT_GT(message.size(), first_line.size() + 1);
    size_t note = message.find("\n[log truncated: ");
    ASSERT_NE(note, std::string::npos) << message.substr(message.size() - 200);
    size_t kept = note - first_line.size() - 1;
    EXPECT_GT(kept, 4000u);
    EXPECT_EQ(message.substr(first_line.size() + 1, kept), expected_log.substr(0, kept));
    EXPECT_EQ(message.substr(note + 1), "[log truncated: " + std::to_string(kLogBytes - kept) +
                                            " more bytes; vyre_last_error_log returns all of it]");

    // vyre_last_error_log: all of it, byte for byte, without clearing.
    std::string log = LastErrorLog();
    EXPECT_EQ(log.size(), kLogBytes);
    EXPECT_TRUE(log == expected_log) << "the log differs at byte "
                                     << FirstMismatch(log.data(), expected_log.data(),
                                                      std::min(log.size(), expected_log.size()));
    vyre_status status = VYRE_STATUS_OK;
    EXPECT_EQ(vyre_last_error(&status, nullptr, nullptr, 0, nullptr), VYRE_STATUS_COMPILE_FAILED);
    EXPECT_EQ(LastErrorMessage(), message);

    // A truncated read stays terminated and reports the full length.
    char head[100];
    size_t length = 0;
    EXPECT_EQ(vyre_last_error_log(head, sizeof(head), &length), VYRE_STATUS_COMPILE_FAILED);
    EXPECT_EQ(length, kLogBytes);
    EXPECT_EQ(std::string(head), expected_log.substr(0, 99));
  }
  // The next call clears it.
  vyre_telemetry telemetry = Telemetry(context_);
  (void)telemetry;
  size_t length = 99;
  EXPECT_EQ(vyre_last_error_log(nullptr, 0, &length), VYRE_STATUS_OK);
  EXPECT_EQ(length, 0u);
}

TEST_F(MessagesTest, AShortJitLogFollowsTheFirstLineWhole) {
  ProgramSpec spec = AddSpec();
  spec.code = "this is not PTX at all";
  vyre_program program{0};
  EXPECT_MESSAGE_FITS(CreateProgram(context_, spec, &program), VYRE_STATUS_COMPILE_FAILED);
  std::string message = LastErrorMessage();
  EXPECT_EQ(LastErrorLog(), "fake ptxas: no .entry found");
  EXPECT_EQ(message, FirstLine(message) + "\nfake ptxas: no .entry found");
}

TEST_F(MessagesTest, ErrorsWithoutALogHaveAnEmptyOne) {
  EXPECT_MESSAGE_FITS(vyre_buffer_free(vyre_buffer{0}), VYRE_STATUS_INVALID_HANDLE);
  char log[8] = "stale";
  size_t length = 99;
  EXPECT_EQ(vyre_last_error_log(log, sizeof(log), &length), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(length, 0u);
  EXPECT_STREQ(log, "");
  // Every pointer may be NULL.
  EXPECT_EQ(vyre_last_error_log(nullptr, 0, nullptr), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(vyre_last_error_log(nullptr, 64, nullptr), VYRE_STATUS_INVALID_HANDLE);
  char untouched = 'u';
  EXPECT_EQ(vyre_last_error_log(&untouched, 0, nullptr), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(untouched, 'u');
  // Still the same last error.
  EXPECT_TRUE(ExpectError(VYRE_STATUS_INVALID_HANDLE, VYRE_STATUS_INVALID_HANDLE));
}

// ---------------------------------------------------------------------------
// No driver
// ---------------------------------------------------------------------------

class NoDriverMessagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
    if (path == nullptr || std::strncmp(path, "/nonexistent/", 13) != 0) {
      GTEST_SKIP() << "needs VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/... (ctest sets it)";
    }
  }
};

TEST_F(NoDriverMessagesTest, EveryCallFitsWithoutADriver) {
  uint32_t count = 0;
  EXPECT_MESSAGE_FITS(vyre_device_count(&count), VYRE_STATUS_NO_DRIVER);
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  EXPECT_MESSAGE_FITS(vyre_device_info_get(0, &info), VYRE_STATUS_NO_DRIVER);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  EXPECT_MESSAGE_FITS(vyre_context_create(&desc, &context), VYRE_STATUS_NO_DRIVER);
  EXPECT_EQ(LastErrorLog(), "");
  for (const HandleCall& call : AllHandleCalls()) {
    EXPECT_MESSAGE_FITS(call.call(0), VYRE_STATUS_INVALID_HANDLE) << call.function;
  }
}

class LongDriverPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
    if (path == nullptr || std::strlen(path) < 2000) {
      GTEST_SKIP() << "needs a VYRE_CUDA_DRIVER_LIBRARY path of 2000+ bytes (ctest sets it)";
    }
    path_ = path;
  }
  std::string path_;
};

TEST_F(LongDriverPathTest, TheFixSurvivesAHugeLibraryPath) {
  uint32_t count = 0;
  EXPECT_MESSAGE_FITS(vyre_device_count(&count), VYRE_STATUS_NO_DRIVER);
  std::string message = LastErrorMessage();
  // What failed, the start of the path, and the whole Fix.
  EXPECT_EQ(message.rfind("loading the CUDA driver: ", 0), 0u) << message;
  EXPECT_NE(message.find(path_.substr(0, 200)), std::string::npos) << message;
  EXPECT_NE(message.find(" bytes elided ...] "), std::string::npos) << message;
  EXPECT_NE(message.find("Fix: install the NVIDIA driver"), std::string::npos) << message;
}

}  // namespace
}  // namespace vyre_test
