package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
)

// BufferCopy describes one copy between two buffers (vyre_buffer_copy_desc):
// Bytes bytes from Src at SrcOffset to Dst at DstOffset. The buffers may
// belong to any contexts, of one device or of two:
//   - one context: a device-to-device copy on its stream;
//   - two contexts of one device: the same copy, on Dst's context's stream;
//   - two devices that are peers (DeviceCanAccessPeer): a peer copy over
//     NVLink or PCIe on Dst's context's stream (the first one enables peer
//     access between the devices, for the rest of the process);
//   - two devices that are not, or Staged: through pinned host memory of
//     Src's context, in pieces of up to 8 MiB.
//
// The copy starts after the work already enqueued on both contexts, and
// the work either context enqueues after the call starts after the copy.
// Refused, each with an *Error and a Fix: a closed Buffer (StatusInvalidHandle),
// one of a closed Context (StatusStaleHandle), an offset + Bytes past
// either buffer or overflowing 64 bits (StatusOutOfRange, the message names
// the side), and source and destination ranges overlapping in device
// memory, in one buffer or in two that wrap the same memory
// (StatusInvalidArgument: copy through a second buffer). Bytes 0 copies
// nothing, but the buffers and offsets are still checked.
type BufferCopy struct {
	Src       *Buffer
	SrcOffset uint64
	Dst       *Buffer
	DstOffset uint64
	Bytes     uint64
	// Staged copies between two devices through pinned host memory even
	// when they are peers (VYRE_BUFFER_COPY_FLAG_STAGED; ignored on one
	// device).
	Staged bool
}

// CopyTo copies `bytes` bytes from the buffer at srcOffset into dst at
// dstOffset and waits (vyre_buffer_copy). dst may belong to any context, of
// this device or another; BufferCopy says how each pair is copied, how the
// copy is ordered and what is refused.
func (b *Buffer) CopyTo(dst *Buffer, srcOffset, dstOffset, bytes uint64) error {
	return CopyBuffers(BufferCopy{Src: b, SrcOffset: srcOffset, Dst: dst, DstOffset: dstOffset,
		Bytes: bytes})
}

// CopyToAsync is CopyTo without the wait: it enqueues the copy and returns
// its Pending, which belongs to dst's Context (vyre_buffer_copy_async).
func (b *Buffer) CopyToAsync(dst *Buffer, srcOffset, dstOffset, bytes uint64) (*Pending, error) {
	return CopyBuffersAsync(BufferCopy{Src: b, SrcOffset: srcOffset, Dst: dst, DstOffset: dstOffset,
		Bytes: bytes})
}

// CopyBuffers runs one copy and waits (vyre_buffer_copy); the form of
// CopyTo that takes every field of the descriptor.
func CopyBuffers(c BufferCopy) error {
	const op = "vyre_buffer_copy"
	desc, err := copyDesc(op, &c)
	if err != nil {
		return err
	}
	err = call(op, func() C.vyre_status { return C.vyre_buffer_copy(&desc) })
	runtime.KeepAlive(c.Src)
	runtime.KeepAlive(c.Dst)
	return err
}

// CopyBuffersAsync enqueues one copy and returns at once with its Pending
// (vyre_buffer_copy_async): wait on it once, then Close it; its Timing has
// the wall, enqueue and wait times (DeviceNs 0). The Pending belongs to
// Dst's Context (closing that Context waits for the copy and releases it)
// and keeps both Buffers reachable until it ends; closing either Buffer, or
// Src's Context, before then is safe: the library keeps the memory until
// the copy completes.
func CopyBuffersAsync(c BufferCopy) (*Pending, error) {
	const op = "vyre_buffer_copy_async"
	desc, err := copyDesc(op, &c)
	if err != nil {
		return nil, err
	}
	var out C.vyre_pending
	err = call(op, func() C.vyre_status { return C.vyre_buffer_copy_async(&desc, &out) })
	runtime.KeepAlive(c.Src)
	runtime.KeepAlive(c.Dst)
	if err != nil {
		return nil, err
	}
	return newPending(c.Dst.ctx, uint64(out.bits), &binder{}, c.Src, c.Dst), nil
}

// copyDesc checks that both buffers are open and fills the C descriptor.
func copyDesc(op string, c *BufferCopy) (C.vyre_buffer_copy_desc, error) {
	var desc C.vyre_buffer_copy_desc
	for _, side := range []struct {
		b    *Buffer
		name string
	}{{c.Src, "source"}, {c.Dst, "destination"}} {
		if side.b == nil || side.b.h.Load() == 0 {
			return desc, goError(StatusInvalidHandle, op,
				"the %s Buffer is nil or closed. Fix: pass an open Buffer (Context.Alloc, Upload or Wrap) and close it only after the copy.",
				side.name)
		}
	}
	desc.struct_size = C.sizeof_vyre_buffer_copy_desc
	if c.Staged {
		desc.flags = C.VYRE_BUFFER_COPY_FLAG_STAGED
	}
	desc.src = c.Src.handle()
	desc.src_offset = C.uint64_t(c.SrcOffset)
	desc.dst = c.Dst.handle()
	desc.dst_offset = C.uint64_t(c.DstOffset)
	desc.bytes = C.uint64_t(c.Bytes)
	return desc, nil
}
