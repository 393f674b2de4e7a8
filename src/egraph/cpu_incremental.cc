// The incremental CPU rebuild. See cpu_incremental.h for the design.
#include "egraph/cpu_incremental.h"

#include <algorithm>
#include <cstring>

namespace vyre::egraph {

namespace {

// Below this many rows per worker a visit runs on the calling thread: a
// small worklist (the usual incremental round) costs less than waking threads.
constexpr uint64_t kRowsPerWorker = 8192;

// Rows per hash-cons shard (a table of about 1 MiB stays in the caches while
// a worker fills it), and the most shards.
constexpr uint64_t kShardRows = uint64_t{1} << 16;
constexpr uint64_t kMaxShards = 1024;

template <typename T>
uint64_t VectorBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

}  // namespace

bool CpuIncremental::RowEq::operator()(uint32_t a, uint32_t b) const {
  if (a == b) return true;
  if (v->hashes[a] != v->hashes[b] || v->ops[a] != v->ops[b] || v->lens[a] != v->lens[b]) {
    return false;
  }
  const uint32_t len = v->lens[a];
  return len == 0 || std::memcmp(v->forms + v->offsets[a], v->forms + v->offsets[b],
                                 sizeof(uint32_t) * len) == 0;
}

CpuIncremental::CpuIncremental(const HostColumns& g, const uint32_t* parent, uint64_t formed_rows,
                               unsigned threads, bool weak)
    : threads_(threads), weak_(weak) {
  // At least one shard per worker, so that every worker has a table to fill.
  const uint64_t shards = std::min<uint64_t>(
      kMaxShards, std::max<uint64_t>(ThreadCount(threads, UINT64_MAX), g.rows / kShardRows + 1));
  sets_.reserve(shards);
  for (uint64_t s = 0; s < shards; ++s) {
    sets_.emplace_back(0, RowHash{&view_}, RowEq{&view_});
    sets_.back().reserve(formed_rows / shards + formed_rows / (8 * shards) + 16);
  }
  shard_pairs_.resize(shards);
  Index(g);
  // The union-find's sets as member cycles (parent[x] <= x: roots come first).
  for (uint64_t x = 0; x < g.classes; ++x) {
    const uint32_t root = parent[x];
    if (root == x) continue;
    next_member_[x] = next_member_[root];
    next_member_[root] = static_cast<uint32_t>(x);
  }
  Point(g);
  // From a fixpoint every hit is in one class; should the state not be one,
  // the pairs are merged by the next Rebuild, which keeps it exact.
  seed_ = Visit(g, parent, Rows{formed_rows, nullptr});
  formed_rows_ = formed_rows;
}

uint64_t CpuIncremental::bytes() const {
  uint64_t total = VectorBytes(forms_) + VectorBytes(hashes_) + VectorBytes(first_use_) +
                   VectorBytes(next_use_) + VectorBytes(use_row_) + VectorBytes(next_member_) +
                   VectorBytes(pending_) + VectorBytes(touched_) + VectorBytes(mark_);
  for (const FormSet& set : sets_) total += set.capacity() * (sizeof(uint32_t) + 1);
  return total;
}

// Extends the per-class, per-slot and per-row arrays to `g` and adds the new
// rows' children to the parent index. New classes start alone.
void CpuIncremental::Index(const HostColumns& g) {
  for (uint64_t x = classes_; x < g.classes; ++x) {
    first_use_.push_back(kNoClass);
    next_member_.push_back(static_cast<uint32_t>(x));
  }
  forms_.resize(g.child_count);
  next_use_.resize(g.child_count, kNoClass);
  use_row_.resize(g.child_count, kNoClass);
  hashes_.resize(g.rows);
  mark_.resize(g.rows, 0);
  for (uint64_t r = rows_; r < g.rows; ++r) {
    const uint32_t off = g.child_offsets[r];
    for (uint32_t j = 0; j < g.child_lengths[r]; ++j) {
      const uint32_t slot = off + j;
      const uint32_t child = g.children[slot];
      use_row_[slot] = static_cast<uint32_t>(r);
      next_use_[slot] = first_use_[child];
      first_use_[child] = slot;
    }
  }
  rows_ = g.rows;
  classes_ = g.classes;
}

void CpuIncremental::Point(const HostColumns& g) {
  view_.ops = g.row_ops;
  view_.lens = g.child_lengths;
  view_.offsets = g.child_offsets;
  view_.forms = forms_.data();
  view_.hashes = hashes_.data();
}

unsigned CpuIncremental::Parts(uint64_t rows) const {
  const uint64_t useful = std::max<uint64_t>(1, rows / kRowsPerWorker);
  return static_cast<unsigned>(std::min<uint64_t>(ThreadCount(threads_, UINT64_MAX), useful));
}

// Calls fn(s, r) for every row r of `rows` whose shard_of(r) is a shard s
// (kNoClass: none), each shard's rows on one worker.
template <typename ShardFn, typename Fn>
void CpuIncremental::ByShard(Workers& workers, Rows rows, ShardFn shard_of, Fn fn) {
  const unsigned parts = workers.count();
  const unsigned shards = static_cast<unsigned>(sets_.size());
  if (parts == 1) {
    for (uint64_t i = 0; i < rows.n; ++i) {
      const uint32_t r = rows.at(i);
      const uint32_t s = shard_of(r);
      if (s != kNoClass) fn(s, r);
    }
    return;
  }
  buckets_.resize(parts);
  workers.Run([&](unsigned t) {
    std::vector<std::vector<uint32_t>>& mine = buckets_[t];
    mine.resize(shards);
    for (std::vector<uint32_t>& bucket : mine) bucket.clear();
    const uint64_t end = PartBegin(rows.n, t + 1, parts);
    for (uint64_t i = PartBegin(rows.n, t, parts); i < end; ++i) {
      const uint32_t r = rows.at(i);
      const uint32_t s = shard_of(r);
      if (s != kNoClass) mine[s].push_back(r);
    }
  });
  workers.Run([&](unsigned t) {
    for (unsigned s = t; s < shards; s += parts) {
      for (unsigned u = 0; u < parts; ++u) {
        for (uint32_t r : buckets_[u][s]) fn(s, r);
      }
    }
  });
}

void CpuIncremental::StoreForm(const HostColumns& g, const uint32_t* parent, uint32_t r) {
  const uint32_t off = g.child_offsets[r];
  const uint32_t len = g.child_lengths[r];
  uint32_t* form = forms_.data() + off;
  for (uint32_t j = 0; j < len; ++j) form[j] = parent[g.children[off + j]];
  hashes_[r] = FormHash(g.row_ops[r], len, form, weak_);
}

// One round's visits under `parent` as the round began; returns the pairs of
// canonical classes (smaller first) that congruent rows put apart.
std::vector<CpuIncremental::Pair> CpuIncremental::Visit(const HostColumns& g,
                                                        const uint32_t* parent, Rows rows) {
  Workers workers(Parts(rows.n));
  // Every stale form leaves the sets before any form is rewritten: an
  // element's stored form must never change while the element is in a set.
  ByShard(
      workers, rows, [&](uint32_t r) { return r < formed_rows_ ? ShardOf(hashes_[r]) : kNoClass; },
      [&](uint32_t s, uint32_t r) { sets_[s].erase(r); });
  workers.Run([&](unsigned t) {
    const uint64_t end = PartBegin(rows.n, t + 1, workers.count());
    for (uint64_t i = PartBegin(rows.n, t, workers.count()); i < end; ++i) {
      StoreForm(g, parent, rows.at(i));
    }
  });
  for (std::vector<Pair>& pairs : shard_pairs_) pairs.clear();
  ByShard(
      workers, rows, [&](uint32_t r) { return ShardOf(hashes_[r]); },
      [&](uint32_t s, uint32_t r) {
        const auto [it, inserted] = sets_[s].insert(r);
        if (inserted) return;
        const uint32_t a = parent[g.row_classes[*it]];
        const uint32_t b = parent[g.row_classes[r]];
        if (a != b) shard_pairs_[s].emplace_back(std::min(a, b), std::max(a, b));
      });
  std::vector<Pair> pairs;
  for (const std::vector<Pair>& shard : shard_pairs_) {
    pairs.insert(pairs.end(), shard.begin(), shard.end());
  }
  return pairs;
}

// Merges the pairs' classes; returns how many sets it merged. The union-find
// is fully compressed before and after, and every class whose canonical class
// changed is appended to touched_.
uint64_t CpuIncremental::Link(const std::vector<Pair>& pairs, uint32_t* parent) {
  // Find's path halving rewrites only linked roots and members of linked
  // sets, all of which Relabel sets right.
  linked_.clear();
  for (const Pair& p : pairs) {
    const uint32_t linked = LinkRoots(parent, p.first, p.second);
    if (linked != kNoClass) linked_.push_back(linked);
  }
  Relabel(parent);
  return linked_.size();
}

// Points every member of every linked set at its final root, and splices the
// linked sets' member cycles into their roots'. Costs the members that
// changed, not the classes.
void CpuIncremental::Relabel(uint32_t* parent) {
  std::sort(linked_.begin(), linked_.end());
  // parent[b] < b is a root or a linked root already final: one step each.
  for (uint32_t b : linked_) parent[b] = parent[parent[b]];
  for (uint32_t b : linked_) {
    const uint32_t root = parent[b];
    touched_.push_back(b);
    // b's cycle is still its own: splices only ever go into final roots'.
    for (uint32_t x = next_member_[b]; x != b; x = next_member_[x]) {
      parent[x] = root;
      touched_.push_back(x);
    }
    std::swap(next_member_[b], next_member_[root]);
  }
}

void CpuIncremental::StartList() {
  if (++epoch_ == 0) {  // wrapped: no mark may look current
    std::fill(mark_.begin(), mark_.end(), 0u);
    epoch_ = 1;
  }
}

void CpuIncremental::AddRow(uint32_t r, std::vector<uint32_t>* list) {
  if (mark_[r] == epoch_) return;
  mark_[r] = epoch_;
  list->push_back(r);
}

// Adds every row with a child in touched_[touched_from ..).
void CpuIncremental::AddUsers(size_t touched_from, std::vector<uint32_t>* list) {
  for (size_t i = touched_from; i < touched_.size(); ++i) {
    for (uint32_t slot = first_use_[touched_[i]]; slot != kNoClass; slot = next_use_[slot]) {
      AddRow(use_row_[slot], list);
    }
  }
}

// Round 1: the rows a round limit left, the rows never visited (appended), and
// the rows with a child whose canonical class the unions changed.
std::vector<uint32_t> CpuIncremental::FirstWorklist(uint64_t rows) {
  std::vector<uint32_t> list;
  StartList();
  for (uint32_t r : pending_) AddRow(r, &list);
  pending_.clear();
  for (uint64_t r = formed_rows_; r < rows; ++r) AddRow(static_cast<uint32_t>(r), &list);
  AddUsers(0, &list);
  // Row order: the columns are read front to back.
  std::sort(list.begin(), list.end());
  return list;
}

CpuIncrementalStats CpuIncremental::Rebuild(const HostColumns& g, uint32_t* parent,
                                            const uint32_t* unions, uint64_t union_count,
                                            uint32_t max_rounds, std::vector<Pair>* changed) {
  Index(g);
  Point(g);
  touched_.clear();
  CpuIncrementalStats stats;
  stats.merges = Link(seed_, parent);
  seed_.clear();
  std::vector<Pair> given(union_count);
  for (uint64_t i = 0; i < union_count; ++i) given[i] = {unions[2 * i], unions[2 * i + 1]};
  stats.union_merges = Link(given, parent);
  std::vector<uint32_t> list = FirstWorklist(g.rows);
  for (;;) {
    ++stats.rounds;
    stats.rows_visited += list.size();
    const std::vector<Pair> pairs = Visit(g, parent, Rows{list.size(), list.data()});
    formed_rows_ = g.rows;
    const size_t merged_from = touched_.size();
    const uint64_t merged = Link(pairs, parent);
    stats.merges += merged;
    if (merged == 0) {
      stats.fixpoint = true;
      break;
    }
    list.clear();
    StartList();
    AddUsers(merged_from, &list);
    std::sort(list.begin(), list.end());
    if (max_rounds != 0 && stats.rounds >= max_rounds) {
      pending_ = std::move(list);
      break;
    }
  }
  // A touched class's canonical id only ever went down, so every touched
  // class changed.
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  changed->clear();
  changed->reserve(touched_.size());
  for (uint32_t x : touched_) changed->emplace_back(x, parent[x]);
  return stats;
}

}  // namespace vyre::egraph
