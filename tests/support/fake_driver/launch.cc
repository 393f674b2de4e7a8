// cuLaunchKernel and cuLaunchCooperativeKernel: a launch runs at once, is
// deferred (FAKE_CUDA_DEFER_ALL) or becomes a node of the stream's capture;
// a launch of a kernel the fake does not know is refused (KernelRefusal).
#include <memory>
#include <utility>

#include "entry_points.h"
#include "kernels.h"
#include "state.h"

namespace fake_driver {
namespace {

CUresult LaunchOrCapture(const char* fn, CUfunction function, const LaunchShape& shape,
                         void** params, void** extra, bool cooperative, FakeCapture* capture) {
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown function", fn);
  if (CUresult r = CheckLaunchShape(*f, shape)) {
    return Misuse(r, "%s(%s): grid %ux%ux%u block %ux%ux%u shared %u exceeds device limits", fn,
                  f->name.c_str(), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                  shape.block[1], shape.block[2], shape.shared_bytes);
  }
  uint64_t block_threads = uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  uint64_t blocks = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  if (cooperative) {
    uint64_t resident = uint64_t(MaxActiveBlocksPerMultiprocessor(int(block_threads),
                                                                  shape.shared_bytes)) *
                        kMultiprocessors;
    if (blocks > resident) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  KernelArgs args(params, extra);
  if (!args.present()) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: no kernel parameters", fn);
  // A kernel the fake does not run is refused, live, deferred or captured
  // (the capture is then invalidated, as by any failed launch in it).
  if (CUresult r = KernelRefusal(f->name, fn)) return r;
  if (capture == nullptr && !(S().defer_all && !cooperative)) {
    FlushDeferred();
    return RunLaunch(f->name, shape, args, cooperative);
  }
  auto node = std::make_unique<FakeGraphNode>();
  node->op = NodeOp::kKernel;
  node->module_serial = f->module->serial;
  node->kernel = f->name;
  node->function = function;
  node->shape = shape;
  if (CUresult r = PackKernelArgs(f->name, args, &node->args)) return r;
  if (capture == nullptr) {
    // FAKE_CUDA_DEFER_ALL: the kernel runs, in order, when the host waits.
    S().deferred.push_back(std::move(*node));
    return CUDA_SUCCESS;
  }
  capture->graph->nodes.push_back(std::move(node));
  return CUDA_SUCCESS;
}

CUresult Launch(const char* fn, CUfunction function, const LaunchShape& shape, CUstream stream,
                void** params, void** extra, bool cooperative) {
  ClearRefusedKernel();
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn, kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, fn)) return r;
  if (CUresult r = CheckStreamDevice(stream, fn)) return r;
  if (cooperative) {
    if (CUresult r = RejectOnCapturingStream(stream, fn)) return r;
  }
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, fn, &capture)) return r;
  CUresult r = LaunchOrCapture(fn, function, shape, params, extra, cooperative, capture);
  if (r != CUDA_SUCCESS && capture != nullptr) capture->invalidated = true;
  return r;
}

}  // namespace

CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream stream,
                             void** params, void** extra) {
  return Launch("cuLaunchKernel", f, LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream,
                params, extra, false);
}

CUresult fake_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        CUstream stream, void** params) {
  return Launch("cuLaunchCooperativeKernel", f,
                LaunchShape{{gx, gy, gz}, {bx, by, bz}, shared}, stream, params, nullptr, true);
}

}  // namespace fake_driver
