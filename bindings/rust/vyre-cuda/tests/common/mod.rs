//! Shared by the integration tests: the test kernels' PTX, a context on
//! whatever driver is configured, the fake driver's controls, and helpers.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use vyre_cuda::{Binding, Code, Context, Program, Status};

#[path = "../../examples/common/kernels.rs"]
mod kernels;
pub use kernels::*;

pub fn add_bindings() -> Vec<Binding> {
    vec![
        Binding::input::<u32>().name("a"),
        Binding::input::<u32>().name("b"),
        Binding::output::<u32>().name("out"),
    ]
}

pub fn add_program(ctx: &Context) -> Program {
    Program::builder(Code::Ptx(ADD_PTX), "vyre_test_add_u32")
        .bindings(add_bindings())
        .workgroup_size(256)
        .build(ctx)
        .expect("the add program")
}

pub fn inc_program(ctx: &Context) -> Program {
    Program::builder(Code::Ptx(INC_PTX), "vyre_test_inc_u32")
        .binding(Binding::input_output::<u32>().name("data"))
        .workgroup_size(128)
        .build(ctx)
        .expect("the inc program")
}

/// The fake driver is configured (VYRE_CUDA_TEST_FAKE_DRIVER=1).
pub fn fake() -> bool {
    std::env::var("VYRE_CUDA_TEST_FAKE_DRIVER").as_deref() == Ok("1")
}

/// A driver must be there (fake, or VYRE_CUDA_REQUIRE_GPU=1).
pub fn require_gpu() -> bool {
    fake() || std::env::var("VYRE_CUDA_REQUIRE_GPU").as_deref() == Ok("1")
}

/// A context on device 0, or None (printed) when this machine has no usable
/// driver and none is required.
pub fn context() -> Option<Context> {
    match Context::new(0) {
        Ok(ctx) => Some(ctx),
        Err(e)
            if matches!(
                e.status(),
                Status::NoDriver | Status::NoDevice | Status::DriverTooOld
            ) && !require_gpu() =>
        {
            eprintln!("skipped: no usable CUDA driver ({e}); set VYRE_CUDA_DRIVER_LIBRARY to the fake driver and VYRE_CUDA_TEST_FAKE_DRIVER=1 to run it");
            None
        }
        Err(e) => panic!("Context::new: {e}"),
    }
}

/// Runs the body with a context, or returns (skipped).
#[macro_export]
macro_rules! with_context {
    ($ctx:ident) => {
        let _gate = $crate::common::shared();
        let Some($ctx) = $crate::common::context() else {
            return;
        };
    };
}

// Tests that compare the fake driver's global counters take the gate
// exclusively; the others share it.
static GATE: RwLock<()> = RwLock::new(());

pub fn shared() -> RwLockReadGuard<'static, ()> {
    GATE.read().unwrap_or_else(|e| e.into_inner())
}

pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    GATE.write().unwrap_or_else(|e| e.into_inner())
}

/// xorshift64*: deterministic test data without crates.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Non-zero u32s: an all-zero result cannot pass by accident.
    pub fn u32s(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| (self.next_u64() >> 32) as u32 | 1).collect()
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Checks out[i] == a[i] + b[i] (wrapping) element by element.
pub fn check_sum(a: &[u32], b: &[u32], out: &[u32], label: &str) {
    assert_eq!(out.len(), a.len(), "{label}: output length");
    let bad: Vec<usize> = (0..a.len())
        .filter(|&i| out[i] != a[i].wrapping_add(b[i]))
        .collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{label}: {} of {} elements wrong; first out[{i}] = {}, expected {}",
            bad.len(),
            a.len(),
            out[i],
            a[i].wrapping_add(b[i])
        );
    }
}

/// An error of `status` whose message's first line carries a Fix.
pub fn assert_error<T: std::fmt::Debug>(
    result: vyre_cuda::Result<T>,
    status: Status,
) -> vyre_cuda::Error {
    let e = result.expect_err("expected an error");
    assert_eq!(e.status(), status, "{e}");
    let first = e.message().lines().next().unwrap_or("");
    assert!(first.contains("Fix:"), "no Fix in the first line: {e}");
    assert!(e.fix().is_some(), "{e}");
    assert!(e.to_string().contains(e.status().name()), "{e}");
    e
}

// ---------------------------------------------------------------------------
// The fake driver's controls (tests/support/fake_cuda_control.h)
// ---------------------------------------------------------------------------

/// fake_cuda_stats; fields are only ever appended there.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FakeStats {
    pub device_allocations_live: u64,
    pub device_bytes_live: u64,
    pub pinned_allocations_live: u64,
    pub pinned_bytes_live: u64,
    pub modules_live: u64,
    pub streams_live: u64,
    pub events_live: u64,
    pub primary_context_retains: i64,
    pub module_loads: u64,
    pub kernel_launches: u64,
    pub cooperative_launches: u64,
    pub memcpy_htod: u64,
    pub memcpy_dtoh: u64,
    pub memsets: u64,
    pub misuse_errors: u64,
    pub hold_timeouts: u64,
    pub last_grid: [u32; 3],
    pub last_block: [u32; 3],
    pub last_shared_bytes: u32,
    pub last_kernel: [c_char; 128],
    pub probe_a: u64,
    pub probe_b: u64,
    pub probe_c: u32,
    pub probe_d0: u32,
    pub probe_launches: u64,
    pub graphs_live: u64,
    pub graph_execs_live: u64,
    pub graph_launches: u64,
    pub graph_nodes_run: u64,
    pub captures_begun: u64,
    pub memcpy_dtod: u64,
    pub faults: u64,
    pub primary_context_resets: u64,
    pub objects_reclaimed_by_reset: u64,
    pub registered_ranges_live: u64,
    pub registered_bytes_live: u64,
    pub deferred_copies: u64,
    pub deferred_kernels: u64,
    pub stream_waits: u64,
    pub last_wait_stream: u64,
    pub last_wait_event_stream: u64,
    pub pointer_queries: u64,
    pub memcpy_peer: u64,
    pub peer_enables: u64,
}

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

struct Fake {
    get_stats: unsafe extern "C" fn(*mut c_void),
    inject_fault: unsafe extern "C" fn(c_int),
}

/// The fake driver the library loaded (dlopen of the same path returns the
/// same instance).
fn fake_driver() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        let path = std::env::var("VYRE_CUDA_DRIVER_LIBRARY").expect("VYRE_CUDA_DRIVER_LIBRARY");
        let path = CString::new(path).unwrap();
        // SAFETY: dlopen/dlsym with valid strings; the symbols have the
        // signatures of fake_cuda_control.h.
        unsafe {
            let handle = dlopen(path.as_ptr(), RTLD_NOW);
            assert!(!handle.is_null(), "cannot dlopen the fake driver");
            let sym = |name: &str| {
                let name = CString::new(name).unwrap();
                let p = dlsym(handle, name.as_ptr());
                assert!(!p.is_null(), "the fake driver lacks {name:?}");
                p
            };
            Fake {
                get_stats: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(
                    sym("fake_cuda_get_stats"),
                ),
                inject_fault: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int)>(sym(
                    "fake_cuda_inject_fault",
                )),
            }
        }
    })
}

pub fn fake_stats() -> FakeStats {
    // A roomy buffer: if the fake's struct grows, it cannot write past ours.
    let mut raw = vec![0u64; 1024];
    // SAFETY: 8 KiB of writable, aligned memory.
    unsafe { (fake_driver().get_stats)(raw.as_mut_ptr().cast()) };
    // SAFETY: FakeStats is a prefix of what was written; all fields are Pod.
    unsafe { std::ptr::read(raw.as_ptr().cast::<FakeStats>()) }
}

pub fn inject_fault(cu_result: i32) {
    // SAFETY: the fake's control function.
    unsafe { (fake_driver().inject_fault)(cu_result) };
}

/// With the fake driver: the library never misused the driver API.
pub fn assert_no_misuse() {
    if fake() {
        let misuse = fake_stats().misuse_errors;
        assert_eq!(
            misuse, 0,
            "the library misused the (fake) driver API {misuse} times; its stderr shows each call"
        );
    }
}

/// The environment variable that marks a test's re-run in a child process.
const CHILD: &str = "VYRE_CUDA_RUST_TEST_CHILD";

/// Runs test `test` again in a child process of this test binary with
/// `var=value` set (the library and the driver are loaded once per process,
/// so a process that must lack one is a new one), and checks that the child
/// passed and printed `CHILD-DONE <test>`. True in the child, where the test
/// goes on; false in the parent, whose work is then done.
pub fn in_child(test: &str, var: &str, value: &str) -> bool {
    in_child_with(test, &[(var, value)])
}

/// As [`in_child`], with several variables set.
pub fn in_child_with(test: &str, vars: &[(&str, &str)]) -> bool {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .envs(vars.iter().copied())
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
