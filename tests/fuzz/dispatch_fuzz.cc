// Fuzzes dispatch on the fake driver: vyre_dispatch, vyre_dispatch_async
// (then wait, poll, timing, release in fuzzed order) and vyre_graph_record
// plus one replay, with fuzzed binding arrays (struct sizes, sources, NULL
// and misaligned pointers into memory this target owns, lengths, offsets,
// buffers of this context, of another one, freed or forged), shapes (grid,
// block, element_count), flags, fixpoint iterations, parameter words and
// scalars, against programs and resident buffers made once.
//
// Host memory rules kept: every host pointer is valid for the length it comes
// with (host_bytes lie inside a 1 MiB arena or a pinned one from
// vyre_host_alloc); the binding, word and scalar arrays hold exactly what
// their counts say, on the heap, so ASan reports a read past them (a larger
// count comes only with a NULL pointer). The kernels the fake driver runs
// read params[0] (add, inc) or a scalar (saxpy) elements, so those are
// clamped to what every binding holds: a kernel reading past its arguments
// is the caller's bug, not the library's.
//
// Checks: the outcome rules of fuzz_support.h; no misuse seen by the fake
// driver; no pending, graph or buffer outlives its handle; and for the add
// kernel over three distinct host ranges, out = a + b on the first params[0]
// elements and 0 after them (OUTPUT bindings are zeroed).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "descriptors.h"
#include "fuzz_support.h"
#include "vyre_cuda.h"

extern const char vyre_test_kernels_ptx[];

namespace {

constexpr size_t kArenaBytes = (1 << 20) + 64;
constexpr size_t kPinnedBytes = 256 << 10;
constexpr size_t kMaxStride = 256;
constexpr size_t kMaxBindingArray = 16;
constexpr size_t kMaxWords = 4096;
constexpr size_t kMaxScalars = 16;

enum Kernel { kAdd, kInc, kSaxpy, kNoop, kProbe };

struct FuzzProgram {
  vyre_program program{0};
  Kernel kernel;
  // Declared binding i -> the kernel argument it feeds (-1: SHARED).
  std::vector<int> argument_of;
  std::vector<vyre_binding_role> roles;
};

struct State {
  vyre_context context{0};
  vyre_context other_context{0};
  std::vector<FuzzProgram> programs;
  std::vector<vyre_buffer> buffers;
  std::vector<uint64_t> buffer_bytes;
  vyre_buffer other_buffer{0};  // on other_context
  vyre_buffer freed_buffer{0};  // stale
  unsigned char* arena = nullptr;
  unsigned char* pinned = nullptr;
  uint64_t max_grid_x = 0;  // the fake device's largest grid x
};
State* g = nullptr;

vyre_program MakeProgram(const char* entry, std::vector<vyre_binding_decl> decls,
                         std::vector<vyre_kernel_param> params) {
  vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
  desc.code_kind = VYRE_CODE_PTX;
  desc.code = vyre_test_kernels_ptx;
  desc.entry = entry;
  desc.bindings = decls.data();
  desc.binding_count = decls.size();
  desc.params = params.empty() ? nullptr : params.data();
  desc.param_count = params.size();
  desc.workgroup_size[0] = 256;
  vyre_program program{0};
  VYRE_FUZZ_EXPECT(vyre_program_create(g->context, &desc, &program), VYRE_STATUS_OK);
  return program;
}

void AddProgram(Kernel kernel, const char* entry, std::vector<vyre_binding_decl> decls,
                std::vector<vyre_kernel_param> params, std::vector<int> argument_of) {
  FuzzProgram p;
  p.kernel = kernel;
  p.argument_of = std::move(argument_of);
  for (const vyre_binding_decl& d : decls) p.roles.push_back(d.role);
  p.program = MakeProgram(entry, std::move(decls), std::move(params));
  g->programs.push_back(std::move(p));
}

void Setup() {
  using vyre_test::Decl;
  g = new State;
  g->context = vyre_fuzz::MakeContext();
  vyre_device_info device = VYRE_DEVICE_INFO_INIT;
  VYRE_FUZZ_EXPECT(vyre_device_info_get(0, &device), VYRE_STATUS_OK);
  g->max_grid_x = device.max_grid_dim[0];
  g->other_context = vyre_fuzz::MakeContext();
  AddProgram(kAdd, "vyre_test_add_u32",
             {Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
              Decl(VYRE_ROLE_OUTPUT, 4, "out")},
             {}, {0, 1, 2});
  AddProgram(kInc, "vyre_test_inc_u32", {Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "data")}, {}, {0});
  AddProgram(kSaxpy, "vyre_test_saxpy_f32",
             {Decl(VYRE_ROLE_INPUT, 4, "x"), Decl(VYRE_ROLE_INPUT_OUTPUT, 4, "y")},
             {{VYRE_PARAM_SCALAR32, 0},
              {VYRE_PARAM_BINDING, 0},
              {VYRE_PARAM_BINDING, 1},
              {VYRE_PARAM_SCALAR64, 1}},
             {0, 1});
  AddProgram(kNoop, "vyre_test_noop_out_u32", {Decl(VYRE_ROLE_OUTPUT, 4, "out")}, {}, {0});
  // A SHARED binding in slot 0: the dispatch's binding 0 is ignored, and its
  // struct_size must not set the stride of the array.
  {
    vyre_binding_decl shared = Decl(VYRE_ROLE_SHARED, 4, "scratch");
    shared.element_count = 16;
    AddProgram(kAdd, "vyre_test_add_u32",
               {shared, Decl(VYRE_ROLE_INPUT, 4, "a"), Decl(VYRE_ROLE_INPUT, 4, "b"),
                Decl(VYRE_ROLE_OUTPUT, 4, "out")},
               {}, {-1, 0, 1, 2});
  }
  // Declared counts and an output read-back range.
  {
    vyre_binding_decl a = Decl(VYRE_ROLE_INPUT, 4, "a");
    vyre_binding_decl b = Decl(VYRE_ROLE_INPUT, 4, "b");
    vyre_binding_decl out = Decl(VYRE_ROLE_OUTPUT, 4, "out");
    a.element_count = b.element_count = out.element_count = 64;
    out.output_offset = 16;
    out.output_length = 32;
    AddProgram(kAdd, "vyre_test_add_u32", {a, b, out}, {}, {0, 1, 2});
  }
  // Every explicit parameter kind (the fake records what arrives).
  AddProgram(kProbe, "vyre_test_probe_params", {Decl(VYRE_ROLE_INPUT, 8, "in")},
             {{VYRE_PARAM_SCALAR64, 0},
              {VYRE_PARAM_BINDING, 0},
              {VYRE_PARAM_SCALAR32, 1},
              {VYRE_PARAM_PARAM_WORDS, 0}},
             {1});
  // A null pointer parameter and 8-byte elements (the kernel runs nothing).
  AddProgram(kNoop, "vyre_test_noop_out_u32",
             {Decl(VYRE_ROLE_INPUT_OUTPUT, 8, "data"), Decl(VYRE_ROLE_OUTPUT, 1, "bytes")},
             {{VYRE_PARAM_NULL_POINTER, 0}, {VYRE_PARAM_PARAM_WORDS, 0}}, {-1, -1});

  for (uint64_t bytes :
       {uint64_t{4}, uint64_t{60}, uint64_t{256}, uint64_t{4096}, uint64_t{(64 << 10) + 12}}) {
    vyre_buffer b{0};
    VYRE_FUZZ_EXPECT(vyre_buffer_alloc(g->context, bytes, &b), VYRE_STATUS_OK);
    g->buffers.push_back(b);
    g->buffer_bytes.push_back(bytes);
  }
  VYRE_FUZZ_EXPECT(vyre_buffer_alloc(g->other_context, 4096, &g->other_buffer), VYRE_STATUS_OK);
  VYRE_FUZZ_EXPECT(vyre_buffer_alloc(g->context, 64, &g->freed_buffer), VYRE_STATUS_OK);
  VYRE_FUZZ_EXPECT(vyre_buffer_free(g->freed_buffer), VYRE_STATUS_OK);
  g->arena = static_cast<unsigned char*>(std::calloc(kArenaBytes, 1));
  void* pinned = nullptr;
  VYRE_FUZZ_EXPECT(vyre_host_alloc(g->context, kPinnedBytes, &pinned), VYRE_STATUS_OK);
  g->pinned = static_cast<unsigned char*>(pinned);
  std::memset(g->pinned, 0, kPinnedBytes);
}

uint32_t PickStructSize(FuzzedDataProvider& in, uint32_t ours, uint32_t max) {
  return vyre_fuzz::PickStructSize(in, ours, max, 11);
}

// A host range: [base + offset, +bytes) inside the arena or the pinned block.
struct HostRange {
  unsigned char* base = nullptr;
  uint64_t bytes = 0;
};

unsigned char* PickHost(FuzzedDataProvider& in, size_t* room) {
  const bool pinned = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  const size_t size = pinned ? kPinnedBytes : kArenaBytes;
  size_t offset;
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      offset = 0;
      break;
    case 1:
      offset = in.ConsumeIntegralInRange<size_t>(0, 64);  // misaligned too
      break;
    default:
      offset = in.ConsumeIntegralInRange<size_t>(0, size - 1);
      break;
  }
  *room = size - offset;
  return (pinned ? g->pinned : g->arena) + offset;
}

uint64_t PickBytes(FuzzedDataProvider& in, size_t room) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return 0;
    case 1:
      return std::min<uint64_t>(room, in.ConsumeIntegralInRange<uint64_t>(1, 16) * 4);
    case 2:
      return std::min<uint64_t>(room, in.ConsumeIntegralInRange<uint64_t>(0, 64));
    case 3:
      return room;
    default:
      return in.ConsumeIntegralInRange<uint64_t>(0, room);
  }
}

// What one binding binds, as far as the kernel's safety needs to know.
struct Bound {
  bool host = false;
  const unsigned char* input = nullptr;
  unsigned char* output = nullptr;
  uint64_t bytes = 0;  // host bytes, or the resident range's length (0: invalid)
};

vyre_dispatch_binding MakeBinding(FuzzedDataProvider& in, Bound* bound) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  const int source = in.ConsumeIntegralInRange<int>(0, 15);
  if (source < 7) {
    b.source = VYRE_SOURCE_HOST;
    size_t room_in = 0, room_out = 0;
    unsigned char* input = PickHost(in, &room_in);
    unsigned char* output =
        in.ConsumeIntegralInRange<int>(0, 3) == 0 ? input : PickHost(in, &room_out);
    if (output == input) room_out = room_in;
    b.host_bytes = PickBytes(in, std::min(room_in, room_out));
    b.host_input = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : input;
    b.host_output = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : output;
    bound->host = true;
    bound->input = static_cast<const unsigned char*>(b.host_input);
    bound->output = static_cast<unsigned char*>(b.host_output);
    bound->bytes = b.host_bytes;
  } else if (source < 14) {
    b.source = VYRE_SOURCE_RESIDENT;
    uint64_t size = 0;
    const int which = in.ConsumeIntegralInRange<int>(0, 11);
    if (which < static_cast<int>(g->buffers.size()) + 4) {
      const size_t i = static_cast<size_t>(which) % g->buffers.size();
      b.buffer = g->buffers[i];
      size = g->buffer_bytes[i];
    } else if (which == 9) {
      b.buffer = g->other_buffer;
    } else if (which == 10) {
      b.buffer = g->freed_buffer;
    } else {
      b.buffer.bits = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint64_t>();
    }
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        b.offset = 0;
        break;
      case 1:
        b.offset = in.ConsumeIntegralInRange<uint64_t>(0, 64);
        break;
      default:
        b.offset = vyre_fuzz::InterestingU64(in);
        break;
    }
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        b.length = 0;
        break;
      case 1:
        b.length = in.ConsumeIntegralInRange<uint64_t>(0, 64) * 4;
        break;
      default:
        b.length = vyre_fuzz::InterestingU64(in);
        break;
    }
    if (size > 0 && b.offset <= size) {
      const uint64_t length = b.length ? b.length : size - b.offset;
      if (length <= size - b.offset) bound->bytes = length;
    }
  } else {
    b.source =
        static_cast<vyre_binding_source>(in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint32_t>());
  }
  return b;
}

void CheckAdd(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
              const unsigned char* out, uint64_t out_bytes, uint32_t n) {
  const uint64_t elements = out_bytes / 4;
  for (uint64_t i = 0; i < elements; ++i) {
    uint32_t got;
    std::memcpy(&got, out + i * 4, 4);
    const uint32_t want = i < n ? a[i] + b[i] : 0;
    if (got != want) {
      vyre_fuzz::Fail(
          "add kernel over host bindings: out[%llu] = %u, expected %u (n = %u, %llu "
          "output elements)",
          static_cast<unsigned long long>(i), got, want, n,
          static_cast<unsigned long long>(elements));
    }
  }
}

bool Overlap(const unsigned char* p, uint64_t pn, const unsigned char* q, uint64_t qn) {
  return p < q + qn && q < p + pn;
}

void RunOne(FuzzedDataProvider& in) {
  const FuzzProgram& fp = g->programs[in.ConsumeIntegralInRange<size_t>(0, g->programs.size() - 1)];
  const size_t declared = fp.roles.size();

  // --- bindings -----------------------------------------------------------------
  size_t binding_count = declared;
  bool bindings_null = false;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      binding_count = in.ConsumeIntegralInRange<size_t>(0, kMaxBindingArray);
      break;
    case 1:
      binding_count = static_cast<size_t>(vyre_fuzz::InterestingU64(in));
      bindings_null = binding_count > kMaxBindingArray;
      break;
    case 2:
      bindings_null = true;
      break;
    default:
      break;
  }
  const uint32_t ours = sizeof(vyre_dispatch_binding);
  const uint32_t stride = PickStructSize(in, ours, kMaxStride);
  std::vector<Bound> bound(kMaxBindingArray);
  const size_t made = std::min(binding_count, kMaxBindingArray);
  // Exactly the caller's array: `made` structs of `stride` bytes (at least
  // the first struct_size), so ASan reports any read past it.
  std::vector<unsigned char> binding_bytes(
      made == 0 ? 0 : std::max<size_t>(made * stride, sizeof(uint32_t)), 0);
  for (size_t i = 0; i < made; ++i) {
    vyre_fuzz::WriteArrayEntry(in, MakeBinding(in, &bound[i]), i, stride, ours, kMaxStride,
                               /*last_choice=*/11, /*tail_byte=*/7, &binding_bytes);
  }

  // What the kernel may safely touch: the fewest elements any argument
  // binding holds (0 if one is missing).
  uint64_t safe_elements = UINT64_MAX;
  for (size_t i = 0; i < declared; ++i) {
    if (fp.argument_of[i] < 0) continue;
    const uint64_t bytes = i < made ? bound[i].bytes : 0;
    safe_elements = std::min(safe_elements, bytes / 4);
  }
  if (safe_elements == UINT64_MAX) safe_elements = 0;
  if (stride < ours || stride > kMaxStride) safe_elements = 0;  // the array is read oddly

  // --- parameter words and scalars ---------------------------------------------------
  uint32_t made_words[8] = {0};
  size_t word_count;
  bool words_null = false;
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      word_count = 0;
      break;
    case 1:
      word_count = in.ConsumeIntegralInRange<size_t>(0, kMaxWords);
      break;
    case 2:
      word_count = static_cast<size_t>(vyre_fuzz::InterestingU64(in));
      words_null = word_count > kMaxWords || in.ConsumeBool();
      break;
    default:
      word_count = in.ConsumeIntegralInRange<size_t>(1, 8);
      break;
  }
  for (size_t i = 0; i < std::min<size_t>(word_count, 8); ++i) {
    made_words[i] = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 64)
                                     : vyre_fuzz::InterestingU32(in);
  }
  // The add and inc kernels run params[0] elements.
  made_words[0] = static_cast<uint32_t>(std::min<uint64_t>(made_words[0], safe_elements));
  // Exactly word_count words (at most kMaxWords unless NULL), 0 past the 8th.
  std::vector<uint32_t> words(words_null ? 0 : word_count, 0);
  std::copy(made_words, made_words + std::min<size_t>(words.size(), 8), words.begin());
  std::vector<uint64_t> made_scalars(kMaxScalars, 0);
  size_t scalar_count = in.ConsumeIntegralInRange<size_t>(0, 4);
  bool scalars_null = false;
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    scalar_count = static_cast<size_t>(vyre_fuzz::InterestingU64(in));
    scalars_null = scalar_count > kMaxScalars || in.ConsumeBool();
  }
  for (size_t i = 0; i < std::min(scalar_count, kMaxScalars); ++i) {
    made_scalars[i] = vyre_fuzz::InterestingU64(in);
  }
  // The saxpy kernel runs scalars[1] elements.
  made_scalars[1] = std::min<uint64_t>(made_scalars[1], safe_elements);
  // Exactly scalar_count scalars (at most kMaxScalars unless NULL).
  const std::vector<uint64_t> scalars(made_scalars.begin(),
                                      made_scalars.begin() + (scalars_null ? 0 : scalar_count));

  // --- the descriptor --------------------------------------------------------------
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = bindings_null
                      ? nullptr
                      : reinterpret_cast<const vyre_dispatch_binding*>(binding_bytes.data());
  desc.binding_count = binding_count;
  desc.param_words = words_null ? nullptr : words.data();
  desc.param_word_count = word_count;
  desc.scalars = scalars_null ? nullptr : scalars.data();
  desc.scalar_count = scalar_count;
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
      break;
    case 1:
      desc.flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
      break;
    case 2:
      desc.flags = in.ConsumeIntegral<uint32_t>();
      break;
    default:
      desc.flags = 0;
      break;
  }
  if (in.ConsumeIntegralInRange<int>(0, 2) == 0) {
    for (int a = 0; a < 3; ++a) {
      desc.grid[a] = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 4)
                                      : vyre_fuzz::InterestingU32(in);
    }
  }
  if (in.ConsumeIntegralInRange<int>(0, 2) == 0) {
    for (int a = 0; a < 3; ++a) {
      desc.block[a] = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 1025)
                                       : vyre_fuzz::InterestingU32(in);
    }
  }
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
    case 1:
      desc.element_count = vyre_fuzz::InterestingU64(in);
      break;
    case 2: {
      // Around the most elements a derived grid covers: the device's
      // largest grid x of this dispatch's blocks (the programs' workgroup is
      // 256 x 1 x 1).
      const bool own_block = desc.block[0] != 0 || desc.block[1] != 0 || desc.block[2] != 0;
      const uint64_t threads = own_block ? uint64_t{desc.block[0]} * std::max(desc.block[1], 1u) *
                                               std::max(desc.block[2], 1u)
                                         : 256;
      desc.element_count = g->max_grid_x * threads +
                           static_cast<uint64_t>(in.ConsumeIntegralInRange<int64_t>(-300, 1));
      break;
    }
    default:
      break;
  }
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      desc.fixpoint_iterations = 0;
      break;
    case 1:
      desc.fixpoint_iterations = in.ConsumeIntegralInRange<uint32_t>(2, 8);
      break;
    default:
      desc.fixpoint_iterations = 1;
      break;
  }
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    desc.shared_memory_bytes = vyre_fuzz::InterestingU32(in);
  }
  const uint32_t desc_size = PickStructSize(in, sizeof desc, 256);
  desc.struct_size = desc_size;
  std::vector<unsigned char> desc_bytes(std::max<size_t>(desc_size, sizeof desc), 0);
  std::memcpy(desc_bytes.data(), &desc, sizeof desc);
  if (desc_size > sizeof desc && in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    desc_bytes[in.ConsumeIntegralInRange<size_t>(sizeof desc, desc_size - 1)] = 1;
  }
  const auto* d = reinterpret_cast<const vyre_dispatch_desc*>(desc_bytes.data());
  const bool desc_null = in.ConsumeIntegralInRange<int>(0, 63) == 0;

  vyre_program program = fp.program;
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) program.bits ^= in.ConsumeIntegral<uint64_t>();

  // The add kernel over three distinct host ranges, shape derived: its
  // result is known.
  const bool check_add =
      fp.kernel == kAdd && declared == 3 && made == 3 && !bindings_null && stride == ours &&
      desc_size == sizeof desc && desc.grid[0] == 0 && desc.grid[1] == 0 && desc.grid[2] == 0 &&
      desc.element_count == 0 && bound[0].host && bound[1].host && bound[2].host &&
      bound[0].input && bound[1].input && bound[2].output &&
      !Overlap(bound[2].output, bound[2].bytes, bound[0].input, bound[0].bytes) &&
      !Overlap(bound[2].output, bound[2].bytes, bound[1].input, bound[1].bytes) &&
      fp.argument_of[0] == 0;
  std::vector<uint32_t> a_before, b_before;
  const uint32_t n = word_count > 0 && !words_null ? words[0] : 0;
  if (check_add) {
    a_before.resize(n);
    b_before.resize(n);
    if (n > 0) {
      std::memcpy(a_before.data(), bound[0].input, size_t{n} * 4);
      std::memcpy(b_before.data(), bound[1].input, size_t{n} * 4);
    }
  }

  // --- the calls --------------------------------------------------------------------
  const vyre_fuzz::LiveObjects live = vyre_fuzz::Live(g->context);
  const uint64_t misuse = vyre_fuzz::FakeMisuseCount();
  const int mode = in.ConsumeIntegralInRange<int>(0, 7);
  vyre_timing timing = VYRE_TIMING_INIT;
  timing.struct_size = PickStructSize(in, sizeof timing, sizeof timing);
  bool waited_ok = false;
  if (mode < 4) {
    waited_ok =
        VYRE_FUZZ_CALL(vyre_dispatch(program, desc_null ? nullptr : d,
                                     in.ConsumeBool() ? &timing : nullptr)) == VYRE_STATUS_OK;
  } else if (mode < 7) {
    vyre_pending pending{0x1234};
    const vyre_status st =
        VYRE_FUZZ_CALL(vyre_dispatch_async(program, desc_null ? nullptr : d, &pending));
    if (st == VYRE_STATUS_OK) {
      const int steps = in.ConsumeIntegralInRange<int>(0, 4);
      bool released = false;
      for (int s = 0; s < steps && !released; ++s) {
        switch (in.ConsumeIntegralInRange<int>(0, 4)) {
          case 0:
            VYRE_FUZZ_CALL(vyre_pending_poll(pending));
            break;
          case 1: {
            const vyre_status w = VYRE_FUZZ_CALL(vyre_pending_wait(
                pending, in.ConsumeBool() ? VYRE_WAIT_FOREVER : in.ConsumeIntegral<uint8_t>()));
            if (w == VYRE_STATUS_OK && !waited_ok) waited_ok = true;
            break;
          }
          case 2:
            VYRE_FUZZ_CALL(vyre_pending_timing(pending, &timing));
            break;
          case 3:
            VYRE_FUZZ_EXPECT(vyre_pending_release(pending), VYRE_STATUS_OK);
            released = true;
            break;
          default:
            VYRE_FUZZ_CALL(vyre_pending_wait(pending, VYRE_WAIT_FOREVER));
            break;
        }
      }
      if (!released) VYRE_FUZZ_EXPECT(vyre_pending_release(pending), VYRE_STATUS_OK);
      VYRE_FUZZ_EXPECT(vyre_pending_release(pending), VYRE_STATUS_STALE_HANDLE);
    } else if (pending.bits != 0) {
      vyre_fuzz::Fail("vyre_dispatch_async failed (%s) but left *out = 0x%llx",
                      vyre_status_name(st), static_cast<unsigned long long>(pending.bits));
    }
  } else {
    vyre_graph graph{0x1234};
    const vyre_status st =
        VYRE_FUZZ_CALL(vyre_graph_record(program, desc_null ? nullptr : d, &graph));
    if (st == VYRE_STATUS_OK) {
      vyre_graph_info before = VYRE_GRAPH_INFO_INIT;
      VYRE_FUZZ_EXPECT(vyre_graph_info_get(graph, &before), VYRE_STATUS_OK);
      const int replays = in.ConsumeIntegralInRange<int>(1, 2);
      for (int r = 0; r < replays; ++r) {
        vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
        const bool with_desc = in.ConsumeIntegralInRange<int>(0, 3) != 0;
        if (with_desc) {
          replay.bindings = desc.bindings;
          replay.binding_count = desc.binding_count;
          replay.param_words = desc.param_words;
          replay.param_word_count = desc.param_word_count;
          replay.scalars = desc.scalars;
          replay.scalar_count = desc.scalar_count;
          // A new element count for the derived grid: 0 (keep), inside the
          // capacity class (1 .. the next power of two of the recorded
          // count), at its edges, past it. The kernels still run at most
          // params[0] (scalars[1]) elements, so any count is safe for them.
          const uint64_t capacity = before.capacity_elements;
          switch (in.ConsumeIntegralInRange<int>(0, 7)) {
            case 0:
              replay.element_count = capacity;
              break;
            case 1:
              replay.element_count = capacity + in.ConsumeIntegralInRange<uint64_t>(0, 2) - 1;
              break;
            case 2:
              replay.element_count =
                  capacity > 0 ? in.ConsumeIntegralInRange<uint64_t>(1, capacity) : 1;
              break;
            case 3:
              replay.element_count = vyre_fuzz::InterestingU64(in);
              break;
            default:
              break;
          }
        }
        const vyre_status replayed =
            VYRE_FUZZ_CALL(vyre_graph_replay(graph, with_desc ? &replay : nullptr, nullptr));
        vyre_graph_info after = VYRE_GRAPH_INFO_INIT;
        VYRE_FUZZ_EXPECT(vyre_graph_info_get(graph, &after), VYRE_STATUS_OK);
        if (replayed == VYRE_STATUS_OK) {
          const uint64_t want = replay.element_count ? replay.element_count : before.element_count;
          if (after.element_count != want || after.replays != before.replays + 1 ||
              after.capacity_elements != before.capacity_elements) {
            vyre_fuzz::Fail(
                "vyre_graph_replay (element_count %llu) OK, but the graph now says "
                "element_count %llu, %llu replays, capacity %llu (before: %llu, "
                "%llu, %llu)",
                static_cast<unsigned long long>(replay.element_count),
                static_cast<unsigned long long>(after.element_count),
                static_cast<unsigned long long>(after.replays),
                static_cast<unsigned long long>(after.capacity_elements),
                static_cast<unsigned long long>(before.element_count),
                static_cast<unsigned long long>(before.replays),
                static_cast<unsigned long long>(before.capacity_elements));
          }
          if (replay.element_count > before.capacity_elements) {
            vyre_fuzz::Fail(
                "vyre_graph_replay accepted element_count %llu above the capacity "
                "class of %llu",
                static_cast<unsigned long long>(replay.element_count),
                static_cast<unsigned long long>(before.capacity_elements));
          }
        } else if (after.element_count != before.element_count || after.replays != before.replays) {
          vyre_fuzz::Fail(
              "vyre_graph_replay failed (%s) but changed the graph's element count "
              "(%llu -> %llu) or replay count (%llu -> %llu)",
              vyre_status_name(replayed), static_cast<unsigned long long>(before.element_count),
              static_cast<unsigned long long>(after.element_count),
              static_cast<unsigned long long>(before.replays),
              static_cast<unsigned long long>(after.replays));
        }
        before = after;
      }
      VYRE_FUZZ_EXPECT(vyre_graph_destroy(graph), VYRE_STATUS_OK);
    } else if (graph.bits != 0) {
      vyre_fuzz::Fail("vyre_graph_record failed (%s) but left *out = 0x%llx", vyre_status_name(st),
                      static_cast<unsigned long long>(graph.bits));
    }
  }
  vyre_fuzz::ExpectNoMisuse(misuse, "the dispatch");
  vyre_fuzz::ExpectLive(g->context, live, "the dispatch");
  if (check_add && waited_ok && desc.fixpoint_iterations > 0) {
    CheckAdd(a_before, b_before, bound[2].output, bound[2].bytes, n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vyre_fuzz::SetUpEnvironment();
  Setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  RunOne(in);
  return 0;
}
