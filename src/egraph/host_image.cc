#include "egraph/host_image.h"

#include <algorithm>
#include <numeric>

#include "egraph/cpu_incremental.h"

namespace vyre::egraph {

uint32_t RowSignature(uint32_t op, const uint32_t* kids, uint32_t len) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t{op} << 32 | len);
  for (uint32_t i = 0; i < len; ++i) h = (h ^ kids[i]) * 0x100000001B3ull;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return static_cast<uint32_t>(h);
}

namespace {

void AppendSignatures(const uint32_t* given, uint64_t rows, const uint32_t* ops,
                      const uint32_t* offsets, const uint32_t* lengths, const uint32_t* children,
                      std::vector<uint32_t>* to) {
  if (given != nullptr) {
    to->insert(to->end(), given, given + rows);
    return;
  }
  for (uint64_t r = 0; r < rows; ++r) {
    to->push_back(RowSignature(ops[r], children + offsets[r], lengths[r]));
  }
}

void ReserveAtLeast(std::vector<uint32_t>* v, uint64_t capacity) {
  if (capacity > v->capacity()) v->reserve(capacity);
}

}  // namespace

HostImage::HostImage(const vyre_egraph_image_desc& d) : threads_(d.cpu_threads) {
  const uint64_t rows = d.row_count;
  for (auto* column : {&row_classes_, &row_ops_, &child_offsets_, &child_lengths_, &signatures_}) {
    ReserveAtLeast(column, std::max(rows, d.row_capacity));
  }
  ReserveAtLeast(&children_, std::max(d.child_count, d.child_capacity));
  ReserveAtLeast(&parent_, std::max(d.class_count, d.class_capacity));
  row_classes_.assign(d.row_classes, d.row_classes + rows);
  row_ops_.assign(d.row_ops, d.row_ops + rows);
  child_offsets_.assign(d.child_offsets, d.child_offsets + rows);
  child_lengths_.assign(d.child_lengths, d.child_lengths + rows);
  children_.assign(d.children, d.children + d.child_count);
  AppendSignatures(d.row_signatures, rows, d.row_ops, d.child_offsets, d.child_lengths,
                   d.children, &signatures_);
  parent_.resize(d.class_count);
  std::iota(parent_.begin(), parent_.end(), 0u);
  canonical_classes_ = d.class_count;
}

HostImage::~HostImage() = default;

uint64_t HostImage::bytes() const {
  const uint64_t columns = (rows() * 5 + child_count() + classes()) * 4;
  return columns + (incremental_ ? incremental_->bytes() : 0);
}

HostColumns HostImage::columns() const {
  HostColumns g;
  g.rows = rows();
  g.classes = classes();
  g.child_count = child_count();
  g.row_classes = row_classes_.data();
  g.row_ops = row_ops_.data();
  g.child_offsets = child_offsets_.data();
  g.child_lengths = child_lengths_.data();
  g.children = children_.data();
  return g;
}

std::vector<uint32_t>* HostImage::MutableColumn(uint32_t column) {
  switch (column) {
    case VYRE_EGRAPH_COLUMN_ROW_CLASSES: return &row_classes_;
    case VYRE_EGRAPH_COLUMN_ROW_OPS: return &row_ops_;
    case VYRE_EGRAPH_COLUMN_CHILD_OFFSETS: return &child_offsets_;
    case VYRE_EGRAPH_COLUMN_CHILD_LENGTHS: return &child_lengths_;
    case VYRE_EGRAPH_COLUMN_ROW_SIGNATURES: return &signatures_;
    case VYRE_EGRAPH_COLUMN_CHILDREN: return &children_;
    default: return &parent_;
  }
}

const std::vector<uint32_t>& HostImage::Column(uint32_t column) const {
  return *const_cast<HostImage*>(this)->MutableColumn(column);
}

void HostImage::Write(uint32_t column, uint64_t first, uint64_t count, const uint32_t* src) {
  std::copy(src, src + count, MutableColumn(column)->begin() + first);
  // The stored forms and the parent index describe the old rows, and the
  // union-find is no fixpoint of the new ones.
  incremental_.reset();
  closed_ = false;
}

void HostImage::Append(const vyre_egraph_append_desc& d) {
  const uint64_t base = children_.size();
  parent_.resize(parent_.size() + d.class_count);
  for (uint64_t x = parent_.size() - d.class_count; x < parent_.size(); ++x) {
    parent_[x] = static_cast<uint32_t>(x);
  }
  canonical_classes_ += d.class_count;
  row_classes_.insert(row_classes_.end(), d.row_classes, d.row_classes + d.row_count);
  row_ops_.insert(row_ops_.end(), d.row_ops, d.row_ops + d.row_count);
  for (uint64_t r = 0; r < d.row_count; ++r) {
    child_offsets_.push_back(static_cast<uint32_t>(base + d.child_offsets[r]));
  }
  child_lengths_.insert(child_lengths_.end(), d.child_lengths, d.child_lengths + d.row_count);
  AppendSignatures(d.row_signatures, d.row_count, d.row_ops, d.child_offsets, d.child_lengths,
                   d.children, &signatures_);
  children_.insert(children_.end(), d.children, d.children + d.child_count);
}

vyre_egraph_rebuild_result HostImage::Rebuild(const vyre_egraph_rebuild_desc& desc) {
  const bool reset = (desc.flags & VYRE_EGRAPH_REBUILD_RESET) != 0;
  const bool weak = (desc.flags & VYRE_EGRAPH_REBUILD_COLLIDING_HASH) != 0;
  try {
    if (!reset && PrepareIncremental(weak)) return RebuildIncremental(desc);
    return RebuildFull(desc);
  } catch (...) {
    // Out of memory part way (the C ABI reports it): parent_ is still a
    // forest with parent[x] <= x, which a full rebuild starts from.
    incremental_.reset();
    closed_ = false;
    throw;
  }
}

bool HostImage::PrepareIncremental(bool weak) {
  if (incremental_ && incremental_->weak() == weak) return true;
  // A state of the other hash would group rows by other hashes: index anew.
  incremental_.reset();
  if (!closed_) return false;
  incremental_ = std::make_unique<CpuIncremental>(columns(), parent_.data(), closed_rows_,
                                                  threads_, weak);
  return true;
}

vyre_egraph_rebuild_result HostImage::RebuildFull(const vyre_egraph_rebuild_desc& desc) {
  incremental_.reset();  // CpuRebuild keeps no forms: the next incremental one indexes anew
  const uint64_t n = classes();
  const bool reset = (desc.flags & VYRE_EGRAPH_REBUILD_RESET) != 0;
  vyre_egraph_rebuild_result result{};
  result.struct_size = sizeof(result);
  result.classes_before = reset ? n : canonical_classes_;
  std::vector<uint32_t> before(n);
  if (reset) {
    std::iota(parent_.begin(), parent_.end(), 0u);
    std::iota(before.begin(), before.end(), 0u);
  } else {
    before = parent_;
  }
  uint64_t union_merges = 0;
  for (uint64_t i = 0; i < desc.union_count; ++i) {
    union_merges += Union(parent_.data(), desc.unions[2 * i], desc.unions[2 * i + 1]);
  }
  const CpuRebuildStats stats =
      CpuRebuild(columns(), parent_.data(), threads_, desc.max_rounds,
                 (desc.flags & VYRE_EGRAPH_REBUILD_COLLIDING_HASH) != 0);
  closed_ = stats.fixpoint;
  closed_rows_ = rows();
  result.rounds = stats.rounds;
  result.merges = stats.merges;
  result.union_merges = union_merges;
  result.rows_visited = stats.rows_visited;
  result.full_rounds = stats.rounds > 0 ? 1 : 0;
  result.classes_after = result.classes_before - union_merges - stats.merges;
  canonical_classes_ = result.classes_after;
  changed_.clear();
  for (uint64_t x = 0; x < n; ++x) {
    if (parent_[x] != before[x]) changed_.emplace_back(static_cast<uint32_t>(x), parent_[x]);
  }
  result.changed_class_count = changed_.size();
  return result;
}

vyre_egraph_rebuild_result HostImage::RebuildIncremental(const vyre_egraph_rebuild_desc& desc) {
  vyre_egraph_rebuild_result result{};
  result.struct_size = sizeof(result);
  result.classes_before = canonical_classes_;
  const CpuIncrementalStats stats = incremental_->Rebuild(
      columns(), parent_.data(), desc.unions, desc.union_count, desc.max_rounds, &changed_);
  // Stopped early, the state keeps the rows still to visit; the union-find
  // is no fixpoint for a full rebuild to index from.
  closed_ = stats.fixpoint;
  closed_rows_ = rows();
  result.rounds = stats.rounds;
  result.merges = stats.merges;
  result.union_merges = stats.union_merges;
  result.rows_visited = stats.rows_visited;
  result.full_rounds = 0;
  result.classes_after = result.classes_before - stats.union_merges - stats.merges;
  canonical_classes_ = result.classes_after;
  result.changed_class_count = changed_.size();
  return result;
}

std::vector<std::pair<uint32_t, uint32_t>> HostImage::Pass() const {
  return CpuCongruencePairs(columns(), parent_.data(), threads_);
}

}  // namespace vyre::egraph
