//! Copies between buffers (Buffer::copy_to, BufferCopy, vyre_buffer_copy and
//! vyre_buffer_copy_async) and peer queries (device_can_access_peer,
//! DeviceInfo::peer_access_mask): within one context, between two contexts
//! of one device, and across two devices (peer and staged; on the fake
//! driver in a child process with FAKE_CUDA_DEVICES=2). Random non-zero data
//! into a poisoned destination, every byte checked; refusals checked for
//! their status, their Fix, and an untouched destination.

#[macro_use]
mod common;

use common::*;
use vyre_cuda::{sys, Buffer, BufferCopy, Context, Status};

const POISON: u8 = 0xA5;

/// `n` random bytes, none 0 and none POISON.
fn data(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| loop {
            let b = (rng.next_u64() >> 56) as u8;
            if b != 0 && b != POISON {
                break b;
            }
        })
        .collect()
}

/// A buffer of `n` POISON bytes on `ctx`.
fn poisoned(ctx: &Context, n: usize) -> Buffer {
    ctx.upload(&vec![POISON; n]).unwrap()
}

/// Checks every byte of `dst`: `src[src_offset..][..bytes]` at `dst_offset`,
/// POISON everywhere else.
fn check_copy(
    dst: &Buffer,
    src: &[u8],
    src_offset: usize,
    dst_offset: usize,
    bytes: usize,
    label: &str,
) {
    let got: Vec<u8> = dst.to_vec().unwrap();
    let mut want = vec![POISON; got.len()];
    want[dst_offset..dst_offset + bytes].copy_from_slice(&src[src_offset..src_offset + bytes]);
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{label}: {} of {} bytes wrong; first at {i}: {:#04x}, expected {:#04x}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        );
    }
}

/// Sizes that are no multiple of a word, offsets that are no multiple of one,
/// and a copy longer than one 8 MiB staging piece.
const CASES: [(usize, usize, usize, usize); 6] = [
    // (src bytes, src_offset, dst_offset, bytes)
    (1, 0, 0, 1),
    (4099, 3, 17, 4096),
    (4099, 0, 0, 4099),
    (65536, 65535, 1, 1),
    (100_003, 12_345, 7, 80_000),
    ((9 << 20) + 5, 5, 3, 9 << 20),
];

/// Copies every case from a buffer of `from` to one of `to`, synchronously
/// and asynchronously.
fn copy_cases(from: &Context, to: &Context, staged: bool, seed: u64, label: &str) {
    let mut rng = Rng::new(seed);
    for (i, &(n, src_offset, dst_offset, bytes)) in CASES.iter().enumerate() {
        for asynchronous in [false, true] {
            let label = format!("{label} case {i} (async {asynchronous}, staged {staged})");
            let host = data(&mut rng, n);
            let src = from.upload(&host).unwrap();
            let dst_len = dst_offset + bytes + 64;
            let dst = poisoned(to, dst_len);
            let copy = BufferCopy::new(&src, &dst, bytes as u64)
                .src_offset(src_offset as u64)
                .dst_offset(dst_offset as u64)
                .staged(staged);
            assert_eq!(
                copy.raw().flags,
                if staged {
                    sys::VYRE_BUFFER_COPY_FLAG_STAGED
                } else {
                    0
                }
            );
            if asynchronous {
                let pending = copy.run_async().unwrap();
                // The source may go before the copy completes.
                drop(src);
                let timing = pending.finish().unwrap();
                assert_eq!(timing.device_ns, 0, "{label}");
            } else {
                copy.run().unwrap();
                assert_eq!(
                    src.to_vec::<u8>().unwrap(),
                    host,
                    "{label}: the source is unchanged"
                );
            }
            check_copy(&dst, &host, src_offset, dst_offset, bytes, &label);
        }
    }
}

#[test]
fn copies_within_one_context() {
    with_context!(ctx);
    copy_cases(&ctx, &ctx, false, 1, "one context");
    // Disjoint ranges of one buffer, with the short form.
    let mut rng = Rng::new(2);
    let host = data(&mut rng, 10_000);
    let buffer = ctx.upload(&host).unwrap();
    buffer.copy_to(&buffer, 0, 5_000, 5_000).unwrap();
    let got: Vec<u8> = buffer.to_vec().unwrap();
    assert!(
        got[..5_000] == host[..5_000],
        "the source half is unchanged"
    );
    assert!(
        got[5_000..] == host[..5_000],
        "the destination half is the source half"
    );
    assert_no_misuse();
}

#[test]
fn copies_between_two_contexts_of_one_device() {
    with_context!(ctx);
    let other = Context::new(ctx.device_info().unwrap().ordinal).unwrap();
    copy_cases(&ctx, &other, false, 3, "two contexts");
    copy_cases(&other, &ctx, true, 4, "two contexts, back");
    // The source's context may go before an asynchronous copy completes; the
    // Pending keeps the destination's.
    let mut rng = Rng::new(5);
    let host = data(&mut rng, 1 << 16);
    let dst = poisoned(&ctx, host.len());
    let pending = {
        let third = Context::new(ctx.device_info().unwrap().ordinal).unwrap();
        let src = third.upload(&host).unwrap();
        src.copy_to_async(&dst, 0, 0, host.len() as u64).unwrap()
    };
    let mut pending = pending;
    pending.wait().unwrap();
    assert_error(pending.wait(), Status::InvalidState);
    pending.release().unwrap();
    check_copy(&dst, &host, 0, 0, host.len(), "from a dropped context");
    assert_no_misuse();
}

#[test]
fn zero_bytes_copy_nothing_but_check_the_offsets() {
    with_context!(ctx);
    let mut rng = Rng::new(6);
    let host = data(&mut rng, 256);
    let src = ctx.upload(&host).unwrap();
    let dst = poisoned(&ctx, 128);
    src.copy_to(&dst, 256, 128, 0).unwrap();
    src.copy_to(&src, 10, 10, 0).unwrap();
    src.copy_to_async(&dst, 0, 0, 0).unwrap().finish().unwrap();
    let e = assert_error(src.copy_to(&dst, 257, 0, 0), Status::OutOfRange);
    assert!(e.message().contains("src"), "{e}");
    let e = assert_error(src.copy_to(&dst, 0, 129, 0), Status::OutOfRange);
    assert!(e.message().contains("dst"), "{e}");
    check_copy(&dst, &host, 0, 0, 0, "after copies of 0 bytes");
}

#[test]
fn refused_copies_say_why_and_how_to_fix_and_change_nothing() {
    with_context!(ctx);
    let mut rng = Rng::new(7);
    let host = data(&mut rng, 256);
    let src = ctx.upload(&host).unwrap();
    let dst = poisoned(&ctx, 128);
    for asynchronous in [false, true] {
        let copy = |src_offset: u64, dst_offset: u64, bytes: u64, on: &Buffer| {
            let c = BufferCopy::new(&src, on, bytes)
                .src_offset(src_offset)
                .dst_offset(dst_offset);
            if asynchronous {
                c.run_async().map(|p| p.release().unwrap())
            } else {
                c.run()
            }
        };
        let call = if asynchronous {
            "vyre_buffer_copy_async"
        } else {
            "vyre_buffer_copy"
        };
        // Past the destination, past the source, overflowing 64 bits.
        for (src_offset, dst_offset, bytes, side) in [
            (0, 0, 200, "dst"),
            (0, 100, 29, "dst"),
            (200, 0, 57, "src"),
            (u64::MAX, 0, 2, "src"),
            (0, u64::MAX - 1, 2, "dst"),
            (0, 0, u64::MAX, "src"),
        ] {
            let e = assert_error(
                copy(src_offset, dst_offset, bytes, &dst),
                Status::OutOfRange,
            );
            assert_eq!(e.call(), call);
            assert!(
                e.message().contains(&format!("the {side} range")),
                "{src_offset} {dst_offset} {bytes}: names the {side} side: {e}"
            );
            assert!(
                e.fix().unwrap().contains(&format!("{side}_offset + bytes")),
                "{e}"
            );
        }
        // Overlapping ranges of one buffer, either way round, and the same range.
        for (src_offset, dst_offset, bytes) in
            [(0, 32, 64), (32, 0, 64), (10, 10, 1), (255, 255, 1)]
        {
            let e = assert_error(
                copy(src_offset, dst_offset, bytes, &src),
                Status::InvalidArgument,
            );
            assert!(e.message().contains("overlap"), "{e}");
            assert!(e.fix().unwrap().contains("second buffer"), "{e}");
        }
        // Unknown flags, through the raw descriptor.
        let mut raw = BufferCopy::new(&src, &dst, 16).raw();
        raw.flags |= 1 << 7;
        let e = vyre_cuda::check_raw(unsafe { sys::vyre_buffer_copy(&raw) }, "vyre_buffer_copy")
            .unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument, "{e}");
        assert!(
            e.fix().unwrap().contains("VYRE_BUFFER_COPY_FLAG_STAGED"),
            "{e}"
        );
    }
    // Nothing was written, and the source is intact.
    check_copy(&dst, &host, 0, 0, 0, "after refused copies");
    assert_eq!(src.to_vec::<u8>().unwrap(), host);
    // A refused async copy leaves no pending behind.
    let mut raw = BufferCopy::new(&src, &dst, 1000).raw();
    let mut pending = sys::vyre_pending { bits: 77 };
    let status = unsafe { sys::vyre_buffer_copy_async(&raw, &mut pending) };
    assert_eq!(status, sys::VYRE_STATUS_OUT_OF_RANGE);
    assert_eq!(pending.bits, 0);
    // Buffers that wrap the same memory may not overlap either.
    let info = dst.info().unwrap();
    // SAFETY: `dst` owns the memory and outlives `alias`.
    let alias = unsafe { Buffer::wrap(&ctx, info.device_pointer, info.bytes) }.unwrap();
    let e = assert_error(alias.copy_to(&dst, 0, 8, 16), Status::InvalidArgument);
    assert!(e.message().contains("wrap the same memory"), "{e}");
    // ... but disjoint ranges of them may be copied.
    alias.copy_to(&dst, 0, 64, 64).unwrap();
    // A freed destination's handle is stale.
    let gone = poisoned(&ctx, 64);
    raw = BufferCopy::new(&src, &gone, 16).raw();
    gone.free().unwrap();
    let e = vyre_cuda::check_raw(unsafe { sys::vyre_buffer_copy(&raw) }, "vyre_buffer_copy")
        .unwrap_err();
    assert_eq!(e.status(), Status::StaleHandle, "{e}");
    assert!(
        e.message().contains("dst"),
        "the message names the field: {e}"
    );
    assert!(e.fix().is_some(), "{e}");
    assert_no_misuse();
}

#[test]
fn peer_queries_of_one_device() {
    with_context!(ctx);
    let ordinal = ctx.device_info().unwrap().ordinal;
    assert!(!vyre_cuda::device_can_access_peer(ordinal, ordinal).unwrap());
    let info = vyre_cuda::device_info(ordinal).unwrap();
    assert_eq!(
        info.peer_access_mask & (1 << ordinal),
        0,
        "never the device's own bit"
    );
    assert_eq!(ctx.device_info().unwrap(), info);
    let count = vyre_cuda::device_count().unwrap();
    assert_error(
        vyre_cuda::device_can_access_peer(ordinal, count),
        Status::NoDevice,
    );
    assert_error(
        vyre_cuda::device_can_access_peer(count + 1000, 0),
        Status::NoDevice,
    );
    for peer in 0..count.min(64) {
        assert_eq!(
            vyre_cuda::device_can_access_peer(ordinal, peer).unwrap(),
            info.peer_access_mask & (1 << peer) != 0,
            "device {ordinal} to {peer}: the query and the mask agree"
        );
    }
    // A version 1 vyre_device_info (328 bytes) gets the fields it has only.
    let mut old = sys::vyre_device_info {
        struct_size: 328,
        peer_access_mask: 0x5A5A,
        ..Default::default()
    };
    vyre_cuda::check_raw(unsafe { sys::vyre_device_info_get(ordinal, &mut old) }, "x").unwrap();
    assert_eq!(
        old.peer_access_mask, 0x5A5A,
        "version 1 has no peer_access_mask"
    );
    assert_eq!(old.driver_version, info.driver_version);
}

/// Two devices: on the fake driver a child process with FAKE_CUDA_DEVICES=2
/// (and `peer` "0": FAKE_CUDA_PEER_ACCESS=0), on a machine with two GPUs
/// the first two.
fn across_two_devices(test: &str, peer_access: &str) {
    if fake() {
        if !in_child_with(
            test,
            &[
                ("FAKE_CUDA_DEVICES", "2"),
                ("FAKE_CUDA_PEER_ACCESS", peer_access),
            ],
        ) {
            return;
        }
        assert_eq!(vyre_cuda::device_count().unwrap(), 2);
    }
    let _gate = exclusive();
    let Some(ctx0) = context() else { return };
    if vyre_cuda::device_count().unwrap() < 2 {
        eprintln!("skipped: one device (the fake driver has two with FAKE_CUDA_DEVICES=2)");
        return;
    }
    let ctx1 = Context::new(1).unwrap();
    let peers = vyre_cuda::device_can_access_peer(0, 1).unwrap();
    assert_eq!(
        peers,
        vyre_cuda::device_info(0).unwrap().peer_access_mask & 2 != 0
    );
    assert_eq!(
        ctx1.device_info().unwrap().peer_access_mask & 2,
        0,
        "never its own bit"
    );
    if fake() {
        assert_eq!(peers, peer_access != "0");
        assert_eq!(vyre_cuda::device_can_access_peer(1, 0).unwrap(), peers);
        assert_eq!(
            vyre_cuda::device_info(1).unwrap().peer_access_mask,
            u64::from(peers)
        );
    }
    for staged in [false, true] {
        let before = fake().then(fake_stats);
        copy_cases(&ctx0, &ctx1, staged, 10 + staged as u64, "device 0 to 1");
        copy_cases(&ctx1, &ctx0, staged, 20 + staged as u64, "device 1 to 0");
        if let Some(before) = before {
            let peer_copies = fake_stats().memcpy_peer - before.memcpy_peer;
            if peers && !staged {
                assert!(peer_copies > 0, "peer devices copy peer to peer");
            } else {
                assert_eq!(peer_copies, 0, "staged (staged {staged}, peers {peers})");
            }
        }
    }
    if fake() {
        // The first peer copy enabled peer access, each direction once.
        let enables = fake_stats().peer_enables;
        assert_eq!(enables, if peers { 2 } else { 0 }, "peer enables");
    }
    // Ranges on two devices never overlap, whatever their addresses; the
    // ranges are still checked.
    let a = ctx0.upload(&[1u8; 64]).unwrap();
    let b = poisoned(&ctx1, 32);
    let e = assert_error(a.copy_to(&b, 0, 0, 64), Status::OutOfRange);
    assert!(e.message().contains("the dst range"), "{e}");
    check_copy(&b, &[], 0, 0, 0, "after a refused copy across devices");
    assert_no_misuse();
    if fake() {
        println!("CHILD-DONE {test}");
    }
}

#[test]
fn copies_across_two_peer_devices() {
    across_two_devices("copies_across_two_peer_devices", "1");
}

#[test]
fn copies_across_two_devices_without_peer_access() {
    if !fake() {
        return; // A machine's devices are peers or not: the test above covers it.
    }
    across_two_devices("copies_across_two_devices_without_peer_access", "0");
}
