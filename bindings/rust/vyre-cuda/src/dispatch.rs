//! Dispatch: bindings, the descriptor, synchronous and asynchronous runs,
//! pending work and timing.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use vyre_cuda_sys as sys;

use crate::buffer::BufferRange;
use crate::context::ContextInner;
use crate::error::{check, Error, Result, Status};
use crate::host::{self, HostRange};
use crate::{byte_len, Buffer, Pod, Program};

/// One entry of a dispatch, per declared binding in order: host memory
/// (staged for this dispatch, or copied by DMA when page-locked), a
/// resident buffer range, or nothing for a SHARED binding.
pub struct Arg<'a> {
    pub(crate) raw: sys::vyre_dispatch_binding,
    pub(crate) host: [Option<HostRange>; 2],
    pub(crate) error: Option<String>,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: an Arg only carries borrows of Pod slices and of a Buffer.
unsafe impl Send for Arg<'_> {}
unsafe impl Sync for Arg<'_> {}

impl std::fmt::Debug for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arg")
            .field("source", &self.raw.source)
            .field("host_bytes", &self.raw.host_bytes)
            .field("buffer", &self.raw.buffer.bits)
            .field("offset", &self.raw.offset)
            .field("length", &self.raw.length)
            .finish()
    }
}

fn in_ptr<T: Pod>(s: &[T]) -> *const std::ffi::c_void {
    // An empty slice is passed as NULL (its address is dangling).
    if s.is_empty() {
        std::ptr::null()
    } else {
        s.as_ptr().cast()
    }
}

fn out_ptr<T: Pod>(s: &mut [T]) -> *mut std::ffi::c_void {
    if s.is_empty() {
        std::ptr::null_mut()
    } else {
        s.as_mut_ptr().cast()
    }
}

fn range_of(ptr: *const std::ffi::c_void, bytes: u64, writes: bool) -> Option<HostRange> {
    (!ptr.is_null()).then_some(HostRange {
        start: ptr as usize,
        len: bytes as usize,
        writes,
    })
}

impl<'a> Arg<'a> {
    fn host(input: *const std::ffi::c_void, output: *mut std::ffi::c_void, bytes: u64) -> Arg<'a> {
        Arg {
            raw: sys::vyre_dispatch_binding {
                source: sys::VYRE_SOURCE_HOST,
                host_input: input,
                host_output: output,
                host_bytes: bytes,
                ..Default::default()
            },
            host: [range_of(input, bytes, false), range_of(output, bytes, true)],
            error: None,
            _borrow: PhantomData,
        }
    }

    /// Host data the kernel reads (an INPUT binding).
    pub fn input<T: Pod>(data: &'a [T]) -> Arg<'a> {
        Arg::host(in_ptr(data), std::ptr::null_mut(), byte_len(data))
    }

    /// Host memory receiving an OUTPUT binding's result.
    pub fn output<T: Pod>(data: &'a mut [T]) -> Arg<'a> {
        let bytes = byte_len(data);
        Arg::host(std::ptr::null(), out_ptr(data), bytes)
    }

    /// Host memory read and updated in place (an INPUT_OUTPUT binding).
    pub fn inout<T: Pod>(data: &'a mut [T]) -> Arg<'a> {
        let bytes = byte_len(data);
        let p = out_ptr(data);
        Arg::host(p, p, bytes)
    }

    /// An INPUT_OUTPUT binding read from `src` with its result written into
    /// `dst` (of the same length).
    pub fn in_out<T: Pod>(src: &'a [T], dst: &'a mut [T]) -> Arg<'a> {
        let mut arg = Arg::host(in_ptr(src), out_ptr(dst), byte_len(src));
        if src.len() != dst.len() {
            arg.error = Some(format!(
                "Arg::in_out: the source holds {} elements but the destination {}. Fix: pass \
                 slices of the same length.",
                src.len(),
                dst.len()
            ));
        }
        arg
    }

    /// A resident range (length 0: to the end of the buffer).
    pub fn range(range: BufferRange<'a>) -> Arg<'a> {
        Arg {
            raw: sys::vyre_dispatch_binding {
                source: sys::VYRE_SOURCE_RESIDENT,
                buffer: range.buffer.handle,
                offset: range.offset,
                length: range.length,
                ..Default::default()
            },
            host: [None, None],
            error: None,
            _borrow: PhantomData,
        }
    }

    /// A whole resident buffer.
    pub fn resident(buffer: &'a Buffer) -> Arg<'a> {
        Arg::range(buffer.whole())
    }

    /// The entry of a SHARED binding (nothing is bound).
    pub fn shared() -> Arg<'a> {
        Arg::host(std::ptr::null(), std::ptr::null_mut(), 0)
    }
}

impl<'a> From<&'a Buffer> for Arg<'a> {
    fn from(buffer: &'a Buffer) -> Arg<'a> {
        Arg::resident(buffer)
    }
}

impl<'a> From<BufferRange<'a>> for Arg<'a> {
    fn from(range: BufferRange<'a>) -> Arg<'a> {
        Arg::range(range)
    }
}

/// Collects bindings, their host ranges and the first binding error.
#[derive(Default)]
pub(crate) struct Args {
    pub raw: Vec<sys::vyre_dispatch_binding>,
    pub host: Vec<HostRange>,
    pub error: Option<String>,
}

impl Args {
    pub fn push(&mut self, arg: Arg<'_>) {
        if self.error.is_none() {
            self.error = arg.error;
        }
        self.host.extend(arg.host.iter().flatten());
        self.raw.push(arg.raw);
    }

    pub fn check(&self, call: &'static str) -> Result<()> {
        match &self.error {
            Some(message) => Err(Error::usage(Status::InvalidArgument, call, message.clone())),
            None => Ok(()),
        }
    }
}

/// Host and device time of a dispatch, replay or run, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// From entering the call to the end of the wait.
    pub wall_ns: u64,
    /// Device time between the first and last command (with device timing
    /// requested, or VYRE_CUDA_TRACE=1; else 0).
    pub device_ns: u64,
    /// Staging and enqueueing.
    pub enqueue_ns: u64,
    /// In the wait, read-back included.
    pub wait_ns: u64,
}

impl Timing {
    pub(crate) fn from_raw(t: &sys::vyre_timing) -> Timing {
        Timing {
            wall_ns: t.wall_ns,
            device_ns: t.device_ns,
            enqueue_ns: t.enqueue_ns,
            wait_ns: t.wait_ns,
        }
    }
}

/// A dispatch descriptor: one [`Arg`] per declared binding, u32 parameter
/// words, scalars for explicit SCALAR32/64 parameters, grid and block.
/// Build it with the chained methods; run it with [`Program::dispatch`].
pub struct Dispatch<'a> {
    pub(crate) args: Args,
    pub(crate) params: Vec<u32>,
    pub(crate) scalars: Vec<u64>,
    grid: [u32; 3],
    block: [u32; 3],
    element_count: u64,
    fixpoint_iterations: u32,
    shared_memory_bytes: u32,
    flags: u32,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a Dispatch only carries borrows of Pod slices and of Buffers.
unsafe impl Send for Dispatch<'_> {}
unsafe impl Sync for Dispatch<'_> {}

impl Default for Dispatch<'_> {
    fn default() -> Self {
        Dispatch::new()
    }
}

impl<'a> Dispatch<'a> {
    pub fn new() -> Dispatch<'a> {
        Dispatch {
            args: Args::default(),
            params: Vec::new(),
            scalars: Vec::new(),
            grid: [0; 3],
            block: [0; 3],
            element_count: 0,
            fixpoint_iterations: 1,
            shared_memory_bytes: 0,
            flags: 0,
            _borrow: PhantomData,
        }
    }

    /// Appends the entry of the next declared binding.
    pub fn arg(mut self, arg: impl Into<Arg<'a>>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<A: Into<Arg<'a>>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        for arg in args {
            self.args.push(arg.into());
        }
        self
    }

    /// The u32 parameter words (replacing any set before).
    pub fn params(mut self, words: &[u32]) -> Self {
        self.params = words.to_vec();
        self
    }

    /// Scalar values for SCALAR32/64 parameters, as raw 64-bit patterns
    /// (replacing any set before).
    pub fn scalars(mut self, values: &[u64]) -> Self {
        self.scalars = values.to_vec();
        self
    }

    /// Appends a scalar: a u32 or i32 for a SCALAR32 slot.
    pub fn scalar_u32(mut self, v: u32) -> Self {
        self.scalars.push(u64::from(v));
        self
    }
    pub fn scalar_i32(self, v: i32) -> Self {
        self.scalar_u32(v as u32)
    }
    /// Appends an f32 (its bit pattern) for a SCALAR32 slot.
    pub fn scalar_f32(self, v: f32) -> Self {
        self.scalar_u32(v.to_bits())
    }
    pub fn scalar_u64(mut self, v: u64) -> Self {
        self.scalars.push(v);
        self
    }
    pub fn scalar_i64(self, v: i64) -> Self {
        self.scalar_u64(v as u64)
    }
    /// Appends an f64 (its bit pattern) for a SCALAR64 slot.
    pub fn scalar_f64(self, v: f64) -> Self {
        self.scalar_u64(v.to_bits())
    }

    /// Grid in blocks (all zero derives x from the element count).
    pub fn grid(mut self, grid: [u32; 3]) -> Self {
        self.grid = grid;
        self
    }
    /// Block size (all zero: the program's workgroup size).
    pub fn block(mut self, block: [u32; 3]) -> Self {
        self.block = block;
        self
    }
    /// Elements a derived grid covers (0: the largest binding's count).
    pub fn element_count(mut self, n: u64) -> Self {
        self.element_count = n;
        self
    }
    /// Times the kernel runs back to back (>= 1).
    pub fn fixpoint_iterations(mut self, n: u32) -> Self {
        self.fixpoint_iterations = n;
        self
    }
    /// Extra dynamic shared memory bytes for this dispatch.
    pub fn shared_memory_bytes(mut self, bytes: u32) -> Self {
        self.shared_memory_bytes = bytes;
        self
    }
    /// Record device events so the timing reports device_ns.
    pub fn device_timing(mut self, on: bool) -> Self {
        self.set_flag(sys::VYRE_DISPATCH_FLAG_DEVICE_TIMING, on);
        self
    }
    /// Launch cooperatively (grid synchronisation; checked co-resident).
    pub fn cooperative(mut self, on: bool) -> Self {
        self.set_flag(sys::VYRE_DISPATCH_FLAG_COOPERATIVE, on);
        self
    }

    fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    /// The C descriptor; its pointers point into `self`.
    pub(crate) fn raw(&self) -> sys::vyre_dispatch_desc {
        fn ptr_or_null<T>(v: &[T]) -> *const T {
            if v.is_empty() {
                std::ptr::null()
            } else {
                v.as_ptr()
            }
        }
        sys::vyre_dispatch_desc {
            flags: self.flags,
            bindings: ptr_or_null(&self.args.raw),
            binding_count: self.args.raw.len(),
            param_words: ptr_or_null(&self.params),
            param_word_count: self.params.len(),
            scalars: ptr_or_null(&self.scalars),
            scalar_count: self.scalars.len(),
            grid: self.grid,
            block: self.block,
            element_count: self.element_count,
            fixpoint_iterations: self.fixpoint_iterations,
            shared_memory_bytes: self.shared_memory_bytes,
            ..Default::default()
        }
    }
}

impl Program {
    /// Runs the program over `dispatch` and waits; host outputs are written
    /// before it returns.
    pub fn dispatch(&self, mut dispatch: Dispatch<'_>) -> Result<Timing> {
        self.dispatch_with(&mut dispatch)
    }

    /// As [`dispatch`](Self::dispatch), keeping the descriptor for reuse.
    pub fn dispatch_with(&self, dispatch: &mut Dispatch<'_>) -> Result<Timing> {
        dispatch.args.check("Program::dispatch")?;
        let desc = dispatch.raw();
        let mut timing = sys::vyre_timing::default();
        // SAFETY: the descriptor's pointers are valid for the call; outputs
        // are borrowed mutably by `dispatch` and written before it returns.
        check(
            unsafe { sys::vyre_dispatch(self.handle, &desc, &mut timing) },
            "vyre_dispatch",
        )?;
        Ok(Timing::from_raw(&timing))
    }

    /// Enqueues the dispatch and returns at once. Host inputs are staged
    /// before it returns (page-locked ones are read by DMA later); host
    /// outputs are written by [`Pending::wait`]. The returned value borrows
    /// the host memory until it is dropped.
    pub fn dispatch_async<'a>(&self, dispatch: Dispatch<'a>) -> Result<Pending<'a>> {
        dispatch.args.check("Program::dispatch_async")?;
        let desc = dispatch.raw();
        let mut handle = sys::vyre_pending::default();
        // SAFETY: the descriptor's pointers are valid for the call; the host
        // memory stays borrowed by the Pending for 'a.
        check(
            unsafe { sys::vyre_dispatch_async(self.handle, &desc, &mut handle) },
            "vyre_dispatch_async",
        )?;
        Ok(Pending::new(
            handle,
            Some(Arc::clone(&self.ctx)),
            &dispatch.args.host,
        ))
    }
}

/// Work enqueued by an asynchronous dispatch, replay, e-graph rebuild or
/// buffer copy ([`BufferCopy::run_async`](crate::BufferCopy::run_async)).
///
/// Borrows the host memory it reads or writes for `'a`. [`wait`](Self::wait)
/// completes it and writes host outputs; dropping it releases it (waiting for
/// the device work first, without writing host outputs when it was never
/// waited on).
pub struct Pending<'a> {
    handle: sys::vyre_pending,
    _ctx: Option<Arc<ContextInner>>,
    noted: bool,
    pub(crate) rebuild_result: Option<Box<sys::vyre_egraph_rebuild_result>>,
    pub(crate) waited: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for Pending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pending({:#x})", self.handle.bits)
    }
}

impl<'a> Pending<'a> {
    pub(crate) fn new(
        handle: sys::vyre_pending,
        ctx: Option<Arc<ContextInner>>,
        host: &[HostRange],
    ) -> Pending<'a> {
        let noted = host::note_pending(handle, host);
        Pending {
            handle,
            _ctx: ctx,
            noted,
            rebuild_result: None,
            waited: false,
            _borrow: PhantomData,
        }
    }

    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_pending {
        self.handle
    }

    /// Whether the device work has completed (without waiting).
    pub fn poll(&self) -> Result<bool> {
        // SAFETY: the handle is ours.
        let status = unsafe { sys::vyre_pending_poll(self.handle) };
        if status == sys::VYRE_STATUS_NOT_READY {
            return Ok(false);
        }
        check(status, "vyre_pending_poll").map(|()| true)
    }

    /// Waits for completion and writes host outputs. A second wait is
    /// [`Status::InvalidState`].
    pub fn wait(&mut self) -> Result<()> {
        // SAFETY: the handle is ours; outputs are borrowed mutably for 'a.
        check(
            unsafe { sys::vyre_pending_wait(self.handle, sys::VYRE_WAIT_FOREVER) },
            "vyre_pending_wait",
        )?;
        self.waited = true;
        Ok(())
    }

    /// Waits at most `timeout`: `Ok(false)` if the work is still running
    /// (wait again later), `Ok(true)` when done and host outputs written.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<bool> {
        let ns = u64::try_from(timeout.as_nanos())
            .unwrap_or(u64::MAX - 1)
            .min(u64::MAX - 1);
        // SAFETY: as for wait.
        let status = unsafe { sys::vyre_pending_wait(self.handle, ns) };
        if status == sys::VYRE_STATUS_TIMEOUT {
            return Ok(false);
        }
        check(status, "vyre_pending_wait")?;
        self.waited = true;
        Ok(true)
    }

    /// Timing of the waited work ([`Status::InvalidState`] before the wait).
    pub fn timing(&self) -> Result<Timing> {
        let mut t = sys::vyre_timing::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_pending_timing(self.handle, &mut t) },
            "vyre_pending_timing",
        )?;
        Ok(Timing::from_raw(&t))
    }

    /// Waits (if not waited yet), then releases; returns the timing.
    pub fn finish(mut self) -> Result<Timing> {
        if !self.waited {
            self.wait()?;
        }
        let timing = self.timing()?;
        self.release()?;
        Ok(timing)
    }

    /// Releases now (waiting for the device work, skipping host output
    /// read-back if never waited on) and returns the library's answer.
    pub fn release(mut self) -> Result<()> {
        let status = self.release_raw();
        check(status, "vyre_pending_release")
    }

    fn release_raw(&mut self) -> sys::vyre_status {
        let handle = std::mem::take(&mut self.handle);
        if handle.bits == 0 {
            return sys::VYRE_STATUS_OK;
        }
        if self.noted {
            host::forget_pending(handle);
        }
        // SAFETY: the handle is ours and released once.
        unsafe { sys::vyre_pending_release(handle) }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        // Errors are ignored in drop; release() reports them.
        let _ = self.release_raw();
    }
}
