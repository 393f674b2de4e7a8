// Tests of the e-graph tools (tools/egraph): the egraph-serialize JSON loader
// and its errors, later files (steps) appended to a loaded graph, union and
// partition files, the synthetic generator; and the CPU reference on the real
// e-graphs of tests/data/egraphs (widened by VYRE_EGRAPHS_DIR,
// ../shared/egraphs, where present; tests/data/egraph_files.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "egraph/cpu_reference.h"
#include "egraph/json_loader.h"
#include "egraph/synthetic.h"
#include "egraph_files.h"
#include "vyre_cuda.h"

namespace vyre::tools {
namespace {

using egraph::CpuRebuild;
using egraph::CpuRebuildStats;
using egraph::HostColumns;

HostColumns Columns(const EgraphColumns& g) {
  HostColumns h;
  h.rows = g.rows();
  h.classes = g.classes;
  h.child_count = g.children.size();
  h.row_classes = g.row_classes.data();
  h.row_ops = g.row_ops.data();
  h.child_offsets = g.child_offsets.data();
  h.child_lengths = g.child_lengths.data();
  h.children = g.children.data();
  return h;
}

std::vector<uint32_t> Identity(uint64_t n) {
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  return p;
}

bool HasFix(const ToolStatus& st) { return st.message.find(". Fix: ") != std::string::npos; }

::testing::AssertionResult FailsWith(const ToolStatus& st, const std::string& needle) {
  if (st.ok()) return ::testing::AssertionFailure() << "succeeded; expected " << needle;
  if (st.message.find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks \"" << needle << "\": " << st.message;
  }
  if (!HasFix(st)) return ::testing::AssertionFailure() << "no Fix: in " << st.message;
  return ::testing::AssertionSuccess();
}

ToolStatus Load(const std::string& text, LoadedEgraph* g, bool own = false) {
  LoadOptions options;
  options.own_class_per_node = own;
  return LoadEgraphJsonText(text, "test.json", options, g);
}

const char* const kSmall = R"({
  "nodes": {
    "add": {"op": "+", "children": ["one", "x"], "eclass": "c2", "cost": 1.0},
    "one": {"op": "1", "children": [], "eclass": "c0", "cost": 1, "subsumed": false},
    "x":   {"op": "x", "children": [], "eclass": "c1", "extra": {"nested": [1, {"a": null}]}},
    "two": {"op": "2", "children": [], "eclass": "c3"},
    "one_b": {"op": "1", "eclass": "c0", "children": []},
    "mul": {"op": "*", "children": ["add", "add"], "eclass": "c4"}
  },
  "root_eclasses": ["c4", "r_unused"],
  "class_data": {"c0": {"type": "Math"}, "cd_only": {"type": "Math"}}
})";

// ---------------------------------------------------------------------------
// The loader
// ---------------------------------------------------------------------------

TEST(EgraphJsonTest, LoadsColumns) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kSmall, &g).ok());
  ASSERT_EQ(g.rows(), 6u);
  EXPECT_EQ(g.node_names, (std::vector<std::string>{"add", "one", "x", "two", "one_b", "mul"}));
  // Classes in order of first appearance, then the extra ids of the file.
  EXPECT_EQ(g.class_names,
            (std::vector<std::string>{"c2", "c0", "c1", "c3", "c4", "r_unused", "cd_only"}));
  EXPECT_EQ(g.classes, 7u);
  EXPECT_EQ(g.row_classes, (std::vector<uint32_t>{0, 1, 2, 3, 1, 4}));
  // Ops are whole strings: "1" and "2" differ, both "1" rows share one op.
  EXPECT_EQ(g.op_names, (std::vector<std::string>{"+", "1", "x", "2", "*"}));
  EXPECT_EQ(g.row_ops, (std::vector<uint32_t>{0, 1, 2, 3, 1, 4}));
  EXPECT_EQ(g.child_lengths, (std::vector<uint32_t>{2, 0, 0, 0, 0, 2}));
  EXPECT_EQ(g.child_offsets, (std::vector<uint32_t>{0, 2, 2, 2, 2, 2}));
  // Children are the e-classes of the named nodes (forward references too).
  EXPECT_EQ(g.children, (std::vector<uint32_t>{1, 2, 0, 0}));
  EXPECT_EQ(g.class_ids.at("c3"), 3u);
  EXPECT_EQ(g.bytes, std::string(kSmall).size());
}

TEST(EgraphJsonTest, OwnClassPerNode) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kSmall, &g, true).ok());
  EXPECT_EQ(g.classes, 6u);
  EXPECT_EQ(g.class_names, g.node_names);
  EXPECT_EQ(g.row_classes, Identity(6));
  EXPECT_EQ(g.children, (std::vector<uint32_t>{1, 2, 0, 0}));  // rows of "one", "x", "add"
  EXPECT_EQ(g.class_ids.at("one_b"), 4u);
  // Congruence closure merges the two "1" nodes and nothing else.
  std::vector<uint32_t> parent = Identity(g.classes);
  CpuRebuildStats s = CpuRebuild(Columns(g), parent.data(), 1, 0, false);
  EXPECT_EQ(s.merges, 1u);
  EXPECT_EQ(parent, (std::vector<uint32_t>{0, 1, 2, 3, 1, 5}));
}

TEST(EgraphJsonTest, EmptyNodes) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(R"({"nodes": {}})", &g).ok());
  EXPECT_EQ(g.rows(), 0u);
  EXPECT_EQ(g.classes, 0u);
}

TEST(EgraphJsonTest, MalformedJson) {
  LoadedEgraph g;
  const std::string text = kSmall;
  // Truncated anywhere: an error with a position, never a crash.
  for (size_t cut : {size_t{0}, size_t{1}, size_t{20}, text.size() / 2, text.size() - 1}) {
    ToolStatus st = Load(text.substr(0, cut), &g);
    EXPECT_TRUE(FailsWith(st, "malformed JSON at byte")) << cut;
    EXPECT_TRUE(FailsWith(st, "test.json: ")) << cut;
  }
  EXPECT_TRUE(FailsWith(Load(text.substr(0, text.size() / 2), &g), "truncated"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": "x",, }}})", &g), "malformed JSON"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {}} trailing)", &g), "malformed JSON"));
  EXPECT_TRUE(FailsWith(Load("\x01\x02", &g), "malformed JSON"));
}

TEST(EgraphJsonTest, WrongShapes) {
  LoadedEgraph g;
  EXPECT_TRUE(FailsWith(Load("[1, 2]", &g), "the top level is an array"));
  EXPECT_TRUE(FailsWith(Load("42", &g), "the top level is a number"));
  EXPECT_TRUE(FailsWith(Load(R"({"node": {}})", &g), "no \"nodes\" object"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": []})", &g), "\"nodes\" is an array"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": 3})", &g), "\"nodes\" is a number"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {}, "nodes": {}})", &g), "\"nodes\" appears twice"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": 1}})", &g), "node \"a\": is a number"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": 1, "eclass": "0"}}})", &g),
                        "node \"a\": \"op\" is a number, not a string"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": "x", "eclass": 0}}})", &g),
                        "\"eclass\" is a number, not a string"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": "x", "eclass": ["0"]}}})", &g),
                        "\"eclass\" is an array"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": "x", "eclass": "0", "children": "b"}}})", &g),
                        "\"children\" is a string, not an array"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": "x", "eclass": "0", "children": [1]}}})", &g),
                        "a child is a number"));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"eclass": "0"}}})", &g), "no \"op\""));
  EXPECT_TRUE(FailsWith(Load(R"({"nodes": {"a": {"op": "x"}}})", &g), "no \"eclass\""));
  EXPECT_TRUE(FailsWith(
      Load(R"({"nodes": {"a": {"op": "x", "eclass": "0"}, "a": {"op": "y", "eclass": "1"}}})", &g),
      "node \"a\": defined twice"));
  // A missing "children" is a leaf.
  EXPECT_TRUE(Load(R"({"nodes": {"a": {"op": "x", "eclass": "0"}}})", &g).ok());
}

// Random damage (bytes changed, cut, inserted) never crashes the loader: the
// result is a graph or an error with a Fix.
TEST(EgraphJsonTest, DamagedInputNeverCrashes) {
  const std::string base = kSmall;
  const char alphabet[] = "{}[]\":,0123456789abcnul \\\n\x01\xff";
  uint64_t state = 12345;
  auto next = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  int errors = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = base;
    const int edits = 1 + next() % 4;
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = next() % text.size();
      switch (next() % 3) {
        case 0: text[at] = alphabet[next() % (sizeof alphabet - 1)]; break;
        case 1: text.erase(at, 1 + next() % 8); break;
        default: text.insert(at, 1, alphabet[next() % (sizeof alphabet - 1)]); break;
      }
    }
    LoadedEgraph g;
    const ToolStatus st = Load(text, &g);
    if (st.ok()) {
      // A graph that loads is consistent.
      ASSERT_EQ(g.row_ops.size(), g.rows());
      for (uint32_t c : g.row_classes) ASSERT_LT(c, g.classes);
      for (uint32_t c : g.children) ASSERT_LT(c, g.classes);
    } else {
      ++errors;
      ASSERT_TRUE(HasFix(st)) << st.message;
    }
  }
  EXPECT_GT(errors, 1000);
}

TEST(EgraphJsonTest, ChildNamingNoNode) {
  LoadedEgraph g;
  ToolStatus st = Load(
      R"({"nodes": {"a": {"op": "x", "eclass": "0", "children": []},
                    "f": {"op": "f", "eclass": "1", "children": ["a", "ghost"]}}})",
      &g);
  EXPECT_TRUE(FailsWith(st, "node \"f\": child \"ghost\" names no node"));
}

TEST(EgraphJsonTest, FileErrors) {
  LoadedEgraph g;
  LoadOptions options;
  EXPECT_TRUE(FailsWith(LoadEgraphJsonFile("/nonexistent/x.json", options, &g), "cannot open"));
  EXPECT_TRUE(FailsWith(LoadEgraphJsonFile("/tmp", options, &g), "directory"));
}

TEST(EgraphJsonTest, ReportsProgress) {
  // A few MiB of nodes.
  std::string text = "{\"nodes\": {";
  for (int i = 0; i < 60000; ++i) {
    if (i) text += ",";
    text += "\"n" + std::to_string(i) + "\": {\"op\": \"op" + std::to_string(i % 7) +
            "\", \"children\": [" + (i ? "\"n" + std::to_string(i / 2) + "\"" : "") +
            "], \"eclass\": \"" + std::to_string(i / 3) + "\", \"cost\": 1.0, \"pad\": \"" +
            std::string(20, 'p') + "\"}";
  }
  text += "}}";
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  LoadOptions options;
  options.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  LoadedEgraph g;
  ASSERT_TRUE(LoadEgraphJsonText(text, "big.json", options, &g).ok());
  EXPECT_EQ(g.rows(), 60000u);
  EXPECT_EQ(g.classes, 20000u);
  ASSERT_GE(calls.size(), 3u);
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i].first, calls[i - 1].first);
  EXPECT_EQ(calls.back().first, text.size());
  EXPECT_EQ(calls.back().second, text.size());
}

// ---------------------------------------------------------------------------
// Appending a later file (a step) to a loaded graph
// ---------------------------------------------------------------------------

// kWhole's nodes in two files, in the same order: FILE then a step whose nodes
// name FILE's nodes, each other (a forward reference too) and classes of both.
const char* const kWhole = R"({"nodes": {
  "a":  {"op": "a", "children": [], "eclass": "A"},
  "fa": {"op": "f", "children": ["a"], "eclass": "FA"},
  "b":  {"op": "b", "children": [], "eclass": "B"},
  "gb": {"op": "g", "children": ["hb", "fa"], "eclass": "G"},
  "hb": {"op": "h", "children": ["b"], "eclass": "FA"},
  "fb": {"op": "f", "children": ["b"], "eclass": "FB"}
}})";
const char* const kFirst = R"({"nodes": {
  "a":  {"op": "a", "children": [], "eclass": "A"},
  "fa": {"op": "f", "children": ["a"], "eclass": "FA"}
}})";
const char* const kSecond = R"({"nodes": {
  "b":  {"op": "b", "children": [], "eclass": "B"},
  "gb": {"op": "g", "children": ["hb", "fa"], "eclass": "G"},
  "hb": {"op": "h", "children": ["b"], "eclass": "FA"},
  "fb": {"op": "f", "children": ["b"], "eclass": "FB"}
}})";

ToolStatus Append(const std::string& text, LoadedEgraph* g, EgraphAppend* added,
                  bool own = false) {
  LoadOptions options;
  options.own_class_per_node = own;
  return AppendEgraphJsonText(text, "step.json", options, g, added);
}

TEST(EgraphAppendTest, AppendsRowsClassesAndOps) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kFirst, &g).ok());
  EgraphAppend added;
  ASSERT_TRUE(Append(kSecond, &g, &added).ok());
  // What the image append takes: the new rows only, ids of the whole graph.
  EXPECT_EQ(added.first_row, 2u);
  EXPECT_EQ(added.first_class, 2u);
  EXPECT_EQ(added.classes, 5u);
  EXPECT_EQ(added.new_classes(), 3u);  // B, G, FB; FA is FILE's
  EXPECT_EQ(added.rows(), 4u);
  EXPECT_EQ(added.row_classes, (std::vector<uint32_t>{2, 3, 1, 4}));
  EXPECT_EQ(added.row_ops, (std::vector<uint32_t>{2, 3, 4, 1}));  // "f" is FILE's op 1
  EXPECT_EQ(added.op_names, (std::vector<std::string>{"b", "g", "h"}));
  EXPECT_EQ(added.child_offsets, (std::vector<uint32_t>{0, 0, 2, 3}));
  EXPECT_EQ(added.child_lengths, (std::vector<uint32_t>{0, 2, 1, 1}));
  EXPECT_EQ(added.children, (std::vector<uint32_t>{1, 1, 2, 2}));  // hb: FA, fa: FA, b: B
  EXPECT_EQ(added.bytes, std::string(kSecond).size());
  // The graph is now both files, as if loaded from one.
  LoadedEgraph whole;
  ASSERT_TRUE(Load(kWhole, &whole).ok());
  EXPECT_EQ(g.rows(), whole.rows());
  EXPECT_EQ(g.classes, whole.classes);
  EXPECT_EQ(g.row_classes, whole.row_classes);
  EXPECT_EQ(g.row_ops, whole.row_ops);
  EXPECT_EQ(g.child_offsets, whole.child_offsets);
  EXPECT_EQ(g.child_lengths, whole.child_lengths);
  EXPECT_EQ(g.children, whole.children);
  EXPECT_EQ(g.op_names, whole.op_names);
  EXPECT_EQ(g.class_names, whole.class_names);
  EXPECT_EQ(g.node_names, whole.node_names);
  EXPECT_EQ(g.class_ids, whole.class_ids);
  EXPECT_EQ(g.node_rows.at("fb"), 5u);
  EXPECT_EQ(g.node_rows.at("a"), 0u);
  EXPECT_EQ(g.bytes, std::string(kFirst).size() + std::string(kSecond).size());
}

TEST(EgraphAppendTest, LaterStepsSeeEarlierSteps) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kFirst, &g).ok());
  EgraphAppend added;
  ASSERT_TRUE(Append(R"({"nodes": {"x": {"op": "x", "eclass": "X"}}})", &g, &added).ok());
  ASSERT_TRUE(Append(R"({"nodes": {"fx": {"op": "f", "children": ["x"], "eclass": "X"},
                                    "gx": {"op": "g", "children": ["fx", "a"], "eclass": "Y"}},
                         "root_eclasses": ["Y", "R"]})",
                     &g, &added)
                  .ok());
  EXPECT_EQ(added.first_row, 3u);
  EXPECT_EQ(added.first_class, 3u);
  EXPECT_EQ(added.classes, 5u);  // Y, and R (a class of its own, as at a load)
  EXPECT_EQ(added.row_classes, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(added.children, (std::vector<uint32_t>{2, 2, 0}));
  EXPECT_EQ(g.class_names, (std::vector<std::string>{"A", "FA", "X", "Y", "R"}));
  // Unions may name the classes of every file so far.
  std::vector<uint32_t> pairs;
  ASSERT_TRUE(ParseUnions("X A\nR FA\n", "u.txt", g, &pairs).ok());
  EXPECT_EQ(pairs, (std::vector<uint32_t>{2, 0, 4, 1}));
  // An empty step adds nothing.
  ASSERT_TRUE(Append(R"({"nodes": {}})", &g, &added).ok());
  EXPECT_EQ(added.rows(), 0u);
  EXPECT_EQ(added.new_classes(), 0u);
  EXPECT_EQ(g.rows(), 5u);
}

// A refused file leaves the graph as it was.
void ExpectUnchanged(const LoadedEgraph& g, const LoadedEgraph& before) {
  EXPECT_EQ(g.rows(), before.rows());
  EXPECT_EQ(g.classes, before.classes);
  EXPECT_EQ(g.children, before.children);
  EXPECT_EQ(g.class_names, before.class_names);
  EXPECT_EQ(g.class_ids, before.class_ids);
  EXPECT_EQ(g.op_names, before.op_names);
  EXPECT_EQ(g.node_names, before.node_names);
  EXPECT_EQ(g.node_rows.size(), g.node_names.size());
  EXPECT_EQ(g.bytes, before.bytes);
}

TEST(EgraphAppendTest, Errors) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kFirst, &g).ok());
  EgraphAppend added;
  ASSERT_TRUE(Append(R"({"nodes": {"x": {"op": "x", "eclass": "X"}}})", &g, &added).ok());
  const LoadedEgraph before = g;
  // A node id of FILE, or of an earlier step.
  EXPECT_TRUE(FailsWith(Append(R"({"nodes": {"fa": {"op": "f", "eclass": "FA"}}})", &g, &added),
                        "step.json: node \"fa\": defined already by an earlier file"));
  EXPECT_TRUE(FailsWith(Append(R"({"nodes": {"y": {"op": "y", "eclass": "Y"},
                                              "x": {"op": "x", "eclass": "X"}}})",
                               &g, &added),
                        "node \"x\": defined already by an earlier file"));
  EXPECT_TRUE(FailsWith(
      Append(R"({"nodes": {"f": {"op": "f", "children": ["x", "ghost"], "eclass": "N"}}})", &g,
             &added),
      "node \"f\": child \"ghost\" names no node"));
  EXPECT_TRUE(FailsWith(Append(R"({"nodes": {"f": {"op": "f", "children": ["x"]}}})", &g, &added),
                        "no \"eclass\""));
  EXPECT_TRUE(FailsWith(Append(R"({"nodes": {"y": )", &g, &added), "malformed JSON"));
  EXPECT_TRUE(FailsWith(Append(R"({"nodes": {"y": {"op": "y", "eclass": "Y"},
                                              "y": {"op": "y", "eclass": "Y"}}})",
                               &g, &added),
                        "defined twice"));
  EXPECT_TRUE(FailsWith(AppendEgraphJsonFile("/nonexistent/step.json", LoadOptions(), &g, &added),
                        "cannot open the e-graph step file"));
  ExpectUnchanged(g, before);
  // And the graph still grows after refused files.
  ASSERT_TRUE(Append(R"({"nodes": {"fx": {"op": "f", "children": ["x"], "eclass": "FX"}}})", &g,
                     &added)
                  .ok());
  EXPECT_EQ(added.first_row, 3u);
  EXPECT_EQ(added.children, (std::vector<uint32_t>{2}));
}

// Random damage to a step never crashes the append: the graph grows
// consistently, or the error has a Fix and the graph is as it was.
TEST(EgraphAppendTest, DamagedStepNeverCrashes) {
  const std::string base = kSecond;
  const char alphabet[] = "{}[]\":,abfghxAB \\\n";
  uint64_t state = 777;
  auto next = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  int errors = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string text = base;
    for (int e = 0, edits = 1 + next() % 3; e < edits && !text.empty(); ++e) {
      const size_t at = next() % text.size();
      switch (next() % 3) {
        case 0: text[at] = alphabet[next() % (sizeof alphabet - 1)]; break;
        case 1: text.erase(at, 1 + next() % 6); break;
        default: text.insert(at, 1, alphabet[next() % (sizeof alphabet - 1)]); break;
      }
    }
    LoadedEgraph g;
    ASSERT_TRUE(Load(kFirst, &g).ok());
    const LoadedEgraph before = g;
    EgraphAppend added;
    const ToolStatus st = Append(text, &g, &added);
    if (!st.ok()) {
      ++errors;
      ASSERT_TRUE(HasFix(st)) << st.message;
      ExpectUnchanged(g, before);
      continue;
    }
    ASSERT_EQ(g.rows(), before.rows() + added.rows());
    ASSERT_EQ(added.classes, g.classes);
    for (uint32_t c : added.row_classes) ASSERT_LT(c, g.classes);
    for (uint32_t c : added.children) ASSERT_LT(c, g.classes);
    for (uint32_t o : added.row_ops) ASSERT_LT(o, g.op_names.size());
  }
  EXPECT_GT(errors, 500);
}

TEST(EgraphAppendTest, OwnClassPerNode) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kFirst, &g, /*own=*/true).ok());
  EgraphAppend added;
  ASSERT_TRUE(Append(kSecond, &g, &added, /*own=*/true).ok());
  LoadedEgraph whole;
  ASSERT_TRUE(Load(kWhole, &whole, /*own=*/true).ok());
  EXPECT_EQ(added.row_classes, (std::vector<uint32_t>{2, 3, 4, 5}));
  EXPECT_EQ(g.classes, whole.classes);
  EXPECT_EQ(g.row_classes, whole.row_classes);
  EXPECT_EQ(g.children, whole.children);
  EXPECT_EQ(g.class_names, whole.class_names);
  EXPECT_EQ(g.class_ids, whole.class_ids);
}

// What an append describes is what vyre_egraph_image_append takes: FILE's
// image grown by the step and rebuilt partitions the classes as the image of
// both files at once does.
TEST(EgraphAppendTest, FeedsImageAppend) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kFirst, &g).ok());
  vyre_egraph_image_desc desc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  desc.device = VYRE_EGRAPH_DEVICE_CPU;
  desc.row_count = g.rows();
  desc.class_count = g.classes;
  desc.child_count = g.children.size();
  desc.row_classes = g.row_classes.data();
  desc.row_ops = g.row_ops.data();
  desc.child_offsets = g.child_offsets.data();
  desc.child_lengths = g.child_lengths.data();
  desc.children = g.children.data();
  vyre_egraph_image image = {0};
  ASSERT_EQ(vyre_egraph_image_create(&desc, &image), VYRE_STATUS_OK);
  ASSERT_EQ(vyre_egraph_rebuild(image, nullptr, nullptr), VYRE_STATUS_OK);
  EgraphAppend added;
  ASSERT_TRUE(Append(kSecond, &g, &added).ok());
  vyre_egraph_append_desc a = VYRE_EGRAPH_APPEND_DESC_INIT;
  a.class_count = added.new_classes();
  a.row_count = added.rows();
  a.child_count = added.children.size();
  a.row_classes = added.row_classes.data();
  a.row_ops = added.row_ops.data();
  a.child_offsets = added.child_offsets.data();
  a.child_lengths = added.child_lengths.data();
  a.children = added.children.data();
  ASSERT_EQ(vyre_egraph_image_append(image, &a), VYRE_STATUS_OK);
  // B = A makes f(b) congruent to f(a): FB joins FA.
  std::vector<uint32_t> unions;
  ASSERT_TRUE(ParseUnions("B A\n", "u.txt", g, &unions).ok());
  vyre_egraph_rebuild_desc r = VYRE_EGRAPH_REBUILD_DESC_INIT;
  r.unions = unions.data();
  r.union_count = unions.size() / 2;
  std::vector<uint32_t> canonical(g.classes);
  r.canonical_out = canonical.data();
  vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  ASSERT_EQ(vyre_egraph_rebuild(image, &r, &result), VYRE_STATUS_OK);
  EXPECT_EQ(vyre_egraph_image_destroy(image), VYRE_STATUS_OK);
  EXPECT_EQ(result.merges, 1u);
  // A, FA, B, G, FB: B -> A, FB -> FA.
  EXPECT_EQ(canonical, (std::vector<uint32_t>{0, 1, 0, 3, 1}));
}

// ---------------------------------------------------------------------------
// Union and partition files
// ---------------------------------------------------------------------------

TEST(EgraphUnionFileTest, ParsesPairs) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kSmall, &g).ok());
  std::vector<uint32_t> pairs;
  ASSERT_TRUE(ParseUnions("c0 c3\n\n  c1\tc2  \r\n", "u.txt", g, &pairs).ok());
  EXPECT_EQ(pairs, (std::vector<uint32_t>{1, 3, 2, 0}));
  pairs.clear();
  EXPECT_TRUE(FailsWith(ParseUnions("c0 c3\nc1 nope\n", "u.txt", g, &pairs),
                        "u.txt line 2: unknown e-class id \"nope\""));
  EXPECT_TRUE(FailsWith(ParseUnions("c0 c3 c1\n", "u.txt", g, &pairs),
                        "u.txt line 1: expected two e-class ids"));
  EXPECT_TRUE(FailsWith(ParseUnions("\nc0\n", "u.txt", g, &pairs), "line 2: expected two"));
  // Node ids are not e-class ids.
  EXPECT_TRUE(FailsWith(ParseUnions("add c0\n", "u.txt", g, &pairs), "unknown e-class id \"add\""));
  EXPECT_TRUE(FailsWith(ReadUnionFile("/nonexistent/u", g, &pairs), "cannot open the union file"));
}

TEST(EgraphUnionFileTest, WritesThePartition) {
  LoadedEgraph g;
  ASSERT_TRUE(Load(kSmall, &g).ok());
  const std::string path = ::testing::TempDir() + "/egraph_partition_test.tsv";
  std::vector<uint32_t> canonical = {0, 1, 2, 1, 4, 5, 6};  // c3 -> c0
  ASSERT_TRUE(WritePartition(path, g, canonical).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "c2\tc2\nc0\tc0\nc1\tc1\nc3\tc0\nc4\tc4\nr_unused\tr_unused\ncd_only\tcd_only\n");
  std::remove(path.c_str());
  EXPECT_TRUE(FailsWith(WritePartition("/nonexistent/dir/p.tsv", g, canonical),
                        "cannot write the partition"));
}

// ---------------------------------------------------------------------------
// The synthetic generator
// ---------------------------------------------------------------------------

void ExpectWellFormed(const SyntheticEgraph& g, uint64_t rows, uint32_t max_arity) {
  ASSERT_EQ(g.rows(), rows);
  ASSERT_EQ(g.classes, rows);
  uint64_t offset = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(g.row_classes[r], r);
    ASSERT_LT(g.row_ops[r], g.op_names.size());
    ASSERT_LE(g.child_lengths[r], max_arity);
    ASSERT_EQ(g.child_offsets[r], offset);
    for (uint32_t j = 0; j < g.child_lengths[r]; ++j) {
      ASSERT_LT(g.children[offset + j], r) << "children come before their parents";
    }
    offset += g.child_lengths[r];
  }
  ASSERT_EQ(offset, g.children.size());
}

TEST(EgraphSyntheticTest, DeterministicAndWellFormed) {
  const SyntheticEgraph a = GenerateSynthetic(100000, 2, 7);
  const SyntheticEgraph b = GenerateSynthetic(100000, 2, 7);
  const SyntheticEgraph c = GenerateSynthetic(100000, 2, 8);
  ExpectWellFormed(a, 100000, 2);
  EXPECT_EQ(a.row_ops, b.row_ops);
  EXPECT_EQ(a.children, b.children);
  EXPECT_NE(a.children, c.children);
  // Binary operators dominate, as in the math benchmark.
  uint64_t binary = 0;
  for (uint32_t len : a.child_lengths) binary += len == 2;
  EXPECT_GT(binary, a.rows() / 2);
}

TEST(EgraphSyntheticTest, SmallAndOddSizes) {
  for (uint64_t rows : {1ull, 2ull, 17ull, 48ull, 49ull, 50ull, 100ull, 1000ull}) {
    for (uint32_t arity : {0u, 1u, 2u, 3u, 5u}) {
      const SyntheticEgraph g = GenerateSynthetic(rows, arity, rows * 31 + arity);
      ExpectWellFormed(g, rows, arity);
    }
  }
  EXPECT_EQ(GenerateSynthetic(0, 2, 1).rows(), 0u);
}

// The rebuild cascades level by level: depth + 2 rounds, the same for every
// thread count.
TEST(EgraphSyntheticTest, RebuildNeedsDepthPlusTwoRounds) {
  for (uint64_t rows : {5000ull, 300000ull}) {
    const SyntheticEgraph g = GenerateSynthetic(rows, 2, 1);
    std::vector<uint32_t> one = Identity(g.classes);
    const CpuRebuildStats s1 = CpuRebuild(Columns(g), one.data(), 1, 0, false);
    EXPECT_EQ(s1.rounds, g.depth + 2) << rows;
    EXPECT_GT(s1.merges, rows / 2) << rows;
    EXPECT_LE(g.classes - s1.merges, g.terms) << rows;
    std::vector<uint32_t> four = Identity(g.classes);
    const CpuRebuildStats s4 = CpuRebuild(Columns(g), four.data(), 4, 0, false);
    EXPECT_EQ(four, one);
    EXPECT_EQ(s4.rounds, s1.rounds);
    EXPECT_EQ(s4.merges, s1.merges);
  }
  // Wider operators.
  const SyntheticEgraph wide = GenerateSynthetic(50000, 4, 3);
  ExpectWellFormed(wide, 50000, 4);
  std::vector<uint32_t> p = Identity(wide.classes);
  EXPECT_EQ(CpuRebuild(Columns(wide), p.data(), 2, 0, false).rounds, wide.depth + 2);
}

// ---------------------------------------------------------------------------
// The real e-graphs
// ---------------------------------------------------------------------------

std::vector<std::string> EgraphFiles() { return vyre_test::FindEgraphFiles().paths; }

TEST(EgraphRealFilesTest, LoadAndRebuild) {
  const std::vector<std::string> files = EgraphFiles();
  ASSERT_FALSE(files.empty()) << "no e-graphs under " << VYRE_EGRAPHS_BUILTIN_DIR
                              << ". Fix: restore tests/data/egraphs.";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    LoadedEgraph g;
    const ToolStatus st = LoadEgraphJsonFile(path, LoadOptions(), &g);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_GT(g.rows(), 0u);
    std::vector<uint32_t> one = Identity(g.classes);
    const CpuRebuildStats s1 = CpuRebuild(Columns(g), one.data(), 1, 0, false);
    std::vector<uint32_t> many = Identity(g.classes);
    const CpuRebuildStats s3 = CpuRebuild(Columns(g), many.data(), 3, 0, false);
    EXPECT_EQ(many, one);
    // The weak hash is quadratic in the rows of one op: small files only.
    if (g.rows() <= 4000) {
      std::vector<uint32_t> weak = Identity(g.classes);
      CpuRebuild(Columns(g), weak.data(), 2, 0, true);
      EXPECT_EQ(weak, one);
    }
    EXPECT_EQ(s3.rounds, s1.rounds);
    // The README: all are congruence-closed except the diospyros ones;
    // vector_matrix_multiply_2x3_3x3 needs 992 merges over 7 rounds.
    if (path.find("/diospyros/") == std::string::npos) {
      EXPECT_EQ(s1.merges, 0u);
      EXPECT_EQ(s1.rounds, 1u);
    }
    if (path.find("vector_matrix_multiply_2x3_3x3") != std::string::npos) {
      EXPECT_EQ(s1.merges, 992u);
      EXPECT_EQ(s1.rounds, 7u);
    }
  }
}

}  // namespace
}  // namespace vyre::tools
