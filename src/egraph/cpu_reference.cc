// The CPU congruence closure. See cpu_reference.h for the contract.
//
// Tables: rows are sharded by the high bits of the hash of their canonical
// form (op, arity, canonical children); each shard owns an absl hash table
// and is served by one worker thread at a time. There are many more shards
// than threads (about 64 Ki rows each), so that a shard's table stays in the
// caches while its rows go in (a partitioned hash join). Rows of arity <= 2 (the common case)
// are keyed by their form itself, inline. Wider rows store their canonical
// children in a private array with the hash, and their table holds row ids
// whose equality compares the stored forms child by child. Either way a hit is
// a confirmed congruence, never a hash match alone.
//
// A round:
//   1. (rounds > 1, wide rows only) erase the worklist rows' old stored forms;
//   2. canonicalise the worklist rows under the union-find as the round began
//      (fully compressed), bucketing them by shard;
//   3. insert per shard: a hit on a form whose class is canonically different
//      gives a pair to merge;
//   4. apply the pairs with Union, serially, recording the linked roots;
//   5. compress: the linked roots first, in ascending order, then every class;
//      the classes whose canonical id changed (the linked roots and the members
//      of their sets) are marked in a bitset;
//   6. the next worklist: every row with a child in a changed class.
// Phases 1-3, 5 and 6 run on the worker threads; phase 4 is serial.
//
// Stale forms: a small key whose child class merged into another names a
// class that is no longer canonical, so it can never equal a fresh form; such
// keys stay in the table until it would grow, and are purged then. Wide forms
// are erased before they are rewritten; rows with equal stored forms have
// children in the same sets, so they all go stale together and erasing the
// form for one of them is right for all of them.
#include "egraph/cpu_reference.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace vyre::egraph {

uint32_t Find(uint32_t* parent, uint32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

namespace {
constexpr uint32_t kNone = kNoClass;
}  // namespace

bool Union(uint32_t* parent, uint32_t a, uint32_t b) { return LinkRoots(parent, a, b) != kNone; }

void Compress(uint32_t* parent, uint64_t n) {
  // Ascending order: parent[x] <= x, so parent[x]'s root is already one step away.
  for (uint64_t x = 0; x < n; ++x) parent[x] = Find(parent, static_cast<uint32_t>(x));
}

// ---------------------------------------------------------------------------
// Worker threads (cpu_reference.h). One pool per call of the public functions.
// ---------------------------------------------------------------------------
Workers::Workers(unsigned wanted) {
  for (unsigned t = 1; t < wanted; ++t) {
    try {
      threads_.emplace_back([this, t] { Loop(t); });
    } catch (const std::system_error&) {
      break;  // fewer threads than asked: still correct, only slower
    }
  }
  count_ = static_cast<unsigned>(threads_.size()) + 1;
}

Workers::~Workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Workers::Run(const std::function<void(unsigned)>& job) {
  if (count_ == 1) {
    job(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    pending_ = count_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  job(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void Workers::Loop(unsigned t) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(unsigned)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(t);
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_.notify_one();
  }
}

unsigned ThreadCount(unsigned threads, uint64_t rows) {
  constexpr unsigned kMaxThreads = 256;
  if (threads == 0) {
    // Every core, but no more threads than the work can keep busy.
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    uint64_t useful = std::max<uint64_t>(1, rows / 32768);
    return static_cast<unsigned>(std::min<uint64_t>({hw, useful, kMaxThreads}));
  }
  return std::min(threads, kMaxThreads);
}

namespace {

// ---------------------------------------------------------------------------
// Canonical forms (FormHash: cpu_reference.h).
// ---------------------------------------------------------------------------
// Small rows (arity <= 2, the common case) are their own keys: the canonical
// form inline, so a hit needs no other memory. A form that went stale (a child
// class merged into another) can never equal a fresh one, whose children are
// all canonical, so stale small keys are left in place and only purged when a
// table would grow.
constexpr uint32_t kInlineArity = 2;

// How far ahead the loops over rows and items prefetch their random reads.
constexpr size_t kPrefetchAhead = 16;

// Rows per shard (a table of about 2 MiB), and the most shards.
constexpr uint64_t kShardRows = uint64_t{1} << 16;
constexpr uint64_t kMaxShards = 4096;

struct SmallForm {
  uint32_t op = 0, len = 0, c0 = 0, c1 = 0;
  bool operator==(const SmallForm& o) const {
    return op == o.op && len == o.len && c0 == o.c0 && c1 == o.c1;
  }
};

struct SmallHash {
  bool weak = false;
  size_t operator()(const SmallForm& f) const {
    const uint32_t kids[2] = {f.c0, f.c1};
    return static_cast<size_t>(FormHash(f.op, f.len, kids, weak));
  }
};

// A canonicalised small row on its way to its shard.
struct SmallItem {
  SmallForm form;
  uint32_t cls = 0;
};

using SmallMap = absl::flat_hash_map<SmallForm, uint32_t, SmallHash>;

// Wider rows keep their canonical children in a private array (`keys`) with
// their hash; the table holds row ids and compares the stored forms. Before a
// wide row's form is rewritten, its old form is erased.
struct Forms {
  const uint32_t* ops = nullptr;
  const uint32_t* lens = nullptr;
  const uint64_t* kofs = nullptr;  // row r's canonical children: keys[kofs[r] .. + lens[r])
  const uint32_t* keys = nullptr;
  const uint64_t* hashes = nullptr;
};

struct RowHash {
  const Forms* f;
  size_t operator()(uint32_t r) const { return static_cast<size_t>(f->hashes[r]); }
};

struct RowEq {
  const Forms* f;
  bool operator()(uint32_t a, uint32_t b) const {
    if (a == b) return true;
    if (f->hashes[a] != f->hashes[b] || f->ops[a] != f->ops[b] || f->lens[a] != f->lens[b]) {
      return false;
    }
    return std::memcmp(f->keys + f->kofs[a], f->keys + f->kofs[b],
                       sizeof(uint32_t) * f->lens[a]) == 0;
  }
};

using RowSet = absl::flat_hash_set<uint32_t, RowHash, RowEq>;
using RowMinMap = absl::flat_hash_map<uint32_t, uint32_t, RowHash, RowEq>;

// A list of rows: all of them, or an explicit list.
struct RowList {
  bool all = true;
  uint64_t n = 0;
  const uint32_t* rows = nullptr;
  uint32_t at(uint64_t i) const { return all ? static_cast<uint32_t>(i) : rows[i]; }
};

template <typename T>
std::unique_ptr<T[]> Uninitialized(uint64_t n) {
  return std::unique_ptr<T[]>(new T[n == 0 ? 1 : n]);
}

// Canonicalisation into per-shard buckets, the stored wide forms and the
// workers: the part shared by the rebuild and the single pass.
class FormTable {
 public:
  FormTable(const HostColumns& g, unsigned threads, bool weak)
      : g_(g), workers_(ThreadCount(threads, g.rows)), weak_(weak) {
    parts_ = workers_.count();
    // Many more shards than workers: a shard's table then stays small enough
    // for the caches while its rows are inserted (a partitioned hash join).
    const uint64_t by_size = (g.rows + kShardRows - 1) / kShardRows;
    shards_ = static_cast<unsigned>(
        std::min<uint64_t>(kMaxShards, std::max<uint64_t>(parts_, by_size)));
    uint64_t wide = 0;
    for (uint64_t r = 0; r < g.rows; ++r) {
      if (g.child_lengths[r] > kInlineArity) wide += g.child_lengths[r];
    }
    has_wide_ = wide > 0;
    if (has_wide_) {
      kofs_ = Uninitialized<uint64_t>(g.rows);
      uint64_t total = 0;
      for (uint64_t r = 0; r < g.rows; ++r) {
        kofs_[r] = total;
        if (g.child_lengths[r] > kInlineArity) total += g.child_lengths[r];
      }
      keys_ = Uninitialized<uint32_t>(total);
      hashes_ = Uninitialized<uint64_t>(g.rows);
    }
    forms_.ops = g.row_ops;
    forms_.lens = g.child_lengths;
    forms_.kofs = kofs_.get();
    forms_.keys = keys_.get();
    forms_.hashes = hashes_.get();
    small_.assign(parts_, std::vector<std::vector<SmallItem>>(shards_));
    wide_.assign(parts_, std::vector<std::vector<uint32_t>>(shards_));
  }

  Workers& workers() { return workers_; }
  unsigned shards() const { return shards_; }
  unsigned parts() const { return parts_; }

  // Runs fn(s) for every shard, each shard on one worker (round robin).
  template <typename Fn>
  void ForEachShard(Fn&& fn) {
    workers_.Run([&](unsigned t) {
      for (unsigned s = t; s < shards_; s += parts_) fn(s);
    });
  }
  bool weak() const { return weak_; }
  bool has_wide() const { return has_wide_; }
  const Forms* forms() const { return &forms_; }

  uint32_t ShardOf(uint64_t hash) const {
    return static_cast<uint32_t>(((hash >> 32) * shards_) >> 32);
  }

  // Buckets the wide rows of `list` by the shard of their stored hash.
  void BucketWideByStoredHash(const RowList& list) {
    workers_.Run([&](unsigned t) {
      auto& mine = wide_[t];
      for (auto& b : mine) b.clear();
      const uint64_t end = PartBegin(list.n, t + 1, parts_);
      for (uint64_t i = PartBegin(list.n, t, parts_); i < end; ++i) {
        const uint32_t r = list.at(i);
        if (g_.child_lengths[r] > kInlineArity) mine[ShardOf(hashes_[r])].push_back(r);
      }
    });
  }

  // Canonicalises the rows of `list` under `canonical` (fully compressed):
  // small rows into items, wide rows into the stored forms; buckets both by
  // shard.
  void Canonicalise(const RowList& list, const uint32_t* canonical) {
    const SmallHash small_hash{weak_};
    workers_.Run([&](unsigned t) {
      auto& small = small_[t];
      auto& wide = wide_[t];
      for (auto& b : small) b.clear();
      for (auto& b : wide) b.clear();
      const uint64_t end = PartBegin(list.n, t + 1, parts_);
      for (uint64_t i = PartBegin(list.n, t, parts_); i < end; ++i) {
        if (i + kPrefetchAhead < end) {
          // The children's classes are random reads: ask for them early.
          const uint32_t ahead = list.at(i + kPrefetchAhead);
          const uint32_t* kids = g_.children + g_.child_offsets[ahead];
          const uint32_t n = std::min(g_.child_lengths[ahead], kInlineArity);
          for (uint32_t j = 0; j < n; ++j) __builtin_prefetch(canonical + kids[j]);
        }
        const uint32_t r = list.at(i);
        const uint32_t len = g_.child_lengths[r];
        const uint32_t* src = g_.children + g_.child_offsets[r];
        if (len <= kInlineArity) {
          SmallItem item;
          item.form.op = g_.row_ops[r];
          item.form.len = len;
          if (len > 0) item.form.c0 = canonical[src[0]];
          if (len > 1) item.form.c1 = canonical[src[1]];
          item.cls = g_.row_classes[r];
          const uint32_t shard = shards_ == 1 ? 0 : ShardOf(small_hash(item.form));
          small[shard].push_back(item);
          continue;
        }
        uint32_t* dst = keys_.get() + kofs_[r];
        for (uint32_t j = 0; j < len; ++j) dst[j] = canonical[src[j]];
        const uint64_t h = FormHash(g_.row_ops[r], len, dst, weak_);
        hashes_[r] = h;
        wide[ShardOf(h)].push_back(r);
      }
    });
  }

  // Items of small rows bucketed for shard s, in a fixed order.
  template <typename Fn>
  void ForShardSmall(unsigned s, Fn&& fn) const {
    for (unsigned t = 0; t < parts_; ++t) {
      for (const SmallItem& item : small_[t][s]) fn(item);
    }
  }
  // The same as spans (one per worker), for prefetching.
  template <typename Fn>
  void ForShardSmallSpans(unsigned s, Fn&& fn) const {
    for (unsigned t = 0; t < parts_; ++t) fn(small_[t][s].data(), small_[t][s].size());
  }
  uint64_t SmallCount(unsigned s) const {
    uint64_t n = 0;
    for (unsigned t = 0; t < parts_; ++t) n += small_[t][s].size();
    return n;
  }
  // Wide rows bucketed for shard s, in a fixed order.
  template <typename Fn>
  void ForShardWide(unsigned s, Fn&& fn) const {
    for (unsigned t = 0; t < parts_; ++t) {
      for (uint32_t r : wide_[t][s]) fn(r);
    }
  }

 private:
  const HostColumns& g_;
  Workers workers_;
  bool weak_;
  bool has_wide_ = false;
  unsigned parts_ = 1;   // workers
  unsigned shards_ = 1;  // tables
  std::unique_ptr<uint64_t[]> kofs_;
  std::unique_ptr<uint32_t[]> keys_;
  std::unique_ptr<uint64_t[]> hashes_;
  Forms forms_;
  // [t][s]: what worker t routed to shard s.
  std::vector<std::vector<std::vector<SmallItem>>> small_;
  std::vector<std::vector<std::vector<uint32_t>>> wide_;
};

using Pair = std::pair<uint32_t, uint32_t>;

class Rebuilder {
 public:
  Rebuilder(const HostColumns& g, uint32_t* parent, unsigned threads, bool weak)
      : g_(g), parent_(parent), table_(g, threads, weak) {
    const unsigned shards = table_.shards();
    small_maps_.reserve(shards);
    wide_sets_.reserve(shards);
    for (unsigned s = 0; s < shards; ++s) {
      small_maps_.emplace_back(0, SmallHash{weak});
      small_maps_.back().reserve(g.rows / shards + g.rows / (8 * shards) + 16);
      wide_sets_.emplace_back(0, RowHash{table_.forms()}, RowEq{table_.forms()});
    }
    pairs_.resize(shards);
    next_.resize(table_.parts());
  }

  CpuRebuildStats Run(uint32_t max_rounds) {
    CpuRebuildStats stats;
    Compress(parent_, g_.classes);
    RowList list;
    list.all = true;
    list.n = g_.rows;
    for (;;) {
      ++stats.rounds;
      stats.rows_visited += list.n;
      if (stats.rounds > 1 && table_.has_wide()) {
        table_.BucketWideByStoredHash(list);
        EraseWide();
      }
      table_.Canonicalise(list, parent_);
      Insert();
      ApplyUnions();
      stats.merges += linked_.size();
      if (linked_.empty()) {
        stats.fixpoint = true;
        break;
      }
      CompressAfterUnions();
      if (max_rounds != 0 && stats.rounds >= max_rounds) break;
      BuildWorklist();
      list.all = false;
      list.n = worklist_.size();
      list.rows = worklist_.data();
      // An empty worklist (no row uses a changed class) still makes a last
      // pass that finds nothing, counted like any other.
    }
    return stats;
  }

 private:
  Workers& workers() { return table_.workers(); }

  void EraseWide() {
    table_.ForEachShard([&](unsigned s) {
      RowSet& set = wide_sets_[s];
      table_.ForShardWide(s, [&](uint32_t r) { set.erase(r); });
    });
  }

  // A small key is stale when one of its children is no longer canonical.
  bool Stale(const SmallForm& f) const {
    return (f.len > 0 && parent_[f.c0] != f.c0) || (f.len > 1 && parent_[f.c1] != f.c1);
  }

  void Insert() {
    table_.ForEachShard([&](unsigned s) {
      std::vector<Pair>& out = pairs_[s];
      out.clear();
      auto found = [&](uint32_t existing_class, uint32_t cls) {
        const uint32_t a = parent_[existing_class];
        const uint32_t b = parent_[cls];
        if (a != b) out.emplace_back(std::min(a, b), std::max(a, b));
      };
      SmallMap& map = small_maps_[s];
      const uint64_t incoming = table_.SmallCount(s);
      if (map.size() + incoming > map.capacity() - map.capacity() / 8) {
        // About to grow: drop the stale keys first.
        absl::erase_if(map, [&](const SmallMap::value_type& kv) { return Stale(kv.first); });
      }
      // Prefetch ahead: even one shard's table outgrows the nearer caches.
      table_.ForShardSmallSpans(s, [&](const SmallItem* items, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          if (i + kPrefetchAhead < n) map.prefetch(items[i + kPrefetchAhead].form);
          auto [it, inserted] = map.try_emplace(items[i].form, items[i].cls);
          if (!inserted) found(it->second, items[i].cls);
        }
      });
      RowSet& set = wide_sets_[s];
      table_.ForShardWide(s, [&](uint32_t r) {
        auto [it, inserted] = set.insert(r);
        if (!inserted) found(g_.row_classes[*it], g_.row_classes[r]);
      });
    });
  }

  // Pairs name canonical classes (roots when the round began), so Find only
  // ever walks and halves links between such roots: entries of non-root
  // classes are left as they were, which CompressAfterUnions relies on.
  void ApplyUnions() {
    linked_.clear();
    for (const std::vector<Pair>& shard : pairs_) {
      for (const Pair& p : shard) {
        const uint32_t linked = LinkRoots(parent_, p.first, p.second);
        if (linked != kNone) linked_.push_back(linked);
      }
    }
  }

  void CompressAfterUnions() {
    std::sort(linked_.begin(), linked_.end());
    // Each linked root's parent is smaller, and is a root or a linked root
    // already fixed, so one step reaches the final root.
    for (uint32_t b : linked_) parent_[b] = parent_[parent_[b]];
    // Every other class: its parent is a root of the round's start; one step
    // through it reaches the final root. Writes touch only classes that were
    // not roots, and reads of other workers' entries only roots, so the
    // workers never race. Each worker owns whole words of the changed bitset.
    const unsigned parts = workers().count();
    const uint64_t n = g_.classes;
    const uint64_t words = (n + 63) / 64;
    if (!changed_) changed_ = Uninitialized<uint64_t>(words);
    workers().Run([&](unsigned t) {
      const uint64_t word_end = PartBegin(words, t + 1, parts);
      for (uint64_t w = PartBegin(words, t, parts); w < word_end; ++w) {
        uint64_t bits = 0;
        const uint64_t end = std::min(n, (w + 1) * 64);
        for (uint64_t x = w * 64; x < end; ++x) {
          const uint32_t p = parent_[x];
          if (p == x) continue;
          const uint32_t np = parent_[p];
          if (np != p) {
            parent_[x] = np;
            bits |= uint64_t{1} << (x & 63);
          }
        }
        changed_[w] = bits;
      }
    });
    // The linked roots changed too (their own entries were already final).
    for (uint32_t b : linked_) changed_[b >> 6] |= uint64_t{1} << (b & 63);
  }

  // The next worklist: every row with a child in a changed class, in row
  // order. A scan of the children against the changed bitset (classes / 8
  // bytes, cache-resident) is cheaper here than parent lists, and needs no
  // deduplication.
  void BuildWorklist() {
    const unsigned parts = workers().count();
    const uint64_t rows = g_.rows;
    const uint64_t* changed = changed_.get();
    workers().Run([&](unsigned t) {
      std::vector<uint32_t>& out = next_[t];
      out.clear();
      const uint64_t end = PartBegin(rows, t + 1, parts);
      for (uint64_t r = PartBegin(rows, t, parts); r < end; ++r) {
        const uint32_t* c = g_.children + g_.child_offsets[r];
        const uint32_t len = g_.child_lengths[r];
        for (uint32_t j = 0; j < len; ++j) {
          if ((changed[c[j] >> 6] >> (c[j] & 63)) & 1) {
            out.push_back(static_cast<uint32_t>(r));
            break;
          }
        }
      }
    });
    worklist_.clear();
    for (const std::vector<uint32_t>& part : next_) {
      worklist_.insert(worklist_.end(), part.begin(), part.end());
    }
  }

  const HostColumns& g_;
  uint32_t* parent_;
  FormTable table_;
  std::vector<SmallMap> small_maps_;
  std::vector<RowSet> wide_sets_;
  std::vector<std::vector<Pair>> pairs_;
  std::vector<uint32_t> linked_;
  std::unique_ptr<uint64_t[]> changed_;  // bitset over classes
  std::vector<std::vector<uint32_t>> next_;
  std::vector<uint32_t> worklist_;
};

}  // namespace

CpuRebuildStats CpuRebuild(const HostColumns& g, uint32_t* parent, unsigned threads,
                           uint32_t max_rounds, bool weak_hash) {
  if (g.rows == 0) {
    Compress(parent, g.classes);
    CpuRebuildStats stats;
    stats.rounds = 1;  // the one pass that found nothing
    stats.fixpoint = true;
    return stats;
  }
  Rebuilder rebuilder(g, parent, threads, weak_hash);
  return rebuilder.Run(max_rounds);
}

std::vector<std::pair<uint32_t, uint32_t>> CpuCongruencePairs(const HostColumns& g,
                                                               const uint32_t* canonical,
                                                               unsigned threads) {
  std::vector<Pair> result;
  if (g.rows == 0) return result;
  FormTable table(g, threads, /*weak=*/false);
  const unsigned shards = table.shards();
  RowList all;
  all.n = g.rows;
  table.Canonicalise(all, canonical);
  std::vector<std::vector<Pair>> out(shards);
  table.ForEachShard([&](unsigned s) {
    // Each group's minimum canonical class, then (minimum, class) for the others.
    std::vector<Pair>& mine = out[s];
    SmallMap small(0, SmallHash{false});
    table.ForShardSmall(s, [&](const SmallItem& item) {
      const uint32_t c = canonical[item.cls];
      auto [it, inserted] = small.try_emplace(item.form, c);
      if (!inserted && c < it->second) it->second = c;
    });
    table.ForShardSmall(s, [&](const SmallItem& item) {
      const uint32_t c = canonical[item.cls];
      const uint32_t m = small.find(item.form)->second;
      if (c != m) mine.emplace_back(m, c);
    });
    RowMinMap wide(0, RowHash{table.forms()}, RowEq{table.forms()});
    table.ForShardWide(s, [&](uint32_t r) {
      const uint32_t c = canonical[g.row_classes[r]];
      auto [it, inserted] = wide.try_emplace(r, c);
      if (!inserted && c < it->second) it->second = c;
    });
    table.ForShardWide(s, [&](uint32_t r) {
      const uint32_t c = canonical[g.row_classes[r]];
      const uint32_t m = wide.find(r)->second;
      if (c != m) mine.emplace_back(m, c);
    });
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  });
  for (const std::vector<Pair>& part : out) result.insert(result.end(), part.begin(), part.end());
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

}  // namespace vyre::egraph
