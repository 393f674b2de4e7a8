//! Record a dispatch once as a CUDA graph and replay it with new data at
//! the cost of one launch; then a resident graph rebound to other buffers
//! and replayed for fewer elements.
//!
//!     cargo run --example graph_replay [-- N REPLAYS]
//!
//! Exits 0 when every element matched, 2 (with the library's message and
//! Fix) when this machine has no usable driver or device, and 1 on any other
//! error or a wrong element.

mod common;

use common::kernels::ADD_PTX;
use vyre_cuda::{Arg, Binding, Code, Context, Dispatch, Program, Replay};

fn main() {
    common::main("graph_replay", run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(4096), |s| s.parse())?;
    let replays: usize = args.next().map_or(Ok(100), |s| s.parse())?;
    let ctx = Context::new(0)?;
    let add = Program::builder(Code::Ptx(ADD_PTX), "vyre_test_add_u32")
        .bindings([
            Binding::input::<u32>(),
            Binding::input::<u32>(),
            Binding::output::<u32>(),
        ])
        .build(&ctx)?;

    // Host bindings: the sample data fixes the byte lengths; recording runs nothing.
    let (mut a, mut b) = (vec![0u32; n], vec![0u32; n]);
    let mut out = vec![0u32; n];
    let graph = add.record(
        &Dispatch::new()
            .arg(Arg::input(&a))
            .arg(Arg::input(&b))
            .arg(Arg::output(&mut out))
            .params(&[n as u32]),
    )?;
    let info = graph.info()?;
    println!(
        "graph: {} nodes ({} kernel), {} bytes in and {} out per replay",
        info.node_count, info.kernel_node_count, info.host_input_bytes, info.host_output_bytes
    );

    let mut wall = 0u64;
    for r in 0..replays {
        for i in 0..n {
            a[i] = (i * 7 + r) as u32;
            b[i] = (r * 1_000_003) as u32 ^ i as u32;
        }
        wall += graph
            .replay(
                Replay::new()
                    .arg(Arg::input(&a))
                    .arg(Arg::input(&b))
                    .arg(Arg::output(&mut out)),
            )?
            .wall_ns;
        check(&a, &b, &out, &format!("replay {r}"))?;
    }
    println!(
        "{replays} host replays of {n} elements: {:.1} us each",
        wall as f64 / replays as f64 / 1e3
    );

    // Resident bindings: rebound per replay, and a smaller element count.
    let (da, db, dout) = (ctx.upload(&a)?, ctx.upload(&b)?, ctx.alloc(4 * n as u64)?);
    let resident = add.record(
        &Dispatch::new()
            .arg(&da)
            .arg(&db)
            .arg(&dout)
            .params(&[n as u32]),
    )?;
    resident.launch()?;
    let mut got = vec![0u32; n];
    dout.download(0, &mut got)?;
    check(&a, &b, &got, "resident replay")?;
    let m = n / 3;
    let (ea, eb, eout) = (ctx.upload(&b)?, ctx.upload(&a)?, ctx.alloc(4 * n as u64)?);
    resident.replay(
        Replay::new()
            .arg(&ea)
            .arg(&eb)
            .arg(&eout)
            .element_count(m as u64)
            .params(&[m as u32]),
    )?;
    eout.download(0, &mut got[..m])?;
    check(&b[..m], &a[..m], &got[..m], "rebound, fewer elements")?;

    let t = ctx.telemetry()?;
    println!(
        "telemetry: {} graph replays, {} graph launches, {} uploads skipped",
        t.graph_replays, t.graph_launches, t.graph_uploads_skipped
    );
    Ok(())
}

fn check(a: &[u32], b: &[u32], out: &[u32], what: &str) -> Result<(), String> {
    for i in 0..a.len() {
        if out[i] != a[i].wrapping_add(b[i]) {
            return Err(format!(
                "{what}: out[{i}] = {}, expected {}",
                out[i],
                a[i].wrapping_add(b[i])
            ));
        }
    }
    Ok(())
}
