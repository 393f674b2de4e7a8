// `vyre-cuda egraph` and `vyre-cuda egraph-bench`. Like the rest of the tool
// they use only the public C API (vyre_cuda.h); the JSON loader, the union and
// partition files and the synthetic generator come from tools/egraph.
//
// egraph: load FILE (egraph-serialize JSON), build an e-graph image on the GPU
// (or the CPU reference), apply the unions of U and rebuild to the congruence
// fixpoint, read back the canonical class of every class, write the partition
// to P. Prints e-nodes, classes before and after, rounds, merges and the time
// of each phase (load, upload = image create, rebuild, read-back); --json
// prints the same as one JSON object on stdout. Each --step DELTA[,UNIONS]
// then grows the image as a saturation loop would: DELTA's e-nodes are
// appended (vyre_egraph_image_append), UNIONS applied and the image rebuilt
// incrementally; the canonical classes are kept up to date from the classes
// each rebuild changed (vyre_egraph_changed_read) and checked against a full
// read after the last step. P then covers the classes of every file. A progress bar goes to stderr
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
#include <numeric>
#include <string>
#include <utility>
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
  // One argument per --step (not greedy), so FILE may follow a --step; a bare
  // --step is kept as "" so that it gets the command's error with a Fix.
  cmd->add_option("--step", options.steps,
                  "DELTA.json[,UNIONS.txt]: after FILE's rebuild, append DELTA's e-nodes (new "
                  "node ids; e-classes and children of FILE, of earlier steps or of DELTA), "
                  "apply UNIONS (e-class ids as in --unions-file) and rebuild incrementally. "
                  "Repeatable; steps run in order.")
      ->expected(0, 1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  cmd->add_option("--partition-out", options.partition_out,
                  "Write '<eclass id>\\t<canonical eclass id>' for every e-class of FILE (and "
                  "of every --step, after the last) here.");
  cmd->add_flag("--json", options.json, "Print one JSON object on stdout instead of text.");
  cmd->add_option("--cpu-threads", options.cpu_threads,
                  "CPU reference worker threads (0 = every core).")
      ->capture_default_str();
}

namespace {

constexpr char kEgraphCmd[] = "egraph";

// E-graphs with this many rows get a status line (on a terminal) while the
// image is built and rebuilt, which takes long enough to look hung.
constexpr uint64_t kStatusRows = 1u << 20;

// The size of a loaded graph, as the report prints it: FILE's, taken before
// any --step grows the graph.
struct GraphCounts {
  uint64_t rows = 0, children = 0, ops = 0, classes = 0, bytes = 0;
};

GraphCounts CountsOf(const tools::LoadedEgraph& g) {
  GraphCounts c;
  c.rows = g.rows();
  c.children = g.children.size();
  c.ops = g.op_names.size();
  c.classes = g.classes;
  c.bytes = g.bytes;
  return c;
}

// What one `egraph` run holds between its steps: the GPU context (none for the
// CPU reference), the loaded e-graph, its image and the times so far. The steps
// are separate functions on it so that a loop of steps (append e-nodes, apply
// unions and rebuild, report) can reuse them on one image.
struct EgraphSession {
  explicit EgraphSession(const EgraphOptions& options)
      : json(options.json), gpu(options.device == "gpu"), cpu_threads(options.cpu_threads) {}
  EgraphSession(const EgraphSession&) = delete;
  EgraphSession& operator=(const EgraphSession&) = delete;
  // ReleaseDevice reports destroy errors; this only covers a path that skipped
  // it, where an error has been reported already.
  ~EgraphSession() {
    if (image.bits != 0) vyre_egraph_image_destroy(image);
    if (context.bits != 0) vyre_context_destroy(context);
  }

  const bool json;
  const bool gpu;
  const uint32_t cpu_threads;
  vyre_context context = {0};
  std::string device_name = "CPU reference";
  // One line on stderr, shared by the load and the image and rebuild steps.
  ProgressBar progress{true};
  // FILE, then grown by every --step.
  tools::LoadedEgraph graph;
  // FILE's counts (the report's first part describes FILE alone).
  GraphCounts base;
  vyre_egraph_image image = {0};
  double load_ms = 0;
  double upload_ms = 0;
};

// One apply-unions-and-rebuild of the image: what a report prints.
struct RebuildOutcome {
  size_t unions = 0;
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  // The canonical class of every class of the graph (after the steps, of the
  // grown graph).
  std::vector<uint32_t> canonical;
  double rebuild_ms = 0;
  // The full read-back (FILE), or the read of the changed classes (a step).
  double readback_ms = 0;
};

// One --step: its files, what it appended and what its rebuild did.
struct StepOutcome {
  std::string delta;
  std::string unions_file;  // empty: no unions
  uint64_t rows_appended = 0, classes_appended = 0, children_appended = 0, ops_appended = 0;
  // The graph's size after the step.
  uint64_t rows_total = 0, classes_total = 0;
  double load_ms = 0, append_ms = 0;
  RebuildOutcome rebuild;  // canonical stays empty
};

// The GPU context comes first (a CPU image needs none) so that a machine
// without a GPU fails at once, not after loading a large file.
int OpenDevice(EgraphSession* s) {
  if (!s->gpu) return kExitOk;
  vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
  const vyre_status status = vyre_context_create(&cdesc, &s->context);
  if (status != VYRE_STATUS_OK) {
    return ApiFail(kEgraphCmd, "vyre_context_create", status, s->json, true);
  }
  s->device_name = DeviceName(s->context);
  return kExitOk;
}

// A large file draws the progress bar while it loads.
tools::LoadOptions ProgressOptions(EgraphSession* s) {
  tools::LoadOptions load_options;
  load_options.progress = [s](uint64_t done, uint64_t total) {
    if (total >= kProgressBytes) s->progress.Update("loading", done, total);
  };
  return load_options;
}

int LoadGraph(const std::string& file, EgraphSession* s) {
  const Clock::time_point t = Clock::now();
  const tools::ToolStatus st = tools::LoadEgraphJsonFile(file, ProgressOptions(s), &s->graph);
  s->load_ms = MsSince(t);
  s->progress.Finish();
  s->base = CountsOf(s->graph);
  return st.ok() ? kExitOk : ToolFail(kEgraphCmd, st.message, s->json);
}

// Appends the unions of the file at `path` (none when empty) to `unions`, two
// class ids of the loaded graph each.
int ReadUnions(const std::string& path, const EgraphSession& s, std::vector<uint32_t>* unions) {
  if (path.empty()) return kExitOk;
  const tools::ToolStatus st = tools::ReadUnionFile(path, s.graph, unions);
  return st.ok() ? kExitOk : ToolFail(kEgraphCmd, st.message, s.json);
}

// The "upload" phase: the image of the loaded graph, on the GPU or the CPU.
int BuildImage(EgraphSession* s) {
  if (s->graph.rows() >= kStatusRows) {
    s->progress.Status(s->gpu ? "uploading..." : "building the image...");
  }
  vyre_egraph_image_desc idesc =
      ImageDesc(s->graph, s->gpu ? VYRE_EGRAPH_DEVICE_GPU : VYRE_EGRAPH_DEVICE_CPU, s->context,
                s->cpu_threads);
  const Clock::time_point t = Clock::now();
  const vyre_status status = vyre_egraph_image_create(&idesc, &s->image);
  s->upload_ms = MsSince(t);
  if (status == VYRE_STATUS_OK) return kExitOk;
  s->progress.Finish();
  return ApiFail(kEgraphCmd, "vyre_egraph_image_create", status, s->json, s->gpu);
}

int ReadCanonical(const EgraphSession& s, RebuildOutcome* out) {
  const uint64_t classes = s.graph.classes;
  out->canonical.assign(classes, 0);
  vyre_status status = VYRE_STATUS_OK;
  const Clock::time_point t = Clock::now();
  if (classes > 0) {
    status = vyre_egraph_image_read(s.image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0, classes,
                                    out->canonical.data());
  }
  out->readback_ms = MsSince(t);
  if (status == VYRE_STATUS_OK) return kExitOk;
  return ApiFail(kEgraphCmd, "vyre_egraph_image_read", status, s.json, s.gpu);
}

// Applies `unions` (pairs of class ids) and rebuilds the image to its
// congruence fixpoint, from the union-find the image holds (never RESET: after
// an append the rebuild is incremental).
int RebuildImage(const std::vector<uint32_t>& unions, EgraphSession* s, RebuildOutcome* out) {
  if (s->graph.rows() >= kStatusRows) s->progress.Status("rebuilding...");
  vyre_egraph_rebuild_desc rdesc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  rdesc.flags = s->gpu ? VYRE_EGRAPH_REBUILD_DEVICE_TIMING : 0;
  rdesc.unions = Data(unions);
  rdesc.union_count = unions.size() / 2;
  out->unions = unions.size() / 2;
  const Clock::time_point t = Clock::now();
  const vyre_status status = vyre_egraph_rebuild(s->image, &rdesc, &out->result);
  out->rebuild_ms = MsSince(t);
  s->progress.Finish();
  if (status != VYRE_STATUS_OK) {
    return ApiFail(kEgraphCmd, "vyre_egraph_rebuild", status, s->json, s->gpu);
  }
  return kExitOk;
}

// Applies `unions`, rebuilds and reads back the canonical class of every class.
int ApplyUnionsAndRebuild(const std::vector<uint32_t>& unions, EgraphSession* s,
                          RebuildOutcome* out) {
  const int exit_code = RebuildImage(unions, s, out);
  return exit_code == kExitOk ? ReadCanonical(*s, out) : exit_code;
}

// --- steps -------------------------------------------------------------------

// Splits every --step at its first comma into DELTA and UNIONS (none when
// absent or empty), before anything runs, so a bad argument fails at once.
int ParseSteps(const EgraphOptions& options, std::vector<StepOutcome>* steps) {
  for (const std::string& arg : options.steps) {
    StepOutcome step;
    const size_t comma = arg.find(',');
    step.delta = arg.substr(0, comma);
    if (comma != std::string::npos) step.unions_file = arg.substr(comma + 1);
    if (step.delta.empty()) {
      return ToolFail(kEgraphCmd,
                      "--step \"" + arg + "\" names no DELTA.json. Fix: pass --step DELTA.json "
                      "or --step DELTA.json,UNIONS.txt (the e-nodes to append first).",
                      options.json);
    }
    steps->push_back(std::move(step));
  }
  return kExitOk;
}

// Reads a step's DELTA against the graph so far (which it grows) and then its
// unions, whose class ids may name DELTA's new classes.
int LoadStep(EgraphSession* s, StepOutcome* step, tools::EgraphAppend* added,
             std::vector<uint32_t>* unions) {
  const Clock::time_point t = Clock::now();
  const tools::ToolStatus st =
      tools::AppendEgraphJsonFile(step->delta, ProgressOptions(s), &s->graph, added);
  s->progress.Finish();
  if (!st.ok()) return ToolFail(kEgraphCmd, st.message, s->json);
  const int exit_code = ReadUnions(step->unions_file, *s, unions);
  step->load_ms = MsSince(t);
  step->rows_appended = added->rows();
  step->classes_appended = added->new_classes();
  step->children_appended = added->children.size();
  step->ops_appended = added->op_names.size();
  return exit_code;
}

int AppendToImage(const tools::EgraphAppend& a, EgraphSession* s, StepOutcome* step) {
  vyre_egraph_append_desc d = VYRE_EGRAPH_APPEND_DESC_INIT;
  d.class_count = a.new_classes();
  d.row_count = a.rows();
  d.child_count = a.children.size();
  d.row_classes = Data(a.row_classes);
  d.row_ops = Data(a.row_ops);
  d.child_offsets = Data(a.child_offsets);
  d.child_lengths = Data(a.child_lengths);
  d.children = Data(a.children);
  const Clock::time_point t = Clock::now();
  const vyre_status status = vyre_egraph_image_append(s->image, &d);
  step->append_ms = MsSince(t);
  if (status == VYRE_STATUS_OK) return kExitOk;
  return ApiFail(kEgraphCmd, "vyre_egraph_image_append", status, s->json, s->gpu);
}

// Brings `canonical` (every class before the step) up to date the way an
// e-matcher would, from the classes the rebuild changed alone: new classes
// start alone, then each changed pair sets its class's canonical class.
int ReadChanges(const EgraphSession& s, std::vector<uint32_t>* canonical, RebuildOutcome* out) {
  const Clock::time_point t = Clock::now();
  uint64_t count = 0;
  vyre_status status = vyre_egraph_changed_read(s.image, nullptr, 0, &count);
  std::vector<uint32_t> pairs;
  if (status == VYRE_STATUS_OK && count > 0) {
    pairs.resize(2 * count);
    status = vyre_egraph_changed_read(s.image, pairs.data(), count, &count);
  }
  out->readback_ms = MsSince(t);
  if (status != VYRE_STATUS_OK) {
    return ApiFail(kEgraphCmd, "vyre_egraph_changed_read", status, s.json, s.gpu);
  }
  const size_t before = canonical->size();
  canonical->resize(s.graph.classes);
  std::iota(canonical->begin() + static_cast<std::ptrdiff_t>(before), canonical->end(),
            static_cast<uint32_t>(before));
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t c = pairs[2 * i], k = pairs[2 * i + 1];
    if (c >= canonical->size() || k >= canonical->size()) {
      return ToolFail(kEgraphCmd, "vyre_egraph_changed_read returned the pair (" +
                                      std::to_string(c) + ", " + std::to_string(k) + ") of " +
                                      std::to_string(canonical->size()) +
                                      " classes. Fix: report this as a bug in vyre-cuda.",
                      s.json);
    }
    (*canonical)[c] = k;
  }
  return kExitOk;
}

// One step: load, append, apply unions and rebuild, read the changes.
int RunStep(EgraphSession* s, StepOutcome* step, std::vector<uint32_t>* canonical) {
  tools::EgraphAppend added;
  std::vector<uint32_t> unions;
  int exit_code = LoadStep(s, step, &added, &unions);
  if (exit_code == kExitOk) exit_code = AppendToImage(added, s, step);
  if (exit_code == kExitOk) exit_code = RebuildImage(unions, s, &step->rebuild);
  if (exit_code == kExitOk) exit_code = ReadChanges(*s, canonical, &step->rebuild);
  step->rows_total = s->graph.rows();
  step->classes_total = s->graph.classes;
  return exit_code;
}

// The canonical classes kept from the changes must be what a full read gives:
// a check of vyre_egraph_changed_read on every run with steps.
int CheckChangesAgainstFullRead(const EgraphSession& s, const std::vector<uint32_t>& canonical) {
  RebuildOutcome full;
  const int exit_code = ReadCanonical(s, &full);
  if (exit_code != kExitOk || full.canonical == canonical) return exit_code;
  uint64_t c = 0;
  while (c < canonical.size() && canonical[c] == full.canonical[c]) ++c;
  return ToolFail(kEgraphCmd,
                  "the classes vyre_egraph_changed_read listed disagree with a full read: class " +
                      std::to_string(c) + " is canonically " + std::to_string(canonical[c]) +
                      " by the changes but " + std::to_string(full.canonical[c]) +
                      " by the read. Fix: report this as a bug in vyre-cuda, with the files.",
                  s.json);
}

// Runs the steps in order; `canonical` holds FILE's canonical classes on entry
// and those of the grown graph on return.
int RunSteps(EgraphSession* s, std::vector<StepOutcome>* steps, std::vector<uint32_t>* canonical) {
  for (StepOutcome& step : *steps) {
    const int exit_code = RunStep(s, &step, canonical);
    if (exit_code != kExitOk) return exit_code;
  }
  return steps->empty() ? kExitOk : CheckChangesAgainstFullRead(*s, *canonical);
}

// Destroys the image and the context. Their errors decide the exit code only
// when nothing failed before (`exit_code`), which they then replace.
int ReleaseDevice(EgraphSession* s, int exit_code) {
  if (s->image.bits != 0) {
    const vyre_status status = vyre_egraph_image_destroy(s->image);
    s->image.bits = 0;
    if (status != VYRE_STATUS_OK && exit_code == kExitOk) {
      exit_code = ApiFail(kEgraphCmd, "vyre_egraph_image_destroy", status, s->json, false);
    }
  }
  if (s->context.bits != 0) {
    const vyre_status status = vyre_context_destroy(s->context);
    s->context.bits = 0;
    if (status != VYRE_STATUS_OK && exit_code == kExitOk) {
      exit_code = ApiFail(kEgraphCmd, "vyre_context_destroy", status, s->json, false);
    }
  }
  return exit_code;
}

// A canonical class outside the graph would write a partition that names no
// e-class of the file.
int CheckCanonical(const EgraphSession& s, const RebuildOutcome& out) {
  for (uint32_t c : out.canonical) {
    if (c >= s.graph.classes) {
      return ToolFail(kEgraphCmd,
                      "the library returned canonical class " + std::to_string(c) + " of " +
                          std::to_string(s.graph.classes) +
                          " classes. Fix: report this as a bug in vyre-cuda.",
                      s.json);
    }
  }
  return kExitOk;
}

// Writes the partition to `path` (nothing when empty).
int WritePartitionFile(const std::string& path, const EgraphSession& s,
                       const RebuildOutcome& out) {
  if (path.empty()) return kExitOk;
  const tools::ToolStatus st = tools::WritePartition(path, s.graph, out.canonical);
  return st.ok() ? kExitOk : ToolFail(kEgraphCmd, st.message, s.json);
}

std::string StepJson(const StepOutcome& step, bool gpu) {
  const vyre_egraph_rebuild_result& r = step.rebuild.result;
  return "{\"delta\": " + Quoted(step.delta) + ", \"unions_file\": " +
         (step.unions_file.empty() ? std::string("null") : Quoted(step.unions_file)) +
         ", \"rows_appended\": " + std::to_string(step.rows_appended) +
         ", \"classes_appended\": " + std::to_string(step.classes_appended) +
         ", \"children_appended\": " + std::to_string(step.children_appended) +
         ", \"ops_appended\": " + std::to_string(step.ops_appended) +
         ", \"e_nodes_total\": " + std::to_string(step.rows_total) +
         ", \"classes_total\": " + std::to_string(step.classes_total) +
         ", \"unions\": " + std::to_string(step.rebuild.unions) +
         ", \"union_merges\": " + std::to_string(r.union_merges) +
         ", \"classes_before\": " + std::to_string(r.classes_before) +
         ", \"classes_after\": " + std::to_string(r.classes_after) +
         ", \"rounds\": " + std::to_string(r.rounds) +
         ", \"full_rounds\": " + std::to_string(r.full_rounds) +
         ", \"merges\": " + std::to_string(r.merges) +
         ", \"changed_classes\": " + std::to_string(r.changed_class_count) +
         ", \"rows_visited\": " + std::to_string(r.rows_visited) +
         ", \"times_ms\": {\"load\": " + Num(step.load_ms) + ", \"append\": " +
         Num(step.append_ms) + ", \"rebuild\": " + Num(step.rebuild.rebuild_ms) +
         ", \"read_changes\": " + Num(step.rebuild.readback_ms) +
         (gpu ? ", \"rebuild_device\": " + Num(r.device_ns / 1e6) : std::string()) + "}}";
}

// The keys before "steps" describe FILE alone (as without --step).
std::string EgraphJson(const EgraphOptions& options, const EgraphSession& s,
                       const RebuildOutcome& out, const std::vector<StepOutcome>& steps) {
  const GraphCounts& g = s.base;
  const vyre_egraph_rebuild_result& r = out.result;
  std::string steps_json;
  for (size_t i = 0; i < steps.size(); ++i) {
    steps_json += (i ? ", " : "") + StepJson(steps[i], s.gpu);
  }
  return "{\"command\": \"egraph\", \"file\": " + Quoted(options.file) +
         ", \"device\": " + Quoted(options.device) + ", \"device_name\": " + Quoted(s.device_name) +
         ", \"bytes\": " + std::to_string(g.bytes) + ", \"e_nodes\": " + std::to_string(g.rows) +
         ", \"children\": " + std::to_string(g.children) +
         ", \"ops\": " + std::to_string(g.ops) +
         ", \"classes\": " + std::to_string(g.classes) +
         ", \"unions\": " + std::to_string(out.unions) +
         ", \"union_merges\": " + std::to_string(r.union_merges) +
         ", \"classes_before\": " + std::to_string(r.classes_before) +
         ", \"classes_after\": " + std::to_string(r.classes_after) +
         ", \"rounds\": " + std::to_string(r.rounds) + ", \"merges\": " + std::to_string(r.merges) +
         ", \"rows_visited\": " + std::to_string(r.rows_visited) +
         ", \"times_ms\": {\"load\": " + Num(s.load_ms) + ", \"upload\": " + Num(s.upload_ms) +
         ", \"rebuild\": " + Num(out.rebuild_ms) + ", \"read_back\": " + Num(out.readback_ms) +
         (s.gpu ? ", \"rebuild_device\": " + Num(r.device_ns / 1e6) : std::string()) +
         "}, \"steps\": [" + steps_json + "], \"partition_out\": " +
         (options.partition_out.empty() ? std::string("null") : Quoted(options.partition_out)) +
         "}";
}

void PrintEgraphText(const EgraphOptions& options, const EgraphSession& s,
                     const RebuildOutcome& out) {
  const GraphCounts& g = s.base;
  const vyre_egraph_rebuild_result& r = out.result;
  std::printf("e-graph:          %s (%.1f MiB)\n", options.file.c_str(), g.bytes / 1048576.0);
  std::printf("device:           %s (%s)\n", options.device.c_str(), s.device_name.c_str());
  std::printf("e-nodes:          %" PRIu64 " (%" PRIu64 " children, %" PRIu64 " ops)\n", g.rows,
              g.children, g.ops);
  std::printf("classes:          %" PRIu64 "\n", g.classes);
  std::printf("unions:           %zu (%" PRIu64 " merged classes)\n", out.unions,
              static_cast<uint64_t>(r.union_merges));
  std::printf("classes before:   %" PRIu64 "\n", static_cast<uint64_t>(r.classes_before));
  std::printf("classes after:    %" PRIu64 "\n", static_cast<uint64_t>(r.classes_after));
  std::printf("rounds:           %u\n", r.rounds);
  std::printf("merges:           %" PRIu64 " (congruence)\n", static_cast<uint64_t>(r.merges));
  std::printf("rows visited:     %" PRIu64 "\n", static_cast<uint64_t>(r.rows_visited));
  std::printf("time load:        %10.3f ms\n", s.load_ms);
  std::printf("time upload:      %10.3f ms\n", s.upload_ms);
  std::printf("time rebuild:     %10.3f ms", out.rebuild_ms);
  if (s.gpu) std::printf("  (device %.3f ms)", r.device_ns / 1e6);
  std::printf("\n");
  std::printf("time read-back:   %10.3f ms\n", out.readback_ms);
}

// One step's block: the same labels as FILE's, indented under "step N:".
void PrintStepText(size_t index, const StepOutcome& step, bool gpu) {
  const vyre_egraph_rebuild_result& r = step.rebuild.result;
  const std::string label = "step " + std::to_string(index + 1) + ":";
  std::printf("%-18s%s%s%s\n", label.c_str(), step.delta.c_str(),
              step.unions_file.empty() ? "" : ", unions ", step.unions_file.c_str());
  std::printf("  appended:       %" PRIu64 " e-nodes, %" PRIu64 " classes (%" PRIu64
              " children, %" PRIu64 " new ops)\n",
              step.rows_appended, step.classes_appended, step.children_appended,
              step.ops_appended);
  std::printf("  e-graph now:    %" PRIu64 " e-nodes, %" PRIu64 " classes\n", step.rows_total,
              step.classes_total);
  std::printf("  unions:         %zu (%" PRIu64 " merged classes)\n", step.rebuild.unions,
              static_cast<uint64_t>(r.union_merges));
  std::printf("  classes before: %" PRIu64 "\n", static_cast<uint64_t>(r.classes_before));
  std::printf("  classes after:  %" PRIu64 "\n", static_cast<uint64_t>(r.classes_after));
  std::printf("  rounds:         %u (%u full)\n", r.rounds, r.full_rounds);
  std::printf("  merges:         %" PRIu64 " (congruence)\n", static_cast<uint64_t>(r.merges));
  std::printf("  changed:        %" PRIu64 " classes\n",
              static_cast<uint64_t>(r.changed_class_count));
  std::printf("  rows visited:   %" PRIu64 "\n", static_cast<uint64_t>(r.rows_visited));
  std::printf("  time load:      %10.3f ms\n", step.load_ms);
  std::printf("  time append:    %10.3f ms\n", step.append_ms);
  std::printf("  time rebuild:   %10.3f ms", step.rebuild.rebuild_ms);
  if (gpu) std::printf("  (device %.3f ms)", r.device_ns / 1e6);
  std::printf("\n");
  std::printf("  time changes:   %10.3f ms\n", step.rebuild.readback_ms);
}

// Reports the run: one JSON object on stdout with --json, else text.
void ReportEgraph(const EgraphOptions& options, const EgraphSession& s, const RebuildOutcome& out,
                  const std::vector<StepOutcome>& steps) {
  if (s.json) {
    std::printf("%s\n", EgraphJson(options, s, out, steps).c_str());
    return;
  }
  PrintEgraphText(options, s, out);
  for (size_t i = 0; i < steps.size(); ++i) PrintStepText(i, steps[i], s.gpu);
  if (!options.partition_out.empty()) {
    std::printf("partition:        %s\n", options.partition_out.c_str());
  }
}

}  // namespace

int RunEgraph(const EgraphOptions& options) {
  EgraphSession session(options);
  std::vector<uint32_t> unions;
  RebuildOutcome outcome;
  std::vector<StepOutcome> steps;
  int exit_code = ParseSteps(options, &steps);
  if (exit_code == kExitOk) exit_code = OpenDevice(&session);
  if (exit_code == kExitOk) exit_code = LoadGraph(options.file, &session);
  if (exit_code == kExitOk) exit_code = ReadUnions(options.unions_file, session, &unions);
  if (exit_code == kExitOk) exit_code = BuildImage(&session);
  if (exit_code == kExitOk) exit_code = ApplyUnionsAndRebuild(unions, &session, &outcome);
  if (exit_code == kExitOk) exit_code = RunSteps(&session, &steps, &outcome.canonical);
  // Released before any output, so that a destroy error is the command's error.
  exit_code = ReleaseDevice(&session, exit_code);
  if (exit_code == kExitOk) exit_code = CheckCanonical(session, outcome);
  if (exit_code == kExitOk) exit_code = WritePartitionFile(options.partition_out, session, outcome);
  if (exit_code == kExitOk) ReportEgraph(options, session, outcome, steps);
  return exit_code;
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

constexpr char kBenchCmd[] = "egraph-bench";

// The synthetic e-graph and what its rebuilds gave: everything the report
// prints.
struct BenchCases {
  tools::SyntheticEgraph graph;
  double generate_ms = 0;
  // "gpu" (when there is a GPU), "cpu-1" (unless skipped), "cpu-all".
  std::vector<BenchRun> runs;
  // Why there is no GPU run.
  std::string gpu_note;
  // The first run that disagrees with the first run; empty when all agree.
  std::string mismatch;
};

// The limits of the image format, checked before generating anything.
int CheckBenchOptions(const EgraphBenchOptions& options) {
  if (options.rows > UINT32_MAX) {
    return ToolFail(kBenchCmd,
                    "--rows " + std::to_string(options.rows) +
                        " is too large: e-graph images hold at most 2^32 - 1 rows. Fix: pass a "
                        "smaller --rows.",
                    options.json);
  }
  if (options.arity > 64) {
    return ToolFail(kBenchCmd, "--arity " + std::to_string(options.arity) +
                                   " is too large. Fix: pass an arity of at most 64 (2 is the "
                                   "math benchmark's).",
                    options.json);
  }
  return kExitOk;
}

int GenerateGraph(const EgraphBenchOptions& options, BenchCases* cases) {
  const Clock::time_point t = Clock::now();
  cases->graph = tools::GenerateSynthetic(options.rows, options.arity, options.seed);
  cases->generate_ms = MsSince(t);
  if (cases->graph.rows() == options.rows) return kExitOk;
  return ToolFail(kBenchCmd, "--rows " + std::to_string(options.rows) + " with --arity " +
                                 std::to_string(options.arity) +
                                 " needs more than 2^32 - 1 children. Fix: pass fewer rows.",
                  options.json);
}

// A context that cannot be created for want of a usable GPU only leaves out
// the GPU run (with a note); any other failure is the command's error.
int NoteNoGpu(vyre_status status, bool json, BenchCases* cases) {
  // Read before the status is judged: the note quotes the library's message.
  const LastError e = ReadLastError();
  if (!IsNoGpu(status)) return ApiFail(kBenchCmd, "vyre_context_create", status, json, false);
  cases->gpu_note = std::string("no GPU run: ") + vyre_status_name(status) + ": " + e.message;
  if (!json) std::fprintf(stderr, "vyre-cuda %s: %s\n", kBenchCmd, cases->gpu_note.c_str());
  return kExitOk;
}

// The GPU run, when there is a GPU: one untimed warm-up, then `repeat` rebuilds.
int TimeGpu(const EgraphBenchOptions& options, BenchCases* cases) {
  vyre_context context = {0};
  vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
  const vyre_status s = vyre_context_create(&cdesc, &context);
  if (s != VYRE_STATUS_OK) return NoteNoGpu(s, options.json, cases);
  BenchRun run;
  run.name = "gpu";
  run.device_name = DeviceName(context);
  const char* call = "";
  const vyre_status r = RunOne(cases->graph, VYRE_EGRAPH_DEVICE_GPU, context, 0, options.repeat,
                               /*warm_up=*/true, &run, &call);
  int exit_code = kExitOk;
  if (r != VYRE_STATUS_OK) exit_code = ApiFail(kBenchCmd, call, r, options.json, false);
  vyre_context_destroy(context);
  if (exit_code == kExitOk) cases->runs.push_back(std::move(run));
  return exit_code;
}

// The CPU reference's run on one thread, or on `cpu_threads` (0 = every core).
BenchRun CpuRun(bool one_thread, uint32_t cpu_threads) {
  BenchRun run;
  run.name = one_thread ? "cpu-1" : "cpu-all";
  run.threads = one_thread ? 1 : cpu_threads;
  if (one_thread) {
    run.device_name = "CPU reference, 1 thread";
  } else if (cpu_threads == 0) {
    run.device_name = "CPU reference, every core";
  } else {
    run.device_name = "CPU reference, " + std::to_string(cpu_threads) + " threads";
  }
  return run;
}

// The CPU reference: one thread (unless skipped), then every core.
int TimeCpu(const EgraphBenchOptions& options, BenchCases* cases) {
  for (const bool one_thread : {true, false}) {
    if (one_thread && options.skip_single_thread) continue;
    BenchRun run = CpuRun(one_thread, options.cpu_threads);
    const char* call = "";
    const vyre_status r = RunOne(cases->graph, VYRE_EGRAPH_DEVICE_CPU, vyre_context{0},
                                 run.threads, options.repeat, /*warm_up=*/false, &run, &call);
    if (r != VYRE_STATUS_OK) return ApiFail(kBenchCmd, call, r, options.json, false);
    cases->runs.push_back(std::move(run));
  }
  return kExitOk;
}

// Every run must give the same partition: the first run that does not, and
// the first class where it differs; empty when all agree.
std::string FirstMismatch(const std::vector<BenchRun>& runs, uint64_t classes) {
  for (size_t i = 1; i < runs.size(); ++i) {
    const std::vector<uint32_t>& mine = runs[i].canonical;
    const std::vector<uint32_t>& first_run = runs[0].canonical;
    if (mine == first_run) continue;
    uint64_t first = 0;
    while (first < classes && mine[first] == first_run[first]) ++first;
    return runs[i].name + " and " + runs[0].name + " disagree: class " + std::to_string(first) +
           " is canonically " + std::to_string(mine[first]) + " vs " +
           std::to_string(first_run[first]);
  }
  return std::string();
}

const BenchRun* FindRun(const std::vector<BenchRun>& runs, const char* name) {
  for (const BenchRun& r : runs) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

// The GPU's rebuild speedup over a CPU run; 0 when either is missing.
double Speedup(const BenchRun* gpu, const BenchRun* cpu) {
  return gpu && cpu && gpu->rebuild_ms > 0 ? cpu->rebuild_ms / gpu->rebuild_ms : 0.0;
}

std::string BenchJson(const EgraphBenchOptions& options, const BenchCases& c) {
  const tools::SyntheticEgraph& g = c.graph;
  const BenchRun& first = c.runs.front();
  const BenchRun* gpu = FindRun(c.runs, "gpu");
  const BenchRun* cpu1 = FindRun(c.runs, "cpu-1");
  const BenchRun* cpuall = FindRun(c.runs, "cpu-all");
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
                    ", \"generate_ms\": " + Num(c.generate_ms) + ", \"runs\": [";
  for (size_t i = 0; i < c.runs.size(); ++i) out += (i ? ", " : "") + RunJson(c.runs[i]);
  out += "]";
  if (gpu) {
    out += ", \"speedup_vs_cpu_1\": " + (cpu1 ? Num(Speedup(gpu, cpu1)) : std::string("null")) +
           ", \"speedup_vs_cpu_all\": " +
           (cpuall ? Num(Speedup(gpu, cpuall)) : std::string("null"));
  } else {
    out += ", \"gpu\": " + Quoted(c.gpu_note);
  }
  out += ", \"partitions_equal\": " + std::string(c.mismatch.empty() ? "true" : "false");
  if (!c.mismatch.empty()) out += ", \"error\": {\"message\": " + Quoted(c.mismatch) + "}";
  return out + "}";
}

void PrintBenchText(const EgraphBenchOptions& options, const BenchCases& c) {
  const tools::SyntheticEgraph& g = c.graph;
  const BenchRun& first = c.runs.front();
  std::printf("synthetic e-graph: %" PRIu64 " rows, arity <= %u, seed %" PRIu64
              ", depth %u, %zu children (generated in %.1f ms)\n",
              g.rows(), options.arity, options.seed, g.depth, g.children.size(), c.generate_ms);
  std::printf("classes before:    %" PRIu64 "\n", g.classes);
  std::printf("classes after:     %" PRIu64 "\n",
              static_cast<uint64_t>(first.result.classes_after));
  std::printf("rounds:            %u\n", first.result.rounds);
  std::printf("merges:            %" PRIu64 "\n", static_cast<uint64_t>(first.result.merges));
  std::printf("%-10s %-34s %7s %12s %12s %12s %12s\n", "run", "device", "rounds", "upload ms",
              "rebuild ms", "device ms", "read-back ms");
  for (const BenchRun& r : c.runs) {
    std::printf("%-10s %-34s %7u %12.3f %12.3f ", r.name.c_str(), r.device_name.c_str(),
                r.result.rounds, r.upload_ms, r.rebuild_ms);
    if (r.name == "gpu") {
      std::printf("%12.3f", r.device_ms);
    } else {
      std::printf("%12s", "-");
    }
    std::printf(" %12.3f\n", r.readback_ms);
  }
  const BenchRun* gpu = FindRun(c.runs, "gpu");
  const BenchRun* cpu1 = FindRun(c.runs, "cpu-1");
  const BenchRun* cpuall = FindRun(c.runs, "cpu-all");
  if (gpu && cpu1) std::printf("GPU speedup vs CPU, 1 thread:   %.1fx\n", Speedup(gpu, cpu1));
  if (gpu && cpuall) std::printf("GPU speedup vs CPU, all cores:  %.1fx\n", Speedup(gpu, cpuall));
  std::printf("rebuild times: median of %u (GPU after one warm-up)\n", options.repeat);
  if (c.mismatch.empty()) std::printf("partitions: equal on every run\n");
}

// Prints the report (JSON or text); a disagreement between runs is exit 1.
int ReportBench(const EgraphBenchOptions& options, const BenchCases& c) {
  if (options.json) {
    std::printf("%s\n", BenchJson(options, c).c_str());
  } else {
    PrintBenchText(options, c);
  }
  if (c.mismatch.empty()) return kExitOk;
  std::fprintf(stderr,
               "vyre-cuda %s: the rebuilds disagree: %s. Fix: report this as a bug in "
               "vyre-cuda, with --rows %" PRIu64 " --arity %u --seed %" PRIu64 ".\n",
               kBenchCmd, c.mismatch.c_str(), options.rows, options.arity, options.seed);
  return kExitError;
}

}  // namespace

int RunEgraphBench(const EgraphBenchOptions& options) {
  BenchCases cases;
  int exit_code = CheckBenchOptions(options);
  if (exit_code == kExitOk) exit_code = GenerateGraph(options, &cases);
  if (exit_code == kExitOk) exit_code = TimeGpu(options, &cases);
  if (exit_code == kExitOk) exit_code = TimeCpu(options, &cases);
  if (exit_code != kExitOk) return exit_code;
  cases.mismatch = FirstMismatch(cases.runs, cases.graph.classes);
  return ReportBench(options, cases);
}

}  // namespace vyre::cli
