// triton_saxpy: a Triton-style kernel, whose parameters are scalars and
// pointers in the kernel's own order, bound through an explicit parameter
// list instead of the default convention (one pointer per binding, then a
// parameter block).
//
//	go run ./examples/triton_saxpy [N]
//
// The kernel is vyre_test_saxpy_f32(float a, const float* x, float* y,
// u64 n): y[i] = a * x[i] + y[i]. Its parameters are bound as
// [Scalar32(0), Binding(0), Binding(1), Scalar64(1)]: Scalars[0] = a (f32
// bits), binding 0 = x, binding 1 = y, Scalars[1] = n. A Triton kernel with
// unused scratch pointers would add ParamNullPointer entries. x and y live
// in pinned memory, so the asynchronous dispatch copies them by DMA in
// place and writes y there when it is waited on. Exits 1 on an error or a
// wrong element, 2 when this machine cannot run CUDA work (no driver, a
// driver too old, no device); a library error prints its message and Fix.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

func main() {
	n := 1 << 20
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v <= 0 {
			fmt.Fprintln(os.Stderr, "usage: triton_saxpy [N > 0]")
			os.Exit(2)
		}
		n = v
	}
	if err := run(n); err != nil {
		fmt.Fprintln(os.Stderr, "triton_saxpy:", err)
		if errors.Is(err, vc.StatusNoDriver) || errors.Is(err, vc.StatusDriverTooOld) ||
			errors.Is(err, vc.StatusNoDevice) {
			os.Exit(2) // this machine cannot run CUDA work
		}
		os.Exit(1)
	}
}

func run(n int) error {
	ctx, err := vc.NewContext(0)
	if err != nil {
		return err
	}
	defer ctx.Close()
	saxpy, err := ctx.NewProgram(vc.ProgramDesc{
		Code:  []byte(testkernels.SaxpyPTX),
		Entry: testkernels.SaxpyEntry,
		Bindings: []vc.BindingDecl{
			{Role: vc.RoleInput, Name: "x", ElementSize: 4},
			{Role: vc.RoleInputOutput, Name: "y", ElementSize: 4},
		},
		Params: []vc.Param{
			{Kind: vc.ParamScalar32, Index: 0}, // a
			{Kind: vc.ParamBinding, Index: 0},  // x
			{Kind: vc.ParamBinding, Index: 1},  // y
			{Kind: vc.ParamScalar64, Index: 1}, // n
		},
		WorkgroupSize: [3]uint32{128},
	})
	if err != nil {
		return err
	}
	defer saxpy.Close()

	const a = float32(2.5)
	xm, err := ctx.AllocPinned(uint64(4 * n))
	if err != nil {
		return err
	}
	defer xm.Close()
	ym, err := ctx.AllocPinned(uint64(4 * n))
	if err != nil {
		return err
	}
	defer ym.Close()
	x, _ := vc.View[float32](xm)
	y, _ := vc.View[float32](ym)
	for i := range x {
		x[i] = float32(i % 1024)
		y[i] = float32(i % 3)
	}
	y0 := append([]float32(nil), y...)

	pd, err := saxpy.DispatchAsync(&vc.Dispatch{
		Args:         []vc.Arg{xm.All().In(), ym.All().InOut()},
		Scalars:      []uint64{vc.F32(a), uint64(n)},
		DeviceTiming: true,
	})
	if err != nil {
		return err
	}
	timing, err := pd.Finish(context.Background())
	if err != nil {
		return err
	}
	// Small integers times 2.5: exact with or without an FMA.
	for i := range y {
		if want := a*x[i] + y0[i]; y[i] != want {
			return fmt.Errorf("y[%d] = %v, expected %v", i, y[i], want)
		}
	}
	fmt.Printf("saxpy over %d floats: %.1f us on the device, %.1f us wall\n",
		n, float64(timing.Device)/1e3, float64(timing.Wall)/1e3)
	fmt.Println("triton_saxpy: OK")
	return nil
}
