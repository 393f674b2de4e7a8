#include "graph/sequence.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checked_math.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "driver/cu_error.h"
#include "runtime/dispatch/dispatch_plan.h"
#include "runtime/registries.h"

namespace vyre {
namespace {

// Steps a run may expand to (the repeated block counted each time): a graph
// of more nodes than this is far past any benefit and slow to instantiate.
constexpr uint64_t kMaxRunSteps = uint64_t{1} << 20;

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

}  // namespace

absl::StatusOr<std::shared_ptr<Sequence>> Sequence::Create(std::shared_ptr<Context> context,
                                                           const vyre_sequence_desc& desc,
                                                           const char* what) {
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
  uint64_t run_steps =
      desc.step_count - desc.repeat_step_count + uint64_t{desc.repeat_step_count} * desc.repeat_count;
  if (run_steps > kMaxRunSteps) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: the sequence expands to %u steps per run, over the limit of %u. Fix: "
                  "repeat fewer times and run the sequence (or its graph) more often.",
                  what, run_steps, kMaxRunSteps);
  }

  std::shared_ptr<Sequence> seq(new Sequence(std::move(context)));
  Context& ctx = *seq->context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  const uint32_t stride = desc.steps[0].struct_size;
  seq->steps_.reserve(desc.step_count);
  for (size_t i = 0; i < desc.step_count; ++i) {
    vyre_sequence_step step;
    VYRE_RETURN_IF_ERROR(ReadArrayEntry(what, "vyre_sequence_step", "step",
                                        "VYRE_SEQUENCE_STEP_INIT", desc.steps, i, stride, &step));
    VYRE_RETURN_IF_ERROR(seq->AddStep(step, i, what));
  }

  // Every DISPATCH step's parameter words in one device block, uploaded once.
  std::string words;
  std::vector<uint64_t> word_offsets(seq->steps_.size(), UINT64_MAX);
  for (size_t i = 0; i < seq->steps_.size(); ++i) {
    SequenceStep& step = seq->steps_[i];
    if (step.param_words.empty()) continue;
    word_offsets[i] = words.size();
    words.append(step.param_words);
    words.resize(*CheckedAlignUp(words.size(), kSlabAlignment), '\0');
    std::string().swap(step.param_words);
  }
  if (!words.empty()) {
    VYRE_ASSIGN_OR_RETURN(seq->params_, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                             &ctx.telemetry(), words.size(), what));
    VYRE_ASSIGN_OR_RETURN(PoolBlock staging, ctx.pinned_pool().Acquire(words.size(), what));
    std::memcpy(staging.host(), words.data(), words.size());
    VYRE_CU(what, cuMemcpyHtoDAsync, seq->params_.device(), staging.host(), words.size(),
            ctx.stream());
    ctx.telemetry().h2d_operations.Add();
    ctx.telemetry().h2d_bytes.Add(words.size());
    ctx.telemetry().sync_points.Add();
    VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  }
  for (size_t i = 0; i < seq->steps_.size(); ++i) {
    SequenceStep& step = seq->steps_[i];
    if (step.kind != VYRE_STEP_DISPATCH) continue;
    CUdeviceptr params = word_offsets[i] == UINT64_MAX ? ctx.zero_params()
                                                       : seq->params_.device() + word_offsets[i];
    const auto& kernel_params = step.program->params();
    for (size_t p = 0; p < kernel_params.size(); ++p) {
      if (kernel_params[p].kind == VYRE_PARAM_PARAM_WORDS) step.values[p] = params;
    }
  }
  if (seq->pinned_bytes_ > 0) {
    VYRE_ASSIGN_OR_RETURN(seq->pinned_,
                          OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, ctx.cu(),
                                               &ctx.telemetry(), seq->pinned_bytes_, what));
  }

  // Run order, and what one run moves.
  for (size_t i = 0; i < desc.repeat_first; ++i) seq->order_.push_back(static_cast<uint32_t>(i));
  for (uint32_t r = 0; r < desc.repeat_count; ++r) {
    for (size_t i = 0; i < desc.repeat_step_count; ++i) {
      seq->order_.push_back(static_cast<uint32_t>(desc.repeat_first + i));
    }
  }
  for (size_t i = desc.repeat_first + desc.repeat_step_count; i < desc.step_count; ++i) {
    seq->order_.push_back(static_cast<uint32_t>(i));
  }
  SequenceCounts& c = seq->counts_;
  for (uint32_t index : seq->order_) {
    const SequenceStep& step = seq->steps_[index];
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
  ctx.telemetry().live_sequences.Add();
  seq->counted_ = true;
  return seq;
}

absl::Status Sequence::AddStep(const vyre_sequence_step& in, size_t index, const char* what) {
  Context& ctx = *context_;
  const uint32_t kind = RawEnum(in.kind);
  std::string where = absl::StrCat(what, ": step ", index, " (", StepKindName(kind), ")");
  SequenceStep step;
  step.kind = static_cast<vyre_step_kind>(kind);
  if (kind == VYRE_STEP_DISPATCH) {
    VYRE_ASSIGN_OR_RETURN(step.program, Programs().Lookup(in.program.bits, where.c_str()));
    const Program& program = *step.program;
    if (&program.context() != &ctx) {
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
      step.buffers.push_back(pb.buffer);
      if (pb.decl->role == VYRE_ROLE_OUTPUT) {
        step.zeroed.push_back({pb.buffer->device() + pb.offset, pb.bytes});
      }
    }
    for (int a = 0; a < 3; ++a) {
      step.shape.grid[a] = plan.grid[a];
      step.shape.block[a] = plan.block[a];
    }
    step.shape.shared_bytes = static_cast<uint32_t>(plan.shared_memory_bytes);
    step.iterations = plan.iterations;
    step.param_words.assign(reinterpret_cast<const char*>(plan.param_words), plan.param_bytes);
    // The parameter-word pointer is patched in once the words are uploaded.
    FillKernelValues(
        program,
        [&](uint32_t b) -> uint64_t {
          return plan.bindings[b].buffer->device() + plan.bindings[b].offset;
        },
        0, plan.scalars, &step.values);
    VYRE_RETURN_IF_ERROR(OptInSharedMemory(program, step.shape.shared_bytes, where.c_str()));
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
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
  step.bytes = in.bytes;
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer,
                        StepBuffer(where, "buffer", in.buffer, in.offset, in.bytes, ctx));
  const CUdeviceptr at = buffer->device() + in.offset;
  step.buffers.push_back(buffer);
  switch (kind) {
    case VYRE_STEP_FILL:
      if (in.fill_byte > 0xFF) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: fill_byte %u is not a byte value. Fix: pass 0..255.", where,
                      in.fill_byte);
      }
      step.dst = at;
      step.fill_byte = static_cast<unsigned char>(in.fill_byte);
      break;
    case VYRE_STEP_COPY: {
      VYRE_ASSIGN_OR_RETURN(
          std::shared_ptr<Buffer> source,
          StepBuffer(where, "src_buffer", in.src_buffer, in.src_offset, in.bytes, ctx));
      if (source == buffer && in.src_offset < in.offset + in.bytes &&
          in.offset < in.src_offset + in.bytes) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: the source [%u, +%u) and destination [%u, +%u) overlap in one "
                      "buffer. Fix: copy through a second buffer, or between disjoint ranges.",
                      where, in.src_offset, in.bytes, in.offset, in.bytes);
      }
      step.dst = at;
      step.src = source->device() + in.src_offset;
      step.buffers.push_back(std::move(source));
      break;
    }
    case VYRE_STEP_UPLOAD:
    case VYRE_STEP_DOWNLOAD: {
      const bool upload = kind == VYRE_STEP_UPLOAD;
      if (upload ? in.host_src == nullptr : in.host_dst == nullptr) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: %s is NULL. Fix: point it at %u bytes of host memory that stays "
                      "valid for the sequence's life.",
                      where, upload ? "host_src" : "host_dst", in.bytes);
      }
      auto aligned = CheckedAlignUp(in.bytes, kSlabAlignment);
      auto end = aligned ? CheckedAdd(pinned_bytes_, *aligned) : std::nullopt;
      if (!end) {
        return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                      "%s: the sequence's host transfers total more than 2^64 bytes. Fix: "
                      "split the sequence.",
                      where);
      }
      step.pinned_offset = pinned_bytes_;
      pinned_bytes_ = *end;
      (upload ? step.dst : step.src) = at;
      step.host_src = in.host_src;
      step.host_dst = in.host_dst;
      break;
    }
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

Sequence::~Sequence() {
  params_.reset();
  pinned_.reset();
  if (counted_) context_->telemetry().live_sequences.Sub(1);
}

absl::Status Sequence::CheckBuffersLive(const char* what) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (const auto& buffer : steps_[i].buffers) {
      if (buffer->freed()) {
        return Errorf(VYRE_STATUS_STALE_HANDLE,
                      "%s: step %u (%s) uses a buffer that was freed. Fix: keep a sequence's "
                      "buffers until the sequence (and graphs recorded from it) are destroyed, "
                      "or create the sequence again with live buffers.",
                      what, i, StepKindName(steps_[i].kind));
      }
    }
  }
  return absl::OkStatus();
}

void Sequence::StageUploads(unsigned char* pinned) const {
  for (const SequenceStep& step : steps_) {
    if (step.kind == VYRE_STEP_UPLOAD) {
      std::memcpy(pinned + step.pinned_offset, step.host_src, step.bytes);
    }
  }
}

void Sequence::FinishDownloads(const unsigned char* pinned) const {
  for (const SequenceStep& step : steps_) {
    if (step.kind == VYRE_STEP_DOWNLOAD) {
      std::memcpy(step.host_dst, pinned + step.pinned_offset, step.bytes);
    }
  }
}

absl::Status Sequence::Enqueue(CUstream stream, unsigned char* pinned,
                               std::vector<RecordedOp>* ops, const char* what) const {
  auto note = [&](vyre_graph_node_kind kind, CUdeviceptr memset_dst) {
    if (ops == nullptr) return;
    RecordedOp op;
    op.kind = kind;
    op.memset_dst = memset_dst;
    ops->push_back(std::move(op));
  };
  for (uint32_t index : order_) {
    const SequenceStep& step = steps_[index];
    switch (step.kind) {
      case VYRE_STEP_DISPATCH: {
        for (const auto& [address, bytes] : step.zeroed) {
          VYRE_CU(what, cuMemsetD8Async, address, 0, bytes, stream);
          note(VYRE_GRAPH_NODE_MEMSET, address);
        }
        KernelValues values = step.values;
        KernelArgs args;
        PointKernelArgs(values, &args);
        VYRE_RETURN_IF_ERROR(LaunchKernel(*step.program, step.shape, step.iterations, args.data(),
                                          stream, /*cooperative=*/false, nullptr, what));
        if (ops != nullptr) {
          for (uint32_t i = 0; i < step.iterations; ++i) {
            RecordedOp op;
            op.kind = VYRE_GRAPH_NODE_KERNEL;
            op.program = step.program.get();
            op.shape = step.shape;
            op.values = step.values;
            ops->push_back(std::move(op));
          }
        }
        break;
      }
      case VYRE_STEP_FILL:
        VYRE_CU(what, cuMemsetD8Async, step.dst, step.fill_byte, step.bytes, stream);
        note(VYRE_GRAPH_NODE_MEMSET, step.dst);
        break;
      case VYRE_STEP_COPY:
        VYRE_CU(what, cuMemcpyDtoDAsync, step.dst, step.src, step.bytes, stream);
        note(VYRE_GRAPH_NODE_MEMCPY, 0);
        break;
      case VYRE_STEP_UPLOAD:
        VYRE_CU(what, cuMemcpyHtoDAsync, step.dst, pinned + step.pinned_offset, step.bytes,
                stream);
        note(VYRE_GRAPH_NODE_MEMCPY, 0);
        break;
      case VYRE_STEP_DOWNLOAD:
        VYRE_CU(what, cuMemcpyDtoHAsync, pinned + step.pinned_offset, step.src, step.bytes,
                stream);
        note(VYRE_GRAPH_NODE_MEMCPY, 0);
        break;
      default: break;
    }
  }
  return absl::OkStatus();
}

absl::Status Sequence::Run(vyre_timing* timing, const char* what) {
  const int64_t start = timing ? absl::GetCurrentTimeNanos() : 0;
  std::lock_guard lock(run_mu_);
  VYRE_RETURN_IF_ERROR(CheckBuffersLive(what));
  Context& ctx = *context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  StageUploads(pinned_.host());
  absl::Status enqueued = Enqueue(ctx.stream(), pinned_.host(), nullptr, what);
  const int64_t enqueue_end = timing ? absl::GetCurrentTimeNanos() : 0;
  // Wait even after a failed enqueue: queued copies may still use the staging.
  CUresult synced = driver::Api().cuStreamSynchronize(ctx.stream());
  Telemetry& t = ctx.telemetry();
  t.sync_points.Add();
  VYRE_RETURN_IF_ERROR(enqueued);
  if (synced != CUDA_SUCCESS) return driver::CuError(synced, what, "cuStreamSynchronize");
  FinishDownloads(pinned_.host());
  t.sequence_runs.Add();
  t.h2d_bytes.Add(counts_.h2d_bytes);
  t.h2d_operations.Add(counts_.h2d_operations);
  t.d2h_bytes.Add(counts_.d2h_bytes);
  t.d2h_operations.Add(counts_.d2h_operations);
  t.memset_operations.Add(counts_.memset_operations);
  t.kernel_launches.Add(counts_.kernel_launches);
  if (timing != nullptr) {
    const int64_t end = absl::GetCurrentTimeNanos();
    *timing = vyre_timing{};
    timing->struct_size = sizeof(vyre_timing);
    timing->wall_ns = static_cast<uint64_t>(end - start);
    timing->enqueue_ns = static_cast<uint64_t>(enqueue_end - start);
    timing->wait_ns = static_cast<uint64_t>(end - enqueue_end);
  }
  return absl::OkStatus();
}

}  // namespace vyre
