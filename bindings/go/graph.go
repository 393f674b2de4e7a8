package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Graph is a dispatch or a sequence captured once as a CUDA graph and
// replayed at the cost of one launch (vyre_graph). Safe for concurrent use.
// Close destroys it (a replay in flight keeps its memory until it
// completes); closing twice is harmless.
type Graph struct {
	ctx *Context
	h   atomic.Uint64

	mu   sync.Mutex
	keep []any // buffers bound now, the program, the sequence's host memory
	// host: a graph recorded from a sequence with Go-slice upload or
	// download steps copies them through C memory around each replay.
	host *seqHost
}

// Record captures a dispatch as a graph (vyre_graph_record). Host bindings
// are sample inputs that fix the shape (nothing runs); every replay passes
// host data of exactly the recorded byte lengths.
func (p *Program) Record(d *Dispatch) (*Graph, error) {
	const op = "vyre_graph_record"
	if err := p.check(op); err != nil {
		return nil, err
	}
	a := getArena()
	defer putArena(a)
	b := binder{a: a}
	defer b.uses.releaseAll()
	desc, err := b.dispatchDesc(op, d)
	if err != nil {
		return nil, err
	}
	out := (*C.vyre_graph)(a.alloc(C.sizeof_vyre_graph))
	err = a.run(op, C.GOVYRE_GRAPH_RECORD, p.h.Load(), unsafe.Pointer(desc), 0, unsafe.Pointer(out))
	runtime.KeepAlive(p)
	if err != nil {
		return nil, err
	}
	var keep []any
	for _, k := range b.keep {
		if buf, ok := k.(*Buffer); ok {
			keep = append(keep, buf)
		}
	}
	return newGraph(p.ctx, uint64(out.bits), append(keep, p), nil), nil
}

func newGraph(ctx *Context, bits uint64, keep []any, host *seqHost) *Graph {
	g := &Graph{ctx: ctx, keep: keep, host: host}
	g.h.Store(bits)
	runtime.SetFinalizer(g, func(g *Graph) { _ = g.Close() })
	return g
}

// Handle is the library handle's bits (0 once closed).
func (g *Graph) Handle() uint64 { return g.h.Load() }

func (g *Graph) handle() C.vyre_graph { return C.vyre_graph{bits: C.uint64_t(g.h.Load())} }

func (g *Graph) check(op string) error {
	if g == nil || g.h.Load() == 0 {
		return closedError(op, "Graph")
	}
	return nil
}

// Close destroys the graph (vyre_graph_destroy).
func (g *Graph) Close() error {
	if g == nil {
		return nil
	}
	bits := g.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(g, nil)
	err := call("vyre_graph_destroy", func() C.vyre_status {
		return C.vyre_graph_destroy(C.vyre_graph{bits: C.uint64_t(bits)})
	})
	g.mu.Lock()
	g.keep = nil
	host := g.host
	g.host = nil
	g.mu.Unlock()
	host.unref()
	if isStale(err) {
		return nil
	}
	return err
}

// Replay is what a replay changes (vyre_graph_replay_desc).
type Replay struct {
	// Args holds one entry per declared binding with its recorded source:
	// host data of the recorded byte lengths, or the resident ranges to
	// bind from now on. Empty keeps the current resident ranges (a graph
	// with host bindings always needs them).
	Args []Arg
	// Params are new parameter words, kept for later replays; nil keeps them.
	Params []uint32
	// Scalars are new scalar values, kept for later replays; nil keeps them.
	Scalars []uint64
	// ElementCount is the elements the derived grid covers (1 .. capacity);
	// 0 keeps the current count.
	ElementCount uint64
	// DeviceTiming records device events so Timing.Device is measured.
	DeviceTiming bool
}

func (b *binder) replayDesc(op string, r *Replay) (*C.vyre_graph_replay_desc, error) {
	if r == nil {
		return nil, nil
	}
	desc := (*C.vyre_graph_replay_desc)(b.a.alloc(C.sizeof_vyre_graph_replay_desc))
	desc.struct_size = C.sizeof_vyre_graph_replay_desc
	if r.DeviceTiming {
		desc.flags = C.VYRE_DISPATCH_FLAG_DEVICE_TIMING
	}
	arr, err := b.bindings(op, r.Args)
	if err != nil {
		return nil, err
	}
	desc.bindings = arr
	desc.binding_count = C.size_t(len(r.Args))
	desc.param_words = b.a.u32s(r.Params)
	desc.param_word_count = C.size_t(len(r.Params))
	desc.scalars = b.a.u64s(r.Scalars)
	desc.scalar_count = C.size_t(len(r.Scalars))
	desc.element_count = C.uint64_t(r.ElementCount)
	return desc, nil
}

// rebound keeps the buffers a successful replay bound reachable (in place
// of the earlier ones).
func (g *Graph) rebound(r *Replay, b *binder) {
	if r == nil || len(r.Args) == 0 {
		return
	}
	var keep []any
	for _, k := range b.keep {
		if buf, ok := k.(*Buffer); ok {
			keep = append(keep, buf)
		}
	}
	if len(keep) == 0 {
		return
	}
	g.mu.Lock()
	for _, k := range g.keep {
		if _, ok := k.(*Buffer); !ok {
			keep = append(keep, k)
		}
	}
	g.keep = keep
	g.mu.Unlock()
}

// Replay replays the graph and waits (vyre_graph_replay); host outputs are
// written before it returns. r may be nil: a graph without host bindings,
// nothing changed (a graph recorded from a sequence).
func (g *Graph) Replay(r *Replay) (Timing, error) {
	const op = "vyre_graph_replay"
	if err := g.check(op); err != nil {
		return Timing{}, err
	}
	a := getArena()
	defer putArena(a)
	b := binder{a: a}
	defer b.uses.releaseAll()
	desc, err := b.replayDesc(op, r)
	if err != nil {
		return Timing{}, err
	}
	g.mu.Lock()
	host := g.host
	g.mu.Unlock()
	if host != nil {
		if err := host.beginSync(op); err != nil {
			return Timing{}, err
		}
		defer host.endSync()
	}
	t := newTiming(a)
	err = a.run(op, C.GOVYRE_GRAPH_REPLAY, g.h.Load(), unsafe.Pointer(desc), 0, unsafe.Pointer(t))
	runtime.KeepAlive(g)
	if err != nil {
		return Timing{}, err
	}
	if host != nil {
		host.after()
	}
	g.rebound(r, &b)
	return timingFromC(t), nil
}

// Launch replays the graph as it is (Replay(nil)).
func (g *Graph) Launch() (Timing, error) { return g.Replay(nil) }

// ReplayAsync enqueues a replay and returns its Pending
// (vyre_graph_replay_async). Host inputs are read before it returns; host
// outputs are written by the Pending's wait (Go slices through C memory,
// as for Program.DispatchAsync).
func (g *Graph) ReplayAsync(r *Replay) (*Pending, error) {
	return g.replayAsync("vyre_graph_replay_async", C.GOVYRE_GRAPH_REPLAY_ASYNC, r, 0)
}

// LaunchOnStream enqueues a replay ordered on a caller's CUDA stream
// (vyre_graph_launch): stream is a CUstream as an integer, StreamLegacy (1)
// or StreamPerThread (2); 0 is refused. The graph starts after the work
// already on the stream, and later work on it starts after the graph;
// otherwise as ReplayAsync.
func (g *Graph) LaunchOnStream(r *Replay, stream uint64) (*Pending, error) {
	return g.replayAsync("vyre_graph_launch", C.GOVYRE_GRAPH_LAUNCH, r, stream)
}

func (g *Graph) replayAsync(op string, kind C.int, r *Replay, stream uint64) (*Pending, error) {
	if err := g.check(op); err != nil {
		return nil, err
	}
	a := getArena()
	defer putArena(a)
	b := binder{a: a, async: true}
	desc, err := b.replayDesc(op, r)
	if err != nil {
		b.uses.releaseAll()
		freeOuts(b.outs)
		return nil, err
	}
	g.mu.Lock()
	host := g.host
	g.mu.Unlock()
	if host != nil {
		if err := host.beginAsync(op); err != nil {
			b.uses.releaseAll()
			freeOuts(b.outs)
			return nil, err
		}
	}
	out := (*C.vyre_pending)(a.alloc(C.sizeof_vyre_pending))
	err = a.run(op, kind, g.h.Load(), unsafe.Pointer(desc), uintptr(stream), unsafe.Pointer(out))
	runtime.KeepAlive(g)
	if err != nil {
		if host != nil {
			host.endAsync(false)
		}
		b.uses.releaseAll()
		freeOuts(b.outs)
		return nil, err
	}
	b.uses.unlockOwners()
	g.rebound(r, &b)
	pd := newPending(g.ctx, uint64(out.bits), &b, g)
	if host != nil {
		// The sequence's C memory is this replay's until it ends: its
		// downloads are copied to the Go slices by the wait.
		host.ref()
		pd.onEnd = func(ok bool) { host.endAsync(ok); host.unref() }
	}
	return pd, nil
}

// GraphInfo describes a graph (vyre_graph_info).
type GraphInfo struct {
	// FromSequence: recorded from a sequence (no bindings to replay with).
	FromSequence  bool
	ContextHandle uint64
	// NodeCount and KernelNodeCount count the full executable graph's nodes.
	NodeCount       uint64
	KernelNodeCount uint64
	// UnchangedInputNodeCount: nodes of the graph run when the inputs are
	// unchanged (0 if none).
	UnchangedInputNodeCount uint64
	// ElementCount of the next replay and CapacityElements, the largest allowed.
	ElementCount     uint64
	CapacityElements uint64
	Replays          uint64
	// HostInputBytes and HostOutputBytes each replay moves.
	HostInputBytes  uint64
	HostOutputBytes uint64
}

// Info describes the graph (vyre_graph_info_get).
func (g *Graph) Info() (GraphInfo, error) {
	const op = "vyre_graph_info_get"
	if err := g.check(op); err != nil {
		return GraphInfo{}, err
	}
	var i C.vyre_graph_info
	i.struct_size = C.sizeof_vyre_graph_info
	err := call(op, func() C.vyre_status { return C.vyre_graph_info_get(g.handle(), &i) })
	runtime.KeepAlive(g)
	if err != nil {
		return GraphInfo{}, err
	}
	return GraphInfo{
		FromSequence: i.from_sequence != 0, ContextHandle: uint64(i.context.bits),
		NodeCount: uint64(i.node_count), KernelNodeCount: uint64(i.kernel_node_count),
		UnchangedInputNodeCount: uint64(i.unchanged_input_node_count),
		ElementCount:            uint64(i.element_count), CapacityElements: uint64(i.capacity_elements),
		Replays: uint64(i.replays), HostInputBytes: uint64(i.host_input_bytes),
		HostOutputBytes: uint64(i.host_output_bytes),
	}, nil
}

// GraphNodeKind is the kind of a graph node (vyre_graph_node_kind).
type GraphNodeKind int32

const (
	GraphNodeKernel GraphNodeKind = C.VYRE_GRAPH_NODE_KERNEL
	GraphNodeMemcpy GraphNodeKind = C.VYRE_GRAPH_NODE_MEMCPY
	GraphNodeMemset GraphNodeKind = C.VYRE_GRAPH_NODE_MEMSET
	GraphNodeOther  GraphNodeKind = C.VYRE_GRAPH_NODE_OTHER
	// Kinds the library does not record itself (other CUDA code's work).
	GraphNodeHost        GraphNodeKind = C.VYRE_GRAPH_NODE_HOST
	GraphNodeChildGraph  GraphNodeKind = C.VYRE_GRAPH_NODE_CHILD_GRAPH
	GraphNodeEmpty       GraphNodeKind = C.VYRE_GRAPH_NODE_EMPTY
	GraphNodeEventRecord GraphNodeKind = C.VYRE_GRAPH_NODE_EVENT_RECORD
	GraphNodeEventWait   GraphNodeKind = C.VYRE_GRAPH_NODE_EVENT_WAIT
	GraphNodeConditional GraphNodeKind = C.VYRE_GRAPH_NODE_CONDITIONAL
	GraphNodeMemAlloc    GraphNodeKind = C.VYRE_GRAPH_NODE_MEM_ALLOC
	GraphNodeMemFree     GraphNodeKind = C.VYRE_GRAPH_NODE_MEM_FREE
)

// GraphNodeInfo is one node as the next replay runs it (vyre_graph_node_info).
type GraphNodeInfo struct {
	Kind GraphNodeKind
	// CUgraphNode and CUgraphExec as integers, for interop; valid until the
	// graph is destroyed.
	CUGraphNode, CUGraphExec uint64
	// Kernel nodes: the CUfunction, launch shape and the arguments (one
	// 8-byte slot per kernel parameter; at most 16 reported of ArgumentCount).
	CUFunction        uint64
	Grid, Block       [3]uint32
	SharedMemoryBytes uint32
	ArgumentCount     uint32
	Arguments         []uint64
	// Memset nodes (as CUDA_MEMSET_NODE_PARAMS).
	MemsetDst                              uint64
	MemsetValue, MemsetElementSize         uint32
	MemsetWidth, MemsetHeight, MemsetPitch uint64
}

// NodeInfo describes node `index` as the next replay runs it
// (vyre_graph_node_info_get).
func (g *Graph) NodeInfo(index uint64) (GraphNodeInfo, error) {
	const op = "vyre_graph_node_info_get"
	if err := g.check(op); err != nil {
		return GraphNodeInfo{}, err
	}
	var i C.vyre_graph_node_info
	i.struct_size = C.sizeof_vyre_graph_node_info
	err := call(op, func() C.vyre_status {
		return C.vyre_graph_node_info_get(g.handle(), C.uint64_t(index), &i)
	})
	runtime.KeepAlive(g)
	if err != nil {
		return GraphNodeInfo{}, err
	}
	out := GraphNodeInfo{
		Kind: GraphNodeKind(i.kind), CUGraphNode: uint64(i.cu_graph_node),
		CUGraphExec: uint64(i.cu_graph_exec), CUFunction: uint64(i.cu_function),
		SharedMemoryBytes: uint32(i.shared_memory_bytes), ArgumentCount: uint32(i.argument_count),
		MemsetDst: uint64(i.memset_dst), MemsetValue: uint32(i.memset_value),
		MemsetElementSize: uint32(i.memset_element_size), MemsetWidth: uint64(i.memset_width),
		MemsetHeight: uint64(i.memset_height), MemsetPitch: uint64(i.memset_pitch),
	}
	for d := 0; d < 3; d++ {
		out.Grid[d] = uint32(i.grid[d])
		out.Block[d] = uint32(i.block[d])
	}
	n := int(i.argument_count)
	if n > len(i.arguments) {
		n = len(i.arguments)
	}
	for k := 0; k < n; k++ {
		out.Arguments = append(out.Arguments, uint64(i.arguments[k]))
	}
	return out, nil
}

// SetNodeInfo changes node `index` (numbered as for NodeKind) for later
// replays, without capturing again (vyre_graph_node_info_set, checked):
// pass what NodeInfo gave for that node with the fields to change edited
// (read, edit, set); NodeInfo then reports what was set. Kind must stay the
// node's kind, a KERNEL or MEMSET node (other kinds, and kernels of captured
// work, whose parameter lists the library does not know, are
// StatusInvalidArgument); CUGraphNode and CUGraphExec are 0 or the node's
// own.
//
// Kernel nodes: CUFunction and ArgumentCount must stay; Grid, Block and
// SharedMemoryBytes are checked against the device's limits; Arguments (the
// first min(ArgumentCount, 16) slots, all of them: len(Arguments) must be
// that) may change scalar slots only — pointer slots (bindings, the
// parameter-word block) must keep their values (rebind through
// Replay.Args, or use SetNodeInfoRaw), a SCALAR32 slot's high half must be
// 0, shared memory must not drop below the program's own, and Block may
// change only in a graph recorded with an explicit Dispatch.Grid.
//
// Memset nodes: MemsetElementSize 1, 2 or 4, MemsetValue fitting it,
// MemsetWidth >= 1 elements, MemsetHeight 1, MemsetDst aligned to the
// element size and the range inside one device allocation of the graph's
// context; MemsetPitch is ignored.
//
// A later replay that rebinds, passes scalars or changes the element count
// rewrites those argument slots and grid x (and an OUTPUT binding's
// zeroing memset); the rest keeps what was set. A replay in flight runs
// what it was launched with.
func (g *Graph) SetNodeInfo(index uint64, info GraphNodeInfo) error {
	return g.setNodeInfo(index, &info, 0)
}

// SetNodeInfoRaw is SetNodeInfo with VYRE_GRAPH_NODE_SET_RAW: the caller
// takes responsibility for what the node touches. A kernel node takes every
// argument slot as given, pointer slots included, and any dynamic shared
// memory the device allows; a memset node takes MemsetDst without the
// library asking the driver whose memory it is. The memory pointed to must
// stay allocated (and be large enough) while the graph may run: the graph
// keeps its own buffers alive, not memory a raw set points to (keep such a
// Buffer reachable and open yourself).
func (g *Graph) SetNodeInfoRaw(index uint64, info GraphNodeInfo) error {
	return g.setNodeInfo(index, &info, C.VYRE_GRAPH_NODE_SET_RAW)
}

func (g *Graph) setNodeInfo(index uint64, info *GraphNodeInfo, flags C.uint32_t) error {
	const op = "vyre_graph_node_info_set"
	if err := g.check(op); err != nil {
		return err
	}
	var i C.vyre_graph_node_info
	if len(info.Arguments) > len(i.arguments) {
		return goError(StatusInvalidArgument, op,
			"info.Arguments has %d slots; a node info carries at most %d. Fix: pass the slots NodeInfo gave (the first %d), edited.",
			len(info.Arguments), len(i.arguments), len(i.arguments))
	}
	want := int(info.ArgumentCount)
	if want > len(i.arguments) {
		want = len(i.arguments)
	}
	if len(info.Arguments) != want {
		return goError(StatusInvalidArgument, op,
			"info.Arguments has %d slots for ArgumentCount %d (expected %d). Fix: pass the Arguments NodeInfo gave for the node, edited in place, not a shorter or longer slice.",
			len(info.Arguments), info.ArgumentCount, want)
	}
	i.struct_size = C.sizeof_vyre_graph_node_info
	i.kind = C.vyre_graph_node_kind(info.Kind)
	i.cu_graph_node = C.uint64_t(info.CUGraphNode)
	i.cu_graph_exec = C.uint64_t(info.CUGraphExec)
	i.cu_function = C.uint64_t(info.CUFunction)
	for d := 0; d < 3; d++ {
		i.grid[d] = C.uint32_t(info.Grid[d])
		i.block[d] = C.uint32_t(info.Block[d])
	}
	i.shared_memory_bytes = C.uint32_t(info.SharedMemoryBytes)
	i.argument_count = C.uint32_t(info.ArgumentCount)
	for k, v := range info.Arguments {
		i.arguments[k] = C.uint64_t(v)
	}
	i.memset_dst = C.uint64_t(info.MemsetDst)
	i.memset_value = C.uint32_t(info.MemsetValue)
	i.memset_element_size = C.uint32_t(info.MemsetElementSize)
	i.memset_width = C.uint64_t(info.MemsetWidth)
	i.memset_height = C.uint64_t(info.MemsetHeight)
	i.memset_pitch = C.uint64_t(info.MemsetPitch)
	err := call(op, func() C.vyre_status {
		return C.vyre_graph_node_info_set(g.handle(), C.uint64_t(index), &i, flags)
	})
	runtime.KeepAlive(g)
	return err
}

// NodeKind is the kind of node `index` (0 .. NodeCount-1) of the full
// graph, numbered in the order the work runs (vyre_graph_node_kind_get).
func (g *Graph) NodeKind(index uint64) (GraphNodeKind, error) {
	const op = "vyre_graph_node_kind_get"
	if err := g.check(op); err != nil {
		return 0, err
	}
	var k C.vyre_graph_node_kind
	err := call(op, func() C.vyre_status {
		return C.vyre_graph_node_kind_get(g.handle(), C.uint64_t(index), &k)
	})
	runtime.KeepAlive(g)
	return GraphNodeKind(k), err
}

// NodeKinds is the kind of every node.
func (g *Graph) NodeKinds() ([]GraphNodeKind, error) {
	info, err := g.Info()
	if err != nil {
		return nil, err
	}
	kinds := make([]GraphNodeKind, info.NodeCount)
	for i := range kinds {
		if kinds[i], err = g.NodeKind(uint64(i)); err != nil {
			return nil, err
		}
	}
	return kinds, nil
}

// KernelNodeUpdate changes one kernel node (vyre_kernel_node_update); set
// at least one of SetGrid and SetScalars.
type KernelNodeUpdate struct {
	SetGrid    bool
	Grid       [3]uint32
	SetScalars bool
	Scalars    []uint64
}

// UpdateKernelNode changes kernel node `index` of the executable graph for
// later replays, without capturing again (vyre_graph_kernel_node_update).
func (g *Graph) UpdateKernelNode(index uint64, u KernelNodeUpdate) error {
	const op = "vyre_graph_kernel_node_update"
	if err := g.check(op); err != nil {
		return err
	}
	a := getArena()
	defer putArena(a)
	cu := (*C.vyre_kernel_node_update)(a.alloc(C.sizeof_vyre_kernel_node_update))
	cu.struct_size = C.sizeof_vyre_kernel_node_update
	var flags C.uint32_t
	if u.SetGrid {
		flags |= C.VYRE_KERNEL_NODE_UPDATE_GRID
	}
	if u.SetScalars {
		flags |= C.VYRE_KERNEL_NODE_UPDATE_SCALARS
	}
	cu.flags = flags
	for k := 0; k < 3; k++ {
		cu.grid[k] = C.uint32_t(u.Grid[k])
	}
	cu.scalars = a.u64s(u.Scalars)
	cu.scalar_count = C.size_t(len(u.Scalars))
	err := call(op, func() C.vyre_status {
		return C.vyre_graph_kernel_node_update(g.handle(), C.uint64_t(index), cu)
	})
	runtime.KeepAlive(g)
	return err
}

// Loop makes a loop graph over g, its body (vyre_graph_loop_create): one
// launch runs the body on the device again and again while it asks for
// another round, at most maxIterations (>= 1) times, with no host round
// trip per iteration (a CUDA conditional WHILE node: CUDA 12.4+ drivers,
// else StatusDriverTooOld).
//
// The condition is the u32 word at conditionOffset (4-byte aligned) of
// condition, a Buffer of the body's context: the loop zeroes it before each
// iteration and runs another while the body left it non-zero (a fixpoint
// kernel writes any non-zero value when it changed something; no atomics
// needed). Each launch runs the body at least once; after it the word is 0
// when the body asked for no more, non-zero when the bound stopped it.
// count, when not nil, is where each launch leaves the number of iterations
// it ran: the u32 at countOffset (4-byte aligned; it may share the
// condition's Buffer, not its word).
//
// The loop runs the body as it stands now (bindings, rebinding and node
// changes made so far; later ones do not reach it) and keeps it alive in
// the library: g may be closed first. The returned Graph keeps the body's
// Buffers and Program and the condition and count Buffers reachable. It
// replays with Launch, Replay(nil), ReplayAsync(nil) or
// LaunchOnStream(nil, stream): it takes no Args, Params, Scalars or
// ElementCount. Its nodes are the words' reset (GraphNodeKernel) and the
// loop (GraphNodeConditional).
//
// Refused, each with an *Error and a Fix: maxIterations 0, a misaligned
// offset, the count on the condition's word, a body with host bindings or
// host steps (record it with resident Buffers), a Buffer of another context
// (StatusInvalidArgument); an offset past its Buffer (StatusOutOfRange); a
// nil or closed condition Buffer, a closed count Buffer
// (StatusInvalidHandle).
func (g *Graph) Loop(condition *Buffer, conditionOffset uint64, maxIterations uint32,
	count *Buffer, countOffset uint64) (*Graph, error) {
	const op = "vyre_graph_loop_create"
	if err := g.check(op); err != nil {
		return nil, err
	}
	if condition == nil {
		return nil, goError(StatusInvalidHandle, op,
			"the condition Buffer is nil. Fix: pass a Buffer of the body's context holding the condition word.")
	}
	if err := condition.check(op); err != nil {
		return nil, err
	}
	var desc C.vyre_graph_loop_desc
	desc.struct_size = C.sizeof_vyre_graph_loop_desc
	desc.max_iterations = C.uint32_t(maxIterations)
	desc.condition_buffer = condition.handle()
	desc.condition_offset = C.uint64_t(conditionOffset)
	keep := []any{condition}
	if count != nil {
		if err := count.check(op); err != nil {
			return nil, err
		}
		desc.count_buffer = count.handle()
		desc.count_offset = C.uint64_t(countOffset)
		keep = append(keep, count)
	}
	// The body as it stands: what it binds now, its program or sequence.
	g.mu.Lock()
	keep = append(keep, g.keep...)
	g.mu.Unlock()
	var out C.vyre_graph
	err := call(op, func() C.vyre_status { return C.vyre_graph_loop_create(g.handle(), &desc, &out) })
	runtime.KeepAlive(g)
	runtime.KeepAlive(condition)
	runtime.KeepAlive(count)
	if err != nil {
		return nil, err
	}
	// No host memory: the library refuses a body with host staging.
	return newGraph(g.ctx, uint64(out.bits), keep, nil), nil
}
