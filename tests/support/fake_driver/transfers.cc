// Copies and memsets: validated against live memory, run at once, deferred
// until the host waits (FAKE_CUDA_DEFER_COPIES, FAKE_CUDA_DEFER_ALL) or
// captured as graph nodes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "entry_points.h"
#include "kernels.h"
#include "state.h"

namespace fake_driver {

namespace {

// Device memory a copy or memset of `n.device` touches must be that
// device's, or a peer's it enabled access to (cuCtxEnablePeerAccess).
CUresult CheckAccess(const FakeGraphNode& n, CUdeviceptr ptr, const char* fn) {
  if (n.device < 0 || n.peer) return CUDA_SUCCESS;
  const int owner = DeviceOfPointer(ptr);
  if (owner < 0 || DeviceMayAccess(n.device, owner)) return CUDA_SUCCESS;
  return Misuse(CUDA_ERROR_INVALID_VALUE,
                "%s: device %d's work touches device %d's memory at 0x%llx without peer access "
                "(cuCtxEnablePeerAccess) from device %d",
                fn, n.device, owner, static_cast<unsigned long long>(ptr), n.device);
}

}  // namespace

// Validates a copy or memset against live memory: when it is called (run at
// once or captured) and again every time a graph holding it runs.
CUresult CheckTransfer(const FakeGraphNode& n, const char* fn) {
  switch (n.op) {
    case NodeOp::kCopyHtoD:
      if (CUresult r = CheckDeviceRange(n.dst, n.bytes, fn)) return r;
      if (n.bytes > 0 && n.host_src == nullptr) {
        return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL src", fn);
      }
      break;
    case NodeOp::kCopyDtoH:
      if (CUresult r = CheckDeviceRange(n.src, n.bytes, fn)) return r;
      if (n.bytes > 0 && n.host_dst == nullptr) {
        return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: NULL dst", fn);
      }
      break;
    case NodeOp::kCopyDtoD:
      if (CUresult r = CheckDeviceRange(n.dst, n.bytes, fn)) return r;
      if (CUresult r = CheckDeviceRange(n.src, n.bytes, fn)) return r;
      if (CUresult r = CheckAccess(n, n.src, fn)) return r;
      break;
    case NodeOp::kMemset:
      if (CUresult r = CheckDeviceRange(n.dst, n.bytes, fn)) return r;
      break;
    case NodeOp::kKernel:
    case NodeOp::kChildGraph:
    case NodeOp::kConditional:
      break;
  }
  if (n.op != NodeOp::kKernel && n.op != NodeOp::kCopyDtoH) {
    if (CUresult r = CheckAccess(n, n.dst, fn)) return r;
  }
  if (n.op == NodeOp::kCopyDtoH) {
    if (CUresult r = CheckAccess(n, n.src, fn)) return r;
  }
  if (n.host_pinned) {
    const void* host = n.op == NodeOp::kCopyHtoD ? n.host_src : n.host_dst;
    if (!PinnedRangeValid(host, n.bytes)) {
      return Misuse(CUDA_ERROR_INVALID_VALUE,
                    "%s: pinned host range [%p, +%zu) of a graph's copy is no longer inside a "
                    "live pinned allocation",
                    fn, host, n.bytes);
    }
  }
  return CUDA_SUCCESS;
}

// Performs a validated copy or memset and counts it.
void RunTransfer(const FakeGraphNode& n) {
  fake_cuda_stats& st = S().stats;
  void* dst = reinterpret_cast<void*>(static_cast<uintptr_t>(n.dst));
  const void* src = reinterpret_cast<const void*>(static_cast<uintptr_t>(n.src));
  switch (n.op) {
    case NodeOp::kCopyHtoD:
      if (n.bytes > 0) std::memcpy(dst, n.host_src, n.bytes);
      ++st.memcpy_htod;
      break;
    case NodeOp::kCopyDtoH:
      if (n.bytes > 0) std::memcpy(n.host_dst, src, n.bytes);
      ++st.memcpy_dtoh;
      break;
    case NodeOp::kCopyDtoD:
      if (n.bytes > 0) std::memmove(dst, src, n.bytes);
      ++(n.peer ? st.memcpy_peer : st.memcpy_dtod);
      break;
    case NodeOp::kMemset:
      // Element by element, little-endian, as the device stores them.
      for (size_t at = 0; at < n.bytes; at += n.element_size) {
        std::memcpy(static_cast<unsigned char*>(dst) + at, &n.value, n.element_size);
      }
      ++st.memsets;
      break;
    case NodeOp::kKernel:
    case NodeOp::kChildGraph:
    case NodeOp::kConditional:
      break;
  }
}

void FlushDeferred() {
  State& s = S();
  // Swapped out first: a kernel that runs may not flush into this list.
  std::vector<FakeGraphNode> queued;
  queued.swap(s.deferred);
  for (const FakeGraphNode& n : queued) {
    if (n.op == NodeOp::kKernel) {
      // Validated when enqueued; what fails now (its module unloaded, its
      // memory freed before the host waited) is an engine bug.
      if (CUresult r = RunKernelNode(n)) {
        Misuse(CUDA_SUCCESS, "the deferred kernel %s failed with CUresult %d when the host "
               "waited", n.kernel.c_str(), static_cast<int>(r));
      }
      ++s.stats.deferred_kernels;
      continue;
    }
    // Still checked: memory freed before the host waited is an engine bug.
    if (CheckTransfer(n, "a deferred copy") != CUDA_SUCCESS) continue;
    RunTransfer(n);
    ++s.stats.deferred_copies;
  }
}

namespace {

// A copy or memset enqueued on `stream`: runs at once, or becomes a node of
// the stream's capture. A failed call invalidates the capture.
CUresult SubmitTransfer(CUstream stream, FakeGraphNode node, const char* fn) {
  if (CUresult r = CheckStreamDevice(stream, fn)) return r;
  node.device = CurrentDevice();
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, fn, &capture)) return r;
  if (capture != nullptr && node.peer) {
    capture->invalidated = true;
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s: captured peer copies are not faked",
                  fn);
  }
  if (CUresult r = CheckTransfer(node, fn)) {
    if (capture != nullptr) capture->invalidated = true;
    return r;
  }
  if (capture == nullptr) {
    if (S().defer_all ||
        (S().defer_copies && (node.op == NodeOp::kCopyHtoD || node.op == NodeOp::kCopyDtoH))) {
      S().deferred.push_back(std::move(node));
      return CUDA_SUCCESS;
    }
    FlushDeferred();
    RunTransfer(node);
    return CUDA_SUCCESS;
  }
  if (node.op == NodeOp::kCopyHtoD) node.host_pinned = PinnedRangeValid(node.host_src, node.bytes);
  if (node.op == NodeOp::kCopyDtoH) node.host_pinned = PinnedRangeValid(node.host_dst, node.bytes);
  capture->graph->nodes.push_back(std::make_unique<FakeGraphNode>(std::move(node)));
  return CUDA_SUCCESS;
}

}  // namespace

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyHtoDAsync", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemcpyHtoDAsync")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kCopyHtoD;
  node.dst = dst;
  node.host_src = src;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemcpyHtoDAsync");
}

CUresult fake_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyDtoHAsync", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemcpyDtoHAsync")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kCopyDtoH;
  node.src = src;
  node.host_dst = dst;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemcpyDtoHAsync");
}

CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemcpyDtoDAsync", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemcpyDtoDAsync")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kCopyDtoD;
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemcpyDtoDAsync");
}

// Copies between the memory of two contexts' devices, with or without peer
// access (the real driver stages through the host without it): each range
// must lie in an allocation of its context's device; the stream is the
// current context's.
CUresult fake_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                                CUcontext src_context, size_t bytes, CUstream stream) {
  static constexpr const char* fn = "cuMemcpyPeerAsync";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn, kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, fn)) return r;
  const int dst_device = DeviceOfContext(dst_context);
  const int src_device = DeviceOfContext(src_context);
  if (dst_device < 0 || src_device < 0 || S().primary_retains[dst_device] <= 0 ||
      S().primary_retains[src_device] <= 0) {
    return Misuse(CUDA_ERROR_INVALID_CONTEXT, "%s: a context is not a retained primary context",
                  fn);
  }
  if (CUresult r = CheckDeviceRange(dst, bytes, fn)) return r;
  if (CUresult r = CheckDeviceRange(src, bytes, fn)) return r;
  if (DeviceOfPointer(dst) != dst_device || DeviceOfPointer(src) != src_device) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "%s: dst is device %d's memory (context of device %d passed), src device "
                  "%d's (context of device %d passed)",
                  fn, DeviceOfPointer(dst), dst_device, DeviceOfPointer(src), src_device);
  }
  FakeGraphNode node;
  node.op = NodeOp::kCopyDtoD;
  node.peer = true;
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), fn);
}

CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuMemsetD8Async", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuMemsetD8Async")) return r;
  FakeGraphNode node;
  node.op = NodeOp::kMemset;
  node.dst = dst;
  node.value = value;
  node.bytes = bytes;
  return SubmitTransfer(stream, std::move(node), "cuMemsetD8Async");
}

// 32-bit fills (the engine uses them outside capture only: a capturing stream
// refuses them here, which the engine must never trigger).
CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                               CUstream stream) {
  static constexpr const char* fn = "cuMemsetD32Async";
  Lock lock(S().mu);
  if (CUresult r = RequireContext(fn, kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, fn)) return r;
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, fn, &capture)) return r;
  if (capture != nullptr) {
    capture->invalidated = true;
    return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s: captured 32-bit fills are not faked", fn);
  }
  if (CUresult r = CheckStreamDevice(stream, fn)) return r;
  if (dst % 4 != 0) return Misuse(CUDA_ERROR_INVALID_VALUE, "%s: destination not 4-byte aligned", fn);
  if (CUresult r = CheckDeviceRange(dst, uint64_t{count} * 4, fn)) return r;
  uint32_t* p = reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(dst));
  std::fill(p, p + count, value);
  ++S().stats.memsets;
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
