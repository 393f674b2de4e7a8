// A deliberately naive model of the e-graph contract in vyre_cuda.h, for the
// e-graph fuzz targets to compare the library with: a union-find whose root
// is the minimum class id of its set, and congruence closure by repeated
// full scans (rows with the same op, arity and canonical children put their
// classes in one set) until nothing merges.
#ifndef VYRE_TESTS_FUZZ_EGRAPH_MODEL_H_
#define VYRE_TESTS_FUZZ_EGRAPH_MODEL_H_

#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

namespace vyre_fuzz {

class EgraphModel {
 public:
  explicit EgraphModel(uint64_t class_count) : parent_(class_count) { Reset(); }

  void Reset() { std::iota(parent_.begin(), parent_.end(), 0u); }

  uint32_t Find(uint32_t c) {
    uint32_t root = c;
    while (parent_[root] != root) root = parent_[root];
    while (parent_[c] != root) {
      const uint32_t next = parent_[c];
      parent_[c] = root;
      c = next;
    }
    return root;
  }

  // True when the two classes were apart.
  bool Union(uint32_t a, uint32_t b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return false;
    if (a < b) {
      parent_[b] = a;
    } else {
      parent_[a] = b;
    }
    return true;
  }

  // Congruence closure over the rows (children of row r:
  // children[offsets[r] .. offsets[r] + lengths[r])).
  void Close(const std::vector<uint32_t>& row_classes, const std::vector<uint32_t>& row_ops,
             const std::vector<uint32_t>& offsets, const std::vector<uint32_t>& lengths,
             const std::vector<uint32_t>& children) {
    for (bool changed = true; changed;) {
      changed = false;
      std::map<std::vector<uint32_t>, uint32_t> seen;
      for (size_t r = 0; r < row_classes.size(); ++r) {
        std::vector<uint32_t> key;
        key.reserve(2 + lengths[r]);
        key.push_back(row_ops[r]);
        key.push_back(lengths[r]);
        for (uint32_t j = 0; j < lengths[r]; ++j) key.push_back(Find(children[offsets[r] + j]));
        auto [it, inserted] = seen.emplace(std::move(key), row_classes[r]);
        if (!inserted && Union(it->second, row_classes[r])) changed = true;
      }
    }
  }

  std::vector<uint32_t> Canonical() {
    std::vector<uint32_t> out(parent_.size());
    for (size_t c = 0; c < out.size(); ++c) out[c] = Find(static_cast<uint32_t>(c));
    return out;
  }

 private:
  std::vector<uint32_t> parent_;
};

}  // namespace vyre_fuzz

#endif  // VYRE_TESTS_FUZZ_EGRAPH_MODEL_H_
