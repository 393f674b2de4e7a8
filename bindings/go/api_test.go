package vyrecuda_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/fakedriver"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

// ---------------------------------------------------------------------------
// Library and errors (no driver needed)
// ---------------------------------------------------------------------------

func TestVersionAndStatusNames(t *testing.T) {
	major, _, _ := vc.Version()
	if major != vc.VersionMajor {
		t.Fatalf("library major %d, header %d", major, vc.VersionMajor)
	}
	for s := vc.StatusInvalidArgument; s <= vc.StatusDeviceFault; s++ {
		name := s.String()
		if !strings.HasPrefix(name, "VYRE_STATUS_") || name == "VYRE_STATUS_UNKNOWN" {
			t.Errorf("status %d: name %q", int(s), name)
		}
	}
	if vc.StatusDeviceFault.String() != "VYRE_STATUS_DEVICE_FAULT" || vc.StatusOK.String() != "VYRE_STATUS_OK" {
		t.Errorf("names: %v %v", vc.StatusDeviceFault, vc.StatusOK)
	}
	if vc.Status(12345).String() != "VYRE_STATUS_UNKNOWN" {
		t.Errorf("unknown status: %v", vc.Status(12345))
	}
}

// ---------------------------------------------------------------------------
// Devices, contexts, telemetry
// ---------------------------------------------------------------------------

func TestDeviceInfoAndContext(t *testing.T) {
	ctx := testContext(t)
	n, err := vc.DeviceCount()
	must(t, err, "DeviceCount")
	if n < 1 {
		t.Fatalf("DeviceCount = %d", n)
	}
	info, err := vc.QueryDevice(0)
	must(t, err, "QueryDevice")
	if info.Name == "" || info.MaxThreadsPerBlock == 0 || info.WarpSize == 0 || info.TotalMemoryBytes == 0 ||
		info.MaxBlockDim[0] == 0 || info.MaxGridDim[0] == 0 || info.DriverVersion == 0 {
		t.Fatalf("device info: %+v", info)
	}
	cinfo, err := ctx.DeviceInfo()
	must(t, err, "Context.DeviceInfo")
	if cinfo != info {
		t.Fatalf("context device info %+v != %+v", cinfo, info)
	}
	_, err = vc.QueryDevice(1000)
	wantError(t, err, vc.StatusNoDevice, "QueryDevice(1000)")
	must(t, ctx.Selftest(), "Selftest")
	must(t, ctx.Trim(), "Trim")

	small, err := vc.NewContextWithOptions(vc.ContextOptions{
		TransientPoolLimitBytes: 1 << 20, PinnedPoolLimitBytes: 1 << 20,
		StagingChunkBytes: 64 << 10, StagingChunkCount: 2, StagingThreads: 2,
	})
	must(t, err, "NewContextWithOptions")
	defer small.Close()
	// A large pageable dispatch goes through the staging ring of small chunks.
	const count = 300_000
	r := newRng(1)
	a, b := r.u32s(count), r.u32s(count)
	out := make([]uint32, count)
	add := addProgram(t, small)
	_, err = add.Dispatch(addDispatch(a, b, out))
	must(t, err, "staged dispatch")
	checkSum(t, a, b, out, "staged through small chunks")

	_, err = vc.NewContextWithOptions(vc.ContextOptions{StagingChunkBytes: 1000})
	wantError(t, err, vc.StatusInvalidArgument, "staging chunk of 1000 bytes")
	_, err = vc.NewContext(1000)
	wantError(t, err, vc.StatusNoDevice, "NewContext(1000)")
	assertNoMisuse(t)
}

func TestTelemetryCountsTheWork(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	before, err := ctx.Telemetry()
	must(t, err, "Telemetry")
	if before.LivePrograms != 1 {
		t.Fatalf("LivePrograms = %d", before.LivePrograms)
	}
	const n = 1000
	r := newRng(2)
	a, b := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	for i := 0; i < 3; i++ {
		_, err := add.Dispatch(addDispatch(a, b, out))
		must(t, err, "Dispatch")
	}
	buf, err := ctx.Alloc(4096)
	must(t, err, "Alloc")
	tm, err := ctx.Telemetry()
	must(t, err, "Telemetry")
	if tm.Dispatches-before.Dispatches != 3 || tm.KernelLaunches-before.KernelLaunches != 3 {
		t.Fatalf("dispatches %d, launches %d", tm.Dispatches-before.Dispatches, tm.KernelLaunches-before.KernelLaunches)
	}
	if tm.H2DBytes-before.H2DBytes < 3*2*4*n || tm.D2HBytes-before.D2HBytes < 3*4*n {
		t.Fatalf("h2d %d, d2h %d", tm.H2DBytes-before.H2DBytes, tm.D2HBytes-before.D2HBytes)
	}
	if tm.LiveBuffers != 1 || tm.DeviceBytesLive < 4096 || tm.ModuleLoads < 1 {
		t.Fatalf("telemetry %+v", tm)
	}
	must(t, buf.Close(), "Buffer.Close")
	tm, _ = ctx.Telemetry()
	if tm.LiveBuffers != 0 {
		t.Fatalf("LiveBuffers = %d after Close", tm.LiveBuffers)
	}
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Buffers and dispatch
// ---------------------------------------------------------------------------

func TestVectorAddHostMemory(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	r := newRng(3)
	for _, n := range []int{1, 255, 256, 257, 10_000} {
		a, b := r.u32s(n), r.u32s(n)
		out := make([]uint32, n)
		timing, err := add.Dispatch(addDispatch(a, b, out))
		must(t, err, "Dispatch")
		checkSum(t, a, b, out, "host")
		if timing.Wall <= 0 {
			t.Fatalf("timing %+v", timing)
		}
	}
	// INPUT_OUTPUT in place and into a separate destination.
	inc := incProgram(t, ctx)
	const n = 1000
	data := make([]uint32, n)
	for i := range data {
		data[i] = uint32(i)
	}
	_, err := inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{n}})
	must(t, err, "InOut")
	for i, v := range data {
		if v != uint32(i)+1 {
			t.Fatalf("data[%d] = %d", i, v)
		}
	}
	src := append([]uint32(nil), data...)
	dst := make([]uint32, n)
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOutTo(src, dst)}, Params: []uint32{n}})
	must(t, err, "InOutTo")
	for i := range dst {
		if dst[i] != uint32(i)+2 || src[i] != data[i] {
			t.Fatalf("dst[%d] = %d, src[%d] = %d", i, dst[i], i, src[i])
		}
	}
	// Typed slices of other element types: float32 bits through the u32 kernel.
	fa := []float32{1, 2, 3}
	fb := []float32{0, 0, 0}
	fo := make([]float32, 3)
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(fa), vc.In(fb), vc.Out(fo)}, Params: []uint32{3}})
	must(t, err, "float32 slices")
	for i := range fa {
		if fo[i] != fa[i] {
			t.Fatalf("fo[%d] = %v", i, fo[i])
		}
	}
	assertNoMisuse(t)
}

func TestResidentBuffersAndRanges(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 4096
	r := newRng(4)
	a, b := r.u32s(n), r.u32s(n)
	da, err := ctx.Upload(vc.AsBytes(a))
	must(t, err, "Upload")
	db, err := ctx.Upload(vc.AsBytes(b))
	must(t, err, "Upload")
	dout, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	if da.Len() != 4*n || da.Context() != ctx {
		t.Fatalf("Len %d", da.Len())
	}
	info, err := da.Info()
	must(t, err, "Info")
	if info.Bytes != 4*n || info.DevicePointer == 0 || info.ContextHandle != ctx.Handle() {
		t.Fatalf("info %+v", info)
	}
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}})
	must(t, err, "resident dispatch")
	got, err := vc.Read[uint32](dout)
	must(t, err, "Read")
	checkSum(t, a, b, got, "resident")

	// Sub-ranges: the second half of each buffer.
	const half = n / 2 * 4
	fresh, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	must(t, fresh.Upload(0, make([]byte, 4*n)), "zero")
	_, err = add.Dispatch(&vc.Dispatch{
		Args:   []vc.Arg{da.Range(half, 0), db.Range(half, half), fresh.Range(half, 0)},
		Params: []uint32{n / 2},
	})
	must(t, err, "ranges")
	second := make([]uint32, n/2)
	must(t, fresh.Download(half, vc.AsBytes(second)), "Download")
	checkSum(t, a[n/2:], b[n/2:], second, "resident ranges")
	first := make([]uint32, n/2)
	must(t, fresh.Download(0, vc.AsBytes(first)), "Download")
	for i, v := range first {
		if v != 0 {
			t.Fatalf("first[%d] = %d: the first half was written", i, v)
		}
	}

	// Many ranges at once, more than the 16 Go slices one call passes in
	// place (the rest go through C memory).
	buf, err := ctx.Alloc(64 * 40)
	must(t, err, "Alloc")
	var ups []vc.UploadRange
	var downs []vc.DownloadRange
	want := make([][]byte, 40)
	for i := 0; i < 40; i++ {
		want[i] = []byte(strings.Repeat(string(rune('A'+i%26)), 1+i))
		ups = append(ups, vc.UploadRange{Offset: uint64(64 * i), Data: want[i]})
		downs = append(downs, vc.DownloadRange{Offset: uint64(64 * i), Data: make([]byte, 1+i)})
	}
	must(t, buf.UploadRanges(ups), "UploadRanges")
	must(t, buf.DownloadRanges(downs), "DownloadRanges")
	for i := range downs {
		if string(downs[i].Data) != string(want[i]) {
			t.Fatalf("range %d: %q, expected %q", i, downs[i].Data, want[i])
		}
	}
	err = buf.DownloadRanges([]vc.DownloadRange{{Offset: 64*40 - 4, Data: make([]byte, 16)}})
	wantError(t, err, vc.StatusOutOfRange, "download range past the end")
	err = buf.Upload(64*40-4, make([]byte, 16))
	wantError(t, err, vc.StatusOutOfRange, "upload past the end")
	_, err = ctx.Alloc(0)
	wantError(t, err, vc.StatusInvalidArgument, "Alloc(0)")
	must(t, buf.Close(), "Close")
	assertNoMisuse(t)
}

func TestAsyncDispatchPendingAndTiming(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 2048
	r := newRng(5)
	a, b := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	d := addDispatch(a, b, out)
	d.DeviceTiming = true
	pd, err := add.DispatchAsync(d)
	must(t, err, "DispatchAsync")
	_, err = pd.Timing()
	wantError(t, err, vc.StatusInvalidState, "Timing before the wait")
	_, err = pd.Poll()
	must(t, err, "Poll")
	done, err := pd.WaitTimeout(30 * time.Second)
	must(t, err, "WaitTimeout")
	if !done {
		t.Fatal("not done after 30 s")
	}
	checkSum(t, a, b, out, "async host (Go slice output through C memory)")
	err = pd.Wait(context.Background())
	wantError(t, err, vc.StatusInvalidState, "second wait")
	timing, err := pd.Timing()
	must(t, err, "Timing")
	if timing.Wall <= 0 {
		t.Fatalf("timing %+v", timing)
	}
	if ok, err := pd.Poll(); !ok || err != nil {
		t.Fatalf("Poll after the wait: %v %v", ok, err)
	}
	must(t, pd.Close(), "Close")

	// Finish: wait + timing + close, with a context.
	out2 := make([]uint32, n)
	pd, err = add.DispatchAsync(addDispatch(a, b, out2))
	must(t, err, "DispatchAsync")
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = pd.Finish(c)
	must(t, err, "Finish")
	checkSum(t, a, b, out2, "finish")

	// Closed unwaited: released, host outputs never written.
	untouched := make([]uint32, n)
	for i := range untouched {
		untouched[i] = 7
	}
	pd, err = add.DispatchAsync(addDispatch(a, b, untouched))
	must(t, err, "DispatchAsync")
	must(t, pd.Close(), "Close unwaited")
	for i, v := range untouched {
		if v != 7 {
			t.Fatalf("untouched[%d] = %d: a released pending wrote its outputs", i, v)
		}
	}
	if tm, _ := ctx.Telemetry(); tm.LivePendings != 0 {
		t.Fatalf("LivePendings = %d", tm.LivePendings)
	}

	// Resident async, a reused descriptor.
	da, _ := ctx.Upload(vc.AsBytes(a))
	db, _ := ctx.Upload(vc.AsBytes(b))
	dout, _ := ctx.Alloc(4 * n)
	rd := &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}}
	for i := 0; i < 3; i++ {
		_, err := add.Dispatch(rd)
		must(t, err, "Dispatch")
	}
	pd, err = add.DispatchAsync(rd)
	must(t, err, "DispatchAsync")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Close")
	got, _ := vc.Read[uint32](dout)
	checkSum(t, a, b, got, "async resident")

	// INPUT_OUTPUT asynchronously over one Go slice: read before the call
	// returns, written by the wait.
	inc := incProgram(t, ctx)
	data := make([]uint32, n)
	for i := range data {
		data[i] = uint32(i)
	}
	pd, err = inc.DispatchAsync(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{n}})
	must(t, err, "DispatchAsync InOut")
	_, err = pd.Finish(context.Background())
	must(t, err, "Finish")
	for i, v := range data {
		if v != uint32(i)+1 {
			t.Fatalf("data[%d] = %d", i, v)
		}
	}
	assertNoMisuse(t)
}

// Wait honours its context.Context: with the fake driver holding the
// device work, a wait with a deadline returns context.DeadlineExceeded (and
// a cancelled one context.Canceled) and leaves the pending waitable.
func TestWaitHonoursTheContext(t *testing.T) {
	if !fake() {
		t.Skip("needs the fake driver's hold")
	}
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 4096
	r := newRng(6)
	a, b := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	must(t, fakedriver.SetHold(true), "hold")
	held := true
	defer func() {
		if held {
			_ = fakedriver.SetHold(false)
		}
	}()
	pd, err := add.DispatchAsync(addDispatch(a, b, out))
	must(t, err, "DispatchAsync")
	if done, err := pd.Poll(); done || err != nil {
		t.Fatalf("Poll while held: %v %v", done, err)
	}
	c, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
	start := time.Now()
	err = pd.Wait(c)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, expected context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("a 60 ms wait took %v", el)
	}
	c, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); cancel() }()
	if err := pd.Wait(c); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, expected context.Canceled", err)
	}
	if done, err := pd.WaitTimeout(time.Millisecond); done || err != nil {
		t.Fatalf("WaitTimeout while held: %v %v", done, err)
	}
	for _, v := range out {
		if v != 0 {
			t.Fatal("outputs written before the wait")
		}
	}
	// The device finishes while a wait with a long deadline is under way.
	go func() { time.Sleep(50 * time.Millisecond); _ = fakedriver.SetHold(false) }()
	held = false
	c, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, pd.Wait(c), "Wait after the device finished")
	checkSum(t, a, b, out, "waited after timeouts")
	must(t, pd.Close(), "Close")
	assertNoMisuse(t)
}

// Objects are shared by goroutines: one program used by 8 goroutines, each
// with its own data; pendings waited on other goroutines than the ones that
// made them; objects closed concurrently from many goroutines.
func TestConcurrentGoroutines(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := newRng(100 + uint64(g))
			for round := 0; round < 10; round++ {
				m := 100 + int(r.below(3000))
				a, b := r.u32s(m), r.u32s(m)
				out := make([]uint32, m)
				var err error
				if round%2 == 0 {
					_, err = add.Dispatch(addDispatch(a, b, out))
				} else {
					var pd *vc.Pending
					pd, err = add.DispatchAsync(addDispatch(a, b, out))
					if err == nil {
						_, err = pd.Finish(context.Background())
					}
				}
				if err != nil {
					errs <- err
					return
				}
				for i := range a {
					if out[i] != a[i]+b[i] {
						errs <- errors.New("wrong sum in a goroutine")
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Enqueued here, waited there.
	r := newRng(7)
	const n = 5000
	a, b := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	pd, err := add.DispatchAsync(addDispatch(a, b, out))
	must(t, err, "DispatchAsync")
	done := make(chan error)
	go func() { _, err := pd.Finish(context.Background()); done <- err }()
	must(t, <-done, "Finish on another goroutine")
	checkSum(t, a, b, out, "waited on another goroutine")

	// Close from many goroutines at once: one of them releases, the others
	// do nothing; all return nil.
	bufs := make([]*vc.Buffer, 16)
	for i := range bufs {
		bufs[i], err = ctx.Alloc(256)
		must(t, err, "Alloc")
	}
	var closeErrs atomic.Int32
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, buf := range bufs {
				if buf.Close() != nil {
					closeErrs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if closeErrs.Load() != 0 {
		t.Fatalf("%d concurrent Close calls failed", closeErrs.Load())
	}
	if tm, _ := ctx.Telemetry(); tm.LiveBuffers != 0 {
		t.Fatalf("LiveBuffers = %d", tm.LiveBuffers)
	}
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Close twice, use after close, finalizers
// ---------------------------------------------------------------------------

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	buf, err := ctx.Alloc(64)
	must(t, err, "Alloc")
	must(t, buf.Close(), "Close")
	must(t, buf.Close(), "second Close")
	wantError(t, buf.Upload(0, make([]byte, 4)), vc.StatusInvalidHandle, "Upload after Close")
	_, err = buf.Info()
	wantError(t, err, vc.StatusInvalidHandle, "Info after Close")
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{buf.Arg(), buf.Arg(), buf.Arg()}})
	wantError(t, err, vc.StatusInvalidHandle, "a closed buffer bound")

	must(t, add.Close(), "Program.Close")
	must(t, add.Close(), "second Program.Close")
	_, err = add.Dispatch(addDispatch([]uint32{1}, []uint32{1}, make([]uint32, 1)))
	wantError(t, err, vc.StatusInvalidHandle, "Dispatch after Close")
	_, err = add.Record(addDispatch([]uint32{1}, []uint32{1}, make([]uint32, 1)))
	wantError(t, err, vc.StatusInvalidHandle, "Record after Close")

	// Every object of a closed context: Close does nothing, use is an error.
	other, err := vc.NewContext(0)
	must(t, err, "NewContext")
	add2 := addProgram(t, other)
	b2, _ := other.Alloc(64)
	pinned, err := other.AllocPinned(4096)
	must(t, err, "AllocPinned")
	heap, err := vc.AllocHostMemory(4096)
	must(t, err, "AllocHostMemory")
	must(t, heap.Register(other), "Register")
	in := []uint32{1, 2, 3}
	out := make([]uint32, 3)
	pd, err := add2.DispatchAsync(addDispatch(in, in, out))
	must(t, err, "DispatchAsync")
	g, err := add2.Record(addDispatch(in, in, out))
	must(t, err, "Record")
	seq, err := other.NewSequence([]vc.Step{vc.FillStep(b2, 0, 64, 1)}, nil)
	must(t, err, "NewSequence")
	img, err := other.NewEgraphImage(vc.NodesToColumns([]vc.EgraphNode{{Class: 0, Op: 1}}))
	must(t, err, "NewEgraphImage")

	must(t, other.Close(), "Context.Close")
	must(t, other.Close(), "second Context.Close")
	_, err = other.Telemetry()
	wantError(t, err, vc.StatusInvalidHandle, "Telemetry after Close")
	_, err = other.Alloc(4)
	wantError(t, err, vc.StatusInvalidHandle, "Alloc after Close")
	wantError(t, b2.Upload(0, []byte{1}), vc.StatusStaleHandle, "a buffer of a closed context")
	_, err = add2.Dispatch(addDispatch(in, in, out))
	wantError(t, err, vc.StatusStaleHandle, "a program of a closed context")
	wantError(t, pd.Wait(context.Background()), vc.StatusStaleHandle, "a pending of a closed context")
	_, err = g.Launch()
	wantError(t, err, vc.StatusStaleHandle, "a graph of a closed context")
	_, err = seq.Run()
	wantError(t, err, vc.StatusStaleHandle, "a sequence of a closed context")
	_, err = img.Info()
	wantError(t, err, vc.StatusStaleHandle, "an e-graph image of a closed context")
	if pinned.Bytes() != nil || pinned.Pointer() != nil {
		t.Fatal("pinned memory of a closed context is still readable")
	}
	_, err = pinned.WriteAt([]byte{1}, 0)
	wantError(t, err, vc.StatusInvalidHandle, "WriteAt pinned memory of a closed context")
	if heap.Registered() {
		t.Fatal("still registered after its context's Close")
	}
	for name, c := range map[string]interface{ Close() error }{
		"Buffer": b2, "Program": add2, "Pending": pd, "Graph": g, "Sequence": seq,
		"EgraphImage": img, "pinned HostMemory": pinned, "heap HostMemory": heap,
	} {
		must(t, c.Close(), name+".Close after the context's Close")
		must(t, c.Close(), name+" second Close")
	}
	_, err = heap.ReadAt(make([]byte, 1), 0)
	wantError(t, err, vc.StatusInvalidHandle, "ReadAt after Close")
	_, err = vc.View[uint32](heap)
	wantError(t, err, vc.StatusInvalidHandle, "View after Close")

	// Zero values are closed objects, not crashes.
	var zb vc.Buffer
	wantError(t, zb.Upload(0, []byte{1}), vc.StatusInvalidHandle, "zero Buffer")
	var zp vc.Program
	_, err = zp.Dispatch(nil)
	wantError(t, err, vc.StatusInvalidHandle, "zero Program")
	var zc vc.Context
	_, err = zc.DeviceInfo()
	wantError(t, err, vc.StatusInvalidHandle, "zero Context")
	must(t, zc.Close(), "zero Context Close")
	var zg vc.Graph
	_, err = zg.Info()
	wantError(t, err, vc.StatusInvalidHandle, "zero Graph")
	var zpd vc.Pending
	wantError(t, zpd.Wait(context.Background()), vc.StatusInvalidHandle, "zero Pending")
	assertNoMisuse(t)
}

// The finalizers are a safety net: objects dropped without Close are
// released by the garbage collector.
func TestFinalizersReleaseDroppedObjects(t *testing.T) {
	ctx := testContext(t)
	func() {
		add := addProgram(t, ctx)
		for i := 0; i < 10; i++ {
			if _, err := ctx.Alloc(1024); err != nil {
				t.Fatal(err)
			}
		}
		in := []uint32{1, 2}
		if _, err := add.DispatchAsync(addDispatch(in, in, make([]uint32, 2))); err != nil {
			t.Fatal(err)
		}
		if _, err := ctx.AllocPinned(4096); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		must(t, ctx.Trim(), "Trim") // the pools' cached bytes count as live
		tm, err := ctx.Telemetry()
		must(t, err, "Telemetry")
		if tm.LiveBuffers == 0 && tm.LivePrograms == 0 && tm.LivePendings == 0 && tm.PinnedBytesLive == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finalizers did not release: %+v", tm)
		}
		time.Sleep(10 * time.Millisecond)
	}
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

func TestBadInputIsAnErrorWithAFix(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	a, b := make([]uint32, 10), make([]uint32, 10)
	out := make([]uint32, 10)
	_, err := add.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(a)}, Params: []uint32{10}})
	wantError(t, err, vc.StatusInvalidArgument, "too few bindings")
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(a), vc.In(b), vc.In(out)}, Params: []uint32{10}})
	wantError(t, err, vc.StatusInvalidArgument, "an output bound as an input")
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(make([]byte, 7)), vc.In(b), vc.Out(out)}, Params: []uint32{10}})
	wantError(t, err, vc.StatusInvalidArgument, "7 bytes of 4-byte elements")
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{{}, vc.In(b), vc.Out(out)}})
	wantError(t, err, vc.StatusInvalidArgument, "an empty Arg")
	inc := incProgram(t, ctx)
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOutTo(a, make([]uint32, 3))}})
	e := wantError(t, err, vc.StatusInvalidArgument, "InOutTo of different lengths")
	if e.CUResult != 0 {
		t.Fatalf("CUResult %d", e.CUResult)
	}

	prog := func(d vc.ProgramDesc) error {
		p, err := ctx.NewProgram(d)
		if err == nil {
			p.Close()
		}
		return err
	}
	code := []byte(testkernels.AddPTX)
	wantError(t, prog(vc.ProgramDesc{Code: code, Entry: "no_such_kernel", Bindings: addBindings()}),
		vc.StatusEntryNotFound, "entry not found")
	wantError(t, prog(vc.ProgramDesc{Code: code, Entry: "bad\x00entry", Bindings: addBindings()}),
		vc.StatusInvalidArgument, "NUL in the entry")
	wantError(t, prog(vc.ProgramDesc{Entry: "e"}), vc.StatusInvalidArgument, "no code")
	wantError(t, prog(vc.ProgramDesc{Code: code, Entry: testkernels.AddEntry, Bindings: addBindings(),
		WorkgroupSize: [3]uint32{0, 4, 1}}), vc.StatusInvalidArgument, "workgroup x of 0")
	wantError(t, prog(vc.ProgramDesc{Kind: vc.CodeBinary, Code: []byte("not an image"), Entry: testkernels.AddEntry,
		Bindings: addBindings()}), vc.StatusInvalidArgument, "a binary that is no image")
	wantError(t, prog(vc.ProgramDesc{Code: code, Entry: testkernels.AddEntry,
		Bindings: []vc.BindingDecl{{Role: 99}}}), vc.StatusInvalidArgument, "a bad role")

	// A buffer of another context.
	other, err := vc.NewContext(0)
	must(t, err, "NewContext")
	defer other.Close()
	foreign, _ := other.Alloc(40)
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{foreign.Arg(), vc.In(b), vc.Out(out)}, Params: []uint32{10}})
	wantError(t, err, vc.StatusInvalidArgument, "a buffer of another context")
	// A resident range beyond the buffer.
	small, _ := ctx.Alloc(16)
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{small.Range(8, 16), vc.In(b), vc.Out(out)}, Params: []uint32{10}})
	wantError(t, err, vc.StatusOutOfRange, "a range past the buffer")
	// Host ranges outside their memory.
	hm, _ := vc.AllocHostMemory(64)
	defer hm.Close()
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{hm.Range(32, 64).In(), vc.In(b), vc.Out(out)}})
	wantError(t, err, vc.StatusOutOfRange, "a host range past its memory")
	_, err = vc.AllocHostMemory(0)
	wantError(t, err, vc.StatusInvalidArgument, "AllocHostMemory(0)")
	_, err = hm.WriteAt(make([]byte, 8), 60)
	wantError(t, err, vc.StatusOutOfRange, "WriteAt past the end")
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Pinned and registered host memory
// ---------------------------------------------------------------------------

func TestPinnedAndRegisteredMemory(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 10_000
	r := newRng(8)
	a, b := r.u32s(n), r.u32s(n)

	pa, err := ctx.AllocPinned(4 * n)
	must(t, err, "AllocPinned")
	if !pa.Pinned() || pa.Len() != 4*n || uintptr(pa.Pointer())%4096 != 0 {
		t.Fatalf("pinned memory: %v %d %p", pa.Pinned(), pa.Len(), pa.Pointer())
	}
	for _, v := range pa.Bytes() {
		if v != 0 {
			t.Fatal("not zeroed")
		}
	}
	_, err = pa.WriteAt(vc.AsBytes(a), 0)
	must(t, err, "WriteAt")
	pout, err := ctx.AllocPinned(4 * n)
	must(t, err, "AllocPinned")
	if tm, _ := ctx.Telemetry(); tm.PinnedBytesLive < 8*n {
		t.Fatalf("PinnedBytesLive %d", tm.PinnedBytesLive)
	}
	// Async into pinned memory: written in place by the wait.
	pd, err := add.DispatchAsync(&vc.Dispatch{
		Args: []vc.Arg{pa.All().In(), vc.In(b), pout.All().Out()}, Params: []uint32{n},
	})
	must(t, err, "DispatchAsync")
	_, err = pd.Finish(context.Background())
	must(t, err, "Finish")
	view, err := vc.View[uint32](pout)
	must(t, err, "View")
	checkSum(t, a, b, view, "pinned")
	// Uploads and downloads in place.
	buf, _ := ctx.Alloc(4 * n)
	must(t, buf.UploadHost(0, pa.All()), "UploadHost")
	must(t, buf.DownloadHost(0, pout.All()), "DownloadHost")
	back := make([]uint32, n)
	_, err = pout.ReadAt(vc.AsBytes(back), 0)
	must(t, err, "ReadAt")
	for i := range a {
		if back[i] != a[i] {
			t.Fatalf("back[%d] = %d", i, back[i])
		}
	}
	odd, _ := vc.AllocHostMemory(6)
	_, err = vc.View[uint32](odd)
	wantError(t, err, vc.StatusInvalidArgument, "a u32 view of 6 bytes")
	must(t, odd.Close(), "Close")
	must(t, pout.Close(), "Close")

	// C heap memory, registered: DMA in place, also for async outputs.
	hb, err := vc.AllocHostMemory(4 * n)
	must(t, err, "AllocHostMemory")
	hout, err := vc.AllocHostMemory(4 * n)
	must(t, err, "AllocHostMemory")
	_, _ = hb.WriteAt(vc.AsBytes(b), 0)
	must(t, hb.Register(ctx), "Register")
	must(t, hout.Register(ctx), "Register")
	wantError(t, hout.Register(ctx), vc.StatusInvalidState, "registered twice")
	if fake() {
		s, _ := fakedriver.Read()
		if s.RegisteredRangesLive < 2 {
			t.Fatalf("RegisteredRangesLive %d", s.RegisteredRangesLive)
		}
	}
	pd, err = add.DispatchAsync(&vc.Dispatch{
		Args: []vc.Arg{vc.In(a), hb.All().In(), hout.All().Out()}, Params: []uint32{n},
	})
	must(t, err, "DispatchAsync")
	// Closing memory a pending uses defers the free until the pending ends.
	must(t, hb.Close(), "Close while in use")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Close")
	hv, _ := vc.View[uint32](hout)
	checkSum(t, a, b, hv, "registered")
	must(t, hout.Unregister(), "Unregister")
	must(t, hout.Unregister(), "Unregister twice")
	checkSum(t, a, b, hv, "after unregistering")
	must(t, hout.Close(), "Close")
	_, err = ctx.AllocPinned(0)
	wantError(t, err, vc.StatusInvalidArgument, "AllocPinned(0)")
	// Pinned memory cannot be registered on top.
	wantError(t, pa.Register(ctx), vc.StatusInvalidArgument, "register pinned memory")
	must(t, pa.Close(), "Close")
	assertNoMisuse(t)
}

// An asynchronous dispatch's Go-slice outputs go through C memory: with the
// fake driver deferring host copies to the next wait (FAKE_CUDA_DEFER_COPIES=1
// in the run script), a copy that read or wrote Go memory after the call
// returned would show here.
func TestAsyncGoSlicesAcrossManyBindings(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	r := newRng(9)
	var pendings []*vc.Pending
	var outs, as, bs [][]uint32
	for i := 0; i < 20; i++ {
		m := 1 + int(r.below(70_000))
		a, b := r.u32s(m), r.u32s(m)
		out := make([]uint32, m)
		pd, err := add.DispatchAsync(addDispatch(a, b, out))
		must(t, err, "DispatchAsync")
		// The inputs are read before the call returns: scribble on them.
		aa, bb := append([]uint32(nil), a...), append([]uint32(nil), b...)
		for j := range a {
			a[j], b[j] = 0, 0
		}
		pendings = append(pendings, pd)
		outs, as, bs = append(outs, out), append(as, aa), append(bs, bb)
	}
	for i := len(pendings) - 1; i >= 0; i-- {
		_, err := pendings[i].Finish(context.Background())
		must(t, err, "Finish")
		checkSum(t, as[i], bs[i], outs[i], "async")
	}
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Programs: explicit parameter lists, shared memory, binaries, CUDA source
// ---------------------------------------------------------------------------

func saxpyProgram(t *testing.T, ctx *vc.Context) *vc.Program {
	p, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.SaxpyPTX), Entry: testkernels.SaxpyEntry,
		Bindings: []vc.BindingDecl{{Role: vc.RoleInput, Name: "x"}, {Role: vc.RoleInputOutput, Name: "y"}},
		Params: []vc.Param{{Kind: vc.ParamScalar32, Index: 0}, {Kind: vc.ParamBinding, Index: 0},
			{Kind: vc.ParamBinding, Index: 1}, {Kind: vc.ParamScalar64, Index: 1}},
		WorkgroupSize: [3]uint32{128},
	})
	must(t, err, "the saxpy program")
	return p
}

func TestExplicitParameterListSaxpy(t *testing.T) {
	ctx := testContext(t)
	saxpy := saxpyProgram(t, ctx)
	const n = 3000
	x := make([]float32, n)
	y := make([]float32, n)
	for i := range x {
		x[i] = float32(i % 1000)
		y[i] = float32(i % 7)
	}
	y0 := append([]float32(nil), y...)
	const a = 3.0
	_, err := saxpy.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(x), vc.InOut(y)}, Scalars: []uint64{vc.F32(a), n}})
	must(t, err, "saxpy")
	for i := range y {
		if y[i] != a*x[i]+y0[i] {
			t.Fatalf("y[%d] = %v, expected %v", i, y[i], a*x[i]+y0[i])
		}
	}
	// Only the first half: n is a scalar, not the binding size.
	y2 := append([]float32(nil), y0...)
	_, err = saxpy.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(x), vc.InOut(y2)}, Scalars: []uint64{vc.F32(a), n / 2}})
	must(t, err, "saxpy half")
	for i := range y2 {
		want := y0[i]
		if i < n/2 {
			want = a*x[i] + y0[i]
		}
		if y2[i] != want {
			t.Fatalf("half: y[%d] = %v, expected %v", i, y2[i], want)
		}
	}
	_, err = saxpy.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(x), vc.InOut(y2)}, Scalars: []uint64{vc.F32(a)}})
	wantError(t, err, vc.StatusInvalidArgument, "a missing scalar")
	assertNoMisuse(t)
}

func TestParameterKindsReachTheKernel(t *testing.T) {
	if !fake() {
		t.Skip("the fake driver records the probe's arguments")
	}
	ctx := testContext(t)
	probe, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.ProbePTX), Entry: testkernels.ProbeEntry,
		Bindings: []vc.BindingDecl{{Role: vc.RoleInput}},
		Params: []vc.Param{{Kind: vc.ParamScalar64, Index: 0}, {Kind: vc.ParamNullPointer},
			{Kind: vc.ParamScalar32, Index: 1}, {Kind: vc.ParamWords}},
		WorkgroupSize: [3]uint32{32},
	})
	must(t, err, "probe")
	data := make([]uint32, 32)
	for i := range data {
		data[i] = 5
	}
	_, err = probe.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(data)},
		Scalars: []uint64{0x1122334455667788, 0xFFFFFFFFAABBCCDD}, Params: []uint32{777}})
	must(t, err, "probe dispatch")
	s, _ := fakedriver.Read()
	if s.ProbeA != 0x1122334455667788 || s.ProbeB != 0 || s.ProbeC != 0xAABBCCDD || s.ProbeD0 != 777 {
		t.Fatalf("probe saw %#x %#x %#x %d", s.ProbeA, s.ProbeB, s.ProbeC, s.ProbeD0)
	}
	probe2, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.ProbePTX), Entry: testkernels.ProbeEntry,
		Bindings: []vc.BindingDecl{{Role: vc.RoleInput}},
		Params: []vc.Param{{Kind: vc.ParamScalar64, Index: 0}, {Kind: vc.ParamNullPointer},
			{Kind: vc.ParamScalar32, Index: 0}, {Kind: vc.ParamBinding, Index: 0}},
	})
	must(t, err, "probe2")
	_, err = probe2.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(data)}, Scalars: []uint64{42}})
	must(t, err, "probe2 dispatch")
	s, _ = fakedriver.Read()
	if s.ProbeA != 42 || s.ProbeC != 42 || s.ProbeD0 != 5 {
		t.Fatalf("probe2 saw %d %d %d", s.ProbeA, s.ProbeC, s.ProbeD0)
	}
	assertNoMisuse(t)
}

func TestDynamicSharedMemory(t *testing.T) {
	ctx := testContext(t)
	// The default convention skips SHARED bindings: inc(data, params).
	inc, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.IncPTX), Entry: testkernels.IncEntry,
		Bindings:          []vc.BindingDecl{{Role: vc.RoleInputOutput}, {Role: vc.RoleShared, ElementSize: 4, ElementCount: 64}},
		SharedMemoryBytes: 128,
		WorkgroupSize:     [3]uint32{64},
	})
	must(t, err, "inc with shared memory")
	const n = 500
	data := make([]uint32, n)
	for i := range data {
		data[i] = uint32(i)
	}
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data), vc.Shared()}, Params: []uint32{n},
		SharedMemoryBytes: 256})
	must(t, err, "dispatch")
	for i, v := range data {
		if v != uint32(i)+1 {
			t.Fatalf("data[%d] = %d", i, v)
		}
	}
	if fake() {
		if s, _ := fakedriver.Read(); s.LastSharedBytes != 64*4+128+256 {
			t.Fatalf("the launch got %d bytes of dynamic shared memory", s.LastSharedBytes)
		}
	}
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data), vc.Shared()}, Params: []uint32{n},
		SharedMemoryBytes: 1 << 30})
	wantError(t, err, vc.StatusLimitExceeded, "1 GiB of shared memory")
	assertNoMisuse(t)
}

func TestCooperativeLaunch(t *testing.T) {
	ctx := testContext(t)
	info, err := ctx.DeviceInfo()
	must(t, err, "DeviceInfo")
	inc := incProgram(t, ctx)
	const n = 256
	data := make([]uint32, n)
	for i := range data {
		data[i] = uint32(i)
	}
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{n}, Cooperative: true})
	if !info.CooperativeLaunch {
		wantError(t, err, vc.StatusLimitExceeded, "cooperative launch without support")
		return
	}
	must(t, err, "cooperative dispatch")
	for i, v := range data {
		if v != uint32(i)+1 {
			t.Fatalf("data[%d] = %d", i, v)
		}
	}
	big := make([]uint32, 1<<20)
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(big)}, Params: []uint32{1 << 20},
		Grid: [3]uint32{1 << 16, 1, 1}, Block: [3]uint32{32, 1, 1}, Cooperative: true})
	wantError(t, err, vc.StatusLimitExceeded, "a grid that cannot be co-resident")
	_, err = inc.Record(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{n}, Cooperative: true})
	wantError(t, err, vc.StatusInvalidArgument, "recording a cooperative dispatch")
	assertNoMisuse(t)
}

func TestCubinAndFatbinPrograms(t *testing.T) {
	ctx := testContext(t)
	dir := os.Getenv("VYRE_CUDA_TEST_KERNELS_DIR")
	if dir == "" {
		t.Skip("set VYRE_CUDA_TEST_KERNELS_DIR to build/<preset>/tests/support")
	}
	for _, name := range []string{"test_kernels.cubin", "test_kernels.fatbin"} {
		image, err := os.ReadFile(filepath.Join(dir, name))
		must(t, err, name)
		add, err := ctx.NewProgram(vc.ProgramDesc{Kind: vc.CodeBinary, Code: image, Entry: testkernels.AddEntry,
			Bindings: addBindings()})
		must(t, err, name)
		const n = 777
		r := newRng(10)
		a, b := r.u32s(n), r.u32s(n)
		out := make([]uint32, n)
		_, err = add.Dispatch(addDispatch(a, b, out))
		must(t, err, name+" dispatch")
		checkSum(t, a, b, out, name)
		_, err = ctx.NewProgram(vc.ProgramDesc{Kind: vc.CodeBinary, Code: image[:len(image)/2],
			Entry: testkernels.AddEntry, Bindings: addBindings()})
		wantError(t, err, vc.StatusInvalidArgument, "a cut "+name)
	}
	assertNoMisuse(t)
}

const addSource = `
extern "C" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b,
                                             unsigned* out, const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) out[i] = a[i] + b[i];
}
`

func TestCUDASourceThroughNVRTC(t *testing.T) {
	ctx := testContext(t)
	add, err := ctx.NewProgram(vc.ProgramDesc{Kind: vc.CodeCUDASource, Code: []byte(addSource),
		Entry: testkernels.AddEntry, Bindings: addBindings(), CompileOptions: []string{"-std=c++17"}})
	if errors.Is(err, vc.StatusNVRTCUnavailable) {
		wantError(t, err, vc.StatusNVRTCUnavailable, "NVRTC")
		t.Skipf("NVRTC unavailable here: %v", err)
	}
	must(t, err, "NVRTC program")
	const n = 1500
	r := newRng(11)
	a, b := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	_, err = add.Dispatch(addDispatch(a, b, out))
	must(t, err, "dispatch")
	checkSum(t, a, b, out, "NVRTC")
	_, err = ctx.NewProgram(vc.ProgramDesc{Kind: vc.CodeCUDASource,
		Code: []byte(`extern "C" __global__ void k() { undeclared_identifier_xyz; }`), Entry: "k"})
	e := wantError(t, err, vc.StatusCompileFailed, "a compile error")
	if !strings.Contains(e.Log, "undeclared_identifier_xyz") || !strings.Contains(e.Message, "undeclared_identifier_xyz") {
		t.Fatalf("the NVRTC log is missing: %v / %q", e, e.Log)
	}
	assertNoMisuse(t)
}

// CUDA C++ passed with the default code kind (PTX) fails in the PTX JIT; the
// library's Fix names the code kind in every binding's words, this
// package's as vyrecuda.CodeCUDASource. Doing what the Fix says works.
func TestCUDASourceAsPTXNamesTheGoCodeKind(t *testing.T) {
	ctx := testContext(t)
	_, err := ctx.NewProgram(vc.ProgramDesc{Code: []byte(addSource), Entry: testkernels.AddEntry,
		Bindings: addBindings()})
	e := wantError(t, err, vc.StatusCompileFailed, "CUDA C++ as PTX")
	// The spelling a Go user types: the package's name and the constant's.
	const goName = "vyrecuda.CodeCUDASource"
	if !strings.Contains(e.Message, goName) || !strings.Contains(e.Fix(), goName) {
		t.Fatalf("the Fix does not name %s (the Go code kind): %q", goName, e.Message)
	}
	if got := reflect.TypeOf(vc.CodeCUDASource).String(); got != "vyrecuda.CodeKind" {
		t.Fatalf("the code kind's type is %s: update the library's Fix (src/runtime/program/module_cache.cc)", got)
	}
	add, err := ctx.NewProgram(vc.ProgramDesc{Kind: vc.CodeCUDASource, Code: []byte(addSource),
		Entry: testkernels.AddEntry, Bindings: addBindings()})
	if errors.Is(err, vc.StatusNVRTCUnavailable) {
		wantError(t, err, vc.StatusNVRTCUnavailable, "NVRTC")
		t.Logf("NVRTC unavailable here, so the Fix's code kind is not tried: %v", err)
		return
	}
	must(t, err, "the program with the Fix's code kind")
	defer add.Close()
	const n = 1000
	r := newRng(12)
	a, b := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	_, err = add.Dispatch(addDispatch(a, b, out))
	must(t, err, "dispatch")
	checkSum(t, a, b, out, "CUDA C++ with the Fix's code kind")
	assertNoMisuse(t)
}

func TestAHugeJITLogRidesOnTheError(t *testing.T) {
	if !fake() {
		t.Skip("the fake's JIT fails on a marker with a log of that size")
	}
	ctx := testContext(t)
	pattern := "fake ptxas: error: \u00e9t\u00e9 \u2713 a line of a long JIT log\n"
	const n = 150_000
	want := strings.Repeat(pattern, n/len(pattern)+1)[:n]
	for _, entry := range []string{testkernels.AddEntry, strings.Repeat("e", 10_000)} {
		code := ".version 7.0\n// fake-jit-log-bytes: 150000\n"
		_, err := ctx.NewProgram(vc.ProgramDesc{Code: []byte(code), Entry: entry, Bindings: addBindings()})
		e := wantError(t, err, vc.StatusCompileFailed, "a JIT failure")
		first := strings.SplitN(e.Message, "\n", 2)[0]
		if len(first) > 1023 || !strings.Contains(first, ". Fix: ") || !strings.HasSuffix(first, ".") {
			t.Fatalf("first line (%d bytes): %q", len(first), first)
		}
		if len(e.Message) > 8191 || !strings.Contains(e.Message, "[log truncated: ") {
			t.Fatalf("message of %d bytes", len(e.Message))
		}
		if e.Log != want {
			t.Fatalf("log of %d bytes, expected %d", len(e.Log), len(want))
		}
		if e.CUResult == 0 {
			t.Fatal("no CUresult")
		}
	}
	// LastError and LastErrorLog read the thread's error again (the
	// goroutine locked to its thread since the failing call).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, err := ctx.NewProgram(vc.ProgramDesc{Code: []byte(".version 7.0\n// fake-jit-log-bytes: 100\n"),
		Entry: "e", Bindings: addBindings()})
	wantError(t, err, vc.StatusCompileFailed, "JIT failure")
	last := vc.LastError()
	wantError(t, last, vc.StatusCompileFailed, "LastError")
	if log := vc.LastErrorLog(); len(log) != 100 || !strings.HasPrefix(log, "fake ptxas") {
		t.Fatalf("LastErrorLog: %q", log)
	}
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Graphs and sequences
// ---------------------------------------------------------------------------

func TestHostGraphRecordAndReplay(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 3000
	r := newRng(12)
	a, b := r.u32s(n), r.u32s(n)
	sample := make([]uint32, n)
	g, err := add.Record(addDispatch(a, b, sample))
	must(t, err, "Record")
	for _, v := range sample {
		if v != 0 {
			t.Fatal("recording ran the kernel")
		}
	}
	info, err := g.Info()
	must(t, err, "Info")
	if info.FromSequence || info.KernelNodeCount != 1 || info.HostInputBytes != 8*n || info.HostOutputBytes != 4*n ||
		info.ContextHandle != ctx.Handle() {
		t.Fatalf("info %+v", info)
	}
	kinds, err := g.NodeKinds()
	must(t, err, "NodeKinds")
	kernels, memcpys := 0, 0
	for _, k := range kinds {
		switch k {
		case vc.GraphNodeKernel:
			kernels++
		case vc.GraphNodeMemcpy:
			memcpys++
		}
	}
	if uint64(len(kinds)) != info.NodeCount || kernels != 1 || memcpys == 0 {
		t.Fatalf("kinds %v", kinds)
	}
	replay := func(a, b, out []uint32) error {
		_, err := g.Replay(&vc.Replay{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}})
		return err
	}
	for round := 0; round < 3; round++ {
		a2, b2 := r.u32s(n), r.u32s(n)
		out := make([]uint32, n)
		must(t, replay(a2, b2, out), "Replay")
		checkSum(t, a2, b2, out, "graph replay")
	}
	tm, _ := ctx.Telemetry()
	skipped := tm.GraphUploadsSkipped
	a3, b3 := r.u32s(n), r.u32s(n)
	for i := 0; i < 2; i++ {
		out := make([]uint32, n)
		must(t, replay(a3, b3, out), "Replay")
		checkSum(t, a3, b3, out, "unchanged inputs")
	}
	if tm, _ := ctx.Telemetry(); tm.GraphUploadsSkipped != skipped+1 {
		t.Fatalf("GraphUploadsSkipped %d, expected %d", tm.GraphUploadsSkipped, skipped+1)
	}
	if info, _ := g.Info(); info.Replays != 5 {
		t.Fatalf("Replays %d", info.Replays)
	}
	// Asynchronous replay; another while it is unwaited is refused.
	out := make([]uint32, n)
	pd, err := g.ReplayAsync(&vc.Replay{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}, DeviceTiming: true})
	must(t, err, "ReplayAsync")
	wantError(t, replay(a, b, make([]uint32, n)), vc.StatusInvalidState, "a replay while one is unwaited")
	must(t, pd.Wait(context.Background()), "Wait")
	if tmg, err := pd.Timing(); err != nil || tmg.Wall <= 0 {
		t.Fatalf("timing %+v %v", tmg, err)
	}
	must(t, pd.Close(), "Close")
	checkSum(t, a, b, out, "async replay")
	// Shape mismatch and missing bindings.
	wantError(t, replay(make([]uint32, n-1), b, out), vc.StatusShapeMismatch, "a shorter input")
	_, err = g.Launch()
	wantError(t, err, vc.StatusInvalidArgument, "no bindings for a graph with host bindings")
	must(t, g.Close(), "Close")
	must(t, g.Close(), "Close twice")
	assertNoMisuse(t)
}

func TestResidentGraphRebindElementCountAndNodeUpdate(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 1024
	r := newRng(13)
	a, b := r.u32s(n), r.u32s(n)
	da, _ := ctx.Upload(vc.AsBytes(a))
	db, _ := ctx.Upload(vc.AsBytes(b))
	dout, _ := ctx.Alloc(4 * n)
	g, err := add.Record(&vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}})
	must(t, err, "Record")
	_, err = g.Launch()
	must(t, err, "Launch")
	got, _ := vc.Read[uint32](dout)
	checkSum(t, a, b, got, "resident graph")
	info, _ := g.Info()
	if info.ElementCount != n || info.CapacityElements != n {
		t.Fatalf("info %+v", info)
	}
	// Rebind to other buffers.
	a2, b2 := r.u32s(n), r.u32s(n)
	ea, _ := ctx.Upload(vc.AsBytes(a2))
	eb, _ := ctx.Upload(vc.AsBytes(b2))
	eout, _ := ctx.Alloc(4 * n)
	_, err = g.Replay(&vc.Replay{Args: []vc.Arg{ea.Arg(), eb.Arg(), eout.Arg()}})
	must(t, err, "rebind")
	got, _ = vc.Read[uint32](eout)
	checkSum(t, a2, b2, got, "rebound graph")
	// Fewer elements: a smaller grid and parameter words.
	const m = 300
	fresh, _ := ctx.Alloc(4 * n)
	must(t, fresh.Upload(0, make([]byte, 4*n)), "zero")
	_, err = g.Replay(&vc.Replay{Args: []vc.Arg{ea.Arg(), eb.Arg(), fresh.Arg()}, ElementCount: m, Params: []uint32{m}})
	must(t, err, "element count")
	got, _ = vc.Read[uint32](fresh)
	checkSum(t, a2[:m], b2[:m], got[:m], "element count")
	for i := m; i < n; i++ {
		if got[i] != 0 {
			t.Fatalf("got[%d] = %d past the element count", i, got[i])
		}
	}
	_, err = g.Replay(&vc.Replay{ElementCount: 2*n + 1})
	wantError(t, err, vc.StatusLimitExceeded, "past the capacity class")
	// A kernel node's grid: 2 blocks of 256 cover 512 elements.
	kinds, _ := g.NodeKinds()
	kernel := -1
	for i, k := range kinds {
		if k == vc.GraphNodeKernel {
			kernel = i
		}
	}
	_, err = g.Replay(&vc.Replay{ElementCount: n, Params: []uint32{n}})
	must(t, err, "back to n")
	must(t, g.UpdateKernelNode(uint64(kernel), vc.KernelNodeUpdate{SetGrid: true, Grid: [3]uint32{2, 1, 1}}), "UpdateKernelNode")
	a3, b3 := r.u32s(n), r.u32s(n)
	must(t, ea.Upload(0, vc.AsBytes(a3)), "Upload")
	must(t, eb.Upload(0, vc.AsBytes(b3)), "Upload")
	_, err = g.Launch()
	must(t, err, "Launch")
	got, _ = vc.Read[uint32](fresh)
	checkSum(t, a3[:512], b3[:512], got[:512], "updated grid")
	for i := 512; i < n; i++ {
		if got[i] != 0 {
			t.Fatalf("got[%d] = %d: past the updated grid", i, got[i])
		}
	}
	wantError(t, g.UpdateKernelNode(uint64(kernel), vc.KernelNodeUpdate{}), vc.StatusInvalidArgument, "no update flags")
	wantError(t, g.UpdateKernelNode(1000, vc.KernelNodeUpdate{SetGrid: true, Grid: [3]uint32{1, 1, 1}}),
		vc.StatusOutOfRange, "node 1000")
	_, err = g.NodeKind(1000)
	wantError(t, err, vc.StatusOutOfRange, "NodeKind(1000)")
	// A freed buffer still bound is refused until rebound.
	must(t, ea.Close(), "Close")
	_, err = g.Launch()
	wantError(t, err, vc.StatusStaleHandle, "a freed buffer bound")
	_, err = g.Replay(&vc.Replay{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}})
	must(t, err, "rebound after the free")
	assertNoMisuse(t)
}

func TestGraphLaunchOnAStreamAndNodeInfo(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 1000
	r := newRng(23)
	a, b := r.u32s(n), r.u32s(n)
	da, _ := ctx.Upload(vc.AsBytes(a))
	db, _ := ctx.Upload(vc.AsBytes(b))
	dout, _ := ctx.Alloc(4 * n)
	g, err := add.Record(&vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}})
	must(t, err, "Record")
	for _, stream := range []uint64{vc.StreamLegacy, vc.StreamPerThread} {
		poison := make([]uint32, n)
		for i := range poison {
			poison[i] = 0xA5A5A5A5
		}
		must(t, dout.Upload(0, vc.AsBytes(poison)), "poison")
		pd, err := g.LaunchOnStream(nil, stream)
		must(t, err, "LaunchOnStream")
		must(t, pd.Wait(context.Background()), "Wait")
		must(t, pd.Close(), "Close")
		got, _ := vc.Read[uint32](dout)
		checkSum(t, a, b, got, "graph launched on a stream")
	}
	if _, err := g.LaunchOnStream(nil, 0); err == nil {
		t.Fatal("stream 0 was accepted")
	} else if e := wantError(t, err, vc.StatusInvalidArgument, "stream 0"); !strings.Contains(e.Error(), "cu_stream is 0") {
		t.Fatalf("message: %v", e)
	}
	kernel := -1
	for i := uint64(0); ; i++ {
		k, err := g.NodeKind(i)
		if err != nil {
			break
		}
		if k == vc.GraphNodeKernel {
			kernel = int(i)
		}
	}
	info, err := g.NodeInfo(uint64(kernel))
	must(t, err, "NodeInfo")
	if info.Kind != vc.GraphNodeKernel || info.CUFunction == 0 || info.CUGraphNode == 0 ||
		info.ArgumentCount != 4 || len(info.Arguments) != 4 || uint64(info.Grid[0])*uint64(info.Block[0]) < n {
		t.Fatalf("kernel node info %+v", info)
	}
	_, err = g.NodeInfo(1000)
	wantError(t, err, vc.StatusOutOfRange, "a node past the end")
	must(t, g.Close(), "Close")
}

func TestHostGraphLaunchedOnAStreamWritesOutputsAtTheWait(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 1000
	r := newRng(29)
	a, b := r.u32s(n), r.u32s(n)
	g, err := add.Record(addDispatch(a, b, make([]uint32, n)))
	must(t, err, "Record")
	a2, b2 := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	for i := range out {
		out[i] = 0xA5A5A5A5
	}
	pd, err := g.LaunchOnStream(&vc.Replay{Args: []vc.Arg{vc.In(a2), vc.In(b2), vc.Out(out)}}, vc.StreamLegacy)
	must(t, err, "LaunchOnStream")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Close")
	checkSum(t, a2, b2, out, "host graph launched on stream 1")
	_, err = g.LaunchOnStream(&vc.Replay{Args: []vc.Arg{vc.In(a2), vc.In(b2), vc.Out(out)}}, 0)
	if e := wantError(t, err, vc.StatusInvalidArgument, "stream 0"); !strings.Contains(e.Error(), "cu_stream is 0") {
		t.Fatalf("message: %v", e)
	}
	// The refusal left no replay in flight: the graph launches again.
	pd, err = g.LaunchOnStream(&vc.Replay{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}}, vc.StreamPerThread)
	must(t, err, "LaunchOnStream after a refusal")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Close")
	checkSum(t, a, b, out, "host graph launched on stream 2")
	must(t, g.Close(), "Close")
	assertNoMisuse(t)
}

func TestSequenceRunMatchesItsGraph(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 2000
	r := newRng(14)
	a, b := r.u32s(n), r.u32s(n)
	const bytes = 4 * n
	da, _ := ctx.Alloc(bytes)
	db, _ := ctx.Alloc(bytes)
	dout, _ := ctx.Alloc(bytes)
	filled, _ := ctx.Alloc(64)
	// a + 4b: four times (dout = da + db; da = dout).
	want := make([]uint32, n)
	for i := range want {
		want[i] = a[i] + 4*b[i]
	}
	hostB, err := ctx.AllocPinned(bytes)
	must(t, err, "AllocPinned")
	_, _ = hostB.WriteAt(vc.AsBytes(b), 0)
	hostFill, err := vc.AllocHostMemory(64)
	must(t, err, "AllocHostMemory")
	for _, mode := range []string{"run", "graph", "graph async"} {
		out := make([]uint32, n)
		for i := range out {
			out[i] = 9
		}
		steps := []vc.Step{
			vc.UploadStep(da, 0, vc.AsBytes(a)),
			vc.UploadHostStep(db, 0, hostB.All()),
			vc.DispatchStep(add, &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}}),
			vc.CopyStep(da, 0, dout, 0, bytes),
			vc.FillStep(filled, 0, 64, 0xAB),
			vc.DownloadStep(dout, 0, vc.AsBytes(out)),
			vc.DownloadHostStep(filled, 0, hostFill.All()),
		}
		seq, err := ctx.NewSequence(steps, &vc.Repeat{First: 2, Count: 2, Times: 4})
		must(t, err, "NewSequence")
		_, _ = hostFill.WriteAt(make([]byte, 64), 0)
		switch mode {
		case "run":
			_, err = seq.Run()
			must(t, err, "Run")
		case "graph":
			g, err := seq.Record()
			must(t, err, "Record")
			must(t, seq.Close(), "the graph outlives its sequence")
			info, _ := g.Info()
			if !info.FromSequence {
				t.Fatalf("info %+v", info)
			}
			_, err = g.Launch()
			must(t, err, "Launch")
			must(t, g.Close(), "Close")
		case "graph async":
			g, err := seq.Record()
			must(t, err, "Record")
			pd, err := g.ReplayAsync(nil)
			must(t, err, "ReplayAsync")
			_, err = seq.Run()
			wantError(t, err, vc.StatusInvalidState, "Run while a replay owns the step memory")
			_, err = g.Launch()
			wantError(t, err, vc.StatusInvalidState, "Launch while a replay owns the step memory")
			must(t, g.Close(), "Close the graph with its replay in flight")
			must(t, seq.Close(), "Close")
			_, err = pd.Finish(context.Background())
			must(t, err, "Finish")
		}
		for i := range want {
			if out[i] != want[i] {
				t.Fatalf("%s: out[%d] = %d, expected %d", mode, i, out[i], want[i])
			}
		}
		for i, v := range hostFill.Bytes() {
			if v != 0xAB {
				t.Fatalf("%s: fill[%d] = %#x", mode, i, v)
			}
		}
		_ = seq.Close()
	}
	if tm, _ := ctx.Telemetry(); tm.SequenceRuns < 1 {
		t.Fatalf("SequenceRuns %d", tm.SequenceRuns)
	}
	// Errors.
	_, err = ctx.NewSequence([]vc.Step{vc.DispatchStep(add, &vc.Dispatch{
		Args: []vc.Arg{vc.In(a), db.Arg(), dout.Arg()}})}, nil)
	wantError(t, err, vc.StatusInvalidArgument, "a host binding in a sequence")
	_, err = ctx.NewSequence([]vc.Step{vc.FillStep(filled, 0, 64, 1)}, &vc.Repeat{First: 0, Count: 5, Times: 2})
	wantError(t, err, vc.StatusOutOfRange, "a repeat past the steps")
	_, err = ctx.NewSequence([]vc.Step{vc.FillStep(filled, 60, 8, 1)}, nil)
	wantError(t, err, vc.StatusOutOfRange, "a fill past the buffer")
	// A buffer freed after the sequence was built.
	tmp, _ := ctx.Alloc(64)
	seq, err := ctx.NewSequence([]vc.Step{vc.FillStep(tmp, 0, 64, 1)}, nil)
	must(t, err, "NewSequence")
	must(t, tmp.Close(), "Close")
	_, err = seq.Run()
	if err == nil {
		t.Fatal("a run over a freed buffer succeeded")
	}
	must(t, seq.Close(), "Close")
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Log callback
// ---------------------------------------------------------------------------

func TestLogCallbackReceivesLines(t *testing.T) {
	ctx := testContext(t)
	var lines atomic.Int32
	var bad atomic.Int32
	must(t, vc.SetLogCallback(func(level vc.LogLevel, message string) {
		if level < vc.LogError || level > vc.LogTrace || message == "" {
			bad.Add(1)
		}
		lines.Add(1)
	}, vc.LogTrace), "SetLogCallback")
	add := addProgram(t, ctx)
	data := make([]uint32, 100)
	for i := range data {
		data[i] = 1
	}
	out := make([]uint32, 100)
	_, err := add.Dispatch(addDispatch(data, data, out))
	must(t, err, "Dispatch")
	must(t, vc.ClearLogCallback(), "ClearLogCallback")
	if lines.Load() == 0 || bad.Load() != 0 {
		t.Fatalf("%d lines, %d bad", lines.Load(), bad.Load())
	}
	// A panicking callback does not unwind into the library.
	must(t, vc.SetLogCallback(func(vc.LogLevel, string) { panic("a callback that panics") }, vc.LogTrace), "SetLogCallback")
	_, err = add.Dispatch(addDispatch(data, data, out))
	must(t, vc.SetLogCallback(nil, vc.LogTrace), "SetLogCallback(nil)")
	must(t, err, "Dispatch with a panicking callback")
	for _, v := range out {
		if v != 2 {
			t.Fatalf("out %d", v)
		}
	}
	assertNoMisuse(t)
}

// ---------------------------------------------------------------------------
// Driver objects are all released (fake driver); device faults
// ---------------------------------------------------------------------------

func TestNoDriverObjectsOutliveTheirContext(t *testing.T) {
	if !fake() {
		t.Skip("reads the fake driver's counters")
	}
	before, _ := fakedriver.Read()
	func() {
		ctx, err := vc.NewContext(0)
		must(t, err, "NewContext")
		add := addProgram(t, ctx)
		const n = 1000
		r := newRng(15)
		a, b := r.u32s(n), r.u32s(n)
		da, _ := ctx.Upload(vc.AsBytes(a))
		db, _ := ctx.Upload(vc.AsBytes(b))
		dout, _ := ctx.Alloc(4 * n)
		out := make([]uint32, n)
		g, err := add.Record(addDispatch(a, b, out))
		must(t, err, "Record")
		_, err = g.Replay(&vc.Replay{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}})
		must(t, err, "Replay")
		pinned, _ := ctx.AllocPinned(4096)
		heap, _ := vc.AllocHostMemory(4096)
		must(t, heap.Register(ctx), "Register")
		pd, err := add.DispatchAsync(&vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}})
		must(t, err, "DispatchAsync")
		seq, err := ctx.NewSequence([]vc.Step{vc.CopyStep(da, 0, db, 0, 64)}, nil)
		must(t, err, "NewSequence")
		_, err = seq.Run()
		must(t, err, "Run")
		checkSum(t, a, b, out, "before release")
		// The context first, then everything else, in any order.
		must(t, ctx.Close(), "Context.Close")
		for _, c := range []interface{ Close() error }{pd, pinned, g, seq, heap, da, add} {
			must(t, c.Close(), "Close after the context")
		}
	}()
	after, _ := fakedriver.Read()
	type pair struct {
		name          string
		before, after uint64
	}
	for _, p := range []pair{
		{"device allocations", before.DeviceAllocationsLive, after.DeviceAllocationsLive},
		{"pinned allocations", before.PinnedAllocationsLive, after.PinnedAllocationsLive},
		{"modules", before.ModulesLive, after.ModulesLive},
		{"streams", before.StreamsLive, after.StreamsLive},
		{"events", before.EventsLive, after.EventsLive},
		{"graphs", before.GraphsLive, after.GraphsLive},
		{"graph execs", before.GraphExecsLive, after.GraphExecsLive},
		{"registered ranges", before.RegisteredRangesLive, after.RegisteredRangesLive},
	} {
		if p.before != p.after {
			t.Errorf("%s live: %d before, %d after", p.name, p.before, p.after)
		}
	}
	if before.PrimaryContextRetains != after.PrimaryContextRetains {
		t.Errorf("primary context retains: %d before, %d after", before.PrimaryContextRetains, after.PrimaryContextRetains)
	}
	assertNoMisuse(t)
}

func TestDeviceFaultCostsOneContext(t *testing.T) {
	if !fake() {
		t.Skip("injects a fault through the fake driver")
	}
	ctx, err := vc.NewContext(0)
	must(t, err, "NewContext")
	inc := incProgram(t, ctx)
	data := make([]uint32, 64)
	must(t, fakedriver.InjectFault(700), "InjectFault") // CUDA_ERROR_ILLEGAL_ADDRESS
	_, err = inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{64}})
	e := wantError(t, err, vc.StatusDeviceFault, "a faulting dispatch")
	if e.CUResult != 700 {
		t.Fatalf("CUResult %d", e.CUResult)
	}
	_, err = ctx.Alloc(64)
	wantError(t, err, vc.StatusDeviceFault, "any later call")
	// Close releases everything; it may report the fault too (the handle is
	// gone either way).
	if err := ctx.Close(); err != nil {
		wantError(t, err, vc.StatusDeviceFault, "the context's Close")
	}
	must(t, ctx.Close(), "a second Close")
	must(t, inc.Close(), "Close after the context")
	// A new context works.
	ctx2 := testContext(t)
	inc2 := incProgram(t, ctx2)
	_, err = inc2.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{64}})
	must(t, err, "a new context after the fault")
	for _, v := range data {
		if v != 1 {
			t.Fatalf("data %d", v)
		}
	}
	assertNoMisuse(t)
}
