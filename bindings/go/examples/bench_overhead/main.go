// bench_overhead: per-call cost of a 4 KiB vector add (1024 u32) through the
// Go bindings, the counterpart of bench/binding_overhead.c (the C baseline),
// the Rust example bench_overhead and bindings/python/bench_overhead.py. Not
// a test.
//
//	go run ./examples/bench_overhead [-iterations N] [-warmup N]
//
// resident: inputs and output in resident buffers (the dispatch waits);
// host: inputs from Go slices, the sum written back to a Go slice. Each call
// is timed alone after the warm-up calls; one line per case,
// "OVERHEAD {json}" with the median, p10 and p90 in microseconds. Results are
// checked element by element before and after timing. Exit codes: 1 = an
// error or a wrong element, 2 = no usable CUDA driver (none, one too old, or
// no device).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

const n = 1024

func main() {
	iterations := flag.Int("iterations", 20000, "timed calls per case")
	warmup := flag.Int("warmup", 2000, "untimed calls before them")
	flag.Parse()
	if *iterations < 10 {
		*iterations = 10
	}
	if err := run(*iterations, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "bench_overhead:", err)
		if errors.Is(err, vc.StatusNoDriver) || errors.Is(err, vc.StatusDriverTooOld) ||
			errors.Is(err, vc.StatusNoDevice) {
			os.Exit(2) // this machine cannot run CUDA work
		}
		os.Exit(1)
	}
}

func run(iterations, warmup int) error {
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
		a[i] = (uint32(i) * 2654435761) & 0x7FFFFFFF
		b[i] = (uint32(i)*40503 + 7) & 0x7FFFFFFF
	}
	check := func(out []uint32, how string) error {
		for i := range a {
			if out[i] != a[i]+b[i] {
				return fmt.Errorf("%s: out[%d] = %d, expected %d", how, i, out[i], a[i]+b[i])
			}
		}
		return nil
	}

	// Resident: one descriptor, reused.
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
	dout, err := ctx.Alloc(4 * n)
	if err != nil {
		return err
	}
	defer dout.Close()
	resident := &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}}
	call := func(d *vc.Dispatch) func() error {
		return func() error { _, err := add.Dispatch(d); return err }
	}
	if err := call(resident)(); err != nil {
		return err
	}
	if got, err := vc.Read[uint32](dout); err != nil {
		return err
	} else if err := check(got, "resident"); err != nil {
		return err
	}
	if err := measure("resident", call(resident), iterations, warmup, info.Name); err != nil {
		return err
	}
	if got, err := vc.Read[uint32](dout); err != nil {
		return err
	} else if err := check(got, "resident, after timing"); err != nil {
		return err
	}

	// Host: one descriptor over the Go slices, reused.
	out := make([]uint32, n)
	host := &vc.Dispatch{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}, Params: []uint32{n}}
	if err := call(host)(); err != nil {
		return err
	}
	if err := check(out, "host"); err != nil {
		return err
	}
	for i := range out {
		out[i] = 0
	}
	if err := measure("host", call(host), iterations, warmup, info.Name); err != nil {
		return err
	}
	return check(out, "host, after timing")
}

func measure(name string, call func() error, iterations, warmup int, device string) error {
	for i := 0; i < warmup; i++ {
		if err := call(); err != nil {
			return err
		}
	}
	samples := make([]float64, iterations)
	for i := range samples {
		t0 := time.Now()
		err := call()
		samples[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
		if err != nil {
			return err
		}
	}
	sort.Float64s(samples)
	median := samples[iterations/2]
	if iterations%2 == 0 {
		median = (samples[iterations/2-1] + samples[iterations/2]) / 2
	}
	line, _ := json.Marshal(map[string]interface{}{
		"binding": "Go", "case": name, "median_us": median, "p10_us": samples[iterations/10],
		"p90_us": samples[9*iterations/10], "iterations": iterations, "device": device,
	})
	fmt.Printf("OVERHEAD %s\n", line)
	return nil
}
