package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Elem is the element types a Go slice may hold to be host data: fixed-size
// numbers, copied to and from the device byte for byte.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~float32 | ~float64 | ~complex64 | ~complex128 | ~int | ~uint | ~uintptr
}

// AsBytes is s's memory as bytes (no copy).
func AsBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// Buffer is resident device memory owned by a Context (vyre_buffer). Safe
// for concurrent use. Close frees it (if a pending dispatch still uses it,
// the library frees the memory when that dispatch completes); closing
// twice is harmless, any other use after Close is an error. A Buffer from
// Context.Wrap borrows memory other CUDA code owns, and one from
// Context.ImportIPC maps memory another process exported (ExportIPC):
// their Close releases the handle (and closes the mapping) only.
type Buffer struct {
	ctx  *Context
	h    atomic.Uint64
	size uint64
}

// Alloc allocates `bytes` (> 0) of device memory, uninitialised
// (vyre_buffer_alloc).
func (c *Context) Alloc(bytes uint64) (*Buffer, error) {
	const op = "vyre_buffer_alloc"
	if err := c.check(op); err != nil {
		return nil, err
	}
	var out C.vyre_buffer
	err := call(op, func() C.vyre_status {
		return C.vyre_buffer_alloc(c.handle(), C.uint64_t(bytes), &out)
	})
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	b := &Buffer{ctx: c, size: bytes}
	b.h.Store(uint64(out.bits))
	runtime.SetFinalizer(b, func(b *Buffer) { _ = b.Close() })
	return b, nil
}

// Wrap makes a Buffer over `bytes` (> 0) of device memory at devicePointer
// that other CUDA code in the process allocated (cudaMalloc, cuMemAlloc, a
// CuPy array's or a PyTorch tensor's data) on the context's device, in its
// primary context (vyre_buffer_wrap). The library asks the driver that the
// range is device (or managed) memory of that device inside one allocation,
// and never frees the memory: Close releases the handle only. The caller
// must keep the memory allocated until the Buffer is closed (or collected)
// and the dispatches, graphs and sequences using it have completed. Order
// other streams' work on it with Context.WaitStream and SignalStream.
func (c *Context) Wrap(devicePointer, bytes uint64) (*Buffer, error) {
	const op = "vyre_buffer_wrap"
	if err := c.check(op); err != nil {
		return nil, err
	}
	var desc C.vyre_buffer_wrap_desc
	desc.struct_size = C.uint32_t(unsafe.Sizeof(desc))
	desc.device_pointer = C.uint64_t(devicePointer)
	desc.bytes = C.uint64_t(bytes)
	var out C.vyre_buffer
	err := call(op, func() C.vyre_status { return C.vyre_buffer_wrap(c.handle(), &desc, &out) })
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	b := &Buffer{ctx: c, size: bytes}
	b.h.Store(uint64(out.bits))
	runtime.SetFinalizer(b, func(b *Buffer) { _ = b.Close() })
	return b, nil
}

// Upload allocates a buffer holding a copy of data (use AsBytes for typed
// slices).
func (c *Context) Upload(data []byte) (*Buffer, error) {
	b, err := c.Alloc(uint64(len(data)))
	if err != nil {
		return nil, err
	}
	if err := b.Upload(0, data); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Buffer) handle() C.vyre_buffer { return C.vyre_buffer{bits: C.uint64_t(b.h.Load())} }

// Handle is the library handle's bits (0 once closed).
func (b *Buffer) Handle() uint64 { return b.h.Load() }

// Len is the buffer's size in bytes.
func (b *Buffer) Len() uint64 { return b.size }

// Context is the buffer's owner.
func (b *Buffer) Context() *Context { return b.ctx }

func (b *Buffer) check(op string) error {
	if b == nil || b.h.Load() == 0 {
		return closedError(op, "Buffer")
	}
	return nil
}

// Close frees the buffer (vyre_buffer_free). Closing twice, or after the
// Context's Close, does nothing.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	bits := b.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(b, nil)
	err := call("vyre_buffer_free", func() C.vyre_status {
		return C.vyre_buffer_free(C.vyre_buffer{bits: C.uint64_t(bits)})
	})
	if isStale(err) {
		return nil
	}
	return err
}

func ptrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// Upload copies src into the buffer at `offset` and waits
// (vyre_buffer_upload).
func (b *Buffer) Upload(offset uint64, src []byte) error {
	const op = "vyre_buffer_upload"
	if err := b.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_buffer_upload(b.handle(), C.uint64_t(offset), ptrOf(src), C.uint64_t(len(src)))
	})
	runtime.KeepAlive(b)
	return err
}

// Download copies len(dst) bytes of the buffer at `offset` into dst and
// waits (vyre_buffer_download).
func (b *Buffer) Download(offset uint64, dst []byte) error {
	const op = "vyre_buffer_download"
	if err := b.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_buffer_download(b.handle(), C.uint64_t(offset), ptrOf(dst), C.uint64_t(len(dst)))
	})
	runtime.KeepAlive(b)
	return err
}

// UploadHost copies a HostRange into the buffer at `offset` (by DMA in
// place when the memory is pinned or registered).
func (b *Buffer) UploadHost(offset uint64, r HostRange) error {
	return b.hostCopy("vyre_buffer_upload", offset, r, true)
}

// DownloadHost copies the buffer at `offset` into a HostRange.
func (b *Buffer) DownloadHost(offset uint64, r HostRange) error {
	return b.hostCopy("vyre_buffer_download", offset, r, false)
}

func (b *Buffer) hostCopy(op string, offset uint64, r HostRange, up bool) error {
	if err := b.check(op); err != nil {
		return err
	}
	var uses hostUses
	defer uses.releaseAll()
	p, err := uses.add(r, op)
	if err != nil {
		return err
	}
	err = call(op, func() C.vyre_status {
		if up {
			return C.vyre_buffer_upload(b.handle(), C.uint64_t(offset), p, C.uint64_t(r.bytes))
		}
		return C.vyre_buffer_download(b.handle(), C.uint64_t(offset), p, C.uint64_t(r.bytes))
	})
	runtime.KeepAlive(b)
	return err
}

// Read downloads the whole buffer as a new slice of T.
func Read[T Elem](b *Buffer) ([]T, error) {
	var zero T
	size := uint64(unsafe.Sizeof(zero))
	if b == nil || b.size%size != 0 {
		return nil, goError(StatusInvalidArgument, "Read",
			"the buffer's bytes are not a whole number of %d-byte elements. Fix: read it as a type whose size divides its length.", size)
	}
	out := make([]T, b.size/size)
	if err := b.Download(0, AsBytes(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// UploadRange is one range of Buffer.UploadRanges: Data copied to Offset.
type UploadRange struct {
	Offset uint64
	Data   []byte
}

// DownloadRange is one range of Buffer.DownloadRanges: len(Data) bytes
// from Offset copied into Data.
type DownloadRange struct {
	Offset uint64
	Data   []byte
}

// UploadRanges uploads many ranges through one staged copy and one
// synchronisation; every range is checked before anything is copied
// (vyre_buffer_upload_ranges).
func (b *Buffer) UploadRanges(ranges []UploadRange) error {
	const op = "vyre_buffer_upload_ranges"
	if err := b.check(op); err != nil {
		return err
	}
	a := getArena()
	defer putArena(a)
	var arr *C.vyre_upload_range
	if len(ranges) > 0 {
		arr = (*C.vyre_upload_range)(a.alloc(uintptr(len(ranges)) * C.sizeof_vyre_upload_range))
		cs := unsafe.Slice(arr, len(ranges))
		for i, r := range ranges {
			cs[i].offset = C.uint64_t(r.Offset)
			cs[i].bytes = C.uint64_t(len(r.Data))
			a.goIn(&cs[i].src, r.Data)
		}
	}
	err := a.run(op, C.GOVYRE_UPLOAD_RANGES, b.h.Load(), unsafe.Pointer(arr), uintptr(len(ranges)), nil)
	runtime.KeepAlive(b)
	runtime.KeepAlive(ranges)
	return err
}

// DownloadRanges downloads many ranges with one synchronisation
// (vyre_buffer_download_ranges).
func (b *Buffer) DownloadRanges(ranges []DownloadRange) error {
	const op = "vyre_buffer_download_ranges"
	if err := b.check(op); err != nil {
		return err
	}
	a := getArena()
	defer putArena(a)
	var arr *C.vyre_download_range
	if len(ranges) > 0 {
		arr = (*C.vyre_download_range)(a.alloc(uintptr(len(ranges)) * C.sizeof_vyre_download_range))
		cs := unsafe.Slice(arr, len(ranges))
		for i, r := range ranges {
			cs[i].offset = C.uint64_t(r.Offset)
			cs[i].bytes = C.uint64_t(len(r.Data))
			a.goOut(&cs[i].dst, r.Data)
		}
	}
	err := a.run(op, C.GOVYRE_DOWNLOAD_RANGES, b.h.Load(), unsafe.Pointer(arr), uintptr(len(ranges)), nil)
	runtime.KeepAlive(b)
	runtime.KeepAlive(ranges)
	return err
}

// BufferInfo describes a buffer (vyre_buffer_info).
type BufferInfo struct {
	Bytes uint64
	// DevicePointer is the raw CUdeviceptr, for interop with other CUDA code
	// in the process (valid until the buffer is freed).
	DevicePointer uint64
	// ContextHandle is the owning context's handle bits.
	ContextHandle uint64
	// Borrowed: the memory belongs to other CUDA code (Context.Wrap) or to
	// another process (Context.ImportIPC): VYRE_BUFFER_INFO_FLAG_BORROWED.
	Borrowed bool
	// Imported: the buffer maps memory another process exported
	// (Context.ImportIPC; Borrowed is set too): VYRE_BUFFER_INFO_FLAG_IMPORTED.
	Imported bool
}

// Info reads the buffer's size, device pointer and owner (vyre_buffer_info_get).
func (b *Buffer) Info() (BufferInfo, error) {
	const op = "vyre_buffer_info_get"
	if err := b.check(op); err != nil {
		return BufferInfo{}, err
	}
	var info C.vyre_buffer_info
	info.struct_size = C.uint32_t(unsafe.Sizeof(info))
	err := call(op, func() C.vyre_status { return C.vyre_buffer_info_get(b.handle(), &info) })
	runtime.KeepAlive(b)
	if err != nil {
		return BufferInfo{}, err
	}
	return BufferInfo{Bytes: uint64(info.bytes), DevicePointer: uint64(info.device_pointer),
		ContextHandle: uint64(info.context.bits),
		Borrowed:      info.flags&C.VYRE_BUFFER_INFO_FLAG_BORROWED != 0,
		Imported:      info.flags&C.VYRE_BUFFER_INFO_FLAG_IMPORTED != 0}, nil
}

// Arg binds the whole buffer to a dispatch (RESIDENT).
func (b *Buffer) Arg() Arg { return Arg{kind: argResident, buffer: b} }

// Range binds bytes [offset, offset+length) of the buffer (length 0: to the
// end).
func (b *Buffer) Range(offset, length uint64) Arg {
	return Arg{kind: argResident, buffer: b, offset: offset, length: length}
}
