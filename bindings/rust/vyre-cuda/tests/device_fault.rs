//! A device fault (fake driver: fake_cuda_inject_fault) is DEVICE_FAULT with
//! a Fix on the failing call and every later one on that device; dropping
//! every context and making a new one recovers. Runs in a child process of
//! its own: the fault is sticky for the whole device.

mod common;

use std::process::Command;

use common::*;
use vyre_cuda::{Arg, Context, Dispatch, Status};

const CHILD: &str = "VYRE_CUDA_RUST_TEST_CHILD";
const CUDA_ERROR_ILLEGAL_ADDRESS: i32 = 700;

#[test]
fn device_fault_costs_one_context() {
    if !fake() {
        eprintln!("skipped: needs the fake driver (VYRE_CUDA_TEST_FAKE_DRIVER=1)");
        return;
    }
    if std::env::var(CHILD).is_err() {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "device_fault_costs_one_context", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("CHILD-DONE"),
            "the child failed:\n{text}"
        );
        return;
    }
    let n = 1000;
    let mut rng = Rng::new(31);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    {
        let ctx = Context::new(0).unwrap();
        let add = add_program(&ctx);
        let buffer = ctx.upload(&a).unwrap();
        let mut out = vec![0u32; n];
        inject_fault(CUDA_ERROR_ILLEGAL_ADDRESS);
        let e = assert_error(
            add.dispatch(
                Dispatch::new()
                    .arg(Arg::input(&a))
                    .arg(Arg::input(&b))
                    .arg(Arg::output(&mut out))
                    .params(&[n as u32]),
            ),
            Status::DeviceFault,
        );
        assert_eq!(e.cu_result(), CUDA_ERROR_ILLEGAL_ADDRESS);
        // Every later call on the device's contexts says so too.
        assert_error(buffer.download(0, &mut out), Status::DeviceFault);
        assert_error(ctx.alloc(64), Status::DeviceFault);
        // A free releases the buffer either way (it may say the device
        // faulted); the rest is dropped here.
        if let Err(e) = buffer.free() {
            assert_eq!(e.status(), Status::DeviceFault, "{e}");
        }
    }
    // Every context of the device is gone: a new one works.
    let ctx = Context::new(0).unwrap();
    let add = add_program(&ctx);
    let mut out = vec![0u32; n];
    add.dispatch(
        Dispatch::new()
            .arg(Arg::input(&a))
            .arg(Arg::input(&b))
            .arg(Arg::output(&mut out))
            .params(&[n as u32]),
    )
    .unwrap();
    check_sum(&a, &b, &out, "after the reset");
    assert!(fake_stats().primary_context_resets >= 1);
    assert_no_misuse();
    println!("CHILD-DONE");
}
