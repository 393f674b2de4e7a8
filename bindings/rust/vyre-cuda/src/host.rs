//! Page-locked host memory: [`PinnedBuffer`] (`vyre_host_alloc`) and
//! [`Registration`] (`vyre_host_register`).
//!
//! Host bindings of an asynchronous dispatch that lie in such memory are
//! copied by DMA while the caller goes on, not staged before
//! `dispatch_async` returns. The [`Pending`](crate::Pending) borrows them,
//! so safe code cannot touch them until it is dropped — unless the pending
//! is leaked (`mem::forget`), which ends the borrow while the DMA may still
//! run. To stay sound then too, this module tracks which pending dispatches
//! use which page-locked region: before a region is handed out again (`&`
//! while a leaked pending may write it, `&mut` or unregistering while one may
//! read or write it), those leaked pendings are released, which waits for
//! their device work (`vyre_pending_release`). A live pending never gets
//! there: its borrow keeps the region from being handed out.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Error, Result, Status};
use crate::{Context, Pod};

// ---------------------------------------------------------------------------
// The registry of page-locked regions and the pendings that use them
// ---------------------------------------------------------------------------

struct Region {
    id: u64,
    start: usize,
    end: usize,
    /// (pending handle bits, whether the pending writes into the region).
    inflight: Vec<(u64, bool)>,
}

static REGIONS: Mutex<Vec<Region>> = Mutex::new(Vec::new());
static REGION_COUNT: AtomicUsize = AtomicUsize::new(0);
static INFLIGHT: AtomicUsize = AtomicUsize::new(0);
static NEXT_REGION: AtomicU64 = AtomicU64::new(1);

fn regions() -> MutexGuard<'static, Vec<Region>> {
    // Nothing panics while holding the lock; recover anyway.
    REGIONS.lock().unwrap_or_else(|e| e.into_inner())
}

fn add_region(start: usize, len: usize) -> u64 {
    let id = NEXT_REGION.fetch_add(1, Ordering::Relaxed);
    let mut all = regions();
    all.push(Region {
        id,
        start,
        end: start + len,
        inflight: Vec::new(),
    });
    REGION_COUNT.store(all.len(), Ordering::Release);
    id
}

fn remove_region(id: u64) {
    let mut all = regions();
    if let Some(i) = all.iter().position(|r| r.id == id) {
        let region = all.swap_remove(i);
        INFLIGHT.fetch_sub(region.inflight.len(), Ordering::AcqRel);
    }
    REGION_COUNT.store(all.len(), Ordering::Release);
}

/// A host range an asynchronous call reads or writes.
#[derive(Clone, Copy)]
pub(crate) struct HostRange {
    pub start: usize,
    pub len: usize,
    pub writes: bool,
}

/// Records `pending` on every tracked region one of `ranges` overlaps.
/// Returns whether it was recorded anywhere (then [`forget_pending`] must be
/// called when the pending is released).
pub(crate) fn note_pending(pending: sys::vyre_pending, ranges: &[HostRange]) -> bool {
    if REGION_COUNT.load(Ordering::Acquire) == 0 || ranges.is_empty() {
        return false;
    }
    let mut noted = false;
    let mut all = regions();
    for region in all.iter_mut() {
        let mut writes = None;
        for r in ranges {
            if r.len > 0 && r.start < region.end && region.start < r.start + r.len {
                writes = Some(writes.unwrap_or(false) || r.writes);
            }
        }
        if let Some(writes) = writes {
            region.inflight.push((pending.bits, writes));
            INFLIGHT.fetch_add(1, Ordering::AcqRel);
            noted = true;
        }
    }
    noted
}

/// Removes a pending about to be released by its owner.
pub(crate) fn forget_pending(pending: sys::vyre_pending) {
    let mut all = regions();
    for region in all.iter_mut() {
        let before = region.inflight.len();
        region.inflight.retain(|&(bits, _)| bits != pending.bits);
        INFLIGHT.fetch_sub(before - region.inflight.len(), Ordering::AcqRel);
    }
}

/// Releases the leaked pendings that may still use region `id`: those that
/// write it (`all` false: before shared access), or every one (`all` true:
/// before exclusive access, unregistering or freeing).
fn settle(id: u64, all: bool) {
    if INFLIGHT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut leaked = Vec::new();
    {
        let mut regions = regions();
        let Some(region) = regions.iter_mut().find(|r| r.id == id) else {
            return;
        };
        region.inflight.retain(|&(bits, writes)| {
            let take = all || writes;
            if take {
                leaked.push(bits);
            }
            !take
        });
        INFLIGHT.fetch_sub(leaked.len(), Ordering::AcqRel);
        // A leaked pending may be noted on other regions too.
        for region in regions.iter_mut() {
            let before = region.inflight.len();
            region.inflight.retain(|(bits, _)| !leaked.contains(bits));
            INFLIGHT.fetch_sub(before - region.inflight.len(), Ordering::AcqRel);
        }
    }
    for bits in leaked {
        // SAFETY: the pending was leaked by its owner (a live one would still
        // borrow this region), so nothing else will use the handle; a handle
        // already released gives STALE_HANDLE and no harm.
        let _ = unsafe { sys::vyre_pending_release(sys::vyre_pending { bits }) };
    }
}

// ---------------------------------------------------------------------------
// PinnedBuffer
// ---------------------------------------------------------------------------

/// Page-locked host memory from `vyre_host_alloc`, zeroed at allocation:
/// host bindings, uploads and downloads inside it are copied by DMA in
/// place. Derefs to `[u8]`; typed views with [`as_slice_of`](Self::as_slice_of).
/// Freed on drop (deferred by the library while a dispatch still copies it).
pub struct PinnedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    region: u64,
    ctx: Arc<ContextInner>,
}

// SAFETY: the memory is owned by this value; access follows &/&mut.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({:p}, {} bytes)", self.ptr, self.len)
    }
}

impl PinnedBuffer {
    pub(crate) fn alloc(ctx: &Context, bytes: usize) -> Result<PinnedBuffer> {
        let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        check(
            unsafe { sys::vyre_host_alloc(ctx.raw(), bytes as u64, &mut out) },
            "vyre_host_alloc",
        )?;
        let Some(ptr) = NonNull::new(out.cast::<u8>()) else {
            return Err(Error::usage(
                Status::Internal,
                "vyre_host_alloc",
                "vyre_host_alloc returned OK and a NULL address. Fix: report this as a vyre-cuda \
                 bug."
                    .into(),
            ));
        };
        // SAFETY: `bytes` writable bytes at `ptr`; zeroed so they may be read.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, bytes) };
        let region = add_region(ptr.as_ptr() as usize, bytes);
        Ok(PinnedBuffer {
            ptr,
            len: bytes,
            region,
            ctx: Arc::clone(&ctx.inner),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory's address (4 KiB aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    pub fn as_slice(&self) -> &[u8] {
        settle(self.region, false);
        // SAFETY: `len` initialised bytes owned by self; no leaked dispatch
        // writes them any more (settled).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        settle(self.region, true);
        // SAFETY: as above, and no leaked dispatch reads them either.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    fn typed_len<T: Pod>(&self, call: &'static str) -> Result<usize> {
        let size = std::mem::size_of::<T>();
        if size == 0
            || self.len % size != 0
            || self.ptr.as_ptr() as usize % std::mem::align_of::<T>() != 0
        {
            return Err(Error::usage(
                Status::InvalidArgument,
                call,
                format!(
                    "the pinned buffer's {} bytes are not a whole number of {}-byte, aligned \
                     elements. Fix: allocate a multiple of the element size.",
                    self.len, size
                ),
            ));
        }
        Ok(self.len / size)
    }

    /// The memory as a slice of T (its size must be a multiple of T's).
    pub fn as_slice_of<T: Pod>(&self) -> Result<&[T]> {
        let n = self.typed_len::<T>("PinnedBuffer::as_slice_of")?;
        let bytes = self.as_slice();
        // SAFETY: aligned, `n` whole elements, any bytes are a valid T.
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n) })
    }

    /// The memory as a mutable slice of T.
    pub fn as_mut_slice_of<T: Pod>(&mut self) -> Result<&mut [T]> {
        let n = self.typed_len::<T>("PinnedBuffer::as_mut_slice_of")?;
        let bytes = self.as_mut_slice();
        // SAFETY: aligned, `n` whole elements, any bytes are a valid T.
        Ok(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), n) })
    }

    /// Frees the memory now and returns the library's answer.
    pub fn free(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        settle(this.region, true);
        remove_region(this.region);
        // SAFETY: our allocation, freed once; `this` is never dropped.
        let result = check(
            unsafe { sys::vyre_host_free(this.ptr.as_ptr().cast()) },
            "vyre_host_free",
        );
        // SAFETY: moved out once; the ManuallyDrop is not used again.
        drop(unsafe { std::ptr::read(&this.ctx) });
        result
    }
}

impl Deref for PinnedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for PinnedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        settle(self.region, true);
        remove_region(self.region);
        // SAFETY: our allocation, freed once; errors are ignored in drop.
        let _ = unsafe { sys::vyre_host_free(self.ptr.as_ptr().cast()) };
    }
}

// ---------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------

/// A slice page-locked with `vyre_host_register` while this guard lives: it
/// borrows the slice mutably and derefs to it; host bindings, uploads and
/// downloads inside it are copied by DMA in place. Dropping it unregisters.
pub struct Registration<'a, T: Pod> {
    ptr: NonNull<T>,
    len: usize,
    region: u64,
    ctx: Arc<ContextInner>,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: it holds a `&'a mut [T]` (T: Pod is Send + Sync) and an Arc.
unsafe impl<T: Pod> Send for Registration<'_, T> {}
unsafe impl<T: Pod> Sync for Registration<'_, T> {}

impl<T: Pod> std::fmt::Debug for Registration<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Registration({:p}, {} elements)", self.ptr, self.len)
    }
}

impl<'a, T: Pod> Registration<'a, T> {
    pub(crate) fn new(ctx: &Context, data: &'a mut [T]) -> Result<Registration<'a, T>> {
        let bytes = std::mem::size_of_val(data);
        let ptr = NonNull::from(&mut *data).cast::<T>();
        // SAFETY: [ptr, ptr + bytes) is ours (borrowed mutably) for 'a, and
        // is unregistered before the borrow ends.
        check(
            unsafe { sys::vyre_host_register(ctx.raw(), ptr.as_ptr().cast(), bytes as u64) },
            "vyre_host_register",
        )?;
        let region = add_region(ptr.as_ptr() as usize, bytes);
        Ok(Registration {
            ptr,
            len: data.len(),
            region,
            ctx: Arc::clone(&ctx.inner),
            _borrow: PhantomData,
        })
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    fn release(&mut self) -> sys::vyre_status {
        settle(self.region, true);
        remove_region(self.region);
        // SAFETY: the start we registered; unregistered once.
        unsafe { sys::vyre_host_unregister(self.ptr.as_ptr().cast()) }
    }

    /// Unregisters now and returns the library's answer.
    pub fn unregister(self) -> Result<()> {
        let mut this = std::mem::ManuallyDrop::new(self);
        let status = this.release();
        let result = check(status, "vyre_host_unregister");
        // SAFETY: moved out once; the ManuallyDrop is not used again.
        drop(unsafe { std::ptr::read(&this.ctx) });
        result
    }
}

impl<T: Pod> Deref for Registration<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        settle(self.region, false);
        // SAFETY: the borrowed slice; no leaked dispatch writes it any more.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> DerefMut for Registration<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        settle(self.region, true);
        // SAFETY: the slice borrowed mutably; no leaked dispatch uses it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> Drop for Registration<'_, T> {
    fn drop(&mut self) {
        // Errors are ignored in drop; unregister() reports them.
        let _ = self.release();
    }
}
