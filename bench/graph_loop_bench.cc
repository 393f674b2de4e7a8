// vyre_graph_loop_bench: issue 23's device loops against the raw driver in
// the same process, on one GPU. The body is one tiny kernel
// (bench_kernels.cu, vyre_bench_tick: a counter ticks; the condition stays
// set until it reaches a multiple of N), so every launch runs exactly N
// iterations and needs no reset between launches.
//  - loop:   vyre_graph_loop_create over the recorded tick (a WHILE node),
//            launched and waited (vyre_graph_replay);
//  - raw:    a raw graph of N kernel nodes of the same kernel, captured on a
//            raw stream, cuGraphLaunch + cuStreamSynchronize;
//  - host:   N host-driven iterations: vyre_dispatch of the tick, then a
//            4-byte vyre_buffer_download of the condition word.
// Targets: loop <= 1.05x raw, and host / loop >= 3. Every launch's count is
// checked (the counter advances by exactly N).
//   VYRE_BENCH_OUT=loop.md ./build/gpu/bench/vyre_graph_loop_bench [--iterations N] [--reps R]
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench_util.h"
#include "vyre_cuda.h"

extern const char vyre_bench_kernels_ptx[];

namespace {

using vyre_bench::MedianUs;

vyre_dispatch_binding Resident(vyre_buffer buffer, uint64_t bytes) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_RESIDENT;
  b.buffer = buffer;
  b.length = bytes;
  return b;
}

uint32_t ReadWord(vyre_buffer buffer, uint64_t offset) {
  uint32_t value = 0;
  CHECK_VYRE(vyre_buffer_download(buffer, offset, &value, 4));
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t n = 100;
  int reps = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) n = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  }
  if (n < 2) n = 2;
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  vyre_context context{0};
  CHECK_VYRE(vyre_context_create(&context_desc, &context));
  vyre_device_info device = VYRE_DEVICE_INFO_INIT;
  CHECK_VYRE(vyre_context_device_info(context, &device));

  vyre_binding_decl decls[2] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT};
  decls[0].role = VYRE_ROLE_INPUT_OUTPUT;
  decls[0].element_size = 4;
  decls[0].name = "state";
  decls[1].role = VYRE_ROLE_INPUT_OUTPUT;
  decls[1].element_size = 4;
  decls[1].name = "flag";
  vyre_program_desc program_desc = VYRE_PROGRAM_DESC_INIT;
  program_desc.code_kind = VYRE_CODE_PTX;
  program_desc.code = vyre_bench_kernels_ptx;
  program_desc.entry = "vyre_bench_tick";
  program_desc.bindings = decls;
  program_desc.binding_count = 2;
  program_desc.workgroup_size[0] = 32;
  vyre_program program{0};
  CHECK_VYRE(vyre_program_create(context, &program_desc, &program));
  vyre_buffer state{0}, words{0};
  CHECK_VYRE(vyre_buffer_alloc(context, 256, &state));
  CHECK_VYRE(vyre_buffer_alloc(context, 256, &words));
  const uint32_t zeros[64] = {0};
  CHECK_VYRE(vyre_buffer_upload(state, 0, zeros, sizeof zeros));
  CHECK_VYRE(vyre_buffer_upload(words, 0, zeros, sizeof zeros));

  const vyre_dispatch_binding bindings[2] = {Resident(state, 4), Resident(words, 4)};
  const uint32_t param_words[1] = {n};
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  desc.bindings = bindings;
  desc.binding_count = 2;
  desc.param_words = param_words;
  desc.param_word_count = 1;
  desc.grid[0] = desc.grid[1] = desc.grid[2] = 1;
  desc.block[0] = 32;
  desc.block[1] = desc.block[2] = 1;
  vyre_graph body{0}, loop{0};
  CHECK_VYRE(vyre_graph_record(program, &desc, &body));
  vyre_graph_loop_desc loop_desc = VYRE_GRAPH_LOOP_DESC_INIT;
  loop_desc.max_iterations = 100 * n;  // far above: the condition stops it
  loop_desc.condition_buffer = words;
  loop_desc.count_buffer = words;
  loop_desc.count_offset = 4;
  CHECK_VYRE(vyre_graph_loop_create(body, &loop_desc, &loop));
  // The recording ran nothing; start from a multiple of n.
  CHECK_VYRE(vyre_buffer_upload(state, 0, zeros, 4));

  // The raw graph: n kernel nodes of the same kernel over the same memory,
  // in the library's context (the device's primary context).
  vyre_buffer_info state_info = VYRE_BUFFER_INFO_INIT, words_info = VYRE_BUFFER_INFO_INIT;
  CHECK_VYRE(vyre_buffer_info_get(state, &state_info));
  CHECK_VYRE(vyre_buffer_info_get(words, &words_info));
  CUdevice cu_device;
  CUcontext cu_context;
  CHECK_CU(cuInit(0));
  CHECK_CU(cuDeviceGet(&cu_device, static_cast<int>(device.ordinal)));
  CHECK_CU(cuDevicePrimaryCtxRetain(&cu_context, cu_device));
  CHECK_CU(cuCtxSetCurrent(cu_context));
  CUmodule module;
  CUfunction tick;
  CHECK_CU(cuModuleLoadData(&module, vyre_bench_kernels_ptx));
  CHECK_CU(cuModuleGetFunction(&tick, module, "vyre_bench_tick"));
  CUdeviceptr raw_params, raw_state, raw_flag;
  CHECK_CU(cuMemAlloc(&raw_params, 256));
  CHECK_CU(cuMemAlloc(&raw_state, 256));
  CHECK_CU(cuMemAlloc(&raw_flag, 256));
  CHECK_CU(cuMemcpyHtoD(raw_params, param_words, 4));
  CHECK_CU(cuMemsetD32(raw_state, 0, 64));
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (uint32_t i = 0; i < n; ++i) {
    void* args[] = {&raw_state, &raw_flag, &raw_params};
    CHECK_CU(cuLaunchKernel(tick, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr));
  }
  CUgraph raw_graph;
  CUgraphExec raw_exec;
  CHECK_CU(cuStreamEndCapture(stream, &raw_graph));
  CHECK_CU(cuGraphInstantiateWithFlags(&raw_exec, raw_graph, 0));
  CHECK_CU(cuGraphUpload(raw_exec, stream));
  CHECK_CU(cuStreamSynchronize(stream));

  uint64_t loop_launches = 0, raw_launches = 0;
  auto run_loop = [&] {
    CHECK_VYRE(vyre_graph_replay(loop, nullptr, nullptr));
    ++loop_launches;
  };
  auto run_raw = [&] {
    CHECK_CU(cuCtxSetCurrent(cu_context));
    CHECK_CU(cuGraphLaunch(raw_exec, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    ++raw_launches;
  };
  uint64_t host_iterations = 0;
  auto run_host = [&] {
    // n host-driven iterations: clear the word, dispatch, read the word.
    for (uint32_t i = 0; i < n; ++i) {
      CHECK_VYRE(vyre_buffer_upload(words, 0, zeros, 4));
      CHECK_VYRE(vyre_dispatch(program, &desc, nullptr));
      ++host_iterations;
      if (ReadWord(words, 0) == 0) break;
    }
  };

  // Interleaved rounds; medians of each.
  double loop_us[3], raw_us[3], host_us[3];
  for (int round = 0; round < 3; ++round) {
    loop_us[round] = MedianUs(reps, run_loop);
    raw_us[round] = MedianUs(reps, run_raw);
    host_us[round] = MedianUs(reps / 10 + 1, run_host);
  }
  // Every launch ran n iterations: the counter is a multiple of n, the count
  // word says n, and the loops advanced it by exactly n each.
  const uint32_t count = ReadWord(words, 4);
  const uint32_t counter = ReadWord(state, 0);
  const uint64_t expected = (loop_launches + 0) * n + host_iterations;
  bool ok = count == n && counter == static_cast<uint32_t>(expected) && counter % n == 0;
  uint32_t raw_counter = 0;
  CHECK_CU(cuMemcpyDtoH(&raw_counter, raw_state, 4));
  ok = ok && raw_counter == static_cast<uint32_t>(raw_launches * n);

  auto median3 = [](double* v) {
    double a = v[0], b = v[1], c = v[2];
    return std::max(std::min(a, b), std::min(std::max(a, b), c));
  };
  const double loop_t = median3(loop_us), raw_t = median3(raw_us), host_t = median3(host_us);
  char report[2048];
  std::snprintf(report, sizeof report,
                "## vyre_graph_loop_bench: %u iterations of a tiny kernel (%s)\n\n"
                "| path | us per launch (median of 3 rounds x %d) |\n|---|---|\n"
                "| loop graph (WHILE node), replay + wait | %.2f |\n"
                "| raw graph of %u kernel nodes, launch + sync | %.2f |\n"
                "| host-driven: %u x (dispatch + read the word) | %.2f |\n\n"
                "rounds: loop %.2f %.2f %.2f; raw %.2f %.2f %.2f; host %.2f %.2f %.2f\n\n"
                "loop / raw = %.3fx (target <= 1.05x: %s)\n"
                "host / loop = %.1fx (target >= 3x: %s)\n"
                "results checked: %s (count word %u, counter %u, raw counter %u)\n",
                n, device.name, reps, loop_t, n, raw_t, n, host_t, loop_us[0], loop_us[1],
                loop_us[2], raw_us[0], raw_us[1], raw_us[2], host_us[0], host_us[1], host_us[2],
                loop_t / raw_t, loop_t / raw_t <= 1.05 ? "met" : "not met", host_t / loop_t,
                host_t / loop_t >= 3 ? "met" : "not met", ok ? "yes" : "NO", count, counter,
                raw_counter);
  vyre_bench::Publish(report);

  cuGraphExecDestroy(raw_exec);
  cuGraphDestroy(raw_graph);
  cuStreamDestroy(stream);
  cuMemFree(raw_flag);
  cuMemFree(raw_state);
  cuMemFree(raw_params);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(cu_device);
  CHECK_VYRE(vyre_graph_destroy(loop));
  CHECK_VYRE(vyre_graph_destroy(body));
  CHECK_VYRE(vyre_buffer_free(words));
  CHECK_VYRE(vyre_buffer_free(state));
  CHECK_VYRE(vyre_program_destroy(program));
  CHECK_VYRE(vyre_context_destroy(context));
  return ok ? 0 : 1;
}
