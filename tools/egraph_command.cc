// `vyre-cuda egraph` and `vyre-cuda egraph-bench`. Like the rest of the tool
// they use only the public C API (vyre_cuda.h); the JSON loader, the union and
// partition files and the synthetic generator come from tools/egraph.
//
// egraph: load FILE (egraph-serialize JSON), build an e-graph image on the GPU
// (or the CPU reference), apply the unions of U and rebuild to the congruence
// fixpoint, read back the canonical class of every class, write the partition
// to P. Prints e-nodes, classes before and after, rounds, merges and the time
// of each phase (load, upload = image create, rebuild, read-back); --json
// prints the same as one JSON object on stdout. A progress bar goes to stderr
// while a large file loads, when stderr is a terminal.
//
// egraph-bench: generate a synthetic e-graph (egglog's math micro-benchmark
// shape), rebuild it on the GPU (when there is one) and on the CPU reference
// with one thread and with every core, check that all canonical arrays are
// equal (exit 1 if not) and print the times and the GPU/CPU speedups.
#include "egraph_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "egraph/json_loader.h"
#include "egraph/synthetic.h"
#include "vyre_cuda.h"

namespace vyre::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitNoGpu = 2;

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
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
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string Quoted(const std::string& s) { return "\"" + JsonEscape(s) + "\""; }

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

bool IsNoGpu(vyre_status s) {
  return s == VYRE_STATUS_NO_DRIVER || s == VYRE_STATUS_DRIVER_TOO_OLD ||
         s == VYRE_STATUS_NO_DEVICE;
}

struct LastError {
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  std::string message;
};

LastError ReadLastError() {
  LastError e;
  size_t length = 0;
  vyre_last_error(&e.status, &e.cu_result, nullptr, 0, &length);
  std::vector<char> text(length + 1, '\0');
  vyre_last_error(nullptr, nullptr, text.data(), text.size(), nullptr);
  e.message = text.data();
  return e;
}

// Reports an error of the command's own (file, input): stderr, and a JSON
// error object on stdout with --json.
int ToolFail(const char* command, const std::string& message, bool json) {
  std::fprintf(stderr, "vyre-cuda %s: %s\n", command, message.c_str());
  if (json) {
    std::printf("{\"command\": %s, \"error\": {\"message\": %s}}\n", Quoted(command).c_str(),
                Quoted(message).c_str());
  }
  return kExitError;
}

// Reports a failed library call; a machine without a usable GPU gets exit 2
// and the suggestion to use the CPU reference.
int ApiFail(const char* command, const char* call, vyre_status status, bool json,
            bool suggest_cpu) {
  const LastError e = ReadLastError();
  std::fprintf(stderr, "vyre-cuda %s: %s failed: %s (CUresult %d)\n  %s\n", command, call,
               vyre_status_name(status), static_cast<int>(e.cu_result),
               e.message.empty() ? "(no message)" : e.message.c_str());
  const bool no_gpu = IsNoGpu(status);
  const std::string hint =
      "no usable GPU here: the e-graph cannot be rebuilt on the GPU. Fix: pass --device cpu to "
      "rebuild on the library's CPU reference.";
  if (no_gpu && suggest_cpu) std::fprintf(stderr, "vyre-cuda %s: %s\n", command, hint.c_str());
  if (json) {
    std::printf("{\"command\": %s, \"error\": {\"call\": %s, \"status\": %s, \"status_code\": %d, "
                "\"cu_result\": %d, \"message\": %s%s}}\n",
                Quoted(command).c_str(), Quoted(call).c_str(),
                Quoted(vyre_status_name(status)).c_str(), static_cast<int>(status),
                static_cast<int>(e.cu_result), Quoted(e.message).c_str(),
                no_gpu && suggest_cpu ? (", \"hint\": " + Quoted(hint)).c_str() : "");
  }
  return no_gpu ? kExitNoGpu : kExitError;
}

// A progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool wanted) : enabled_(wanted && isatty(STDERR_FILENO)) {}
  ~ProgressBar() { Finish(); }
  void Update(const char* label, uint64_t done, uint64_t total) {
    if (!enabled_ || total == 0) return;
    constexpr int kWidth = 30;
    const double f = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    const int fill = static_cast<int>(f * kWidth);
    std::string bar(static_cast<size_t>(fill), '=');
    if (fill < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r%-8s [%s] %3d%%  %.0f / %.0f MiB", label, bar.c_str(),
                 static_cast<int>(f * 100), done / 1048576.0, total / 1048576.0);
    std::fflush(stderr);
    drawn_ = true;
  }
  void Status(const char* text) {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%-70s", text);
    std::fflush(stderr);
    drawn_ = true;
  }
  void Finish() {
    if (drawn_) {
      std::fprintf(stderr, "\r%-70s\r", "");
      std::fflush(stderr);
      drawn_ = false;
    }
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

// Files this large get a progress bar (when stderr is a terminal).
constexpr uint64_t kProgressBytes = 4ull << 20;

const uint32_t kEmpty[1] = {0};

const uint32_t* Data(const std::vector<uint32_t>& v) { return v.empty() ? kEmpty : v.data(); }

vyre_egraph_image_desc ImageDesc(const tools::EgraphColumns& g, vyre_egraph_device device,
                                 vyre_context context, uint32_t cpu_threads) {
  vyre_egraph_image_desc d = VYRE_EGRAPH_IMAGE_DESC_INIT;
  d.device = device;
  d.context = context;
  d.row_count = g.rows();
  d.class_count = g.classes;
  d.child_count = g.children.size();
  d.row_classes = Data(g.row_classes);
  d.row_ops = Data(g.row_ops);
  d.child_offsets = Data(g.child_offsets);
  d.child_lengths = Data(g.child_lengths);
  d.children = Data(g.children);
  d.cpu_threads = cpu_threads;
  return d;
}

std::string DeviceName(vyre_context context) {
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  if (vyre_context_device_info(context, &info) != VYRE_STATUS_OK) return "GPU";
  info.name[sizeof info.name - 1] = '\0';
  return std::to_string(info.ordinal) + ": " + info.name;
}

}  // namespace

// ---------------------------------------------------------------------------
// egraph
// ---------------------------------------------------------------------------

void AddEgraphCommand(CLI::App& app, EgraphOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "egraph",
      "Rebuild an e-graph (egraph-serialize JSON) to its congruence closure on the GPU or the CPU "
      "reference.");
  cmd->add_option("FILE", options.file, "egraph-serialize JSON file.")->required();
  cmd->add_option("--device", options.device, "Where to rebuild: gpu or cpu (the CPU reference).")
      ->check(CLI::IsMember({"gpu", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--unions-file", options.unions_file,
                  "Unions to apply before the rebuild: one per line, two e-class ids of FILE "
                  "separated by whitespace.");
  cmd->add_option("--partition-out", options.partition_out,
                  "Write '<eclass id>\\t<canonical eclass id>' for every e-class of FILE here.");
  cmd->add_flag("--json", options.json, "Print one JSON object on stdout instead of text.");
  cmd->add_option("--cpu-threads", options.cpu_threads,
                  "CPU reference worker threads (0 = every core).")
      ->capture_default_str();
}

int RunEgraph(const EgraphOptions& options) {
  const char* kCmd = "egraph";
  const bool json = options.json;
  const bool gpu = options.device == "gpu";

  // The GPU context first (a CPU image needs none): a machine without a GPU
  // fails at once, not after loading a large file.
  vyre_context context = {0};
  std::string device_name = "CPU reference";
  if (gpu) {
    vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
    const vyre_status s = vyre_context_create(&cdesc, &context);
    if (s != VYRE_STATUS_OK) return ApiFail(kCmd, "vyre_context_create", s, json, true);
    device_name = DeviceName(context);
  }
  // From here on every exit destroys the context.
  struct ContextGuard {
    vyre_context* c;
    ~ContextGuard() {
      if (c->bits != 0) vyre_context_destroy(*c);
    }
  } guard{&context};

  // Load.
  ProgressBar progress(true);
  tools::LoadOptions load_options;
  load_options.progress = [&](uint64_t done, uint64_t total) {
    if (total >= kProgressBytes) progress.Update("loading", done, total);
  };
  tools::LoadedEgraph g;
  Clock::time_point t = Clock::now();
  tools::ToolStatus st = tools::LoadEgraphJsonFile(options.file, load_options, &g);
  const double load_ms = MsSince(t);
  progress.Finish();
  if (!st.ok()) return ToolFail(kCmd, st.message, json);

  std::vector<uint32_t> unions;
  if (!options.unions_file.empty()) {
    st = tools::ReadUnionFile(options.unions_file, g, &unions);
    if (!st.ok()) return ToolFail(kCmd, st.message, json);
  }

  int exit_code = kExitOk;
  vyre_egraph_image image = {0};
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  std::vector<uint32_t> canonical(g.classes);
  double upload_ms = 0, rebuild_ms = 0, readback_ms = 0;
  do {
    // Upload (image create).
    if (g.rows() >= (1u << 20)) progress.Status(gpu ? "uploading..." : "building the image...");
    vyre_egraph_image_desc idesc =
        ImageDesc(g, gpu ? VYRE_EGRAPH_DEVICE_GPU : VYRE_EGRAPH_DEVICE_CPU, context,
                  options.cpu_threads);
    t = Clock::now();
    vyre_status s = vyre_egraph_image_create(&idesc, &image);
    upload_ms = MsSince(t);
    if (s != VYRE_STATUS_OK) {
      progress.Finish();
      exit_code = ApiFail(kCmd, "vyre_egraph_image_create", s, json, gpu);
      break;
    }
    // Rebuild (unions first).
    if (g.rows() >= (1u << 20)) progress.Status("rebuilding...");
    vyre_egraph_rebuild_desc rdesc = VYRE_EGRAPH_REBUILD_DESC_INIT;
    rdesc.flags = gpu ? VYRE_EGRAPH_REBUILD_DEVICE_TIMING : 0;
    rdesc.unions = Data(unions);
    rdesc.union_count = unions.size() / 2;
    t = Clock::now();
    s = vyre_egraph_rebuild(image, &rdesc, &result);
    rebuild_ms = MsSince(t);
    progress.Finish();
    if (s != VYRE_STATUS_OK) {
      exit_code = ApiFail(kCmd, "vyre_egraph_rebuild", s, json, gpu);
      break;
    }
    // Read-back of the canonical classes.
    t = Clock::now();
    if (g.classes > 0) {
      s = vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0, g.classes,
                                 canonical.data());
    }
    readback_ms = MsSince(t);
    if (s != VYRE_STATUS_OK) {
      exit_code = ApiFail(kCmd, "vyre_egraph_image_read", s, json, gpu);
      break;
    }
  } while (false);

  if (image.bits != 0) {
    const vyre_status s = vyre_egraph_image_destroy(image);
    if (s != VYRE_STATUS_OK && exit_code == kExitOk) {
      exit_code = ApiFail(kCmd, "vyre_egraph_image_destroy", s, json, false);
    }
  }
  if (context.bits != 0) {
    const vyre_status s = vyre_context_destroy(context);
    context.bits = 0;
    if (s != VYRE_STATUS_OK && exit_code == kExitOk) {
      exit_code = ApiFail(kCmd, "vyre_context_destroy", s, json, false);
    }
  }
  if (exit_code != kExitOk) return exit_code;

  for (uint32_t c : canonical) {
    if (c >= g.classes) {
      return ToolFail(kCmd,
                      "the library returned canonical class " + std::to_string(c) + " of " +
                          std::to_string(g.classes) +
                          " classes. Fix: report this as a bug in vyre-cuda.",
                      json);
    }
  }
  if (!options.partition_out.empty()) {
    st = tools::WritePartition(options.partition_out, g, canonical);
    if (!st.ok()) return ToolFail(kCmd, st.message, json);
  }

  const double device_ms = result.device_ns / 1e6;
  if (json) {
    std::string out = "{\"command\": \"egraph\", \"file\": " + Quoted(options.file) +
                      ", \"device\": " + Quoted(options.device) +
                      ", \"device_name\": " + Quoted(device_name) +
                      ", \"bytes\": " + std::to_string(g.bytes) +
                      ", \"e_nodes\": " + std::to_string(g.rows()) +
                      ", \"children\": " + std::to_string(g.children.size()) +
                      ", \"ops\": " + std::to_string(g.op_names.size()) +
                      ", \"classes\": " + std::to_string(g.classes) +
                      ", \"unions\": " + std::to_string(unions.size() / 2) +
                      ", \"union_merges\": " + std::to_string(result.union_merges) +
                      ", \"classes_before\": " + std::to_string(result.classes_before) +
                      ", \"classes_after\": " + std::to_string(result.classes_after) +
                      ", \"rounds\": " + std::to_string(result.rounds) +
                      ", \"merges\": " + std::to_string(result.merges) +
                      ", \"rows_visited\": " + std::to_string(result.rows_visited) +
                      ", \"times_ms\": {\"load\": " + Num(load_ms) + ", \"upload\": " +
                      Num(upload_ms) + ", \"rebuild\": " + Num(rebuild_ms) +
                      ", \"read_back\": " + Num(readback_ms) +
                      (gpu ? ", \"rebuild_device\": " + Num(device_ms) : std::string()) +
                      "}, \"partition_out\": " +
                      (options.partition_out.empty() ? std::string("null")
                                                     : Quoted(options.partition_out)) +
                      "}";
    std::printf("%s\n", out.c_str());
  } else {
    std::printf("e-graph:          %s (%.1f MiB)\n", options.file.c_str(), g.bytes / 1048576.0);
    std::printf("device:           %s (%s)\n", options.device.c_str(), device_name.c_str());
    std::printf("e-nodes:          %" PRIu64 " (%zu children, %zu ops)\n", g.rows(),
                g.children.size(), g.op_names.size());
    std::printf("classes:          %" PRIu64 "\n", g.classes);
    std::printf("unions:           %zu (%" PRIu64 " merged classes)\n", unions.size() / 2,
                static_cast<uint64_t>(result.union_merges));
    std::printf("classes before:   %" PRIu64 "\n", static_cast<uint64_t>(result.classes_before));
    std::printf("classes after:    %" PRIu64 "\n", static_cast<uint64_t>(result.classes_after));
    std::printf("rounds:           %u\n", result.rounds);
    std::printf("merges:           %" PRIu64 " (congruence)\n",
                static_cast<uint64_t>(result.merges));
    std::printf("rows visited:     %" PRIu64 "\n", static_cast<uint64_t>(result.rows_visited));
    std::printf("time load:        %10.3f ms\n", load_ms);
    std::printf("time upload:      %10.3f ms\n", upload_ms);
    std::printf("time rebuild:     %10.3f ms", rebuild_ms);
    if (gpu) std::printf("  (device %.3f ms)", device_ms);
    std::printf("\n");
    std::printf("time read-back:   %10.3f ms\n", readback_ms);
    if (!options.partition_out.empty()) {
      std::printf("partition:        %s\n", options.partition_out.c_str());
    }
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// egraph-bench
// ---------------------------------------------------------------------------

void AddEgraphBenchCommand(CLI::App& app, EgraphBenchOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "egraph-bench",
      "Generate a synthetic e-graph (egglog's math micro-benchmark shape) and rebuild it on the "
      "GPU and on the CPU reference (one thread, every core); checks that they agree.");
  cmd->add_option("--rows", options.rows, "E-nodes (every one its own class).")
      ->capture_default_str();
  cmd->add_option("--arity", options.arity, "Largest operator arity.")->capture_default_str();
  cmd->add_option("--seed", options.seed, "Generator seed.")->capture_default_str();
  cmd->add_flag("--json", options.json, "Print one JSON object on stdout instead of text.");
  cmd->add_option("--repeat", options.repeat,
                  "Timed rebuilds per device (the median is reported; the GPU gets one untimed "
                  "warm-up first).")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  cmd->add_option("--cpu-threads", options.cpu_threads,
                  "Threads of the multi-threaded CPU run (0 = every core).")
      ->capture_default_str();
  cmd->add_flag("--skip-single-thread", options.skip_single_thread,
                "Skip the one-thread CPU run (slow on large inputs).");
}

namespace {

struct BenchRun {
  std::string name;        // "gpu", "cpu-1", "cpu-all"
  std::string device_name;
  uint32_t threads = 0;
  bool ran = false;
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  double upload_ms = 0, rebuild_ms = 0, device_ms = 0, readback_ms = 0;
  std::vector<uint32_t> canonical;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Image create, (warm-up), `repeat` rebuilds from scratch, read-back.
// Returns VYRE_STATUS_OK or the failed call's status (with *call set).
vyre_status RunOne(const tools::EgraphColumns& g, vyre_egraph_device device, vyre_context context,
                   uint32_t threads, uint32_t repeat, bool warm_up, BenchRun* run,
                   const char** call) {
  vyre_egraph_image_desc idesc = ImageDesc(g, device, context, threads);
  vyre_egraph_image image = {0};
  Clock::time_point t = Clock::now();
  vyre_status s = vyre_egraph_image_create(&idesc, &image);
  run->upload_ms = MsSince(t);
  if (s != VYRE_STATUS_OK) {
    *call = "vyre_egraph_image_create";
    return s;
  }
  std::vector<double> wall, dev;
  const bool gpu = device == VYRE_EGRAPH_DEVICE_GPU;
  for (uint32_t i = 0; i < repeat + (warm_up ? 1 : 0) && s == VYRE_STATUS_OK; ++i) {
    vyre_egraph_rebuild_desc rdesc = VYRE_EGRAPH_REBUILD_DESC_INIT;
    rdesc.flags = VYRE_EGRAPH_REBUILD_RESET | (gpu ? VYRE_EGRAPH_REBUILD_DEVICE_TIMING : 0);
    vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
    t = Clock::now();
    s = vyre_egraph_rebuild(image, &rdesc, &result);
    const double ms = MsSince(t);
    if (s != VYRE_STATUS_OK) {
      *call = "vyre_egraph_rebuild";
      break;
    }
    run->result = result;
    if (warm_up && i == 0) continue;
    wall.push_back(ms);
    dev.push_back(result.device_ns / 1e6);
  }
  if (s == VYRE_STATUS_OK) {
    run->rebuild_ms = Median(wall);
    run->device_ms = Median(dev);
    run->canonical.assign(g.classes, 0);
    t = Clock::now();
    if (g.classes > 0) {
      s = vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0, g.classes,
                                 run->canonical.data());
    }
    run->readback_ms = MsSince(t);
    if (s != VYRE_STATUS_OK) *call = "vyre_egraph_image_read";
  }
  const vyre_status d = vyre_egraph_image_destroy(image);
  if (s == VYRE_STATUS_OK && d != VYRE_STATUS_OK) {
    *call = "vyre_egraph_image_destroy";
    s = d;
  }
  run->ran = s == VYRE_STATUS_OK;
  return s;
}

std::string RunJson(const BenchRun& r) {
  return "{\"name\": " + Quoted(r.name) + ", \"device_name\": " + Quoted(r.device_name) +
         ", \"threads\": " + std::to_string(r.threads) +
         ", \"rounds\": " + std::to_string(r.result.rounds) +
         ", \"merges\": " + std::to_string(r.result.merges) +
         ", \"classes_after\": " + std::to_string(r.result.classes_after) +
         ", \"rows_visited\": " + std::to_string(r.result.rows_visited) +
         ", \"upload_ms\": " + Num(r.upload_ms) + ", \"rebuild_ms\": " + Num(r.rebuild_ms) +
         (r.name == "gpu" ? ", \"rebuild_device_ms\": " + Num(r.device_ms) : std::string()) +
         ", \"read_back_ms\": " + Num(r.readback_ms) + "}";
}

}  // namespace

int RunEgraphBench(const EgraphBenchOptions& options) {
  const char* kCmd = "egraph-bench";
  const bool json = options.json;
  if (options.rows > UINT32_MAX) {
    return ToolFail(kCmd,
                    "--rows " + std::to_string(options.rows) +
                        " is too large: e-graph images hold at most 2^32 - 1 rows. Fix: pass a "
                        "smaller --rows.",
                    json);
  }
  if (options.arity > 64) {
    return ToolFail(kCmd, "--arity " + std::to_string(options.arity) +
                              " is too large. Fix: pass an arity of at most 64 (2 is the math "
                              "benchmark's).",
                    json);
  }
  Clock::time_point t = Clock::now();
  const tools::SyntheticEgraph g = tools::GenerateSynthetic(options.rows, options.arity, options.seed);
  const double generate_ms = MsSince(t);
  if (g.rows() != options.rows) {
    return ToolFail(kCmd, "--rows " + std::to_string(options.rows) + " with --arity " +
                              std::to_string(options.arity) +
                              " needs more than 2^32 - 1 children. Fix: pass fewer rows.",
                    json);
  }

  std::vector<BenchRun> runs;
  std::string gpu_note;
  // GPU, when there is one.
  {
    vyre_context context = {0};
    vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
    const vyre_status s = vyre_context_create(&cdesc, &context);
    if (s != VYRE_STATUS_OK) {
      const LastError e = ReadLastError();
      if (!IsNoGpu(s)) return ApiFail(kCmd, "vyre_context_create", s, json, false);
      gpu_note = std::string("no GPU run: ") + vyre_status_name(s) + ": " + e.message;
      if (!json) std::fprintf(stderr, "vyre-cuda %s: %s\n", kCmd, gpu_note.c_str());
    } else {
      BenchRun run;
      run.name = "gpu";
      run.device_name = DeviceName(context);
      const char* call = "";
      const vyre_status r = RunOne(g, VYRE_EGRAPH_DEVICE_GPU, context, 0, options.repeat,
                                   /*warm_up=*/true, &run, &call);
      int exit_code = kExitOk;
      if (r != VYRE_STATUS_OK) exit_code = ApiFail(kCmd, call, r, json, false);
      vyre_context_destroy(context);
      if (exit_code != kExitOk) return exit_code;
      runs.push_back(std::move(run));
    }
  }
  // CPU reference: one thread, then every core.
  for (int which = 0; which < 2; ++which) {
    if (which == 0 && options.skip_single_thread) continue;
    BenchRun run;
    run.name = which == 0 ? "cpu-1" : "cpu-all";
    run.threads = which == 0 ? 1 : options.cpu_threads;
    run.device_name = which == 0 ? "CPU reference, 1 thread"
                                 : (options.cpu_threads == 0
                                        ? std::string("CPU reference, every core")
                                        : "CPU reference, " + std::to_string(options.cpu_threads) +
                                              " threads");
    const char* call = "";
    const vyre_status r = RunOne(g, VYRE_EGRAPH_DEVICE_CPU, vyre_context{0}, run.threads,
                                 options.repeat, /*warm_up=*/false, &run, &call);
    if (r != VYRE_STATUS_OK) return ApiFail(kCmd, call, r, json, false);
    runs.push_back(std::move(run));
  }

  // Every run must give the same partition.
  std::string mismatch;
  for (size_t i = 1; i < runs.size() && mismatch.empty(); ++i) {
    if (runs[i].canonical != runs[0].canonical) {
      uint64_t first = 0;
      while (first < g.classes && runs[i].canonical[first] == runs[0].canonical[first]) ++first;
      mismatch = runs[i].name + " and " + runs[0].name + " disagree: class " +
                 std::to_string(first) + " is canonically " +
                 std::to_string(runs[i].canonical[first]) + " vs " +
                 std::to_string(runs[0].canonical[first]);
    }
  }

  const BenchRun* gpu = nullptr;
  const BenchRun* cpu1 = nullptr;
  const BenchRun* cpuall = nullptr;
  for (const BenchRun& r : runs) {
    if (r.name == "gpu") gpu = &r;
    if (r.name == "cpu-1") cpu1 = &r;
    if (r.name == "cpu-all") cpuall = &r;
  }
  const BenchRun& first = runs.front();
  auto speedup = [&](const BenchRun* cpu) {
    return gpu && cpu && gpu->rebuild_ms > 0 ? cpu->rebuild_ms / gpu->rebuild_ms : 0.0;
  };

  if (json) {
    std::string out = "{\"command\": \"egraph-bench\", \"rows\": " + std::to_string(g.rows()) +
                      ", \"arity\": " + std::to_string(options.arity) +
                      ", \"seed\": " + std::to_string(options.seed) +
                      ", \"depth\": " + std::to_string(g.depth) +
                      ", \"children\": " + std::to_string(g.children.size()) +
                      ", \"classes_before\": " + std::to_string(g.classes) +
                      ", \"classes_after\": " + std::to_string(first.result.classes_after) +
                      ", \"rounds\": " + std::to_string(first.result.rounds) +
                      ", \"merges\": " + std::to_string(first.result.merges) +
                      ", \"repeat\": " + std::to_string(options.repeat) +
                      ", \"generate_ms\": " + Num(generate_ms) + ", \"runs\": [";
    for (size_t i = 0; i < runs.size(); ++i) out += (i ? ", " : "") + RunJson(runs[i]);
    out += "]";
    if (gpu) {
      out += ", \"speedup_vs_cpu_1\": " + (cpu1 ? Num(speedup(cpu1)) : std::string("null")) +
             ", \"speedup_vs_cpu_all\": " + (cpuall ? Num(speedup(cpuall)) : std::string("null"));
    } else {
      out += ", \"gpu\": " + Quoted(gpu_note);
    }
    out += ", \"partitions_equal\": " + std::string(mismatch.empty() ? "true" : "false");
    if (!mismatch.empty()) out += ", \"error\": {\"message\": " + Quoted(mismatch) + "}";
    out += "}";
    std::printf("%s\n", out.c_str());
  } else {
    std::printf("synthetic e-graph: %" PRIu64 " rows, arity <= %u, seed %" PRIu64
                ", depth %u, %zu children (generated in %.1f ms)\n",
                g.rows(), options.arity, options.seed, g.depth, g.children.size(), generate_ms);
    std::printf("classes before:    %" PRIu64 "\n", g.classes);
    std::printf("classes after:     %" PRIu64 "\n",
                static_cast<uint64_t>(first.result.classes_after));
    std::printf("rounds:            %u\n", first.result.rounds);
    std::printf("merges:            %" PRIu64 "\n", static_cast<uint64_t>(first.result.merges));
    std::printf("%-10s %-34s %7s %12s %12s %12s %12s\n", "run", "device", "rounds", "upload ms",
                "rebuild ms", "device ms", "read-back ms");
    for (const BenchRun& r : runs) {
      std::printf("%-10s %-34s %7u %12.3f %12.3f ", r.name.c_str(), r.device_name.c_str(),
                  r.result.rounds, r.upload_ms, r.rebuild_ms);
      if (r.name == "gpu") {
        std::printf("%12.3f", r.device_ms);
      } else {
        std::printf("%12s", "-");
      }
      std::printf(" %12.3f\n", r.readback_ms);
    }
    if (gpu) {
      if (cpu1) std::printf("GPU speedup vs CPU, 1 thread:   %.1fx\n", speedup(cpu1));
      if (cpuall) std::printf("GPU speedup vs CPU, all cores:  %.1fx\n", speedup(cpuall));
    }
    std::printf("rebuild times: median of %u (GPU after one warm-up)\n", options.repeat);
    if (mismatch.empty()) std::printf("partitions: equal on every run\n");
  }
  if (!mismatch.empty()) {
    std::fprintf(stderr,
                 "vyre-cuda %s: the rebuilds disagree: %s. Fix: report this as a bug in "
                 "vyre-cuda, with --rows %" PRIu64 " --arity %u --seed %" PRIu64 ".\n",
                 kCmd, mismatch.c_str(), options.rows, options.arity, options.seed);
    return kExitError;
  }
  return kExitOk;
}

}  // namespace vyre::cli
