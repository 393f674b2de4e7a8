// The e-graph columns the tools hand to vyre_egraph_image_create: row r is the
// e-node row_ops[r](children[child_offsets[r] .. + child_lengths[r]]) in e-class
// row_classes[r]; children are e-class ids, every id below `classes`.
#ifndef VYRE_TOOLS_EGRAPH_EGRAPH_COLUMNS_H_
#define VYRE_TOOLS_EGRAPH_EGRAPH_COLUMNS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vyre::tools {

struct EgraphColumns {
  uint64_t classes = 0;
  std::vector<uint32_t> row_classes;
  std::vector<uint32_t> row_ops;
  std::vector<uint32_t> child_offsets;
  std::vector<uint32_t> child_lengths;
  std::vector<uint32_t> children;
  // op id -> the op string (an op id is the interned string).
  std::vector<std::string> op_names;

  uint64_t rows() const { return row_classes.size(); }
};

// Errors of the tools' own steps (files, parsing): ok() or a message of the
// form "<what failed>: <why>. Fix: <what to do>.".
struct ToolStatus {
  std::string message;
  bool ok() const { return message.empty(); }
  static ToolStatus Ok() { return {}; }
  static ToolStatus Error(std::string m) { return ToolStatus{std::move(m)}; }
};

}  // namespace vyre::tools

#endif  // VYRE_TOOLS_EGRAPH_EGRAPH_COLUMNS_H_
