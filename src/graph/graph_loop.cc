// Loop graphs (vyre_graph_loop_create): a body graph run on the device while
// it asks for another round (device_loop.h), the body cloned into the WHILE
// node by a child graph node as it stands.
#include <utility>

#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"
#include "graph/device_loop.h"
#include "graph/graph.h"
#include "graph/sequence.h"
#include "runtime/transfer/buffer.h"

namespace vyre {
namespace {

// A u32 word of a RESIDENT buffer of `context`: its device address.
absl::StatusOr<CUdeviceptr> LoopWord(const char* what, const char* field, vyre_buffer handle,
                                     uint64_t offset, const Context& context,
                                     std::vector<std::shared_ptr<Buffer>>* keep) {
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer, Buffers().Lookup(handle.bits, what));
  if (&buffer->context() != &context) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %s_buffer belongs to another context than the body graph. Fix: use a "
                  "buffer allocated on the body's context.",
                  what, field);
  }
  if (offset % 4 != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: %s_offset %u is not a multiple of 4. Fix: place the u32 word at a "
                  "4-byte-aligned offset.",
                  what, field, offset);
  }
  if (offset > buffer->bytes() || buffer->bytes() - offset < 4) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: %s_offset %u leaves no u32 inside the %u-byte buffer. Fix: pass an offset "
                  "at most the buffer's size - 4.",
                  what, field, offset, buffer->bytes());
  }
  const CUdeviceptr address = buffer->device() + offset;
  keep->push_back(std::move(buffer));
  return address;
}


}  // namespace

absl::StatusOr<std::shared_ptr<Graph>> Graph::CreateLoop(std::shared_ptr<Graph> body,
                                                         const vyre_graph_loop_desc& desc,
                                                         const char* what) {
  if (desc.max_iterations == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: max_iterations is 0. Fix: pass the most iterations a launch may run "
                  "(at least 1).",
                  what);
  }
  const std::shared_ptr<Context>& context = body->context_ref();
  Context& ctx = *context;
  // Before `work`: its guards release with the context current.
  driver::ScopedContext bind(ctx.cu());
  VYRE_RETURN_IF_ERROR(bind.status(what));
  CapturedWork work;
  VYRE_ASSIGN_OR_RETURN(const CUdeviceptr condition,
                        LoopWord(what, "condition", desc.condition_buffer, desc.condition_offset,
                                 ctx, &work.buffers));
  CUdeviceptr count = 0;
  if (desc.count_buffer.bits != 0) {
    VYRE_ASSIGN_OR_RETURN(count, LoopWord(what, "count", desc.count_buffer, desc.count_offset,
                                          ctx, &work.buffers));
    if (count == condition) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: the count word is the condition word. Fix: give the count its own "
                    "u32 (another offset or buffer), or no count_buffer.",
                    what);
    }
  } else {
    VYRE_ASSIGN_OR_RETURN(work.device_params,
                          OwnedBytes::Allocate(OwnedBytes::Kind::kDevice, ctx.cu(),
                                               &ctx.telemetry(), 256, what));
    count = work.device_params.device();
  }
  const FillLoopBody fill = [&](CUgraph inner, std::vector<CUgraphNode>* last) -> absl::Status {
    // The body as it stands: its graph's nodes brought up to what its next
    // replay would run, then cloned into the loop.
    std::lock_guard lock(body->mutex());
    if (body->has_host_staging()) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: the body graph has HOST bindings or steps, whose copies would run "
                    "every iteration. Fix: record the body with RESIDENT bindings (upload before "
                    "the loop's launch, download after).",
                    what);
    }
    // The buffers the body runs on now, held and checked at every launch
    // (a sequence's own are checked through it, CheckLoopBodyLive).
    for (const Binding& b : body->bindings_) {
      if (!b.host && b.buffer != nullptr) work.buffers.push_back(b.buffer);
    }
    work.buffers.insert(work.buffers.end(), body->captured_buffers_.begin(),
                        body->captured_buffers_.end());
    VYRE_RETURN_IF_ERROR(body->CheckLoopBodyLive(what));
    for (const std::shared_ptr<Buffer>& buffer : work.buffers) {
      if (buffer->freed()) {
        return Errorf(VYRE_STATUS_STALE_HANDLE,
                      "%s: the body graph is bound to a buffer that was freed. Fix: rebind the "
                      "body to live buffers (replay it with new bindings) or record it again, "
                      "then create the loop.",
                      what);
      }
    }
    VYRE_RETURN_IF_ERROR(body->SyncTemplate(what));
    CUgraphNode child = nullptr;
    VYRE_CU(what, cuGraphAddChildGraphNode, &child, inner, nullptr, 0, body->full_.graph.get());
    last->push_back(child);
    return absl::OkStatus();
  };
  VYRE_ASSIGN_OR_RETURN(DeviceLoop loop,
                        MakeDeviceLoop(ctx, condition, count, desc.max_iterations, fill, what));
  work.graph = std::move(loop.graph);
  work.programs.clear();
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g,
                        FromCapture(context, std::move(work), what));
  g->loop_module_ = std::move(loop.module);
  g->loop_body_ = std::move(body);
  return g;
}

absl::Status Graph::CheckLoopBodyLive(const char* what) const {
  if (sequence_) return sequence_->CheckBuffersLive(what);
  if (loop_body_) return loop_body_->CheckLoopBodyLive(what);
  return absl::OkStatus();
}

}  // namespace vyre
