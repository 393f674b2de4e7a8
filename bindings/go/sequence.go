package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// StepKind is what a sequence step does (vyre_step_kind).
type StepKind int32

const (
	StepDispatch StepKind = C.VYRE_STEP_DISPATCH
	StepFill     StepKind = C.VYRE_STEP_FILL
	StepCopy     StepKind = C.VYRE_STEP_COPY
	StepUpload   StepKind = C.VYRE_STEP_UPLOAD
	StepDownload StepKind = C.VYRE_STEP_DOWNLOAD
)

// Step is one step of a Sequence; make it with DispatchStep, FillStep,
// CopyStep, UploadStep, DownloadStep, UploadHostStep or DownloadHostStep.
type Step struct {
	kind      StepKind
	program   *Program
	dispatch  *Dispatch
	buffer    *Buffer
	offset    uint64
	bytes     uint64
	src       *Buffer
	srcOffset uint64
	host      hostRef
	fill      byte
}

// DispatchStep runs p with d (resident bindings only); d is copied when the
// sequence is built.
func DispatchStep(p *Program, d *Dispatch) Step {
	return Step{kind: StepDispatch, program: p, dispatch: d}
}

// FillStep sets `bytes` bytes of dst at `offset` to `value`.
func FillStep(dst *Buffer, offset, bytes uint64, value byte) Step {
	return Step{kind: StepFill, buffer: dst, offset: offset, bytes: bytes, fill: value}
}

// CopyStep copies `bytes` from src at srcOffset to dst at dstOffset (the
// ranges must not overlap).
func CopyStep(dst *Buffer, dstOffset uint64, src *Buffer, srcOffset, bytes uint64) Step {
	return Step{kind: StepCopy, buffer: dst, offset: dstOffset, src: src, srcOffset: srcOffset, bytes: bytes}
}

// UploadStep copies src to dst at `offset`. The step reads src when each
// run starts: the bindings copy it into C memory the sequence owns (the
// library reads step memory after the building call returns, which Go
// memory must not be), so change src between runs freely.
func UploadStep(dst *Buffer, offset uint64, src []byte) Step {
	return Step{kind: StepUpload, buffer: dst, offset: offset, bytes: uint64(len(src)),
		host: hostRef{goMem: src}}
}

// DownloadStep copies len(dst) bytes of src at `offset` into dst when each
// run ends (through C memory the sequence owns, copied to dst after a
// successful run or wait).
func DownloadStep(src *Buffer, offset uint64, dst []byte) Step {
	return Step{kind: StepDownload, buffer: src, offset: offset, bytes: uint64(len(dst)),
		host: hostRef{goMem: dst}}
}

// UploadHostStep copies a HostRange to dst at `offset`, in place (no copy
// by the bindings); the memory stays in use while the sequence or a graph
// recorded from it lives.
func UploadHostStep(dst *Buffer, offset uint64, r HostRange) Step {
	return Step{kind: StepUpload, buffer: dst, offset: offset, bytes: r.bytes, host: hostRef{mem: r}}
}

// DownloadHostStep copies src at `offset` into a HostRange, in place.
func DownloadHostStep(src *Buffer, offset uint64, r HostRange) Step {
	return Step{kind: StepDownload, buffer: src, offset: offset, bytes: r.bytes, host: hostRef{mem: r}}
}

// Repeat runs steps [First, First+Count) Times times.
type Repeat struct {
	First int
	Count int
	Times uint32
}

// seqHost is the host memory of a sequence's upload and download steps,
// shared by the sequence, the graphs recorded from it and their
// asynchronous replays (reference-counted).
type seqHost struct {
	mu        sync.Mutex
	busy      bool // an asynchronous replay is unwaited
	refs      atomic.Int32
	uploads   []asyncOut // Go slice -> C memory before each run
	downloads []asyncOut // C memory -> Go slice after each run
	mems      []*HostMemory
}

func (h *seqHost) ref() {
	if h != nil {
		h.refs.Add(1)
	}
}

func (h *seqHost) unref() {
	if h == nil || h.refs.Add(-1) != 0 {
		return
	}
	h.mu.Lock() // a Run in flight holds it
	defer h.mu.Unlock()
	freeOuts(h.uploads)
	freeOuts(h.downloads)
	for _, m := range h.mems {
		m.release()
	}
	h.uploads, h.downloads, h.mems = nil, nil, nil
}

func (h *seqHost) before() {
	for _, u := range h.uploads {
		copy(unsafe.Slice((*byte)(u.c), len(u.dst)), u.dst)
	}
}

func (h *seqHost) after() {
	for _, d := range h.downloads {
		copy(d.dst, unsafe.Slice((*byte)(d.c), len(d.dst)))
	}
}

func busyError(op string) error {
	return goError(StatusInvalidState, op,
		"an asynchronous replay of a graph recorded from this sequence is not waited on yet, and it owns the memory of the sequence's Go-slice upload and download steps. Fix: wait on (or close) that Pending first, or use HostMemory steps.")
}

func (h *seqHost) beginSync(op string) error {
	h.mu.Lock()
	if h.busy {
		h.mu.Unlock()
		return busyError(op)
	}
	h.before()
	return nil
}

func (h *seqHost) endSync() { h.mu.Unlock() }

func (h *seqHost) beginAsync(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy {
		return busyError(op)
	}
	h.busy = true
	h.before()
	return nil
}

func (h *seqHost) endAsync(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		h.after()
	}
	h.busy = false
}

// Sequence is many steps over resident buffers, run eagerly (Run) or
// captured as one graph (Record) (vyre_sequence). Close destroys it; a
// graph recorded from it keeps working. Closing twice is harmless.
type Sequence struct {
	ctx  *Context
	h    atomic.Uint64
	host *seqHost
	keep []any
}

// NewSequence validates the steps and builds a sequence
// (vyre_sequence_create); repeat may be nil.
func (c *Context) NewSequence(steps []Step, repeat *Repeat) (*Sequence, error) {
	const op = "vyre_sequence_create"
	if err := c.check(op); err != nil {
		return nil, err
	}
	a := getArena()
	defer putArena(a)
	b := binder{a: a}
	defer b.uses.releaseAll()
	host := &seqHost{}
	host.refs.Store(1)
	ok := false
	defer func() {
		if !ok {
			host.unref()
		}
	}()
	desc := (*C.vyre_sequence_desc)(a.alloc(C.sizeof_vyre_sequence_desc))
	desc.struct_size = C.sizeof_vyre_sequence_desc
	var keep []any
	if len(steps) > 0 {
		arr := (*C.vyre_sequence_step)(a.alloc(uintptr(len(steps)) * C.sizeof_vyre_sequence_step))
		cs := unsafe.Slice(arr, len(steps))
		for i := range steps {
			s := &steps[i]
			cst := &cs[i]
			cst.struct_size = C.sizeof_vyre_sequence_step
			cst.kind = C.vyre_step_kind(s.kind)
			if s.program != nil {
				if err := s.program.check(op); err != nil {
					return nil, err
				}
				cst.program = C.vyre_program{bits: C.uint64_t(s.program.h.Load())}
				keep = append(keep, s.program)
			}
			if s.kind == StepDispatch {
				d, err := b.dispatchDesc(op, s.dispatch)
				if err != nil {
					return nil, err
				}
				cst.dispatch = d
			}
			for _, buf := range []*Buffer{s.buffer, s.src} {
				if buf != nil {
					if err := buf.check(op); err != nil {
						return nil, err
					}
					keep = append(keep, buf)
				}
			}
			if s.buffer != nil {
				cst.buffer = s.buffer.handle()
			}
			if s.src != nil {
				cst.src_buffer = s.src.handle()
			}
			cst.offset = C.uint64_t(s.offset)
			cst.bytes = C.uint64_t(s.bytes)
			cst.src_offset = C.uint64_t(s.srcOffset)
			cst.fill_byte = C.uint32_t(s.fill)
			if s.kind == StepUpload || s.kind == StepDownload {
				var p unsafe.Pointer
				switch {
				case s.host.isC():
					var err error
					if p, err = s.host.mem.pointer(op); err != nil {
						return nil, err
					}
					if err := s.host.mem.mem.acquire(op); err != nil {
						return nil, err
					}
					host.mems = append(host.mems, s.host.mem.mem)
				case len(s.host.goMem) > 0:
					p = cAlloc(uintptr(len(s.host.goMem)))
					o := asyncOut{c: p, dst: s.host.goMem}
					if s.kind == StepUpload {
						host.uploads = append(host.uploads, o)
					} else {
						host.downloads = append(host.downloads, o)
					}
				}
				if s.kind == StepUpload {
					cst.host_src = p
				} else {
					cst.host_dst = p
				}
			}
		}
		desc.steps = arr
		desc.step_count = C.size_t(len(steps))
	}
	if repeat != nil {
		desc.repeat_count = C.uint32_t(repeat.Times)
		desc.repeat_first = C.size_t(repeat.First)
		desc.repeat_step_count = C.size_t(repeat.Count)
		if repeat.First < 0 || repeat.Count < 0 {
			return nil, goError(StatusOutOfRange, op,
				"Repeat{First: %d, Count: %d} is negative. Fix: name steps by index from 0.", repeat.First, repeat.Count)
		}
	}
	out := (*C.vyre_sequence)(a.alloc(C.sizeof_vyre_sequence))
	err := a.run(op, C.GOVYRE_SEQUENCE_CREATE, c.h.Load(), unsafe.Pointer(desc), 0, unsafe.Pointer(out))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	ok = true
	s := &Sequence{ctx: c, host: host, keep: append(keep, b.keep...)}
	s.h.Store(uint64(out.bits))
	runtime.SetFinalizer(s, func(s *Sequence) { _ = s.Close() })
	return s, nil
}

// Handle is the library handle's bits (0 once closed).
func (s *Sequence) Handle() uint64 { return s.h.Load() }

func (s *Sequence) check(op string) error {
	if s == nil || s.h.Load() == 0 {
		return closedError(op, "Sequence")
	}
	return nil
}

// Run runs the steps eagerly (vyre_sequence_run): Go-slice uploads are read
// as it starts and downloads written before it returns.
func (s *Sequence) Run() (Timing, error) {
	const op = "vyre_sequence_run"
	if err := s.check(op); err != nil {
		return Timing{}, err
	}
	if err := s.host.beginSync(op); err != nil {
		return Timing{}, err
	}
	defer s.host.endSync()
	var t C.vyre_timing
	t.struct_size = C.sizeof_vyre_timing
	err := call(op, func() C.vyre_status {
		return C.vyre_sequence_run(C.vyre_sequence{bits: C.uint64_t(s.h.Load())}, &t)
	})
	runtime.KeepAlive(s)
	if err != nil {
		return Timing{}, err
	}
	s.host.after()
	return timingFromC(&t), nil
}

// Record captures the whole sequence as one graph (vyre_sequence_record);
// replay it with Graph.Replay(nil) or Launch. The graph keeps working after
// the sequence's Close.
func (s *Sequence) Record() (*Graph, error) {
	const op = "vyre_sequence_record"
	if err := s.check(op); err != nil {
		return nil, err
	}
	var out C.vyre_graph
	err := call(op, func() C.vyre_status {
		return C.vyre_sequence_record(C.vyre_sequence{bits: C.uint64_t(s.h.Load())}, &out)
	})
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	s.host.ref()
	return newGraph(s.ctx, uint64(out.bits), append([]any(nil), s.keep...), s.host), nil
}

// Close destroys the sequence (vyre_sequence_destroy).
func (s *Sequence) Close() error {
	if s == nil {
		return nil
	}
	bits := s.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	err := call("vyre_sequence_destroy", func() C.vyre_status {
		return C.vyre_sequence_destroy(C.vyre_sequence{bits: C.uint64_t(bits)})
	})
	s.host.unref()
	s.keep = nil
	if isStale(err) {
		return nil
	}
	return err
}
