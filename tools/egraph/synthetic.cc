// The synthetic e-graph generator; see synthetic.h for the shape.
//
// Nothing is stored per term: a term's op and children, and each row's choice
// of child copies, are hashes of (seed, id), so rows can be generated in any
// order and on any number of threads. Within a level, slot i (copy i / terms
// of term i % terms) sits at row (a * i + b) mod size, an affine bijection.
#include "egraph/synthetic.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace vyre::tools {
namespace {

constexpr uint64_t kCopies = 3;  // rows per term, on average

const char* const kLeafNames[] = {"x", "y", "z", "w", "a", "b", "0", "1",
                                  "2", "3", "4", "5", "6", "7", "8", "9"};
constexpr uint64_t kLeafTerms = sizeof(kLeafNames) / sizeof(kLeafNames[0]);
const char* const kUnaryNames[] = {"neg", "ln", "sqrt", "sin", "cos", "exp"};
constexpr uint32_t kUnaryOps = 6;
const char* const kBinaryNames[] = {"+", "-", "*", "/", "pow", "d", "i"};
constexpr uint32_t kBinaryOps = 7;

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

// Counter-based randomness: independent streams per (tag, id, index).
inline uint64_t Rand(uint64_t seed, uint64_t tag, uint64_t id, uint64_t index = 0) {
  return Mix(seed ^ Mix(tag * 0x9E3779B97F4A7C15ull + id) ^ (index * 0xD6E8FEB86659FD93ull));
}

// A value in [0, n) from 64 random bits (n < 2^32).
inline uint64_t Below(uint64_t random, uint64_t n) { return ((random >> 32) * n) >> 32; }

uint64_t Gcd(uint64_t a, uint64_t b) {
  while (b) {
    const uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// a^-1 mod m (gcd(a, m) == 1, m >= 1).
uint64_t InverseMod(uint64_t a, uint64_t m) {
  if (m == 1) return 0;
  __int128 t = 0, new_t = 1, r = m, new_r = a % m;
  while (new_r != 0) {
    const __int128 q = r / new_r;
    __int128 tmp = t - q * new_t;
    t = new_t;
    new_t = tmp;
    tmp = r - q * new_r;
    r = new_r;
    new_r = tmp;
  }
  if (t < 0) t += m;
  return static_cast<uint64_t>(t);
}

struct Level {
  uint64_t row_begin = 0, size = 0;   // rows
  uint64_t term_begin = 0, terms = 0;  // abstract terms
  uint64_t a = 1, a_inv = 1, b = 0;    // slot i -> row row_begin + (a * i + b) % size
};

enum Tag : uint64_t { kTagArity = 1, kTagOp, kTagKid, kTagCopy, kTagLevel };

class Generator {
 public:
  Generator(uint64_t rows, uint32_t max_arity, uint64_t seed)
      : rows_(rows), max_arity_(max_arity), seed_(seed) {
    PlanLevels();
    // Op ids: leaves, unary, binary, then one op per wider arity.
    for (const char* n : kLeafNames) op_names_.push_back(n);
    for (const char* n : kUnaryNames) op_names_.push_back(n);
    for (const char* n : kBinaryNames) op_names_.push_back(n);
    for (uint32_t a = 3; a <= max_arity_; ++a) op_names_.push_back("app" + std::to_string(a));
  }

  SyntheticEgraph Run() {
    SyntheticEgraph g;
    g.depth = static_cast<uint32_t>(levels_.size() - 1);
    g.terms = levels_.back().term_begin + levels_.back().terms;
    g.classes = rows_;
    g.op_names = op_names_;
    g.row_classes.resize(rows_);
    g.row_ops.resize(rows_);
    g.child_offsets.resize(rows_);
    g.child_lengths.resize(rows_);
    // Pass 1: each row's term, op and arity.
    Parallel([&](uint64_t begin, uint64_t end) {
      for (uint64_t r = begin; r < end; ++r) {
        const uint64_t term = TermOfRow(r);
        g.row_classes[r] = static_cast<uint32_t>(r);
        g.row_ops[r] = TermOp(term);
        g.child_lengths[r] = TermArity(term);
      }
    });
    uint64_t total = 0;
    for (uint64_t r = 0; r < rows_; ++r) {
      g.child_offsets[r] = static_cast<uint32_t>(total);
      total += g.child_lengths[r];
    }
    g.children.resize(total);
    // Pass 2: the children, each a random copy of the term's child term.
    Parallel([&](uint64_t begin, uint64_t end) {
      for (uint64_t r = begin; r < end; ++r) {
        const uint64_t term = TermOfRow(r);
        const uint32_t arity = g.child_lengths[r];
        uint32_t* out = g.children.data() + g.child_offsets[r];
        for (uint32_t j = 0; j < arity; ++j) {
          out[j] = static_cast<uint32_t>(RandomCopy(KidTerm(term, j), Rand(seed_, kTagCopy, r, j)));
        }
      }
    });
    return g;
  }

 private:
  void PlanLevels() {
    // Level 0: the leaves, kCopies copies each (fewer rows: fewer leaves).
    Level leaves;
    leaves.size = std::min<uint64_t>(rows_, kLeafTerms * kCopies);
    leaves.terms = std::min<uint64_t>(kLeafTerms, leaves.size);
    levels_.push_back(leaves);
    const uint64_t rest = rows_ - leaves.size;
    uint32_t depth = 0;
    if (max_arity_ > 0 && rest > 0) {
      uint32_t bits = 0;  // bit length of rows: 1 M -> 20, 4 M -> 22, 16 M -> 24
      while (bits < 64 && (rows_ >> bits) != 0) ++bits;
      depth = static_cast<uint32_t>(std::max<int64_t>(1, static_cast<int64_t>(bits / 3) - 1));
      // Every level needs a row: sizes grow x2 from level 1.
      while (depth > 1 && rest < (uint64_t{1} << depth) - 1) --depth;
    }
    uint64_t weight_sum = 0;
    for (uint32_t l = 0; l < depth; ++l) weight_sum += uint64_t{1} << l;  // sizes x2 per level
    uint64_t assigned = 0;
    for (uint32_t l = 1; l <= depth; ++l) {
      Level level;
      level.row_begin = levels_.back().row_begin + levels_.back().size;
      level.term_begin = levels_.back().term_begin + levels_.back().terms;
      if (l < depth) {
        level.size = static_cast<uint64_t>(
            (static_cast<unsigned __int128>(rest) * (uint64_t{1} << (l - 1))) / weight_sum);
        level.size = std::max<uint64_t>(level.size, 1);
      } else {
        level.size = rest - assigned;
      }
      assigned += level.size;
      level.terms = std::max<uint64_t>(1, level.size / kCopies);
      levels_.push_back(level);
    }
    for (size_t l = 0; l < levels_.size(); ++l) {
      Level& level = levels_[l];
      const uint64_t s = level.size;
      uint64_t a = s > 1 ? 1 + Below(Rand(seed_, kTagLevel, l, 0), s - 1) : 0;
      while (s > 1 && Gcd(a, s) != 1) a = a + 1 < s ? a + 1 : 1;
      level.a = s > 1 ? a : 0;
      level.a_inv = s > 1 ? InverseMod(a, s) : 0;
      level.b = s > 1 ? Below(Rand(seed_, kTagLevel, l, 1), s) : 0;
    }
  }

  size_t LevelOfTerm(uint64_t term) const {
    size_t l = levels_.size() - 1;
    while (term < levels_[l].term_begin) --l;
    return l;
  }
  size_t LevelOfRow(uint64_t row) const {
    size_t l = levels_.size() - 1;
    while (row < levels_[l].row_begin) --l;
    return l;
  }

  uint64_t TermOfRow(uint64_t row) const {
    const Level& level = levels_[LevelOfRow(row)];
    const uint64_t p = row - level.row_begin;
    const uint64_t s = level.size;
    // slot = a^-1 * (p - b) mod s
    const uint64_t diff = (p + s - level.b) % s;
    const uint64_t slot =
        static_cast<uint64_t>((static_cast<unsigned __int128>(level.a_inv) * diff) % s);
    return level.term_begin + slot % level.terms;
  }

  uint32_t TermArity(uint64_t term) const {
    if (term < levels_[0].terms) return 0;  // a leaf
    if (max_arity_ == 1) return 1;
    const uint64_t u = Below(Rand(seed_, kTagArity, term), 100);
    if (u < 20) return 1;
    if (u < 97 || max_arity_ == 2) return 2;
    return 3 + static_cast<uint32_t>(Below(Rand(seed_, kTagArity, term, 1), max_arity_ - 2));
  }

  uint32_t TermOp(uint64_t term) const {
    if (term < levels_[0].terms) return static_cast<uint32_t>(term);
    const uint32_t arity = TermArity(term);
    const uint64_t r = Rand(seed_, kTagOp, term);
    if (arity == 1) return static_cast<uint32_t>(kLeafTerms + Below(r, kUnaryOps));
    if (arity == 2) return static_cast<uint32_t>(kLeafTerms + kUnaryOps + Below(r, kBinaryOps));
    return static_cast<uint32_t>(kLeafTerms + kUnaryOps + kBinaryOps + (arity - 3));
  }

  // Child j of a term (of level >= 1): the first from the level below; the
  // others from the level below, the leaves or any earlier term.
  uint64_t KidTerm(uint64_t term, uint32_t j) const {
    const size_t l = LevelOfTerm(term);
    const Level& below = levels_[l - 1];
    const uint64_t r = Rand(seed_, kTagKid, term, j);
    const uint64_t choice = j == 0 ? 5 : Below(r, 10);
    const uint64_t pick = Rand(seed_, kTagKid, term, j + 64);
    if (choice < 2) return Below(pick, levels_[0].terms);
    if (choice < 6) return below.term_begin + Below(pick, below.terms);
    return Below(pick, levels_[l].term_begin);
  }

  // The row of a random copy of `term`.
  uint64_t RandomCopy(uint64_t term, uint64_t random) const {
    const Level& level = levels_[LevelOfTerm(term)];
    const uint64_t j = term - level.term_begin;
    const uint64_t copies = (level.size - 1 - j) / level.terms + 1;
    const uint64_t slot = j + Below(random, copies) * level.terms;
    const uint64_t p = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(level.a) * slot + level.b) % level.size);
    return level.row_begin + p;
  }

  template <typename Fn>
  void Parallel(Fn&& fn) const {
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<unsigned>(std::min<uint64_t>(threads, std::max<uint64_t>(1, rows_ / 65536)));
    std::vector<std::thread> pool;
    auto part = [&](unsigned t) {
      return static_cast<uint64_t>((static_cast<unsigned __int128>(rows_) * t) / threads);
    };
    for (unsigned t = 1; t < threads; ++t) {
      try {
        pool.emplace_back([&, t] { fn(part(t), part(t + 1)); });
      } catch (const std::system_error&) {
        fn(part(t), part(t + 1));  // no thread: do that part here
      }
    }
    fn(part(0), part(1));
    for (std::thread& t : pool) t.join();
  }

  uint64_t rows_;
  uint32_t max_arity_;
  uint64_t seed_;
  std::vector<Level> levels_;
  std::vector<std::string> op_names_;
};

}  // namespace

SyntheticEgraph GenerateSynthetic(uint64_t rows, uint32_t max_arity, uint64_t seed) {
  // Ids and child offsets are 32-bit.
  rows = std::min<uint64_t>(rows, UINT32_MAX);
  max_arity = std::min<uint32_t>(max_arity, 64);
  if (max_arity > 0) rows = std::min<uint64_t>(rows, UINT32_MAX / max_arity);
  if (rows == 0) {
    SyntheticEgraph empty;
    return empty;
  }
  return Generator(rows, max_arity, seed).Run();
}

}  // namespace vyre::tools
