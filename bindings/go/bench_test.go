package vyrecuda_test

import (
	"testing"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

// Per-call cost of the bindings for a 4 KiB vector add (1024 u32), resident
// and over Go slices: go test -run '^$' -bench . (with a driver; on the fake
// driver the kernel itself runs on the host, so compare with the C API's
// numbers from the same driver).
func benchAdd(b *testing.B, host bool) {
	ctx, err := vc.NewContext(0)
	if err != nil {
		b.Skipf("no driver: %v", err)
	}
	defer ctx.Close()
	add, err := ctx.NewProgram(vc.ProgramDesc{Code: []byte(testkernels.AddPTX), Entry: "vyre_test_add_u32",
		Bindings: addBindings()})
	if err != nil {
		b.Fatal(err)
	}
	const n = 1024
	r := newRng(1)
	a, bb := r.u32s(n), r.u32s(n)
	out := make([]uint32, n)
	d := addDispatch(a, bb, out)
	if !host {
		da, _ := ctx.Upload(vc.AsBytes(a))
		db, _ := ctx.Upload(vc.AsBytes(bb))
		dout, _ := ctx.Alloc(4 * n)
		d = &vc.Dispatch{Args: []vc.Arg{da.Arg(), db.Arg(), dout.Arg()}, Params: []uint32{n}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := add.Dispatch(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDispatchResident4KiB(b *testing.B) { benchAdd(b, false) }
func BenchmarkDispatchHost4KiB(b *testing.B)     { benchAdd(b, true) }
