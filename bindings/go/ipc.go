package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/hex"
	"runtime"
	"strings"
	"unsafe"
)

// IPCHandleSize is the size of an IPCHandle in bytes
// (VYRE_IPC_HANDLE_BYTES).
const IPCHandleSize = 128

// The header's size, checked at compile time: both differences must be 0.
var _ = [1]struct{}{}[IPCHandleSize-C.VYRE_IPC_HANDLE_BYTES]
var _ = [1]struct{}{}[C.VYRE_IPC_HANDLE_BYTES-IPCHandleSize]

// IPCHandle is a buffer exported for other processes (vyre_ipc_handle):
// opaque bytes that the caller sends to another process of the same machine
// over any channel (a pipe, a socket, a file, MPI; String gives hex text,
// ParseIPCHandle reads it back), where Context.ImportIPC maps the same
// device memory. It stays valid until the exporter closes the Buffer or
// exits.
//
// Mechanism: CUDA's IPC memory handles (cuIpcGetMemHandle /
// cuIpcOpenMemHandle); not available on Windows WDDM or WSL, where the
// driver refuses it.
//
//	// The exporting process (keeps buf open until every importer closed its
//	// import):
//	h, err := buf.ExportIPC()
//	fmt.Fprintln(conn, h) // 256 hex digits
//
//	// The importing process (another one):
//	h, err := vyrecuda.ParseIPCHandle(line)
//	shared, err := ctx.ImportIPC(h)
//	defer shared.Close()
type IPCHandle [IPCHandleSize]byte

// String is the handle as 256 lowercase hexadecimal digits.
func (h IPCHandle) String() string { return hex.EncodeToString(h[:]) }

// IPCHandleFromBytes is the handle of b received from the exporting
// process: exactly IPCHandleSize bytes, else an *Error with
// StatusInvalidArgument and a Fix. The bytes themselves are checked by
// Context.ImportIPC.
func IPCHandleFromBytes(b []byte) (IPCHandle, error) {
	var h IPCHandle
	if len(b) != IPCHandleSize {
		return h, goError(StatusInvalidArgument, "IPCHandleFromBytes",
			"an IPC handle is %d bytes, not %d. Fix: pass the bytes of Buffer.ExportIPC as they are, whole.",
			IPCHandleSize, len(b))
	}
	copy(h[:], b)
	return h, nil
}

// ParseIPCHandle reads the text of IPCHandle.String (either case,
// surrounding white space ignored): anything but 256 hexadecimal digits is
// an *Error with StatusInvalidArgument and a Fix.
func ParseIPCHandle(s string) (IPCHandle, error) {
	var h IPCHandle
	s = strings.TrimSpace(s)
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != IPCHandleSize {
		shown := s
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return h, goError(StatusInvalidArgument, "ParseIPCHandle",
			"%q (%d characters) is not an IPC handle's %d hexadecimal digits. Fix: pass the text of IPCHandle.String as it is, whole.",
			shown, len(s), 2*IPCHandleSize)
	}
	copy(h[:], b)
	return h, nil
}

// ExportIPC returns the buffer's IPC handle (vyre_buffer_export_ipc), for
// Context.ImportIPC in another process of this machine, which then reads
// and writes the same device memory. Exporting again gives the same bytes.
//
// Lifetime (CUDA's rule): keep the Buffer open until every importer has
// closed its import; memory freed while mapped elsewhere is undefined to
// read there, and importing a handle of a closed Buffer, or of an exited
// process, is refused. Ordering across processes is the caller's: writes
// are visible to the other process after the writer has waited for them
// (Upload and Dispatch return after their work; wait on a Pending) and
// told it so over its channel.
//
// Refused (StatusInvalidArgument, with a Fix): a Buffer that is itself an
// import (export from the process that allocated it), or wrapped memory
// CUDA cannot share (a stream-ordered pool's, for example).
func (b *Buffer) ExportIPC() (IPCHandle, error) {
	const op = "vyre_buffer_export_ipc"
	var h IPCHandle
	if err := b.check(op); err != nil {
		return h, err
	}
	var out C.vyre_ipc_handle
	err := call(op, func() C.vyre_status { return C.vyre_buffer_export_ipc(b.handle(), &out) })
	runtime.KeepAlive(b)
	if err != nil {
		return h, err
	}
	copy(h[:], unsafe.Slice((*byte)(unsafe.Pointer(&out.bytes[0])), IPCHandleSize))
	return h, nil
}

// ImportIPC maps the buffer another process exported (Buffer.ExportIPC)
// into the context's device (vyre_buffer_import_ipc): a Buffer over the
// same device memory, usable wherever a Buffer is, whose Len is the
// exported buffer's and whose Info says Borrowed and Imported. Close (or
// the Context's Close) closes the mapping once pending work that uses it is
// done, and never frees the exporter's memory. Importing one handle twice in
// a process maps it once; each Buffer holds the mapping.
//
// The handle names the device by UUID, so this process may see it under
// another ordinal (CUDA_VISIBLE_DEVICES): import into a context on that
// same device. Refused (StatusInvalidArgument, with a Fix, never a crash):
// bytes that are not a handle (corrupted or cut short); a handle this
// process exported (use the Buffer itself); a handle whose Buffer was
// closed or whose process exited; a context on another device than the
// handle's.
func (c *Context) ImportIPC(h IPCHandle) (*Buffer, error) {
	const op = "vyre_buffer_import_ipc"
	if err := c.check(op); err != nil {
		return nil, err
	}
	var in C.vyre_ipc_handle
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&in.bytes[0])), IPCHandleSize), h[:])
	var out C.vyre_buffer
	err := call(op, func() C.vyre_status { return C.vyre_buffer_import_ipc(c.handle(), &in, &out) })
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	b := &Buffer{ctx: c}
	b.h.Store(uint64(out.bits))
	runtime.SetFinalizer(b, func(b *Buffer) { _ = b.Close() })
	// Its size is the exported buffer's.
	info, err := b.Info()
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	b.size = info.Bytes
	return b, nil
}
