package vyrecuda_test

// Buffers shared between processes (Buffer.ExportIPC, Context.ImportIPC,
// IPCHandle, BufferInfo.Imported), with this binding on both sides: the
// other process is this test binary again, running TestHelperIPCChild (which
// passes at once in a normal run) with VYRE_CUDA_GO_TEST_CHILD set to its
// name. It takes commands on stdin and answers on stdout, one line each:
//
//	import <hex> <bytes> <expect seed> <write seed>
//	    imports the handle, checks its Info and every byte against
//	    seeded(bytes, expect seed), checks that the import cannot be exported
//	    again, writes seeded(bytes, write seed) into it and closes it:
//	    "ipc-child ok <bytes>"
//	export <bytes> <seed>   a buffer of seeded(bytes, seed), exported:
//	                        "ipc-child ok <hex>" (the buffer is kept)
//	expect <seed>           compares that buffer with seeded(bytes, seed):
//	                        "ipc-child ok"
//	free                    closes it: "ipc-child ok"
//	exit                    ends the test (which passes)
//
// A failed check fails the child, which exits non-zero without answering,
// and the parent, reading end of file instead of an answer, fails. On the
// fake driver exported memory is shared through POSIX shared memory, on a
// GPU through CUDA. Every byte is random (fresh seeds each run), none zero.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vc "vyre.dev/cuda/bindings/go"
)

const ipcChildTest = "TestHelperIPCChild"

// ipcAnswer marks the child's answers among the testing package's lines.
const ipcAnswer = "ipc-child "

// seeded is n pseudo-random bytes from seed, none zero.
func seeded(n int, seed uint64) []byte {
	r := newRng(seed)
	v := make([]byte, n)
	for i := range v {
		for v[i] == 0 {
			v[i] = byte(r.next() >> 56)
		}
	}
	return v
}

var seedCount atomic.Uint64

// freshSeed differs on each call and each run.
func freshSeed() uint64 {
	return uint64(time.Now().UnixNano()) ^ uint64(os.Getpid())<<32 ^ seedCount.Add(1)
}

// sameBytes fails at the first byte of got that differs from want.
func sameBytes(t *testing.T, got, want []byte, label string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, expected %d", label, len(got), len(want))
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
		t.Fatalf("%s: %d of %d bytes wrong; first byte %d is 0x%02x, expected 0x%02x",
			label, bad, len(want), first, got[first], want[first])
	}
}

func download(t *testing.T, b *vc.Buffer, label string) []byte {
	t.Helper()
	got := make([]byte, b.Len())
	must(t, b.Download(0, got), label+": Download")
	return got
}

// TestHelperIPCChild is the other process of the IPC tests; in a normal run
// it passes at once.
func TestHelperIPCChild(t *testing.T) {
	if os.Getenv(childEnv) != ipcChildTest {
		return
	}
	ctx, err := vc.NewContext(0)
	must(t, err, "the child's NewContext")
	defer ctx.Close()
	var exported *vc.Buffer
	answer := func(format string, args ...any) {
		fmt.Printf(ipcAnswer+"ok "+format+"\n", args...)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 4096), 1<<20)
	for in.Scan() {
		words := strings.Fields(in.Text())
		num := func(i int) uint64 {
			v, err := strconv.ParseUint(words[i], 10, 64)
			must(t, err, "the child's command "+in.Text())
			return v
		}
		switch words[0] {
		case "import":
			h, err := vc.ParseIPCHandle(words[1])
			must(t, err, "ParseIPCHandle")
			bytes, expectSeed, writeSeed := int(num(2)), num(3), num(4)
			imported, err := ctx.ImportIPC(h)
			must(t, err, "the child's ImportIPC")
			info, err := imported.Info()
			must(t, err, "Info")
			if !info.Borrowed || !info.Imported || info.Bytes != uint64(bytes) ||
				imported.Len() != uint64(bytes) {
				t.Fatalf("the child's import: Info %+v, Len %d, expected %d bytes", info,
					imported.Len(), bytes)
			}
			sameBytes(t, download(t, imported, "the child's import"), seeded(bytes, expectSeed),
				"the child's import")
			_, err = imported.ExportIPC()
			e := wantError(t, err, vc.StatusInvalidArgument, "ExportIPC of an import")
			if !strings.Contains(e.Message, "an import of memory another process exported") {
				t.Fatalf("ExportIPC of an import: %v", e)
			}
			must(t, imported.Upload(0, seeded(bytes, writeSeed)), "the child's Upload")
			must(t, imported.Close(), "the child's Close of its import")
			answer("%d", bytes)
		case "export":
			bytes, seed := int(num(1)), num(2)
			exported, err = ctx.Upload(seeded(bytes, seed))
			must(t, err, "the child's Upload")
			h, err := exported.ExportIPC()
			must(t, err, "the child's ExportIPC")
			answer("%s", h)
		case "expect":
			sameBytes(t, download(t, exported, "the child's buffer"),
				seeded(int(exported.Len()), num(1)), "the child's exported buffer")
			answer("")
		case "free":
			must(t, exported.Close(), "the child's Close")
			answer("")
		case "exit":
			if exported != nil {
				must(t, exported.Close(), "the child's Close")
			}
			assertNoMisuse(t)
			t.Log("CHILD-DONE " + t.Name())
			return
		default:
			t.Fatalf("the child got %q", in.Text())
		}
	}
	t.Fatalf("the child's stdin ended without exit: %v", in.Err())
}

// ipcPeer is this test binary running TestHelperIPCChild.
type ipcPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	out    strings.Builder // everything it printed
}

func startIPCPeer(t *testing.T) *ipcPeer {
	t.Helper()
	p := &ipcPeer{t: t}
	p.cmd = exec.Command(os.Args[0], "-test.run", "^"+ipcChildTest+"$", "-test.v", "-test.count=1")
	p.cmd.Env = append(os.Environ(), childEnv+"="+ipcChildTest)
	p.cmd.Stderr = os.Stderr
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	must(t, err, "StdinPipe")
	stdout, err := p.cmd.StdoutPipe()
	must(t, err, "StdoutPipe")
	p.stdout = bufio.NewReader(stdout)
	must(t, p.cmd.Start(), "starting the child")
	t.Cleanup(func() {
		p.stdin.Close()
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// ask sends one command and returns what follows "ipc-child ok".
func (p *ipcPeer) ask(command string) string {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		p.t.Fatalf("sending %q to the child: %v", strings.Fields(command)[0], err)
	}
	for {
		line, err := p.stdout.ReadString('\n')
		p.out.WriteString(line)
		if i := strings.Index(line, ipcAnswer); i >= 0 {
			rest := strings.TrimSpace(line[i+len(ipcAnswer):])
			if !strings.HasPrefix(rest, "ok") {
				p.t.Fatalf("the child answered %q", rest)
			}
			return strings.TrimSpace(strings.TrimPrefix(rest, "ok"))
		}
		if err != nil {
			p.t.Fatalf("the child ended without answering %q:\n%s", strings.Fields(command)[0],
				p.out.String())
		}
	}
}

// finish sends "exit" and checks that the child passed.
func (p *ipcPeer) finish() {
	p.t.Helper()
	fmt.Fprintln(p.stdin, "exit")
	p.stdin.Close()
	rest, _ := io.ReadAll(p.stdout)
	p.out.Write(rest)
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("the child failed: %v\n%s", err, p.out.String())
	}
	if !strings.Contains(p.out.String(), "CHILD-DONE "+ipcChildTest) {
		p.t.Fatalf("the child ran nothing:\n%s", p.out.String())
	}
}

// childImports: we export a buffer; the child imports it, checks it and
// writes into it; its write is in our memory.
func childImports(t *testing.T, ctx *vc.Context, bytes int) {
	seed, writeSeed := freshSeed(), freshSeed()
	owner, err := ctx.Upload(seeded(bytes, seed))
	must(t, err, "Upload")
	defer owner.Close()
	info, err := owner.Info()
	must(t, err, "Info")
	if info.Borrowed || info.Imported {
		t.Fatalf("an allocated buffer's Info: %+v", info)
	}
	h, err := owner.ExportIPC()
	must(t, err, "ExportIPC")
	again, err := owner.ExportIPC()
	must(t, err, "ExportIPC again")
	if again != h {
		t.Fatalf("exporting one buffer twice gave different handles")
	}
	if back, err := vc.IPCHandleFromBytes(h[:]); err != nil || back != h {
		t.Fatalf("IPCHandleFromBytes: %v", err)
	}
	for _, text := range []string{h.String(), strings.ToUpper(h.String()), " " + h.String() + "\n"} {
		if back, err := vc.ParseIPCHandle(text); err != nil || back != h {
			t.Fatalf("ParseIPCHandle: %v", err)
		}
	}
	p := startIPCPeer(t)
	got := p.ask(fmt.Sprintf("import %s %d %d %d", h, bytes, seed, writeSeed))
	if got != strconv.Itoa(bytes) {
		t.Fatalf("the child imported %s bytes, expected %d", got, bytes)
	}
	p.finish()
	sameBytes(t, download(t, owner, "our buffer"), seeded(bytes, writeSeed),
		"the exporter's buffer after the child wrote through its import")
}

func TestIPCChildImportsOurExportAndWritesBack(t *testing.T) {
	ctx := testContext(t)
	childImports(t, ctx, 4096)
	childImports(t, ctx, 100003) // not a multiple of anything
	assertNoMisuse(t)
}

func TestIPCWeImportTheChildExportOnceMappedTwiceHeld(t *testing.T) {
	ctx := testContext(t)
	for _, bytes := range []int{4096, 70001} {
		seed, writeSeed := freshSeed(), freshSeed()
		p := startIPCPeer(t)
		h, err := vc.ParseIPCHandle(p.ask(fmt.Sprintf("export %d %d", bytes, seed)))
		must(t, err, "ParseIPCHandle")

		first, err := ctx.ImportIPC(h)
		must(t, err, "ImportIPC")
		second, err := ctx.ImportIPC(h)
		must(t, err, "ImportIPC again")
		info1, err := first.Info()
		must(t, err, "Info")
		info2, err := second.Info()
		must(t, err, "Info")
		if !info1.Borrowed || !info1.Imported || info1.Bytes != uint64(bytes) ||
			first.Len() != uint64(bytes) {
			t.Fatalf("an import's Info %+v, Len %d, expected %d bytes", info1, first.Len(), bytes)
		}
		if info1.DevicePointer != info2.DevicePointer {
			t.Fatalf("one handle, two mappings: %#x and %#x", info1.DevicePointer,
				info2.DevicePointer)
		}
		sameBytes(t, download(t, first, "our import"), seeded(bytes, seed), "our import")

		// An import is not this process's to export.
		_, err = first.ExportIPC()
		e := wantError(t, err, vc.StatusInvalidArgument, "ExportIPC of an import")
		if !strings.Contains(e.Message, "an import of memory another process exported") {
			t.Fatalf("ExportIPC of an import: %v", e)
		}

		// A device copy out of the mapping.
		local, err := ctx.Alloc(uint64(bytes))
		must(t, err, "Alloc")
		must(t, second.CopyTo(local, 0, 0, uint64(bytes)), "CopyTo")
		sameBytes(t, download(t, local, "a copy"), seeded(bytes, seed), "a copy out of our import")
		must(t, local.Close(), "Close")

		// Closing one import leaves the other's mapping working; the child
		// reads what we wrote.
		must(t, first.Close(), "Close of the first import")
		must(t, second.Upload(0, seeded(bytes, writeSeed)), "Upload into the second import")
		p.ask(fmt.Sprintf("expect %d", writeSeed))

		// An import in a second context, closed with it: the child's memory
		// stays.
		other, err := vc.NewContext(0)
		must(t, err, "NewContext")
		third, err := other.ImportIPC(h)
		must(t, err, "ImportIPC in a second context")
		must(t, other.Close(), "Close of the second context")
		must(t, third.Close(), "Close of an import after its context's Close")
		must(t, second.Close(), "Close of the second import")
		p.ask(fmt.Sprintf("expect %d", writeSeed))
		p.ask("free")
		p.finish()
	}
	assertNoMisuse(t)
}

func TestIPCImportAfterTheExporterFreedOrExitedIsRefused(t *testing.T) {
	ctx := testContext(t)
	for _, exits := range []bool{false, true} {
		p := startIPCPeer(t)
		h, err := vc.ParseIPCHandle(p.ask(fmt.Sprintf("export 4096 %d", freshSeed())))
		must(t, err, "ParseIPCHandle")
		if exits {
			p.finish()
		} else {
			p.ask("free")
		}
		b, err := ctx.ImportIPC(h)
		e := wantError(t, err, vc.StatusInvalidArgument, "ImportIPC of a freed export")
		// The message's wording is the library's; its status and Fix are the
		// contract.
		if b != nil || e.Op != "vyre_buffer_import_ipc" {
			t.Fatalf("ImportIPC of a freed export: %v, %v", b, e)
		}
		if !exits {
			p.finish()
		}
	}
	assertNoMisuse(t)
}

func TestIPCRefusalsInOneProcess(t *testing.T) {
	ctx := testContext(t)
	buffer, err := ctx.Upload(seeded(4096, freshSeed()))
	must(t, err, "Upload")
	h, err := buffer.ExportIPC()
	must(t, err, "ExportIPC")

	// CUDA does not open a handle in the process that exported it.
	_, err = ctx.ImportIPC(h)
	e := wantError(t, err, vc.StatusInvalidArgument, "ImportIPC of our own export")
	if !strings.Contains(e.Message, "exported by this process") {
		t.Fatalf("ImportIPC of our own export: %v", e)
	}

	// Bytes that are not a handle.
	corrupted := h
	corrupted[40] ^= 0x10
	_, err = ctx.ImportIPC(corrupted)
	e = wantError(t, err, vc.StatusInvalidArgument, "ImportIPC of a corrupted handle")
	if !strings.Contains(e.Message, "checksum does not match") {
		t.Fatalf("ImportIPC of a corrupted handle: %v", e)
	}
	_, err = ctx.ImportIPC(vc.IPCHandle{})
	e = wantError(t, err, vc.StatusInvalidArgument, "ImportIPC of zeros")
	if !strings.Contains(e.Message, "no handle marker") {
		t.Fatalf("ImportIPC of zeros: %v", e)
	}

	// Wrong lengths and text, refused before the library sees them.
	for _, n := range []int{0, 1, vc.IPCHandleSize - 1, vc.IPCHandleSize + 1} {
		_, err := vc.IPCHandleFromBytes(make([]byte, n))
		e := wantError(t, err, vc.StatusInvalidArgument, "IPCHandleFromBytes")
		if !strings.Contains(e.Message, fmt.Sprintf("not %d", n)) {
			t.Fatalf("IPCHandleFromBytes of %d bytes: %v", n, e)
		}
	}
	text := h.String()
	for _, bad := range []string{"", text[2:], text + "00", "zz" + text[2:], "+1" + text[2:]} {
		_, err := vc.ParseIPCHandle(bad)
		wantError(t, err, vc.StatusInvalidArgument, "ParseIPCHandle")
	}

	// Closed objects.
	closedCtx, err := vc.NewContext(0)
	must(t, err, "NewContext")
	must(t, closedCtx.Close(), "Close")
	_, err = closedCtx.ImportIPC(h)
	wantError(t, err, vc.StatusInvalidHandle, "ImportIPC on a closed Context")
	must(t, buffer.Close(), "Close")
	_, err = buffer.ExportIPC()
	wantError(t, err, vc.StatusInvalidHandle, "ExportIPC of a closed Buffer")
	assertNoMisuse(t)
}
