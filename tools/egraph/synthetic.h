// A synthetic e-graph for rebuild benchmarks, shaped like egglog's math
// micro-benchmark (arity <= max_arity, few leaves, many shared subterms), with
// every e-node in its own class (classes == rows), so congruence has to re-join
// every duplicated subterm, level by level.
//
// Construction: abstract terms in levels. Level 0 holds the leaves (variables
// "x", "y", ... and small constants "0".."9"); a term of level l >= 1 is an
// operator (unary: neg ln sqrt sin cos exp; binary: + - * / pow d i; wider
// ones up to max_arity) whose first child is a term of level l - 1 and whose
// other children come from level l - 1, the leaves or any earlier level. Every
// term is instantiated about three times; each copy picks, for each child, one
// of that child term's copies at random. So the copies of a level-l term only
// become congruent once their children's copies have merged: a rebuild needs
// depth + 2 rounds (leaves merge in round 1, level l in round l + 1, then a
// round that finds nothing). Level sizes grow geometrically (x2), rows are
// shuffled within a level, and children always come before their parents.
//
// depth = floor(bit_length(rows) / 3) - 1 (at least 1): 1 M rows -> 5 (7
// rounds), 4 M -> 6 (8 rounds), 16 M -> 7 (9 rounds). Deterministic for (rows, max_arity, seed); generated
// in parallel with counter-based randomness, so the thread count never
// changes the result.
#ifndef VYRE_TOOLS_EGRAPH_SYNTHETIC_H_
#define VYRE_TOOLS_EGRAPH_SYNTHETIC_H_

#include <cstdint>

#include "egraph/egraph_columns.h"

namespace vyre::tools {

struct SyntheticEgraph : EgraphColumns {
  // Operator levels above the leaves.
  uint32_t depth = 0;
  // Abstract terms generated (the classes left after a rebuild are at most this).
  uint64_t terms = 0;
};

// rows <= 2^32 - 1 (larger values are clamped); max_arity 0 gives leaves only.
SyntheticEgraph GenerateSynthetic(uint64_t rows, uint32_t max_arity, uint64_t seed);

}  // namespace vyre::tools

#endif  // VYRE_TOOLS_EGRAPH_SYNTHETIC_H_
