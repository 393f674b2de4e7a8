/*
 * triton_saxpy.c — a Triton-style kernel through an explicit parameter list.
 *
 * Triton (and hand-written CUDA) kernels take scalars and pointers in their
 * own order, not vyre-cuda's default convention (one pointer per binding,
 * then a pointer to the u32 parameter words). The program descriptor says
 * where each kernel parameter comes from instead:
 *
 *   vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n)
 *     y[i] = a * x[i] + y[i] for every i < n
 *
 *   params = { SCALAR32 0, BINDING 0, BINDING 1, SCALAR64 1 }
 *     scalars[0] = a (the float's bits), binding 0 = x, binding 1 = y,
 *     scalars[1] = n
 *
 * A Triton kernel with unused scratch pointers would add
 * VYRE_PARAM_NULL_POINTER entries. The example runs saxpy twice over random
 * non-zero data — once over page-locked host memory (vyre_host_alloc, copied
 * by DMA in place) with y read from one array and written to another, once
 * asynchronously over resident buffers with device timing — and checks every
 * element against a CPU loop.
 *
 *   triton_saxpy [N]      (N elements, default 1000003)
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

#include "saxpy_ptx.h" /* kSaxpyPtx and SAXPY_ENTRY: the kernel above, as PTX */
#include "vyre_cuda.h"

/* Not a multiple of the block size, so the kernel's bounds check matters. */
#define DEFAULT_ELEMENT_COUNT 1000003u
#define BLOCK_THREADS 128u

/* Prints what failed and the library's last error for this thread, and
 * returns the exit code the failure deserves. */
static int report_failure(const char* what, vyre_status status) {
  char message[4096];
  size_t length = 0;
  int32_t cu_result = 0;
  vyre_last_error(NULL, &cu_result, message, sizeof message, &length);
  fprintf(stderr, "triton_saxpy: %s failed: %s (CUresult %d)\n  %s\n", what,
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

/* Random non-zero integers 1..4096 as floats: a * x + y is then exact in
 * float whether or not the device contracts it into an FMA, so the device's
 * result must equal the CPU's bit for bit. */
static float random_value(uint32_t* state) { return (float)(next_random(state) % 4096u + 1u); }

/* A float's bits in the low 32 bits of a scalar slot (VYRE_PARAM_SCALAR32). */
static uint64_t f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

/* Counts elements where out != a * x + y0 and prints the first few. The
 * poison (all bits set: a NaN) never compares equal. */
static size_t verify(const char* label, float a, const float* x, const float* y0,
                     const float* out, size_t n, uint32_t seed) {
  size_t bad = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    float expect = a * x[i] + y0[i];
    if (!(out[i] == expect)) {
      if (bad < 5) {
        fprintf(stderr, "triton_saxpy: %s: y[%zu] = %g, expected %g\n", label, i,
                (double)out[i], (double)expect);
      }
      ++bad;
    }
  }
  if (bad) {
    fprintf(stderr, "triton_saxpy: %s: %zu of %zu elements wrong (data seed %u)\n", label, bad,
            n, (unsigned)seed);
  }
  return bad;
}

int main(int argc, char** argv) {
  size_t n = DEFAULT_ELEMENT_COUNT;
  uint64_t bytes;
  int exit_code = 1;
  vyre_status st;
  vyre_context context = {0};
  vyre_program program = {0};
  vyre_buffer dev_x = {0}, dev_y = {0};
  float *x = NULL, *y0 = NULL, *y = NULL; /* page-locked host memory */
  uint32_t seed = (uint32_t)time(NULL) | 1u;
  uint32_t state = seed;
  const float a = 2.5f;
  uint64_t scalars[2];
  size_t i;

  if (argc > 1) {
    char* end = NULL;
    unsigned long long v = strtoull(argv[1], &end, 10);
    if (argc > 2 || end == argv[1] || *end != '\0' || v == 0 || v > (1ull << 28)) {
      fprintf(stderr, "triton_saxpy: bad argument. Fix: run triton_saxpy [N] with "
                      "0 < N <= 268435456.\n");
      return 1;
    }
    n = (size_t)v;
  }
  bytes = (uint64_t)n * sizeof(float);

  if (VYRE_VERSION_MAJOR_OF(vyre_version()) != VYRE_CUDA_VERSION_MAJOR) {
    fprintf(stderr,
            "triton_saxpy: library major version %u differs from the header's %u. "
            "Fix: build against the vyre_cuda.h installed with the library.\n",
            (unsigned)VYRE_VERSION_MAJOR_OF(vyre_version()), (unsigned)VYRE_CUDA_VERSION_MAJOR);
    return 1;
  }

  /* 1. A context on device 0 (NO_DRIVER / NO_DEVICE here on a machine
   *    without CUDA). */
  {
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    st = vyre_context_create(&desc, &context);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_context_create", st);
      goto done;
    }
  }

  /* 2. The program: two bindings (x read, y read and written) and the
   *    explicit parameter list that places them, with the two scalars, in
   *    the kernel's own order. */
  {
    vyre_binding_decl decls[2] = {VYRE_BINDING_DECL_INIT, VYRE_BINDING_DECL_INIT};
    vyre_kernel_param params[4];
    vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
    decls[0].name = "x";
    decls[0].role = VYRE_ROLE_INPUT;
    decls[0].element_size = sizeof(float);
    decls[1].name = "y";
    decls[1].role = VYRE_ROLE_INPUT_OUTPUT;
    decls[1].element_size = sizeof(float);
    params[0].kind = VYRE_PARAM_SCALAR32; /* float a  = scalars[0] */
    params[0].index = 0;
    params[1].kind = VYRE_PARAM_BINDING; /* const float* x = binding 0 */
    params[1].index = 0;
    params[2].kind = VYRE_PARAM_BINDING; /* float* y = binding 1 */
    params[2].index = 1;
    params[3].kind = VYRE_PARAM_SCALAR64; /* u64 n = scalars[1] */
    params[3].index = 1;
    desc.code_kind = VYRE_CODE_PTX;
    desc.code = kSaxpyPtx; /* NUL-terminated: code_size stays 0 */
    desc.entry = SAXPY_ENTRY;
    desc.bindings = decls;
    desc.binding_count = 2;
    desc.params = params;
    desc.param_count = 4;
    desc.workgroup_size[0] = BLOCK_THREADS;
    st = vyre_program_create(context, &desc, &program);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_program_create", st);
      goto done;
    }
  }

  /* Page-locked host memory: dispatches and buffer copies move it by DMA in
   * place instead of staging it through the library's pinned pool. */
  {
    void* memory[3] = {NULL, NULL, NULL};
    for (i = 0; i < 3; ++i) {
      if ((st = vyre_host_alloc(context, bytes, &memory[i])) != VYRE_STATUS_OK) break;
    }
    x = memory[0];
    y0 = memory[1];
    y = memory[2];
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_host_alloc", st);
      goto done;
    }
  }
  for (i = 0; i < n; ++i) {
    x[i] = random_value(&state);
    y0[i] = random_value(&state);
  }
  scalars[0] = f32_bits(a);
  scalars[1] = (uint64_t)n;

  /* 3. Over host memory, synchronously: y is read from y0 and written to y
   *    (host_input and host_output may differ), so y can be poisoned first.
   *    The grid is left at zero: it covers the bindings' n elements. */
  {
    vyre_dispatch_binding bind[2] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT};
    vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
    bind[0].host_input = x;
    bind[0].host_bytes = bytes;
    bind[1].host_input = y0;
    bind[1].host_output = y;
    bind[1].host_bytes = bytes;
    desc.bindings = bind;
    desc.binding_count = 2;
    desc.scalars = scalars;
    desc.scalar_count = 2;
    memset(y, 0xFF, bytes); /* NaN: an unwritten element cannot pass */
    st = vyre_dispatch(program, &desc, NULL);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_dispatch (pinned host memory)", st);
      goto done;
    }
    if (verify("pinned host memory", a, x, y0, y, n, seed)) goto done;
  }

  /* 4. Over resident buffers, asynchronously, with device timing: y is
   *    updated in place on the device, then downloaded. */
  {
    vyre_dispatch_binding bind[2] = {VYRE_DISPATCH_BINDING_INIT, VYRE_DISPATCH_BINDING_INIT};
    vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
    vyre_pending pending = {0};
    vyre_timing timing = VYRE_TIMING_INIT;

    /* New data, so this dispatch cannot pass on the first one's results. */
    for (i = 0; i < n; ++i) {
      x[i] = random_value(&state);
      y0[i] = random_value(&state);
    }
    if ((st = vyre_buffer_alloc(context, bytes, &dev_x)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_alloc(context, bytes, &dev_y)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_alloc", st);
      goto done;
    }
    if ((st = vyre_buffer_upload(dev_x, 0, x, bytes)) != VYRE_STATUS_OK ||
        (st = vyre_buffer_upload(dev_y, 0, y0, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_upload", st);
      goto done;
    }
    for (i = 0; i < 2; ++i) bind[i].source = VYRE_SOURCE_RESIDENT; /* length 0 = whole buffer */
    bind[0].buffer = dev_x;
    bind[1].buffer = dev_y;
    desc.bindings = bind;
    desc.binding_count = 2;
    desc.scalars = scalars;
    desc.scalar_count = 2;
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
    if ((st = vyre_pending_release(pending)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_pending_release", st);
      goto done;
    }
    memset(y, 0xFF, bytes);
    if ((st = vyre_buffer_download(dev_y, 0, y, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_download", st);
      goto done;
    }
    if (verify("resident buffers", a, x, y0, y, n, seed)) goto done;
    printf("triton_saxpy: saxpy over %zu floats: %.1f us on the device, %.1f us wall\n", n,
           (double)timing.device_ns / 1e3, (double)timing.wall_ns / 1e3);
  }

  printf("triton_saxpy: OK (%zu elements)\n", n);
  exit_code = 0;

done:
  if (dev_x.bits) vyre_buffer_free(dev_x);
  if (dev_y.bits) vyre_buffer_free(dev_y);
  if (x) vyre_host_free(x);
  if (y0) vyre_host_free(y0);
  if (y) vyre_host_free(y);
  if (program.bits) vyre_program_destroy(program);
  if (context.bits) {
    st = vyre_context_destroy(context);
    if (st != VYRE_STATUS_OK && exit_code == 0) exit_code = report_failure("vyre_context_destroy", st);
  }
  return exit_code;
}
