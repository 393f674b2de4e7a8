// vyre_buffer_export_ipc / vyre_buffer_import_ipc between two processes on
// the fake driver (which shares exported allocations through POSIX shared
// memory): this test on one side, tests/support/ipc_peer.cc on the other.
// The cases themselves (tests/support/ipc_cases.cc) also run on a GPU
// (tests/gpu/buffer_ipc_test.cc). Here the fixture also checks that every
// mapping was closed and every export ended, and that the engine made no
// call a real driver rejects (the fake counts, for example, a second open
// of one handle in one context, or an open in the exporting process).
#include <gtest/gtest.h>

#include "api_fake_fixture.h"
#include "fake_cuda_client.h"
#include "ipc_cases.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

class IpcTest : public FakeDriverTest {
 protected:
  void TearDown() override {
    FakeDriverTest::TearDown();
    const fake_cuda_stats after = FakeCuda::Stats();
    EXPECT_EQ(after.ipc_imports_live, 0u) << "IPC mappings left open";
    EXPECT_EQ(after.ipc_exports_live, 0u) << "exports outlived their buffers";
  }
};

TEST_F(IpcTest, PeerImportsOurExportAndWritesBack) {
  CheckPeerImportsOurExport(context_, 0, 4096, 0);
  CheckPeerImportsOurExport(context_, 0, 100003, 0);  // not a multiple of anything
}

TEST_F(IpcTest, PeerImportsAWrappedViewInsideAnAllocation) {
  CheckPeerImportsOurExport(context_, 0, 5000, 4096 + 256);
}

TEST_F(IpcTest, WeImportPeerExportOnceMappedTwiceHeld) {
  CheckWeImportPeerExport(context_, 0, 4096);
  CheckWeImportPeerExport(context_, 0, 70001);
  EXPECT_EQ(FakeCuda::Stats().ipc_imports_live, 0u) << "freeing the imports closes the mapping";
}

TEST_F(IpcTest, ImportAfterTheExporterFreedIsRefused) {
  CheckImportOfFreedExport(context_, 0, /*peer_exits=*/false);
}

TEST_F(IpcTest, ImportAfterTheExporterExitedIsRefused) {
  CheckImportOfFreedExport(context_, 0, /*peer_exits=*/true);
}

TEST_F(IpcTest, RefusalsInOneProcess) { CheckInProcessRefusals(context_); }

// Run with FAKE_CUDA_DEVICES=2 (its own ctest entry): the peer exports on
// device 1, and device 0's context refuses the import; device 1's takes it.
TEST_F(IpcTest, ImportIntoAContextOfAnotherDevice) {
  uint32_t count = 0;
  ASSERT_VYRE_OK(vyre_device_count(&count));
  if (count < 2) GTEST_SKIP() << "needs FAKE_CUDA_DEVICES=2";
  CheckImportOnAnotherDevice(context_, 1);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = 1;
  vyre_context second{0};
  ASSERT_VYRE_OK(vyre_context_create(&desc, &second));
  CheckWeImportPeerExport(second, 1, 4096);
  EXPECT_VYRE_OK(vyre_context_destroy(second));
}

}  // namespace
}  // namespace vyre_test
