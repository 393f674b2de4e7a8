// E-graph images that grow, on the GPU: appends in place (within the
// capacity and across capacity classes), incremental rebuilds, the changed
// classes, and refused appends. Every answer is checked two ways: against a
// CPU image taken through the same steps (canonical classes, counts, changed
// pairs), and against a fresh CPU image of everything so far rebuilt from
// scratch with every union so far (the partition an incremental rebuild must
// reach). Tests named *Large* are skipped by the compute-sanitizer run
// (scripts/gpu-suite.sh); *Medium* is its workload.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
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

// Rows [begin, end) of `g` as an append (child offsets from 0), naming
// classes below `class_total`; `known` classes are in the image already.
struct Slice {
  std::vector<uint32_t> row_classes, row_ops, child_offsets, child_lengths, children;
  uint64_t known = 0, class_total = 0;

  vyre_egraph_append_desc Append() const {
    vyre_egraph_append_desc d = VYRE_EGRAPH_APPEND_DESC_INIT;
    d.class_count = class_total - known;
    d.row_count = row_classes.size();
    d.child_count = children.size();
    d.row_classes = row_classes.data();
    d.row_ops = row_ops.data();
    d.child_offsets = child_offsets.data();
    d.child_lengths = child_lengths.data();
    d.children = children.data();
    return d;
  }
  vyre_egraph_image_desc Create(vyre_egraph_device device, vyre_context context) const {
    vyre_egraph_image_desc d = VYRE_EGRAPH_IMAGE_DESC_INIT;
    d.device = device;
    d.context = device == VYRE_EGRAPH_DEVICE_GPU ? context : vyre_context{};
    d.row_count = row_classes.size();
    d.class_count = class_total;
    d.child_count = children.size();
    d.row_classes = row_classes.data();
    d.row_ops = row_ops.data();
    d.child_offsets = child_offsets.data();
    d.child_lengths = child_lengths.data();
    d.children = children.data();
    return d;
  }
};

Slice SliceOf(const EgraphColumns& g, uint64_t begin, uint64_t end, uint64_t known) {
  Slice s;
  s.known = known;
  s.class_total = known;
  for (uint64_t r = begin; r < end; ++r) {
    s.row_classes.push_back(g.row_classes[r]);
    s.row_ops.push_back(g.row_ops[r]);
    s.child_offsets.push_back(static_cast<uint32_t>(s.children.size()));
    s.child_lengths.push_back(g.child_lengths[r]);
    s.class_total = std::max<uint64_t>(s.class_total, uint64_t{g.row_classes[r]} + 1);
    for (uint32_t i = 0; i < g.child_lengths[r]; ++i) {
      const uint32_t kid = g.children[g.child_offsets[r] + i];
      s.children.push_back(kid);
      s.class_total = std::max<uint64_t>(s.class_total, uint64_t{kid} + 1);
    }
  }
  return s;
}

std::vector<uint32_t> Canonical(vyre_egraph_image image, uint64_t classes) {
  std::vector<uint32_t> out(classes, kPoisonU32);
  EXPECT_VYRE_OK(vyre_egraph_image_read(image, VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES, 0, classes,
                                        out.data()));
  return out;
}

Pairs Changed(vyre_egraph_image image) {
  uint64_t count = UINT64_MAX;
  EXPECT_VYRE_OK(vyre_egraph_changed_read(image, nullptr, 0, &count));
  if (count == UINT64_MAX) return {};
  std::vector<uint32_t> flat(count * 2 + 2, kPoisonU32);
  uint64_t again = 0;
  EXPECT_VYRE_OK(vyre_egraph_changed_read(image, flat.data(), count, &again));
  EXPECT_EQ(again, count);
  EXPECT_EQ(flat[count * 2], kPoisonU32) << "changed_read wrote past its pairs";
  Pairs pairs;
  for (uint64_t i = 0; i < count; ++i) pairs.emplace_back(flat[2 * i], flat[2 * i + 1]);
  return pairs;
}

// The (class, canonical) pairs of the classes whose canonical class differs.
Pairs Diff(const std::vector<uint32_t>& before, const std::vector<uint32_t>& after) {
  Pairs out;
  for (uint64_t x = 0; x < after.size(); ++x) {
    const uint32_t was = x < before.size() ? before[x] : static_cast<uint32_t>(x);
    if (after[x] != was) out.emplace_back(static_cast<uint32_t>(x), after[x]);
  }
  return out;
}

::testing::AssertionResult Same(const std::vector<uint32_t>& actual,
                                const std::vector<uint32_t>& expected, const char* what) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << what << ": sizes " << actual.size() << " vs "
                                         << expected.size();
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
  return ::testing::AssertionFailure() << what << ": " << differ << " of " << actual.size()
                                       << " classes differ:" << first;
}

std::vector<uint32_t> RandomUnions(std::mt19937_64& rng, uint64_t classes, uint32_t count) {
  std::vector<uint32_t> unions(uint64_t{count} * 2);
  for (uint32_t& u : unions) u = static_cast<uint32_t>(rng() % std::max<uint64_t>(classes, 1));
  return unions;
}

vyre_egraph_rebuild_result Rebuild(vyre_egraph_image image, const std::vector<uint32_t>& unions,
                                   uint32_t flags = 0) {
  vyre_egraph_rebuild_desc desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  desc.flags = flags;
  desc.unions = unions.empty() ? nullptr : unions.data();
  desc.union_count = unions.size() / 2;
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  EXPECT_VYRE_OK(vyre_egraph_rebuild(image, &desc, &result));
  return result;
}

// A GPU image and a CPU image taken through the same steps, and every union
// so far (for the from-scratch reference).
class Twin {
 public:
  Twin(const Slice& base, vyre_context context, const vyre_egraph_image_desc* reserve = nullptr)
      : columns_(base) {
    vyre_egraph_image_desc gpu = base.Create(VYRE_EGRAPH_DEVICE_GPU, context);
    if (reserve != nullptr) {
      gpu.row_capacity = reserve->row_capacity;
      gpu.class_capacity = reserve->class_capacity;
      gpu.child_capacity = reserve->child_capacity;
    }
    const vyre_egraph_image_desc cpu = base.Create(VYRE_EGRAPH_DEVICE_CPU, context);
    EXPECT_VYRE_OK(vyre_egraph_image_create(&gpu, gpu_.out()));
    EXPECT_VYRE_OK(vyre_egraph_image_create(&cpu, cpu_.out()));
    classes_ = base.class_total;
  }
  bool ok() const { return gpu_.get().bits != 0 && cpu_.get().bits != 0; }
  vyre_egraph_image gpu() const { return gpu_.get(); }
  uint64_t classes() const { return classes_; }

  void Append(const Slice& step) {
    const vyre_egraph_append_desc d = step.Append();
    EXPECT_VYRE_OK(vyre_egraph_image_append(gpu_.get(), &d));
    EXPECT_VYRE_OK(vyre_egraph_image_append(cpu_.get(), &d));
    classes_ = step.class_total;
    auto add = [](std::vector<uint32_t>* to, const std::vector<uint32_t>& from) {
      to->insert(to->end(), from.begin(), from.end());
    };
    const uint32_t base = static_cast<uint32_t>(columns_.children.size());
    add(&columns_.row_classes, step.row_classes);
    add(&columns_.row_ops, step.row_ops);
    for (uint32_t off : step.child_offsets) columns_.child_offsets.push_back(base + off);
    add(&columns_.child_lengths, step.child_lengths);
    add(&columns_.children, step.children);
    columns_.class_total = step.class_total;
  }

  // Rebuilds both with `unions`; checks canonical classes, counts and the
  // changed pairs against each other, against the diff of the canonical
  // classes, and against a fresh image of everything rebuilt from scratch.
  ::testing::AssertionResult RebuildBoth(const std::vector<uint32_t>& unions,
                                         vyre_egraph_rebuild_result* gpu_result = nullptr) {
    const std::vector<uint32_t> before = Canonical(gpu_.get(), classes_);
    const vyre_egraph_rebuild_result g = Rebuild(gpu_.get(), unions);
    const vyre_egraph_rebuild_result c = Rebuild(cpu_.get(), unions);
    if (gpu_result != nullptr) *gpu_result = g;
    all_unions_.insert(all_unions_.end(), unions.begin(), unions.end());
    const std::vector<uint32_t> gc = Canonical(gpu_.get(), classes_);
    const std::vector<uint32_t> cc = Canonical(cpu_.get(), classes_);
    if (auto same = Same(gc, cc, "GPU vs CPU image"); !same) return same;
    if (g.classes_after != c.classes_after || g.merges + g.union_merges != c.merges + c.union_merges) {
      return ::testing::AssertionFailure()
             << "counts differ: GPU classes_after " << g.classes_after << " merges " << g.merges
             << "+" << g.union_merges << ", CPU " << c.classes_after << " " << c.merges << "+"
             << c.union_merges;
    }
    const Pairs diff = Diff(before, gc);
    if (Changed(gpu_.get()) != diff || g.changed_class_count != diff.size()) {
      return ::testing::AssertionFailure()
             << "the GPU's changed classes (" << g.changed_class_count
             << ") are not the diff of its canonical classes (" << diff.size() << ")";
    }
    if (Changed(cpu_.get()) != diff) {
      return ::testing::AssertionFailure() << "the CPU image's changed classes differ";
    }
    ImageHandle fresh;
    const vyre_egraph_image_desc all = columns_.Create(VYRE_EGRAPH_DEVICE_CPU, {});
    if (vyre_egraph_image_create(&all, fresh.out()) != VYRE_STATUS_OK) {
      return ::testing::AssertionFailure() << "fresh image: " << DescribeLastError();
    }
    Rebuild(fresh.get(), all_unions_, VYRE_EGRAPH_REBUILD_RESET);
    return Same(gc, Canonical(fresh.get(), classes_), "incremental vs from scratch");
  }

 private:
  Slice columns_;  // everything so far, as one create
  ImageHandle gpu_, cpu_;
  uint64_t classes_ = 0;
  std::vector<uint32_t> all_unions_;
};

// Splits rows [0, rows) at `cuts` (ascending) and runs base + steps, with
// `unions` random unions per step.
void RunSteps(const EgraphColumns& g, const std::vector<uint64_t>& cuts, uint32_t unions,
              uint64_t seed, vyre_context context, const std::string& name) {
  std::mt19937_64 rng(seed);
  const Slice base = SliceOf(g, 0, cuts.front(), 0);
  Twin twin(base, context);
  ASSERT_TRUE(twin.ok()) << name;
  EXPECT_TRUE(twin.RebuildBoth(RandomUnions(rng, twin.classes(), unions))) << name << " base";
  for (size_t i = 0; i < cuts.size(); ++i) {
    const uint64_t end = i + 1 < cuts.size() ? cuts[i + 1] : g.rows();
    vyre_egraph_image_info before = VYRE_EGRAPH_IMAGE_INFO_INIT, after = before;
    ASSERT_VYRE_OK(vyre_egraph_image_info_get(twin.gpu(), &before));
    twin.Append(SliceOf(g, cuts[i], end, twin.classes()));
    ASSERT_VYRE_OK(vyre_egraph_image_info_get(twin.gpu(), &after));
    vyre_egraph_rebuild_result r{};
    EXPECT_TRUE(twin.RebuildBoth(RandomUnions(rng, twin.classes(), unions), &r))
        << name << " step " << i + 1;
    // Within the row capacity the table stays; a growth of it may replace
    // the table (past two slots a row), and then one full round rebuilds it.
    if (after.row_capacity == before.row_capacity) {
      EXPECT_EQ(r.full_rounds, 0u) << name << " step " << i + 1 << ": not incremental";
    } else {
      EXPECT_LE(r.full_rounds, 1u) << name << " step " << i + 1;
    }
    EXPECT_GE(r.rows_visited, end - cuts[i]) << name << ": the new rows are visited";
  }
}

EgraphColumns RandomGraph(uint64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  EgraphColumns g;
  const uint64_t leaves = std::max<uint64_t>(rows / 8, 2);
  g.classes = rows;
  for (uint64_t r = 0; r < rows; ++r) {
    g.row_classes.push_back(static_cast<uint32_t>(rng() % (r < leaves ? leaves : r)));
    g.row_ops.push_back(static_cast<uint32_t>(1 + rng() % 4));
    g.child_offsets.push_back(static_cast<uint32_t>(g.children.size()));
    const uint32_t arity = r < leaves ? 0 : static_cast<uint32_t>(rng() % 3);
    g.child_lengths.push_back(arity);
    for (uint32_t i = 0; i < arity; ++i) g.children.push_back(static_cast<uint32_t>(rng() % r));
  }
  return g;
}

class EgraphGrowGpuTest : public GpuTest {};

// Every file of tests/data/egraphs (and VYRE_EGRAPHS_DIR where set), with
// every e-node in its own class, split into a base and 1-3 random steps
// with random unions.
TEST_F(EgraphGrowGpuTest, FileStepsMatchCpuAndFromScratch) {
  const EgraphFileSet set = FindEgraphFiles();
  ASSERT_GT(set.builtin_files, 0u) << "no e-graph files in " << set.builtin_dir;
  std::mt19937_64 rng(20);
  for (const std::string& path : set.paths) {
    vyre::tools::LoadOptions options;
    options.own_class_per_node = true;
    vyre::tools::LoadedEgraph g;
    const vyre::tools::ToolStatus status = vyre::tools::LoadEgraphJsonFile(path, options, &g);
    ASSERT_TRUE(status.ok()) << status.message;
    if (g.rows() < 8) continue;
    std::vector<uint64_t> cuts;
    const uint64_t steps = 1 + rng() % 3;
    for (uint64_t i = 0; i < steps; ++i) cuts.push_back(1 + rng() % (g.rows() - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    RunSteps(g, cuts, static_cast<uint32_t>(1 + g.rows() / 50), rng(), context(), path);
    if (HasFatalFailure()) return;
  }
}

// Random graphs in many small steps, starting at exact capacity: every step
// past the capacity grows it to a power of two, copying the image on the
// device; the info reports it.
TEST_F(EgraphGrowGpuTest, GrowthAcrossCapacityClasses) {
  const EgraphColumns g = RandomGraph(20000, 3);
  std::vector<uint64_t> cuts;
  for (uint64_t at = 300; at < g.rows(); at = at * 3 / 2) cuts.push_back(at);
  std::mt19937_64 rng(4);
  Twin twin(SliceOf(g, 0, cuts.front(), 0), context());
  ASSERT_TRUE(twin.ok());
  EXPECT_TRUE(twin.RebuildBoth(RandomUnions(rng, twin.classes(), 5)));
  uint64_t grew = 0, last_capacity = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    const uint64_t end = i + 1 < cuts.size() ? cuts[i + 1] : g.rows();
    twin.Append(SliceOf(g, cuts[i], end, twin.classes()));
    vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
    ASSERT_VYRE_OK(vyre_egraph_image_info_get(twin.gpu(), &info));
    EXPECT_EQ(info.row_count, end);
    EXPECT_GE(info.row_capacity, info.row_count);
    EXPECT_GE(info.class_capacity, info.class_count);
    EXPECT_GE(info.child_capacity, info.child_count);
    if (info.row_capacity != last_capacity && last_capacity != 0) {
      ++grew;
      EXPECT_EQ(info.row_capacity & (info.row_capacity - 1), 0u)
          << "grown capacity " << info.row_capacity << " is no power of two";
    }
    last_capacity = info.row_capacity;
    EXPECT_TRUE(twin.RebuildBoth(RandomUnions(rng, twin.classes(), 5))) << "step " << i + 1;
  }
  EXPECT_GE(grew, 3u) << "the steps were meant to cross several capacity classes";
}

// One union on a closed image visits only the rows that name the two
// classes (and what their merge cascades to), never a full round.
TEST_F(EgraphGrowGpuTest, OneUnionVisitsOnlyTheParentsOfItsClasses) {
  EgraphColumns g;
  auto row = [&](uint32_t cls, uint32_t op, std::vector<uint32_t> kids) {
    g.row_classes.push_back(cls);
    g.row_ops.push_back(op);
    g.child_offsets.push_back(static_cast<uint32_t>(g.children.size()));
    g.child_lengths.push_back(static_cast<uint32_t>(kids.size()));
    g.children.insert(g.children.end(), kids.begin(), kids.end());
  };
  row(0, 1, {});   // a
  row(1, 2, {});   // b
  row(2, 3, {0});  // f(a)
  row(3, 3, {1});  // f(b)
  row(4, 4, {2});  // g(f(a))
  row(5, 4, {3});  // g(f(b))
  // 5000 unrelated rows over classes 6..: h(x_i) with distinct leaves.
  for (uint32_t i = 0; i < 2500; ++i) {
    row(6 + 2 * i, 100 + i, {});
    row(7 + 2 * i, 5, {6 + 2 * i});
  }
  g.classes = 6 + 5000;
  const Slice all = SliceOf(g, 0, g.rows(), 0);
  Twin twin(all, context());
  ASSERT_TRUE(twin.ok());
  ASSERT_TRUE(twin.RebuildBoth({}));  // closed
  vyre_egraph_rebuild_result r{};
  ASSERT_TRUE(twin.RebuildBoth({0, 1}, &r));
  EXPECT_EQ(r.full_rounds, 0u);
  // egg's worklist: only the parents of the class that moved. Union(0, 1)
  // moves 1 under 0: round 1 visits f(b) (it names 1), which joins f(a)'s
  // group and moves 3 under 2; round 2 visits g(f(b)) (it names 3), which
  // moves 5 under 4; round 3 visits nothing (no row names 5).
  EXPECT_EQ(r.rows_visited, 2u);
  EXPECT_EQ(r.rounds, 3u);
  EXPECT_EQ(r.union_merges, 1u);
  EXPECT_EQ(r.merges, 2u);
  EXPECT_EQ(Changed(twin.gpu()), (Pairs{{1, 0}, {3, 2}, {5, 4}}));
  // Nothing changed since: a rebuild visits nothing.
  ASSERT_TRUE(twin.RebuildBoth({}, &r));
  EXPECT_EQ(r.rows_visited, 0u);
  EXPECT_EQ(r.rounds, 1u);
  EXPECT_TRUE(Changed(twin.gpu()).empty());
}

// A refused append leaves the image exactly as it was, with the message the
// CPU image gives for the same append.
TEST_F(EgraphGrowGpuTest, RefusedAppendChangesNothing) {
  const EgraphColumns g = RandomGraph(4000, 8);
  const Slice base = SliceOf(g, 0, 3000, 0);
  Twin twin(base, context());
  ASSERT_TRUE(twin.ok());
  ASSERT_TRUE(twin.RebuildBoth({1, 2, 3, 4}));
  ImageHandle cpu;
  const vyre_egraph_image_desc cdesc = base.Create(VYRE_EGRAPH_DEVICE_CPU, {});
  ASSERT_VYRE_OK(vyre_egraph_image_create(&cdesc, cpu.out()));
  auto snapshot = [&](vyre_egraph_image image) {
    vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
    EXPECT_VYRE_OK(vyre_egraph_image_info_get(image, &info));
    std::vector<uint32_t> all;
    for (uint32_t column = VYRE_EGRAPH_COLUMN_ROW_CLASSES;
         column <= VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES; ++column) {
      const uint64_t n = column == VYRE_EGRAPH_COLUMN_CHILDREN ? info.child_count
                         : column == VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES ? info.class_count
                                                                          : info.row_count;
      std::vector<uint32_t> part(n, kPoisonU32);
      EXPECT_VYRE_OK(vyre_egraph_image_read(image, static_cast<vyre_egraph_column>(column), 0, n,
                                            part.data()));
      all.insert(all.end(), part.begin(), part.end());
    }
    all.push_back(static_cast<uint32_t>(info.row_count));
    all.push_back(static_cast<uint32_t>(info.class_count));
    all.push_back(static_cast<uint32_t>(info.child_count));
    return all;
  };
  const std::vector<uint32_t> before = snapshot(twin.gpu());
  Slice step = SliceOf(g, 3000, 4000, twin.classes());
  struct Case {
    const char* name;
    std::function<void(Slice*)> edit;
    vyre_status expected;
  } cases[] = {
      {"row class past the new class count",
       [](Slice* s) { s->row_classes[7] = static_cast<uint32_t>(s->class_total); },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"child past the new class count",
       [](Slice* s) { s->children[3] = static_cast<uint32_t>(s->class_total + 5); },
       VYRE_STATUS_INVALID_ARGUMENT},
      {"child range past the append's children",
       [](Slice* s) { s->child_lengths.back() += 1; }, VYRE_STATUS_OUT_OF_RANGE},
      {"child ranges out of order",
       [](Slice* s) {
         for (size_t r = 1; r < s->child_offsets.size(); ++r) {
           if (s->child_lengths[r - 1] > 0) {
             s->child_offsets[r] = s->child_offsets[r - 1];
             s->child_lengths[r] = std::max<uint32_t>(s->child_lengths[r], 1);
             return;
           }
         }
       },
       VYRE_STATUS_INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    Slice bad = step;
    c.edit(&bad);
    const vyre_egraph_append_desc d = bad.Append();
    EXPECT_VYRE_STATUS(c.expected, vyre_egraph_image_append(twin.gpu(), &d)) << c.name;
    const std::string gpu_message = LastErrorMessage();
    EXPECT_VYRE_STATUS(c.expected, vyre_egraph_image_append(cpu.get(), &d)) << c.name;
    EXPECT_EQ(gpu_message, LastErrorMessage()) << c.name << ": GPU and CPU words differ";
    EXPECT_NE(gpu_message.find(". Fix: "), std::string::npos) << gpu_message;
    EXPECT_EQ(snapshot(twin.gpu()), before) << c.name << " changed the image";
  }
  // The image still takes the good append and rebuilds right.
  twin.Append(step);
  EXPECT_TRUE(twin.RebuildBoth({5, 6}));
}

// Columns in memory from vyre_host_alloc (copied by DMA in place) make the
// same image as pageable ones.
TEST_F(EgraphGrowGpuTest, PinnedColumnsMakeTheSameImage) {
  const EgraphColumns g = RandomGraph(50000, 9);
  const Slice all = SliceOf(g, 0, g.rows(), 0);
  const uint64_t rows = all.row_classes.size(), kids = all.children.size();
  void* host = nullptr;
  ASSERT_VYRE_OK(vyre_host_alloc(context(), (rows * 4 + kids) * 4 + 64, &host));
  auto* p = static_cast<uint32_t*>(host);
  uint32_t* cols[] = {p, p + rows, p + 2 * rows, p + 3 * rows, p + 4 * rows};
  std::copy(all.row_classes.begin(), all.row_classes.end(), cols[0]);
  std::copy(all.row_ops.begin(), all.row_ops.end(), cols[1]);
  std::copy(all.child_offsets.begin(), all.child_offsets.end(), cols[2]);
  std::copy(all.child_lengths.begin(), all.child_lengths.end(), cols[3]);
  std::copy(all.children.begin(), all.children.end(), cols[4]);
  vyre_egraph_image_desc d = all.Create(VYRE_EGRAPH_DEVICE_GPU, context());
  d.row_classes = cols[0];
  d.row_ops = cols[1];
  d.child_offsets = cols[2];
  d.child_lengths = cols[3];
  d.children = cols[4];
  ImageHandle pinned, pageable;
  ASSERT_VYRE_OK(vyre_egraph_image_create(&d, pinned.out()));
  const vyre_egraph_image_desc e = all.Create(VYRE_EGRAPH_DEVICE_GPU, context());
  ASSERT_VYRE_OK(vyre_egraph_image_create(&e, pageable.out()));
  for (uint32_t column : {VYRE_EGRAPH_COLUMN_ROW_CLASSES, VYRE_EGRAPH_COLUMN_CHILDREN,
                          VYRE_EGRAPH_COLUMN_ROW_SIGNATURES}) {
    const uint64_t n = column == VYRE_EGRAPH_COLUMN_CHILDREN ? kids : rows;
    std::vector<uint32_t> a(n, kPoisonU32), b(n, 7);
    ASSERT_VYRE_OK(vyre_egraph_image_read(pinned.get(), static_cast<vyre_egraph_column>(column), 0,
                                          n, a.data()));
    ASSERT_VYRE_OK(vyre_egraph_image_read(pageable.get(),
                                          static_cast<vyre_egraph_column>(column), 0, n, b.data()));
    EXPECT_EQ(a, b) << "column " << column;
  }
  EXPECT_EQ(Rebuild(pinned.get(), {}).classes_after, Rebuild(pageable.get(), {}).classes_after);
  EXPECT_TRUE(Same(Canonical(pinned.get(), all.class_total),
                   Canonical(pageable.get(), all.class_total), "pinned vs pageable"));
  // A bad value in pinned memory is found on the device, like in pageable.
  cols[4][kids / 2] = static_cast<uint32_t>(all.class_total);
  ImageHandle refused;
  EXPECT_VYRE_STATUS(VYRE_STATUS_INVALID_ARGUMENT, vyre_egraph_image_create(&d, refused.out()));
  EXPECT_NE(LastErrorMessage().find("children[" + std::to_string(kids / 2) + "]"),
            std::string::npos)
      << LastErrorMessage();
  EXPECT_VYRE_OK(vyre_host_free(host));
}

// ~200k synthetic rows in three steps: the compute-sanitizer workload.
TEST_F(EgraphGrowGpuTest, MediumSyntheticStepsMatchCpu) {
  const vyre::tools::SyntheticEgraph g = vyre::tools::GenerateSynthetic(200000, 3, 31);
  RunSteps(g, {150000, 170000, 190000}, 300, 32, context(), "synthetic 200k");
}

// 16 M synthetic rows: a base of 99%, then two steps of 0.5% with 1,000
// unions each, against the CPU image and a rebuild from scratch.
TEST_F(EgraphGrowGpuTest, LargeSynthetic16MStepsMatchCpu) {
  const vyre::tools::SyntheticEgraph g = vyre::tools::GenerateSynthetic(16u << 20, 2, 77);
  const uint64_t n = g.rows();
  RunSteps(g, {n - n / 100, n - n / 200}, 1000, 78, context(), "synthetic 16M");
}

}  // namespace
}  // namespace vyre_test
