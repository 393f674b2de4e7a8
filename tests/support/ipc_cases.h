// The two-process IPC cases, shared by the fake-driver suite
// (tests/unit/buffer_ipc_test.cc) and the GPU suite
// (tests/gpu/buffer_ipc_test.cc): this process on one side of
// vyre_buffer_export_ipc / vyre_buffer_import_ipc, the vyre_ipc_peer program
// (ipc_peer.cc) on the other, with the same driver (the environment passes
// on). Each case checks every byte both ways, and each refusal's status and
// Fix. Compiled into each suite, which provides LastErrorMessage().
#ifndef VYRE_TESTS_SUPPORT_IPC_CASES_H_
#define VYRE_TESTS_SUPPORT_IPC_CASES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vyre_cuda.h"

namespace vyre_test {

std::string LastErrorMessage();

// A running vyre_ipc_peer with pipes to its stdin and stdout. Killed (and
// reaped) by the destructor if still running.
class PeerProcess {
 public:
  explicit PeerProcess(const std::vector<std::string>& args);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  bool started() const { return pid_ > 0; }
  // The next line the peer printed ("" at its end of output).
  std::string ReadLine();
  void Send(const std::string& line);
  // Waits for the peer to exit: its exit status, or -1.
  int Wait();

 private:
  pid_t pid_ = -1;
  int to_peer_ = -1;
  int from_peer_ = -1;
  std::string pending_;
};

// The peer's path, from VYRE_IPC_PEER (set by the test's CMake entry).
std::string PeerPath();

// This process exports a buffer of `bytes`; the peer imports it on device
// `ordinal`, checks it, copies it, writes new bytes; this process checks
// them. `wrap_offset` > 0 exports a wrapped view starting that far inside
// an allocation instead.
void CheckPeerImportsOurExport(vyre_context context, uint32_t ordinal, uint64_t bytes,
                               uint64_t wrap_offset);
// The peer exports; this process imports twice (one mapping), checks flags,
// bytes and a copy out of it, writes, and the peer checks the write; the
// export of an import is refused; the imports outlive a second context.
void CheckWeImportPeerExport(vyre_context context, uint32_t ordinal, uint64_t bytes);
// The peer frees its buffer (or exits) before the import: INVALID_ARGUMENT
// with the Fix.
void CheckImportOfFreedExport(vyre_context context, uint32_t ordinal, bool peer_exits);
// The peer exports on device `peer_ordinal`; importing into `context` (on
// another device) is INVALID_ARGUMENT naming both UUIDs.
void CheckImportOnAnotherDevice(vyre_context context, uint32_t peer_ordinal);
// Refusals without a peer: our own handle, corrupted and zero bytes, NULLs,
// a freed buffer's export.
void CheckInProcessRefusals(vyre_context context);

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_IPC_CASES_H_
