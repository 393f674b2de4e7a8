/*
 * graph_replay.c — record once, replay many times.
 *
 * 1. Records a vector add over host memory as a graph (vyre_graph_record),
 *    then replays it with new random data three times and once more with the
 *    same data (the replay that skips the input copies), checking every
 *    element against a CPU loop each time.
 * 2. Records the same add over resident buffers and replays it, then rebinds
 *    the output to another buffer at replay (no capture again).
 * 3. Builds a small sequence (upload, two dispatches, download), records it
 *    as one graph and replays it, with new host input between replays.
 *
 * Exit codes: 0 = every element matched; 1 = an error or a mismatch;
 * 2 = this machine cannot run CUDA work (no driver, driver too old, or no
 * device). Every failure prints the library's message, which ends with a
 * "Fix:" sentence.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vector_add_ptx.h"
#include "vyre_cuda.h"

/* Not a multiple of the block size, so the kernel's bounds check matters. */
#define ELEMENT_COUNT 100003u
#define BLOCK_THREADS 256u

/* Prints what failed and the library's last error for this thread, and
 * returns the exit code the failure deserves. */
static int report_failure(const char* what, vyre_status status) {
  char message[4096];
  size_t length = 0;
  int32_t cu_result = 0;
  vyre_last_error(NULL, &cu_result, message, sizeof message, &length);
  fprintf(stderr, "graph_replay: %s failed: %s (CUresult %d)\n  %s\n", what,
          vyre_status_name(status), (int)cu_result, length ? message : "(no message)");
  if (status == VYRE_STATUS_NO_DRIVER || status == VYRE_STATUS_DRIVER_TOO_OLD ||
      status == VYRE_STATUS_NO_DEVICE) {
    return 2;
  }
  return 1;
}

/* xorshift32: reproducible from the printed seed, never 0 from a non-zero state. */
static uint32_t next_random(uint32_t* state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

static void fill_random(uint32_t* v, size_t n, uint32_t* state) {
  size_t i;
  for (i = 0; i < n; ++i) v[i] = next_random(state);
}

/* Counts elements where out != a + b_times * b (mod 2^32) and prints the
 * first few. */
static size_t verify(const char* label, const uint32_t* a, const uint32_t* b, uint32_t b_times,
                     const uint32_t* out, size_t n, uint32_t seed) {
  size_t bad = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    uint32_t expect = a[i] + b_times * b[i];
    if (out[i] != expect) {
      if (bad < 5) {
        fprintf(stderr, "graph_replay: %s: out[%zu] = %u, expected %u\n", label, i,
                (unsigned)out[i], (unsigned)expect);
      }
      ++bad;
    }
  }
  if (bad) {
    fprintf(stderr, "graph_replay: %s: %zu of %zu elements wrong (data seed %u)\n", label, bad,
            n, (unsigned)seed);
  }
  return bad;
}

static vyre_dispatch_binding host_binding(const void* input, void* output, uint64_t bytes) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_HOST;
  b.host_input = input;
  b.host_output = output;
  b.host_bytes = bytes;
  return b;
}

static vyre_dispatch_binding resident_binding(vyre_buffer buffer) {
  vyre_dispatch_binding b = VYRE_DISPATCH_BINDING_INIT;
  b.source = VYRE_SOURCE_RESIDENT;
  b.buffer = buffer; /* offset 0, length 0 = the whole buffer */
  return b;
}

int main(void) {
  const size_t n = ELEMENT_COUNT;
  const uint64_t bytes = (uint64_t)n * sizeof(uint32_t);
  int exit_code = 1;
  vyre_status st;
  vyre_context context = {0};
  vyre_program program = {0};
  vyre_graph host_graph = {0}, resident_graph = {0}, sequence_graph = {0};
  vyre_sequence sequence = {0};
  vyre_buffer dev_a = {0}, dev_b = {0}, dev_c = {0}, dev_d = {0};
  uint32_t *a = NULL, *b = NULL, *out = NULL;
  uint32_t params[1];
  uint32_t seed = (uint32_t)time(NULL) | 1u;
  uint32_t state = seed;
  int round;

  params[0] = (uint32_t)n;
  a = malloc(bytes);
  b = malloc(bytes);
  out = malloc(bytes);
  if (!a || !b || !out) {
    fprintf(stderr, "graph_replay: host allocation of 3 x %llu bytes failed. "
                    "Fix: free host memory.\n", (unsigned long long)bytes);
    goto done;
  }
  fill_random(a, n, &state);
  fill_random(b, n, &state);

  /* A context on device 0 (NO_DRIVER / NO_DEVICE here on a machine without
   * CUDA), and the vector-add program: out[i] = a[i] + b[i], i < params[0]. */
  {
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                  VYRE_BINDING_DECL_INIT};
    vyre_program_desc pdesc = VYRE_PROGRAM_DESC_INIT;
    st = vyre_context_create(&desc, &context);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_context_create", st);
      goto done;
    }
    decls[0].name = "a";
    decls[1].name = "b";
    decls[2].name = "out";
    decls[2].role = VYRE_ROLE_OUTPUT; /* zeroed before each launch */
    pdesc.code = kVectorAddPtx;
    pdesc.entry = VYRE_EXAMPLE_ADD_ENTRY;
    pdesc.bindings = decls;
    pdesc.binding_count = 3;
    pdesc.workgroup_size[0] = BLOCK_THREADS;
    st = vyre_program_create(context, &pdesc, &program);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_program_create", st);
      goto done;
    }
  }

  /* 1. A host-memory vector add recorded as a graph. The record launches
   *    nothing: a, b and out are samples that fix the shape (three bindings
   *    of `bytes` each). Each replay passes this replay's host data. */
  {
    vyre_dispatch_binding bind[3];
    vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
    vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
    vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
    vyre_telemetry before = VYRE_TELEMETRY_INIT, after = VYRE_TELEMETRY_INIT;

    bind[0] = host_binding(a, NULL, bytes);
    bind[1] = host_binding(b, NULL, bytes);
    bind[2] = host_binding(NULL, out, bytes);
    desc.bindings = bind;
    desc.binding_count = 3;
    desc.param_words = params;
    desc.param_word_count = 1;
    st = vyre_graph_record(program, &desc, &host_graph);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_record (host memory)", st);
      goto done;
    }
    if ((st = vyre_graph_info_get(host_graph, &info)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_info_get", st);
      goto done;
    }
    printf("graph_replay: host graph: %llu nodes (%llu without the input copies)\n",
           (unsigned long long)info.node_count,
           (unsigned long long)info.unchanged_input_node_count);

    /* The replay descriptor names the same arrays; their contents change. */
    replay.bindings = bind;
    replay.binding_count = 3;
    for (round = 0; round < 3; ++round) {
      fill_random(a, n, &state);
      fill_random(b, n, &state);
      memset(out, 0xA5, bytes); /* so an unwritten element cannot pass */
      st = vyre_graph_replay(host_graph, &replay, NULL);
      if (st != VYRE_STATUS_OK) {
        exit_code = report_failure("vyre_graph_replay (host memory)", st);
        goto done;
      }
      if (verify("host graph replay", a, b, 1, out, n, seed)) goto done;
    }

    /* The same inputs again: the library finds them equal to what the
     * device holds and runs the graph without the input copies. */
    memset(out, 0xA5, bytes);
    if ((st = vyre_context_telemetry(context, &before)) != VYRE_STATUS_OK ||
        (st = vyre_graph_replay(host_graph, &replay, NULL)) != VYRE_STATUS_OK ||
        (st = vyre_context_telemetry(context, &after)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_replay (unchanged inputs)", st);
      goto done;
    }
    if (verify("host graph replay, unchanged inputs", a, b, 1, out, n, seed)) goto done;
    printf("graph_replay: 4 host replays checked; the last one skipped the input upload: %s\n",
           after.graph_uploads_skipped > before.graph_uploads_skipped ? "yes" : "no");
  }

  /* 2. The same add over resident buffers, then rebound: the replay
   *    descriptor points the output at another buffer, which updates the
   *    executable graph's memset and kernel nodes instead of capturing again.
   *    (A rebinding keeps each binding's source, and each range must be at
   *    least as large as the one recorded.) */
  {
    vyre_dispatch_binding bind[3];
    vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
    vyre_graph_replay_desc rebind = VYRE_GRAPH_REPLAY_DESC_INIT;

    if ((st = vyre_buffer_alloc(context, bytes, &dev_a)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_alloc(context, bytes, &dev_b)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_alloc(context, bytes, &dev_c)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_alloc(context, bytes, &dev_d)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_alloc", st);
      goto done;
    }
    if ((st = vyre_buffer_upload(dev_a, 0, a, bytes)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_upload(dev_b, 0, b, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_upload", st);
      goto done;
    }
    bind[0] = resident_binding(dev_a);
    bind[1] = resident_binding(dev_b);
    bind[2] = resident_binding(dev_c);
    desc.bindings = bind;
    desc.binding_count = 3;
    desc.param_words = params;
    desc.param_word_count = 1;
    st = vyre_graph_record(program, &desc, &resident_graph);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_record (resident)", st);
      goto done;
    }
    /* All bindings resident: nothing to pass, the replay is one cuGraphLaunch. */
    st = vyre_graph_replay(resident_graph, NULL, NULL);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_replay (resident)", st);
      goto done;
    }
    memset(out, 0xA5, bytes);
    if ((st = vyre_buffer_download(dev_c, 0, out, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_download", st);
      goto done;
    }
    if (verify("resident graph replay", a, b, 1, out, n, seed)) goto done;

    /* Rebind the output to dev_d; later replays with a NULL desc keep it. */
    bind[2] = resident_binding(dev_d);
    rebind.bindings = bind;
    rebind.binding_count = 3;
    st = vyre_graph_replay(resident_graph, &rebind, NULL);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_replay (rebound output)", st);
      goto done;
    }
    memset(out, 0xA5, bytes);
    if ((st = vyre_buffer_download(dev_d, 0, out, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_download", st);
      goto done;
    }
    if (verify("resident graph replay, output rebound", a, b, 1, out, n, seed)) goto done;
    printf("graph_replay: resident graph replayed, then rebound to another output buffer\n");
  }

  /* 3. A sequence: upload a into dev_a, c = a + b, d = c + b, download d.
   *    UPLOAD steps read their host memory when a run starts and DOWNLOAD
   *    steps write theirs when it ends, so new contents of `a` between
   *    replays are picked up without recording again. */
  {
    vyre_dispatch_binding first[3], second[3];
    vyre_dispatch_desc add_ab = VYRE_DISPATCH_DESC_INIT, add_cb = VYRE_DISPATCH_DESC_INIT;
    vyre_sequence_step steps[4] = {VYRE_SEQUENCE_STEP_INIT, VYRE_SEQUENCE_STEP_INIT,
                                   VYRE_SEQUENCE_STEP_INIT, VYRE_SEQUENCE_STEP_INIT};
    vyre_sequence_desc sdesc = VYRE_SEQUENCE_DESC_INIT;
    vyre_graph_info info = VYRE_GRAPH_INFO_INIT;

    first[0] = resident_binding(dev_a);
    first[1] = resident_binding(dev_b);
    first[2] = resident_binding(dev_c);
    second[0] = resident_binding(dev_c);
    second[1] = resident_binding(dev_b);
    second[2] = resident_binding(dev_d);
    add_ab.bindings = first;
    add_ab.binding_count = 3;
    add_ab.param_words = params;
    add_ab.param_word_count = 1;
    add_cb = add_ab;
    add_cb.bindings = second;

    steps[0].kind = VYRE_STEP_UPLOAD;
    steps[0].buffer = dev_a;
    steps[0].bytes = bytes;
    steps[0].host_src = a; /* must stay valid for the sequence's life */
    steps[1].kind = VYRE_STEP_DISPATCH;
    steps[1].program = program;
    steps[1].dispatch = &add_ab; /* copied by vyre_sequence_create */
    steps[2].kind = VYRE_STEP_DISPATCH;
    steps[2].program = program;
    steps[2].dispatch = &add_cb;
    steps[3].kind = VYRE_STEP_DOWNLOAD;
    steps[3].buffer = dev_d;
    steps[3].bytes = bytes;
    steps[3].host_dst = out;
    sdesc.steps = steps;
    sdesc.step_count = 4;
    if ((st = vyre_sequence_create(context, &sdesc, &sequence)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_sequence_create", st);
      goto done;
    }
    if ((st = vyre_sequence_record(sequence, &sequence_graph)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_sequence_record", st);
      goto done;
    }
    if ((st = vyre_graph_info_get(sequence_graph, &info)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_graph_info_get", st);
      goto done;
    }
    for (round = 0; round < 2; ++round) {
      fill_random(a, n, &state); /* read by the UPLOAD step at replay */
      memset(out, 0xA5, bytes);
      st = vyre_graph_replay(sequence_graph, NULL, NULL);
      if (st != VYRE_STATUS_OK) {
        exit_code = report_failure("vyre_graph_replay (sequence)", st);
        goto done;
      }
      if (verify("sequence graph replay", a, b, 2, out, n, seed)) goto done;
    }
    /* The same steps run eagerly give the same result. */
    memset(out, 0xA5, bytes);
    if ((st = vyre_sequence_run(sequence, NULL)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_sequence_run", st);
      goto done;
    }
    if (verify("sequence run", a, b, 2, out, n, seed)) goto done;
    printf("graph_replay: sequence of 4 steps recorded as one graph of %llu nodes (%llu kernels)\n",
           (unsigned long long)info.node_count, (unsigned long long)info.kernel_node_count);
  }

  printf("graph_replay: OK (%zu elements)\n", n);
  exit_code = 0;

done:
  /* Graphs and sequences keep their buffers and programs alive; destroying
   * the context would release everything anyway. */
  if (sequence_graph.bits) vyre_graph_destroy(sequence_graph);
  if (sequence.bits) vyre_sequence_destroy(sequence);
  if (resident_graph.bits) vyre_graph_destroy(resident_graph);
  if (host_graph.bits) vyre_graph_destroy(host_graph);
  if (dev_a.bits) vyre_buffer_free(dev_a);
  if (dev_b.bits) vyre_buffer_free(dev_b);
  if (dev_c.bits) vyre_buffer_free(dev_c);
  if (dev_d.bits) vyre_buffer_free(dev_d);
  if (program.bits) vyre_program_destroy(program);
  if (context.bits) {
    st = vyre_context_destroy(context);
    if (st != VYRE_STATUS_OK && exit_code == 0) exit_code = report_failure("vyre_context_destroy", st);
  }
  free(a);
  free(b);
  free(out);
  return exit_code;
}
