package vyrecuda_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"

	vc "vyre.dev/cuda/bindings/go"
)

const (
	opA = 1
	opB = 2
	opF = 3
)

// small: a, b, f(a), f(b) in classes 0..3.
func small() []vc.EgraphNode {
	return []vc.EgraphNode{{Class: 0, Op: opA}, {Class: 1, Op: opB},
		{Class: 2, Op: opF, Children: []uint32{0}}, {Class: 3, Op: opF, Children: []uint32{1}}}
}

type unionFind []uint32

func newUnionFind(n int) unionFind {
	u := make(unionFind, n)
	for i := range u {
		u[i] = uint32(i)
	}
	return u
}

func (u unionFind) find(x uint32) uint32 {
	for u[x] != x {
		u[x] = u[u[x]]
		x = u[x]
	}
	return x
}

// union joins two sets under the smaller root.
func (u unionFind) union(a, b uint32) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if ra > rb {
		ra, rb = rb, ra
	}
	u[rb] = ra
}

// naivePass is the pairs one pass reports under u, merging nothing.
func naivePass(cols *vc.EgraphColumns, u unionFind) [][2]uint32 {
	groups := map[string]map[uint32]bool{}
	for r := range cols.RowClasses {
		key := fmt.Sprint(cols.RowOps[r])
		off, n := cols.ChildOffsets[r], cols.ChildLengths[r]
		for _, c := range cols.Children[off : off+n] {
			key += fmt.Sprintf(",%d", u.find(c))
		}
		if groups[key] == nil {
			groups[key] = map[uint32]bool{}
		}
		groups[key][u.find(cols.RowClasses[r])] = true
	}
	set := map[[2]uint32]bool{}
	for _, g := range groups {
		var cs []uint32
		for c := range g {
			cs = append(cs, c)
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
		for _, c := range cs[1:] {
			set[[2]uint32{cs[0], c}] = true
		}
	}
	pairs := [][2]uint32{}
	for p := range set {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		return pairs[i][0] < pairs[j][0] || pairs[i][0] == pairs[j][0] && pairs[i][1] < pairs[j][1]
	})
	return pairs
}

// naiveClosure is the canonical classes after the unions and congruence closure.
func naiveClosure(cols *vc.EgraphColumns, unions [][2]uint32) []uint32 {
	u := newUnionFind(int(cols.ClassCount))
	for _, p := range unions {
		u.union(p[0], p[1])
	}
	for {
		pairs := naivePass(cols, u)
		if len(pairs) == 0 {
			break
		}
		for _, p := range pairs {
			u.union(p[0], p[1])
		}
	}
	out := make([]uint32, cols.ClassCount)
	for i := range out {
		out[i] = u.find(uint32(i))
	}
	return out
}

func randomEgraph(r *rng, classes uint32, rows int) *vc.EgraphColumns {
	nodes := make([]vc.EgraphNode, rows)
	for i := range nodes {
		class := uint32(i)
		if class >= classes {
			class = uint32(r.below(uint64(classes)))
		}
		var children []uint32
		for k := uint64(0); k < r.below(3); k++ {
			children = append(children, uint32(r.below(uint64(classes))))
		}
		nodes[i] = vc.EgraphNode{Class: class, Op: 1 + uint32(r.below(4)), Children: children}
	}
	cols := vc.NodesToColumns(nodes)
	cols.ClassCount = uint64(classes)
	return cols
}

func TestEgraphSmallClosureOnTheCPU(t *testing.T) {
	img, err := vc.NewCPUEgraphImage(vc.NodesToColumns(small()), 1)
	must(t, err, "NewCPUEgraphImage")
	defer img.Close()
	pairs, err := img.Pass()
	must(t, err, "Pass")
	if len(pairs) != 0 {
		t.Fatalf("pairs before any union: %v", pairs)
	}
	canonical := make([]uint32, 4)
	res, err := img.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{0, 1}}, Canonical: canonical})
	must(t, err, "Rebuild")
	if !reflect.DeepEqual(canonical, []uint32{0, 0, 2, 2}) {
		t.Fatalf("canonical %v", canonical)
	}
	if res.Merges != 1 || res.UnionMerges != 1 || res.ClassesBefore != 4 || res.ClassesAfter != 2 || res.Rounds < 1 {
		t.Fatalf("result %+v", res)
	}
	info, err := img.Info()
	must(t, err, "Info")
	if info.Device != vc.EgraphCPU || info.RowCount != 4 || info.ClassCount != 4 || info.ChildCount != 2 ||
		info.CanonicalClassCount != 2 || info.ContextHandle != 0 {
		t.Fatalf("info %+v", info)
	}
	got := make([]uint32, 4)
	must(t, img.Read(vc.ColumnCanonicalClasses, 0, got), "Read canonical")
	if !reflect.DeepEqual(got, canonical) {
		t.Fatalf("canonical column %v", got)
	}
	// Reset: every class alone again.
	res, err = img.Rebuild(&vc.Rebuild{Reset: true, Canonical: canonical})
	must(t, err, "Rebuild reset")
	if !reflect.DeepEqual(canonical, []uint32{0, 1, 2, 3}) || res.ClassesAfter != 4 {
		t.Fatalf("after reset: %v %+v", canonical, res)
	}
	_, err = img.Rebuild(nil)
	must(t, err, "Rebuild(nil)")
}

func TestEgraphRandomGraphsMatchANaiveClosure(t *testing.T) {
	r := newRng(21)
	for round := 0; round < 30; round++ {
		classes := 2 + uint32(r.below(60))
		cols := randomEgraph(r, classes, int(classes)+int(r.below(100)))
		unions := [][2]uint32{{uint32(r.below(uint64(classes))), uint32(r.below(uint64(classes)))}}
		for _, threads := range []uint32{1, 0} {
			img, err := vc.NewCPUEgraphImage(cols, threads)
			must(t, err, "NewCPUEgraphImage")
			pairs, err := img.Pass()
			must(t, err, "Pass")
			if want := naivePass(cols, newUnionFind(int(classes))); !reflect.DeepEqual(pairs, want) {
				t.Fatalf("round %d: pass %v, expected %v", round, pairs, want)
			}
			canonical := make([]uint32, classes)
			_, err = img.Rebuild(&vc.Rebuild{Unions: unions, Canonical: canonical, CollidingHash: round%2 == 1})
			must(t, err, "Rebuild")
			if want := naiveClosure(cols, unions); !reflect.DeepEqual(canonical, want) {
				t.Fatalf("round %d threads %d: %v, expected %v", round, threads, canonical, want)
			}
			must(t, img.Close(), "Close")
		}
	}
}

func TestEgraphDifferentPayloadsNeverMerge(t *testing.T) {
	// Const(1) and Const(2) are different ops: f(c1) and f(c2) stay apart.
	nodes := []vc.EgraphNode{{Class: 0, Op: 10}, {Class: 1, Op: 11},
		{Class: 2, Op: opF, Children: []uint32{0}}, {Class: 3, Op: opF, Children: []uint32{1}}}
	img, err := vc.NewCPUEgraphImage(vc.NodesToColumns(nodes), 1)
	must(t, err, "NewCPUEgraphImage")
	defer img.Close()
	canonical := make([]uint32, 4)
	res, err := img.Rebuild(&vc.Rebuild{CollidingHash: true, Canonical: canonical})
	must(t, err, "Rebuild")
	if res.Merges != 0 || !reflect.DeepEqual(canonical, []uint32{0, 1, 2, 3}) {
		t.Fatalf("%+v %v", res, canonical)
	}
}

func TestEgraphColumnsReadWriteAndAsyncRebuild(t *testing.T) {
	cols := vc.NodesToColumns(small())
	img, err := vc.NewCPUEgraphImage(cols, 1)
	must(t, err, "NewCPUEgraphImage")
	defer img.Close()
	for _, c := range []struct {
		col  vc.EgraphColumn
		want []uint32
	}{{vc.ColumnRowClasses, cols.RowClasses}, {vc.ColumnRowOps, cols.RowOps},
		{vc.ColumnChildOffsets, cols.ChildOffsets}, {vc.ColumnChildLengths, cols.ChildLengths},
		{vc.ColumnChildren, cols.Children}} {
		got := make([]uint32, len(c.want))
		must(t, img.Read(c.col, 0, got), "Read")
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("column %d: %v, expected %v", c.col, got, c.want)
		}
	}
	two := make([]uint32, 2)
	must(t, img.Read(vc.ColumnRowOps, 2, two), "Read")
	if two[0] != opF || two[1] != opF {
		t.Fatalf("two %v", two)
	}
	wantError(t, img.Read(vc.ColumnRowOps, 3, two), vc.StatusOutOfRange, "a read past the rows")
	// f(b) becomes f(a): congruent to row 2 without any union.
	must(t, img.Write(vc.ColumnChildren, 1, []uint32{0}), "Write")
	pairs, _ := img.Pass()
	if !reflect.DeepEqual(pairs, [][2]uint32{{2, 3}}) {
		t.Fatalf("pairs %v", pairs)
	}
	wantError(t, img.Write(vc.ColumnChildren, 0, []uint32{99}), vc.StatusInvalidArgument, "a child past the classes")
	wantError(t, img.Write(vc.ColumnCanonicalClasses, 0, []uint32{0}), vc.StatusInvalidArgument, "writing canonical classes")
	n, err := img.PassInto(make([][2]uint32, 0))
	must(t, err, "PassInto")
	if n != 1 {
		t.Fatalf("PassInto count %d", n)
	}
	room := make([][2]uint32, 4)
	n, err = img.PassInto(room)
	must(t, err, "PassInto")
	if n != 1 || room[0] != [2]uint32{2, 3} {
		t.Fatalf("PassInto %d %v", n, room)
	}

	canonical := make([]uint32, 4)
	pd, err := img.RebuildAsync(&vc.Rebuild{Canonical: canonical})
	must(t, err, "RebuildAsync")
	if _, ok := pd.Result(); ok {
		t.Fatal("a result before the wait")
	}
	must(t, pd.Wait(context.Background()), "Wait")
	res, ok := pd.Result()
	if !ok || res.Merges != 1 {
		t.Fatalf("result %+v %v", res, ok)
	}
	if tm, err := pd.Timing(); err != nil || tm.Wall <= 0 {
		t.Fatalf("timing %+v %v", tm, err)
	}
	must(t, pd.Close(), "Close")
	if !reflect.DeepEqual(canonical, []uint32{0, 1, 2, 2}) {
		t.Fatalf("canonical %v", canonical)
	}
}

func TestEgraphBadColumnsAreErrorsWithAFix(t *testing.T) {
	base := vc.NodesToColumns(small())
	cols := *base
	cols.RowOps = cols.RowOps[:3]
	_, err := vc.NewCPUEgraphImage(&cols, 1)
	wantError(t, err, vc.StatusInvalidArgument, "a short row column")
	cols = *base
	cols.ClassCount = 2 // class ids 2 and 3 are out of range
	_, err = vc.NewCPUEgraphImage(&cols, 1)
	wantError(t, err, vc.StatusInvalidArgument, "class ids past the class count")
	cols = *base
	cols.ClassCount = 4
	cols.Children = []uint32{0, 7}
	_, err = vc.NewCPUEgraphImage(&cols, 1)
	wantError(t, err, vc.StatusInvalidArgument, "a child past the class count")
	cols = *base
	cols.RowSignatures = []uint32{1, 2, 3}
	_, err = vc.NewCPUEgraphImage(&cols, 1)
	wantError(t, err, vc.StatusInvalidArgument, "short signatures")
	cols = *base
	cols.ChildLengths = []uint32{0, 0, 5, 0}
	_, err = vc.NewCPUEgraphImage(&cols, 1)
	wantError(t, err, vc.StatusOutOfRange, "a child range past the children")

	img, err := vc.NewCPUEgraphImage(base, 1)
	must(t, err, "NewCPUEgraphImage")
	_, err = img.Rebuild(&vc.Rebuild{Canonical: make([]uint32, 3)})
	wantError(t, err, vc.StatusInvalidArgument, "a short canonical output")
	_, err = img.RebuildAsync(&vc.Rebuild{Canonical: make([]uint32, 5)})
	wantError(t, err, vc.StatusInvalidArgument, "a long canonical output")
	_, err = img.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{0, 9}}})
	wantError(t, err, vc.StatusInvalidArgument, "a union past the classes")
	_, err = img.PassInto(make([][2]uint32, 0))
	must(t, err, "PassInto")
	// Empty images are valid.
	empty, err := vc.NewCPUEgraphImage(&vc.EgraphColumns{}, 1)
	must(t, err, "an empty image")
	pairs, err := empty.Pass()
	if err != nil || len(pairs) != 0 {
		t.Fatalf("empty Pass: %v %v", pairs, err)
	}
	res, err := empty.Rebuild(nil)
	if err != nil || res.ClassesAfter != 0 {
		t.Fatalf("empty Rebuild: %+v %v", res, err)
	}
	must(t, empty.Close(), "Close")
	must(t, img.Close(), "Close")
	must(t, img.Close(), "Close twice")
	_, err = img.Pass()
	wantError(t, err, vc.StatusInvalidHandle, "Pass after Close")
}

func TestEgraphGPUImages(t *testing.T) {
	ctx := testContext(t)
	cols := vc.NodesToColumns(small())
	img, err := ctx.NewEgraphImage(cols)
	must(t, err, "NewEgraphImage")
	defer img.Close()
	info, err := img.Info()
	must(t, err, "Info")
	if info.Device != vc.EgraphGPU || info.RowCount != 4 || info.ClassCount != 4 || info.ChildCount != 2 ||
		info.ContextHandle != ctx.Handle() {
		t.Fatalf("info %+v", info)
	}
	got := make([]uint32, 4)
	must(t, img.Read(vc.ColumnRowOps, 0, got), "Read")
	if !reflect.DeepEqual(got, cols.RowOps) {
		t.Fatalf("row ops %v", got)
	}
	bad := *cols
	bad.ClassCount = 3
	_, err = ctx.NewEgraphImage(&bad)
	wantError(t, err, vc.StatusInvalidArgument, "class ids past the class count")
	if fake() {
		assertNoMisuse(t)
		return // the fake driver's e-graph kernels do nothing
	}
	canonical := make([]uint32, 4)
	_, err = img.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{0, 1}}, Canonical: canonical})
	must(t, err, "Rebuild")
	if !reflect.DeepEqual(canonical, []uint32{0, 0, 2, 2}) {
		t.Fatalf("canonical %v", canonical)
	}
	r := newRng(22)
	for round := 0; round < 20; round++ {
		classes := 2 + uint32(r.below(200))
		cols := randomEgraph(r, classes, int(classes)+int(r.below(300)))
		unions := [][2]uint32{{uint32(r.below(uint64(classes))), uint32(r.below(uint64(classes)))}}
		img, err := ctx.NewEgraphImage(cols)
		must(t, err, "NewEgraphImage")
		pairs, err := img.Pass()
		must(t, err, "Pass")
		if want := naivePass(cols, newUnionFind(int(classes))); !reflect.DeepEqual(pairs, want) {
			t.Fatalf("round %d: pass %v, expected %v", round, pairs, want)
		}
		canonical := make([]uint32, classes)
		pd, err := img.RebuildAsync(&vc.Rebuild{Unions: unions, Canonical: canonical, DeviceTiming: true})
		must(t, err, "RebuildAsync")
		must(t, pd.Wait(context.Background()), "Wait")
		must(t, pd.Close(), "Close")
		if want := naiveClosure(cols, unions); !reflect.DeepEqual(canonical, want) {
			t.Fatalf("round %d: %v, expected %v", round, canonical, want)
		}
		must(t, img.Close(), "Close")
	}
}
