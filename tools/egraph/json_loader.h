// Loads egraph-serialize JSON (the format of extraction-gym and egglog's
// serializer) into e-graph columns:
//
//   {"nodes": {NODE_ID: {"op": str, "children": [NODE_ID...], "eclass": CLASS_ID,
//              "cost": float, ...}, ...},
//    "root_eclasses": [CLASS_ID...], "class_data": {CLASS_ID: {...}}}
//
// A child names an e-node and stands for that node's e-class. Rows follow the
// order of "nodes" in the file; class ids follow the order in which e-class ids
// first appear in the file (as "eclass" fields, "class_data" keys or
// "root_eclasses" entries; a class with no node is a class of its own). Ops are interned as whole strings, so leaf payloads
// stay distinct ("1" and "2" are two ops). Unknown fields are ignored.
//
// A later file (a step of a growing e-graph) is read against everything loaded
// before it (AppendEgraphJsonText): its node ids are new, its "eclass" ids name
// known classes or new ones (numbered on from the classes before), and its
// children name nodes of any earlier file or of itself.
//
// Also the union file (one union per line: two e-class ids as written in the
// JSON) and the partition file ("<eclass id>\t<canonical eclass id>" per class).
#ifndef VYRE_TOOLS_EGRAPH_JSON_LOADER_H_
#define VYRE_TOOLS_EGRAPH_JSON_LOADER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "egraph/egraph_columns.h"

namespace vyre::tools {

struct LoadedEgraph : EgraphColumns {
  // class id -> the e-class id as written in the file.
  std::vector<std::string> class_names;
  // row -> the node id as written in the file.
  std::vector<std::string> node_names;
  // e-class id string -> class id.
  std::unordered_map<std::string, uint32_t> class_ids;
  // Size of the JSON text (of every file, after appends).
  uint64_t bytes = 0;
  // node id -> row and op string -> op id: what an appended file is resolved
  // against. Empty after a load, built by the first append and kept up to
  // date by later ones, so that loads that never append do not pay for them.
  std::unordered_map<std::string, uint32_t> node_rows;
  std::unordered_map<std::string, uint32_t> op_ids;
};

// What one append added, in the form vyre_egraph_image_append takes: the new
// rows only, child_offsets indexing this `children` from 0; row classes,
// children and op ids are ids of the whole graph. `classes` is the graph's
// class count after the append (every id is below it), `first_class` the count
// before (new classes are [first_class, classes)); op_names holds the new ops.
struct EgraphAppend : EgraphColumns {
  uint64_t first_row = 0;
  uint64_t first_class = 0;
  // Size of the appended JSON text.
  uint64_t bytes = 0;
  uint64_t new_classes() const { return classes - first_class; }
};

struct LoadOptions {
  // Testing: every e-node in its own class (class id = row, class name = node
  // id), children naming their node's own class. The "eclass" fields are still
  // read and checked, but not used.
  bool own_class_per_node = false;
  // Called while parsing (about every MiB, and once at the end) with the bytes
  // parsed so far and the total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Reads and parses `path`. On error `out` is unspecified and the status says
// what failed, why, and what to do (malformed JSON with the parser's position,
// no "nodes" object, a field of the wrong type, a child naming no node, ...).
ToolStatus LoadEgraphJsonFile(const std::string& path, const LoadOptions& options,
                              LoadedEgraph* out);

// The same from text in memory; `name` stands for the file in messages.
ToolStatus LoadEgraphJsonText(const std::string& text, const std::string& name,
                              const LoadOptions& options, LoadedEgraph* out);

// Reads `path` (or parses `text`, `name` standing for the file) as egraph-
// serialize JSON whose nodes are appended to `graph`, and on success appends
// them to `graph` (columns, names, maps) and describes them in `added`. A node
// id that `graph` has already, or a child that names no node of `graph` or of
// the text, is an error with a Fix. On error `graph` is unchanged and `added`
// unspecified. options.own_class_per_node gives every new node a new class, as
// at the load (use it only on a graph loaded with it).
ToolStatus AppendEgraphJsonFile(const std::string& path, const LoadOptions& options,
                                LoadedEgraph* graph, EgraphAppend* added);
ToolStatus AppendEgraphJsonText(const std::string& text, const std::string& name,
                                const LoadOptions& options, LoadedEgraph* graph,
                                EgraphAppend* added);

// Reads a union file: one union per line, two e-class ids of `graph` separated
// by whitespace (blank lines are skipped). Appends two class ids per union to
// `pairs`. An id that is no e-class of the graph is an error naming the line.
ToolStatus ReadUnionFile(const std::string& path, const LoadedEgraph& graph,
                         std::vector<uint32_t>* pairs);
ToolStatus ParseUnions(const std::string& text, const std::string& name,
                       const LoadedEgraph& graph, std::vector<uint32_t>* pairs);

// Writes "<eclass id>\t<canonical eclass id>\n" for every class of `graph`, in
// class id order; canonical[c] is the canonical class id of class c.
ToolStatus WritePartition(const std::string& path, const LoadedEgraph& graph,
                          const std::vector<uint32_t>& canonical);

// Reads a whole file into `text` (errors in the tools' message form; `what`
// names the file's role, e.g. "the e-graph file").
ToolStatus ReadWholeFile(const std::string& path, const std::string& what, std::string* text);

}  // namespace vyre::tools

#endif  // VYRE_TOOLS_EGRAPH_JSON_LOADER_H_
