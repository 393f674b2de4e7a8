package vyrecuda

/*
// The header: the checkout's include/ (this folder is bindings/go of a
// vyre-cuda checkout). CGO_CFLAGS comes first on the compiler's line, so
// CGO_CFLAGS=-I<prefix>/include picks an installed header instead.
// The library: CGO_LDFLAGS="-L<dir> -Wl,-rpath,<dir>" names the folder of
// libvyre_cuda.so (README.md: "Building a program that uses it").
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -lvyre_cuda
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// VersionMajor is the major version of vyre_cuda.h these bindings were
// compiled against; Version reports the loaded library's.
const VersionMajor = C.VYRE_CUDA_VERSION_MAJOR

// Version is the loaded library's version (vyre_version).
func Version() (major, minor, patch uint32) {
	v := uint32(C.vyre_version())
	return v >> 22, (v >> 12) & 0x3FF, v & 0xFFF
}

// DeviceCount is the number of CUDA devices. It loads the driver on first
// use: without one it returns an error with StatusNoDriver.
func DeviceCount() (uint32, error) {
	var n C.uint32_t
	err := call("vyre_device_count", func() C.vyre_status { return C.vyre_device_count(&n) })
	return uint32(n), err
}

// DeviceInfo describes a device (vyre_device_info).
type DeviceInfo struct {
	Ordinal                 uint32
	Name                    string
	ComputeCapabilityMajor  uint32
	ComputeCapabilityMinor  uint32
	TotalMemoryBytes        uint64
	MultiprocessorCount     uint32
	MaxThreadsPerBlock      uint32
	MaxBlockDim             [3]uint32
	MaxGridDim              [3]uint32
	MaxSharedMemoryPerBlock uint32
	WarpSize                uint32
	CooperativeLaunch       bool
	DriverVersion           uint32
	// PeerAccessMask has bit p set when this device can access device p's
	// memory as a peer (cuDeviceCanAccessPeer), so copies between their
	// buffers (Buffer.CopyTo) run device to device; devices 0 to 63
	// (DeviceCanAccessPeer answers for any). Never this device's own bit.
	// 0 from a library older than the field.
	PeerAccessMask uint64
}

func deviceInfoFromC(i *C.vyre_device_info) DeviceInfo {
	d := DeviceInfo{
		Ordinal:                 uint32(i.ordinal),
		Name:                    C.GoString(&i.name[0]),
		ComputeCapabilityMajor:  uint32(i.compute_capability_major),
		ComputeCapabilityMinor:  uint32(i.compute_capability_minor),
		TotalMemoryBytes:        uint64(i.total_memory_bytes),
		MultiprocessorCount:     uint32(i.multiprocessor_count),
		MaxThreadsPerBlock:      uint32(i.max_threads_per_block),
		MaxSharedMemoryPerBlock: uint32(i.max_shared_memory_per_block),
		WarpSize:                uint32(i.warp_size),
		CooperativeLaunch:       i.cooperative_launch != 0,
		DriverVersion:           uint32(i.driver_version),
		PeerAccessMask:          uint64(i.peer_access_mask),
	}
	for k := 0; k < 3; k++ {
		d.MaxBlockDim[k] = uint32(i.max_block_dim[k])
		d.MaxGridDim[k] = uint32(i.max_grid_dim[k])
	}
	return d
}

// QueryDevice describes device `ordinal` (vyre_device_info_get).
func QueryDevice(ordinal uint32) (DeviceInfo, error) {
	var info C.vyre_device_info
	info.struct_size = C.uint32_t(unsafe.Sizeof(info))
	err := call("vyre_device_info_get", func() C.vyre_status {
		return C.vyre_device_info_get(C.uint32_t(ordinal), &info)
	})
	if err != nil {
		return DeviceInfo{}, err
	}
	return deviceInfoFromC(&info), nil
}

// DeviceCanAccessPeer reports whether device `ordinal` can access device
// `peer`'s memory as a peer, over NVLink or PCIe (vyre_device_can_access_peer,
// as cuDeviceCanAccessPeer says): copies between buffers of the two devices
// (Buffer.CopyTo) then run device to device, else through pinned host
// memory. false for the same device; an ordinal past DeviceCount is an
// error with StatusNoDevice. It loads the driver as DeviceCount does.
func DeviceCanAccessPeer(ordinal, peer uint32) (bool, error) {
	var out C.uint32_t
	err := call("vyre_device_can_access_peer", func() C.vyre_status {
		return C.vyre_device_can_access_peer(C.uint32_t(ordinal), C.uint32_t(peer), &out)
	})
	return err == nil && out != 0, err
}

// ContextOptions are vyre_context_desc's fields; 0 picks each default.
type ContextOptions struct {
	Device uint32
	// Most bytes the transient device pool and the pinned staging pool keep
	// cached (0: 1 GiB each).
	TransientPoolLimitBytes uint64
	PinnedPoolLimitBytes    uint64
	// The pipeline that moves large pageable host data: bytes per pinned
	// chunk (a multiple of 64 KiB, 64 KiB..256 MiB; 0: 8 MiB), chunks in the
	// ring (2..64; 0: 4) and copy threads (1..64; 0: min(12, cores)).
	StagingChunkBytes uint64
	StagingChunkCount uint32
	StagingThreads    uint32
}

// Context is a vyre-cuda context on one device. It is safe for concurrent
// use by many goroutines. Close destroys it and every object it owns
// (buffers, programs, pendings, graphs, sequences, GPU e-graph images,
// pinned memory and registrations); their Close then does nothing and any
// other use of them is an error. Objects keep their Context reachable, so
// the garbage collector finalizes it only after them.
type Context struct {
	h atomic.Uint64
	// memMu is held for reading while memory this context owns (pinned
	// HostMemory, registrations) is touched through the bindings, and for
	// writing by Close, which releases that memory.
	memMu sync.RWMutex
	// capturing counts the open Captures (0 or 1): Close refuses while one
	// is open, as vyre_context_destroy does, before giving up the handle.
	capturing atomic.Int32
}

// NewContext creates a context on device `device` with default options.
func NewContext(device uint32) (*Context, error) {
	return NewContextWithOptions(ContextOptions{Device: device})
}

// NewContextWithOptions creates a context (vyre_context_create).
func NewContextWithOptions(o ContextOptions) (*Context, error) {
	var desc C.vyre_context_desc
	desc.struct_size = C.uint32_t(unsafe.Sizeof(desc))
	desc.device_ordinal = C.uint32_t(o.Device)
	desc.transient_pool_limit_bytes = C.uint64_t(o.TransientPoolLimitBytes)
	desc.pinned_pool_limit_bytes = C.uint64_t(o.PinnedPoolLimitBytes)
	desc.staging_chunk_bytes = C.uint64_t(o.StagingChunkBytes)
	desc.staging_chunk_count = C.uint32_t(o.StagingChunkCount)
	desc.staging_threads = C.uint32_t(o.StagingThreads)
	var out C.vyre_context
	err := call("vyre_context_create", func() C.vyre_status {
		return C.vyre_context_create(&desc, &out)
	})
	if err != nil {
		return nil, err
	}
	c := &Context{}
	c.h.Store(uint64(out.bits))
	runtime.SetFinalizer(c, func(c *Context) { _ = c.Close() })
	return c, nil
}

func (c *Context) handle() C.vyre_context { return C.vyre_context{bits: C.uint64_t(c.h.Load())} }

// Handle is the library handle's bits (0 once closed), for calls into the C
// API made outside these bindings.
func (c *Context) Handle() uint64 { return c.h.Load() }

func (c *Context) closed() bool { return c.h.Load() == 0 }

func (c *Context) check(op string) error {
	if c == nil || c.closed() {
		return closedError(op, "Context")
	}
	return nil
}

// Close destroys the context (vyre_context_destroy): it waits for its work
// and releases everything it owns. Closing twice is harmless. The error is
// the first device error met on the way (e.g. StatusDeviceFault, whose Fix
// says what is left to do); the context is gone whatever it says, except
// while a Capture is open on it: then Close is StatusInvalidState and
// destroys nothing (End the capture first).
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.memMu.Lock()
	defer c.memMu.Unlock()
	if c.capturing.Load() != 0 && !c.closed() {
		return goError(StatusInvalidState, "vyre_context_destroy",
			"a capture is open on the context. Fix: end it first (Capture.End), then Close the context.")
	}
	bits := c.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(c, nil)
	err := call("vyre_context_destroy", func() C.vyre_status {
		return C.vyre_context_destroy(C.vyre_context{bits: C.uint64_t(bits)})
	})
	if e, ok := err.(*Error); ok && e.Status == StatusInvalidState {
		// A capture the library still has open (begun through the C API
		// on this context's handle): nothing was destroyed.
		c.h.Store(bits)
		runtime.SetFinalizer(c, func(c *Context) { _ = c.Close() })
		return err
	}
	if isStale(err) {
		return nil
	}
	return err
}

// DeviceInfo describes the context's device (vyre_context_device_info).
func (c *Context) DeviceInfo() (DeviceInfo, error) {
	const op = "vyre_context_device_info"
	if err := c.check(op); err != nil {
		return DeviceInfo{}, err
	}
	var info C.vyre_device_info
	info.struct_size = C.uint32_t(unsafe.Sizeof(info))
	err := call(op, func() C.vyre_status { return C.vyre_context_device_info(c.handle(), &info) })
	runtime.KeepAlive(c)
	if err != nil {
		return DeviceInfo{}, err
	}
	return deviceInfoFromC(&info), nil
}

// Telemetry holds a context's counters (vyre_telemetry): cumulative since
// creation, except the *Live and *CachedBytes levels.
type Telemetry struct {
	H2DBytes, H2DOperations  uint64
	D2HBytes, D2HOperations  uint64
	MemsetOperations         uint64
	KernelLaunches           uint64
	SyncPoints               uint64
	Dispatches               uint64
	TransientPoolHits        uint64
	TransientPoolMisses      uint64
	TransientPoolCachedBytes uint64
	PinnedPoolHits           uint64
	PinnedPoolMisses         uint64
	PinnedPoolCachedBytes    uint64
	ModuleCacheHits          uint64
	ModuleCacheMisses        uint64
	ModuleLoads              uint64
	DeviceBytesLive          uint64
	PinnedBytesLive          uint64
	LiveBuffers              uint64
	LivePrograms             uint64
	LivePendings             uint64
	GraphRecords             uint64
	GraphReplays             uint64
	GraphUploadsSkipped      uint64
	GraphLaunches            uint64
	SequenceRuns             uint64
	LiveGraphs               uint64
	LiveSequences            uint64
}

// Telemetry reads the context's counters (vyre_context_telemetry).
func (c *Context) Telemetry() (Telemetry, error) {
	const op = "vyre_context_telemetry"
	if err := c.check(op); err != nil {
		return Telemetry{}, err
	}
	var t C.vyre_telemetry
	t.struct_size = C.uint32_t(unsafe.Sizeof(t))
	err := call(op, func() C.vyre_status { return C.vyre_context_telemetry(c.handle(), &t) })
	runtime.KeepAlive(c)
	if err != nil {
		return Telemetry{}, err
	}
	return Telemetry{
		H2DBytes: uint64(t.h2d_bytes), H2DOperations: uint64(t.h2d_operations),
		D2HBytes: uint64(t.d2h_bytes), D2HOperations: uint64(t.d2h_operations),
		MemsetOperations:         uint64(t.memset_operations),
		KernelLaunches:           uint64(t.kernel_launches),
		SyncPoints:               uint64(t.sync_points),
		Dispatches:               uint64(t.dispatches),
		TransientPoolHits:        uint64(t.transient_pool_hits),
		TransientPoolMisses:      uint64(t.transient_pool_misses),
		TransientPoolCachedBytes: uint64(t.transient_pool_cached_bytes),
		PinnedPoolHits:           uint64(t.pinned_pool_hits),
		PinnedPoolMisses:         uint64(t.pinned_pool_misses),
		PinnedPoolCachedBytes:    uint64(t.pinned_pool_cached_bytes),
		ModuleCacheHits:          uint64(t.module_cache_hits),
		ModuleCacheMisses:        uint64(t.module_cache_misses),
		ModuleLoads:              uint64(t.module_loads),
		DeviceBytesLive:          uint64(t.device_bytes_live),
		PinnedBytesLive:          uint64(t.pinned_bytes_live),
		LiveBuffers:              uint64(t.live_buffers),
		LivePrograms:             uint64(t.live_programs),
		LivePendings:             uint64(t.live_pendings),
		GraphRecords:             uint64(t.graph_records),
		GraphReplays:             uint64(t.graph_replays),
		GraphUploadsSkipped:      uint64(t.graph_uploads_skipped),
		GraphLaunches:            uint64(t.graph_launches),
		SequenceRuns:             uint64(t.sequence_runs),
		LiveGraphs:               uint64(t.live_graphs),
		LiveSequences:            uint64(t.live_sequences),
	}, nil
}

// Trim releases the memory the context's transient and pinned pools keep
// cached (vyre_context_trim).
func (c *Context) Trim() error {
	const op = "vyre_context_trim"
	if err := c.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status { return C.vyre_context_trim(c.handle()) })
	runtime.KeepAlive(c)
	return err
}

// StreamLegacy and StreamPerThread name CUDA's default streams
// (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) for WaitStream and SignalStream;
// the CUDA array interface and DLPack name the legacy one 1 too.
const (
	StreamLegacy    uint64 = 1
	StreamPerThread uint64 = 2
)

// WaitStream makes the work the context enqueues from now on start after
// the work already enqueued on cuStream, a CUstream of the same device (or
// StreamLegacy, StreamPerThread; 0 is refused) (vyre_context_wait_stream).
// The host does not block.
func (c *Context) WaitStream(cuStream uint64) error {
	const op = "vyre_context_wait_stream"
	if err := c.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_context_wait_stream(c.handle(), C.uint64_t(cuStream))
	})
	runtime.KeepAlive(c)
	return err
}

// SignalStream makes the work enqueued on cuStream from now on start after
// the work the context has already enqueued (vyre_context_signal_stream;
// streams as for WaitStream). The host does not block.
func (c *Context) SignalStream(cuStream uint64) error {
	const op = "vyre_context_signal_stream"
	if err := c.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_context_signal_stream(c.handle(), C.uint64_t(cuStream))
	})
	runtime.KeepAlive(c)
	return err
}

// Selftest runs the library's built-in self-test on the context's device
// (vyre_context_selftest): a checked vector add through the host path.
func (c *Context) Selftest() error {
	const op = "vyre_context_selftest"
	if err := c.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status { return C.vyre_context_selftest(c.handle()) })
	runtime.KeepAlive(c)
	return err
}
