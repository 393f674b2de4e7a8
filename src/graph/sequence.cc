#include "graph/sequence.h"

#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "base/checked_math.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "driver/cu_error.h"
#include "runtime/dispatch/dispatch_plan.h"

namespace vyre {

absl::StatusOr<std::shared_ptr<Sequence>> Sequence::Create(std::shared_ptr<Context> context,
                                                           const vyre_sequence_desc& desc,
                                                           const char* what) {
  VYRE_RETURN_IF_ERROR(CheckSequenceDesc(desc, what));
  std::shared_ptr<Sequence> seq(new Sequence(std::move(context)));
  Context& ctx = *seq->context_;
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  VYRE_RETURN_IF_ERROR(seq->AddSteps(desc, what));
  VYRE_RETURN_IF_ERROR(seq->UploadParamWords(what));
  if (seq->pinned_bytes_ > 0) {
    VYRE_ASSIGN_OR_RETURN(seq->pinned_,
                          OwnedBytes::Allocate(OwnedBytes::Kind::kPinned, ctx.cu(),
                                               &ctx.telemetry(), seq->pinned_bytes_, what));
  }
  seq->order_ = SequenceRunOrder(desc);
  seq->counts_ = CountSequenceRun(seq->steps_, seq->order_);
  ctx.telemetry().live_sequences.Add();
  seq->counted_ = true;
  return seq;
}

absl::Status Sequence::AddSteps(const vyre_sequence_desc& desc, const char* what) {
  const uint32_t stride = desc.steps[0].struct_size;
  steps_.reserve(desc.step_count);
  for (size_t i = 0; i < desc.step_count; ++i) {
    vyre_sequence_step in;
    VYRE_RETURN_IF_ERROR(ReadArrayEntry(what, "vyre_sequence_step", "step",
                                        "VYRE_SEQUENCE_STEP_INIT", desc.steps, i, stride, &in));
    SequenceStep step;
    VYRE_RETURN_IF_ERROR(PlanSequenceStep(*context_, in, i, &pinned_bytes_, what, &step));
    steps_.push_back(std::move(step));
  }
  return absl::OkStatus();
}

// Every DISPATCH step's parameter words in one device block, uploaded once.
absl::Status Sequence::UploadParamWords(const char* what) {
  Context& ctx = *context_;
  std::string words;
  std::vector<uint64_t> word_offsets(steps_.size(), UINT64_MAX);
  for (size_t i = 0; i < steps_.size(); ++i) {
    SequenceStep& step = steps_[i];
    if (step.param_words.empty()) continue;
    word_offsets[i] = words.size();
    words.append(step.param_words);
    words.resize(*CheckedAlignUp(words.size(), kSlabAlignment), '\0');
    std::string().swap(step.param_words);
  }
  if (!words.empty()) {
    VYRE_ASSIGN_OR_RETURN(params_, OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                                        &ctx.telemetry(), words.size(), what));
    VYRE_ASSIGN_OR_RETURN(PoolBlock staging, ctx.pinned_pool().Acquire(words.size(), what));
    std::memcpy(staging.host(), words.data(), words.size());
    VYRE_CU(what, cuMemcpyHtoDAsync, params_.device(), staging.host(), words.size(),
            ctx.stream());
    ctx.telemetry().h2d_operations.Add();
    ctx.telemetry().h2d_bytes.Add(words.size());
    ctx.telemetry().sync_points.Add();
    VYRE_CU(what, cuStreamSynchronize, ctx.stream());
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    SequenceStep& step = steps_[i];
    if (step.kind != VYRE_STEP_DISPATCH) continue;
    CUdeviceptr params =
        word_offsets[i] == UINT64_MAX ? ctx.zero_params() : params_.device() + word_offsets[i];
    const auto& kernel_params = step.program->params();
    for (size_t p = 0; p < kernel_params.size(); ++p) {
      if (kernel_params[p].kind == VYRE_PARAM_PARAM_WORDS) step.values[p] = params;
    }
  }
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

HandleRegistry<Sequence>& Sequences() {
  static auto* registry =
      new HandleRegistry<Sequence>(HandleType::kSequence, ReleaseRank::kSequences);
  return *registry;
}

}  // namespace vyre
