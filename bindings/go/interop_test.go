package vyrecuda_test

// Interop with other CUDA code in the process: Context.Wrap over memory the
// test allocates with the driver itself (internal/rawdriver, as CuPy or
// PyTorch would), and Context.WaitStream / SignalStream against a stream the
// test creates.

import (
	"context"
	"strings"
	"testing"
	"unsafe"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/fakedriver"
	"vyre.dev/cuda/bindings/go/internal/rawdriver"
)

func rawAlloc(t *testing.T, bytes uint64) uint64 {
	t.Helper()
	p, err := rawdriver.Alloc(bytes)
	must(t, err, "raw cuMemAlloc")
	return p
}

func TestWrapIsAResidentBindingAndNeverFreesTheMemory(t *testing.T) {
	ctx := testContext(t)
	const n = 2500
	r := newRng(81)
	a, b := r.u32s(n), r.u32s(n)
	pa, pb, pout := rawAlloc(t, 4*n), rawAlloc(t, 4*n), rawAlloc(t, 4*n)
	must(t, rawdriver.Write(pa, vc.AsBytes(a)), "write a")
	must(t, rawdriver.Write(pb, vc.AsBytes(b)), "write b")
	poison := make([]uint32, n)
	for i := range poison {
		poison[i] = 0xDEADBEEF
	}
	must(t, rawdriver.Write(pout, vc.AsBytes(poison)), "poison out")

	wa, err := ctx.Wrap(pa, 4*n)
	must(t, err, "Wrap a")
	wb, err := ctx.Wrap(pb, 4*n)
	must(t, err, "Wrap b")
	wo, err := ctx.Wrap(pout, 4*n)
	must(t, err, "Wrap out")
	info, err := wo.Info()
	must(t, err, "Info")
	if !info.Borrowed || info.DevicePointer != pout || info.Bytes != 4*n {
		t.Fatalf("info %+v", info)
	}
	owned, err := ctx.Alloc(16)
	must(t, err, "Alloc")
	if oi, _ := owned.Info(); oi.Borrowed {
		t.Fatalf("an owned buffer reports Borrowed")
	}
	must(t, owned.Close(), "Close")

	add := addProgram(t, ctx)
	_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{wa.Arg(), wb.Arg(), wo.Arg()}, Params: []uint32{n}})
	must(t, err, "dispatch over wrapped buffers")
	got, err := vc.Read[uint32](wo)
	must(t, err, "Read")
	checkSum(t, a, b, got, "through the library")
	raw := make([]uint32, n)
	must(t, rawdriver.Read(pout, vc.AsBytes(raw), 0), "raw read")
	checkSum(t, a, b, raw, "through the driver")

	a2 := r.u32s(n)
	must(t, wa.Upload(0, vc.AsBytes(a2)), "Upload")
	for _, w := range []*vc.Buffer{wa, wb, wo} {
		must(t, w.Close(), "Close")
	}
	must(t, add.Close(), "Close program")
	must(t, ctx.Trim(), "Trim")
	must(t, rawdriver.Read(pa, vc.AsBytes(raw), 0), "raw read after Close")
	for i, v := range raw {
		if v != a2[i] {
			t.Fatalf("the caller's memory after Close: [%d] = %d, expected %d", i, v, a2[i])
		}
	}
	must(t, ctx.Close(), "Context.Close")
	for _, p := range []uint64{pa, pb, pout} {
		must(t, rawdriver.Free(p), "raw cuMemFree (the library freed borrowed memory?)")
	}
	assertNoMisuse(t)
}

func TestBadWrapsAndStreamZeroAreErrorsWithAFix(t *testing.T) {
	ctx := testContext(t)
	p := rawAlloc(t, 4096)
	defer func() { must(t, rawdriver.Free(p), "raw cuMemFree") }()
	_, err := ctx.Wrap(p, 4097)
	e := wantError(t, err, vc.StatusInvalidArgument, "past the end")
	if !strings.Contains(e.Message, "holds 4096 bytes") || !strings.Contains(e.Message, "4097 bytes were asked") {
		t.Fatalf("message: %s", e.Message)
	}
	_, err = ctx.Wrap(p, 0)
	wantError(t, err, vc.StatusInvalidArgument, "bytes 0")
	_, err = ctx.Wrap(0, 16)
	wantError(t, err, vc.StatusInvalidArgument, "pointer 0")
	host := make([]byte, 4096)
	_, err = ctx.Wrap(uint64(uintptr(unsafe.Pointer(&host[0]))), 4096)
	e = wantError(t, err, vc.StatusInvalidArgument, "host memory")
	if !strings.HasPrefix(e.Message, "vyre_buffer_wrap: ") {
		t.Fatalf("message: %s", e.Message)
	}
	e = wantError(t, ctx.WaitStream(0), vc.StatusInvalidArgument, "WaitStream(0)")
	if !strings.Contains(e.Message, "pass 1 for the legacy default stream") {
		t.Fatalf("message: %s", e.Message)
	}
	wantError(t, ctx.SignalStream(0), vc.StatusInvalidArgument, "SignalStream(0)")
	assertNoMisuse(t)
}

func TestWaitAndSignalOrderWorkOnABorrowedBuffer(t *testing.T) {
	ctx := testContext(t)
	const n = 900
	p := rawAlloc(t, 4*n)
	stream, err := rawdriver.StreamCreate()
	must(t, err, "raw cuStreamCreate")
	w, err := ctx.Wrap(p, 4*n)
	must(t, err, "Wrap")
	inc := incProgram(t, ctx)
	r := newRng(82)
	for round := 0; round < 3; round++ {
		value := r.u32s(1)[0] >> 1
		must(t, rawdriver.MemsetD32(p, value, n, stream), "raw memset")
		must(t, ctx.WaitStream(stream), "WaitStream")
		pd, err := inc.DispatchAsync(&vc.Dispatch{Args: []vc.Arg{w.Arg()}, Params: []uint32{n}, Iterations: 2})
		must(t, err, "DispatchAsync")
		must(t, ctx.SignalStream(stream), "SignalStream")
		raw := make([]uint32, n)
		must(t, rawdriver.Read(p, vc.AsBytes(raw), stream), "raw read on the stream")
		for i, v := range raw {
			if v != value+2 {
				t.Fatalf("round %d: [%d] = %d, expected %d", round, i, v, value+2)
			}
		}
		must(t, pd.Wait(context.Background()), "Wait")
		must(t, pd.Close(), "Pending.Close")
	}
	for _, s := range []uint64{vc.StreamLegacy, vc.StreamPerThread} {
		must(t, ctx.WaitStream(s), "WaitStream(default stream)")
		must(t, ctx.SignalStream(s), "SignalStream(default stream)")
	}
	if fake() {
		before, err := fakedriver.Read()
		must(t, err, "stats")
		must(t, ctx.WaitStream(stream), "WaitStream")
		after, err := fakedriver.Read()
		must(t, err, "stats")
		if after.StreamWaits != before.StreamWaits+1 || after.LastWaitEventStream != stream {
			t.Fatalf("the wait did not record on the stream: %+v", after)
		}
		must(t, ctx.SignalStream(stream), "SignalStream")
		if s, _ := fakedriver.Read(); s.LastWaitStream != stream {
			t.Fatalf("the stream did not wait: %+v", s)
		}
	}
	must(t, w.Close(), "Close")
	must(t, inc.Close(), "Close program")
	must(t, ctx.Close(), "Context.Close")
	must(t, rawdriver.StreamDestroy(stream), "raw cuStreamDestroy")
	must(t, rawdriver.Free(p), "raw cuMemFree")
	assertNoMisuse(t)
}
