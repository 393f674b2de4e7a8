// White-box tests of the CPU congruence closure (src/egraph/cpu_reference):
// hand-made graphs with known closures, then a brute-force fixpoint as the
// oracle on hundreds of random graphs, for one and many threads and the weak
// (colliding) hash; and of the incremental rebuild's state
// (src/egraph/cpu_incremental) against them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "egraph/cpu_incremental.h"
#include "egraph/cpu_reference.h"

namespace vyre::egraph {
namespace {

// A graph under construction: rows appended one by one.
struct Graph {
  uint64_t classes = 0;
  std::vector<uint32_t> row_classes, row_ops, child_offsets, child_lengths, children;

  void Row(uint32_t cls, uint32_t op, std::vector<uint32_t> kids = {}) {
    row_classes.push_back(cls);
    row_ops.push_back(op);
    child_offsets.push_back(static_cast<uint32_t>(children.size()));
    child_lengths.push_back(static_cast<uint32_t>(kids.size()));
    children.insert(children.end(), kids.begin(), kids.end());
    classes = std::max<uint64_t>(classes, cls + 1);
    for (uint32_t k : kids) classes = std::max<uint64_t>(classes, k + 1);
  }
  uint64_t rows() const { return row_classes.size(); }

  HostColumns Columns() const {
    HostColumns g;
    g.rows = rows();
    g.classes = classes;
    g.child_count = children.size();
    g.row_classes = row_classes.data();
    g.row_ops = row_ops.data();
    g.child_offsets = child_offsets.data();
    g.child_lengths = child_lengths.data();
    g.children = children.data();
    return g;
  }
};

std::vector<uint32_t> Identity(uint64_t n) {
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  return p;
}

struct Result {
  std::vector<uint32_t> canonical;
  CpuRebuildStats stats;
};

Result Rebuild(const Graph& graph, const std::vector<std::pair<uint32_t, uint32_t>>& unions,
               unsigned threads = 1, bool weak = false, uint32_t max_rounds = 0) {
  Result r;
  r.canonical = Identity(graph.classes);
  for (const auto& u : unions) Union(r.canonical.data(), u.first, u.second);
  r.stats = CpuRebuild(graph.Columns(), r.canonical.data(), threads, max_rounds, weak);
  return r;
}

uint64_t DistinctClasses(const std::vector<uint32_t>& canonical) {
  uint64_t n = 0;
  for (uint64_t x = 0; x < canonical.size(); ++x) n += canonical[x] == x;
  return n;
}

// The brute-force oracle: rounds with snapshot semantics, every pair of rows
// compared directly, O(rows^2) per round.
Result Oracle(const Graph& graph, const std::vector<std::pair<uint32_t, uint32_t>>& unions) {
  std::vector<uint32_t> p = Identity(graph.classes);
  auto find = [&](uint32_t x) {
    while (p[x] != x) x = p[x];
    return x;
  };
  auto unite = [&](uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    if (a > b) std::swap(a, b);
    p[b] = a;
    return true;
  };
  for (const auto& u : unions) unite(u.first, u.second);
  Result r;
  for (;;) {
    ++r.stats.rounds;
    std::vector<uint32_t> snap(graph.classes);
    for (uint32_t x = 0; x < graph.classes; ++x) snap[x] = find(x);
    std::vector<std::pair<uint32_t, uint32_t>> found;
    for (uint64_t i = 0; i < graph.rows(); ++i) {
      for (uint64_t j = i + 1; j < graph.rows(); ++j) {
        if (graph.row_ops[i] != graph.row_ops[j]) continue;
        if (graph.child_lengths[i] != graph.child_lengths[j]) continue;
        bool same = true;
        for (uint32_t k = 0; k < graph.child_lengths[i] && same; ++k) {
          same = snap[graph.children[graph.child_offsets[i] + k]] ==
                 snap[graph.children[graph.child_offsets[j] + k]];
        }
        if (same) found.emplace_back(snap[graph.row_classes[i]], snap[graph.row_classes[j]]);
      }
    }
    uint64_t merged = 0;
    for (const auto& f : found) merged += unite(f.first, f.second);
    r.stats.merges += merged;
    if (merged == 0) break;
  }
  r.canonical.resize(graph.classes);
  for (uint32_t x = 0; x < graph.classes; ++x) r.canonical[x] = find(x);
  return r;
}

// The pairs one pass finds under `canonical`, by brute force.
std::vector<std::pair<uint32_t, uint32_t>> OraclePairs(const Graph& graph,
                                                       const std::vector<uint32_t>& canonical) {
  const uint64_t n = graph.rows();
  std::vector<uint32_t> group_min(n);
  auto congruent = [&](uint64_t i, uint64_t j) {
    if (graph.row_ops[i] != graph.row_ops[j] || graph.child_lengths[i] != graph.child_lengths[j]) {
      return false;
    }
    for (uint32_t k = 0; k < graph.child_lengths[i]; ++k) {
      if (canonical[graph.children[graph.child_offsets[i] + k]] !=
          canonical[graph.children[graph.child_offsets[j] + k]]) {
        return false;
      }
    }
    return true;
  };
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t m = canonical[graph.row_classes[i]];
    for (uint64_t j = 0; j < n; ++j) {
      if (congruent(i, j)) m = std::min(m, canonical[graph.row_classes[j]]);
    }
    const uint32_t c = canonical[graph.row_classes[i]];
    if (c != m) pairs.emplace_back(m, c);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

enum Op : uint32_t { kA = 1, kB, kF, kG, kConst1, kConst2, kAdd };

// ---------------------------------------------------------------------------
// Union-find
// ---------------------------------------------------------------------------

TEST(EgraphUnionFindTest, MinimumIsTheRepresentative) {
  std::vector<uint32_t> p = Identity(10);
  EXPECT_TRUE(Union(p.data(), 7, 3));
  EXPECT_EQ(p[7], 3u);
  EXPECT_TRUE(Union(p.data(), 9, 7));
  EXPECT_EQ(Find(p.data(), 9), 3u);
  EXPECT_FALSE(Union(p.data(), 3, 9));
  EXPECT_TRUE(Union(p.data(), 9, 1));
  for (uint32_t x = 0; x < 10; ++x) EXPECT_LE(p[x], x);
  Compress(p.data(), p.size());
  const std::vector<uint32_t> expected = {0, 1, 2, 1, 4, 5, 6, 1, 8, 1};
  EXPECT_EQ(p, expected);
}

TEST(EgraphUnionFindTest, LongChainCompresses) {
  const uint32_t n = 100000;
  std::vector<uint32_t> p = Identity(n);
  for (uint32_t x = n - 1; x > 0; --x) ASSERT_TRUE(Union(p.data(), x, x - 1));
  Compress(p.data(), n);
  for (uint32_t x = 0; x < n; ++x) ASSERT_EQ(p[x], 0u);
}

// ---------------------------------------------------------------------------
// Hand-made graphs
// ---------------------------------------------------------------------------

TEST(EgraphCpuTest, EmptyGraph) {
  Graph g;
  g.classes = 4;
  Result r = Rebuild(g, {{3, 1}});
  EXPECT_EQ(r.stats.rounds, 1u);
  EXPECT_EQ(r.stats.merges, 0u);
  EXPECT_EQ(r.stats.rows_visited, 0u);
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 1, 2, 1}));
}

TEST(EgraphCpuTest, AlreadyClosedTakesOneRound) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kB);
  g.Row(2, kAdd, {0, 1});
  g.Row(3, kAdd, {1, 0});
  Result r = Rebuild(g, {});
  EXPECT_EQ(r.stats.rounds, 1u);
  EXPECT_EQ(r.stats.merges, 0u);
  EXPECT_EQ(r.stats.rows_visited, 4u);
  EXPECT_EQ(r.canonical, Identity(4));
}

// a, f(a), f(f(a)), f(f(f(a))) with a = f(a): everything is one class.
TEST(EgraphCpuTest, CycleCollapses) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kF, {0});
  g.Row(2, kF, {1});
  g.Row(3, kF, {2});
  Result r = Rebuild(g, {{0, 1}});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_EQ(r.stats.merges, 2u);
  EXPECT_EQ(r.stats.rounds, 3u);  // f(a)=f(f(a)), then f(f(f(a))), then nothing
  // Without the union nothing merges.
  r = Rebuild(g, {});
  EXPECT_EQ(r.canonical, Identity(4));
  EXPECT_EQ(r.stats.rounds, 1u);
}

// A node that is its own child: f(c) in class c, f(d) in class d; c = d by
// congruence once a = b... here directly: x = f(x), y = f(y) are congruent only
// once x = y, so they stay apart, and merging them merges nothing more.
TEST(EgraphCpuTest, SelfLoops) {
  Graph g;
  g.Row(0, kF, {0});
  g.Row(1, kF, {1});
  g.Row(2, kG, {0});
  g.Row(3, kG, {1});
  Result r = Rebuild(g, {});
  EXPECT_EQ(r.canonical, Identity(4));
  r = Rebuild(g, {{0, 1}});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 0, 2, 2}));
  EXPECT_EQ(r.stats.merges, 1u);
  EXPECT_EQ(r.stats.rounds, 2u);
}

// Two chains f^k(a) and f^k(b): a = b needs one round per level.
TEST(EgraphCpuTest, ChainNeedsOneRoundPerLevel) {
  const uint32_t depth = 200;
  Graph g;
  // Class i: f^i(a) for i <= depth; class depth+1+i: f^i(b).
  g.Row(0, kA);
  g.Row(depth + 1, kB);
  for (uint32_t i = 1; i <= depth; ++i) {
    g.Row(i, kF, {i - 1});
    g.Row(depth + 1 + i, kF, {depth + i});
  }
  for (unsigned threads : {1u, 2u, 8u}) {
    Result r = Rebuild(g, {{0, depth + 1}}, threads);
    EXPECT_EQ(r.stats.rounds, depth + 1) << threads;
    EXPECT_EQ(r.stats.merges, depth) << threads;
    // The first round visits every row; each later one only f(f^k(b)), whose
    // child just changed class (f(f^k(a)) keeps its form), and the last none.
    EXPECT_EQ(r.stats.rows_visited, g.rows() + depth - 1) << threads;
    for (uint32_t i = 0; i <= depth; ++i) {
      EXPECT_EQ(r.canonical[i], i);
      EXPECT_EQ(r.canonical[depth + 1 + i], i);
    }
  }
}

// Leaf payloads are ops: Const(1) and Const(2) never merge, Const(1) twice does.
TEST(EgraphCpuTest, ConstPayloadsMustNotMerge) {
  Graph g;
  g.Row(0, kConst1);
  g.Row(1, kConst2);
  g.Row(2, kConst1);
  g.Row(3, kG, {0});
  g.Row(4, kG, {1});
  g.Row(5, kG, {2});
  Result r = Rebuild(g, {});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 1, 0, 3, 4, 3}));
  EXPECT_EQ(r.stats.merges, 2u);
  EXPECT_EQ(r.stats.rounds, 3u);
}

// Same op, different arity: f(x), f(x, x) and f() are three different forms.
TEST(EgraphCpuTest, ArityDiffers) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kF, {0});
  g.Row(2, kF, {0, 0});
  g.Row(3, kF);
  g.Row(4, kF, {0, 0, 0});
  g.Row(5, kF, {0, 0});
  Result r = Rebuild(g, {});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 1, 2, 3, 4, 2}));
  EXPECT_EQ(r.stats.merges, 1u);
}

// Child order matters: add(a, b) and add(b, a) are different forms.
TEST(EgraphCpuTest, ChildOrderMatters) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kB);
  g.Row(2, kAdd, {0, 1});
  g.Row(3, kAdd, {1, 0});
  g.Row(4, kAdd, {0, 1});
  Result r = Rebuild(g, {});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 1, 2, 3, 2}));
  r = Rebuild(g, {{0, 1}});  // now all three adds are add(a, a)
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 0, 2, 2, 2}));
}

// A class holding two rows that become congruent merges with nothing; a third
// congruent row elsewhere merges its class in.
TEST(EgraphCpuTest, ClassWithTwoCongruentRows) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kB);
  g.Row(2, kF, {0});
  g.Row(2, kF, {1});
  Result r = Rebuild(g, {{0, 1}});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 0, 2}));
  EXPECT_EQ(r.stats.merges, 0u);
  EXPECT_EQ(r.stats.rounds, 1u);

  g.Row(3, kF, {1});
  g.Row(4, kG, {2});
  g.Row(5, kG, {3});
  r = Rebuild(g, {{0, 1}});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 0, 2, 2, 4, 4}));
  EXPECT_EQ(r.stats.merges, 2u);
  EXPECT_EQ(r.stats.rounds, 3u);
}

// The caller's unions may leave the union-find uncompressed; the result is
// compressed anyway.
TEST(EgraphCpuTest, UncompressedInputState) {
  Graph g;
  for (uint32_t c = 0; c < 6; ++c) g.Row(c, kA + (c % 2));
  std::vector<uint32_t> p = Identity(6);
  p[5] = 3;
  p[3] = 1;  // 5 -> 3 -> 1, not compressed
  CpuRebuildStats s = CpuRebuild(g.Columns(), p.data(), 1, 0, false);
  // A in 0, 2, 4; B in 1, 3, 5: all As and all Bs merge.
  EXPECT_EQ(p, (std::vector<uint32_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(s.merges, 2u);
}

TEST(EgraphCpuTest, MaxRoundsStopsEarlyAndCompresses) {
  const uint32_t depth = 10;
  Graph g;
  g.Row(0, kA);
  g.Row(depth + 1, kB);
  for (uint32_t i = 1; i <= depth; ++i) {
    g.Row(i, kF, {i - 1});
    g.Row(depth + 1 + i, kF, {depth + i});
  }
  for (unsigned threads : {1u, 4u}) {
    Result r = Rebuild(g, {{0, depth + 1}}, threads, false, 3);
    EXPECT_EQ(r.stats.rounds, 3u);
    EXPECT_EQ(r.stats.merges, 3u);
    for (uint32_t x = 0; x < g.classes; ++x) {
      EXPECT_EQ(r.canonical[r.canonical[x]], r.canonical[x]);  // compressed
    }
    EXPECT_EQ(r.canonical[depth + 1 + 3], 3u);
    EXPECT_EQ(r.canonical[depth + 1 + 4], depth + 1 + 4);
    // Continuing from there reaches the same fixpoint.
    CpuRebuildStats rest = CpuRebuild(g.Columns(), r.canonical.data(), threads, 0, false);
    EXPECT_EQ(rest.merges, depth - 3);
    EXPECT_EQ(r.canonical[2 * depth + 1], depth);
  }
}

// Classes with no rows (only referenced as children, or not at all).
TEST(EgraphCpuTest, ClassesWithoutRows) {
  Graph g;
  g.classes = 10;
  g.Row(5, kF, {7});
  g.Row(6, kF, {8});
  g.Row(1, kG, {5});
  g.Row(2, kG, {6});
  Result r = Rebuild(g, {{7, 8}});
  EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 1, 1, 3, 4, 5, 5, 7, 7, 9}));
  EXPECT_EQ(r.stats.rounds, 3u);
}

// Rows whose child ranges overlap in `children` (valid input).
TEST(EgraphCpuTest, OverlappingChildRanges) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kB);
  g.children = {0, 1, 0};
  g.row_classes = {0, 1, 2, 3, 4};
  g.row_ops = {kA, kB, kAdd, kAdd, kF};
  g.child_offsets = {0, 0, 0, 1, 0};
  g.child_lengths = {0, 0, 2, 2, 3};  // add(0,1), add(1,0), f(0,1,0)
  g.classes = 5;
  for (unsigned threads : {1u, 3u}) {
    Result r = Rebuild(g, {{0, 1}}, threads);
    EXPECT_EQ(r.canonical, (std::vector<uint32_t>{0, 0, 2, 2, 4}));
    EXPECT_EQ(Oracle(g, {{0, 1}}).canonical, r.canonical);
  }
}

// ---------------------------------------------------------------------------
// The single pass
// ---------------------------------------------------------------------------

TEST(EgraphCpuPassTest, PairsOfOneGroup) {
  Graph g;
  g.Row(0, kA);
  g.Row(3, kA);
  g.Row(5, kA);
  g.Row(2, kB);
  g.Row(4, kF, {0});
  g.Row(6, kF, {3});
  std::vector<uint32_t> canonical = Identity(7);
  auto pairs = CpuCongruencePairs(g.Columns(), canonical.data(), 1);
  EXPECT_EQ(pairs, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 3}, {0, 5}}));
  canonical = {0, 1, 2, 0, 4, 5, 6};  // 3 -> 0
  pairs = CpuCongruencePairs(g.Columns(), canonical.data(), 4);
  EXPECT_EQ(pairs, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 5}, {4, 6}}));
}

TEST(EgraphCpuPassTest, ClosedGraphHasNoPairs) {
  Graph g;
  g.Row(0, kA);
  g.Row(1, kF, {0});
  g.Row(1, kF, {1});
  std::vector<uint32_t> canonical = Identity(2);
  EXPECT_TRUE(CpuCongruencePairs(g.Columns(), canonical.data(), 2).empty());
  Graph empty;
  EXPECT_TRUE(CpuCongruencePairs(empty.Columns(), nullptr, 1).empty());
}

// ---------------------------------------------------------------------------
// Random graphs against the brute-force oracle
// ---------------------------------------------------------------------------

struct RandomCase {
  Graph graph;
  std::vector<std::pair<uint32_t, uint32_t>> unions;
};

// Small graphs with few ops and classes, so congruences are common.
RandomCase MakeRandom(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint32_t>(rng() % n); };
  RandomCase c;
  const uint32_t classes = 1 + pick(24);
  const uint32_t rows = pick(48);
  const uint32_t ops = 1 + pick(4);
  const uint32_t max_arity = pick(4);
  c.graph.classes = classes;
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<uint32_t> kids(pick(max_arity + 1));
    for (uint32_t& k : kids) k = pick(classes);
    c.graph.Row(pick(classes), pick(ops), kids);
  }
  const uint32_t unions = pick(6);
  for (uint32_t u = 0; u < unions; ++u) c.unions.emplace_back(pick(classes), pick(classes));
  return c;
}

TEST(EgraphCpuOracleTest, RandomGraphsMatchTheBruteForceFixpoint) {
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    const RandomCase c = MakeRandom(seed);
    const Result expected = Oracle(c.graph, c.unions);
    for (unsigned threads : {1u, 2u, 3u, 8u}) {
      for (bool weak : {false, true}) {
        const Result got = Rebuild(c.graph, c.unions, threads, weak);
        ASSERT_EQ(got.canonical, expected.canonical)
            << "seed " << seed << " threads " << threads << " weak " << weak;
        ASSERT_EQ(got.stats.merges, expected.stats.merges) << "seed " << seed;
        ASSERT_EQ(got.stats.rounds, expected.stats.rounds) << "seed " << seed;
        ASSERT_GE(got.stats.rows_visited, c.graph.rows());
      }
    }
  }
}

TEST(EgraphCpuOracleTest, RandomPassesMatchTheBruteForcePairs) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const RandomCase c = MakeRandom(seed);
    // The canonical classes after the caller's unions only.
    std::vector<uint32_t> canonical = Identity(c.graph.classes);
    for (const auto& u : c.unions) Union(canonical.data(), u.first, u.second);
    Compress(canonical.data(), canonical.size());
    const auto expected = OraclePairs(c.graph, canonical);
    for (unsigned threads : {1u, 2u, 5u}) {
      ASSERT_EQ(CpuCongruencePairs(c.graph.Columns(), canonical.data(), threads), expected)
          << "seed " << seed << " threads " << threads;
    }
    // Applying one pass's pairs is exactly one round of the rebuild.
    const Result one = Rebuild(c.graph, c.unions, 1, false, 1);
    for (const auto& p : expected) Union(canonical.data(), p.first, p.second);
    Compress(canonical.data(), canonical.size());
    ASSERT_EQ(one.canonical, canonical) << "seed " << seed;
  }
}

// A larger graph (arity <= 2, many duplicated subterms in layers): every
// thread count and the weak hash agree; a duplicated layer cascades.
Graph LayeredGraph(uint64_t seed, uint32_t layers, uint32_t terms_per_layer, uint32_t copies) {
  std::mt19937_64 rng(seed);
  Graph g;
  uint32_t next_class = 0;
  // copies_of[layer][term] = the classes of that term's copies.
  std::vector<std::vector<std::vector<uint32_t>>> copies_of(layers);
  std::vector<std::vector<std::pair<uint32_t, std::vector<uint32_t>>>> shape(layers);
  for (uint32_t l = 0; l < layers; ++l) {
    copies_of[l].resize(terms_per_layer);
    for (uint32_t t = 0; t < terms_per_layer; ++t) {
      uint32_t op;
      std::vector<uint32_t> kid_terms;
      if (l == 0) {
        op = 100 + t;  // distinct leaves
      } else {
        op = static_cast<uint32_t>(rng() % 3);
        kid_terms.push_back(static_cast<uint32_t>(rng() % terms_per_layer));
        if (rng() % 2) kid_terms.push_back(static_cast<uint32_t>(rng() % terms_per_layer));
      }
      for (uint32_t k = 0; k < copies; ++k) {
        std::vector<uint32_t> kids;
        for (uint32_t kt : kid_terms) {
          const auto& options = copies_of[l - 1][kt];
          kids.push_back(options[rng() % options.size()]);
        }
        const uint32_t cls = next_class++;
        g.Row(cls, op, kids);
        copies_of[l][t].push_back(cls);
      }
    }
  }
  // Shuffle the rows so that the order says nothing.
  std::vector<uint32_t> order = Identity(g.rows());
  std::shuffle(order.begin(), order.end(), rng);
  Graph out;
  out.classes = g.classes;
  for (uint32_t r : order) {
    std::vector<uint32_t> kids(g.children.begin() + g.child_offsets[r],
                               g.children.begin() + g.child_offsets[r] + g.child_lengths[r]);
    out.Row(g.row_classes[r], g.row_ops[r], kids);
  }
  return out;
}

TEST(EgraphCpuTest, ThreadCountsAgreeOnALayeredGraph) {
  const uint32_t layers = 7;
  const Graph g = LayeredGraph(42, layers, 3000, 4);
  const Result one = Rebuild(g, {}, 1);
  // Leaf copies merge in round 1, layer l in round l + 1, then an empty round.
  EXPECT_EQ(one.stats.rounds, layers + 1);
  EXPECT_GT(one.stats.merges, g.rows() / 2);
  EXPECT_EQ(DistinctClasses(one.canonical), g.classes - one.stats.merges);
  for (unsigned threads : {0u, 2u, 8u}) {
    const Result other = Rebuild(g, {}, threads);
    EXPECT_EQ(other.canonical, one.canonical) << threads;
    EXPECT_EQ(other.stats.rounds, one.stats.rounds) << threads;
    EXPECT_EQ(other.stats.merges, one.stats.merges) << threads;
    EXPECT_EQ(other.stats.rows_visited, one.stats.rows_visited) << threads;
  }
  // The weak hash on a smaller instance (its groups are whole op classes).
  const Graph small = LayeredGraph(7, 4, 60, 3);
  const Result strong = Rebuild(small, {}, 1);
  for (unsigned threads : {1u, 4u}) {
    const Result weak = Rebuild(small, {}, threads, true);
    EXPECT_EQ(weak.canonical, strong.canonical);
    EXPECT_EQ(weak.stats.rounds, strong.stats.rounds);
  }
  EXPECT_EQ(Oracle(small, {}).canonical, strong.canonical);
}

// ---------------------------------------------------------------------------
// The incremental rebuild's state (cpu_incremental.h)
// ---------------------------------------------------------------------------

using Changed = std::vector<std::pair<uint32_t, uint32_t>>;

Changed Diff(const std::vector<uint32_t>& before, const std::vector<uint32_t>& after) {
  Changed diff;
  for (uint32_t x = 0; x < after.size(); ++x) {
    if (before[x] != after[x]) diff.emplace_back(x, after[x]);
  }
  return diff;
}

std::vector<uint32_t> FlatUnions(const std::vector<std::pair<uint32_t, uint32_t>>& unions) {
  std::vector<uint32_t> flat;
  for (const auto& u : unions) {
    flat.push_back(u.first);
    flat.push_back(u.second);
  }
  return flat;
}

// With no row indexed (formed_rows 0), the first rebuild visits every row in
// round 1 and then the rows naming a changed class: CpuRebuild's rounds,
// merges and visits exactly, for any thread count and either hash.
TEST(EgraphCpuIncrementalTest, UnformedRowsRebuildLikeCpuRebuild) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const RandomCase c = MakeRandom(seed);
    for (unsigned threads : {1u, 3u}) {
      for (bool weak : {false, true}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " threads " + std::to_string(threads) +
                     " weak " + std::to_string(weak));
        const Result full = Rebuild(c.graph, c.unions, threads, weak);
        std::vector<uint32_t> parent = Identity(c.graph.classes);
        CpuIncremental state(c.graph.Columns(), parent.data(), 0, threads, weak);
        const std::vector<uint32_t> unions = FlatUnions(c.unions);
        Changed changed;
        const CpuIncrementalStats stats = state.Rebuild(
            c.graph.Columns(), parent.data(), unions.data(), c.unions.size(), 0, &changed);
        ASSERT_EQ(parent, full.canonical);
        EXPECT_EQ(stats.rounds, full.stats.rounds);
        EXPECT_EQ(stats.merges, full.stats.merges);
        EXPECT_EQ(stats.rows_visited, full.stats.rows_visited);
        EXPECT_TRUE(stats.fixpoint);
        EXPECT_EQ(changed, Diff(Identity(c.graph.classes), parent));
      }
    }
  }
}

// Indexed from a state that is no fixpoint (the unions alone), the pairs the
// indexing finds are merged by the first rebuild: still the fixpoint.
TEST(EgraphCpuIncrementalTest, IndexedAwayFromAFixpointStillCloses) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const RandomCase c = MakeRandom(seed);
    const Result expected = Oracle(c.graph, c.unions);
    for (unsigned threads : {1u, 3u}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " threads " + std::to_string(threads));
      std::vector<uint32_t> parent = Identity(c.graph.classes);
      for (const auto& u : c.unions) Union(parent.data(), u.first, u.second);
      Compress(parent.data(), c.graph.classes);
      const std::vector<uint32_t> start = parent;
      CpuIncremental state(c.graph.Columns(), parent.data(), c.graph.rows(), threads, false);
      Changed changed;
      const CpuIncrementalStats stats =
          state.Rebuild(c.graph.Columns(), parent.data(), nullptr, 0, 0, &changed);
      ASSERT_EQ(parent, expected.canonical);
      EXPECT_TRUE(stats.fixpoint);
      EXPECT_EQ(changed, Diff(start, parent));
      // Closed now: nothing to visit, nothing changes.
      const CpuIncrementalStats again =
          state.Rebuild(c.graph.Columns(), parent.data(), nullptr, 0, 0, &changed);
      EXPECT_EQ(again.rounds, 1u);
      EXPECT_EQ(again.rows_visited, 0u);
      EXPECT_TRUE(changed.empty());
    }
  }
}

// A layered graph big enough for several workers: the same answers, visits
// included, as CpuRebuild.
TEST(EgraphCpuIncrementalTest, ManyWorkersOnALayeredGraph) {
  const uint32_t layers = 7;
  const Graph g = LayeredGraph(42, layers, 6000, 4);
  const Result one = Rebuild(g, {}, 1);
  for (unsigned threads : {1u, 2u, 8u}) {
    std::vector<uint32_t> parent = Identity(g.classes);
    CpuIncremental state(g.Columns(), parent.data(), 0, threads, false);
    Changed changed;
    const CpuIncrementalStats stats =
        state.Rebuild(g.Columns(), parent.data(), nullptr, 0, 0, &changed);
    EXPECT_EQ(parent, one.canonical) << threads;
    EXPECT_EQ(stats.rounds, one.stats.rounds) << threads;
    EXPECT_EQ(stats.merges, one.stats.merges) << threads;
    EXPECT_EQ(stats.rows_visited, one.stats.rows_visited) << threads;
    EXPECT_EQ(changed, Diff(Identity(g.classes), parent)) << threads;
    EXPECT_GT(state.bytes(), g.rows() * 8) << "forms, hashes and the index are counted";
  }
}

}  // namespace
}  // namespace vyre::egraph
