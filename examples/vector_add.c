/*
 * vector_add.c — the smallest complete vyre-cuda program.
 *
 * Creates a context, builds a program from PTX text, adds two vectors of
 * random non-zero u32 twice — once over borrowed host memory, once over
 * resident device buffers — and checks every element against a CPU loop.
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
#define ELEMENT_COUNT 1000003u
#define BLOCK_THREADS 256u

/* Prints what failed and the library's last error for this thread, and
 * returns the exit code the failure deserves. */
static int report_failure(const char* what, vyre_status status) {
  char message[4096];
  size_t length = 0;
  int32_t cu_result = 0;
  vyre_last_error(NULL, &cu_result, message, sizeof message, &length);
  fprintf(stderr, "vector_add: %s failed: %s (CUresult %d)\n  %s\n", what,
          vyre_status_name(status), (int)cu_result, length ? message : "(no message)");
  if (status == VYRE_STATUS_NO_DRIVER || status == VYRE_STATUS_DRIVER_TOO_OLD ||
      status == VYRE_STATUS_NO_DEVICE) {
    return 2;
  }
  return 1;
}

/* xorshift32: reproducible from the printed seed, never yields 0 from a
 * non-zero state, which is what the "random non-zero data" rule needs. */
static uint32_t next_random(uint32_t* state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

/* Counts mismatches against the CPU sum and prints the first few. */
static size_t verify(const char* label, const uint32_t* a, const uint32_t* b,
                     const uint32_t* out, size_t n, uint32_t seed) {
  size_t bad = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    uint32_t expect = a[i] + b[i]; /* wraps mod 2^32, as on the device */
    if (out[i] != expect) {
      if (bad < 5) {
        fprintf(stderr, "vector_add: %s: out[%zu] = %u, expected %u\n", label, i,
                (unsigned)out[i], (unsigned)expect);
      }
      ++bad;
    }
  }
  if (bad) {
    fprintf(stderr, "vector_add: %s: %zu of %zu elements wrong (data seed %u)\n", label, bad, n,
            (unsigned)seed);
  }
  return bad;
}

int main(void) {
  const size_t n = ELEMENT_COUNT;
  const uint64_t bytes = (uint64_t)n * sizeof(uint32_t);
  int exit_code = 1;
  vyre_status st;
  vyre_context context = {0};
  vyre_program program = {0};
  vyre_buffer dev_a = {0}, dev_b = {0}, dev_out = {0};
  uint32_t *a = NULL, *b = NULL, *out = NULL;
  uint32_t seed = (uint32_t)time(NULL) | 1u;
  uint32_t state = seed;
  size_t i;

  if (VYRE_VERSION_MAJOR_OF(vyre_version()) != VYRE_CUDA_VERSION_MAJOR) {
    fprintf(stderr,
            "vector_add: library major version %u differs from the header's %u. "
            "Fix: build against the vyre_cuda.h installed with the library.\n",
            (unsigned)VYRE_VERSION_MAJOR_OF(vyre_version()), (unsigned)VYRE_CUDA_VERSION_MAJOR);
    return 1;
  }

  a = malloc(bytes);
  b = malloc(bytes);
  out = malloc(bytes);
  if (!a || !b || !out) {
    fprintf(stderr, "vector_add: host allocation of 3 x %llu bytes failed. "
                    "Fix: free host memory.\n", (unsigned long long)bytes);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    a[i] = next_random(&state);
    b[i] = next_random(&state);
  }

  /* 1. A context on device 0. This is where the driver is loaded, so a
   *    machine without CUDA fails here with NO_DRIVER / NO_DEVICE. */
  {
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    st = vyre_context_create(&desc, &context);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_context_create", st);
      goto done;
    }
  }

  /* 2. A program: the PTX, its entry, and one declaration per kernel
   *    pointer. element_count 0 lets each dispatch size the bindings. */
  {
    vyre_binding_decl decls[3] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT,
                                  VYRE_BINDING_DECL_INIT};
    vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
    decls[0].name = "a";
    decls[0].role = VYRE_ROLE_INPUT;
    decls[1].name = "b";
    decls[1].role = VYRE_ROLE_INPUT;
    decls[2].name = "out";
    decls[2].role = VYRE_ROLE_OUTPUT;
    desc.code_kind = VYRE_CODE_PTX;
    desc.code = kVectorAddPtx; /* NUL-terminated: code_size stays 0 */
    desc.entry = VYRE_EXAMPLE_ADD_ENTRY;
    desc.bindings = decls;
    desc.binding_count = 3;
    desc.workgroup_size[0] = BLOCK_THREADS;
    st = vyre_program_create(context, &desc, &program);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_program_create", st);
      goto done;
    }
  }

  /* 3. Dispatch over borrowed host memory: the inputs are staged for this
   *    call, and `out` is written when the (synchronous) dispatch returns.
   *    The grid is left at zero, so it covers n elements. */
  {
    vyre_dispatch_binding bind[3] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT,
                                     VYRE_DISPATCH_BINDING_INIT};
    vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
    uint32_t params[1];
    params[0] = (uint32_t)n;
    bind[0].host_input = a;
    bind[0].host_bytes = bytes;
    bind[1].host_input = b;
    bind[1].host_bytes = bytes;
    bind[2].host_output = out;
    bind[2].host_bytes = bytes;
    desc.bindings = bind;
    desc.binding_count = 3;
    desc.param_words = params;
    desc.param_word_count = 1;
    memset(out, 0xA5, bytes); /* so an unwritten element cannot pass */
    st = vyre_dispatch(program, &desc, NULL);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_dispatch (host memory)", st);
      goto done;
    }
    if (verify("host memory", a, b, out, n, seed)) goto done;
  }

  /* 4. The same over resident buffers: upload once, dispatch asynchronously,
   *    wait on the pending handle, download. */
  {
    vyre_dispatch_binding bind[3] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT,
                                     VYRE_DISPATCH_BINDING_INIT};
    vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
    vyre_pending pending = {0};
    vyre_timing timing = VYRE_TIMING_INIT;
    uint32_t params[1];
    params[0] = (uint32_t)n;

    if ((st = vyre_buffer_alloc(context, bytes, &dev_a)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_alloc(context, bytes, &dev_b)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_alloc(context, bytes, &dev_out)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_alloc", st);
      goto done;
    }
    if ((st = vyre_buffer_upload(dev_a, 0, a, bytes)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_upload(dev_b, 0, b, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_upload", st);
      goto done;
    }
    for (i = 0; i < 3; ++i) bind[i].source = VYRE_SOURCE_RESIDENT; /* length 0 = whole buffer */
    bind[0].buffer = dev_a;
    bind[1].buffer = dev_b;
    bind[2].buffer = dev_out;
    desc.bindings = bind;
    desc.binding_count = 3;
    desc.param_words = params;
    desc.param_word_count = 1;
    desc.flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING;
    st = vyre_dispatch_async(program, &desc, &pending);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_dispatch_async (resident)", st);
      goto done;
    }
    st = vyre_pending_wait(pending, VYRE_WAIT_FOREVER);
    if (st == VYRE_STATUS_OK) st = vyre_pending_timing(pending, &timing);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_pending_wait", st);
      vyre_pending_release(pending);
      goto done;
    }
    /* A waited pending handle must still be released, exactly once. */
    if ((st = vyre_pending_release(pending)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_pending_release", st);
      goto done;
    }
    memset(out, 0xA5, bytes);
    if ((st = vyre_buffer_download(dev_out, 0, out, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_download", st);
      goto done;
    }
    if (verify("resident buffers", a, b, out, n, seed)) goto done;
    printf("vector_add: resident dispatch took %llu ns on the device, %llu ns wall\n",
           (unsigned long long)timing.device_ns, (unsigned long long)timing.wall_ns);
  }

  printf("vector_add: OK (%zu elements)\n", n);
  exit_code = 0;

done:
  /* Zero handles are skipped: destroying a context would release them all
   * anyway, but explicit cleanup shows the per-object calls. */
  if (dev_a.bits) vyre_buffer_free(dev_a);
  if (dev_b.bits) vyre_buffer_free(dev_b);
  if (dev_out.bits) vyre_buffer_free(dev_out);
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
