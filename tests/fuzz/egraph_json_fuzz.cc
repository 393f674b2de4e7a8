// Fuzzes the egraph-serialize JSON loader of the tools (tools/egraph/
// json_loader.cc, used by `vyre-cuda egraph`) on arbitrary bytes, and the
// union-file parser on the text after a line "--unions--", then feeds what
// loads to the library on the CPU device.
//
// Checks: the loader returns OK or a message in the form "<what failed>:
// <why>. Fix: <what to do>." (never a crash or an exception); loaded columns
// are consistent (equal row counts, child ranges inside children, class and
// op ids in range, child ranges in row order); vyre_egraph_image_create
// accepts them and a rebuild with the parsed unions gives the canonical
// classes of the naive model (egraph_model.h), both with e-classes as written
// and with every node in its own class.
#include <cstring>
#include <string>
#include <vector>

#include "egraph/json_loader.h"
#include "egraph_model.h"
#include "fuzz_support.h"
#include "vyre_cuda.h"

namespace {

constexpr char kUnionsMarker[] = "\n--unions--\n";

void ExpectToolMessage(const vyre::tools::ToolStatus& st, const char* what) {
  if (st.ok()) return;
  const std::string& m = st.message;
  const std::string first_line = m.substr(0, m.find('\n'));
  if (first_line.find(". Fix: ") == std::string::npos || first_line.back() != '.') {
    vyre_fuzz::Fail("%s: the message lacks \"<what failed>: <why>. Fix: <what to do>.\": \"%s\"",
                    what, m.c_str());
  }
}

void CheckColumns(const vyre::tools::LoadedEgraph& g) {
  const uint64_t rows = g.rows();
  if (g.row_ops.size() != rows || g.child_offsets.size() != rows ||
      g.child_lengths.size() != rows || g.node_names.size() != rows) {
    vyre_fuzz::Fail("loader: column sizes differ (%zu rows)", static_cast<size_t>(rows));
  }
  if (g.class_names.size() != g.classes) vyre_fuzz::Fail("loader: class names != classes");
  uint64_t end = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    if (g.row_classes[r] >= g.classes) vyre_fuzz::Fail("loader: row class out of range");
    if (g.row_ops[r] >= g.op_names.size()) vyre_fuzz::Fail("loader: op id out of range");
    if (g.child_offsets[r] < end) vyre_fuzz::Fail("loader: child ranges out of order");
    end = uint64_t{g.child_offsets[r]} + g.child_lengths[r];
    if (end > g.children.size()) vyre_fuzz::Fail("loader: child range past children");
  }
  for (uint32_t c : g.children) {
    if (c >= g.classes) vyre_fuzz::Fail("loader: child class out of range");
  }
  for (const auto& [name, id] : g.class_ids) {
    if (id >= g.classes || g.class_names[id] != name) vyre_fuzz::Fail("loader: class_ids wrong");
  }
}

void RunLoaded(const vyre::tools::LoadedEgraph& g, const std::vector<uint32_t>& unions) {
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
  desc.cpu_threads = 1;
  vyre_egraph_image image{0};
  VYRE_FUZZ_EXPECT(vyre_egraph_image_create(&desc, &image), VYRE_STATUS_OK);
  vyre_egraph_rebuild_desc rd = VYRE_EGRAPH_REBUILD_DESC_INIT;
  std::vector<uint32_t> canonical(g.classes);
  rd.unions = unions.empty() ? nullptr : unions.data();
  rd.union_count = unions.size() / 2;
  rd.canonical_out = canonical.data();
  VYRE_FUZZ_EXPECT(vyre_egraph_rebuild(image, &rd, nullptr), VYRE_STATUS_OK);
  VYRE_FUZZ_EXPECT(vyre_egraph_image_destroy(image), VYRE_STATUS_OK);

  vyre_fuzz::EgraphModel model(g.classes);
  for (size_t i = 0; i + 1 < unions.size(); i += 2) model.Union(unions[i], unions[i + 1]);
  model.Close(g.row_classes, g.row_ops, g.child_offsets, g.child_lengths, g.children);
  if (canonical != model.Canonical()) {
    vyre_fuzz::Fail(
        "rebuild of the loaded e-graph (%zu rows, %zu classes) differs from the "
        "model",
        static_cast<size_t>(g.rows()), static_cast<size_t>(g.classes));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vyre_fuzz::SetUpEnvironment();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t marker = input.find(kUnionsMarker);
  const std::string json = input.substr(0, marker);
  const std::string union_text =
      marker == std::string::npos ? std::string() : input.substr(marker + sizeof kUnionsMarker - 1);
  for (bool own_class : {false, true}) {
    vyre::tools::LoadOptions options;
    options.own_class_per_node = own_class;
    uint64_t last_done = 0;
    options.progress = [&](uint64_t done, uint64_t total) {
      if (done > total || done < last_done)
        vyre_fuzz::Fail("loader progress %llu of %llu", static_cast<unsigned long long>(done),
                        static_cast<unsigned long long>(total));
      last_done = done;
    };
    vyre::tools::LoadedEgraph g;
    const vyre::tools::ToolStatus st =
        vyre::tools::LoadEgraphJsonText(json, "fuzz.json", options, &g);
    ExpectToolMessage(st, "LoadEgraphJsonText");
    if (!st.ok()) return 0;
    CheckColumns(g);
    std::vector<uint32_t> unions;
    const vyre::tools::ToolStatus parsed =
        vyre::tools::ParseUnions(union_text, "fuzz.unions", g, &unions);
    ExpectToolMessage(parsed, "ParseUnions");
    if (!parsed.ok()) unions.clear();
    for (uint32_t u : unions) {
      if (u >= g.classes)
        vyre_fuzz::Fail("ParseUnions: class %u of %llu", u,
                        static_cast<unsigned long long>(g.classes));
    }
    RunLoaded(g, unions);
  }
  return 0;
}
