//! Interop with other CUDA code in the process: `Buffer::wrap` over memory
//! the test allocates with the driver itself (as CuPy or PyTorch would), and
//! `Context::wait_stream` / `Context::signal_stream` against a stream the
//! test creates. The "other CUDA code" is the driver the library loaded
//! (`VYRE_CUDA_DRIVER_LIBRARY`, else libcuda.so.1), called through
//! cuGetProcAddress_v2 at CUDA 12.0's ABI.

#[macro_use]
mod common;

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::OnceLock;

use common::*;
use vyre_cuda::{Buffer, Dispatch, Status};

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuStream = *mut c_void;
type CuDeviceptr = u64;

/// The raw driver entry points the tests use.
struct Raw {
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    release: unsafe extern "C" fn(CuDevice) -> CuResult,
    set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDeviceptr, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDeviceptr) -> CuResult,
    memset_d32_async: unsafe extern "C" fn(CuDeviceptr, c_uint, usize, CuStream) -> CuResult,
    memcpy_htod_async:
        unsafe extern "C" fn(CuDeviceptr, *const c_void, usize, CuStream) -> CuResult,
    memcpy_dtoh_async: unsafe extern "C" fn(*mut c_void, CuDeviceptr, usize, CuStream) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut CuStream, c_uint) -> CuResult,
    stream_destroy: unsafe extern "C" fn(CuStream) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(CuStream) -> CuResult,
}

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

type GetProcAddress =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CuResult;

fn raw() -> &'static Raw {
    static RAW: OnceLock<Raw> = OnceLock::new();
    RAW.get_or_init(|| {
        let path = std::env::var("VYRE_CUDA_DRIVER_LIBRARY")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "libcuda.so.1".to_string());
        let cpath = CString::new(path.clone()).unwrap();
        // SAFETY: dlopen/dlsym with valid strings; each entry point is cast to
        // its cuda.h signature (at the CUDA 12.0 ABI).
        unsafe {
            let handle = dlopen(cpath.as_ptr(), 2);
            assert!(!handle.is_null(), "cannot dlopen {path}");
            let get_proc = dlsym(handle, c"cuGetProcAddress_v2".as_ptr());
            assert!(!get_proc.is_null(), "{path} has no cuGetProcAddress_v2");
            let get_proc: GetProcAddress = std::mem::transmute(get_proc);
            let sym = |name: &str| -> *mut c_void {
                let cname = CString::new(name).unwrap();
                let mut p = std::ptr::null_mut();
                let mut status = 0;
                let r = get_proc(cname.as_ptr(), &mut p, 12000, 0, &mut status);
                assert!(r == 0 && !p.is_null(), "{path} lacks {name}");
                p
            };
            Raw {
                device_get: std::mem::transmute(sym("cuDeviceGet")),
                retain: std::mem::transmute(sym("cuDevicePrimaryCtxRetain")),
                release: std::mem::transmute(sym("cuDevicePrimaryCtxRelease")),
                set_current: std::mem::transmute(sym("cuCtxSetCurrent")),
                mem_alloc: std::mem::transmute(sym("cuMemAlloc")),
                mem_free: std::mem::transmute(sym("cuMemFree")),
                memset_d32_async: std::mem::transmute(sym("cuMemsetD32Async")),
                memcpy_htod_async: std::mem::transmute(sym("cuMemcpyHtoDAsync")),
                memcpy_dtoh_async: std::mem::transmute(sym("cuMemcpyDtoHAsync")),
                stream_create: std::mem::transmute(sym("cuStreamCreate")),
                stream_destroy: std::mem::transmute(sym("cuStreamDestroy")),
                stream_synchronize: std::mem::transmute(sym("cuStreamSynchronize")),
            }
        }
    })
}

/// Device 0's primary context, retained and current on this thread for the
/// guard's life (the library restores it after each of its calls).
struct RawContext {
    device: CuDevice,
}

impl RawContext {
    fn new() -> RawContext {
        let r = raw();
        let mut device = 0;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!((r.device_get)(&mut device, 0), 0);
            assert_eq!((r.retain)(&mut ctx, device), 0);
            assert_eq!((r.set_current)(ctx), 0);
        }
        RawContext { device }
    }
    fn alloc(&self, bytes: usize) -> CuDeviceptr {
        let mut p = 0;
        // SAFETY: a valid out-pointer; the context is current.
        assert_eq!(unsafe { (raw().mem_alloc)(&mut p, bytes) }, 0);
        p
    }
    fn free(&self, p: CuDeviceptr) {
        // SAFETY: memory from alloc, freed once.
        assert_eq!(unsafe { (raw().mem_free)(p) }, 0, "cuMemFree (the library freed it?)");
    }
    fn write(&self, dst: CuDeviceptr, src: &[u32]) {
        // SAFETY: src is readable for its length; dst holds as many bytes.
        unsafe {
            assert_eq!((raw().memcpy_htod_async)(dst, src.as_ptr().cast(), src.len() * 4, std::ptr::null_mut()), 0);
            assert_eq!((raw().stream_synchronize)(std::ptr::null_mut()), 0);
        }
    }
    fn read(&self, src: CuDeviceptr, n: usize, stream: CuStream) -> Vec<u32> {
        let mut out = vec![0xDEAD_BEEFu32; n];
        // SAFETY: out is writable for n words; src holds as many bytes.
        unsafe {
            assert_eq!((raw().memcpy_dtoh_async)(out.as_mut_ptr().cast(), src, n * 4, stream), 0);
            assert_eq!((raw().stream_synchronize)(stream), 0);
        }
        out
    }
    fn stream(&self) -> CuStream {
        let mut s = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; CU_STREAM_NON_BLOCKING.
        assert_eq!(unsafe { (raw().stream_create)(&mut s, 1) }, 0);
        s
    }
    fn destroy_stream(&self, s: CuStream) {
        // SAFETY: a stream from stream().
        assert_eq!(unsafe { (raw().stream_destroy)(s) }, 0);
    }
}

impl Drop for RawContext {
    fn drop(&mut self) {
        // SAFETY: undoes new().
        unsafe {
            (raw().set_current)(std::ptr::null_mut());
            (raw().release)(self.device);
        }
    }
}

#[test]
fn wrapped_memory_is_a_resident_binding_and_never_freed() {
    with_context!(ctx);
    let rc = RawContext::new();
    let n = 3000;
    let mut rng = Rng::new(71);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (pa, pb, pout) = (rc.alloc(n * 4), rc.alloc(n * 4), rc.alloc(n * 4));
    rc.write(pa, &a);
    rc.write(pb, &b);
    rc.write(pout, &vec![0xDEAD_BEEF; n]);
    // SAFETY: the allocations outlive the buffers (freed at the end).
    let (wa, wb, wo) = unsafe {
        (
            Buffer::wrap(&ctx, pa, n as u64 * 4).unwrap(),
            Buffer::wrap(&ctx, pb, n as u64 * 4).unwrap(),
            Buffer::wrap(&ctx, pout, n as u64 * 4).unwrap(),
        )
    };
    let info = wo.info().unwrap();
    assert!(info.borrowed);
    assert_eq!((info.bytes, info.device_pointer), (n as u64 * 4, pout));
    assert!(!ctx.alloc(16).unwrap().info().unwrap().borrowed);
    let add = add_program(&ctx);
    add.dispatch(Dispatch::new().arg(&wa).arg(&wb).arg(&wo).params(&[n as u32]))
        .unwrap();
    check_sum(&a, &b, &wo.to_vec::<u32>().unwrap(), "through the library");
    check_sum(&a, &b, &rc.read(pout, n, std::ptr::null_mut()), "through the driver");

    let a2 = rng.u32s(n);
    wa.upload(0, &a2).unwrap();
    assert_eq!(rc.read(pa, n, std::ptr::null_mut()), a2);
    drop((wa, wb, wo, add));
    ctx.trim().unwrap();
    assert_eq!(rc.read(pa, n, std::ptr::null_mut()), a2, "the memory outlives the handles");
    drop(ctx);
    for p in [pa, pb, pout] {
        rc.free(p);
    }
    assert_no_misuse();
}

#[test]
fn bad_wraps_are_errors_with_a_fix() {
    with_context!(ctx);
    let rc = RawContext::new();
    let p = rc.alloc(4096);
    let host = vec![1u32; 1024];
    // SAFETY: every call is refused before the memory could be used.
    unsafe {
        let e = assert_error(Buffer::wrap(&ctx, p, 4097), Status::InvalidArgument);
        assert!(e.message().contains("holds 4096 bytes"), "{e}");
        assert!(e.message().contains("4097 bytes were asked"), "{e}");
        assert_error(Buffer::wrap(&ctx, p, 0), Status::InvalidArgument);
        assert_error(Buffer::wrap(&ctx, 0, 16), Status::InvalidArgument);
        let e = assert_error(
            Buffer::wrap(&ctx, host.as_ptr() as u64, 4096),
            Status::InvalidArgument,
        );
        assert!(e.message().starts_with("vyre_buffer_wrap: "), "{e}");
    }
    let e = assert_error(ctx.wait_stream(0), Status::InvalidArgument);
    assert!(e.message().contains("pass 1 for the legacy default stream"), "{e}");
    assert_error(ctx.signal_stream(0), Status::InvalidArgument);
    drop(ctx);
    rc.free(p);
    assert_no_misuse();
}

#[test]
fn wait_and_signal_order_work_on_a_borrowed_buffer() {
    with_context!(ctx);
    let rc = RawContext::new();
    let stream = rc.stream();
    let n = 1000;
    let p = rc.alloc(n * 4);
    // SAFETY: freed after the buffer is dropped and its work waited for.
    let w = unsafe { Buffer::wrap(&ctx, p, n as u64 * 4).unwrap() };
    let inc = inc_program(&ctx);
    let mut rng = Rng::new(72);
    for _ in 0..3 {
        let value = rng.u32s(1)[0] >> 1;
        // SAFETY: p holds n words; the stream is live.
        assert_eq!(unsafe { (raw().memset_d32_async)(p, value, n, stream) }, 0);
        ctx.wait_stream(stream as u64).unwrap();
        let mut pending = inc
            .dispatch_async(Dispatch::new().arg(&w).params(&[n as u32]).fixpoint_iterations(2))
            .unwrap();
        ctx.signal_stream(stream as u64).unwrap();
        let out = rc.read(p, n, stream);
        assert!(out.iter().all(|&v| v == value + 2), "{:?}", &out[..4]);
        pending.wait().unwrap();
    }
    for s in [vyre_cuda::CU_STREAM_LEGACY, vyre_cuda::CU_STREAM_PER_THREAD] {
        ctx.wait_stream(s).unwrap();
        ctx.signal_stream(s).unwrap();
    }
    if fake() {
        let before = fake_stats();
        ctx.wait_stream(stream as u64).unwrap();
        let after = fake_stats();
        assert_eq!(after.stream_waits, before.stream_waits + 1);
        assert_eq!(after.last_wait_event_stream, stream as u64);
        ctx.signal_stream(stream as u64).unwrap();
        assert_eq!(fake_stats().last_wait_stream, stream as u64);
    }
    drop((w, inc));
    drop(ctx);
    rc.destroy_stream(stream);
    rc.free(p);
    assert_no_misuse();
}
