#include "gpu_test_env.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace vyre_test {

std::string LastErrorMessage() {
  size_t length = 0;
  vyre_last_error(nullptr, nullptr, nullptr, 0, &length);
  std::string message(length + 1, '\0');
  vyre_last_error(nullptr, nullptr, message.data(), message.size(), &length);
  message.resize(length < message.size() ? length : message.size() - 1);
  return message;
}

std::string DescribeLastError() {
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  vyre_last_error(&status, &cu_result, nullptr, 0, nullptr);
  std::ostringstream text;
  text << vyre_status_name(status);
  if (cu_result != 0) text << " (CUresult " << cu_result << ")";
  text << ": " << LastErrorMessage();
  return text.str();
}

::testing::AssertionResult StatusIs(vyre_status actual, vyre_status expected,
                                    const char* expression) {
  if (actual == expected) return ::testing::AssertionSuccess();
  // Read the detail first: nothing below calls into the library except
  // vyre_last_error and vyre_status_name, which leave it in place.
  const std::string detail = DescribeLastError();
  return ::testing::AssertionFailure()
         << expression << " returned " << vyre_status_name(actual) << ", expected "
         << vyre_status_name(expected) << ". Last error: " << detail;
}

::testing::AssertionResult MessageContains(const std::string& message,
                                           const std::vector<std::string>& needles) {
  for (const std::string& needle : needles) {
    if (message.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << needle << "\": \"" << message << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

bool TwoGpusRequired() {
  const char* value = std::getenv("VYRE_CUDA_REQUIRE_GPUS");
  return value != nullptr && std::atoi(value) >= 2;
}

bool GpuRequired() {
  const char* value = std::getenv("VYRE_CUDA_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// --- RandomSource -----------------------------------------------------------

namespace {

uint64_t ChooseSeed() {
  if (const char* text = std::getenv("VYRE_TEST_SEED")) {
    return std::strtoull(text, nullptr, 0);
  }
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

RandomSource::RandomSource() : seed_(ChooseSeed()), engine_(seed_) {
  std::printf("[ seed     ] VYRE_TEST_SEED=%llu reproduces this test's data\n",
              static_cast<unsigned long long>(seed_));
}

std::vector<uint32_t> RandomSource::NonZeroU32(size_t count) {
  std::vector<uint32_t> values(count);
  size_t i = 0;
  // One 64-bit draw gives two values.
  for (; i + 1 < count; i += 2) {
    const uint64_t bits = engine_();
    values[i] = static_cast<uint32_t>(bits);
    values[i + 1] = static_cast<uint32_t>(bits >> 32);
  }
  if (i < count) values[i] = static_cast<uint32_t>(engine_());
  for (uint32_t& value : values) {
    if (value == 0) value = 1;
  }
  return values;
}

std::vector<float> RandomSource::UniformF32(size_t count, float low, float high) {
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(engine_);
  return values;
}

// --- Descriptors ------------------------------------------------------------

vyre_dispatch_desc DispatchDesc(const std::vector<vyre_dispatch_binding>& bindings,
                                const std::vector<uint32_t>& params) {
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = bindings.data();
  desc.binding_count = bindings.size();
  desc.param_words = params.empty() ? nullptr : params.data();
  desc.param_word_count = params.size();
  return desc;
}

::testing::AssertionResult CreateTestProgram(vyre_context context, const char* entry,
                                             const std::vector<vyre_binding_decl>& bindings,
                                             uint32_t workgroup_x, ProgramHandle* out) {
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = VYRE_CODE_PTX;
  desc.code = vyre_gpu_test_kernels_ptx;
  desc.code_size = 0;  // NUL-terminated
  desc.entry = entry;
  desc.bindings = bindings.data();
  desc.binding_count = bindings.size();
  desc.workgroup_size[0] = workgroup_x;
  return StatusIs(vyre_program_create(context, &desc, out->out()), VYRE_STATUS_OK,
                  "vyre_program_create");
}

::testing::AssertionResult CreateBufferWith(vyre_context context,
                                            const std::vector<uint32_t>& values,
                                            BufferHandle* out) {
  ::testing::AssertionResult allocated =
      StatusIs(vyre_buffer_alloc(context, ByteSize(values), out->out()), VYRE_STATUS_OK,
               "vyre_buffer_alloc");
  if (!allocated) return allocated;
  return StatusIs(vyre_buffer_upload(out->get(), 0, values.data(), ByteSize(values)),
                  VYRE_STATUS_OK, "vyre_buffer_upload");
}

::testing::AssertionResult DownloadU32(vyre_buffer buffer, size_t count,
                                       std::vector<uint32_t>* values) {
  values->assign(count, 0);
  return StatusIs(vyre_buffer_download(buffer, 0, values->data(), ByteSize(*values)),
                  VYRE_STATUS_OK, "vyre_buffer_download");
}

vyre_telemetry Telemetry(vyre_context context) {
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  EXPECT_TRUE(StatusIs(vyre_context_telemetry(context, &telemetry), VYRE_STATUS_OK,
                       "vyre_context_telemetry"));
  return telemetry;
}

::testing::AssertionResult AllElementsEqual(const std::vector<uint32_t>& actual,
                                            const std::function<uint32_t(size_t)>& expected,
                                            const char* what) {
  constexpr size_t kShown = 5;
  size_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < actual.size(); ++i) {
    const uint32_t want = expected(i);
    if (actual[i] != want) {
      if (mismatches < kShown) {
        first << "\n  [" << i << "] got 0x" << std::hex << actual[i] << " want 0x" << want
              << std::dec;
      }
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << mismatches << " of " << actual.size()
                                       << " elements differ; first:" << first.str();
}

// --- GpuTest ----------------------------------------------------------------

void GpuTest::SetUp() {
  uint32_t device_count = 0;
  const vyre_status status = vyre_device_count(&device_count);
  if (status != VYRE_STATUS_OK || device_count == 0) {
    const std::string why = status != VYRE_STATUS_OK
                                ? "vyre_device_count: " + DescribeLastError()
                                : std::string("vyre_device_count reported 0 devices");
    if (GpuRequired()) {
      FAIL() << "VYRE_CUDA_REQUIRE_GPU=1 but no usable GPU. " << why;
    }
    GTEST_SKIP() << "no usable GPU (set VYRE_CUDA_REQUIRE_GPU=1 to fail instead). " << why;
  }
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = 0;
  ASSERT_VYRE_OK(vyre_context_create(&desc, context_.out()));
  ASSERT_VYRE_OK(vyre_context_device_info(context_.get(), &device_));
}

}  // namespace vyre_test
