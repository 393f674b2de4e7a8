package vyrecuda

/*
#include <pthread.h>

#include "shim.h"

static pthread_t govyre_thread_self(void) { return pthread_self(); }
static int govyre_thread_equal(pthread_t a, pthread_t b) { return pthread_equal(a, b); }
*/
import "C"

import (
	"runtime"
	"strconv"
	"sync"
	"unsafe"
)

// CaptureMode is the driver's stream capture mode of a Capture
// (VYRE_CAPTURE_MODE_*): which threads' "unsafe" CUDA calls (allocations,
// frees, module loads, synchronisations: most calls of this package that
// allocate or wait, on any context) the driver forbids while the capture is
// open. Such a call fails (StatusDriverError naming the capture) and
// invalidates the capture; End then returns StatusInvalidState.
type CaptureMode uint32

const (
	// CaptureThreadLocal forbids them on the capturing OS thread (the C
	// default). BeginCapture locks the calling goroutine to its OS thread
	// until End, so no other goroutine runs there meanwhile, and that
	// goroutine must call End (the driver ends such a capture only on the
	// thread that began it).
	CaptureThreadLocal CaptureMode = C.VYRE_CAPTURE_MODE_THREAD_LOCAL
	// CaptureGlobal forbids them to every thread of the process (every
	// goroutine); the beginning goroutine is locked to its thread as for
	// CaptureThreadLocal and must call End.
	CaptureGlobal CaptureMode = C.VYRE_CAPTURE_MODE_GLOBAL
	// CaptureRelaxed forbids them to none: no thread affinity, nothing is
	// locked, and any goroutine may call End. The natural mode for Go code
	// that hands the capture between goroutines; unsafe calls made by
	// mistake during the capture are then not caught.
	CaptureRelaxed CaptureMode = C.VYRE_CAPTURE_MODE_RELAXED
)

// CaptureOptions configure a capture (vyre_capture_desc).
type CaptureOptions struct {
	// Mode: the zero value is CaptureThreadLocal (as in C).
	Mode CaptureMode
	// ParamBytes bounds the parameter words the capture's dispatches may use
	// in all, each dispatch's rounded up to 256 bytes (0: 64 KiB). Over it,
	// Capture.Dispatch is StatusLimitExceeded.
	ParamBytes uint64
}

// Capture is an open capture of the work enqueued on one CUDA stream of a
// context into a Graph (vyre_capture_begin .. vyre_capture_end): other CUDA
// code's kernels, copies and memsets enqueued on Stream() (CuPy, PyTorch,
// your own driver calls) and the library's dispatches enqueued with
// Dispatch. Nothing enqueued runs until the graph is replayed. Dispatches,
// copies and replays from other goroutines keep running outside it (the
// stream is the context's own, never its work stream). One capture per
// context at a time; End it before Context.Close (Close refuses with
// StatusInvalidState while it is open).
//
// Goroutines and OS threads: CUDA ties a CaptureThreadLocal or
// CaptureGlobal capture to the OS thread that began it (it ends only
// there), and Go moves goroutines between threads. So BeginCapture in those
// modes calls runtime.LockOSThread and End calls runtime.UnlockOSThread:
// begin and end the capture on one goroutine (End from another goroutine
// returns StatusInvalidState and leaves the capture open). While it is
// open, that goroutine should make no call that allocates or waits (for
// example Alloc, Upload, Download, Program.Dispatch, Graph.Replay):
// enqueue work with Capture.Dispatch and the driver's asynchronous calls on
// Stream(); other goroutines may. With CaptureRelaxed nothing is locked and
// any goroutine may Dispatch and End.
//
// Dispatch and Stream are safe for concurrent use; End ends the capture
// once. A Capture never ended keeps its context open.
type Capture struct {
	ctx    *Context
	mode   CaptureMode
	stream uint64
	// locked: BeginCapture locked its goroutine to thread.
	locked bool
	thread C.pthread_t

	mu    sync.Mutex
	ended bool
	keep  []any // the dispatches' programs and buffers
}

// BeginCapture begins capturing work on a stream of the context
// (vyre_capture_begin) in `mode`, with the default parameter-word budget.
// See Capture for what CaptureThreadLocal and CaptureGlobal mean for the
// calling goroutine. A second capture while one is open on the context is
// StatusInvalidState.
func (c *Context) BeginCapture(mode CaptureMode) (*Capture, error) {
	return c.BeginCaptureWithOptions(CaptureOptions{Mode: mode})
}

// BeginCaptureWithOptions is BeginCapture with every vyre_capture_desc field.
func (c *Context) BeginCaptureWithOptions(o CaptureOptions) (*Capture, error) {
	const op = "vyre_capture_begin"
	if err := c.check(op); err != nil {
		return nil, err
	}
	var desc C.vyre_capture_desc
	desc.struct_size = C.sizeof_vyre_capture_desc
	desc.mode = C.uint32_t(o.Mode)
	desc.param_bytes = C.uint64_t(o.ParamBytes)
	lock := o.Mode != CaptureRelaxed
	// Locked before the call: the driver binds the capture to the thread
	// the call runs on, which must stay this goroutine's until End.
	runtime.LockOSThread()
	var stream C.uint64_t
	var thread C.pthread_t
	err := call(op, func() C.vyre_status {
		thread = C.govyre_thread_self()
		return C.vyre_capture_begin(c.handle(), &desc, &stream)
	})
	runtime.KeepAlive(c)
	if err != nil || !lock {
		runtime.UnlockOSThread()
	}
	if err != nil {
		return nil, err
	}
	c.capturing.Add(1)
	return &Capture{ctx: c, mode: o.Mode, stream: uint64(stream), locked: lock, thread: thread}, nil
}

// Stream is the capture stream, a CUstream of the context's device as an
// integer: enqueue other CUDA code's asynchronous work on it to capture
// that work. Synchronising or querying it, or making it wait on the legacy
// stream, invalidates the capture; it cannot be passed to
// Context.WaitStream, SignalStream or Graph.LaunchOnStream
// (StatusInvalidArgument: use Dispatch).
func (cp *Capture) Stream() uint64 { return cp.stream }

// Mode is the capture's mode.
func (cp *Capture) Mode() CaptureMode { return cp.mode }

// Context is the context the capture runs on.
func (cp *Capture) Context() *Context { return cp.ctx }

func (cp *Capture) endedError(op string) error {
	return goError(StatusInvalidState, op,
		"the capture has ended. Fix: begin a new one with Context.BeginCapture.")
}

// Dispatch enqueues a dispatch of p (a program of the capture's context)
// into the capture (vyre_capture_dispatch): as Program.DispatchAsync would
// run it (OUTPUT bindings zeroed, Iterations), but only when the captured
// graph is replayed. Resident bindings only (Buffer.Arg, Buffer.Range;
// host data is StatusInvalidArgument, since a graph cannot replay the
// staging of a host copy), not Cooperative. Its Params are copied into a
// block the capture allocated at begin (see CaptureOptions.ParamBytes), so
// the slice may change after the call. Any goroutine may call it.
func (cp *Capture) Dispatch(p *Program, d *Dispatch) error {
	const op = "vyre_capture_dispatch"
	if err := p.check(op); err != nil {
		return err
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.ended {
		return cp.endedError(op)
	}
	a := getArena()
	defer putArena(a)
	b := binder{a: a}
	defer b.uses.releaseAll()
	desc, err := b.dispatchDesc(op, d)
	if err != nil {
		return err
	}
	err = a.run(op, C.GOVYRE_CAPTURE_DISPATCH, p.h.Load(), unsafe.Pointer(desc), 0, nil)
	runtime.KeepAlive(p)
	if err != nil {
		return err
	}
	// The graph keeps them alive in the library; here they stay reachable
	// (and their finalizers unrun) as long as the capture or its graph is.
	for _, k := range b.keep {
		if buf, ok := k.(*Buffer); ok {
			cp.keep = append(cp.keep, buf)
		}
	}
	cp.keep = append(cp.keep, p)
	return nil
}

// End ends the capture into a graph (vyre_capture_end): its nodes are
// numbered in the order the driver lists them; it replays with Replay(nil),
// ReplayAsync(nil), LaunchOnStream(nil, stream) (a captured graph takes no
// Args, Params, Scalars or ElementCount). Its kernel nodes report their
// function and shape but no arguments and cannot be set; its memset nodes
// can (SetNodeInfo). The graph keeps the dispatches' programs and buffers
// alive; memory other code enqueued work on must stay allocated while the
// graph may run.
//
// A capture the driver invalidated (an unsafe call during it, a call on
// Stream() that cannot be captured) is StatusInvalidState and ended all the
// same: the context can begin another. In CaptureThreadLocal and
// CaptureGlobal modes, End must be called by the goroutine that began the
// capture (else StatusInvalidState, the capture left open); it unlocks that
// goroutine from its OS thread. Ending twice is StatusInvalidState.
func (cp *Capture) End() (*Graph, error) {
	const op = "vyre_capture_end"
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.ended {
		return nil, cp.endedError(op)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cp.locked && C.govyre_thread_equal(cp.thread, C.govyre_thread_self()) == 0 {
		return nil, goError(StatusInvalidState, op,
			"called from another goroutine than the one that began this %s capture (CUDA ends it only on the OS thread that began it, to which BeginCapture locked that goroutine). Fix: call End from the goroutine that called BeginCapture, or begin with CaptureRelaxed to end it from any goroutine.",
			cp.mode)
	}
	var out C.vyre_graph
	err := call(op, func() C.vyre_status { return C.vyre_capture_end(cp.ctx.handle(), &out) })
	runtime.KeepAlive(cp.ctx)
	// Whatever the result, the capture is over: ended into a graph, ended by
	// the driver's invalidation, or gone with its context.
	cp.ended = true
	cp.ctx.capturing.Add(-1)
	keep := cp.keep
	cp.keep = nil
	if cp.locked {
		runtime.UnlockOSThread() // BeginCapture's lock
	}
	if err != nil {
		return nil, err
	}
	return newGraph(cp.ctx, uint64(out.bits), keep, nil), nil
}

// String is the mode's name ("CaptureThreadLocal").
func (m CaptureMode) String() string {
	switch m {
	case CaptureThreadLocal:
		return "CaptureThreadLocal"
	case CaptureGlobal:
		return "CaptureGlobal"
	case CaptureRelaxed:
		return "CaptureRelaxed"
	}
	return "CaptureMode(" + strconv.FormatUint(uint64(m), 10) + ")"
}
