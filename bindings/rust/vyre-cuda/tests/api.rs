//! The whole API against a driver: the fake one in CI
//! (VYRE_CUDA_DRIVER_LIBRARY=.../libfake_cuda.so, VYRE_CUDA_TEST_FAKE_DRIVER=1,
//! which runs the test kernels on the host), or a GPU
//! (VYRE_CUDA_REQUIRE_GPU=1). Without either, the tests that need a driver
//! print "skipped" and pass. Results are checked element by element against
//! the CPU.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use vyre_cuda::{
    sys, Arg, Binding, Buffer, Code, Context, ContextOptions, Dispatch, DownloadRange,
    GraphNodeKind, KernelNodeUpdate, LogLevel, Param, Program, Repeat, Replay, Status, Step,
    UploadRange,
};

// ---------------------------------------------------------------------------
// Library and errors (no driver needed)
// ---------------------------------------------------------------------------

#[test]
fn version_and_status_names() {
    let (major, _, _) = vyre_cuda::version();
    assert_eq!(major, vyre_cuda::VERSION_MAJOR);
    for raw in 1..=21u32 {
        let status = Status::from_raw(raw).unwrap();
        assert_eq!(status.as_raw(), raw);
        assert!(
            !matches!(status, Status::Other(_)),
            "status {raw} is not named in the bindings"
        );
        assert!(
            status.name().starts_with("VYRE_STATUS_") && status.name() != "VYRE_STATUS_UNKNOWN"
        );
    }
    assert_eq!(Status::from_raw(0), None);
    assert_eq!(Status::DeviceFault.name(), "VYRE_STATUS_DEVICE_FAULT");
    assert_eq!(Status::from_raw(12345), Some(Status::Other(12345)));
    assert_eq!(vyre_cuda::status_name(12345), "VYRE_STATUS_UNKNOWN");
}

#[test]
fn forged_handles_are_errors_not_crashes() {
    // Raw handles through the sys crate: the library reports them.
    let forged = sys::vyre_buffer {
        bits: 0x1234_5678_9abc,
    };
    let e = vyre_cuda::check_raw(unsafe { sys::vyre_buffer_free(forged) }, "vyre_buffer_free")
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidHandle, "{e}");
    assert!(e.fix().is_some(), "{e}");
    // last_error reads the same, without clearing it.
    let again = vyre_cuda::last_error().expect("the last error");
    assert_eq!(again.status(), Status::InvalidHandle);
    assert_eq!(again.message(), e.message());
    assert_eq!(e.log(), "", "no compile log");
    let e = vyre_cuda::check_raw(
        unsafe { sys::vyre_pending_wait(sys::vyre_pending { bits: 0 }, 0) },
        "w",
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidHandle);
}

// ---------------------------------------------------------------------------
// Devices, contexts, telemetry
// ---------------------------------------------------------------------------

#[test]
fn device_info_and_context() {
    with_context!(ctx);
    assert!(vyre_cuda::device_count().unwrap() >= 1);
    let info = vyre_cuda::device_info(0).unwrap();
    assert!(!info.name.is_empty());
    assert!(info.max_threads_per_block > 0 && info.warp_size > 0 && info.total_memory_bytes > 0);
    assert_eq!(ctx.device_info().unwrap(), info);
    assert_error(vyre_cuda::device_info(1000), Status::NoDevice);
    ctx.selftest().unwrap();
    ctx.trim().unwrap();
    let options = ContextOptions {
        transient_pool_limit_bytes: 1 << 20,
        pinned_pool_limit_bytes: 1 << 20,
        staging_chunk_bytes: 64 << 10,
        staging_chunk_count: 2,
        staging_threads: 2,
        ..Default::default()
    };
    let small = Context::with_options(&options).unwrap();
    // A large pageable dispatch goes through the staging ring of small chunks.
    let n = 300_000;
    let mut rng = Rng::new(1);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut out = vec![0u32; n];
    let add = add_program(&small);
    add.dispatch(
        Dispatch::new()
            .arg(Arg::input(&a))
            .arg(Arg::input(&b))
            .arg(Arg::output(&mut out))
            .params(&[n as u32]),
    )
    .unwrap();
    check_sum(&a, &b, &out, "staged through small chunks");
    let bad = ContextOptions {
        staging_chunk_bytes: 1000,
        ..Default::default()
    };
    assert_error(Context::with_options(&bad), Status::InvalidArgument);
    assert_error(Context::new(1000), Status::NoDevice);
    assert_no_misuse();
}

#[test]
fn telemetry_counts_the_work() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let before = ctx.telemetry().unwrap();
    assert_eq!(before.live_programs, 1);
    let n = 1000;
    let mut rng = Rng::new(2);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut out = vec![0u32; n];
    for _ in 0..3 {
        add.dispatch(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[n as u32]),
        )
        .unwrap();
    }
    let buffer = ctx.alloc(4096).unwrap();
    let t = ctx.telemetry().unwrap();
    assert_eq!(t.dispatches - before.dispatches, 3);
    assert_eq!(t.kernel_launches - before.kernel_launches, 3);
    assert!(t.h2d_bytes - before.h2d_bytes >= 3 * 2 * 4 * n as u64);
    assert!(t.d2h_bytes - before.d2h_bytes >= 3 * 4 * n as u64);
    assert_eq!(t.live_buffers, 1);
    assert!(t.device_bytes_live >= 4096);
    assert!(t.module_loads >= 1);
    drop(buffer);
    assert_eq!(ctx.telemetry().unwrap().live_buffers, 0);
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Buffers and dispatch
// ---------------------------------------------------------------------------

#[test]
fn vector_add_host_memory() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let mut rng = Rng::new(3);
    for n in [1usize, 255, 256, 257, 10_000] {
        let (a, b) = (rng.u32s(n), rng.u32s(n));
        let mut out = vec![0u32; n];
        let timing = add
            .dispatch(
                Dispatch::new()
                    .arg(Arg::input(&a))
                    .arg(Arg::input(&b))
                    .arg(Arg::output(&mut out))
                    .params(&[n as u32]),
            )
            .unwrap();
        check_sum(&a, &b, &out, &format!("host n={n}"));
        assert!(timing.wall_ns > 0);
    }
    // INPUT_OUTPUT in place and into a separate destination.
    let inc = inc_program(&ctx);
    let n = 1000;
    let mut data: Vec<u32> = (0..n as u32).collect();
    inc.dispatch(
        Dispatch::new()
            .arg(Arg::inout(&mut data))
            .params(&[n as u32]),
    )
    .unwrap();
    assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1));
    let src = data.clone();
    let mut dst = vec![0u32; n];
    inc.dispatch(
        Dispatch::new()
            .arg(Arg::in_out(&src, &mut dst))
            .params(&[n as u32]),
    )
    .unwrap();
    assert!(dst.iter().enumerate().all(|(i, &v)| v == i as u32 + 2));
    assert_eq!(src, data, "the source of in_out is not written");
    assert_no_misuse();
}

#[test]
fn vector_add_resident_buffers_and_ranges() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 4096;
    let mut rng = Rng::new(4);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let da = ctx.upload(&a).unwrap();
    let db = ctx.upload(&b).unwrap();
    let dout = ctx.alloc(4 * n as u64).unwrap();
    assert_eq!(da.len_bytes(), 4 * n as u64);
    let info = da.info().unwrap();
    assert_eq!(info.bytes, 4 * n as u64);
    assert_ne!(info.device_pointer, 0);
    add.dispatch(
        Dispatch::new()
            .arg(&da)
            .arg(&db)
            .arg(&dout)
            .params(&[n as u32]),
    )
    .unwrap();
    check_sum(&a, &b, &dout.to_vec::<u32>().unwrap(), "resident");

    // Sub-ranges: the second half of each buffer.
    let half = (n / 2) as u64 * 4;
    let fresh = ctx.alloc(4 * n as u64).unwrap();
    fresh.upload(0, &vec![0u32; n]).unwrap();
    add.dispatch(
        Dispatch::new()
            .arg(da.range(half, 0))
            .arg(db.range(half, half))
            .arg(fresh.range(half, 0))
            .params(&[(n / 2) as u32]),
    )
    .unwrap();
    let mut second = vec![0u32; n / 2];
    fresh.download(half, &mut second).unwrap();
    check_sum(&a[n / 2..], &b[n / 2..], &second, "resident ranges");
    let mut first = vec![1u32; n / 2];
    fresh.download(0, &mut first).unwrap();
    assert!(
        first.iter().all(|&v| v == 0),
        "the first half was left alone"
    );

    // Many ranges at once.
    let buf = ctx.alloc(64).unwrap();
    let (x, y) = ([1u32, 2, 3, 4], [9u8; 8]);
    buf.upload_ranges(&[UploadRange::new(0, &x), UploadRange::new(32, &y)])
        .unwrap();
    let (mut gx, mut gy) = ([0u32; 4], [0u8; 8]);
    buf.download_ranges(&mut [
        DownloadRange::new(0, &mut gx),
        DownloadRange::new(32, &mut gy),
    ])
    .unwrap();
    assert_eq!((gx, gy), (x, y));
    assert_error(
        buf.download_ranges(&mut [DownloadRange::new(60, &mut gx)]),
        Status::OutOfRange,
    );
    assert_error(buf.upload(60, &x), Status::OutOfRange);
    assert_error(ctx.alloc(0), Status::InvalidArgument);
    buf.free().unwrap();
    assert_no_misuse();
}

#[test]
fn async_dispatch_pending_and_timing() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 2048;
    let mut rng = Rng::new(5);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut out = vec![0u32; n];
    let mut pending = add
        .dispatch_async(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[n as u32])
                .device_timing(true),
        )
        .unwrap();
    assert_error(pending.timing(), Status::InvalidState);
    let _ = pending.poll().unwrap();
    assert!(pending
        .wait_timeout(std::time::Duration::from_secs(30))
        .unwrap());
    assert_error(pending.wait(), Status::InvalidState);
    let timing = pending.timing().unwrap();
    assert!(timing.wall_ns > 0);
    assert!(pending.poll().unwrap());
    pending.release().unwrap();
    check_sum(&a, &b, &out, "async host");

    // finish(): wait + timing + release.
    let mut out2 = vec![0u32; n];
    add.dispatch_async(
        Dispatch::new()
            .arg(Arg::input(&a))
            .arg(Arg::input(&b))
            .arg(Arg::output(&mut out2))
            .params(&[n as u32]),
    )
    .unwrap()
    .finish()
    .unwrap();
    check_sum(&a, &b, &out2, "finish");

    // Dropped unwaited: released, host outputs never written.
    let mut untouched = vec![7u32; n];
    drop(
        add.dispatch_async(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut untouched))
                .params(&[n as u32]),
        )
        .unwrap(),
    );
    assert!(
        untouched.iter().all(|&v| v == 7),
        "a released pending wrote its outputs"
    );
    assert_eq!(ctx.telemetry().unwrap().live_pendings, 0);

    // Resident async into a given buffer, reused descriptor.
    let (da, db, dout) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b).unwrap(),
        ctx.alloc(4 * n as u64).unwrap(),
    );
    let mut d = Dispatch::new()
        .arg(&da)
        .arg(&db)
        .arg(&dout)
        .params(&[n as u32]);
    for _ in 0..3 {
        add.dispatch_with(&mut d).unwrap();
    }
    add.dispatch_async(d).unwrap().wait().unwrap();
    check_sum(&a, &b, &dout.to_vec::<u32>().unwrap(), "async resident");
    assert_no_misuse();
}

#[test]
fn values_moved_between_threads_keep_working() {
    with_context!(ctx);
    let n = 5000;
    let mut rng = Rng::new(6);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    // Made here, used there, handed back.
    let (ctx2, add, da, db, dout) = {
        let (a, b) = (a.clone(), b.clone());
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let add = add_program(&ctx);
            let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
            let dout = ctx.alloc(4 * n as u64).unwrap();
            (ctx, add, da, db, dout)
        })
        .join()
        .unwrap()
    };
    let (add, dout) = std::thread::spawn(move || {
        add.dispatch(
            Dispatch::new()
                .arg(&da)
                .arg(&db)
                .arg(&dout)
                .params(&[n as u32]),
        )
        .unwrap();
        (add, dout)
    })
    .join()
    .unwrap();
    check_sum(
        &a,
        &b,
        &dout.to_vec::<u32>().unwrap(),
        "moved between threads",
    );
    drop(ctx2);

    // One program shared by 8 threads, each with its own data; a pending
    // waited on another thread than the one that enqueued it.
    let add = Arc::new(add);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let add = Arc::clone(&add);
            s.spawn(move || {
                let mut rng = Rng::new(100 + t);
                for round in 0..5 {
                    let m = 100 + rng.below(3000) as usize;
                    let (a, b) = (rng.u32s(m), rng.u32s(m));
                    let mut out = vec![0u32; m];
                    add.dispatch(
                        Dispatch::new()
                            .arg(Arg::input(&a))
                            .arg(Arg::input(&b))
                            .arg(Arg::output(&mut out))
                            .params(&[m as u32]),
                    )
                    .unwrap();
                    check_sum(&a, &b, &out, &format!("thread {t} round {round}"));
                }
            });
        }
    });
    let mut out = vec![0u32; n];
    let pending = add
        .dispatch_async(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[n as u32]),
        )
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(move || pending.finish().unwrap());
    });
    check_sum(&a, &b, &out, "waited on another thread");
    assert_no_misuse();
}

#[test]
fn objects_keep_their_context_alive() {
    with_context!(ctx);
    let owned = Context::new(0).unwrap();
    let add = add_program(&owned);
    let buffer = owned.upload(&[1u32, 2, 3]).unwrap();
    drop(owned); // the program and buffer still hold it
    let mut out = [0u32; 3];
    add.dispatch(
        Dispatch::new()
            .arg(&buffer)
            .arg(&buffer)
            .arg(Arg::output(&mut out))
            .params(&[3]),
    )
    .unwrap();
    assert_eq!(out, [2, 4, 6]);
    assert_eq!(add.context().telemetry().unwrap().live_buffers, 1);
    // Explicit destroy/free consume the value: a use afterwards does not compile.
    add.destroy().unwrap();
    buffer.free().unwrap();
    drop(ctx);
    assert_no_misuse();
}

#[test]
fn bad_input_is_an_error_with_a_fix() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let (a, b) = (vec![1u32; 10], vec![2u32; 10]);
    let mut out = vec![0u32; 10];
    // Too few bindings.
    assert_error(
        add.dispatch(Dispatch::new().arg(Arg::input(&a)).params(&[10])),
        Status::InvalidArgument,
    );
    // An output bound as an input.
    assert_error(
        add.dispatch(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::input(&out))
                .params(&[10]),
        ),
        Status::InvalidArgument,
    );
    // A length that is not a whole number of elements.
    let odd = vec![0u8; 7];
    assert_error(
        add.dispatch(
            Dispatch::new()
                .arg(Arg::input(&odd))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[10]),
        ),
        Status::InvalidArgument,
    );
    // in_out with different lengths: caught in Rust.
    let inc = inc_program(&ctx);
    let mut short = vec![0u32; 3];
    let e = assert_error(
        inc.dispatch(Dispatch::new().arg(Arg::in_out(&a, &mut short))),
        Status::InvalidArgument,
    );
    assert_eq!(e.cu_result(), 0);
    // Programs.
    assert_error(
        Program::builder(Code::Ptx(ADD_PTX), "no_such_kernel")
            .bindings(add_bindings())
            .build(&ctx),
        Status::EntryNotFound,
    );
    assert_error(
        Program::builder(Code::Ptx(ADD_PTX), "bad\0entry")
            .bindings(add_bindings())
            .build(&ctx),
        Status::InvalidArgument,
    );
    assert_error(
        Program::builder(Code::Ptx(""), "e").build(&ctx),
        Status::InvalidArgument,
    );
    assert_error(
        Program::builder(Code::Ptx(ADD_PTX), "vyre_test_add_u32")
            .bindings(add_bindings())
            .workgroup_size(0)
            .build(&ctx),
        Status::InvalidArgument,
    );
    assert_error(
        Program::builder(Code::Binary(b"not an image"), "vyre_test_add_u32")
            .bindings(add_bindings())
            .build(&ctx),
        Status::InvalidArgument,
    );
    assert_error(
        Program::builder(Code::Ptx(ADD_PTX), "vyre_test_add_u32")
            .binding(Binding::new(vyre_cuda::Role::Input, 0))
            .build(&ctx),
        Status::InvalidArgument,
    );
    // A buffer of another context.
    let other = Context::new(0).unwrap();
    let foreign = other.alloc(40).unwrap();
    assert_error(
        add.dispatch(
            Dispatch::new()
                .arg(&foreign)
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[10]),
        ),
        Status::InvalidArgument,
    );
    // Resident range beyond the buffer.
    let small = ctx.alloc(16).unwrap();
    assert_error(
        add.dispatch(
            Dispatch::new()
                .arg(small.range(8, 16))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[10]),
        ),
        Status::OutOfRange,
    );
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Pinned and registered host memory
// ---------------------------------------------------------------------------

#[test]
fn pinned_buffers_and_registrations() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 10_000;
    let mut rng = Rng::new(7);
    let (a, b) = (rng.u32s(n), rng.u32s(n));

    let mut pa = ctx.alloc_pinned(4 * n).unwrap();
    assert_eq!(pa.len(), 4 * n);
    assert_eq!(pa.as_ptr() as usize % 4096, 0);
    assert!(pa.iter().all(|&x| x == 0), "zeroed");
    pa.as_mut_slice_of::<u32>().unwrap().copy_from_slice(&a);
    let mut pout = ctx.alloc_pinned(4 * n).unwrap();
    assert!(ctx.telemetry().unwrap().pinned_bytes_live >= 8 * n as u64);
    {
        let pa = pa.as_slice_of::<u32>().unwrap();
        let out = pout.as_mut_slice_of::<u32>().unwrap();
        add.dispatch_async(
            Dispatch::new()
                .arg(Arg::input(pa))
                .arg(Arg::input(&b))
                .arg(Arg::output(out))
                .params(&[n as u32]),
        )
        .unwrap()
        .finish()
        .unwrap();
    }
    check_sum(&a, &b, pout.as_slice_of::<u32>().unwrap(), "pinned");
    // Uploads and downloads in place.
    let buffer = ctx.alloc(4 * n as u64).unwrap();
    buffer.upload(0, pa.as_slice_of::<u32>().unwrap()).unwrap();
    buffer
        .download(0, pout.as_mut_slice_of::<u32>().unwrap())
        .unwrap();
    assert_eq!(pout.as_slice_of::<u32>().unwrap(), &a[..]);
    assert_error(pout.as_slice_of::<[u8; 3]>(), Status::InvalidArgument);
    pout.free().unwrap();

    // A registered Vec: page-locked while the guard lives.
    let mut host_b = b.clone();
    let mut host_out = vec![0u32; n];
    {
        let rb = ctx.register(&mut host_b).unwrap();
        let mut rout = ctx.register(&mut host_out).unwrap();
        if fake() {
            assert!(fake_stats().registered_ranges_live >= 2);
        }
        // Overlapping registrations are refused.
        add.dispatch_async(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&rb[..]))
                .arg(Arg::output(&mut rout[..]))
                .params(&[n as u32]),
        )
        .unwrap()
        .finish()
        .unwrap();
        check_sum(&a, &b, &rout, "registered");
        rout.unregister().unwrap();
    }
    check_sum(&a, &b, &host_out, "registered, after unregistering");
    let mut empty: Vec<u32> = Vec::new();
    assert_error(ctx.register(&mut empty), Status::InvalidArgument);
    assert_error(ctx.alloc_pinned(0), Status::InvalidArgument);
    assert_no_misuse();
}

#[test]
fn leaked_pendings_cannot_reach_pinned_memory() {
    with_context!(ctx);
    let add = add_program(&ctx);
    // Over 256 KiB, so page-locked outputs are written by DMA in place (not
    // staged and copied on the wait).
    let n = 1 << 18;
    let mut rng = Rng::new(8);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut pout = ctx.alloc_pinned(4 * n).unwrap();
    let pending = add
        .dispatch_async(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(pout.as_mut_slice_of::<u32>().unwrap()))
                .params(&[n as u32]),
        )
        .unwrap();
    std::mem::forget(pending); // the borrow ends; the DMA may not have
                               // Touching the memory first releases the leaked dispatch (its work done).
    let out = pout.as_slice_of::<u32>().unwrap();
    check_sum(&a, &b, out, "pinned output of a leaked pending");
    assert_eq!(ctx.telemetry().unwrap().live_pendings, 0);

    let mut host = vec![0u32; n];
    {
        let mut reg = ctx.register(&mut host).unwrap();
        std::mem::forget(
            add.dispatch_async(
                Dispatch::new()
                    .arg(Arg::input(&a))
                    .arg(Arg::input(&b))
                    .arg(Arg::output(&mut reg[..]))
                    .params(&[n as u32]),
            )
            .unwrap(),
        );
        // Unregistering first releases the leaked dispatch, so it succeeds.
        reg.unregister().unwrap();
    }
    check_sum(&a, &b, &host, "registered output of a leaked pending");
    // A small (staged) output of a leaked pending is never written.
    let mut small = ctx.alloc_pinned(4096).unwrap();
    std::mem::forget(
        add.dispatch_async(
            Dispatch::new()
                .arg(Arg::input(&a[..1024]))
                .arg(Arg::input(&b[..1024]))
                .arg(Arg::output(small.as_mut_slice_of::<u32>().unwrap()))
                .params(&[1024]),
        )
        .unwrap(),
    );
    let small_out = small.as_slice_of::<u32>().unwrap();
    assert!(
        small_out.iter().all(|&v| v == 0)
            || small_out
                .iter()
                .enumerate()
                .all(|(i, &v)| v == a[i].wrapping_add(b[i]))
    );
    assert_eq!(ctx.telemetry().unwrap().live_pendings, 0);
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Programs: explicit parameter lists, shared memory, binaries, CUDA source
// ---------------------------------------------------------------------------

#[test]
fn explicit_parameter_list_saxpy() {
    with_context!(ctx);
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
        .build(&ctx)
        .unwrap();
    let n = 3000usize;
    // Integer-valued floats: a*x + y is exact with or without FMA.
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let y0 = y.clone();
    let a = 3.0f32;
    saxpy
        .dispatch(
            Dispatch::new()
                .arg(Arg::input(&x))
                .arg(Arg::inout(&mut y))
                .scalar_f32(a)
                .scalar_u64(n as u64),
        )
        .unwrap();
    for i in 0..n {
        assert_eq!(y[i], a * x[i] + y0[i], "y[{i}]");
    }
    // Only the first half: n is a scalar, not the binding size.
    let mut y2 = y0.clone();
    saxpy
        .dispatch(
            Dispatch::new()
                .arg(Arg::input(&x))
                .arg(Arg::inout(&mut y2))
                .scalars(&[a.to_bits() as u64, n as u64 / 2]),
        )
        .unwrap();
    for i in 0..n {
        let expected = if i < n / 2 { a * x[i] + y0[i] } else { y0[i] };
        assert_eq!(y2[i], expected, "half: y[{i}]");
    }
    assert_error(
        saxpy.dispatch(
            Dispatch::new()
                .arg(Arg::input(&x))
                .arg(Arg::inout(&mut y2))
                .scalar_f32(a),
        ),
        Status::InvalidArgument,
    );
    assert_no_misuse();
}

#[test]
fn parameter_kinds_reach_the_kernel() {
    if !fake() {
        return; // the fake driver records the probe's arguments
    }
    // The probe's counters are global: no other test may launch meanwhile.
    let _gate = exclusive();
    let Some(ctx) = context() else { return };
    let probe = Program::builder(Code::Ptx(PROBE_PTX), "vyre_test_probe_params")
        .binding(Binding::input::<u32>())
        .params([
            Param::Scalar64(0),
            Param::NullPointer,
            Param::Scalar32(1),
            Param::ParamWords,
        ])
        .workgroup_size(32)
        .build(&ctx)
        .unwrap();
    let data = [5u32; 32];
    probe
        .dispatch(
            Dispatch::new()
                .arg(Arg::input(&data))
                .scalars(&[0x1122_3344_5566_7788, 0xFFFF_FFFF_AABB_CCDD])
                .params(&[777]),
        )
        .unwrap();
    let s = fake_stats();
    assert_eq!(
        (s.probe_a, s.probe_b, s.probe_c, s.probe_d0),
        (0x1122_3344_5566_7788, 0, 0xAABB_CCDD, 777)
    );
    let probe2 = Program::builder(Code::Ptx(PROBE_PTX), "vyre_test_probe_params")
        .binding(Binding::input::<u32>())
        .params([
            Param::Scalar64(0),
            Param::NullPointer,
            Param::Scalar32(0),
            Param::Binding(0),
        ])
        .build(&ctx)
        .unwrap();
    probe2
        .dispatch(Dispatch::new().arg(Arg::input(&data)).scalar_u64(42))
        .unwrap();
    let s = fake_stats();
    assert_eq!((s.probe_a, s.probe_c, s.probe_d0), (42, 42, 5));
    assert_no_misuse();
}

#[test]
fn dynamic_shared_memory() {
    // The fake's "last launch" is global: no other test may launch meanwhile.
    let _gate = exclusive();
    let Some(ctx) = context() else { return };
    // The default convention skips SHARED bindings: inc(data, params).
    let inc = Program::builder(Code::Ptx(INC_PTX), "vyre_test_inc_u32")
        .bindings([Binding::input_output::<u32>(), Binding::shared::<u32>(64)])
        .shared_memory_bytes(128)
        .workgroup_size(64)
        .build(&ctx)
        .unwrap();
    let n = 500;
    let mut data: Vec<u32> = (0..n).collect();
    inc.dispatch(
        Dispatch::new()
            .arg(Arg::inout(&mut data))
            .arg(Arg::shared())
            .params(&[n])
            .shared_memory_bytes(256),
    )
    .unwrap();
    assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1));
    if fake() {
        assert_eq!(fake_stats().last_shared_bytes, 64 * 4 + 128 + 256);
    }
    assert_no_misuse();
}

#[test]
fn cooperative_launch() {
    with_context!(ctx);
    let info = ctx.device_info().unwrap();
    let inc = inc_program(&ctx);
    let n = 256u32;
    let mut data: Vec<u32> = (0..n).collect();
    let run = inc.dispatch(
        Dispatch::new()
            .arg(Arg::inout(&mut data))
            .params(&[n])
            .cooperative(true),
    );
    if !info.cooperative_launch {
        assert_error(run, Status::LimitExceeded);
        return;
    }
    run.unwrap();
    assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1));
    // A grid that cannot be co-resident is refused before launch.
    let mut big = vec![0u32; 1 << 20];
    let too_many = inc.dispatch(
        Dispatch::new()
            .arg(Arg::inout(&mut big))
            .params(&[1 << 20])
            .grid([1 << 16, 1, 1])
            .block([32, 1, 1])
            .cooperative(true),
    );
    assert_error(too_many, Status::LimitExceeded);
    // Graphs launch with cuLaunchKernel: a cooperative dispatch is not recordable.
    assert_error(
        inc.record(
            &Dispatch::new()
                .arg(Arg::inout(&mut data))
                .params(&[n])
                .cooperative(true),
        ),
        Status::InvalidArgument,
    );
    assert_no_misuse();
}

fn test_kernel_image(name: &str) -> Option<Vec<u8>> {
    let dir = std::env::var_os("VYRE_CUDA_TEST_KERNELS_DIR")?;
    Some(
        std::fs::read(std::path::Path::new(&dir).join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}")),
    )
}

#[test]
fn cubin_and_fatbin_programs() {
    with_context!(ctx);
    for name in ["test_kernels.cubin", "test_kernels.fatbin"] {
        let Some(image) = test_kernel_image(name) else {
            eprintln!("skipped: set VYRE_CUDA_TEST_KERNELS_DIR to build/<preset>/tests/support for {name}");
            return;
        };
        let add = Program::builder(Code::Binary(&image), "vyre_test_add_u32")
            .bindings(add_bindings())
            .build(&ctx)
            .unwrap();
        let n = 777;
        let mut rng = Rng::new(9);
        let (a, b) = (rng.u32s(n), rng.u32s(n));
        let mut out = vec![0u32; n];
        add.dispatch(
            Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out))
                .params(&[n as u32]),
        )
        .unwrap();
        check_sum(&a, &b, &out, name);
        // A cut image is refused before the driver sees it.
        assert_error(
            Program::builder(Code::Binary(&image[..image.len() / 2]), "vyre_test_add_u32")
                .bindings(add_bindings())
                .build(&ctx),
            Status::InvalidArgument,
        );
    }
    assert_no_misuse();
}

const ADD_SOURCE: &str = r#"
extern "C" __global__ void vyre_test_add_u32(const unsigned* a, const unsigned* b,
                                             unsigned* out, const unsigned* params) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[0]) out[i] = a[i] + b[i];
}
"#;

#[test]
fn cuda_source_through_nvrtc() {
    with_context!(ctx);
    let built = Program::builder(Code::CudaSource(ADD_SOURCE), "vyre_test_add_u32")
        .bindings(add_bindings())
        .compile_option("-std=c++17")
        .build(&ctx);
    let add = match built {
        Err(e) if e.status() == Status::NvrtcUnavailable => {
            assert!(e.fix().is_some(), "{e}");
            eprintln!("NVRTC unavailable here: {e}");
            return;
        }
        other => other.unwrap(),
    };
    let n = 1500;
    let mut rng = Rng::new(10);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut out = vec![0u32; n];
    add.dispatch(
        Dispatch::new()
            .arg(Arg::input(&a))
            .arg(Arg::input(&b))
            .arg(Arg::output(&mut out))
            .params(&[n as u32]),
    )
    .unwrap();
    check_sum(&a, &b, &out, "NVRTC");
    let e = assert_error(
        Program::builder(
            Code::CudaSource("extern \"C\" __global__ void k() { undeclared_identifier_xyz; }"),
            "k",
        )
        .build(&ctx),
        Status::CompileFailed,
    );
    assert!(
        e.log().contains("undeclared_identifier_xyz"),
        "the NVRTC log is missing: {e}"
    );
    assert!(e.message().contains("undeclared_identifier_xyz"));
    assert_no_misuse();
}

/// CUDA C++ given as PTX (the default code kind): the driver's JIT refuses
/// it, and the library's Fix names the code kind to use, in this binding's
/// spelling (module_cache.cc, LoadFix).
#[test]
fn cuda_source_as_ptx_names_code_cuda_source() {
    with_context!(ctx);
    let e = Program::builder(Code::Ptx(ADD_SOURCE), "vyre_test_add_u32")
        .bindings(add_bindings())
        .build(&ctx)
        .expect_err("CUDA C++ is not PTX");
    eprintln!("{e}");
    assert_eq!(e.status(), Status::CompileFailed, "{e}");
    let fix = e.fix().unwrap_or_else(|| panic!("no Fix: {e}"));
    assert!(
        fix.contains("Code::CudaSource"),
        "the Fix names Code::CudaSource: {e}"
    );
    // The spelling the Fix uses is this binding's API: it builds the program
    // (or reports NVRTC missing, with its own Fix).
    match Program::builder(Code::CudaSource(ADD_SOURCE), "vyre_test_add_u32")
        .bindings(add_bindings())
        .build(&ctx)
    {
        Ok(_) => {}
        Err(e) => assert_eq!(e.status(), Status::NvrtcUnavailable, "{e}"),
    }
    assert_no_misuse();
}

#[test]
fn a_huge_jit_log_rides_on_the_error() {
    if !fake() {
        return; // the fake's JIT fails on a marker with a log of that size
    }
    with_context!(ctx);
    let pattern = "fake ptxas: error: \u{e9}t\u{e9} \u{2713} a line of a long JIT log\n".as_bytes();
    let n = 150_000;
    let expected: Vec<u8> = pattern.iter().cycle().take(n).copied().collect();
    let expected = String::from_utf8_lossy(&expected).into_owned();
    for entry in ["vyre_test_add_u32".to_string(), "e".repeat(10_000)] {
        let code = format!(".version 7.0\n// fake-jit-log-bytes: {n}\n");
        let e = assert_error(
            Program::builder(Code::Ptx(&code), &entry)
                .bindings(add_bindings())
                .build(&ctx),
            Status::CompileFailed,
        );
        let first = e.message().lines().next().unwrap();
        assert!(first.len() <= 1023, "{} bytes", first.len());
        assert!(first.contains(". Fix: ") && first.ends_with('.'), "{first}");
        assert!(e.message().len() <= 8191);
        assert!(e.message().contains("[log truncated: "));
        assert_eq!(e.log(), expected);
        assert_eq!(
            vyre_cuda::last_error_log(),
            expected,
            "read again, not cleared"
        );
        assert_ne!(e.cu_result(), 0, "the driver's CUresult");
    }
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Graphs and sequences
// ---------------------------------------------------------------------------

#[test]
fn host_graph_record_and_replay() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 3000;
    let mut rng = Rng::new(11);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut sample_out = vec![0u32; n];
    let graph = add
        .record(
            &Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut sample_out))
                .params(&[n as u32]),
        )
        .unwrap();
    assert!(sample_out.iter().all(|&v| v == 0), "recording ran nothing");
    let info = graph.info().unwrap();
    assert!(!info.from_sequence);
    assert_eq!(info.kernel_node_count, 1);
    assert_eq!(info.host_input_bytes, 8 * n as u64);
    assert_eq!(info.host_output_bytes, 4 * n as u64);
    let kinds = graph.node_kinds().unwrap();
    assert_eq!(kinds.len() as u64, info.node_count);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == GraphNodeKind::Kernel)
            .count(),
        1
    );
    assert!(kinds.contains(&GraphNodeKind::Memcpy));

    for round in 0..3 {
        let (a2, b2) = (rng.u32s(n), rng.u32s(n));
        let mut out = vec![0u32; n];
        graph
            .replay(
                Replay::new()
                    .arg(Arg::input(&a2))
                    .arg(Arg::input(&b2))
                    .arg(Arg::output(&mut out)),
            )
            .unwrap();
        check_sum(&a2, &b2, &out, &format!("graph replay {round}"));
    }
    // The same inputs again: the graph without input copies runs.
    let skipped = ctx.telemetry().unwrap().graph_uploads_skipped;
    let (a3, b3) = (rng.u32s(n), rng.u32s(n));
    for _ in 0..2 {
        let mut out = vec![0u32; n];
        graph
            .replay(
                Replay::new()
                    .arg(Arg::input(&a3))
                    .arg(Arg::input(&b3))
                    .arg(Arg::output(&mut out)),
            )
            .unwrap();
        check_sum(&a3, &b3, &out, "unchanged inputs");
    }
    assert_eq!(ctx.telemetry().unwrap().graph_uploads_skipped, skipped + 1);
    assert_eq!(graph.info().unwrap().replays, 5);

    // Asynchronous replay; a second one while it is unwaited is refused.
    let mut out = vec![0u32; n];
    let mut out2 = vec![0u32; n];
    let mut pending = graph
        .replay_async(
            Replay::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out)),
        )
        .unwrap();
    assert_error(
        graph.replay(
            Replay::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out2)),
        ),
        Status::InvalidState,
    );
    pending.wait().unwrap();
    assert!(pending.timing().unwrap().wall_ns > 0);
    drop(pending);
    check_sum(&a, &b, &out, "async replay");

    // Shape mismatch and missing bindings.
    let short = vec![1u32; n - 1];
    assert_error(
        graph.replay(
            Replay::new()
                .arg(Arg::input(&short))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut out)),
        ),
        Status::ShapeMismatch,
    );
    assert_error(graph.launch(), Status::InvalidArgument);
    graph.destroy().unwrap();
    assert_no_misuse();
}

#[test]
fn resident_graph_rebind_element_count_and_node_update() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 1024;
    let mut rng = Rng::new(12);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db, dout) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b).unwrap(),
        ctx.alloc(4 * n as u64).unwrap(),
    );
    let graph = add
        .record(
            &Dispatch::new()
                .arg(&da)
                .arg(&db)
                .arg(&dout)
                .params(&[n as u32]),
        )
        .unwrap();
    graph.launch().unwrap();
    check_sum(&a, &b, &dout.to_vec::<u32>().unwrap(), "resident graph");
    let info = graph.info().unwrap();
    assert_eq!(info.element_count, n as u64);
    assert_eq!(info.capacity_elements, n as u64);

    // Rebind to other buffers.
    let (a2, b2) = (rng.u32s(n), rng.u32s(n));
    let (ea, eb, eout) = (
        ctx.upload(&a2).unwrap(),
        ctx.upload(&b2).unwrap(),
        ctx.alloc(4 * n as u64).unwrap(),
    );
    graph
        .replay(Replay::new().arg(&ea).arg(&eb).arg(&eout))
        .unwrap();
    check_sum(&a2, &b2, &eout.to_vec::<u32>().unwrap(), "rebound graph");

    // Fewer elements: a smaller grid and parameter words.
    let m = 300;
    let fresh = ctx.alloc(4 * n as u64).unwrap();
    fresh.upload(0, &vec![0u32; n]).unwrap();
    graph
        .replay(
            Replay::new()
                .arg(&ea)
                .arg(&eb)
                .arg(&fresh)
                .element_count(m as u64)
                .params(&[m as u32]),
        )
        .unwrap();
    let got = fresh.to_vec::<u32>().unwrap();
    check_sum(&a2[..m], &b2[..m], &got[..m], "element_count");
    assert!(got[m..].iter().all(|&v| v == 0));
    assert_error(
        graph.replay(Replay::new().element_count(2 * n as u64 + 1)),
        Status::LimitExceeded,
    );

    // A kernel node's grid: 2 blocks of 256 cover 512 elements.
    let kernel = graph
        .node_kinds()
        .unwrap()
        .iter()
        .position(|k| *k == GraphNodeKind::Kernel)
        .unwrap() as u64;
    graph
        .replay(Replay::new().element_count(n as u64).params(&[n as u32]))
        .unwrap();
    graph
        .update_kernel_node(
            kernel,
            &KernelNodeUpdate {
                grid: Some([2, 1, 1]),
                scalars: None,
            },
        )
        .unwrap();
    let (a3, b3) = (rng.u32s(n), rng.u32s(n));
    ea.upload(0, &a3).unwrap();
    eb.upload(0, &b3).unwrap();
    graph.launch().unwrap();
    let got = fresh.to_vec::<u32>().unwrap(); // the output bound last
    check_sum(&a3[..512], &b3[..512], &got[..512], "updated grid");
    assert!(
        got[512..].iter().all(|&v| v == 0),
        "the output is zeroed, the rest not computed"
    );
    assert_error(
        graph.update_kernel_node(kernel, &KernelNodeUpdate::default()),
        Status::InvalidArgument,
    );
    assert_error(
        graph.update_kernel_node(
            1000,
            &KernelNodeUpdate {
                grid: Some([1, 1, 1]),
                scalars: None,
            },
        ),
        Status::OutOfRange,
    );

    // A freed buffer still bound is refused until rebound.
    drop(ea);
    assert_error(graph.launch(), Status::StaleHandle);
    graph
        .replay(Replay::new().arg(&da).arg(&db).arg(&dout))
        .unwrap();
    assert_no_misuse();
}

#[test]
fn graph_launch_on_a_stream_and_node_info() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 1000;
    let mut rng = Rng::new(23);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let (da, db, dout) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b).unwrap(),
        ctx.alloc(4 * n as u64).unwrap(),
    );
    let graph = add
        .record(&Dispatch::new().arg(&da).arg(&db).arg(&dout).params(&[n as u32]))
        .unwrap();
    for stream in [1u64, 2] {
        dout.upload(0, &vec![0xA5A5_A5A5u32; n]).unwrap();
        let mut pending = graph.launch_on_stream(Replay::new(), stream).unwrap();
        pending.wait().unwrap();
        check_sum(&a, &b, &dout.to_vec::<u32>().unwrap(), "graph launched on a stream");
    }
    let e = assert_error(graph.launch_on_stream(Replay::new(), 0), Status::InvalidArgument);
    assert!(e.message().contains("cu_stream is 0"), "{e}");
    let kernel = graph
        .node_kinds()
        .unwrap()
        .iter()
        .position(|k| *k == GraphNodeKind::Kernel)
        .unwrap() as u64;
    let info = graph.node_info(kernel).unwrap();
    assert_eq!(info.kind, vyre_cuda::sys::VYRE_GRAPH_NODE_KERNEL);
    assert_ne!(info.cu_function, 0);
    assert_ne!(info.cu_graph_node, 0);
    assert_eq!(info.argument_count, 4);
    assert!(u64::from(info.grid[0]) * u64::from(info.block[0]) >= n as u64);
    assert_error(graph.node_info(1000), Status::OutOfRange);
}

#[test]
fn host_graph_launched_on_a_stream_writes_outputs_at_the_wait() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 1000;
    let mut rng = Rng::new(29);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let mut sample_out = vec![0u32; n];
    let graph = add
        .record(
            &Dispatch::new()
                .arg(Arg::input(&a))
                .arg(Arg::input(&b))
                .arg(Arg::output(&mut sample_out))
                .params(&[n as u32]),
        )
        .unwrap();
    let (a2, b2) = (rng.u32s(n), rng.u32s(n));
    let mut out = vec![0xA5A5_A5A5u32; n];
    let mut pending = graph
        .launch_on_stream(
            Replay::new()
                .arg(Arg::input(&a2))
                .arg(Arg::input(&b2))
                .arg(Arg::output(&mut out)),
            1,
        )
        .unwrap();
    pending.wait().unwrap();
    drop(pending);
    check_sum(&a2, &b2, &out, "host graph launched on stream 1");
    let e = assert_error(
        graph.launch_on_stream(
            Replay::new()
                .arg(Arg::input(&a2))
                .arg(Arg::input(&b2))
                .arg(Arg::output(&mut out)),
            0,
        ),
        Status::InvalidArgument,
    );
    assert!(e.message().contains("cu_stream is 0"), "{e}");
    assert_no_misuse();
}

#[test]
fn sequence_run_matches_its_graph() {
    with_context!(ctx);
    let add = add_program(&ctx);
    let n = 2000;
    let mut rng = Rng::new(13);
    let (a, b) = (rng.u32s(n), rng.u32s(n));
    let bytes = 4 * n as u64;
    let (da, db, dout) = (
        ctx.alloc(bytes).unwrap(),
        ctx.alloc(bytes).unwrap(),
        ctx.alloc(bytes).unwrap(),
    );
    let filled = ctx.alloc(64).unwrap();
    // a + 4b: four times (dout = da + db; da = dout).
    let expected: Vec<u32> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x.wrapping_add(y.wrapping_mul(4)))
        .collect();
    let mut results = Vec::new();
    for use_graph in [false, true] {
        let mut out = vec![0u32; n];
        let mut fill_out = [0u8; 64];
        {
            let steps = vec![
                Step::upload(&da, 0, &a),
                Step::upload(&db, 0, &b),
                Step::dispatch(
                    &add,
                    Dispatch::new()
                        .arg(&da)
                        .arg(&db)
                        .arg(&dout)
                        .params(&[n as u32]),
                ),
                Step::copy(&da, 0, &dout, 0, bytes),
                Step::fill(&filled, 0, 64, 0xAB),
                Step::download(&dout, 0, &mut out),
                Step::download(&filled, 0, &mut fill_out),
            ];
            let mut seq = ctx
                .sequence(
                    steps,
                    Some(Repeat {
                        first: 2,
                        count: 2,
                        times: 4,
                    }),
                )
                .unwrap();
            if use_graph {
                let graph = seq.record().unwrap();
                assert!(graph.info().unwrap().from_sequence);
                graph.launch().unwrap();
            } else {
                seq.run().unwrap();
            }
        }
        assert_eq!(out, expected, "sequence (graph: {use_graph})");
        assert!(fill_out.iter().all(|&x| x == 0xAB));
        results.push(out);
    }
    assert_eq!(results[0], results[1]);
    assert!(ctx.telemetry().unwrap().sequence_runs >= 1);

    // Errors.
    let host = vec![0u32; n];
    assert_error(
        ctx.sequence(
            vec![Step::dispatch(
                &add,
                Dispatch::new().arg(Arg::input(&host)).arg(&db).arg(&dout),
            )],
            None,
        ),
        Status::InvalidArgument,
    );
    assert_error(
        ctx.sequence(
            vec![Step::fill(&filled, 0, 64, 1)],
            Some(Repeat {
                first: 0,
                count: 5,
                times: 2,
            }),
        ),
        Status::OutOfRange,
    );
    assert_error(
        ctx.sequence(vec![Step::fill(&filled, 60, 8, 1)], None),
        Status::OutOfRange,
    );
    // A sequence borrows its buffers: freeing one while the sequence lives
    // does not compile, so a run can never meet a freed buffer.
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Log callback
// ---------------------------------------------------------------------------

#[test]
fn log_callback_receives_lines() {
    with_context!(ctx);
    let lines = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&lines);
    vyre_cuda::set_log_callback(
        move |level, message| {
            assert!(level <= LogLevel::Trace);
            assert!(!message.is_empty());
            seen.fetch_add(1, Ordering::Relaxed);
        },
        LogLevel::Trace,
    )
    .unwrap();
    let add = add_program(&ctx);
    let data = vec![1u32; 100];
    let mut out = vec![0u32; 100];
    add.dispatch(
        Dispatch::new()
            .arg(Arg::input(&data))
            .arg(Arg::input(&data))
            .arg(Arg::output(&mut out))
            .params(&[100]),
    )
    .unwrap();
    vyre_cuda::clear_log_callback().unwrap();
    assert!(
        lines.load(Ordering::Relaxed) > 0,
        "no trace line was delivered"
    );
    // A panicking callback does not unwind into the library.
    vyre_cuda::set_log_callback(|_, _| panic!("a callback that panics"), LogLevel::Trace).unwrap();
    add.dispatch(
        Dispatch::new()
            .arg(Arg::input(&data))
            .arg(Arg::input(&data))
            .arg(Arg::output(&mut out))
            .params(&[100]),
    )
    .unwrap();
    vyre_cuda::clear_log_callback().unwrap();
    assert!(out.iter().all(|&v| v == 2));
    assert_no_misuse();
}

// ---------------------------------------------------------------------------
// Driver objects are all released (fake driver)
// ---------------------------------------------------------------------------

#[test]
fn no_driver_objects_outlive_their_context() {
    if !fake() {
        return;
    }
    let _gate = exclusive();
    let before = fake_stats();
    {
        let ctx = Context::new(0).unwrap();
        let add = add_program(&ctx);
        let n = 1000;
        let mut rng = Rng::new(14);
        let (a, b) = (rng.u32s(n), rng.u32s(n));
        let (da, db, dout) = (
            ctx.upload(&a).unwrap(),
            ctx.upload(&b).unwrap(),
            ctx.alloc(4 * n as u64).unwrap(),
        );
        let mut out = vec![0u32; n];
        let graph = add
            .record(
                &Dispatch::new()
                    .arg(Arg::input(&a))
                    .arg(Arg::input(&b))
                    .arg(Arg::output(&mut out))
                    .params(&[n as u32]),
            )
            .unwrap();
        graph
            .replay(
                Replay::new()
                    .arg(Arg::input(&a))
                    .arg(Arg::input(&b))
                    .arg(Arg::output(&mut out)),
            )
            .unwrap();
        let pinned = ctx.alloc_pinned(4096).unwrap();
        let pending = add
            .dispatch_async(
                Dispatch::new()
                    .arg(&da)
                    .arg(&db)
                    .arg(&dout)
                    .params(&[n as u32]),
            )
            .unwrap();
        let mut seq = ctx
            .sequence(vec![Step::copy(&da, 0, &db, 0, 64)], None)
            .unwrap();
        seq.run().unwrap();
        check_sum(&a, &b, &out, "before release");
        // Everything dropped here, in any order: the context goes last.
        drop(ctx);
        drop((pending, pinned, graph, seq));
    }
    let after = fake_stats();
    assert_eq!(
        after.device_allocations_live,
        before.device_allocations_live
    );
    assert_eq!(
        after.pinned_allocations_live,
        before.pinned_allocations_live
    );
    assert_eq!(after.modules_live, before.modules_live);
    assert_eq!(after.streams_live, before.streams_live);
    assert_eq!(after.events_live, before.events_live);
    assert_eq!(after.graphs_live, before.graphs_live);
    assert_eq!(after.graph_execs_live, before.graph_execs_live);
    assert_eq!(
        after.primary_context_retains,
        before.primary_context_retains
    );
    assert_eq!(after.registered_ranges_live, before.registered_ranges_live);
    assert_no_misuse();
}

/// A Buffer is Send + Sync, and so is everything else.
#[test]
fn everything_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Context>();
    check::<Buffer>();
    check::<Program>();
    check::<vyre_cuda::Pending<'static>>();
    check::<vyre_cuda::Graph<'static>>();
    check::<vyre_cuda::Sequence<'static>>();
    check::<vyre_cuda::PinnedBuffer>();
    check::<vyre_cuda::Registration<'static, u32>>();
    check::<vyre_cuda::EgraphImage>();
    check::<Dispatch<'static>>();
    check::<Replay<'static>>();
    check::<vyre_cuda::Error>();
}
