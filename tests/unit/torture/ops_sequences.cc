// The torture operations on sequences: create (random fill, copy, upload,
// download and dispatch steps, with a repeated block), run, record as a
// graph, and destroy.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {

// A sequence as it is built: the context's buffers and programs, the steps
// and their model, and the dispatch descriptors the steps point at.
struct SequenceBuild {
  vyre_context context{0};
  std::vector<size_t> buffers;
  std::vector<const ProgramState*> programs;
  std::shared_ptr<SeqModel> model;
  std::vector<vyre_sequence_step> steps;
  std::vector<std::unique_ptr<DispatchSpec>> specs;
  std::vector<std::unique_ptr<vyre_dispatch_desc>> descs;
};

namespace {

// The model's run order: the steps before the repeated block, the block
// repeat_count times, then the rest.
void SetRunOrder(const vyre_sequence_desc& desc, size_t count, SeqModel* model) {
  for (size_t i = 0; i < desc.repeat_first; ++i) model->order.push_back(uint32_t(i));
  for (uint32_t r = 0; r < desc.repeat_count; ++r) {
    for (size_t i = 0; i < desc.repeat_step_count; ++i) {
      model->order.push_back(uint32_t(desc.repeat_first + i));
    }
  }
  for (size_t i = desc.repeat_first + desc.repeat_step_count; i < count; ++i) {
    model->order.push_back(uint32_t(i));
  }
}

}  // namespace

void Torture::SequenceCreate() {
  if (pop_.sequences.size() >= kMaxSequences) {
    SequenceDestroy();
    return;
  }
  const char* call = "vyre_sequence_create";
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  if (choice != HandleChoice::kValid) {
    SequenceCreateRefused(context, choice);
    return;
  }
  SequenceBuild build;
  build.context = context;
  for (size_t i = 0; i < pop_.buffers.size(); ++i) {
    if (pop_.buffers[i].context == context.bits) build.buffers.push_back(i);
  }
  if (build.buffers.empty()) return;
  for (const ProgramState& p : pop_.programs) {
    if (p.context != context.bits) continue;
    if (p.kind == KernelKind::kInc) build.programs.push_back(&p);
    if (p.kind == KernelKind::kAdd && p.decls[2].output_offset == 0 &&
        p.decls[2].output_length == 0) {
      build.programs.push_back(&p);
    }
  }
  build.model = std::make_shared<SeqModel>();
  build.model->context = context.bits;
  const size_t count = size_t(rng_.Range(1, 10));
  while (build.steps.size() < count) AddSequenceStep(&build);
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = build.steps.data();
  desc.step_count = build.steps.size();
  if (rng_.Chance(0.4)) {
    desc.repeat_first = rng_.Below(count);
    desc.repeat_step_count = rng_.Range(1, count - desc.repeat_first);
    desc.repeat_count = uint32_t(rng_.Range(1, 4));
  }
  // At most one malformation, with its exact status.
  vyre_status expected = VYRE_STATUS_OK;
  bool null_out = false;
  if (rng_.Chance(0.15)) expected = MalformSequence(&build, &desc, &null_out);
  vyre_sequence out{0};
  vyre_status s = Check(vyre_sequence_create(context, &desc, null_out ? nullptr : &out), call);
  ExpectStatus(s, expected, call);
  if (s != VYRE_STATUS_OK) return;
  if (expected != VYRE_STATUS_OK) {
    Check(vyre_sequence_destroy(out), "vyre_sequence_destroy");
    return;
  }
  SetRunOrder(desc, count, build.model.get());
  pop_.sequences.push_back(SequenceState{out, context.bits, std::move(build.model)});
}

// A one-step sequence on a bad context handle: refused.
void Torture::SequenceCreateRefused(vyre_context context, HandleChoice choice) {
  const char* call = "vyre_sequence_create";
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.bytes = 4;
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = &step;
  desc.step_count = 1;
  vyre_sequence out{0};
  vyre_status s = Check(vyre_sequence_create(context, &desc, &out), call);
  ExpectNotOk(s, choice, call);
  ExpectHandleError(s, choice, call);
}

// A random byte range of a buffer of the context.
Range Torture::RandomByteRange(const std::vector<size_t>& buffers, uint64_t max_bytes) {
  const BufferState& b = pop_.buffers[rng_.Pick(buffers)];
  Range r{b.handle.bits, rng_.Below(b.bytes), 0};
  r.bytes = rng_.Range(1, std::min(b.bytes - r.offset, max_bytes));
  return r;
}

// Adds a random step, unless the one drawn does not fit (then nothing).
void Torture::AddSequenceStep(SequenceBuild* build) {
  SeqStepModel m;
  vyre_sequence_step st = VYRE_SEQUENCE_STEP_INIT;
  if (!RandomSequenceStep(build, &m, &st)) return;
  st.kind = m.kind;
  if (m.kind != VYRE_STEP_DISPATCH) {
    st.buffer.bits = m.dst.buffer;
    st.offset = m.dst.offset;
    st.bytes = m.dst.bytes;
  }
  build->steps.push_back(st);
  build->model->steps.push_back(std::move(m));
}

bool Torture::RandomSequenceStep(SequenceBuild* build, SeqStepModel* m, vyre_sequence_step* st) {
  const uint64_t pick = rng_.Below(build->programs.empty() ? 4 : 6);
  if (pick == 0) {
    m->kind = VYRE_STEP_FILL;
    m->dst = RandomByteRange(build->buffers, 8192);
    m->fill = uint8_t(rng_.Bits());
    st->fill_byte = m->fill;
  } else if (pick == 1) {
    m->kind = VYRE_STEP_COPY;
    m->src = RandomByteRange(build->buffers, 8192);
    const BufferState* d = &pop_.buffers[rng_.Pick(build->buffers)];
    if (d->bytes < m->src.bytes) return false;
    m->dst = Range{d->handle.bits, rng_.Below(d->bytes - m->src.bytes + 1), m->src.bytes};
    if (Overlap(m->src, m->dst)) return false;  // refused; not what this step tests
    st->src_buffer.bits = m->src.buffer;
    st->src_offset = m->src.offset;
  } else if (pick == 2 || pick == 3) {
    m->kind = pick == 2 ? VYRE_STEP_UPLOAD : VYRE_STEP_DOWNLOAD;
    m->dst = RandomByteRange(build->buffers, 4096);
    m->host = std::make_shared<std::vector<uint8_t>>(m->dst.bytes, kPoisonByte);
    st->host_src = m->host->data();
    st->host_dst = m->host->data();
    build->model->host_steps = true;
  } else {
    return RandomDispatchStep(build, m, st);
  }
  return true;
}

// A vector add or increment over disjoint resident ranges of the context.
bool Torture::RandomDispatchStep(SequenceBuild* build, SeqStepModel* m, vyre_sequence_step* st) {
  m->kind = VYRE_STEP_DISPATCH;
  const ProgramState& p = *rng_.Pick(build->programs);
  m->kernel = p.kind;
  const uint64_t elements = rng_.Range(1, 600);
  bool found = true;
  for (size_t i = 0; i < p.decls.size() && found; ++i) {
    Range r;
    std::vector<Range> avoid = i == 2 ? m->bindings : std::vector<Range>{};
    found = RandomRange(build->context.bits, elements * 4, avoid, &r);
    m->bindings.push_back(r);
  }
  if (!found) return false;
  m->n = uint32_t(rng_.Range(1, elements));
  m->iterations = uint32_t(rng_.Range(1, 3));
  build->specs.push_back(std::make_unique<DispatchSpec>());
  DispatchSpec& d = *build->specs.back();
  for (const Range& r : m->bindings) {
    d.bindings.push_back(Resident(vyre_buffer{r.buffer}, r.offset, r.bytes));
  }
  d.param_words = {m->n};
  d.fixpoint_iterations = m->iterations;
  build->descs.push_back(std::make_unique<vyre_dispatch_desc>(d.Desc()));
  st->program = p.handle;
  st->dispatch = build->descs.back().get();
  return true;
}

// One malformation of a sequence; returns the status it calls for.
vyre_status Torture::MalformSequence(SequenceBuild* build, vyre_sequence_desc* desc,
                                     bool* null_out) {
  std::vector<vyre_sequence_step>& steps = build->steps;
  vyre_status expected = VYRE_STATUS_OK;
  const size_t victim = rng_.Below(steps.size());
  switch (rng_.Below(7)) {
    case 0: desc->step_count = 0; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
    case 1:
      if (desc->repeat_step_count > 0) {
        desc->repeat_count = 0;
        expected = VYRE_STATUS_INVALID_ARGUMENT;
      }
      break;
    case 2:
      if (!pop_.dead_buffers.empty() && steps[victim].kind != VYRE_STEP_DISPATCH) {
        steps[victim].buffer.bits = rng_.Pick(pop_.dead_buffers);
        expected = VYRE_STATUS_STALE_HANDLE;
      }
      break;
    case 3:
      if (steps[victim].kind == VYRE_STEP_DISPATCH) {
        MalformSequenceDispatch(*build, victim);
        expected = VYRE_STATUS_INVALID_ARGUMENT;
      }
      break;
    case 4:
      if (steps[victim].kind != VYRE_STEP_DISPATCH) {
        const BufferState* b = LiveBuffer(steps[victim].buffer.bits);
        steps[victim].bytes = b->bytes - steps[victim].offset + rng_.Range(1, 64);
        expected = VYRE_STATUS_OUT_OF_RANGE;
      }
      break;
    case 5:
      steps[0].struct_size = uint32_t(rng_.Below(sizeof(vyre_sequence_step)));
      expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE;
      break;
    default: *null_out = true; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
  }
  return expected;
}

// A cooperative dispatch step, or one with a HOST binding.
void Torture::MalformSequenceDispatch(const SequenceBuild& build, size_t victim) {
  vyre_dispatch_desc* d = const_cast<vyre_dispatch_desc*>(build.steps[victim].dispatch);
  if (rng_.Chance(0.5)) {
    d->flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
  } else {
    // A HOST binding: sequence steps bind resident buffers only.
    auto* b = const_cast<vyre_dispatch_binding*>(d->bindings);
    const Range& r = build.model->steps[victim].bindings[0];
    b[0] = HostIn(Scratch(), r.bytes);
    b[0].host_output = const_cast<uint8_t*>(Scratch());  // never written: refused
  }
}

void Torture::SequenceRun() {
  const char* call = "vyre_sequence_run";
  int index;
  HandleChoice choice;
  vyre_sequence sequence{PickSequenceHandle(&index, &choice)};
  WithTail<vyre_timing> timing{VYRE_TIMING_INIT, {}};
  bool well_formed = true;
  if (rng_.Chance(0.3)) RandomizeStructSize(&rng_, &timing, &well_formed);
  well_formed = well_formed || timing.value.struct_size > sizeof(vyre_timing);
  vyre_timing* timing_ptr = rng_.Chance(0.5) ? &timing.value : nullptr;
  if (choice != HandleChoice::kValid) {
    vyre_status s = Check(vyre_sequence_run(sequence, timing_ptr), call);
    ExpectNotOk(s, choice, call);
    ExpectHandleError(s, choice, call);
    return;
  }
  SeqModel& m = *pop_.sequences[size_t(index)].model;
  if (m.host_steps && m.busy_pending != 0) return;  // a replay's read-back owns the host memory
  vyre_status expected = VYRE_STATUS_OK;
  if (timing_ptr != nullptr && !well_formed) expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE;
  else if (!AllLive(SequenceRanges(m))) expected = VYRE_STATUS_STALE_HANDLE;
  RefreshSequenceHost(m, &rng_);
  PendingState before;
  for (const SeqStepModel& st : m.steps) {
    if (st.kind != VYRE_STEP_DOWNLOAD) continue;
    HostBinding h;
    h.memory = st.host;
    h.before = *st.host;
    before.host.push_back(std::move(h));
  }
  vyre_status s = Check(vyre_sequence_run(sequence, timing_ptr), call);
  ExpectStatus(s, expected, call);
  if (s != VYRE_STATUS_OK) {
    CheckHostOutputs(before, false, call);
    return;
  }
  Downloads downloads;
  ModelSequence(m, &downloads);
  PendingState result;
  result.host = SequenceOutputs(m, downloads);
  result.check_results = true;
  CheckHostOutputs(result, true, call);
  ++checked_sequence_runs_;
}

void Torture::SequenceRecord() {
  const char* call = "vyre_sequence_record";
  if (pop_.graphs.size() >= kMaxGraphs) {
    GraphDestroy();
    return;
  }
  int index;
  HandleChoice choice;
  vyre_sequence sequence{PickSequenceHandle(&index, &choice)};
  bool null_out = rng_.Chance(0.03);
  vyre_graph out{0};
  vyre_status s = Check(vyre_sequence_record(sequence, null_out ? nullptr : &out), call);
  ExpectNotOk(s, choice, call);
  if (null_out) {
    ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, call);
    return;
  }
  if (choice != HandleChoice::kValid) {
    ExpectHandleError(s, choice, call);
    return;
  }
  const SequenceState& q = pop_.sequences[size_t(index)];
  ExpectStatus(s, AllLive(SequenceRanges(*q.model)) ? VYRE_STATUS_OK : VYRE_STATUS_STALE_HANDLE,
               call);
  if (s != VYRE_STATUS_OK) return;
  GraphState g;
  g.handle = out;
  g.context = q.context;
  g.sequence = q.model;
  pop_.graphs.push_back(std::move(g));
}

void Torture::SequenceDestroy() {
  int index;
  HandleChoice choice;
  vyre_sequence sequence{PickSequenceHandle(&index, &choice)};
  vyre_status s = Check(vyre_sequence_destroy(sequence), "vyre_sequence_destroy");
  ExpectNotOk(s, choice, "vyre_sequence_destroy");
  if (choice == HandleChoice::kStale) {
    ExpectStatus(s, VYRE_STATUS_STALE_HANDLE, "vyre_sequence_destroy");
  }
  if (choice != HandleChoice::kValid) return;
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_sequence_destroy");
  // Its graphs keep running it (and keep its model).
  ForgetSequence(size_t(index));
}

}  // namespace torture
}  // namespace vyre_test
