package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"io"
	"runtime"
	"sync"
	"unsafe"
)

// HostMemory is host memory outside the Go heap: page-locked memory from a
// context (Context.AllocPinned, vyre_host_alloc) or C heap memory
// (AllocHostMemory), which Register page-locks (vyre_host_register).
//
// Host bindings, uploads and downloads that lie inside pinned or registered
// memory are copied by DMA in place, and an asynchronous dispatch's host
// outputs there need no copy after the wait. Because the memory is not Go
// memory, the library may keep using it after a call returns: it is what an
// asynchronous dispatch with host outputs should write into (see the
// package documentation on cgo pointer rules).
//
// Read and write it with ReadAt/WriteAt (checked: an error once closed), or
// through Bytes()/View, whose slices are valid only until Close (or, for
// pinned memory, its Context's Close): do not keep them past that.
// Close frees the memory; while a pending dispatch still uses it the free
// is deferred until that pending is waited on or closed. Closing twice is
// harmless.
type HostMemory struct {
	ctx    *Context // the owner of pinned memory; nil for C heap memory
	ptr    unsafe.Pointer
	size   uint64
	pinned bool

	mu      sync.Mutex
	users   int  // pendings and calls in flight using the memory
	closing bool // Close was called; freed when users drops to 0
	freed   bool
	regCtx  *Context // C heap memory: the context it is registered with
}

// AllocPinned allocates `bytes` (> 0) of page-locked host memory owned by
// the context (vyre_host_alloc), 4 KiB-aligned and zeroed.
func (c *Context) AllocPinned(bytes uint64) (*HostMemory, error) {
	const op = "vyre_host_alloc"
	if err := c.check(op); err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	err := call(op, func() C.vyre_status {
		return C.vyre_host_alloc(c.handle(), C.uint64_t(bytes), &p)
	})
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	C.memset(p, 0, C.size_t(bytes))
	m := &HostMemory{ctx: c, ptr: p, size: bytes, pinned: true}
	runtime.SetFinalizer(m, func(m *HostMemory) { _ = m.Close() })
	return m, nil
}

// AllocHostMemory allocates `bytes` (> 0) of 4 KiB-aligned, zeroed C heap
// memory: host memory the library may use after a call returns, and which
// Register can page-lock.
func AllocHostMemory(bytes uint64) (*HostMemory, error) {
	const op = "AllocHostMemory"
	if bytes == 0 || bytes > uint64(^uintptr(0)>>1) {
		return nil, goError(StatusInvalidArgument, op,
			"%d bytes requested. Fix: ask for at least one byte (and less than the address space).", bytes)
	}
	p := C.govyre_aligned_alloc(C.size_t(bytes))
	if p == nil {
		return nil, goError(StatusOutOfMemory, op,
			"the C heap has no %d bytes. Fix: free memory or ask for less.", bytes)
	}
	C.memset(p, 0, C.size_t(bytes))
	m := &HostMemory{ptr: p, size: bytes}
	runtime.SetFinalizer(m, func(m *HostMemory) { _ = m.Close() })
	return m, nil
}

// Len is the memory's size in bytes.
func (m *HostMemory) Len() uint64 { return m.size }

// Pinned reports whether the memory came from Context.AllocPinned.
func (m *HostMemory) Pinned() bool { return m.pinned }

// Pointer is the memory's address, nil once closed.
func (m *HostMemory) Pointer() unsafe.Pointer {
	if !m.open() {
		return nil
	}
	return m.ptr
}

// open: not closed and, for pinned memory, its context not closed.
func (m *HostMemory) open() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.openLocked()
}

func (m *HostMemory) openLocked() bool {
	return !m.closing && !m.freed && (m.ctx == nil || !m.ctx.closed())
}

// Bytes is the memory as a byte slice, nil once closed. The slice is valid
// only until Close (or the owning Context's Close, for pinned memory).
func (m *HostMemory) Bytes() []byte {
	if !m.open() {
		return nil
	}
	return unsafe.Slice((*byte)(m.ptr), int(m.size))
}

// View is the memory as a slice of T (Bytes reinterpreted; the size must be
// a multiple of T's). Valid only until Close, as for Bytes.
func View[T Elem](m *HostMemory) ([]T, error) {
	const op = "View"
	var zero T
	size := uint64(unsafe.Sizeof(zero))
	if !m.open() {
		return nil, closedError(op, "HostMemory")
	}
	if m.size%size != 0 {
		return nil, goError(StatusInvalidArgument, op,
			"%d bytes are not a whole number of %d-byte elements. Fix: view it as a type whose size divides %d.",
			m.size, size, m.size)
	}
	return unsafe.Slice((*T)(m.ptr), int(m.size/size)), nil
}

// lockOwner holds the owning context's memory lock for reading, so that its
// Close cannot release pinned memory while it is being copied.
func (m *HostMemory) lockOwner() func() {
	if m.ctx == nil {
		return func() {}
	}
	m.ctx.memMu.RLock()
	return m.ctx.memMu.RUnlock
}

func (m *HostMemory) copyAt(p []byte, off int64, write bool, op string) (int, error) {
	unlock := m.lockOwner()
	defer unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.openLocked() {
		return 0, closedError(op, "HostMemory")
	}
	if off < 0 || uint64(off) > m.size {
		return 0, goError(StatusOutOfRange, op,
			"offset %d is outside the %d bytes. Fix: pass an offset from 0 to Len().", off, m.size)
	}
	mem := unsafe.Slice((*byte)(m.ptr), int(m.size))[off:]
	var n int
	if write {
		n = copy(mem, p)
	} else {
		n = copy(p, mem)
	}
	if n < len(p) {
		if write {
			return n, goError(StatusOutOfRange, op,
				"%d bytes at offset %d pass the end (%d bytes). Fix: write within Len().", len(p), off, m.size)
		}
		return n, io.EOF
	}
	return n, nil
}

// ReadAt copies from the memory at `off` into p (io.ReaderAt).
func (m *HostMemory) ReadAt(p []byte, off int64) (int, error) {
	return m.copyAt(p, off, false, "HostMemory.ReadAt")
}

// WriteAt copies p into the memory at `off` (io.WriterAt).
func (m *HostMemory) WriteAt(p []byte, off int64) (int, error) {
	return m.copyAt(p, off, true, "HostMemory.WriteAt")
}

// acquire counts a user of the memory (a call or a pending); the memory is
// not freed until release.
func (m *HostMemory) acquire(op string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.openLocked() {
		return closedError(op, "HostMemory")
	}
	m.users++
	return nil
}

func (m *HostMemory) release() {
	m.mu.Lock()
	m.users--
	free := m.users == 0 && m.closing && !m.freed
	m.mu.Unlock()
	if free {
		_ = m.free()
	}
}

// Register page-locks the whole memory for `ctx` (vyre_host_register), so
// the library copies it by DMA in place. Only C heap memory
// (AllocHostMemory) can be registered; Close unregisters it first.
func (m *HostMemory) Register(ctx *Context) error {
	const op = "vyre_host_register"
	if err := ctx.check(op); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.openLocked() {
		return closedError(op, "HostMemory")
	}
	if m.regCtx != nil && !m.regCtx.closed() {
		return goError(StatusInvalidState, op,
			"the memory is already registered. Fix: call Unregister first.")
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_host_register(ctx.handle(), m.ptr, C.uint64_t(m.size))
	})
	runtime.KeepAlive(ctx)
	if err != nil {
		return err
	}
	m.regCtx = ctx
	return nil
}

// Registered reports whether the memory is page-locked by Register (and its
// context still open).
func (m *HostMemory) Registered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.regCtx != nil && !m.regCtx.closed()
}

// Unregister undoes Register (vyre_host_unregister). It fails with
// StatusInvalidState while a pending dispatch still copies from or into the
// memory: wait on it first. Unregistering memory that is not registered
// (or whose context was closed, which unregistered it) does nothing.
func (m *HostMemory) Unregister() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unregisterLocked()
}

func (m *HostMemory) unregisterLocked() error {
	ctx := m.regCtx
	if ctx == nil {
		return nil
	}
	ctx.memMu.RLock()
	defer ctx.memMu.RUnlock()
	if ctx.closed() {
		m.regCtx = nil // its Close unregistered the memory
		return nil
	}
	err := call("vyre_host_unregister", func() C.vyre_status { return C.vyre_host_unregister(m.ptr) })
	if err != nil {
		return err
	}
	m.regCtx = nil
	return nil
}

// Close frees the memory (vyre_host_free for pinned memory; C heap memory
// is unregistered first, then freed). While a pending dispatch still uses
// it the free waits for that pending's wait or Close. Closing twice is
// harmless; after the owning Context's Close (which freed pinned memory)
// it does nothing.
func (m *HostMemory) Close() error {
	m.mu.Lock()
	if m.closing || m.freed {
		m.mu.Unlock()
		return nil
	}
	if err := m.unregisterLocked(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.closing = true
	deferred := m.users > 0
	m.mu.Unlock()
	runtime.SetFinalizer(m, nil)
	if deferred {
		return nil
	}
	return m.free()
}

func (m *HostMemory) free() error {
	m.mu.Lock()
	if m.freed {
		m.mu.Unlock()
		return nil
	}
	m.freed = true
	m.mu.Unlock()
	if !m.pinned {
		C.free(m.ptr)
		return nil
	}
	m.ctx.memMu.RLock()
	defer m.ctx.memMu.RUnlock()
	if m.ctx.closed() {
		return nil // the context's destroy freed it
	}
	err := call("vyre_host_free", func() C.vyre_status { return C.vyre_host_free(m.ptr) })
	if isStale(err) {
		return nil
	}
	return err
}

// HostRange is a byte range of HostMemory, to bind to a dispatch or a
// sequence step, or to copy to and from a Buffer.
type HostRange struct {
	mem    *HostMemory
	offset uint64
	bytes  uint64
}

// Range is the range [offset, offset+bytes) of the memory (checked where
// it is used).
func (m *HostMemory) Range(offset, bytes uint64) HostRange {
	return HostRange{mem: m, offset: offset, bytes: bytes}
}

// All is the whole memory as a range.
func (m *HostMemory) All() HostRange { return HostRange{mem: m, bytes: m.size} }

// In binds the range as an input (its bytes are the binding's length).
func (r HostRange) In() Arg { return Arg{kind: argHost, in: hostRef{mem: r}, bytes: r.bytes} }

// Out binds the range as an output, written back by the dispatch (or, when
// asynchronous, by its wait).
func (r HostRange) Out() Arg { return Arg{kind: argHost, out: hostRef{mem: r}, bytes: r.bytes} }

// InOut binds the range as an input and output in place.
func (r HostRange) InOut() Arg {
	return Arg{kind: argHost, in: hostRef{mem: r}, out: hostRef{mem: r}, bytes: r.bytes}
}

// pointer checks the range and returns its address.
func (r HostRange) pointer(op string) (unsafe.Pointer, error) {
	m := r.mem
	if m == nil {
		return nil, goError(StatusInvalidArgument, op,
			"the HostRange has no memory. Fix: make it with HostMemory.Range or All.")
	}
	if r.offset > m.size || r.bytes > m.size-r.offset {
		return nil, goError(StatusOutOfRange, op,
			"the range [%d, +%d bytes) is outside the %d bytes of HostMemory. Fix: stay within Len().",
			r.offset, r.bytes, m.size)
	}
	return unsafe.Add(m.ptr, r.offset), nil
}

// hostUses tracks the HostMemory a call uses: each is acquired (so it is
// not freed meanwhile) and its owning context's memory lock held for
// reading during a synchronous call.
type hostUses struct {
	mems   []*HostMemory
	locked []*Context
}

func (u *hostUses) add(r HostRange, op string) (unsafe.Pointer, error) {
	p, err := r.pointer(op)
	if err != nil {
		return nil, err
	}
	for _, m := range u.mems {
		if m == r.mem {
			return p, nil
		}
	}
	if ctx := r.mem.ctx; ctx != nil {
		seen := false
		for _, c := range u.locked {
			seen = seen || c == ctx
		}
		if !seen {
			ctx.memMu.RLock()
			u.locked = append(u.locked, ctx)
		}
	}
	if err := r.mem.acquire(op); err != nil {
		return nil, err
	}
	u.mems = append(u.mems, r.mem)
	return p, nil
}

// unlockOwners drops the contexts' memory locks (after the call).
func (u *hostUses) unlockOwners() {
	for _, c := range u.locked {
		c.memMu.RUnlock()
	}
	u.locked = nil
}

// releaseAll ends the uses (after the call, or the pending's end).
func (u *hostUses) releaseAll() {
	u.unlockOwners()
	for _, m := range u.mems {
		m.release()
	}
	u.mems = nil
}
