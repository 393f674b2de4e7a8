package vyrecuda_test

// The tests run against whatever driver the process loads:
//   - the fake driver (VYRE_CUDA_DRIVER_LIBRARY=.../libfake_cuda.so and
//     VYRE_CUDA_TEST_FAKE_DRIVER=1), which runs the test kernels on the host:
//     every test runs, and the run fails if the library misused the driver;
//   - a GPU (VYRE_CUDA_REQUIRE_GPU=1: a missing driver is a failure);
//   - neither: the tests that need a driver skip.
// TestNoDriver re-runs this binary with VYRE_CUDA_DRIVER_LIBRARY pointing
// nowhere (the driver is loaded once per process).

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/fakedriver"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

func fake() bool { return os.Getenv("VYRE_CUDA_TEST_FAKE_DRIVER") == "1" }

func requireDriver() bool { return fake() || os.Getenv("VYRE_CUDA_REQUIRE_GPU") == "1" }

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && fake() && os.Getenv(childEnv) == "" {
		s, err := fakedriver.Read()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake driver stats:", err)
			code = 1
		} else if s.MisuseErrors != 0 {
			fmt.Fprintf(os.Stderr, "the library misused the (fake) driver API %d times; its stderr shows each call\n",
				s.MisuseErrors)
			code = 1
		}
	}
	os.Exit(code)
}

// testContext returns a context on device 0, or skips the test when this
// machine has no usable driver and none is required.
func testContext(t *testing.T) *vc.Context {
	t.Helper()
	ctx, err := vc.NewContext(0)
	if err != nil {
		if (errors.Is(err, vc.StatusNoDriver) || errors.Is(err, vc.StatusNoDevice) ||
			errors.Is(err, vc.StatusDriverTooOld)) && !requireDriver() {
			t.Skipf("no usable CUDA driver (%v); set VYRE_CUDA_DRIVER_LIBRARY to the fake driver and VYRE_CUDA_TEST_FAKE_DRIVER=1 to run this", err)
		}
		t.Fatalf("NewContext: %v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("Context.Close: %v", err)
		}
	})
	return ctx
}

func addBindings() []vc.BindingDecl {
	return []vc.BindingDecl{
		{Role: vc.RoleInput, Name: "a", ElementSize: 4},
		{Role: vc.RoleInput, Name: "b", ElementSize: 4},
		{Role: vc.RoleOutput, Name: "out", ElementSize: 4},
	}
}

func addProgram(t *testing.T, ctx *vc.Context) *vc.Program {
	t.Helper()
	p, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.AddPTX), Entry: testkernels.AddEntry,
		Bindings: addBindings(), WorkgroupSize: [3]uint32{256},
	})
	if err != nil {
		t.Fatalf("the add program: %v", err)
	}
	return p
}

func incProgram(t *testing.T, ctx *vc.Context) *vc.Program {
	t.Helper()
	p, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.IncPTX), Entry: testkernels.IncEntry,
		Bindings:      []vc.BindingDecl{{Role: vc.RoleInputOutput, Name: "data"}},
		WorkgroupSize: [3]uint32{128},
	})
	if err != nil {
		t.Fatalf("the inc program: %v", err)
	}
	return p
}

// rng is xorshift64*: deterministic test data.
type rng uint64

func newRng(seed uint64) *rng {
	r := rng(seed*0x9E3779B97F4A7C15 | 1)
	return &r
}

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 0x2545F4914F6CDD1D
}

// u32s are non-zero: an all-zero result cannot pass by accident.
func (r *rng) u32s(n int) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = uint32(r.next()>>32) | 1
	}
	return v
}

func (r *rng) below(n uint64) uint64 { return r.next() % n }

// checkSum checks out[i] == a[i] + b[i] (wrapping), element by element.
func checkSum(t *testing.T, a, b, out []uint32, label string) {
	t.Helper()
	if len(out) != len(a) {
		t.Fatalf("%s: %d outputs for %d inputs", label, len(out), len(a))
	}
	bad, first := 0, -1
	for i := range a {
		if out[i] != a[i]+b[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements wrong; first out[%d] = %d, expected %d",
			label, bad, len(a), first, out[first], a[first]+b[first])
	}
}

// wantError checks that err is an *Error with the status and a Fix.
func wantError(t *testing.T, err error, status vc.Status, what string) *vc.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, expected %v", what, status)
	}
	var e *vc.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %T %v is not a *vyrecuda.Error", what, err, err)
	}
	if e.Status != status {
		t.Fatalf("%s: status %v, expected %v: %v", what, e.Status, status, err)
	}
	if !errors.Is(err, status) {
		t.Fatalf("%s: errors.Is(err, %v) is false", what, status)
	}
	if fix := e.Fix(); !strings.HasPrefix(fix, "Fix: ") || len(fix) <= len("Fix: ") {
		t.Fatalf("%s: no Fix in %q", what, e.Message)
	}
	return e
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func assertNoMisuse(t *testing.T) {
	t.Helper()
	if !fake() {
		return
	}
	s, err := fakedriver.Read()
	must(t, err, "fake driver stats")
	if s.MisuseErrors != 0 {
		t.Fatalf("the library misused the (fake) driver API %d times (see stderr)", s.MisuseErrors)
	}
}

func addDispatch(a, b, out []uint32) *vc.Dispatch {
	return &vc.Dispatch{
		Args:   []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)},
		Params: []uint32{uint32(len(a))},
	}
}
