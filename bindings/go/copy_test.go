package vyrecuda_test

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/fakedriver"
)

// poison fills every destination before a copy; copied bytes are odd
// (randomBytes), so never 0 and never poison: a byte left uncopied, or
// written where it should not be, shows.
const poison = 0xEE

func (r *rng) bytes(n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(r.next()>>40) | 1
	}
	return v
}

func poisoned(n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = poison
	}
	return v
}

// checkBytes checks every byte of buffer b: want at offset, poison around it.
func checkBytes(t *testing.T, b *vc.Buffer, offset uint64, want []byte, label string) {
	t.Helper()
	got := make([]byte, b.Len())
	must(t, b.Download(0, got), label+": Download")
	bad, first := 0, -1
	for i := range got {
		exp := byte(poison)
		if k := uint64(i) - offset; uint64(i) >= offset && k < uint64(len(want)) {
			exp = want[k]
		}
		if got[i] != exp {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		exp := byte(poison)
		if k := uint64(first) - offset; uint64(first) >= offset && k < uint64(len(want)) {
			exp = want[k]
		}
		t.Fatalf("%s: %d of %d bytes wrong; first byte %d is 0x%02x, expected 0x%02x",
			label, bad, len(got), first, got[first], exp)
	}
}

// copyCase uploads random data to a buffer of src, copies `bytes` of it at
// srcOffset into a poisoned buffer of dst at dstOffset (sync or async,
// staged or not) and checks every byte of both buffers.
func copyCase(t *testing.T, r *rng, src, dst *vc.Context, srcLen, srcOffset, dstLen, dstOffset,
	bytes uint64, async, staged bool, label string) {
	t.Helper()
	data := r.bytes(int(srcLen))
	sb, err := src.Upload(data)
	must(t, err, label+": source Upload")
	defer sb.Close()
	db, err := dst.Upload(poisoned(int(dstLen)))
	must(t, err, label+": destination Upload")
	defer db.Close()
	c := vc.BufferCopy{Src: sb, SrcOffset: srcOffset, Dst: db, DstOffset: dstOffset, Bytes: bytes,
		Staged: staged}
	if async {
		pd, err := vc.CopyBuffersAsync(c)
		must(t, err, label+": CopyBuffersAsync")
		timing, err := pd.Finish(context.Background())
		must(t, err, label+": Finish")
		if timing.Wall <= 0 || timing.Device != 0 {
			t.Fatalf("%s: timing %+v", label, timing)
		}
	} else if staged {
		must(t, vc.CopyBuffers(c), label+": CopyBuffers")
	} else {
		must(t, sb.CopyTo(db, srcOffset, dstOffset, bytes), label+": CopyTo")
	}
	checkBytes(t, db, dstOffset, data[srcOffset:srcOffset+bytes], label+": destination")
	check := make([]byte, srcLen)
	must(t, sb.Download(0, check), label+": source Download")
	for i := range check {
		if check[i] != data[i] {
			t.Fatalf("%s: the source changed at byte %d", label, i)
		}
	}
}

func TestBufferCopyWithinAndBetweenContextsOfOneDevice(t *testing.T) {
	a := testContext(t)
	b := testContext(t)
	r := newRng(41)
	for _, pair := range []struct {
		name     string
		src, dst *vc.Context
	}{{"one context", a, a}, {"two contexts", a, b}, {"back", b, a}} {
		for _, n := range []uint64{1, 7, 4096, 65537, 3<<20 + 13} {
			so, do := r.below(64), r.below(64)
			for _, async := range []bool{false, true} {
				label := pair.name
				if async {
					label += " async"
				}
				copyCase(t, r, pair.src, pair.dst, n+so+r.below(9), so, n+do+r.below(9), do, n, async,
					false, label)
			}
		}
	}
	// Disjoint ranges of one buffer: [0, n) onto [n+3, 2n+3).
	const n = 10_000
	data := r.bytes(2*n + 3)
	buf, err := a.Upload(data)
	must(t, err, "Upload")
	must(t, buf.CopyTo(buf, 0, n+3, n), "CopyTo within one buffer")
	got := make([]byte, len(data))
	must(t, buf.Download(0, got), "Download")
	for i := range got {
		want := data[i]
		if i >= n+3 {
			want = data[i-(n+3)]
		}
		if got[i] != want {
			t.Fatalf("one buffer: byte %d is 0x%02x, expected 0x%02x", i, got[i], want)
		}
	}
	// Staged on one device is ignored; 0 bytes copies nothing, even at the end.
	copyCase(t, r, a, b, 100, 5, 100, 9, 50, false, true, "staged on one device")
	dst, err := b.Upload(poisoned(64))
	must(t, err, "Upload")
	must(t, buf.CopyTo(dst, buf.Len(), 64, 0), "0 bytes at both ends")
	pd, err := buf.CopyToAsync(dst, 0, 0, 0)
	must(t, err, "CopyToAsync of 0 bytes")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Close")
	checkBytes(t, dst, 0, nil, "after 0-byte copies")
	must(t, buf.Close(), "Close")
	must(t, dst.Close(), "Close")
	assertNoMisuse(t)
}

// The source may be closed (and its context too) while an asynchronous copy
// runs: the library keeps the memory until the copy completes.
func TestBufferCopyAsyncOutlivesItsSource(t *testing.T) {
	dstCtx := testContext(t)
	srcCtx, err := vc.NewContext(0)
	must(t, err, "NewContext")
	r := newRng(43)
	const n = 1<<20 + 77
	data := r.bytes(n)
	src, err := srcCtx.Upload(data)
	must(t, err, "Upload")
	dst, err := dstCtx.Upload(poisoned(n + 10))
	must(t, err, "Upload")
	if fake() {
		must(t, fakedriver.SetHold(true), "hold")
		defer func() { _ = fakedriver.SetHold(false) }()
	}
	pd, err := src.CopyToAsync(dst, 0, 10, n)
	must(t, err, "CopyToAsync")
	if fake() {
		if done, err := pd.Poll(); done || err != nil {
			t.Fatalf("Poll while held: %v %v", done, err)
		}
		if done, err := pd.WaitTimeout(time.Millisecond); done || err != nil {
			t.Fatalf("WaitTimeout while held: %v %v", done, err)
		}
	}
	must(t, src.Close(), "Close the source")
	if fake() {
		must(t, fakedriver.SetHold(false), "release")
	}
	must(t, srcCtx.Close(), "Close the source's context")
	must(t, pd.Wait(context.Background()), "Wait")
	wantError(t, pd.Wait(context.Background()), vc.StatusInvalidState, "a second Wait")
	must(t, pd.Close(), "Close")
	checkBytes(t, dst, 10, data, "after the source was closed")
	assertNoMisuse(t)
}

func TestBufferCopyRefusalsHaveAFix(t *testing.T) {
	ctx := testContext(t)
	r := newRng(47)
	src, err := ctx.Upload(r.bytes(1000))
	must(t, err, "Upload")
	dst, err := ctx.Upload(poisoned(500))
	must(t, err, "Upload")
	// Each case, sync and async: the status, the Fix and words of the message.
	refused := func(c vc.BufferCopy, status vc.Status, what string, words ...string) {
		t.Helper()
		e := wantError(t, vc.CopyBuffers(c), status, what)
		pd, err := vc.CopyBuffersAsync(c)
		ea := wantError(t, err, status, what+" (async)")
		if pd != nil {
			t.Fatalf("%s: a Pending with the error", what)
		}
		for _, w := range words {
			if !strings.Contains(e.Message, w) || !strings.Contains(ea.Message, w) {
				t.Fatalf("%s: %q not in %q / %q", what, w, e.Message, ea.Message)
			}
		}
		if !strings.HasPrefix(e.Message, "vyre_buffer_copy") || e.Op != "vyre_buffer_copy" ||
			ea.Op != "vyre_buffer_copy_async" {
			t.Fatalf("%s: Op %q / %q, message %q", what, e.Op, ea.Op, e.Message)
		}
	}
	refused(vc.BufferCopy{Src: src, SrcOffset: 0, Dst: src, DstOffset: 100, Bytes: 200},
		vc.StatusInvalidArgument, "overlapping ranges of one buffer", "overlap", "second buffer")
	refused(vc.BufferCopy{Src: src, SrcOffset: 100, Dst: src, DstOffset: 0, Bytes: 101},
		vc.StatusInvalidArgument, "overlapping by one byte", "overlap")
	refused(vc.BufferCopy{Src: src, SrcOffset: 900, Dst: dst, Bytes: 101},
		vc.StatusOutOfRange, "past the source", "src_offset", "1000 bytes")
	refused(vc.BufferCopy{Src: src, Dst: dst, DstOffset: 1, Bytes: 500},
		vc.StatusOutOfRange, "past the destination", "dst_offset", "500 bytes")
	refused(vc.BufferCopy{Src: src, SrcOffset: math.MaxUint64, Dst: dst, Bytes: 2},
		vc.StatusOutOfRange, "overflowing 64 bits", "src", "64 bits")
	refused(vc.BufferCopy{Src: src, Dst: dst, DstOffset: 501},
		vc.StatusOutOfRange, "0 bytes past the destination", "dst")
	refused(vc.BufferCopy{Src: src, Dst: nil, Bytes: 1},
		vc.StatusInvalidHandle, "a nil destination", "destination")
	// Two buffers that wrap the same device memory may not overlap either.
	info, err := src.Info()
	must(t, err, "Info")
	alias, err := ctx.Wrap(info.DevicePointer+64, 512)
	must(t, err, "Wrap")
	refused(vc.BufferCopy{Src: src, SrcOffset: 100, Dst: alias, DstOffset: 0, Bytes: 100},
		vc.StatusInvalidArgument, "buffers wrapping the same memory", "wrap the same memory")
	must(t, src.CopyTo(alias, 600, 0, 100), "disjoint ranges through the alias")
	must(t, alias.Close(), "Close")
	// A closed buffer, and one of a closed context.
	closed, err := ctx.Upload(poisoned(16))
	must(t, err, "Upload")
	must(t, closed.Close(), "Close")
	refused(vc.BufferCopy{Src: closed, Dst: dst, Bytes: 1},
		vc.StatusInvalidHandle, "a closed source", "source")
	other, err := vc.NewContext(0)
	must(t, err, "NewContext")
	orphan, err := other.Upload(poisoned(16))
	must(t, err, "Upload")
	must(t, other.Close(), "Close")
	refused(vc.BufferCopy{Src: src, Dst: orphan, Bytes: 1},
		vc.StatusStaleHandle, "a destination of a closed context", "dst")
	// Nothing was written by any refusal.
	checkBytes(t, dst, 0, nil, "after the refusals")
	must(t, src.Close(), "Close")
	must(t, dst.Close(), "Close")
	assertNoMisuse(t)
}

func TestDeviceCanAccessPeerOfOneDevice(t *testing.T) {
	testContext(t) // skips without a driver
	n, err := vc.DeviceCount()
	must(t, err, "DeviceCount")
	ok, err := vc.DeviceCanAccessPeer(0, 0)
	must(t, err, "DeviceCanAccessPeer(0, 0)")
	if ok {
		t.Fatal("device 0 is its own peer")
	}
	_, err = vc.DeviceCanAccessPeer(0, n)
	wantError(t, err, vc.StatusNoDevice, "a peer past the count")
	_, err = vc.DeviceCanAccessPeer(n, 0)
	wantError(t, err, vc.StatusNoDevice, "an ordinal past the count")
	checkPeerMasks(t, n)
}

// checkPeerMasks checks each device's PeerAccessMask against
// DeviceCanAccessPeer, from QueryDevice and Context.DeviceInfo.
func checkPeerMasks(t *testing.T, n uint32) {
	t.Helper()
	for d := uint32(0); d < n && d < 64; d++ {
		info, err := vc.QueryDevice(d)
		must(t, err, "QueryDevice")
		var want uint64
		for p := uint32(0); p < n && p < 64; p++ {
			ok, err := vc.DeviceCanAccessPeer(d, p)
			must(t, err, "DeviceCanAccessPeer")
			if ok {
				want |= 1 << p
			}
		}
		if info.PeerAccessMask != want || want&(1<<d) != 0 {
			t.Fatalf("device %d: PeerAccessMask %#x, DeviceCanAccessPeer says %#x", d,
				info.PeerAccessMask, want)
		}
		ctx, err := vc.NewContext(d)
		must(t, err, "NewContext")
		ci, err := ctx.DeviceInfo()
		must(t, err, "DeviceInfo")
		must(t, ctx.Close(), "Close")
		if ci.PeerAccessMask != want {
			t.Fatalf("device %d: Context.DeviceInfo's PeerAccessMask %#x, expected %#x", d,
				ci.PeerAccessMask, want)
		}
	}
}

// onTwoDevices reports whether this process should run `t` on two devices:
// on the fake driver it runs t in a child (this binary, that test only) with
// FAKE_CUDA_DEVICES=2 and `env`, checks that it passed and returns false;
// in that child, or on a machine with two GPUs, it returns true. With fewer
// devices it skips (env is fake-only: with it set, a machine's GPUs skip).
func onTwoDevices(t *testing.T, env ...string) bool {
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	if !fake() {
		testContext(t) // skips without a driver
		if n, err := vc.DeviceCount(); err != nil || n < 2 || len(env) > 0 {
			t.Skipf("needs two devices, or the fake driver (count %d, %v)", n, err)
		}
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name(), "FAKE_CUDA_DEVICES=2"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the two-device child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "CHILD-DONE "+t.Name()) {
		t.Fatalf("the two-device child ran nothing:\n%s", out)
	}
	return false
}

func stats(t *testing.T) fakedriver.Stats {
	t.Helper()
	if !fake() {
		return fakedriver.Stats{}
	}
	s, err := fakedriver.Read()
	must(t, err, "fake driver stats")
	return s
}

// twoDeviceCopies copies between contexts of devices 0 and 1 both ways,
// sync and async, straight and staged, across several 8 MiB staging pieces.
func twoDeviceCopies(t *testing.T, r *rng) {
	c0, err := vc.NewContext(0)
	must(t, err, "NewContext(0)")
	defer c0.Close()
	c1, err := vc.NewContext(1)
	must(t, err, "NewContext(1)")
	defer c1.Close()
	for _, n := range []uint64{1, 4099, 9<<20 + 5} {
		for _, staged := range []bool{false, true} {
			for _, async := range []bool{false, true} {
				so, do := r.below(100), r.below(100)
				copyCase(t, r, c0, c1, n+so+r.below(9), so, n+do+r.below(9), do, n, async, staged,
					"0 to 1")
				copyCase(t, r, c1, c0, n+so, so, n+do, do, n, async, staged, "1 to 0")
			}
		}
	}
}

func TestBufferCopyBetweenPeerDevices(t *testing.T) {
	if !onTwoDevices(t) {
		return
	}
	n, err := vc.DeviceCount()
	must(t, err, "DeviceCount")
	checkPeerMasks(t, n)
	peers, err := vc.DeviceCanAccessPeer(0, 1)
	must(t, err, "DeviceCanAccessPeer(0, 1)")
	if fake() {
		if n != 2 || !peers {
			t.Fatalf("the fake: %d devices, peers %v", n, peers)
		}
		if info, _ := vc.QueryDevice(1); info.PeerAccessMask != 1 {
			t.Fatalf("device 1's PeerAccessMask %#x", info.PeerAccessMask)
		}
	}
	before := stats(t)
	twoDeviceCopies(t, newRng(53))
	after := stats(t)
	if fake() && (after.MemcpyPeer == before.MemcpyPeer || after.PeerEnables == 0) {
		t.Fatalf("no peer copy ran: %d peer copies, %d peer enables", after.MemcpyPeer-before.MemcpyPeer,
			after.PeerEnables)
	}
	// Staged alone runs no peer copy.
	c0, err := vc.NewContext(0)
	must(t, err, "NewContext(0)")
	c1, err := vc.NewContext(1)
	must(t, err, "NewContext(1)")
	before = stats(t)
	copyCase(t, newRng(59), c0, c1, 1<<20, 0, 1<<20, 0, 1<<20, false, true, "staged")
	if after := stats(t); after.MemcpyPeer != before.MemcpyPeer {
		t.Fatalf("a staged copy ran %d peer copies", after.MemcpyPeer-before.MemcpyPeer)
	}
	// Range refusals between devices; memory of two devices never overlaps.
	src, err := c0.Upload(newRng(61).bytes(64))
	must(t, err, "Upload")
	dst, err := c1.Upload(poisoned(32))
	must(t, err, "Upload")
	e := wantError(t, src.CopyTo(dst, 0, 0, 33), vc.StatusOutOfRange, "past the destination")
	if !strings.Contains(e.Message, "dst") {
		t.Fatalf("the side is not named: %v", e)
	}
	_, err = src.CopyToAsync(dst, 32, 0, 33)
	wantError(t, err, vc.StatusOutOfRange, "past the source (async)")
	checkBytes(t, dst, 0, nil, "after the refusals")
	// The Pending is the destination context's: closing it releases the copy.
	pd, err := src.CopyToAsync(dst, 0, 0, 32)
	must(t, err, "CopyToAsync")
	must(t, c1.Close(), "Close the destination's context")
	if err := pd.Wait(context.Background()); err == nil || !errors.Is(err, vc.StatusStaleHandle) {
		t.Fatalf("Wait after the destination's context closed: %v", err)
	}
	must(t, pd.Close(), "Close")
	must(t, c0.Close(), "Close")
	assertNoMisuse(t)
	t.Log("CHILD-DONE " + t.Name())
}

func TestBufferCopyBetweenDevicesThatAreNotPeers(t *testing.T) {
	if !onTwoDevices(t, "FAKE_CUDA_PEER_ACCESS=0") {
		return
	}
	for _, pair := range [][2]uint32{{0, 1}, {1, 0}} {
		ok, err := vc.DeviceCanAccessPeer(pair[0], pair[1])
		must(t, err, "DeviceCanAccessPeer")
		if ok {
			t.Fatalf("devices %v are peers with FAKE_CUDA_PEER_ACCESS=0", pair)
		}
	}
	checkPeerMasks(t, 2)
	twoDeviceCopies(t, newRng(67))
	if s := stats(t); s.MemcpyPeer != 0 || s.PeerEnables != 0 {
		t.Fatalf("%d peer copies, %d peer enables between devices that are not peers", s.MemcpyPeer,
			s.PeerEnables)
	}
	assertNoMisuse(t)
	t.Log("CHILD-DONE " + t.Name())
}
