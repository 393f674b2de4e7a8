// The torture operations vyre_graph_replay and vyre_graph_replay_async: fresh
// or unchanged inputs, other element counts, parameter words and rebound
// ranges, one malformation at a time, and the model of each replay.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {

// A replay as it is built, made and modelled.
struct ReplayCall {
  bool async = false;
  const char* call = "";
  vyre_graph graph{0};
  vyre_pending out{0};
  bool null_out = false;
  // A recorded dispatch's replay: what changes, and its arguments.
  uint64_t elements = 0;
  uint32_t param_n = 0;
  bool set_count = false, set_words = false, rebind = false;
  std::vector<Range> bound;
  PendingState pending;
  std::vector<vyre_dispatch_binding> bindings;
  std::vector<std::vector<uint8_t>> inputs;
  ReplaySpecT spec;
  bool pass_bindings = false;
  WithTail<vyre_graph_replay_desc> desc{VYRE_GRAPH_REPLAY_DESC_INIT, {}};
  vyre_status expected = VYRE_STATUS_OK;
  bool null_desc = false;
};

void Torture::GraphReplay(bool async) {
  const char* call = async ? "vyre_graph_replay_async" : "vyre_graph_replay";
  if (async && pop_.pendings.size() >= kMaxPendings) {
    PendingRelease();
    return;
  }
  int index;
  HandleChoice choice;
  ReplayCall r;
  r.async = async;
  r.call = call;
  r.graph = vyre_graph{PickGraphHandle(&index, &choice)};
  r.null_out = async && rng_.Chance(0.02);
  if (choice != HandleChoice::kValid) {
    vyre_status s = InvokeReplay(&r, nullptr);
    ExpectNotOk(s, choice, call);
    if (!r.null_out) ExpectHandleError(s, choice, call);
    return;
  }
  GraphState& g = pop_.graphs[size_t(index)];
  if (g.sequence) {
    ReplaySequenceGraph(&r, &g);
  } else {
    ReplayDispatchGraph(&r, &g);
  }
}

vyre_status Torture::InvokeReplay(ReplayCall* r, const vyre_graph_replay_desc* desc) {
  vyre_timing timing = VYRE_TIMING_INIT;
  return r->async
             ? Check(vyre_graph_replay_async(r->graph, desc, r->null_out ? nullptr : &r->out),
                     r->call)
             : Check(vyre_graph_replay(r->graph, desc, rng_.Chance(0.3) ? &timing : nullptr),
                     r->call);
}

// A graph recorded from a sequence.
void Torture::ReplaySequenceGraph(ReplayCall* r, GraphState* g) {
  const char* call = r->call;
  SeqModel& m = *g->sequence;
  if (m.host_steps && m.busy_pending != 0) {
    if (g->pending != 0) {
      ExpectStatus(InvokeReplay(r, nullptr),
                   r->null_out ? VYRE_STATUS_INVALID_ARGUMENT : VYRE_STATUS_INVALID_STATE, call);
    }
    return;  // another replay's read-back owns the host memory until then
  }
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  vyre_status expected = VYRE_STATUS_OK;
  if (rng_.Chance(0.1)) {
    desc.element_count = 1 + rng_.Below(8);  // sequence graphs take none
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  } else if (!AllLive(SequenceRanges(m))) {
    expected = VYRE_STATUS_STALE_HANDLE;
  }
  if (rng_.Chance(0.3)) desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  if (r->null_out) expected = VYRE_STATUS_INVALID_ARGUMENT;
  RefreshSequenceHost(m, &rng_);
  PendingState pending;
  for (const SeqStepModel& st : m.steps) {
    if (st.kind != VYRE_STEP_DOWNLOAD) continue;
    HostBinding h;
    h.memory = st.host;
    h.before = *st.host;
    pending.host.push_back(std::move(h));
  }
  vyre_status s = InvokeReplay(r, rng_.Chance(0.5) && desc.flags == 0 && expected == VYRE_STATUS_OK
                                      ? nullptr
                                      : &desc);
  ExpectStatus(s, expected, call);
  if (s != VYRE_STATUS_OK) {
    CheckHostOutputs(pending, false, call);  // nothing written
    return;
  }
  Downloads downloads;
  ModelSequence(m, &downloads);
  pending.host = SequenceOutputs(m, downloads);
  for (HostBinding& h : pending.host) h.before.assign(h.memory->size(), kPoisonByte);
  pending.check_results = true;
  ++checked_sequence_runs_;
  if (!r->async) {
    CheckHostOutputs(pending, true, call);
    return;
  }
  pending.handle = r->out;
  pending.context = g->context;
  if (m.host_steps) {
    m.busy_pending = r->out.bits;
    g->pending = r->out.bits;
  }
  pop_.pendings.push_back(std::move(pending));
}

// A recorded dispatch.
void Torture::ReplayDispatchGraph(ReplayCall* r, GraphState* g) {
  const char* call = r->call;
  PrepareReplay(r, *g);
  // The unwaited asynchronous replay of a HOST graph holds its staging.
  if (g->host && g->pending != 0) {
    ExpectStatus(InvokeReplay(r, &r->desc.value),
                 r->null_out ? VYRE_STATUS_INVALID_ARGUMENT : VYRE_STATUS_INVALID_STATE, call);
    CheckHostOutputs(r->pending, false, call);
    return;
  }
  if (rng_.Chance(0.15)) MalformReplay(r, *g);
  if (r->expected == VYRE_STATUS_OK && !g->host && !r->pass_bindings && !AllLive(r->bound)) {
    r->expected = VYRE_STATUS_STALE_HANDLE;  // a freed buffer, not rebound
  }
  if (r->null_out && r->expected == VYRE_STATUS_OK) r->expected = VYRE_STATUS_INVALID_ARGUMENT;
  vyre_status s = InvokeReplay(r, r->null_desc ? nullptr : &r->desc.value);
  if (r->null_out && s == VYRE_STATUS_OK) Fail("vyre_graph_replay_async accepted a NULL out");
  if (!r->null_out) ExpectStatus(s, r->expected, call);
  if (s != VYRE_STATUS_OK || r->expected != VYRE_STATUS_OK) {
    CheckHostOutputs(r->pending, false, call);  // a refused replay writes nothing
    return;
  }
  ModelReplay(r, g);
  ++checked_graph_replays_;
  g->count = r->elements;
  g->param_n = r->param_n;
  if (r->rebind) g->bound = r->bound;
  if (!r->async) {
    CheckHostOutputs(r->pending, true, call);
    return;
  }
  r->pending.handle = r->out;
  r->pending.context = g->context;
  if (g->host) g->pending = r->out.bits;
  pop_.pendings.push_back(std::move(r->pending));
}

// The replay's element count, parameter word, ranges, bindings and
// descriptor, before any malformation.
void Torture::PrepareReplay(ReplayCall* r, const GraphState& g) {
  r->elements = g.count;
  r->param_n = g.param_n;
  if (rng_.Chance(0.25)) {
    // A HOST binding recorded with the element count never grows.
    r->elements = rng_.Range(1, g.host ? g.recorded : g.capacity);
    r->set_count = true;
  }
  r->bound = g.bound;
  if (!g.host) RebindReplay(r, g);
  // The parameter word never exceeds the element count or a binding's
  // elements, so the kernel stays inside every bound range.
  uint64_t limit = r->elements;
  if (g.host) limit = std::min(limit, g.recorded);
  for (const Range& b : r->bound) limit = std::min(limit, b.bytes / 4);
  if (r->param_n > limit || rng_.Chance(0.2)) {
    r->param_n = uint32_t(rng_.Range(1, limit));
    r->set_words = true;
  }
  ReplayBindings(r, g);
  r->spec.bindings = r->bindings;
  r->pass_bindings = g.host || r->rebind || (AllLive(r->bound) && rng_.Chance(0.2));
  if (!r->pass_bindings) r->spec.bindings.clear();
  if (r->set_count || rng_.Chance(0.1)) r->spec.element_count = r->elements;
  if (r->set_words || rng_.Chance(0.1)) r->spec.param_words = {r->param_n};
  if (rng_.Chance(0.2)) r->spec.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
  r->desc.value = r->spec.Desc();
}

// Resident ranges: rebound when the elements no longer fit (or at random,
// or sometimes when a bound buffer was freed).
void Torture::RebindReplay(ReplayCall* r, const GraphState& g) {
  const bool add = g.kernel == KernelKind::kAdd;
  bool need = false;
  for (const Range& b : r->bound) need = need || b.bytes < r->elements * 4;
  if (need || rng_.Chance(0.3) || (!AllLive(r->bound) && rng_.Chance(0.5))) {
    const uint64_t length = r->elements * 4 + 4 * rng_.Below(8);
    std::vector<Range> ranges;
    bool found = true;
    for (size_t i = 0; i < g.decls.size() && found; ++i) {
      Range range;
      std::vector<Range> avoid = add && i == 2 ? ranges : std::vector<Range>{};
      found = RandomRange(g.context, length, avoid, &range);
      ranges.push_back(range);
    }
    if (found) {
      r->bound = ranges;
      r->rebind = true;
    } else if (need) {
      r->elements = g.count;
      r->set_count = false;
    }
  }
}

// Bindings: HOST data of the recorded lengths (sometimes the previous
// replay's inputs again), or the resident ranges.
void Torture::ReplayBindings(ReplayCall* r, const GraphState& g) {
  const size_t count = g.decls.size();
  r->pending.host.reserve(count);
  r->bindings.resize(count);
  r->inputs.resize(count);
  const bool same_inputs = g.host && !g.last_inputs.empty() && rng_.Chance(0.3);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t role = RoleOf(g.decls[i]);
    if (g.host) {
      const uint64_t bytes = g.recorded * 4;
      r->pending.host.emplace_back();
      HostBinding& h = r->pending.host.back();
      h.memory = std::make_shared<std::vector<uint8_t>>(
          same_inputs ? g.last_inputs[i] : RandomBytes(bytes));
      if (role == VYRE_ROLE_OUTPUT) std::fill(h.memory->begin(), h.memory->end(), kPoisonByte);
      r->inputs[i] = *h.memory;
      h.before = *h.memory;
      h.written = role != VYRE_ROLE_INPUT;
      if (role == VYRE_ROLE_INPUT) r->bindings[i] = HostIn(h.memory->data(), bytes);
      if (role == VYRE_ROLE_OUTPUT) r->bindings[i] = HostOut(h.memory->data(), bytes);
      if (role == VYRE_ROLE_INPUT_OUTPUT) r->bindings[i] = HostInOut(h.memory->data(), bytes);
    } else {
      const Range& b = r->bound[i];
      r->bindings[i] = Resident(vyre_buffer{b.buffer}, b.offset, b.bytes);
    }
  }
}

// One malformation of a replay, with the status it calls for in r->expected
// (left OK when the graph offers nothing to break that way).
void Torture::MalformReplay(ReplayCall* r, const GraphState& g) {
  std::vector<uint64_t> live_of_context;
  for (const auto& b : pop_.buffers) {
    if (b.context == g.context) live_of_context.push_back(b.handle.bits);
  }
  const uint64_t pick = rng_.Below(9);
  if (pick <= 3 || pick == 8) {
    MalformReplayShape(r, g, live_of_context, pick);
  } else {
    MalformReplayArguments(r, g, live_of_context, pick);
  }
  if (r->expected != VYRE_STATUS_OK && r->expected != VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE) {
    const uint32_t size = r->desc.value.struct_size;
    const uint32_t flags = r->desc.value.flags;
    r->desc.value = r->spec.Desc();
    r->desc.value.struct_size = size;
    r->desc.value.flags = flags;
  }
}

// Bindings or element counts that do not match the recording.
void Torture::MalformReplayShape(ReplayCall* r, const GraphState& g,
                                 const std::vector<uint64_t>& live_of_context, uint64_t pick) {
  ReplaySpecT& spec = r->spec;
  switch (pick) {
    case 0:
      if (g.host) {
        spec.bindings[rng_.Below(g.decls.size())].host_bytes -= 4;
        r->expected = VYRE_STATUS_SHAPE_MISMATCH;
      }
      break;
    case 8:
      // More elements than a HOST binding recorded with the count holds.
      if (g.host && g.recorded < g.capacity) {
        spec.element_count = rng_.Range(g.recorded + 1, g.capacity);
        r->expected = VYRE_STATUS_SHAPE_MISMATCH;
      }
      break;
    case 1:
      if (!spec.bindings.empty()) {
        spec.bindings.push_back(spec.bindings.back());
        r->expected = VYRE_STATUS_SHAPE_MISMATCH;
      }
      break;
    case 2:
      spec.element_count = g.capacity + rng_.Range(1, 1000);
      r->expected = VYRE_STATUS_LIMIT_EXCEEDED;
      break;
    default:
      // Binding 0 with the other source.
      if (!spec.bindings.empty() && !live_of_context.empty()) {
        spec.bindings[0] = g.host ? Resident(vyre_buffer{rng_.Pick(live_of_context)})
                                  : HostIn(Scratch(), 4);
        r->expected = VYRE_STATUS_SHAPE_MISMATCH;
      }
      break;
  }
}

// A bad struct size, unknown flags, a NULL descriptor, a stale or
// out-of-range buffer.
void Torture::MalformReplayArguments(ReplayCall* r, const GraphState& g,
                                     const std::vector<uint64_t>& live_of_context,
                                     uint64_t pick) {
  ReplaySpecT& spec = r->spec;
  switch (pick) {
    case 4:
      r->desc.value.struct_size = uint32_t(rng_.Below(sizeof(vyre_graph_replay_desc)));
      r->expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE;
      break;
    case 5:
      r->desc.value.flags |= 1u << rng_.Range(2, 31);
      r->expected = VYRE_STATUS_INVALID_ARGUMENT;
      break;
    case 6:
      if (g.host) {
        r->null_desc = true;
        r->expected = VYRE_STATUS_INVALID_ARGUMENT;
      } else if (!pop_.dead_buffers.empty()) {
        spec.bindings = r->bindings;
        spec.bindings[0].buffer.bits = rng_.Pick(pop_.dead_buffers);
        r->expected = VYRE_STATUS_STALE_HANDLE;
      }
      break;
    default:
      if (!g.host && !live_of_context.empty()) {
        spec.bindings = r->bindings;
        spec.bindings[0] = Resident(vyre_buffer{rng_.Pick(live_of_context)},
                                    UINT64_MAX - 4 * rng_.Below(4), 4);
        r->expected = VYRE_STATUS_OUT_OF_RANGE;
      }
      break;
  }
}

// The model: param_n elements of the kernel, OUTPUT zeroed first.
void Torture::ModelReplay(ReplayCall* r, GraphState* g) {
  const bool add = g->kernel == KernelKind::kAdd;
  if (!g->host) {
    if (add) {
      ModelAdd(r->bound[0], r->bound[1], r->bound[2], r->param_n);
    } else {
      ModelInc(r->bound[0], r->param_n, g->iterations);
    }
    return;
  }
  const std::vector<std::vector<uint8_t>>& inputs = r->inputs;
  std::vector<uint8_t> result(g->recorded * 4, 0);
  if (add) {
    for (uint64_t e = 0; e < r->param_n; ++e) {
      uint32_t x, y;
      std::memcpy(&x, &inputs[0][4 * e], 4);
      std::memcpy(&y, &inputs[1][4 * e], 4);
      uint32_t sum = x + y;
      std::memcpy(&result[4 * e], &sum, 4);
    }
  } else {
    result = inputs[0];
    for (uint64_t e = 0; e < r->param_n; ++e) {
      uint32_t x;
      std::memcpy(&x, &result[4 * e], 4);
      x += g->iterations;
      std::memcpy(&result[4 * e], &x, 4);
    }
  }
  const size_t out_index = add ? 2 : 0;
  HostBinding& h = r->pending.host[out_index];
  const vyre_binding_decl& d = g->decls[out_index];
  const uint64_t length = d.output_length ? d.output_length : g->recorded * 4 - d.output_offset;
  h.expected = h.before;
  h.expected_known.assign(h.before.size(), 1);
  for (uint64_t i = d.output_offset; i < d.output_offset + length; ++i) h.expected[i] = result[i];
  r->pending.check_results = true;
  g->last_inputs = inputs;
}

}  // namespace torture
}  // namespace vyre_test
