/*
 * dlopen_vector_add.c — vector_add.c without a link-time dependency.
 *
 * Languages that cannot link C libraries at build time (or want to run where
 * the library is absent) load vyre-cuda at run time. This example does so:
 * include/vyre_cuda_loader.h opens the library, resolves every function and
 * checks the major version; then the same flow as vector_add.c runs through
 * the loader's table.
 *
 *   dlopen_vector_add [path/to/libvyre_cuda.so.0]
 *
 * The library is argv[1] if given, else $VYRE_CUDA_LIBRARY, else
 * "libvyre_cuda.so.0" found through the dynamic loader's search path.
 *
 * Exit codes: 0 = OK; 1 = an error, a mismatch, or the library could not be
 * loaded; 2 = this machine cannot run CUDA work (no driver, driver too old,
 * or no device).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vector_add_ptx.h"
/* Types, macros and the loader: no function of the library is linked. */
#include "vyre_cuda_loader.h"

#define ELEMENT_COUNT 1000003u
#define BLOCK_THREADS 256u

/* Every vyre_* function, resolved by vyre_cuda_loader_open and named as in
 * the header (api.vyre_context_create, ...). */
static vyre_cuda_loader api;

static int report_failure(const char* what, vyre_status status) {
  char message[4096];
  size_t length = 0;
  int32_t cu_result = 0;
  api.vyre_last_error(NULL, &cu_result, message, sizeof message, &length);
  fprintf(stderr, "dlopen_vector_add: %s failed: %s (CUresult %d)\n  %s\n", what,
          api.vyre_status_name(status), (int)cu_result, length ? message : "(no message)");
  if (status == VYRE_STATUS_NO_DRIVER || status == VYRE_STATUS_DRIVER_TOO_OLD ||
      status == VYRE_STATUS_NO_DEVICE) {
    return 2;
  }
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

static size_t verify(const char* label, const uint32_t* a, const uint32_t* b,
                     const uint32_t* out, size_t n, uint32_t seed) {
  size_t bad = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    uint32_t expect = a[i] + b[i];
    if (out[i] != expect) {
      if (bad < 5) {
        fprintf(stderr, "dlopen_vector_add: %s: out[%zu] = %u, expected %u\n", label, i,
                (unsigned)out[i], (unsigned)expect);
      }
      ++bad;
    }
  }
  if (bad) {
    fprintf(stderr, "dlopen_vector_add: %s: %zu of %zu elements wrong (data seed %u)\n", label,
            bad, n, (unsigned)seed);
  }
  return bad;
}

int main(int argc, char** argv) {
  const size_t n = ELEMENT_COUNT;
  const uint64_t bytes = (uint64_t)n * sizeof(uint32_t);
  const char* path = "libvyre_cuda.so.0";
  const char* env_path = getenv("VYRE_CUDA_LIBRARY");
  char why[1024];
  int exit_code = 1;
  vyre_status st;
  vyre_context context = {0};
  vyre_program program = {0};
  vyre_buffer dev_a = {0}, dev_b = {0}, dev_out = {0};
  uint32_t *a = NULL, *b = NULL, *out = NULL;
  uint32_t seed = (uint32_t)time(NULL) | 1u;
  uint32_t state = seed;
  size_t i;

  if (argc > 1 && argv[1][0] != '\0') {
    path = argv[1];
  } else if (env_path && env_path[0] != '\0') {
    path = env_path;
  }
  /* Opens the library, resolves every function before any is called (a
   * stale or foreign library fails here, clearly) and checks the major
   * version against vyre_cuda.h's. */
  if (vyre_cuda_loader_open(path, &api, why, sizeof why) != 0) {
    fprintf(stderr, "dlopen_vector_add: %s\n", why);
    return 1;
  }

  a = malloc(bytes);
  b = malloc(bytes);
  out = malloc(bytes);
  if (!a || !b || !out) {
    fprintf(stderr, "dlopen_vector_add: host allocation of 3 x %llu bytes failed. "
                    "Fix: free host memory.\n", (unsigned long long)bytes);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    a[i] = next_random(&state);
    b[i] = next_random(&state);
  }

  {
    vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
    st = api.vyre_context_create(&desc, &context);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_context_create", st);
      goto done;
    }
  }

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
    desc.code = kVectorAddPtx;
    desc.entry = VYRE_EXAMPLE_ADD_ENTRY;
    desc.bindings = decls;
    desc.binding_count = 3;
    desc.workgroup_size[0] = BLOCK_THREADS;
    st = api.vyre_program_create(context, &desc, &program);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_program_create", st);
      goto done;
    }
  }

  /* Host memory, then resident buffers; both dispatches are synchronous. */
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
    memset(out, 0xA5, bytes);
    st = api.vyre_dispatch(program, &desc, NULL);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_dispatch (host memory)", st);
      goto done;
    }
    if (verify("host memory", a, b, out, n, seed)) goto done;

    if ((st = api.vyre_buffer_alloc(context, bytes, &dev_a)) != VYRE_STATUS_OK ||
        (st = api.vyre_buffer_alloc(context, bytes, &dev_b)) != VYRE_STATUS_OK ||
        (st = api.vyre_buffer_alloc(context, bytes, &dev_out)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_alloc", st);
      goto done;
    }
    if ((st = api.vyre_buffer_upload(dev_a, 0, a, bytes)) != VYRE_STATUS_OK ||
        (st = api.vyre_buffer_upload(dev_b, 0, b, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_upload", st);
      goto done;
    }
    for (i = 0; i < 3; ++i) {
      bind[i] = (vyre_dispatch_binding)VYRE_DISPATCH_BINDING_INIT;
      bind[i].source = VYRE_SOURCE_RESIDENT;
    }
    bind[0].buffer = dev_a;
    bind[1].buffer = dev_b;
    bind[2].buffer = dev_out;
    st = api.vyre_dispatch(program, &desc, NULL);
    if (st != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_dispatch (resident)", st);
      goto done;
    }
    memset(out, 0xA5, bytes);
    if ((st = api.vyre_buffer_download(dev_out, 0, out, bytes)) != VYRE_STATUS_OK) {
      exit_code = report_failure("vyre_buffer_download", st);
      goto done;
    }
    if (verify("resident buffers", a, b, out, n, seed)) goto done;
  }

  printf("dlopen_vector_add: OK (%zu elements)\n", n);
  exit_code = 0;

done:
  if (dev_a.bits) api.vyre_buffer_free(dev_a);
  if (dev_b.bits) api.vyre_buffer_free(dev_b);
  if (dev_out.bits) api.vyre_buffer_free(dev_out);
  if (program.bits) api.vyre_program_destroy(program);
  if (context.bits) {
    st = api.vyre_context_destroy(context);
    if (st != VYRE_STATUS_OK && exit_code == 0) {
      exit_code = report_failure("vyre_context_destroy", st);
    }
  }
  free(a);
  free(b);
  free(out);
  /* The library is deliberately not dlclose()d: unloading a library that
   * started driver threads is a classic source of exit-time crashes, and the
   * process ends here anyway. */
  return exit_code;
}
