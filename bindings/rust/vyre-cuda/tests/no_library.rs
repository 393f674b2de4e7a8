//! A process where libvyre_cuda itself cannot be loaded: the calls that need
//! no object return Status::LibraryNotLoaded with the loader's message and
//! Fix, and nothing panics. The library is loaded once per process, so the
//! test runs itself again in a child with
//! VYRE_CUDA_LIBRARY=/nonexistent/libvyre_cuda.so.0.

mod common;

use vyre_cuda::{Context, EgraphImage, EgraphNodes, Status};

const MISSING: &str = "/nonexistent/libvyre_cuda.so.0";

#[test]
fn a_missing_library_is_an_error_with_a_fix() {
    const TEST: &str = "a_missing_library_is_an_error_with_a_fix";
    if !common::in_child(TEST, "VYRE_CUDA_LIBRARY", MISSING) {
        return;
    }
    let check = |what: &str, e: vyre_cuda::Error| {
        assert_eq!(e.status(), Status::LibraryNotLoaded, "{what}: {e}");
        assert_eq!(e.status().name(), "VYRE_CUDA_LIBRARY_NOT_LOADED");
        assert!(
            e.message().contains(MISSING),
            "{what}: the path is named: {e}"
        );
        assert!(
            e.fix().is_some_and(|f| f.contains("VYRE_CUDA_LIBRARY")),
            "{what}: {e}"
        );
        assert!(
            e.to_string().contains("VYRE_CUDA_LIBRARY_NOT_LOADED"),
            "{e}"
        );
    };
    let e = Context::new(0).unwrap_err();
    assert_eq!(e.call(), "vyre_context_create");
    check("Context::new", e);
    check("device_count", vyre_cuda::device_count().unwrap_err());
    check("device_info", vyre_cuda::device_info(0).unwrap_err());
    check(
        "device_can_access_peer",
        vyre_cuda::device_can_access_peer(0, 1).unwrap_err(),
    );
    check("library_path", vyre_cuda::library_path().unwrap_err());
    check(
        "set_log_callback",
        vyre_cuda::set_log_callback(|_, _| {}, vyre_cuda::LogLevel::Error).unwrap_err(),
    );
    let nodes = EgraphNodes::new([(0, 1, &[][..]), (1, 2, &[])]);
    check(
        "EgraphImage::cpu",
        EgraphImage::cpu(&nodes.columns(), 1).unwrap_err(),
    );
    // The rest answers without the library.
    assert!(vyre_cuda::last_error().is_none());
    assert_eq!(vyre_cuda::last_error_log(), "");
    assert_eq!(vyre_cuda::status_name(0), "VYRE_STATUS_UNKNOWN");
    assert_eq!(
        Status::from_raw(vyre_cuda::LIBRARY_NOT_LOADED),
        Some(Status::LibraryNotLoaded)
    );
    println!("CHILD-DONE {TEST}");
}
