// graph_replay: record a dispatch once as a CUDA graph and replay it many
// times with new host data (each replay is one cuGraphLaunch), then a
// sequence of steps over resident buffers recorded as one graph.
//
//	go run ./examples/graph_replay [N]
//
// Every replay's output is checked element by element. Exits 1 on an error
// or a wrong element, 2 when this machine cannot run CUDA work (no driver, a
// driver too old, no device); a library error prints its message and Fix.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

func main() {
	n := 1 << 16
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v <= 0 {
			fmt.Fprintln(os.Stderr, "usage: graph_replay [N > 0]")
			os.Exit(2)
		}
		n = v
	}
	if err := run(n); err != nil {
		fmt.Fprintln(os.Stderr, "graph_replay:", err)
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
	add, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.AddPTX), Entry: testkernels.AddEntry,
		Bindings: []vc.BindingDecl{
			{Role: vc.RoleInput, Name: "a"}, {Role: vc.RoleInput, Name: "b"}, {Role: vc.RoleOutput, Name: "out"},
		},
	})
	if err != nil {
		return err
	}
	defer add.Close()

	a, b, out := make([]uint32, n), make([]uint32, n), make([]uint32, n)
	fill := func(seed uint32) {
		for i := range a {
			a[i] = uint32(i)*seed + 7
			b[i] = uint32(i) ^ (seed * 2654435761)
		}
	}
	fill(1)
	// The sample data fixes the shape; recording runs nothing.
	graph, err := add.Record(&vc.Dispatch{
		Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}, Params: []uint32{uint32(n)},
	})
	if err != nil {
		return err
	}
	defer graph.Close()
	const replays = 10
	var total float64
	for r := 0; r < replays; r++ {
		fill(uint32(r + 2))
		t, err := graph.Replay(&vc.Replay{Args: []vc.Arg{vc.In(a), vc.In(b), vc.Out(out)}})
		if err != nil {
			return err
		}
		total += float64(t.Wall)
		for i := range out {
			if out[i] != a[i]+b[i] {
				return fmt.Errorf("replay %d: out[%d] = %d, expected %d", r, i, out[i], a[i]+b[i])
			}
		}
	}
	info, err := graph.Info()
	if err != nil {
		return err
	}

	// A sequence: upload, (out = a + b; a = out) x 3, download, as one graph:
	// a + 3b.
	bytes := uint64(4 * n)
	var bufs [3]*vc.Buffer
	for i := range bufs {
		if bufs[i], err = ctx.Alloc(bytes); err != nil {
			return err
		}
		defer bufs[i].Close()
	}
	da, db, dout := bufs[0], bufs[1], bufs[2]
	seq, err := ctx.NewSequence([]vc.Step{
		vc.UploadStep(da, 0, vc.AsBytes(a)),
		vc.UploadStep(db, 0, vc.AsBytes(b)),
		vc.DispatchStep(add, &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{uint32(n)}}),
		vc.CopyStep(da, 0, dout, 0, bytes),
		vc.DownloadStep(dout, 0, vc.AsBytes(out)),
	}, &vc.Repeat{First: 2, Count: 2, Times: 3})
	if err != nil {
		return err
	}
	defer seq.Close()
	sg, err := seq.Record()
	if err != nil {
		return err
	}
	defer sg.Close()
	if _, err := sg.Launch(); err != nil {
		return err
	}
	for i := range out {
		if out[i] != a[i]+3*b[i] {
			return fmt.Errorf("sequence graph: out[%d] = %d, expected %d", i, out[i], a[i]+3*b[i])
		}
	}
	fmt.Printf("graph of %d nodes replayed %d times over %d u32: %.1f us wall per replay\n",
		info.NodeCount, info.Replays, n, total/replays/1e3)
	fmt.Println("graph_replay: OK")
	return nil
}
