// vector_add: out = a + b over n u32 elements, three ways: Go slices
// (synchronous), resident buffers, and an asynchronous dispatch into pinned
// memory waited on with a context. Every element is checked on the CPU.
//
//	go run ./examples/vector_add [N]
//
// Without a usable CUDA driver (none, one too old, or no device) it prints
// the library's message, with its Fix, and exits with code 2; any other
// error or a wrong element exits with code 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

func main() {
	n := 1 << 20
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v <= 0 {
			fmt.Fprintln(os.Stderr, "usage: vector_add [N > 0]")
			os.Exit(2)
		}
		n = v
	}
	if err := run(n); err != nil {
		fmt.Fprintln(os.Stderr, "vector_add:", err)
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
	info, err := ctx.DeviceInfo()
	if err != nil {
		return err
	}
	add, err := ctx.NewProgram(vc.ProgramDesc{
		Code:  []byte(testkernels.AddPTX),
		Entry: testkernels.AddEntry,
		Bindings: []vc.BindingDecl{
			{Role: vc.RoleInput, Name: "a"}, {Role: vc.RoleInput, Name: "b"}, {Role: vc.RoleOutput, Name: "out"},
		},
		WorkgroupSize: [3]uint32{256},
	})
	if err != nil {
		return err
	}
	defer add.Close()

	a, b := make([]uint32, n), make([]uint32, n)
	for i := range a {
		a[i] = uint32(i)*2654435761 + 1
		b[i] = uint32(i) ^ 0x5bd1e995
	}
	check := func(out []uint32, how string) error {
		for i := range out {
			if out[i] != a[i]+b[i] {
				return fmt.Errorf("%s: out[%d] = %d, expected %d", how, i, out[i], a[i]+b[i])
			}
		}
		return nil
	}

	// 1. Go slices, synchronous.
	out := make([]uint32, n)
	timing, err := add.Dispatch(&vc.Dispatch{
		Args:         []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)},
		Params:       []uint32{uint32(n)},
		DeviceTiming: true,
	})
	if err != nil {
		return err
	}
	if err := check(out, "host"); err != nil {
		return err
	}

	// 2. Resident buffers.
	da, err := ctx.Upload(vc.AsBytes(a))
	if err != nil {
		return err
	}
	defer da.Close()
	db, err := ctx.Upload(vc.AsBytes(b))
	if err != nil {
		return err
	}
	defer db.Close()
	dout, err := ctx.Alloc(uint64(4 * n))
	if err != nil {
		return err
	}
	defer dout.Close()
	if _, err := add.Dispatch(&vc.Dispatch{
		Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{uint32(n)},
	}); err != nil {
		return err
	}
	res, err := vc.Read[uint32](dout)
	if err != nil {
		return err
	}
	if err := check(res, "resident"); err != nil {
		return err
	}

	// 3. Asynchronous, output in pinned memory (written in place by the
	//    wait), waited on with a deadline.
	pinned, err := ctx.AllocPinned(uint64(4 * n))
	if err != nil {
		return err
	}
	defer pinned.Close()
	pd, err := add.DispatchAsync(&vc.Dispatch{
		Args: []vc.Arg{da.Arg(), vc.In(b), pinned.All().Out()}, Params: []uint32{uint32(n)},
	})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pd.Finish(wctx); err != nil {
		return err
	}
	view, err := vc.View[uint32](pinned)
	if err != nil {
		return err
	}
	if err := check(view, "async pinned"); err != nil {
		return err
	}

	fmt.Printf("vector_add of %d u32 on %s: %.1f us on the device, %.1f us wall (host path)\n",
		n, info.Name, float64(timing.Device)/1e3, float64(timing.Wall)/1e3)
	fmt.Println("vector_add: OK")
	return nil
}
