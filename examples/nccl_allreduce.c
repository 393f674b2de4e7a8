/*
 * nccl_allreduce.c — one context per GPU, NCCL over the library's resident
 * buffers, ordered with the library's own work.
 *
 * On each of the machine's GPUs (or the first VYRE_EXAMPLE_GPUS of them):
 *   1. a dispatch writes s_i = a_i + b_i into a resident buffer;
 *   2. NCCL sums the s_i of every GPU into r_i (ncclAllReduce, one
 *      communicator per GPU, one process);
 *   3. a dispatch reads the reduced data: out_i = r_i + a_i;
 * and every element of every out_i is checked against a CPU loop. Steps 1-3
 * are enqueued without a host wait between them: the context's stream and
 * NCCL's stream (here each device's legacy default stream, CU_STREAM_LEGACY
 * = 1) are ordered with vyre_context_signal_stream before the all-reduce and
 * vyre_context_wait_stream after it. NCCL sees plain device pointers
 * (vyre_buffer_info_get); the library never links NCCL, and neither does
 * this example: it loads libnccl.so.2 at run time.
 *
 * Exit codes: 0 = every element matched, or NCCL is not installed (the
 * example says SKIPPED and why); 1 = an error or a mismatch; 2 = this machine
 * cannot run CUDA work (the library's message and its Fix).
 */
#define _POSIX_C_SOURCE 200809L /* dlopen, clock_gettime under -std=c99 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vector_add_ptx.h"
#include "vyre_cuda.h"

#define MAX_GPUS 8u
#define ELEMENT_COUNT 1048579u /* not a multiple of the block: bounds checks matter */
#define BLOCK_THREADS 256u
#define TIMED_ITERATIONS 50u

/* The part of NCCL's ABI (nccl.h, NCCL 2.x) this example calls. */
typedef void* nccl_comm;
typedef int nccl_result;                 /* ncclSuccess = 0 */
enum { NCCL_UINT32 = 3, NCCL_SUM = 0 };  /* ncclUint32, ncclSum */
#define NCCL_STREAM_LEGACY ((void*)1)    /* cudaStreamLegacy == CU_STREAM_LEGACY */
#define VYRE_STREAM_LEGACY 1u

typedef struct nccl_api {
  nccl_result (*comm_init_all)(nccl_comm* comms, int count, const int* devices);
  nccl_result (*comm_destroy)(nccl_comm comm);
  nccl_result (*group_start)(void);
  nccl_result (*group_end)(void);
  nccl_result (*all_reduce)(const void* send, void* recv, size_t count, int datatype, int op,
                            nccl_comm comm, void* stream);
  const char* (*error_string)(nccl_result result);
} nccl_api;

typedef struct gpu {
  vyre_context context;
  vyre_program add;
  vyre_buffer a, b, s, r, out;
  uint64_t s_pointer, r_pointer;
  uint32_t *host_a, *host_b;
} gpu;

static int report_failure(const char* what, vyre_status status) {
  char message[4096];
  size_t length = 0;
  int32_t cu_result = 0;
  vyre_last_error(NULL, &cu_result, message, sizeof message, &length);
  fprintf(stderr, "nccl_allreduce: %s failed: %s (CUresult %d)\n  %s\n", what,
          vyre_status_name(status), (int)cu_result, length ? message : "(no message)");
  if (status == VYRE_STATUS_NO_DRIVER || status == VYRE_STATUS_DRIVER_TOO_OLD ||
      status == VYRE_STATUS_NO_DEVICE) {
    return 2;
  }
  return 1;
}

static int nccl_failed(const nccl_api* nccl, const char* what, nccl_result result) {
  fprintf(stderr, "nccl_allreduce: %s failed: NCCL error %d (%s). Fix: see NCCL_DEBUG=INFO "
                  "output for the cause.\n",
          what, result, nccl->error_string ? nccl->error_string(result) : "?");
  return 1;
}

static uint32_t next_random(uint32_t* state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

/* Loads NCCL; 0 when it is not installed (*why says what was missing). */
static int load_nccl(nccl_api* nccl, const char** why) {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    *why = dlerror();
    return 0;
  }
  /* POSIX: a void* from dlsym converts to a function pointer through memcpy. */
#define LOAD(field, name)                                     \
  do {                                                        \
    void* symbol = dlsym(lib, name);                          \
    if (symbol == NULL) {                                     \
      *why = "libnccl.so.2 lacks " name;                      \
      return 0;                                               \
    }                                                         \
    memcpy(&nccl->field, &symbol, sizeof symbol);             \
  } while (0)
  LOAD(comm_init_all, "ncclCommInitAll");
  LOAD(comm_destroy, "ncclCommDestroy");
  LOAD(group_start, "ncclGroupStart");
  LOAD(group_end, "ncclGroupEnd");
  LOAD(all_reduce, "ncclAllReduce");
  LOAD(error_string, "ncclGetErrorString");
#undef LOAD
  return 1; /* the library stays loaded for the process */
}

/* A resident dispatch of the add kernel: out = x + y over n elements. */
static vyre_status add(const gpu* g, vyre_buffer x, vyre_buffer y, vyre_buffer out, uint32_t n,
                       vyre_pending* pending) {
  vyre_dispatch_binding bind[3] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT,
                                   VYRE_DISPATCH_BINDING_INIT};
  vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
  uint32_t params[1];
  int i;
  params[0] = n;
  for (i = 0; i < 3; ++i) bind[i].source = VYRE_SOURCE_RESIDENT;
  bind[0].buffer = x;
  bind[1].buffer = y;
  bind[2].buffer = out;
  desc.bindings = bind;
  desc.binding_count = 3;
  desc.param_words = params;
  desc.param_word_count = 1;
  return vyre_dispatch_async(g->add, &desc, pending);
}

/* Steps 1-3 on every GPU, enqueued without a host wait: pendings[2i] and
 * pendings[2i + 1] get GPU i's two dispatches (released, which waits, only
 * after everything is enqueued). */
static int enqueue_round(const nccl_api* nccl, gpu* gpus, nccl_comm* comms, uint32_t count,
                         uint32_t n, vyre_pending* pendings) {
  vyre_status st;
  nccl_result nr;
  uint32_t i;
  for (i = 0; i < count; ++i) {
    if ((st = add(&gpus[i], gpus[i].a, gpus[i].b, gpus[i].s, n, &pendings[2 * i])) !=
        VYRE_STATUS_OK) {
      return report_failure("vyre_dispatch_async (s = a + b)", st);
    }
    /* NCCL's stream on this device starts after the dispatch. */
    if ((st = vyre_context_signal_stream(gpus[i].context, VYRE_STREAM_LEGACY)) != VYRE_STATUS_OK) {
      return report_failure("vyre_context_signal_stream", st);
    }
  }
  if ((nr = nccl->group_start()) != 0) return nccl_failed(nccl, "ncclGroupStart", nr);
  for (i = 0; i < count; ++i) {
    nr = nccl->all_reduce((const void*)(uintptr_t)gpus[i].s_pointer,
                          (void*)(uintptr_t)gpus[i].r_pointer, n, NCCL_UINT32, NCCL_SUM,
                          comms[i], NCCL_STREAM_LEGACY);
    if (nr != 0) {
      nccl->group_end();
      return nccl_failed(nccl, "ncclAllReduce", nr);
    }
  }
  if ((nr = nccl->group_end()) != 0) return nccl_failed(nccl, "ncclGroupEnd", nr);
  for (i = 0; i < count; ++i) {
    /* The context's later work starts after the all-reduce. */
    if ((st = vyre_context_wait_stream(gpus[i].context, VYRE_STREAM_LEGACY)) != VYRE_STATUS_OK) {
      return report_failure("vyre_context_wait_stream", st);
    }
    if ((st = add(&gpus[i], gpus[i].r, gpus[i].a, gpus[i].out, n, &pendings[2 * i + 1])) !=
        VYRE_STATUS_OK) {
      return report_failure("vyre_dispatch_async (out = r + a)", st);
    }
  }
  return 0;
}

static int wait_all(vyre_pending* pendings, uint32_t count) {
  int code = 0;
  uint32_t i;
  for (i = 0; i < count; ++i) {
    if (pendings[i].bits == 0) continue;
    vyre_status st = vyre_pending_wait(pendings[i], VYRE_WAIT_FOREVER);
    if (st != VYRE_STATUS_OK && code == 0) code = report_failure("vyre_pending_wait", st);
    vyre_pending_release(pendings[i]);
    pendings[i].bits = 0;
  }
  return code;
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int setup_gpu(gpu* g, uint32_t ordinal, uint32_t n, uint32_t* state) {
  const uint64_t bytes = (uint64_t)n * 4u;
  vyre_context_desc cdesc = VYRE_CONTEXT_DESC_INIT;
  vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                VYRE_BINDING_DECL_INIT};
  vyre_program_desc pdesc = VYRE_PROGRAM_DESC_INIT;
  vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
  vyre_status st;
  uint32_t k;
  cdesc.device_ordinal = ordinal;
  if ((st = vyre_context_create(&cdesc, &g->context)) != VYRE_STATUS_OK) {
    return report_failure("vyre_context_create", st);
  }
  decls[0].name = "x";
  decls[0].role = VYRE_ROLE_INPUT;
  decls[1].name = "y";
  decls[1].role = VYRE_ROLE_INPUT;
  decls[2].name = "out";
  decls[2].role = VYRE_ROLE_OUTPUT;
  pdesc.code_kind = VYRE_CODE_PTX;
  pdesc.code = kVectorAddPtx;
  pdesc.entry = VYRE_EXAMPLE_ADD_ENTRY;
  pdesc.bindings = decls;
  pdesc.binding_count = 3;
  pdesc.workgroup_size[0] = BLOCK_THREADS;
  if ((st = vyre_program_create(g->context, &pdesc, &g->add)) != VYRE_STATUS_OK) {
    return report_failure("vyre_program_create", st);
  }
  if ((st = vyre_buffer_alloc(g->context, bytes, &g->a)) != VYRE_STATUS_OK ||
      (st = vyre_buffer_alloc(g->context, bytes, &g->b)) != VYRE_STATUS_OK ||
      (st = vyre_buffer_alloc(g->context, bytes, &g->s)) != VYRE_STATUS_OK ||
      (st = vyre_buffer_alloc(g->context, bytes, &g->r)) != VYRE_STATUS_OK ||
      (st = vyre_buffer_alloc(g->context, bytes, &g->out)) != VYRE_STATUS_OK) {
    return report_failure("vyre_buffer_alloc", st);
  }
  g->host_a = malloc(bytes);
  g->host_b = malloc(bytes);
  if (g->host_a == NULL || g->host_b == NULL) {
    fprintf(stderr, "nccl_allreduce: host allocation failed. Fix: free host memory.\n");
    return 1;
  }
  for (k = 0; k < n; ++k) {
    g->host_a[k] = next_random(state);
    g->host_b[k] = next_random(state);
  }
  if ((st = vyre_buffer_upload(g->a, 0, g->host_a, bytes)) != VYRE_STATUS_OK ||
      (st = vyre_buffer_upload(g->b, 0, g->host_b, bytes)) != VYRE_STATUS_OK) {
    return report_failure("vyre_buffer_upload", st);
  }
  if ((st = vyre_buffer_info_get(g->s, &info)) != VYRE_STATUS_OK) {
    return report_failure("vyre_buffer_info_get", st);
  }
  g->s_pointer = info.device_pointer;
  info = (vyre_buffer_info)VYRE_BUFFER_INFO_INIT;
  if ((st = vyre_buffer_info_get(g->r, &info)) != VYRE_STATUS_OK) {
    return report_failure("vyre_buffer_info_get", st);
  }
  g->r_pointer = info.device_pointer;
  return 0;
}

/* out_i[k] must be sum over GPUs j of (a_j[k] + b_j[k]), plus a_i[k]. */
static int verify(gpu* gpus, uint32_t count, uint32_t n, uint32_t seed) {
  uint32_t* sum = malloc((size_t)n * 4u);
  uint32_t* out = malloc((size_t)n * 4u);
  size_t bad = 0;
  uint32_t i, j, k;
  int code = 0;
  if (sum == NULL || out == NULL) {
    fprintf(stderr, "nccl_allreduce: host allocation failed. Fix: free host memory.\n");
    free(sum);
    free(out);
    return 1;
  }
  for (k = 0; k < n; ++k) {
    uint32_t total = 0;
    for (j = 0; j < count; ++j) total += gpus[j].host_a[k] + gpus[j].host_b[k];
    sum[k] = total;
  }
  for (i = 0; i < count && code == 0; ++i) {
    vyre_status st;
    memset(out, 0xA5, (size_t)n * 4u); /* an unwritten element cannot pass */
    if ((st = vyre_buffer_download(gpus[i].out, 0, out, (uint64_t)n * 4u)) != VYRE_STATUS_OK) {
      code = report_failure("vyre_buffer_download", st);
      break;
    }
    for (k = 0; k < n; ++k) {
      const uint32_t expect = sum[k] + gpus[i].host_a[k];
      if (out[k] != expect) {
        if (bad < 5) {
          fprintf(stderr, "nccl_allreduce: GPU %u: out[%u] = %u, expected %u\n", (unsigned)i,
                  (unsigned)k, (unsigned)out[k], (unsigned)expect);
        }
        ++bad;
      }
    }
  }
  if (bad) {
    fprintf(stderr, "nccl_allreduce: %zu elements wrong (data seed %u)\n", bad, (unsigned)seed);
    code = 1;
  }
  free(sum);
  free(out);
  return code;
}

int main(void) {
  const uint32_t n = ELEMENT_COUNT;
  gpu gpus[MAX_GPUS];
  nccl_comm comms[MAX_GPUS];
  int devices[MAX_GPUS];
  vyre_pending pendings[2 * MAX_GPUS];
  nccl_api nccl;
  const char* why = NULL;
  uint32_t count = 0, i, it;
  uint32_t seed = (uint32_t)time(NULL) | 1u;
  uint32_t state = seed;
  int have_comms = 0;
  int code = 1;
  vyre_status st;

  memset(gpus, 0, sizeof gpus);
  memset(pendings, 0, sizeof pendings);
  memset(&nccl, 0, sizeof nccl);
  /* The library first: a machine without CUDA explains itself (exit 2). */
  if ((st = vyre_device_count(&count)) != VYRE_STATUS_OK) {
    return report_failure("vyre_device_count", st);
  }
  if (count == 0) {
    fprintf(stderr, "nccl_allreduce: vyre_device_count found no CUDA device. Fix: run this on a "
                    "machine with an NVIDIA GPU.\n");
    return 2;
  }
  if (getenv("VYRE_EXAMPLE_GPUS") != NULL) {
    const uint32_t wanted = (uint32_t)strtoul(getenv("VYRE_EXAMPLE_GPUS"), NULL, 10);
    if (wanted >= 1 && wanted < count) count = wanted;
  }
  if (count > MAX_GPUS) count = MAX_GPUS;
  for (i = 0; i < count; ++i) {
    if ((code = setup_gpu(&gpus[i], i, n, &state)) != 0) goto done;
    devices[i] = (int)i;
  }
  code = 1;
  if (!load_nccl(&nccl, &why)) {
    printf("nccl_allreduce: SKIPPED: NCCL is not installed here (%s). Fix: install NCCL "
           "(Debian: libnccl2) to run this example.\n", why ? why : "?");
    code = 0;
    goto done;
  }
  {
    nccl_result nr = nccl.comm_init_all(comms, (int)count, devices);
    if (nr != 0) {
      code = nccl_failed(&nccl, "ncclCommInitAll", nr);
      goto done;
    }
    have_comms = 1;
  }

  /* One checked round, then the same loop timed. */
  if ((code = enqueue_round(&nccl, gpus, comms, count, n, pendings)) != 0) goto done;
  if ((code = wait_all(pendings, 2 * count)) != 0) goto done;
  if ((code = verify(gpus, count, n, seed)) != 0) goto done;
  {
    const double start = seconds_now();
    for (it = 0; it < TIMED_ITERATIONS; ++it) {
      if ((code = enqueue_round(&nccl, gpus, comms, count, n, pendings)) != 0) goto done;
      if ((code = wait_all(pendings, 2 * count)) != 0) goto done;
    }
    printf("nccl_allreduce: %u GPUs, %u u32 each: dispatch + all-reduce + dispatch, waited, "
           "%.1f us a round (%u rounds, host clock)\n",
           (unsigned)count, (unsigned)n, (seconds_now() - start) * 1e6 / TIMED_ITERATIONS,
           (unsigned)TIMED_ITERATIONS);
  }
  printf("nccl_allreduce: OK (%u GPUs, %u elements each)\n", (unsigned)count, (unsigned)n);
  code = 0;

done:
  wait_all(pendings, 2 * count);
  if (have_comms) {
    for (i = 0; i < count; ++i) nccl.comm_destroy(comms[i]);
  }
  for (i = 0; i < count; ++i) {
    free(gpus[i].host_a);
    free(gpus[i].host_b);
    if (gpus[i].context.bits) {
      /* Destroying the context releases its buffers and program. */
      st = vyre_context_destroy(gpus[i].context);
      if (st != VYRE_STATUS_OK && code == 0) code = report_failure("vyre_context_destroy", st);
    }
  }
  return code;
}
