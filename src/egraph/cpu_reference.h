// The CPU reference for e-graph congruence: a hash-consing congruence closure
// with egg's rebuild semantics, single- or multi-threaded. It is the ground
// truth of the GPU tests, the engine behind CPU images (device = CPU) and the
// baseline of the benchmarks.
//
// Rounds have snapshot semantics, like the GPU pass: every row of a round is
// canonicalised under the classes as they were when the round began, the
// congruent rows' classes are merged after the round, and the next round only
// revisits the rows whose children changed class (egg's parent lists). So the
// number of rounds is the depth of the merge cascade, whatever the thread count
// or row order.
#ifndef VYRE_EGRAPH_CPU_REFERENCE_H_
#define VYRE_EGRAPH_CPU_REFERENCE_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace vyre::egraph {

// Row r is row_ops[r](children[child_offsets[r] .. + child_lengths[r]]) in class
// row_classes[r]; children are class ids. Already validated by the caller:
// every class id is below `classes` and every child range lies inside
// `children` (child_count entries).
struct HostColumns {
  uint64_t rows = 0, classes = 0, child_count = 0;
  const uint32_t* row_classes = nullptr;
  const uint32_t* row_ops = nullptr;
  const uint32_t* child_offsets = nullptr;
  const uint32_t* child_lengths = nullptr;
  const uint32_t* children = nullptr;
};

struct CpuRebuildStats {
  uint32_t rounds = 0;
  uint64_t merges = 0;
  uint64_t rows_visited = 0;
};

// Union-find with representative = minimum id: parent[x] <= x always.
uint32_t Find(uint32_t* parent, uint32_t x);           // path halving
bool Union(uint32_t* parent, uint32_t a, uint32_t b);  // links the larger root under the smaller
void Compress(uint32_t* parent, uint64_t n);           // parent[x] = Find(x) for all x

// Congruence closure from the union-find state `parent` (g.classes entries; the
// caller's unions already applied): repeat { canonicalise every row (op, arity,
// Find of each child); rows with equal canonical form -> Union their classes }
// until a round merges nothing. On return parent[x] is the canonical (minimum)
// class of x for every x, also when max_rounds stopped it early.
//
// rounds: every pass, including the last one that merged nothing (1 for an
// input that is already closed, or has no rows). merges: successful Unions.
// rows_visited: rows canonicalised over all rounds (every row in the first
// round, then only rows with a child whose class changed).
// threads: 0 = every core (fewer for small inputs), n = n threads; rows are
// sharded by hash, each thread owning one shard's table. max_rounds: 0 = no
// limit. weak_hash (testing): group by (op, arity) only, so every candidate
// must be confirmed child by child. Exact: rows are congruent iff they have the
// same op, the same arity and the same canonical children in order.
CpuRebuildStats CpuRebuild(const HostColumns& g, uint32_t* parent, unsigned threads,
                           uint32_t max_rounds, bool weak_hash);

// One pass without merging, under `canonical` (a fully compressed union-find:
// canonical[canonical[x]] == canonical[x]): for each group of congruent rows
// whose minimum canonical class is m, the pairs (m, c) for every other
// canonical class c of the group; deduplicated, sorted ascending.
std::vector<std::pair<uint32_t, uint32_t>> CpuCongruencePairs(const HostColumns& g,
                                                               const uint32_t* canonical,
                                                               unsigned threads);

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_CPU_REFERENCE_H_
