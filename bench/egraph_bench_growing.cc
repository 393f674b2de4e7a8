// Issue 20's cases of vyre_egraph_bench, on the largest synthetic graph of the
// run (egraph_bench.cc runs the rest and prints the report):
//
//   create     vyre_egraph_image_create (GPU) from pageable memory (the graph's
//              std::vector columns) and from pinned memory (the columns copied,
//              untimed, into one vyre_host_alloc region), each alternating with
//              vyre_buffer_upload of the same bytes from the same kind of memory
//              (pageable: one std::vector holding the columns back to back) into
//              one resident buffer: 1 warm-up pair, then --create-reps pairs;
//              medians and create / upload. Targets: pageable <= 1.5x, pinned
//              <= 1.2x, and the process's first create (timed before any other
//              e-graph call, see main) <= 50 ms.
//   one union  a GPU image and a CPU image (every core), created with room for
//              the loop's rows, RESET-rebuilt to the fixpoint (GPU: 1 warm-up,
//              then 5: medians; CPU once); then 1 warm-up and --union-reps
//              rebuilds without RESET, each first unioning one random pair of
//              classes whose canonical classes differ (read from the image).
//              The CPU repeats them (at least one after its warm-up) while they
//              fit in 1/16 of --cpu-seconds and then takes the rest in one
//              untimed rebuild. Target: <= 0.2 ms.
//   loop       --loop-steps steps on the same images, each: append
//              --loop-percent % of the graph's rows (half of them copies of
//              existing rows, op and children, each in a new class, so
//              congruence merges it back; half fresh: a random existing row's
//              op and arity over random existing classes, half of those in new
//              classes, half in existing ones), then rebuild without RESET
//              with --loop-unions random unions, then vyre_egraph_changed_read
//              (timed apart). Against it, every step: a GPU image re-created
//              from the same host columns and RESET-rebuilt with every union
//              so far (create timed; 1 warm-up, then 3 rebuilds); and the CPU
//              image doing the same steps, while they fit in a quarter of
//              --cpu-seconds (at least one step). Target: each step's
//              incremental rebuild <= 10% of the re-created image's RESET
//              rebuild.
// Checks (each a problem, exit 1 after the report): the GPU's and the CPU's
// canonical classes after the CPU's last step; the re-created image's against
// the incremental images' after the last step; each step's changed pairs on
// the GPU and the CPU. A failed call is a problem too; the engine that failed
// stops, the other goes on.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "egraph_bench_common.h"

namespace egraph_bench {
namespace {

using vyre::tools::EgraphColumns;

constexpr double kTargetPageableRatio = 1.5;
constexpr double kTargetPinnedRatio = 1.2;
constexpr double kTargetFirstCreateMs = 50;
constexpr double kTargetOneUnionMs = 0.2;
constexpr double kTargetIncrementalShare = 0.10;
constexpr size_t kFullReps = 5;              // GPU RESET rebuilds of the loop image
constexpr size_t kRecreateReps = 3;          // RESET rebuilds of a re-created image
constexpr double kCpuUnionShare = 1.0 / 16;  // of --cpu-seconds
constexpr double kCpuLoopShare = 0.25;       // of --cpu-seconds
constexpr uint64_t kLoopSeedSalt = 0x20202020;

// True when status is OK; otherwise records the first failure in *error.
bool Ok(vyre_status status, const char* what, std::string* error) {
  if (status == VYRE_STATUS_OK) return true;
  if (error->empty()) *error = std::string(what) + ": " + VyreLastError();
  return false;
}

std::string Verdict(bool met) { return met ? "met" : "**not met**"; }

std::string GpuLabel(const GpuTarget& gpu) {
  return gpu.available ? "GPU: " + gpu.name : "GPU unavailable";
}

std::string MedianTime(const std::vector<double>& samples) {
  return samples.empty() ? "n/a" : Duration(Median(samples));
}

// "3" or "3 (2-4)": the median and the range of whole-number samples.
std::string MedianRange(const std::vector<double>& samples) {
  if (samples.empty()) return "n/a";
  const auto [low, high] = std::minmax_element(samples.begin(), samples.end());
  const std::string median = Count(static_cast<uint64_t>(std::llround(Median(samples))));
  if (*low == *high) return median;
  return median + " (" + Count(static_cast<uint64_t>(*low)) + "-" +
         Count(static_cast<uint64_t>(*high)) + ")";
}

uint32_t RandomBelow(uint64_t* state, uint64_t n) {
  return static_cast<uint32_t>(SplitMix64(state) % n);
}

// --- Images -------------------------------------------------------------------

// A desc over the first rows, classes and children of c (a GPU desc without
// its context).
vyre_egraph_image_desc PrefixDesc(const EgraphColumns& c, uint64_t rows, uint64_t classes,
                                  uint64_t children) {
  vyre_egraph_image_desc d = VYRE_EGRAPH_IMAGE_DESC_INIT;
  d.row_count = rows;
  d.class_count = classes;
  d.child_count = children;
  d.row_classes = c.row_classes.data();
  d.row_ops = c.row_ops.data();
  d.child_offsets = c.child_offsets.data();
  d.child_lengths = c.child_lengths.data();
  d.children = c.children.data();
  return d;
}

vyre_egraph_image_desc WholeDesc(const EgraphColumns& c) {
  return PrefixDesc(c, c.rows(), c.classes, c.children.size());
}

vyre_egraph_image_desc OnGpu(vyre_egraph_image_desc d, const GpuTarget& gpu) {
  d.device = VYRE_EGRAPH_DEVICE_GPU;
  d.context = gpu.context;
  return d;
}

vyre_egraph_image_desc OnCpu(vyre_egraph_image_desc d) {
  d.device = VYRE_EGRAPH_DEVICE_CPU;
  d.cpu_threads = 0;  // every core
  return d;
}

// One engine's image: `on` while it exists and no call on it has failed.
struct Side {
  vyre_egraph_image image{};
  bool made = false;
  bool on = false;
  std::string error;          // the first failed call
  std::string changed_error;  // vyre_egraph_changed_read's (the side goes on)

  bool Check(vyre_status status, const char* what) {
    if (Ok(status, what, &error)) return true;
    on = false;
    return false;
  }
  void Create(const vyre_egraph_image_desc& desc, double* seconds) {
    const Clock::time_point start = Clock::now();
    if (Check(vyre_egraph_image_create(&desc, &image), "vyre_egraph_image_create")) {
      made = on = true;
    }
    *seconds = SecondsSince(start);
  }
  void Destroy() {
    if (made) vyre_egraph_image_destroy(image);
    made = on = false;
  }
};

struct Rebuilt {
  double wall = 0;
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
};

// A rebuild with `flags` (and device timing) after `unions`, timed on the host.
bool Rebuild(Side* side, uint32_t flags, const std::vector<uint32_t>& unions, Rebuilt* out) {
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.flags = flags | VYRE_EGRAPH_REBUILD_DEVICE_TIMING;
  desc.unions = unions.empty() ? nullptr : unions.data();
  desc.union_count = unions.size() / 2;
  *out = Rebuilt{};
  const Clock::time_point start = Clock::now();
  const bool ok =
      side->Check(vyre_egraph_rebuild(side->image, &desc, &out->result), "vyre_egraph_rebuild");
  out->wall = SecondsSince(start);
  return ok;
}

bool ReadCanonical(Side* side, uint64_t classes, std::vector<uint32_t>* out) {
  out->assign(classes, 0);
  if (classes == 0) return true;
  return side->Check(vyre_egraph_image_read(side->image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0,
                                            classes, out->data()),
                     "vyre_egraph_image_read");
}

// Per-rebuild figures over repetitions.
struct Samples {
  std::vector<double> wall, device, rounds, rows_visited, changed;
  void Add(const Rebuilt& r) {
    wall.push_back(r.wall);
    device.push_back(static_cast<double>(r.result.device_ns) * 1e-9);
    rounds.push_back(r.result.rounds);
    rows_visited.push_back(static_cast<double>(r.result.rows_visited));
    changed.push_back(static_cast<double>(r.result.changed_class_count));
  }
};

// --- Image creation against upload ------------------------------------------------

struct CreateSide {
  std::vector<double> create, upload;
  std::string error;
};

struct CreateCase {
  bool ran = false;
  std::string why_not;
  uint64_t bytes = 0;
  CreateSide pageable, pinned;
};

// The bytes create uploads: the row columns and the children.
uint64_t ColumnBytes(const EgraphColumns& c) { return (4 * c.rows() + c.children.size()) * 4; }

// The columns back to back: row classes, ops, child offsets, lengths, children.
void Pack(const EgraphColumns& c, uint32_t* to) {
  for (const auto* column :
       {&c.row_classes, &c.row_ops, &c.child_offsets, &c.child_lengths, &c.children}) {
    if (!column->empty()) std::memcpy(to, column->data(), column->size() * 4);
    to += column->size();
  }
}

// A desc over columns packed by Pack at `base`.
vyre_egraph_image_desc PackedDesc(const EgraphColumns& c, const uint32_t* base) {
  vyre_egraph_image_desc d = WholeDesc(c);
  const uint64_t n = c.rows();
  d.row_classes = base;
  d.row_ops = base + n;
  d.child_offsets = base + 2 * n;
  d.child_lengths = base + 3 * n;
  d.children = base + 4 * n;
  return d;
}

bool TimedCreate(const vyre_egraph_image_desc& desc, double* seconds, std::string* error) {
  vyre_egraph_image image{};
  const Clock::time_point start = Clock::now();
  if (!Ok(vyre_egraph_image_create(&desc, &image), "vyre_egraph_image_create", error)) {
    return false;
  }
  *seconds = SecondsSince(start);
  return Ok(vyre_egraph_image_destroy(image), "vyre_egraph_image_destroy", error);
}

bool TimedUpload(vyre_buffer buffer, const void* src, uint64_t bytes, double* seconds,
                 std::string* error) {
  const Clock::time_point start = Clock::now();
  if (!Ok(vyre_buffer_upload(buffer, 0, src, bytes), "vyre_buffer_upload", error)) return false;
  *seconds = SecondsSince(start);
  return true;
}

// Alternates create and upload: 1 warm-up pair, then `reps` measured pairs.
void MeasureSide(const vyre_egraph_image_desc& desc, vyre_buffer buffer, const void* src,
                 uint64_t bytes, size_t reps, CreateSide* side) {
  for (size_t i = 0; i <= reps; ++i) {
    double create = 0, upload = 0;
    if (!TimedCreate(desc, &create, &side->error) ||
        !TimedUpload(buffer, src, bytes, &upload, &side->error)) {
      return;
    }
    if (i == 0) continue;
    side->create.push_back(create);
    side->upload.push_back(upload);
  }
}

void MeasurePinned(const Options& o, const GpuTarget& gpu, const Graph& g, vyre_buffer buffer,
                   CreateCase* r) {
  void* pinned = nullptr;
  if (!Ok(vyre_host_alloc(gpu.context, r->bytes, &pinned), "vyre_host_alloc", &r->pinned.error)) {
    return;
  }
  Pack(g.columns, static_cast<uint32_t*>(pinned));
  const vyre_egraph_image_desc desc =
      OnGpu(PackedDesc(g.columns, static_cast<const uint32_t*>(pinned)), gpu);
  MeasureSide(desc, buffer, pinned, r->bytes, o.create_reps, &r->pinned);
  Ok(vyre_host_free(pinned), "vyre_host_free", &r->pinned.error);
}

CreateCase RunCreateCase(const Options& o, const GpuTarget& gpu, const Graph& g) {
  CreateCase r;
  r.bytes = ColumnBytes(g.columns);
  if (!gpu.available) r.why_not = gpu.why_not;
  if (r.bytes == 0) r.why_not = "an empty graph";
  if (!r.why_not.empty()) return r;
  r.ran = true;
  vyre_buffer buffer{};
  if (!Ok(vyre_buffer_alloc(gpu.context, r.bytes, &buffer), "vyre_buffer_alloc",
          &r.pageable.error)) {
    r.pinned.error = r.pageable.error;
    return r;
  }
  {
    std::vector<uint32_t> packed(r.bytes / 4);
    Pack(g.columns, packed.data());
    MeasureSide(OnGpu(WholeDesc(g.columns), gpu), buffer, packed.data(), r.bytes, o.create_reps,
                &r.pageable);
  }
  MeasurePinned(o, gpu, g, buffer, &r);
  Ok(vyre_buffer_free(buffer), "vyre_buffer_free", &r.pinned.error);
  std::printf("  create vs upload (%.1f MB): pageable %s vs %s, pinned %s vs %s\n", r.bytes / 1e6,
              MedianTime(r.pageable.create).c_str(), MedianTime(r.pageable.upload).c_str(),
              MedianTime(r.pinned.create).c_str(), MedianTime(r.pinned.upload).c_str());
  std::fflush(stdout);
  return r;
}

std::string CreateRow(const char* memory, const CreateSide& side, uint64_t bytes, double target) {
  const std::string target_text = Format("<= %.1fx upload", target);
  if (side.create.empty()) {
    const std::string why = side.error.empty() ? "not run" : "failed: " + side.error;
    return Format("| %s | %s | | | | | 0 | %s | n/a |\n", memory, why.c_str(), target_text.c_str());
  }
  const double create = Median(side.create), upload = Median(side.upload);
  const double ratio = create / upload;
  return Format("| %s | %s | %s | %s | %.1f GB/s | %.1f GB/s | %zu | %s | %s |\n", memory,
                Duration(create).c_str(), Duration(upload).c_str(), Ratio(ratio).c_str(),
                bytes / create / 1e9, bytes / upload / 1e9, side.create.size(), target_text.c_str(),
                Verdict(ratio <= target).c_str());
}

std::string FirstCreateRow(const FirstCreate& first, const GpuTarget& gpu) {
  const std::string target = Format("<= %.0f ms", kTargetFirstCreateMs);
  std::string measured;
  if (!gpu.available) measured = "unavailable";
  if (!first.error.empty()) measured = "failed: " + first.error;
  if (!first.measured) {
    if (measured.empty()) measured = "not run";
    return "| first create in the process | " + measured + " | | | | | 0 | " + target +
           " | n/a |\n";
  }
  return "| first create in the process (" + first.on + ", pageable) | " + Duration(first.seconds) +
         " | | | | | 1 | " + target + " | " + Verdict(first.seconds * 1e3 <= kTargetFirstCreateMs) +
         " |\n";
}

std::string CreateSection(const GpuTarget& gpu, const FirstCreate& first, const Graph* g,
                          const CreateCase& r) {
  std::string out = "\n### Issue 20: image creation at PCIe speed (";
  if (g != nullptr) {
    out += g->name + ", " + Count(g->rows()) + " rows, " +
           Format("%.1f MB of columns; ", ColumnBytes(g->columns) / 1e6);
  }
  out += GpuLabel(gpu) + ")\n\n";
  out +=
      "| memory | create (median) | upload (median) | create / upload | create rate | upload "
      "rate | runs | target | met |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---|---|\n";
  if (r.ran) {
    out += CreateRow("pageable (std::vector columns)", r.pageable, r.bytes, kTargetPageableRatio);
    out += CreateRow("pinned (one vyre_host_alloc region)", r.pinned, r.bytes, kTargetPinnedRatio);
  } else {
    out += "| pageable, pinned | " + (gpu.available ? r.why_not : std::string("unavailable")) +
           " | | | | | 0 | <= 1.5x, <= 1.2x upload | n/a |\n";
  }
  out += FirstCreateRow(first, gpu);
  out +=
      "\ncreate = vyre_egraph_image_create (GPU) of the whole graph, host wall clock (the image "
      "destroyed, untimed, after each); upload = vyre_buffer_upload of the same bytes (row "
      "classes, ops, child offsets, child lengths, children: 4 B each) from the same kind of "
      "memory into one resident buffer (pageable: one std::vector holding the columns back to "
      "back; pinned: the vyre_host_alloc region the pinned create reads), alternating create and "
      "upload, 1 warm-up pair then the medians; rates are those bytes over the medians. The "
      "first create is the process's first e-graph call (its kernels' module load included).\n";
  return out;
}

// --- The loop's plan -------------------------------------------------------------

struct StepData {
  EgraphColumns rows;  // child offsets from 0; rows.classes unused
  uint64_t new_classes = 0;
  std::vector<uint32_t> unions;
  uint64_t rows_after = 0, classes_after = 0, children_after = 0;
};

struct Plan {
  EgraphColumns all;  // the graph, then every step's rows
  uint64_t rows0 = 0, classes0 = 0, children0 = 0, step_rows = 0;
  std::vector<StepData> steps;
  uint64_t row_capacity = 0, class_capacity = 0, child_capacity = 0;
  double seconds = 0;
};

// Appends one row to `to`: a copy of a random row of `all` (op and children),
// or with `copy` false, its op and arity over random classes of `all`.
void AddRow(const EgraphColumns& all, bool copy, uint64_t* state, EgraphColumns* to) {
  const uint64_t r = RandomBelow(state, all.rows());
  const uint32_t length = all.child_lengths[r];
  to->row_ops.push_back(all.row_ops[r]);
  to->child_offsets.push_back(static_cast<uint32_t>(to->children.size()));
  to->child_lengths.push_back(length);
  for (uint32_t k = 0; k < length; ++k) {
    to->children.push_back(copy ? all.children[all.child_offsets[r] + k]
                                : RandomBelow(state, all.classes));
  }
}

// Rows: even ones copies in a new class each; odd ones fresh, every other one
// in a new class, the rest in a random existing class. Then `unions` random
// pairs of distinct classes (the new ones included).
StepData PlanStep(const EgraphColumns& all, uint64_t rows, uint64_t unions, uint64_t* state) {
  StepData s;
  uint64_t next = all.classes;
  for (uint64_t i = 0; i < rows; ++i) {
    const bool copy = i % 2 == 0;
    AddRow(all, copy, state, &s.rows);
    const bool new_class = copy || i % 4 == 1;
    s.rows.row_classes.push_back(new_class ? static_cast<uint32_t>(next++)
                                           : RandomBelow(state, all.classes));
  }
  s.new_classes = next - all.classes;
  for (uint64_t i = 0; i < unions && next >= 2; ++i) {
    const uint32_t a = RandomBelow(state, next);
    uint32_t b = RandomBelow(state, next - 1);
    if (b >= a) ++b;
    s.unions.push_back(a);
    s.unions.push_back(b);
  }
  return s;
}

void AppendStep(const StepData& s, EgraphColumns* all) {
  auto extend = [](std::vector<uint32_t>* to, const std::vector<uint32_t>& from) {
    to->insert(to->end(), from.begin(), from.end());
  };
  const uint32_t base = static_cast<uint32_t>(all->children.size());
  extend(&all->row_classes, s.rows.row_classes);
  extend(&all->row_ops, s.rows.row_ops);
  extend(&all->child_lengths, s.rows.child_lengths);
  extend(&all->children, s.rows.children);
  for (const uint32_t offset : s.rows.child_offsets) all->child_offsets.push_back(base + offset);
  all->classes += s.new_classes;
}

void CopyColumns(const EgraphColumns& from, uint64_t extra_rows, EgraphColumns* to) {
  const uint64_t rows = from.rows() + extra_rows;
  const double per_row = from.rows() > 0 ? double(from.children.size()) / from.rows() : 0;
  for (auto* column : {&to->row_classes, &to->row_ops, &to->child_offsets, &to->child_lengths}) {
    column->reserve(rows);
  }
  to->children.reserve(from.children.size() + static_cast<uint64_t>(extra_rows * per_row * 1.1));
  to->row_classes = from.row_classes;
  to->row_ops = from.row_ops;
  to->child_offsets = from.child_offsets;
  to->child_lengths = from.child_lengths;
  to->children = from.children;
  to->classes = from.classes;
}

uint64_t Capacity(uint64_t count, double factor, uint64_t needed) {
  return std::max(static_cast<uint64_t>(std::ceil(count * factor)), needed);
}

Plan PlanLoop(const Options& o, const Graph& g) {
  const Clock::time_point start = Clock::now();
  Plan p;
  p.rows0 = g.rows();
  p.classes0 = g.columns.classes;
  p.children0 = g.columns.children.size();
  const size_t steps = o.skip_loop || p.rows0 == 0 ? 0 : o.loop_steps;
  p.step_rows = static_cast<uint64_t>(std::llround(p.rows0 * o.loop_percent / 100));
  CopyColumns(g.columns, steps * p.step_rows, &p.all);
  uint64_t state = o.seed ^ kLoopSeedSalt;
  for (size_t s = 0; s < steps; ++s) {
    StepData d = PlanStep(p.all, p.step_rows, o.loop_unions, &state);
    AppendStep(d, &p.all);
    d.rows_after = p.all.rows();
    d.classes_after = p.all.classes;
    d.children_after = p.all.children.size();
    p.steps.push_back(std::move(d));
  }
  const double factor = 1 + steps * o.loop_percent / 100;
  p.row_capacity = Capacity(p.rows0, factor, p.all.rows());
  p.class_capacity = Capacity(p.classes0, factor, p.all.classes);
  p.child_capacity = Capacity(p.children0, factor, p.all.children.size());
  p.seconds = SecondsSince(start);
  return p;
}

// --- The loop -------------------------------------------------------------------

struct StepRun {
  bool ran = false;
  double append = 0;
  Rebuilt rebuild;
  bool grew = false;              // the append grew the image's capacity
  double changed_read = -1;       // < 0: not read
  std::vector<uint32_t> changed;  // the changed pairs read
};

struct Recreate {
  bool ran = false;
  double create = 0;
  Samples reset;
  std::string error;
};

struct StepRow {
  uint64_t rows = 0, classes = 0;  // the image's after the step
  StepRun gpu, cpu;
  Recreate recreate;
};

struct LoopResult {
  bool ran = false;
  std::string why_not;
  uint64_t rows0 = 0, classes0 = 0, step_rows = 0;
  uint64_t row_capacity = 0, class_capacity = 0, child_capacity = 0;
  size_t steps_planned = 0;
  // Setup: create with capacity, then the full (RESET) rebuilds.
  double gpu_create = 0, cpu_create = 0;
  Samples gpu_full, cpu_full;
  // One union on the closed image.
  bool one_union_ran = false;
  Samples gpu_one, cpu_one;
  size_t cpu_one_batched = 0;  // pairs the CPU took in one untimed rebuild
  // The steps.
  std::vector<StepRow> steps;
  size_t cpu_steps = 0;
  bool cpu_stopped = false;  // by the budget
  std::string gpu_error, cpu_error, gpu_changed_error, cpu_changed_error;
  std::vector<std::string> checks;    // what was compared, and how it came out
  std::vector<std::string> problems;  // mismatches
};

vyre_egraph_image_desc WithCapacity(vyre_egraph_image_desc d, const Plan& p) {
  d.row_capacity = p.row_capacity;
  d.class_capacity = p.class_capacity;
  d.child_capacity = p.child_capacity;
  return d;
}

// Creates both images and rebuilds them to the fixpoint (RESET).
void SetUp(const GpuTarget& gpu_target, const Graph& g, const Plan& p, Side* gpu, Side* cpu,
           LoopResult* out) {
  const vyre_egraph_image_desc desc = WithCapacity(WholeDesc(g.columns), p);
  Rebuilt r;
  if (gpu_target.available) {
    gpu->Create(OnGpu(desc, gpu_target), &out->gpu_create);
    for (size_t i = 0; i <= kFullReps && gpu->on; ++i) {
      if (Rebuild(gpu, VYRE_EGRAPH_REBUILD_RESET, {}, &r) && i > 0) out->gpu_full.Add(r);
    }
  }
  cpu->Create(OnCpu(desc), &out->cpu_create);
  if (cpu->on && Rebuild(cpu, VYRE_EGRAPH_REBUILD_RESET, {}, &r)) out->cpu_full.Add(r);
  std::printf(
      "  loop images (capacity %s rows): GPU create %s, full rebuild %s; CPU create %s, "
      "full rebuild %s\n",
      Count(p.row_capacity).c_str(), gpu->made ? Duration(out->gpu_create).c_str() : "-",
      MedianTime(out->gpu_full.wall).c_str(), cpu->made ? Duration(out->cpu_create).c_str() : "-",
      MedianTime(out->cpu_full.wall).c_str());
  std::fflush(stdout);
}

// A random pair of classes whose canonical classes differ on `side`.
bool PickUnion(Side* side, uint64_t classes, uint64_t* state, std::vector<uint32_t>* pair) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t a = RandomBelow(state, classes), b = RandomBelow(state, classes);
    if (a == b) continue;
    uint32_t ca = 0, cb = 0;
    const char* what = "vyre_egraph_image_read";
    const vyre_egraph_column canonical = VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES;
    if (!side->Check(vyre_egraph_image_read(side->image, canonical, a, 1, &ca), what) ||
        !side->Check(vyre_egraph_image_read(side->image, canonical, b, 1, &cb), what)) {
      return false;
    }
    if (ca == cb) continue;
    *pair = {a, b};
    return true;
  }
  return false;
}

// 1 warm-up, then --union-reps rebuilds of one union each on both images.
void RunOneUnion(const Options& o, const Plan& p, Side* gpu, Side* cpu,
                 std::vector<uint32_t>* applied, LoopResult* out) {
  const double cpu_budget = o.cpu_seconds * kCpuUnionShare;
  double cpu_spent = 0, cpu_last = 0;
  std::vector<uint32_t> cpu_pending;
  uint64_t state = o.seed ^ (kLoopSeedSalt << 1);
  for (size_t i = 0; i <= o.union_reps; ++i) {
    Side* primary = gpu->on ? gpu : cpu;
    std::vector<uint32_t> pair;
    if (!primary->on || p.classes0 < 2 || !PickUnion(primary, p.classes0, &state, &pair)) break;
    out->one_union_ran = true;
    applied->insert(applied->end(), pair.begin(), pair.end());
    Rebuilt r;
    if (gpu->on && Rebuild(gpu, 0, pair, &r) && i > 0) out->gpu_one.Add(r);
    if (!cpu->on) continue;
    if (i > 1 && cpu_spent + cpu_last > cpu_budget) {
      cpu_pending.insert(cpu_pending.end(), pair.begin(), pair.end());
      continue;
    }
    if (!Rebuild(cpu, 0, pair, &r) || i == 0) continue;  // the warm-up is not counted
    out->cpu_one.Add(r);
    cpu_last = r.wall;
    cpu_spent += r.wall;
  }
  out->cpu_one_batched = cpu_pending.size() / 2;
  Rebuilt r;
  if (cpu->on && !cpu_pending.empty()) Rebuild(cpu, 0, cpu_pending, &r);
  std::printf("  one union on the closed image: GPU %s (device %s), CPU %s\n",
              MedianTime(out->gpu_one.wall).c_str(), MedianTime(out->gpu_one.device).c_str(),
              MedianTime(out->cpu_one.wall).c_str());
  std::fflush(stdout);
}

vyre_egraph_append_desc AppendDesc(const StepData& d) {
  vyre_egraph_append_desc desc = VYRE_EGRAPH_APPEND_DESC_INIT;
  desc.class_count = d.new_classes;
  desc.row_count = d.rows.rows();
  desc.child_count = d.rows.children.size();
  desc.row_classes = d.rows.row_classes.data();
  desc.row_ops = d.rows.row_ops.data();
  desc.child_offsets = d.rows.child_offsets.data();
  desc.child_lengths = d.rows.child_lengths.data();
  desc.children = d.rows.children.empty() ? nullptr : d.rows.children.data();
  return desc;
}

bool Grew(const vyre_egraph_image_info& before, const vyre_egraph_image_info& after) {
  return after.row_capacity != before.row_capacity ||
         after.class_capacity != before.class_capacity ||
         after.child_capacity != before.child_capacity;
}

// Append, then the incremental rebuild with the step's unions.
void RunStep(Side* side, const StepData& d, StepRun* run) {
  vyre_egraph_image_info before = VYRE_EGRAPH_IMAGE_INFO_INIT;
  vyre_egraph_image_info after = VYRE_EGRAPH_IMAGE_INFO_INIT;
  const char* info = "vyre_egraph_image_info_get";
  if (!side->Check(vyre_egraph_image_info_get(side->image, &before), info)) return;
  const vyre_egraph_append_desc desc = AppendDesc(d);
  const Clock::time_point start = Clock::now();
  if (!side->Check(vyre_egraph_image_append(side->image, &desc), "vyre_egraph_image_append")) {
    return;
  }
  run->append = SecondsSince(start);
  if (!side->Check(vyre_egraph_image_info_get(side->image, &after), info)) return;
  run->grew = Grew(before, after);
  run->ran = Rebuild(side, 0, d.unions, &run->rebuild);
}

// vyre_egraph_changed_read after the step's rebuild, timed; a failure stops
// the reads on this side only.
void ReadChanged(Side* side, StepRun* run) {
  if (!run->ran || !side->changed_error.empty()) return;
  const uint64_t expected = run->rebuild.result.changed_class_count;
  run->changed.assign(2 * expected, 0);
  uint64_t count = 0;
  const Clock::time_point start = Clock::now();
  const bool ok =
      Ok(vyre_egraph_changed_read(side->image, expected > 0 ? run->changed.data() : nullptr,
                                  expected, &count),
         "vyre_egraph_changed_read", &side->changed_error);
  const double seconds = SecondsSince(start);
  if (!ok) return;
  if (count != expected) {
    side->changed_error = Format("vyre_egraph_changed_read: %" PRIu64
                                 " pairs, but the rebuild's changed_class_count is %" PRIu64,
                                 count, expected);
    return;
  }
  run->changed_read = seconds;
}

// A GPU image re-created from the host columns as they are after step d,
// RESET-rebuilt with every union so far; `canonical` (optional) receives its
// canonical classes.
void RunRecreate(const GpuTarget& gpu_target, const Plan& p, const StepData& d,
                 const std::vector<uint32_t>& unions, Recreate* out,
                 std::vector<uint32_t>* canonical) {
  Side fresh;
  fresh.Create(
      OnGpu(PrefixDesc(p.all, d.rows_after, d.classes_after, d.children_after), gpu_target),
      &out->create);
  Rebuilt r;
  for (size_t i = 0; i <= kRecreateReps && fresh.on; ++i) {
    if (Rebuild(&fresh, VYRE_EGRAPH_REBUILD_RESET, unions, &r) && i > 0) out->reset.Add(r);
  }
  if (fresh.on && canonical != nullptr) ReadCanonical(&fresh, d.classes_after, canonical);
  out->ran = fresh.on;
  out->error = fresh.error;
  fresh.Destroy();
}

void CompareCanonical(const std::vector<uint32_t>& a, const std::string& a_name,
                      const std::vector<uint32_t>& b, const std::string& b_name,
                      const std::string& when, LoopResult* out) {
  const int64_t at = FirstDifference(a, b);
  if (at < 0) {
    out->checks.push_back(a_name + " = " + b_name + " " + when + " (" + Count(a.size()) +
                          " classes)");
    return;
  }
  const uint32_t av = at < static_cast<int64_t>(a.size()) ? a[at] : 0;
  const uint32_t bv = at < static_cast<int64_t>(b.size()) ? b[at] : 0;
  const std::string line = Format(
      "saturation loop: canonical classes differ %s, %s vs %s: class "
      "%" PRId64 " -> %u vs %u",
      when.c_str(), a_name.c_str(), b_name.c_str(), at, av, bv);
  out->checks.push_back("**MISMATCH**: " + line);
  out->problems.push_back(line);
}

// The GPU's and the CPU's canonical classes, now (`classes` of them).
void CompareEngines(Side* gpu, Side* cpu, uint64_t classes, const std::string& when,
                    LoopResult* out) {
  std::vector<uint32_t> on_gpu, on_cpu;
  if (!gpu->on || !cpu->on) {
    out->checks.push_back("GPU vs CPU " + when + ": not compared (" +
                          (gpu->on                            ? "the CPU failed"
                           : gpu->made || !gpu->error.empty() ? "the GPU failed"
                                                              : "GPU unavailable") +
                          ")");
    return;
  }
  if (ReadCanonical(gpu, classes, &on_gpu) && ReadCanonical(cpu, classes, &on_cpu)) {
    CompareCanonical(on_gpu, "GPU", on_cpu, "CPU", when, out);
  }
}

void CompareChanged(const StepRow& row, size_t step, LoopResult* out) {
  if (row.gpu.changed_read < 0 || row.cpu.changed_read < 0) return;
  if (row.gpu.changed == row.cpu.changed) return;
  const std::string line =
      Format("saturation loop step %zu: changed pairs differ, GPU %zu vs CPU %zu", step,
             row.gpu.changed.size() / 2, row.cpu.changed.size() / 2);
  out->checks.push_back("**MISMATCH**: " + line);
  out->problems.push_back(line);
}

std::string StepWhen(size_t steps_done) {
  return steps_done == 0 ? "after the one-union rebuilds" : Format("after step %zu", steps_done);
}

void PrintStep(size_t step, const StepRow& row) {
  auto part = [](const char* name, const StepRun& run) {
    if (!run.ran) return Format("%s -", name);
    return Format("%s append %s, rebuild %s (%u rounds, %s rows)", name,
                  Duration(run.append).c_str(), Duration(run.rebuild.wall).c_str(),
                  run.rebuild.result.rounds, Count(run.rebuild.result.rows_visited).c_str());
  };
  std::printf("  step %zu: %s; %s; re-create + RESET %s\n", step, part("GPU", row.gpu).c_str(),
              part("CPU", row.cpu).c_str(), MedianTime(row.recreate.reset.wall).c_str());
  std::fflush(stdout);
}

// After the last step: the re-created image against the incremental ones.
void CheckRecreated(const std::vector<uint32_t>& recreated, uint64_t classes, Side* gpu, Side* cpu,
                    bool cpu_active, size_t step, LoopResult* out) {
  const std::string when = Format("after step %zu", step);
  std::vector<uint32_t> canonical;
  if (gpu->on && ReadCanonical(gpu, classes, &canonical)) {
    CompareCanonical(canonical, "GPU incremental", recreated, "GPU re-created (RESET)", when, out);
  }
  if (cpu_active && cpu->on && ReadCanonical(cpu, classes, &canonical)) {
    CompareCanonical(canonical, "CPU incremental", recreated, "GPU re-created (RESET)", when, out);
  }
}

// Without a GPU: the CPU image against a CPU image re-created from the same
// host columns and RESET-rebuilt with every union so far (untimed).
void CheckCpuRecreated(const Plan& p, const std::vector<uint32_t>& unions, uint64_t rows,
                       uint64_t classes, uint64_t children, Side* cpu, const std::string& when,
                       LoopResult* out) {
  Side fresh;
  double seconds = 0;
  Rebuilt r;
  std::vector<uint32_t> recreated, incremental;
  fresh.Create(OnCpu(PrefixDesc(p.all, rows, classes, children)), &seconds);
  if (fresh.on && Rebuild(&fresh, VYRE_EGRAPH_REBUILD_RESET, unions, &r) &&
      ReadCanonical(&fresh, classes, &recreated) && ReadCanonical(cpu, classes, &incremental)) {
    CompareCanonical(incremental, "CPU incremental", recreated, "CPU re-created (RESET)", when,
                     out);
  }
  if (!fresh.error.empty())
    out->problems.push_back("saturation loop, CPU re-create: " + fresh.error);
  fresh.Destroy();
}

// The CPU's last step (`done` steps in): GPU against CPU, and without a GPU
// the CPU against a re-created CPU image.
void FinishCpu(const GpuTarget& gpu_target, const Plan& p, const std::vector<uint32_t>& unions,
               size_t done, Side* gpu, Side* cpu, LoopResult* out) {
  const uint64_t rows = done == 0 ? p.rows0 : p.steps[done - 1].rows_after;
  const uint64_t classes = done == 0 ? p.classes0 : p.steps[done - 1].classes_after;
  const uint64_t children = done == 0 ? p.children0 : p.steps[done - 1].children_after;
  CompareEngines(gpu, cpu, classes, StepWhen(done), out);
  if (!gpu_target.available && cpu->on) {
    CheckCpuRecreated(p, unions, rows, classes, children, cpu, StepWhen(done), out);
  }
}

void RunSteps(const Options& o, const GpuTarget& gpu_target, const Plan& p, Side* gpu, Side* cpu,
              std::vector<uint32_t>* applied, LoopResult* out) {
  const double cpu_budget = o.cpu_seconds * kCpuLoopShare;
  double cpu_spent = 0, cpu_last = 0;
  bool cpu_active = cpu->on;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const StepData& d = p.steps[s];
    if (cpu_active && s > 0 && cpu_spent + cpu_last > cpu_budget) {
      FinishCpu(gpu_target, p, *applied, s, gpu, cpu, out);
      cpu_active = false;
      out->cpu_stopped = true;
    }
    StepRow row;
    row.rows = d.rows_after;
    row.classes = d.classes_after;
    if (gpu->on) RunStep(gpu, d, &row.gpu);
    ReadChanged(gpu, &row.gpu);
    if (cpu_active && cpu->on) {
      const Clock::time_point start = Clock::now();
      RunStep(cpu, d, &row.cpu);
      ReadChanged(cpu, &row.cpu);
      cpu_last = SecondsSince(start);
      cpu_spent += cpu_last;
      out->cpu_steps += row.cpu.ran ? 1 : 0;
    }
    applied->insert(applied->end(), d.unions.begin(), d.unions.end());
    const bool last = s + 1 == p.steps.size();
    std::vector<uint32_t> recreated;
    if (gpu_target.available) {
      RunRecreate(gpu_target, p, d, *applied, &row.recreate, last ? &recreated : nullptr);
    }
    if (last && row.recreate.ran) {
      CheckRecreated(recreated, d.classes_after, gpu, cpu, cpu_active, s + 1, out);
    }
    CompareChanged(row, s + 1, out);
    PrintStep(s + 1, row);
    out->steps.push_back(std::move(row));
  }
  if (cpu_active) FinishCpu(gpu_target, p, *applied, p.steps.size(), gpu, cpu, out);
}

void RecordErrors(const Side& gpu, const Side& cpu, LoopResult* out) {
  out->gpu_error = gpu.error;
  out->cpu_error = cpu.error;
  out->gpu_changed_error = gpu.changed_error;
  out->cpu_changed_error = cpu.changed_error;
  for (const StepRow& row : out->steps) {
    if (!row.recreate.error.empty()) {
      out->problems.push_back("saturation loop, GPU re-create: " + row.recreate.error);
      break;
    }
  }
  for (const std::string* error :
       {&out->gpu_error, &out->cpu_error, &out->gpu_changed_error, &out->cpu_changed_error}) {
    if (!error->empty()) out->problems.push_back("saturation loop: " + *error);
  }
}

LoopResult RunLoop(const Options& o, const GpuTarget& gpu_target, const Graph& g) {
  LoopResult out;
  const Plan p = PlanLoop(o, g);
  out.ran = true;
  out.rows0 = p.rows0;
  out.classes0 = p.classes0;
  out.step_rows = p.step_rows;
  out.steps_planned = p.steps.size();
  out.row_capacity = p.row_capacity;
  out.class_capacity = p.class_capacity;
  out.child_capacity = p.child_capacity;
  std::printf("  loop plan: %zu steps of %s rows and %" PRIu64 " unions (%.2f s to plan)\n",
              p.steps.size(), Count(p.step_rows).c_str(), o.loop_unions, p.seconds);
  Side gpu, cpu;
  SetUp(gpu_target, g, p, &gpu, &cpu, &out);
  std::vector<uint32_t> applied;  // every union so far, for the re-created images
  if (!o.skip_one_union) RunOneUnion(o, p, &gpu, &cpu, &applied, &out);
  RunSteps(o, gpu_target, p, &gpu, &cpu, &applied, &out);
  RecordErrors(gpu, cpu, &out);
  gpu.Destroy();
  cpu.Destroy();
  return out;
}

// --- Report: one union ------------------------------------------------------------

std::string GpuOr(const GpuTarget& gpu, const std::string& value) {
  return gpu.available ? value : "unavailable";
}

std::string UnionRow(const char* what, const GpuTarget& gpu, const Samples& on_gpu,
                     const Samples& on_cpu) {
  const Samples& any = on_gpu.wall.empty() ? on_cpu : on_gpu;
  const std::string cpu_runs = on_cpu.wall.empty() ? ""
                                                   : Format(" (%zu run%s)", on_cpu.wall.size(),
                                                            on_cpu.wall.size() == 1 ? "" : "s");
  return "| " + std::string(what) + " | " + std::to_string(on_gpu.wall.size()) + " | " +
         GpuOr(gpu, MedianTime(on_gpu.wall)) + " | " + GpuOr(gpu, MedianTime(on_gpu.device)) +
         " | " + MedianRange(any.rounds) + " | " + MedianRange(any.rows_visited) + " | " +
         MedianRange(any.changed) + " | " + MedianTime(on_cpu.wall) + cpu_runs + " |\n";
}

std::string OneUnionSection(const Options& o, const GpuTarget& gpu, const Graph* g,
                            const LoopResult& r) {
  std::string out = "\n### Issue 20: one union on a closed image (" +
                    (g != nullptr ? g->name + ", " : std::string()) + GpuLabel(gpu) + ")\n\n";
  if (g == nullptr || o.skip_one_union || !r.one_union_ran) {
    out += g == nullptr       ? "Not run: no synthetic size run (--sizes).\n"
           : o.skip_one_union ? "Not run: --skip-one-union.\n"
                              : "Not run: no image (see the saturation loop's errors).\n";
    return out;
  }
  out +=
      "| rebuild | GPU runs | GPU wall (median) | GPU device (median) | rounds | rows visited | "
      "changed classes | CPU, every core (wall, median) |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  out += UnionRow("full: RESET, every class alone, to the fixpoint", gpu, r.gpu_full, r.cpu_full);
  out += UnionRow("one union of two canonical classes, no RESET", gpu, r.gpu_one, r.cpu_one);
  out += "\n| target | measured | met |\n|---|---:|---|\n";
  if (r.gpu_one.wall.empty()) {
    out += Format("| one-union rebuild <= %.1f ms | %s | n/a |\n", kTargetOneUnionMs,
                  gpu.available ? "GPU failed" : "GPU unavailable");
  } else {
    const double wall = Median(r.gpu_one.wall), full = Median(r.gpu_full.wall);
    out += Format(
        "| one-union rebuild <= %.1f ms | %s wall (%s device), %.2f%% of the full "
        "rebuild's %s | %s |\n",
        kTargetOneUnionMs, Duration(wall).c_str(), Duration(Median(r.gpu_one.device)).c_str(),
        100 * wall / full, Duration(full).c_str(),
        Verdict(wall * 1e3 <= kTargetOneUnionMs).c_str());
  }
  out += Format(
      "\nThe saturation loop's images (created with room for its steps) after their RESET "
      "rebuild to the fixpoint (GPU: 1 warm-up, then %zu; CPU: once). Then 1 warm-up and %zu "
      "rebuilds without RESET, each with one union of a random pair of classes whose canonical "
      "classes differ, on the image the previous ones closed; the CPU did each of them (at least "
      "one after the warm-up) while they fit in 1/16 of --cpu-seconds%s. Wall = host clock around "
      "vyre_egraph_rebuild, "
      "device = device_ns (DEVICE_TIMING); rounds, rows visited and changed classes: median "
      "(range) over the runs, the GPU's (the CPU's without a GPU).\n",
      kFullReps, o.union_reps,
      r.cpu_one_batched > 0
          ? Format(" (the last %zu in one untimed rebuild)", r.cpu_one_batched).c_str()
          : "");
  return out;
}

// --- Report: the loop ------------------------------------------------------------

// A GPU step cell: unavailable, failed (the GPU stopped), or the value.
std::string GpuStepCell(const GpuTarget& gpu, const StepRun& run, const std::string& value) {
  if (!gpu.available) return "unavailable";
  return run.ran ? value : "failed";
}

std::string CpuStepCell(const StepRun& run, const std::string& value) {
  return run.ran ? value : "-";
}

std::string RoundsCell(const vyre_egraph_rebuild_result& r) {
  return Format("%u (%u full)", r.rounds, r.full_rounds);
}

std::string ChangedReadCell(const StepRun& run) {
  return run.changed_read < 0 ? "n/a" : Duration(run.changed_read);
}

// The incremental rebuild over the re-created image's RESET rebuild; < 0: none.
double StepShare(const StepRow& row) {
  if (!row.gpu.ran || row.recreate.reset.wall.empty()) return -1;
  return row.gpu.rebuild.wall / Median(row.recreate.reset.wall);
}

std::string StepLine(const GpuTarget& gpu, size_t step, const StepRow& row) {
  const StepRun& g = row.gpu;
  const StepRun& c = row.cpu;
  const double share = StepShare(row);
  const std::string recreate = row.recreate.ran ? Duration(row.recreate.create) + " / " +
                                                      MedianTime(row.recreate.reset.wall) + " (" +
                                                      MedianTime(row.recreate.reset.device) + ")"
                                                : GpuOr(gpu, "failed");
  return "| " + std::to_string(step) + " | " + Count(row.rows) + " | " + Count(row.classes) +
         " | " + GpuStepCell(gpu, g, Duration(g.append) + (g.grew ? " (grew)" : "")) + " | " +
         GpuStepCell(
             gpu, g,
             Duration(g.rebuild.wall) + " / " + Duration(g.rebuild.result.device_ns * 1e-9)) +
         " | " + GpuStepCell(gpu, g, RoundsCell(g.rebuild.result)) + " | " +
         GpuStepCell(gpu, g, Count(g.rebuild.result.rows_visited)) + " | " +
         GpuStepCell(gpu, g, Count(g.rebuild.result.changed_class_count)) + " | " +
         GpuStepCell(gpu, g, ChangedReadCell(g)) + " | " + recreate + " | " +
         (share < 0 ? GpuOr(gpu, "n/a") : Format("%.1f%%", 100 * share)) + " | " +
         CpuStepCell(c, Duration(c.append) + (c.grew ? " (grew)" : "")) + " | " +
         CpuStepCell(c, Duration(c.rebuild.wall)) + " | " +
         CpuStepCell(c, RoundsCell(c.rebuild.result)) + " | " +
         CpuStepCell(c, Count(c.rebuild.result.rows_visited)) + " | " +
         CpuStepCell(c, ChangedReadCell(c)) + " |\n";
}

std::string SetupLine(const GpuTarget& gpu, const LoopResult& r) {
  const std::string gpu_full =
      r.gpu_full.wall.empty() ? GpuOr(gpu, "failed")
                              : MedianTime(r.gpu_full.wall) + " / " + MedianTime(r.gpu_full.device);
  auto rounds = [](const Samples& s) {
    return s.rounds.empty() ? std::string("n/a") : MedianRange(s.rounds);
  };
  return "| 0: create + full rebuild | " + Count(r.rows0) + " | " + Count(r.classes0) +
         " | create " + GpuOr(gpu, Duration(r.gpu_create)) + " | " + gpu_full + " | " +
         GpuOr(gpu, rounds(r.gpu_full)) + " | " + GpuOr(gpu, MedianRange(r.gpu_full.rows_visited)) +
         " | | | | | create " + Duration(r.cpu_create) + " | " + MedianTime(r.cpu_full.wall) +
         " | " + rounds(r.cpu_full) + " | " + MedianRange(r.cpu_full.rows_visited) + " | |\n";
}

// Medians over the steps that ran.
std::string MedianLine(const std::vector<StepRow>& steps) {
  std::vector<double> ga, gr, gd, gc, rc, rr, share, ca, cr, cc;
  for (const StepRow& row : steps) {
    if (row.gpu.ran) {
      ga.push_back(row.gpu.append);
      gr.push_back(row.gpu.rebuild.wall);
      gd.push_back(row.gpu.rebuild.result.device_ns * 1e-9);
      if (row.gpu.changed_read >= 0) gc.push_back(row.gpu.changed_read);
    }
    if (row.recreate.ran) {
      rc.push_back(row.recreate.create);
      rr.push_back(Median(row.recreate.reset.wall));
    }
    if (StepShare(row) >= 0) share.push_back(StepShare(row));
    if (row.cpu.ran) {
      ca.push_back(row.cpu.append);
      cr.push_back(row.cpu.rebuild.wall);
      if (row.cpu.changed_read >= 0) cc.push_back(row.cpu.changed_read);
    }
  }
  return "| median of the steps | | | " + MedianTime(ga) + " | " + MedianTime(gr) + " / " +
         MedianTime(gd) + " | | | | " + MedianTime(gc) + " | " + MedianTime(rc) + " / " +
         MedianTime(rr) + " | " +
         (share.empty() ? std::string("n/a") : Format("%.1f%%", 100 * Median(share))) + " | " +
         MedianTime(ca) + " | " + MedianTime(cr) + " | | | " + MedianTime(cc) + " |\n";
}

std::string LoopTarget(const GpuTarget& gpu, const LoopResult& r) {
  std::vector<double> shares;
  size_t over = 0;
  for (const StepRow& row : r.steps) {
    const double share = StepShare(row);
    if (share < 0) continue;
    shares.push_back(share);
    over += share > kTargetIncrementalShare ? 1 : 0;
  }
  std::string out = "\n| target | measured | met |\n|---|---:|---|\n";
  const std::string target = Format(
      "incremental rebuild after %s rows + unions <= %.0f%% of a full rebuild of the same image",
      Count(r.step_rows).c_str(), 100 * kTargetIncrementalShare);
  if (r.steps.empty()) return out + "| " + target + " | no steps (--loop-steps 0) | n/a |\n";
  if (shares.empty()) {
    return out + "| " + target + " | " + (gpu.available ? "GPU failed" : "GPU unavailable") +
           " | n/a |\n";
  }
  const double worst = *std::max_element(shares.begin(), shares.end());
  return out + "| " + target +
         Format(" | median %.1f%%, worst %.1f%% (%zu of %zu steps over) | ", 100 * Median(shares),
                100 * worst, over, shares.size()) +
         Verdict(over == 0 && shares.size() == r.steps.size()) + " |\n";
}

std::string LoopNotes(const Options& o, const LoopResult& r) {
  bool grew = false;
  for (const StepRow& row : r.steps) grew = grew || row.gpu.grew || row.cpu.grew;
  std::string out = Format(
      "\nEach step appends %s rows (%.3g%% of the graph's): half copies of random existing rows "
      "(op and children) in a new class each, which congruence merges back; half fresh (a random "
      "row's op and arity over random existing classes), half of those in new classes; then "
      "rebuilds without RESET after %" PRIu64
      " random unions, then reads the changed pairs (vyre_egraph_changed_read, timed apart). "
      "Images created with capacity for every step (rows %s, classes %s, children %s; 1 + steps "
      "x percent, or more if the steps need it); an append that grew it is marked (grew)%s. "
      "Rebuild cells: wall / device. Re-create: vyre_egraph_image_create (GPU) from the same "
      "host columns as they are after the step, then its RESET rebuild with every union so "
      "far (1 warm-up, then the median of %zu: wall (device)); incremental / full = the step's "
      "GPU rebuild wall over that RESET rebuild's. CPU: the library's CPU reference on every "
      "core, the same steps on its own image.",
      Count(r.step_rows).c_str(), o.loop_percent, o.loop_unions, Count(r.row_capacity).c_str(),
      Count(r.class_capacity).c_str(), Count(r.child_capacity).c_str(), grew ? "" : " (none did)",
      kRecreateReps);
  if (r.cpu_stopped) {
    out += Format(
        " The CPU ran %zu of the %zu steps: the next would have passed a quarter of "
        "--cpu-seconds (%.3g s).",
        r.cpu_steps, r.steps.size(), o.cpu_seconds * kCpuLoopShare);
  }
  out += "\n\nChecks:\n";
  for (const std::string& check : r.checks) out += "- " + check + "\n";
  for (const std::string* error :
       {&r.gpu_error, &r.cpu_error, &r.gpu_changed_error, &r.cpu_changed_error}) {
    if (!error->empty()) out += "- failed: " + *error + "\n";
  }
  return out;
}

std::string LoopSection(const Options& o, const GpuTarget& gpu, const Graph* g,
                        const LoopResult& r) {
  std::string out = "\n### Issue 20: saturation loop (" +
                    (g != nullptr ? g->name + ", " : std::string()) +
                    Format("%zu steps of %.3g%% rows + %" PRIu64 " unions; ", o.loop_steps,
                           o.loop_percent, o.loop_unions) +
                    GpuLabel(gpu) + ")\n\n";
  if (g == nullptr || o.skip_loop || !r.ran) {
    return out + (g == nullptr ? "Not run: no synthetic size run (--sizes).\n"
                               : "Not run: --skip-loop.\n");
  }
  out +=
      "| step | rows | classes | GPU append | GPU rebuild (wall / device) | GPU rounds | GPU rows "
      "visited | GPU changed classes | GPU changed read | GPU re-create / RESET rebuild | "
      "incremental / full | CPU append | CPU rebuild | CPU rounds | CPU rows visited | CPU "
      "changed read |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  out += SetupLine(gpu, r);
  for (size_t s = 0; s < r.steps.size(); ++s) out += StepLine(gpu, s + 1, r.steps[s]);
  out += MedianLine(r.steps);
  return out + LoopTarget(gpu, r) + LoopNotes(o, r);
}

}  // namespace

FirstCreate TimeFirstCreate(const GpuTarget& gpu, const Graph& g) {
  FirstCreate first;
  first.on = g.name;
  double seconds = 0;
  if (TimedCreate(OnGpu(WholeDesc(g.columns), gpu), &seconds, &first.error)) {
    first.measured = true;
    first.seconds = seconds;
  }
  std::printf("first image create of the process (%s): %s\n\n", g.name.c_str(),
              first.measured ? Duration(seconds).c_str() : first.error.c_str());
  std::fflush(stdout);
  return first;
}

GrowingOutput RunGrowingCases(const Options& options, const GpuTarget& gpu,
                              const FirstCreate& first, const Graph* g) {
  GrowingOutput out;
  if (g != nullptr) std::printf("issue 20 cases on %s:\n", g->name.c_str());
  CreateCase create;
  create.why_not = g == nullptr ? "no synthetic size run (--sizes)" : "--skip-create";
  if (g != nullptr && !options.skip_create) create = RunCreateCase(options, gpu, *g);
  LoopResult loop;
  if (g != nullptr && !(options.skip_one_union && options.skip_loop)) {
    loop = RunLoop(options, gpu, *g);
  }
  out.markdown = CreateSection(gpu, first, g, create) + OneUnionSection(options, gpu, g, loop) +
                 LoopSection(options, gpu, g, loop);
  for (const std::string* error : std::initializer_list<const std::string*>{
           &first.error, &create.pageable.error, &create.pinned.error}) {
    if (!error->empty()) out.problems.push_back("image creation case: " + *error);
  }
  out.problems.insert(out.problems.end(), loop.problems.begin(), loop.problems.end());
  return out;
}

}  // namespace egraph_bench
