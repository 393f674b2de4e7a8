// E-graph congruence on the GPU against the library's CPU reference (CPU
// images, the same API with VYRE_EGRAPH_DEVICE_CPU): canonical classes,
// result counts and pass pairs must be identical, since both name a class by
// the minimum id of its set.
//
// Inputs: the e-graphs of tests/data/egraphs, widened where present by
// VYRE_EGRAPHS_DIR (default ../shared/egraphs next to the source tree; a
// relative path is tried from the working directory, then from the source
// tree; see tests/data/egraph_files.h), each with every e-node in its own
// class and with its file classes under random unions; hand-made graphs;
// synthetic graphs (tools/egraph/synthetic.h). Tests named *Large* are skipped by the
// compute-sanitizer run (scripts/gpu-suite.sh); *Medium* is its workload.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "egraph/json_loader.h"
#include "egraph/synthetic.h"
#include "egraph_files.h"
#include "gpu_test_env.h"

namespace vyre_test {
namespace {

using ImageHandle = UniqueHandle<vyre_egraph_image, vyre_egraph_image_destroy>;
using Pairs = std::vector<std::pair<uint32_t, uint32_t>>;
using vyre::tools::EgraphColumns;

// ---------------------------------------------------------------------------
// Graphs
// ---------------------------------------------------------------------------

// Appends the row op(kids) in class `cls`.
void AddRow(EgraphColumns* g, uint32_t cls, uint32_t op, const std::vector<uint32_t>& kids) {
  g->row_classes.push_back(cls);
  g->row_ops.push_back(op);
  g->child_offsets.push_back(static_cast<uint32_t>(g->children.size()));
  g->child_lengths.push_back(static_cast<uint32_t>(kids.size()));
  g->children.insert(g->children.end(), kids.begin(), kids.end());
  g->classes = std::max<uint64_t>(g->classes, uint64_t{cls} + 1);
  for (uint32_t k : kids) g->classes = std::max<uint64_t>(g->classes, uint64_t{k} + 1);
}

vyre_egraph_image_desc DescOf(const EgraphColumns& g, vyre_egraph_device device,
                              vyre_context context, uint32_t cpu_threads = 0) {
  vyre_egraph_image_desc d = VYRE_EGRAPH_IMAGE_DESC_INIT;
  d.device = device;
  d.context = device == VYRE_EGRAPH_DEVICE_GPU ? context : vyre_context{};
  d.row_count = g.rows();
  d.class_count = g.classes;
  d.child_count = g.children.size();
  d.row_classes = g.row_classes.data();
  d.row_ops = g.row_ops.data();
  d.child_offsets = g.child_offsets.data();
  d.child_lengths = g.child_lengths.data();
  d.children = g.children.data();
  d.cpu_threads = cpu_threads;
  return d;
}

std::vector<uint32_t> RandomUnions(uint64_t seed, uint64_t classes, uint32_t count) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::vector<uint32_t> unions(uint64_t{count} * 2);
  for (uint32_t& u : unions) u = static_cast<uint32_t>(rng() % std::max<uint64_t>(classes, 1));
  return unions;
}

std::string Describe(const vyre_egraph_rebuild_result& r) {
  return "rounds " + std::to_string(r.rounds) + ", merges " + std::to_string(r.merges) +
         ", union_merges " + std::to_string(r.union_merges) + ", classes " +
         std::to_string(r.classes_before) + " -> " + std::to_string(r.classes_after) +
         ", rows_visited " + std::to_string(r.rows_visited);
}

// Compares two canonical columns; names the first few differences.
::testing::AssertionResult SameClasses(const std::vector<uint32_t>& actual,
                                       const std::vector<uint32_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << actual.size() << " vs " << expected.size();
  }
  uint64_t differ = 0;
  std::string first;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == expected[i]) continue;
    if (++differ <= 5) {
      first += " [" + std::to_string(i) + "] " + std::to_string(actual[i]) + " vs " +
               std::to_string(expected[i]) + ";";
    }
  }
  if (differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << differ << " of " << actual.size() << " classes differ (GPU vs CPU):" << first;
}

// ---------------------------------------------------------------------------
// Runs through the API
// ---------------------------------------------------------------------------

struct RebuildSpec {
  std::vector<uint32_t> unions;
  uint32_t flags = 0;
  uint32_t max_rounds = 0;
};

struct RebuildOutcome {
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  std::vector<uint32_t> canonical;  // canonical_out
};

// A synchronous rebuild; canonical_out, and the CANONICAL_CLASSES column read
// afterwards, which must agree with it.
RebuildOutcome Rebuild(vyre_egraph_image image, uint64_t classes, const RebuildSpec& spec) {
  RebuildOutcome out;
  out.canonical.assign(classes, kPoisonU32);
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.flags = spec.flags;
  desc.unions = spec.unions.empty() ? nullptr : spec.unions.data();
  desc.union_count = spec.unions.size() / 2;
  desc.max_rounds = spec.max_rounds;
  desc.canonical_out = out.canonical.data();
  EXPECT_VYRE_OK(vyre_egraph_rebuild(image, &desc, &out.result));
  std::vector<uint32_t> column(classes, kPoisonU32);
  EXPECT_VYRE_OK(vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0, classes,
                                        column.data()));
  EXPECT_TRUE(SameClasses(column, out.canonical))
      << "the CANONICAL_CLASSES column disagrees with canonical_out";
  return out;
}

Pairs Pass(vyre_egraph_image image) {
  uint64_t count = UINT64_MAX;
  EXPECT_VYRE_OK(vyre_egraph_pass(image, nullptr, 0, &count));
  if (count == UINT64_MAX) return {};
  std::vector<uint32_t> flat(count * 2 + 2, kPoisonU32);
  uint64_t again = UINT64_MAX;
  EXPECT_VYRE_OK(vyre_egraph_pass(image, flat.data(), count, &again));
  EXPECT_EQ(again, count);
  EXPECT_EQ(flat[count * 2], kPoisonU32) << "the pass wrote past its pairs";
  Pairs pairs;
  for (uint64_t i = 0; i < std::min(count, again); ++i)
    pairs.emplace_back(flat[2 * i], flat[2 * i + 1]);
  return pairs;
}

// Pairs as the contract has them: left < right, sorted, no duplicates.
::testing::AssertionResult WellFormed(const Pairs& pairs) {
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].first >= pairs[i].second) {
      return ::testing::AssertionFailure() << "pair " << i << " (" << pairs[i].first << ", "
                                           << pairs[i].second << ") has left >= right";
    }
    if (i > 0 && !(pairs[i - 1] < pairs[i])) {
      return ::testing::AssertionFailure()
             << "pairs " << i - 1 << " and " << i << " are not strictly ascending";
    }
  }
  return ::testing::AssertionSuccess();
}

// The same graph as a GPU image and as a CPU image (the reference).
class Twin {
 public:
  Twin(const EgraphColumns& g, vyre_context context, uint32_t cpu_threads = 0)
      : classes_(g.classes) {
    vyre_egraph_image_desc gpu = DescOf(g, VYRE_EGRAPH_DEVICE_GPU, context);
    vyre_egraph_image_desc cpu = DescOf(g, VYRE_EGRAPH_DEVICE_CPU, context, cpu_threads);
    EXPECT_VYRE_OK(vyre_egraph_image_create(&gpu, gpu_.out()));
    EXPECT_VYRE_OK(vyre_egraph_image_create(&cpu, cpu_.out()));
  }
  bool ok() const { return gpu_.valid() && cpu_.valid(); }
  vyre_egraph_image gpu() const { return gpu_.get(); }
  vyre_egraph_image cpu() const { return cpu_.get(); }
  uint64_t classes() const { return classes_; }

  // Rebuilds both with `spec` and checks they agree exactly. The reference
  // always hashes normally (its weak hash is quadratic in the rows of one op
  // and arity, and the partition may not depend on the hash anyway).
  ::testing::AssertionResult RebuildBoth(const RebuildSpec& spec,
                                         RebuildOutcome* gpu_out = nullptr) {
    RebuildOutcome g = Rebuild(gpu_.get(), classes_, spec);
    RebuildSpec reference = spec;
    reference.flags &= ~uint32_t{VYRE_EGRAPH_REBUILD_COLLIDING_HASH};
    RebuildOutcome c = Rebuild(cpu_.get(), classes_, reference);
    ::testing::AssertionResult same = SameClasses(g.canonical, c.canonical);
    if (!same) return same << " (" << Describe(g.result) << " / CPU " << Describe(c.result) << ")";
    const auto& a = g.result;
    const auto& b = c.result;
    if (a.classes_after != b.classes_after || a.classes_before != b.classes_before ||
        a.merges != b.merges || a.union_merges != b.union_merges || a.rounds != b.rounds) {
      return ::testing::AssertionFailure()
             << "results differ: GPU " << Describe(a) << " / CPU " << Describe(b);
    }
    if (a.rows_visited < rows_for_check_) {
      return ::testing::AssertionFailure() << "GPU rows_visited " << a.rows_visited
                                           << " is below the row count " << rows_for_check_;
    }
    if (gpu_out != nullptr) *gpu_out = std::move(g);
    return ::testing::AssertionSuccess() << Describe(a);
  }

  // One pass on both: identical pairs, well formed.
  ::testing::AssertionResult PassBoth(uint64_t* pair_count = nullptr) {
    const Pairs g = Pass(gpu_.get());
    const Pairs c = Pass(cpu_.get());
    if (pair_count != nullptr) *pair_count = c.size();
    ::testing::AssertionResult formed = WellFormed(g);
    if (!formed) return formed << " (GPU pass)";
    if (g != c) {
      size_t i = 0;
      while (i < g.size() && i < c.size() && g[i] == c[i]) ++i;
      auto at = [i](const Pairs& p) {
        return i < p.size()
                   ? "(" + std::to_string(p[i].first) + ", " + std::to_string(p[i].second) + ")"
                   : std::string("end");
      };
      return ::testing::AssertionFailure()
             << "GPU pass " << g.size() << " pairs, CPU " << c.size() << "; first difference at "
             << i << ": GPU " << at(g) << " vs CPU " << at(c);
    }
    return ::testing::AssertionSuccess();
  }

  void set_rows(uint64_t rows) { rows_for_check_ = rows; }

 private:
  uint64_t classes_;
  uint64_t rows_for_check_ = 0;
  ImageHandle gpu_, cpu_;
};

// ---------------------------------------------------------------------------
// The e-graph files, loaded once per process
// ---------------------------------------------------------------------------

struct EgraphFile {
  std::string path;
  vyre::tools::LoadedEgraph file_classes;
  vyre::tools::LoadedEgraph own_classes;
};

struct LoadedFiles {
  EgraphFileSet set;  // tests/data/egraphs, and VYRE_EGRAPHS_DIR where present
  std::string error;  // a file that would not load
  std::vector<EgraphFile> files;
};

const LoadedFiles& Files() {
  static LoadedFiles* loaded = [] {
    auto* out = new LoadedFiles;
    out->set = FindEgraphFiles();
    for (const std::string& path : out->set.paths) {
      EgraphFile f;
      f.path = path;
      vyre::tools::LoadOptions options;
      vyre::tools::ToolStatus status =
          vyre::tools::LoadEgraphJsonFile(path, options, &f.file_classes);
      if (status.ok()) {
        options.own_class_per_node = true;
        status = vyre::tools::LoadEgraphJsonFile(path, options, &f.own_classes);
      }
      if (!status.ok()) {
        out->error = status.message;
        break;
      }
      out->files.push_back(std::move(f));
    }
    return out;
  }();
  return *loaded;
}

// With every e-node in its own class (class = row): unions of a random
// `share` of the nodes with the first node of their file class.
std::vector<uint32_t> FileClassUnions(const EgraphFile& f, double share, uint32_t seed) {
  std::vector<uint32_t> first(f.file_classes.classes, UINT32_MAX);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<uint32_t> unions;
  for (uint32_t r = 0; r < f.file_classes.rows(); ++r) {
    uint32_t& leader = first[f.file_classes.row_classes[r]];
    if (leader == UINT32_MAX) {
      leader = r;
    } else if (coin(rng) < share) {
      unions.push_back(r);
      unions.push_back(leader);
    }
  }
  return unions;
}

class EgraphGpuTest : public GpuTest {};

class EgraphFilesGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const LoadedFiles& files = Files();
    ASSERT_TRUE(files.error.empty()) << files.error;
    if (files.set.extra_from_env && files.set.extra_files == 0) {
      FAIL() << "VYRE_EGRAPHS_DIR=" << std::getenv("VYRE_EGRAPHS_DIR") << " (resolved to \""
             << files.set.extra_dir
             << "\") holds no *.json e-graph. Fix: point it at the extraction-gym e-graphs, "
                "or unset it (tests/data/egraphs is always used).";
    }
    if (files.set.builtin_files == 0) {
      FAIL() << "no e-graph files in \"" << files.set.builtin_dir
             << "\": the checkout lacks tests/data/egraphs. Fix: restore it (git checkout -- "
                "tests/data/egraphs).";
    }
  }
  const std::vector<EgraphFile>& files() const { return Files().files; }
};

// ===========================================================================
// The e-graph files
// ===========================================================================

// Every e-node in its own class: the pass over the identity state (every
// duplicated e-node a pair), then the closure.
TEST_F(EgraphFilesGpuTest, OwnClassPerNodeMatchesCpu) {
  for (const EgraphFile& f : files()) {
    SCOPED_TRACE(f.path);
    Twin twin(f.own_classes, context());
    ASSERT_TRUE(twin.ok());
    twin.set_rows(f.own_classes.rows());
    uint64_t pairs = 0;
    EXPECT_TRUE(twin.PassBoth(&pairs));
    EXPECT_TRUE(twin.RebuildBoth({}));
    EXPECT_TRUE(twin.PassBoth(&pairs));
    EXPECT_EQ(pairs, 0u) << "a closed image still has congruent pairs";
    // Again, from scratch, through RESET: the same answer.
    RebuildSpec reset;
    reset.flags = VYRE_EGRAPH_REBUILD_RESET;
    EXPECT_TRUE(twin.RebuildBoth(reset));
    // A serialized e-graph holds few duplicate e-nodes, so give congruence
    // work: a random share of the file's equalities as unions (each node
    // with the first node of its file class); one round, its pass, the rest.
    for (const double share : {0.25, 0.5, 1.0}) {
      SCOPED_TRACE("share of the file's equalities " + std::to_string(share));
      RebuildSpec spec;
      spec.flags = VYRE_EGRAPH_REBUILD_RESET;
      spec.unions = FileClassUnions(f, share, 17);
      spec.max_rounds = 1;
      EXPECT_TRUE(twin.RebuildBoth(spec));
      EXPECT_TRUE(twin.PassBoth());
      EXPECT_TRUE(twin.RebuildBoth({}));
      EXPECT_TRUE(twin.PassBoth(&pairs));
      EXPECT_EQ(pairs, 0u);
    }
  }
}

// File classes under random unions (as rewrites would add), several seeds;
// also the pass after one round, when some congruences are still open.
TEST_F(EgraphFilesGpuTest, FileClassesUnderRandomUnionsMatchCpu) {
  for (const EgraphFile& f : files()) {
    SCOPED_TRACE(f.path);
    Twin twin(f.file_classes, context());
    ASSERT_TRUE(twin.ok());
    twin.set_rows(f.file_classes.rows());
    EXPECT_TRUE(twin.PassBoth());
    EXPECT_TRUE(twin.RebuildBoth({}));  // closes the diospyros files
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      RebuildSpec spec;
      spec.flags = VYRE_EGRAPH_REBUILD_RESET;
      spec.unions = RandomUnions(seed, f.file_classes.classes, seed == 4 ? 500 : 50);
      spec.max_rounds = 1;
      EXPECT_TRUE(twin.RebuildBoth(spec));
      EXPECT_TRUE(twin.PassBoth());  // the congruences the first round opened
      RebuildSpec rest;              // then on to the fixpoint from that state
      EXPECT_TRUE(twin.RebuildBoth(rest));
      uint64_t pairs = 1;
      EXPECT_TRUE(twin.PassBoth(&pairs));
      EXPECT_EQ(pairs, 0u);
      // State persists: more unions on top.
      RebuildSpec more;
      more.unions = RandomUnions(seed + 100, f.file_classes.classes, 10);
      EXPECT_TRUE(twin.RebuildBoth(more));
    }
  }
}

// The weak hash (op and arity only) makes nearly every candidate a collision:
// the partitions must not change.
TEST_F(EgraphFilesGpuTest, CollidingHashGivesIdenticalPartitions) {
  for (const EgraphFile& f : files()) {
    SCOPED_TRACE(f.path);
    for (int which = 0; which < 2; ++which) {
      const vyre::tools::LoadedEgraph& g = which == 0 ? f.own_classes : f.file_classes;
      Twin twin(g, context());
      ASSERT_TRUE(twin.ok());
      RebuildSpec spec;
      spec.flags = VYRE_EGRAPH_REBUILD_RESET;
      if (which == 1) spec.unions = RandomUnions(7, g.classes, 50);
      RebuildOutcome strong;
      ASSERT_TRUE(twin.RebuildBoth(spec, &strong));
      spec.flags |= VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
      RebuildOutcome weak;
      EXPECT_TRUE(twin.RebuildBoth(spec, &weak)) << (which == 0 ? "own classes" : "file classes");
      EXPECT_TRUE(SameClasses(weak.canonical, strong.canonical));
      EXPECT_EQ(weak.result.merges, strong.result.merges);
      EXPECT_EQ(weak.result.rounds, strong.result.rounds);
      // The pass after a colliding-hash rebuild still finds nothing.
      uint64_t pairs = 1;
      EXPECT_TRUE(twin.PassBoth(&pairs));
      EXPECT_EQ(pairs, 0u);
    }
  }
}

// Rounds on the device (VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS, one loop graph
// per rebuild) give the partitions, merges and rounds of host-driven batches
// and of the CPU, on every real e-graph, from scratch and after unions.
TEST_F(EgraphFilesGpuTest, DeviceRoundsGiveIdenticalResults) {
  for (const EgraphFile& f : files()) {
    SCOPED_TRACE(f.path);
    for (int which = 0; which < 2; ++which) {
      const vyre::tools::LoadedEgraph& g = which == 0 ? f.own_classes : f.file_classes;
      Twin twin(g, context());
      ASSERT_TRUE(twin.ok());
      RebuildSpec spec;
      spec.flags = VYRE_EGRAPH_REBUILD_RESET;
      if (which == 1) spec.unions = RandomUnions(11, g.classes, 50);
      RebuildOutcome host;
      ASSERT_TRUE(twin.RebuildBoth(spec, &host));
      spec.flags |= VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
      RebuildOutcome device;
      EXPECT_TRUE(twin.RebuildBoth(spec, &device)) << (which == 0 ? "own classes" : "file classes");
      EXPECT_TRUE(SameClasses(device.canonical, host.canonical));
      EXPECT_EQ(device.result.merges, host.result.merges);
      EXPECT_EQ(device.result.rounds, host.result.rounds);
      // Incremental after more unions, on the device again.
      RebuildSpec more;
      more.flags = VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
      more.unions = RandomUnions(12 + which, g.classes, 20);
      EXPECT_TRUE(twin.RebuildBoth(more, &device));
      uint64_t pairs = 1;
      EXPECT_TRUE(twin.PassBoth(&pairs));
      EXPECT_EQ(pairs, 0u);
    }
  }
}

// ===========================================================================
// Hand-made and synthetic graphs
// ===========================================================================

// Many rows with one op and arity that differ only in one child (first,
// middle or last position): never congruent, with the normal and the weak
// hash (where all of them collide); a union of two leaves joins exactly the
// two rows over them.
TEST_F(EgraphGpuTest, RowsDifferingInOneChildNeverMerge) {
  for (uint32_t position = 0; position < 3; ++position) {
    for (const bool weak : {false, true}) {
      SCOPED_TRACE("differing child " + std::to_string(position) + (weak ? ", weak hash" : ""));
      // The weak hash puts every row in one probe chain: keep it quadratic-safe.
      const uint32_t n = weak ? 6000 : 200000;
      EgraphColumns g;
      // Classes 0..n-1: distinct leaves; n, n+1: two shared leaves; then rows.
      for (uint32_t i = 0; i < n; ++i) AddRow(&g, i, 1000000 + i, {});
      AddRow(&g, n, 1, {});
      AddRow(&g, n + 1, 2, {});
      for (uint32_t i = 0; i < n; ++i) {
        std::vector<uint32_t> kids = {n, n + 1, n};
        kids[position] = i;
        AddRow(&g, n + 2 + i, 7, kids);
      }
      Twin twin(g, context());
      ASSERT_TRUE(twin.ok());
      RebuildSpec spec;
      spec.flags = weak ? uint32_t{VYRE_EGRAPH_REBUILD_COLLIDING_HASH} : 0u;
      RebuildOutcome out;
      ASSERT_TRUE(twin.RebuildBoth(spec, &out));
      EXPECT_EQ(out.result.merges, 0u) << Describe(out.result);
      EXPECT_EQ(out.result.classes_after, g.classes);
      EXPECT_EQ(out.result.rounds, 1u);
      uint64_t pairs = 1;
      EXPECT_TRUE(twin.PassBoth(&pairs));
      EXPECT_EQ(pairs, 0u);
      // Leaves 5 and 9 joined: exactly rows n+2+5 and n+2+9 merge.
      spec.unions = {9, 5};
      ASSERT_TRUE(twin.RebuildBoth(spec, &out));
      EXPECT_EQ(out.result.union_merges, 1u);
      EXPECT_EQ(out.result.merges, 1u) << Describe(out.result);
      EXPECT_EQ(out.canonical[n + 2 + 9], n + 2 + 5);
      EXPECT_EQ(out.result.classes_after, g.classes - 2);
    }
  }
}

// The pass with open congruences under the colliding hash: n pairs of
// leaves with one op each merge in the first round, which opens n pairs of
// rows over them, all of one op and arity and so of one weak hash (a GPU
// image's pass hashes as its last rebuild did). With few
// such forms the bucketed pass confirms each candidate; with thousands, its
// probe limit sends the pass to the table pass. Both must find the n pairs.
TEST_F(EgraphGpuTest, PassUnderCollidingHashMatchesCpu) {
  for (const uint32_t n : {200u, 6000u}) {
    SCOPED_TRACE("forms of one hash: " + std::to_string(n));
    EgraphColumns g;
    for (uint32_t i = 0; i < 2 * n; ++i) AddRow(&g, i, 1000000 + i / 2, {});
    for (uint32_t i = 0; i < 2 * n; ++i) AddRow(&g, 2 * n + i, 7, {i});
    Twin twin(g, context());
    ASSERT_TRUE(twin.ok());
    RebuildSpec spec;
    spec.flags = VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
    spec.max_rounds = 1;
    RebuildOutcome out;
    ASSERT_TRUE(twin.RebuildBoth(spec, &out));
    EXPECT_EQ(out.result.merges, n) << Describe(out.result);
    uint64_t pairs = 0;
    EXPECT_TRUE(twin.PassBoth(&pairs));
    EXPECT_EQ(pairs, n);
    ASSERT_TRUE(twin.RebuildBoth({}, &out));
    EXPECT_EQ(out.result.merges, n) << Describe(out.result);
    EXPECT_TRUE(twin.PassBoth(&pairs));
    EXPECT_EQ(pairs, 0u);
  }
}

// One form with many copies puts all of them in one bucket of the bucketed
// pass, far above the rows its block collects pairs for in shared memory:
// that block writes its pairs over its list entries instead. Around it,
// distinct leaves and small groups keep the other buckets ordinary.
TEST_F(EgraphGpuTest, PassWithOneHeavyBucketMatchesCpu) {
  constexpr uint32_t kCopies = 30000;
  constexpr uint32_t kDistinct = 50000;
  EgraphColumns g;
  uint32_t cls = 0;
  for (uint32_t i = 0; i < kCopies; ++i) AddRow(&g, cls++, 7, {});
  for (uint32_t i = 0; i < kDistinct; ++i) AddRow(&g, cls++, 1000000 + i / 3, {});
  Twin twin(g, context());
  ASSERT_TRUE(twin.ok());
  uint64_t pairs = 0;
  EXPECT_TRUE(twin.PassBoth(&pairs));
  // The copies give kCopies - 1 pairs; the leaves in threes two each.
  EXPECT_EQ(pairs, (kCopies - 1) + (kDistinct / 3) * 2 + (kDistinct % 3 == 2 ? 1 : 0));
  RebuildOutcome out;
  ASSERT_TRUE(twin.RebuildBoth({}, &out));
  EXPECT_TRUE(twin.PassBoth(&pairs));
  EXPECT_EQ(pairs, 0u);
}

// Two towers over leaves A and B, joined at the bottom: one round per level,
// far past the first batches of rounds; max_rounds stops early and the next
// rebuild goes on from there.
TEST_F(EgraphGpuTest, DeepChainMatchesCpuRoundForRound) {
  constexpr uint32_t kDepth = 300;
  EgraphColumns g;
  AddRow(&g, 0, 100, {});
  AddRow(&g, 1, 101, {});
  for (uint32_t i = 1; i <= kDepth; ++i) {
    AddRow(&g, 2 * i, 7, {2 * (i - 1)});
    AddRow(&g, 2 * i + 1, 7, {2 * (i - 1) + 1});
  }
  Twin twin(g, context());
  ASSERT_TRUE(twin.ok());
  RebuildSpec spec;
  spec.unions = {1, 0};
  RebuildOutcome out;
  ASSERT_TRUE(twin.RebuildBoth(spec, &out));
  EXPECT_EQ(out.result.rounds, kDepth + 1);
  EXPECT_EQ(out.result.merges, kDepth);
  for (uint32_t x = 0; x < g.classes; ++x) ASSERT_EQ(out.canonical[x], x & ~1u) << x;
  // The same with every row of the chain one hash: each probe meets the old
  // (stale) entries of the rows that changed before it, across the full
  // round the table takes after its 256th round.
  {
    RebuildSpec colliding;
    colliding.flags = VYRE_EGRAPH_REBUILD_RESET | VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
    colliding.unions = {1, 0};
    ASSERT_TRUE(twin.RebuildBoth(colliding, &out));
    EXPECT_EQ(out.result.rounds, kDepth + 1);
    EXPECT_EQ(out.result.merges, kDepth);
    for (uint32_t x = 0; x < g.classes; ++x) ASSERT_EQ(out.canonical[x], x & ~1u) << x;
  }
  // Every round on the device: the same 301 rounds, stopping exactly at the
  // fixpoint and at max_rounds.
  {
    RebuildSpec on_device;
    on_device.flags = VYRE_EGRAPH_REBUILD_RESET | VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
    on_device.unions = {1, 0};
    ASSERT_TRUE(twin.RebuildBoth(on_device, &out));
    EXPECT_EQ(out.result.rounds, kDepth + 1);
    EXPECT_EQ(out.result.merges, kDepth);
    for (uint32_t x = 0; x < g.classes; ++x) ASSERT_EQ(out.canonical[x], x & ~1u) << x;
    on_device.max_rounds = 37;
    ASSERT_TRUE(twin.RebuildBoth(on_device, &out));
    EXPECT_EQ(out.result.rounds, 37u);
    RebuildSpec rest;
    rest.flags = VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
    ASSERT_TRUE(twin.RebuildBoth(rest, &out));
    EXPECT_EQ(out.result.rounds, kDepth - 37 + 1);
  }
  for (uint32_t max_rounds : {1u, 3u, 4u, 5u, 63u, 64u, 65u, 200u}) {
    SCOPED_TRACE("max_rounds " + std::to_string(max_rounds));
    spec.flags = VYRE_EGRAPH_REBUILD_RESET;
    spec.max_rounds = max_rounds;
    ASSERT_TRUE(twin.RebuildBoth(spec, &out));
    EXPECT_EQ(out.result.rounds, max_rounds);
    EXPECT_EQ(out.result.merges, max_rounds);
    RebuildSpec rest;
    ASSERT_TRUE(twin.RebuildBoth(rest, &out));
    EXPECT_EQ(out.result.rounds, kDepth - max_rounds + 1);
  }
  EXPECT_TRUE(twin.PassBoth());
}

// Zero rows, with and without classes.
TEST_F(EgraphGpuTest, ZeroRows) {
  for (uint64_t classes : {uint64_t{0}, uint64_t{5}}) {
    SCOPED_TRACE("classes " + std::to_string(classes));
    EgraphColumns g;
    g.classes = classes;
    Twin twin(g, context());
    ASSERT_TRUE(twin.ok());
    RebuildOutcome out;
    ASSERT_TRUE(twin.RebuildBoth({}, &out));
    EXPECT_EQ(out.result.rounds, 1u);
    EXPECT_EQ(out.result.merges, 0u);
    EXPECT_EQ(out.result.classes_after, classes);
    uint64_t pairs = 1;
    EXPECT_TRUE(twin.PassBoth(&pairs));
    EXPECT_EQ(pairs, 0u);
    if (classes == 5) {
      RebuildSpec spec;
      spec.unions = {4, 2, 2, 3};
      ASSERT_TRUE(twin.RebuildBoth(spec, &out));
      EXPECT_EQ(out.result.union_merges, 2u);
      EXPECT_EQ(out.canonical, (std::vector<uint32_t>{0, 1, 2, 2, 2}));
    }
  }
}

// Random mid-sized graphs with few ops: many congruences, many rounds.
TEST_F(EgraphGpuTest, RandomGraphsMatchCpu) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const uint32_t classes = 1000 + static_cast<uint32_t>(rng() % 20000);
    const uint32_t rows = classes * (1 + static_cast<uint32_t>(rng() % 3));
    EgraphColumns g;
    g.classes = classes;
    for (uint32_t r = 0; r < rows; ++r) {
      const uint32_t op = static_cast<uint32_t>(rng() % 8);
      std::vector<uint32_t> kids(op % 4);
      for (uint32_t& k : kids) k = static_cast<uint32_t>(rng() % classes);
      AddRow(&g, static_cast<uint32_t>(rng() % classes), op, kids);
    }
    Twin twin(g, context());
    ASSERT_TRUE(twin.ok());
    twin.set_rows(rows);
    EXPECT_TRUE(twin.PassBoth());
    RebuildSpec spec;
    spec.unions = RandomUnions(seed, classes, 20);
    EXPECT_TRUE(twin.RebuildBoth(spec));
    spec.flags = VYRE_EGRAPH_REBUILD_RESET | VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
    spec.max_rounds = 2;
    EXPECT_TRUE(twin.RebuildBoth(spec));
    EXPECT_TRUE(twin.PassBoth());
  }
}

// An asynchronous rebuild: outputs written by the wait, the image refusing
// other calls meanwhile, a release without a wait finishing the rebuild.
TEST_F(EgraphGpuTest, AsyncRebuildAndWait) {
  const vyre::tools::SyntheticEgraph g = vyre::tools::GenerateSynthetic(1 << 18, 2, 11);
  Twin twin(g, context());
  ASSERT_TRUE(twin.ok());
  RebuildSpec spec;
  spec.unions = RandomUnions(3, g.classes, 100);
  RebuildOutcome expected = Rebuild(twin.cpu(), g.classes, spec);

  std::vector<uint32_t> canonical(g.classes, kPoisonU32);
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  result.rounds = 0xABCD;
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.unions = spec.unions.data();
  desc.union_count = spec.unions.size() / 2;
  desc.canonical_out = canonical.data();
  desc.result_out = &result;
  desc.flags = VYRE_EGRAPH_REBUILD_DEVICE_TIMING;
  PendingHandle pending;
  ASSERT_VYRE_OK(vyre_egraph_rebuild_async(twin.gpu(), &desc, pending.out()));
  // The caller's unions were read before the call returned.
  std::fill(spec.unions.begin(), spec.unions.end(), 0u);
  EXPECT_EQ(result.rounds, 0xABCDu) << "result_out written before the wait";
  EXPECT_EQ(canonical[0], kPoisonU32) << "canonical_out written before the wait";
  uint32_t word = 0;
  uint64_t count = 0;
  vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  vyre_pending second{};
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                     vyre_egraph_image_read(twin.gpu(), VYRE_EGRAPH_COLUMN_ROW_OPS, 0, 1, &word));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                     vyre_egraph_image_write(twin.gpu(), VYRE_EGRAPH_COLUMN_ROW_OPS, 0, 1, &word));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_egraph_image_info_get(twin.gpu(), &info));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_egraph_pass(twin.gpu(), nullptr, 0, &count));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE, vyre_egraph_rebuild(twin.gpu(), nullptr, nullptr));
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                     vyre_egraph_rebuild_async(twin.gpu(), nullptr, &second));
  EXPECT_EQ(second.bits, 0u);
  const vyre_status polled = vyre_pending_poll(pending.get());
  EXPECT_TRUE(polled == VYRE_STATUS_OK || polled == VYRE_STATUS_NOT_READY)
      << vyre_status_name(polled) << ": " << DescribeLastError();
  vyre_status waited = vyre_pending_wait(pending.get(), 0);
  if (waited == VYRE_STATUS_TIMEOUT) waited = vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER);
  ASSERT_EQ(waited, VYRE_STATUS_OK) << DescribeLastError();
  EXPECT_TRUE(SameClasses(canonical, expected.canonical));
  EXPECT_EQ(result.struct_size, sizeof(result));
  EXPECT_EQ(result.classes_after, expected.result.classes_after) << Describe(result);
  EXPECT_EQ(result.merges, expected.result.merges);
  EXPECT_EQ(result.union_merges, expected.result.union_merges);
  EXPECT_EQ(result.rounds, expected.result.rounds);
  EXPECT_GT(result.device_ns, 0u) << "DEVICE_TIMING asked for device_ns";
  EXPECT_GE(result.wall_ns, result.device_ns / 2);
  vyre_timing timing = VYRE_TIMING_INIT;
  EXPECT_VYRE_OK(vyre_pending_timing(pending.get(), &timing));
  EXPECT_EQ(timing.wall_ns, result.wall_ns);
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_STATE,
                     vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  pending.reset();
  EXPECT_VYRE_OK(vyre_egraph_image_info_get(twin.gpu(), &info));
  EXPECT_EQ(info.canonical_class_count, expected.result.classes_after);

  // Released without a wait: the rebuild still completes; nothing is written.
  std::fill(canonical.begin(), canonical.end(), kPoisonU32);
  result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  desc.flags = VYRE_EGRAPH_REBUILD_RESET;
  const std::vector<uint32_t> unions = RandomUnions(4, g.classes, 100);
  desc.unions = unions.data();
  desc.union_count = unions.size() / 2;
  ASSERT_VYRE_OK(vyre_egraph_rebuild_async(twin.gpu(), &desc, pending.out()));
  pending.reset();
  RebuildSpec reset;
  reset.flags = VYRE_EGRAPH_REBUILD_RESET;
  reset.unions = unions;
  expected = Rebuild(twin.cpu(), g.classes, reset);
  std::vector<uint32_t> column(g.classes, kPoisonU32);
  ASSERT_VYRE_OK(vyre_egraph_image_read(twin.gpu(), VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0,
                                        g.classes, column.data()));
  EXPECT_TRUE(SameClasses(column, expected.canonical));
  EXPECT_EQ(canonical[0], kPoisonU32) << "a released rebuild wrote canonical_out";
  EXPECT_EQ(result.rounds, 0u) << "a released rebuild wrote result_out";
  EXPECT_VYRE_OK(vyre_egraph_image_info_get(twin.gpu(), &info));
  EXPECT_EQ(info.canonical_class_count, expected.result.classes_after);

  // Destroyed while in flight: the wait still finishes it.
  ImageHandle alone;
  const vyre_egraph_image_desc gdesc = DescOf(g, VYRE_EGRAPH_DEVICE_GPU, context());
  ASSERT_VYRE_OK(vyre_egraph_image_create(&gdesc, alone.out()));
  desc.flags = 0;
  ASSERT_VYRE_OK(vyre_egraph_rebuild_async(alone.get(), &desc, pending.out()));
  alone.reset();
  EXPECT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
  EXPECT_TRUE(SameClasses(canonical, expected.canonical));
  pending.reset();
}

// Rebuilds and passes reuse the image's memory: after a first rebuild (and
// the transient pool's first union block), device memory stays level.
TEST_F(EgraphGpuTest, RepeatedRebuildsAllocateNoDeviceMemory) {
  const vyre::tools::SyntheticEgraph g = vyre::tools::GenerateSynthetic(1 << 17, 2, 5);
  ImageHandle image;
  const vyre_egraph_image_desc desc = DescOf(g, VYRE_EGRAPH_DEVICE_GPU, context());
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
  RebuildSpec spec;
  spec.flags = VYRE_EGRAPH_REBUILD_RESET;
  spec.unions = RandomUnions(1, g.classes, 64);
  Rebuild(image.get(), g.classes, spec);
  Pass(image.get());
  const vyre_telemetry before = Telemetry(context());
  for (uint64_t i = 0; i < 10; ++i) {
    spec.unions = RandomUnions(10 + i, g.classes, 64);
    spec.flags =
        VYRE_EGRAPH_REBUILD_RESET | (i % 2 ? uint32_t{VYRE_EGRAPH_REBUILD_DEVICE_TIMING} : 0u);
    Rebuild(image.get(), g.classes, spec);
    Rebuild(image.get(), g.classes, {});
    Pass(image.get());
    PendingHandle pending;
    ASSERT_VYRE_OK(vyre_egraph_rebuild_async(image.get(), nullptr, pending.out()));
    ASSERT_VYRE_OK(vyre_pending_wait(pending.get(), VYRE_WAIT_FOREVER));
    pending.reset();
    const vyre_telemetry now = Telemetry(context());
    EXPECT_EQ(now.device_bytes_live, before.device_bytes_live) << "rebuild " << i;
    EXPECT_EQ(now.pinned_bytes_live, before.pinned_bytes_live) << "rebuild " << i;
  }
  vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_egraph_image_info_get(image.get(), &info));
  EXPECT_GT(info.bytes, 0u);
  EXPECT_LE(info.bytes, before.device_bytes_live);
}

// ~200k rows, arity up to 3: the compute-sanitizer workload (scripts/gpu-suite.sh).
TEST_F(EgraphGpuTest, MediumSyntheticMatchesCpu) {
  const vyre::tools::SyntheticEgraph g = vyre::tools::GenerateSynthetic(200000, 3, 21);
  Twin twin(g, context());
  ASSERT_TRUE(twin.ok());
  twin.set_rows(g.rows());
  uint64_t pairs = 0;
  EXPECT_TRUE(twin.PassBoth(&pairs));
  EXPECT_GT(pairs, 0u) << "the synthetic graph duplicates every term";
  RebuildOutcome out;
  ASSERT_TRUE(twin.RebuildBoth({}, &out));
  EXPECT_EQ(out.result.rounds, g.depth + 2) << Describe(out.result);
  EXPECT_LE(out.result.classes_after, g.terms);
  EXPECT_TRUE(twin.PassBoth(&pairs));
  EXPECT_EQ(pairs, 0u);
  RebuildSpec spec;
  spec.flags = VYRE_EGRAPH_REBUILD_RESET;
  spec.unions = RandomUnions(2, g.classes, 1000);
  EXPECT_TRUE(twin.RebuildBoth(spec));
  spec.flags |= VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
  spec.unions.resize(20);
  spec.max_rounds = 3;
  EXPECT_TRUE(twin.RebuildBoth(spec));
  EXPECT_TRUE(twin.PassBoth());
}

// >= 16 M rows (GenerateSynthetic(16 << 20, 2, seed)) against the CPU
// reference on every core: classes_after, rounds and a random sample of
// 100000 classes (and a count of differences over all of them).
TEST_F(EgraphGpuTest, LargeSynthetic16MRowsMatchesCpu) {
  const vyre::tools::SyntheticEgraph g = vyre::tools::GenerateSynthetic(16u << 20, 2, 1234);
  ASSERT_GE(g.rows(), uint64_t{16} << 20);
  RebuildOutcome gpu, cpu;
  {
    ImageHandle image;
    const vyre_egraph_image_desc desc = DescOf(g, VYRE_EGRAPH_DEVICE_GPU, context());
    ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
    gpu.canonical.assign(g.classes, kPoisonU32);
    vyre_egraph_rebuild_desc rdesc = VYRE_EGRAPH_REBUILD_DESC_INIT;
    rdesc.canonical_out = gpu.canonical.data();
    ASSERT_VYRE_OK(vyre_egraph_rebuild(image.get(), &rdesc, &gpu.result));
  }
  {
    ImageHandle image;
    const vyre_egraph_image_desc desc = DescOf(g, VYRE_EGRAPH_DEVICE_CPU, context(), 0);
    ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
    cpu.canonical.assign(g.classes, kPoisonU32);
    vyre_egraph_rebuild_desc rdesc = VYRE_EGRAPH_REBUILD_DESC_INIT;
    rdesc.canonical_out = cpu.canonical.data();
    ASSERT_VYRE_OK(vyre_egraph_rebuild(image.get(), &rdesc, &cpu.result));
  }
  std::printf("[ note     ] %llu rows: GPU %s, %.1f ms; CPU %.1f ms\n",
              static_cast<unsigned long long>(g.rows()), Describe(gpu.result).c_str(),
              gpu.result.wall_ns / 1e6, cpu.result.wall_ns / 1e6);
  EXPECT_EQ(gpu.result.classes_after, cpu.result.classes_after)
      << "GPU " << Describe(gpu.result) << " / CPU " << Describe(cpu.result);
  EXPECT_EQ(gpu.result.rounds, cpu.result.rounds);
  EXPECT_EQ(gpu.result.merges, cpu.result.merges);
  EXPECT_EQ(gpu.result.rounds, g.depth + 2);
  std::mt19937_64 rng(99);
  uint64_t sample_differ = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t x = rng() % g.classes;
    sample_differ += gpu.canonical[x] != cpu.canonical[x];
  }
  EXPECT_EQ(sample_differ, 0u) << "of 100000 sampled classes";
  uint64_t differ = 0;
  for (uint64_t x = 0; x < g.classes; ++x) differ += gpu.canonical[x] != cpu.canonical[x];
  EXPECT_EQ(differ, 0u) << "of all " << g.classes << " classes";
}

}  // namespace
}  // namespace vyre_test
