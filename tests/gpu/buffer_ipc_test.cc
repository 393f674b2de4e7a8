// vyre_buffer_export_ipc / vyre_buffer_import_ipc between two processes on
// real devices: this test on one side, vyre_ipc_peer (tests/support/
// ipc_peer.cc) on the other, with the cases of tests/support/ipc_cases.cc
// (the fake-driver suite runs the same ones). Sizes from 4 KiB to 64 MiB
// plus a few bytes; every byte checked both ways. With two GPUs
// (VYRE_CUDA_REQUIRE_GPUS=2 makes a missing second GPU a failure), the
// import into a context of the other device is refused, and imports there
// work.
#include "gpu_test_env.h"
#include "ipc_cases.h"

namespace vyre_test {
namespace {

using IpcGpuTest = GpuTest;

constexpr uint64_t kLarge = (uint64_t{64} << 20) + 3;

TEST_F(IpcGpuTest, PeerImportsOurExportAndWritesBack) {
  CheckPeerImportsOurExport(context(), device().ordinal, 4096, 0);
  CheckPeerImportsOurExport(context(), device().ordinal, kLarge, 0);
}

TEST_F(IpcGpuTest, PeerImportsAWrappedViewInsideAnAllocation) {
  CheckPeerImportsOurExport(context(), device().ordinal, 5000, 4096 + 256);
}

TEST_F(IpcGpuTest, WeImportPeerExportOnceMappedTwiceHeld) {
  CheckWeImportPeerExport(context(), device().ordinal, 4096);
  CheckWeImportPeerExport(context(), device().ordinal, kLarge);
}

TEST_F(IpcGpuTest, ImportAfterTheExporterFreedIsRefused) {
  CheckImportOfFreedExport(context(), device().ordinal, /*peer_exits=*/false);
}

TEST_F(IpcGpuTest, ImportAfterTheExporterExitedIsRefused) {
  CheckImportOfFreedExport(context(), device().ordinal, /*peer_exits=*/true);
}

TEST_F(IpcGpuTest, RefusalsInOneProcess) { CheckInProcessRefusals(context()); }

TEST_F(IpcGpuTest, TwoGpusImportIntoAContextOfAnotherDevice) {
  VYRE_GPU_NEED_TWO_DEVICES();
  CheckImportOnAnotherDevice(context(), 1);
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = 1;
  ContextHandle second;
  ASSERT_VYRE_OK(vyre_context_create(&desc, second.out()));
  CheckWeImportPeerExport(second.get(), 1, 4096);
}

}  // namespace
}  // namespace vyre_test
