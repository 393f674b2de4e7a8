// egraph-serialize JSON through nlohmann-json's SAX interface: the columns are
// built while parsing, without a document tree, so large files (millions of
// e-nodes) load in bounded memory.
#include "egraph/json_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace vyre::tools {
namespace {

using Json = nlohmann::json;

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  // Long ids would drown the message.
  if (out.size() > 120) out = out.substr(0, 117) + "...";
  return out + "\"";
}

// A const char* iterator that publishes its position, so the handler can say
// where it is (errors, progress).
class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* p, const char** position) : p_(p), position_(position) {}
  reference operator*() const { return *p_; }
  TrackedIterator& operator++() {
    ++p_;
    *position_ = p_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackedIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackedIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** position_;
};

constexpr uint32_t kMaxId = std::numeric_limits<uint32_t>::max();

// What a file is read against: nothing for a first load; for an appended file,
// the graph loaded so far (with its node_rows and op_ids built), whose nodes,
// classes and ops keep their ids while the file's new ones are numbered on.
struct Prior {
  const LoadedEgraph* graph = nullptr;
  uint64_t rows = 0, classes = 0, ops = 0, children = 0;
};

class EgraphSax : public Json::json_sax_t {
 public:
  EgraphSax(const std::string& name, const char* begin, uint64_t size, const LoadOptions& options,
            const Prior& prior, LoadedEgraph* out)
      : name_(name), begin_(begin), position_(begin), size_(size), options_(options),
        prior_(prior), out_(out) {}

  const char** position() { return &position_; }
  const std::string& error() const { return error_; }
  bool saw_nodes() const { return saw_nodes_; }
  bool done() const { return done_; }
  uint64_t node_slots() const { return node_defined_.size(); }
  const std::vector<uint32_t>& child_nodes() const { return child_nodes_; }
  const std::vector<uint32_t>& row_of_node() const { return row_of_node_; }
  const std::vector<char>& node_defined() const { return node_defined_; }
  // The node id of a slot (slow: for error messages).
  std::string SlotName(uint32_t slot) const {
    for (const auto& [name, index] : node_index_) {
      if (index == slot) return name;
    }
    return "?";
  }

  // --- scalars ---------------------------------------------------------------
  bool null() override { return Scalar("null", nullptr); }
  bool boolean(bool) override { return Scalar("boolean", nullptr); }
  bool number_integer(number_integer_t) override { return Scalar("number", nullptr); }
  bool number_unsigned(number_unsigned_t) override { return Scalar("number", nullptr); }
  bool number_float(number_float_t, const string_t&) override { return Scalar("number", nullptr); }
  bool string(string_t& value) override { return Scalar("string", &value); }
  bool binary(binary_t&) override { return Scalar("binary value", nullptr); }

  // --- containers ------------------------------------------------------------
  bool start_object(std::size_t) override { return Open(true); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

  bool key(string_t& k) override {
    if (skip_ > 0) return true;
    switch (state()) {
      case State::kTop:
        field_ = k == "nodes"          ? Field::kNodes
                 : k == "class_data"   ? Field::kClassData
                 : k == "root_eclasses" ? Field::kRoots
                                        : Field::kOther;
        return true;
      case State::kNodes:
        node_name_ = std::move(k);
        return true;
      case State::kNode:
        field_ = k == "op"         ? Field::kOp
                 : k == "eclass"   ? Field::kEclass
                 : k == "children" ? Field::kChildren
                                   : Field::kOther;
        return true;
      case State::kClassData:
        if (!options_.own_class_per_node) return InternClass(k) != kMaxId;
        return true;
      default:
        return true;
    }
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string why = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    const size_t bracket = why.find("] ");
    if (why.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos) {
      why = why.substr(bracket + 2);
    }
    while (!why.empty() && (why.back() == '.' || why.back() == ' ')) why.pop_back();
    const bool truncated = position >= size_;
    error_ = name_ + ": malformed JSON at byte " + std::to_string(position) + ": " + why +
             (truncated ? " (the text ends early: truncated?)" : "") +
             ". Fix: pass a complete egraph-serialize JSON file (re-export it, or check that "
             "the copy was not cut short).";
    return false;
  }

 private:
  enum class State { kStart, kTop, kNodes, kNode, kChildren, kClassData, kRoots, kEnd };
  enum class Field { kNone, kNodes, kClassData, kRoots, kOp, kEclass, kChildren, kOther };

  State state() const { return stack_.empty() ? (done_ ? State::kEnd : State::kStart) : stack_.back(); }

  std::string Where() const {
    return " (near byte " + std::to_string(static_cast<uint64_t>(position_ - begin_)) + ")";
  }

  bool Fail(const std::string& what, const std::string& fix) {
    error_ = name_ + ": " + what + Where() + ". Fix: " + fix;
    return false;
  }

  bool FailNode(const std::string& why) {
    return Fail("node " + Quote(node_name_) + ": " + why,
                "each node must be {\"op\": string, \"children\": [node ids], \"eclass\": "
                "string} (egraph-serialize JSON).");
  }

  static const char* Article(const char* kind) {
    return (kind[0] == 'a' || kind[0] == 'o') ? "an " : "a ";
  }

  bool Scalar(const char* kind, string_t* value) {
    if (skip_ > 0) return true;
    switch (state()) {
      case State::kStart:
        return Fail(std::string("the top level is ") + Article(kind) + kind + ", not an object",
                    "pass egraph-serialize JSON: an object with a \"nodes\" object.");
      case State::kTop:
        if (field_ == Field::kNodes) {
          return Fail(std::string("\"nodes\" is ") + Article(kind) + kind + ", not an object",
                      "\"nodes\" must map node ids to nodes (egraph-serialize JSON).");
        }
        return true;
      case State::kNodes:
        return FailNode(std::string("is ") + Article(kind) + kind + ", not an object");
      case State::kNode:
        switch (field_) {
          case Field::kOp:
            if (!value) return FailNode(std::string("\"op\" is ") + Article(kind) + kind + ", not a string");
            op_ = std::move(*value);
            has_op_ = true;
            return true;
          case Field::kEclass:
            if (!value) {
              return FailNode(std::string("\"eclass\" is ") + Article(kind) + kind +
                              ", not a string");
            }
            eclass_ = std::move(*value);
            has_eclass_ = true;
            return true;
          case Field::kChildren:
            return FailNode(std::string("\"children\" is ") + Article(kind) + kind +
                            ", not an array");
          default:
            return true;
        }
      case State::kChildren:
        if (!value) {
          return FailNode(std::string("a child is ") + Article(kind) + kind +
                          ", not a string (children are node ids)");
        }
        children_.push_back(InternNode(*value));
        return children_.back() != kMaxId;
      case State::kRoots:
        if (value && !options_.own_class_per_node) return InternClass(*value) != kMaxId;
        return true;
      default:
        return true;
    }
  }

  bool Open(bool object) {
    const char* kind = object ? "object" : "array";
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    switch (state()) {
      case State::kStart:
        if (!object) {
          return Fail("the top level is an array, not an object",
                      "pass egraph-serialize JSON: an object with a \"nodes\" object.");
        }
        stack_.push_back(State::kTop);
        return true;
      case State::kTop:
        if (field_ == Field::kNodes) {
          if (!object) {
            return Fail("\"nodes\" is an array, not an object",
                        "\"nodes\" must map node ids to nodes (egraph-serialize JSON).");
          }
          if (saw_nodes_) {
            return Fail("\"nodes\" appears twice", "keep one \"nodes\" object in the file.");
          }
          saw_nodes_ = true;
          stack_.push_back(State::kNodes);
        } else if (field_ == Field::kClassData && object) {
          stack_.push_back(State::kClassData);
        } else if (field_ == Field::kRoots && !object) {
          stack_.push_back(State::kRoots);
        } else {
          skip_ = 1;
        }
        return true;
      case State::kNodes:
        if (!object) return FailNode("is an array, not an object");
        has_op_ = has_eclass_ = false;
        op_.clear();
        eclass_.clear();
        children_.clear();
        stack_.push_back(State::kNode);
        return true;
      case State::kNode:
        if (field_ == Field::kChildren) {
          if (object) return FailNode("\"children\" is an object, not an array");
          children_.clear();
          stack_.push_back(State::kChildren);
          return true;
        }
        if (field_ == Field::kOp || field_ == Field::kEclass) {
          return FailNode(std::string(field_ == Field::kOp ? "\"op\"" : "\"eclass\"") + " is " +
                          Article(kind) + kind + ", not a string");
        }
        skip_ = 1;
        return true;
      case State::kChildren:
        return FailNode(std::string("a child is ") + Article(kind) + kind +
                        ", not a string (children are node ids)");
      default:
        skip_ = 1;
        return true;
    }
  }

  bool Close() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    const State closed = stack_.back();
    stack_.pop_back();
    if (closed == State::kNode) return FinishNode();
    if (closed == State::kTop) done_ = true;
    // A closed container was the value of the field that named it.
    field_ = Field::kNone;
    return true;
  }

  uint32_t InternNode(const std::string& name) {
    auto [it, inserted] = node_index_.try_emplace(name, static_cast<uint32_t>(node_defined_.size()));
    if (inserted) {
      if (node_defined_.size() >= kMaxId) {
        Fail("more than 2^32 - 2 node ids", "split the e-graph; vyre-cuda e-graphs hold at most "
                                             "2^32 - 1 rows.");
        return kMaxId;
      }
      node_defined_.push_back(0);
      row_of_node_.push_back(kMaxId);
      // A node of an earlier file is defined already, at its row there.
      if (prior_.graph) {
        const auto known = prior_.graph->node_rows.find(name);
        if (known != prior_.graph->node_rows.end()) {
          node_defined_.back() = 1;
          row_of_node_.back() = known->second;
        }
      }
    }
    return it->second;
  }

  // A class of an earlier file keeps its id; a new one gets the next.
  uint32_t InternClass(const std::string& name) {
    if (prior_.graph) {
      const auto known = prior_.graph->class_ids.find(name);
      if (known != prior_.graph->class_ids.end()) return known->second;
    }
    const uint64_t next = prior_.classes + out_->class_names.size();
    auto [it, inserted] = out_->class_ids.try_emplace(name, static_cast<uint32_t>(next));
    if (inserted) {
      if (next >= kMaxId) {
        Fail("more than 2^32 - 2 e-class ids", "split the e-graph.");
        return kMaxId;
      }
      out_->class_names.push_back(name);
    }
    return it->second;
  }

  bool FinishNode() {
    field_ = Field::kNone;
    if (!has_op_) return FailNode("no \"op\"");
    if (!has_eclass_) return FailNode("no \"eclass\"");
    const uint32_t node = InternNode(node_name_);
    if (node == kMaxId) return false;
    if (node_defined_[node] && row_of_node_[node] < prior_.rows) {
      return Fail("node " + Quote(node_name_) + ": defined already by an earlier file",
                  "give the nodes of each appended file new node ids (a step adds e-nodes; it "
                  "cannot redefine one).");
    }
    if (node_defined_[node]) return FailNode("defined twice");
    const uint64_t local_row = out_->row_classes.size();
    const uint64_t row = prior_.rows + local_row;
    // Own classes are numbered like rows, after the classes before.
    const bool own_overflow = options_.own_class_per_node && prior_.classes + local_row >= kMaxId;
    if (row >= kMaxId || own_overflow) {
      return Fail("more than 2^32 - 2 e-nodes", "split the e-graph; vyre-cuda e-graphs hold at "
                                                 "most 2^32 - 1 rows.");
    }
    if (prior_.children + child_nodes_.size() + children_.size() > kMaxId) {
      return Fail("more than 2^32 - 1 children in all",
                  "split the e-graph; child offsets are 32-bit.");
    }
    node_defined_[node] = 1;
    row_of_node_[node] = static_cast<uint32_t>(row);
    out_->node_names.push_back(node_name_);
    uint32_t cls = static_cast<uint32_t>(prior_.classes + local_row);
    if (!options_.own_class_per_node) {
      cls = InternClass(eclass_);
      if (cls == kMaxId) return false;
    }
    out_->row_classes.push_back(cls);
    out_->row_ops.push_back(InternOp());
    out_->child_offsets.push_back(static_cast<uint32_t>(child_nodes_.size()));
    out_->child_lengths.push_back(static_cast<uint32_t>(children_.size()));
    child_nodes_.insert(child_nodes_.end(), children_.begin(), children_.end());
    if (options_.progress && (row & 4095) == 0) {
      const uint64_t at = static_cast<uint64_t>(position_ - begin_);
      if (at - last_progress_ >= (uint64_t{1} << 20)) {
        last_progress_ = at;
        options_.progress(at, size_);
      }
    }
    return true;
  }

  // An op of an earlier file keeps its id; a new one gets the next.
  uint32_t InternOp() {
    if (prior_.graph) {
      const auto known = prior_.graph->op_ids.find(op_);
      if (known != prior_.graph->op_ids.end()) return known->second;
    }
    const uint64_t next = prior_.ops + out_->op_names.size();
    auto [op, op_new] = op_index_.try_emplace(op_, static_cast<uint32_t>(next));
    if (op_new) out_->op_names.push_back(op_);
    return op->second;
  }

  const std::string& name_;
  const char* begin_;
  const char* position_;
  uint64_t size_;
  const LoadOptions& options_;
  const Prior& prior_;
  LoadedEgraph* out_;
  std::string error_;

  std::vector<State> stack_;
  uint64_t skip_ = 0;
  Field field_ = Field::kNone;
  bool saw_nodes_ = false;
  bool done_ = false;
  uint64_t last_progress_ = 0;

  // The node being read.
  std::string node_name_, op_, eclass_;
  bool has_op_ = false, has_eclass_ = false;
  std::vector<uint32_t> children_;

  // Node ids seen (defined, or named as a child first): slot -> row.
  std::unordered_map<std::string, uint32_t> node_index_;
  std::vector<char> node_defined_;
  std::vector<uint32_t> row_of_node_;
  std::unordered_map<std::string, uint32_t> op_index_;
  // Children as node slots, in row order.
  std::vector<uint32_t> child_nodes_;
};

std::string ErrnoText(int e) { return std::strerror(e); }

}  // namespace

ToolStatus ReadWholeFile(const std::string& path, const std::string& what, std::string* text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return ToolStatus::Error(path + ": cannot open " + what + ": " + ErrnoText(e) +
                             ". Fix: check the path and that the file is readable.");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    return ToolStatus::Error(path + ": cannot read " + what + ": it is a directory" +
                             ". Fix: pass the path of a file.");
  }
  text->clear();
  if (S_ISREG(st.st_mode)) text->reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return ToolStatus::Error(path + ": cannot read " + what + ": " + ErrnoText(e) +
                               ". Fix: check that the file is readable.");
    }
    text->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return ToolStatus::Ok();
}

namespace {

// Runs the parser over `text` into `out`: columns, names and classes, children
// still node slots in the parser.
ToolStatus RunSax(const std::string& text, const std::string& name, EgraphSax* sax) {
  TrackedIterator first(text.data(), sax->position());
  TrackedIterator last(text.data() + text.size(), sax->position());
  bool parsed = false;
  try {
    parsed = Json::sax_parse(first, last, sax);
  } catch (const std::exception& e) {
    return ToolStatus::Error(name + ": cannot parse the JSON: " + e.what() +
                             ". Fix: pass egraph-serialize JSON.");
  }
  if (!parsed || !sax->error().empty()) {
    if (sax->error().empty()) {
      return ToolStatus::Error(name + ": cannot parse the JSON. Fix: pass egraph-serialize JSON.");
    }
    return ToolStatus::Error(sax->error());
  }
  if (!sax->saw_nodes()) {
    return ToolStatus::Error(name + ": no \"nodes\" object at the top level. Fix: pass "
                                    "egraph-serialize JSON ({\"nodes\": {node id: {\"op\", "
                                    "\"children\", \"eclass\"}}}).");
  }
  return ToolStatus::Ok();
}

// Every node named as a child must be defined (in the text, or before it).
ToolStatus CheckChildrenDefined(const EgraphSax& sax, const std::string& name, const Prior& prior,
                                const LoadedEgraph& out) {
  const std::vector<char>& defined = sax.node_defined();
  const std::vector<uint32_t>& child_nodes = sax.child_nodes();
  for (uint64_t r = 0; r < out.rows(); ++r) {
    for (uint32_t j = 0; j < out.child_lengths[r]; ++j) {
      const uint32_t slot = child_nodes[out.child_offsets[r] + j];
      if (defined[slot]) continue;
      return ToolStatus::Error(
          name + ": node " + Quote(out.node_names[r]) + ": child " + Quote(sax.SlotName(slot)) +
          " names no node. Fix: every child must be a node id defined in \"nodes\"" +
          (prior.graph ? " of this file or of an earlier one (a step's children name nodes "
                         "loaded before it or nodes of the step)."
                       : " (was the file cut or edited?)."));
    }
  }
  return ToolStatus::Ok();
}

// Parses `text` into `out` (empty but for `bytes`) against `prior`: rows,
// classes and ops after prior's; children resolved to their node's e-class.
ToolStatus ParseEgraph(const std::string& text, const std::string& name,
                       const LoadOptions& options, const Prior& prior, LoadedEgraph* out) {
  EgraphSax sax(name, text.data(), text.size(), options, prior, out);
  ToolStatus st = RunSax(text, name, &sax);
  if (st.ok()) st = CheckChildrenDefined(sax, name, prior, *out);
  if (!st.ok()) return st;
  const std::vector<uint32_t>& child_nodes = sax.child_nodes();
  const std::vector<uint32_t>& row_of_node = sax.row_of_node();
  out->children.resize(child_nodes.size());
  for (size_t i = 0; i < child_nodes.size(); ++i) {
    const uint64_t row = row_of_node[child_nodes[i]];
    out->children[i] = row < prior.rows ? prior.graph->row_classes[row]
                                        : out->row_classes[row - prior.rows];
  }
  if (options.own_class_per_node) {
    out->class_names = out->node_names;
    out->class_ids.clear();
    out->class_ids.reserve(out->node_names.size());
    for (uint64_t r = 0; r < out->rows(); ++r) {
      out->class_ids.emplace(out->node_names[r], static_cast<uint32_t>(prior.classes + r));
    }
  }
  out->classes = prior.classes + out->class_names.size();
  if (options.progress) options.progress(text.size(), text.size());
  return ToolStatus::Ok();
}

// Builds graph->node_rows and op_ids where a load left them empty (or where
// a caller changed the names since).
void IndexNodesAndOps(LoadedEgraph* graph) {
  if (graph->node_rows.size() != graph->node_names.size()) {
    graph->node_rows.clear();
    graph->node_rows.reserve(graph->node_names.size());
    for (size_t r = 0; r < graph->node_names.size(); ++r) {
      graph->node_rows.emplace(graph->node_names[r], static_cast<uint32_t>(r));
    }
  }
  if (graph->op_ids.size() != graph->op_names.size()) {
    graph->op_ids.clear();
    for (size_t o = 0; o < graph->op_names.size(); ++o) {
      graph->op_ids.emplace(graph->op_names[o], static_cast<uint32_t>(o));
    }
  }
}

template <typename T>
void AppendAll(const std::vector<T>& from, std::vector<T>* to) {
  to->insert(to->end(), from.begin(), from.end());
}

// Adds the parsed `delta` to `graph` (its maps too) and moves its columns into
// `added`.
void CommitAppend(LoadedEgraph&& delta, LoadedEgraph* graph, EgraphAppend* added) {
  const uint64_t first_row = graph->rows();
  const uint32_t child_base = static_cast<uint32_t>(graph->children.size());
  for (size_t r = 0; r < delta.node_names.size(); ++r) {
    graph->node_rows.emplace(delta.node_names[r], static_cast<uint32_t>(first_row + r));
  }
  for (size_t o = 0; o < delta.op_names.size(); ++o) {
    graph->op_ids.emplace(delta.op_names[o], static_cast<uint32_t>(graph->op_names.size() + o));
  }
  // delta.class_ids holds the new classes only, by their ids in the graph.
  graph->class_ids.insert(delta.class_ids.begin(), delta.class_ids.end());
  AppendAll(delta.class_names, &graph->class_names);
  AppendAll(delta.node_names, &graph->node_names);
  AppendAll(delta.op_names, &graph->op_names);
  AppendAll(delta.row_classes, &graph->row_classes);
  AppendAll(delta.row_ops, &graph->row_ops);
  AppendAll(delta.child_lengths, &graph->child_lengths);
  AppendAll(delta.children, &graph->children);
  for (uint32_t off : delta.child_offsets) graph->child_offsets.push_back(child_base + off);
  *added = EgraphAppend();
  added->first_row = first_row;
  added->first_class = graph->classes;
  added->bytes = delta.bytes;
  graph->classes = delta.classes;
  graph->bytes += delta.bytes;
  added->classes = delta.classes;
  added->row_classes = std::move(delta.row_classes);
  added->row_ops = std::move(delta.row_ops);
  added->child_offsets = std::move(delta.child_offsets);
  added->child_lengths = std::move(delta.child_lengths);
  added->children = std::move(delta.children);
  added->op_names = std::move(delta.op_names);
}

}  // namespace

ToolStatus LoadEgraphJsonText(const std::string& text, const std::string& name,
                              const LoadOptions& options, LoadedEgraph* out) {
  *out = LoadedEgraph();
  out->bytes = text.size();
  return ParseEgraph(text, name, options, Prior(), out);
}

ToolStatus LoadEgraphJsonFile(const std::string& path, const LoadOptions& options,
                              LoadedEgraph* out) {
  std::string text;
  ToolStatus st = ReadWholeFile(path, "the e-graph file", &text);
  if (!st.ok()) return st;
  return LoadEgraphJsonText(text, path, options, out);
}

ToolStatus AppendEgraphJsonText(const std::string& text, const std::string& name,
                                const LoadOptions& options, LoadedEgraph* graph,
                                EgraphAppend* added) {
  IndexNodesAndOps(graph);
  Prior prior;
  prior.graph = graph;
  prior.rows = graph->rows();
  prior.classes = graph->classes;
  prior.ops = graph->op_names.size();
  prior.children = graph->children.size();
  LoadedEgraph delta;
  delta.bytes = text.size();
  const ToolStatus st = ParseEgraph(text, name, options, prior, &delta);
  if (!st.ok()) return st;
  CommitAppend(std::move(delta), graph, added);
  return ToolStatus::Ok();
}

ToolStatus AppendEgraphJsonFile(const std::string& path, const LoadOptions& options,
                                LoadedEgraph* graph, EgraphAppend* added) {
  std::string text;
  ToolStatus st = ReadWholeFile(path, "the e-graph step file", &text);
  if (!st.ok()) return st;
  return AppendEgraphJsonText(text, path, options, graph, added);
}

ToolStatus ParseUnions(const std::string& text, const std::string& name, const LoadedEgraph& graph,
                       std::vector<uint32_t>* pairs) {
  uint64_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_number;
    std::vector<std::string> fields;
    size_t i = start;
    while (i < end) {
      while (i < end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      size_t j = i;
      while (j < end && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j > i) fields.emplace_back(text, i, j - i);
      i = j;
    }
    start = end + 1;
    if (fields.empty()) continue;
    const std::string where = name + " line " + std::to_string(line_number);
    if (fields.size() != 2) {
      return ToolStatus::Error(where + ": expected two e-class ids separated by whitespace, found " +
                               std::to_string(fields.size()) +
                               " fields. Fix: write one union per line: <eclass id> <eclass id>.");
    }
    for (const std::string& f : fields) {
      auto it = graph.class_ids.find(f);
      if (it == graph.class_ids.end()) {
        return ToolStatus::Error(where + ": unknown e-class id " + Quote(f) +
                                 ": no node of the e-graph has this \"eclass\". Fix: use e-class "
                                 "ids as written in the \"eclass\" fields of the JSON file.");
      }
      pairs->push_back(it->second);
    }
  }
  return ToolStatus::Ok();
}

ToolStatus ReadUnionFile(const std::string& path, const LoadedEgraph& graph,
                         std::vector<uint32_t>* pairs) {
  std::string text;
  ToolStatus st = ReadWholeFile(path, "the union file", &text);
  if (!st.ok()) return st;
  return ParseUnions(text, path, graph, pairs);
}

ToolStatus WritePartition(const std::string& path, const LoadedEgraph& graph,
                          const std::vector<uint32_t>& canonical) {
  if (canonical.size() != graph.classes) {
    return ToolStatus::Error(path + ": cannot write the partition: " +
                             std::to_string(canonical.size()) + " canonical ids for " +
                             std::to_string(graph.classes) +
                             " classes. Fix: report this as a bug in the vyre-cuda tool.");
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    const int e = errno;
    return ToolStatus::Error(path + ": cannot write the partition: " + ErrnoText(e) +
                             ". Fix: check that the directory exists and is writable.");
  }
  std::string buffer;
  bool ok = true;
  for (uint64_t c = 0; c < graph.classes && ok; ++c) {
    const uint32_t k = canonical[c];
    if (k >= graph.classes) {
      std::fclose(f);
      return ToolStatus::Error(path + ": cannot write the partition: canonical id " +
                               std::to_string(k) + " out of range. Fix: report this as a bug.");
    }
    buffer += graph.class_names[c];
    buffer += '\t';
    buffer += graph.class_names[k];
    buffer += '\n';
    if (buffer.size() >= (1u << 20)) {
      ok = std::fwrite(buffer.data(), 1, buffer.size(), f) == buffer.size();
      buffer.clear();
    }
  }
  if (ok && !buffer.empty()) ok = std::fwrite(buffer.data(), 1, buffer.size(), f) == buffer.size();
  const int e = errno;
  if (std::fclose(f) != 0) ok = false;
  if (!ok) {
    return ToolStatus::Error(path + ": cannot write the partition: " + ErrnoText(e) +
                             ". Fix: check the free space and permissions there.");
  }
  return ToolStatus::Ok();
}

}  // namespace vyre::tools
