package vyrecuda_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	vc "vyre.dev/cuda/bindings/go"
)

// Synchronous dispatches reuse their C descriptor memory (call arenas) from
// one call to the next: each call must see only its own Go slices, params
// and lengths. The inputs change every call, the output is sometimes reused
// (poisoned first) and sometimes re-allocated, slices are re-sliced at other
// offsets, sizes shrink and grow, and garbage collections run in between;
// every element of every result is checked.
func TestRepeatedHostDispatchFreshSlices(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	defer add.Close()
	inc := incProgram(t, ctx)
	defer inc.Close()

	r := newRng(42)
	sizes := []int{1024, 1, 37, 4099, 256, 1000, 3, 2048}
	out := make([]uint32, 4099)
	for it := 0; it < 160; it++ {
		n := sizes[it%len(sizes)]
		a, b := r.u32s(n), r.u32s(n)
		if it%3 == 1 {
			// An input that lies at an offset inside a larger array.
			big := r.u32s(n + 17)
			off := int(r.below(17))
			copy(big[off:], a)
			a = big[off : off+n]
		}
		var o []uint32
		if it%2 == 0 {
			o = make([]uint32, n) // moved: a new slice each time
		} else {
			o = out[:n] // reused, poisoned so a stale write shows
		}
		for i := range o {
			o[i] = 0xDEADBEEF
		}
		if _, err := add.Dispatch(addDispatch(a, b, o)); err != nil {
			t.Fatalf("iteration %d (n=%d): %v", it, n, err)
		}
		checkSum(t, a, b, o, fmt.Sprintf("iteration %d (n=%d)", it, n))

		// An in-place update of a fresh slice, then one into another slice.
		data := r.u32s(n)
		want := append([]uint32(nil), data...)
		if _, err := inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOut(data)}, Params: []uint32{uint32(n)}}); err != nil {
			t.Fatalf("iteration %d inc: %v", it, err)
		}
		dst := make([]uint32, n)
		if _, err := inc.Dispatch(&vc.Dispatch{Args: []vc.Arg{vc.InOutTo(data, dst)}, Params: []uint32{uint32(n)}}); err != nil {
			t.Fatalf("iteration %d inc to: %v", it, err)
		}
		for i := range want {
			if data[i] != want[i]+1 || dst[i] != want[i]+2 {
				t.Fatalf("iteration %d inc (n=%d): element %d is %d then %d, expected %d then %d",
					it, n, i, data[i], dst[i], want[i]+1, want[i]+2)
			}
		}
		if it%16 == 15 {
			runtime.GC()
		}
	}
}

// Concurrent synchronous dispatches from several goroutines each get their
// own call arena: no result mixes another goroutine's slices.
func TestConcurrentHostDispatchFreshSlices(t *testing.T) {
	ctx := testContext(t)
	add := addProgram(t, ctx)
	defer add.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := newRng(uint64(100 + g))
			for it := 0; it < 40; it++ {
				n := 1 + int(r.below(3000))
				a, b, o := r.u32s(n), r.u32s(n), make([]uint32, n)
				if _, err := add.Dispatch(addDispatch(a, b, o)); err != nil {
					errs <- fmt.Errorf("goroutine %d iteration %d: %v", g, it, err)
					return
				}
				for i := range a {
					if o[i] != a[i]+b[i] {
						errs <- fmt.Errorf("goroutine %d iteration %d (n=%d): out[%d] = %d, expected %d",
							g, it, n, i, o[i], a[i]+b[i])
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
