// vyre_egraph_bench: e-graph congruence on the GPU against the library's CPU
// reference (one thread, and every core), through the public C API only.
//
// Cases: synthetic e-graphs of --sizes M rows, M = 2^20 (tools/egraph
// GenerateSynthetic, arity <= --max-arity, every e-node its own class), then
// the --graphs largest files (by bytes) of $VYRE_EGRAPHS_DIR (default
// ../shared/egraphs, else .deps/egraphs), each loaded twice: with every e-node
// in its own class, and with the file's classes plus --unions random unions
// that every rebuild applies first. Each case is generated or loaded once; then, one
// image at a time (GPU, CPU on every core, CPU on one thread):
//   pass      vyre_egraph_pass(image, NULL, 0, &count) on the fresh image
//             (every class alone): the pair count only, no pair copy-out.
//             Host wall clock per call (it ends synchronised); GPU: 3 warm-up
//             calls, then the median of >= 10 (about --gpu-seconds).
//   round 1   GPU only: vyre_egraph_rebuild with RESET | DEVICE_TIMING and
//             max_rounds 1, i.e. the first round of a rebuild (every row
//             visited, then merged): median device_ns.
//   rebuild   vyre_egraph_rebuild with RESET | DEVICE_TIMING to the fixpoint:
//             median device_ns and host wall clock. GPU: 1 warm-up, then the
//             median of >= 5. CPU: no warm-up, 1 to 3 runs (up to 21 for runs
//             under 50 ms; a repeat only while all of them fit in half of
//             --cpu-seconds); a CPU pass: up to 5 (21) in a quarter of it. A
//             CPU run whose estimate (seconds per row of the previous case,
//             times the rows) exceeds --cpu-seconds (a quarter of it for the
//             pass) is skipped and its estimate is shown instead (marked
//             "est."), except the every-core rebuild, which always runs once:
//             it is the answer the GPU is checked against.
// Checks (exit 1 on any mismatch, after printing the report): the canonical
// class of every class (VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES after the last
// rebuild) is identical on the GPU and on the CPU (and on one thread and every
// core); the pass's sorted pair lists are identical on the GPU and the CPU.
//
// Floor of one pass: the bytes it reads once, rows x 5 columns x 4 B (class,
// op, child offset, child length, signature) + child refs x 4 B x 2 (children
// and their canonical classes) + classes x 4 B (union-find), over the HBM
// bandwidth (--hbm-tbps, default 3.35 TB/s: H100 SXM HBM3).
//
// Issue 20's cases (egraph_bench_growing.cc), on the largest of --sizes, which
// is generated first: the process's first vyre_egraph_image_create is timed on
// it before any other e-graph call; after the cases above, image creation
// against vyre_buffer_upload (pageable and pinned), one union on a closed
// image, and a saturation loop of appends, unions and incremental rebuilds
// (against re-created images and the CPU reference). Their sections follow the
// report's notes, after the full 16 M rebuild against issue 20's 10.2 ms.
//
// Usage: vyre_egraph_bench [--sizes 1,4,16] [--graphs 3] [--max-arity 2]
//                          [--seed 1] [--cpu-seconds 60] [--gpu-seconds 0.5]
//                          [--hbm-tbps 3.35] [--no-gpu] [--skip-create]
//                          [--skip-one-union] [--skip-loop] [--create-reps 5]
//                          [--union-reps 11] [--loop-steps 10]
//                          [--loop-percent 1] [--loop-unions 1000]
// Without a driver or a GPU the GPU columns read "unavailable" and the CPU
// columns are still measured. The markdown report is printed last and, if
// VYRE_BENCH_OUT names a file, written there too.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "egraph/egraph_columns.h"
#include "egraph/json_loader.h"
#include "egraph/synthetic.h"
#include "egraph_bench_common.h"
#include "vyre_cuda.h"

using namespace egraph_bench;  // NOLINT(build/namespaces): the bench's own helpers

namespace {

// A synthetic "M" is 2^20 rows: the generator's depth (and so the rounds a
// rebuild needs) steps at powers of 2, and 16 x 2^20 rows need 9 rounds, like
// the CuPy figure's 16 M-row graph.
constexpr double kMillion = 1 << 20;
constexpr int kGpuPassWarmup = 3;
constexpr int kGpuRebuildWarmup = 1;
constexpr size_t kGpuMinPassReps = 10;
constexpr size_t kGpuMinRebuildReps = 5;
constexpr size_t kGpuMaxReps = 200;
constexpr size_t kCpuMaxPassReps = 5;
constexpr size_t kCpuMaxRebuildReps = 3;
// CPU runs shorter than this repeat up to kCpuMaxQuickReps times instead.
constexpr double kCpuQuickSeconds = 0.05;
constexpr size_t kCpuMaxQuickReps = 21;
// The CuPy sort-based script of DESIGN.md section 5 on the H100 (its own
// synthetic graph, arity <= 2, every e-node its own class; 9 rounds at 16 M).
struct CupyFigure {
  double million_rows;
  double ms;
};
constexpr CupyFigure kCupy[] = {{1, 25}, {4, 36}, {16, 108}};
// Targets (H100): a pass over 16 M rows within 10x of its floor; a 16 M-row
// rebuild >= 100x the one-thread CPU reference and under 100 ms; the brief's
// bar: <= 15 ms (aim 5 ms) against CuPy's 108 ms.
constexpr double kTargetPassFloorRatio = 10;
constexpr double kTargetSpeedupOneThread = 100;
constexpr double kTargetRebuildMs = 100;
constexpr double kBarRebuildMs = 15;
constexpr double kAimRebuildMs = 5;
// Issue 20's target for the full 16 M-row rebuild (and its aim).
constexpr double kIssue20RebuildMs = 10.2;

// --- Options ------------------------------------------------------------------

[[noreturn]] void Usage(const char* problem) {
  std::fprintf(stderr,
               "vyre_egraph_bench: %s\n"
               "usage: vyre_egraph_bench [--sizes 1,4,16] [--graphs N] [--max-arity A] "
               "[--unions U] [--seed S] [--cpu-seconds T] [--gpu-seconds T] [--hbm-tbps B] "
               "[--no-gpu] [--skip-create] [--skip-one-union] [--skip-loop] [--create-reps N] "
               "[--union-reps N] [--loop-steps N] [--loop-percent P] [--loop-unions U]\n"
               "  --sizes        synthetic cases in M = 2^20 rows (comma-separated, fractions "
               "allowed; '' or 0 for none)\n"
               "  --graphs       how many of the largest $VYRE_EGRAPHS_DIR/**/*.json to run "
               "(default 3)\n"
               "  --max-arity    synthetic children per row at most (default 2)\n"
               "  --unions       also run each file with its own classes and U random unions "
               "(default 50; 0: not)\n"
               "  --seed         synthetic generator and union seed (default 1)\n"
               "  --cpu-seconds  most seconds one CPU configuration spends on one case's "
               "rebuilds (default 60)\n"
               "  --gpu-seconds  about how long each GPU measurement repeats (default 0.5)\n"
               "  --hbm-tbps     HBM bandwidth for the floor, TB/s (default 3.35, H100 SXM)\n"
               "  --no-gpu       CPU reference only\n"
               "Issue 20's cases, on the largest of --sizes:\n"
               "  --skip-create     no image creation vs upload case\n"
               "  --skip-one-union  no one-union rebuild on the closed image\n"
               "  --skip-loop       no saturation loop\n"
               "  --create-reps     creates (and uploads) per kind of memory after 1 warm-up "
               "(default 5)\n"
               "  --union-reps      one-union rebuilds after 1 warm-up (default 11)\n"
               "  --loop-steps      saturation loop steps (default 10)\n"
               "  --loop-percent    rows each step appends, percent of the graph's rows "
               "(default 1)\n"
               "  --loop-unions     random unions each step (default 1000)\n",
               problem);
  std::exit(2);
}

double ParseDouble(const std::string& text, const char* option) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(value) || value < 0) {
    Usage((std::string("bad value for ") + option + ": '" + text + "'").c_str());
  }
  return value;
}

// Issue 20's options; false for a name that is not one of them.
template <typename Value>
bool ParseGrowingOption(const std::string& name, Value& value, Options* options) {
  auto count = [&](const char* option) {
    return static_cast<size_t>(ParseDouble(value(), option));
  };
  if (name == "--skip-create") {
    options->skip_create = true;
  } else if (name == "--skip-one-union") {
    options->skip_one_union = true;
  } else if (name == "--skip-loop") {
    options->skip_loop = true;
  } else if (name == "--create-reps") {
    options->create_reps = std::max<size_t>(count("--create-reps"), 1);
  } else if (name == "--union-reps") {
    options->union_reps = std::max<size_t>(count("--union-reps"), 1);
  } else if (name == "--loop-steps") {
    options->loop_steps = count("--loop-steps");
  } else if (name == "--loop-percent") {
    options->loop_percent = ParseDouble(value(), "--loop-percent");
  } else if (name == "--loop-unions") {
    options->loop_unions = count("--loop-unions");
  } else {
    return false;
  }
  return true;
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      const size_t equals = arg.find('=');
      if (equals != std::string::npos) return arg.substr(equals + 1);
      if (i + 1 >= argc) Usage((arg + " needs a value").c_str());
      return argv[++i];
    };
    const std::string name = arg.substr(0, arg.find('='));
    if (name == "--sizes") {
      options.sizes_millions.clear();
      const std::string list = value();
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, comma - start);
        if (!item.empty()) {
          const double millions = ParseDouble(item, "--sizes");
          if (millions > 0) options.sizes_millions.push_back(millions);
        }
        start = comma + 1;
      }
    } else if (name == "--graphs") {
      options.graphs = static_cast<size_t>(ParseDouble(value(), "--graphs"));
    } else if (name == "--max-arity") {
      options.max_arity = static_cast<uint32_t>(ParseDouble(value(), "--max-arity"));
    } else if (name == "--seed") {
      options.seed = std::strtoull(value().c_str(), nullptr, 0);
    } else if (name == "--cpu-seconds") {
      options.cpu_seconds = ParseDouble(value(), "--cpu-seconds");
    } else if (name == "--gpu-seconds") {
      options.gpu_seconds = ParseDouble(value(), "--gpu-seconds");
    } else if (name == "--hbm-tbps") {
      options.hbm_tbps = ParseDouble(value(), "--hbm-tbps");
      if (options.hbm_tbps <= 0) Usage("--hbm-tbps must be positive");
    } else if (name == "--unions") {
      options.unions = static_cast<uint64_t>(ParseDouble(value(), "--unions"));
    } else if (name == "--no-gpu") {
      options.gpu = false;
    } else if (!ParseGrowingOption(name, value, &options)) {
      if (name == "--help" || name == "-h") Usage("help");
      Usage(("unknown option " + arg).c_str());
    }
  }
  return options;
}

// --- Measurement --------------------------------------------------------------

// One measured quantity: a median over `reps` runs, an estimate in place of a
// skipped run, or nothing.
struct Figure {
  bool measured = false;
  bool estimated = false;
  double seconds = 0;
  size_t reps = 0;
  bool has() const { return measured || estimated; }
};

Figure Measured(const std::vector<double>& samples) {
  Figure figure;
  if (samples.empty()) return figure;
  figure.measured = true;
  figure.seconds = Median(samples);
  figure.reps = samples.size();
  return figure;
}

Figure Estimated(double seconds) {
  Figure figure;
  figure.estimated = true;
  figure.seconds = seconds;
  return figure;
}

// --- E-graphs -----------------------------------------------------------------

Graph Synthetic(uint64_t rows, uint32_t max_arity, uint64_t seed, uint32_t* depth) {
  vyre::tools::SyntheticEgraph synthetic = vyre::tools::GenerateSynthetic(rows, max_arity, seed);
  *depth = synthetic.depth;
  Graph g;
  g.columns = std::move(static_cast<vyre::tools::EgraphColumns&>(synthetic));
  return g;
}

// own_classes: every e-node in its own class (congruence has to re-join the
// duplicated e-nodes). Otherwise the file's own classes, and `unions` random
// pairs of distinct classes (seeded) for every rebuild to union first, as a
// rewrite step would; congruence then re-closes the graph.
Graph LoadJsonGraph(const std::string& path, bool own_classes, uint64_t unions, uint64_t seed) {
  vyre::tools::LoadOptions options;
  options.own_class_per_node = own_classes;
  vyre::tools::LoadedEgraph loaded;
  const vyre::tools::ToolStatus status = vyre::tools::LoadEgraphJsonFile(path, options, &loaded);
  if (!status.ok()) Die(status.message);
  Graph g;
  g.columns = std::move(static_cast<vyre::tools::EgraphColumns&>(loaded));
  const uint64_t classes = g.columns.classes;
  uint64_t state = seed;
  for (uint64_t i = 0; i < unions && classes >= 2; ++i) {
    const uint32_t a = static_cast<uint32_t>(SplitMix64(&state) % classes);
    uint32_t b = static_cast<uint32_t>(SplitMix64(&state) % (classes - 1));
    if (b >= a) ++b;
    g.unions.push_back(a);
    g.unions.push_back(b);
  }
  return g;
}

// Bytes one pass reads once (see the file comment).
double FloorBytes(const Graph& g) {
  return static_cast<double>(g.rows()) * 5 * 4 +
         static_cast<double>(g.columns.children.size()) * 4 * 2 +
         static_cast<double>(g.columns.classes) * 4;
}

// --- Runs on one image --------------------------------------------------------

enum class Engine { kGpu, kCpuAll, kCpuOne };

const char* EngineName(Engine engine) {
  switch (engine) {
    case Engine::kGpu:
      return "GPU";
    case Engine::kCpuAll:
      return "CPU, every core";
    case Engine::kCpuOne:
      return "CPU, one thread";
  }
  return "?";
}

struct Run {
  bool ran = false;
  std::string why_not;  // when !ran
  double create_seconds = 0;
  uint64_t image_bytes = 0;
  Figure pass;                  // host wall per count-only pass
  uint64_t pass_pairs = 0;      // pairs the pass found
  std::vector<uint32_t> pairs;  // the pass's sorted pair list (GPU, CPU every core)
  Figure pass_merged;           // GPU: a pass after the rebuild (union-find merged, flat)
  Figure round1_device;         // GPU: first round's device time
  Figure rebuild_device;        // GPU: device_ns
  Figure rebuild_wall;          // host wall
  // GPU: the same rebuilds with VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS (issue 23),
  // interleaved with host-driven ones, and whether both agreed.
  Figure rounds_host_wall, rounds_device_wall;
  bool rounds_agree = true;
  bool have_result = false;
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  std::vector<uint32_t> canonical;
};

// Seconds per row of the last case that ran, per engine, for the estimates.
struct CpuHistory {
  double pass_per_row = 0;
  double rebuild_per_row = 0;
};

struct RunPlan {
  Engine engine;
  vyre_context context{};
  double gpu_seconds = 0;
  double cpu_seconds = 0;
  bool keep_pairs = false;        // read the pass's pair list for the check
  bool must_rebuild = false;      // run the rebuild once whatever the estimate
  CpuHistory* history = nullptr;  // CPU engines
};

vyre_egraph_rebuild_result TimedRebuild(vyre_egraph_image image, const Graph& g,
                                        uint32_t max_rounds, double* wall_seconds,
                                        uint32_t extra_flags = 0) {
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.flags = VYRE_EGRAPH_REBUILD_RESET | VYRE_EGRAPH_REBUILD_DEVICE_TIMING | extra_flags;
  desc.max_rounds = max_rounds;
  desc.unions = g.unions.empty() ? nullptr : g.unions.data();
  desc.union_count = g.unions.size() / 2;
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  const Clock::time_point start = Clock::now();
  VYRE_CHECK(vyre_egraph_rebuild(image, &desc, &result));
  *wall_seconds = SecondsSince(start);
  return result;
}

double TimedPass(vyre_egraph_image image, uint64_t* pairs) {
  const Clock::time_point start = Clock::now();
  VYRE_CHECK(vyre_egraph_pass(image, nullptr, 0, pairs));
  return SecondsSince(start);
}

// Repetitions for a GPU measurement whose one call took `seconds`.
size_t GpuReps(double seconds, double target_seconds, size_t minimum) {
  const double fit = target_seconds / std::max(seconds, 1e-6);
  return std::clamp(static_cast<size_t>(fit), minimum, kGpuMaxReps);
}

Run RunEngine(const Graph& g, const RunPlan& plan) {
  Run run;
  const bool gpu = plan.engine == Engine::kGpu;
  vyre_egraph_image_desc desc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  desc.device = gpu ? VYRE_EGRAPH_DEVICE_GPU : VYRE_EGRAPH_DEVICE_CPU;
  if (gpu) desc.context = plan.context;
  desc.row_count = g.rows();
  desc.class_count = g.columns.classes;
  desc.child_count = g.columns.children.size();
  desc.row_classes = g.columns.row_classes.data();
  desc.row_ops = g.columns.row_ops.data();
  desc.child_offsets = g.columns.child_offsets.data();
  desc.child_lengths = g.columns.child_lengths.data();
  desc.children = g.columns.children.data();
  desc.cpu_threads = plan.engine == Engine::kCpuOne ? 1 : 0;

  vyre_egraph_image image = {};
  const Clock::time_point create_start = Clock::now();
  VYRE_CHECK(vyre_egraph_image_create(&desc, &image));
  run.create_seconds = SecondsSince(create_start);
  run.ran = true;
  vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  VYRE_CHECK(vyre_egraph_image_info_get(image, &info));
  run.image_bytes = info.bytes;
  const double rows = static_cast<double>(g.rows());

  // Pass, on the fresh image (every class alone).
  if (gpu) {
    for (int i = 0; i < kGpuPassWarmup; ++i) TimedPass(image, &run.pass_pairs);
    const double once = TimedPass(image, &run.pass_pairs);
    std::vector<double> samples;
    const size_t reps = GpuReps(once, plan.gpu_seconds, kGpuMinPassReps);
    for (size_t i = 0; i < reps; ++i) samples.push_back(TimedPass(image, &run.pass_pairs));
    run.pass = Measured(samples);
  } else {
    const double estimate = plan.history->pass_per_row * rows;
    const double budget = plan.cpu_seconds * 0.25;
    if (estimate > budget && !plan.keep_pairs) {
      run.pass = Estimated(estimate);
    } else {
      std::vector<double> samples;
      double spent = 0;
      do {
        samples.push_back(TimedPass(image, &run.pass_pairs));
        spent += samples.back();
      } while (samples.size() <
                   (samples[0] < kCpuQuickSeconds ? kCpuMaxQuickReps : kCpuMaxPassReps) &&
               spent + samples.back() <= budget);
      run.pass = Measured(samples);
      if (rows > 0) plan.history->pass_per_row = run.pass.seconds / rows;
    }
  }
  if (plan.keep_pairs) {
    // Every row adds at most one pair (its class to its group's minimum), so
    // `rows` pairs always fit.
    uint64_t count = 0;
    run.pairs.resize(std::max<uint64_t>(run.pass_pairs, 1) * 2);
    VYRE_CHECK(vyre_egraph_pass(image, run.pairs.data(), run.pairs.size() / 2, &count));
    if (count != run.pass_pairs) {
      Die(std::string(EngineName(plan.engine)) + " pass on " + g.name + ": " +
          std::to_string(count) + " pairs, after " + std::to_string(run.pass_pairs) +
          " on the counting calls");
    }
    run.pairs.resize(count * 2);
  }

  if (gpu) {
    // The first round alone, on the device clock.
    double wall = 0;
    TimedRebuild(image, g, 1, &wall);
    std::vector<double> samples;
    const size_t reps = GpuReps(wall, plan.gpu_seconds, kGpuMinPassReps);
    for (size_t i = 0; i < reps; ++i) {
      samples.push_back(static_cast<double>(TimedRebuild(image, g, 1, &wall).device_ns) * 1e-9);
    }
    run.round1_device = Measured(samples);

    // Full rebuilds.
    for (int i = 0; i < kGpuRebuildWarmup; ++i) TimedRebuild(image, g, 0, &wall);
    std::vector<double> device_samples, wall_samples;
    run.result = TimedRebuild(image, g, 0, &wall);
    const size_t rebuild_reps = GpuReps(wall, plan.gpu_seconds, kGpuMinRebuildReps);
    for (size_t i = 0; i < rebuild_reps; ++i) {
      run.result = TimedRebuild(image, g, 0, &wall);
      device_samples.push_back(static_cast<double>(run.result.device_ns) * 1e-9);
      wall_samples.push_back(wall);
    }
    run.rebuild_device = Measured(device_samples);
    run.rebuild_wall = Measured(wall_samples);
    run.have_result = true;

    // Rounds on the device against host-driven batches, interleaved.
    {
      std::vector<double> host_walls, device_walls;
      TimedRebuild(image, g, 0, &wall, VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS);
      for (size_t i = 0; i < rebuild_reps; ++i) {
        const vyre_egraph_rebuild_result host = TimedRebuild(image, g, 0, &wall);
        host_walls.push_back(wall);
        const vyre_egraph_rebuild_result device =
            TimedRebuild(image, g, 0, &wall, VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS);
        device_walls.push_back(wall);
        run.rounds_agree = run.rounds_agree && host.rounds == device.rounds &&
                           host.merges == device.merges &&
                           host.classes_after == device.classes_after;
      }
      run.rounds_host_wall = Measured(host_walls);
      run.rounds_device_wall = Measured(device_walls);
    }

    // A pass over the rebuilt image: the groups are whole (no pairs), and
    // every class is read through the merged union-find, where the fresh
    // image's pass needs no union-find load at all.
    uint64_t merged_pairs = 0;
    const double merged_once = TimedPass(image, &merged_pairs);
    samples.clear();
    const size_t merged_reps = GpuReps(merged_once, plan.gpu_seconds, kGpuMinPassReps);
    for (size_t i = 0; i < merged_reps; ++i) samples.push_back(TimedPass(image, &merged_pairs));
    run.pass_merged = Measured(samples);
    if (merged_pairs != 0) {
      Die("GPU pass on " + g.name + " after its rebuild found " + std::to_string(merged_pairs) +
          " pairs; a fixpoint has none");
    }
  } else {
    const double estimate = plan.history->rebuild_per_row * rows;
    if (estimate > plan.cpu_seconds && !plan.must_rebuild) {
      run.rebuild_wall = Estimated(estimate);
    } else {
      std::vector<double> samples;
      double spent = 0;
      do {
        double wall = 0;
        run.result = TimedRebuild(image, g, 0, &wall);
        samples.push_back(wall);
        spent += wall;
      } while (samples.size() <
                   (samples[0] < kCpuQuickSeconds ? kCpuMaxQuickReps : kCpuMaxRebuildReps) &&
               spent + samples.back() <= 0.5 * plan.cpu_seconds);
      run.rebuild_wall = Measured(samples);
      run.have_result = true;
      if (rows > 0) plan.history->rebuild_per_row = run.rebuild_wall.seconds / rows;
    }
  }
  if (run.have_result) {
    run.canonical.resize(g.columns.classes);
    if (g.columns.classes > 0) {
      VYRE_CHECK(vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0,
                                        g.columns.classes, run.canonical.data()));
    }
  }
  VYRE_CHECK(vyre_egraph_image_destroy(image));
  return run;
}

// --- One case -----------------------------------------------------------------

struct CaseResult {
  std::string name;
  double million_rows = 0;
  uint64_t rows = 0, child_refs = 0, classes = 0;
  double prepare_seconds = 0;  // generate or load
  double floor_bytes = 0;
  Run gpu, cpu_all, cpu_one;
  std::vector<std::string> problems;  // check failures
};

void Compare(CaseResult* c, const Run& a, const char* a_name, const Run& b, const char* b_name) {
  if (!a.have_result || !b.have_result) return;
  const int64_t at = FirstDifference(a.canonical, b.canonical);
  if (at >= 0) {
    char line[512];
    const uint32_t av = at < static_cast<int64_t>(a.canonical.size()) ? a.canonical[at] : 0;
    const uint32_t bv = at < static_cast<int64_t>(b.canonical.size()) ? b.canonical[at] : 0;
    std::snprintf(line, sizeof(line),
                  "%s: canonical classes differ, %s vs %s: class %" PRId64 " -> %u vs %u",
                  c->name.c_str(), a_name, b_name, at, av, bv);
    c->problems.push_back(line);
  }
  if (a.result.rounds != b.result.rounds || a.result.merges != b.result.merges ||
      a.result.classes_after != b.result.classes_after) {
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%s: rebuild results differ, %s vs %s: rounds %u vs %u, merges %" PRIu64
                  " vs %" PRIu64 ", classes after %" PRIu64 " vs %" PRIu64,
                  c->name.c_str(), a_name, b_name, a.result.rounds, b.result.rounds,
                  a.result.merges, b.result.merges, a.result.classes_after, b.result.classes_after);
    c->problems.push_back(line);
  }
}

struct Bench {
  Options options;
  bool gpu_available = false;
  std::string gpu_why_not;
  std::string gpu_name;  // vyre_device_info.name
  vyre_context context{};
  CpuHistory cpu_all_history, cpu_one_history;
};

CaseResult RunCase(Bench& bench, const Graph& g, double prepare_seconds) {
  CaseResult c;
  c.name = g.name;
  c.million_rows = g.million_rows;
  c.rows = g.rows();
  c.child_refs = g.columns.children.size();
  c.classes = g.columns.classes;
  c.prepare_seconds = prepare_seconds;
  c.floor_bytes = FloorBytes(g);
  auto progress = [&](const char* what, const Run& run) {
    std::printf("  %-16s create %.3f s, pass %s%.3f ms, rebuild %s%.3f ms%s\n", what,
                run.create_seconds, run.pass.estimated ? "~" : "", run.pass.seconds * 1e3,
                run.rebuild_wall.estimated ? "~" : "", run.rebuild_wall.seconds * 1e3,
                run.rebuild_wall.estimated ? " (estimate, skipped)" : "");
    std::fflush(stdout);
  };
  std::printf("%s: %" PRIu64 " rows, %" PRIu64 " child refs, %" PRIu64
              " classes (%.2f s to "
              "prepare)\n",
              c.name.c_str(), c.rows, c.child_refs, c.classes, prepare_seconds);
  std::fflush(stdout);

  if (bench.gpu_available) {
    RunPlan plan{Engine::kGpu};
    plan.context = bench.context;
    plan.gpu_seconds = bench.options.gpu_seconds;
    plan.keep_pairs = true;
    c.gpu = RunEngine(g, plan);
    progress("GPU", c.gpu);
  } else {
    c.gpu.why_not = bench.gpu_why_not;
  }
  {
    RunPlan plan{Engine::kCpuAll};
    plan.cpu_seconds = bench.options.cpu_seconds;
    plan.keep_pairs = bench.gpu_available;
    plan.must_rebuild = true;
    plan.history = &bench.cpu_all_history;
    c.cpu_all = RunEngine(g, plan);
    progress("CPU every core", c.cpu_all);
  }
  {
    RunPlan plan{Engine::kCpuOne};
    plan.cpu_seconds = bench.options.cpu_seconds;
    plan.history = &bench.cpu_one_history;
    c.cpu_one = RunEngine(g, plan);
    progress("CPU one thread", c.cpu_one);
  }

  Compare(&c, c.gpu, "GPU", c.cpu_all, "CPU every core");
  Compare(&c, c.cpu_one, "CPU one thread", c.cpu_all, "CPU every core");
  if (c.gpu.ran && c.cpu_all.ran && c.gpu.pairs != c.cpu_all.pairs) {
    c.problems.push_back(c.name + ": pass pairs differ, GPU " +
                         std::to_string(c.gpu.pairs.size() / 2) + " vs CPU " +
                         std::to_string(c.cpu_all.pairs.size() / 2));
  }
  for (const std::string& problem : c.problems) std::printf("  MISMATCH %s\n", problem.c_str());
  return c;
}

// --- Report -------------------------------------------------------------------

std::string Rate(double per_second) {
  if (per_second >= 1e9) return Format("%.2f G/s", per_second / 1e9);
  if (per_second >= 1e6) return Format("%.1f M/s", per_second / 1e6);
  return Format("%.0f k/s", per_second / 1e3);
}

// "1.23 ms" or "~1.2 s (est.)"; `unavailable` when there is no figure.
// with_runs: "1.23 ms (3 runs)".
std::string Time(const Figure& f, const char* unavailable, bool with_runs = false) {
  if (f.measured && with_runs) {
    return Duration(f.seconds) + Format(" (%zu run%s)", f.reps, f.reps == 1 ? "" : "s");
  }
  if (f.measured) return Duration(f.seconds);
  if (f.estimated) return "~" + Duration(f.seconds) + " (est., skipped)";
  return unavailable;
}

// Time with rows/s.
std::string PassCell(const Figure& f, uint64_t rows, const char* unavailable) {
  if (!f.has()) return unavailable;
  const std::string rate = Rate(static_cast<double>(rows) / std::max(f.seconds, 1e-12));
  if (f.estimated) return "~" + Duration(f.seconds) + " (~" + rate + ", est., skipped)";
  return Duration(f.seconds) + " (" + rate + ")";
}

std::string Speedup(const Figure& slow, const Figure& fast) {
  if (!slow.has() || !fast.measured || fast.seconds <= 0) return "n/a";
  return (slow.estimated ? "~" : "") + Ratio(slow.seconds / fast.seconds);
}

std::optional<double> CupyMs(const CaseResult& c) {
  for (const CupyFigure& figure : kCupy) {
    if (c.million_rows == figure.million_rows) return figure.ms;
  }
  return std::nullopt;
}

std::string Report(const Bench& bench, const std::string& header,
                   const std::vector<CaseResult>& cases) {
  const bool gpu = bench.gpu_available;
  const char* no_gpu = gpu ? "n/a" : "unavailable";
  const double bandwidth = bench.options.hbm_tbps * 1e12;
  std::string out = header + "\n";

  out += "### Congruence pass (one pass, merging nothing, every class alone)\n\n";
  out +=
      "| case | rows | child refs | classes | floor | GPU pass (wall) | x floor | GPU pass "
      "after the rebuild | x floor | GPU round 1 (device) | x floor | CPU, every core | CPU, one "
      "thread | GPU vs 1 thread | GPU vs every core |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const CaseResult& c : cases) {
    const double floor_seconds = c.floor_bytes / bandwidth;
    auto floor_ratio = [&](const Figure& f) {
      return f.measured ? Ratio(f.seconds / floor_seconds) : std::string(no_gpu);
    };
    out += "| " + c.name + " | " + Count(c.rows) + " | " + Count(c.child_refs) + " | " +
           Count(c.classes) + " | " +
           Format("%.1f MB, %s", c.floor_bytes / 1e6, Duration(floor_seconds).c_str()) + " | " +
           PassCell(c.gpu.pass, c.rows, no_gpu) + " | " + floor_ratio(c.gpu.pass) + " | " +
           PassCell(c.gpu.pass_merged, c.rows, no_gpu) + " | " + floor_ratio(c.gpu.pass_merged) +
           " | " + Time(c.gpu.round1_device, no_gpu) + " | " + floor_ratio(c.gpu.round1_device) +
           " | " + PassCell(c.cpu_all.pass, c.rows, "n/a") + " | " +
           PassCell(c.cpu_one.pass, c.rows, "n/a") + " | " + Speedup(c.cpu_one.pass, c.gpu.pass) +
           " | " + Speedup(c.cpu_all.pass, c.gpu.pass) + " |\n";
  }

  out += "\n### Full rebuild (RESET: every class alone, to the fixpoint)\n\n";
  out +=
      "| case | rounds | merges | rows visited | classes before -> after | GPU device | GPU "
      "wall | CPU, every core | CPU, one thread | GPU vs 1 thread | GPU vs every core | CuPy "
      "H100 | check |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const CaseResult& c : cases) {
    const Run& any = c.gpu.have_result ? c.gpu : c.cpu_all;
    const vyre_egraph_rebuild_result& r = any.result;
    std::string check;
    if (!c.problems.empty()) {
      check = "**MISMATCH**";
    } else if (c.gpu.have_result) {
      check = c.cpu_one.have_result ? "GPU = CPU (1, all)" : "GPU = CPU (all)";
    } else {
      check = c.cpu_one.have_result ? "CPU 1 = all (no GPU)" : "CPU only (no GPU)";
    }
    const std::optional<double> cupy = CupyMs(c);
    out += "| " + c.name + " | " + (any.have_result ? std::to_string(r.rounds) : "n/a") + " | " +
           (any.have_result
                ? Count(r.merges) + (r.union_merges > 0 ? " (+" + Count(r.union_merges) + " unions)"
                                                        : std::string())
                : "n/a") +
           " | " + (any.have_result ? Count(r.rows_visited) : "n/a") + " | " +
           (any.have_result ? Count(r.classes_before) + " -> " + Count(r.classes_after) : "n/a") +
           " | " + Time(c.gpu.rebuild_device, no_gpu) + " | " + Time(c.gpu.rebuild_wall, no_gpu) +
           " | " + Time(c.cpu_all.rebuild_wall, "n/a", true) + " | " +
           Time(c.cpu_one.rebuild_wall, "n/a", true) + " | " +
           Speedup(c.cpu_one.rebuild_wall, c.gpu.rebuild_wall) + " | " +
           Speedup(c.cpu_all.rebuild_wall, c.gpu.rebuild_wall) + " | " +
           (cupy ? Format("%.0f ms", *cupy) : std::string("")) + " | " + check + " |\n";
  }

  // Targets, on the 16 M-row synthetic case.
  const CaseResult* big = nullptr;
  for (const CaseResult& c : cases) {
    if (c.million_rows == 16) big = &c;
  }
  out += "\n### Targets (H100), 16 M synthetic rows\n\n";
  out += "| target | measured | met |\n|---|---:|---|\n";
  auto verdict = [](bool ok) { return std::string(ok ? "yes" : "**no**"); };
  if (big == nullptr || !big->gpu.ran) {
    const char* why = big == nullptr ? "no 16 M case run (--sizes)" : "GPU unavailable";
    out +=
        Format("| one pass within %.0fx of the floor | %s | n/a |\n", kTargetPassFloorRatio, why);
    out += Format("| rebuild >= %.0fx the one-thread CPU | %s | n/a |\n", kTargetSpeedupOneThread,
                  why);
    out += Format("| rebuild < %.0f ms | %s | n/a |\n", kTargetRebuildMs, why);
    out += Format("| brief's bar: rebuild <= %.0f ms (aim %.0f ms; CuPy 108 ms) | %s | n/a |\n",
                  kBarRebuildMs, kAimRebuildMs, why);
  } else {
    const double floor_seconds = big->floor_bytes / bandwidth;
    const double pass_ratio = big->gpu.pass.seconds / floor_seconds;
    const double rebuild_ms = big->gpu.rebuild_wall.seconds * 1e3;
    out += Format("| one pass within %.0fx of the floor (%s) | %s wall = %s | %s |\n",
                  kTargetPassFloorRatio, Duration(floor_seconds).c_str(),
                  Duration(big->gpu.pass.seconds).c_str(), Ratio(pass_ratio).c_str(),
                  verdict(pass_ratio <= kTargetPassFloorRatio).c_str());
    if (big->cpu_one.rebuild_wall.has()) {
      const double speedup = big->cpu_one.rebuild_wall.seconds / big->gpu.rebuild_wall.seconds;
      out += Format("| rebuild >= %.0fx the one-thread CPU | %s vs %s = %s | %s%s |\n",
                    kTargetSpeedupOneThread, Duration(big->gpu.rebuild_wall.seconds).c_str(),
                    Time(big->cpu_one.rebuild_wall, "").c_str(),
                    Speedup(big->cpu_one.rebuild_wall, big->gpu.rebuild_wall).c_str(),
                    verdict(speedup >= kTargetSpeedupOneThread).c_str(),
                    big->cpu_one.rebuild_wall.estimated ? " (CPU estimated)" : "");
    } else {
      out += Format("| rebuild >= %.0fx the one-thread CPU | CPU not run | n/a |\n",
                    kTargetSpeedupOneThread);
    }
    out += Format("| rebuild < %.0f ms | %.2f ms wall (%.2f ms device) | %s |\n", kTargetRebuildMs,
                  rebuild_ms, big->gpu.rebuild_device.seconds * 1e3,
                  verdict(rebuild_ms < kTargetRebuildMs).c_str());
    out += Format(
        "| brief's bar: rebuild <= %.0f ms (aim %.0f ms) | %.2f ms wall, %.1fx CuPy's "
        "108 ms | %s%s |\n",
        kBarRebuildMs, kAimRebuildMs, rebuild_ms, 108.0 / rebuild_ms,
        verdict(rebuild_ms <= kBarRebuildMs).c_str(),
        rebuild_ms <= kAimRebuildMs ? ", aim met" : "");
  }

  out += "\nNotes:\n";
  out += Format(
      "- floor = bytes one pass reads once / HBM bandwidth = (rows x 5 columns x 4 B [class, op, "
      "child offset, child length, signature] + child refs x 4 B x 2 [children, their canonical "
      "class] + classes x 4 B [union-find]) / %.2f TB/s; x floor = measured / floor.\n",
      bench.options.hbm_tbps);
  out +=
      "- GPU pass (wall): vyre_egraph_pass(image, NULL, 0, &count) on the fresh image, host "
      "wall clock per call (it ends synchronised after reading the pair count), median after 3 "
      "warm-up calls; rows/s = rows / that time. GPU round 1 (device): vyre_egraph_rebuild "
      "with RESET | DEVICE_TIMING and max_rounds 1 (the first round: every row canonicalised "
      "and grouped, then merged), median device_ns.\n";
  out +=
      "- Rebuild: vyre_egraph_rebuild with RESET | DEVICE_TIMING to the fixpoint; GPU: median "
      "of >= 5 after 1 warm-up (device = device_ns, wall = host clock around the call); CPU: "
      "host clock, median of 1-3 runs (up to 21 when one takes under 50 ms), no warm-up; rounds, "
      "merges, rows visited and classes "
      "from the GPU's result (the CPU's without a GPU). Speedups are CPU wall / GPU wall "
      "(medians).\n";
  out += Format(
      "- CPU runs whose estimate (seconds per row of the previous case x rows) exceeds "
      "--cpu-seconds %.0f (a quarter of it for the pass) are skipped and show the estimate "
      "(est.); rebuilds repeat (at most 3, or 21 under 50 ms) only while they fit in half of it; "
      "the every-core "
      "rebuild always runs (the check's reference).\n",
      bench.options.cpu_seconds);
  out +=
      "- synthetic N M = N x 2^20 rows from tools/egraph GenerateSynthetic (--seed, arity <= "
      "--max-arity, every e-node its own class; a rebuild needs depth + 2 rounds).\n";
  out += Format(
      "- files: the %zu largest *.json (bytes) of $VYRE_EGRAPHS_DIR; \"own classes\": every "
      "e-node in its own class (congruence re-joins duplicated e-nodes only, so a hash-consed "
      "file may have nothing to merge); \"U unions\": the file's classes, and every rebuild "
      "first unions U random pairs of classes (splitmix64 of --seed) passed as "
      "vyre_egraph_rebuild_desc.unions, then re-closes; merges counts congruence merges, "
      "\"+N unions\" those the unions made. The pass runs on the fresh image, before any "
      "union.\n",
      bench.options.graphs);
  out +=
      "- CuPy H100: DESIGN.md section 5's sort-based CuPy script on its own synthetic graph "
      "(arity <= 2, every e-node its own class; 16 M rows need 9 rounds), for orientation: "
      "the graphs are not the same.\n";
  out +=
      "- check: the canonical class of every class (VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES) "
      "after the rebuild is identical on every engine, and so are the rounds, merges and the "
      "pass's sorted pair list (GPU vs CPU).\n";
  return out;
}

// Issue 20's target for the full rebuild of the 16 M-row synthetic case.
// Issue 23: the full rebuild with its rounds on the device (one loop graph,
// VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS) against host-driven batches, per case.
std::string DeviceRoundsSection(const Bench& bench, const std::vector<CaseResult>& cases) {
  std::string out =
      "\n### Issue 23: rebuild rounds on the device vs host-driven batches (" +
      (bench.gpu_available ? "GPU: " + bench.gpu_name : std::string("GPU unavailable")) + ")\n\n";
  out += "| case | rounds | host-driven wall (median) | device rounds wall (median) | "
         "device / host | same results |\n";
  out += "|---|---:|---:|---:|---:|---|\n";
  for (const CaseResult& c : cases) {
    if (!c.gpu.have_result || !c.gpu.rounds_device_wall.measured) continue;
    out += "| " + c.name + " | " + std::to_string(c.gpu.result.rounds) + " | " +
           Duration(c.gpu.rounds_host_wall.seconds) +
           Format(" (%zu runs)", c.gpu.rounds_host_wall.reps) + " | " +
           Duration(c.gpu.rounds_device_wall.seconds) + " | " +
           Format("%.3fx", c.gpu.rounds_device_wall.seconds / c.gpu.rounds_host_wall.seconds) +
           " | " + (c.gpu.rounds_agree ? "yes" : "**NO**") + " |\n";
  }
  out += "\nRESET rebuilds to the fixpoint, the two kinds alternating, after one warm-up of "
         "each; the device-rounds wall includes building and instantiating the loop graph.\n";
  return out;
}

std::string Issue20RebuildSection(const Bench& bench, const std::vector<CaseResult>& cases) {
  const CaseResult* big = nullptr;
  for (const CaseResult& c : cases) {
    if (c.million_rows == 16) big = &c;
  }
  std::string out =
      "\n### Issue 20: full rebuild, 16 M synthetic rows (" +
      (bench.gpu_available ? "GPU: " + bench.gpu_name : std::string("GPU unavailable")) + ")\n\n";
  out +=
      "| case | rounds | rows visited | GPU wall (median) | GPU device (median) | target | met |\n";
  out += "|---|---:|---:|---:|---:|---|---|\n";
  const std::string target =
      Format("<= %.1f ms wall (aim %.0f ms)", kIssue20RebuildMs, kAimRebuildMs);
  if (big == nullptr || !big->gpu.have_result) {
    const char* why = big == nullptr ? "no 16 M case run (--sizes)" : "GPU unavailable";
    out += Format("| %s | n/a | n/a | %s | %s | %s | n/a |\n",
                  big == nullptr ? "-" : big->name.c_str(), why, why, target.c_str());
    return out;
  }
  const double ms = big->gpu.rebuild_wall.seconds * 1e3;
  out += "| " + big->name + " | " + std::to_string(big->gpu.result.rounds) + " | " +
         Count(big->gpu.result.rows_visited) + " | " + Duration(big->gpu.rebuild_wall.seconds) +
         Format(" (%zu runs)", big->gpu.rebuild_wall.reps) + " | " +
         Duration(big->gpu.rebuild_device.seconds) + " | " + target + " | " +
         (ms <= kIssue20RebuildMs ? "met" : "**not met**") +
         (ms <= kAimRebuildMs ? ", aim met" : "") + " |\n";
  out +=
      "\nThe full rebuild of the table above (RESET, to the fixpoint): median wall of >= 5 after "
      "1 warm-up, beside its device time.\n";
  return out;
}

// Opens the GPU (bench.context) if there is one; returns the report's GPU line.
std::string OpenGpu(Bench* bench) {
  if (!bench->options.gpu) {
    bench->gpu_why_not = "--no-gpu";
  } else {
    uint32_t device_count = 0;
    vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
    if (vyre_device_count(&device_count) != VYRE_STATUS_OK) {
      bench->gpu_why_not = VyreLastError();
    } else if (device_count == 0) {
      bench->gpu_why_not = "the driver reports no CUDA device";
    } else if (vyre_context_create(&context_desc, &bench->context) != VYRE_STATUS_OK) {
      bench->gpu_why_not = VyreLastError();
    } else {
      bench->gpu_available = true;
      vyre_device_info info = VYRE_DEVICE_INFO_INIT;
      VYRE_CHECK(vyre_context_device_info(bench->context, &info));
      bench->gpu_name = info.name;
      return Format("GPU: %s (sm_%u%u, %u SMs, %.1f GiB), driver %u", info.name,
                    info.compute_capability_major, info.compute_capability_minor,
                    info.multiprocessor_count,
                    static_cast<double>(info.total_memory_bytes) / (1u << 30), info.driver_version);
    }
  }
  return "GPU: unavailable (" + bench->gpu_why_not + ")";
}

GpuTarget Target(const Bench& bench) {
  GpuTarget gpu;
  gpu.available = bench.gpu_available;
  gpu.context = bench.context;
  gpu.name = bench.gpu_name;
  gpu.why_not = bench.gpu_why_not;
  return gpu;
}

Graph MakeSynthetic(const Options& options, double millions, double* prepare_seconds) {
  const uint64_t rows = static_cast<uint64_t>(std::llround(millions * kMillion));
  const Clock::time_point start = Clock::now();
  uint32_t depth = 0;
  Graph g = Synthetic(rows, options.max_arity, options.seed, &depth);
  g.million_rows = millions;
  g.name = Format("synthetic %g M (depth %u)", millions, depth);
  *prepare_seconds = SecondsSince(start);
  return g;
}

void RunFiles(Bench& bench, std::vector<CaseResult>* cases) {
  const Options& options = bench.options;
  const char* env = std::getenv("VYRE_EGRAPHS_DIR");
  // Default: ../shared/egraphs, else .deps/egraphs (the GPU machine's copy).
  std::filesystem::path dir = env != nullptr && *env != '\0' ? env : "../shared/egraphs";
  if ((env == nullptr || *env == '\0') && !std::filesystem::is_directory(dir) &&
      std::filesystem::is_directory(".deps/egraphs")) {
    dir = ".deps/egraphs";
  }
  std::vector<std::pair<uintmax_t, std::filesystem::path>> files;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file() && it->path().extension() == ".json") {
      files.emplace_back(it->file_size(), it->path());
    }
  }
  if (files.empty()) {
    std::printf("no *.json under %s (VYRE_EGRAPHS_DIR): skipping the real e-graphs\n\n",
                dir.string().c_str());
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  files.resize(std::min(files.size(), options.graphs));
  for (const auto& [bytes, path] : files) {
    std::string name = std::filesystem::relative(path, dir, error).string();
    if (error || name.empty()) name = path.filename().string();
    for (const bool own_classes : {true, false}) {
      if (!own_classes && options.unions == 0) continue;
      const Clock::time_point start = Clock::now();
      Graph g =
          LoadJsonGraph(path.string(), own_classes, own_classes ? 0 : options.unions, options.seed);
      g.name = own_classes ? name + ", own classes"
                           : Format("%s, %" PRIu64 " unions", name.c_str(), options.unions);
      const double prepare = SecondsSince(start);
      cases->push_back(RunCase(bench, g, prepare));
    }
  }
}

// Prints the report, writes it to $VYRE_BENCH_OUT, lists the problems;
// returns the exit status.
int Finish(const std::string& report, const std::vector<std::string>& problems,
           Clock::time_point bench_start) {
  std::printf("\n%s", report.c_str());
  if (const char* path = std::getenv("VYRE_BENCH_OUT")) {
    if (FILE* file = std::fopen(path, "w")) {
      std::fputs(report.c_str(), file);
      std::fclose(file);
      std::printf("\nwritten to %s\n", path);
    } else {
      Die(std::string("cannot write VYRE_BENCH_OUT=") + path);
    }
  }
  std::printf("total %.1f s\n", SecondsSince(bench_start));
  if (problems.empty()) return 0;
  std::fprintf(stderr, "vyre_egraph_bench: %zu check(s) failed:\n", problems.size());
  for (const std::string& p : problems) std::fprintf(stderr, "  %s\n", p.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Bench bench;
  bench.options = ParseOptions(argc, argv);
  const Options& options = bench.options;
  const Clock::time_point bench_start = Clock::now();

  // The GPU, if there is one; everything else runs without it.
  const std::string gpu_line = OpenGpu(&bench);
  const GpuTarget gpu = Target(bench);

  const uint32_t version = vyre_version();
  const std::string header =
      "## vyre_egraph_bench\n\n" + gpu_line +
      Format("; CPU: %u hardware threads; vyre-cuda %u.%u.%u; synthetic seed %" PRIu64
             ", arity <= %u; floor at %.2f TB/s\n",
             std::thread::hardware_concurrency(), VYRE_VERSION_MAJOR_OF(version),
             VYRE_VERSION_MINOR_OF(version), VYRE_VERSION_PATCH_OF(version), options.seed,
             options.max_arity, options.hbm_tbps);
  std::printf("%s\n", header.c_str());
  std::fflush(stdout);

  // The largest synthetic case first: issue 20's cases run on it, and the
  // process's first image create (before any other e-graph call) is timed on it.
  std::optional<Graph> largest;
  double largest_prepare = 0;
  if (!options.sizes_millions.empty()) {
    const double millions =
        *std::max_element(options.sizes_millions.begin(), options.sizes_millions.end());
    largest = MakeSynthetic(options, millions, &largest_prepare);
  }
  FirstCreate first;
  if (gpu.available && largest) first = TimeFirstCreate(gpu, *largest);

  std::vector<CaseResult> cases;
  for (const double millions : options.sizes_millions) {
    if (largest && millions == largest->million_rows) {
      cases.push_back(RunCase(bench, *largest, largest_prepare));
      continue;
    }
    double prepare = 0;
    const Graph g = MakeSynthetic(options, millions, &prepare);
    cases.push_back(RunCase(bench, g, prepare));
  }
  if (options.graphs > 0) RunFiles(bench, &cases);
  if (gpu.available && !largest && !cases.empty() && cases.front().gpu.ran) {
    // No synthetic case: the first case's GPU create was the process's first.
    first.measured = true;
    first.seconds = cases.front().gpu.create_seconds;
    first.on = cases.front().name;
  }

  const GrowingOutput growing = RunGrowingCases(options, gpu, first, largest ? &*largest : nullptr);
  if (bench.gpu_available) VYRE_CHECK(vyre_context_destroy(bench.context));

  const std::string report = Report(bench, header, cases) + Issue20RebuildSection(bench, cases) +
                             DeviceRoundsSection(bench, cases) + growing.markdown;
  std::vector<std::string> problems;
  for (const CaseResult& c : cases)
    problems.insert(problems.end(), c.problems.begin(), c.problems.end());
  problems.insert(problems.end(), growing.problems.begin(), growing.problems.end());
  return Finish(report, problems, bench_start);
}
