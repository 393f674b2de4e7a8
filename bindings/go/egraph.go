package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// EgraphDevice is where an e-graph image lives (vyre_egraph_device).
type EgraphDevice int32

const (
	EgraphGPU EgraphDevice = C.VYRE_EGRAPH_DEVICE_GPU
	EgraphCPU EgraphDevice = C.VYRE_EGRAPH_DEVICE_CPU
)

// EgraphColumn names a column of an e-graph image (vyre_egraph_column).
type EgraphColumn int32

const (
	ColumnRowClasses    EgraphColumn = C.VYRE_EGRAPH_COLUMN_ROW_CLASSES
	ColumnRowOps        EgraphColumn = C.VYRE_EGRAPH_COLUMN_ROW_OPS
	ColumnChildOffsets  EgraphColumn = C.VYRE_EGRAPH_COLUMN_CHILD_OFFSETS
	ColumnChildLengths  EgraphColumn = C.VYRE_EGRAPH_COLUMN_CHILD_LENGTHS
	ColumnRowSignatures EgraphColumn = C.VYRE_EGRAPH_COLUMN_ROW_SIGNATURES
	ColumnChildren      EgraphColumn = C.VYRE_EGRAPH_COLUMN_CHILDREN
	// ColumnCanonicalClasses has ClassCount entries: every class's canonical
	// class (read only).
	ColumnCanonicalClasses EgraphColumn = C.VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES
)

// EgraphColumns are an e-graph's e-nodes as u32 columns: row r is the
// e-node RowOps[r](Children[ChildOffsets[r] : ChildOffsets[r]+ChildLengths[r]])
// in e-class RowClasses[r]. The row columns must have the same length (the
// row count); RowSignatures is optional (nil: computed).
type EgraphColumns struct {
	// ClassCount bounds every class id; 0 means one more than the largest
	// id used.
	ClassCount    uint64
	RowClasses    []uint32
	RowOps        []uint32
	ChildOffsets  []uint32
	ChildLengths  []uint32
	RowSignatures []uint32
	Children      []uint32
	// Capacity optionally reserves room for EgraphImage.Append (zero:
	// exactly the counts above).
	Capacity EgraphCapacity
}

// EgraphCapacity is room an image reserves at creation for appends
// (row_capacity, class_capacity and child_capacity of
// vyre_egraph_image_desc). 0, or less than the count created, means exactly
// the count; appends past the capacity grow it to the next power of two of
// what they need.
type EgraphCapacity struct {
	Rows     uint64
	Classes  uint64
	Children uint64
}

// EgraphAppend is rows and classes to append to an image
// (vyre_egraph_append_desc). ClassCount new classes are numbered from the
// image's ClassCount() on, each alone; RowClasses and Children may name any
// class below the image's ClassCount() plus ClassCount. The row columns
// have one entry per row (RowSignatures is optional: nil computes them);
// ChildOffsets index this append's Children (from 0, in row order).
type EgraphAppend struct {
	ClassCount    uint64
	RowClasses    []uint32
	RowOps        []uint32
	ChildOffsets  []uint32
	ChildLengths  []uint32
	RowSignatures []uint32
	Children      []uint32
}

// EgraphNode is one e-node for NodesToColumns.
type EgraphNode struct {
	Class    uint32
	Op       uint32
	Children []uint32
}

// NodesToColumns lays nodes out as columns (children in node order).
func NodesToColumns(nodes []EgraphNode) *EgraphColumns {
	c := &EgraphColumns{}
	var classes uint64
	see := func(id uint32) {
		if uint64(id)+1 > classes {
			classes = uint64(id) + 1
		}
	}
	for _, n := range nodes {
		c.RowClasses = append(c.RowClasses, n.Class)
		c.RowOps = append(c.RowOps, n.Op)
		c.ChildOffsets = append(c.ChildOffsets, uint32(len(c.Children)))
		c.ChildLengths = append(c.ChildLengths, uint32(len(n.Children)))
		c.Children = append(c.Children, n.Children...)
		see(n.Class)
		for _, ch := range n.Children {
			see(ch)
		}
	}
	c.ClassCount = classes
	return c
}

// NodesToAppend lays nodes out as rows to append (children in node order,
// offsets from 0) with newClasses new classes.
func NodesToAppend(nodes []EgraphNode, newClasses uint64) *EgraphAppend {
	c := NodesToColumns(nodes)
	return &EgraphAppend{ClassCount: newClasses, RowClasses: c.RowClasses, RowOps: c.RowOps,
		ChildOffsets: c.ChildOffsets, ChildLengths: c.ChildLengths, Children: c.Children}
}

// EgraphImage holds an e-graph's e-nodes and a union-find over its
// e-classes, on a context's GPU or on the host (the library's CPU
// reference) (vyre_egraph_image). Close destroys it; closing twice is
// harmless.
type EgraphImage struct {
	ctx        *Context
	h          atomic.Uint64
	classCount atomic.Uint64 // appends add to it
}

func u32ptr(a *callArena, field **C.uint32_t, v []uint32) {
	a.goIn((*unsafe.Pointer)(unsafe.Pointer(field)), AsBytes(v))
}

// checkRowColumns: every row column has as many entries as rowClasses
// (signatures may be nil).
func checkRowColumns(op string, rowClasses, rowOps, childOffsets, childLengths, signatures []uint32) error {
	rows := len(rowClasses)
	for _, col := range []struct {
		name string
		v    []uint32
	}{{"RowOps", rowOps}, {"ChildOffsets", childOffsets}, {"ChildLengths", childLengths}} {
		if len(col.v) != rows {
			return goError(StatusInvalidArgument, op,
				"%s has %d entries and RowClasses %d. Fix: give every row column one entry per row.",
				col.name, len(col.v), rows)
		}
	}
	if signatures != nil && len(signatures) != rows {
		return goError(StatusInvalidArgument, op,
			"RowSignatures has %d entries for %d rows. Fix: give one per row, or nil.", len(signatures), rows)
	}
	return nil
}

func newEgraphImage(ctx *Context, device EgraphDevice, cols *EgraphColumns, threads uint32) (*EgraphImage, error) {
	const op = "vyre_egraph_image_create"
	if cols == nil {
		cols = &EgraphColumns{}
	}
	rows := len(cols.RowClasses)
	if err := checkRowColumns(op, cols.RowClasses, cols.RowOps, cols.ChildOffsets, cols.ChildLengths,
		cols.RowSignatures); err != nil {
		return nil, err
	}
	classCount := cols.ClassCount
	if classCount == 0 {
		for _, v := range [][]uint32{cols.RowClasses, cols.Children} {
			for _, id := range v {
				if uint64(id)+1 > classCount {
					classCount = uint64(id) + 1
				}
			}
		}
	}
	a := getArena()
	defer putArena(a)
	desc := (*C.vyre_egraph_image_desc)(a.alloc(C.sizeof_vyre_egraph_image_desc))
	desc.struct_size = C.sizeof_vyre_egraph_image_desc
	desc.device = C.vyre_egraph_device(device)
	if ctx != nil {
		desc.context = ctx.handle()
	}
	desc.row_count = C.uint64_t(rows)
	desc.class_count = C.uint64_t(classCount)
	desc.child_count = C.uint64_t(len(cols.Children))
	u32ptr(a, &desc.row_classes, cols.RowClasses)
	u32ptr(a, &desc.row_ops, cols.RowOps)
	u32ptr(a, &desc.child_offsets, cols.ChildOffsets)
	u32ptr(a, &desc.child_lengths, cols.ChildLengths)
	if cols.RowSignatures != nil {
		u32ptr(a, &desc.row_signatures, cols.RowSignatures)
	}
	u32ptr(a, &desc.children, cols.Children)
	desc.cpu_threads = C.uint32_t(threads)
	desc.row_capacity = C.uint64_t(cols.Capacity.Rows)
	desc.class_capacity = C.uint64_t(cols.Capacity.Classes)
	desc.child_capacity = C.uint64_t(cols.Capacity.Children)
	out := (*C.vyre_egraph_image)(a.alloc(C.sizeof_vyre_egraph_image))
	err := a.run(op, C.GOVYRE_EGRAPH_IMAGE_CREATE, 0, unsafe.Pointer(desc), 0, unsafe.Pointer(out))
	runtime.KeepAlive(ctx)
	runtime.KeepAlive(cols)
	if err != nil {
		return nil, err
	}
	img := &EgraphImage{ctx: ctx}
	img.classCount.Store(classCount)
	img.h.Store(uint64(out.bits))
	runtime.SetFinalizer(img, func(img *EgraphImage) { _ = img.Close() })
	return img, nil
}

// NewEgraphImage builds an image on the context's GPU
// (vyre_egraph_image_create); every class starts alone.
func (c *Context) NewEgraphImage(cols *EgraphColumns) (*EgraphImage, error) {
	if err := c.check("vyre_egraph_image_create"); err != nil {
		return nil, err
	}
	return newEgraphImage(c, EgraphGPU, cols, 0)
}

// NewCPUEgraphImage builds an image for the library's CPU reference, which
// needs no driver; threads 0 uses every core, 1 is single-threaded.
func NewCPUEgraphImage(cols *EgraphColumns, threads uint32) (*EgraphImage, error) {
	return newEgraphImage(nil, EgraphCPU, cols, threads)
}

// Handle is the library handle's bits (0 once closed).
func (img *EgraphImage) Handle() uint64 { return img.h.Load() }

func (img *EgraphImage) handle() C.vyre_egraph_image {
	return C.vyre_egraph_image{bits: C.uint64_t(img.h.Load())}
}

func (img *EgraphImage) check(op string) error {
	if img == nil || img.h.Load() == 0 {
		return closedError(op, "EgraphImage")
	}
	return nil
}

// ClassCount is the image's class count (appends add to it).
func (img *EgraphImage) ClassCount() uint64 { return img.classCount.Load() }

// Close destroys the image (vyre_egraph_image_destroy).
func (img *EgraphImage) Close() error {
	if img == nil {
		return nil
	}
	bits := img.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(img, nil)
	err := call("vyre_egraph_image_destroy", func() C.vyre_status {
		return C.vyre_egraph_image_destroy(C.vyre_egraph_image{bits: C.uint64_t(bits)})
	})
	if isStale(err) {
		return nil
	}
	return err
}

// Read copies entries [first, first+len(dst)) of a column into dst
// (vyre_egraph_image_read).
func (img *EgraphImage) Read(col EgraphColumn, first uint64, dst []uint32) error {
	const op = "vyre_egraph_image_read"
	if err := img.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_egraph_image_read(img.handle(), C.vyre_egraph_column(col), C.uint64_t(first),
			C.uint64_t(len(dst)), (*C.uint32_t)(ptrOf(AsBytes(dst))))
	})
	runtime.KeepAlive(img)
	return err
}

// Write overwrites entries [first, first+len(src)) of a row column or of the
// children in place; the rows affected are validated first
// (vyre_egraph_image_write).
func (img *EgraphImage) Write(col EgraphColumn, first uint64, src []uint32) error {
	const op = "vyre_egraph_image_write"
	if err := img.check(op); err != nil {
		return err
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_egraph_image_write(img.handle(), C.vyre_egraph_column(col), C.uint64_t(first),
			C.uint64_t(len(src)), (*C.uint32_t)(ptrOf(AsBytes(src))))
	})
	runtime.KeepAlive(img)
	return err
}

// EgraphImageInfo describes an image (vyre_egraph_image_info).
type EgraphImageInfo struct {
	Device              EgraphDevice
	ContextHandle       uint64
	RowCount            uint64
	ClassCount          uint64
	ChildCount          uint64
	CanonicalClassCount uint64
	// Bytes the image and its scratch hold (device or host).
	Bytes uint64
	// Rows, classes and children the image holds before an Append must
	// grow it.
	RowCapacity   uint64
	ClassCapacity uint64
	ChildCapacity uint64
	// ChangedClassCount is the number of classes whose canonical class the
	// last rebuild changed (Changed lists them).
	ChangedClassCount uint64
}

// Info describes the image (vyre_egraph_image_info_get).
func (img *EgraphImage) Info() (EgraphImageInfo, error) {
	const op = "vyre_egraph_image_info_get"
	if err := img.check(op); err != nil {
		return EgraphImageInfo{}, err
	}
	var i C.vyre_egraph_image_info
	i.struct_size = C.sizeof_vyre_egraph_image_info
	err := call(op, func() C.vyre_status { return C.vyre_egraph_image_info_get(img.handle(), &i) })
	runtime.KeepAlive(img)
	if err != nil {
		return EgraphImageInfo{}, err
	}
	return EgraphImageInfo{Device: EgraphDevice(i.device), ContextHandle: uint64(i.context.bits),
		RowCount: uint64(i.row_count), ClassCount: uint64(i.class_count),
		ChildCount: uint64(i.child_count), CanonicalClassCount: uint64(i.canonical_class_count),
		Bytes: uint64(i.bytes), RowCapacity: uint64(i.row_capacity),
		ClassCapacity: uint64(i.class_capacity), ChildCapacity: uint64(i.child_capacity),
		ChangedClassCount: uint64(i.changed_class_count)}, nil
}

// PassInto runs one congruence pass, merging nothing (vyre_egraph_pass),
// writing the pairs into `pairs`; it returns the pair count. More pairs
// than len(pairs) is an error (StatusOutOfRange) that writes nothing; nil
// pairs asks the count.
func (img *EgraphImage) PassInto(pairs [][2]uint32) (uint64, error) {
	const op = "vyre_egraph_pass"
	if err := img.check(op); err != nil {
		return 0, err
	}
	var n C.uint64_t
	var p *C.uint32_t
	if len(pairs) > 0 {
		p = (*C.uint32_t)(unsafe.Pointer(&pairs[0][0]))
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_egraph_pass(img.handle(), p, C.uint64_t(len(pairs)), &n)
	})
	runtime.KeepAlive(img)
	return uint64(n), err
}

// Pass runs one congruence pass and returns its pairs (left < right,
// sorted): for each group of congruent rows, its minimum canonical class
// with every other class in it.
func (img *EgraphImage) Pass() ([][2]uint32, error) {
	n, err := img.PassInto(nil)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return [][2]uint32{}, nil
	}
	pairs := make([][2]uint32, n)
	m, err := img.PassInto(pairs)
	if err != nil {
		return nil, err
	}
	return pairs[:m], nil
}

// Append adds classes and rows to the image in place
// (vyre_egraph_image_append): the new classes are numbered from
// ClassCount() on, each alone; the union-find and the canonical classes are
// kept, and the next rebuild visits the new rows. The rows are validated as
// at creation; a refused append changes nothing. Within the image's
// capacity only the new rows are copied; past it the image grows (see
// EgraphCapacity).
func (img *EgraphImage) Append(rows *EgraphAppend) error {
	const op = "vyre_egraph_image_append"
	if err := img.check(op); err != nil {
		return err
	}
	if rows == nil {
		rows = &EgraphAppend{}
	}
	if err := checkRowColumns(op, rows.RowClasses, rows.RowOps, rows.ChildOffsets, rows.ChildLengths,
		rows.RowSignatures); err != nil {
		return err
	}
	a := getArena()
	defer putArena(a)
	desc := (*C.vyre_egraph_append_desc)(a.alloc(C.sizeof_vyre_egraph_append_desc))
	desc.struct_size = C.sizeof_vyre_egraph_append_desc
	desc.class_count = C.uint64_t(rows.ClassCount)
	desc.row_count = C.uint64_t(len(rows.RowClasses))
	desc.child_count = C.uint64_t(len(rows.Children))
	u32ptr(a, &desc.row_classes, rows.RowClasses)
	u32ptr(a, &desc.row_ops, rows.RowOps)
	u32ptr(a, &desc.child_offsets, rows.ChildOffsets)
	u32ptr(a, &desc.child_lengths, rows.ChildLengths)
	if rows.RowSignatures != nil {
		u32ptr(a, &desc.row_signatures, rows.RowSignatures)
	}
	u32ptr(a, &desc.children, rows.Children)
	err := a.run(op, C.GOVYRE_EGRAPH_IMAGE_APPEND, img.h.Load(), unsafe.Pointer(desc), 0, nil)
	runtime.KeepAlive(img)
	runtime.KeepAlive(rows)
	if err != nil {
		return err
	}
	img.classCount.Add(rows.ClassCount)
	return nil
}

// ChangedInto writes the classes whose canonical class the last rebuild
// changed into `pairs` as (class, new canonical class), sorted by class
// (vyre_egraph_changed_read); it returns the pair count. More pairs than
// len(pairs) is an error (StatusOutOfRange) that writes nothing; nil pairs
// asks the count.
func (img *EgraphImage) ChangedInto(pairs [][2]uint32) (uint64, error) {
	const op = "vyre_egraph_changed_read"
	if err := img.check(op); err != nil {
		return 0, err
	}
	var n C.uint64_t
	var p *C.uint32_t
	if len(pairs) > 0 {
		p = (*C.uint32_t)(unsafe.Pointer(&pairs[0][0]))
	}
	err := call(op, func() C.vyre_status {
		return C.vyre_egraph_changed_read(img.handle(), p, C.uint64_t(len(pairs)), &n)
	})
	runtime.KeepAlive(img)
	return uint64(n), err
}

// Changed returns the classes whose canonical class the last rebuild
// changed, as (class, new canonical class) pairs sorted by class: what an
// e-matcher updates its indices from. After a rebuild with Reset its start
// is every class alone; appended classes start alone.
func (img *EgraphImage) Changed() ([][2]uint32, error) {
	n, err := img.ChangedInto(nil)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return [][2]uint32{}, nil
	}
	pairs := make([][2]uint32, n)
	m, err := img.ChangedInto(pairs)
	if err != nil {
		return nil, err
	}
	return pairs[:m], nil
}

// Rebuild is what a rebuild does (vyre_egraph_rebuild_desc).
type Rebuild struct {
	// Unions are pairs of classes to merge first (e.g. e-matching's finds).
	Unions [][2]uint32
	// Reset starts from every class alone instead of the image's state.
	Reset bool
	// DeviceTiming records device events so the result reports Device.
	DeviceTiming bool
	// CollidingHash (testing) groups rows by a deliberately weak hash.
	CollidingHash bool
	// DeviceRounds (GPU images) runs every round on the device in one
	// launch of a loop graph that stops at the fixpoint (a CUDA 12.4
	// driver); it pays on rebuilds of many rounds. Same results.
	DeviceRounds bool
	// MaxRounds stops after that many rounds (0: no limit).
	MaxRounds uint32
	// Canonical, if not nil, receives every class's canonical class; it
	// must have exactly ClassCount() entries.
	Canonical []uint32
}

// RebuildResult is a rebuild's outcome (vyre_egraph_rebuild_result).
type RebuildResult struct {
	Rounds        uint32
	Merges        uint64
	UnionMerges   uint64
	ClassesBefore uint64
	ClassesAfter  uint64
	// RowsVisited counts row visits over all rounds: a full round visits
	// every row, an incremental one the rows appended since the last
	// rebuild and those with a child whose class was merged.
	RowsVisited uint64
	Device      time.Duration
	Wall        time.Duration
	// ChangedClassCount is the number of classes whose canonical class this
	// rebuild changed, its unions included (EgraphImage.Changed lists them).
	ChangedClassCount uint64
	// FullRounds is the number of rounds that visited every row (0 for a
	// rebuild that was incremental throughout).
	FullRounds uint32
}

func rebuildResultFromC(r *C.vyre_egraph_rebuild_result) RebuildResult {
	return RebuildResult{Rounds: uint32(r.rounds), Merges: uint64(r.merges),
		UnionMerges: uint64(r.union_merges), ClassesBefore: uint64(r.classes_before),
		ClassesAfter: uint64(r.classes_after), RowsVisited: uint64(r.rows_visited),
		Device: time.Duration(r.device_ns), Wall: time.Duration(r.wall_ns),
		ChangedClassCount: uint64(r.changed_class_count), FullRounds: uint32(r.full_rounds)}
}

func (img *EgraphImage) rebuildDesc(a *callArena, op string, r *Rebuild) (*C.vyre_egraph_rebuild_desc, error) {
	if r == nil {
		return nil, nil
	}
	if classes := img.classCount.Load(); r.Canonical != nil && uint64(len(r.Canonical)) != classes {
		return nil, goError(StatusInvalidArgument, op,
			"Canonical has %d entries for %d classes. Fix: pass a slice of ClassCount() entries, or nil.",
			len(r.Canonical), classes)
	}
	d := (*C.vyre_egraph_rebuild_desc)(a.alloc(C.sizeof_vyre_egraph_rebuild_desc))
	d.struct_size = C.sizeof_vyre_egraph_rebuild_desc
	var flags C.uint32_t
	if r.Reset {
		flags |= C.VYRE_EGRAPH_REBUILD_RESET
	}
	if r.DeviceTiming {
		flags |= C.VYRE_EGRAPH_REBUILD_DEVICE_TIMING
	}
	if r.CollidingHash {
		flags |= C.VYRE_EGRAPH_REBUILD_COLLIDING_HASH
	}
	if r.DeviceRounds {
		flags |= C.VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS
	}
	d.flags = flags
	if len(r.Unions) > 0 {
		a.goIn((*unsafe.Pointer)(unsafe.Pointer(&d.unions)),
			unsafe.Slice((*byte)(unsafe.Pointer(&r.Unions[0][0])), len(r.Unions)*8))
	}
	d.union_count = C.uint64_t(len(r.Unions))
	d.max_rounds = C.uint32_t(r.MaxRounds)
	return d, nil
}

// Rebuild applies the unions and rebuilds to the fixpoint (congruence
// closure) (vyre_egraph_rebuild); r may be nil (no unions).
func (img *EgraphImage) Rebuild(r *Rebuild) (RebuildResult, error) {
	const op = "vyre_egraph_rebuild"
	if err := img.check(op); err != nil {
		return RebuildResult{}, err
	}
	a := getArena()
	defer putArena(a)
	d, err := img.rebuildDesc(a, op, r)
	if err != nil {
		return RebuildResult{}, err
	}
	if d != nil && r.Canonical != nil {
		a.goOut((*unsafe.Pointer)(unsafe.Pointer(&d.canonical_out)), AsBytes(r.Canonical))
	}
	res := (*C.vyre_egraph_rebuild_result)(a.alloc(C.sizeof_vyre_egraph_rebuild_result))
	res.struct_size = C.sizeof_vyre_egraph_rebuild_result
	err = a.run(op, C.GOVYRE_EGRAPH_REBUILD, img.h.Load(), unsafe.Pointer(d), 0, unsafe.Pointer(res))
	runtime.KeepAlive(img)
	if err != nil {
		return RebuildResult{}, err
	}
	return rebuildResultFromC(res), nil
}

// RebuildPending is an asynchronous rebuild: a Pending whose wait writes
// Rebuild.Canonical and the Result.
type RebuildPending struct {
	*Pending
	result *rebuildOutcome // not a field of its own: the Pending's hook writes it
}

type rebuildOutcome struct {
	r  RebuildResult
	ok bool
}

// Result is the rebuild's outcome; ok is false until a successful wait.
func (rp *RebuildPending) Result() (r RebuildResult, ok bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.result.r, rp.result.ok
}

// RebuildAsync enqueues a rebuild (GPU images) and returns its pending
// (vyre_egraph_rebuild_async); the wait finishes it and writes
// r.Canonical and the Result (through C memory the bindings own until
// then). A CPU image's rebuild runs to completion inside this call. While
// the pending is unwaited, other calls on the image are StatusInvalidState.
func (img *EgraphImage) RebuildAsync(r *Rebuild) (*RebuildPending, error) {
	const op = "vyre_egraph_rebuild_async"
	if err := img.check(op); err != nil {
		return nil, err
	}
	a := getArena()
	defer putArena(a)
	if r == nil {
		r = &Rebuild{}
	}
	d, err := img.rebuildDesc(a, op, r)
	if err != nil {
		return nil, err
	}
	b := binder{a: a, async: true}
	if r.Canonical != nil {
		p := cAlloc(uintptr(len(r.Canonical)) * 4)
		b.outs = append(b.outs, asyncOut{c: p, dst: AsBytes(r.Canonical)})
		d.canonical_out = (*C.uint32_t)(p)
	}
	resC := (*C.vyre_egraph_rebuild_result)(cAlloc(C.sizeof_vyre_egraph_rebuild_result))
	resC.struct_size = C.sizeof_vyre_egraph_rebuild_result
	d.result_out = resC
	out := (*C.vyre_pending)(a.alloc(C.sizeof_vyre_pending))
	err = a.run(op, C.GOVYRE_EGRAPH_REBUILD_ASYNC, img.h.Load(), unsafe.Pointer(d), 0, unsafe.Pointer(out))
	runtime.KeepAlive(img)
	if err != nil {
		freeOuts(b.outs)
		cFree(unsafe.Pointer(resC))
		return nil, err
	}
	result := new(rebuildOutcome)
	pd := newPending(img.ctx, uint64(out.bits), &b, img, r.Canonical)
	pd.onEnd = func(ok bool) {
		if ok {
			*result = rebuildOutcome{r: rebuildResultFromC(resC), ok: true}
		}
		cFree(unsafe.Pointer(resC))
	}
	return &RebuildPending{Pending: pd, result: result}, nil
}
