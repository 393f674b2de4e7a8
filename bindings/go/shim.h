/*
 * The C side of the Go bindings (cgo compiles shim.c with the package).
 *
 * govyre_call runs one vyre_* call whose descriptors live in C memory but
 * whose host data may be Go memory. The cgo rules let Go pass a Go pointer
 * to C only as a call argument, and let C store it in C memory only until
 * that call returns. So the Go pointers travel as the arguments p0..p15;
 * this function writes each into the descriptor field that needs it
 * (where[i] = p[which[i]]), makes the call, and clears those fields again
 * before returning. Nothing C keeps after the call holds a Go pointer.
 */
#ifndef GOVYRE_SHIM_H_
#define GOVYRE_SHIM_H_

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vyre_cuda.h"

#define GOVYRE_MAX_GO_POINTERS 16

enum govyre_op {
  GOVYRE_DISPATCH = 1,
  GOVYRE_DISPATCH_ASYNC = 2,
  GOVYRE_GRAPH_RECORD = 3,
  GOVYRE_GRAPH_REPLAY = 4,
  GOVYRE_GRAPH_REPLAY_ASYNC = 5,
  GOVYRE_UPLOAD_RANGES = 6,
  GOVYRE_DOWNLOAD_RANGES = 7,
  GOVYRE_EGRAPH_IMAGE_CREATE = 8,
  GOVYRE_EGRAPH_REBUILD = 9,
  GOVYRE_EGRAPH_REBUILD_ASYNC = 10,
  GOVYRE_SEQUENCE_CREATE = 11,
  GOVYRE_EGRAPH_IMAGE_APPEND = 12,
  /* count carries the CUstream (vyre_graph_launch). */
  GOVYRE_GRAPH_LAUNCH = 13,
  /* handle is the program; no out (vyre_capture_dispatch). */
  GOVYRE_CAPTURE_DISPATCH = 14
};

/* handle: the object the call acts on (its bits); desc: the call's
 * descriptor (or range array); count: the range count for the range calls;
 * out: the handle, timing or result written by the call. */
vyre_status govyre_call(int op, uint64_t handle, void* desc, size_t count, void* out,
                        void** const* where, const uint8_t* which, size_t patch_count,
                        void* p0, void* p1, void* p2, void* p3, void* p4, void* p5, void* p6,
                        void* p7, void* p8, void* p9, void* p10, void* p11, void* p12,
                        void* p13, void* p14, void* p15);

/* The log callback handed to vyre_set_log_callback: calls the exported Go
 * function govyreLog. */
void govyre_log_trampoline(void* user_data, vyre_log_level level, const char* message);

/* 4 KiB-aligned C heap memory (AllocHostMemory); NULL when out of memory. */
void* govyre_aligned_alloc(size_t bytes);

#endif /* GOVYRE_SHIM_H_ */
