package vyrecuda_test

// Graph.SetNodeInfo / SetNodeInfoRaw and Context.BeginCapture .. Capture.End
// (vyre_graph_node_info_set, vyre_capture_*): every replay's output checked
// element by element against a CPU reference over fresh random non-zero
// data, outputs poisoned before; every refusal checked for its status and a
// Fix.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	vc "vyre.dev/cuda/bindings/go"
)

const poisonWord = 0xA5A5A5A5

func poisonBuffer(t *testing.T, b *vc.Buffer, n int) {
	t.Helper()
	p := make([]uint32, n)
	for i := range p {
		p[i] = poisonWord
	}
	must(t, b.Upload(0, vc.AsBytes(p)), "poison")
}

func readU32(t *testing.T, b *vc.Buffer) []uint32 {
	t.Helper()
	got, err := vc.Read[uint32](b)
	must(t, err, "Read")
	return got
}

// checkWords checks got against want element by element.
func checkWords(t *testing.T, got, want []uint32, label string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d words, expected %d", label, len(got), len(want))
	}
	bad, first := 0, -1
	for i := range want {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d words wrong; first [%d] = %#x, expected %#x",
			label, bad, len(want), first, got[first], want[first])
	}
}

func devicePointer(t *testing.T, b *vc.Buffer) uint64 {
	t.Helper()
	info, err := b.Info()
	must(t, err, "Buffer.Info")
	return info.DevicePointer
}

// firstNode is the index of g's first node of `kind`.
func firstNode(t *testing.T, g *vc.Graph, kind vc.GraphNodeKind) uint64 {
	t.Helper()
	kinds, err := g.NodeKinds()
	must(t, err, "NodeKinds")
	for i, k := range kinds {
		if k == kind {
			return uint64(i)
		}
	}
	t.Fatalf("no node of kind %d in %v", kind, kinds)
	return 0
}

// sameNodeInfo checks that what NodeInfo reads back is what was set.
func sameNodeInfo(t *testing.T, got, set vc.GraphNodeInfo) {
	t.Helper()
	if got.Kind != set.Kind || got.CUFunction != set.CUFunction || got.Grid != set.Grid ||
		got.Block != set.Block || got.SharedMemoryBytes != set.SharedMemoryBytes ||
		got.ArgumentCount != set.ArgumentCount || len(got.Arguments) != len(set.Arguments) ||
		got.MemsetDst != set.MemsetDst || got.MemsetValue != set.MemsetValue ||
		got.MemsetElementSize != set.MemsetElementSize || got.MemsetWidth != set.MemsetWidth ||
		got.MemsetHeight != set.MemsetHeight {
		t.Fatalf("node info read back %+v, set %+v", got, set)
	}
	for i := range set.Arguments {
		if got.Arguments[i] != set.Arguments[i] {
			t.Fatalf("argument %d read back %#x, set %#x", i, got.Arguments[i], set.Arguments[i])
		}
	}
}

// A sequence's FILL node set to 4-byte and 2-byte values over part of the
// buffer: the replay writes exactly that, NodeInfo reads it back; refusals
// change nothing.
func TestGraphSetNodeInfoMemsetRoundTrip(t *testing.T) {
	ctx := testContext(t)
	const n = 96
	buf, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	seq, err := ctx.NewSequence([]vc.Step{vc.FillStep(buf, 0, 4*n, 0x11)}, nil)
	must(t, err, "NewSequence")
	g, err := seq.Record()
	must(t, err, "Sequence.Record")
	m := firstNode(t, g, vc.GraphNodeMemset)
	good, err := g.NodeInfo(m)
	must(t, err, "NodeInfo")
	base := devicePointer(t, buf)
	if good.MemsetDst != base || good.MemsetValue != 0x11 || good.MemsetElementSize != 1 ||
		good.MemsetWidth != 4*n || good.MemsetHeight != 1 {
		t.Fatalf("memset node %+v", good)
	}
	r := newRng(301)
	v32 := r.u32s(1)[0]
	v16 := r.u32s(1)[0]&0xFFFF | 1
	cases := []struct {
		size, value, word uint32
		first, words      int
	}{
		{4, v32, v32, 3, n / 2},
		{2, v16, v16 | v16<<16, 10, 7},
		{1, 0xC3, 0xC3C3C3C3, 0, n},
	}
	for _, c := range cases {
		info, err := g.NodeInfo(m)
		must(t, err, "NodeInfo")
		info.MemsetDst = base + uint64(4*c.first)
		info.MemsetElementSize = c.size
		info.MemsetValue = c.value
		info.MemsetWidth = uint64(c.words * 4 / int(c.size))
		must(t, g.SetNodeInfo(m, info), "SetNodeInfo (memset)")
		back, err := g.NodeInfo(m)
		must(t, err, "NodeInfo after the set")
		sameNodeInfo(t, back, info)
		poisonBuffer(t, buf, n)
		_, err = g.Replay(nil)
		must(t, err, "Replay")
		want := make([]uint32, n)
		for i := range want {
			want[i] = poisonWord
			if i >= c.first && i < c.first+c.words {
				want[i] = c.word
			}
		}
		checkWords(t, readU32(t, buf), want, "memset set")
	}
	before, err := g.NodeInfo(m)
	must(t, err, "NodeInfo")
	// Refusals: a memset set as a kernel, an element size of 3, a range past
	// the allocation (checked, not raw).
	wrong := before
	wrong.Kind = vc.GraphNodeKernel
	wantError(t, g.SetNodeInfo(m, wrong), vc.StatusInvalidArgument, "memset info as a kernel")
	wrong = before
	wrong.MemsetElementSize = 3
	wantError(t, g.SetNodeInfoRaw(m, wrong), vc.StatusInvalidArgument, "element size 3")
	wrong = before
	wrong.MemsetDst = base + 4
	wrong.MemsetWidth = 4 * n
	wrong.MemsetElementSize = 1
	e := wantError(t, g.SetNodeInfo(m, wrong), vc.StatusInvalidArgument, "past the allocation")
	if !strings.HasPrefix(e.Message, "vyre_graph_node_info_set: ") {
		t.Fatalf("message: %s", e.Message)
	}
	_, err = g.NodeInfo(1000)
	wantError(t, err, vc.StatusOutOfRange, "NodeInfo(1000)")
	wantError(t, g.SetNodeInfo(1000, before), vc.StatusOutOfRange, "SetNodeInfo(1000)")
	after, err := g.NodeInfo(m)
	must(t, err, "NodeInfo")
	sameNodeInfo(t, after, before)
	must(t, g.Close(), "Graph.Close")
	wantError(t, g.SetNodeInfo(m, before), vc.StatusInvalidHandle, "SetNodeInfo after Close")
	must(t, seq.Close(), "Sequence.Close")
	assertNoMisuse(t)
}

// saxpy's scalar slots (a: SCALAR32, n: SCALAR64) and grid set through the
// node info; the replays compute with them; NodeInfo reads them back.
func TestGraphSetNodeInfoKernelScalars(t *testing.T) {
	ctx := testContext(t)
	saxpy := saxpyProgram(t, ctx)
	const n = 300
	r := newRng(311)
	// Small integers: a*x + y is exact in float32 whatever the rounding.
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(r.below(1000) + 1)
		y[i] = float32(r.below(1000) + 1)
	}
	dx, err := ctx.Upload(vc.AsBytes(x))
	must(t, err, "Upload x")
	dy, err := ctx.Upload(vc.AsBytes(y))
	must(t, err, "Upload y")
	// An explicit grid: 3 blocks of 128 threads cover n.
	g, err := saxpy.Record(&vc.Dispatch{Args: []vc.Arg{dx.Arg(), dy.Arg()},
		Scalars: []uint64{vc.F32(1), n}, Grid: [3]uint32{3, 1, 1}})
	must(t, err, "Record")
	k := firstNode(t, g, vc.GraphNodeKernel)
	info, err := g.NodeInfo(k)
	must(t, err, "NodeInfo")
	if info.ArgumentCount != 4 || len(info.Arguments) != 4 ||
		info.Arguments[1] != devicePointer(t, dx) || info.Arguments[2] != devicePointer(t, dy) {
		t.Fatalf("kernel node %+v", info)
	}
	const a = 2.5
	const count = 200
	info.Arguments[0] = vc.F32(a)
	info.Arguments[3] = count
	info.Grid[0] = 2 // 256 threads still cover count
	must(t, g.SetNodeInfo(k, info), "SetNodeInfo (kernel scalars)")
	back, err := g.NodeInfo(k)
	must(t, err, "NodeInfo after the set")
	sameNodeInfo(t, back, info)
	want := append([]float32(nil), y...)
	for round := 0; round < 2; round++ {
		_, err = g.Launch()
		must(t, err, "Launch")
		for i := 0; i < count; i++ {
			want[i] = float32(a*x[i]) + want[i]
		}
	}
	got, err := vc.Read[float32](dy)
	must(t, err, "Read y")
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("y[%d] = %v, expected %v (count %d)", i, got[i], want[i], count)
		}
	}
	// A SCALAR32 slot's high half must be 0 (checked).
	bad := back
	bad.Arguments = append([]uint64(nil), back.Arguments...)
	bad.Arguments[0] = 1<<32 | vc.F32(2)
	wantError(t, g.SetNodeInfo(k, bad), vc.StatusInvalidArgument, "SCALAR32 high half")
	// Another function or argument count, even raw.
	bad = back
	bad.CUFunction += 8
	wantError(t, g.SetNodeInfoRaw(k, bad), vc.StatusInvalidArgument, "another function")
	bad = back
	bad.Kind = vc.GraphNodeMemset
	wantError(t, g.SetNodeInfo(k, bad), vc.StatusInvalidArgument, "kernel info as a memset")
	// The Go slice must hold the slots NodeInfo gave.
	bad = back
	bad.Arguments = back.Arguments[:3]
	e := wantError(t, g.SetNodeInfo(k, bad), vc.StatusInvalidArgument, "three slots of four")
	if !strings.Contains(e.Message, "Arguments") {
		t.Fatalf("message: %s", e.Message)
	}
	bad.Arguments = make([]uint64, 17)
	wantError(t, g.SetNodeInfo(k, bad), vc.StatusInvalidArgument, "17 slots")
	after, err := g.NodeInfo(k)
	must(t, err, "NodeInfo")
	sameNodeInfo(t, after, back)
	must(t, g.Close(), "Graph.Close")
	assertNoMisuse(t)
}

// A pointer slot moved to another buffer: refused checked (with a Fix),
// taken raw; the replay then writes the other buffer, and a rebinding
// replay takes the slot back.
func TestGraphSetNodeInfoPointerSlotNeedsRaw(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 128
	r := newRng(321)
	a, b := r.u32s(n), r.u32s(n)
	da, _ := ctx.Upload(vc.AsBytes(a))
	db, _ := ctx.Upload(vc.AsBytes(b))
	out, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	other, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	poisonBuffer(t, out, n)
	poisonBuffer(t, other, n)
	g, err := add.Record(&vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), out.Arg()}, Params: []uint32{n}})
	must(t, err, "Record")
	k := firstNode(t, g, vc.GraphNodeKernel)
	info, err := g.NodeInfo(k)
	must(t, err, "NodeInfo")
	outPtr, otherPtr := devicePointer(t, out), devicePointer(t, other)
	if info.Arguments[2] != outPtr {
		t.Fatalf("slot 2 is %#x, out is at %#x", info.Arguments[2], outPtr)
	}
	info.Arguments[2] = otherPtr
	e := wantError(t, g.SetNodeInfo(k, info), vc.StatusInvalidArgument, "a pointer slot changed without raw")
	if !strings.Contains(e.Message, "Fix:") {
		t.Fatalf("message: %s", e.Message)
	}
	back, _ := g.NodeInfo(k)
	if back.Arguments[2] != outPtr {
		t.Fatal("a refused set changed the node")
	}
	must(t, g.SetNodeInfoRaw(k, info), "SetNodeInfoRaw")
	back, _ = g.NodeInfo(k)
	if back.Arguments[2] != otherPtr {
		t.Fatalf("slot 2 reads %#x after the raw set, expected %#x", back.Arguments[2], otherPtr)
	}
	_, err = g.Launch()
	must(t, err, "Launch")
	want := make([]uint32, n)
	for i := range want {
		want[i] = a[i] + b[i]
	}
	checkWords(t, readU32(t, other), want, "the raw slot's buffer")
	checkWords(t, readU32(t, out), make([]uint32, n), "out (zeroed by its memset, not written)")
	// Rebinding rewrites the binding slots.
	poisonBuffer(t, out, n)
	poisonBuffer(t, other, n)
	_, err = g.Replay(&vc.Replay{Args: []vc.Arg{db.Arg(), da.Arg(), out.Arg()}})
	must(t, err, "rebinding replay")
	back, _ = g.NodeInfo(k)
	if back.Arguments[2] != outPtr {
		t.Fatalf("slot 2 reads %#x after rebinding, expected %#x", back.Arguments[2], outPtr)
	}
	checkWords(t, readU32(t, out), want, "out after rebinding")
	poison := make([]uint32, n)
	for i := range poison {
		poison[i] = poisonWord
	}
	checkWords(t, readU32(t, other), poison, "other after rebinding")
	must(t, g.Close(), "Graph.Close")
	assertNoMisuse(t)
}

// Two dispatches captured in the default (thread-local) mode: inc over a,
// then add of a and b into out over its first half. Nothing runs until the
// graph is replayed; every replay runs both again, in order.
func TestCaptureDispatchEndReplay(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	inc := incProgram(t, ctx)
	const n, half = 1000, 600
	r := newRng(331)
	da, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	db, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	out, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	poisonBuffer(t, out, n)
	a, b := r.u32s(n), r.u32s(n)
	must(t, da.Upload(0, vc.AsBytes(a)), "Upload a")
	must(t, db.Upload(0, vc.AsBytes(b)), "Upload b")

	cp, err := ctx.BeginCapture(vc.CaptureThreadLocal)
	must(t, err, "BeginCapture")
	if cp.Stream() == 0 || cp.Mode() != vc.CaptureThreadLocal || cp.Context() != ctx {
		t.Fatalf("capture stream %#x mode %v", cp.Stream(), cp.Mode())
	}
	params := []uint32{n}
	if err := cp.Dispatch(inc, &vc.Dispatch{Args: []vc.Arg{da.Arg()}, Params: params}); err != nil {
		_, _ = cp.End()
		t.Fatalf("Capture.Dispatch (inc): %v", err)
	}
	params[0] = 1 // copied at the call: the capture keeps n
	if err := cp.Dispatch(add, &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), out.Arg()},
		Params: []uint32{half}}); err != nil {
		_, _ = cp.End()
		t.Fatalf("Capture.Dispatch (add): %v", err)
	}
	g, err := cp.End()
	must(t, err, "Capture.End")

	// Captured, not run.
	poison := make([]uint32, n)
	for i := range poison {
		poison[i] = poisonWord
	}
	checkWords(t, readU32(t, out), poison, "out before any replay")
	checkWords(t, readU32(t, da), a, "a before any replay")
	info, err := g.Info()
	must(t, err, "Info")
	if info.KernelNodeCount != 2 || info.HostInputBytes != 0 || info.HostOutputBytes != 0 {
		t.Fatalf("captured graph %+v", info)
	}
	kinds, err := g.NodeKinds()
	must(t, err, "NodeKinds")
	last := uint64(len(kinds) - 1)
	if kinds[last] != vc.GraphNodeKernel {
		t.Fatalf("node kinds %v", kinds)
	}
	kernel, err := g.NodeInfo(last)
	must(t, err, "NodeInfo (captured kernel)")
	if kernel.CUFunction == 0 || kernel.ArgumentCount != 0 || len(kernel.Arguments) != 0 ||
		kernel.Block[0] == 0 || uint64(kernel.Grid[0])*uint64(kernel.Block[0]) < half {
		t.Fatalf("captured kernel node %+v", kernel)
	}
	e := wantError(t, g.SetNodeInfoRaw(last, kernel), vc.StatusInvalidArgument,
		"setting a captured kernel")
	if !strings.HasPrefix(e.Message, "vyre_graph_node_info_set: ") {
		t.Fatalf("message: %s", e.Message)
	}
	memset := firstNode(t, g, vc.GraphNodeMemset) // out's zeroing
	fillValue := uint32(0)
	for round := 0; round < 4; round++ {
		a, b := r.u32s(n), r.u32s(n)
		must(t, da.Upload(0, vc.AsBytes(a)), "Upload a")
		must(t, db.Upload(0, vc.AsBytes(b)), "Upload b")
		poisonBuffer(t, out, n)
		switch round {
		case 0, 1:
			_, err = g.Replay(nil)
			must(t, err, "Replay")
		case 2:
			pd, err := g.LaunchOnStream(nil, vc.StreamLegacy)
			must(t, err, "LaunchOnStream")
			_, err = pd.Finish(context.Background())
			must(t, err, "Finish")
		case 3:
			// A captured memset node can be set: out's zeroing becomes a
			// fill of 4-byte words, seen past the add's half.
			m, err := g.NodeInfo(memset)
			must(t, err, "NodeInfo (captured memset)")
			if m.MemsetDst != devicePointer(t, out) || m.MemsetValue != 0 || m.MemsetWidth*uint64(m.MemsetElementSize) != 4*n {
				t.Fatalf("captured memset node %+v", m)
			}
			fillValue = r.u32s(1)[0]
			m.MemsetElementSize = 4
			m.MemsetValue = fillValue
			m.MemsetWidth = n
			must(t, g.SetNodeInfo(memset, m), "SetNodeInfo (captured memset)")
			pd, err := g.ReplayAsync(nil)
			must(t, err, "ReplayAsync")
			_, err = pd.Finish(context.Background())
			must(t, err, "Finish")
		}
		wantA := make([]uint32, n)
		wantOut := make([]uint32, n)
		for i := range a {
			wantA[i] = a[i] + 1
			wantOut[i] = fillValue
			if i < half {
				wantOut[i] = wantA[i] + b[i]
			}
		}
		checkWords(t, readU32(t, da), wantA, "a after the captured inc")
		checkWords(t, readU32(t, out), wantOut, "out after the captured add")
	}
	// A captured graph takes nothing at replay.
	_, err = g.Replay(&vc.Replay{ElementCount: 5})
	wantError(t, err, vc.StatusInvalidArgument, "a replay with an element count")
	must(t, g.Close(), "Graph.Close")
	assertNoMisuse(t)
}

func TestCaptureRefusals(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n = 64
	r := newRng(341)
	a, b := r.u32s(n), r.u32s(n)
	da, _ := ctx.Upload(vc.AsBytes(a))
	db, _ := ctx.Upload(vc.AsBytes(b))
	out, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	poisonBuffer(t, out, n)
	resident := &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), out.Arg()}, Params: []uint32{n}}

	_, err = ctx.BeginCapture(vc.CaptureMode(7))
	wantError(t, err, vc.StatusInvalidArgument, "mode 7")

	cp, err := ctx.BeginCaptureWithOptions(vc.CaptureOptions{ParamBytes: 256})
	must(t, err, "BeginCapture")
	// Begin twice.
	_, err = ctx.BeginCapture(vc.CaptureThreadLocal)
	e := wantError(t, err, vc.StatusInvalidState, "a second BeginCapture")
	if !strings.HasPrefix(e.Message, "vyre_capture_begin: ") {
		t.Fatalf("message: %s", e.Message)
	}
	_, err = ctx.BeginCapture(vc.CaptureRelaxed)
	wantError(t, err, vc.StatusInvalidState, "a second (relaxed) BeginCapture")
	// Close refuses while it is open, and the context stays usable.
	wantError(t, ctx.Close(), vc.StatusInvalidState, "Context.Close during a capture")
	// Host data, cooperative, too many parameter words.
	host := make([]uint32, n)
	err = cp.Dispatch(add, &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), vc.Out(host)}, Params: []uint32{n}})
	wantError(t, err, vc.StatusInvalidArgument, "a host binding")
	err = cp.Dispatch(add, &vc.Dispatch{Args: resident.Args, Params: resident.Params, Cooperative: true})
	wantError(t, err, vc.StatusInvalidArgument, "cooperative")
	err = cp.Dispatch(add, &vc.Dispatch{Args: resident.Args, Params: make([]uint32, 65)})
	wantError(t, err, vc.StatusLimitExceeded, "260 bytes of parameter words over 256")
	// The capture stream cannot be joined to the work stream.
	wantError(t, ctx.WaitStream(cp.Stream()), vc.StatusInvalidArgument, "WaitStream(capture stream)")
	must(t, cp.Dispatch(add, resident), "Capture.Dispatch after the refusals")
	// End from another goroutine than the one that began a thread-local
	// capture: refused, the capture stays open.
	done := make(chan error)
	go func() {
		_, err := cp.End()
		done <- err
	}()
	wantError(t, <-done, vc.StatusInvalidState, "End from another goroutine")
	g, err := cp.End()
	must(t, err, "Capture.End")
	// End twice (no capture open), and a dispatch into an ended capture.
	_, err = cp.End()
	wantError(t, err, vc.StatusInvalidState, "End twice")
	wantError(t, cp.Dispatch(add, resident), vc.StatusInvalidState, "Dispatch after End")
	_, err = g.Replay(nil)
	must(t, err, "Replay")
	checkSum(t, a, b, readU32(t, out), "captured add")
	must(t, g.Close(), "Graph.Close")

	// Relaxed: any goroutine may dispatch and end it.
	cp, err = ctx.BeginCapture(vc.CaptureRelaxed)
	must(t, err, "BeginCapture(relaxed)")
	type result struct {
		g   *vc.Graph
		err error
	}
	ended := make(chan result)
	go func() {
		if err := cp.Dispatch(add, resident); err != nil {
			ended <- result{nil, err}
			return
		}
		g, err := cp.End()
		ended <- result{g, err}
	}()
	res := <-ended
	must(t, res.err, "relaxed capture dispatched and ended on another goroutine")
	poisonBuffer(t, out, n)
	a2, b2 := r.u32s(n), r.u32s(n)
	must(t, da.Upload(0, vc.AsBytes(a2)), "Upload a")
	must(t, db.Upload(0, vc.AsBytes(b2)), "Upload b")
	_, err = res.g.Replay(nil)
	must(t, err, "Replay")
	checkSum(t, a2, b2, readU32(t, out), "relaxed captured add")
	must(t, res.g.Close(), "Graph.Close")

	// The context begins again, and closes once no capture is open.
	cp, err = ctx.BeginCapture(vc.CaptureThreadLocal)
	must(t, err, "BeginCapture after the others")
	g, err = cp.End()
	must(t, err, "End (empty)")
	if info, err := g.Info(); err != nil || info.NodeCount != 0 {
		t.Fatalf("an empty capture: %+v %v", info, err)
	}
	must(t, g.Close(), "Graph.Close")
	_, err = vc.Read[uint32](out)
	must(t, err, "the context works after the refused Close")
	assertNoMisuse(t)
}

// Other goroutines' work on the context runs outside a thread-local capture
// and is not refused: the capturing goroutine is locked to its OS thread, so
// the goroutines that allocate and wait while it blocks never run there.
func TestCaptureOtherGoroutinesWorkStaysOutside(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	const n, workers = 256, 8
	r := newRng(351)
	a, b := r.u32s(n), r.u32s(n)
	da, _ := ctx.Upload(vc.AsBytes(a))
	db, _ := ctx.Upload(vc.AsBytes(b))
	captured, err := ctx.Alloc(4 * n)
	must(t, err, "Alloc")
	poisonBuffer(t, captured, n)
	cp, err := ctx.BeginCapture(vc.CaptureThreadLocal)
	must(t, err, "BeginCapture")
	err = cp.Dispatch(add, &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), captured.Arg()}, Params: []uint32{n}})
	if err != nil {
		_, _ = cp.End()
		t.Fatalf("Capture.Dispatch: %v", err)
	}
	// This goroutine blocks on the channel while the others allocate,
	// dispatch and wait: eagerly, outside the capture.
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for round := 0; round < 4; round++ {
				out := make([]uint32, n)
				for i := range out {
					out[i] = poisonWord
				}
				buf, err := ctx.Alloc(4 * n)
				if err != nil {
					errs <- err
					return
				}
				_, err = add.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}, Params: []uint32{n}})
				if err == nil {
					err = buf.Close()
				}
				if err == nil {
					for i := range out {
						if out[i] != a[i]+b[i] {
							err = fmt.Errorf("eager out[%d] = %#x, expected %#x", i, out[i], a[i]+b[i])
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var firstErr error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	g, err := cp.End()
	must(t, firstErr, "another goroutine's work during the capture")
	must(t, err, "Capture.End (the others' work did not invalidate it)")
	info, err := g.Info()
	must(t, err, "Info")
	if info.KernelNodeCount != 1 {
		t.Fatalf("%d kernel nodes captured, expected only the captured dispatch's", info.KernelNodeCount)
	}
	poison := make([]uint32, n)
	for i := range poison {
		poison[i] = poisonWord
	}
	checkWords(t, readU32(t, captured), poison, "captured out before the replay")
	_, err = g.Replay(nil)
	must(t, err, "Replay")
	checkSum(t, a, b, readU32(t, captured), "captured out after the replay")
	must(t, g.Close(), "Graph.Close")
	assertNoMisuse(t)
}
