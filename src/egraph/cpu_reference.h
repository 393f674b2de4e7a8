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

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
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
  // The last round merged nothing (false only when max_rounds stopped it).
  bool fixpoint = false;
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

// ---------------------------------------------------------------------------
// Building blocks shared with the incremental rebuild (cpu_incremental.cc).
// ---------------------------------------------------------------------------

inline constexpr uint32_t kNoClass = UINT32_MAX;

// Links the larger of the roots of a and b under the smaller; returns the root
// that was linked, or kNoClass when a and b were already in one set.
inline uint32_t LinkRoots(uint32_t* parent, uint32_t a, uint32_t b) {
  uint32_t ra = Find(parent, a);
  uint32_t rb = Find(parent, b);
  if (ra == rb) return kNoClass;
  if (ra > rb) std::swap(ra, rb);
  parent[rb] = ra;
  return rb;
}

inline uint64_t Fmix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// The hash of a canonical form (op, arity, canonical children); `weak`
// (testing) hashes op and arity only, so every candidate is a collision that
// the child-by-child comparison must settle.
inline uint64_t FormHash(uint32_t op, uint32_t len, const uint32_t* kids, bool weak) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  uint64_t h = ((uint64_t{op} << 32) | len) * kGolden + 0x632BE59BD9B4E019ull;
  if (!weak) {
    for (uint32_t j = 0; j < len; ++j) {
      h = (h ^ kids[j]) * kGolden;
      h ^= h >> 29;
    }
  }
  return Fmix64(h);
}

// Worker threads for `threads` (0 = every core) over `rows` rows: no more
// than the work can keep busy, at most 256.
unsigned ThreadCount(unsigned threads, uint64_t rows);

// The first item of part t of n items split in `parts` (part `parts` ends it).
inline uint64_t PartBegin(uint64_t n, unsigned t, unsigned parts) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(n) * t) / parts);
}

// Worker threads: Run(job) calls job(t) for every t in [0, count()) in
// parallel (job(0) on the calling thread) and returns when all are done. With
// one wanted thread it starts none. Fewer threads than wanted when the system
// refuses more: still correct, only slower.
class Workers {
 public:
  explicit Workers(unsigned wanted);
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  unsigned count() const { return count_; }
  void Run(const std::function<void(unsigned)>& job);

 private:
  void Loop(unsigned t);

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(unsigned)>* job_ = nullptr;
  unsigned count_ = 1;
  unsigned pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_CPU_REFERENCE_H_
