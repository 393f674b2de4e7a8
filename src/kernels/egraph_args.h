// The one argument block every e-graph kernel takes, shared by the CUDA
// source and the host code so both agree on its layout. Addresses are
// device pointers carried as 64-bit integers.
#ifndef VYRE_KERNELS_EGRAPH_ARGS_H_
#define VYRE_KERNELS_EGRAPH_ARGS_H_

#ifdef __CUDACC__
typedef unsigned long long vyre_eg_u64;
typedef unsigned int vyre_eg_u32;
#else
#include <cstdint>
typedef uint64_t vyre_eg_u64;
typedef uint32_t vyre_eg_u32;
#endif

// Device-side state of one rebuild or pass.
struct VyreEgCounters {
  vyre_eg_u64 merges;          // congruence merges over all rounds
  vyre_eg_u64 union_merges;    // merges made by the caller's unions
  vyre_eg_u64 rows_visited;    // rows canonicalised over all rounds
  vyre_eg_u64 pair_count;      // pass: distinct pairs found
  vyre_eg_u32 merges_round;    // merges in the round running now
  vyre_eg_u32 placed;          // rows placed in the table since it was cleared
  vyre_eg_u32 done;            // 1: fixpoint (or max_rounds) reached; kernels return at once
  vyre_eg_u32 full;            // 1: this round clears the table and visits every row
  vyre_eg_u32 rounds;          // rounds finished
  vyre_eg_u32 max_rounds;      // 0: no limit
  vyre_eg_u32 overflow;        // a probe ran the whole table (never expected)
  vyre_eg_u32 table_round;     // rounds since the table was last cleared (0: a full round)
  vyre_eg_u32 candidates;      // bucketed pass: rows that joined a group (each gives <= 1 pair)
  vyre_eg_u32 pair_slots;      // bucketed pass: the pair set's slots in use
  vyre_eg_u32 visits_round;    // rows the round's insert visited
  vyre_eg_u32 linked;          // roots linked this round (or by the unions): relink has work
  vyre_eg_u32 changed_count;   // classes whose canonical class this rebuild changed
  // Validation of uploaded columns (create, append): the first bad index of
  // each check, 0xFFFFFFFF when none.
  vyre_eg_u32 bad_row_class;
  vyre_eg_u32 bad_child;
  vyre_eg_u32 bad_range;
  vyre_eg_u32 full_rounds;     // rounds that visited every row
  // Set by relink for the next round: so many roots were linked that the
  // next refresh finds its rows by scanning every row's canonical children
  // against the linked roots, instead of relink marking them through the
  // parent index (random stores per parent row).
  vyre_eg_u32 scan_rows;
  // Rounds on the device (VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS): round_end's
  // "another round" word, the loop graph's condition, and its round count.
  vyre_eg_u32 again;
  vyre_eg_u32 loop_rounds;
  vyre_eg_u32 reserved;
};

struct VyreEgArgs {
  // Columns (rows entries each, children child_count).
  vyre_eg_u64 row_classes, row_ops, child_offsets, child_lengths, signatures, children;
  // Union-find (classes entries; links only point down, paths may be
  // halved at any time), the canonical class of every class as of the last
  // finished round (classes entries, every entry a root: what refresh and
  // the caller read) and canonical children (child_count).
  vyre_eg_u64 parent, rep, canon;
  // The parent index: the rows that name class c as a child are
  // index_rows[index_offsets[c] .. index_offsets[c + 1]) for the rows the
  // index was built over (its first index_classes classes), and the same in
  // delta_rows / delta_offsets (every class) for the rows appended since
  // (delta_offsets 0: none); scan_sums is the prefix sum's per-block
  // scratch. The build kernels write index_offsets / index_rows for rows
  // [first_row, rows).
  vyre_eg_u64 index_offsets, index_rows, delta_offsets, delta_rows, scan_sums;
  // Classes whose canonical class changed in this rebuild, and the classes
  // relink moved this round (whose parent rows mark_parents puts on the
  // next round's worklist): bitsets of hooked_words u32. A warp of relink
  // owns one word of each (its 32 classes), so it writes them without
  // atomics, and nothing counts on one address per warp (512 k atomics on
  // one counter took 0.46 ms of a round on an H100).
  vyre_eg_u64 changed_bits, member_bits;
  // Scratch: row hashes (rows entries), the dirty-row bitset ((rows + 31) /
  // 32 words), the table (table_mask + 1 u64 entries: hash, table round,
  // row), the row records (rows x 16 bytes: op, arity, child offset, class;
  // packed from the columns) and the table round each row's form last
  // changed in (rows bytes).
  vyre_eg_u64 hash, dirty_rows, table, records, changed_in;
  // Pass scratch: each row's group leader row, each leader's minimum class
  // (rows entries each; the table pass only: the bucketed one keeps both in
  // shared memory), the set of pairs (pair_set_mask + 1 u64) and the output
  // (pair_capacity pairs).
  vyre_eg_u64 rep_slot, group_min, pair_set, pairs_out;
  vyre_eg_u64 counters;
  vyre_eg_u64 unions;  // union_count pairs
  // Two bitsets of hooked_words u32 each: bit x of set (round & 1) says root
  // x was linked under another root during that round.
  vyre_eg_u64 hooked;
  // Bucketed pass (see congruence.cu): the final list of (hash, row) in
  // bucket order (rows u64) and each bucket's first place in it (buckets +
  // 1 u32).
  vyre_eg_u64 bucket_list, bucket_starts;
  // One level of the partition that builds it: entries [seg_starts[s],
  // seg_starts[s + 1]) of part_in (or, when part_in is 0, every row's (hash,
  // row) from the hash column, as one segment) go to part_out by bin, each
  // segment split among part_blocks blocks; part_counts holds each block's
  // count (then first place) per bin, part_starts each (segment, bin)'s
  // first place (part_segments x part_bins + 1 u32).
  vyre_eg_u64 part_in, part_out, part_counts, part_starts, seg_starts;
  // Pass: each row's canonical form in 16 bytes (op, first two canonical
  // children, class root; see congruence.cu), written by a full refresh
  // when not 0.
  vyre_eg_u64 forms;
  vyre_eg_u32 rows, classes, table_mask, union_count;
  vyre_eg_u32 pair_set_mask, pair_capacity, weak_hash, hooked_words;
  // Buckets; slots of a bucket's shared-memory table (a power of two); the
  // pairs an emit block can collect in shared memory, and the buckets it
  // takes.
  vyre_eg_u32 bucket_count, bucket_slots, bucket_stage, emit_buckets;
  // The partition level: segments, blocks per segment, bins per segment (a
  // power of two) and the shift that takes a hash to its bin ((hash >>
  // part_shift) & (part_bins - 1)).
  vyre_eg_u32 part_segments, part_blocks, part_bins, part_shift;
  // What a round-0 refresh may assume of the union-find (VYRE_EG_PARENT_*):
  // the host knows it from what ran on the image since its creation.
  vyre_eg_u32 parent_state;
  // 1 for the unions before round 1: their links go to the hooked set that
  // round 1 reads as "the round before" (HookedThisRound(rounds + 1)).
  vyre_eg_u32 union_phase;
  // Range kernels (create, append): rows from first_row, classes from
  // first_class; validation checks child ranges against child_limit
  // children and adds child_base to the offsets it accepted.
  vyre_eg_u32 first_row, first_class, child_base, child_limit;
  // The prefix sum's entries (index_offsets: classes + 1).
  vyre_eg_u32 scan_count, scan_blocks;
  // 1 for a rebuild round's refresh: a full round empties the table first.
  // 0 for the pass's, whose list and forms live in the table's span.
  vyre_eg_u32 index_classes, clears_table;
};

// Nothing known: walk each class to its root.
#define VYRE_EG_PARENT_ANY 0u
// Every entry is a root (after init, a finished rebuild, compress + settle):
// one load gives a class's root.
#define VYRE_EG_PARENT_FLAT 1u
// Every class is its own root (nothing merged since init): no load at all.
#define VYRE_EG_PARENT_IDENTITY 2u

#endif  // VYRE_KERNELS_EGRAPH_ARGS_H_
