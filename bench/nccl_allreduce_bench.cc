// vyre_nccl_allreduce_bench: NCCL over the library's resident buffers against
// NCCL over raw allocations, in one process on two (or more) GPUs (issue 22,
// "Targets": within 1.02x, ordering included).
//
// One round, on every GPU i: s = a + b (a kernel), NCCL sums s over the GPUs
// into r (ncclAllReduce, u32), out = r + a (the kernel again); the host waits
// for all of it. Both sides run the same PTX kernel (examples/
// vector_add_ptx.h), the same communicators and one NCCL stream per GPU:
//   vyre  the kernels are vyre_dispatch_async on each GPU's context over its
//         buffers; vyre_context_signal_stream orders NCCL's stream after the
//         first, vyre_context_wait_stream the second after the all-reduce;
//         the host waits on the second dispatch's pending;
//   raw   cuMemAlloc memory, cuLaunchKernel on the NCCL stream before and
//         after the all-reduce, cuStreamSynchronize.
// Each side's result is checked element by element once; then --reps rounds
// of each, interleaved, give medians.
//
// Needs libnccl.so.2 (dlopen; NCCL's nccl.h is not needed) and two GPUs; it
// says why and exits 0 without them.
// Usage: vyre_nccl_allreduce_bench [--reps N] [--mib M]; the markdown report is
// printed and written to VYRE_BENCH_OUT if set.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "vector_add_ptx.h"
#include "vyre_cuda.h"

namespace {

using vyre_bench::NowUs;

constexpr uint32_t kBlock = 256;
constexpr int kMaxGpus = 8;

// The part of NCCL's ABI (nccl.h, NCCL 2.x) used here.
using NcclComm = void*;
constexpr int kNcclUint32 = 3, kNcclSum = 0;
struct Nccl {
  int (*comm_init_all)(NcclComm* comms, int count, const int* devices) = nullptr;
  int (*comm_destroy)(NcclComm comm) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  int (*all_reduce)(const void* send, void* recv, size_t count, int datatype, int op,
                    NcclComm comm, CUstream stream) = nullptr;
};

bool LoadNccl(Nccl* nccl) {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  auto load = [lib](auto* field, const char* name) {
    void* symbol = dlsym(lib, name);
    std::memcpy(field, &symbol, sizeof symbol);
    return symbol != nullptr;
  };
  return load(&nccl->comm_init_all, "ncclCommInitAll") &&
         load(&nccl->comm_destroy, "ncclCommDestroy") &&
         load(&nccl->group_start, "ncclGroupStart") && load(&nccl->group_end, "ncclGroupEnd") &&
         load(&nccl->all_reduce, "ncclAllReduce");
}

#define CHECK_NCCL(expr)                                                  \
  do {                                                                    \
    int n_ = (expr);                                                      \
    if (n_ != 0) {                                                        \
      std::fprintf(stderr, "%s failed: NCCL error %d\n", #expr, n_);      \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)

struct Gpu {
  // Both sides.
  CUcontext raw = nullptr;
  CUstream stream = nullptr;  // NCCL's
  std::vector<uint32_t> a, b;
  // vyre.
  vyre_context context{0};
  vyre_program add{0};
  vyre_buffer va{0}, vb{0}, vs{0}, vr{0}, vout{0};
  CUdeviceptr vs_ptr = 0, vr_ptr = 0;
  vyre_pending first{0}, second{0};
  // raw.
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  CUdeviceptr ra = 0, rb = 0, rs = 0, rr = 0, rout = 0, rparams = 0;
};

CUdeviceptr PointerOf(vyre_buffer b) {
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  CHECK_VYRE(vyre_buffer_info_get(b, &info));
  return static_cast<CUdeviceptr>(info.device_pointer);
}

void Setup(Gpu& g, int ordinal, uint32_t n, std::mt19937& rng) {
  const uint64_t bytes = uint64_t{n} * 4;
  g.a.resize(n);
  g.b.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    g.a[i] = rng() | 1u;
    g.b[i] = rng() | 1u;
  }
  vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
  cdesc.device_ordinal = static_cast<uint32_t>(ordinal);
  CHECK_VYRE(vyre_context_create(&cdesc, &g.context));
  vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                VYRE_BINDING_DECL_INIT};
  decls[0].name = "x";
  decls[0].role = VYRE_ROLE_INPUT;
  decls[1].name = "y";
  decls[1].role = VYRE_ROLE_INPUT;
  decls[2].name = "out";
  // INPUT_OUTPUT, not OUTPUT: a resident OUTPUT binding is zeroed before each
  // dispatch (a 256 MiB memset here), work the raw side does not do.
  decls[2].role = VYRE_ROLE_INPUT_OUTPUT;
  vyre_program_desc pdesc = VYRE_PROGRAM_DESC_INIT;
  pdesc.code_kind = VYRE_CODE_PTX;
  pdesc.code = kVectorAddPtx;
  pdesc.entry = VYRE_EXAMPLE_ADD_ENTRY;
  pdesc.bindings = decls;
  pdesc.binding_count = 3;
  pdesc.workgroup_size[0] = kBlock;
  CHECK_VYRE(vyre_program_create(g.context, &pdesc, &g.add));
  for (vyre_buffer* b : {&g.va, &g.vb, &g.vs, &g.vr, &g.vout}) {
    CHECK_VYRE(vyre_buffer_alloc(g.context, bytes, b));
  }
  CHECK_VYRE(vyre_buffer_upload(g.va, 0, g.a.data(), bytes));
  CHECK_VYRE(vyre_buffer_upload(g.vb, 0, g.b.data(), bytes));
  g.vs_ptr = PointerOf(g.vs);
  g.vr_ptr = PointerOf(g.vr);

  CUdevice dev = 0;
  CHECK_CU(cuDeviceGet(&dev, ordinal));
  CHECK_CU(cuDevicePrimaryCtxRetain(&g.raw, dev));
  CHECK_CU(cuCtxSetCurrent(g.raw));
  CHECK_CU(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuModuleLoadData(&g.module, kVectorAddPtx));
  CHECK_CU(cuModuleGetFunction(&g.kernel, g.module, VYRE_EXAMPLE_ADD_ENTRY));
  for (CUdeviceptr* p : {&g.ra, &g.rb, &g.rs, &g.rr, &g.rout}) CHECK_CU(cuMemAlloc(p, bytes));
  CHECK_CU(cuMemAlloc(&g.rparams, sizeof(uint32_t)));
  CHECK_CU(cuMemcpyHtoD(g.rparams, &n, sizeof n));
  CHECK_CU(cuMemcpyHtoD(g.ra, g.a.data(), bytes));
  CHECK_CU(cuMemcpyHtoD(g.rb, g.b.data(), bytes));
}

void Dispatch(Gpu& g, vyre_buffer x, vyre_buffer y, vyre_buffer out, uint32_t n,
              vyre_pending* pending) {
  vyre_dispatch_binding bind[3] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT,
                                   VYRE_DISPATCH_BINDING_INIT};
  const vyre_buffer buffers[3] = {x, y, out};
  for (int i = 0; i < 3; ++i) {
    bind[i].source = VYRE_SOURCE_RESIDENT;
    bind[i].buffer = buffers[i];
  }
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = bind;
  desc.binding_count = 3;
  desc.param_words = &n;
  desc.param_word_count = 1;
  CHECK_VYRE(vyre_dispatch_async(g.add, &desc, pending));
}

void RoundVyre(const Nccl& nccl, std::vector<Gpu>& gpus, NcclComm* comms, uint32_t n) {
  for (Gpu& g : gpus) {
    Dispatch(g, g.va, g.vb, g.vs, n, &g.first);
    CHECK_VYRE(vyre_context_signal_stream(g.context, reinterpret_cast<uint64_t>(g.stream)));
  }
  CHECK_NCCL(nccl.group_start());
  for (size_t i = 0; i < gpus.size(); ++i) {
    CHECK_NCCL(nccl.all_reduce(reinterpret_cast<const void*>(gpus[i].vs_ptr),
                               reinterpret_cast<void*>(gpus[i].vr_ptr), n, kNcclUint32, kNcclSum,
                               comms[i], gpus[i].stream));
  }
  CHECK_NCCL(nccl.group_end());
  for (Gpu& g : gpus) {
    CHECK_VYRE(vyre_context_wait_stream(g.context, reinterpret_cast<uint64_t>(g.stream)));
    Dispatch(g, g.vr, g.va, g.vout, n, &g.second);
  }
  for (Gpu& g : gpus) {
    CHECK_VYRE(vyre_pending_release(g.first));
    CHECK_VYRE(vyre_pending_wait(g.second, VYRE_WAIT_FOREVER));
    CHECK_VYRE(vyre_pending_release(g.second));
  }
}

void Launch(Gpu& g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr out, uint32_t n) {
  void* args[] = {&x, &y, &out, &g.rparams};
  CHECK_CU(cuLaunchKernel(g.kernel, (n + kBlock - 1) / kBlock, 1, 1, kBlock, 1, 1, 0, g.stream,
                          args, nullptr));
}

void RoundRaw(const Nccl& nccl, std::vector<Gpu>& gpus, NcclComm* comms, uint32_t n) {
  for (Gpu& g : gpus) {
    CHECK_CU(cuCtxSetCurrent(g.raw));
    Launch(g, g.ra, g.rb, g.rs, n);
  }
  CHECK_NCCL(nccl.group_start());
  for (size_t i = 0; i < gpus.size(); ++i) {
    CHECK_NCCL(nccl.all_reduce(reinterpret_cast<const void*>(gpus[i].rs),
                               reinterpret_cast<void*>(gpus[i].rr), n, kNcclUint32, kNcclSum,
                               comms[i], gpus[i].stream));
  }
  CHECK_NCCL(nccl.group_end());
  for (Gpu& g : gpus) {
    CHECK_CU(cuCtxSetCurrent(g.raw));
    Launch(g, g.rr, g.ra, g.rout, n);
  }
  for (Gpu& g : gpus) CHECK_CU(cuStreamSynchronize(g.stream));
}

// out_i[k] = sum over GPUs of (a + b)[k] + a_i[k], every element of every GPU.
void Verify(std::vector<Gpu>& gpus, uint32_t n, bool raw) {
  std::vector<uint32_t> sum(n, 0), out(n);
  for (const Gpu& g : gpus) {
    for (uint32_t k = 0; k < n; ++k) sum[k] += g.a[k] + g.b[k];
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    Gpu& g = gpus[i];
    std::fill(out.begin(), out.end(), 0u);
    if (raw) {
      CHECK_CU(cuCtxSetCurrent(g.raw));
      CHECK_CU(cuMemcpyDtoH(out.data(), g.rout, uint64_t{n} * 4));
    } else {
      CHECK_VYRE(vyre_buffer_download(g.vout, 0, out.data(), uint64_t{n} * 4));
    }
    for (uint32_t k = 0; k < n; ++k) {
      if (out[k] != sum[k] + g.a[k]) {
        std::fprintf(stderr, "%s: GPU %zu: out[%u] = %u, expected %u\n", raw ? "raw" : "vyre", i,
                     k, out[k], sum[k] + g.a[k]);
        std::exit(1);
      }
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  uint64_t mib = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoull(argv[i + 1], nullptr, 10);
  }
  uint32_t count = 0;
  CHECK_VYRE(vyre_device_count(&count));
  Nccl nccl;
  if (count < 2 || !LoadNccl(&nccl)) {
    vyre_bench::Publish(count < 2 ? "NCCL all-reduce bench: SKIPPED: needs two GPUs\n"
                                  : "NCCL all-reduce bench: SKIPPED: no libnccl.so.2\n");
    return 0;
  }
  count = std::min<uint32_t>(count, kMaxGpus);
  CHECK_CU(cuInit(0));
  const uint32_t n = static_cast<uint32_t>((mib << 20) / 4);
  std::mt19937 rng(20261128);
  std::vector<Gpu> gpus(count);
  std::vector<int> devices(count);
  for (uint32_t i = 0; i < count; ++i) {
    Setup(gpus[i], static_cast<int>(i), n, rng);
    devices[i] = static_cast<int>(i);
  }
  std::vector<NcclComm> comms(count);
  CHECK_NCCL(nccl.comm_init_all(comms.data(), static_cast<int>(count), devices.data()));

  RoundVyre(nccl, gpus, comms.data(), n);
  Verify(gpus, n, /*raw=*/false);
  RoundRaw(nccl, gpus, comms.data(), n);
  Verify(gpus, n, /*raw=*/true);
  for (int i = 0; i < vyre_bench::kWarmup; ++i) {
    RoundVyre(nccl, gpus, comms.data(), n);
    RoundRaw(nccl, gpus, comms.data(), n);
  }
  std::vector<double> vyre_us, raw_us;
  for (int i = 0; i < reps; ++i) {
    double start = NowUs();
    RoundVyre(nccl, gpus, comms.data(), n);
    vyre_us.push_back(NowUs() - start);
    start = NowUs();
    RoundRaw(nccl, gpus, comms.data(), n);
    raw_us.push_back(NowUs() - start);
  }
  const double v = Median(vyre_us), r = Median(raw_us);
  char line[512];
  std::string report =
      "| case | vyre (us) | raw (us) | vyre / raw | target |\n|---|---|---|---|---|\n";
  std::snprintf(line, sizeof line,
                "| %u GPUs, %llu MiB u32 each: add, NCCL all-reduce (sum), add, waited | %.1f | "
                "%.1f | %.3f | <= 1.02x |\n",
                count, static_cast<unsigned long long>(mib), v, r, v / r);
  report += line;

  for (uint32_t i = 0; i < count; ++i) CHECK_NCCL(nccl.comm_destroy(comms[i]));
  for (Gpu& g : gpus) {
    CHECK_CU(cuCtxSetCurrent(g.raw));
    for (CUdeviceptr p : {g.ra, g.rb, g.rs, g.rr, g.rout, g.rparams}) CHECK_CU(cuMemFree(p));
    CHECK_CU(cuModuleUnload(g.module));
    CHECK_CU(cuStreamDestroy(g.stream));
    CHECK_VYRE(vyre_context_destroy(g.context));
  }
  for (uint32_t i = 0; i < count; ++i) {
    CUdevice dev = 0;
    CHECK_CU(cuDeviceGet(&dev, static_cast<int>(i)));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev));
  }
  vyre_bench::Publish(report);
  return 0;
}
