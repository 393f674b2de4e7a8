// Growing CPU e-graph images (VYRE_EGRAPH_DEVICE_CPU) through the public API:
// vyre_egraph_image_append, incremental rebuilds (egg's worklist) and
// vyre_egraph_changed_read. No driver needed (ctest entry
// unit.egraph_incremental).
//
//   - hand-built graphs whose worklists are known row by row;
//   - every e-graph of tests/data/egraphs (widened by VYRE_EGRAPHS_DIR where
//     present), and random graphs, split into a base and random steps with
//     random unions: the case runner of tests/support/egraph_incremental_cases.h
//     checks each step against a fresh image rebuilt from scratch and against
//     a naive closure that counts egg's worklists;
//   - refused appends (status, message, and the image exactly as before) and
//     changed_read's capacity contract.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "egraph_files.h"
#include "egraph_incremental_cases.h"
#include "struct_size_util.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

#ifdef VYRE_HAVE_EGRAPH_TOOLS
#include "egraph/json_loader.h"
#endif

namespace vyre_test {
namespace {

constexpr const char* kAppend = "vyre_egraph_image_append";
constexpr const char* kChanged = "vyre_egraph_changed_read";

using Pairs = std::vector<std::pair<uint32_t, uint32_t>>;

// ---------------------------------------------------------------------------
// Errors: the status, vyre_last_error agreeing, a first line
// "<fn>: <why>. Fix: <what to do>." and the `needles` in the message.
// ---------------------------------------------------------------------------

::testing::AssertionResult Refused(vyre_status actual, vyre_status expected, const char* fn,
                                   const std::vector<std::string>& needles = {}) {
  ::testing::AssertionResult base = ExpectError(actual, expected);
  if (!base) return base;
  const std::string message = LastErrorMessage();
  const std::string first_line = message.substr(0, message.find('\n'));
  const std::regex layout(std::string("^") + fn + ": [^\\n]+\\. Fix: [^\\n]+\\.$");
  if (!std::regex_match(first_line, layout)) {
    return ::testing::AssertionFailure()
           << "first line is not \"" << fn << ": <why>. Fix: <what to do>.\": \"" << first_line
           << "\"";
  }
  for (const std::string& needle : needles) {
    if (message.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << needle << "\": \"" << message << "\"";
    }
  }
  return ::testing::AssertionSuccess() << message;
}

#define EXPECT_REFUSED(expr, status, fn, ...) \
  EXPECT_TRUE(Refused((expr), (status), (fn), {__VA_ARGS__})) << "  in: " #expr

// ---------------------------------------------------------------------------
// Images and their state
// ---------------------------------------------------------------------------

vyre_egraph_image_desc CpuDesc(const GrowthGraph& g, uint32_t threads = 1) {
  IncrementalTarget target;
  target.cpu_threads = threads;
  return PrefixDesc(g, g.rows(), g.classes, target);
}

// Everything a caller can read of an image: every column and the info.
struct ImageState {
  vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  std::vector<std::vector<uint32_t>> columns;
  Pairs changed;
};

ImageState StateOf(vyre_egraph_image image) {
  ImageState s;
  s.info = GrowthInfo(image);
  const uint64_t entries[] = {s.info.row_count,  s.info.row_count, s.info.row_count,
                              s.info.row_count,  s.info.row_count, s.info.child_count,
                              s.info.class_count};
  for (uint32_t column = VYRE_EGRAPH_COLUMN_ROW_CLASSES;
       column <= VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES; ++column) {
    s.columns.push_back(
        ReadGrowthColumn(image, static_cast<vyre_egraph_column>(column), entries[column - 1]));
  }
  s.changed = ReadChangedPairs(image);
  return s;
}

::testing::AssertionResult SameState(const ImageState& a, const ImageState& b) {
  const vyre_egraph_image_info& x = a.info;
  const vyre_egraph_image_info& y = b.info;
  const std::pair<const char*, std::pair<uint64_t, uint64_t>> fields[] = {
      {"device", {x.device, y.device}},
      {"context", {x.context.bits, y.context.bits}},
      {"row_count", {x.row_count, y.row_count}},
      {"class_count", {x.class_count, y.class_count}},
      {"child_count", {x.child_count, y.child_count}},
      {"canonical_class_count", {x.canonical_class_count, y.canonical_class_count}},
      {"bytes", {x.bytes, y.bytes}},
      {"row_capacity", {x.row_capacity, y.row_capacity}},
      {"class_capacity", {x.class_capacity, y.class_capacity}},
      {"child_capacity", {x.child_capacity, y.child_capacity}},
      {"changed_class_count", {x.changed_class_count, y.changed_class_count}},
  };
  for (const auto& [name, values] : fields) {
    if (values.first != values.second) {
      return ::testing::AssertionFailure()
             << "info." << name << " " << values.first << " became " << values.second;
    }
  }
  for (size_t c = 0; c < a.columns.size(); ++c) {
    ::testing::AssertionResult same = SameU32(b.columns[c], a.columns[c]);
    if (!same) return same << " (column " << c + 1 << ")";
  }
  if (a.changed != b.changed) return ::testing::AssertionFailure() << "the changed pairs moved";
  return ::testing::AssertionSuccess();
}

vyre_egraph_rebuild_result RebuildWith(vyre_egraph_image image,
                                       const std::vector<uint32_t>& unions = {}, uint32_t flags = 0,
                                       uint32_t max_rounds = 0) {
  std::vector<uint32_t> none;
  return GrowthRebuild(image, unions, flags, max_rounds, &none);
}

std::vector<uint32_t> CanonicalOf(vyre_egraph_image image) {
  return ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES,
                          GrowthInfo(image).class_count);
}

// ===========================================================================
// Hand-built worklists
// ===========================================================================

// Leaves a, b, c in 0, 1, 2; f(a) 3, f(b) 4, g(3) 5, g(4) 6, h(c) 7,
// k(3, 5) 8 (ops: a 1, b 2, c 3, f 10, g 11, h 12, k 13).
GrowthGraph BaseGraph() {
  GrowthGraph g;
  g.AddRow(0, 1, {});
  g.AddRow(1, 2, {});
  g.AddRow(2, 3, {});
  g.AddRow(3, 10, {0});
  g.AddRow(4, 10, {1});
  g.AddRow(5, 11, {3});
  g.AddRow(6, 11, {4});
  g.AddRow(7, 12, {2});
  g.AddRow(8, 13, {3, 5});
  g.classes = 9;
  return g;
}

class EgraphIncrementalTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  uint32_t threads() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Threads, EgraphIncrementalTest, ::testing::Values(1u, 0u, 4u),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return info.param == 0 ? std::string("AllCores")
                                                  : "Threads" + std::to_string(info.param);
                         });

// Appends d (9) and f(d) (10) and unites b with a: round 1 visits the two new
// rows and f(b) (its child moved), merging f(b) into f(a); round 2 visits
// g(4), merging it into g(3); round 3 visits nothing (no row names 6).
TEST_P(EgraphIncrementalTest, WorklistsRowByRow) {
  const GrowthGraph base = BaseGraph();
  const vyre_egraph_image_desc desc = CpuDesc(base, threads());
  GrowthImage image;
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
  vyre_egraph_rebuild_result r = RebuildWith(image.get());
  EXPECT_GE(r.full_rounds, 1u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, base.rows());
  EXPECT_EQ(r.rounds, 1u);
  EXPECT_EQ(r.changed_class_count, 0u);
  EXPECT_TRUE(ReadChangedPairs(image.get()).empty());

  const uint32_t classes[] = {9, 10}, ops[] = {4, 10}, offsets[] = {0, 0}, lengths[] = {0, 1},
                 children[] = {9};
  vyre_egraph_append_desc append = VYRE_EGRAPH_APPEND_DESC_INIT;
  append.class_count = 2;
  append.row_count = 2;
  append.child_count = 1;
  append.row_classes = classes;
  append.row_ops = ops;
  append.child_offsets = offsets;
  append.child_lengths = lengths;
  append.children = children;
  ASSERT_VYRE_OK(vyre_egraph_image_append(image.get(), &append));
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  r = RebuildWith(image.get(), {1, 0});
  EXPECT_EQ(r.full_rounds, 0u) << DescribeGrowth(r);
  EXPECT_EQ(r.rounds, 3u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 3u + 1u + 0u) << DescribeGrowth(r);
  EXPECT_EQ(r.union_merges, 1u);
  EXPECT_EQ(r.merges, 2u);
  EXPECT_EQ(r.classes_before, 11u);
  EXPECT_EQ(r.classes_after, 8u);
  EXPECT_EQ(r.changed_class_count, 3u);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{1, 0}, {4, 3}, {6, 5}}));
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 0, 2, 3, 3, 5, 5, 7, 8, 9, 10}));

  // Unions only: c with d moves 9, named by f(d) alone; nothing merges.
  r = RebuildWith(image.get(), {9, 2});
  EXPECT_EQ(r.full_rounds, 0u);
  EXPECT_EQ(r.rounds, 1u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 1u) << DescribeGrowth(r);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{9, 2}}));

  // Nothing to do: one round that visits nothing, and no changed class.
  r = RebuildWith(image.get());
  EXPECT_EQ(r.rounds, 1u);
  EXPECT_EQ(r.rows_visited, 0u);
  EXPECT_EQ(r.merges, 0u);
  EXPECT_TRUE(ReadChangedPairs(image.get()).empty());
  EXPECT_EQ(GrowthInfo(image.get()).changed_class_count, 0u);

  // A union already in place merges nothing and changes nothing.
  r = RebuildWith(image.get(), {4, 3, 6, 5});
  EXPECT_EQ(r.union_merges, 0u);
  EXPECT_EQ(r.rows_visited, 0u);
  EXPECT_TRUE(ReadChangedPairs(image.get()).empty());
}

// A rebuild stopped by max_rounds leaves the rest of its worklist to the next
// one, which visits exactly those rows first.
TEST_P(EgraphIncrementalTest, RoundLimitLeavesTheRestPending) {
  const GrowthGraph base = BaseGraph();
  const vyre_egraph_image_desc desc = CpuDesc(base, threads());
  GrowthImage image;
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
  RebuildWith(image.get());
  vyre_egraph_rebuild_result r = RebuildWith(image.get(), {0, 1}, 0, /*max_rounds=*/1);
  EXPECT_EQ(r.rounds, 1u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 1u) << "f(b) only";
  EXPECT_EQ(r.merges, 1u);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{1, 0}, {4, 3}}));
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 0, 2, 3, 3, 5, 6, 7, 8}));
  // g(4) was left: the next rebuild visits it, merges 6 into 5, then stops.
  r = RebuildWith(image.get());
  EXPECT_EQ(r.full_rounds, 0u);
  EXPECT_EQ(r.rounds, 2u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 1u) << DescribeGrowth(r);
  EXPECT_EQ(r.merges, 1u);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{6, 5}}));
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 0, 2, 3, 3, 5, 5, 7, 8}));
}

// RESET and column writes make the next rebuild full; a change of hash mode
// indexes anew but stays incremental; a pass changes nothing.
TEST_P(EgraphIncrementalTest, ResetWriteAndHashModes) {
  const GrowthGraph base = BaseGraph();
  const vyre_egraph_image_desc desc = CpuDesc(base, threads());
  GrowthImage image;
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
  RebuildWith(image.get());
  vyre_egraph_rebuild_result r = RebuildWith(image.get(), {1, 0});
  EXPECT_EQ(r.full_rounds, 0u);

  // RESET: every class alone before the unions, every row visited.
  r = RebuildWith(image.get(), {}, VYRE_EGRAPH_REBUILD_RESET);
  EXPECT_GE(r.full_rounds, 1u) << DescribeGrowth(r);
  EXPECT_GE(r.rows_visited, base.rows());
  EXPECT_EQ(r.classes_before, base.classes);
  EXPECT_EQ(ReadChangedPairs(image.get()).size(), 0u) << "from every class alone to the same";
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 1, 2, 3, 4, 5, 6, 7, 8}));
  r = RebuildWith(image.get(), {1, 0}, VYRE_EGRAPH_REBUILD_RESET);
  EXPECT_GE(r.full_rounds, 1u);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{1, 0}, {4, 3}, {6, 5}}));

  // The next one is incremental again.
  uint64_t pairs = 1;
  ASSERT_VYRE_OK(vyre_egraph_pass(image.get(), nullptr, 0, &pairs));
  EXPECT_EQ(pairs, 0u);
  r = RebuildWith(image.get(), {7, 2});
  EXPECT_EQ(r.full_rounds, 0u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 0u) << "no row names 7";

  // A column write: the next rebuild is full, from the state as it was
  // (7 = 2 from the union above).
  const uint32_t op = 10;  // row 7, h(c) in 7, becomes f(c)
  ASSERT_VYRE_OK(vyre_egraph_image_write(image.get(), VYRE_EGRAPH_COLUMN_ROW_OPS, 7, 1, &op));
  r = RebuildWith(image.get());
  EXPECT_GE(r.full_rounds, 1u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, base.rows());
  EXPECT_EQ(r.merges, 0u);
  // c = a: round 1 visits f(c), now f(a)'s form, in class 2's set (7): 3 joins
  // 0; round 2 visits the rows naming 3 or 4 (g(3), g(4), k(3, 5)).
  r = RebuildWith(image.get(), {2, 0});
  EXPECT_EQ(r.full_rounds, 0u);
  EXPECT_EQ(r.rounds, 2u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 1u + 3u) << DescribeGrowth(r);
  EXPECT_EQ(r.merges, 1u);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{2, 0}, {3, 0}, {4, 0}, {7, 0}}));
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 0, 0, 0, 0, 5, 5, 0, 8}));

  // The colliding hash: another index, still incremental, same answers.
  // h(3) in 11 (no other h row now).
  const uint32_t more[] = {11}, more_ops[] = {12}, offsets[] = {0}, lengths[] = {1}, kids[] = {3};
  vyre_egraph_append_desc append = VYRE_EGRAPH_APPEND_DESC_INIT;
  append.class_count = 3;  // 9, 10 unused; 11 the new row's
  append.row_count = 1;
  append.child_count = 1;
  append.row_classes = more;
  append.row_ops = more_ops;
  append.child_offsets = offsets;
  append.child_lengths = lengths;
  append.children = kids;
  ASSERT_VYRE_OK(vyre_egraph_image_append(image.get(), &append));
  r = RebuildWith(image.get(), {9, 10}, VYRE_EGRAPH_REBUILD_COLLIDING_HASH);
  EXPECT_EQ(r.full_rounds, 0u) << DescribeGrowth(r);
  EXPECT_EQ(r.rows_visited, 1u) << DescribeGrowth(r);
  EXPECT_EQ(ReadChangedPairs(image.get()), (Pairs{{10, 9}}));
  EXPECT_TRUE(SameU32(CanonicalOf(image.get()), {0, 0, 0, 0, 0, 5, 5, 0, 8, 9, 9, 11}));
}

// A rebuild's result is the same whatever the steps: a graph grown one row at
// a time, rebuilt after each, against one image of everything.
TEST_P(EgraphIncrementalTest, OneRowAtATime) {
  std::mt19937 rng(0xC0FFEEu + threads());
  GrowthGraph g;
  for (uint32_t r = 0; r < 300; ++r) {
    const uint32_t op = 1 + rng() % 4;
    std::vector<uint32_t> kids(op % 3);
    for (uint32_t& k : kids) k = rng() % 60;
    g.AddRow(rng() % 60, op, kids);
  }
  g.classes = 60;
  g = ByFirstUse(g);
  GrowthPlan plan;
  const std::vector<uint64_t> used = ClassesUsedByPrefix(g);
  for (uint64_t end = 40; end <= g.rows(); end += 1 + rng() % 3) {
    GrowthStep step;
    step.rows_end = end;
    step.classes_end = used[end];
    step.unions = RandomClassUnions(end, step.classes_end, rng() % 2, rng);
    plan.steps.push_back(step);
  }
  plan.steps.back().rows_end = g.rows();
  plan.steps.back().classes_end = g.classes;
  IncrementalTarget target;
  target.cpu_threads = threads();
  RunGrowthCase(target, g, plan);
}

// ===========================================================================
// Random graphs and the e-graph files, split into random steps
// ===========================================================================

// A random e-graph with many congruences: few ops, few classes; op 5 takes
// one or two children.
GrowthGraph RandomGraph(uint32_t seed, uint32_t classes, uint32_t rows) {
  std::mt19937 rng(seed);
  GrowthGraph g;
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t op = rng() % 6;
    uint32_t arity = op % 3 + (op == 4 ? 2 : 0);  // op 4: three children
    if (op == 5) arity = 1 + rng() % 2;
    std::vector<uint32_t> kids(arity);
    for (uint32_t& k : kids) k = rng() % classes;
    g.AddRow(rng() % classes, op, kids);
  }
  g.classes = classes;
  return ByFirstUse(g);
}

TEST_P(EgraphIncrementalTest, RandomGraphsGrowStepByStep) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const GrowthGraph g = RandomGraph(seed * 7919u, 20 + seed % 40, 30 + seed * 5);
    for (uint32_t flags : {0u, uint32_t{VYRE_EGRAPH_REBUILD_COLLIDING_HASH}}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", flags " + std::to_string(flags));
      IncrementalTarget target;
      target.cpu_threads = threads();
      target.rebuild_flags = flags;
      target.reserve = seed % 2 == 0;
      RunGrowthCase(target, g,
                    RandomPlan(g, seed * 31u + flags, RandomClassUnions, 6, /*round_limits=*/true));
      if (HasFailure()) return;
    }
  }
}

// Enough rows that the incremental rounds and the indexing run on several
// workers.
TEST_P(EgraphIncrementalTest, LargeGraphGrowsOnWorkers) {
  const GrowthGraph g = RandomGraph(0xBEEF + threads(), 40000, 120000);
  IncrementalTarget target;
  target.cpu_threads = threads();
  target.check_visits = true;
  GrowthPlan plan = RandomPlan(g, 99 + threads(), RandomClassUnions, 40, /*round_limits=*/false);
  RunGrowthCase(target, g, plan);
}

#ifdef VYRE_HAVE_EGRAPH_TOOLS

const EgraphFileSet& FileSet() {
  static const EgraphFileSet* set = new EgraphFileSet(FindEgraphFiles());
  return *set;
}

struct LoadedFile {
  std::string path;
  GrowthGraph by_file;  // the file's classes, numbered by first use
  GrowthGraph by_node;  // every e-node its own class, numbered by first use
  // by_node's class of each row's file-class leader (its first row): uniting
  // a row's class with its leader's is one of the file's equalities.
  std::vector<uint32_t> leader_class;
};

const std::vector<LoadedFile>& Files() {
  static const std::vector<LoadedFile>* files = [] {
    auto* out = new std::vector<LoadedFile>;
    for (const std::string& path : FileSet().paths) {
      vyre::tools::LoadedEgraph file, own;
      vyre::tools::LoadOptions options;
      vyre::tools::ToolStatus status = vyre::tools::LoadEgraphJsonFile(path, options, &file);
      EXPECT_TRUE(status.ok()) << status.message;
      options.own_class_per_node = true;
      status = vyre::tools::LoadEgraphJsonFile(path, options, &own);
      EXPECT_TRUE(status.ok()) << status.message;
      LoadedFile f;
      f.path = path;
      f.by_file = ByFirstUse(GraphOf(file));
      f.by_node = ByFirstUse(GraphOf(own));
      // Rows keep their order through ByFirstUse.
      std::vector<uint32_t> first(file.classes, UINT32_MAX);
      for (uint32_t r = 0; r < file.rows(); ++r) {
        uint32_t& leader = first[file.row_classes[r]];
        if (leader == UINT32_MAX) leader = r;
        f.leader_class.push_back(f.by_node.row_classes[leader]);
      }
      out->push_back(std::move(f));
    }
    return out;
  }();
  return *files;
}

class EgraphIncrementalFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(FileSet().builtin_files, 0u)
        << "no e-graph files in \"" << FileSet().builtin_dir
        << "\". Fix: restore tests/data/egraphs (git checkout -- tests/data/egraphs).";
    ASSERT_FALSE(Files().empty());
  }
};

// The file's classes, random unions of any two classes so far.
TEST_F(EgraphIncrementalFilesTest, FileClassesGrowStepByStep) {
  uint32_t seed = 11;
  GrowthTotals totals;
  for (const LoadedFile& f : Files()) {
    for (uint32_t threads : {1u, 0u}) {
      SCOPED_TRACE(f.path + ", threads " + std::to_string(threads));
      IncrementalTarget target;
      target.cpu_threads = threads;
      target.reserve = (seed & 4) != 0;
      RunGrowthCase(target, f.by_file,
                    RandomPlan(f.by_file, ++seed, RandomClassUnions, 8, /*round_limits=*/true),
                    &totals);
      if (HasFailure()) return;
    }
  }
  std::printf("[ note     ] %zu files: %s\n", Files().size(), totals.Describe().c_str());
  EXPECT_GT(totals.merges, 0u) << "the unions should leave congruence something to derive";
}

// Every e-node its own class; each step unites random rows so far with their
// file-class leaders (the file's own equalities), and congruence derives the
// rest, as in a saturation loop.
TEST_F(EgraphIncrementalFilesTest, OwnClassesGrowWithFileEqualities) {
  uint32_t seed = 101;
  GrowthTotals totals;
  for (const LoadedFile& f : Files()) {
    SCOPED_TRACE(f.path);
    const UnionSource equalities = [&f](uint64_t rows_end, uint64_t, uint32_t count,
                                        std::mt19937& rng) {
      std::vector<uint32_t> unions;
      for (uint32_t i = 0; i < count && rows_end > 0; ++i) {
        const uint64_t r = rng() % rows_end;
        unions.push_back(f.by_node.row_classes[r]);
        unions.push_back(f.leader_class[r]);
      }
      return unions;
    };
    IncrementalTarget target;
    target.cpu_threads = seed % 2 == 0 ? 0 : 1;
    RunGrowthCase(
        target, f.by_node,
        RandomPlan(f.by_node, ++seed, equalities, static_cast<uint32_t>(f.by_node.rows() / 8 + 1),
                   /*round_limits=*/true),
        &totals);
    if (HasFailure()) return;
  }
  std::printf("[ note     ] %zu files: %s\n", Files().size(), totals.Describe().c_str());
  EXPECT_GT(totals.merges, 0u) << "the equalities should leave congruence something to derive";
}

#endif  // VYRE_HAVE_EGRAPH_TOOLS

// ===========================================================================
// Refused appends: the status, the message, and the image exactly as before
// ===========================================================================

class EgraphAppendErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = BaseGraph();
    const vyre_egraph_image_desc desc = CpuDesc(base_);
    ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image_.out()));
    // A state worth keeping: an incremental rebuild has run.
    RebuildWith(image_.get());
    RebuildWith(image_.get(), {1, 0});
    before_ = StateOf(image_.get());
  }

  // A valid append: two rows over the image's classes and two new ones.
  vyre_egraph_append_desc Valid() {
    vyre_egraph_append_desc d = VYRE_EGRAPH_APPEND_DESC_INIT;
    d.class_count = 2;
    d.row_count = 2;
    d.child_count = 3;
    d.row_classes = classes_;
    d.row_ops = ops_;
    d.child_offsets = offsets_;
    d.child_lengths = lengths_;
    d.children = children_;
    return d;
  }

  void ExpectUnchanged(const std::string& what) {
    EXPECT_TRUE(SameState(before_, StateOf(image_.get()))) << what;
  }

  // After the refusals the image still grows and rebuilds right.
  void ExpectStillGrows() {
    const vyre_egraph_append_desc d = Valid();
    ASSERT_VYRE_OK(vyre_egraph_image_append(image_.get(), &d));
    const vyre_egraph_rebuild_result r = RebuildWith(image_.get());
    EXPECT_EQ(r.full_rounds, 0u);
    EXPECT_EQ(r.rows_visited, 2u);
    // f(10) in 9 and k(0, 3) in 10: k(0, 3) is new; f(10) too.
    EXPECT_TRUE(SameU32(CanonicalOf(image_.get()), {0, 0, 2, 3, 3, 5, 5, 7, 8, 9, 10}));
  }

  GrowthGraph base_;
  GrowthImage image_;
  ImageState before_;
  uint32_t classes_[2] = {9, 10};
  uint32_t ops_[2] = {10, 13};
  uint32_t offsets_[2] = {0, 1};
  uint32_t lengths_[2] = {1, 2};
  uint32_t children_[3] = {10, 0, 3};
};

TEST_F(EgraphAppendErrorsTest, ClassIdsPastTheNewCount) {
  vyre_egraph_append_desc d = Valid();
  uint32_t bad_class[2] = {9, 11};  // 9 + 2 classes: 11 is past them
  d.row_classes = bad_class;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_INVALID_ARGUMENT, kAppend,
                 "row_classes[1]", "11");
  ExpectUnchanged("row class");
  d = Valid();
  uint32_t bad_child[3] = {10, 0, 11};
  d.children = bad_child;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_INVALID_ARGUMENT, kAppend,
                 "children[2]", "11");
  ExpectUnchanged("child class");
  // The new classes are not there yet without class_count.
  d = Valid();
  d.class_count = 0;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_INVALID_ARGUMENT, kAppend,
                 "row_classes[0]");
  ExpectUnchanged("class_count 0");
  ExpectStillGrows();
}

TEST_F(EgraphAppendErrorsTest, ChildRangesOutsideOrOutOfOrder) {
  vyre_egraph_append_desc d = Valid();
  uint32_t past[2] = {0, 2};  // [2, 4) of 3 children
  d.child_offsets = past;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_OUT_OF_RANGE, kAppend,
                 "row 1");
  ExpectUnchanged("past the children");
  uint32_t huge[2] = {0, UINT32_MAX};
  d.child_offsets = huge;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_OUT_OF_RANGE, kAppend);
  ExpectUnchanged("offset 2^32 - 1");
  uint32_t backwards[2] = {1, 0};  // row 1 starts before row 0 ends
  d.child_offsets = backwards;
  uint32_t lengths[2] = {1, 1};
  d.child_lengths = lengths;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_INVALID_ARGUMENT, kAppend,
                 "row 1");
  ExpectUnchanged("out of order");
  // Offsets index the append's own children, not the image's.
  uint32_t absolute[2] = {static_cast<uint32_t>(base_.children.size()),
                          static_cast<uint32_t>(base_.children.size() + 1)};
  d = Valid();
  d.child_offsets = absolute;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_OUT_OF_RANGE, kAppend);
  ExpectUnchanged("absolute offsets");
  ExpectStillGrows();
}

// Totals past the limits are refused from the counts alone: the columns are
// one entry long (reading past them would fault under ASan).
TEST_F(EgraphAppendErrorsTest, TotalsPastTheLimits) {
  const uint32_t one[1] = {0};
  vyre_egraph_append_desc d = VYRE_EGRAPH_APPEND_DESC_INIT;
  d.row_classes = d.row_ops = d.child_offsets = d.child_lengths = d.children = one;
  const uint64_t rows = base_.rows();
  d.row_count = (uint64_t{1} << 30) - rows + 1;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_LIMIT_EXCEEDED, kAppend,
                 "2^30");
  d.row_count = UINT64_MAX;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_LIMIT_EXCEEDED, kAppend);
  d.row_count = 0;
  d.class_count = uint64_t{UINT32_MAX} - base_.classes + 1;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_LIMIT_EXCEEDED, kAppend,
                 "2^32 - 1");
  d.class_count = UINT64_MAX;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_LIMIT_EXCEEDED, kAppend);
  d.class_count = 0;
  d.child_count = uint64_t{UINT32_MAX} - base_.children.size() + 1;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_LIMIT_EXCEEDED, kAppend,
                 "children");
  d.child_count = UINT64_MAX;
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_LIMIT_EXCEEDED, kAppend);
  ExpectUnchanged("limits");
  ExpectStillGrows();
}

TEST_F(EgraphAppendErrorsTest, NullColumnsWithCounts) {
  struct Case {
    const char* name;
    void (*clear)(vyre_egraph_append_desc*);
  } cases[] = {
      {"row_classes", [](vyre_egraph_append_desc* d) { d->row_classes = nullptr; }},
      {"row_ops", [](vyre_egraph_append_desc* d) { d->row_ops = nullptr; }},
      {"child_offsets", [](vyre_egraph_append_desc* d) { d->child_offsets = nullptr; }},
      {"child_lengths", [](vyre_egraph_append_desc* d) { d->child_lengths = nullptr; }},
      {"children", [](vyre_egraph_append_desc* d) { d->children = nullptr; }},
  };
  for (const Case& c : cases) {
    vyre_egraph_append_desc d = Valid();
    c.clear(&d);
    EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_INVALID_ARGUMENT,
                   kAppend, c.name);
    ExpectUnchanged(c.name);
  }
  // NULL with a zero count is fine: classes alone.
  vyre_egraph_append_desc classes_only = VYRE_EGRAPH_APPEND_DESC_INIT;
  classes_only.class_count = 0;
  EXPECT_VYRE_OK(vyre_egraph_image_append(image_.get(), &classes_only));
  ExpectUnchanged("an empty append");
  ExpectStillGrows();
}

TEST_F(EgraphAppendErrorsTest, NoClassForTheRows) {
  GrowthGraph empty;
  const vyre_egraph_image_desc desc = CpuDesc(empty);
  GrowthImage image;
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, image.out()));
  const ImageState before = StateOf(image.get());
  const uint32_t zero[1] = {0};
  vyre_egraph_append_desc d = VYRE_EGRAPH_APPEND_DESC_INIT;
  d.row_count = 1;
  d.row_classes = d.row_ops = d.child_offsets = d.child_lengths = zero;
  EXPECT_REFUSED(vyre_egraph_image_append(image.get(), &d), VYRE_STATUS_INVALID_ARGUMENT, kAppend,
                 "class_count");
  EXPECT_TRUE(SameState(before, StateOf(image.get())));
  d.class_count = 1;
  ASSERT_VYRE_OK(vyre_egraph_image_append(image.get(), &d));
  EXPECT_EQ(GrowthInfo(image.get()).row_count, 1u);
}

TEST_F(EgraphAppendErrorsTest, DescriptorAndStructSize) {
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), nullptr), VYRE_STATUS_INVALID_ARGUMENT,
                 kAppend, "vyre_egraph_append_desc");
  const vyre_egraph_append_desc valid = Valid();
  for (uint32_t size : TooSmallSizes<vyre_egraph_append_desc>()) {
    vyre_egraph_append_desc small = WithStructSize(valid, size);
    EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &small),
                   VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, kAppend, "vyre_egraph_append_desc")
        << size;
  }
  LargerStruct<vyre_egraph_append_desc> nonzero_tail(valid, 16, 0x5A);
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), nonzero_tail.get()),
                 VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, kAppend);
  ExpectUnchanged("struct_size");
  LargerStruct<vyre_egraph_append_desc> zero_tail(valid, 16, 0);
  ASSERT_VYRE_OK(vyre_egraph_image_append(image_.get(), zero_tail.get()));
  EXPECT_EQ(GrowthInfo(image_.get()).row_count, base_.rows() + 2);
}

TEST_F(EgraphAppendErrorsTest, ZeroForgedStaleAndWrongTypeHandles) {
  const vyre_egraph_append_desc d = Valid();
  const vyre_egraph_image_desc desc = CpuDesc(base_);
  vyre_egraph_image dead{};
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, &dead));
  ASSERT_VYRE_OK(vyre_egraph_image_destroy(dead));
  vyre_pending pending{};
  ASSERT_VYRE_OK(vyre_egraph_rebuild_async(image_.get(), nullptr, &pending));
  const struct {
    uint64_t bits;
    vyre_status expected;
  } cases[] = {{0, VYRE_STATUS_INVALID_HANDLE},
               {0x0123456789ABCDEFull, VYRE_STATUS_INVALID_HANDLE},
               {dead.bits, VYRE_STATUS_STALE_HANDLE},
               {pending.bits, VYRE_STATUS_INVALID_HANDLE}};
  for (const auto& c : cases) {
    EXPECT_REFUSED(vyre_egraph_image_append(vyre_egraph_image{c.bits}, &d), c.expected, kAppend)
        << std::hex << c.bits;
    uint64_t count = 7;
    EXPECT_REFUSED(vyre_egraph_changed_read(vyre_egraph_image{c.bits}, nullptr, 0, &count),
                   c.expected, kChanged)
        << std::hex << c.bits;
    EXPECT_EQ(count, 0u);
  }
  ASSERT_VYRE_OK(vyre_pending_release(pending));
}

// While an asynchronous rebuild is unwaited the image refuses appends and
// changed reads; the wait frees it.
TEST_F(EgraphAppendErrorsTest, AsyncRebuildUnwaited) {
  vyre_pending pending{};
  const uint32_t unions[] = {2, 0};
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.unions = unions;
  desc.union_count = 1;
  ASSERT_VYRE_OK(vyre_egraph_rebuild_async(image_.get(), &desc, &pending));
  const vyre_egraph_append_desc d = Valid();
  EXPECT_REFUSED(vyre_egraph_image_append(image_.get(), &d), VYRE_STATUS_INVALID_STATE, kAppend,
                 "wait");
  uint64_t count = 7;
  EXPECT_REFUSED(vyre_egraph_changed_read(image_.get(), nullptr, 0, &count),
                 VYRE_STATUS_INVALID_STATE, kChanged);
  ASSERT_VYRE_OK(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
  ASSERT_VYRE_OK(vyre_pending_release(pending));
  // c joins a; h(c) is visited and meets nothing.
  EXPECT_EQ(ReadChangedPairs(image_.get()), (Pairs{{2, 0}}));
  EXPECT_EQ(GrowthInfo(image_.get()).row_count, base_.rows());
}

// ===========================================================================
// vyre_egraph_changed_read's capacity contract
// ===========================================================================

TEST_F(EgraphAppendErrorsTest, ChangedReadCapacity) {
  // The last rebuild changed (1, 0), (4, 3), (6, 5).
  uint64_t count = 99;
  ASSERT_VYRE_OK(vyre_egraph_changed_read(image_.get(), nullptr, 0, &count));
  EXPECT_EQ(count, 3u);
  EXPECT_REFUSED(vyre_egraph_changed_read(image_.get(), nullptr, 0, nullptr),
                 VYRE_STATUS_INVALID_ARGUMENT, kChanged, "out_pair_count");
  std::vector<uint32_t> pairs(8, kPoison);
  count = 99;
  EXPECT_REFUSED(vyre_egraph_changed_read(image_.get(), nullptr, 2, &count),
                 VYRE_STATUS_INVALID_ARGUMENT, kChanged, "pairs");
  for (uint64_t capacity : {uint64_t{1}, uint64_t{2}}) {
    count = 99;
    EXPECT_REFUSED(vyre_egraph_changed_read(image_.get(), pairs.data(), capacity, &count),
                   VYRE_STATUS_OUT_OF_RANGE, kChanged, "3 classes", "at least 3")
        << capacity;
    EXPECT_EQ(count, 3u) << "the count comes back with the refusal";
    EXPECT_EQ(pairs, std::vector<uint32_t>(8, kPoison)) << "nothing may be written";
  }
  for (uint64_t capacity : {uint64_t{3}, uint64_t{4}}) {
    std::fill(pairs.begin(), pairs.end(), kPoison);
    count = 99;
    ASSERT_VYRE_OK(vyre_egraph_changed_read(image_.get(), pairs.data(), capacity, &count));
    EXPECT_EQ(count, 3u);
    EXPECT_EQ(pairs, (std::vector<uint32_t>{1, 0, 4, 3, 6, 5, kPoison, kPoison}));
  }
  // Capacity 0 with room given: OUT_OF_RANGE too, nothing written.
  std::fill(pairs.begin(), pairs.end(), kPoison);
  EXPECT_REFUSED(vyre_egraph_changed_read(image_.get(), pairs.data(), 0, &count),
                 VYRE_STATUS_OUT_OF_RANGE, kChanged);
  EXPECT_EQ(pairs, std::vector<uint32_t>(8, kPoison));
  ExpectUnchanged("changed_read");
  // A fresh image has changed nothing; its count is 0 and NULL is fine.
  GrowthImage fresh;
  const vyre_egraph_image_desc desc = CpuDesc(base_);
  ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, fresh.out()));
  count = 99;
  ASSERT_VYRE_OK(vyre_egraph_changed_read(fresh.get(), nullptr, 0, &count));
  EXPECT_EQ(count, 0u);
  ASSERT_VYRE_OK(vyre_egraph_changed_read(fresh.get(), pairs.data(), 4, &count));
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(pairs, std::vector<uint32_t>(8, kPoison));
}

}  // namespace
}  // namespace vyre_test
