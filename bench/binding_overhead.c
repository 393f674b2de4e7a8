/*
 * binding_overhead.c — the C baseline of the per-call overhead comparison of
 * the language bindings (issue 8, "Benchmark"): a 4 KiB vector add (1024
 * u32) through vyre_dispatch,
 *   resident: inputs and output in resident buffers (dispatch waits);
 *   host:     inputs read from host memory, the sum written back to host
 *             memory (one vyre_dispatch over borrowed host vectors);
 *   replay:   the resident dispatch recorded once as a graph
 *             (vyre_graph_record) and replayed with its ranges kept
 *             (vyre_graph_replay, which waits), as Python's Graph.replay()
 *             does (issue 21).
 * Each call is timed alone on CLOCK_MONOTONIC after --warmup calls; the
 * median, p10 and p90 of --iterations calls are printed as one JSON line per
 * case ("OVERHEAD {...}"), the format the Rust, Go and Python counterparts
 * print too (bindings/rust/vyre-cuda/examples/bench_overhead.rs,
 * bindings/go/examples/bench_overhead, bindings/python/bench_overhead.py).
 * The results are checked element by element before and after timing.
 *
 * Not part of the CMake build: scripts/gpu-bindings.sh --bench compiles it
 * against the library it tests:
 *   cc -O2 -std=c11 -Iinclude bench/binding_overhead.c -Lbuild/gpu/src -lvyre_cuda
 *   ./a.out [--iterations N] [--warmup N]
 * Exit codes: 0 = done, 1 = an error or a wrong element, 2 = no GPU.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vyre_cuda.h"
/* The examples' vector add (vyre_example_add_u32, the default convention:
 * a, b, out, then the parameter words); the fake driver runs it too. */
#include "../examples/vector_add_ptx.h"

#define N 1024u

static int fail(const char* what, vyre_status status) {
  char message[4096];
  size_t length = 0;
  vyre_last_error(NULL, NULL, message, sizeof message, &length);
  fprintf(stderr, "binding_overhead: %s failed: %s\n  %s\n", what, vyre_status_name(status),
          length ? message : "(no message)");
  if (status == VYRE_STATUS_NO_DRIVER || status == VYRE_STATUS_DRIVER_TOO_OLD ||
      status == VYRE_STATUS_NO_DEVICE) {
    exit(2);
  }
  exit(1);
}

#define CHECK(call)                           \
  do {                                        \
    vyre_status st_ = (call);                 \
    if (st_ != VYRE_STATUS_OK) fail(#call, st_); \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

static void verify(const uint32_t* out, const uint32_t* a, const uint32_t* b, const char* what) {
  for (uint32_t i = 0; i < N; ++i) {
    if (out[i] != a[i] + b[i]) {
      fprintf(stderr, "binding_overhead: %s: out[%u] = %u, expected %u\n", what, i, out[i],
              a[i] + b[i]);
      exit(1);
    }
  }
}

/* One timed call: a dispatch of `desc` or a replay of `graph`. */
typedef struct {
  vyre_program program;
  const vyre_dispatch_desc* desc;
  vyre_graph graph;
  const vyre_graph_replay_desc* replay;
} call_spec;

static vyre_status call_once(const call_spec* c, vyre_timing* timing) {
  if (c->desc != NULL) return vyre_dispatch(c->program, c->desc, timing);
  return vyre_graph_replay(c->graph, c->replay, timing);
}

/* Times `iterations` calls after `warmup` and prints the case's line. */
static void measure(const char* name, const call_spec* c, int iterations, int warmup,
                    const char* device) {
  double* samples = malloc(sizeof(double) * (size_t)iterations);
  vyre_timing timing = VYRE_TIMING_INIT;
  const char* what = c->desc != NULL ? "vyre_dispatch" : "vyre_graph_replay";
  if (!samples) exit(1);
  for (int i = 0; i < warmup; ++i) {
    vyre_status st = call_once(c, &timing);
    if (st != VYRE_STATUS_OK) fail(what, st);
  }
  for (int i = 0; i < iterations; ++i) {
    double t0 = now_us();
    vyre_status st = call_once(c, &timing);
    samples[i] = now_us() - t0;
    if (st != VYRE_STATUS_OK) fail(what, st);
  }
  qsort(samples, (size_t)iterations, sizeof(double), compare);
  double median = iterations % 2 ? samples[iterations / 2]
                                 : (samples[iterations / 2 - 1] + samples[iterations / 2]) / 2;
  printf("OVERHEAD {\"binding\": \"C\", \"case\": \"%s\", \"median_us\": %.3f, \"p10_us\": %.3f, "
         "\"p90_us\": %.3f, \"iterations\": %d, \"device\": \"%s\"}\n",
         name, median, samples[iterations / 10], samples[(9 * iterations) / 10], iterations,
         device);
  fflush(stdout);
  free(samples);
}

int main(int argc, char** argv) {
  int iterations = 20000, warmup = 2000;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iterations = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
      warmup = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: binding_overhead [--iterations N] [--warmup N]\n");
      return 1;
    }
  }
  if (iterations < 10) iterations = 10;

  static uint32_t a[N], b[N], out[N];
  for (uint32_t i = 0; i < N; ++i) {
    a[i] = (i * 2654435761u) & 0x7FFFFFFFu;
    b[i] = (i * 40503u + 7u) & 0x7FFFFFFFu;
  }

  vyre_context context;
  vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
  CHECK(vyre_context_create(&cdesc, &context));
  vyre_device_info info = VYRE_DEVICE_INFO_INIT;
  CHECK(vyre_context_device_info(context, &info));

  vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                VYRE_BINDING_DECL_INIT};
  decls[0].name = "a";
  decls[1].name = "b";
  decls[2].name = "out";
  decls[2].role = VYRE_ROLE_OUTPUT;
  vyre_program_desc pdesc = VYRE_PROGRAM_DESC_INIT;
  pdesc.code = kVectorAddPtx;
  pdesc.entry = VYRE_EXAMPLE_ADD_ENTRY;
  pdesc.bindings = decls;
  pdesc.binding_count = 3;
  pdesc.workgroup_size[0] = 256;
  vyre_program program;
  CHECK(vyre_program_create(context, &pdesc, &program));

  const uint32_t params[1] = {N};
  vyre_buffer da, db, dout;
  CHECK(vyre_buffer_alloc(context, 4 * N, &da));
  CHECK(vyre_buffer_alloc(context, 4 * N, &db));
  CHECK(vyre_buffer_alloc(context, 4 * N, &dout));
  CHECK(vyre_buffer_upload(da, 0, a, 4 * N));
  CHECK(vyre_buffer_upload(db, 0, b, 4 * N));

  vyre_dispatch_binding resident[3] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT,
                                       VYRE_DISPATCH_BINDING_INIT};
  resident[0].source = resident[1].source = resident[2].source = VYRE_SOURCE_RESIDENT;
  resident[0].buffer = da;
  resident[1].buffer = db;
  resident[2].buffer = dout;
  vyre_dispatch_desc rdesc = VYRE_DISPATCH_DESC_INIT;
  rdesc.bindings = resident;
  rdesc.binding_count = 3;
  rdesc.param_words = params;
  rdesc.param_word_count = 1;

  vyre_dispatch_binding host[3] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT,
                                   VYRE_DISPATCH_BINDING_INIT};
  host[0].host_input = a;
  host[1].host_input = b;
  host[2].host_output = out;
  host[0].host_bytes = host[1].host_bytes = host[2].host_bytes = 4 * N;
  vyre_dispatch_desc hdesc = rdesc;
  hdesc.bindings = host;

  CHECK(vyre_dispatch(program, &rdesc, NULL));
  CHECK(vyre_buffer_download(dout, 0, out, 4 * N));
  verify(out, a, b, "resident");
  memset(out, 0, sizeof out);
  CHECK(vyre_dispatch(program, &hdesc, NULL));
  verify(out, a, b, "host");

  /* The same resident dispatch as a graph, replayed keeping its ranges. */
  vyre_graph graph;
  CHECK(vyre_graph_record(program, &rdesc, &graph));
  const vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
  static const uint32_t zeros[N];
  CHECK(vyre_buffer_upload(dout, 0, zeros, 4 * N));
  CHECK(vyre_graph_replay(graph, &replay, NULL));
  memset(out, 0, sizeof out);
  CHECK(vyre_buffer_download(dout, 0, out, 4 * N));
  verify(out, a, b, "replay");

  const call_spec resident_call = {program, &rdesc, {0}, NULL};
  const call_spec host_call = {program, &hdesc, {0}, NULL};
  const call_spec replay_call = {program, NULL, graph, &replay};
  measure("resident", &resident_call, iterations, warmup, info.name);
  memset(out, 0, sizeof out);
  measure("host", &host_call, iterations, warmup, info.name);
  verify(out, a, b, "host, after timing");
  memset(out, 0, sizeof out);
  CHECK(vyre_buffer_download(dout, 0, out, 4 * N));
  verify(out, a, b, "resident, after timing");
  CHECK(vyre_buffer_upload(dout, 0, zeros, 4 * N));
  measure("replay", &replay_call, iterations, warmup, info.name);
  memset(out, 0, sizeof out);
  CHECK(vyre_buffer_download(dout, 0, out, 4 * N));
  verify(out, a, b, "replay, after timing");
  CHECK(vyre_graph_destroy(graph));

  CHECK(vyre_buffer_free(da));
  CHECK(vyre_buffer_free(db));
  CHECK(vyre_buffer_free(dout));
  CHECK(vyre_program_destroy(program));
  CHECK(vyre_context_destroy(context));
  return 0;
}
