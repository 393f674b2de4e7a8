package vyrecuda_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
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

// ---------------------------------------------------------------------------
// Growing images: Append and Changed
// ---------------------------------------------------------------------------

// freshLeaf is a leaf op no random row uses: the fresh class it names is
// alone until a union joins it.
const freshLeaf = 100

// growthRows are rows to append to a base image of `old` classes:
// newClasses classes numbered from old, rows in old and new classes with
// children naming both, and one row, in new class old+1, that is an old
// row's op with a child swapped for the fresh leaf class old: union (that
// leaf with the swapped child) makes it congruent to the old row twin.
type growthRows struct {
	rows       *vc.EgraphAppend
	newClasses uint32
	union      [2]uint32
	twin       int
}

func growth(r *rng, base *vc.EgraphColumns, old uint32) growthRows {
	newClasses := 2 + uint32(r.below(8))
	total := uint64(old + newClasses)
	leaf, twinClass := old, old+1
	twin := 0
	for row := range base.RowClasses {
		if base.ChildLengths[row] > 0 {
			twin = row
			break
		}
	}
	off, n := base.ChildOffsets[twin], base.ChildLengths[twin]
	twinChildren := append([]uint32(nil), base.Children[off:off+n]...)
	union := [2]uint32{leaf, base.RowClasses[twin]} // a leaf twin is congruent at once
	if len(twinChildren) > 0 {
		union = [2]uint32{leaf, twinChildren[0]}
		twinChildren[0] = leaf
	}
	nodes := []vc.EgraphNode{{Class: leaf, Op: freshLeaf},
		{Class: twinClass, Op: base.RowOps[twin], Children: twinChildren}}
	for i := uint64(0); i < 1+r.below(12); i++ {
		var children []uint32
		for k := r.below(3); k > 0; k-- {
			children = append(children, uint32(r.below(total)))
		}
		nodes = append(nodes, vc.EgraphNode{Class: uint32(r.below(total)), Op: 1 + uint32(r.below(4)),
			Children: children})
	}
	return growthRows{rows: vc.NodesToAppend(nodes, uint64(newClasses)), newClasses: newClasses,
		union: union, twin: twin}
}

// concatColumns is base followed by add (whose offsets are relative to its
// own children) over classCount classes: what an image of everything at
// once holds.
func concatColumns(base *vc.EgraphColumns, add *vc.EgraphAppend, classCount uint64) *vc.EgraphColumns {
	c := &vc.EgraphColumns{ClassCount: classCount}
	cat := func(a, b []uint32) []uint32 { return append(append([]uint32{}, a...), b...) }
	c.RowClasses = cat(base.RowClasses, add.RowClasses)
	c.RowOps = cat(base.RowOps, add.RowOps)
	c.ChildOffsets = append([]uint32{}, base.ChildOffsets...)
	for _, o := range add.ChildOffsets {
		c.ChildOffsets = append(c.ChildOffsets, o+uint32(len(base.Children)))
	}
	c.ChildLengths = cat(base.ChildLengths, add.ChildLengths)
	c.Children = cat(base.Children, add.Children)
	return c
}

// diffCanonical is the pairs (class, after[class]) whose canonical class
// changed, sorted by class: what Changed lists.
func diffCanonical(before, after []uint32) [][2]uint32 {
	out := [][2]uint32{}
	for c := range after {
		if before[c] != after[c] {
			out = append(out, [2]uint32{uint32(c), after[c]})
		}
	}
	return out
}

func distinctCount(canonical []uint32) uint64 {
	seen := map[uint32]bool{}
	for _, c := range canonical {
		seen[c] = true
	}
	return uint64(len(seen))
}

// imageState is what an image holds: info's counts, every column and the
// changed list (a refused append must leave all of it as it was).
type imageState struct {
	rows, classes, children, canonical uint64
	columns                            [][]uint32
	changed                            [][2]uint32
}

func snapshotImage(t *testing.T, img *vc.EgraphImage) imageState {
	t.Helper()
	info, err := img.Info()
	must(t, err, "Info")
	s := imageState{rows: info.RowCount, classes: info.ClassCount, children: info.ChildCount,
		canonical: info.CanonicalClassCount}
	for _, c := range []struct {
		col vc.EgraphColumn
		n   uint64
	}{{vc.ColumnRowClasses, info.RowCount}, {vc.ColumnRowOps, info.RowCount},
		{vc.ColumnChildOffsets, info.RowCount}, {vc.ColumnChildLengths, info.RowCount},
		{vc.ColumnRowSignatures, info.RowCount}, {vc.ColumnChildren, info.ChildCount},
		{vc.ColumnCanonicalClasses, info.ClassCount}} {
		v := make([]uint32, c.n)
		must(t, img.Read(c.col, 0, v), "Read")
		s.columns = append(s.columns, v)
	}
	s.changed, err = img.Changed()
	must(t, err, "Changed")
	return s
}

// checkRefusedAppends: appends the library (or the bindings) refuse, each
// leaving the image unchanged.
func checkRefusedAppends(t *testing.T, img *vc.EgraphImage, g growthRows) {
	t.Helper()
	before := snapshotImage(t, img)
	total := uint32(img.ClassCount()) + g.newClasses
	rows := g.rows
	clone := func() *vc.EgraphAppend { c := *rows; return &c }
	last := len(rows.RowClasses) - 1
	bad := clone()
	bad.RowClasses = append([]uint32{}, rows.RowClasses...)
	bad.RowClasses[last] = total // past the new class count
	e := wantError(t, img.Append(bad), vc.StatusInvalidArgument, "a row class past the new classes")
	if !strings.Contains(e.Message, "row_classes[") || e.Op != "vyre_egraph_image_append" {
		t.Fatalf("error %+v", e)
	}
	bad = clone()
	bad.ClassCount = 0 // the same rows name classes past the count
	wantError(t, img.Append(bad), vc.StatusInvalidArgument, "rows without their new classes")
	lengths := append([]uint32{}, rows.ChildLengths...)
	lengths[last]++
	bad = clone()
	bad.Children = append(append([]uint32{}, rows.Children...), total)
	bad.ChildLengths = lengths
	e = wantError(t, img.Append(bad), vc.StatusInvalidArgument, "a child past the new classes")
	if !strings.Contains(e.Message, "children[") {
		t.Fatalf("error %+v", e)
	}
	bad = clone()
	bad.ChildLengths = lengths // past the append's children (offsets index them)
	wantError(t, img.Append(bad), vc.StatusOutOfRange, "a child range past the appended children")
	bad = clone()
	bad.RowOps = rows.RowOps[1:]
	e = wantError(t, img.Append(bad), vc.StatusInvalidArgument, "a short row column")
	if !strings.Contains(e.Message, "RowOps") {
		t.Fatalf("error %+v", e)
	}
	bad = clone()
	bad.RowSignatures = make([]uint32, len(rows.RowClasses)+1)
	wantError(t, img.Append(bad), vc.StatusInvalidArgument, "long signatures")
	if after := snapshotImage(t, img); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused append changed the image:\n%+v\n%+v", before, after)
	}
	if img.ClassCount() != before.classes {
		t.Fatalf("ClassCount %d after refused appends, expected %d", img.ClassCount(), before.classes)
	}
}

// checkGrowth: create, rebuild, append rows naming old and new classes,
// rebuild with a union that makes an appended row congruent to an old one;
// canonical classes against a naive closure of everything and against an
// image of everything at once (fresh), changed pairs against the diff of
// the canonical classes, Info's counts and capacities, refused appends.
func checkGrowth(t *testing.T, seed uint64, rounds int,
	create func(*vc.EgraphColumns) (*vc.EgraphImage, error),
	fresh func(*vc.EgraphColumns) (*vc.EgraphImage, error)) {
	t.Helper()
	r := newRng(seed)
	for round := 0; round < rounds; round++ {
		old := 2 + uint32(r.below(30))
		base := randomEgraph(r, old, int(old)+int(r.below(40)))
		var unions1 [][2]uint32
		for k := r.below(3); k > 0; k-- {
			unions1 = append(unions1, [2]uint32{uint32(r.below(uint64(old))), uint32(r.below(uint64(old)))})
		}
		g := growth(r, base, old)
		total := old + g.newClasses
		rows, children := uint64(len(base.RowClasses)), uint64(len(base.Children))
		addedRows, addedChildren := uint64(len(g.rows.RowClasses)), uint64(len(g.rows.Children))
		// No reservation; room for the append; less than the counts (taken
		// as the counts).
		switch round % 3 {
		case 1:
			base.Capacity = vc.EgraphCapacity{Rows: rows + addedRows + 5, Classes: uint64(total) + 3,
				Children: children + addedChildren + 7}
		case 2:
			base.Capacity = vc.EgraphCapacity{Rows: 1, Classes: 1}
		}
		label := fmt.Sprintf("seed %d round %d (%+v)", seed, round, base.Capacity)
		img, err := create(base)
		must(t, err, label+": create")
		info, err := img.Info()
		must(t, err, "Info")
		max := func(a, b uint64) uint64 {
			if a > b {
				return a
			}
			return b
		}
		if info.RowCount != rows || info.ClassCount != uint64(old) || info.ChildCount != children ||
			info.RowCapacity < max(rows, base.Capacity.Rows) ||
			info.ClassCapacity < max(uint64(old), base.Capacity.Classes) ||
			info.ChildCapacity < max(children, base.Capacity.Children) || info.ChangedClassCount != 0 {
			t.Fatalf("%s: info %+v", label, info)
		}

		// The first rebuild: every class starts alone.
		canonical1 := make([]uint32, old)
		r1, err := img.Rebuild(&vc.Rebuild{Unions: unions1, Canonical: canonical1})
		must(t, err, "Rebuild")
		if want := naiveClosure(base, unions1); !reflect.DeepEqual(canonical1, want) {
			t.Fatalf("%s: first rebuild %v, expected %v", label, canonical1, want)
		}
		identity := make([]uint32, old)
		for i := range identity {
			identity[i] = uint32(i)
		}
		changed1 := diffCanonical(identity, canonical1)
		got, err := img.Changed()
		must(t, err, "Changed")
		if !reflect.DeepEqual(got, changed1) || r1.ChangedClassCount != uint64(len(changed1)) ||
			r1.FullRounds < 1 || r1.FullRounds > r1.Rounds {
			t.Fatalf("%s: changed %v, expected %v; result %+v", label, got, changed1, r1)
		}
		if len(changed1) >= 2 { // (an empty slice would ask the count)
			short := make([][2]uint32, len(changed1)-1)
			_, err := img.ChangedInto(short)
			e := wantError(t, err, vc.StatusOutOfRange, "ChangedInto with too little room")
			if e.Op != "vyre_egraph_changed_read" || short[0] != [2]uint32{} {
				t.Fatalf("%s: %+v, %v", label, e, short)
			}
		}
		room := make([][2]uint32, len(changed1)+2)
		n, err := img.ChangedInto(room)
		must(t, err, "ChangedInto")
		if n != uint64(len(changed1)) || !reflect.DeepEqual(room[:n], changed1) {
			t.Fatalf("%s: ChangedInto %d %v", label, n, room)
		}

		checkRefusedAppends(t, img, g)

		// The append: new classes start alone, the old ones keep their
		// canonical classes, and nothing is rebuilt yet.
		capBefore, err := img.Info()
		must(t, err, "Info")
		must(t, img.Append(g.rows), label+": Append")
		if img.ClassCount() != uint64(total) {
			t.Fatalf("%s: ClassCount %d after the append", label, img.ClassCount())
		}
		info, err = img.Info()
		must(t, err, "Info")
		if info.RowCount != rows+addedRows || info.ClassCount != uint64(total) ||
			info.ChildCount != children+addedChildren ||
			info.CanonicalClassCount != distinctCount(canonical1)+uint64(g.newClasses) ||
			info.RowCapacity < info.RowCount || info.ClassCapacity < info.ClassCount ||
			info.ChildCapacity < info.ChildCount || info.ChangedClassCount != uint64(len(changed1)) {
			t.Fatalf("%s: info after the append %+v", label, info)
		}
		if round%3 == 1 && (info.RowCapacity != capBefore.RowCapacity ||
			info.ClassCapacity != capBefore.ClassCapacity || info.ChildCapacity != capBefore.ChildCapacity) {
			t.Fatalf("%s: grew within the reservation: %+v, then %+v", label, capBefore, info)
		}
		// "The last rebuild" is still the first.
		got, err = img.Changed()
		must(t, err, "Changed")
		if !reflect.DeepEqual(got, changed1) {
			t.Fatalf("%s: changed after the append %v, expected %v", label, got, changed1)
		}
		combined := concatColumns(base, g.rows, uint64(total))
		for _, c := range []struct {
			col  vc.EgraphColumn
			want []uint32
		}{{vc.ColumnRowClasses, combined.RowClasses}, {vc.ColumnRowOps, combined.RowOps},
			{vc.ColumnChildOffsets, combined.ChildOffsets}, {vc.ColumnChildLengths, combined.ChildLengths},
			{vc.ColumnChildren, combined.Children}} {
			got := make([]uint32, len(c.want))
			must(t, img.Read(c.col, 0, got), "Read")
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%s: column %d %v, expected %v", label, c.col, got, c.want)
			}
		}
		start := append([]uint32{}, canonical1...)
		for c := old; c < total; c++ {
			start = append(start, c)
		}
		got32 := make([]uint32, total)
		must(t, img.Read(vc.ColumnCanonicalClasses, 0, got32), "Read canonical")
		if !reflect.DeepEqual(got32, start) {
			t.Fatalf("%s: canonical after the append %v, expected %v", label, got32, start)
		}

		// The second rebuild, with the union that makes the twin row
		// congruent to its old row (and sometimes one joining old and new).
		unions2 := [][2]uint32{g.union}
		if r.below(2) == 0 {
			unions2 = append(unions2, [2]uint32{uint32(r.below(uint64(old))),
				old + uint32(r.below(uint64(g.newClasses)))})
		}
		canonical2 := make([]uint32, total)
		r2, err := img.Rebuild(&vc.Rebuild{Unions: unions2, Canonical: canonical2})
		must(t, err, "Rebuild after the append")
		all := append(append([][2]uint32{}, unions1...), unions2...)
		want := naiveClosure(combined, all)
		if !reflect.DeepEqual(canonical2, want) {
			t.Fatalf("%s: after the append %v, expected %v", label, canonical2, want)
		}
		if canonical2[old+1] != canonical2[base.RowClasses[g.twin]] {
			t.Fatalf("%s: the appended twin row did not join its old row's class", label)
		}
		atOnce, err := fresh(combined)
		must(t, err, "an image of everything at once")
		canonicalAtOnce := make([]uint32, total)
		_, err = atOnce.Rebuild(&vc.Rebuild{Unions: all, Canonical: canonicalAtOnce})
		must(t, err, "Rebuild everything at once")
		must(t, atOnce.Close(), "Close")
		if !reflect.DeepEqual(canonical2, canonicalAtOnce) {
			t.Fatalf("%s: %v, an image of everything at once %v", label, canonical2, canonicalAtOnce)
		}
		changed2 := diffCanonical(start, canonical2)
		got, err = img.Changed()
		must(t, err, "Changed")
		info, err = img.Info()
		must(t, err, "Info")
		if !reflect.DeepEqual(got, changed2) || r2.ChangedClassCount != uint64(len(changed2)) ||
			info.ChangedClassCount != uint64(len(changed2)) || r2.FullRounds > r2.Rounds ||
			r2.ClassesBefore != distinctCount(start) || r2.ClassesAfter != distinctCount(want) ||
			info.CanonicalClassCount != distinctCount(want) {
			t.Fatalf("%s: changed %v, expected %v; result %+v; info %+v", label, got, changed2, r2, info)
		}
		pairs, err := img.Pass()
		must(t, err, "Pass")
		if len(pairs) != 0 {
			t.Fatalf("%s: not a fixpoint: %v", label, pairs)
		}

		// Classes without rows, then a rebuild that changes nothing.
		must(t, img.Append(&vc.EgraphAppend{ClassCount: 2}), "Append classes only")
		r3, err := img.Rebuild(nil)
		must(t, err, "Rebuild")
		got, err = img.Changed()
		must(t, err, "Changed")
		if r3.Merges != 0 || r3.ChangedClassCount != 0 || len(got) != 0 || img.ClassCount() != uint64(total)+2 {
			t.Fatalf("%s: %+v %v", label, r3, got)
		}
		after := append(append([]uint32{}, want...), total, total+1)
		// Reset: the changes from every class alone.
		r4, err := img.Rebuild(&vc.Rebuild{Unions: all, Reset: true, Canonical: make([]uint32, total+2)})
		must(t, err, "Rebuild reset")
		identity = make([]uint32, total+2)
		for i := range identity {
			identity[i] = uint32(i)
		}
		got, err = img.Changed()
		must(t, err, "Changed")
		if wantReset := diffCanonical(identity, after); !reflect.DeepEqual(got, wantReset) ||
			r4.ChangedClassCount != uint64(len(wantReset)) {
			t.Fatalf("%s: changed after a reset %v, expected %v", label, got, wantReset)
		}
		must(t, img.Close(), "Close")
	}
}

func TestEgraphAppendedRowsRebuildLikeAnImageOfEverything(t *testing.T) {
	for _, threads := range []uint32{1, 0} {
		checkGrowth(t, 23+uint64(threads), 24,
			func(c *vc.EgraphColumns) (*vc.EgraphImage, error) { return vc.NewCPUEgraphImage(c, threads) },
			func(c *vc.EgraphColumns) (*vc.EgraphImage, error) { return vc.NewCPUEgraphImage(c, threads) })
	}
}

func TestEgraphAppendsToEmptyAndSmallImages(t *testing.T) {
	// An empty image grows from nothing.
	img, err := vc.NewCPUEgraphImage(&vc.EgraphColumns{}, 1)
	must(t, err, "an empty image")
	defer img.Close()
	wantError(t, img.Append(vc.NodesToAppend(small(), 0)), vc.StatusInvalidArgument, "rows but no class")
	must(t, img.Append(vc.NodesToAppend(small(), 4)), "Append")
	must(t, img.Append(nil), "Append(nil)")
	res, err := img.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{1, 0}}})
	must(t, err, "Rebuild")
	changed, err := img.Changed()
	must(t, err, "Changed")
	if res.UnionMerges != 1 || res.Merges != 1 || res.ChangedClassCount != 2 ||
		!reflect.DeepEqual(changed, [][2]uint32{{1, 0}, {3, 2}}) {
		t.Fatalf("%+v %v", res, changed)
	}
	// A reservation, and signatures given with the rows.
	cols := vc.NodesToColumns(small())
	cols.Capacity = vc.EgraphCapacity{Rows: 64, Classes: 64, Children: 64}
	img2, err := vc.NewCPUEgraphImage(cols, 1)
	must(t, err, "NewCPUEgraphImage")
	defer img2.Close()
	info, err := img2.Info()
	must(t, err, "Info")
	if info.RowCapacity < 64 || info.ClassCapacity < 64 || info.ChildCapacity < 64 {
		t.Fatalf("info %+v", info)
	}
	more := vc.NodesToAppend([]vc.EgraphNode{{Class: 4, Op: opF, Children: []uint32{2}},
		{Class: 5, Op: opF, Children: []uint32{3}}}, 2)
	more.RowSignatures = []uint32{11, 12}
	must(t, img2.Append(more), "Append")
	sigs := make([]uint32, 2)
	must(t, img2.Read(vc.ColumnRowSignatures, 4, sigs), "Read")
	offsets := make([]uint32, 6)
	must(t, img2.Read(vc.ColumnChildOffsets, 0, offsets), "Read")
	if !reflect.DeepEqual(sigs, []uint32{11, 12}) || !reflect.DeepEqual(offsets, []uint32{0, 0, 0, 1, 2, 3}) {
		t.Fatalf("signatures %v offsets %v", sigs, offsets)
	}
	canonical := make([]uint32, 6)
	_, err = img2.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{0, 1}}, Canonical: canonical})
	must(t, err, "Rebuild")
	changed, err = img2.Changed()
	must(t, err, "Changed")
	if !reflect.DeepEqual(canonical, []uint32{0, 0, 2, 2, 4, 4}) ||
		!reflect.DeepEqual(changed, [][2]uint32{{1, 0}, {3, 2}, {5, 4}}) {
		t.Fatalf("canonical %v changed %v", canonical, changed)
	}
	if after, _ := img2.Info(); after.RowCapacity != info.RowCapacity {
		t.Fatalf("grew within the reservation: %+v then %+v", info, after)
	}
	// An unwaited asynchronous rebuild refuses appends and the changed list.
	pd, err := img2.RebuildAsync(nil)
	must(t, err, "RebuildAsync")
	wantError(t, img2.Append(more), vc.StatusInvalidState, "Append during a rebuild")
	_, err = img2.Changed()
	wantError(t, err, vc.StatusInvalidState, "Changed during a rebuild")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Close")
	if img2.ClassCount() != 6 {
		t.Fatalf("ClassCount %d", img2.ClassCount())
	}
	must(t, img2.Close(), "Close")
	wantError(t, img2.Append(more), vc.StatusInvalidHandle, "Append after Close")
	_, err = img2.Changed()
	wantError(t, err, vc.StatusInvalidHandle, "Changed after Close")
}

// checkAppendsWithoutRebuild: appends and refused appends without a
// rebuild on img (an image of base created with base.Capacity), what the
// fake driver checks too. It validates appends on the host but runs none of
// the other e-graph kernels, so the appended rows' child offsets (rebased on
// the device), the signatures and the canonical classes are not compared.
func checkAppendsWithoutRebuild(t *testing.T, img *vc.EgraphImage, base *vc.EgraphColumns) {
	t.Helper()
	reserved := base.Capacity
	info, err := img.Info()
	must(t, err, "Info")
	if info.RowCapacity < reserved.Rows || info.ClassCapacity < reserved.Classes ||
		info.ChildCapacity < reserved.Children {
		t.Fatalf("info %+v for %+v", info, reserved)
	}
	old := uint32(img.ClassCount())
	g := growth(newRng(27), base, old)
	checkRefusedAppends(t, img, g)
	must(t, img.Append(g.rows), "Append")
	combined := concatColumns(base, g.rows, uint64(old+g.newClasses))
	compare := func(label string) vc.EgraphImageInfo {
		t.Helper()
		info, err := img.Info()
		must(t, err, "Info")
		if info.RowCount != uint64(len(combined.RowClasses)) || info.ClassCount != combined.ClassCount ||
			info.ChildCount != uint64(len(combined.Children)) || info.ChangedClassCount != 0 ||
			info.RowCapacity < info.RowCount || info.ClassCapacity < info.ClassCount ||
			info.ChildCapacity < info.ChildCount {
			t.Fatalf("%s: info %+v", label, info)
		}
		for _, c := range []struct {
			col  vc.EgraphColumn
			want []uint32
		}{{vc.ColumnRowClasses, combined.RowClasses}, {vc.ColumnRowOps, combined.RowOps},
			{vc.ColumnChildLengths, combined.ChildLengths}, {vc.ColumnChildren, combined.Children}} {
			got := make([]uint32, len(c.want))
			must(t, img.Read(c.col, 0, got), "Read")
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%s: column %d %v, expected %v", label, c.col, got, c.want)
			}
		}
		return info
	}
	within := compare("within the reservation")
	if within.RowCapacity != info.RowCapacity || within.ClassCapacity != info.ClassCapacity ||
		within.ChildCapacity != info.ChildCapacity {
		t.Fatalf("grew within the reservation: %+v, then %+v", info, within)
	}
	// Past the reservation: the image grows and keeps every row.
	var nodes []vc.EgraphNode
	for i := uint32(0); i < uint32(reserved.Rows)+7; i++ {
		nodes = append(nodes, vc.EgraphNode{Class: i % old, Op: 1 + i%4, Children: []uint32{(i * 7) % old}})
	}
	more := vc.NodesToAppend(nodes, 0)
	must(t, img.Append(more), "Append past the reservation")
	combined = concatColumns(combined, more, combined.ClassCount)
	if grown := compare("past the reservation"); grown.RowCapacity <= within.RowCapacity {
		t.Fatalf("did not grow: %+v", grown)
	}
	changed, err := img.Changed()
	must(t, err, "Changed")
	if len(changed) != 0 {
		t.Fatalf("changed %v before any rebuild", changed)
	}
}

func growthBase() *vc.EgraphColumns {
	base := randomEgraph(newRng(28), 12, 30)
	base.Capacity = vc.EgraphCapacity{Rows: 64, Classes: 32, Children: 96}
	return base
}

func TestEgraphCPUImagesAppendWithoutRebuilds(t *testing.T) {
	// The same checks as on the fake driver, on the CPU reference.
	base := growthBase()
	img, err := vc.NewCPUEgraphImage(base, 1)
	must(t, err, "NewCPUEgraphImage")
	defer img.Close()
	checkAppendsWithoutRebuild(t, img, base)
}

func TestEgraphGPUImagesGrowLikeCPUImages(t *testing.T) {
	ctx := testContext(t)
	base := growthBase()
	img, err := ctx.NewEgraphImage(base)
	must(t, err, "NewEgraphImage")
	info, err := img.Info()
	must(t, err, "Info")
	if info.Device != vc.EgraphGPU {
		t.Fatalf("info %+v", info)
	}
	checkAppendsWithoutRebuild(t, img, base)
	must(t, img.Close(), "Close")
	if fake() {
		assertNoMisuse(t)
		return // the fake driver runs no rebuild kernel
	}
	// GPU images against CPU images of everything at once, and the reverse.
	checkGrowth(t, 25, 12, ctx.NewEgraphImage,
		func(c *vc.EgraphColumns) (*vc.EgraphImage, error) { return vc.NewCPUEgraphImage(c, 0) })
	checkGrowth(t, 26, 6,
		func(c *vc.EgraphColumns) (*vc.EgraphImage, error) { return vc.NewCPUEgraphImage(c, 0) },
		ctx.NewEgraphImage)
}

// A saturation loop grows its e-graph in place: match, Append the new
// e-nodes, Rebuild with the unions found (incrementally: only the new rows
// and the rows whose children changed class are visited), and update the
// matcher's indices from Changed.
func ExampleEgraphImage_Append() {
	const a, b, f = 1, 2, 3
	// a in class 0, b in 1, f(a) in 2, with room for appends.
	cols := vc.NodesToColumns([]vc.EgraphNode{{Class: 0, Op: a}, {Class: 1, Op: b},
		{Class: 2, Op: f, Children: []uint32{0}}})
	cols.Capacity = vc.EgraphCapacity{Rows: 64, Classes: 64, Children: 64}
	img, err := vc.NewCPUEgraphImage(cols, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer img.Close()
	if _, err := img.Rebuild(nil); err != nil {
		fmt.Println(err)
		return
	}
	// f(b) in a new class 3; then a = b makes it f(a)'s.
	fb := []vc.EgraphNode{{Class: 3, Op: f, Children: []uint32{1}}}
	if err := img.Append(vc.NodesToAppend(fb, 1)); err != nil {
		fmt.Println(err)
		return
	}
	res, err := img.Rebuild(&vc.Rebuild{Unions: [][2]uint32{{0, 1}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	changed, err := img.Changed() // (class, new canonical class)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.ChangedClassCount, changed)
	// Output: 2 [[1 0] [3 2]]
}
