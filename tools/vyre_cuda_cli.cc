// vyre-cuda — command-line front end to libvyre_cuda.
//
//   vyre-cuda info [--json]         library, driver and device facts
//   vyre-cuda selftest [--device N] the library's built-in checked vector add
//   vyre-cuda egraph FILE.json ...  e-graph congruence rebuild (egraph_command.cc)
//   vyre-cuda egraph-bench ...      synthetic e-graph rebuild, GPU vs CPU reference
//
// The tool uses only the public C API (vyre_cuda.h), like any other client,
// so it doubles as a check that the API is enough to answer these questions.
//
// Exit codes: 0 = success; 1 = an error; 2 = this machine cannot run CUDA
// work (no driver, driver too old, no device). Errors go to stderr with the
// library's message, which ends with a "Fix:" sentence.
//
// New subcommands (bench, egraph) register themselves in main() the same way
// `info` does: a struct of options, an Add*Command() that declares them, and a
// Run*() that returns the exit code.

#include <CLI/CLI.hpp>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "egraph_command.h"
#include "vyre_cuda.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitNoGpu = 2;

// This thread's last error, copied out of the library.
struct LastError {
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  std::string message;
};

LastError ReadLastError() {
  LastError e;
  size_t length = 0;
  // Ask for the length first: JIT logs can make messages long.
  vyre_last_error(&e.status, &e.cu_result, nullptr, 0, &length);
  std::vector<char> text(length + 1, '\0');
  vyre_last_error(nullptr, nullptr, text.data(), text.size(), nullptr);
  e.message = text.data();
  return e;
}

bool IsNoGpu(vyre_status s) {
  return s == VYRE_STATUS_NO_DRIVER || s == VYRE_STATUS_DRIVER_TOO_OLD ||
         s == VYRE_STATUS_NO_DEVICE;
}

std::string VersionString(uint32_t v) {
  return std::to_string(VYRE_VERSION_MAJOR_OF(v)) + "." + std::to_string(VYRE_VERSION_MINOR_OF(v)) +
         "." + std::to_string(VYRE_VERSION_PATCH_OF(v));
}

// cuDriverGetVersion() packs 1000 * major + 10 * minor.
std::string DriverVersionString(uint32_t v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through unchanged
        }
    }
  }
  return out;
}

std::string Quoted(const std::string& s) { return "\"" + JsonEscape(s) + "\""; }

// Reports a failed call on stderr (and as JSON on stdout when asked) and
// returns the exit code it deserves.
int Fail(const char* what, vyre_status status, bool json) {
  const LastError e = ReadLastError();
  std::fprintf(stderr, "vyre-cuda: %s failed: %s (CUresult %d)\n  %s\n", what,
               vyre_status_name(status), static_cast<int>(e.cu_result),
               e.message.empty() ? "(no message)" : e.message.c_str());
  if (json) {
    std::printf("{\"library_version\": %s, \"error\": {\"call\": %s, \"status\": %s, "
                "\"status_code\": %d, \"cu_result\": %d, \"message\": %s}}\n",
                Quoted(VersionString(vyre_version())).c_str(), Quoted(what).c_str(),
                Quoted(vyre_status_name(status)).c_str(), static_cast<int>(status),
                static_cast<int>(e.cu_result), Quoted(e.message).c_str());
  }
  return IsNoGpu(status) ? kExitNoGpu : kExitError;
}

// ---------------------------------------------------------------------------
// info
// ---------------------------------------------------------------------------

struct InfoOptions {
  bool json = false;
};

void AddInfoCommand(CLI::App& app, InfoOptions& options) {
  CLI::App* info = app.add_subcommand(
      "info", "Print the library version, the CUDA driver version and every device's limits.");
  info->add_flag("--json", options.json, "Print one JSON object on stdout instead of text.");
}

std::string Dim3(const uint32_t d[3]) {
  return std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " + std::to_string(d[2]);
}

void PrintDeviceText(const vyre_device_info& d) {
  std::printf("device %u: %s\n", d.ordinal, d.name);
  std::printf("  compute capability:    %u.%u\n", d.compute_capability_major,
              d.compute_capability_minor);
  std::printf("  memory:                %.1f GiB (%" PRIu64 " bytes)\n",
              static_cast<double>(d.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
              d.total_memory_bytes);
  std::printf("  multiprocessors:       %u\n", d.multiprocessor_count);
  std::printf("  warp size:             %u\n", d.warp_size);
  std::printf("  max threads per block: %u\n", d.max_threads_per_block);
  std::printf("  max block:             %s\n", Dim3(d.max_block_dim).c_str());
  std::printf("  max grid:              %s\n", Dim3(d.max_grid_dim).c_str());
  std::printf("  max shared per block:  %u bytes\n", d.max_shared_memory_per_block);
  std::printf("  cooperative launch:    %s\n", d.cooperative_launch ? "yes" : "no");
}

std::string DeviceJson(const vyre_device_info& d) {
  auto dims = [](const uint32_t v[3]) {
    return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) +
           "]";
  };
  return "{\"ordinal\": " + std::to_string(d.ordinal) + ", \"name\": " + Quoted(d.name) +
         ", \"compute_capability\": " +
         Quoted(std::to_string(d.compute_capability_major) + "." +
                std::to_string(d.compute_capability_minor)) +
         ", \"total_memory_bytes\": " + std::to_string(d.total_memory_bytes) +
         ", \"multiprocessor_count\": " + std::to_string(d.multiprocessor_count) +
         ", \"warp_size\": " + std::to_string(d.warp_size) +
         ", \"max_threads_per_block\": " + std::to_string(d.max_threads_per_block) +
         ", \"max_block_dim\": " + dims(d.max_block_dim) +
         ", \"max_grid_dim\": " + dims(d.max_grid_dim) +
         ", \"max_shared_memory_per_block\": " + std::to_string(d.max_shared_memory_per_block) +
         ", \"cooperative_launch\": " + (d.cooperative_launch ? "true" : "false") + "}";
}

int RunInfo(const InfoOptions& options) {
  const uint32_t library_version = vyre_version();
  if (VYRE_VERSION_MAJOR_OF(library_version) != VYRE_CUDA_VERSION_MAJOR) {
    std::fprintf(stderr,
                 "vyre-cuda: the loaded library is %s but this tool was built for %s. "
                 "Fix: install the tool and the library from the same build.\n",
                 VersionString(library_version).c_str(),
                 VersionString(VYRE_CUDA_VERSION).c_str());
    return kExitError;
  }

  // The first call that needs the driver loads it, so a machine without CUDA
  // fails here.
  uint32_t count = 0;
  vyre_status st = vyre_device_count(&count);
  if (st != VYRE_STATUS_OK) return Fail("vyre_device_count", st, options.json);

  std::vector<vyre_device_info> devices;
  for (uint32_t i = 0; i < count; ++i) {
    vyre_device_info d = VYRE_DEVICE_INFO_INIT;
    st = vyre_device_info_get(i, &d);
    if (st != VYRE_STATUS_OK) return Fail("vyre_device_info_get", st, options.json);
    d.name[sizeof d.name - 1] = '\0';  // never trust a fixed buffer to be terminated
    devices.push_back(d);
  }
  // The driver version is reported per device; with none it is unknown.
  const uint32_t driver_version = devices.empty() ? 0 : devices.front().driver_version;

  if (options.json) {
    std::string out = "{\"library_version\": " + Quoted(VersionString(library_version)) +
                      ", \"header_version\": " + Quoted(VersionString(VYRE_CUDA_VERSION)) +
                      ", \"driver_version\": " +
                      (driver_version ? Quoted(DriverVersionString(driver_version)) : "null") +
                      ", \"driver_version_code\": " + std::to_string(driver_version) +
                      ", \"device_count\": " + std::to_string(count) + ", \"devices\": [";
    for (size_t i = 0; i < devices.size(); ++i) {
      if (i) out += ", ";
      out += DeviceJson(devices[i]);
    }
    out += "]}";
    std::printf("%s\n", out.c_str());
  } else {
    std::printf("vyre-cuda library: %s (built against header %s)\n",
                VersionString(library_version).c_str(), VersionString(VYRE_CUDA_VERSION).c_str());
    if (driver_version) {
      std::printf("CUDA driver:       %s (%u)\n", DriverVersionString(driver_version).c_str(),
                  driver_version);
    } else {
      std::printf("CUDA driver:       loaded (its version is reported per device)\n");
    }
    std::printf("devices:           %u\n", count);
    for (const vyre_device_info& d : devices) PrintDeviceText(d);
  }

  if (count == 0) {
    // vyre_device_count succeeds with 0 devices, so there is no library
    // message to print; say the same thing the library would.
    std::fprintf(stderr,
                 "vyre-cuda: the CUDA driver loaded but reports no device. Fix: check that the "
                 "GPU is visible to this process (nvidia-smi, CUDA_VISIBLE_DEVICES, container "
                 "device flags).\n");
    return kExitNoGpu;
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// selftest
// ---------------------------------------------------------------------------

struct SelftestOptions {
  uint32_t device = 0;
};

void AddSelftestCommand(CLI::App& app, SelftestOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "selftest", "Run the library's built-in self-test (a checked vector add) on a device.");
  cmd->add_option("--device", options.device, "Device ordinal.")->capture_default_str();
}

int RunSelftest(const SelftestOptions& options) {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = options.device;
  vyre_context context = {0};
  vyre_status st = vyre_context_create(&desc, &context);
  if (st != VYRE_STATUS_OK) return Fail("vyre_context_create", st, false);

  int exit_code = kExitOk;
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  st = vyre_context_device_info(context, &info);
  if (st != VYRE_STATUS_OK) {
    exit_code = Fail("vyre_context_device_info", st, false);
  } else if ((st = vyre_context_selftest(context)) != VYRE_STATUS_OK) {
    exit_code = Fail("vyre_context_selftest", st, false);
  } else {
    info.name[sizeof info.name - 1] = '\0';
    std::printf("selftest: OK (device %u: %s)\n", info.ordinal, info.name);
  }
  st = vyre_context_destroy(context);
  if (st != VYRE_STATUS_OK && exit_code == kExitOk) {
    exit_code = Fail("vyre_context_destroy", st, false);
  }
  return exit_code;
}

int Main(int argc, char** argv) {
  CLI::App app{"vyre-cuda: inspect and exercise the vyre-cuda GPU runtime.", "vyre-cuda"};
  app.set_version_flag("--version", "vyre-cuda " + VersionString(vyre_version()));
  app.require_subcommand(1);

  int exit_code = kExitOk;
  InfoOptions info_options;
  AddInfoCommand(app, info_options);
  app.get_subcommand("info")->callback([&] { exit_code = RunInfo(info_options); });
  SelftestOptions selftest_options;
  AddSelftestCommand(app, selftest_options);
  app.get_subcommand("selftest")->callback([&] { exit_code = RunSelftest(selftest_options); });
  vyre::cli::EgraphOptions egraph_options;
  vyre::cli::AddEgraphCommand(app, egraph_options);
  app.get_subcommand("egraph")->callback(
      [&] { exit_code = vyre::cli::RunEgraph(egraph_options); });
  vyre::cli::EgraphBenchOptions egraph_bench_options;
  vyre::cli::AddEgraphBenchCommand(app, egraph_bench_options);
  app.get_subcommand("egraph-bench")->callback(
      [&] { exit_code = vyre::cli::RunEgraphBench(egraph_bench_options); });

  CLI11_PARSE(app, argc, argv);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // The library never throws; this guards the tool's own allocations and
  // CLI11, so no input ends in std::terminate.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vyre-cuda: %s. Fix: report this as a bug in the vyre-cuda tool.\n",
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "vyre-cuda: unknown exception. Fix: report this as a bug in the "
                         "vyre-cuda tool.\n");
  }
  return kExitError;
}
