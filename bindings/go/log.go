package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"sync/atomic"
)

// LogLevel is a log line's level (vyre_log_level).
type LogLevel int32

const (
	LogError   LogLevel = C.VYRE_LOG_ERROR
	LogWarning LogLevel = C.VYRE_LOG_WARNING
	LogInfo    LogLevel = C.VYRE_LOG_INFO
	// LogTrace is per-stage timings (also VYRE_CUDA_TRACE=1).
	LogTrace LogLevel = C.VYRE_LOG_TRACE
)

// LogFunc receives log lines. It may be called from any thread, also
// threads the library created, and concurrently; it must not call back
// into this package. A panic in it is recovered and the line dropped.
type LogFunc func(level LogLevel, message string)

var logFn atomic.Pointer[LogFunc]

//export govyreLog
func govyreLog(level C.int, message *C.char) {
	fn := logFn.Load()
	if fn == nil {
		return
	}
	msg := C.GoString(message)
	defer func() { _ = recover() }()
	(*fn)(LogLevel(level), msg)
}

// SetLogCallback installs fn as the process-wide log callback with the most
// verbose level delivered (vyre_set_log_callback, through an exported Go
// trampoline); nil removes it, as ClearLogCallback does.
func SetLogCallback(fn LogFunc, maxLevel LogLevel) error {
	const op = "vyre_set_log_callback"
	if fn == nil {
		return ClearLogCallback()
	}
	logFn.Store(&fn)
	err := call(op, func() C.vyre_status {
		return C.vyre_set_log_callback(C.vyre_log_callback(C.govyre_log_trampoline), nil,
			C.vyre_log_level(maxLevel))
	})
	if err != nil {
		logFn.Store(nil)
	}
	return err
}

// ClearLogCallback removes the log callback.
func ClearLogCallback() error {
	err := call("vyre_set_log_callback", func() C.vyre_status {
		return C.vyre_set_log_callback(nil, nil, C.VYRE_LOG_ERROR)
	})
	logFn.Store(nil)
	return err
}
