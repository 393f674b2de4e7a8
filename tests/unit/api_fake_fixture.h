// The fixture of the fake-driver API suites: a context on the fake device,
// and after each test a check through the fake's own counters that the engine
// released every driver object it made and never misused the driver.
#ifndef VYRE_TESTS_UNIT_API_FAKE_FIXTURE_H_
#define VYRE_TESTS_UNIT_API_FAKE_FIXTURE_H_

#include <gtest/gtest.h>

#include <vector>

#include "fake_cuda_client.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {

class FakeDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(FakeCuda::Available())
        << "VYRE_CUDA_DRIVER_LIBRARY must name the fake driver (run through ctest)";
    before_ = FakeCuda::Stats();
    context_ = MakeContext();
    ASSERT_NE(context_.bits, 0u);
  }

  void TearDown() override {
    if (context_.bits != 0) {
      EXPECT_VYRE_OK(vyre_context_destroy(context_));
    }
    ExpectDriverStateRestored();
  }

  // Everything the engine made in the driver since SetUp is gone again.
  void ExpectDriverStateRestored() {
    fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.misuse_errors, before_.misuse_errors)
        << "the engine made driver calls a real driver rejects (see 'fake cuda: MISUSE' above)";
    EXPECT_EQ(after.hold_timeouts, before_.hold_timeouts);
    EXPECT_EQ(after.device_allocations_live, before_.device_allocations_live)
        << "device allocations leaked";
    EXPECT_EQ(after.device_bytes_live, before_.device_bytes_live) << "device bytes leaked";
    EXPECT_EQ(after.pinned_allocations_live, before_.pinned_allocations_live)
        << "pinned allocations leaked";
    EXPECT_EQ(after.modules_live, before_.modules_live) << "modules leaked";
    EXPECT_EQ(after.streams_live, before_.streams_live) << "streams leaked";
    EXPECT_EQ(after.events_live, before_.events_live) << "events leaked";
    EXPECT_EQ(after.primary_context_retains, before_.primary_context_retains)
        << "primary context retains and releases do not balance";
  }

  // Destroys the fixture's context early (the test then owns the check).
  void DestroyContext() {
    EXPECT_VYRE_OK(vyre_context_destroy(context_));
    context_ = vyre_context{0};
  }

  vyre_context context_{0};
  fake_cuda_stats before_{};
};

}  // namespace vyre_test

#endif  // VYRE_TESTS_UNIT_API_FAKE_FIXTURE_H_
