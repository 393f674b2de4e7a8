//! Vector add, from host memory and from resident buffers, checked element
//! by element against the CPU.
//!
//!     cargo run --example vector_add [-- N]
//!
//! Runs on the GPU of device 0; with VYRE_CUDA_DRIVER_LIBRARY pointing at
//! the test suite's fake driver (tests/support/libfake_cuda.so) it runs on
//! the host. Exits 0 when every element matched, 2 (with the library's
//! message and Fix) when this machine has no usable driver or device, and 1
//! on any other error or a wrong element.

mod common;

use common::kernels::ADD_PTX;
use vyre_cuda::{Arg, Binding, Code, Context, Dispatch, Program};

fn main() {
    common::main("vector_add", run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(1 << 20), |s| s.parse())?;
    let ctx = Context::new(0)?;
    let info = ctx.device_info()?;
    println!(
        "device 0: {} (sm_{}{})",
        info.name, info.compute_capability.0, info.compute_capability.1
    );

    // out[i] = a[i] + b[i]; the kernel's last parameter is the u32 parameter
    // words (the default convention), params[0] = n.
    let add = Program::builder(Code::Ptx(ADD_PTX), "vyre_test_add_u32")
        .bindings([
            Binding::input::<u32>().name("a"),
            Binding::input::<u32>().name("b"),
            Binding::output::<u32>().name("out"),
        ])
        .workgroup_size(256)
        .build(&ctx)?;

    let a: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let b: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5555_5555).collect();
    let expected: Vec<u32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();

    // Host memory: staged in, run, read back, in one call.
    let mut out = vec![0u32; n];
    let timing = add.dispatch(
        Dispatch::new()
            .arg(Arg::input(&a))
            .arg(Arg::input(&b))
            .arg(Arg::output(&mut out))
            .params(&[n as u32]),
    )?;
    check(&out, &expected, "host")?;
    println!(
        "host:     {n} elements in {:.1} us",
        timing.wall_ns as f64 / 1e3
    );

    // Resident buffers: upload once, dispatch many times, download once.
    let (da, db, dout) = (ctx.upload(&a)?, ctx.upload(&b)?, ctx.alloc(4 * n as u64)?);
    let mut dispatch = Dispatch::new()
        .arg(&da)
        .arg(&db)
        .arg(&dout)
        .params(&[n as u32])
        .device_timing(true);
    let timing = add.dispatch_with(&mut dispatch)?;
    let mut resident = vec![0u32; n];
    dout.download(0, &mut resident)?;
    check(&resident, &expected, "resident")?;
    println!(
        "resident: {n} elements, {:.1} us on the device",
        timing.device_ns as f64 / 1e3
    );

    let t = ctx.telemetry()?;
    println!(
        "telemetry: {} dispatches, {} kernel launches, {} bytes up, {} bytes down",
        t.dispatches, t.kernel_launches, t.h2d_bytes, t.d2h_bytes
    );
    Ok(())
}

fn check(got: &[u32], expected: &[u32], what: &str) -> Result<(), String> {
    match got.iter().zip(expected).position(|(g, e)| g != e) {
        None if got.len() == expected.len() => Ok(()),
        None => Err(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            expected.len()
        )),
        Some(i) => Err(format!(
            "{what}: out[{i}] = {}, expected {}",
            got[i], expected[i]
        )),
    }
}
