//! Loop graphs (`Graph::loop_while`, `vyre_graph_loop_create`) against a
//! driver: the fake one in CI (it runs WHILE nodes and the library's control
//! kernel on the host), or a GPU. The body is the countdown kernel
//! (vyre_test_countdown_u32: every positive element drops by one, the flag
//! word is set while one is still positive) recorded over resident data;
//! fresh random non-zero data per launch, the condition and count words
//! poisoned before, every element compared with a CPU model; every refusal
//! checked for its status and a Fix.

#[macro_use]
mod common;

use common::*;
use vyre_cuda::{
    Arg, Binding, Buffer, Code, Context, Dispatch, Graph, GraphNodeKind, Program, Replay, Status,
    Step,
};

const POISON: u32 = 0xDEAD_BEEF;
const N: usize = 1000;

fn countdown_program(ctx: &Context) -> Program {
    Program::builder(Code::Ptx(COUNTDOWN_PTX), "vyre_test_countdown_u32")
        .bindings([
            Binding::input_output::<u32>().name("data"),
            Binding::input_output::<u32>().name("flag"),
        ])
        .workgroup_size(128)
        .build(ctx)
        .expect("the countdown program")
}

/// Values in 1..=top: each needs that many rounds to reach 0.
fn countdowns(rng: &mut Rng, top: u32) -> Vec<u32> {
    (0..N)
        .map(|_| 1 + rng.below(u64::from(top)) as u32)
        .collect()
}

/// The countdown over `data` with word 0 of `words` as its flag, recorded.
fn record_body(program: &Program, data: &Buffer, words: &Buffer) -> Graph<'static> {
    program
        .record(
            &Dispatch::new()
                .arg(data)
                .arg(Arg::range(words.range(0, 4)))
                .params(&[N as u32]),
        )
        .expect("the countdown body")
}

/// Uploads fresh countdowns in 1..=top, poisons the four words (0: the
/// condition, 1: the count, 2 and 3: untouched), launches the loop once and
/// checks every element, the count and the condition against the CPU.
fn launch_and_check(
    loop_graph: &Graph<'_>,
    data: &Buffer,
    words: &Buffer,
    max: u32,
    top: u32,
    rng: &mut Rng,
    has_count: bool,
) {
    let input = countdowns(rng, top);
    data.upload(0, &input).unwrap();
    words.upload(0, &[POISON; 4]).unwrap();
    loop_graph.launch().unwrap();
    let highest = *input.iter().max().unwrap();
    let rounds = highest.min(max);
    let got = data.to_vec::<u32>().unwrap();
    for i in 0..N {
        assert_eq!(
            got[i],
            input[i].saturating_sub(rounds),
            "max {max}: element {i} (from {})",
            input[i]
        );
    }
    let w = words.to_vec::<u32>().unwrap();
    assert_eq!(
        w[0] != 0,
        highest > max,
        "max {max}: condition word {:#x}",
        w[0]
    );
    if has_count {
        assert_eq!(w[1], rounds, "max {max}: count word");
    } else {
        assert_eq!(w[1], POISON, "no count word: untouched");
    }
    assert_eq!(w[2], POISON, "untouched");
    assert_eq!(w[3], POISON, "untouched");
}

/// Runs until the body clears the condition: every element 0, the count
/// the largest value, the condition 0; the loop outlives its body.
#[test]
fn runs_until_the_body_clears_the_condition() {
    with_context!(ctx);
    let program = countdown_program(&ctx);
    let data = ctx.alloc(4 * N as u64).unwrap();
    let words = ctx.alloc(16).unwrap();
    let body = record_body(&program, &data, &words);
    let looped = body
        .loop_while((&words, 0), 100, Some((&words, 4)))
        .unwrap();
    // The library keeps the body alive for the loop.
    body.destroy().unwrap();
    let mut rng = Rng::new(100);
    for top in [40, 47, 1] {
        launch_and_check(&looped, &data, &words, 100, top, &mut rng, true);
    }
    let info = looped.info().unwrap();
    assert_eq!(info.node_count, 2);
    assert_eq!(info.replays, 3);
    assert_eq!(
        looped.node_kinds().unwrap(),
        vec![
            GraphNodeKind::Kernel,
            GraphNodeKind::Other(vyre_cuda::sys::VYRE_GRAPH_NODE_CONDITIONAL)
        ]
    );
    // An empty replay is a launch too; one with bindings is refused.
    let input = countdowns(&mut rng, 30);
    data.upload(0, &input).unwrap();
    looped.replay(Replay::new()).unwrap();
    assert!(data.to_vec::<u32>().unwrap().iter().all(|&x| x == 0));
    let e = assert_error(
        looped.replay(Replay::new().arg(&data)),
        Status::InvalidArgument,
    );
    assert_eq!(e.call(), "vyre_graph_replay");
    looped.destroy().unwrap();
}

/// Stopped by the bound: every element max(0, v - 5), the count 5, the
/// condition still set; a bound of one runs the body once.
#[test]
fn stops_at_the_bound_with_the_condition_still_set() {
    with_context!(ctx);
    let program = countdown_program(&ctx);
    let data = ctx.alloc(4 * N as u64).unwrap();
    let words = ctx.alloc(16).unwrap();
    let body = record_body(&program, &data, &words);
    let five = body.loop_while((&words, 0), 5, Some((&words, 4))).unwrap();
    let once = body.loop_while((&words, 0), 1, Some((&words, 4))).unwrap();
    drop(body);
    let mut rng = Rng::new(7);
    launch_and_check(&five, &data, &words, 5, 40, &mut rng, true);
    launch_and_check(&five, &data, &words, 5, 60, &mut rng, true);
    launch_and_check(&once, &data, &words, 1, 60, &mut rng, true);
}

/// Without a count word, over an asynchronous replay, and over a sequence's
/// graph as the body; the loop keeps the body's program alive.
#[test]
fn without_a_count_async_and_over_a_sequence() {
    with_context!(ctx);
    let program = countdown_program(&ctx);
    let data = ctx.alloc(4 * N as u64).unwrap();
    let words = ctx.alloc(16).unwrap();
    let mut rng = Rng::new(21);
    {
        let body = record_body(&program, &data, &words);
        let looped = body.loop_while((&words, 0), 1000, None).unwrap();
        launch_and_check(&looped, &data, &words, 1000, 90, &mut rng, false);
        let input = countdowns(&mut rng, 30);
        data.upload(0, &input).unwrap();
        let mut pending = looped.replay_async(Replay::new()).unwrap();
        pending.wait().unwrap();
        drop(pending);
        assert!(data.to_vec::<u32>().unwrap().iter().all(|&x| x == 0));
    }
    let mut sequence = ctx
        .sequence(
            vec![Step::dispatch(
                &program,
                Dispatch::new()
                    .arg(&data)
                    .arg(Arg::range(words.range(0, 4)))
                    .params(&[N as u32]),
            )],
            None,
        )
        .unwrap();
    let body = sequence.record().unwrap();
    let looped = body.loop_while((&words, 0), 64, Some((&words, 4))).unwrap();
    drop(body);
    launch_and_check(&looped, &data, &words, 64, 50, &mut rng, true);
    launch_and_check(&looped, &data, &words, 64, 99, &mut rng, true);
    // The loop keeps the body's program alive: it runs with the body, the
    // program and this Context handle dropped.
    drop(looped);
    drop(sequence);
    let body = record_body(&program, &data, &words);
    let looped = body
        .loop_while((&words, 0), 100, Some((&words, 4)))
        .unwrap();
    drop(body);
    drop(program);
    drop(ctx);
    launch_and_check(&looped, &data, &words, 100, 33, &mut rng, true);
}

/// Each refusal: its status, a Fix, the call named; nothing made.
#[test]
fn refuses_what_cannot_loop() {
    with_context!(ctx);
    let program = countdown_program(&ctx);
    let data = ctx.alloc(4 * N as u64).unwrap();
    let words = ctx.alloc(16).unwrap();
    let body = record_body(&program, &data, &words);
    let check = |r: vyre_cuda::Result<Graph<'_>>, status: Status| {
        let e = assert_error(r, status);
        assert_eq!(e.call(), "vyre_graph_loop_create");
        e
    };
    let e = check(
        body.loop_while((&words, 0), 0, Some((&words, 4))),
        Status::InvalidArgument,
    );
    assert!(e.message().contains("Fix:"), "{e}");
    // Misaligned condition and count offsets.
    check(
        body.loop_while((&words, 2), 10, Some((&words, 4))),
        Status::InvalidArgument,
    );
    check(
        body.loop_while((&words, 0), 10, Some((&words, 13))),
        Status::InvalidArgument,
    );
    // Past the buffer.
    check(
        body.loop_while((&words, 16), 10, Some((&words, 4))),
        Status::OutOfRange,
    );
    // The count on the condition's word.
    check(
        body.loop_while((&words, 4), 10, Some((&words, 4))),
        Status::InvalidArgument,
    );
    // A buffer of another context.
    let other = Context::new(0).unwrap();
    let foreign = other.alloc(16).unwrap();
    check(
        body.loop_while((&foreign, 0), 10, None),
        Status::InvalidArgument,
    );
    // A body with HOST bindings.
    let mut host = vec![3u32; N];
    let mut flag = [0u32; 1];
    let host_body = program
        .record(
            &Dispatch::new()
                .arg(Arg::inout(&mut host))
                .arg(Arg::inout(&mut flag))
                .params(&[N as u32]),
        )
        .unwrap();
    check(
        host_body.loop_while((&words, 0), 10, None),
        Status::InvalidArgument,
    );
    // After the refusals the body still loops.
    let looped = body
        .loop_while((&words, 0), 100, Some((&words, 4)))
        .unwrap();
    let mut rng = Rng::new(55);
    launch_and_check(&looped, &data, &words, 100, 20, &mut rng, true);
}
