// Checking a sequence's descriptor and steps, and resolving each step.
#include "graph/sequence_plan.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "base/checked_math.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "runtime/dispatch/dispatch_plan.h"
#include "runtime/program/program.h"
#include "runtime/transfer/buffer.h"

namespace vyre {
namespace {

// Steps a run may expand to (the repeated block counted each time): a graph
// of more nodes than this is far past any benefit and slow to instantiate.
constexpr uint64_t kMaxRunSteps = uint64_t{1} << 20;

// Looks up a step's buffer and checks the byte range against it.
absl::StatusOr<std::shared_ptr<Buffer>> StepBuffer(const std::string& where, const char* field,
                                                   vyre_buffer handle, uint64_t offset,
                                                   uint64_t bytes, const Context& context) {
  auto looked_up = Buffers().Lookup(handle.bits, where.c_str());
  if (!looked_up.ok()) return looked_up.status();
  const Buffer& buffer = **looked_up;
  if (&buffer.context() != &context) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %s belongs to another context. Fix: use buffers allocated on the "
                  "sequence's context.",
                  where, field);
  }
  if (!RangeInside(offset, bytes, buffer.bytes())) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: range [%u, +%u) of %s ends past the buffer's %u bytes. Fix: keep offset "
                  "+ bytes within the buffer.",
                  where, offset, bytes, field, buffer.bytes());
  }
  return looked_up;
}

// The repeated block: given exactly when it repeats, and within the steps.
absl::Status CheckRepeatedBlock(const vyre_sequence_desc& desc, const char* what) {
  if (desc.repeat_step_count == 0 && desc.repeat_count != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: repeat_count is %u but no block is given (repeat_step_count 0). Fix: set "
                  "repeat_first and repeat_step_count to the block to repeat, or repeat_count "
                  "to 0.",
                  what, desc.repeat_count);
  }
  if (desc.repeat_step_count != 0 && desc.repeat_count == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: repeat_count is 0, so the repeated block would never run. Fix: set "
                  "repeat_count to 1 or more, or repeat_step_count to 0 for no block.",
                  what);
  }
  if (!RangeInside(desc.repeat_first, desc.repeat_step_count, desc.step_count)) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: the repeated block [%u, +%u) ends past the %u steps. Fix: keep "
                  "repeat_first + repeat_step_count within step_count.",
                  what, desc.repeat_first, desc.repeat_step_count, desc.step_count);
  }
  return absl::OkStatus();
}

// A DISPATCH step's bindings: resident ranges only, the OUTPUT ones zeroed
// before each launch.
absl::Status TakeDispatchBindings(const DispatchPlan& plan, const std::string& where,
                                  SequenceStep* step) {
  for (size_t b = 0; b < plan.bindings.size(); ++b) {
    const PlannedBinding& pb = plan.bindings[b];
    if (pb.decl->role == VYRE_ROLE_SHARED) continue;
    if (pb.host) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: binding %u ('%s') is HOST; sequence steps bind resident buffers "
                    "only. Fix: bind a resident buffer and add an UPLOAD or DOWNLOAD step for "
                    "the host data.",
                    where, b, pb.decl->name);
    }
    step->buffers.push_back(pb.buffer);
    if (pb.decl->role == VYRE_ROLE_OUTPUT) {
      step->zeroed.push_back({pb.buffer->device() + pb.offset, pb.bytes});
    }
  }
  return absl::OkStatus();
}

// A DISPATCH step's launch: shape, iterations, parameter words and kernel
// argument values.
void TakeDispatchLaunch(const DispatchPlan& plan, const Program& program, SequenceStep* step) {
  step->shape = LaunchShapeOf(plan);
  step->iterations = plan.iterations;
  step->param_words.assign(reinterpret_cast<const char*>(plan.param_words), plan.param_bytes);
  // The parameter-word pointer is patched in once the words are uploaded.
  FillKernelValues(
      program,
      [&](uint32_t b) -> uint64_t {
        return plan.bindings[b].buffer->device() + plan.bindings[b].offset;
      },
      0, plan.scalars, &step->values);
}

absl::Status PlanDispatchStep(const Context& context, const vyre_sequence_step& in,
                              const std::string& where, SequenceStep* step) {
  VYRE_ASSIGN_OR_RETURN(step->program, Programs().Lookup(in.program.bits, where.c_str()));
  const Program& program = *step->program;
  if (&program.context() != &context) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the program belongs to another context. Fix: use programs created on "
                  "the sequence's context.",
                  where);
  }
  vyre_dispatch_desc d;
  VYRE_RETURN_IF_ERROR(ReadDescriptor(where.c_str(), "vyre_dispatch_desc", in.dispatch, &d));
  if (d.flags & VYRE_DISPATCH_FLAG_COOPERATIVE) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: cooperative dispatches cannot be sequence steps (a sequence records as "
                  "a graph, which launches with cuLaunchKernel). Fix: run the cooperative "
                  "kernel with vyre_dispatch between sequence runs.",
                  where);
  }
  DispatchPlan plan;
  VYRE_RETURN_IF_ERROR(BuildDispatchPlan(program, d, where.c_str(), &plan));
  VYRE_RETURN_IF_ERROR(TakeDispatchBindings(plan, where, step));
  TakeDispatchLaunch(plan, program, step);
  return OptInSharedMemory(program, step->shape.shared_bytes, where.c_str());
}

absl::Status PlanFillStep(const vyre_sequence_step& in, CUdeviceptr at, const std::string& where,
                          SequenceStep* step) {
  if (in.fill_byte > 0xFF) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: fill_byte %u is not a byte value. Fix: pass 0..255.", where, in.fill_byte);
  }
  step->dst = at;
  step->fill_byte = static_cast<unsigned char>(in.fill_byte);
  return absl::OkStatus();
}

absl::Status PlanCopyStep(const Context& context, const vyre_sequence_step& in,
                          const std::shared_ptr<Buffer>& buffer, CUdeviceptr at,
                          const std::string& where, SequenceStep* step) {
  VYRE_ASSIGN_OR_RETURN(
      std::shared_ptr<Buffer> source,
      StepBuffer(where, "src_buffer", in.src_buffer, in.src_offset, in.bytes, context));
  if (source == buffer && in.src_offset < in.offset + in.bytes &&
      in.offset < in.src_offset + in.bytes) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the source [%u, +%u) and destination [%u, +%u) overlap in one "
                  "buffer. Fix: copy through a second buffer, or between disjoint ranges.",
                  where, in.src_offset, in.bytes, in.offset, in.bytes);
  }
  step->dst = at;
  step->src = source->device() + in.src_offset;
  step->buffers.push_back(std::move(source));
  return absl::OkStatus();
}

// UPLOAD and DOWNLOAD: host memory staged through the sequence's pinned
// buffer, each step at its own aligned offset.
absl::Status PlanHostStep(const vyre_sequence_step& in, CUdeviceptr at, uint64_t* pinned_bytes,
                          const std::string& where, SequenceStep* step) {
  const bool upload = step->kind == VYRE_STEP_UPLOAD;
  if (upload ? in.host_src == nullptr : in.host_dst == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %s is NULL. Fix: point it at %u bytes of host memory that stays "
                  "valid for the sequence's life.",
                  where, upload ? "host_src" : "host_dst", in.bytes);
  }
  auto aligned = CheckedAlignUp(in.bytes, kSlabAlignment);
  auto end = aligned ? CheckedAdd(*pinned_bytes, *aligned) : std::nullopt;
  if (!end) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: the sequence's host transfers total more than 2^64 bytes. Fix: "
                  "split the sequence.",
                  where);
  }
  step->pinned_offset = *pinned_bytes;
  *pinned_bytes = *end;
  (upload ? step->dst : step->src) = at;
  step->host_src = in.host_src;
  step->host_dst = in.host_dst;
  return absl::OkStatus();
}

// FILL, COPY, UPLOAD and DOWNLOAD: a byte range of one resident buffer (and,
// for COPY, of a second one). `kind` is the caller's raw value, which may be
// no step kind at all.
absl::Status PlanTransferStep(const Context& context, const vyre_sequence_step& in,
                              uint32_t kind, uint64_t* pinned_bytes, const std::string& where,
                              SequenceStep* step) {
  if (kind < VYRE_STEP_FILL || kind > VYRE_STEP_DOWNLOAD) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: kind %d is not a step kind. Fix: use a VYRE_STEP_* value.", where,
                  static_cast<int32_t>(kind));
  }
  if (in.bytes == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: bytes is 0, so the step would do nothing. Fix: pass the number of bytes "
                  "to move, or leave the step out.",
                  where);
  }
  step->bytes = in.bytes;
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer,
                        StepBuffer(where, "buffer", in.buffer, in.offset, in.bytes, context));
  const CUdeviceptr at = buffer->device() + in.offset;
  step->buffers.push_back(buffer);
  switch (kind) {
    case VYRE_STEP_FILL: return PlanFillStep(in, at, where, step);
    case VYRE_STEP_COPY: return PlanCopyStep(context, in, buffer, at, where, step);
    default: return PlanHostStep(in, at, pinned_bytes, where, step);
  }
}

}  // namespace

const char* StepKindName(uint32_t kind) {
  switch (kind) {
    case VYRE_STEP_DISPATCH: return "DISPATCH";
    case VYRE_STEP_FILL: return "FILL";
    case VYRE_STEP_COPY: return "COPY";
    case VYRE_STEP_UPLOAD: return "UPLOAD";
    case VYRE_STEP_DOWNLOAD: return "DOWNLOAD";
  }
  return "unknown";
}

absl::Status CheckSequenceDesc(const vyre_sequence_desc& desc, const char* what) {
  if (desc.step_count == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: step_count is 0, so the sequence would do nothing. Fix: pass at least "
                  "one step.",
                  what);
  }
  if (desc.steps == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: steps is NULL but step_count is %u. Fix: pass the step array.", what,
                  desc.step_count);
  }
  VYRE_RETURN_IF_ERROR(CheckRepeatedBlock(desc, what));
  uint64_t run_steps = desc.step_count - desc.repeat_step_count +
                       uint64_t{desc.repeat_step_count} * desc.repeat_count;
  if (run_steps > kMaxRunSteps) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: the sequence expands to %u steps per run, over the limit of %u. Fix: "
                  "repeat fewer times and run the sequence (or its graph) more often.",
                  what, run_steps, kMaxRunSteps);
  }
  return absl::OkStatus();
}

absl::Status PlanSequenceStep(const Context& context, const vyre_sequence_step& in, size_t index,
                              uint64_t* pinned_bytes, const char* what, SequenceStep* step) {
  const uint32_t kind = RawEnum(in.kind);
  std::string where = absl::StrCat(what, ": step ", index, " (", StepKindName(kind), ")");
  step->kind = static_cast<vyre_step_kind>(kind);
  if (kind == VYRE_STEP_DISPATCH) return PlanDispatchStep(context, in, where, step);
  return PlanTransferStep(context, in, kind, pinned_bytes, where, step);
}

std::vector<uint32_t> SequenceRunOrder(const vyre_sequence_desc& desc) {
  std::vector<uint32_t> order;
  for (size_t i = 0; i < desc.repeat_first; ++i) order.push_back(static_cast<uint32_t>(i));
  for (uint32_t r = 0; r < desc.repeat_count; ++r) {
    for (size_t i = 0; i < desc.repeat_step_count; ++i) {
      order.push_back(static_cast<uint32_t>(desc.repeat_first + i));
    }
  }
  for (size_t i = desc.repeat_first + desc.repeat_step_count; i < desc.step_count; ++i) {
    order.push_back(static_cast<uint32_t>(i));
  }
  return order;
}

SequenceCounts CountSequenceRun(const std::vector<SequenceStep>& steps,
                                const std::vector<uint32_t>& order) {
  SequenceCounts c;
  for (uint32_t index : order) {
    const SequenceStep& step = steps[index];
    switch (step.kind) {
      case VYRE_STEP_DISPATCH:
        c.memset_operations += step.zeroed.size();
        c.kernel_launches += step.iterations;
        break;
      case VYRE_STEP_FILL: c.memset_operations += 1; break;
      case VYRE_STEP_UPLOAD:
        c.h2d_operations += 1;
        c.h2d_bytes += step.bytes;
        break;
      case VYRE_STEP_DOWNLOAD:
        c.d2h_operations += 1;
        c.d2h_bytes += step.bytes;
        break;
      default: break;
    }
  }
  return c;
}

}  // namespace vyre
