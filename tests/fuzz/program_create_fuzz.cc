// Fuzzes vyre_program_create on the fake driver: every descriptor field
// (struct sizes, code kind including values outside the enum, code_size,
// entry names that are huge, cut by a NUL or not UTF-8, binding declarations
// with their own struct sizes, kernel parameters, workgroup, shared memory,
// compile options) and the code bytes: the test kernels' PTX, sm_90 cubin and
// fatbin with fuzzed cuts and header patches, CUDA source, raw bytes.
//
// Host memory rules kept (the caller's side of the contract): every pointer
// passed is valid for exactly what its count says (heap arrays of that size,
// so ASan reports a read past them), up to a little over the library's own
// limits (4096 bindings, 1024 parameters); a larger count comes only with a
// NULL pointer.
//
// Checks: the outcome rules of fuzz_support.h; a failed create leaves *out
// {0}; a created program destroys once (then STALE_HANDLE); no program
// outlives its handle; the fake driver sees no misuse (an image the library
// hands it that is not whole shows up as an ASan read past the copy).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "vyre_cuda.h"

extern const char vyre_test_kernels_ptx[];
extern const unsigned char vyre_test_kernels_cubin[];
extern const size_t vyre_test_kernels_cubin_size;
extern const unsigned char vyre_test_kernels_fatbin[];
extern const size_t vyre_test_kernels_fatbin_size;

namespace {

constexpr size_t kMaxStride = 256;     // largest binding struct_size passed
constexpr size_t kMaxBindings = 4100;  // the library allows 4096
constexpr size_t kMaxParams = 1030;    // the library allows 1024

vyre_context g_context{0};
uint64_t g_module_loads_start = 0;

const char* const kEntries[] = {
    "vyre_test_add_u32",      "vyre_test_inc_u32",      "vyre_test_saxpy_f32",
    "vyre_test_noop_out_u32", "vyre_test_probe_params", "vyre_selftest_add_u32",
    "no_such_kernel",         "vyre_test_add_u3",       "vyre_test_add_u32x",
};

uint64_t ModuleLoads(vyre_context context) {
  vyre_telemetry t = VYRE_TELEMETRY_INIT;
  VYRE_FUZZ_EXPECT(vyre_context_telemetry(context, &t), VYRE_STATUS_OK);
  return t.module_loads;
}

template <typename T>
void Store(std::string* code, size_t at, T value) {
  if (at > code->size() || sizeof(T) > code->size() - at) return;
  std::memcpy(&(*code)[at], &value, sizeof(T));
}

// The code bytes (the size passed is chosen later).
std::string MakeCode(FuzzedDataProvider& in) {
  std::string code;
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0:
      code = vyre_test_kernels_ptx;
      break;
    case 1:
      code.assign(reinterpret_cast<const char*>(vyre_test_kernels_cubin),
                  vyre_test_kernels_cubin_size);
      break;
    case 2:
      code.assign(reinterpret_cast<const char*>(vyre_test_kernels_fatbin),
                  vyre_test_kernels_fatbin_size);
      break;
    case 3:
      code = in.ConsumeRandomLengthString(4096);
      break;
    case 4:
      code =
          "extern \"C\" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b, "
          "unsigned* out, const unsigned* p) { unsigned i = threadIdx.x; if (i < p[0]) out[i] "
          "= a[i] + b[i]; }\n" +
          in.ConsumeRandomLengthString(256);
      break;
    case 5: {
      // PTX-looking text whose entries the fake driver finds.
      code = ".version 8.0\n.target sm_90\n.address_size 64\n";
      const int entries = in.ConsumeIntegralInRange<int>(0, 3);
      for (int i = 0; i < entries; ++i) {
        code += ".visible .entry ";
        code += in.ConsumeBool() ? kEntries[in.ConsumeIntegralInRange<size_t>(0, 8)]
                                 : in.ConsumeRandomLengthString(32);
        code += "(\n.param .u64 p0\n)\n{\nret;\n}\n";
      }
      code += in.ConsumeRandomLengthString(64);
      break;
    }
    default: {
      // A valid magic followed by fuzz bytes.
      static const char kElf[] =
          "\x7f"
          "ELF\x02\x01\x01";
      static const char kFatbin[] = "\x50\xed\x55\xba\x01\x00\x10\x00";
      code = in.ConsumeBool() ? std::string(kElf, 7) : std::string(kFatbin, 8);
      code += in.ConsumeRandomLengthString(512);
      break;
    }
  }
  // Mutations: cuts, byte and field patches (header fields of an ELF or a
  // fatbin are 16-, 32- and 64-bit), NULs, appended bytes.
  const int mutations = in.ConsumeIntegralInRange<int>(0, 6);
  for (int m = 0; m < mutations && !code.empty(); ++m) {
    const size_t at = in.ConsumeIntegralInRange<size_t>(0, code.size() - 1);
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
        code.resize(at);
        break;
      case 1:
        code[at] = static_cast<char>(in.ConsumeIntegral<uint8_t>());
        break;
      case 2:
        Store<uint16_t>(&code, at, static_cast<uint16_t>(vyre_fuzz::InterestingU32(in)));
        break;
      case 3:
        Store<uint32_t>(&code, at, vyre_fuzz::InterestingU32(in));
        break;
      case 4:
        Store<uint64_t>(&code, at, vyre_fuzz::InterestingU64(in));
        break;
      case 5:
        code[at] = '\0';
        break;
      default:
        code += in.ConsumeRandomLengthString(64);
        break;
    }
  }
  return code;
}

// The fake driver's test hook "fake-jit-log-bytes: <n>" in PTX makes it
// build a JIT log of n bytes in its own memory before cutting it to the
// library's log buffer; a fuzzed n near 2^64 only exhausts the fake, which a
// real driver never does. Above 1 MiB (past any log buffer the library
// passes) the hook is disarmed: its first letter is changed.
void DisarmHugeFakeJitLogs(std::vector<char>* bytes) {
  static constexpr char kHook[] = "fake-jit-log-bytes: ";
  constexpr size_t kHookLength = sizeof kHook - 1;
  for (size_t at = 0; at + kHookLength <= bytes->size(); ++at) {
    if (std::memcmp(bytes->data() + at, kHook, kHookLength) != 0) continue;
    // As the fake reads it: strtoull from after the hook, up to a NUL.
    std::string number(bytes->data() + at + kHookLength,
                       strnlen(bytes->data() + at + kHookLength, bytes->size() - at - kHookLength));
    if (std::strtoull(number.c_str(), nullptr, 10) > (uint64_t{1} << 20)) (*bytes)[at] = 'F';
  }
}

// `names` must have room reserved: its strings' addresses are kept.
vyre_binding_decl MakeDecl(FuzzedDataProvider& in, std::vector<std::string>* names) {
  vyre_binding_decl d = VYRE_BINDING_DECL_INIT;
  const int role = in.ConsumeIntegralInRange<int>(0, 9);
  d.role = static_cast<vyre_binding_role>(role <= 4 ? role
                                          : role <= 7
                                              ? (role - 4)
                                              : static_cast<int>(in.ConsumeIntegral<uint32_t>()));
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      d.name = nullptr;
      break;
    case 1:
      d.name = "a";
      break;
    default:
      names->push_back(vyre_fuzz::FuzzName(in, 4096));
      d.name = names->back().c_str();
      break;
  }
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      d.element_size = 4;
      break;
    case 1:
      d.element_size = in.ConsumeIntegralInRange<uint32_t>(0, 16);
      break;
    default:
      d.element_size = vyre_fuzz::InterestingU32(in);
      break;
  }
  d.element_count = in.ConsumeBool() ? 0 : vyre_fuzz::InterestingU64(in);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    d.output_offset = vyre_fuzz::InterestingU64(in);
    d.output_length = vyre_fuzz::InterestingU64(in);
  }
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) d.reserved0 = in.ConsumeIntegral<uint32_t>();
  return d;
}

uint32_t PickStructSize(FuzzedDataProvider& in, uint32_t ours, uint32_t max) {
  return vyre_fuzz::PickStructSize(in, ours, max, 9);
}

void RunOne(FuzzedDataProvider& in) {
  // --- code ------------------------------------------------------------------
  int32_t code_kind;
  const int kind_choice = in.ConsumeIntegralInRange<int>(0, 15);
  if (kind_choice < 12) {
    code_kind = 1 + kind_choice % 3;
  } else if (kind_choice < 14) {
    code_kind = kind_choice == 12 ? 0 : 4;
  } else {
    code_kind = static_cast<int32_t>(in.ConsumeIntegral<uint32_t>());
  }
  const std::string code = MakeCode(in);
  // The bytes the library may read: the code, then up to 16 bytes of padding
  // (NULs, or fuzz bytes), always ending in a NUL so code_size 0 finds one.
  const size_t padding = in.ConsumeIntegralInRange<size_t>(1, 16);
  std::vector<char> code_bytes(code.size() + padding, '\0');
  std::memcpy(code_bytes.data(), code.data(), code.size());
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    for (size_t i = code.size(); i + 1 < code_bytes.size(); ++i) {
      code_bytes[i] = static_cast<char>(in.ConsumeIntegral<uint8_t>());
    }
  }
  DisarmHugeFakeJitLogs(&code_bytes);
  size_t code_size;
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      code_size = 0;
      break;
    case 1:
    case 2:
      code_size = code.size();
      break;
    case 3:
      code_size = code.size() + in.ConsumeIntegralInRange<size_t>(0, padding);
      break;
    default:
      code_size = in.ConsumeIntegralInRange<size_t>(0, code_bytes.size());
      break;
  }

  // --- bindings -----------------------------------------------------------------
  std::vector<std::string> names;
  names.reserve(8);  // at most 8 fuzzed declarations: the c_str()s stay put
  size_t binding_count;
  bool bindings_null = false;
  const int count_choice = in.ConsumeIntegralInRange<int>(0, 31);
  if (count_choice < 24) {
    binding_count = in.ConsumeIntegralInRange<size_t>(0, 6);
  } else if (count_choice < 28) {
    binding_count = 4095 + static_cast<size_t>(in.ConsumeIntegralInRange<int>(0, 3));
  } else {
    binding_count = static_cast<size_t>(vyre_fuzz::InterestingU64(in));
    bindings_null = binding_count > kMaxBindings;
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) bindings_null = true;
  const size_t decls_made = bindings_null ? 0 : std::min(binding_count, kMaxBindings);
  const uint32_t ours = sizeof(vyre_binding_decl);
  const uint32_t stride = PickStructSize(in, ours, kMaxStride);
  // Exactly the caller's array: `decls_made` structs of `stride` bytes (at
  // least the first struct_size), so ASan reports any read past it.
  std::vector<unsigned char> decl_bytes(
      decls_made == 0 ? 0 : std::max<size_t>(decls_made * stride, sizeof(uint32_t)), 0);
  vyre_binding_decl last = VYRE_BINDING_DECL_INIT;
  for (size_t i = 0; i < decls_made; ++i) {
    // Past the first 8, declarations repeat the last fuzzed one (a 4096
    // binding program is a limit check, not 4096 fuzzed fields).
    vyre_binding_decl d = i < 8 ? MakeDecl(in, &names) : last;
    last = d;
    vyre_fuzz::WriteArrayEntry(in, d, i, stride, ours, kMaxStride, /*last_choice=*/9,
                               /*tail_byte=*/1, &decl_bytes);
  }
  // --- parameters ---------------------------------------------------------------
  std::vector<vyre_kernel_param> made_params(kMaxParams);
  size_t param_count;
  bool params_null = false;
  const int param_choice = in.ConsumeIntegralInRange<int>(0, 15);
  if (param_choice < 6) {
    param_count = 0;
  } else if (param_choice < 13) {
    param_count = in.ConsumeIntegralInRange<size_t>(1, 6);
  } else if (param_choice < 15) {
    param_count = 1023 + static_cast<size_t>(in.ConsumeIntegralInRange<int>(0, 3));
  } else {
    param_count = static_cast<size_t>(vyre_fuzz::InterestingU64(in));
    params_null = param_count > kMaxParams;
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) params_null = true;
  for (size_t i = 0; i < std::min(param_count, kMaxParams); ++i) {
    if (i >= 8) {
      made_params[i] = made_params[i % 8];
      continue;
    }
    const int kind = in.ConsumeIntegralInRange<int>(0, 7);
    made_params[i].kind = static_cast<vyre_param_kind>(
        kind <= 5 ? kind : static_cast<int>(in.ConsumeIntegral<uint32_t>()));
    made_params[i].index = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 8)
                                            : vyre_fuzz::InterestingU32(in);
  }
  // Exactly param_count entries (never more than kMaxParams unless NULL).
  const std::vector<vyre_kernel_param> params(
      made_params.begin(),
      made_params.begin() + (params_null ? 0 : std::min(param_count, kMaxParams)));

  // --- compile options ------------------------------------------------------------
  std::vector<std::string> option_text;
  std::vector<const char*> options;
  const size_t option_count = in.ConsumeIntegralInRange<size_t>(0, 4);
  option_text.reserve(option_count);
  for (size_t i = 0; i < option_count; ++i) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:
        options.push_back(nullptr);
        break;
      case 1:
        options.push_back("-std=c++17");
        break;
      case 2:
        options.push_back("--gpu-architecture=compute_90");
        break;
      default:
        option_text.push_back(vyre_fuzz::FuzzName(in, 8192));
        options.push_back(option_text.back().c_str());
        break;
    }
  }
  const bool options_null = in.ConsumeIntegralInRange<int>(0, 15) == 0;

  // --- entry --------------------------------------------------------------------
  std::string entry_text;
  const char* entry;
  const int entry_choice = in.ConsumeIntegralInRange<int>(0, 15);
  if (entry_choice < 9) {
    entry = kEntries[entry_choice];
  } else if (entry_choice == 9) {
    entry = nullptr;
  } else if (entry_choice == 10) {
    entry = "";
  } else if (entry_choice == 11) {
    // Huge: up to 1 MiB.
    entry_text.assign(in.ConsumeIntegralInRange<size_t>(1000, 1 << 20), 'k');
    entry = entry_text.c_str();
  } else if (entry_choice == 12) {
    // A real name with a NUL inside (C stops at it) or bytes after it.
    entry_text = std::string("vyre_test_add_u32\0tail", 22);
    entry = entry_text.c_str();
  } else {
    entry_text = vyre_fuzz::FuzzName(in, 70000);
    entry = entry_text.c_str();
  }

  // --- descriptor -----------------------------------------------------------------
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = static_cast<vyre_code_kind>(code_kind);
  desc.code = in.ConsumeIntegralInRange<int>(0, 31) == 0 ? nullptr : code_bytes.data();
  desc.code_size = code_size;
  desc.entry = entry;
  desc.bindings =
      bindings_null ? nullptr : reinterpret_cast<const vyre_binding_decl*>(decl_bytes.data());
  desc.binding_count = binding_count;
  for (int axis = 0; axis < 3; ++axis) {
    const int choice = in.ConsumeIntegralInRange<int>(0, 3);
    desc.workgroup_size[axis] = choice == 0   ? (axis == 0 ? 256u : 0u)
                                : choice == 1 ? in.ConsumeIntegralInRange<uint32_t>(0, 2048)
                                              : vyre_fuzz::InterestingU32(in);
  }
  desc.shared_memory_bytes = in.ConsumeBool() ? 0 : vyre_fuzz::InterestingU32(in);
  desc.params = params_null ? nullptr : params.data();
  desc.param_count = param_count;
  desc.compile_options = options_null ? nullptr : options.data();
  desc.compile_option_count = options.size();
  if (options_null && in.ConsumeBool()) desc.compile_option_count = 0;
  const uint32_t desc_size = PickStructSize(in, sizeof desc, 512);
  desc.struct_size = desc_size;
  // The caller's struct: `desc_size` bytes, possibly more than ours.
  std::vector<unsigned char> desc_bytes(std::max<size_t>(desc_size, sizeof desc), 0);
  std::memcpy(desc_bytes.data(), &desc, sizeof desc);
  if (desc_size > sizeof desc && in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    desc_bytes[in.ConsumeIntegralInRange<size_t>(sizeof desc, desc_size - 1)] = 0x5A;
  }

  vyre_context context = g_context;
  switch (in.ConsumeIntegralInRange<int>(0, 31)) {
    case 0:
      context.bits = 0;
      break;
    case 1:
      context.bits ^= uint64_t{1} << in.ConsumeIntegralInRange<int>(0, 63);
      break;
    case 2:
      context.bits = in.ConsumeIntegral<uint64_t>();
      break;
    default:
      break;
  }
  const bool out_null = in.ConsumeIntegralInRange<int>(0, 31) == 0;

  // --- the call -------------------------------------------------------------------
  const vyre_fuzz::LiveObjects live = vyre_fuzz::Live(g_context);
  const uint64_t misuse = vyre_fuzz::FakeMisuseCount();
  vyre_program program{0xABCDEFull};
  const vyre_status status = VYRE_FUZZ_CALL(
      vyre_program_create(context, reinterpret_cast<const vyre_program_desc*>(desc_bytes.data()),
                          out_null ? nullptr : &program));
  if (status == VYRE_STATUS_OK) {
    if (out_null) vyre_fuzz::Fail("vyre_program_create returned OK with a NULL out");
    if (program.bits == 0) vyre_fuzz::Fail("vyre_program_create returned OK and the 0 handle");
    VYRE_FUZZ_EXPECT(vyre_program_destroy(program), VYRE_STATUS_OK);
    VYRE_FUZZ_EXPECT(vyre_program_destroy(program), VYRE_STATUS_STALE_HANDLE);
  } else if (!out_null && program.bits != 0) {
    vyre_fuzz::Fail("vyre_program_create failed (%s) but left *out = 0x%llx, not {0}",
                    vyre_status_name(status), static_cast<unsigned long long>(program.bits));
  }
  vyre_fuzz::ExpectNoMisuse(misuse, "vyre_program_create");
  vyre_fuzz::ExpectLive(g_context, live, "vyre_program_create and vyre_program_destroy");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vyre_fuzz::SetUpEnvironment();
  g_context = vyre_fuzz::MakeContext();
  g_module_loads_start = ModuleLoads(g_context);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  RunOne(in);
  // The module cache keeps every distinct module the context loaded for the
  // context's life (it has no eviction), so a long run on one context grows
  // without bound: start a fresh context now and then.
  if (ModuleLoads(g_context) - g_module_loads_start > 256) {
    VYRE_FUZZ_EXPECT(vyre_context_destroy(g_context), VYRE_STATUS_OK);
    g_context = vyre_fuzz::MakeContext();
    g_module_loads_start = ModuleLoads(g_context);
  }
  return 0;
}
