package vyrecuda_test

// Graph.Loop (vyre_graph_loop_create) against whatever driver runs: the
// fake one (it runs WHILE nodes and the library's control kernel on the
// host) or a GPU. The body is the countdown kernel
// (vyre_test_countdown_u32: every positive element drops by one, the flag
// word is set while one is still positive) recorded over resident data;
// fresh random non-zero data per launch, the condition and count words
// poisoned before, every element compared with a CPU model; every refusal
// checked for its status and a Fix.

import (
	"context"
	"runtime"
	"strings"
	"testing"

	vc "vyre.dev/cuda/bindings/go"
	"vyre.dev/cuda/bindings/go/internal/testkernels"
)

const loopN = 1000

func countdownProgram(t *testing.T, ctx *vc.Context) *vc.Program {
	t.Helper()
	p, err := ctx.NewProgram(vc.ProgramDesc{
		Code: []byte(testkernels.CountdownPTX), Entry: testkernels.CountdownEntry,
		Bindings: []vc.BindingDecl{
			{Role: vc.RoleInputOutput, Name: "data", ElementSize: 4},
			{Role: vc.RoleInputOutput, Name: "flag", ElementSize: 4},
		},
		WorkgroupSize: [3]uint32{128},
	})
	must(t, err, "the countdown program")
	return p
}

// countdowns are values in 1..top: each needs that many rounds to reach 0.
func countdowns(r *rng, top uint32) []uint32 {
	v := make([]uint32, loopN)
	for i := range v {
		v[i] = 1 + uint32(r.below(uint64(top)))
	}
	return v
}

// countdownDispatch counts data down with word 0 of flag as its flag.
func countdownDispatch(data, flag *vc.Buffer) *vc.Dispatch {
	return &vc.Dispatch{Args: []vc.Arg{data.Arg(), flag.Range(0, 4)}, Params: []uint32{loopN}}
}

func recordBody(t *testing.T, p *vc.Program, data, flag *vc.Buffer) *vc.Graph {
	t.Helper()
	g, err := p.Record(countdownDispatch(data, flag))
	must(t, err, "Record the countdown")
	return g
}

type loopCheck struct {
	max, top uint32
	cond     *vc.Buffer // word 0: the condition
	words    *vc.Buffer // word 1: the count (when hasCount); 2, 3 untouched
	hasCount bool
}

// launchAndCheck uploads fresh countdowns in 1..top, poisons the words,
// launches the loop once and checks every element, the count and the
// condition against the CPU.
func launchAndCheck(t *testing.T, loop *vc.Graph, data *vc.Buffer, c loopCheck, r *rng) {
	t.Helper()
	input := countdowns(r, c.top)
	must(t, data.Upload(0, vc.AsBytes(input)), "upload the countdowns")
	poisonBuffer(t, c.words, 4)
	if c.cond != c.words {
		poisonBuffer(t, c.cond, 1)
	}
	_, err := loop.Launch()
	must(t, err, "Launch the loop")
	highest := uint32(0)
	for _, v := range input {
		if v > highest {
			highest = v
		}
	}
	rounds := highest
	if rounds > c.max {
		rounds = c.max
	}
	want := make([]uint32, loopN)
	for i, v := range input {
		if v > rounds {
			want[i] = v - rounds
		}
	}
	checkWords(t, readU32(t, data), want, "the counted-down data")
	cond := readU32(t, c.cond)[0]
	if (cond != 0) != (highest > c.max) {
		t.Fatalf("max %d, highest %d: condition word %#x", c.max, highest, cond)
	}
	w := readU32(t, c.words)
	if c.hasCount {
		if w[1] != rounds {
			t.Fatalf("max %d: count word %d, expected %d", c.max, w[1], rounds)
		}
	} else if w[1] != poisonWord {
		t.Fatalf("no count word: word 1 changed to %#x", w[1])
	}
	if w[2] != poisonWord || w[3] != poisonWord {
		t.Fatalf("words 2 and 3 changed: %#x %#x", w[2], w[3])
	}
}

// Runs until the body clears the condition: every element 0, the count the
// largest value, the condition 0; the loop outlives its closed body.
func TestLoopRunsUntilTheBodyClearsTheCondition(t *testing.T) {
	ctx := testContext(t)
	p := countdownProgram(t, ctx)
	data, err := ctx.Alloc(4 * loopN)
	must(t, err, "Alloc data")
	words, err := ctx.Alloc(16)
	must(t, err, "Alloc words")
	body := recordBody(t, p, data, words)
	loop, err := body.Loop(words, 0, 100, words, 4)
	must(t, err, "Loop")
	defer loop.Close()
	must(t, body.Close(), "close the body")
	r := newRng(100)
	for _, top := range []uint32{40, 47, 1} {
		launchAndCheck(t, loop, data, loopCheck{max: 100, top: top, cond: words, words: words,
			hasCount: true}, r)
	}
	info, err := loop.Info()
	must(t, err, "Info")
	if info.NodeCount != 2 || info.Replays != 3 {
		t.Fatalf("info %+v: expected 2 nodes, 3 replays", info)
	}
	kinds, err := loop.NodeKinds()
	must(t, err, "NodeKinds")
	if len(kinds) != 2 || kinds[0] != vc.GraphNodeKernel || kinds[1] != vc.GraphNodeConditional {
		t.Fatalf("node kinds %v: expected a kernel and a conditional", kinds)
	}
	// An asynchronous replay runs it too; a replay with bindings is refused.
	input := countdowns(r, 30)
	must(t, data.Upload(0, vc.AsBytes(input)), "upload")
	pd, err := loop.ReplayAsync(nil)
	must(t, err, "ReplayAsync")
	must(t, pd.Wait(context.Background()), "Wait")
	must(t, pd.Close(), "Pending.Close")
	checkWords(t, readU32(t, data), make([]uint32, loopN), "after ReplayAsync")
	_, err = loop.Replay(&vc.Replay{Args: []vc.Arg{data.Arg(), words.Range(0, 4)}})
	e := wantError(t, err, vc.StatusInvalidArgument, "a loop replayed with bindings")
	if e.Op != "vyre_graph_replay" {
		t.Fatalf("op %q", e.Op)
	}
	assertNoMisuse(t)
}

// Stopped by the bound: every element max(0, v-5), the count 5, the
// condition still set; a bound of one runs the body once; without a count.
func TestLoopStopsAtTheBound(t *testing.T) {
	ctx := testContext(t)
	p := countdownProgram(t, ctx)
	data, err := ctx.Alloc(4 * loopN)
	must(t, err, "Alloc data")
	words, err := ctx.Alloc(16)
	must(t, err, "Alloc words")
	body := recordBody(t, p, data, words)
	defer body.Close()
	five, err := body.Loop(words, 0, 5, words, 4)
	must(t, err, "Loop 5")
	defer five.Close()
	once, err := body.Loop(words, 0, 1, words, 4)
	must(t, err, "Loop 1")
	defer once.Close()
	noCount, err := body.Loop(words, 0, 1000, nil, 0)
	must(t, err, "Loop without a count")
	defer noCount.Close()
	r := newRng(7)
	launchAndCheck(t, five, data, loopCheck{max: 5, top: 40, cond: words, words: words, hasCount: true}, r)
	launchAndCheck(t, five, data, loopCheck{max: 5, top: 60, cond: words, words: words, hasCount: true}, r)
	launchAndCheck(t, once, data, loopCheck{max: 1, top: 60, cond: words, words: words, hasCount: true}, r)
	launchAndCheck(t, noCount, data, loopCheck{max: 1000, top: 90, cond: words, words: words}, r)
	assertNoMisuse(t)
}

// A sequence's graph loops too; the loop keeps the Go objects it depends on
// reachable: with the body closed and the program and condition Buffer
// dropped, collected garbage frees none of them.
func TestLoopOverASequenceKeepsItsObjects(t *testing.T) {
	ctx := testContext(t)
	data, err := ctx.Alloc(4 * loopN)
	must(t, err, "Alloc data")
	words, err := ctx.Alloc(16)
	must(t, err, "Alloc words")
	r := newRng(31)
	loop := func() *vc.Graph {
		p := countdownProgram(t, ctx)
		seq, err := ctx.NewSequence([]vc.Step{vc.DispatchStep(p, countdownDispatch(data, words))}, nil)
		must(t, err, "NewSequence")
		body, err := seq.Record()
		must(t, err, "Sequence.Record")
		loop, err := body.Loop(words, 0, 64, words, 4)
		must(t, err, "Loop")
		must(t, body.Close(), "close the body")
		must(t, seq.Close(), "close the sequence")
		return loop
	}()
	defer loop.Close()
	launchAndCheck(t, loop, data, loopCheck{max: 64, top: 50, cond: words, words: words, hasCount: true}, r)
	launchAndCheck(t, loop, data, loopCheck{max: 64, top: 99, cond: words, words: words, hasCount: true}, r)

	// The condition in a Buffer only the loop references.
	loop2 := func() *vc.Graph {
		p := countdownProgram(t, ctx)
		c, err := ctx.Alloc(4)
		must(t, err, "Alloc cond")
		body := recordBody(t, p, data, c)
		loop, err := body.Loop(c, 0, 100, words, 4)
		must(t, err, "Loop")
		must(t, body.Close(), "close the body")
		return loop
	}()
	defer loop2.Close()
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	input := countdowns(r, 33)
	must(t, data.Upload(0, vc.AsBytes(input)), "upload")
	poisonBuffer(t, words, 4)
	_, err = loop2.Launch()
	must(t, err, "Launch after GC (a freed condition Buffer would stale it)")
	checkWords(t, readU32(t, data), make([]uint32, loopN), "after GC")
	highest := uint32(0)
	for _, v := range input {
		if v > highest {
			highest = v
		}
	}
	if w := readU32(t, words); w[1] != highest {
		t.Fatalf("count word %d, expected %d", w[1], highest)
	}
	assertNoMisuse(t)
}

// Each refusal: its status, a Fix, the call named; nothing made.
func TestLoopRefusals(t *testing.T) {
	ctx := testContext(t)
	p := countdownProgram(t, ctx)
	data, err := ctx.Alloc(4 * loopN)
	must(t, err, "Alloc data")
	words, err := ctx.Alloc(16)
	must(t, err, "Alloc words")
	body := recordBody(t, p, data, words)
	defer body.Close()
	refused := func(loop *vc.Graph, err error, status vc.Status, what string) *vc.Error {
		t.Helper()
		if loop != nil {
			t.Fatalf("%s: a graph came back with the error", what)
		}
		e := wantError(t, err, status, what)
		if e.Op != "vyre_graph_loop_create" {
			t.Fatalf("%s: op %q", what, e.Op)
		}
		return e
	}
	loop, err := body.Loop(words, 0, 0, words, 4)
	e := refused(loop, err, vc.StatusInvalidArgument, "max_iterations 0")
	if !strings.Contains(e.Message, "Fix:") {
		t.Fatalf("no Fix: %q", e.Message)
	}
	loop, err = body.Loop(words, 2, 10, words, 4)
	refused(loop, err, vc.StatusInvalidArgument, "a misaligned condition offset")
	loop, err = body.Loop(words, 0, 10, words, 13)
	refused(loop, err, vc.StatusInvalidArgument, "a misaligned count offset")
	loop, err = body.Loop(words, 16, 10, words, 4)
	refused(loop, err, vc.StatusOutOfRange, "a condition offset past the buffer")
	loop, err = body.Loop(words, 4, 10, words, 4)
	refused(loop, err, vc.StatusInvalidArgument, "the count on the condition's word")
	loop, err = body.Loop(nil, 0, 10, nil, 0)
	refused(loop, err, vc.StatusInvalidHandle, "a nil condition Buffer")
	closed, err := ctx.Alloc(16)
	must(t, err, "Alloc")
	must(t, closed.Close(), "Close")
	loop, err = body.Loop(closed, 0, 10, nil, 0)
	refused(loop, err, vc.StatusInvalidHandle, "a closed condition Buffer")
	loop, err = body.Loop(words, 0, 10, closed, 0)
	refused(loop, err, vc.StatusInvalidHandle, "a closed count Buffer")

	// A Buffer of another context.
	other := testContext(t)
	foreign, err := other.Alloc(16)
	must(t, err, "Alloc on another context")
	defer foreign.Close()
	loop, err = body.Loop(foreign, 0, 10, nil, 0)
	refused(loop, err, vc.StatusInvalidArgument, "a Buffer of another context")

	// A body with host bindings.
	host := make([]uint32, loopN)
	flag := make([]uint32, 1)
	hostBody, err := p.Record(&vc.Dispatch{Args: []vc.Arg{vc.InOut(host), vc.InOut(flag)},
		Params: []uint32{loopN}})
	must(t, err, "Record with host bindings")
	defer hostBody.Close()
	loop, err = hostBody.Loop(words, 0, 10, nil, 0)
	refused(loop, err, vc.StatusInvalidArgument, "a body with host bindings")

	// A closed body.
	closedBody := recordBody(t, p, data, words)
	must(t, closedBody.Close(), "Close")
	loop, err = closedBody.Loop(words, 0, 10, nil, 0)
	wantError(t, err, vc.StatusInvalidHandle, "a closed body")
	if loop != nil {
		t.Fatal("a graph came back from a closed body")
	}

	// After the refusals the body still loops.
	loop, err = body.Loop(words, 0, 100, words, 4)
	must(t, err, "Loop")
	defer loop.Close()
	launchAndCheck(t, loop, data, loopCheck{max: 100, top: 20, cond: words, words: words, hasCount: true},
		newRng(55))
	assertNoMisuse(t)
}
