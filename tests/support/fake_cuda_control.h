/*
 * Test-only controls exported by the fake CUDA driver (libfake_cuda.so).
 *
 * The engine dlopen()s the fake through VYRE_CUDA_DRIVER_LIBRARY; a test that
 * dlopen()s the same path gets the same instance and can read its counters
 * and hold "device work" incomplete. See fake_cuda_client.h for a C++ wrapper.
 */
#ifndef VYRE_TESTS_SUPPORT_FAKE_CUDA_CONTROL_H_
#define VYRE_TESTS_SUPPORT_FAKE_CUDA_CONTROL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_cuda_stats {
  /* Levels. */
  uint64_t device_allocations_live;
  uint64_t device_bytes_live;
  uint64_t pinned_allocations_live;
  uint64_t pinned_bytes_live;
  uint64_t modules_live;
  uint64_t streams_live;
  uint64_t events_live;
  int64_t primary_context_retains;
  /* Cumulative. */
  uint64_t module_loads;
  uint64_t kernel_launches;
  uint64_t cooperative_launches;
  uint64_t memcpy_htod;
  uint64_t memcpy_dtoh;
  uint64_t memsets;
  /* Calls the engine should never make: wrong pointers, no current context,
   * unknown handles, double frees. Any increase is an engine bug. */
  uint64_t misuse_errors;
  /* Synchronisations that gave up waiting for fake_cuda_set_hold(0). */
  uint64_t hold_timeouts;
  /* The last launch. */
  uint32_t last_grid[3];
  uint32_t last_block[3];
  uint32_t last_shared_bytes;
  char last_kernel[128];
  /* vyre_test_probe_params(u64 a, const void* b, u32 c, const u32* d):
   * a, b, c and d[0] of its last launch. (Fields are only ever appended:
   * the Python binding tests read this struct through ctypes.) */
  uint64_t probe_a;
  uint64_t probe_b;
  uint32_t probe_c;
  uint32_t probe_d0;
  uint64_t probe_launches;
  /* Graphs (levels): those cuStreamEndCapture handed over and not yet
   * destroyed, and live cuGraphInstantiateWithFlags results. */
  uint64_t graphs_live;
  uint64_t graph_execs_live;
  /* Graphs (cumulative): cuGraphLaunch calls that got to run their nodes, the
   * nodes they ran (each also counts in kernel_launches, memcpy_*, memsets),
   * and cuStreamBeginCapture successes. */
  uint64_t graph_launches;
  uint64_t graph_nodes_run;
  uint64_t captures_begun;
  /* cuMemcpyDtoDAsync copies run (cumulative). */
  uint64_t memcpy_dtod;
  /* Device faults (cumulative): launches that faulted (fake_cuda_inject_fault),
   * cuDevicePrimaryCtxReset calls that succeeded, and the driver objects
   * (allocations, modules, streams, events, graphs, executable graphs) those
   * resets destroyed because they were still live. */
  uint64_t faults;
  uint64_t primary_context_resets;
  uint64_t objects_reclaimed_by_reset;
  /* Host memory page-locked by cuMemHostRegister (levels). */
  uint64_t registered_ranges_live;
  uint64_t registered_bytes_live;
  /* With FAKE_CUDA_DEFER_COPIES=1, host<->device copies run only when the
   * host next waits (stream/event synchronise or query, context synchronise,
   * frees) or before the next kernel, so a host that touches a copy's memory
   * before waiting for it sees the bug. Copies (and, with
   * FAKE_CUDA_DEFER_ALL=1, memsets) run that way (cumulative). */
  uint64_t deferred_copies;
  /* With FAKE_CUDA_DEFER_ALL=1: kernels run when the host waited, in order
   * with the copies and memsets (cumulative). */
  uint64_t deferred_kernels;
  /* cuStreamWaitEvent calls accepted (cumulative), and of the last one the
   * stream that waited and the stream its event was last recorded on (CUstream
   * values as integers: 0 the NULL stream, 1 legacy, 2 per-thread). */
  uint64_t stream_waits;
  uint64_t last_wait_stream;
  uint64_t last_wait_event_stream;
  /* cuPointerGetAttributes calls (cumulative). */
  uint64_t pointer_queries;
  /* Several devices (FAKE_CUDA_DEVICES): cuMemcpyPeerAsync copies run, and
   * cuCtxEnablePeerAccess calls that enabled access (cumulative). */
  uint64_t memcpy_peer;
  uint64_t peer_enables;
  /* IPC (levels): mappings cuIpcOpenMemHandle made and cuIpcCloseMemHandle
   * has not closed, and allocations this process exported and has not freed. */
  uint64_t ipc_imports_live;
  uint64_t ipc_exports_live;
} fake_cuda_stats;

typedef void (*fake_cuda_get_stats_fn)(fake_cuda_stats* out);
/* hold != 0: stream/event queries answer CUDA_ERROR_NOT_READY and
 * synchronisations block until the hold is released (at most 5 s). */
typedef void (*fake_cuda_set_hold_fn)(int hold);
/* cu_result != 0: the next kernel launch (live or a graph's kernel node)
 * "faults": it returns success without running, and from then on the device
 * is sticky, as after a real fault: every call that needs the context
 * (copies, memsets, launches, allocations, frees, module loads and unloads,
 * stream, event and graph calls, synchronisation and queries) and
 * cuDevicePrimaryCtxRetain return cu_result, until cuDevicePrimaryCtxReset
 * clears it and destroys every object still live. 0 disarms a fault not yet
 * fired. */
typedef void (*fake_cuda_inject_fault_fn)(int cu_result);
/* Like fake_cuda_inject_fault, but the fault shows later, as a real one
 * usually does: calls that only enqueue work (copies, memsets, launches,
 * event records, graph launches) keep succeeding, and drop their work, until
 * the first other call (a synchronisation, query, allocation, ...), which
 * returns cu_result and makes the device sticky. */
typedef void (*fake_cuda_inject_latent_fault_fn)(int cu_result);

/* A module loaded from PTX text containing "fake-static-shared-bytes: <n>"
 * declares n bytes of static shared memory in every kernel
 * (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES); launches then get at most 48 KiB - n
 * bytes of dynamic shared memory (else CUDA_ERROR_INVALID_VALUE), and the
 * opt-in cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) refuses more. */
#define FAKE_CUDA_STATIC_SHARED_MARKER "fake-static-shared-bytes: "

/* cuModuleLoadDataEx on PTX text containing "fake-jit-log-bytes: <n>" fails
 * with CUDA_ERROR_INVALID_PTX and a JIT error log of exactly n bytes (as far
 * as the log buffer holds): this pattern repeated, the last copy cut at n. It
 * holds 2- and 3-byte UTF-8 sequences. */
#define FAKE_CUDA_JIT_LOG_PATTERN \
  "fake ptxas: error: \xC3\xA9t\xC3\xA9 \xE2\x9C\x93 a line of a long JIT log\n"

void fake_cuda_get_stats(fake_cuda_stats* out);
void fake_cuda_set_hold(int hold);
void fake_cuda_inject_fault(int cu_result);
void fake_cuda_inject_latent_fault(int cu_result);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VYRE_TESTS_SUPPORT_FAKE_CUDA_CONTROL_H_ */
