package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Status is a vyre_status: what kind of failure a call met. It implements
// error, so errors.Is(err, vyrecuda.StatusNoDriver) tests an *Error's status.
type Status int32

// The statuses of vyre_cuda.h.
const (
	StatusOK                    Status = C.VYRE_STATUS_OK
	StatusInvalidArgument       Status = C.VYRE_STATUS_INVALID_ARGUMENT
	StatusInvalidHandle         Status = C.VYRE_STATUS_INVALID_HANDLE
	StatusStaleHandle           Status = C.VYRE_STATUS_STALE_HANDLE
	StatusUnsupportedStructSize Status = C.VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE
	StatusOutOfRange            Status = C.VYRE_STATUS_OUT_OF_RANGE
	StatusNoDriver              Status = C.VYRE_STATUS_NO_DRIVER
	StatusNoDevice              Status = C.VYRE_STATUS_NO_DEVICE
	StatusDriverTooOld          Status = C.VYRE_STATUS_DRIVER_TOO_OLD
	StatusNVRTCUnavailable      Status = C.VYRE_STATUS_NVRTC_UNAVAILABLE
	StatusOutOfMemory           Status = C.VYRE_STATUS_OUT_OF_MEMORY
	StatusCompileFailed         Status = C.VYRE_STATUS_COMPILE_FAILED
	StatusEntryNotFound         Status = C.VYRE_STATUS_ENTRY_NOT_FOUND
	StatusLimitExceeded         Status = C.VYRE_STATUS_LIMIT_EXCEEDED
	StatusLaunchFailed          Status = C.VYRE_STATUS_LAUNCH_FAILED
	StatusTimeout               Status = C.VYRE_STATUS_TIMEOUT
	StatusNotReady              Status = C.VYRE_STATUS_NOT_READY
	StatusInvalidState          Status = C.VYRE_STATUS_INVALID_STATE
	StatusDriverError           Status = C.VYRE_STATUS_DRIVER_ERROR
	StatusInternal              Status = C.VYRE_STATUS_INTERNAL
	StatusShapeMismatch         Status = C.VYRE_STATUS_SHAPE_MISMATCH
	StatusDeviceFault           Status = C.VYRE_STATUS_DEVICE_FAULT
)

// String is the library's name of the status ("VYRE_STATUS_NO_DRIVER"),
// "VYRE_STATUS_UNKNOWN" for a value it does not know.
func (s Status) String() string {
	return C.GoString(C.vyre_status_name(C.vyre_status(s)))
}

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

// Error is a failed call: the library's status, the CUresult the CUDA
// driver returned (0 when the failure did not come from the driver), and
// the message, whose first line reads "<what failed>: <why>. Fix: <what to
// do>."; a compile log may follow it (capped), and Log holds the whole
// NVRTC or JIT log of a failed compile.
//
// The details are read on the calling OS thread right after the failing
// call (the library keeps them per thread). Failures the bindings detect
// themselves (an object used after Close, mismatched Go arguments) are
// *Error values too, with CUResult 0 and a Fix.
//
//	var verr *vyrecuda.Error
//	if errors.As(err, &verr) && verr.Status == vyrecuda.StatusNoDriver { ... }
//	if errors.Is(err, vyrecuda.StatusNoDriver) { ... }   // the same test
type Error struct {
	Status   Status
	CUResult int32
	Message  string
	Log      string
	// Op is the C function (or, for errors found in Go, the method) that failed.
	Op string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: %s", e.Op, e.Status)
	}
	return e.Message
}

// Is reports whether target is this error's Status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// Fix is the message's "Fix: ..." sentence (from its first line), or "".
func (e *Error) Fix() string {
	first := e.Message
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if i := strings.Index(first, "Fix: "); i >= 0 {
		return first[i:]
	}
	return ""
}

// goError is an error found by the bindings themselves.
func goError(status Status, op, format string, args ...any) *Error {
	return &Error{Status: status, Op: op, Message: op + ": " + fmt.Sprintf(format, args...)}
}

func closedError(op, what string) *Error {
	return goError(StatusInvalidHandle, op,
		"the %s is closed. Fix: do not use a %s after its Close(); create a new one.", what, what)
}

// readLastError reads this OS thread's last error (the caller holds
// runtime.LockOSThread since the failing call).
func readLastError(op string) *Error {
	var status C.vyre_status
	var cu C.int32_t
	var length C.size_t
	var buf [1024]byte
	C.vyre_last_error(&status, &cu, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &length)
	var message string
	if int(length) < len(buf) {
		message = string(buf[:length])
	} else {
		big := make([]byte, int(length)+1)
		C.vyre_last_error(nil, nil, (*C.char)(unsafe.Pointer(&big[0])), C.size_t(len(big)), &length)
		if int(length) < len(big) {
			big = big[:length]
		}
		message = string(big)
	}
	e := &Error{Status: Status(status), CUResult: int32(cu), Message: message, Op: op}
	e.Log = readLastErrorLog()
	return e
}

func readLastErrorLog() string {
	var length C.size_t
	C.vyre_last_error_log(nil, 0, &length)
	if length == 0 {
		return ""
	}
	buf := make([]byte, int(length)+1)
	C.vyre_last_error_log((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &length)
	if int(length) < len(buf) {
		buf = buf[:length]
	}
	return string(buf)
}

// call runs f, one vyre_* call, with the goroutine locked to its OS thread
// so that a failure's details are read on the thread that recorded them.
func call(op string, f func() C.vyre_status) error {
	runtime.LockOSThread()
	status := f()
	var err error
	if status != C.VYRE_STATUS_OK {
		err = readLastError(op)
	}
	runtime.UnlockOSThread()
	return err
}

// LastError returns this OS thread's last error (nil when the last call
// succeeded), without clearing it. The errors returned by this package
// already carry it; LastError is meaningful only while the goroutine is
// locked to its thread (runtime.LockOSThread) since the failing call.
func LastError() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var status C.vyre_status
	C.vyre_last_error(&status, nil, nil, 0, nil)
	if status == C.VYRE_STATUS_OK {
		return nil
	}
	return readLastError("vyre_last_error")
}

// LastErrorLog returns the whole compiler or JIT log of this OS thread's
// last error (vyre_last_error_log), "" when it carried none. As for
// LastError, lock the goroutine to its thread to make it meaningful.
func LastErrorLog() string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return readLastErrorLog()
}

// isStale reports whether err is STALE_HANDLE (a handle the library already
// released, e.g. by destroying its context).
func isStale(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Status == StatusStaleHandle
}
