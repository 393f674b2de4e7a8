// Loop graphs (vyre_graph_loop_create): a body graph run on the device while
// it asks for another round, as a CUDA conditional WHILE node.
//
//   top:  [vyre_loop_start: condition = count = 0] -> [WHILE h]
//   body:   [child: the body graph] -> [vyre_loop_control]
//
// h defaults to 1 at every launch (CU_GRAPH_COND_ASSIGN_DEFAULT), so the body
// runs at least once. The control kernel (src/kernels/graph_loop.cu) counts
// the iteration and sets h to "condition != 0 and count < max", clearing the
// condition when it goes on. A WHILE iteration costs ~4.5 us of the driver's
// on an H200 even for one kernel node, so the loop adds one kernel node per
// iteration and nothing else. The graph is built node by node rather than
// captured: a conditional node's body can only be filled by the graph API or
// a capture into that body, and the child graph node clones the body's graph
// as it stands.
#include <cstring>
#include <utility>

#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/guards.h"
#include "graph/graph.h"
#include "graph/sequence.h"
#include "runtime/dispatch/kernel_launch.h"
#include "runtime/program/module_cache.h"
#include "runtime/transfer/buffer.h"

// The control kernel, device-linked machine code (src/CMakeLists.txt).
extern const unsigned char vyre_builtin_loop_fatbin[];
extern const size_t vyre_builtin_loop_fatbin_size;

namespace vyre {
namespace {

constexpr char kControlKernel[] = "vyre_loop_control";
constexpr char kStartKernel[] = "vyre_loop_start";

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
  if (!driver::HasConditionalGraphs()) {
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "%s: the installed driver (CUDA %d.%d) has no conditional graph nodes. Fix: "
                  "install an NVIDIA driver that supports CUDA 12.4 or newer, or loop on the "
                  "host (replay the body and read the condition word).",
                  what, driver::DriverVersion() / 1000, (driver::DriverVersion() % 1000) / 10);
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
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModule> module,
                        ctx.modules().GetOrLoad(
                            VYRE_CODE_BINARY,
                            absl::string_view(reinterpret_cast<const char*>(vyre_builtin_loop_fatbin),
                                              vyre_builtin_loop_fatbin_size),
                            {}, kControlKernel, what));
  CUfunction control = nullptr, start = nullptr;
  VYRE_CU(what, cuModuleGetFunction, &control, module->get(), kControlKernel);
  VYRE_CU(what, cuModuleGetFunction, &start, module->get(), kStartKernel);
  CUDA_KERNEL_NODE_PARAMS one_thread{};
  one_thread.gridDimX = one_thread.gridDimY = one_thread.gridDimZ = 1;
  one_thread.blockDimX = one_thread.blockDimY = one_thread.blockDimZ = 1;

  VYRE_CU(what, cuGraphCreate, work.graph.out(), 0);
  CUgraph top = work.graph.get();
  CUgraphNode reset = nullptr;
  void* start_args[] = {const_cast<CUdeviceptr*>(&condition), &count};
  CUDA_KERNEL_NODE_PARAMS start_params = one_thread;
  start_params.func = start;
  start_params.kernelParams = start_args;
  VYRE_CU(what, cuGraphAddKernelNode, &reset, top, nullptr, 0, &start_params);
  CUgraphConditionalHandle handle = 0;
  VYRE_CU(what, cuGraphConditionalHandleCreate, &handle, top, ctx.cu(), 1,
          CU_GRAPH_COND_ASSIGN_DEFAULT);
  CUgraphNodeParams loop{};
  loop.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  loop.conditional.handle = handle;
  loop.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  loop.conditional.size = 1;
  loop.conditional.ctx = ctx.cu();
  CUgraphNode while_node = nullptr;
  VYRE_CU(what, cuGraphAddNode, &while_node, top, &reset, nullptr, 1, &loop);
  CUgraph inner = loop.conditional.phGraph_out[0];

  CUgraphNode child = nullptr;
  {
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
    VYRE_CU(what, cuGraphAddChildGraphNode, &child, inner, nullptr, 0, body->full_.graph.get());
  }
  unsigned max_iterations = desc.max_iterations;
  void* control_args[] = {&handle, const_cast<CUdeviceptr*>(&condition), &count,
                          &max_iterations};
  CUDA_KERNEL_NODE_PARAMS control_params = one_thread;
  control_params.func = control;
  control_params.kernelParams = control_args;
  CUgraphNode control_node = nullptr;
  VYRE_CU(what, cuGraphAddKernelNode, &control_node, inner, &child, 1, &control_params);

  work.programs.clear();
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g,
                        FromCapture(context, std::move(work), what));
  g->loop_module_ = std::move(module);
  g->loop_body_ = std::move(body);
  return g;
}

absl::Status Graph::CheckLoopBodyLive(const char* what) const {
  if (sequence_) return sequence_->CheckBuffersLive(what);
  if (loop_body_) return loop_body_->CheckLoopBodyLive(what);
  return absl::OkStatus();
}

}  // namespace vyre
