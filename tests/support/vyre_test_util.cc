#include "vyre_test_util.h"

#include <algorithm>
#include <random>
#include <sstream>

namespace vyre_test {

LastError ReadLastError() {
  LastError error;
  size_t length = 0;
  error.status = vyre_last_error(nullptr, nullptr, nullptr, 0, &length);
  std::vector<char> text(length + 1, '\0');
  vyre_status status = VYRE_STATUS_OK;
  vyre_last_error(&status, &error.cu_result, text.data(), text.size(), nullptr);
  EXPECT_EQ(status, error.status) << "vyre_last_error's return value and out_status differ";
  error.message.assign(text.data());
  EXPECT_EQ(error.message.size(), length) << "out_message_length disagrees with the message";
  return error;
}

std::string LastErrorMessage() { return ReadLastError().message; }

std::string StatusName(vyre_status status) {
  return std::string(vyre_status_name(status)) + " (" + std::to_string(int(status)) + ")";
}

::testing::AssertionResult MessageLayoutOk(const std::string& message) {
  std::string first_line = message.substr(0, message.find('\n'));
  if (first_line.size() > 1023) {
    return ::testing::AssertionFailure()
           << "the first line has " << first_line.size() << " bytes (at most 1023): \""
           << message << "\"";
  }
  if (first_line.find(". Fix: ") == std::string::npos) {
    return ::testing::AssertionFailure()
           << "the first line lacks \". Fix: \": \"" << message << "\"";
  }
  if (first_line.back() != '.') {
    return ::testing::AssertionFailure()
           << "the first line does not end with '.': \"" << message << "\"";
  }
  // base/message.h's kMissingFixMarker: the library added a Fix because the
  // error was made without one.
  if (first_line.find("the failure came without a Fix of its own") != std::string::npos) {
    return ::testing::AssertionFailure()
           << "the error was made without a Fix: \"" << message << "\"";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ExpectError(vyre_status actual, vyre_status expected) {
  LastError error = ReadLastError();
  if (actual != expected) {
    return ::testing::AssertionFailure()
           << "returned " << StatusName(actual) << ", expected " << StatusName(expected)
           << "; last error message: \"" << error.message << "\"";
  }
  if (error.status != actual) {
    return ::testing::AssertionFailure()
           << "returned " << StatusName(actual) << " but vyre_last_error() reports "
           << StatusName(error.status) << " (\"" << error.message << "\")";
  }
  if (error.message.find("Fix:") == std::string::npos) {
    return ::testing::AssertionFailure()
           << StatusName(actual) << " message lacks \"Fix:\": \"" << error.message << "\"";
  }
  ::testing::AssertionResult layout = MessageLayoutOk(error.message);
  if (!layout) {
    return ::testing::AssertionFailure() << StatusName(actual) << ": " << layout.message();
  }
  return ::testing::AssertionSuccess() << StatusName(actual) << ": " << error.message;
}

::testing::AssertionResult ExpectErrorFrom(vyre_status actual, vyre_status expected,
                                           const char* function) {
  ::testing::AssertionResult error = ExpectError(actual, expected);
  if (!error) return error;
  const std::string message = LastErrorMessage();
  const std::string prefix = std::string(function) + ": ";
  if (message.compare(0, prefix.size(), prefix) != 0) {
    return ::testing::AssertionFailure() << StatusName(actual) << " message does not begin with \""
                                         << prefix << "\": \"" << message << "\"";
  }
  return ::testing::AssertionSuccess() << message;
}

::testing::AssertionResult ExpectApiError(vyre_status actual, vyre_status expected,
                                          const char* function) {
  ::testing::AssertionResult error = ExpectError(actual, expected);
  if (!error) return error;
  const std::string message = LastErrorMessage();
  const std::string first_line = message.substr(0, message.find('\n'));
  const std::string prefix = std::string(function) + ": ";
  if (first_line.compare(0, prefix.size(), prefix) != 0 ||
      first_line.find(". Fix: ", prefix.size()) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message's first line is not \"" << prefix << "... Fix: ...\": \"" << message
           << "\"";
  }
  return ::testing::AssertionSuccess() << message;
}

::testing::AssertionResult IsOk(vyre_status actual) {
  if (actual == VYRE_STATUS_OK) {
    LastError error = ReadLastError();
    if (error.status != VYRE_STATUS_OK || !error.message.empty()) {
      return ::testing::AssertionFailure()
             << "returned OK but vyre_last_error() still reports " << StatusName(error.status)
             << " \"" << error.message << "\"";
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "returned " << StatusName(actual) << ": \""
                                       << LastErrorMessage() << "\"";
}

std::vector<uint32_t> RandomNonZeroU32(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> dist(1, UINT32_MAX);
  std::vector<uint32_t> values(count);
  for (uint32_t& v : values) v = dist(rng);
  return values;
}

std::vector<float> RandomNonZeroF32(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.5f, 100.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return values;
}

std::vector<uint8_t> RandomNonZeroBytes(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(1, 255);
  std::vector<uint8_t> values(count);
  for (uint8_t& v : values) v = static_cast<uint8_t>(dist(rng));
  return values;
}

std::vector<uint32_t> CpuAdd(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

int64_t FirstMismatch(const void* a, const void* b, size_t bytes) {
  const auto* pa = static_cast<const uint8_t*>(a);
  const auto* pb = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < bytes; ++i) {
    if (pa[i] != pb[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

::testing::AssertionResult SameU32(const std::vector<uint32_t>& actual,
                                   const std::vector<uint32_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  }
  size_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == expected[i]) continue;
    if (mismatches < 5) {
      first << "\n  [" << i << "] = 0x" << std::hex << actual[i] << ", expected 0x" << expected[i]
            << std::dec;
    }
    ++mismatches;
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << actual.size()
                                       << " elements differ:" << first.str();
}

vyre_program_desc ProgramSpec::Desc() {
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = code_kind;
  desc.code = code.c_str();
  desc.code_size = code_kind == VYRE_CODE_BINARY ? code.size() : 0;
  desc.entry = entry.c_str();
  desc.bindings = bindings.empty() ? nullptr : bindings.data();
  desc.binding_count = bindings.size();
  std::copy(workgroup, workgroup + 3, desc.workgroup_size);
  desc.shared_memory_bytes = shared_memory_bytes;
  desc.params = params.empty() ? nullptr : params.data();
  desc.param_count = params.size();
  option_pointers_.clear();
  for (const std::string& option : compile_options) option_pointers_.push_back(option.c_str());
  desc.compile_options = option_pointers_.empty() ? nullptr : option_pointers_.data();
  desc.compile_option_count = option_pointers_.size();
  return desc;
}

ProgramSpec AddSpec() {
  ProgramSpec spec;
  spec.entry = "vyre_test_add_u32";
  spec.bindings = {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
                   Decl(VYRE_ROLE_OUTPUT, 4, "out")};
  return spec;
}

ProgramSpec IncSpec() {
  ProgramSpec spec;
  spec.entry = "vyre_test_inc_u32";
  spec.bindings = {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")};
  return spec;
}

ProgramSpec CountdownSpec() {
  ProgramSpec spec;
  spec.entry = "vyre_test_countdown_u32";
  spec.bindings = {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data"),
                   Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "flag")};
  return spec;
}

ProgramSpec SaxpySpec() {
  ProgramSpec spec;
  spec.entry = "vyre_test_saxpy_f32";
  spec.bindings = {Decl(VYRE_ROLE_INPUT, 4, "x"), Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "y")};
  spec.params = {{VYRE_PARAM_SCALAR32, 0},
                 {VYRE_PARAM_BINDING, 0},
                 {VYRE_PARAM_BINDING, 1},
                 {VYRE_PARAM_SCALAR64, 1}};
  return spec;
}

ProgramSpec NoopOutSpec() {
  ProgramSpec spec;
  spec.entry = "vyre_test_noop_out_u32";
  spec.bindings = {Decl(VYRE_ROLE_OUTPUT, 4, "out")};
  return spec;
}

vyre_dispatch_desc DispatchSpec::Desc() const {
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.flags = flags;
  desc.bindings = bindings.empty() ? nullptr : bindings.data();
  desc.binding_count = bindings.size();
  desc.param_words = param_words.empty() ? nullptr : param_words.data();
  desc.param_word_count = param_words.size();
  desc.scalars = scalars.empty() ? nullptr : scalars.data();
  desc.scalar_count = scalars.size();
  std::copy(grid, grid + 3, desc.grid);
  std::copy(block, block + 3, desc.block);
  desc.element_count = element_count;
  desc.fixpoint_iterations = fixpoint_iterations;
  desc.shared_memory_bytes = shared_memory_bytes;
  return desc;
}

DispatchSpec ResidentInc(vyre_buffer buffer, uint64_t offset, uint64_t bytes, uint32_t n,
                         uint32_t iterations) {
  DispatchSpec spec;
  spec.bindings = {Resident(buffer, offset, bytes)};
  spec.param_words = {n};
  spec.fixpoint_iterations = iterations;
  return spec;
}

vyre_context MakeContext() {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  vyre_status status = vyre_context_create(&desc, &context);
  if (status != VYRE_STATUS_OK) {
    ADD_FAILURE() << "vyre_context_create: " << StatusName(status) << ": " << LastErrorMessage();
    return vyre_context{0};
  }
  return context;
}

vyre_program MakeProgram(vyre_context context, ProgramSpec spec) {
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  vyre_status status = vyre_program_create(context, &desc, &program);
  if (status != VYRE_STATUS_OK) {
    ADD_FAILURE() << "vyre_program_create(" << spec.entry << "): " << StatusName(status) << ": "
                  << LastErrorMessage();
    return vyre_program{0};
  }
  return program;
}

vyre_buffer MakeBuffer(vyre_context context, uint64_t bytes) {
  vyre_buffer buffer{0};
  vyre_status status = vyre_buffer_alloc(context, bytes, &buffer);
  if (status != VYRE_STATUS_OK) {
    ADD_FAILURE() << "vyre_buffer_alloc(" << bytes << "): " << StatusName(status) << ": "
                  << LastErrorMessage();
    return vyre_buffer{0};
  }
  return buffer;
}

vyre_telemetry Telemetry(vyre_context context) {
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  vyre_status status = vyre_context_telemetry(context, &telemetry);
  if (status != VYRE_STATUS_OK) {
    ADD_FAILURE() << "vyre_context_telemetry: " << StatusName(status) << ": "
                  << LastErrorMessage();
  }
  return telemetry;
}

}  // namespace vyre_test
