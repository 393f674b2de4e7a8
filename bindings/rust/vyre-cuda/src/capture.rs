//! Captures: caller work enqueued on one CUDA stream (other CUDA code's
//! kernels, copies and memsets, and the library's own dispatches) turned
//! into a [`Graph`] that replays like any other.

use std::marker::PhantomData;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Error, Result, Status};
use crate::{Context, Dispatch, Graph, Program};

/// The driver's stream capture mode: which threads' "unsafe" CUDA calls
/// (allocations, frees, module loads, synchronisations: most vyre calls that
/// allocate or wait) are forbidden while the capture is open. Such a call
/// fails ([`Status::DriverError`] naming the capture) and invalidates the
/// capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// The capturing thread's own (`VYRE_CAPTURE_MODE_THREAD_LOCAL`).
    #[default]
    ThreadLocal,
    /// Every thread's of the process (`VYRE_CAPTURE_MODE_GLOBAL`).
    Global,
    /// None (`VYRE_CAPTURE_MODE_RELAXED`).
    Relaxed,
}

impl CaptureMode {
    /// The raw `VYRE_CAPTURE_MODE_*` value.
    pub fn as_raw(self) -> u32 {
        match self {
            CaptureMode::ThreadLocal => sys::VYRE_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Global => sys::VYRE_CAPTURE_MODE_GLOBAL,
            CaptureMode::Relaxed => sys::VYRE_CAPTURE_MODE_RELAXED,
        }
    }
}

/// Options of [`Context::begin_capture_with`]; the defaults are
/// `vyre_capture_desc`'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureOptions {
    pub mode: CaptureMode,
    /// Bytes of parameter words the capture's dispatches may use in all,
    /// each dispatch's rounded up to 256 (0: 64 KiB). Over it,
    /// [`Capture::dispatch`] is [`Status::LimitExceeded`].
    pub param_bytes: u64,
}

/// An open capture of a context (`vyre_capture_begin`), ended into a graph
/// by [`end`](Self::end).
///
/// Work enqueued on [`cu_stream`](Self::cu_stream) (a `CUstream` of the
/// context's device: the context's own capture stream, never its work
/// stream) and the dispatches of [`dispatch`](Self::dispatch) are recorded,
/// not run: they run when the graph is replayed. Dispatches, copies and
/// replays of other threads keep running outside the capture. One capture
/// per context at a time: a second [`Context::begin_capture`] while this
/// one is open is [`Status::InvalidState`].
///
/// Dropping it without [`end`](Self::end) ends the capture and destroys the
/// graph (errors are ignored), so the context can capture again.
///
/// A `Capture` is `Sync` ([`dispatch`](Self::dispatch) from any thread) but
/// not `Send`: the driver ends a `ThreadLocal` or `Global` capture only on
/// the thread that began it, so `end` and the drop stay there. While it is
/// open (`ThreadLocal`, the default) the capturing thread must not make
/// calls that allocate, free or wait, dropping buffers and programs
/// included: create what the captured work uses before
/// [`Context::begin_capture`], and drop it after [`end`](Self::end).
pub struct Capture {
    ctx: Arc<ContextInner>,
    cu_stream: u64,
    mode: CaptureMode,
    open: bool,
    // Not Send (see above).
    _thread: PhantomData<*const ()>,
}

// SAFETY: vyre_capture_dispatch may be called from any thread; the other
// methods taking &self only read fields. Ending stays on the beginning
// thread because Capture is not Send.
unsafe impl Sync for Capture {}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("context", &format_args!("{:#x}", self.ctx.handle.bits))
            .field("cu_stream", &format_args!("{:#x}", self.cu_stream))
            .field("mode", &self.mode)
            .finish()
    }
}

impl Context {
    /// Begins capturing work on a stream of this context
    /// (`vyre_capture_begin`) in `mode`, with the default parameter-word
    /// room (64 KiB).
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<Capture> {
        self.begin_capture_with(&CaptureOptions {
            mode,
            ..Default::default()
        })
    }

    /// As [`begin_capture`](Self::begin_capture), with every option.
    pub fn begin_capture_with(&self, options: &CaptureOptions) -> Result<Capture> {
        let desc = sys::vyre_capture_desc {
            mode: options.mode.as_raw(),
            param_bytes: options.param_bytes,
            ..Default::default()
        };
        let mut cu_stream = 0u64;
        // SAFETY: a handle we own, a valid descriptor and out-pointer.
        check(
            unsafe { sys::vyre_capture_begin(self.raw(), &desc, &mut cu_stream) },
            "vyre_capture_begin",
        )?;
        Ok(Capture {
            ctx: Arc::clone(&self.inner),
            cu_stream,
            mode: options.mode,
            open: true,
            _thread: PhantomData,
        })
    }
}

impl Capture {
    /// The capture stream, a `CUstream` as an integer, for other CUDA code
    /// to enqueue its work on (kernels, copies, memsets on memory that must
    /// stay allocated while the graph may run). Not for
    /// [`Graph::launch_on_stream`], [`Context::wait_stream`] or
    /// [`Context::signal_stream`] (each [`Status::InvalidArgument`]: use
    /// [`dispatch`](Self::dispatch)); synchronising or querying it
    /// invalidates the capture.
    pub fn cu_stream(&self) -> u64 {
        self.cu_stream
    }

    pub fn mode(&self) -> CaptureMode {
        self.mode
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    /// Enqueues a dispatch of `program` (a program of this capture's
    /// context) into the capture (`vyre_capture_dispatch`): as
    /// [`Program::dispatch_async`] would run it (OUTPUT bindings zeroed,
    /// fixpoint iterations), but only when the graph is replayed. Resident
    /// bindings only ([`Arg::resident`](crate::Arg::resident),
    /// [`Arg::range`](crate::Arg::range); host memory is
    /// [`Status::InvalidArgument`]), not cooperative. Parameter words go to
    /// the capture's block ([`CaptureOptions::param_bytes`]); the graph
    /// keeps the program and the buffers alive.
    pub fn dispatch(&self, program: &Program, mut dispatch: Dispatch<'_>) -> Result<()> {
        self.dispatch_with(program, &mut dispatch)
    }

    /// As [`dispatch`](Self::dispatch), keeping the descriptor for reuse.
    pub fn dispatch_with(&self, program: &Program, dispatch: &mut Dispatch<'_>) -> Result<()> {
        dispatch.args.check("Capture::dispatch")?;
        if program.ctx.handle != self.ctx.handle {
            return Err(Error::usage(
                Status::InvalidArgument,
                "Capture::dispatch",
                format!(
                    "Capture::dispatch: the program belongs to context {:#x}, the capture to \
                     context {:#x}. Fix: dispatch programs built on the capture's context \
                     (Capture::context).",
                    program.ctx.handle.bits, self.ctx.handle.bits
                ),
            ));
        }
        let desc = dispatch.raw();
        // SAFETY: the descriptor's pointers are valid for the call; host
        // bindings are refused (a graph cannot replay them), so nothing
        // reads or writes host memory later.
        check(
            unsafe { sys::vyre_capture_dispatch(program.handle, &desc) },
            "vyre_capture_dispatch",
        )
    }

    /// Ends the capture into a graph (`vyre_capture_end`; nodes numbered in
    /// the order the driver lists them). A replay takes no bindings,
    /// parameter words, scalars or element count ([`Graph::launch`], or an
    /// empty [`Replay`](crate::Replay)); kernel nodes report their function
    /// and shape but no arguments and cannot be set, memset nodes can
    /// ([`Graph::set_node_info`]). A capture the driver invalidated (an
    /// uncapturable call on the stream, a forbidden call of the capturing
    /// thread) is [`Status::InvalidState`], and ended all the same.
    pub fn end(mut self) -> Result<Graph<'static>> {
        // Never ended twice: the drop must not end a capture begun after
        // this one.
        self.open = false;
        let mut handle = sys::vyre_graph::default();
        // SAFETY: a handle we own; a valid out-pointer.
        check(
            unsafe { sys::vyre_capture_end(self.ctx.handle, &mut handle) },
            "vyre_capture_end",
        )?;
        Ok(Graph {
            handle,
            ctx: Arc::clone(&self.ctx),
            _sequence: PhantomData,
        })
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        self.open = false;
        let mut handle = sys::vyre_graph::default();
        // SAFETY: a handle we own; errors are ignored in drop (an
        // invalidated capture is ended by the failing call too).
        let status = unsafe { sys::vyre_capture_end(self.ctx.handle, &mut handle) };
        if status == sys::VYRE_STATUS_OK && handle.bits != 0 {
            // SAFETY: the graph was just made and is ours.
            let _ = unsafe { sys::vyre_graph_destroy(handle) };
        }
    }
}
