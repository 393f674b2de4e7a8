// Package vyrecuda is the Go binding of vyre-cuda (include/vyre_cuda.h):
// GPU kernels through the CUDA driver API, without linking CUDA. It is a
// cgo package over libvyre_cuda; the CUDA driver is loaded at run time
// (VYRE_CUDA_DRIVER_LIBRARY overrides libcuda.so.1), so without one every
// call that needs it returns an error with StatusNoDriver and a Fix.
//
//	import vyrecuda "vyre.dev/cuda/bindings/go"
//
// README.md (in this folder) says how a module depends on this one, where
// cgo finds the header and the library, and where the library is found at
// run time.
//
//	ctx, err := vyrecuda.NewContext(0)
//	if err != nil { return err }
//	defer ctx.Close()
//	add, err := ctx.NewProgram(vyrecuda.ProgramDesc{
//		Code: []byte(ptx), Entry: "my_add_u32",
//		Bindings: []vyrecuda.BindingDecl{{Role: vyrecuda.RoleInput},
//			{Role: vyrecuda.RoleInput}, {Role: vyrecuda.RoleOutput}},
//	})
//	out := make([]uint32, n)
//	_, err = add.Dispatch(&vyrecuda.Dispatch{
//		Args:   []vyrecuda.Arg{vyrecuda.In(a), vyrecuda.In(b), vyrecuda.Out(out)},
//		Params: []uint32{uint32(n)},
//	})
//
// # Errors
//
// Every failing call returns an *Error with the library's Status, the
// driver's CUresult, the message (its first line ends with "Fix: ...";
// Error.Fix returns that sentence) and the whole compile log. The library
// keeps failure details per OS thread, so each call locks its goroutine to
// its thread (runtime.LockOSThread) from the call until its details are
// read. Test a status with errors.Is(err, vyrecuda.StatusNoDriver) or
// errors.As(err, &verr).
//
// # Objects and Close
//
// Context, Buffer, Program, Pending, Graph, Sequence, EgraphImage and
// HostMemory own library resources. Close releases them; closing twice is
// harmless, and any other use after Close is an error (never a crash).
// A finalizer closes an unreachable object as a safety net; do not rely on
// it for timing. Closing a Context releases everything it owns; their
// Close then does nothing. Objects keep their Context reachable. All are
// safe for concurrent use by many goroutines.
//
// # Host memory and cgo pointer rules
//
// Host data are Go slices of fixed-size numbers (In, Out, InOut, InOutTo,
// AsBytes) or HostMemory outside the Go heap (Context.AllocPinned: pinned
// memory from vyre_host_alloc; AllocHostMemory: C heap memory that
// HostMemory.Register page-locks with vyre_host_register).
//
// cgo lets C use Go memory only during the call it was passed to. So:
//   - Synchronous calls (Dispatch, Replay, Run, uploads and downloads, e-graph
//     calls) use Go slices in place: their addresses are passed as call
//     arguments and cleared from the C descriptors before the call returns.
//   - Asynchronous calls read Go inputs before they return (the library
//     stages them), but write host outputs when the Pending is waited on. A
//     Go slice output is therefore backed by C memory the bindings allocate,
//     copied into the slice by the wait and freed; leave the slice alone
//     until then. HostMemory outputs are written in place (by DMA when
//     pinned or registered), which is the fast path for asynchronous work.
//     (Go 1.21's runtime.Pinner could pin Go memory instead; these bindings
//     build with Go 1.19.)
//   - Sequence upload and download steps are read and written by every
//     later run, so Go-slice steps go through C memory the sequence owns,
//     copied before and after each run; HostMemory steps are used in place.
//
// # Waiting
//
// Pending.Wait takes a context.Context: it waits in slices of at most 20 ms
// (vyre_pending_wait with a timeout) and returns ctx.Err() when ctx is done
// first, leaving the pending waitable. WaitTimeout and Poll are the plain
// forms.
//
// # Capturing work into a graph
//
// Context.BeginCapture returns a Capture: other CUDA code's asynchronous
// work enqueued on Capture.Stream() and the library's dispatches enqueued
// with Capture.Dispatch become one Graph at Capture.End, replayed like any
// other. CUDA ties a CaptureThreadLocal (the zero value, as in C) or
// CaptureGlobal capture to the OS thread that began it, and goroutines move
// between OS threads; so BeginCapture locks the calling goroutine to its
// thread until End, which that goroutine must call. CaptureRelaxed locks
// nothing and may be ended from any goroutine. Capture's documentation has
// the rules. Graph.SetNodeInfo and SetNodeInfoRaw change a kernel or memset
// node of any graph (read with NodeInfo, edit, set).
//
// # Loops on the device
//
// Graph.Loop makes a Graph whose one launch runs another graph (the body)
// again and again on the device while the body leaves a u32 condition word
// of a Buffer non-zero, up to a bound, with an optional count word: a
// fixpoint iteration with no host round trip per round. The loop keeps the
// body alive and its Buffers and Program reachable; Graph.Loop's
// documentation has the rules and the refusals.
//
// # Sharing buffers between processes
//
// Buffer.ExportIPC returns an IPCHandle (128 bytes; String and
// ParseIPCHandle turn it into hex text and back) that the caller sends to
// another process of the machine over any channel; Context.ImportIPC there
// returns a Buffer over the same device memory (BufferInfo.Imported). The
// exporter keeps its Buffer open until every importer has closed its
// import, and orders the two processes' work itself (a write is visible to
// the other process once the writer has waited for it and said so).
// IPCHandle's documentation has the details and the refusals.
package vyrecuda
