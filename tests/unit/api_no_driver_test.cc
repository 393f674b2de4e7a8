// The public API on a machine without a CUDA driver: ctest runs this binary
// with VYRE_CUDA_DRIVER_LIBRARY pointing at a file that does not exist.
//
// Everything that needs the driver must say VYRE_STATUS_NO_DRIVER with a Fix:
// sentence; argument, handle and struct_size checks must still work, because
// they come before the driver is touched.
#include <gtest/gtest.h>

#include <cstddef>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api_handle_calls.h"
#include "c_callers.h"
#include "struct_size_util.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

class NoDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
    ASSERT_NE(path, nullptr) << "run through ctest: VYRE_CUDA_DRIVER_LIBRARY must name a "
                                "library that does not exist";
  }
};

// Makes this thread's last error a known INVALID_HANDLE failure.
void CauseHandleError() {
  ASSERT_EQ(vyre_context_destroy(vyre_context{0}), VYRE_STATUS_INVALID_HANDLE);
}

// ---------------------------------------------------------------------------
// Functions that need no driver
// ---------------------------------------------------------------------------

TEST_F(NoDriverTest, VersionMatchesTheHeader) {
  uint32_t version = vyre_version();
  EXPECT_EQ(version, VYRE_CUDA_VERSION);
  EXPECT_EQ(VYRE_VERSION_MAJOR_OF(version), uint32_t{VYRE_CUDA_VERSION_MAJOR});
  EXPECT_EQ(VYRE_VERSION_MINOR_OF(version), uint32_t{VYRE_CUDA_VERSION_MINOR});
  EXPECT_EQ(VYRE_VERSION_PATCH_OF(version), uint32_t{VYRE_CUDA_VERSION_PATCH});
  EXPECT_EQ(VYRE_MAKE_VERSION(1, 2, 3), (1u << 22) | (2u << 12) | 3u);
}

TEST_F(NoDriverTest, StatusNamesCoverEveryStatus) {
  const std::vector<std::pair<vyre_status, const char*>> names = {
      {VYRE_STATUS_OK, "VYRE_STATUS_OK"},
      {VYRE_STATUS_INVALID_ARGUMENT, "VYRE_STATUS_INVALID_ARGUMENT"},
      {VYRE_STATUS_INVALID_HANDLE, "VYRE_STATUS_INVALID_HANDLE"},
      {VYRE_STATUS_STALE_HANDLE, "VYRE_STATUS_STALE_HANDLE"},
      {VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE"},
      {VYRE_STATUS_OUT_OF_RANGE, "VYRE_STATUS_OUT_OF_RANGE"},
      {VYRE_STATUS_NO_DRIVER, "VYRE_STATUS_NO_DRIVER"},
      {VYRE_STATUS_NO_DEVICE, "VYRE_STATUS_NO_DEVICE"},
      {VYRE_STATUS_DRIVER_TOO_OLD, "VYRE_STATUS_DRIVER_TOO_OLD"},
      {VYRE_STATUS_NVRTC_UNAVAILABLE, "VYRE_STATUS_NVRTC_UNAVAILABLE"},
      {VYRE_STATUS_OUT_OF_MEMORY, "VYRE_STATUS_OUT_OF_MEMORY"},
      {VYRE_STATUS_COMPILE_FAILED, "VYRE_STATUS_COMPILE_FAILED"},
      {VYRE_STATUS_ENTRY_NOT_FOUND, "VYRE_STATUS_ENTRY_NOT_FOUND"},
      {VYRE_STATUS_LIMIT_EXCEEDED, "VYRE_STATUS_LIMIT_EXCEEDED"},
      {VYRE_STATUS_LAUNCH_FAILED, "VYRE_STATUS_LAUNCH_FAILED"},
      {VYRE_STATUS_TIMEOUT, "VYRE_STATUS_TIMEOUT"},
      {VYRE_STATUS_NOT_READY, "VYRE_STATUS_NOT_READY"},
      {VYRE_STATUS_INVALID_STATE, "VYRE_STATUS_INVALID_STATE"},
      {VYRE_STATUS_DRIVER_ERROR, "VYRE_STATUS_DRIVER_ERROR"},
      {VYRE_STATUS_INTERNAL, "VYRE_STATUS_INTERNAL"},
      {VYRE_STATUS_SHAPE_MISMATCH, "VYRE_STATUS_SHAPE_MISMATCH"},
      {VYRE_STATUS_DEVICE_FAULT, "VYRE_STATUS_DEVICE_FAULT"},
  };
  for (const auto& [status, name] : names) {
    const char* actual = vyre_status_name(status);
    ASSERT_NE(actual, nullptr) << int(status);
    EXPECT_STREQ(actual, name);
  }
}

TEST_F(NoDriverTest, UnknownStatusValuesHaveTheUnknownName) {
  for (int value : {22, 23, 1000, 0x7FFFFFFE}) {
    const char* name = c_status_name(value);
    ASSERT_NE(name, nullptr) << value;
    EXPECT_STREQ(name, "VYRE_STATUS_UNKNOWN") << value;
  }
}

TEST_F(NoDriverTest, LogCallbackCanBeInstalledAndRemoved) {
  auto callback = [](void*, vyre_log_level, const char*) {};
  for (vyre_log_level level : {VYRE_LOG_ERROR, VYRE_LOG_WARNING, VYRE_LOG_INFO, VYRE_LOG_TRACE}) {
    EXPECT_VYRE_OK(vyre_set_log_callback(callback, nullptr, level));
  }
  EXPECT_VYRE_OK(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR));
}

TEST_F(NoDriverTest, LogLevelOutOfRangeIsInvalid) {
  for (int level : {4, 1000, 0x7FFFFFFE}) {
    EXPECT_VYRE_ERROR(c_set_log_callback_with_level(level), VYRE_STATUS_INVALID_ARGUMENT)
        << level;
  }
}

// Negative enum values, which only a C caller can pass without undefined
// behaviour on its side. Their own ctest entry (unit.api_no_driver.c_enums)
// keeps a sanitizer abort here from hiding the other results.
TEST(CEnumTest, NegativeStatusHasTheUnknownName) {
  const char* name = c_status_name(-1);
  ASSERT_NE(name, nullptr);
  EXPECT_STREQ(name, "VYRE_STATUS_UNKNOWN");
}

TEST(CEnumTest, NegativeLogLevelIsInvalid) {
  EXPECT_VYRE_ERROR(c_set_log_callback_with_level(-1), VYRE_STATUS_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------
// vyre_last_error
// ---------------------------------------------------------------------------

TEST_F(NoDriverTest, LastErrorReportsStatusLengthAndNoCuResult) {
  CauseHandleError();
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = -1;
  size_t length = 0;
  EXPECT_EQ(vyre_last_error(&status, &cu_result, nullptr, 0, &length),
            VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(status, VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(cu_result, 0) << "a handle error does not come from the driver";
  ASSERT_GT(length, 10u);

  std::vector<char> message(length + 1, 'x');
  size_t length_again = 0;
  vyre_last_error(nullptr, nullptr, message.data(), message.size(), &length_again);
  EXPECT_EQ(length_again, length);
  EXPECT_EQ(std::strlen(message.data()), length);
  EXPECT_NE(std::string(message.data()).find("Fix:"), std::string::npos) << message.data();
}

TEST_F(NoDriverTest, LastErrorTruncatesAndStaysTerminated) {
  CauseHandleError();
  std::string full = LastErrorMessage();
  ASSERT_GT(full.size(), 8u);

  for (size_t capacity : {size_t{1}, size_t{2}, size_t{5}, full.size(), full.size() + 1}) {
    std::vector<char> buffer(capacity + 8, '#');
    size_t length = 0;
    EXPECT_EQ(vyre_last_error(nullptr, nullptr, buffer.data(), capacity, &length),
              VYRE_STATUS_INVALID_HANDLE);
    EXPECT_EQ(length, full.size()) << "capacity " << capacity;
    size_t copied = std::min(capacity - 1, full.size());
    EXPECT_EQ(std::string(buffer.data(), copied), full.substr(0, copied)) << capacity;
    EXPECT_EQ(buffer[copied], '\0') << "capacity " << capacity;
    for (size_t i = capacity; i < buffer.size(); ++i) {
      ASSERT_EQ(buffer[i], '#') << "wrote past the capacity " << capacity << " at " << i;
    }
  }
}

TEST_F(NoDriverTest, LastErrorWithZeroCapacityWritesNothing) {
  CauseHandleError();
  char buffer[4] = {'a', 'b', 'c', 'd'};
  size_t length = 0;
  EXPECT_EQ(vyre_last_error(nullptr, nullptr, buffer, 0, &length), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_GT(length, 0u);
  EXPECT_EQ(std::string(buffer, 4), "abcd");
}

TEST_F(NoDriverTest, LastErrorAcceptsAllNullPointers) {
  CauseHandleError();
  EXPECT_EQ(vyre_last_error(nullptr, nullptr, nullptr, 0, nullptr), VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(vyre_last_error(nullptr, nullptr, nullptr, 100, nullptr), VYRE_STATUS_INVALID_HANDLE);
}

TEST_F(NoDriverTest, LastErrorDoesNotClearItself) {
  CauseHandleError();
  std::string first = LastErrorMessage();
  std::string second = LastErrorMessage();
  EXPECT_EQ(first, second);
  EXPECT_EQ(vyre_last_error(nullptr, nullptr, nullptr, 0, nullptr), VYRE_STATUS_INVALID_HANDLE);
}

TEST_F(NoDriverTest, ASuccessfulCallClearsTheLastError) {
  CauseHandleError();
  ASSERT_EQ(vyre_set_log_callback(nullptr, nullptr, VYRE_LOG_ERROR), VYRE_STATUS_OK);
  vyre_status status = VYRE_STATUS_INTERNAL;
  int32_t cu_result = -1;
  size_t length = 99;
  char message[8] = "garbage";
  EXPECT_EQ(vyre_last_error(&status, &cu_result, message, sizeof(message), &length),
            VYRE_STATUS_OK);
  EXPECT_EQ(status, VYRE_STATUS_OK);
  EXPECT_EQ(cu_result, 0);
  EXPECT_EQ(length, 0u);
  EXPECT_STREQ(message, "");
}

TEST_F(NoDriverTest, LastErrorIsPerThread) {
  CauseHandleError();
  vyre_status other_thread_status = VYRE_STATUS_INTERNAL;
  vyre_status other_thread_own_error = VYRE_STATUS_OK;
  std::thread other([&] {
    other_thread_status = vyre_last_error(nullptr, nullptr, nullptr, 0, nullptr);
    other_thread_own_error = vyre_buffer_free(vyre_buffer{0});
  });
  other.join();
  EXPECT_EQ(other_thread_status, VYRE_STATUS_OK) << "a new thread saw another thread's error";
  EXPECT_EQ(other_thread_own_error, VYRE_STATUS_INVALID_HANDLE);
  EXPECT_EQ(vyre_last_error(nullptr, nullptr, nullptr, 0, nullptr), VYRE_STATUS_INVALID_HANDLE)
      << "another thread's call changed this thread's error";
}

// ---------------------------------------------------------------------------
// Functions that need the driver
// ---------------------------------------------------------------------------

TEST_F(NoDriverTest, DeviceCountSaysNoDriver) {
  uint32_t count = 12345;
  EXPECT_VYRE_ERROR(vyre_device_count(&count), VYRE_STATUS_NO_DRIVER);
  // The driver is loaded once per process; the outcome is the same again.
  EXPECT_VYRE_ERROR(vyre_device_count(&count), VYRE_STATUS_NO_DRIVER);
}

TEST_F(NoDriverTest, DeviceInfoSaysNoDriver) {
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  EXPECT_VYRE_ERROR(vyre_device_info_get(0, &info), VYRE_STATUS_NO_DRIVER);
}

TEST_F(NoDriverTest, ContextCreateSaysNoDriver) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_NO_DRIVER);
  EXPECT_EQ(context.bits, 0u) << "a failed create handed out a handle";
  EXPECT_VYRE_ERROR(vyre_context_create(&desc, &context), VYRE_STATUS_NO_DRIVER);
}

TEST_F(NoDriverTest, NoDriverIsNotADriverError) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  ASSERT_EQ(vyre_context_create(&desc, &context), VYRE_STATUS_NO_DRIVER);
  int32_t cu_result = -1;
  vyre_last_error(nullptr, &cu_result, nullptr, 0, nullptr);
  EXPECT_EQ(cu_result, 0) << "no driver was called, so there is no CUresult";
}

// ---------------------------------------------------------------------------
// Checks that come before the driver
// ---------------------------------------------------------------------------

TEST_F(NoDriverTest, NullOutPointersAreInvalidArguments) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  EXPECT_VYRE_ERROR(vyre_device_count(nullptr), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_device_info_get(0, nullptr), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(vyre_context_create(&desc, nullptr), VYRE_STATUS_INVALID_ARGUMENT);
}

TEST_F(NoDriverTest, NullDescriptorIsAnInvalidArgument) {
  vyre_context context{0};
  EXPECT_VYRE_ERROR(vyre_context_create(nullptr, &context), VYRE_STATUS_INVALID_ARGUMENT);
}

TEST_F(NoDriverTest, ContextDescStructSizeIsCheckedBeforeTheDriver) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  // Version 1 ended before the staging fields; smaller is refused.
  for (uint32_t size :
       TooSmallSizes<vyre_context_desc>(offsetof(vyre_context_desc, staging_chunk_bytes))) {
    vyre_context_desc small = WithStructSize(desc, size);
    EXPECT_VYRE_ERROR(vyre_context_create(&small, &context), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
        << "struct_size " << size;
  }
  LargerStruct<vyre_context_desc> nonzero_tail(desc, 16, 0x5A);
  EXPECT_VYRE_ERROR(vyre_context_create(nonzero_tail.get(), &context),
                    VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  // A larger struct with a zero tail passes the size check and reaches the driver.
  LargerStruct<vyre_context_desc> zero_tail(desc, 16, 0);
  EXPECT_VYRE_ERROR(vyre_context_create(zero_tail.get(), &context), VYRE_STATUS_NO_DRIVER);
}

TEST_F(NoDriverTest, DeviceInfoStructSizeIsCheckedBeforeTheDriver) {
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  // Version 1 ends before peer_access_mask (appended in version 2).
  for (uint32_t size : TooSmallSizes<vyre_device_info>(offsetof(vyre_device_info, peer_access_mask))) {
    vyre_device_info small = WithStructSize(info, size);
    EXPECT_VYRE_ERROR(vyre_device_info_get(0, &small), VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE)
        << "struct_size " << size;
  }
  // An output struct from a newer header: its unknown tail is the library's
  // to ignore, so it passes the size check.
  LargerStruct<vyre_device_info> larger(info, 32, 0);
  larger.FillTail(0xCD);
  EXPECT_VYRE_ERROR(vyre_device_info_get(0, larger.get()), VYRE_STATUS_NO_DRIVER);
  EXPECT_TRUE(larger.TailIsAll(0xCD));
}

// Every handle-taking function with the 0 handle or forged bits: the handle
// is checked before the driver, so INVALID_HANDLE, never NO_DRIVER.
TEST_F(NoDriverTest, ZeroAndForgedHandlesAreInvalidHandles) {
  std::vector<uint64_t> bad_bits = ForgedHandleBits();
  bad_bits.insert(bad_bits.begin(), 0);
  for (const HandleCall& call : AllHandleCalls()) {
    for (uint64_t bits : bad_bits) {
      EXPECT_VYRE_ERROR(call.call(bits), VYRE_STATUS_INVALID_HANDLE)
          << call.function << " with " << HandleKindName(call.kind) << " bits 0x" << std::hex
          << bits;
    }
  }
}

TEST_F(NoDriverTest, NullOutPointersWithBadHandlesStillFailCleanly) {
  // Either check may win; what matters is a clean error with a Fix.
  auto expect_handle_or_argument_error = [](vyre_status status, const char* call) {
    vyre_status expected = status == VYRE_STATUS_INVALID_ARGUMENT ? VYRE_STATUS_INVALID_ARGUMENT
                                                                  : VYRE_STATUS_INVALID_HANDLE;
    EXPECT_TRUE(ExpectError(status, expected)) << call;
  };
  expect_handle_or_argument_error(vyre_buffer_alloc(vyre_context{0}, 16, nullptr),
                                  "vyre_buffer_alloc");
  expect_handle_or_argument_error(vyre_context_telemetry(vyre_context{0}, nullptr),
                                  "vyre_context_telemetry");
  expect_handle_or_argument_error(vyre_buffer_info_get(vyre_buffer{0}, nullptr),
                                  "vyre_buffer_info_get");
  expect_handle_or_argument_error(vyre_pending_timing(vyre_pending{0}, nullptr),
                                  "vyre_pending_timing");
}

}  // namespace
}  // namespace vyre_test
