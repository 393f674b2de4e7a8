// Fuzzes e-graph images: vyre_egraph_image_create with fuzzed columns (row,
// class and child counts, offsets, lengths, class ids, children, signatures,
// NULL columns, struct sizes, devices outside the enum, thread counts), then
// a fuzzed sequence of column reads and writes, congruence passes and
// rebuilds (synchronous and asynchronous, with unions, flags, round limits)
// on the CPU device (no driver needed), and creation, column reads and
// writes on the fake GPU (whose driver does not run the congruence kernels,
// so passes and rebuilds stay on the CPU).
//
// Host memory rules kept: every column holds the entries its count names,
// except counts over the library's limits (rows > 2^30, classes or children
// > 2^32 - 1), which come with NULL columns.
//
// Checks: the outcome rules of fuzz_support.h; a created image destroys once
// (then STALE_HANDLE); column reads return what was written (a refused write
// changes nothing); on the CPU, pass pairs and rebuilt canonical classes equal
// those of a naive model of the contract (egraph_model.h); image info agrees.
#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "egraph_model.h"
#include "fuzz_support.h"
#include "vyre_cuda.h"

namespace {

constexpr uint64_t kMaxRows = 1024;
constexpr uint64_t kMaxChildren = 4096;
constexpr uint64_t kMaxModelClasses = 1 << 16;

vyre_context g_context{0};
uint64_t g_misuse = 0;

struct Columns {
  uint64_t classes = 0;
  std::vector<uint32_t> row_classes, row_ops, offsets, lengths, signatures, children;

  std::vector<uint32_t>* Column(uint32_t column) {
    switch (column) {
      case VYRE_EGRAPH_COLUMN_ROW_CLASSES:
        return &row_classes;
      case VYRE_EGRAPH_COLUMN_ROW_OPS:
        return &row_ops;
      case VYRE_EGRAPH_COLUMN_CHILD_OFFSETS:
        return &offsets;
      case VYRE_EGRAPH_COLUMN_CHILD_LENGTHS:
        return &lengths;
      case VYRE_EGRAPH_COLUMN_ROW_SIGNATURES:
        return &signatures;
      case VYRE_EGRAPH_COLUMN_CHILDREN:
        return &children;
      default:
        return nullptr;
    }
  }
  // The entries of `column` (0 for a column that does not exist).
  uint64_t Entries(uint32_t column) {
    if (column == VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES) return classes;
    const std::vector<uint32_t>* mine = Column(column);
    return mine ? mine->size() : 0;
  }
};

uint32_t ClassId(FuzzedDataProvider& in, uint64_t classes) {
  if (classes > 0 && in.ConsumeIntegralInRange<int>(0, 31) != 0) {
    // Mostly few distinct classes, so rows meet.
    const uint64_t top = std::min<uint64_t>(classes - 1, in.ConsumeBool() ? 7 : classes - 1);
    return static_cast<uint32_t>(in.ConsumeIntegralInRange<uint64_t>(0, top));
  }
  return vyre_fuzz::InterestingU32(in);
}

// The pairs a pass must report under `model` (see vyre_egraph_pass).
std::vector<uint32_t> ModelPairs(const Columns& c, vyre_fuzz::EgraphModel& model) {
  std::map<std::vector<uint32_t>, std::vector<uint32_t>> groups;
  for (size_t r = 0; r < c.row_classes.size(); ++r) {
    std::vector<uint32_t> key{c.row_ops[r], c.lengths[r]};
    for (uint32_t j = 0; j < c.lengths[r]; ++j)
      key.push_back(model.Find(c.children[c.offsets[r] + j]));
    groups[key].push_back(model.Find(c.row_classes[r]));
  }
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (auto& [key, classes] : groups) {
    const uint32_t m = *std::min_element(classes.begin(), classes.end());
    for (uint32_t k : classes) {
      if (k != m) pairs.emplace_back(m, k);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::vector<uint32_t> flat;
  for (auto [a, b] : pairs) {
    flat.push_back(a);
    flat.push_back(b);
  }
  return flat;
}

void ExpectSame(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
                const char* what) {
  if (got == want) return;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  vyre_fuzz::Fail(
      "%s: %zu entries differ from the model's %zu; first difference at %zu: %u, "
      "model %u",
      what, got.size(), want.size(), i, i < got.size() ? got[i] : 0xFFFFFFFFu,
      i < want.size() ? want[i] : 0xFFFFFFFFu);
}

void RunOne(FuzzedDataProvider& in) {
  // --- device --------------------------------------------------------------------
  int32_t device = VYRE_EGRAPH_DEVICE_CPU;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
    case 1:
    case 2:
      device = VYRE_EGRAPH_DEVICE_GPU;
      break;
    case 3:
      device = static_cast<int32_t>(in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 4)
                                                     : in.ConsumeIntegral<uint32_t>());
      break;
    default:
      break;
  }
  const bool gpu = device == VYRE_EGRAPH_DEVICE_GPU;

  // --- counts ---------------------------------------------------------------------
  Columns c;
  uint64_t row_count = in.ConsumeIntegralInRange<uint64_t>(0, 24);
  bool rows_over_limit = false;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      row_count = in.ConsumeIntegralInRange<uint64_t>(0, kMaxRows);
      break;
    case 1:
      row_count = (uint64_t{1} << 30) + in.ConsumeIntegralInRange<uint64_t>(1, 3);
      if (in.ConsumeBool()) row_count = UINT64_MAX - in.ConsumeIntegralInRange<uint64_t>(0, 2);
      rows_over_limit = true;
      break;
    default:
      break;
  }
  uint64_t class_count = in.ConsumeIntegralInRange<uint64_t>(1, 32);
  bool classes_over_limit = false;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      class_count = 0;
      break;
    case 1:
      class_count = in.ConsumeIntegralInRange<uint64_t>(0, kMaxModelClasses);
      break;
    case 2:
      class_count = uint64_t{UINT32_MAX} + in.ConsumeIntegralInRange<uint64_t>(1, 3);
      if (in.ConsumeBool()) class_count = UINT64_MAX;
      classes_over_limit = true;
      break;
    default:
      break;
  }
  c.classes = class_count;
  const uint64_t rows = rows_over_limit ? 0 : row_count;
  c.row_classes.resize(rows);
  c.row_ops.resize(rows);
  c.offsets.resize(rows);
  c.lengths.resize(rows);
  c.signatures.resize(rows);
  uint64_t next = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    c.row_classes[r] = ClassId(in, class_count);
    c.row_ops[r] = in.ConsumeIntegralInRange<int>(0, 15) == 0
                       ? in.ConsumeIntegral<uint32_t>()
                       : in.ConsumeIntegralInRange<uint32_t>(0, 3);
    c.lengths[r] = in.ConsumeIntegralInRange<uint32_t>(0, 3);
    c.offsets[r] = static_cast<uint32_t>(next);
    if (in.ConsumeIntegralInRange<int>(0, 31) == 0) {
      // An offset out of order, overlapping or far off; or a huge length.
      if (in.ConsumeBool()) {
        c.offsets[r] = vyre_fuzz::InterestingU32(in);
      } else {
        c.lengths[r] = vyre_fuzz::InterestingU32(in);
      }
    }
    next = std::min<uint64_t>(kMaxChildren, uint64_t{c.offsets[r]} + c.lengths[r]);
    c.signatures[r] = in.ConsumeIntegral<uint32_t>();
  }
  uint64_t child_count = next;
  bool children_over_limit = false;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      child_count = in.ConsumeIntegralInRange<uint64_t>(0, kMaxChildren);
      break;
    case 1:
      child_count = uint64_t{UINT32_MAX} + in.ConsumeIntegralInRange<uint64_t>(1, 3);
      children_over_limit = true;
      break;
    default:
      break;
  }
  c.children.resize(children_over_limit ? 0 : child_count);
  for (uint32_t& child : c.children) child = ClassId(in, class_count);

  // --- the descriptor ---------------------------------------------------------------
  vyre_egraph_image_desc desc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  desc.device = static_cast<vyre_egraph_device>(device);
  desc.context = gpu || in.ConsumeIntegralInRange<int>(0, 31) == 0 ? g_context : vyre_context{0};
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0)
    desc.context.bits = in.ConsumeIntegral<uint64_t>();
  desc.row_count = row_count;
  desc.class_count = class_count;
  desc.child_count = child_count;
  const bool null_rows = rows_over_limit || in.ConsumeIntegralInRange<int>(0, 31) == 0;
  const int null_column = in.ConsumeIntegralInRange<int>(0, 63);
  desc.row_classes = null_rows || null_column == 0 ? nullptr : c.row_classes.data();
  desc.row_ops = null_rows || null_column == 1 ? nullptr : c.row_ops.data();
  desc.child_offsets = null_rows || null_column == 2 ? nullptr : c.offsets.data();
  desc.child_lengths = null_rows || null_column == 3 ? nullptr : c.lengths.data();
  desc.row_signatures = null_rows || in.ConsumeBool() ? nullptr : c.signatures.data();
  desc.children = children_over_limit || null_column == 4 ? nullptr : c.children.data();
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      desc.cpu_threads = 0;
      break;
    case 1:
      desc.cpu_threads = in.ConsumeIntegralInRange<uint32_t>(2, 4);
      break;
    case 2:
      desc.cpu_threads = vyre_fuzz::InterestingU32(in);
      break;
    default:
      desc.cpu_threads = 1;
      break;
  }
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) desc.reserved0 = in.ConsumeIntegral<uint32_t>();
  uint32_t desc_size = sizeof desc;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      desc_size = in.ConsumeIntegralInRange<uint32_t>(0, 256);
      break;
    case 1:
      desc_size = sizeof desc + 8;
      break;
    default:
      break;
  }
  desc.struct_size = desc_size;
  std::vector<unsigned char> desc_bytes(std::max<size_t>(desc_size, sizeof desc), 0);
  std::memcpy(desc_bytes.data(), &desc, sizeof desc);
  if (desc_size > sizeof desc && in.ConsumeBool()) desc_bytes[desc_size - 1] = 1;

  vyre_egraph_image image{0x99};
  const vyre_status created = VYRE_FUZZ_CALL(vyre_egraph_image_create(
      reinterpret_cast<const vyre_egraph_image_desc*>(desc_bytes.data()), &image));
  if (created != VYRE_STATUS_OK) {
    if (image.bits != 0) {
      vyre_fuzz::Fail("vyre_egraph_image_create failed (%s) but left *out = 0x%llx",
                      vyre_status_name(created), static_cast<unsigned long long>(image.bits));
    }
    return;
  }
  if (rows_over_limit || classes_over_limit || children_over_limit) {
    vyre_fuzz::Fail("vyre_egraph_image_create accepted counts over its limits");
  }
  // Signatures the library computed are not ours to predict.
  const bool signatures_known = desc.row_signatures != nullptr;
  const bool model_ok = !gpu && class_count <= kMaxModelClasses;
  vyre_fuzz::EgraphModel model(model_ok ? class_count : 0);
  bool model_valid = model_ok;
  // Creation merges nothing: the model starts with every class alone.

  // Output arrays are allocated for each call at exactly the size it is
  // given (ASan reports a write past them).
  const uint64_t most_pairs = std::max<uint64_t>({rows, child_count, class_count, 1}) + 32;
  const int ops = in.ConsumeIntegralInRange<int>(0, 8);
  for (int op_index = 0; op_index < ops && in.remaining_bytes() > 0; ++op_index) {
    const int op = in.ConsumeIntegralInRange<int>(0, 9);
    if (op <= 1 || (gpu && op >= 4 && op <= 8)) {
      // Read a column.
      uint32_t column = in.ConsumeIntegralInRange<uint32_t>(1, 7);
      if (in.ConsumeIntegralInRange<int>(0, 31) == 0) column = in.ConsumeIntegral<uint32_t>();
      std::vector<uint32_t>* mine = c.Column(column);
      const uint64_t entries = c.Entries(column);
      uint64_t first = in.ConsumeIntegralInRange<uint64_t>(0, entries + 1);
      uint64_t count = in.ConsumeIntegralInRange<uint64_t>(0, entries + 1);
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) first = vyre_fuzz::InterestingU64(in);
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) count = vyre_fuzz::InterestingU64(in);
      // dst holds exactly `count` entries whenever the range fits the column
      // (one otherwise: the call must refuse before writing).
      const bool fits = first <= entries && count <= entries - first;
      std::vector<uint32_t> scratch(fits && count > 0 ? count : 1);
      uint32_t* dst = in.ConsumeIntegralInRange<int>(0, 31) == 0 ? nullptr : scratch.data();
      const vyre_status st = VYRE_FUZZ_CALL(vyre_egraph_image_read(
          image, static_cast<vyre_egraph_column>(column), first, count, dst));
      if (st != VYRE_STATUS_OK) continue;
      if (!fits) {
        vyre_fuzz::Fail("vyre_egraph_image_read accepted [%llu, +%llu) of a %llu-entry column",
                        static_cast<unsigned long long>(first),
                        static_cast<unsigned long long>(count),
                        static_cast<unsigned long long>(entries));
      }
      std::vector<uint32_t> got(scratch.begin(), scratch.begin() + count);
      if (column == VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES) {
        if (model_valid) {
          const std::vector<uint32_t> all = model.Canonical();
          ExpectSame(got, std::vector<uint32_t>(all.begin() + first, all.begin() + first + count),
                     "vyre_egraph_image_read(CANONICAL_CLASSES)");
        }
      } else if (column != VYRE_EGRAPH_COLUMN_ROW_SIGNATURES || signatures_known) {
        ExpectSame(got, std::vector<uint32_t>(mine->begin() + first, mine->begin() + first + count),
                   "vyre_egraph_image_read");
      }
    } else if (op <= 3) {
      // Write a column.
      uint32_t column = in.ConsumeIntegralInRange<uint32_t>(1, 7);
      if (in.ConsumeIntegralInRange<int>(0, 31) == 0) column = in.ConsumeIntegral<uint32_t>();
      std::vector<uint32_t>* mine = c.Column(column);
      const uint64_t entries = c.Entries(column);
      uint64_t first = in.ConsumeIntegralInRange<uint64_t>(0, entries + 1);
      uint64_t count = in.ConsumeIntegralInRange<uint64_t>(0, std::min<uint64_t>(entries + 1, 8));
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) first = vyre_fuzz::InterestingU64(in);
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) count = vyre_fuzz::InterestingU64(in);
      const bool fits = first <= entries && count <= entries - first;
      std::vector<uint32_t> values(fits ? count : 8);
      for (uint32_t& v : values) {
        if (column == VYRE_EGRAPH_COLUMN_ROW_CLASSES || column == VYRE_EGRAPH_COLUMN_CHILDREN) {
          v = ClassId(in, class_count);
        } else if (column == VYRE_EGRAPH_COLUMN_CHILD_OFFSETS && mine && first < mine->size()) {
          v = (*mine)[first] + in.ConsumeIntegralInRange<uint32_t>(0, 2) - 1;
        } else {
          v = in.ConsumeIntegralInRange<uint32_t>(0, 3);
        }
      }
      const uint32_t* src = in.ConsumeIntegralInRange<int>(0, 31) == 0 ? nullptr : values.data();
      const vyre_status st = VYRE_FUZZ_CALL(vyre_egraph_image_write(
          image, static_cast<vyre_egraph_column>(column), first, count, src));
      if (st != VYRE_STATUS_OK) continue;
      if (!fits || mine == nullptr) {
        vyre_fuzz::Fail(
            "vyre_egraph_image_write accepted [%llu, +%llu) of column %u (%llu "
            "entries)",
            static_cast<unsigned long long>(first), static_cast<unsigned long long>(count), column,
            static_cast<unsigned long long>(entries));
      }
      std::copy(values.begin(), values.end(), mine->begin() + first);
      // The columns must still be an e-graph the library would create.
      for (uint64_t r = 0; r < c.row_classes.size(); ++r) {
        if (c.row_classes[r] >= class_count ||
            uint64_t{c.offsets[r]} + c.lengths[r] > c.children.size() ||
            (r > 0 && c.offsets[r] < uint64_t{c.offsets[r - 1]} + c.lengths[r - 1])) {
          vyre_fuzz::Fail(
              "vyre_egraph_image_write left row %llu invalid (class %u, children "
              "[%u, +%u) of %zu)",
              static_cast<unsigned long long>(r), c.row_classes[r], c.offsets[r], c.lengths[r],
              c.children.size());
        }
      }
      for (uint32_t child : c.children) {
        if (child >= class_count)
          vyre_fuzz::Fail("vyre_egraph_image_write accepted class %u", child);
      }
    } else if (op <= 5) {
      // One pass.
      uint64_t capacity = in.ConsumeIntegralInRange<uint64_t>(0, 16);
      if (in.ConsumeBool()) capacity = most_pairs;
      // Exactly `capacity` pairs.
      std::vector<uint32_t> scratch(capacity * 2 + (capacity == 0));
      uint32_t* pairs = scratch.data();
      if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
        pairs = nullptr;
        capacity = in.ConsumeBool() ? 0 : capacity;
      }
      uint64_t count = 0xFEFE;
      const vyre_status st = VYRE_FUZZ_CALL(vyre_egraph_pass(image, pairs, capacity, &count));
      if (!model_valid) continue;
      const std::vector<uint32_t> want = ModelPairs(c, model);
      if (st == VYRE_STATUS_OK) {
        if (count * 2 != want.size()) {
          vyre_fuzz::Fail("vyre_egraph_pass: %llu pairs, model %zu",
                          static_cast<unsigned long long>(count), want.size() / 2);
        }
        if (pairs != nullptr && count > capacity) {
          vyre_fuzz::Fail("vyre_egraph_pass: OK with %llu pairs for a capacity of %llu",
                          static_cast<unsigned long long>(count),
                          static_cast<unsigned long long>(capacity));
        }
        if (pairs != nullptr) {
          ExpectSame(std::vector<uint32_t>(scratch.begin(), scratch.begin() + count * 2), want,
                     "vyre_egraph_pass pairs");
        }
      } else if (st == VYRE_STATUS_OUT_OF_RANGE && count * 2 != want.size()) {
        vyre_fuzz::Fail(
            "vyre_egraph_pass refused for capacity %llu and said %llu pairs are "
            "needed; the model has %zu",
            static_cast<unsigned long long>(capacity), static_cast<unsigned long long>(count),
            want.size() / 2);
      }
    } else if (op <= 8) {
      // A rebuild, synchronous or not.
      std::vector<uint32_t> unions(2 * in.ConsumeIntegralInRange<size_t>(0, 4));
      for (uint32_t& u : unions) u = ClassId(in, class_count);
      vyre_egraph_rebuild_desc rd = VYRE_EGRAPH_REBUILD_DESC_INIT;
      rd.unions = unions.empty() ? nullptr : unions.data();
      rd.union_count = unions.size() / 2;
      if (in.ConsumeIntegralInRange<int>(0, 31) == 0) {
        rd.unions = nullptr;
        rd.union_count = vyre_fuzz::InterestingU64(in);
      }
      switch (in.ConsumeIntegralInRange<int>(0, 7)) {
        case 0:
          rd.flags = VYRE_EGRAPH_REBUILD_RESET;
          break;
        case 1:
          rd.flags = VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
          break;
        case 2:
          rd.flags = VYRE_EGRAPH_REBUILD_DEVICE_TIMING;
          break;
        case 3:
          rd.flags = in.ConsumeIntegral<uint32_t>();
          break;
        default:
          break;
      }
      rd.max_rounds =
          in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegralInRange<uint32_t>(1, 3) : 0;
      std::vector<uint32_t> canonical(class_count, 0xFFFFFFFFu);
      rd.canonical_out = in.ConsumeBool() ? canonical.data() : nullptr;
      vyre_egraph_rebuild_result result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
      rd.result_out = in.ConsumeBool() ? &result : nullptr;
      vyre_status st;
      if (op == 8) {
        vyre_pending pending{0};
        st = VYRE_FUZZ_CALL(vyre_egraph_rebuild_async(image, &rd, &pending));
        if (st == VYRE_STATUS_OK) {
          if (in.ConsumeBool()) {
            st = VYRE_FUZZ_CALL(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
          } else {
            rd.canonical_out = nullptr;  // released without a wait: nothing written
          }
          VYRE_FUZZ_EXPECT(vyre_pending_release(pending), VYRE_STATUS_OK);
        }
      } else if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
        // No descriptor: no unions, no flags, no round limit.
        unions.clear();
        rd = VYRE_EGRAPH_REBUILD_DESC_INIT;
        st = VYRE_FUZZ_CALL(
            vyre_egraph_rebuild(image, nullptr, in.ConsumeBool() ? &result : nullptr));
      } else {
        st = VYRE_FUZZ_CALL(vyre_egraph_rebuild(image, &rd, in.ConsumeBool() ? &result : nullptr));
      }
      if (st != VYRE_STATUS_OK) continue;
      if (model_ok && rd.max_rounds == 0 && (rd.flags & VYRE_EGRAPH_REBUILD_RESET)) {
        model_valid = true;
      }
      if (!model_valid) continue;
      if (rd.max_rounds != 0) {
        model_valid = false;  // stopped short of the fixpoint: not modelled
        continue;
      }
      if (rd.flags & VYRE_EGRAPH_REBUILD_RESET) model.Reset();
      for (size_t i = 0; i < rd.union_count; ++i) model.Union(unions[2 * i], unions[2 * i + 1]);
      model.Close(c.row_classes, c.row_ops, c.offsets, c.lengths, c.children);
      if (rd.canonical_out != nullptr) {
        ExpectSame(canonical, model.Canonical(), "rebuild canonical_out");
      }
    } else {
      vyre_egraph_image_info info = VYRE_EGRAPH_IMAGE_INFO_INIT;
      if (VYRE_FUZZ_CALL(vyre_egraph_image_info_get(image, &info)) != VYRE_STATUS_OK) continue;
      if (info.row_count != row_count || info.class_count != class_count ||
          info.child_count != child_count || info.device != device) {
        vyre_fuzz::Fail(
            "vyre_egraph_image_info_get: %llu rows, %llu classes, %llu children; "
            "created with %llu, %llu, %llu",
            static_cast<unsigned long long>(info.row_count),
            static_cast<unsigned long long>(info.class_count),
            static_cast<unsigned long long>(info.child_count),
            static_cast<unsigned long long>(row_count),
            static_cast<unsigned long long>(class_count),
            static_cast<unsigned long long>(child_count));
      }
      if (model_valid) {
        std::vector<uint32_t> all = model.Canonical();
        std::sort(all.begin(), all.end());
        const uint64_t distinct = std::unique(all.begin(), all.end()) - all.begin();
        if (info.canonical_class_count != distinct) {
          vyre_fuzz::Fail("vyre_egraph_image_info_get: %llu canonical classes, model %llu",
                          static_cast<unsigned long long>(info.canonical_class_count),
                          static_cast<unsigned long long>(distinct));
        }
      }
    }
  }
  VYRE_FUZZ_EXPECT(vyre_egraph_image_destroy(image), VYRE_STATUS_OK);
  VYRE_FUZZ_EXPECT(vyre_egraph_image_destroy(image), VYRE_STATUS_STALE_HANDLE);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vyre_fuzz::SetUpEnvironment();
  g_context = vyre_fuzz::MakeContext();
  g_misuse = vyre_fuzz::FakeMisuseCount();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  RunOne(in);
  vyre_fuzz::ExpectNoMisuse(g_misuse, "the e-graph calls");
  return 0;
}
