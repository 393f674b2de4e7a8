// The other process of the IPC tests (ipc_cases.cc), on the public API only.
// It talks line by line: commands on stdin, answers on stdout, each answer
// "ok ...", or "error <STATUS> <message>" when a vyre call failed.
//
//   vyre_ipc_peer export <bytes> <seed> <ordinal>
//       allocates a buffer of SeededBytes(bytes, seed) on device <ordinal>,
//       exports it and prints "ok <handle hex>"; then serves, until "exit":
//         expect <seed>  download and compare with SeededBytes: "ok" or
//                        "error MISMATCH <first wrong byte>"
//         free           vyre_buffer_free: "ok"
//         exit           destroys its context and exits 0
//   vyre_ipc_peer import <hex> <ordinal> <expect seed> <write seed>
//       imports the handle on device <ordinal>, checks its flags, compares
//       every byte with SeededBytes(expect seed), copies it to a buffer of its
//       own and compares that too, uploads SeededBytes(write seed) into the
//       import, frees it and prints "ok"; exits 0 on success, 1 otherwise.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ipc_peer_protocol.h"
#include "vyre_cuda.h"

namespace {

// Prints "error <STATUS> <message>" for a failed call; true when it failed.
bool Failed(vyre_status status) {
  if (status == VYRE_STATUS_OK) return false;
  char message[2048] = {0};
  vyre_last_error(nullptr, nullptr, message, sizeof(message), nullptr);
  for (char& c : message) c = c == '\n' ? ' ' : c;
  std::printf("error %s %s\n", vyre_status_name(status), message);
  std::fflush(stdout);
  return true;
}

bool Same(const std::vector<uint8_t>& actual, const std::vector<uint8_t>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (actual[i] != expected[i]) {
      std::printf("error MISMATCH byte %zu is %u, expected %u\n", i, actual[i], expected[i]);
      std::fflush(stdout);
      return false;
    }
  }
  return true;
}

vyre_context Context(uint32_t ordinal) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = ordinal;
  vyre_context context{0};
  if (Failed(vyre_context_create(&desc, &context))) std::exit(1);
  return context;
}

int Export(uint64_t bytes, uint64_t seed, uint32_t ordinal) {
  vyre_context context = Context(ordinal);
  vyre_buffer buffer{0};
  const std::vector<uint8_t> data = vyre_test::SeededBytes(bytes, seed);
  vyre_ipc_handle handle{};
  if (Failed(vyre_buffer_alloc(context, bytes, &buffer)) ||
      Failed(vyre_buffer_upload(buffer, 0, data.data(), bytes)) ||
      Failed(vyre_buffer_export_ipc(buffer, &handle))) {
    return 1;
  }
  std::printf("ok %s\n", vyre_test::HandleToHex(handle).c_str());
  std::fflush(stdout);
  std::string command;
  while (std::cin >> command) {
    if (command == "expect") {
      uint64_t expect_seed = 0;
      std::cin >> expect_seed;
      std::vector<uint8_t> actual(bytes, 0);
      if (Failed(vyre_buffer_download(buffer, 0, actual.data(), bytes))) continue;
      if (Same(actual, vyre_test::SeededBytes(bytes, expect_seed))) std::printf("ok\n");
    } else if (command == "free") {
      if (!Failed(vyre_buffer_free(buffer))) std::printf("ok\n");
    } else if (command == "exit") {
      break;
    } else {
      std::printf("error USAGE unknown command %s\n", command.c_str());
    }
    std::fflush(stdout);
  }
  return Failed(vyre_context_destroy(context)) ? 1 : 0;
}

int Import(const std::string& hex, uint32_t ordinal, uint64_t expect_seed, uint64_t write_seed) {
  vyre_ipc_handle handle{};
  if (!vyre_test::HandleFromHex(hex, &handle)) {
    std::printf("error USAGE bad handle text\n");
    return 1;
  }
  vyre_context context = Context(ordinal);
  vyre_buffer imported{0}, local{0};
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  if (Failed(vyre_buffer_import_ipc(context, &handle, &imported)) ||
      Failed(vyre_buffer_info_get(imported, &info))) {
    return 1;
  }
  const uint32_t want = VYRE_BUFFER_INFO_FLAG_BORROWED | VYRE_BUFFER_INFO_FLAG_IMPORTED;
  if (info.flags != want) {
    std::printf("error FLAGS 0x%x, expected 0x%x\n", info.flags, want);
    return 1;
  }
  const uint64_t bytes = info.bytes;
  const std::vector<uint8_t> expected = vyre_test::SeededBytes(bytes, expect_seed);
  std::vector<uint8_t> actual(bytes, 0);
  if (Failed(vyre_buffer_download(imported, 0, actual.data(), bytes)) || !Same(actual, expected)) {
    return 1;
  }
  // A device-to-device copy out of the mapping, checked byte by byte.
  vyre_buffer_copy_desc copy = VYRE_BUFFER_COPY_DESC_INIT;
  std::vector<uint8_t> copied(bytes, 0);
  if (Failed(vyre_buffer_alloc(context, bytes, &local))) return 1;
  copy.src = imported;
  copy.dst = local;
  copy.bytes = bytes;
  if (Failed(vyre_buffer_copy(&copy)) ||
      Failed(vyre_buffer_download(local, 0, copied.data(), bytes)) || !Same(copied, expected)) {
    return 1;
  }
  const std::vector<uint8_t> written = vyre_test::SeededBytes(bytes, write_seed);
  if (Failed(vyre_buffer_upload(imported, 0, written.data(), bytes)) ||
      Failed(vyre_buffer_free(imported)) || Failed(vyre_buffer_free(local)) ||
      Failed(vyre_context_destroy(context))) {
    return 1;
  }
  std::printf("ok %llu\n", static_cast<unsigned long long>(bytes));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "export" && argc == 5) {
    return Export(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10),
                  static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10)));
  }
  if (mode == "import" && argc == 6) {
    return Import(argv[2], static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)),
                  std::strtoull(argv[4], nullptr, 10), std::strtoull(argv[5], nullptr, 10));
  }
  std::fprintf(stderr,
               "usage: vyre_ipc_peer export <bytes> <seed> <ordinal>\n"
               "       vyre_ipc_peer import <hex> <ordinal> <expect seed> <write seed>\n");
  return 2;
}
