//! Per-call cost of a 4 KiB vector add (1024 u32) through the Rust bindings,
//! the counterpart of bench/binding_overhead.c (the C baseline), the Go
//! examples/bench_overhead and bindings/python/bench_overhead.py. Not a test.
//!
//!     cargo run --release --example bench_overhead [-- --iterations N --warmup N]
//!
//! resident: inputs and output in resident buffers (the dispatch waits);
//! host: inputs from host memory, the sum written back to host memory. Each
//! call is timed alone (Instant) after the warm-up calls; one line per case,
//! "OVERHEAD {json}" with the median, p10 and p90 in microseconds. Results are
//! checked element by element before and after timing. Exits 0, 2 (with the
//! library's message and Fix) when this machine has no usable driver or
//! device, or 1 on any other error or a wrong element.

mod common;

use std::time::Instant;

use common::kernels::ADD_PTX;
use vyre_cuda::{Arg, Binding, Code, Context, Dispatch, Program};

const N: usize = 1024;

fn main() {
    common::main("bench_overhead", run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (mut iterations, mut warmup) = (20_000usize, 2_000usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or("usage: bench_overhead [--iterations N] [--warmup N]")?;
        match arg.as_str() {
            "--iterations" => iterations = value.parse()?,
            "--warmup" => warmup = value.parse()?,
            _ => return Err("usage: bench_overhead [--iterations N] [--warmup N]".into()),
        }
    }
    let iterations = iterations.max(10);

    let ctx = Context::new(0)?;
    let device = ctx.device_info()?.name;
    let add = Program::builder(Code::Ptx(ADD_PTX), "vyre_test_add_u32")
        .bindings([
            Binding::input::<u32>().name("a"),
            Binding::input::<u32>().name("b"),
            Binding::output::<u32>().name("out"),
        ])
        .workgroup_size(256)
        .build(&ctx)?;

    let a: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) & 0x7FFF_FFFF)
        .collect();
    let b: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(40_503).wrapping_add(7) & 0x7FFF_FFFF)
        .collect();
    let expected: Vec<u32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
    let check = |got: &[u32], what: &str| -> Result<(), String> {
        match got.iter().zip(&expected).position(|(g, e)| g != e) {
            None => Ok(()),
            Some(i) => Err(format!("{what}: out[{i}] = {}, expected {}", got[i], expected[i])),
        }
    };

    // Resident: one descriptor, reused.
    let (da, db, dout) = (ctx.upload(&a)?, ctx.upload(&b)?, ctx.alloc(4 * N as u64)?);
    {
        let mut resident = Dispatch::new().arg(&da).arg(&db).arg(&dout).params(&[N as u32]);
        add.dispatch_with(&mut resident)?;
        let mut got = vec![0u32; N];
        dout.download(0, &mut got)?;
        check(&got, "resident")?;
        let stats = measure(iterations, warmup, || add.dispatch_with(&mut resident).map(drop))?;
        report("resident", stats, iterations, &device);
        got.fill(0);
        dout.download(0, &mut got)?;
        check(&got, "resident, after timing")?;
    }

    // Host: one descriptor over the host vectors, reused for the timed calls.
    let mut out = vec![0u32; N];
    add.dispatch(host_dispatch(&a, &b, &mut out))?;
    check(&out, "host")?;
    out.fill(0);
    {
        let mut host = host_dispatch(&a, &b, &mut out);
        let stats = measure(iterations, warmup, || add.dispatch_with(&mut host).map(drop))?;
        report("host", stats, iterations, &device);
    }
    check(&out, "host, after timing")?;
    Ok(())
}

/// out = a + b from and to host memory.
fn host_dispatch<'a>(a: &'a [u32], b: &'a [u32], out: &'a mut [u32]) -> Dispatch<'a> {
    Dispatch::new()
        .arg(Arg::input(a))
        .arg(Arg::input(b))
        .arg(Arg::output(out))
        .params(&[N as u32])
}

struct Stats {
    median: f64,
    p10: f64,
    p90: f64,
}

fn measure(
    iterations: usize,
    warmup: usize,
    mut call: impl FnMut() -> vyre_cuda::Result<()>,
) -> vyre_cuda::Result<Stats> {
    for _ in 0..warmup {
        call()?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t0 = Instant::now();
        let r = call();
        samples.push(t0.elapsed().as_nanos() as f64 / 1e3);
        r?;
    }
    samples.sort_by(|x, y| x.total_cmp(y));
    let n = samples.len();
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    };
    Ok(Stats {
        median,
        p10: samples[n / 10],
        p90: samples[9 * n / 10],
    })
}

fn report(case: &str, s: Stats, iterations: usize, device: &str) {
    println!(
        "OVERHEAD {{\"binding\": \"Rust\", \"case\": \"{case}\", \"median_us\": {:.3}, \
         \"p10_us\": {:.3}, \"p90_us\": {:.3}, \"iterations\": {iterations}, \"device\": {:?}}}",
        s.median, s.p10, s.p90, device
    );
}
