package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

type argKind uint8

const (
	argNone argKind = iota
	argHost
	argResident
	argShared
)

// hostRef is host data: Go memory, or a HostRange (C memory).
type hostRef struct {
	goMem []byte
	mem   HostRange
}

func (h hostRef) isC() bool { return h.mem.mem != nil }

// Arg is one binding of a dispatch or replay, in declaration order: host
// data (In, Out, InOut, InOutTo over Go slices; HostRange.In/Out/InOut over
// HostMemory), a resident buffer range (Buffer.Arg, Buffer.Range), or the
// placeholder of a SHARED binding (Shared).
type Arg struct {
	kind   argKind
	in     hostRef
	out    hostRef
	bytes  uint64
	buffer *Buffer
	offset uint64
	length uint64
	err    *Error
}

// In binds a Go slice as a host input (copied to the device by the call).
func In[T Elem](s []T) Arg {
	b := AsBytes(s)
	return Arg{kind: argHost, in: hostRef{goMem: b}, bytes: uint64(len(b))}
}

// Out binds a Go slice as a host output: written by a synchronous call
// before it returns; for an asynchronous one, copied into it by the wait
// (the library writes C memory the bindings allocate meanwhile).
func Out[T Elem](s []T) Arg {
	b := AsBytes(s)
	return Arg{kind: argHost, out: hostRef{goMem: b}, bytes: uint64(len(b))}
}

// InOut binds a Go slice as a host input and output, updated in place.
func InOut[T Elem](s []T) Arg {
	b := AsBytes(s)
	return Arg{kind: argHost, in: hostRef{goMem: b}, out: hostRef{goMem: b}, bytes: uint64(len(b))}
}

// InOutTo binds an INPUT_OUTPUT binding read from src and written to dst
// (of the same length; src is not written).
func InOutTo[T Elem](src, dst []T) Arg {
	s, d := AsBytes(src), AsBytes(dst)
	a := Arg{kind: argHost, in: hostRef{goMem: s}, out: hostRef{goMem: d}, bytes: uint64(len(s))}
	if len(s) != len(d) {
		a.err = goError(StatusInvalidArgument, "InOutTo",
			"the source has %d bytes and the destination %d. Fix: pass slices of the same length.",
			len(s), len(d))
	}
	return a
}

// Shared is the entry of a SHARED (dynamic shared memory) binding.
func Shared() Arg { return Arg{kind: argShared} }

// F32 is a float32 scalar's bits for Dispatch.Scalars (a SCALAR32 slot).
func F32(v float32) uint64 { return uint64(math.Float32bits(v)) }

// F64 is a float64 scalar's bits for Dispatch.Scalars (a SCALAR64 slot).
func F64(v float64) uint64 { return math.Float64bits(v) }

// Dispatch is one run of a program (vyre_dispatch_desc).
type Dispatch struct {
	// Args holds one entry per declared binding, in declaration order.
	Args []Arg
	// Params are the u32 parameter words, passed by device pointer.
	Params []uint32
	// Scalars feed SCALAR32/64 parameters (F32 and F64 give float bits).
	Scalars []uint64
	// Grid in blocks; all zero derives x from ElementCount and the block.
	Grid [3]uint32
	// Block size; all zero uses the program's workgroup size.
	Block [3]uint32
	// ElementCount is what a derived grid covers; 0 means the largest
	// binding's element count.
	ElementCount uint64
	// Iterations is how many times the kernel runs back to back; 0 means 1.
	Iterations uint32
	// SharedMemoryBytes is extra dynamic shared memory for this dispatch.
	SharedMemoryBytes uint32
	// DeviceTiming records device events so Timing.Device is measured.
	DeviceTiming bool
	// Cooperative launches with cuLaunchCooperativeKernel (grid sync).
	Cooperative bool
}

// Timing is a dispatch's or replay's timing (vyre_timing).
type Timing struct {
	// Wall is host time from entering the call to the end of the wait.
	Wall time.Duration
	// Device is device time (with DeviceTiming or VYRE_CUDA_TRACE; else 0).
	Device time.Duration
	// Enqueue is host time staging and enqueueing; Wait is host time in the
	// wait, read-back included.
	Enqueue time.Duration
	Wait    time.Duration
}

func timingFromC(t *C.vyre_timing) Timing {
	return Timing{Wall: time.Duration(t.wall_ns), Device: time.Duration(t.device_ns),
		Enqueue: time.Duration(t.enqueue_ns), Wait: time.Duration(t.wait_ns)}
}

func newTiming(a *callArena) *C.vyre_timing {
	t := (*C.vyre_timing)(a.alloc(C.sizeof_vyre_timing))
	t.struct_size = C.sizeof_vyre_timing
	return t
}

// asyncOut is a host output of an asynchronous call written into C memory
// by the library's wait, copied to the Go slice after it.
type asyncOut struct {
	c   unsafe.Pointer
	dst []byte
}

// binder builds binding arrays in a call's arena.
type binder struct {
	a     *callArena
	uses  hostUses
	async bool
	outs  []asyncOut
	keep  []any
}

func (b *binder) bindings(op string, args []Arg) (*C.vyre_dispatch_binding, error) {
	if len(args) == 0 {
		return nil, nil
	}
	arr := (*C.vyre_dispatch_binding)(b.a.alloc(uintptr(len(args)) * C.sizeof_vyre_dispatch_binding))
	cs := unsafe.Slice(arr, len(args))
	for i := range args {
		arg := &args[i]
		c := &cs[i]
		c.struct_size = C.sizeof_vyre_dispatch_binding
		c.source = C.VYRE_SOURCE_HOST
		if arg.err != nil {
			return nil, arg.err
		}
		switch arg.kind {
		case argHost:
			c.host_bytes = C.uint64_t(arg.bytes)
			if arg.in.isC() {
				p, err := b.uses.add(arg.in.mem, op)
				if err != nil {
					return nil, err
				}
				c.host_input = p
			} else {
				b.a.goIn(&c.host_input, arg.in.goMem)
			}
			switch {
			case arg.out.isC():
				p, err := b.uses.add(arg.out.mem, op)
				if err != nil {
					return nil, err
				}
				c.host_output = p
			case len(arg.out.goMem) == 0:
			case b.async:
				p := cAlloc(uintptr(len(arg.out.goMem)))
				b.outs = append(b.outs, asyncOut{c: p, dst: arg.out.goMem})
				c.host_output = p
			default:
				b.a.goOut(&c.host_output, arg.out.goMem)
			}
		case argResident:
			if err := arg.buffer.check(op); err != nil {
				return nil, err
			}
			c.source = C.VYRE_SOURCE_RESIDENT
			c.buffer = arg.buffer.handle()
			c.offset = C.uint64_t(arg.offset)
			c.length = C.uint64_t(arg.length)
			b.keep = append(b.keep, arg.buffer)
		case argShared:
		default:
			return nil, goError(StatusInvalidArgument, op,
				"argument %d is an empty Arg. Fix: make each with In, Out, InOut, InOutTo, Buffer.Arg, Buffer.Range, HostRange.In/Out/InOut or Shared.", i)
		}
	}
	return arr, nil
}

// freeOuts frees the C memory of asynchronous outputs (after the call
// failed, or after the wait).
func freeOuts(outs []asyncOut) {
	for _, o := range outs {
		cFree(o.c)
	}
}

func (b *binder) dispatchDesc(op string, d *Dispatch) (*C.vyre_dispatch_desc, error) {
	if d == nil {
		d = &Dispatch{}
	}
	desc := (*C.vyre_dispatch_desc)(b.a.alloc(C.sizeof_vyre_dispatch_desc))
	desc.struct_size = C.sizeof_vyre_dispatch_desc
	var flags C.uint32_t
	if d.DeviceTiming {
		flags |= C.VYRE_DISPATCH_FLAG_DEVICE_TIMING
	}
	if d.Cooperative {
		flags |= C.VYRE_DISPATCH_FLAG_COOPERATIVE
	}
	desc.flags = flags
	arr, err := b.bindings(op, d.Args)
	if err != nil {
		return nil, err
	}
	desc.bindings = arr
	desc.binding_count = C.size_t(len(d.Args))
	desc.param_words = b.a.u32s(d.Params)
	desc.param_word_count = C.size_t(len(d.Params))
	desc.scalars = b.a.u64s(d.Scalars)
	desc.scalar_count = C.size_t(len(d.Scalars))
	for k := 0; k < 3; k++ {
		desc.grid[k] = C.uint32_t(d.Grid[k])
		desc.block[k] = C.uint32_t(d.Block[k])
	}
	desc.element_count = C.uint64_t(d.ElementCount)
	it := d.Iterations
	if it == 0 {
		it = 1
	}
	desc.fixpoint_iterations = C.uint32_t(it)
	desc.shared_memory_bytes = C.uint32_t(d.SharedMemoryBytes)
	return desc, nil
}

// Dispatch runs the program and waits (vyre_dispatch): host outputs are
// written before it returns.
func (p *Program) Dispatch(d *Dispatch) (Timing, error) {
	const op = "vyre_dispatch"
	if err := p.check(op); err != nil {
		return Timing{}, err
	}
	a := getArena()
	// The keep list lives in the arena, reused: nothing holds it after the call.
	b := binder{a: a, keep: a.keep[:0]}
	defer b.endSync()
	desc, err := b.dispatchDesc(op, d)
	if err != nil {
		return Timing{}, err
	}
	t := newTiming(a)
	err = a.run(op, C.GOVYRE_DISPATCH, p.h.Load(), unsafe.Pointer(desc), 0, unsafe.Pointer(t))
	runtime.KeepAlive(p)
	runtime.KeepAlive(b.keep)
	if err != nil {
		return Timing{}, err
	}
	return timingFromC(t), nil
}

// endSync ends a synchronous call: the HostMemory uses are released, the
// keep list cleared into the arena for reuse and the arena given back.
func (b *binder) endSync() {
	b.uses.releaseAll()
	for i := range b.keep {
		b.keep[i] = nil
	}
	b.a.keep = b.keep[:0]
	putArena(b.a)
}

// DispatchAsync enqueues a dispatch and returns at once with its Pending
// (vyre_dispatch_async). Host inputs are read before it returns; host
// outputs are written when the Pending is waited on: HostMemory outputs
// in place, Go slice outputs through C memory copied to the slice by the
// wait (keep the slice untouched until then).
func (p *Program) DispatchAsync(d *Dispatch) (*Pending, error) {
	const op = "vyre_dispatch_async"
	if err := p.check(op); err != nil {
		return nil, err
	}
	a := getArena()
	defer putArena(a)
	b := binder{a: a, async: true}
	desc, err := b.dispatchDesc(op, d)
	if err != nil {
		b.uses.releaseAll()
		freeOuts(b.outs)
		return nil, err
	}
	out := (*C.vyre_pending)(a.alloc(C.sizeof_vyre_pending))
	err = a.run(op, C.GOVYRE_DISPATCH_ASYNC, p.h.Load(), unsafe.Pointer(desc), 0, unsafe.Pointer(out))
	runtime.KeepAlive(p)
	if err != nil {
		b.uses.releaseAll()
		freeOuts(b.outs)
		return nil, err
	}
	b.uses.unlockOwners()
	return newPending(p.ctx, uint64(out.bits), &b, p), nil
}

// Pending is an asynchronous dispatch, replay, e-graph rebuild or buffer
// copy (vyre_pending). Wait on it once (Wait, WaitTimeout), read its Timing,
// and Close it; Close without a wait waits for the device work and skips
// the host outputs. Safe for use from any goroutine (calls are serialised).
// Closing twice is harmless; a Close from the garbage collector's finalizer
// is a safety net, not a substitute.
type Pending struct {
	ctx  *Context
	h    atomic.Uint64
	mu   sync.Mutex
	outs []asyncOut
	uses hostUses
	keep []any
	done bool
	// onEnd runs once the pending's work is over (wait or release); ok:
	// the wait succeeded (results to copy).
	onEnd func(ok bool)
}

func newPending(ctx *Context, bits uint64, b *binder, keep ...any) *Pending {
	pd := &Pending{ctx: ctx, outs: b.outs, uses: b.uses, keep: append(b.keep, keep...)}
	b.uses = hostUses{}
	b.outs = nil
	pd.h.Store(bits)
	runtime.SetFinalizer(pd, func(pd *Pending) { _ = pd.Close() })
	return pd
}

// Handle is the library handle's bits (0 once closed).
func (pd *Pending) Handle() uint64 { return pd.h.Load() }

func (pd *Pending) handle() C.vyre_pending { return C.vyre_pending{bits: C.uint64_t(pd.h.Load())} }

// end releases what the pending held once its work is over; copy the
// outputs first when the wait succeeded. Called with mu held.
func (pd *Pending) end(ok bool) {
	if pd.done {
		return
	}
	pd.done = true
	if ok {
		for _, o := range pd.outs {
			copy(o.dst, unsafe.Slice((*byte)(o.c), len(o.dst)))
		}
	}
	freeOuts(pd.outs)
	pd.outs = nil
	pd.uses.releaseAll()
	if pd.onEnd != nil {
		pd.onEnd(ok)
	}
	pd.keep = nil
}

// Poll reports whether the device work has completed (vyre_pending_poll).
func (pd *Pending) Poll() (bool, error) {
	const op = "vyre_pending_poll"
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.h.Load() == 0 {
		return false, closedError(op, "Pending")
	}
	err := call(op, func() C.vyre_status { return C.vyre_pending_poll(pd.handle()) })
	if e, ok := err.(*Error); ok && e.Status == StatusNotReady {
		return false, nil
	}
	return err == nil, err
}

// waitOnce is one vyre_pending_wait; done is false on TIMEOUT.
func (pd *Pending) waitOnce(timeoutNs uint64) (bool, error) {
	const op = "vyre_pending_wait"
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.h.Load() == 0 {
		return false, closedError(op, "Pending")
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_pending_wait(pd.handle(), C.uint64_t(timeoutNs))
	})
	if e, ok := err.(*Error); ok && e.Status == StatusTimeout {
		return false, nil
	}
	if e, ok := err.(*Error); ok && e.Status == StatusInvalidState {
		return true, err // waited before: nothing changes
	}
	pd.end(err == nil)
	return true, err
}

// waitSlice bounds each wait of Wait, so it notices ctx.Done() in time.
const waitSlice = 20 * time.Millisecond

// Wait waits for completion and writes the host outputs
// (vyre_pending_wait), honouring ctx: it waits in slices of at most 20 ms
// and returns ctx.Err() when ctx is done first, leaving the pending
// waitable. A pending is waited on once; a second Wait is an error
// (StatusInvalidState).
func (pd *Pending) Wait(ctx context.Context) error {
	if ctx == nil || ctx.Done() == nil {
		_, err := pd.waitOnce(C.VYRE_WAIT_FOREVER)
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		slice := waitSlice
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < slice {
				slice = left
			}
			if slice < 0 {
				slice = 0
			}
		}
		done, err := pd.waitOnce(uint64(slice))
		if done || err != nil {
			return err
		}
	}
}

// WaitTimeout waits up to d; it returns false (and no error) when the work
// did not complete in time, leaving the pending waitable.
func (pd *Pending) WaitTimeout(d time.Duration) (bool, error) {
	if d < 0 {
		d = 0
	}
	return pd.waitOnce(uint64(d))
}

// Timing is the timing of a waited pending (vyre_pending_timing;
// StatusInvalidState before the wait).
func (pd *Pending) Timing() (Timing, error) {
	const op = "vyre_pending_timing"
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.h.Load() == 0 {
		return Timing{}, closedError(op, "Pending")
	}
	var t C.vyre_timing
	t.struct_size = C.sizeof_vyre_timing
	err := call(op, func() C.vyre_status { return C.vyre_pending_timing(pd.handle(), &t) })
	if err != nil {
		return Timing{}, err
	}
	return timingFromC(&t), nil
}

// Finish waits (as Wait), reads the timing and closes the pending.
func (pd *Pending) Finish(ctx context.Context) (Timing, error) {
	if err := pd.Wait(ctx); err != nil {
		_ = pd.Close()
		return Timing{}, err
	}
	t, err := pd.Timing()
	if cerr := pd.Close(); err == nil {
		err = cerr
	}
	return t, err
}

// Close releases the pending (vyre_pending_release). Never waited on, it
// waits for the device work and skips the host outputs; an error that work
// met is returned here. Closing twice, or after the Context's Close, does
// nothing.
func (pd *Pending) Close() error {
	if pd == nil {
		return nil
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	bits := pd.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(pd, nil)
	err := call("vyre_pending_release", func() C.vyre_status {
		return C.vyre_pending_release(C.vyre_pending{bits: C.uint64_t(bits)})
	})
	pd.end(false)
	if isStale(err) {
		return nil
	}
	return err
}
