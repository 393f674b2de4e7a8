package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// The cgo pointer rules, and how the bindings keep them:
//
//   - Descriptors (vyre_dispatch_desc and the arrays it points to, parameter
//     words, scalars, names) hold pointers, so they are built in C memory (a
//     callArena, freed after the call): Go memory passed to C must not hold Go
//     pointers.
//   - Host data in Go slices is Go memory. Go may pass a Go pointer to C as a
//     call argument, and C may keep it in C memory only until that call
//     returns. So a slice's address travels as one of govyre_call's pointer
//     arguments, which writes it into the descriptor field and clears the
//     field before returning (see shim.h). A call may carry up to 16
//     distinct slices that way; further ones are copied through C memory.
//   - Memory the library uses after the call returns (host outputs of an
//     asynchronous dispatch or replay, written when it is waited on; the
//     host buffers of sequence steps) is C memory: HostMemory (pinned or C
//     heap) given by the caller, or C memory the bindings allocate and copy
//     to the Go slice after the wait. Go 1.21's runtime.Pinner would allow
//     pinned Go memory instead; these bindings target Go 1.19.

const maxGoPointers = C.GOVYRE_MAX_GO_POINTERS

// callArena is C memory for one call's descriptors, with the Go pointers to
// patch into them. Calls take one from arenas (getArena) and give it back
// after the call (putArena): its first C block and its slices are reused,
// so a call costs no C allocation (no cgo call besides the vyre_* call
// itself) and no Go allocation in the steady state.
type callArena struct {
	blocks []unsafe.Pointer // C blocks allocated since the last reset
	first  unsafe.Pointer   // the standard-size block kept across reuses
	cur    unsafe.Pointer
	used   uintptr
	size   uintptr
	keep   []any // a synchronous call's keep list, reused (see binder)

	goPtrs  [maxGoPointers]unsafe.Pointer
	nGo     int
	where   []unsafe.Pointer // C addresses of the fields to patch
	which   []uint8
	copyOut []copyBack // outputs copied through C memory (over 16 slices)
}

type copyBack struct {
	c     unsafe.Pointer
	dst   []byte
	bytes uintptr
}

const arenaBlock = 2048

// alloc returns n zeroed bytes of C memory, 16-byte aligned, valid until free.
func (a *callArena) alloc(n uintptr) unsafe.Pointer {
	if n == 0 {
		n = 1
	}
	n = (n + 15) &^ 15
	if a.cur == nil && a.first != nil && n <= arenaBlock {
		a.cur, a.used, a.size = a.first, 0, arenaBlock // reused: zeroed by reset
	}
	if a.cur == nil || a.used+n > a.size {
		size := uintptr(arenaBlock)
		if n > size {
			size = n
		}
		p := C.calloc(1, C.size_t(size))
		if p == nil {
			panic("vyrecuda: C.calloc failed")
		}
		if n == size {
			a.blocks = append(a.blocks, p)
			return p // a large block of its own; keep bumping in the current one
		}
		if a.first == nil {
			a.first = p
		} else {
			a.blocks = append(a.blocks, p)
		}
		a.cur, a.used, a.size = p, 0, size
	}
	p := unsafe.Add(a.cur, a.used)
	a.used += n
	return p
}

// bytes copies b into C memory.
func (a *callArena) bytes(b []byte) unsafe.Pointer {
	p := a.alloc(uintptr(len(b)))
	copy(unsafe.Slice((*byte)(p), len(b)), b) // in Go: no cgo call
	return p
}

// cstring copies s into C memory, NUL-terminated.
func (a *callArena) cstring(s string) *C.char {
	p := a.alloc(uintptr(len(s)) + 1)
	if len(s) > 0 {
		copy(unsafe.Slice((*byte)(p), len(s)), s)
	}
	return (*C.char)(p)
}

func (a *callArena) u32s(v []uint32) *C.uint32_t {
	if len(v) == 0 {
		return nil
	}
	p := a.alloc(uintptr(len(v)) * 4)
	copy(unsafe.Slice((*uint32)(p), len(v)), v)
	return (*C.uint32_t)(p)
}

func (a *callArena) u64s(v []uint64) *C.uint64_t {
	if len(v) == 0 {
		return nil
	}
	p := a.alloc(uintptr(len(v)) * 8)
	copy(unsafe.Slice((*uint64)(p), len(v)), v)
	return (*C.uint64_t)(p)
}

// goIn sets the C pointer field *field (in arena memory) to Go memory b that
// the call only reads: patched in by govyre_call, or copied into C memory
// once 16 distinct slices are in use.
func (a *callArena) goIn(field *unsafe.Pointer, b []byte) {
	if len(b) == 0 {
		*field = nil
		return
	}
	p := unsafe.Pointer(&b[0])
	if a.patch(field, p) {
		return
	}
	*field = a.bytes(b)
}

// goOut sets *field to Go memory b that the call writes before it returns.
func (a *callArena) goOut(field *unsafe.Pointer, b []byte) {
	if len(b) == 0 {
		*field = nil
		return
	}
	p := unsafe.Pointer(&b[0])
	if a.patch(field, p) {
		return
	}
	c := a.alloc(uintptr(len(b)))
	a.copyOut = append(a.copyOut, copyBack{c: c, dst: b, bytes: uintptr(len(b))})
	*field = c
}

func (a *callArena) patch(field *unsafe.Pointer, p unsafe.Pointer) bool {
	slot := -1
	for i := 0; i < a.nGo; i++ {
		if a.goPtrs[i] == p {
			slot = i
			break
		}
	}
	if slot < 0 {
		if a.nGo == maxGoPointers {
			return false
		}
		slot = a.nGo
		a.goPtrs[slot] = p
		a.nGo++
	}
	*field = nil
	a.where = append(a.where, unsafe.Pointer(field))
	a.which = append(a.which, uint8(slot))
	return true
}

// run makes the call through govyre_call with the patches. Outputs copied
// through C memory are copied to their Go slices when the call succeeds.
func (a *callArena) run(opName string, op C.int, handle uint64, desc unsafe.Pointer,
	count uintptr, out unsafe.Pointer) error {
	var where **unsafe.Pointer
	var which *C.uint8_t
	n := len(a.where)
	if n > 0 {
		w := a.alloc(uintptr(n) * unsafe.Sizeof(uintptr(0)))
		ws := unsafe.Slice((*unsafe.Pointer)(w), n)
		copy(ws, a.where)
		wh := a.alloc(uintptr(n))
		copy(unsafe.Slice((*uint8)(wh), n), a.which)
		where, which = (**unsafe.Pointer)(w), (*C.uint8_t)(wh)
	}
	g := &a.goPtrs
	err := call(opName, func() C.vyre_status {
		return C.govyre_call(op, C.uint64_t(handle), desc, C.size_t(count), out,
			where, which, C.size_t(n),
			g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
			g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
	})
	if err == nil {
		for _, cb := range a.copyOut {
			copy(cb.dst, unsafe.Slice((*byte)(cb.c), cb.bytes))
		}
	}
	return err
}

// reset readies the arena for its next call: the blocks beyond the first
// are freed, the bytes used of the first zeroed (in Go, no cgo call), and
// the Go pointers dropped.
func (a *callArena) reset() {
	for i, p := range a.blocks {
		C.free(p)
		a.blocks[i] = nil
	}
	a.blocks = a.blocks[:0]
	if a.first != nil {
		used := uintptr(arenaBlock)
		if a.cur == a.first {
			used = a.used
		}
		b := unsafe.Slice((*byte)(a.first), used)
		for i := range b {
			b[i] = 0
		}
	}
	a.cur, a.used, a.size = nil, 0, 0
	a.goPtrs = [maxGoPointers]unsafe.Pointer{}
	a.nGo = 0
	a.where = a.where[:0]
	a.which = a.which[:0]
	for i := range a.copyOut {
		a.copyOut[i] = copyBack{}
	}
	a.copyOut = a.copyOut[:0]
}

// free releases the arena's C memory.
func (a *callArena) free() {
	a.reset()
	if a.first != nil {
		C.free(a.first)
		a.first = nil
	}
}

// arenas holds the call arenas not in use. An arena the pool drops (at a
// garbage collection) frees its C memory in its finalizer.
var arenas = sync.Pool{New: func() any {
	a := &callArena{}
	runtime.SetFinalizer(a, (*callArena).free)
	return a
}}

// getArena is an arena for one call; give it back with putArena once
// nothing uses its memory (after the call, or the copies after it).
func getArena() *callArena { return arenas.Get().(*callArena) }

// putArena resets a and returns it to the pool.
func putArena(a *callArena) {
	a.reset()
	arenas.Put(a)
}

// cAlloc is C heap memory that outlives a call (async outputs, sequence host
// steps); freed with C.free.
func cAlloc(n uintptr) unsafe.Pointer {
	if n == 0 {
		n = 1
	}
	p := C.calloc(1, C.size_t(n))
	if p == nil {
		panic("vyrecuda: C.calloc failed")
	}
	return p
}

func cFree(p unsafe.Pointer) {
	if p != nil {
		C.free(p)
	}
}
