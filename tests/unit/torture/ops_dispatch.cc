// The torture operations vyre_dispatch and vyre_dispatch_async: random
// bindings (resident, host, bad sources), parameter words, descriptors and
// launch shapes, and the CPU model of the known kernels' results.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {

// One dispatch binding as the model sees it.
struct BoundModel {
  bool host = true;
  int buffer_index = -1;      // resident: index into pop_.buffers
  uint64_t offset = 0;        // resident: byte offset in the buffer
  uint64_t bytes = 0;         // bound length
  bool valid = true;          // the binding is well-formed for its declaration
  HostBinding* host_binding = nullptr;
};

// A dispatch as it is built, made and modelled. `pending` owns the host
// memory the bindings point at; model[i].host_binding points into it.
struct DispatchCall {
  bool async = false;
  const char* call = "";
  HandleChoice choice = HandleChoice::kZero;
  vyre_program program{0};
  const ProgramState* prog = nullptr;
  bool well_formed = false;
  bool known_kernel = false;
  std::vector<vyre_binding_decl> decls;
  uint64_t elements = 0;  // the common element count of the bindings
  PendingState pending;
  std::vector<BoundModel> model;
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<uint32_t> params;
  std::vector<uint64_t> scalars;
  WithTail<vyre_dispatch_desc> desc{VYRE_DISPATCH_DESC_INIT, {}};
  bool null_desc = false;
  bool null_out = false;
};

namespace {

// Declared element counts and output ranges of random programs.
bool DeclaredRangeFits(const vyre_binding_decl& d, const BoundModel& m, uint32_t esize) {
  if (d.element_count != 0 && m.bytes != d.element_count * esize) return false;
  if ((RoleOf(d) == VYRE_ROLE_OUTPUT || RoleOf(d) == VYRE_ROLE_INPUT_OUTPUT) &&
      !InRange(d.output_offset, d.output_length, m.bytes)) {
    return false;
  }
  if (RoleOf(d) == VYRE_ROLE_OUTPUT && d.output_length == 0 && d.output_offset >= m.bytes) {
    return false;
  }
  return true;
}

// Parameter words: for the known kernels n never exceeds the bound
// elements (a kernel reading past its buffers is the caller's bug).
void RandomParams(Rng* rng, DispatchCall* c) {
  uint64_t min_elements = UINT64_MAX;
  for (const auto& m : c->model) min_elements = std::min(min_elements, m.bytes / 4);
  if (c->model.empty()) min_elements = 0;
  c->params.resize(rng->Below(6));
  for (auto& w : c->params) w = uint32_t(rng->Bits());
  if (c->known_kernel || (c->prog != nullptr && c->prog->kind != KernelKind::kOther)) {
    if (c->params.empty() && rng->Chance(0.8)) c->params.push_back(0);
    if (!c->params.empty()) {
      c->params[0] = uint32_t(rng->Chance(0.7) ? min_elements : rng->Range(0, min_elements));
    }
  }
  c->scalars.resize(rng->Below(3));
  for (auto& v : c->scalars) v = rng->Bits();
}

// The descriptor's arrays, iterations and flags (unknown bits sometimes).
void RandomDescFlags(Rng* rng, DispatchCall* c) {
  vyre_dispatch_desc& desc = c->desc.value;
  desc.bindings = c->bindings.data();
  desc.binding_count = c->bindings.size();
  desc.param_words = c->params.data();
  desc.param_word_count = c->params.size();
  desc.scalars = c->scalars.data();
  desc.scalar_count = c->scalars.size();
  desc.fixpoint_iterations = uint32_t(rng->Range(1, 3));
  if (rng->Chance(0.05)) {
    desc.fixpoint_iterations = 0;
    c->well_formed = false;
  }
  if (rng->Chance(0.2)) desc.flags |= VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  if (rng->Chance(0.05)) desc.flags |= VYRE_DISPATCH_FLAG_COOPERATIVE;
  if (rng->Chance(0.05)) {
    desc.flags |= uint32_t(1u << rng->Range(2, 31));
    c->well_formed = false;  // unknown bits: rejecting them is allowed
  }
}

// Odd blocks, grids, element counts and shared memory sizes.
void RandomLaunchShape(Rng* rng, DispatchCall* c) {
  vyre_dispatch_desc& desc = c->desc.value;
  if (rng->Chance(0.15)) {
    static const std::vector<std::array<uint32_t, 3>> kBlocks = {
        {0, 0, 0}, {1, 1, 1}, {32, 1, 1}, {256, 0, 0}, {1024, 1, 1}, {1025, 1, 1},
        {0, 4, 1}, {64, 32, 1}, {1, 1, 65}, {UINT32_MAX, 1, 1}};
    const auto& blk = rng->Pick(kBlocks);
    std::copy(blk.begin(), blk.end(), desc.block);
    c->well_formed = false;
  }
  if (rng->Chance(0.15)) {
    static const std::vector<std::array<uint32_t, 3>> kGrids = {
        {1, 1, 1}, {0, 2, 1}, {3, 0, 0}, {2147483647u, 1, 1}, {2147483647u, 65535, 65535},
        {1, 65536, 1}, {UINT32_MAX, 1, 1}, {5, 2, 2}};
    const auto& g = rng->Pick(kGrids);
    std::copy(g.begin(), g.end(), desc.grid);
    c->well_formed = false;
  }
  if (rng->Chance(0.05)) {
    desc.element_count = rng->Chance(0.5) ? rng->Below(1000) : rng->Bits();
    c->well_formed = false;
  }
  if (rng->Chance(0.05)) {
    desc.shared_memory_bytes = uint32_t(rng->Chance(0.5) ? rng->Below(4096) : rng->Bits());
    c->well_formed = false;
  }
}

// Wrong binding counts, NULL arrays and pointers, odd struct sizes.
void RandomMalformations(Rng* rng, DispatchCall* c) {
  vyre_dispatch_desc& desc = c->desc.value;
  if (rng->Chance(0.03)) {  // a wrong binding count
    desc.binding_count = c->bindings.empty() ? 1 : c->bindings.size() - 1;
    if (c->bindings.empty()) desc.bindings = nullptr;
    c->well_formed = false;
  }
  if (rng->Chance(0.03)) {
    desc.param_words = nullptr;
    if (!c->params.empty()) c->well_formed = false;
  }
  RandomizeStructSize(rng, &c->desc, &c->well_formed);
  c->null_desc = rng->Chance(0.02);
  c->null_out = rng->Chance(0.02);
  if (c->null_desc || c->null_out) c->well_formed = false;
  if (c->prog != nullptr && c->prog->kind == KernelKind::kOther) c->well_formed = false;
}

// Resident bindings of the known kernels must not overlap an output (the
// model does not follow aliasing).
bool ResidentBindingsOverlap(const std::vector<BoundModel>& model) {
  for (size_t i = 0; i < model.size(); ++i) {
    for (size_t j = i + 1; j < model.size(); ++j) {
      if (!model[i].host && !model[j].host && model[i].buffer_index == model[j].buffer_index &&
          model[i].offset < model[j].offset + model[j].bytes &&
          model[j].offset < model[i].offset + model[i].bytes) {
        return true;
      }
    }
  }
  return false;
}

// Threads per block as the engine derives them: the descriptor's block, or
// the program's workgroup.
uint64_t BlockThreads(const DispatchCall& c) {
  const vyre_dispatch_desc& desc = c.desc.value;
  uint32_t block[3];
  if (desc.block[0] == 0 && desc.block[1] == 0 && desc.block[2] == 0) {
    std::copy(c.prog->workgroup, c.prog->workgroup + 3, block);
  } else {
    block[0] = desc.block[0];
    block[1] = desc.block[1] ? desc.block[1] : 1;
    block[2] = desc.block[2] ? desc.block[2] : 1;
  }
  return uint64_t{block[0]} * block[1] * block[2];
}

// Blocks as the engine derives them: the descriptor's grid, or enough blocks
// for the element count (the largest binding's when the descriptor has none).
uint64_t GridBlocks(const DispatchCall& c, uint64_t block_threads) {
  const vyre_dispatch_desc& desc = c.desc.value;
  if (desc.grid[0] != 0 || desc.grid[1] != 0 || desc.grid[2] != 0) {
    return uint64_t{desc.grid[0]} * (desc.grid[1] ? desc.grid[1] : 1) *
           (desc.grid[2] ? desc.grid[2] : 1);
  }
  uint64_t ec = desc.element_count;
  if (ec == 0) {
    for (size_t i = 0; i < c.model.size(); ++i) {
      uint32_t esize = c.decls[i].element_size ? c.decls[i].element_size : 1;
      ec = std::max(ec, c.model[i].bytes / esize);
    }
  }
  return block_threads == 0 ? 0 : (ec == 0 ? 1 : (ec + block_threads - 1) / block_threads);
}

// Launch shape as the engine derives it: threads that run, for the model.
uint64_t LaunchThreads(const DispatchCall& c) {
  if (c.prog == nullptr) return 0;
  uint64_t block_threads = BlockThreads(c);
  uint64_t grid_threads = GridBlocks(c, block_threads);
  uint64_t threads = grid_threads * block_threads;  // < 2^31 * 2^32 * 2^32 may wrap; capped below
  if (grid_threads != 0 && threads / grid_threads != block_threads) threads = UINT64_MAX;
  return threads;
}

// vyre_test_add_u32 on the model: a[e] + b[e], known where both inputs are.
void AddElements(const std::vector<uint8_t>& a, const std::vector<uint8_t>& ak,
                 const std::vector<uint8_t>& b, const std::vector<uint8_t>& bk, uint64_t n_eff,
                 std::vector<uint8_t>* result, std::vector<uint8_t>* result_known) {
  for (uint64_t e = 0; e < n_eff; ++e) {
    uint32_t x, y;
    std::memcpy(&x, &a[e * 4], 4);
    std::memcpy(&y, &b[e * 4], 4);
    uint32_t sum = x + y;
    std::memcpy(&(*result)[e * 4], &sum, 4);
    bool k = std::all_of(&ak[e * 4], &ak[e * 4] + 4, [](uint8_t v) { return v != 0; }) &&
             std::all_of(&bk[e * 4], &bk[e * 4] + 4, [](uint8_t v) { return v != 0; });
    std::fill(&(*result_known)[e * 4], &(*result_known)[e * 4] + 4, k ? 1 : 0);
  }
}

// vyre_test_inc_u32 on the model, `iterations` times.
void IncElements(uint64_t n_eff, uint32_t iterations, std::vector<uint8_t>* result) {
  for (uint64_t e = 0; e < n_eff; ++e) {
    uint32_t x;
    std::memcpy(&x, &(*result)[e * 4], 4);
    x += iterations;
    std::memcpy(&(*result)[e * 4], &x, 4);
  }
}

}  // namespace

void Torture::DispatchOp(bool async) {
  const char* call = async ? "vyre_dispatch_async" : "vyre_dispatch";
  if (async && pop_.pendings.size() >= kMaxPendings) {
    PendingRelease();
    return;
  }
  DispatchCall c;
  c.async = async;
  c.call = call;
  int program_index;
  c.program = vyre_program{PickProgramHandle(&program_index, &c.choice)};
  c.prog = program_index >= 0 ? &pop_.programs[size_t(program_index)] : nullptr;
  c.well_formed = c.prog != nullptr;
  c.known_kernel = c.prog != nullptr && c.prog->kind != KernelKind::kOther;

  // Bindings: one per declaration (sometimes a wrong count).
  if (c.prog != nullptr) {
    c.decls = c.prog->decls;
  } else {
    for (size_t i = rng_.Below(4); i > 0; --i) c.decls.push_back(VYRE_BINDING_DECL_INIT);
  }
  // A common element count keeps the known kernels' bindings consistent.
  c.elements = rng_.Chance(0.1) ? rng_.Range(1, 16384) : rng_.Range(1, 600);
  c.pending.host.reserve(c.decls.size());
  c.model.resize(c.decls.size());
  c.bindings.resize(c.decls.size());
  for (size_t i = 0; i < c.decls.size(); ++i) BindArgument(&c, i);

  RandomParams(&rng_, &c);
  RandomDescFlags(&rng_, &c);
  RandomLaunchShape(&rng_, &c);
  RandomMalformations(&rng_, &c);
  if (c.known_kernel && ResidentBindingsOverlap(c.model)) c.known_kernel = false;
  const uint64_t threads = LaunchThreads(c);
  uint64_t n = c.params.empty() || c.desc.value.param_words == nullptr ? 0 : c.params[0];
  uint64_t n_eff = std::min(n, threads);
  uint32_t iterations = c.desc.value.fixpoint_iterations;

  vyre_pending out{0};
  if (!MakeDispatch(&c, &out)) return;
  if (c.known_kernel) ModelDispatch(&c, n_eff, iterations);
  if (!async) {
    CheckHostOutputs(c.pending, true, call);
    return;
  }
  if (c.null_out) return;
  c.pending.handle = out;
  c.pending.context = c.prog != nullptr ? c.prog->context : 0;
  pop_.pendings.push_back(std::move(c.pending));
}

// Binding i: resident, host or a bad source, sized for its declaration.
void Torture::BindArgument(DispatchCall* c, size_t i) {
  const vyre_binding_decl& d = c->decls[i];
  uint32_t esize = d.element_size ? d.element_size : 1;
  uint64_t bytes = d.element_count ? d.element_count * esize : c->elements * esize;
  if (!c->known_kernel && rng_.Chance(0.5)) bytes = rng_.Range(1, 2048);
  if (rng_.Chance(0.05)) {
    bytes = bytes + rng_.Range(1, 3);  // not a multiple of the element size
    if (esize > 1) c->well_formed = false;
  }
  vyre_dispatch_binding& b = c->bindings[i];
  b = VYRE_DISPATCH_BINDING_INIT;
  uint64_t pick = rng_.Below(20);
  if (pick < 7 && !pop_.buffers.empty()) {
    BindResident(c, i, bytes, esize);
  } else if (pick < 19) {
    BindHost(c, i, bytes);
  } else {
    SetRawEnum(&b.source, RandomBadEnum(&rng_));
    c->well_formed = false;
    c->known_kernel = false;
  }
  if (!DeclaredRangeFits(d, c->model[i], esize)) c->well_formed = false;
}

// Resident: a buffer of this program's context that can hold the binding,
// or any buffer with a random range; now and then a stale or forged one.
void Torture::BindResident(DispatchCall* c, size_t i, uint64_t bytes, uint32_t esize) {
  const ProgramState* prog = c->prog;
  std::vector<int> fits;
  for (size_t k = 0; k < pop_.buffers.size(); ++k) {
    if (prog != nullptr && pop_.buffers[k].context == prog->context &&
        pop_.buffers[k].bytes >= bytes) {
      fits.push_back(int(k));
    }
  }
  vyre_dispatch_binding& b = c->bindings[i];
  BoundModel& m = c->model[i];
  b.source = VYRE_SOURCE_RESIDENT;
  m.host = false;
  if (!fits.empty() && rng_.Chance(0.85)) {
    m.buffer_index = rng_.Pick(fits);
    const BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
    m.offset = esize * rng_.Below((buf.bytes - bytes) / esize + 1);
    m.bytes = bytes;
    b.buffer = buf.handle;
    b.offset = m.offset;
    b.length = (m.offset + bytes == buf.bytes && rng_.Chance(0.5)) ? 0 : bytes;
  } else {
    BindAnyRange(c, i);
  }
  if (prog == nullptr || pop_.buffers[size_t(m.buffer_index)].context != prog->context) {
    c->well_formed = false;  // another context's buffer: INVALID_ARGUMENT
  }
  if (rng_.Chance(0.03)) {  // a stale or forged buffer
    HandleChoice bc;
    int unused;
    b.buffer.bits = PickBufferHandle(&unused, &bc);
    if (bc != HandleChoice::kValid) {
      c->well_formed = false;
      m.buffer_index = -1;
    } else {
      b.buffer = pop_.buffers[size_t(m.buffer_index)].handle;
    }
  }
}

void Torture::BindAnyRange(DispatchCall* c, size_t i) {
  vyre_dispatch_binding& b = c->bindings[i];
  BoundModel& m = c->model[i];
  m.buffer_index = int(rng_.Below(pop_.buffers.size()));
  const BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
  b.buffer = buf.handle;
  b.offset = RandomOffset(buf.bytes);
  // Element-aligned for the known kernels: a misaligned u32 pointer is
  // the caller's bug (a real GPU faults), not something to test here.
  if (c->prog != nullptr && c->prog->kind != KernelKind::kOther) b.offset &= ~uint64_t{3};
  b.length = rng_.Chance(0.2) ? 0 : RandomLength(buf.bytes, b.offset);
  if (rng_.Chance(0.05)) b.length = UINT64_MAX - rng_.Below(16);
  m.offset = b.offset;
  m.bytes = b.length == 0 && b.offset <= buf.bytes ? buf.bytes - b.offset : b.length;
  c->well_formed = false;
  c->known_kernel = false;  // the model does not follow odd resident ranges
}

// Host: memory sized to host_bytes, poisoned outputs.
void Torture::BindHost(DispatchCall* c, size_t i, uint64_t bytes) {
  const vyre_binding_decl& d = c->decls[i];
  vyre_dispatch_binding& b = c->bindings[i];
  BoundModel& m = c->model[i];
  b.source = VYRE_SOURCE_HOST;
  m.bytes = bytes;
  c->pending.host.emplace_back();
  HostBinding& h = c->pending.host.back();
  h.memory = std::make_unique<std::vector<uint8_t>>(RandomBytes(bytes));
  h.written = RoleOf(d) == VYRE_ROLE_OUTPUT || RoleOf(d) == VYRE_ROLE_INPUT_OUTPUT;
  bool reads = RoleOf(d) == VYRE_ROLE_INPUT || RoleOf(d) == VYRE_ROLE_INPUT_OUTPUT;
  if (RoleOf(d) == VYRE_ROLE_OUTPUT) std::fill(h.memory->begin(), h.memory->end(), kPoisonByte);
  h.before = *h.memory;
  b.host_bytes = bytes;
  b.host_input = (reads || rng_.Chance(0.3)) ? h.memory->data() : nullptr;
  b.host_output = (h.written || rng_.Chance(0.3)) ? h.memory->data() : nullptr;
  if (rng_.Chance(0.03)) {
    b.host_input = nullptr;
    if (reads) c->well_formed = false;
  }
  if (rng_.Chance(0.03)) {
    b.host_output = nullptr;
    if (h.written) {
      c->well_formed = false;
      h.written = false;
    }
  }
  if (rng_.Chance(0.03)) {
    b.host_bytes = 0;
    c->well_formed = false;
  }
  m.host_binding = &h;
}

// Makes the call and checks its status; false when there is nothing more
// to check.
bool Torture::MakeDispatch(DispatchCall* c, vyre_pending* out) {
  const char* call = c->call;
  vyre_timing timing = VYRE_TIMING_INIT;
  const vyre_dispatch_desc* desc_ptr = c->null_desc ? nullptr : &c->desc.value;
  vyre_status s;
  if (c->async) {
    s = Check(vyre_dispatch_async(c->program, desc_ptr, c->null_out ? nullptr : out), call);
  } else {
    s = Check(vyre_dispatch(c->program, desc_ptr, rng_.Chance(0.5) ? &timing : nullptr), call);
  }
  ExpectNotOk(s, c->choice, call);
  if (c->well_formed) ExpectStatus(s, VYRE_STATUS_OK, call);
  if (s != VYRE_STATUS_OK && (c->null_desc || c->null_out)) {
    // fine
  } else if (s == VYRE_STATUS_OK && (c->null_desc || (c->async && c->null_out))) {
    Fail(std::string(call) + " accepted a NULL pointer");
    return false;
  }
  // Resident outputs: on failure their contents are unknown (maybe zeroed).
  if (s != VYRE_STATUS_OK || !c->known_kernel) {
    ForgetResidentOutputs(*c);
    if (s != VYRE_STATUS_OK) return false;
  }
  return true;
}

void Torture::ForgetResidentOutputs(const DispatchCall& c) {
  for (size_t i = 0; i < c.model.size(); ++i) {
    const BoundModel& m = c.model[i];
    bool writes = RoleOf(c.decls[i]) == VYRE_ROLE_OUTPUT ||
                  RoleOf(c.decls[i]) == VYRE_ROLE_INPUT_OUTPUT;
    if (!m.host && m.buffer_index >= 0 && writes) {
      BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
      if (m.offset < buf.bytes) {
        uint64_t end = m.bytes > buf.bytes - m.offset ? buf.bytes : m.offset + m.bytes;
        std::fill(buf.known.begin() + m.offset, buf.known.begin() + end, 0);
      }
    }
  }
}

// The model of the known kernels: device bytes of each binding after the
// dispatch, and whether each is known.
void Torture::ModelDispatch(DispatchCall* c, uint64_t n_eff, uint32_t iterations) {
  size_t out_index = c->prog->kind == KernelKind::kAdd ? 2 : 0;
  std::vector<uint8_t> result, result_known;
  if (c->prog->kind == KernelKind::kAdd) {
    std::vector<uint8_t> a, ak, b, bk;
    DispatchInput(*c, 0, &a, &ak);
    DispatchInput(*c, 1, &b, &bk);
    result.assign(c->model[2].bytes, 0);  // OUTPUT is zeroed before launch
    result_known.assign(c->model[2].bytes, 1);
    AddElements(a, ak, b, bk, n_eff, &result, &result_known);
  } else {
    DispatchInput(*c, 0, &result, &result_known);
    IncElements(n_eff, iterations, &result);
  }
  const BoundModel& m = c->model[out_index];
  const vyre_binding_decl& d = c->decls[out_index];
  if (m.host) {
    HostBinding& h = *m.host_binding;
    uint64_t length = d.output_length ? d.output_length : m.bytes - d.output_offset;
    h.expected = h.before;
    h.expected_known.assign(m.bytes, 1);
    for (uint64_t i = d.output_offset; i < d.output_offset + length; ++i) {
      h.expected[i] = result[i];
      h.expected_known[i] = result_known[i];
    }
  } else {
    BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
    std::copy(result.begin(), result.end(), buf.shadow.begin() + m.offset);
    std::copy(result_known.begin(), result_known.end(), buf.known.begin() + m.offset);
  }
  c->pending.check_results = true;
  ++checked_dispatches_;
}

// Binding i's bytes before the dispatch, and whether each is known.
void Torture::DispatchInput(const DispatchCall& c, size_t i, std::vector<uint8_t>* bytes,
                            std::vector<uint8_t>* known) {
  const BoundModel& m = c.model[i];
  if (m.host) {
    *bytes = m.host_binding->before;
    known->assign(bytes->size(), 1);
  } else {
    const BufferState& buf = pop_.buffers[size_t(m.buffer_index)];
    bytes->assign(buf.shadow.begin() + m.offset, buf.shadow.begin() + m.offset + m.bytes);
    known->assign(buf.known.begin() + m.offset, buf.known.begin() + m.offset + m.bytes);
  }
}

}  // namespace torture
}  // namespace vyre_test
