//! Graph node parameters set through the node info
//! (`Graph::set_node_info`, `set_node_info_raw`) and captures of caller work
//! (`Context::begin_capture`, `Capture::dispatch`, `Capture::end`), against
//! a driver: the fake one in CI (it runs graph nodes on the host), or a GPU.
//! Every replay's results are compared element by element with a CPU
//! reference over fresh random non-zero data and poisoned outputs; every
//! refusal is checked for its status and a Fix.

#[macro_use]
mod common;

use common::*;
use vyre_cuda::{
    sys, Arg, Binding, Buffer, Capture, CaptureMode, CaptureOptions, Code, Context, Dispatch,
    Graph, GraphNodeKind, Param, Program, Replay, Status, Step,
};

const POISON: u32 = 0xDEAD_BEEF;

fn pointer_of(buffer: &Buffer) -> u64 {
    buffer.info().unwrap().device_pointer
}

fn poison(buffer: &Buffer, n: usize) {
    buffer.upload(0, &vec![POISON; n]).unwrap();
}

/// The index of the graph's first node of `kind`.
fn first_node(graph: &Graph<'_>, kind: GraphNodeKind) -> u64 {
    graph
        .node_kinds()
        .unwrap()
        .iter()
        .position(|k| *k == kind)
        .unwrap_or_else(|| panic!("no {kind:?} node")) as u64
}

/// Every field `set_node_info` takes reads back as it was set.
fn assert_same_info(got: &sys::vyre_graph_node_info, set: &sys::vyre_graph_node_info) {
    assert_eq!(got.kind, set.kind);
    assert_eq!(got.cu_function, set.cu_function);
    assert_eq!(got.grid, set.grid);
    assert_eq!(got.block, set.block);
    assert_eq!(got.shared_memory_bytes, set.shared_memory_bytes);
    assert_eq!(got.argument_count, set.argument_count);
    assert_eq!(got.arguments, set.arguments);
    assert_eq!(got.memset_dst, set.memset_dst);
    assert_eq!(got.memset_value, set.memset_value);
    assert_eq!(got.memset_element_size, set.memset_element_size);
    assert_eq!(got.memset_width, set.memset_width);
    assert_eq!(got.memset_height, set.memset_height);
}

fn saxpy_program(ctx: &Context) -> Program {
    Program::builder(Code::Ptx(SAXPY_PTX), "vyre_test_saxpy_f32")
        .bindings([
            Binding::input::<f32>().name("x"),
            Binding::input_output::<f32>().name("y"),
        ])
        .params([
            Param::Scalar32(0),
            Param::Binding(0),
            Param::Binding(1),
            Param::Scalar64(1),
        ])
        .workgroup_size(128)
        .build(ctx)
        .expect("the saxpy program")
}

/// Random non-zero integer-valued floats in 1..=max: a*x + y is exact with
/// or without FMA.
fn small_floats(rng: &mut Rng, n: usize, max: u64) -> Vec<f32> {
    (0..n).map(|_| (1 + rng.below(max)) as f32).collect()
}

// ---------------------------------------------------------------------------
// Graph::set_node_info
// ---------------------------------------------------------------------------

/// A sequence's FILL node set to 4-, 2- and 1-byte elements over part of
/// the buffer: each replay writes exactly that, and node_info reads it back.
#[test]
fn memset_node_set_round_trip() {
    with_context!(ctx);
    let n = 96usize;
    let buffer = ctx.alloc(4 * n as u64).unwrap();
    let mut seq = ctx
        .sequence(vec![Step::fill(&buffer, 0, 4 * n as u64, 0x11)], None)
        .unwrap();
    let graph = seq.record().unwrap();
    let m = first_node(&graph, GraphNodeKind::Memset);
    let info = graph.node_info(m).unwrap();
    assert_eq!(info.kind, sys::VYRE_GRAPH_NODE_MEMSET);
    assert_eq!(info.memset_dst, pointer_of(&buffer));
    assert_eq!(info.memset_value, 0x11);
    assert_eq!(info.memset_element_size, 1);
    assert_eq!(info.memset_width, 4 * n as u64);
    assert_eq!(info.memset_height, 1);

    let mut rng = Rng::new(81);
    let v32 = rng.u32s(1)[0];
    let v16 = (rng.u32s(1)[0] & 0xFFFF) | 1;
    // (element size, value, what each covered u32 reads, first word, words)
    let cases = [
        (4u32, v32, v32, 3usize, n / 2),
        (2, v16, v16 | v16 << 16, 10, 7),
        (1, 0xC3, 0xC3C3_C3C3, 0, n),
    ];
    for (element_size, value, word, first, words) in cases {
        let mut info = graph.node_info(m).unwrap();
        info.memset_dst = pointer_of(&buffer) + 4 * first as u64;
        info.memset_element_size = element_size;
        info.memset_value = value;
        info.memset_width = (words * 4) as u64 / u64::from(element_size);
        graph.set_node_info(m, &info).unwrap();
        assert_same_info(&graph.node_info(m).unwrap(), &info);
        poison(&buffer, n);
        graph.launch().unwrap();
        let mut expected = vec![POISON; n];
        expected[first..first + words].fill(word);
        let got = buffer.to_vec::<u32>().unwrap();
        for i in 0..n {
            assert_eq!(got[i], expected[i], "element size {element_size}: word {i}");
        }
    }

    // Refusals change nothing.
    let good = graph.node_info(m).unwrap();
    let mut info = good;
    info.memset_element_size = 3;
    let e = assert_error(graph.set_node_info(m, &info), Status::InvalidArgument);
    assert_eq!(e.call(), "vyre_graph_node_info_set");
    let mut info = good;
    info.kind = sys::VYRE_GRAPH_NODE_KERNEL;
    assert_error(graph.set_node_info(m, &info), Status::InvalidArgument);
    let mut info = good;
    info.memset_dst += 4; // the whole width from there runs past the end
    let e = assert_error(graph.set_node_info(m, &info), Status::InvalidArgument);
    assert!(e.message().contains("past the end"), "{e}");
    assert_error(graph.set_node_info(1000, &good), Status::OutOfRange);
    assert_same_info(&graph.node_info(m).unwrap(), &good);
    poison(&buffer, n);
    graph.launch().unwrap();
    assert!(buffer
        .to_vec::<u32>()
        .unwrap()
        .iter()
        .all(|&v| v == 0xC3C3_C3C3));
    assert_no_misuse();
}

/// saxpy's scalar slots (a: SCALAR32, n: SCALAR64) and grid set through the
/// node info; the next replays compute with them, and node_info reads them
/// back. Refusals: another kind, a SCALAR32 slot's high half.
#[test]
fn kernel_node_scalar_slots_set_round_trip() {
    with_context!(ctx);
    let saxpy = saxpy_program(&ctx);
    let n = 300usize;
    let mut rng = Rng::new(41);
    let x = small_floats(&mut rng, n, 100);
    let y0 = small_floats(&mut rng, n, 1000);
    let (dx, dy) = (ctx.upload(&x).unwrap(), ctx.upload(&y0).unwrap());
    // An explicit grid: 3 blocks of 128 threads cover n.
    let graph = saxpy
        .record(
            &Dispatch::new()
                .arg(&dx)
                .arg(&dy)
                .scalar_f32(1.0)
                .scalar_u64(n as u64)
                .grid([3, 1, 1]),
        )
        .unwrap();
    let k = first_node(&graph, GraphNodeKind::Kernel);
    let good = graph.node_info(k).unwrap();
    assert_eq!(good.kind, sys::VYRE_GRAPH_NODE_KERNEL);
    assert_eq!(good.argument_count, 4);
    assert_eq!(good.arguments[0], u64::from(1.0f32.to_bits()));
    assert_eq!(good.arguments[1], pointer_of(&dx));
    assert_eq!(good.arguments[2], pointer_of(&dy));
    assert_eq!(good.arguments[3], n as u64);

    let a = (2 + rng.below(8)) as f32;
    let count = 200usize;
    let mut info = good;
    info.arguments[0] = u64::from(a.to_bits());
    info.arguments[3] = count as u64;
    info.grid = [2, 1, 1]; // 256 threads still cover `count`
    graph.set_node_info(k, &info).unwrap();
    assert_same_info(&graph.node_info(k).unwrap(), &info);

    let mut expected = y0.clone();
    for _ in 0..2 {
        graph.launch().unwrap();
        for i in 0..count {
            expected[i] += a * x[i];
        }
    }
    let got = dy.to_vec::<f32>().unwrap();
    for i in 0..n {
        assert_eq!(got[i], expected[i], "y[{i}]");
    }

    // Fresh data, same node: the set values stay for later replays.
    let y1 = small_floats(&mut rng, n, 1000);
    dy.upload(0, &y1).unwrap();
    graph.launch().unwrap();
    let got = dy.to_vec::<f32>().unwrap();
    for i in 0..n {
        let want = if i < count { a * x[i] + y1[i] } else { y1[i] };
        assert_eq!(got[i], want, "fresh y[{i}]");
    }

    let set = graph.node_info(k).unwrap();
    let mut bad = set;
    bad.kind = sys::VYRE_GRAPH_NODE_MEMSET;
    assert_error(graph.set_node_info(k, &bad), Status::InvalidArgument);
    let mut bad = set;
    bad.arguments[0] = 1 << 32 | u64::from(2.0f32.to_bits());
    assert_error(graph.set_node_info(k, &bad), Status::InvalidArgument);
    let mut bad = set;
    bad.grid[1] = 0;
    assert_error(graph.set_node_info(k, &bad), Status::InvalidArgument);
    assert_same_info(&graph.node_info(k).unwrap(), &set);
    assert_no_misuse();
}

/// A pointer slot changed without RAW is refused (the binding's pointer is
/// rebound through a replay instead); with RAW the kernel writes the other
/// buffer; a rebinding replay takes the slot back.
#[test]
fn kernel_pointer_slot_needs_raw() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 128usize;
    let mut rng = Rng::new(51);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let out = ctx.upload(&vec![POISON; n]).unwrap();
    let other = ctx.upload(&vec![POISON; n]).unwrap();
    let graph = add
        .record(&Dispatch::new().arg(&da).arg(&db).arg(&out).params(&[n as u32]))
        .unwrap();
    let k = first_node(&graph, GraphNodeKind::Kernel);
    let mut info = graph.node_info(k).unwrap();
    assert_eq!(info.arguments[2], pointer_of(&out));
    info.arguments[2] = pointer_of(&other);
    let e = assert_error(graph.set_node_info(k, &info), Status::InvalidArgument);
    assert!(e.message().contains("binding's pointer"), "{e}");
    assert!(e.message().contains("VYRE_GRAPH_NODE_SET_RAW"), "{e}");
    assert_eq!(
        graph.node_info(k).unwrap().arguments[2],
        pointer_of(&out),
        "a refused set changes nothing"
    );
    // SAFETY: `other` holds n u32s and outlives the graph (declared before it).
    unsafe { graph.set_node_info_raw(k, &info) }.unwrap();
    assert_eq!(graph.node_info(k).unwrap().arguments[2], pointer_of(&other));

    // The memset still zeroes `out`; the kernel writes `other`.
    graph.launch().unwrap();
    check_sum(&a, &b, &other.to_vec::<u32>().unwrap(), "raw pointer slot");
    assert!(out.to_vec::<u32>().unwrap().iter().all(|&v| v == 0));

    // Rebinding rewrites the binding slots from the bindings.
    poison(&out, n);
    poison(&other, n);
    graph
        .replay(Replay::new().arg(&db).arg(&da).arg(&out))
        .unwrap();
    assert_eq!(graph.node_info(k).unwrap().arguments[2], pointer_of(&out));
    check_sum(&b, &a, &out.to_vec::<u32>().unwrap(), "rebound");
    assert!(other.to_vec::<u32>().unwrap().iter().all(|&v| v == POISON));

    // Wrong kind, even raw.
    let mut bad = graph.node_info(k).unwrap();
    bad.kind = sys::VYRE_GRAPH_NODE_MEMSET;
    // SAFETY: refused before anything is set.
    assert_error(unsafe { graph.set_node_info_raw(k, &bad) }, Status::InvalidArgument);
    let m = first_node(&graph, GraphNodeKind::Memset);
    assert_error(
        graph.set_node_info(m, &graph.node_info(k).unwrap()),
        Status::InvalidArgument,
    );
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Captures
// ---------------------------------------------------------------------------

/// The library's dispatch captured, nothing run until the graph is
/// replayed; every replay (synchronous, and on a caller's stream) runs it
/// again over the buffers' current contents.
#[test]
fn capture_dispatch_end_and_replay() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 1000usize;
    let mut rng = Rng::new(101);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let out = ctx.upload(&vec![POISON; n]).unwrap();

    let capture = ctx.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert_ne!(capture.cu_stream(), 0);
    assert_eq!(capture.mode(), CaptureMode::ThreadLocal);
    capture
        .dispatch(&add, Dispatch::new().arg(&da).arg(&db).arg(&out).params(&[n as u32]))
        .unwrap();
    let graph = capture.end().unwrap();

    // Captured, not run.
    assert!(out.to_vec::<u32>().unwrap().iter().all(|&v| v == POISON));
    let info = graph.info().unwrap();
    assert_eq!(info.kernel_node_count, 1);
    let kinds = graph.node_kinds().unwrap();
    assert_eq!(
        kinds,
        [GraphNodeKind::Memset, GraphNodeKind::Kernel],
        "the zeroing of out, the kernel (parameter words uploaded once, at end)"
    );
    let k = first_node(&graph, GraphNodeKind::Kernel);
    let kernel = graph.node_info(k).unwrap();
    assert_ne!(kernel.cu_function, 0);
    assert_eq!(kernel.argument_count, 0, "a captured kernel's arguments are not known");
    // SAFETY: refused (captured kernels cannot be set).
    assert_error(unsafe { graph.set_node_info_raw(k, &kernel) }, Status::InvalidArgument);
    let m = first_node(&graph, GraphNodeKind::Memset);
    assert_eq!(graph.node_info(m).unwrap().memset_dst, pointer_of(&out));

    for round in 0..3 {
        let (a, b) = (rng.u32s(n), rng.u32s(n));
        da.upload(0, &a).unwrap();
        db.upload(0, &b).unwrap();
        poison(&out, n);
        if round < 2 {
            graph.launch().unwrap();
        } else {
            let mut pending = graph
                .launch_on_stream(Replay::new(), vyre_cuda::CU_STREAM_LEGACY)
                .unwrap();
            pending.wait().unwrap();
        }
        check_sum(&a, &b, &out.to_vec::<u32>().unwrap(), "captured graph");
    }
    // A captured graph takes nothing at replay.
    assert_error(
        graph.replay(Replay::new().element_count(5)),
        Status::InvalidArgument,
    );
    assert_no_misuse();
}

/// Refusals: a second capture, host bindings, a program of another context,
/// end and dispatch with no capture open, an end after the capture was
/// ended underneath; each leaves the context able to capture again.
#[test]
fn capture_refusals() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let other_ctx = Context::new(0).unwrap();
    let other_add = add_program(&other_ctx);
    let n = 64usize;
    let mut rng = Rng::new(121);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let out = ctx.upload(&vec![POISON; n]).unwrap();
    let resident = || Dispatch::new().arg(&da).arg(&db).arg(&out).params(&[n as u32]);

    // End and dispatch with none open (only the raw calls can say so: a
    // Capture is ended at most once).
    let mut raw_graph = sys::vyre_graph::default();
    let e = assert_error(
        vyre_cuda::check_raw(
            // SAFETY: a live context and a valid out-pointer.
            unsafe { sys::vyre_capture_end(ctx.raw(), &mut raw_graph) },
            "vyre_capture_end",
        ),
        Status::InvalidState,
    );
    assert!(e.message().starts_with("vyre_capture_end: "), "{e}");
    assert_eq!(raw_graph.bits, 0);
    let desc = sys::vyre_dispatch_desc::default();
    assert_error(
        vyre_cuda::check_raw(
            // SAFETY: a live program and a valid descriptor.
            unsafe { sys::vyre_capture_dispatch(add.raw(), &desc) },
            "vyre_capture_dispatch",
        ),
        Status::InvalidState,
    );

    let capture = ctx.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let e = assert_error(ctx.begin_capture(CaptureMode::Relaxed), Status::InvalidState);
    assert_eq!(e.call(), "vyre_capture_begin");
    let mut host_out = vec![POISON; n];
    assert_error(
        capture.dispatch(
            &add,
            Dispatch::new()
                .arg(&da)
                .arg(&db)
                .arg(Arg::output(&mut host_out))
                .params(&[n as u32]),
        ),
        Status::InvalidArgument,
    );
    let e = assert_error(
        capture.dispatch(&other_add, resident()),
        Status::InvalidArgument,
    );
    assert_eq!(e.call(), "Capture::dispatch");
    assert_error(
        capture.dispatch(&add, resident().cooperative(true)),
        Status::InvalidArgument,
    );
    // The refusals left the capture usable.
    capture.dispatch(&add, resident()).unwrap();
    assert_error(ctx.wait_stream(capture.cu_stream()), Status::InvalidArgument);
    let graph = capture.end().unwrap();
    graph.launch().unwrap();
    check_sum(&a, &b, &out.to_vec::<u32>().unwrap(), "after the refusals");
    drop(graph);

    // Ended underneath: end is InvalidState, and nothing is left open.
    let capture = ctx.begin_capture(CaptureMode::ThreadLocal).unwrap();
    // SAFETY: a live context and a valid out-pointer.
    let status = unsafe { sys::vyre_capture_end(ctx.raw(), &mut raw_graph) };
    vyre_cuda::check_raw(status, "vyre_capture_end").unwrap();
    assert_ne!(raw_graph.bits, 0);
    assert_error(capture.end(), Status::InvalidState);
    // SAFETY: the graph the raw end made, destroyed once.
    vyre_cuda::check_raw(unsafe { sys::vyre_graph_destroy(raw_graph) }, "vyre_graph_destroy")
        .unwrap();

    // A parameter block too small for the dispatch's words.
    let capture = ctx
        .begin_capture_with(&CaptureOptions {
            mode: CaptureMode::ThreadLocal,
            param_bytes: 256,
        })
        .unwrap();
    let many_words = vec![n as u32; 65]; // 260 bytes > 256
    assert_error(
        capture.dispatch(
            &add,
            Dispatch::new().arg(&da).arg(&db).arg(&out).params(&many_words),
        ),
        Status::LimitExceeded,
    );
    let graph = capture.end().unwrap();
    assert_eq!(graph.info().unwrap().node_count, 0);
    drop(graph);
    drop(ctx.begin_capture(CaptureMode::ThreadLocal).unwrap());
    assert_no_misuse();
}

/// RELAXED: dispatches from another thread go into the capture (a Capture
/// is Sync); the graph replays them.
#[test]
fn relaxed_capture_dispatched_from_another_thread() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 256usize;
    let mut rng = Rng::new(111);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let (out1, out2) = (
        ctx.upload(&vec![POISON; n]).unwrap(),
        ctx.upload(&vec![POISON; n]).unwrap(),
    );
    let capture = ctx.begin_capture(CaptureMode::Relaxed).unwrap();
    capture
        .dispatch(&add, Dispatch::new().arg(&da).arg(&db).arg(&out1).params(&[n as u32]))
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            capture
                .dispatch(&add, Dispatch::new().arg(&db).arg(&out1).arg(&out2).params(&[n as u32]))
                .unwrap();
        });
    });
    let graph = capture.end().unwrap();
    assert_eq!(graph.info().unwrap().kernel_node_count, 2);
    assert!(out2.to_vec::<u32>().unwrap().iter().all(|&v| v == POISON));
    for _ in 0..2 {
        let (a, b) = (rng.u32s(n), rng.u32s(n));
        da.upload(0, &a).unwrap();
        db.upload(0, &b).unwrap();
        poison(&out1, n);
        poison(&out2, n);
        graph.launch().unwrap();
        let sum: Vec<u32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
        check_sum(&a, &b, &out1.to_vec::<u32>().unwrap(), "first dispatch");
        check_sum(&b, &sum, &out2.to_vec::<u32>().unwrap(), "second dispatch, in order");
    }
    assert_no_misuse();
}

/// A Capture dropped without end ends the capture and destroys its graph:
/// no CUDA graph outlives it, and the context captures again.
#[test]
fn a_capture_dropped_without_end_is_ended() {
    let _gate = exclusive();
    let Some(ctx) = context() else {
        return;
    };
    let add = add_program(&ctx);
    let n = 100usize;
    let mut rng = Rng::new(131);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let out = ctx.upload(&vec![POISON; n]).unwrap();
    let before = fake().then(fake_stats);
    for mode in [CaptureMode::ThreadLocal, CaptureMode::Global, CaptureMode::Relaxed] {
        let capture: Capture = ctx.begin_capture(mode).unwrap();
        capture
            .dispatch(&add, Dispatch::new().arg(&da).arg(&db).arg(&out).params(&[n as u32]))
            .unwrap();
        drop(capture);
        if let Some(before) = &before {
            let after = fake_stats();
            assert_eq!(after.graphs_live, before.graphs_live, "{mode:?}: graphs");
            assert_eq!(after.graph_execs_live, before.graph_execs_live, "{mode:?}");
        }
        // Nothing ran, and the context is free to capture again.
        assert!(out.to_vec::<u32>().unwrap().iter().all(|&v| v == POISON));
    }
    let capture = ctx.begin_capture(CaptureMode::ThreadLocal).unwrap();
    capture
        .dispatch(&add, Dispatch::new().arg(&da).arg(&db).arg(&out).params(&[n as u32]))
        .unwrap();
    let graph = capture.end().unwrap();
    graph.launch().unwrap();
    check_sum(&a, &b, &out.to_vec::<u32>().unwrap(), "after the drops");
    graph.destroy().unwrap();
    if let Some(before) = &before {
        assert_eq!(fake_stats().graphs_live, before.graphs_live);
    }
    // The context is destroyed once the capture is gone (never refused).
    drop((add, da, db, out));
    drop(ctx);
    assert_no_misuse();
}

#[test]
fn capture_is_sync() {
    fn check<T: Sync>() {}
    check::<Capture>();
    check::<CaptureOptions>();
}
