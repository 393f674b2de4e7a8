// E-graph images that grow step by step, checked against images rebuilt from
// scratch and against a naive closure: the case runner of the incremental
// rebuild tests, for any device (tests/unit/egraph_incremental_test.cc runs it
// on CPU images; a GPU suite passes its context in IncrementalTarget).
// Header-only; needs gtest, vyre_cuda.h and vyre_test_util.h.
//
// A case is an e-graph whose class ids are numbered by first use
// (ByFirstUse), so that the classes rows [0, e) use are exactly [0, c(e)),
// and a plan (GrowthPlan): a base, made with vyre_egraph_image_create and
// rebuilt, then steps, each appending its rows with the classes they use
// first (children may name classes of earlier steps and of the same step),
// and rebuilding with its unions. After every rebuild RunGrowthCase checks,
// comparing every element:
//   - the canonical classes (the column and canonical_out) against a naive
//     closure from the image's state before the rebuild, and, when the
//     rebuild reached its fixpoint, against a fresh image of everything so
//     far rebuilt from scratch with every union so far (RESET);
//   - rounds, merges, union_merges, classes_before/after against the naive
//     closure, and an incremental step's rows_visited against the worklists
//     of egg's rebuild (round 1: the rows appended since the last rebuild,
//     the rows a round limit left, the rows with a child whose canonical
//     class the unions changed; round k + 1: the rows with a child whose
//     canonical class round k changed), full_rounds 0 after the base;
//   - vyre_egraph_changed_read: exactly the classes whose canonical class
//     differs from the snapshot taken before the rebuild;
//   - every column of the grown image (signatures against the fresh image's)
//     and its info.
#ifndef VYRE_TESTS_SUPPORT_EGRAPH_INCREMENTAL_CASES_H_
#define VYRE_TESTS_SUPPORT_EGRAPH_INCREMENTAL_CASES_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {

// An e-graph's columns, children laid out densely in row order (the fields
// of vyre::tools::EgraphColumns; GraphOf copies those).
struct GrowthGraph {
  uint64_t classes = 0;
  std::vector<uint32_t> row_classes, row_ops, child_offsets, child_lengths, children;

  uint64_t rows() const { return row_classes.size(); }
  // The first child slot of row r (the end of the children when r == rows).
  uint64_t ChildBegin(uint64_t r) const { return r < rows() ? child_offsets[r] : children.size(); }
  void AddRow(uint32_t cls, uint32_t op, const std::vector<uint32_t>& kids) {
    row_classes.push_back(cls);
    row_ops.push_back(op);
    child_offsets.push_back(static_cast<uint32_t>(children.size()));
    child_lengths.push_back(static_cast<uint32_t>(kids.size()));
    children.insert(children.end(), kids.begin(), kids.end());
  }
};

template <typename Columns>
GrowthGraph GraphOf(const Columns& c) {
  GrowthGraph g;
  g.classes = c.classes;
  for (uint64_t r = 0; r < c.row_classes.size(); ++r) {
    const auto begin = c.children.begin() + c.child_offsets[r];
    g.AddRow(c.row_classes[r], c.row_ops[r],
             std::vector<uint32_t>(begin, begin + c.child_lengths[r]));
  }
  return g;
}

// `g` with its classes renumbered in order of first use (each row's class,
// then its children), classes no row names last; children re-laid densely.
inline GrowthGraph ByFirstUse(const GrowthGraph& g) {
  constexpr uint32_t kUnset = UINT32_MAX;
  std::vector<uint32_t> id(g.classes, kUnset);
  uint32_t next = 0;
  auto use = [&](uint32_t c) {
    if (id[c] == kUnset) id[c] = next++;
    return id[c];
  };
  GrowthGraph out;
  out.classes = g.classes;
  for (uint64_t r = 0; r < g.rows(); ++r) {
    const uint32_t cls = use(g.row_classes[r]);
    std::vector<uint32_t> kids(g.child_lengths[r]);
    for (uint32_t j = 0; j < g.child_lengths[r]; ++j) {
      kids[j] = use(g.children[g.child_offsets[r] + j]);
    }
    out.AddRow(cls, g.row_ops[r], kids);
  }
  return out;
}

// used[e]: the classes rows [0, e) name, for a graph numbered by first use.
inline std::vector<uint64_t> ClassesUsedByPrefix(const GrowthGraph& g) {
  std::vector<uint64_t> used(g.rows() + 1, 0);
  uint64_t top = 0;
  for (uint64_t r = 0; r < g.rows(); ++r) {
    top = std::max<uint64_t>(top, uint64_t{g.row_classes[r]} + 1);
    for (uint32_t j = 0; j < g.child_lengths[r]; ++j) {
      top = std::max<uint64_t>(top, uint64_t{g.children[g.child_offsets[r] + j]} + 1);
    }
    used[r + 1] = top;
  }
  return used;
}

// ---------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------

struct GrowthStep {
  uint64_t rows_end = 0;         // rows [previous rows_end, rows_end) join in this step
  uint64_t classes_end = 0;      // classes [previous classes_end, classes_end) too
  std::vector<uint32_t> unions;  // 2 class ids each, below classes_end
  uint32_t max_rounds = 0;
};

// steps[0] is the base (created, not appended); the last step ends at the
// graph's rows and classes.
struct GrowthPlan {
  std::vector<GrowthStep> steps;
};

// Unions for a step: `count` pairs of classes below classes_end, from the
// rows below rows_end.
using UnionSource = std::function<std::vector<uint32_t>(uint64_t rows_end, uint64_t classes_end,
                                                        uint32_t count, std::mt19937& rng)>;

// Pairs of random classes.
inline std::vector<uint32_t> RandomClassUnions(uint64_t, uint64_t classes_end, uint32_t count,
                                               std::mt19937& rng) {
  std::vector<uint32_t> unions;
  for (uint32_t i = 0; i < 2 * count && classes_end > 0; ++i) {
    unions.push_back(static_cast<uint32_t>(rng() % classes_end));
  }
  return unions;
}

// A random plan: a base of 30 to 90% of the rows, then 1 to 3 steps at
// random split points (some may be empty), each with 0 to `max_unions`
// unions from `unions`; with `round_limits`, a step before the last may stop
// after one or two rounds (the next step must still reach the fixpoint).
inline GrowthPlan RandomPlan(const GrowthGraph& g, uint32_t seed, const UnionSource& unions,
                             uint32_t max_unions, bool round_limits) {
  std::mt19937 rng(seed);
  const std::vector<uint64_t> used = ClassesUsedByPrefix(g);
  const uint64_t rows = g.rows();
  const uint64_t base_end = rows * (30 + rng() % 61) / 100;
  const uint32_t steps = 1 + rng() % 3;
  std::vector<uint64_t> ends = {base_end};
  for (uint32_t k = 1; k < steps; ++k) {
    ends.push_back(base_end + rng() % (rows - base_end + 1));
  }
  std::sort(ends.begin(), ends.end());
  ends.push_back(rows);
  GrowthPlan plan;
  for (size_t k = 0; k < ends.size(); ++k) {
    GrowthStep step;
    step.rows_end = ends[k];
    step.classes_end = k + 1 == ends.size() ? g.classes : used[ends[k]];
    step.unions = unions(step.rows_end, step.classes_end, rng() % (max_unions + 1), rng);
    if (round_limits && k > 0 && k + 1 < ends.size() && rng() % 3 == 0) {
      step.max_rounds = 1 + rng() % 2;
    }
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

// ---------------------------------------------------------------------------
// The naive closure, with egg's worklists counted
// ---------------------------------------------------------------------------

struct NaiveGrowth {
  std::vector<uint32_t> canonical;
  uint32_t rounds = 0;
  uint64_t merges = 0, union_merges = 0, rows_visited = 0;
  bool fixpoint = false;
  std::vector<uint32_t> pending;  // rows the next rebuild visits first
};

inline uint32_t NaiveGrowthFind(std::vector<uint32_t>& parent, uint32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

inline bool NaiveGrowthUnion(std::vector<uint32_t>& parent, uint32_t a, uint32_t b) {
  a = NaiveGrowthFind(parent, a);
  b = NaiveGrowthFind(parent, b);
  if (a == b) return false;
  parent[std::max(a, b)] = std::min(a, b);
  return true;
}

inline std::vector<uint32_t> NaiveGrowthFlat(std::vector<uint32_t>& parent) {
  std::vector<uint32_t> flat(parent.size());
  for (size_t x = 0; x < parent.size(); ++x) {
    flat[x] = NaiveGrowthFind(parent, static_cast<uint32_t>(x));
  }
  return flat;
}

// Rows below `rows` with a child whose class is in a different canonical
// class in `after` than in `before`, ascending.
inline std::vector<uint32_t> RowsNamingChanged(const GrowthGraph& g, uint64_t rows,
                                               const std::vector<uint32_t>& before,
                                               const std::vector<uint32_t>& after) {
  std::vector<uint32_t> out;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint32_t j = 0; j < g.child_lengths[r]; ++j) {
      const uint32_t c = g.children[g.child_offsets[r] + j];
      if (before[c] != after[c]) {
        out.push_back(static_cast<uint32_t>(r));
        break;
      }
    }
  }
  return out;
}

// Rows [0, rows) from `start` (canonical classes, compressed): the unions,
// then snapshot rounds over every row (congruent rows found in a std map of
// forms under the classes as the round began), to the fixpoint or
// max_rounds. `fresh`: rows an incremental rebuild visits in round 1 besides
// those naming a class the unions moved (appended, or left pending).
inline NaiveGrowth NaiveGrow(const GrowthGraph& g, uint64_t rows, std::vector<uint32_t> start,
                             const std::vector<uint32_t>& fresh,
                             const std::vector<uint32_t>& unions, uint32_t max_rounds) {
  NaiveGrowth out;
  std::vector<uint32_t> parent = start;
  for (size_t i = 0; i + 1 < unions.size(); i += 2) {
    out.union_merges += NaiveGrowthUnion(parent, unions[i], unions[i + 1]);
  }
  std::vector<uint32_t> snapshot = NaiveGrowthFlat(parent);
  std::vector<uint32_t> list = RowsNamingChanged(g, rows, start, snapshot);
  list.insert(list.end(), fresh.begin(), fresh.end());
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  for (;;) {
    ++out.rounds;
    out.rows_visited += list.size();
    std::unordered_map<std::string, uint32_t> first;  // form -> a row's class
    uint64_t merged = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      std::string form(8 + 4 * size_t{g.child_lengths[r]}, '\0');
      const uint32_t head[2] = {g.row_ops[r], g.child_lengths[r]};
      std::memcpy(&form[0], head, 8);
      for (uint32_t j = 0; j < g.child_lengths[r]; ++j) {
        const uint32_t c = snapshot[g.children[g.child_offsets[r] + j]];
        std::memcpy(&form[8 + 4 * size_t{j}], &c, 4);
      }
      const auto [it, inserted] = first.emplace(std::move(form), g.row_classes[r]);
      if (!inserted) {
        merged += NaiveGrowthUnion(parent, snapshot[it->second], snapshot[g.row_classes[r]]);
      }
    }
    out.merges += merged;
    if (merged == 0) {
      out.fixpoint = true;
      break;
    }
    const std::vector<uint32_t> next = NaiveGrowthFlat(parent);
    list = RowsNamingChanged(g, rows, snapshot, next);
    snapshot = next;
    if (max_rounds != 0 && out.rounds >= max_rounds) {
      out.pending = list;
      break;
    }
  }
  out.canonical = std::move(snapshot);
  return out;
}

// ---------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------

struct IncrementalTarget {
  vyre_egraph_device device = VYRE_EGRAPH_DEVICE_CPU;
  vyre_context context{};  // GPU images
  uint32_t cpu_threads = 1;
  // Added to every rebuild (e.g. VYRE_EGRAPH_REBUILD_COLLIDING_HASH).
  uint32_t rebuild_flags = 0;
  // Reserve the whole graph's capacity at creation (no append grows it).
  bool reserve = false;
  // Incremental steps' rows_visited equal the naive worklists, full_rounds 0.
  bool check_visits = true;
};

// An image handle that destroys itself.
class GrowthImage {
 public:
  GrowthImage() = default;
  ~GrowthImage() {
    if (image_.bits != 0) {
      EXPECT_VYRE_OK(vyre_egraph_image_destroy(image_));
    }
  }
  GrowthImage(const GrowthImage&) = delete;
  GrowthImage& operator=(const GrowthImage&) = delete;
  vyre_egraph_image get() const { return image_; }
  vyre_egraph_image* out() { return &image_; }

 private:
  vyre_egraph_image image_{};
};

// Rows [0, rows) and classes [0, classes) of `g` as an image descriptor.
inline vyre_egraph_image_desc PrefixDesc(const GrowthGraph& g, uint64_t rows, uint64_t classes,
                                         const IncrementalTarget& t) {
  vyre_egraph_image_desc d = VYRE_EGRAPH_IMAGE_DESC_INIT;
  d.device = t.device;
  d.context = t.device == VYRE_EGRAPH_DEVICE_GPU ? t.context : vyre_context{};
  d.row_count = rows;
  d.class_count = classes;
  d.child_count = g.ChildBegin(rows);
  d.row_classes = g.row_classes.data();
  d.row_ops = g.row_ops.data();
  d.child_offsets = g.child_offsets.data();
  d.child_lengths = g.child_lengths.data();
  d.children = g.children.data();
  d.cpu_threads = t.cpu_threads;
  return d;
}

// Rows [begin, end) of `g` with `new_classes` classes as an append; its
// child offsets (relative to its children) go to `offsets`.
inline vyre_egraph_append_desc SliceAppend(const GrowthGraph& g, uint64_t begin, uint64_t end,
                                           uint64_t new_classes, std::vector<uint32_t>* offsets) {
  const uint64_t base = g.ChildBegin(begin);
  offsets->clear();
  for (uint64_t r = begin; r < end; ++r) {
    offsets->push_back(static_cast<uint32_t>(g.child_offsets[r] - base));
  }
  vyre_egraph_append_desc d = VYRE_EGRAPH_APPEND_DESC_INIT;
  d.class_count = new_classes;
  d.row_count = end - begin;
  d.child_count = g.ChildBegin(end) - base;
  d.row_classes = g.row_classes.data() + begin;
  d.row_ops = g.row_ops.data() + begin;
  d.child_offsets = offsets->data();
  d.child_lengths = g.child_lengths.data() + begin;
  d.children = g.children.data() + base;
  return d;
}

// Entries [0, count) of a column; one poisoned entry past them must stay.
inline std::vector<uint32_t> ReadGrowthColumn(vyre_egraph_image image, vyre_egraph_column column,
                                              uint64_t count) {
  std::vector<uint32_t> values(count + 1, kPoison);
  EXPECT_VYRE_OK(vyre_egraph_image_read(image, column, 0, count, values.data()));
  EXPECT_EQ(values[count], kPoison) << "the read wrote past its count";
  values.resize(count);
  return values;
}

inline vyre_egraph_image_info GrowthInfo(vyre_egraph_image image) {
  vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  EXPECT_VYRE_OK(vyre_egraph_image_info_get(image, &info));
  return info;
}

// The changed pairs through vyre_egraph_changed_read: the count, then
// exactly that many (a poisoned pair past them must stay).
inline std::vector<std::pair<uint32_t, uint32_t>> ReadChangedPairs(vyre_egraph_image image) {
  uint64_t count = UINT64_MAX;
  EXPECT_VYRE_OK(vyre_egraph_changed_read(image, nullptr, 0, &count));
  if (count == UINT64_MAX) return {};
  std::vector<uint32_t> flat(2 * count + 2, kPoison);
  uint64_t again = UINT64_MAX;
  EXPECT_VYRE_OK(vyre_egraph_changed_read(image, flat.data(), count, &again));
  EXPECT_EQ(again, count);
  EXPECT_EQ(flat[2 * count], kPoison) << "changed_read wrote past its pairs";
  EXPECT_EQ(flat[2 * count + 1], kPoison) << "changed_read wrote past its pairs";
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (uint64_t i = 0; i < count; ++i) pairs.emplace_back(flat[2 * i], flat[2 * i + 1]);
  return pairs;
}

// (x, after[x]) for every x with before[x] != after[x].
inline std::vector<std::pair<uint32_t, uint32_t>> CanonicalDiff(
    const std::vector<uint32_t>& before, const std::vector<uint32_t>& after) {
  std::vector<std::pair<uint32_t, uint32_t>> diff;
  for (size_t x = 0; x < after.size(); ++x) {
    if (before[x] != after[x]) diff.emplace_back(static_cast<uint32_t>(x), after[x]);
  }
  return diff;
}

inline uint64_t GrowthDistinct(const std::vector<uint32_t>& canonical) {
  uint64_t n = 0;
  for (size_t x = 0; x < canonical.size(); ++x) n += canonical[x] == x;
  return n;
}

// Every column of `image` against rows [0, rows) of `g`; signatures against
// `reference`'s (an image of the same rows, built at once).
inline void ExpectGrowthColumns(vyre_egraph_image image, vyre_egraph_image reference,
                                const GrowthGraph& g, uint64_t rows) {
  const auto prefix = [&](const std::vector<uint32_t>& column, uint64_t n) {
    return std::vector<uint32_t>(column.begin(), column.begin() + n);
  };
  const uint64_t children = g.ChildBegin(rows);
  EXPECT_TRUE(SameU32(ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_ROW_CLASSES, rows),
                      prefix(g.row_classes, rows)))
      << "row_classes";
  EXPECT_TRUE(
      SameU32(ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_ROW_OPS, rows), prefix(g.row_ops, rows)))
      << "row_ops";
  EXPECT_TRUE(SameU32(ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_CHILD_OFFSETS, rows),
                      prefix(g.child_offsets, rows)))
      << "child_offsets";
  EXPECT_TRUE(SameU32(ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_CHILD_LENGTHS, rows),
                      prefix(g.child_lengths, rows)))
      << "child_lengths";
  EXPECT_TRUE(SameU32(ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_CHILDREN, children),
                      prefix(g.children, children)))
      << "children";
  EXPECT_TRUE(SameU32(ReadGrowthColumn(image, VYRE_EGRAPH_COLUMN_ROW_SIGNATURES, rows),
                      ReadGrowthColumn(reference, VYRE_EGRAPH_COLUMN_ROW_SIGNATURES, rows)))
      << "row_signatures (appended vs created at once)";
}

inline std::string DescribeGrowth(const vyre_egraph_rebuild_result& r) {
  return "rounds " + std::to_string(r.rounds) + ", merges " + std::to_string(r.merges) +
         ", union_merges " + std::to_string(r.union_merges) + ", classes " +
         std::to_string(r.classes_before) + " -> " + std::to_string(r.classes_after) +
         ", rows_visited " + std::to_string(r.rows_visited) + ", full_rounds " +
         std::to_string(r.full_rounds) + ", changed " + std::to_string(r.changed_class_count);
}

// A rebuild that must succeed; canonical_out goes to `canonical` (sized to
// the class count).
inline vyre_egraph_rebuild_result GrowthRebuild(vyre_egraph_image image,
                                                const std::vector<uint32_t>& unions, uint32_t flags,
                                                uint32_t max_rounds,
                                                std::vector<uint32_t>* canonical) {
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.flags = flags;
  desc.unions = unions.empty() ? nullptr : unions.data();
  desc.union_count = unions.size() / 2;
  desc.max_rounds = max_rounds;
  desc.canonical_out = canonical->empty() ? nullptr : canonical->data();
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  EXPECT_VYRE_OK(vyre_egraph_rebuild(image, &desc, &result));
  return result;
}

// A fresh image of rows [0, rows) and classes [0, classes), rebuilt from
// scratch with `unions`: its canonical classes (and its signatures' image in
// `fresh`).
inline std::vector<uint32_t> FromScratch(const GrowthGraph& g, uint64_t rows, uint64_t classes,
                                         const std::vector<uint32_t>& unions,
                                         const IncrementalTarget& t, GrowthImage* fresh,
                                         vyre_egraph_rebuild_result* result) {
  const vyre_egraph_image_desc desc = PrefixDesc(g, rows, classes, t);
  EXPECT_VYRE_OK(vyre_egraph_image_create(&desc, fresh->out()));
  std::vector<uint32_t> canonical(classes, kPoison);
  *result = GrowthRebuild(fresh->get(), unions, t.rebuild_flags | VYRE_EGRAPH_REBUILD_RESET, 0,
                          &canonical);
  return canonical;
}

// What a run did, summed over its incremental steps (for the test's notes).
struct GrowthTotals {
  uint64_t steps = 0, round_limited = 0;
  uint64_t rows = 0, rows_visited = 0;  // the image's rows at each step, and the visits
  uint64_t merges = 0, union_merges = 0, changed = 0;

  std::string Describe() const {
    return std::to_string(steps) + " incremental steps (" + std::to_string(round_limited) +
           " stopped by max_rounds): " + std::to_string(rows_visited) + " rows visited of " +
           std::to_string(rows) + ", " + std::to_string(merges) + " merges by congruence, " +
           std::to_string(union_merges) + " by unions, " + std::to_string(changed) +
           " classes changed";
  }
};

// Runs `plan` on `g` (numbered by first use) on `t`'s device. Failures are
// reported through gtest, with the step in the trace. `totals` (optional)
// accumulates the incremental steps.
inline void RunGrowthCase(const IncrementalTarget& t, const GrowthGraph& g, const GrowthPlan& plan,
                          GrowthTotals* totals = nullptr) {
  ASSERT_FALSE(plan.steps.empty());
  GrowthImage growing;
  {
    const GrowthStep& base = plan.steps[0];
    vyre_egraph_image_desc desc = PrefixDesc(g, base.rows_end, base.classes_end, t);
    if (t.reserve) {
      desc.row_capacity = g.rows();
      desc.class_capacity = g.classes;
      desc.child_capacity = g.children.size();
    }
    ASSERT_VYRE_OK(vyre_egraph_image_create(&desc, growing.out()));
  }
  std::vector<uint32_t> all_unions, pending, offsets;
  std::vector<uint32_t> canonical_now;  // the growing image's canonical classes
  uint64_t rows_before = 0, classes_before = 0;
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const GrowthStep& step = plan.steps[k];
    SCOPED_TRACE("step " + std::to_string(k) + " of " + std::to_string(plan.steps.size()) +
                 ": rows [" + std::to_string(rows_before) + ", " + std::to_string(step.rows_end) +
                 "), classes [" + std::to_string(classes_before) + ", " +
                 std::to_string(step.classes_end) + "), " + std::to_string(step.unions.size() / 2) +
                 " unions, max_rounds " + std::to_string(step.max_rounds));
    if (k > 0) {
      const vyre_egraph_append_desc append =
          SliceAppend(g, rows_before, step.rows_end, step.classes_end - classes_before, &offsets);
      ASSERT_VYRE_OK(vyre_egraph_image_append(growing.get(), &append));
    }
    const uint64_t rows = step.rows_end;
    const uint64_t classes = step.classes_end;
    // The state the rebuild starts from: the last rebuild's, new classes alone.
    const std::vector<uint32_t> start =
        ReadGrowthColumn(growing.get(), VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, classes);
    std::vector<uint32_t> expected_start = canonical_now;
    for (uint64_t x = classes_before; x < classes; ++x) {
      expected_start.push_back(static_cast<uint32_t>(x));
    }
    EXPECT_TRUE(SameU32(start, expected_start)) << "canonical classes after the append";

    std::vector<uint32_t> fresh_rows = pending;
    for (uint64_t r = rows_before; r < rows; ++r) fresh_rows.push_back(static_cast<uint32_t>(r));
    const NaiveGrowth expected =
        NaiveGrow(g, rows, start, fresh_rows, step.unions, step.max_rounds);
    std::vector<uint32_t> canonical(classes, kPoison);
    const vyre_egraph_rebuild_result r =
        GrowthRebuild(growing.get(), step.unions, t.rebuild_flags, step.max_rounds, &canonical);
    const std::string about = DescribeGrowth(r);
    all_unions.insert(all_unions.end(), step.unions.begin(), step.unions.end());

    EXPECT_TRUE(SameU32(canonical, expected.canonical)) << "canonical_out vs the naive closure";
    canonical_now = ReadGrowthColumn(growing.get(), VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, classes);
    EXPECT_TRUE(SameU32(canonical_now, canonical)) << "CANONICAL_CLASSES vs canonical_out";
    EXPECT_EQ(r.rounds, expected.rounds) << about;
    EXPECT_EQ(r.merges, expected.merges) << about;
    EXPECT_EQ(r.union_merges, expected.union_merges) << about;
    EXPECT_EQ(r.classes_before, GrowthDistinct(start)) << about;
    EXPECT_EQ(r.classes_after, GrowthDistinct(expected.canonical)) << about;
    if (k == 0) {
      EXPECT_GE(r.full_rounds, 1u) << "the first rebuild is full: " << about;
      EXPECT_GE(r.rows_visited, rows) << about;
    } else if (t.check_visits) {
      EXPECT_EQ(r.full_rounds, 0u) << "a rebuild after an append is incremental: " << about;
      EXPECT_EQ(r.rows_visited, expected.rows_visited) << about;
      if (step.unions.empty() && pending.empty() && r.merges == 0) {
        // Nothing moved: the appended rows alone, however many rows are old.
        EXPECT_EQ(r.rows_visited, rows - rows_before) << about;
        if (4 * (rows - rows_before) < rows) {
          EXPECT_LT(r.rows_visited, rows) << "a small step visits few rows: " << about;
        }
      }
    }

    // Against everything so far at once, from scratch.
    GrowthImage fresh;
    vyre_egraph_rebuild_result fresh_result{};
    const std::vector<uint32_t> scratch =
        FromScratch(g, rows, classes, all_unions, t, &fresh, &fresh_result);
    if (expected.fixpoint) {
      EXPECT_TRUE(SameU32(canonical_now, scratch)) << "grown image vs a fresh one rebuilt at once";
      EXPECT_EQ(r.classes_after, fresh_result.classes_after) << about;
    }

    // The changed classes: the diff against the snapshot before the rebuild.
    const auto changed = ReadChangedPairs(growing.get());
    const auto diff = CanonicalDiff(start, canonical_now);
    EXPECT_EQ(changed, diff) << "changed_read: " << changed.size() << " pairs, the diff has "
                             << diff.size();
    EXPECT_EQ(r.changed_class_count, diff.size()) << about;

    const vyre_egraph_image_info info = GrowthInfo(growing.get());
    EXPECT_EQ(info.device, t.device);
    EXPECT_EQ(info.row_count, rows);
    EXPECT_EQ(info.class_count, classes);
    EXPECT_EQ(info.child_count, g.ChildBegin(rows));
    EXPECT_EQ(info.canonical_class_count, GrowthDistinct(canonical_now));
    EXPECT_EQ(info.changed_class_count, diff.size());
    EXPECT_GE(info.row_capacity, rows);
    EXPECT_GE(info.class_capacity, classes);
    EXPECT_GE(info.child_capacity, g.ChildBegin(rows));
    if (t.reserve) {
      EXPECT_EQ(info.row_capacity, g.rows()) << "within the reserved capacity nothing grows";
    }
    ExpectGrowthColumns(growing.get(), fresh.get(), g, rows);

    if (totals != nullptr && k > 0) {
      ++totals->steps;
      totals->round_limited += !expected.fixpoint;
      totals->rows += rows;
      totals->rows_visited += r.rows_visited;
      totals->merges += r.merges;
      totals->union_merges += r.union_merges;
      totals->changed += r.changed_class_count;
    }
    pending = expected.pending;
    rows_before = rows;
    classes_before = classes;
    if (::testing::Test::HasFailure()) return;  // one failing step says enough
  }
}

}  // namespace vyre_test

#endif  // VYRE_TESTS_SUPPORT_EGRAPH_INCREMENTAL_CASES_H_
