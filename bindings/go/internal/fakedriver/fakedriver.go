// Package fakedriver reads and drives the test suite's fake CUDA driver
// (tests/support/libfake_cuda.so, see fake_cuda_control.h) from Go tests:
// dlopen of the path in VYRE_CUDA_DRIVER_LIBRARY returns the instance the
// library loaded. (cgo is not allowed in _test.go files, hence a package.)
package fakedriver

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../tests/support
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "fake_cuda_control.h"

static void* fake_sym(const char* path, const char* name) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  return h ? dlsym(h, name) : NULL;
}
static int fake_stats(const char* path, fake_cuda_stats* out) {
  // A roomy buffer: if the fake's struct grows, it cannot write past ours.
  static __thread unsigned char buf[8192];
  fake_cuda_get_stats_fn f = (fake_cuda_get_stats_fn)fake_sym(path, "fake_cuda_get_stats");
  if (!f) return 0;
  f((fake_cuda_stats*)buf);
  memcpy(out, buf, sizeof *out);
  return 1;
}
static int fake_set_hold(const char* path, int hold) {
  fake_cuda_set_hold_fn f = (fake_cuda_set_hold_fn)fake_sym(path, "fake_cuda_set_hold");
  if (!f) return 0;
  f(hold);
  return 1;
}
static int fake_inject_fault(const char* path, int code) {
  fake_cuda_inject_fault_fn f = (fake_cuda_inject_fault_fn)fake_sym(path, "fake_cuda_inject_fault");
  if (!f) return 0;
  f(code);
  return 1;
}
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// Stats are the fake driver's counters (fake_cuda_stats).
type Stats struct {
	DeviceAllocationsLive uint64
	PinnedAllocationsLive uint64
	ModulesLive           uint64
	StreamsLive           uint64
	EventsLive            uint64
	PrimaryContextRetains int64
	KernelLaunches        uint64
	MisuseErrors          uint64
	LastGrid              [3]uint32
	LastBlock             [3]uint32
	LastSharedBytes       uint32
	LastKernel            string
	ProbeA, ProbeB        uint64
	ProbeC, ProbeD0       uint32
	ProbeLaunches         uint64
	GraphsLive            uint64
	GraphExecsLive        uint64
	GraphLaunches         uint64
	Faults                uint64
	RegisteredRangesLive  uint64
	StreamWaits           uint64
	LastWaitStream        uint64
	LastWaitEventStream   uint64
	// Device-to-device copies run (cuMemcpyDtoDAsync), peer copies run (cuMemcpyPeerAsync, FAKE_CUDA_DEVICES > 1) and
	// cuCtxEnablePeerAccess calls that enabled access: cumulative.
	MemcpyDtoD  uint64
	MemcpyPeer  uint64
	PeerEnables uint64
}

func path() (*C.char, error) {
	p := os.Getenv("VYRE_CUDA_DRIVER_LIBRARY")
	if p == "" {
		return nil, fmt.Errorf("VYRE_CUDA_DRIVER_LIBRARY is not set")
	}
	return C.CString(p), nil
}

// Read returns the fake driver's counters.
func Read() (Stats, error) {
	p, err := path()
	if err != nil {
		return Stats{}, err
	}
	defer C.free(unsafe.Pointer(p))
	var s C.fake_cuda_stats
	if C.fake_stats(p, &s) == 0 {
		return Stats{}, fmt.Errorf("%s has no fake_cuda_get_stats (not the fake driver?)", C.GoString(p))
	}
	out := Stats{
		DeviceAllocationsLive: uint64(s.device_allocations_live),
		PinnedAllocationsLive: uint64(s.pinned_allocations_live),
		ModulesLive:           uint64(s.modules_live),
		StreamsLive:           uint64(s.streams_live),
		EventsLive:            uint64(s.events_live),
		PrimaryContextRetains: int64(s.primary_context_retains),
		KernelLaunches:        uint64(s.kernel_launches),
		MisuseErrors:          uint64(s.misuse_errors),
		LastSharedBytes:       uint32(s.last_shared_bytes),
		LastKernel:            C.GoString(&s.last_kernel[0]),
		ProbeA:                uint64(s.probe_a),
		ProbeB:                uint64(s.probe_b),
		ProbeC:                uint32(s.probe_c),
		ProbeD0:               uint32(s.probe_d0),
		ProbeLaunches:         uint64(s.probe_launches),
		GraphsLive:            uint64(s.graphs_live),
		GraphExecsLive:        uint64(s.graph_execs_live),
		GraphLaunches:         uint64(s.graph_launches),
		Faults:                uint64(s.faults),
		RegisteredRangesLive:  uint64(s.registered_ranges_live),
		StreamWaits:           uint64(s.stream_waits),
		LastWaitStream:        uint64(s.last_wait_stream),
		LastWaitEventStream:   uint64(s.last_wait_event_stream),
		MemcpyDtoD:            uint64(s.memcpy_dtod),
		MemcpyPeer:            uint64(s.memcpy_peer),
		PeerEnables:           uint64(s.peer_enables),
	}
	for k := 0; k < 3; k++ {
		out.LastGrid[k] = uint32(s.last_grid[k])
		out.LastBlock[k] = uint32(s.last_block[k])
	}
	return out, nil
}

// SetHold makes the fake's device work stay incomplete (queries answer
// NOT_READY, synchronisations block up to 5 s) until SetHold(false).
func SetHold(hold bool) error {
	p, err := path()
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(p))
	h := C.int(0)
	if hold {
		h = 1
	}
	if C.fake_set_hold(p, h) == 0 {
		return fmt.Errorf("no fake_cuda_set_hold")
	}
	return nil
}

// InjectFault makes the next kernel launch fault with CUresult `code`
// (0 disarms).
func InjectFault(code int) error {
	p, err := path()
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(p))
	if C.fake_inject_fault(p, C.int(code)) == 0 {
		return fmt.Errorf("no fake_cuda_inject_fault")
	}
	return nil
}
