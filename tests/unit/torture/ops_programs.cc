// The torture operations on programs: create (the test kernels, or random
// declarations on a kernel that touches nothing, with malformed shapes,
// entries, code and descriptors) and destroy.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {
namespace {

vyre_binding_decl RandomDecl(Rng* rng, bool* well_formed) {
  vyre_binding_decl d = VYRE_BINDING_DECL_INIT;
  if (rng->Chance(0.85)) {
    SetRawEnum(&d.role, uint32_t(rng->Range(1, 4)));
  } else {
    SetRawEnum(&d.role, RandomBadEnum(rng));
    *well_formed = false;
  }
  static const std::vector<uint32_t> kSizes = {0, 1, 4, 4, 8};
  d.element_size = rng->Pick(kSizes);
  if (d.element_size == 0) *well_formed = false;
  d.name = rng->Chance(0.5) ? "torture" : nullptr;
  if (rng->Chance(0.3)) d.element_count = rng->Below(300);
  if (rng->Chance(0.2)) d.output_offset = rng->Below(512);
  if (rng->Chance(0.2)) d.output_length = rng->Below(512);
  if (RoleOf(d) == VYRE_ROLE_SHARED && d.element_count * d.element_size > 48 * 1024) {
    *well_formed = false;
  }
  return d;
}

// Random declarations on a kernel that touches nothing (the fake runs
// vyre_test_noop_out_u32 as a no-op), so any binding set is harmless.
void RandomDeclarations(Rng* rng, ProgramSpec* spec, bool* well_formed) {
  *spec = NoopOutSpec();
  spec->bindings.clear();
  size_t count = size_t(rng->Below(5));
  for (size_t i = 0; i < count; ++i) spec->bindings.push_back(RandomDecl(rng, well_formed));
  if (rng->Chance(0.2)) {
    // An explicit parameter list, sometimes with bad kinds or indices.
    size_t params = size_t(rng->Below(4));
    for (size_t i = 0; i < params; ++i) {
      vyre_kernel_param p{};
      SetRawEnum(&p.kind, rng->Chance(0.8) ? uint32_t(rng->Range(1, 5)) : RandomBadEnum(rng));
      p.index = uint32_t(rng->Chance(0.8) ? rng->Below(4) : rng->Bits());
      spec->params.push_back(p);
    }
    *well_formed = false;  // indices may be out of range
  }
}

void RandomKernel(Rng* rng, ProgramSpec* spec, KernelKind* kind, bool* well_formed) {
  switch (rng->Below(6)) {
    case 0:
    case 1:
      *spec = AddSpec();
      *kind = KernelKind::kAdd;
      if (rng->Chance(0.3)) {  // read back only part of `out`
        spec->bindings[2].output_offset = 4 * rng->Below(64);
        spec->bindings[2].output_length = 4 * rng->Below(64);
      }
      break;
    case 2:
      *spec = IncSpec();
      *kind = KernelKind::kInc;
      break;
    default:
      RandomDeclarations(rng, spec, well_formed);
      break;
  }
}

void RandomizeWorkgroup(Rng* rng, ProgramSpec* spec, bool* well_formed) {
  if (rng->Chance(0.15)) {
    static const std::vector<std::array<uint32_t, 3>> kShapes = {
        {0, 1, 1}, {1, 1, 1}, {32, 0, 0}, {1024, 1, 1}, {1025, 1, 1}, {512, 2, 1},
        {1024, 2, 1}, {1, 1, 65}, {64, 4, 4}, {UINT32_MAX, 1, 1}, {7, 3, 0}};
    const auto& shape = rng->Pick(kShapes);
    std::copy(shape.begin(), shape.end(), spec->workgroup);
    uint64_t threads = uint64_t{shape[0]} * (shape[1] ? shape[1] : 1) * (shape[2] ? shape[2] : 1);
    if (shape[0] == 0 || shape[0] > 1024 || shape[1] > 1024 || shape[2] > 64 || threads > 1024) {
      *well_formed = false;
    }
  }
  if (rng->Chance(0.05)) {
    spec->shared_memory_bytes =
        uint32_t(rng->Chance(0.5) ? rng->Below(1024) : rng->Range(49153, 1 << 20));
    if (spec->shared_memory_bytes > 48 * 1024) *well_formed = false;
  }
}

// The entry point to pass: `*entry`, another name, or NULL.
const char* RandomEntry(Rng* rng, std::string* entry, bool* well_formed) {
  const char* entry_ptr = entry->c_str();
  switch (rng->Below(25)) {
    case 0: entry_ptr = nullptr; *well_formed = false; break;
    case 1: *entry = "vyre_no_such_kernel"; entry_ptr = entry->c_str(); *well_formed = false; break;
    case 2: *entry = ""; entry_ptr = entry->c_str(); *well_formed = false; break;
    default: break;
  }
  return entry_ptr;
}

void RandomizeCode(Rng* rng, vyre_program_desc* desc, std::string* garbage, bool* well_formed) {
  switch (rng->Below(25)) {
    case 0: desc->code = nullptr; *well_formed = false; break;
    case 1:
      desc->code = garbage->data();
      desc->code_size = garbage->size();
      *well_formed = false;
      break;
    case 2: SetRawEnum(&desc->code_kind, RandomBadEnum(rng)); *well_formed = false; break;
    case 3:
      SetRawEnum(&desc->code_kind, VYRE_CODE_BINARY);
      desc->code = garbage->data();
      desc->code_size = garbage->size();
      *well_formed = false;
      break;
    default: break;
  }
}

// Bindings: NULL with a count, or strided by an unusual struct_size
// (backed by enough zeroed memory for the stride).
void RandomizeBindings(Rng* rng, ProgramSpec* spec, const char* entry_ptr,
                       vyre_program_desc* desc, std::vector<uint8_t>* strided,
                       bool* well_formed) {
  switch (rng->Below(20)) {
    case 0: desc->bindings = nullptr; *well_formed = false; break;
    case 1:
    case 2: {
      uint32_t stride = sizeof(vyre_binding_decl) + 8 * uint32_t(rng->Range(1, 4));
      bool dirty = rng->Chance(0.3);
      strided->assign(stride * spec->bindings.size(), 0);
      for (size_t i = 0; i < spec->bindings.size(); ++i) {
        vyre_binding_decl d = spec->bindings[i];
        d.struct_size = stride;
        std::memcpy(strided->data() + i * stride, &d, sizeof(d));
        if (dirty) (*strided)[i * stride + sizeof(d)] = 1;
      }
      if (dirty) *well_formed = false;
      desc->bindings = reinterpret_cast<const vyre_binding_decl*>(strided->data());
      break;
    }
    case 3: spec->bindings[0].struct_size = 8; *desc = spec->Desc(); desc->entry = entry_ptr;
            *well_formed = false; break;
    default: break;
  }
}

}  // namespace

void Torture::ProgramCreate() {
  if (pop_.programs.size() >= kMaxPrograms) {
    ProgramDestroy();
    return;
  }
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  ProgramSpec spec;
  KernelKind kind = KernelKind::kOther;
  bool well_formed = true;
  RandomKernel(&rng_, &spec, &kind, &well_formed);
  // Workgroup, shared memory, entry and code variations.
  RandomizeWorkgroup(&rng_, &spec, &well_formed);
  std::string entry = spec.entry;
  const char* entry_ptr = RandomEntry(&rng_, &entry, &well_formed);
  vyre_program_desc desc = spec.Desc();
  desc.entry = entry_ptr;
  std::string garbage = "this is not PTX";
  RandomizeCode(&rng_, &desc, &garbage, &well_formed);
  std::vector<uint8_t> strided;
  if (!spec.bindings.empty()) {
    RandomizeBindings(&rng_, &spec, entry_ptr, &desc, &strided, &well_formed);
  }
  WithTail<vyre_program_desc> outer{desc, {}};
  RandomizeStructSize(&rng_, &outer, &well_formed);
  bool null_out = rng_.Chance(0.03);
  bool null_desc = rng_.Chance(0.03);
  if (null_out || null_desc || choice != HandleChoice::kValid) well_formed = false;
  vyre_program out{0};
  vyre_status s = Check(vyre_program_create(context, null_desc ? nullptr : &outer.value,
                                            null_out ? nullptr : &out),
                        "vyre_program_create");
  ExpectNotOk(s, choice, "vyre_program_create");
  if (well_formed && kind != KernelKind::kOther) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_program_create");
  }
  if (s != VYRE_STATUS_OK) return;
  if (null_out || null_desc) {
    Fail("vyre_program_create accepted a NULL pointer");
    return;
  }
  ProgramState p;
  p.handle = out;
  p.context = context.bits;
  p.kind = kind;
  p.decls = spec.bindings;
  p.workgroup[0] = spec.workgroup[0];
  p.workgroup[1] = spec.workgroup[1] ? spec.workgroup[1] : 1;
  p.workgroup[2] = spec.workgroup[2] ? spec.workgroup[2] : 1;
  pop_.programs.push_back(std::move(p));
}

void Torture::ProgramDestroy() {
  int index;
  HandleChoice choice;
  vyre_program program{PickProgramHandle(&index, &choice)};
  vyre_status s = Check(vyre_program_destroy(program), "vyre_program_destroy");
  ExpectNotOk(s, choice, "vyre_program_destroy");
  if (choice == HandleChoice::kValid) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_program_destroy");
    RememberDead(&pop_.dead_programs, program.bits, &rng_);
    pop_.programs.erase(pop_.programs.begin() + index);
  }
}

}  // namespace torture
}  // namespace vyre_test
