// E-graph congruence kernels (compiled to PTX and embedded in the library).
//
// Rows are grouped in an open-addressing table keyed by a hash of their
// canonical form (op, arity, canonical class of each child). A table slot
// holds a row index; a row looking for its group compares op, arity and
// every canonical child with the slot's row, so a hash collision only costs a
// probe. Entries are never removed within a rebuild: a row whose canonical
// form changed is inserted again under its new hash, and its old entry is
// still compared by the row's current form, so a stale entry can neither
// merge wrongly nor hide a group.
//
// Union-find: parent[x] <= x always; a root is linked under a smaller root
// with atomicCAS, so the representative of a class is its minimum id, links
// only ever point down, and concurrent finds terminate.
//
// A rebuild is a sequence of rounds, each four launches (clear, refresh,
// insert, compress) and a one-thread round end, enqueued in batches without
// host round trips: once a round merges nothing, `done` is set and every
// later kernel of the batch returns at once.
#include "egraph_args.h"

typedef unsigned int u32;
typedef unsigned long long u64;

namespace {

constexpr u32 kEmpty = 0xFFFFFFFFu;
// A slot whose row changed form: occupied for probing, never a group.
constexpr u32 kTombstone = 0xFFFFFFFEu;
constexpr u64 kEmptyPair = 0xFFFFFFFFFFFFFFFFull;

template <typename T>
__device__ __forceinline__ T* Ptr(u64 address) {
  return reinterpret_cast<T*>(address);
}

__device__ __forceinline__ VyreEgCounters* Counters(const VyreEgArgs& a) {
  return Ptr<VyreEgCounters>(a.counters);
}

__device__ __forceinline__ bool Done(const VyreEgArgs& a) {
  return *reinterpret_cast<volatile u32*>(&Counters(a)->done) != 0;
}

__device__ __forceinline__ u32 LoadVolatile(const u32* p) {
  return *reinterpret_cast<const volatile u32*>(p);
}

__device__ __forceinline__ u32 Find(u32* parent, u32 x) {
  u32 p = LoadVolatile(parent + x);
  while (p != x) {
    const u32 grand = LoadVolatile(parent + p);
    // Path halving: grand is an ancestor of x, so this keeps parent[x] an
    // ancestor (and never touches a root, which only atomicCAS changes).
    if (grand != p) parent[x] = grand;
    x = p;
    p = grand;
  }
  return x;
}

// The root of x without writing anything: what compress and refresh use, so
// that no path-halving write can land after compress has set parent[x] to
// its root (and leave a non-root there for the next round to read).
__device__ __forceinline__ u32 Root(const u32* parent, u32 x) {
  u32 p = LoadVolatile(parent + x);
  while (p != x) {
    x = p;
    p = LoadVolatile(parent + x);
  }
  return x;
}

// Links the larger root under the smaller; true when it merged two classes.
// `hooked` (may be null) gets the bit of the root that was linked.
__device__ bool Unite(u32* parent, u32 a, u32 b, u32* hooked) {
  for (;;) {
    a = Find(parent, a);
    b = Find(parent, b);
    if (a == b) return false;
    if (a < b) {
      const u32 t = a;
      a = b;
      b = t;
    }
    if (atomicCAS(parent + a, a, b) == a) {
      if (hooked != nullptr) atomicOr(hooked + (a >> 5), 1u << (a & 31u));
      return true;
    }
  }
}

// The bitset this round's links are recorded in, and the one of the round
// before (read by this round's refresh).
__device__ __forceinline__ u32* HookedThisRound(const VyreEgArgs& a, u32 rounds) {
  return Ptr<u32>(a.hooked) + (rounds & 1u) * a.hooked_words;
}
__device__ __forceinline__ const u32* HookedLastRound(const VyreEgArgs& a, u32 rounds) {
  return Ptr<const u32>(a.hooked) + ((rounds + 1u) & 1u) * a.hooked_words;
}

__device__ __forceinline__ u32 Rotl(u32 x, int r) { return (x << r) | (x >> (32 - r)); }

__device__ __forceinline__ u32 Mix(u32 h, u32 k) {
  k *= 0xcc9e2d51u;
  k = Rotl(k, 15);
  k *= 0x1b873593u;
  h ^= k;
  h = Rotl(h, 13);
  return h * 5u + 0xe6546b64u;
}

__device__ __forceinline__ u32 Finish(u32 h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// Hash of (op, arity, children) read from `kids`.
__device__ u32 HashRow(u32 op, u32 len, const u32* kids, bool weak) {
  u32 h = Mix(Mix(0x9747b28cu, op), len);
  if (!weak) {
    for (u32 i = 0; i < len; ++i) h = Mix(h, kids[i]);
  }
  return Finish(h);
}

// Same op, arity and canonical children.
__device__ __forceinline__ bool SameForm(const VyreEgArgs& a, u32 x, u32 y) {
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  if (ops[x] != ops[y]) return false;
  const u32 len = lens[x];
  if (lens[y] != len) return false;
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* canon = Ptr<const u32>(a.canon);
  const u32* cx = canon + offs[x];
  const u32* cy = canon + offs[y];
  for (u32 i = 0; i < len; ++i) {
    if (cx[i] != cy[i]) return false;
  }
  return true;
}

__device__ __forceinline__ u32 GlobalIndex() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u32 GridStride() { return gridDim.x * blockDim.x; }

// Adds a per-thread count to a global counter with one atomic per warp. Every
// lane of the warp must call it (after a loop all lanes leave together).
__device__ __forceinline__ void AddPerWarp(u32* counter, u32 value) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  if ((threadIdx.x & 31u) == 0 && value != 0) atomicAdd(counter, value);
}

constexpr u32 kBlockThreads = 256;
constexpr u32 kBlockWarps = kBlockThreads / 32;

}  // namespace

// parent[x] = x.
extern "C" __global__ void vyre_eg_init_parent(VyreEgArgs a) {
  u32* parent = Ptr<u32>(a.parent);
  for (u32 x = GlobalIndex(); x < a.classes; x += GridStride()) parent[x] = x;
}

// Merges every (unions[2i], unions[2i+1]).
extern "C" __global__ void vyre_eg_apply_unions(VyreEgArgs a) {
  const u32* unions = Ptr<const u32>(a.unions);
  u32* parent = Ptr<u32>(a.parent);
  for (u32 i = GlobalIndex(); i < a.union_count; i += GridStride()) {
    if (Unite(parent, unions[2 * i], unions[2 * i + 1], nullptr)) {
      atomicAdd(&Counters(a)->union_merges, 1ull);
    }
  }
}

// parent[x] = root of x, so later rounds read a class's root in one load.
// Two launches: the first halves paths as it goes (cheap on long chains),
// the second, read-only, makes every entry the root even where a halving
// write of the first landed after an entry's own.
extern "C" __global__ void vyre_eg_compress(VyreEgArgs a) {
  if (Done(a)) return;
  u32* parent = Ptr<u32>(a.parent);
  for (u32 x = GlobalIndex(); x < a.classes; x += GridStride()) {
    const u32 root = Find(parent, x);
    if (parent[x] != root) parent[x] = root;
  }
}

extern "C" __global__ void vyre_eg_settle(VyreEgArgs a) {
  if (Done(a)) return;
  u32* parent = Ptr<u32>(a.parent);
  for (u32 x = GlobalIndex(); x < a.classes; x += GridStride()) {
    const u32 p = parent[x];
    const u32 root = Root(parent, p);
    if (root != p) parent[x] = root;
  }
}

// The library's row signatures: a hash of each row as uploaded.
extern "C" __global__ void vyre_eg_signatures(VyreEgArgs a) {
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  u32* sig = Ptr<u32>(a.signatures);
  for (u32 r = GlobalIndex(); r < a.rows; r += GridStride()) {
    sig[r] = HashRow(ops[r], lens[r], kids + offs[r], false);
  }
}

// At the start of a full round: empties the table.
extern "C" __global__ void vyre_eg_clear_table(VyreEgArgs a) {
  if (Done(a) || Counters(a)->full == 0) return;
  u32* table = Ptr<u32>(a.table);
  const u32 slots = a.table_mask + 1u;
  for (u32 i = GlobalIndex(); i < slots; i += GridStride()) table[i] = kEmpty;
  if (GlobalIndex() == 0) Counters(a)->placed = 0;
}

// Canonical children and hashes. A full round recomputes every row; later
// rounds only rows with a child whose root was linked last round (a bit test
// in a set small enough to stay in L2), and queue them, one atomic per block
// and step (a single counter that every dirty row hit was the bottleneck).
// It also clears the bitset this round's links will be recorded in.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_refresh(VyreEgArgs a) {
  if (Done(a)) return;
  __shared__ u32 warp_base[kBlockWarps];
  __shared__ u32 block_base;
  const bool full = Counters(a)->full != 0;
  const u32 rounds = Counters(a)->rounds;
  u32* clear = HookedThisRound(a, rounds);
  for (u32 w = GlobalIndex(); w < a.hooked_words; w += GridStride()) clear[w] = 0;
  const u32* hooked = HookedLastRound(a, rounds);
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  const u32* parent = Ptr<const u32>(a.parent);
  u32* canon = Ptr<u32>(a.canon);
  u32* hash = Ptr<u32>(a.hash);
  u32* worklist = Ptr<u32>(a.worklist);
  const bool weak = a.weak_hash != 0;
  const u32 lane = threadIdx.x & 31u;
  const u32 warp = threadIdx.x >> 5;
  // Every thread of a block runs the same steps (the block barriers below).
  for (u32 base = blockIdx.x * kBlockThreads; base < a.rows; base += GridStride()) {
    const u32 r = base + threadIdx.x;
    bool dirty = false;
    if (r < a.rows) {
      const u32 off = offs[r];
      const u32 len = lens[r];
      u32* c = canon + off;
      if (full) {
        for (u32 i = 0; i < len; ++i) c[i] = Root(parent, kids[off + i]);
        dirty = true;
      } else {
        for (u32 i = 0; i < len; ++i) {
          const u32 old = c[i];
          if ((hooked[old >> 5] >> (old & 31u)) & 1u) {
            c[i] = Root(parent, old);
            dirty = true;
          }
        }
      }
      if (dirty) {
        hash[r] = HashRow(ops[r], len, c, weak);
        // The row's entry sits where its old form hashed. Rows that joined
        // its group there share its form and are changing with it, so the
        // entry can go: a row probing past it must not stop at a stale form
        // and miss an unchanged row of the same form further on.
        if (!full) {
          u32* slot_of = Ptr<u32>(a.slot_of);
          const u32 s = slot_of[r];
          if (s != kEmpty) atomicCAS(Ptr<u32>(a.table) + s, r, kTombstone);
        }
      }
    }
    if (full) continue;
    const u32 ballot = __ballot_sync(0xFFFFFFFFu, dirty);
    if (lane == 0) warp_base[warp] = __popc(ballot);
    __syncthreads();
    if (threadIdx.x == 0) {
      u32 total = 0;
      for (u32 w = 0; w < kBlockWarps; ++w) {
        const u32 n = warp_base[w];
        warp_base[w] = total;
        total += n;
      }
      block_base = total != 0 ? atomicAdd(&Counters(a)->worklist_count, total) : 0;
    }
    __syncthreads();
    if (dirty) worklist[block_base + warp_base[warp] + __popc(ballot & ((1u << lane) - 1u))] = r;
    __syncthreads();
  }
}

// Finds each visited row's group (a row of equal canonical form, through the
// table) and merges their classes, or places the row as a new group.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_insert(VyreEgArgs a) {
  if (Done(a)) return;
  VyreEgCounters* counters = Counters(a);
  const bool full = counters->full != 0;
  const u32 count = full ? a.rows : LoadVolatile(&counters->worklist_count);
  const u32* worklist = Ptr<const u32>(a.worklist);
  const u32* hash = Ptr<const u32>(a.hash);
  const u32* classes = Ptr<const u32>(a.row_classes);
  u32* table = Ptr<u32>(a.table);
  u32* parent = Ptr<u32>(a.parent);
  u32* hooked = HookedThisRound(a, counters->rounds);
  u32* slot_of = Ptr<u32>(a.slot_of);
  const u32 mask = a.table_mask;
  u32 placed = 0, merged = 0, lost = 0;
  for (u32 i = GlobalIndex(); i < count; i += GridStride()) {
    const u32 r = full ? i : worklist[i];
    const u32 h = hash[r];
    u32 slot = h & mask;
    bool settled = false;
    for (u32 probe = 0; probe <= mask; ++probe, slot = (slot + 1u) & mask) {
      u32 other = LoadVolatile(table + slot);
      if (other == kEmpty) {
        other = atomicCAS(table + slot, kEmpty, r);
        if (other == kEmpty) {
          ++placed;
          slot_of[r] = slot;
          settled = true;
          break;
        }
      }
      if (other == kTombstone || other == r) continue;
      if (hash[other] == h && SameForm(a, r, other)) {
        merged += Unite(parent, classes[r], classes[other], hooked) ? 1u : 0u;
        slot_of[r] = kEmpty;
        settled = true;
        break;
      }
    }
    lost += settled ? 0u : 1u;
  }
  AddPerWarp(&counters->placed, placed);
  AddPerWarp(&counters->merges_round, merged);
  AddPerWarp(&counters->overflow, lost);
}

// End of a round's merges: parent[x] = root of x again. Every entry was a
// root at the round's start, and the roots linked this round have their bit
// set, so only entries pointing at a linked root need walking (read-only, so
// the result is the root whatever other threads write meanwhile).
extern "C" __global__ void vyre_eg_relink(VyreEgArgs a) {
  if (Done(a)) return;
  u32* parent = Ptr<u32>(a.parent);
  const u32* hooked = HookedThisRound(a, Counters(a)->rounds);
  for (u32 x = GlobalIndex(); x < a.classes; x += GridStride()) {
    const u32 p = parent[x];
    if ((hooked[p >> 5] >> (p & 31u)) & 1u) parent[x] = Root(parent, p);
  }
}

// One thread: closes the round and decides the next.
extern "C" __global__ void vyre_eg_round_end(VyreEgArgs a) {
  // Launched as one block: every other thread must stay out, or warps that
  // run later read the counters this one already reset.
  if (GlobalIndex() != 0) return;
  VyreEgCounters* c = Counters(a);
  if (c->done) return;
  c->rounds += 1;
  c->rows_visited += c->full ? a.rows : c->worklist_count;
  if (c->merges_round == 0 && c->overflow == 0) {
    c->done = 1;
  } else {
    c->merges += c->merges_round;
  }
  // An overflowing probe (never expected at these loads) is answered by a
  // full round, which visits every row again.
  c->full = (c->placed > (a.table_mask + 1u) / 2u || c->overflow) ? 1u : 0u;
  c->merges_round = 0;
  c->worklist_count = 0;
  c->overflow = 0;
  if (c->max_rounds != 0 && c->rounds >= c->max_rounds) c->done = 1;
  __threadfence_system();
}

// Pass: each row finds (or founds) its group without merging; each group
// keeps its minimum canonical class at its leader row's index. Canonical
// forms come from a full refresh run just before.
extern "C" __global__ void vyre_eg_pass_group(VyreEgArgs a) {
  const u32* hash = Ptr<const u32>(a.hash);
  const u32* classes = Ptr<const u32>(a.row_classes);
  const u32* parent = Ptr<const u32>(a.parent);
  u32* table = Ptr<u32>(a.table);
  u32* rep = Ptr<u32>(a.rep_slot);
  u32* group_min = Ptr<u32>(a.group_min);
  const u32 mask = a.table_mask;
  for (u32 r = GlobalIndex(); r < a.rows; r += GridStride()) {
    const u32 h = hash[r];
    u32 slot = h & mask;
    u32 found = kEmpty;
    for (u32 probe = 0; probe <= mask; ++probe, slot = (slot + 1u) & mask) {
      u32 other = LoadVolatile(table + slot);
      if (other == kEmpty) {
        other = atomicCAS(table + slot, kEmpty, r);
        if (other == kEmpty) {
          found = slot;
          break;
        }
      }
      if (other == kTombstone) continue;
      if (hash[other] == h && SameForm(a, r, other)) {
        found = slot;
        break;
      }
    }
    if (found == kEmpty) {
      atomicExch(&Counters(a)->overflow, 1u);
      rep[r] = kEmpty;
      continue;
    }
    // The group is named by the row placed in its slot.
    const u32 leader = table[found];
    rep[r] = leader;
    atomicMin(group_min + leader, Root(parent, classes[r]));
  }
}

// Pass: every row whose class is not its group's minimum contributes the
// pair (minimum, class), once.
extern "C" __global__ void vyre_eg_pass_emit(VyreEgArgs a) {
  const u32* classes = Ptr<const u32>(a.row_classes);
  const u32* parent = Ptr<const u32>(a.parent);
  const u32* rep = Ptr<const u32>(a.rep_slot);
  const u32* group_min = Ptr<const u32>(a.group_min);
  u64* set = Ptr<u64>(a.pair_set);
  u32* out = Ptr<u32>(a.pairs_out);
  const u32 mask = a.pair_set_mask;
  for (u32 r = GlobalIndex(); r < a.rows; r += GridStride()) {
    if (rep[r] == kEmpty) continue;
    const u32 c = Root(parent, classes[r]);
    const u32 m = group_min[rep[r]];
    if (c == m) continue;
    const u64 key = (static_cast<u64>(m) << 32) | c;
    u32 slot = Finish(Mix(m, c)) & mask;
    bool settled = false;
    for (u32 probe = 0; probe <= mask && !settled; ++probe, slot = (slot + 1u) & mask) {
      const u64 seen = atomicCAS(set + slot, kEmptyPair, key);
      if (seen == key) settled = true;
      if (seen == kEmptyPair) {
        // Counted even past the output's capacity, so the host can grow it.
        const u64 index = atomicAdd(&Counters(a)->pair_count, 1ull);
        if (index < a.pair_capacity) {
          out[2 * index] = m;
          out[2 * index + 1] = c;
        }
        settled = true;
      }
    }
    if (!settled) atomicExch(&Counters(a)->overflow, 1u);
  }
}
