// vyre_peer_copy_bench: vyre_buffer_copy against the raw CUDA driver doing
// the same copy in the same process (issue 22, "Targets"). Needs two GPUs
// for the peer and staged cases; with one, only the same-device cases run.
//
// Cases (medians of --reps timed repetitions after 10 warm-up ones; every
// path's bytes are checked once before timing):
//   peer 256 MiB     vyre_buffer_copy device 0 -> 1 vs raw cuMemcpyPeerAsync
//                    on a stream of device 1's primary context + sync, with
//                    peer access enabled both ways (target: >= 0.95x)
//   staged 256 MiB   vyre_buffer_copy with VYRE_BUFFER_COPY_FLAG_STAGED vs raw
//                    cuMemcpyDtoHAsync into pinned memory, sync, then
//                    cuMemcpyHtoDAsync, sync: PCIe down and up in sequence
//                    (target: >= 0.9x)
//   4 KiB peer       host cost of one copy: vyre_buffer_copy (enqueue + wait)
//                    vs raw cuMemcpyPeerAsync + cuStreamSynchronize, and the
//                    enqueue alone: vyre_buffer_copy_async vs cuMemcpyPeerAsync
//                    (target: within 1 us)
//   4 KiB same device  vyre_buffer_copy vs raw cuMemcpyDtoDAsync + sync
//
// Usage: vyre_peer_copy_bench [--reps N] [--bytes 256M]; the markdown report is
// printed and written to VYRE_BENCH_OUT if set.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "vyre_cuda.h"

namespace {

constexpr uint64_t kSmall = 4096;

using vyre_bench::kWarmup;
using vyre_bench::MedianUs;
using vyre_bench::NowUs;

struct Device {
  vyre_context context{0};
  CUcontext raw = nullptr;
  CUstream stream = nullptr;
};

Device Open(int ordinal) {
  Device d;
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.device_ordinal = static_cast<uint32_t>(ordinal);
  CHECK_VYRE(vyre_context_create(&desc, &d.context));
  CUdevice dev = 0;
  CHECK_CU(cuDeviceGet(&dev, ordinal));
  CHECK_CU(cuDevicePrimaryCtxRetain(&d.raw, dev));
  CHECK_CU(cuCtxSetCurrent(d.raw));
  CHECK_CU(cuStreamCreate(&d.stream, CU_STREAM_NON_BLOCKING));
  return d;
}

CUdeviceptr PointerOf(vyre_buffer b) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  CHECK_VYRE(vyre_buffer_info_get(b, &info));
  return static_cast<CUdeviceptr>(info.device_pointer);
}

// Fills `src` with random bytes, runs `copy`, and checks `dst` byte for byte.
void Verify(vyre_buffer src, vyre_buffer dst, uint64_t bytes, const std::function<void()>& copy,
            const char* what) {
  std::vector<unsigned char> data(bytes), back(bytes, 0);
  std::mt19937 rng(12345);
  for (auto& b : data) b = static_cast<unsigned char>(rng() % 255 + 1);
  CHECK_VYRE(vyre_buffer_upload(src, 0, data.data(), bytes));
  std::vector<unsigned char> poison(bytes, 0xEF);
  CHECK_VYRE(vyre_buffer_upload(dst, 0, poison.data(), bytes));
  copy();
  CHECK_VYRE(vyre_buffer_download(dst, 0, back.data(), bytes));
  if (std::memcmp(data.data(), back.data(), bytes) != 0) {
    std::fprintf(stderr, "%s: the copied bytes are wrong\n", what);
    std::exit(1);
  }
}

std::string Row(const char* name, double vyre_us, double raw_us, const char* target) {
  char line[512];
  std::snprintf(line, sizeof line, "| %s | %.2f | %.2f | %.3f | %s |\n", name, vyre_us, raw_us,
                raw_us / vyre_us, target);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  uint64_t big = uint64_t{256} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--bytes") == 0) big = std::strtoull(argv[i + 1], nullptr, 0) << 20;
  }
  uint32_t count = 0;
  CHECK_VYRE(vyre_device_count(&count));
  CHECK_CU(cuInit(0));
  std::string report =
      "| case | vyre (us) | raw driver (us) | raw / vyre | target |\n|---|---|---|---|---|\n";

  Device d0 = Open(0);
  vyre_buffer a{0}, b{0};
  CHECK_VYRE(vyre_buffer_alloc(d0.context, kSmall, &a));
  CHECK_VYRE(vyre_buffer_alloc(d0.context, kSmall, &b));
  vyre_buffer_copy_desc small = VYRE_BUFFER_COPY_DESC_INIT;
  small.src = a;
  small.dst = b;
  small.bytes = kSmall;
  Verify(a, b, kSmall, [&] { CHECK_VYRE(vyre_buffer_copy(&small)); }, "4 KiB same device");
  CHECK_CU(cuCtxSetCurrent(d0.raw));
  const CUdeviceptr a_ptr = PointerOf(a), b_ptr = PointerOf(b);
  const double same_vyre = MedianUs(reps * 20, [&] { CHECK_VYRE(vyre_buffer_copy(&small)); });
  const double same_raw = MedianUs(reps * 20, [&] {
    CHECK_CU(cuMemcpyDtoDAsync(b_ptr, a_ptr, kSmall, d0.stream));
    CHECK_CU(cuStreamSynchronize(d0.stream));
  });
  report += Row("4 KiB, one device, copy + wait", same_vyre, same_raw, "-");

  if (count >= 2) {
    Device d1 = Open(1);
    uint32_t peers = 0;
    CHECK_VYRE(vyre_device_can_access_peer(1, 0, &peers));
    std::printf("devices 0 and 1 %s peers\n", peers ? "are" : "are not");
    vyre_buffer src{0}, dst{0}, src_small{0}, dst_small{0};
    CHECK_VYRE(vyre_buffer_alloc(d0.context, big, &src));
    CHECK_VYRE(vyre_buffer_alloc(d1.context, big, &dst));
    CHECK_VYRE(vyre_buffer_alloc(d0.context, kSmall, &src_small));
    CHECK_VYRE(vyre_buffer_alloc(d1.context, kSmall, &dst_small));
    vyre_buffer_copy_desc peer = VYRE_BUFFER_COPY_DESC_INIT;
    peer.src = src;
    peer.dst = dst;
    peer.bytes = big;
    vyre_buffer_copy_desc staged = peer;
    staged.flags = VYRE_BUFFER_COPY_FLAG_STAGED;
    vyre_buffer_copy_desc tiny = VYRE_BUFFER_COPY_DESC_INIT;
    tiny.src = src_small;
    tiny.dst = dst_small;
    tiny.bytes = kSmall;
    Verify(src, dst, big, [&] { CHECK_VYRE(vyre_buffer_copy(&peer)); }, "peer");
    Verify(src, dst, big, [&] { CHECK_VYRE(vyre_buffer_copy(&staged)); }, "staged");
    Verify(src_small, dst_small, kSmall, [&] { CHECK_VYRE(vyre_buffer_copy(&tiny)); }, "4 KiB");
    // The raw side's peer access (already enabled by the library in the same
    // primary contexts: ALREADY_ENABLED is fine).
    if (peers) {
      CHECK_CU(cuCtxSetCurrent(d1.raw));
      CUresult r = cuCtxEnablePeerAccess(d0.raw, 0);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) CHECK_CU(r);
    }
    const CUdeviceptr from = PointerOf(src), to = PointerOf(dst);
    const CUdeviceptr from_small = PointerOf(src_small), to_small = PointerOf(dst_small);
    void* pinned = nullptr;
    CHECK_CU(cuCtxSetCurrent(d0.raw));
    CHECK_CU(cuMemHostAlloc(&pinned, big, CU_MEMHOSTALLOC_PORTABLE));

    const double peer_vyre = MedianUs(reps, [&] { CHECK_VYRE(vyre_buffer_copy(&peer)); });
    CHECK_CU(cuCtxSetCurrent(d1.raw));
    const double peer_raw = MedianUs(reps, [&] {
      CHECK_CU(cuMemcpyPeerAsync(to, d1.raw, from, d0.raw, big, d1.stream));
      CHECK_CU(cuStreamSynchronize(d1.stream));
    });
    const double staged_vyre = MedianUs(reps, [&] { CHECK_VYRE(vyre_buffer_copy(&staged)); });
    const double staged_raw = MedianUs(reps, [&] {
      CHECK_CU(cuCtxSetCurrent(d0.raw));
      CHECK_CU(cuMemcpyDtoHAsync(pinned, from, big, d0.stream));
      CHECK_CU(cuStreamSynchronize(d0.stream));
      CHECK_CU(cuCtxSetCurrent(d1.raw));
      CHECK_CU(cuMemcpyHtoDAsync(to, pinned, big, d1.stream));
      CHECK_CU(cuStreamSynchronize(d1.stream));
    });
    const double tiny_vyre = MedianUs(reps * 20, [&] { CHECK_VYRE(vyre_buffer_copy(&tiny)); });
    CHECK_CU(cuCtxSetCurrent(d1.raw));
    const double tiny_raw = MedianUs(reps * 20, [&] {
      CHECK_CU(cuMemcpyPeerAsync(to_small, d1.raw, from_small, d0.raw, kSmall, d1.stream));
      CHECK_CU(cuStreamSynchronize(d1.stream));
    });
    // Enqueue cost alone: the pending is released (which waits) outside the
    // timed part.
    std::vector<double> enqueue_vyre, enqueue_raw;
    for (int i = 0; i < reps * 20 + kWarmup; ++i) {
      vyre_pending pending{0};
      const double start = NowUs();
      CHECK_VYRE(vyre_buffer_copy_async(&tiny, &pending));
      const double mid = NowUs();
      CHECK_VYRE(vyre_pending_release(pending));
      CHECK_CU(cuCtxSetCurrent(d1.raw));
      const double raw_start = NowUs();
      CHECK_CU(cuMemcpyPeerAsync(to_small, d1.raw, from_small, d0.raw, kSmall, d1.stream));
      const double raw_end = NowUs();
      CHECK_CU(cuStreamSynchronize(d1.stream));
      if (i >= kWarmup) {
        enqueue_vyre.push_back(mid - start);
        enqueue_raw.push_back(raw_end - raw_start);
      }
    }
    std::sort(enqueue_vyre.begin(), enqueue_vyre.end());
    std::sort(enqueue_raw.begin(), enqueue_raw.end());
    const double mib = static_cast<double>(big >> 20);
    char name[128];
    std::snprintf(name, sizeof name, "peer %.0f MiB, 0 -> 1 (%.0f GB/s vyre)", mib,
                  static_cast<double>(big) / peer_vyre / 1e3);
    report += Row(name, peer_vyre, peer_raw, ">= 0.95x");
    std::snprintf(name, sizeof name, "staged %.0f MiB vs raw D2H then H2D", mib);
    report += Row(name, staged_vyre, staged_raw, ">= 0.9x");
    report += Row("4 KiB peer, copy + wait", tiny_vyre, tiny_raw, "within 1 us");
    report += Row("4 KiB peer, enqueue only", enqueue_vyre[enqueue_vyre.size() / 2],
                  enqueue_raw[enqueue_raw.size() / 2], "within 1 us");
    CHECK_CU(cuCtxSetCurrent(d0.raw));
    CHECK_CU(cuMemFreeHost(pinned));
    for (vyre_buffer x : {src, dst, src_small, dst_small}) CHECK_VYRE(vyre_buffer_free(x));
    CHECK_CU(cuCtxSetCurrent(d1.raw));
    CHECK_CU(cuStreamDestroy(d1.stream));
    CHECK_VYRE(vyre_context_destroy(d1.context));
    CUdevice dev1 = 0;
    CHECK_CU(cuDeviceGet(&dev1, 1));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev1));
  } else {
    report += "| peer and staged cases | - | - | - | need two GPUs |\n";
  }
  CHECK_VYRE(vyre_buffer_free(a));
  CHECK_VYRE(vyre_buffer_free(b));
  CHECK_CU(cuCtxSetCurrent(d0.raw));
  CHECK_CU(cuStreamDestroy(d0.stream));
  CHECK_VYRE(vyre_context_destroy(d0.context));
  CUdevice dev0 = 0;
  CHECK_CU(cuDeviceGet(&dev0, 0));
  CHECK_CU(cuDevicePrimaryCtxRelease(dev0));
  vyre_bench::Publish(report);
  return 0;
}
