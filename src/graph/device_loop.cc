#include "graph/device_loop.h"

#include <utility>

#include "base/status.h"
#include "driver/cu_error.h"
#include "runtime/program/module_cache.h"

// The loop kernels, device-linked machine code (src/CMakeLists.txt).
extern const unsigned char vyre_builtin_loop_fatbin[];
extern const size_t vyre_builtin_loop_fatbin_size;

namespace vyre {
namespace {

constexpr char kControlKernel[] = "vyre_loop_control";
constexpr char kStartKernel[] = "vyre_loop_start";

}  // namespace

absl::StatusOr<DeviceLoop> MakeDeviceLoop(Context& ctx, CUdeviceptr condition,
                                          CUdeviceptr count, uint32_t max_iterations,
                                          const FillLoopBody& fill, const char* what) {
  if (!driver::HasConditionalGraphs()) {
    return Errorf(VYRE_STATUS_DRIVER_TOO_OLD,
                  "%s: the installed driver (CUDA %d.%d) has no conditional graph nodes, which "
                  "device-side loops need. Fix: install an NVIDIA driver that supports CUDA "
                  "12.4 or newer, or loop on the host.",
                  what, driver::DriverVersion() / 1000, (driver::DriverVersion() % 1000) / 10);
  }
  DeviceLoop loop;
  VYRE_ASSIGN_OR_RETURN(loop.module,
                        ctx.modules().GetOrLoad(
                            VYRE_CODE_BINARY,
                            absl::string_view(reinterpret_cast<const char*>(vyre_builtin_loop_fatbin),
                                              vyre_builtin_loop_fatbin_size),
                            {}, kControlKernel, what));
  CUfunction control = nullptr, start = nullptr;
  VYRE_CU(what, cuModuleGetFunction, &control, loop.module->get(), kControlKernel);
  VYRE_CU(what, cuModuleGetFunction, &start, loop.module->get(), kStartKernel);
  CUDA_KERNEL_NODE_PARAMS one_thread{};
  one_thread.gridDimX = one_thread.gridDimY = one_thread.gridDimZ = 1;
  one_thread.blockDimX = one_thread.blockDimY = one_thread.blockDimZ = 1;

  VYRE_CU(what, cuGraphCreate, loop.graph.out(), 0);
  CUgraph top = loop.graph.get();
  CUgraphNode reset = nullptr;
  void* start_args[] = {&condition, &count};
  CUDA_KERNEL_NODE_PARAMS start_params = one_thread;
  start_params.func = start;
  start_params.kernelParams = start_args;
  VYRE_CU(what, cuGraphAddKernelNode, &reset, top, nullptr, 0, &start_params);
  CUgraphConditionalHandle handle = 0;
  VYRE_CU(what, cuGraphConditionalHandleCreate, &handle, top, ctx.cu(), 1,
          CU_GRAPH_COND_ASSIGN_DEFAULT);
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = handle;
  params.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  params.conditional.size = 1;
  params.conditional.ctx = ctx.cu();
  CUgraphNode while_node = nullptr;
  VYRE_CU(what, cuGraphAddNode, &while_node, top, &reset, nullptr, 1, &params);
  CUgraph inner = params.conditional.phGraph_out[0];

  std::vector<CUgraphNode> last;
  VYRE_RETURN_IF_ERROR(fill(inner, &last));
  void* control_args[] = {&handle, &condition, &count, &max_iterations};
  CUDA_KERNEL_NODE_PARAMS control_params = one_thread;
  control_params.func = control;
  control_params.kernelParams = control_args;
  CUgraphNode control_node = nullptr;
  VYRE_CU(what, cuGraphAddKernelNode, &control_node, inner, last.data(), last.size(),
          &control_params);
  return loop;
}

}  // namespace vyre
