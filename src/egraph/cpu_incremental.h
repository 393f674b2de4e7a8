// The incremental CPU rebuild (egg's rebuild with a worklist): what a CPU
// image keeps between rebuilds so that the next one visits only the rows that
// can have changed, and its partition is still the one a full rebuild of
// everything at once finds (cpu_reference.h, CpuRebuild).
//
// Kept between rebuilds:
//   - every row's canonical form as of its last visit (its canonical
//     children, parallel to the children column, and their hash);
//   - a hash-cons of those forms: one row per distinct form, in shards by
//     hash (absl sets of row ids that compare the stored forms child by child,
//     so a hit is a confirmed congruence, never a hash match alone);
//   - the parent index: class -> the child slots (rows) naming it as a child,
//     as intrusive lists, so appends extend it in O(1) per child;
//   - the members of every set of the union-find, as intrusive cycles, so a
//     link rewrites exactly the members whose canonical class changes (the
//     union-find stays fully compressed without a scan of every class);
//   - the rows a round limit left unvisited.
//
// A rebuild: the unions link sets (their members' canonical classes change);
// round 1 visits the rows appended since the last rebuild, the rows left
// pending, and every row with a child whose canonical class changed; each
// later round the rows with a child whose class the previous round merged.
// A visit erases the row's stale form, stores its form under the classes as
// they were when the round began (snapshot rounds, like CpuRebuild: rounds =
// depth of the merge cascade) and inserts it; a hit in another canonical
// class is a pair, merged after the round.
//
// Why it is exact: a row's stored form goes stale only when a child's
// canonical class changes, and then the row is on the next worklist; rows
// with equal stored forms go stale together (same canonical children), so
// erasing the form for one of them is right for all. A form that stays
// current keeps its hash-cons entry, and every row that took that form was
// merged with the entry's row, so at the fixpoint rows with equal forms share
// a class.
#ifndef VYRE_EGRAPH_CPU_INCREMENTAL_H_
#define VYRE_EGRAPH_CPU_INCREMENTAL_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "egraph/cpu_reference.h"

namespace vyre::egraph {

struct CpuIncrementalStats {
  uint32_t rounds = 0;
  uint64_t merges = 0;        // by congruence
  uint64_t union_merges = 0;  // by the unions
  uint64_t rows_visited = 0;
  bool fixpoint = false;  // false only when max_rounds stopped it
};

class CpuIncremental {
 public:
  using Pair = std::pair<uint32_t, uint32_t>;

  // Indexes the rows and classes of `g` and stores the canonical forms of
  // rows [0, formed_rows) under `parent` (fully compressed; the fixpoint of
  // the last rebuild, which visited those rows). Rows past formed_rows are
  // visited by the next Rebuild. Child ranges must not overlap (columns.h
  // validates that). `threads`: as CpuRebuild's; `weak`: hash op and arity
  // only (VYRE_EGRAPH_REBUILD_COLLIDING_HASH), for this state's lifetime.
  CpuIncremental(const HostColumns& g, const uint32_t* parent, uint64_t formed_rows,
                 unsigned threads, bool weak);
  CpuIncremental(const CpuIncremental&) = delete;
  CpuIncremental& operator=(const CpuIncremental&) = delete;

  bool weak() const { return weak_; }
  // Host bytes the state holds.
  uint64_t bytes() const;

  // `g`: the image's columns now (they may have grown since: appended rows
  // and classes are indexed here). Links the `unions` (union_count pairs of
  // class ids, 2 u32 each, validated), then runs rounds to the fixpoint or
  // max_rounds (0: no limit; rows still to visit are kept for the next
  // rebuild). `parent` (g.classes entries) is fully compressed before and
  // after. `changed` receives (class, canonical class) for every class whose
  // canonical class this call changed, sorted by class.
  CpuIncrementalStats Rebuild(const HostColumns& g, uint32_t* parent, const uint32_t* unions,
                              uint64_t union_count, uint32_t max_rounds,
                              std::vector<Pair>* changed);

 private:
  // The columns and stored forms the hash-cons reads; re-pointed at the
  // start of every call, since the image's vectors may have moved.
  struct FormView {
    const uint32_t* ops = nullptr;
    const uint32_t* lens = nullptr;
    const uint32_t* offsets = nullptr;
    const uint32_t* forms = nullptr;
    const uint64_t* hashes = nullptr;
  };
  struct RowHash {
    const FormView* v;
    size_t operator()(uint32_t r) const { return static_cast<size_t>(v->hashes[r]); }
  };
  struct RowEq {
    const FormView* v;
    bool operator()(uint32_t a, uint32_t b) const;
  };
  using FormSet = absl::flat_hash_set<uint32_t, RowHash, RowEq>;

  // Rows to visit: [0, n) when `list` is null, else list[0 .. n).
  struct Rows {
    uint64_t n = 0;
    const uint32_t* list = nullptr;
    uint32_t at(uint64_t i) const { return list ? list[i] : static_cast<uint32_t>(i); }
  };

  void Index(const HostColumns& g);
  void Point(const HostColumns& g);
  unsigned Parts(uint64_t rows) const;
  uint32_t ShardOf(uint64_t hash) const {
    return static_cast<uint32_t>(((hash >> 32) * sets_.size()) >> 32);
  }
  template <typename ShardFn, typename Fn>
  void ByShard(Workers& workers, Rows rows, ShardFn shard_of, Fn fn);

  std::vector<Pair> Visit(const HostColumns& g, const uint32_t* parent, Rows rows);
  void StoreForm(const HostColumns& g, const uint32_t* parent, uint32_t r);
  uint64_t Link(const std::vector<Pair>& pairs, uint32_t* parent);
  void Relabel(uint32_t* parent);
  void StartList();
  void AddRow(uint32_t r, std::vector<uint32_t>* list);
  void AddUsers(size_t touched_from, std::vector<uint32_t>* list);
  std::vector<uint32_t> FirstWorklist(uint64_t rows);

  unsigned threads_ = 1;
  bool weak_ = false;
  uint64_t rows_ = 0, classes_ = 0;  // indexed so far
  uint64_t formed_rows_ = 0;         // rows [0, formed_rows_) have a stored form

  std::vector<uint32_t> forms_;   // per child slot: its canonical class at the row's last visit
  std::vector<uint64_t> hashes_;  // per row: FormHash of its stored form
  FormView view_;
  std::vector<FormSet> sets_;  // the hash-cons, in shards by hash

  // Parent index: first_use_[class] -> a child slot naming it, next_use_[slot]
  // -> the next such slot; use_row_[slot] -> the slot's row. kNoClass ends.
  std::vector<uint32_t> first_use_, next_use_, use_row_;
  // next_member_[x]: the next class of x's set (a cycle through the set).
  std::vector<uint32_t> next_member_;

  std::vector<uint32_t> pending_;  // rows a round limit left to visit
  std::vector<Pair> seed_;         // pairs the indexing found (none from a fixpoint)
  std::vector<uint32_t> linked_;   // roots linked by the last Link
  std::vector<uint32_t> touched_;  // classes whose canonical class changed this call
  std::vector<uint32_t> mark_;     // per row: the epoch that listed it
  uint32_t epoch_ = 0;
  // Scratch of ByShard ([worker][shard] rows) and Visit ([shard] pairs).
  std::vector<std::vector<std::vector<uint32_t>>> buckets_;
  std::vector<std::vector<Pair>> shard_pairs_;
};

}  // namespace vyre::egraph

#endif  // VYRE_EGRAPH_CPU_INCREMENTAL_H_
