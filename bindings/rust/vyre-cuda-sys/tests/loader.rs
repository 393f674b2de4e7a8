//! The run-time loader: VYRE_CUDA_LIBRARY naming a missing file or another
//! library is answered by load() with a message ending in a Fix, and a
//! function called anyway panics with that message. The library is loaded
//! once per process, so each case runs in a child process (this test binary
//! again, with the variable set).

use std::process::Command;

use vyre_cuda_sys as sys;

const CHILD: &str = "VYRE_CUDA_SYS_TEST_CHILD";

/// True in the child; in the parent, runs the child with VYRE_CUDA_LIBRARY
/// set to `library` and checks it passed.
fn in_child(test: &str, library: &str) -> bool {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .env("VYRE_CUDA_LIBRARY", library)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(
        text.contains(&format!("CHILD-DONE {test}")),
        "the child ran nothing:\n{text}"
    );
    false
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn a_missing_library_is_reported_with_a_fix() {
    const MISSING: &str = "/nonexistent/libvyre_cuda.so.0";
    if !in_child("a_missing_library_is_reported_with_a_fix", MISSING) {
        return;
    }
    let why = sys::load().expect_err("nothing to load");
    assert!(
        why.contains(&format!("VYRE_CUDA_LIBRARY={MISSING}")),
        "{why}"
    );
    assert!(why.contains("Fix: "), "{why}");
    // Kept for the process: the same answer again.
    assert_eq!(sys::load().unwrap_err(), why);
    let panicked = std::panic::catch_unwind(|| unsafe { sys::vyre_version() })
        .expect_err("a function without the library panics");
    assert_eq!(panic_text(panicked), why);
    println!("CHILD-DONE a_missing_library_is_reported_with_a_fix");
}

#[test]
fn another_library_is_refused() {
    // libm: there on every glibc system, and exports no vyre_* function.
    if !in_child("another_library_is_refused", "libm.so.6") {
        return;
    }
    let why = sys::load().expect_err("libm is not libvyre_cuda");
    assert!(why.contains("does not export vyre_version"), "{why}");
    assert!(why.contains("Fix: "), "{why}");
    println!("CHILD-DONE another_library_is_refused");
}
