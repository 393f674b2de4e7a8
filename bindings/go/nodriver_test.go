package vyrecuda_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	vc "vyre.dev/cuda/bindings/go"
)

// childEnv marks the re-executed test binary that runs without a driver.
const childEnv = "VYRE_CUDA_GO_TEST_CHILD"

const noDriverPath = "/nonexistent/libcuda.so.1"

// inChild reports whether this process is the no-driver child running
// `test`; otherwise it runs the child (this binary, that test only, with
// VYRE_CUDA_DRIVER_LIBRARY pointing nowhere) and checks that it passed.
func inChild(t *testing.T) bool {
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), "VYRE_CUDA_DRIVER_LIBRARY="+noDriverPath,
		"VYRE_CUDA_TEST_FAKE_DRIVER=", "VYRE_CUDA_REQUIRE_GPU=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the no-driver child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "CHILD-DONE "+t.Name()) {
		t.Fatalf("the no-driver child ran nothing:\n%s", out)
	}
	return false
}

func wantNoDriver(t *testing.T, err error, what string) {
	t.Helper()
	e := wantError(t, err, vc.StatusNoDriver, what)
	if !strings.Contains(e.Message, noDriverPath) {
		t.Fatalf("%s: the path is not named: %v", what, e)
	}
	if e.CUResult != 0 {
		t.Fatalf("%s: CUResult %d", what, e.CUResult)
	}
}

func TestNoDriverIsReportedWithAFix(t *testing.T) {
	if !inChild(t) {
		return
	}
	_, err := vc.NewContext(0)
	wantNoDriver(t, err, "NewContext")
	var verr *vc.Error
	if !errors.As(err, &verr) || verr.Status != vc.StatusNoDriver || verr.Op != "vyre_context_create" {
		t.Fatalf("errors.As: %#v", verr)
	}
	_, err = vc.DeviceCount()
	wantNoDriver(t, err, "DeviceCount")
	_, err = vc.QueryDevice(0)
	wantNoDriver(t, err, "QueryDevice")
	_, err = vc.DeviceCanAccessPeer(0, 1)
	wantNoDriver(t, err, "DeviceCanAccessPeer")
	_, err = vc.NewContextWithOptions(vc.ContextOptions{StagingThreads: 2})
	wantNoDriver(t, err, "NewContextWithOptions")
	t.Log("CHILD-DONE " + t.Name())
}

func TestNoDriverStillChecksInputAndRunsTheCPUReference(t *testing.T) {
	if !inChild(t) {
		return
	}
	// Objects closed or never made are errors before the driver is needed.
	var b vc.Buffer
	wantError(t, b.Upload(0, []byte{1}), vc.StatusInvalidHandle, "a zero Buffer")
	var p vc.Program
	_, err := p.Dispatch(nil)
	wantError(t, err, vc.StatusInvalidHandle, "a zero Program")
	// Host memory outside the Go heap needs no driver.
	m, err := vc.AllocHostMemory(16)
	must(t, err, "AllocHostMemory")
	_, err = m.WriteAt([]byte("hello"), 0)
	must(t, err, "WriteAt")
	must(t, m.Close(), "Close")
	must(t, m.Close(), "Close twice")
	// The CPU e-graph reference needs no driver.
	img, err := vc.NewCPUEgraphImage(vc.NodesToColumns([]vc.EgraphNode{
		{Class: 0, Op: 1}, {Class: 1, Op: 2}, {Class: 2, Op: 3, Children: []uint32{0}},
		{Class: 3, Op: 3, Children: []uint32{1}}}), 1)
	must(t, err, "NewCPUEgraphImage")
	canonical := make([]uint32, 4)
	_, err = img.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{0, 1}}, Canonical: canonical})
	must(t, err, "Rebuild")
	if canonical[0] != 0 || canonical[1] != 0 || canonical[2] != 2 || canonical[3] != 2 {
		t.Fatalf("canonical %v", canonical)
	}
	must(t, img.Close(), "Close")
	// The log callback can be set without a driver.
	must(t, vc.SetLogCallback(func(vc.LogLevel, string) {}, vc.LogInfo), "SetLogCallback")
	must(t, vc.ClearLogCallback(), "ClearLogCallback")
	t.Log("CHILD-DONE " + t.Name())
}
