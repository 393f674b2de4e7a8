// E-graph congruence kernels (compiled to PTX and embedded in the library).
//
// Rows are grouped in an open-addressing table keyed by a hash of their
// canonical form (op, arity, canonical class of each child). A table slot
// holds the row's hash and index in one u64, so a probe past another form
// costs no second load; a row whose hash matches compares op, arity and every
// canonical child with the slot's row, so a hash collision only costs a
// probe. Each row's op, arity, child offset and class sit together in one
// 16-byte record (packed from the columns), so that comparison reads one
// record per row instead of four scattered columns: these kernels are bound
// by random loads, not by bytes. A row whose canonical form changed is
// inserted again under its new hash; its old entries are stale from then on
// (occupied for probing, never a group: otherwise two changed rows of one
// new form could each stop at the other's old entry and never reach the
// unchanged row of that form further on). Staleness is read, not written:
// an entry carries the table round it was placed in, and each row the table
// round its form last changed in (one byte), so a candidate entry placed
// before its row's last change is passed over. Marking old entries instead
// cost a read-modify-write at a random slot per changed row, and a slot
// index per row to find it: 1.5-2 ms of a 16 M-row rebuild on an H100.
//
// Union-find: parent[x] <= x always; a root is linked under a smaller root
// with atomicCAS, so the representative of a class is its minimum id, links
// only ever point down, and concurrent finds terminate.
//
// A rebuild is a sequence of rounds, each four launches (clear, refresh,
// insert, relink) and a one-thread round end, enqueued in batches without
// host round trips: once a round merges nothing, `done` is set and every
// later kernel of the batch returns at once. A full round visits every row;
// any other round only the rows of a worklist bitset: rows appended since
// the last rebuild, and rows that name a class whose canonical class
// changed. relink finds those classes (every class whose canonical class is
// a root linked this round) and their rows through the parent index (class
// -> rows that name it). The table, the row forms and the worklist outlive
// a rebuild, so the next one (after appends and unions) starts from them
// instead of a full round: it costs what changed (egg's rebuild worklist).
#include "egraph_args.h"

typedef unsigned int u32;
typedef unsigned long long u64;

namespace {

constexpr u32 kEmpty = 0xFFFFFFFFu;
constexpr u64 kEmptyPair = 0xFFFFFFFFFFFFFFFFull;
// Table entries: the hash's top 24 bits, the table round the entry was
// placed in (8 bits) and the row. Rows are below 2^30, so the empty entry is
// never a row's. The hash's low bits chose the slot, so little of it is lost.
constexpr u64 kEmptyEntry = 0xFFFFFFFFFFFFFFFFull;
// Table rounds run from 0 (a full round, which clears the table) to this;
// the round after it is a full round again, so the 8-bit round of an entry
// is never ambiguous.
constexpr u32 kLastTableRound = 0xFFu;

__device__ __forceinline__ u64 Entry(u32 hash, u32 table_round, u32 row) {
  return (static_cast<u64>(hash >> 8) << 40) | (static_cast<u64>(table_round) << 32) | row;
}
__device__ __forceinline__ u32 EntryRow(u64 e) { return static_cast<u32>(e); }
__device__ __forceinline__ u32 EntryRound(u64 e) { return static_cast<u32>(e >> 32) & 0xFFu; }
__device__ __forceinline__ bool EntryHashIs(u64 e, u32 hash) {
  return static_cast<u32>(e >> 40) == (hash >> 8);
}

// A row record: x = op, y = arity, z = first child's offset, w = class.
typedef uint4 RowRecord;

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

__device__ __forceinline__ u64 LoadVolatile(const u64* p) {
  return *reinterpret_cast<const volatile u64*>(p);
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
// before (two alternate by round; the unions before round 1 use the one
// round 1 reads as the round before's).
__device__ __forceinline__ u32* HookedThisRound(const VyreEgArgs& a, u32 rounds) {
  return Ptr<u32>(a.hooked) + ((rounds + a.union_phase) & 1u) * a.hooked_words;
}
__device__ __forceinline__ const u32* HookedLastRound(const VyreEgArgs& a, u32 rounds) {
  return Ptr<const u32>(a.hooked) + ((rounds + 1u) & 1u) * a.hooked_words;
}

// Up to rows / kIndexMarkShare linked roots in a round, relink marks the
// next round's rows through the parent index; more, and the next refresh
// scans every row (one bit test per child) instead.
constexpr u32 kIndexMarkShare = 16;
// Words of classes (32 each) a warp of relink reads a step, and rows a
// thread of a scanning refresh takes a step (see each).
constexpr u32 kRelinkWords = 4;
constexpr u32 kScanRows = 2;

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
__device__ __forceinline__ bool SameForm(const u32* canon, const RowRecord& x,
                                         const RowRecord& y) {
  if (x.x != y.x || x.y != y.y) return false;
  const u32* cx = canon + x.z;
  const u32* cy = canon + y.z;
  for (u32 i = 0; i < x.y; ++i) {
    if (cx[i] != cy[i]) return false;
  }
  return true;
}

// A row's canonical form for the bucketed pass, in one 16-byte load: x =
// op, w = the root of its class, and y, z its two canonical children, where
// kEmpty stands for a child it does not have (no class id is kEmpty). A row
// of more children has y = kEmpty and z = its arity (never kEmpty), which no
// row of two or fewer has: equal forms of such rows still need their
// children compared (SameForm).
__device__ __forceinline__ uint4 PackForm(u32 op, u32 len, const u32* kids, u32 class_root) {
  if (len > 2) return make_uint4(op, kEmpty, len, class_root);
  return make_uint4(op, len > 0 ? kids[0] : kEmpty, len > 1 ? kids[1] : kEmpty, class_root);
}

// The table the rows of one round are grouped in: its slots, the table
// round (see kLastTableRound) and the round each row's form last changed in.
struct GroupTable {
  u64* slots;
  u32 mask;
  u32 round;
  const unsigned char* changed_in;
};

// Where a row with hash `h` finds its group: the slot of a live entry of
// equal hash and form (*placed false), or the empty slot it claimed for
// `row` (*placed true); kEmpty when a probe ran the whole table. Stale
// entries (placed before their row's form last changed) and `row`'s own are
// passed over.
__device__ __forceinline__ u32 FindOrPlace(const GroupTable& t, const RowRecord* records,
                                           const u32* canon, u32 row, u32 h,
                                           const RowRecord& mine, bool* placed, u32* other_row) {
  u32 slot = h & t.mask;
  for (u32 probe = 0; probe <= t.mask; ++probe, slot = (slot + 1u) & t.mask) {
    u64 e = LoadVolatile(t.slots + slot);
    if (e == kEmptyEntry) {
      e = atomicCAS(t.slots + slot, kEmptyEntry, Entry(h, t.round, row));
      if (e == kEmptyEntry) {
        *placed = true;
        *other_row = row;
        return slot;
      }
    }
    const u32 other = EntryRow(e);
    if (other == row || !EntryHashIs(e, h)) continue;
    // Placed this round: live. Placed earlier: live unless its row changed
    // form after that (a row's entries never move, so a round read here is
    // the one it was placed in).
    const u32 placed_in = EntryRound(e);
    if (placed_in != t.round && placed_in < t.changed_in[other]) continue;
    if (SameForm(canon, mine, records[other])) {
      *placed = false;
      *other_row = other;
      return slot;
    }
  }
  return kEmpty;
}

__device__ __forceinline__ u32 GlobalIndex() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u32 GridStride() { return gridDim.x * blockDim.x; }

// A grid-stride loop in whole-warp steps: every lane of a warp runs the same
// steps and meets the others at the end of each (__syncwarp). Without that,
// lanes that leave a data-dependent loop (a probe, a find) early run ahead
// into later steps, and the loads and stores of consecutive items that
// would have been one request per warp become one per lane: Nsight Compute
// counted 4x the ideal sectors on pass_group's row-ordered accesses.
template <typename Body>
__device__ __forceinline__ void ForEachInWarpSteps(u32 count, Body&& body) {
  const u32 lane = threadIdx.x & 31u;
  for (u32 base = GlobalIndex() - lane; base < count; base += GridStride()) {
    if (base + lane < count) body(base + lane);
    __syncwarp();
  }
}

// Adds a per-thread count to a global counter with one atomic per warp. Every
// lane of the warp must call it (after a loop all lanes leave together).
__device__ __forceinline__ void AddPerWarp(u32* counter, u32 value) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  if ((threadIdx.x & 31u) == 0 && value != 0) atomicAdd(counter, value);
}

// The next place of a cursor (counter) for each lane of the warp that
// takes one, with one atomic per warp; every lane of the warp must call it.
__device__ __forceinline__ u32 WarpTake(u32* cursor, bool take) {
  const u32 lane = threadIdx.x & 31u;
  const u32 ballot = __ballot_sync(0xFFFFFFFFu, take);
  if (ballot == 0) return 0;
  u32 first = 0;
  if (lane == 0) first = atomicAdd(cursor, __popc(ballot));
  return __shfl_sync(0xFFFFFFFFu, first, 0) + __popc(ballot & ((1u << lane) - 1u));
}

constexpr u32 kBlockThreads = 256;

// Deals the set bits of `bits` (n bits) out to the lanes. Word i of the
// bitset goes to warp i mod (the grid's warps): a warp takes 32 words a step,
// one a lane, a grid apart, and hands their set bits out 32 a step, so every
// lane works and the 32 rows of one word go to consecutive lanes. Handing
// each warp 32 consecutive words instead left a dense run of bits (a batch
// of appended rows) to a few warps, 32 steps each of dependent loads: 380 us
// of a 16 M image's insert after appending 1% of its rows, against 15 us for
// as many scattered rows. Every lane of the warp calls body(index, valid) at
// each step (valid false for a lane left without a bit), so the body may use
// warp collectives. With `clear`, each non-zero word is zeroed once read (a
// worklist consumed by this kernel).
template <typename Body>
__device__ __forceinline__ void ForEachSetBit(const u32* bits, u32 n, Body&& body,
                                              u32* clear = nullptr) {
  const u32 lane = threadIdx.x & 31u;
  const u64 words = (u64{n} + 31u) / 32u;
  const u64 warps = GridStride() / 32u;
  for (u64 first = GlobalIndex() / 32u; first < words; first += warps * 32u) {
    const u64 mine = first + lane * warps;  // this lane's word
    const u32 word = mine < words ? bits[mine] : 0u;
    if (clear != nullptr && word != 0u) clear[mine] = 0u;
    u32 inclusive = __popc(word);  // set bits in this lane's word and the ones before
    for (int offset = 1; offset < 32; offset <<= 1) {
      const u32 before = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
      if (lane >= static_cast<u32>(offset)) inclusive += before;
    }
    const u32 total = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
    for (u32 step = 0; step < total; step += 32u) {
      const u32 j = step + lane;  // this lane's set bit, counted across the words
      // The lane whose word holds bit j: the first with inclusive > j.
      u32 lo = 0, hi = 31;
      for (int k = 0; k < 5; ++k) {
        const u32 mid = (lo + hi) >> 1;
        const u32 at = __shfl_sync(0xFFFFFFFFu, inclusive, mid);
        if (at <= j) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      u32 bits_of = __shfl_sync(0xFFFFFFFFu, word, lo);
      const u32 skip = j - (__shfl_sync(0xFFFFFFFFu, inclusive, lo) - __popc(bits_of));
      u32 index = 0;
      if (j < total) {
        for (u32 t = 0; t < skip; ++t) bits_of &= bits_of - 1u;
        index = static_cast<u32>((first + lo * warps) * 32u) + static_cast<u32>(__ffs(bits_of) - 1);
      }
      body(index, j < total);
    }
  }
}

// body(row) for every row whose bit is set in `bits` (see ForEachSetBit).
template <typename Body>
__device__ __forceinline__ void ForEachSetRow(u32* bits, u32 rows, bool clear, Body&& body) {
  ForEachSetBit(
      bits, rows,
      [&](u32 row, bool valid) {
        if (valid) body(row);
      },
      clear ? bits : nullptr);
}

}  // namespace

// --- Columns: validation, row records, signatures, new classes -----------

// Checks the rows [first_row, rows) and children [child_base, child_base +
// child_limit) just uploaded, as the host checks did (columns.cc): class
// ids below `classes`, each row's child range (relative to child_base)
// inside child_limit and after the previous row's. Records the first bad
// index of each check (relative to first_row and child_base); the host
// words the message from the caller's copy of that entry.
extern "C" __global__ void vyre_eg_validate(VyreEgArgs a) {
  const u32* classes = Ptr<const u32>(a.row_classes);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  VyreEgCounters* c = Counters(a);
  for (u32 r = a.first_row + GlobalIndex(); r < a.rows; r += GridStride()) {
    const u32 i = r - a.first_row;
    if (classes[r] >= a.classes) atomicMin(&c->bad_row_class, i);
    const u64 off = offs[r];
    bool bad = off + lens[r] > a.child_limit;
    if (r > a.first_row) bad = bad || off < u64{offs[r - 1]} + lens[r - 1];
    if (bad) atomicMin(&c->bad_range, i);
  }
  for (u32 k = GlobalIndex(); k < a.child_limit; k += GridStride()) {
    if (kids[a.child_base + k] >= a.classes) atomicMin(&c->bad_child, k);
  }
}

// Appended rows' offsets, from their append's children to the image's.
extern "C" __global__ void vyre_eg_rebase_offsets(VyreEgArgs a) {
  u32* offs = Ptr<u32>(a.child_offsets);
  for (u32 r = a.first_row + GlobalIndex(); r < a.rows; r += GridStride()) offs[r] += a.child_base;
}

// The row records of rows [first_row, rows), from the columns (after an
// upload, an append or a column write).
extern "C" __global__ void vyre_eg_pack_rows(VyreEgArgs a) {
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* classes = Ptr<const u32>(a.row_classes);
  RowRecord* records = Ptr<RowRecord>(a.records);
  for (u32 r = a.first_row + GlobalIndex(); r < a.rows; r += GridStride()) {
    records[r] = make_uint4(ops[r], lens[r], offs[r], classes[r]);
  }
}

// Classes [first_class, classes) alone: parent[x] = rep[x] = x.
extern "C" __global__ void vyre_eg_init_parent(VyreEgArgs a) {
  u32* parent = Ptr<u32>(a.parent);
  u32* rep = Ptr<u32>(a.rep);
  for (u32 x = a.first_class + GlobalIndex(); x < a.classes; x += GridStride()) {
    parent[x] = x;
    rep[x] = x;
  }
}

// Rows [first_row, rows) join the next round's worklist (appended rows).
extern "C" __global__ void vyre_eg_mark_rows(VyreEgArgs a) {
  u32* dirty = Ptr<u32>(a.dirty_rows);
  for (u32 r = a.first_row + GlobalIndex(); r < a.rows; r += GridStride()) {
    atomicOr(dirty + (r >> 5), 1u << (r & 31u));
  }
}

// The library's row signatures of rows [first_row, rows): a hash of each
// row as uploaded.
extern "C" __global__ void vyre_eg_signatures(VyreEgArgs a) {
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  u32* sig = Ptr<u32>(a.signatures);
  ForEachInWarpSteps(a.rows - a.first_row, [&](u32 i) {
    const u32 r = a.first_row + i;
    sig[r] = HashRow(ops[r], lens[r], kids + offs[r], false);
  });
}

// --- The parent index: a counting sort of (child class, row) -------------
//
// index_count counts each class's child references into index_offsets
// (zeroed first), the prefix sum makes the counts inclusive ends, and
// index_scatter places each row at its class's end minus one, which leaves
// every entry at its class's start: [offsets[c], offsets[c + 1]).

extern "C" __global__ void vyre_eg_index_count(VyreEgArgs a) {
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  u32* counts = Ptr<u32>(a.index_offsets);
  ForEachInWarpSteps(a.rows - a.first_row, [&](u32 i) {
    const u32 r = a.first_row + i;
    const u32 off = offs[r];
    for (u32 i = 0, n = lens[r]; i < n; ++i) atomicAdd(counts + kids[off + i], 1u);
  });
}

extern "C" __global__ void vyre_eg_index_scatter(VyreEgArgs a) {
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  u32* ends = Ptr<u32>(a.index_offsets);
  u32* rows_of = Ptr<u32>(a.index_rows);
  ForEachInWarpSteps(a.rows - a.first_row, [&](u32 i) {
    const u32 r = a.first_row + i;
    const u32 off = offs[r];
    for (u32 i = 0, n = lens[r]; i < n; ++i) rows_of[atomicSub(ends + kids[off + i], 1u) - 1u] = r;
  });
}

// An inclusive prefix sum of index_offsets[0, scan_count) in place, in
// tiles of kScanTile entries: the tiles' sums (scan_reduce), their
// exclusive prefix (scan_top, one block), then each tile's own sum plus
// its tile's prefix (scan_down). Grid: one block per tile (scan_blocks).
constexpr u32 kScanThreads = 256;
constexpr u32 kScanItems = 8;
constexpr u32 kScanTile = kScanThreads * kScanItems;

namespace {

// Inclusive sum over the block of one value per thread.
__device__ __forceinline__ u32 BlockInclusiveSum(u32 value, u32* shared_warps) {
  const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const u32 before = __shfl_up_sync(0xFFFFFFFFu, value, offset);
    if (lane >= static_cast<u32>(offset)) value += before;
  }
  if (lane == 31u) shared_warps[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const u32 warps = blockDim.x / 32u;
    u32 w = lane < warps ? shared_warps[lane] : 0u;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const u32 before = __shfl_up_sync(0xFFFFFFFFu, w, offset);
      if (lane >= static_cast<u32>(offset)) w += before;
    }
    if (lane < warps) shared_warps[lane] = w;
  }
  __syncthreads();
  const u32 result = value + (warp > 0 ? shared_warps[warp - 1] : 0u);
  __syncthreads();  // shared_warps is reused by the caller's next call
  return result;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kScanThreads) vyre_eg_scan_reduce(VyreEgArgs a) {
  __shared__ u32 warps[kScanThreads / 32];
  const u32* v = Ptr<const u32>(a.index_offsets);
  const u64 begin = u64{blockIdx.x} * kScanTile;
  u32 sum = 0;
  for (u32 i = threadIdx.x; i < kScanTile; i += kScanThreads) {
    if (begin + i < a.scan_count) sum += v[begin + i];
  }
  sum = BlockInclusiveSum(sum, warps);
  if (threadIdx.x == kScanThreads - 1) Ptr<u32>(a.scan_sums)[blockIdx.x] = sum;
}

extern "C" __global__ void __launch_bounds__(1024) vyre_eg_scan_top(VyreEgArgs a) {
  __shared__ u32 warps[32];
  u32* sums = Ptr<u32>(a.scan_sums);
  u32 carry = 0;
  for (u32 first = 0; first < a.scan_blocks; first += blockDim.x) {
    const u32 i = first + threadIdx.x;
    const u32 value = i < a.scan_blocks ? sums[i] : 0u;
    const u32 inclusive = BlockInclusiveSum(value, warps);
    if (i < a.scan_blocks) sums[i] = carry + inclusive - value;
    __shared__ u32 total;
    if (threadIdx.x == blockDim.x - 1) total = inclusive;
    __syncthreads();
    carry += total;
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(kScanThreads) vyre_eg_scan_down(VyreEgArgs a) {
  __shared__ u32 warps[kScanThreads / 32];
  u32* v = Ptr<u32>(a.index_offsets);
  const u64 begin = u64{blockIdx.x} * kScanTile + u64{threadIdx.x} * kScanItems;
  u32 items[kScanItems];
  u32 sum = 0;
  for (u32 k = 0; k < kScanItems; ++k) {
    items[k] = begin + k < a.scan_count ? v[begin + k] : 0u;
    sum += items[k];
    items[k] = sum;
  }
  const u32 before = BlockInclusiveSum(sum, warps) - sum + Ptr<const u32>(a.scan_sums)[blockIdx.x];
  for (u32 k = 0; k < kScanItems; ++k) {
    if (begin + k < a.scan_count) v[begin + k] = items[k] + before;
  }
}

// --- Union-find ------------------------------------------------------------

// Merges every (unions[2i], unions[2i+1]), recording the linked roots in
// this round's hooked set for relink.
extern "C" __global__ void vyre_eg_apply_unions(VyreEgArgs a) {
  const u32* unions = Ptr<const u32>(a.unions);
  u32* parent = Ptr<u32>(a.parent);
  VyreEgCounters* c = Counters(a);
  u32* hooked = HookedThisRound(a, c->rounds);
  u32 linked = 0;
  ForEachInWarpSteps(a.union_count, [&](u32 i) {
    if (Unite(parent, unions[2 * i], unions[2 * i + 1], hooked)) {
      atomicAdd(&c->union_merges, 1ull);
      ++linked;
    }
  });
  AddPerWarp(&c->linked, linked);
}

// parent[x] = root of x for every class, after many unions: chains the
// unions built are halved once here instead of walked by every member in
// relink. Two launches: the first halves paths as it goes (cheap on long
// chains), the second, read-only, makes every entry the root even where a
// halving write of the first landed after an entry's own.
extern "C" __global__ void vyre_eg_compress(VyreEgArgs a) {
  if (Done(a)) return;
  u32* parent = Ptr<u32>(a.parent);
  ForEachInWarpSteps(a.classes, [&](u32 x) {
    const u32 root = Find(parent, x);
    if (parent[x] != root) parent[x] = root;
  });
}

extern "C" __global__ void vyre_eg_settle(VyreEgArgs a) {
  if (Done(a)) return;
  u32* parent = Ptr<u32>(a.parent);
  ForEachInWarpSteps(a.classes, [&](u32 x) {
    const u32 p = parent[x];
    const u32 root = Root(parent, p);
    if (root != p) parent[x] = root;
  });
}

// --- Rounds ---------------------------------------------------------------

namespace {

// A round after many links: every row whose canonical children include a
// root linked last round (a bit test in a set small enough to stay in L2)
// takes its children's new classes and joins the worklist. Each warp owns
// whole words of the bitset, so it ORs its ballot in without atomics (bits
// already set are appended rows waiting for this round).
__device__ void RefreshByScan(const VyreEgArgs& a, u32 table_round) {
  const u32 rounds = Counters(a)->rounds;
  const u32* hooked = HookedLastRound(a, rounds);
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  const u32* rep = Ptr<const u32>(a.rep);
  u32* canon = Ptr<u32>(a.canon);
  u32* hash = Ptr<u32>(a.hash);
  u32* dirty_rows = Ptr<u32>(a.dirty_rows);
  unsigned char* changed_in = Ptr<unsigned char>(a.changed_in);
  const bool weak = a.weak_hash != 0;
  const u32 lane = threadIdx.x & 31u;
  auto is_hooked = [&](u32 x) { return ((hooked[x >> 5] >> (x & 31u)) & 1u) != 0u; };
  // Each thread takes kScanRows rows a step, and each stage's loads (the
  // ranges, the first two children's classes, their bits) are issued for
  // all of them before the next stage: one row at a time left every lane
  // waiting on three dependent loads (Nsight Compute: about 1 TB/s for a
  // scan that reads 20 bytes a row). Two rows keep refresh at 32 registers
  // (full occupancy); four cost 40, and the full round's refresh slowed.
  const u64 step = u64{GridStride()} * kScanRows;
  for (u64 base = u64{blockIdx.x} * kBlockThreads * kScanRows; base < a.rows; base += step) {
    u32 off[kScanRows], len[kScanRows], first[kScanRows], second[kScanRows];
    bool listed[kScanRows];
#pragma unroll
    for (u32 k = 0; k < kScanRows; ++k) {
      const u64 r = base + k * kBlockThreads + threadIdx.x;
      const bool in = r < a.rows;
      off[k] = in ? offs[r] : 0u;
      len[k] = in ? lens[r] : 0u;
      listed[k] = in && ((dirty_rows[r >> 5] >> (r & 31u)) & 1u) != 0u;
    }
    // canon holds each child's class as of its row's last refresh, a root
    // then; a row not yet listed changes when one of them was linked.
#pragma unroll
    for (u32 k = 0; k < kScanRows; ++k) {
      const bool look = !listed[k];
      first[k] = look && len[k] > 0 ? canon[off[k]] : kEmpty;
      second[k] = look && len[k] > 1 ? canon[off[k] + 1] : kEmpty;
    }
    bool touched[kScanRows];
#pragma unroll
    for (u32 k = 0; k < kScanRows; ++k) {
      touched[k] = listed[k] || len[k] > 2 || (first[k] != kEmpty && is_hooked(first[k])) ||
                   (second[k] != kEmpty && is_hooked(second[k]));
    }
#pragma unroll
    for (u32 k = 0; k < kScanRows; ++k) {
      const u64 r = base + k * kBlockThreads + threadIdx.x;
      bool dirty = false;
      if (touched[k]) {
        u32* c = canon + off[k];
        if (listed[k]) {
          // On the worklist already (appended, never refreshed: its canon
          // holds nothing yet).
          for (u32 i = 0; i < len[k]; ++i) c[i] = rep[kids[off[k] + i]];
          dirty = true;
        } else {
          // A linked child's new root is rep's (relink moved it).
          for (u32 i = 0; i < len[k]; ++i) {
            const u32 old = c[i];
            if (is_hooked(old)) {
              c[i] = rep[old];
              dirty = true;
            }
          }
        }
        if (dirty) {
          hash[r] = HashRow(ops[r], len[k], c, weak);
          changed_in[r] = static_cast<unsigned char>(table_round);
        }
      }
      // Each warp owns whole words of the bitset (its 32 rows of this k),
      // so it ORs its ballot in without atomics (bits already set are
      // appended rows waiting for this round).
      const u32 ballot = __ballot_sync(0xFFFFFFFFu, dirty);
      if (lane == 0 && r < a.rows && ballot != 0u) dirty_rows[r >> 5] |= ballot;
    }
  }
}

}  // namespace

// Canonical children and hashes of the rows this round visits: every row in
// a full round (which also empties the worklist bitset: it visits them all),
// else the worklist's rows (appended rows, and rows a child of which relink
// found merged). Children's canonical classes are one load each (rep is flat
// at every round's start). Also clears this round's hooked set.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_refresh(VyreEgArgs a) {
  if (Done(a)) return;
  const VyreEgCounters* counters = Counters(a);
  const bool full = counters->full != 0;
  const u32 rounds = counters->rounds;
  u32* clear = HookedThisRound(a, rounds);
  for (u32 w = GlobalIndex(); w < a.hooked_words; w += GridStride()) clear[w] = 0;
  const u32* ops = Ptr<const u32>(a.row_ops);
  const u32* offs = Ptr<const u32>(a.child_offsets);
  const u32* lens = Ptr<const u32>(a.child_lengths);
  const u32* kids = Ptr<const u32>(a.children);
  const u32* rep = Ptr<const u32>(a.rep);
  u32* canon = Ptr<u32>(a.canon);
  u32* hash = Ptr<u32>(a.hash);
  u32* dirty_rows = Ptr<u32>(a.dirty_rows);
  unsigned char* changed_in = Ptr<unsigned char>(a.changed_in);
  const u32 table_round = counters->table_round;
  const bool weak = a.weak_hash != 0;
  // A full refresh's one random load per child is the canonical classes':
  // the first round skips it when the host knows every class is its own
  // root (a fresh image: the common pass).
  const bool identity = rounds == 0 && a.parent_state == VYRE_EG_PARENT_IDENTITY;
  auto root_of = [&](u32 x) { return identity ? x : rep[x]; };
  if (!full && counters->scan_rows == 0) {
    ForEachSetRow(dirty_rows, a.rows, /*clear=*/false, [&](u32 r) {
      const u32 off = offs[r];
      const u32 len = lens[r];
      u32* c = canon + off;
      for (u32 i = 0; i < len; ++i) c[i] = rep[kids[off + i]];
      hash[r] = HashRow(ops[r], len, c, weak);
      // The row's entries from before this round are stale from now on.
      changed_in[r] = static_cast<unsigned char>(table_round);
    });
    return;
  }
  if (!full) {
    RefreshByScan(a, table_round);
    return;
  }
  // A full round starts a new table: emptied here, 16 bytes (two entries)
  // a store, before insert fills it (the next launch). A kernel of its own
  // cost a launch in every round, full or not, and stored at half the rate.
  if (a.clears_table != 0) {
    ulonglong2* table = Ptr<ulonglong2>(a.table);
    const u64 pairs = (u64{a.table_mask} + 1u) / 2u;
    for (u64 i = GlobalIndex(); i < pairs; i += GridStride()) {
      table[i] = make_ulonglong2(kEmptyEntry, kEmptyEntry);
    }
    if (GlobalIndex() == 0) Counters(a)->placed = 0;
  }
  // Whole warps step together (base is warp-uniform): a warp's 32 rows are
  // one word of the worklist bitset, which lane 0 empties.
  for (u32 base = blockIdx.x * kBlockThreads; base < a.rows; base += GridStride()) {
    const u32 r = base + threadIdx.x;
    if (r < a.rows) {
      if ((threadIdx.x & 31u) == 0) dirty_rows[r >> 5] = 0u;
      const u32 off = offs[r];
      const u32 len = lens[r];
      u32 pair[2] = {kEmpty, kEmpty};
      // The bucketed pass's refresh (forms set) keeps the children of a row
      // of two or fewer in registers: its forms carry them, and neither
      // canon nor changed_in is read before the next full refresh.
      const bool form_only = a.forms != 0 && len <= 2;
      u32* c = form_only ? pair : canon + off;
      for (u32 i = 0; i < len; ++i) c[i] = root_of(kids[off + i]);
      hash[r] = HashRow(ops[r], len, c, weak);
      if (a.forms != 0) {
        Ptr<uint4>(a.forms)[r] =
            PackForm(ops[r], len, c, root_of(Ptr<const u32>(a.row_classes)[r]));
      }
      // A full round starts a new table (round 0).
      if (!form_only) changed_in[r] = static_cast<unsigned char>(table_round);
    }
    __syncwarp();  // see ForEachInWarpSteps
  }
}

// Finds each visited row's group (a row of equal canonical form, through the
// table) and merges their classes, or places the row as a new group. A full
// round visits every row; later rounds the worklist's rows, which it empties.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_insert(VyreEgArgs a) {
  if (Done(a)) return;
  VyreEgCounters* counters = Counters(a);
  const bool full = counters->full != 0;
  const u32* hash = Ptr<const u32>(a.hash);
  const RowRecord* records = Ptr<const RowRecord>(a.records);
  const u32* canon = Ptr<const u32>(a.canon);
  u32* parent = Ptr<u32>(a.parent);
  u32* hooked = HookedThisRound(a, counters->rounds);
  const GroupTable t{Ptr<u64>(a.table), a.table_mask, counters->table_round,
                     Ptr<const unsigned char>(a.changed_in)};
  u32 placed = 0, merged = 0, lost = 0, visits = 0;
  auto visit = [&](u32 r) {
    ++visits;
    const RowRecord mine = records[r];
    bool was_placed = false;
    u32 other = kEmpty;
    const u32 slot = FindOrPlace(t, records, canon, r, hash[r], mine, &was_placed, &other);
    if (slot == kEmpty) {
      ++lost;
    } else if (was_placed) {
      ++placed;
    } else {
      merged += Unite(parent, mine.w, records[other].w, hooked) ? 1u : 0u;
    }
  };
  if (full) {
    ForEachInWarpSteps(a.rows, visit);
  } else {
    ForEachSetRow(Ptr<u32>(a.dirty_rows), a.rows, /*clear=*/true, visit);
  }
  AddPerWarp(&counters->placed, placed);
  AddPerWarp(&counters->merges_round, merged);
  AddPerWarp(&counters->linked, merged);
  AddPerWarp(&counters->overflow, lost);
  AddPerWarp(&counters->visits_round, visits);
}

namespace {

// Marks the rows of index range [begin, end) on the worklist, the whole
// warp striding over it (every lane must call it with the same range).
__device__ __forceinline__ void MarkRangeByWarp(const u32* rows_of, u32 begin, u32 end,
                                                u32* dirty) {
  for (u32 k = begin + (threadIdx.x & 31u); k < end; k += 32u) {
    const u32 row = rows_of[k];
    atomicOr(dirty + (row >> 5), 1u << (row & 31u));
  }
}

}  // namespace

// End of a round's merges (or of the unions): every class whose canonical
// class (rep) is a root linked this round gets its new root, in rep and in
// parent, and joins the changed classes and the round's members (whose
// parent rows mark_parents puts on the next round's worklist). Roots are
// read, never written, so the result is the root whatever other threads
// write meanwhile. A class that is no member of a linked root keeps parent
// == rep: path halving only writes entries whose parent is no longer a root.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_relink(VyreEgArgs a) {
  if (Done(a)) return;
  VyreEgCounters* counters = Counters(a);
  const u32 linked = counters->linked;
  const bool scan = linked > a.rows / kIndexMarkShare;
  if (GlobalIndex() == 0) counters->scan_rows = scan ? 1u : 0u;  // read by the next refresh
  if (linked == 0) return;  // mark_parents returns too
  u32* parent = Ptr<u32>(a.parent);
  u32* rep = Ptr<u32>(a.rep);
  const u32* hooked = HookedThisRound(a, counters->rounds);
  u32* changed_bits = Ptr<u32>(a.changed_bits);
  u32* member_bits = Ptr<u32>(a.member_bits);
  const u32 lane = threadIdx.x & 31u;
  u32 fresh = 0;  // classes this warp lists as changed for the first time this rebuild
  // A warp takes kRelinkWords words of classes a step, their rep loads and
  // then their bit tests issued together: one class a lane at a time left
  // each lane waiting on a DRAM load and then an L2 load (Nsight Compute:
  // 100-140 us a round at 17 M classes, for 68 MB of rep).
  const u64 step = u64{GridStride()} * kRelinkWords;
  for (u64 base = u64{GlobalIndex() - lane} * kRelinkWords; base < a.classes; base += step) {
    u32 p[kRelinkWords];
#pragma unroll
    for (u32 k = 0; k < kRelinkWords; ++k) {
      const u64 x = base + k * 32u + lane;
      p[k] = x < a.classes ? rep[x] : kEmpty;
    }
    bool member[kRelinkWords];
#pragma unroll
    for (u32 k = 0; k < kRelinkWords; ++k) {
      member[k] = p[k] != kEmpty && ((hooked[p[k] >> 5] >> (p[k] & 31u)) & 1u) != 0u;
    }
#pragma unroll
    for (u32 k = 0; k < kRelinkWords; ++k) {
      const u64 x = base + k * 32u + lane;
      if (member[k]) {
        const u32 root = Root(parent, p[k]);
        parent[x] = root;
        rep[x] = root;
      }
      // The warp's 32 classes are one word of each bitset (base is a
      // multiple of 32): lane 0 writes them whole. mark_parents empties the
      // member words it reads, so only words with members are written here.
      const u32 members = __ballot_sync(0xFFFFFFFFu, member[k]);
      const u64 word = (base >> 5) + k;
      if (lane == 0 && members != 0u) {
        if (!scan) member_bits[word] = members;
        const u32 before = changed_bits[word];
        changed_bits[word] = before | members;
        fresh += __popc(members & ~before);
      }
    }
  }
  AddPerWarp(&counters->changed_count, fresh);
}

// The rows that name a class relink moved this round (the parent index,
// and its delta of appended rows) join the next round's worklist. The
// member bitset's classes are dealt to the lanes as ForEachSetRow does; a
// class named by more than 32 rows is taken by the whole warp, so one
// popular class does not hold a lane for long.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_mark_parents(VyreEgArgs a) {
  if (Done(a)) return;
  const VyreEgCounters* counters = Counters(a);
  if (counters->scan_rows != 0 || counters->linked == 0) return;
  u32* member_bits = Ptr<u32>(a.member_bits);
  const u32* starts = Ptr<const u32>(a.index_offsets);
  const u32* rows_of = Ptr<const u32>(a.index_rows);
  const u32* delta_starts = Ptr<const u32>(a.delta_offsets);
  const u32* delta_rows = Ptr<const u32>(a.delta_rows);
  u32* dirty = Ptr<u32>(a.dirty_rows);
  ForEachSetBit(member_bits, a.classes, [&](u32 m, bool valid) {
    u32 b0 = 0, e0 = 0, b1 = 0, e1 = 0;
    if (valid) {
      if (m < a.index_classes) {
        b0 = starts[m];
        e0 = starts[m + 1];
      }
      if (delta_starts != nullptr) {
        b1 = delta_starts[m];
        e1 = delta_starts[m + 1];
      }
    }
    const bool wide = (e0 - b0) + (e1 - b1) > 32u;
    if (!wide) {
      for (u32 k = b0; k < e0; ++k) {
        const u32 row = rows_of[k];
        atomicOr(dirty + (row >> 5), 1u << (row & 31u));
      }
      for (u32 k = b1; k < e1; ++k) {
        const u32 row = delta_rows[k];
        atomicOr(dirty + (row >> 5), 1u << (row & 31u));
      }
    }
    for (u32 wides = __ballot_sync(0xFFFFFFFFu, wide); wides != 0u; wides &= wides - 1u) {
      const int src = __ffs(wides) - 1;
      MarkRangeByWarp(rows_of, __shfl_sync(0xFFFFFFFFu, b0, src), __shfl_sync(0xFFFFFFFFu, e0, src),
                      dirty);
      MarkRangeByWarp(delta_rows, __shfl_sync(0xFFFFFFFFu, b1, src),
                      __shfl_sync(0xFFFFFFFFu, e1, src), dirty);
    }
  }, /*clear=*/member_bits);
}

// One thread: closes the round and decides the next.
extern "C" __global__ void vyre_eg_round_end(VyreEgArgs a) {
  // Launched as one block: every other thread must stay out, or warps that
  // run later read the counters this one already reset.
  if (GlobalIndex() != 0) return;
  VyreEgCounters* c = Counters(a);
  if (c->done) {
    c->again = 0u;
    return;
  }
  c->rounds += 1;
  c->rows_visited += c->visits_round;
  c->full_rounds += c->full;
  if (c->merges_round == 0 && c->overflow == 0) {
    c->done = 1;
  } else {
    c->merges += c->merges_round;
  }
  // An overflowing probe (never expected at these loads) is answered by a
  // full round, which visits every row again.
  c->full = (c->placed > (a.table_mask + 1u) / 2u || c->overflow ||
             c->table_round == kLastTableRound)
                ? 1u
                : 0u;
  c->table_round = c->full ? 0u : c->table_round + 1u;
  c->merges_round = 0;
  c->visits_round = 0;
  c->linked = 0;
  c->overflow = 0;
  if (c->max_rounds != 0 && c->rounds >= c->max_rounds) c->done = 1;
  c->again = c->done ? 0u : 1u;
  __threadfence_system();
}

// The changed classes, in class order, as (class, canonical class) pairs
// into pairs_out: changed_words counts each word's bits into
// index_offsets[w] (scan_count words), the prefix sum makes them ends, and
// changed_emit writes each word's pairs from its start.
extern "C" __global__ void vyre_eg_changed_words(VyreEgArgs a) {
  const u32* bits = Ptr<const u32>(a.changed_bits);
  u32* counts = Ptr<u32>(a.index_offsets);
  for (u32 w = GlobalIndex(); w < a.scan_count; w += GridStride()) counts[w] = __popc(bits[w]);
}

extern "C" __global__ void vyre_eg_changed_emit(VyreEgArgs a) {
  const u32* bits = Ptr<const u32>(a.changed_bits);
  const u32* ends = Ptr<const u32>(a.index_offsets);
  const u32* rep = Ptr<const u32>(a.rep);
  uint2* out = Ptr<uint2>(a.pairs_out);
  for (u32 w = GlobalIndex(); w < a.scan_count; w += GridStride()) {
    u32 word = bits[w];
    u32 at = ends[w] - __popc(word);
    while (word != 0u) {
      const u32 x = w * 32u + static_cast<u32>(__ffs(word) - 1);
      word &= word - 1u;
      out[at++] = make_uint2(x, rep[x]);
    }
  }
}

// Pass: each row finds (or founds) its group without merging; each group
// keeps its minimum canonical class at its leader row's index. Canonical
// forms come from a full refresh run just before.
extern "C" __global__ void vyre_eg_pass_group(VyreEgArgs a) {
  const u32* hash = Ptr<const u32>(a.hash);
  const RowRecord* records = Ptr<const RowRecord>(a.records);
  const u32* canon = Ptr<const u32>(a.canon);
  const u32* parent = Ptr<const u32>(a.parent);
  const GroupTable t{Ptr<u64>(a.table), a.table_mask, Counters(a)->table_round,
                     Ptr<const unsigned char>(a.changed_in)};
  u32* rep = Ptr<u32>(a.rep_slot);
  u32* group_min = Ptr<u32>(a.group_min);
  ForEachInWarpSteps(a.rows, [&](u32 r) {
    const RowRecord mine = records[r];
    bool was_placed = false;
    // The group is named by the row placed in its slot.
    u32 leader = kEmpty;
    const u32 slot = FindOrPlace(t, records, canon, r, hash[r], mine, &was_placed, &leader);
    if (slot == kEmpty) {
      atomicExch(&Counters(a)->overflow, 1u);
      rep[r] = kEmpty;
      return;
    }
    rep[r] = leader;
    // Large groups (a leaf that occurs 10^5 times) would serialise on one
    // address: only a smaller class than the one seen takes the atomic.
    const u32 c = Root(parent, mine.w);
    if (c < LoadVolatile(group_min + leader)) atomicMin(group_min + leader, c);
  });
}

// Adds (m, c) to the pass's pair set (its first `slots` slots, any number);
// true when it was not there yet.
__device__ __forceinline__ bool InsertPair(const VyreEgArgs& a, u32 slots, u32 m, u32 c) {
  u64* set = Ptr<u64>(a.pair_set);
  const u64 key = (static_cast<u64>(m) << 32) | c;
  u32 slot = __umulhi(Finish(Mix(m, c)), slots);
  for (u32 probe = 0; probe < slots; ++probe, slot = slot + 1u == slots ? 0u : slot + 1u) {
    const u64 seen = atomicCAS(set + slot, kEmptyPair, key);
    if (seen == key) return false;
    if (seen == kEmptyPair) return true;
  }
  atomicExch(&Counters(a)->overflow, 1u);
  return false;
}

// One step of a block's pair output: every thread of the block calls it
// (block-uniform loops only), and the new pairs of the step take one
// atomicAdd on the pair counter. With one per warp, the atomics on that one
// address queued behind each other and set the pace (1.6 ms for 16 M rows on
// an H100). A step without new pairs costs one barrier.
__device__ __forceinline__ void AppendPairs(const VyreEgArgs& a, bool is_new, u32 m, u32 c) {
  if (!__syncthreads_or(is_new)) return;
  __shared__ u32 warp_offset[32];
  __shared__ u64 block_first;
  const u32 lane = threadIdx.x & 31u;
  const u32 warp = threadIdx.x >> 5;
  const u32 warps = (blockDim.x + 31u) >> 5;
  const u32 ballot = __ballot_sync(0xFFFFFFFFu, is_new);
  if (lane == 0) warp_offset[warp] = __popc(ballot);
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 total = 0;
    for (u32 w = 0; w < warps; ++w) {
      const u32 n = warp_offset[w];
      warp_offset[w] = total;
      total += n;
    }
    block_first = total != 0 ? atomicAdd(&Counters(a)->pair_count, u64{total}) : 0;
  }
  __syncthreads();
  if (is_new) {
    // Counted even past the output's capacity, so the host can grow it.
    const u64 index = block_first + warp_offset[warp] + __popc(ballot & ((1u << lane) - 1u));
    if (index < a.pair_capacity) {
      u32* out = Ptr<u32>(a.pairs_out);
      out[2 * index] = m;
      out[2 * index + 1] = c;
    }
  }
  // warp_offset and block_first are rewritten by the next step.
  __syncthreads();
}

// Pass: every row whose class is not its group's minimum contributes the
// pair (minimum, class), once.
extern "C" __global__ void __launch_bounds__(kBlockThreads) vyre_eg_pass_emit(VyreEgArgs a) {
  const u32* classes = Ptr<const u32>(a.row_classes);
  const u32* parent = Ptr<const u32>(a.parent);
  const u32* rep = Ptr<const u32>(a.rep_slot);
  const u32* group_min = Ptr<const u32>(a.group_min);
  // Whole blocks step together (base is block-uniform), for the barriers.
  for (u32 base = blockIdx.x * kBlockThreads; base < a.rows; base += GridStride()) {
    const u32 r = base + threadIdx.x;
    bool is_new = false;
    u32 c = 0, m = 0;
    if (r < a.rows && rep[r] != kEmpty) {
      c = Root(parent, classes[r]);
      m = group_min[rep[r]];
      if (c != m) is_new = InsertPair(a, a.pair_set_mask + 1u, m, c);
    }
    AppendPairs(a, is_new, m, c);
  }
}

// --- The bucketed pass ---------------------------------------------------
//
// The pass above sends every row to a random slot of a table four times the
// rows' size: one DRAM read and write-back per row (Nsight Compute: 163
// bytes of DRAM traffic per row, 1.7 ms for 16 M rows on an H100). Here the
// rows are first partitioned by the top bits of their hash into buckets of
// a few thousand rows (a counting sort in two levels, below), and then one
// block groups a bucket's rows in a table in shared memory. All rows of one
// form have one hash, so they meet in one bucket, and a group never spans
// blocks. A hash match is confirmed on the rows' packed forms (PackForm,
// written by the pass's refresh in row order): two 16-byte loads where
// comparing records, children and class roots took six scattered ones. The
// pairs come from a second kernel, once the groups are whole.
//
// A probe longer than kBucketProbeLimit sets `overflow`, and the host runs
// the pass above instead. At most half full, a bucket's table never sees
// such a probe unless many distinct forms share one hash (the colliding
// hash of the tests); then one block would otherwise walk a chain of
// thousands of entries for every row.

// --- The partition: one level of a counting sort by hash bits --------------
//
// A level splits each segment of its input (one segment of every row for the
// first level; each first-level bin for the second) into part_bins bins, a
// segment's part_blocks blocks each counting its share, then scattering it.
// Two levels of 64-128 bins instead of one of thousands: a block's run of a
// bin gets a new entry every few thousand rows, and its partly written L2
// line waits for the rest. With thousands of bins per block the open lines
// outgrew L2 and went to DRAM half written, to be read back and merged
// (0.95 ms and 3x the list's bytes for 16 M rows in one launch; 0.55 ms in
// five sweeps over bucket ranges, each reading every hash again).

constexpr u32 kMaxPartBins = 256;
// The count and scatter kernels' blocks (egraph_image.cc's kCountThreads),
// two to an SM: the scatter's tile loads overlap the other block's sorting.
constexpr u32 kPartScatterThreads = 1024;
constexpr u32 kPartPerThread = 4;
constexpr u32 kPartTile = kPartPerThread * kPartScatterThreads;
// The prefix kernel's block (egraph_image.cc's kPartPrefixThreads).
constexpr u32 kPartThreads = 256;

// This block's segment and its share [first, end) of that segment.
__device__ __forceinline__ void PartShare(const VyreEgArgs& a, u32* segment, u32* first,
                                          u32* end) {
  *segment = blockIdx.x / a.part_blocks;
  const u32 k = blockIdx.x % a.part_blocks;
  const u32* seg = Ptr<const u32>(a.seg_starts);
  const u32 seg_first = a.seg_starts != 0 ? seg[*segment] : 0u;
  const u32 seg_end = a.seg_starts != 0 ? seg[*segment + 1] : a.rows;
  const u32 share = (seg_end - seg_first + a.part_blocks - 1u) / a.part_blocks;
  *first = min(seg_end, seg_first + k * share);
  *end = min(seg_end, *first + share);
}

// Entry i of the level's input: (hash, row).
__device__ __forceinline__ u64 PartEntry(const VyreEgArgs& a, u32 i) {
  if (a.part_in != 0) return Ptr<const u64>(a.part_in)[i];
  return (static_cast<u64>(Ptr<const u32>(a.hash)[i]) << 32) | i;
}

__device__ __forceinline__ u32 PartBin(const VyreEgArgs& a, u64 entry) {
  if (a.part_bins == 1) return 0;
  return (static_cast<u32>(entry >> 32) >> a.part_shift) & (a.part_bins - 1u);
}

// Per block: how many entries of its share fall in each bin.
extern "C" __global__ void __launch_bounds__(kPartScatterThreads, 2) vyre_eg_part_count(VyreEgArgs a) {
  __shared__ u32 bin_rows[kMaxPartBins];
  for (u32 b = threadIdx.x; b < a.part_bins; b += blockDim.x) bin_rows[b] = 0;
  __syncthreads();
  u32 segment = 0, first = 0, end = 0;
  PartShare(a, &segment, &first, &end);
  // kCountLoads loads in flight per thread before their atomics: with one,
  // a block per SM kept too few bytes in flight to stream the input (61-68
  // us a level for 16 M rows on an H100, 3x its bytes' time).
  constexpr u32 kCountLoads = 8;
  u32 i = first + threadIdx.x;
  for (; i + (kCountLoads - 1u) * blockDim.x < end; i += kCountLoads * blockDim.x) {
    u32 bins[kCountLoads];
#pragma unroll
    for (u32 k = 0; k < kCountLoads; ++k) bins[k] = PartBin(a, PartEntry(a, i + k * blockDim.x));
#pragma unroll
    for (u32 k = 0; k < kCountLoads; ++k) atomicAdd(&bin_rows[bins[k]], 1u);
  }
  for (; i < end; i += blockDim.x) atomicAdd(&bin_rows[PartBin(a, PartEntry(a, i))], 1u);
  __syncthreads();
  u32* counts = Ptr<u32>(a.part_counts) + static_cast<u64>(blockIdx.x) * a.part_bins;
  for (u32 b = threadIdx.x; b < a.part_bins; b += blockDim.x) counts[b] = bin_rows[b];
}

// One block per segment: each (segment, bin)'s first place (part_starts),
// and each block's count becomes its first place in that bin's run. The
// block's threads are groups of part_bins, which split the segment's blocks
// among them, so the counts are read part_blocks / groups deep, not
// part_blocks.
extern "C" __global__ void vyre_eg_part_prefix(VyreEgArgs a) {
  __shared__ u32 share[kPartThreads];
  __shared__ u32 bin_first[kMaxPartBins];
  const u32 bins = a.part_bins;
  const u32 groups = kPartThreads / bins;
  const u32 bin = threadIdx.x % bins;
  const u32 group = threadIdx.x / bins;
  const u32 segment = blockIdx.x;
  const u32 per = (a.part_blocks + groups - 1u) / groups;
  const u32 k_first = group < groups ? min(a.part_blocks, group * per) : a.part_blocks;
  const u32 k_end = min(a.part_blocks, k_first + per);
  u32* counts = Ptr<u32>(a.part_counts);
  auto at = [&](u32 k) { return (static_cast<u64>(segment) * a.part_blocks + k) * bins + bin; };
  u32 sum = 0;
  for (u32 k = k_first; k < k_end; ++k) sum += counts[at(k)];
  share[threadIdx.x] = group < groups ? sum : 0u;
  __syncthreads();
  if (threadIdx.x < bins) {
    u32 total = 0;
    for (u32 g = 0; g < groups; ++g) total += share[g * bins + threadIdx.x];
    bin_first[threadIdx.x] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // Exclusive scan over the bins (at most kMaxPartBins).
    const u32* seg = Ptr<const u32>(a.seg_starts);
    u32 running = a.seg_starts != 0 ? seg[segment] : 0u;
    for (u32 b = 0; b < bins; ++b) {
      const u32 n = bin_first[b];
      bin_first[b] = running;
      running += n;
    }
    u32* starts = Ptr<u32>(a.part_starts);
    if (segment + 1u == a.part_segments) starts[a.part_segments * bins] = running;
  }
  __syncthreads();
  if (group >= groups) return;
  if (group == 0) Ptr<u32>(a.part_starts)[segment * bins + bin] = bin_first[bin];
  u32 running = bin_first[bin];
  for (u32 g = 0; g < group; ++g) running += share[g * bins + bin];
  for (u32 k = k_first; k < k_end; ++k) {
    const u32 n = counts[at(k)];
    counts[at(k)] = running;
    running += n;
  }
}

// Per block (the shares of vyre_eg_part_count): each entry goes to the next
// free place of its bin's run for this block. A tile of the block's share is
// first sorted by bin in shared memory, so that consecutive threads store
// consecutive places of one run: stored straight from each thread, every
// 8-byte entry was its own L2 write (0.25-0.32 ms a level for 16 M rows on
// an H100, with the DRAM traffic already low).
extern "C" __global__ void __launch_bounds__(kPartScatterThreads, 2) vyre_eg_part_scatter(VyreEgArgs a) {
  __shared__ u64 tile[kPartTile];
  __shared__ u32 next_place[kMaxPartBins];  // this block's next place in each bin's run
  __shared__ u32 tile_count[kMaxPartBins];
  __shared__ u32 tile_first[kMaxPartBins];  // a bin's first index in the sorted tile
  const u32 bins = a.part_bins;
  const u32* counts = Ptr<const u32>(a.part_counts) + static_cast<u64>(blockIdx.x) * bins;
  for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
    next_place[b] = counts[b];
    tile_count[b] = 0;
  }
  __syncthreads();
  u32 segment = 0, first = 0, end = 0;
  PartShare(a, &segment, &first, &end);
  u64* out = Ptr<u64>(a.part_out);
  // Each tile's entries are loaded while the tile before is sorted and
  // stored: loaded after it, every tile waited out a DRAM latency.
  u64 e[kPartPerThread], next[kPartPerThread];
  auto load_tile = [&](u32 tile_base, u64* into) {
    const u32 tile_size = tile_base < end ? min(kPartTile, end - tile_base) : 0u;
#pragma unroll
    for (u32 k = 0; k < kPartPerThread; ++k) {
      const u32 j = k * blockDim.x + threadIdx.x;
      into[k] = j < tile_size ? PartEntry(a, tile_base + j) : 0ull;
    }
  };
  load_tile(first, next);
  for (u32 tile_base = first; tile_base < end; tile_base += kPartTile) {
    const u32 tile_size = min(kPartTile, end - tile_base);
    // Rank each entry within its bin (bins are recomputed, not kept: two
    // blocks to an SM leave 32 registers a thread).
    u32 rank[kPartPerThread];
#pragma unroll
    for (u32 k = 0; k < kPartPerThread; ++k) e[k] = next[k];
    load_tile(tile_base + kPartTile, next);
#pragma unroll
    for (u32 k = 0; k < kPartPerThread; ++k) {
      const u32 j = k * blockDim.x + threadIdx.x;
      rank[k] = j < tile_size ? atomicAdd(&tile_count[PartBin(a, e[k])], 1u) : 0u;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Exclusive scan of the tile's bin counts by one warp.
      const u32 lane = threadIdx.x;
      const u32 per = (bins + 31u) / 32u;
      const u32 b0 = min(bins, lane * per);
      const u32 b1 = min(bins, b0 + per);
      u32 sum = 0;
      for (u32 b = b0; b < b1; ++b) sum += tile_count[b];
      u32 inclusive = sum;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const u32 before = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
        if (lane >= static_cast<u32>(offset)) inclusive += before;
      }
      u32 running = inclusive - sum;
      for (u32 b = b0; b < b1; ++b) {
        tile_first[b] = running;
        running += tile_count[b];
      }
    }
    __syncthreads();
#pragma unroll
    for (u32 k = 0; k < kPartPerThread; ++k) {
      const u32 j = k * blockDim.x + threadIdx.x;
      if (j < tile_size) tile[tile_first[PartBin(a, e[k])] + rank[k]] = e[k];
    }
    __syncthreads();
    for (u32 j = threadIdx.x; j < tile_size; j += blockDim.x) {
      const u64 entry = tile[j];
      const u32 b = PartBin(a, entry);
      out[next_place[b] + (j - tile_first[b])] = entry;
    }
    __syncthreads();
    for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
      next_place[b] += tile_count[b];
      tile_count[b] = 0;
    }
    __syncthreads();
  }
}

// What grouping leaves in each list place until the bucket's groups are
// whole: a leader (the row placed in the table) has kLeaderRole | its slot
// in the high word and its row in the low; a row that joined a group has
// kJoinedRole | the group's slot in the high word and the root of its class
// in the low; 0 means the probe ran past its limit.
constexpr u32 kLeaderRole = 0x40000000u;
constexpr u32 kJoinedRole = 0x80000000u;
constexpr u32 kRoleSlot = 0x0FFFFFFFu;
constexpr u32 kBucketProbeLimit = 256;
constexpr u32 kBucketThreads = 512;  // egraph_image.cc's kBucketPassThreads

// One block per bucket: group the bucket's rows in shared memory, then
// leave in each list place the pair (group minimum, class) that row gives,
// or kEmptyPair. The table (dynamic shared memory: bucket_slots entries of
// (hash, leader row), then a group minimum and a leader class per slot)
// holds everything a group needs, so a joining row's confirmation is two
// 16-byte form loads (its own and the leader's, whose row the entry names)
// and a shared-memory atomicMin. Kept in global memory (the leader's place
// in the list, per-place minima and leader classes), the same cost a DRAM
// write per place to initialise, an L2 round trip per join to find the
// leader's row and one per join for the minimum: 515 us for the fresh
// 16 M-row synthetic pass on an H100. Every row that joined a group counts
// as a candidate (a group gives at most one pair per joiner), so that
// vyre_eg_pair_set_clear can size the pair set.
extern "C" __global__ void __launch_bounds__(kBucketThreads) vyre_eg_bucket_group(VyreEgArgs a) {
  extern __shared__ u64 slots[];
  __shared__ u32 block_candidates;
  const u32 table_slots = a.bucket_slots;
  u32* group_min = reinterpret_cast<u32*>(slots + table_slots);
  u32* leader_class = group_min + table_slots;
  const u32* starts = Ptr<const u32>(a.bucket_starts);
  const u32 first = starts[blockIdx.x];
  const u32 end = starts[blockIdx.x + 1];
  for (u32 i = threadIdx.x; i < table_slots; i += blockDim.x) {
    slots[i] = kEmptyEntry;
    group_min[i] = kEmpty;
  }
  if (threadIdx.x == 0) block_candidates = 0;
  __syncthreads();
  u64* list = Ptr<u64>(a.bucket_list);
  const uint4* forms = Ptr<const uint4>(a.forms);
  const RowRecord* records = Ptr<const RowRecord>(a.records);
  const u32* canon = Ptr<const u32>(a.canon);
  const u32 mask = table_slots - 1u;
  const u32 probe_limit = min(table_slots, kBucketProbeLimit);
  u32 candidates = 0;
  // Each thread loads its next entry before working on this one, so the
  // list's DRAM latency overlaps the probe and the form loads.
  u64 next = first + threadIdx.x < end ? list[first + threadIdx.x] : 0;
  for (u32 place = first + threadIdx.x; place < end; place += blockDim.x) {
    const u64 mine = next;
    if (place + blockDim.x < end) next = list[place + blockDim.x];
    const u32 h = static_cast<u32>(mine >> 32);
    const u32 row = static_cast<u32>(mine);
    u64 result = 0;
    bool have_form = false;
    uint4 my_form;
    u32 slot = h & mask;
    for (u32 probe = 0; probe < probe_limit; ++probe, slot = (slot + 1u) & mask) {
      u64 e = slots[slot];
      if (e == kEmptyEntry) {
        e = atomicCAS(slots + slot, kEmptyEntry, (static_cast<u64>(h) << 32) | row);
        if (e == kEmptyEntry) {
          result = (static_cast<u64>(kLeaderRole | slot) << 32) | row;
          break;
        }
      }
      if (static_cast<u32>(e >> 32) != h) continue;
      const u32 other = static_cast<u32>(e);
      if (!have_form) {
        my_form = forms[row];
        have_form = true;
      }
      const uint4 other_form = forms[other];
      if (my_form.x != other_form.x || my_form.y != other_form.y || my_form.z != other_form.z) {
        continue;
      }
      if (my_form.y == kEmpty && my_form.z != kEmpty &&
          !SameForm(canon, records[row], records[other])) {
        continue;  // more than two children: compare them all
      }
      leader_class[slot] = other_form.w;  // every joiner writes the same
      atomicMin(group_min + slot, min(my_form.w, other_form.w));
      ++candidates;
      result = (static_cast<u64>(kJoinedRole | slot) << 32) | my_form.w;
      break;
    }
    if (result == 0) atomicExch(&Counters(a)->overflow, 1u);
    list[place] = result;
  }
  AddPerWarp(&block_candidates, candidates);
  __syncthreads();
  if (threadIdx.x == 0 && block_candidates != 0) {
    atomicAdd(&Counters(a)->candidates, block_candidates);
  }
  // The groups are whole: each place's pair. A thread reads back the places
  // it wrote.
  for (u32 place = first + threadIdx.x; place < end; place += blockDim.x) {
    const u64 e = list[place];
    const u32 role = static_cast<u32>(e >> 32);
    const u32 slot = role & kRoleSlot;
    u32 m = kEmpty, c = 0;
    if (role & kJoinedRole) {
      m = group_min[slot];
      c = static_cast<u32>(e);
    } else if (role & kLeaderRole) {
      m = group_min[slot];  // kEmpty: a row alone
      c = leader_class[slot];
    }
    list[place] = m != kEmpty && c != m ? (static_cast<u64>(m) << 32) | c : kEmptyPair;
  }
}

// The pair set in use: four slots per row that joined a group, within the
// set's span. A group gives at most one pair per row beyond its first
// (some row holds the minimum class), so the set is at most a quarter full:
// an insertion's chain of dependent CASes stays short (at half full, the
// emit of the fresh 16 M synthetic pass took 422 us instead of 360). Sized
// by the joiners, not a power of two (InsertPair maps a hash with a
// multiply), the set of a pass that finds few pairs is cleared in
// microseconds and stays in L2: the whole span is 16 bytes per row.
__device__ __forceinline__ u32 PairSetSlots(const VyreEgArgs& a) {
  const u64 wanted = max(u64{4} * Counters(a)->candidates, u64{1024});
  return static_cast<u32>(min(wanted, u64{a.pair_set_mask} + 1u));
}

// Clears the pair set in use and records its size for vyre_eg_bucket_emit.
extern "C" __global__ void vyre_eg_pair_set_clear(VyreEgArgs a) {
  const u32 slots = PairSetSlots(a);
  u64* set = Ptr<u64>(a.pair_set);
  for (u64 i = GlobalIndex(); i < slots; i += GridStride()) set[i] = kEmptyPair;
  if (GlobalIndex() == 0) Counters(a)->pair_slots = slots;
}

// One block per a.emit_buckets buckets: the pairs vyre_eg_bucket_group left
// in their places, each once. The block collects its new pairs in shared
// memory (a.bucket_stage of them; a range of more places than that leaves
// each new pair in its place and kEmptyPair in the others instead), then
// one atomicAdd reserves the block's run of the output and the block copies
// them there: two barriers per block, where a barrier per step (AppendPairs)
// kept every warp waiting for the slowest one's loads and set insertions.
// Half the blocks of the grouping kernel: with one 2,048-row bucket each,
// warps spent half their time at the barrier waiting for the slowest
// insertion chain (466 us for the fresh 16 M-row pass on an H100).
extern "C" __global__ void __launch_bounds__(kBucketThreads) vyre_eg_bucket_emit(VyreEgArgs a) {
  extern __shared__ u64 stage[];
  __shared__ u32 block_pairs, block_count;
  __shared__ u64 block_first;
  const u32* starts = Ptr<const u32>(a.bucket_starts);
  const u32 first_bucket = blockIdx.x * a.emit_buckets;
  const u32 first = starts[first_bucket];
  const u32 end = starts[min(first_bucket + a.emit_buckets, a.bucket_count)];
  const bool staged = end - first <= a.bucket_stage;
  u64* list = Ptr<u64>(a.bucket_list);
  const u32 set_slots = LoadVolatile(&Counters(a)->pair_slots);
  const u32 lane = threadIdx.x & 31u;
  if (threadIdx.x == 0) block_pairs = 0;
  __syncthreads();
  // Whole warps step together, for the ballot. Each lane loads its next
  // place's pair before working on this one, so the list's DRAM latency
  // overlaps the set insertions.
  u64 next = first + threadIdx.x < end ? list[first + threadIdx.x] : kEmptyPair;
  for (u32 base = first + (threadIdx.x - lane); base < end; base += blockDim.x) {
    const u32 place = base + lane;
    const u64 pair = next;
    next = place + blockDim.x < end ? list[place + blockDim.x] : kEmptyPair;
    const bool is_new = pair != kEmptyPair &&
                        InsertPair(a, set_slots, static_cast<u32>(pair >> 32),
                                   static_cast<u32>(pair));
    if (!staged) {
      if (place < end && !is_new && pair != kEmptyPair) list[place] = kEmptyPair;
      continue;
    }
    const u32 index = WarpTake(&block_pairs, is_new);
    if (is_new) stage[index] = pair;
  }
  if (!staged) {
    // Count the pairs written over the places.
    u32 mine_new = 0;
    __syncthreads();
    for (u32 place = first + threadIdx.x; place < end; place += blockDim.x) {
      mine_new += list[place] != kEmptyPair ? 1u : 0u;
    }
    AddPerWarp(&block_pairs, mine_new);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    block_count = block_pairs;
    block_first = block_count != 0 ? atomicAdd(&Counters(a)->pair_count, u64{block_count}) : 0;
    block_pairs = 0;  // now the cursor of the unstaged copy
  }
  __syncthreads();
  const u32 count = block_count;
  if (count == 0) return;
  u32* out = Ptr<u32>(a.pairs_out);
  // Counted even past the output's capacity, so the host can grow it.
  auto put = [&](u64 index, u64 pair) {
    if (index < a.pair_capacity) {
      out[2 * index] = static_cast<u32>(pair >> 32);
      out[2 * index + 1] = static_cast<u32>(pair);
    }
  };
  if (staged) {
    for (u32 i = threadIdx.x; i < count; i += blockDim.x) put(block_first + i, stage[i]);
    return;
  }
  for (u32 base = first + (threadIdx.x - lane); base < end; base += blockDim.x) {
    const u32 place = base + lane;
    const u64 e = place < end ? list[place] : kEmptyPair;
    const bool is_new = e != kEmptyPair;
    const u32 index = WarpTake(&block_pairs, is_new);
    if (is_new) put(block_first + index, e);
  }
}
