#include "ipc_cases.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ipc_peer_protocol.h"

extern char** environ;

namespace vyre_test {
namespace {

// Checks a call's status, printing the library's message when it differs.
#define IPC_EXPECT_STATUS(expected, expr)                                              \
  do {                                                                                 \
    const vyre_status ipc_status_ = (expr);                                            \
    EXPECT_EQ(ipc_status_, (expected)) << #expr << ": " << vyre_status_name(ipc_status_) \
                                       << ": " << LastErrorMessage();                   \
  } while (0)
#define IPC_ASSERT_OK(expr)                                                            \
  do {                                                                                 \
    const vyre_status ipc_status_ = (expr);                                            \
    ASSERT_EQ(ipc_status_, VYRE_STATUS_OK) << #expr << ": " << vyre_status_name(ipc_status_) \
                                           << ": " << LastErrorMessage();               \
  } while (0)

// The last error's message has its Fix on the first line, and `needle`.
void ExpectMessage(const std::string& needle) {
  const std::string message = LastErrorMessage();
  const std::string first_line = message.substr(0, message.find('\n'));
  EXPECT_NE(first_line.find(needle), std::string::npos) << message;
  EXPECT_NE(first_line.find(". Fix: "), std::string::npos) << message;
}

std::vector<uint8_t> Download(vyre_buffer buffer, uint64_t bytes) {
  std::vector<uint8_t> out(bytes, 0);
  EXPECT_EQ(vyre_buffer_download(buffer, 0, out.data(), bytes), VYRE_STATUS_OK)
      << LastErrorMessage();
  return out;
}

::testing::AssertionResult SameBytes(const std::vector<uint8_t>& actual,
                                     const std::vector<uint8_t>& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      return ::testing::AssertionFailure() << "byte " << i << " is " << int(actual[i])
                                           << ", expected " << int(expected[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

// Starts `vyre_ipc_peer export`, reading its handle.
bool StartExporter(PeerProcess& peer, vyre_ipc_handle* handle) {
  if (!peer.started()) return false;
  const std::string line = peer.ReadLine();
  EXPECT_EQ(line.rfind("ok ", 0), 0u) << "peer: " << line;
  return line.rfind("ok ", 0) == 0 && HandleFromHex(line.substr(3), handle);
}

std::string Str(uint64_t v) { return std::to_string(v); }

}  // namespace

PeerProcess::PeerProcess(const std::vector<std::string>& args) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const std::string path = PeerPath();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  to_peer_ = in[1];
  from_peer_ = out[0];
  EXPECT_GT(pid_, 0) << "could not start " << path;
}

PeerProcess::~PeerProcess() {
  if (to_peer_ >= 0) close(to_peer_);
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (from_peer_ >= 0) close(from_peer_);
}

std::string PeerProcess::ReadLine() {
  for (;;) {
    const size_t end = pending_.find('\n');
    if (end != std::string::npos) {
      std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return line;
    }
    char chunk[4096];
    const ssize_t got = from_peer_ < 0 ? 0 : read(from_peer_, chunk, sizeof(chunk));
    if (got <= 0) {
      std::string rest;
      rest.swap(pending_);
      return rest;
    }
    pending_.append(chunk, static_cast<size_t>(got));
  }
}

void PeerProcess::Send(const std::string& line) {
  const std::string text = line + "\n";
  ASSERT_EQ(write(to_peer_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

int PeerProcess::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, 0);
  pid_ = -1;
  return done > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string PeerPath() {
  const char* path = std::getenv("VYRE_IPC_PEER");
  if (path != nullptr) return path;
#ifdef VYRE_IPC_PEER_DEFAULT
  return VYRE_IPC_PEER_DEFAULT;
#else
  return "vyre_ipc_peer";
#endif
}

void CheckPeerImportsOurExport(vyre_context context, uint32_t ordinal, uint64_t bytes,
                               uint64_t wrap_offset) {
  SCOPED_TRACE(::testing::Message() << bytes << " bytes, wrap offset " << wrap_offset);
  vyre_buffer owner{0}, exported{0};
  IPC_ASSERT_OK(vyre_buffer_alloc(context, bytes + wrap_offset, &owner));
  // The bytes before a wrapped view stay the poison the peer must not see.
  const std::vector<uint8_t> poison(bytes + wrap_offset, 0xEF);
  IPC_ASSERT_OK(vyre_buffer_upload(owner, 0, poison.data(), poison.size()));
  exported = owner;
  if (wrap_offset > 0) {
    vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
    IPC_ASSERT_OK(vyre_buffer_info_get(owner, &info));
    vyre_buffer_wrap_desc wrap = VYRE_BUFFER_WRAP_DESC_INIT;
    wrap.device_pointer = info.device_pointer + wrap_offset;
    wrap.bytes = bytes;
    IPC_ASSERT_OK(vyre_buffer_wrap(context, &wrap, &exported));
  }
  const uint64_t seed = 1000 + bytes, write_seed = 2000 + bytes;
  const std::vector<uint8_t> data = SeededBytes(bytes, seed);
  IPC_ASSERT_OK(vyre_buffer_upload(exported, 0, data.data(), bytes));
  vyre_ipc_handle handle{}, again{};
  IPC_ASSERT_OK(vyre_buffer_export_ipc(exported, &handle));
  IPC_ASSERT_OK(vyre_buffer_export_ipc(exported, &again));
  EXPECT_EQ(std::memcmp(handle.bytes, again.bytes, sizeof(handle.bytes)), 0)
      << "exporting one buffer twice gave different handles";

  PeerProcess peer({"import", HandleToHex(handle), Str(ordinal), Str(seed), Str(write_seed)});
  ASSERT_TRUE(peer.started());
  const std::string answer = peer.ReadLine();
  EXPECT_EQ(answer, "ok " + Str(bytes));
  EXPECT_EQ(peer.Wait(), 0) << answer;
  // The peer's write, through its mapping, is in our memory; the bytes
  // around a wrapped view are untouched.
  std::vector<uint8_t> expected = poison;
  const std::vector<uint8_t> written = SeededBytes(bytes, write_seed);
  std::memcpy(expected.data() + wrap_offset, written.data(), bytes);
  EXPECT_TRUE(SameBytes(Download(owner, bytes + wrap_offset), expected));
  if (exported.bits != owner.bits) IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_buffer_free(exported));
  IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_buffer_free(owner));
}

void CheckWeImportPeerExport(vyre_context context, uint32_t ordinal, uint64_t bytes) {
  SCOPED_TRACE(::testing::Message() << bytes << " bytes");
  const uint64_t seed = 3000 + bytes, write_seed = 4000 + bytes;
  PeerProcess peer({"export", Str(bytes), Str(seed), Str(ordinal)});
  vyre_ipc_handle handle{};
  ASSERT_TRUE(StartExporter(peer, &handle));

  vyre_buffer first{0}, second{0};
  IPC_ASSERT_OK(vyre_buffer_import_ipc(context, &handle, &first));
  IPC_ASSERT_OK(vyre_buffer_import_ipc(context, &handle, &second));
  vyre_buffer_info info1 = VYRE_BUFFER_INFO_INIT, info2 = VYRE_BUFFER_INFO_INIT;
  IPC_ASSERT_OK(vyre_buffer_info_get(first, &info1));
  IPC_ASSERT_OK(vyre_buffer_info_get(second, &info2));
  EXPECT_EQ(info1.flags, uint32_t{VYRE_BUFFER_INFO_FLAG_BORROWED | VYRE_BUFFER_INFO_FLAG_IMPORTED});
  EXPECT_EQ(info1.bytes, bytes);
  EXPECT_EQ(info1.device_pointer, info2.device_pointer) << "one handle, one mapping";
  EXPECT_TRUE(SameBytes(Download(first, bytes), SeededBytes(bytes, seed)));

  // An import is not this process's to export.
  vyre_ipc_handle re_export{};
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_export_ipc(first, &re_export));
  ExpectMessage("an import of memory another process exported");

  // A device copy out of the mapping, into a poisoned buffer.
  vyre_buffer local{0};
  IPC_ASSERT_OK(vyre_buffer_alloc(context, bytes, &local));
  const std::vector<uint8_t> poison(bytes, 0xEF);
  IPC_ASSERT_OK(vyre_buffer_upload(local, 0, poison.data(), bytes));
  vyre_buffer_copy_desc copy = VYRE_BUFFER_COPY_DESC_INIT;
  copy.src = second;
  copy.dst = local;
  copy.bytes = bytes;
  IPC_ASSERT_OK(vyre_buffer_copy(&copy));
  EXPECT_TRUE(SameBytes(Download(local, bytes), SeededBytes(bytes, seed)));

  // Freeing one import leaves the other's mapping working.
  IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_buffer_free(first));
  const std::vector<uint8_t> written = SeededBytes(bytes, write_seed);
  IPC_ASSERT_OK(vyre_buffer_upload(second, 0, written.data(), bytes));
  peer.Send("expect " + Str(write_seed));
  EXPECT_EQ(peer.ReadLine(), "ok") << "the exporter reads what the importer wrote";

  // An import in a second context, destroyed with it: the exporter's memory
  // stays.
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = ordinal;
  vyre_context other{0};
  IPC_ASSERT_OK(vyre_context_create(&desc, &other));
  vyre_buffer third{0};
  IPC_ASSERT_OK(vyre_buffer_import_ipc(other, &handle, &third));
  IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_context_destroy(other));
  IPC_EXPECT_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_buffer_free(third));
  IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_buffer_free(second));
  IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_buffer_free(local));
  peer.Send("expect " + Str(write_seed));
  EXPECT_EQ(peer.ReadLine(), "ok");
  peer.Send("exit");
  EXPECT_EQ(peer.Wait(), 0);
}

void CheckImportOfFreedExport(vyre_context context, uint32_t ordinal, bool peer_exits) {
  SCOPED_TRACE(peer_exits ? "the exporter exited" : "the exporter freed the buffer");
  PeerProcess peer({"export", "4096", "77", Str(ordinal)});
  vyre_ipc_handle handle{};
  ASSERT_TRUE(StartExporter(peer, &handle));
  if (peer_exits) {
    peer.Send("exit");
    ASSERT_EQ(peer.Wait(), 0);
  } else {
    peer.Send("free");
    ASSERT_EQ(peer.ReadLine(), "ok");
  }
  vyre_buffer imported{1};
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                    vyre_buffer_import_ipc(context, &handle, &imported));
  ExpectMessage("no longer allocated");
  EXPECT_EQ(imported.bits, 0u);
  if (!peer_exits) {
    peer.Send("exit");
    EXPECT_EQ(peer.Wait(), 0);
  }
}

void CheckImportOnAnotherDevice(vyre_context context, uint32_t peer_ordinal) {
  PeerProcess peer({"export", "4096", "78", Str(peer_ordinal)});
  vyre_ipc_handle handle{};
  ASSERT_TRUE(StartExporter(peer, &handle));
  vyre_buffer imported{0};
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                    vyre_buffer_import_ipc(context, &handle, &imported));
  ExpectMessage("import it into a context on the device with UUID");
  peer.Send("exit");
  EXPECT_EQ(peer.Wait(), 0);
}

void CheckInProcessRefusals(vyre_context context) {
  vyre_buffer buffer{0};
  IPC_ASSERT_OK(vyre_buffer_alloc(context, 4096, &buffer));
  vyre_ipc_handle handle{};
  IPC_ASSERT_OK(vyre_buffer_export_ipc(buffer, &handle));
  vyre_buffer out{0};
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_import_ipc(context, &handle, &out));
  ExpectMessage("exported by this process");

  vyre_ipc_handle corrupted = handle;
  corrupted.bytes[40] ^= 0x10;
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT,
                    vyre_buffer_import_ipc(context, &corrupted, &out));
  ExpectMessage("checksum does not match");
  vyre_ipc_handle zero{};
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_import_ipc(context, &zero, &out));
  ExpectMessage("no handle marker");
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_import_ipc(context, nullptr, &out));
  ExpectMessage("handle is NULL");
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_import_ipc(context, &handle, nullptr));
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_buffer_export_ipc(buffer, nullptr));
  IPC_EXPECT_STATUS(VYRE_STATUS_INVALID_HANDLE,
                    vyre_buffer_import_ipc(vyre_context{0}, &handle, &out));
  IPC_EXPECT_STATUS(VYRE_STATUS_OK, vyre_buffer_free(buffer));
  IPC_EXPECT_STATUS(VYRE_STATUS_STALE_HANDLE, vyre_buffer_export_ipc(buffer, &handle));
}

}  // namespace vyre_test
