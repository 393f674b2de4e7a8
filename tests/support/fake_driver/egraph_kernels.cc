// The library's e-graph column kernels on the fake: the validation of
// uploaded columns runs on the host (so creation's and appends' refusals,
// and their messages, are tested here); the kernels that only derive data
// from valid columns are accepted and not run (see kernels.cc).
#include <algorithm>
#include <cstdint>

#include "kernels.h"
#include "kernels/egraph_args.h"
#include "state.h"

namespace fake_driver {

namespace {

template <typename T>
const T* At(uint64_t address) {
  return reinterpret_cast<const T*>(static_cast<uintptr_t>(address));
}

bool ColumnsLive(const VyreEgArgs& a) {
  const uint64_t rows = a.rows;
  return DeviceRangeValid(a.row_classes, rows * 4) && DeviceRangeValid(a.child_offsets, rows * 4) &&
         DeviceRangeValid(a.child_lengths, rows * 4) &&
         DeviceRangeValid(a.children + uint64_t{a.child_base} * 4, uint64_t{a.child_limit} * 4) &&
         DeviceRangeValid(a.counters, sizeof(VyreEgCounters));
}

}  // namespace

// vyre_eg_validate (congruence.cu): the first bad row class, child and
// child range of rows [first_row, rows).
CUresult RunEgraphValidate(const char* name, const KernelArgs& args, uint64_t /*threads*/) {
  VyreEgArgs a;
  if (!args.Read(0, {}, &a)) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no arguments", name);
  if (!ColumnsLive(a)) {
    return Misuse(CUDA_ERROR_ILLEGAL_ADDRESS, "%s: a column is outside every live allocation",
                  name);
  }
  const uint32_t* classes = At<uint32_t>(a.row_classes);
  const uint32_t* offs = At<uint32_t>(a.child_offsets);
  const uint32_t* lens = At<uint32_t>(a.child_lengths);
  const uint32_t* kids = At<uint32_t>(a.children) + a.child_base;
  auto* c = reinterpret_cast<VyreEgCounters*>(static_cast<uintptr_t>(a.counters));
  for (uint32_t r = a.first_row; r < a.rows; ++r) {
    const uint32_t i = r - a.first_row;
    if (classes[r] >= a.classes) c->bad_row_class = std::min(c->bad_row_class, i);
    const uint64_t off = offs[r];
    bool bad = off + lens[r] > a.child_limit;
    if (r > a.first_row) bad = bad || off < uint64_t{offs[r - 1]} + lens[r - 1];
    if (bad) c->bad_range = std::min(c->bad_range, i);
  }
  for (uint32_t k = 0; k < a.child_limit; ++k) {
    if (kids[k] >= a.classes) c->bad_child = std::min(c->bad_child, k);
  }
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
