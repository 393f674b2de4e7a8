//! A process whose CUDA driver cannot be loaded: every path reports
//! NO_DRIVER with a Fix, bad handles are still caught first, and the CPU
//! e-graph reference works. The driver is loaded once per process, so the
//! test runs itself again in a child with
//! VYRE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1.

mod common;

use vyre_cuda::{sys, Context, EgraphImage, EgraphNodes, Rebuild, Status};

fn in_child(test: &str) -> bool {
    common::in_child(test, "VYRE_CUDA_DRIVER_LIBRARY", "/nonexistent/libcuda.so.1")
}

fn assert_no_driver<T: std::fmt::Debug>(what: &str, r: vyre_cuda::Result<T>) {
    let e = r.expect_err(what);
    assert_eq!(e.status(), Status::NoDriver, "{what}: {e}");
    let fix = e.fix().unwrap_or_else(|| panic!("{what}: no Fix in {e}"));
    assert!(fix.len() > "Fix: ".len(), "{what}: {e}");
    assert!(
        e.message().contains("/nonexistent/libcuda.so.1"),
        "{what}: the path is named: {e}"
    );
    assert_eq!(e.cu_result(), 0);
}

#[test]
fn no_driver_is_reported_with_a_fix() {
    if !in_child("no_driver_is_reported_with_a_fix") {
        return;
    }
    assert_no_driver("Context::new", Context::new(0));
    assert_no_driver("device_count", vyre_cuda::device_count());
    assert_no_driver("device_info", vyre_cuda::device_info(0));
    assert_no_driver(
        "device_can_access_peer",
        vyre_cuda::device_can_access_peer(0, 1),
    );
    assert_no_driver("Context::new again", Context::new(0));
    let last = vyre_cuda::last_error().expect("the last error is kept");
    assert_eq!(last.status(), Status::NoDriver);
    println!("CHILD-DONE no_driver_is_reported_with_a_fix");
}

#[test]
fn handles_are_checked_before_the_driver() {
    if !in_child("handles_are_checked_before_the_driver") {
        return;
    }
    let e = vyre_cuda::check_raw(
        unsafe { sys::vyre_buffer_free(sys::vyre_buffer { bits: 42 }) },
        "vyre_buffer_free",
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidHandle, "{e}");
    assert!(e.fix().is_some());
    let e = vyre_cuda::check_raw(
        unsafe { sys::vyre_context_destroy(sys::vyre_context { bits: 0 }) },
        "x",
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidHandle, "{e}");
    // The CPU e-graph reference needs no driver.
    let nodes = EgraphNodes::new([(0, 1, &[][..]), (1, 2, &[]), (2, 3, &[0]), (3, 3, &[1])]);
    let img = EgraphImage::cpu(&nodes.columns(), 1).unwrap();
    let mut canonical = vec![0u32; 4];
    img.rebuild(Rebuild {
        unions: &[[0, 1]],
        canonical_out: Some(&mut canonical),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(canonical, [0, 0, 2, 2]);
    println!("CHILD-DONE handles_are_checked_before_the_driver");
}
