/* libvyre_bench_timer: times vyre calls from C inside another process, for
 * bindings/python/bench_overhead.py (issue 21).
 *
 * Python's overhead is Python's time per call minus C's. Measured in two
 * processes (bench/binding_overhead.c beside the Python run), that
 * difference also carries whatever differs between the processes: on an
 * H200 the same C call took 10.3 us in one process and 12.3 us in the next,
 * more than the overhead being measured. This module lets the Python
 * benchmark time the C call in its own process, on the same context,
 * program and buffers, interleaved with its own rows. It takes the entry
 * point by address (the library instance the package loaded) and links
 * nothing.
 */
#include <stdint.h>
#include <time.h>

#include "vyre_cuda.h"

#define BENCH_EXPORT __attribute__((visibility("default")))

typedef vyre_status (*dispatch_fn)(vyre_program, const vyre_dispatch_desc*, vyre_timing*);
typedef vyre_status (*replay_fn)(vyre_graph, const vyre_graph_replay_desc*, vyre_timing*);

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* `count` calls of fn(program, desc, &timing), each timed alone into
 * out_us[i] as bench/binding_overhead.c times them. The first failing
 * call's status, else VYRE_STATUS_OK. */
BENCH_EXPORT int vyre_bench_time_dispatch(dispatch_fn fn, uint64_t program,
                                          const vyre_dispatch_desc* desc, int count,
                                          double* out_us) {
  vyre_program p = {program};
  vyre_timing timing = VYRE_TIMING_INIT;
  for (int i = 0; i < count; ++i) {
    double t0 = now_us();
    vyre_status st = fn(p, desc, &timing);
    out_us[i] = now_us() - t0;
    if (st != VYRE_STATUS_OK) return st;
  }
  return VYRE_STATUS_OK;
}

/* The same for fn(graph, desc, &timing) (vyre_graph_replay). */
BENCH_EXPORT int vyre_bench_time_replay(replay_fn fn, uint64_t graph,
                                        const vyre_graph_replay_desc* desc, int count,
                                        double* out_us) {
  vyre_graph g = {graph};
  vyre_timing timing = VYRE_TIMING_INIT;
  for (int i = 0; i < count; ++i) {
    double t0 = now_us();
    vyre_status st = fn(g, desc, &timing);
    out_us[i] = now_us() - t0;
    if (st != VYRE_STATUS_OK) return st;
  }
  return VYRE_STATUS_OK;
}
