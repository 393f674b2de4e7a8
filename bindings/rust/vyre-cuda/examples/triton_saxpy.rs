//! A Triton-style kernel: scalars and pointers in the kernel's own order,
//! bound through an explicit parameter list instead of the default
//! convention (one pointer per binding, then a parameter block).
//!
//!     cargo run --example triton_saxpy [-- N]
//!
//! The kernel is vyre_test_saxpy_f32(float a, const float* x, float* y,
//! u64 n): y[i] = a * x[i] + y[i]. Its parameters are bound as
//! [Scalar32(0), Binding(0), Binding(1), Scalar64(1)]: scalars[0] = a (f32
//! bits), binding 0 = x, binding 1 = y, scalars[1] = n. A Triton kernel
//! with unused scratch pointers would add Param::NullPointer entries.
//! Host data lives in page-locked memory (PinnedBuffer), so its copies run
//! by DMA in place. Exits 0 when every element matched, 2 (with the
//! library's message and Fix) when this machine has no usable driver or
//! device, and 1 on any other error or a wrong element.

mod common;

use common::kernels::SAXPY_PTX;
use vyre_cuda::{Arg, Binding, Code, Context, Dispatch, Param, Program};

fn main() {
    common::main("triton_saxpy", run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(1 << 20), |s| s.parse())?;
    let ctx = Context::new(0)?;
    let saxpy = Program::builder(Code::Ptx(SAXPY_PTX), "vyre_test_saxpy_f32")
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
        .build(&ctx)?;

    let a = 2.5f32;
    let mut x = ctx.alloc_pinned(4 * n)?;
    let mut y = ctx.alloc_pinned(4 * n)?;
    for (i, v) in x.as_mut_slice_of::<f32>()?.iter_mut().enumerate() {
        *v = (i % 1024) as f32;
    }
    for (i, v) in y.as_mut_slice_of::<f32>()?.iter_mut().enumerate() {
        *v = (i % 3) as f32;
    }
    let y0: Vec<f32> = y.as_slice_of::<f32>()?.to_vec();

    let pending = saxpy.dispatch_async(
        Dispatch::new()
            .arg(Arg::input(x.as_slice_of::<f32>()?))
            .arg(Arg::inout(y.as_mut_slice_of::<f32>()?))
            .scalar_f32(a)
            .scalar_u64(n as u64)
            .device_timing(true),
    )?;
    let timing = pending.finish()?;

    // Values are small integers times 2.5: exact with or without an FMA.
    let (xs, ys) = (x.as_slice_of::<f32>()?, y.as_slice_of::<f32>()?);
    for i in 0..n {
        let expected = a * xs[i] + y0[i];
        if ys[i] != expected {
            return Err(format!("y[{i}] = {}, expected {expected}", ys[i]).into());
        }
    }
    println!(
        "saxpy over {n} floats: {:.1} us on the device, {:.1} us wall",
        timing.device_ns as f64 / 1e3,
        timing.wall_ns as f64 / 1e3
    );
    Ok(())
}
