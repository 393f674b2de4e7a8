//! Sequences: many steps over resident buffers, run eagerly or recorded as
//! one graph.

use std::marker::PhantomData;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Error, Result, Status};
use crate::{byte_len, Buffer, Context, Dispatch, Graph, Pod, Program, Timing};

/// One step of a [`Sequence`]. It borrows its buffers, program and host
/// memory for `'a`; the sequence keeps those borrows.
pub struct Step<'a> {
    raw: sys::vyre_sequence_step,
    dispatch: Option<Dispatch<'a>>,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a Step only carries borrows of Pod slices, Buffers and a Program.
unsafe impl Send for Step<'_> {}
unsafe impl Sync for Step<'_> {}

impl<'a> Step<'a> {
    fn new(raw: sys::vyre_sequence_step) -> Step<'a> {
        Step {
            raw,
            dispatch: None,
            _borrow: PhantomData,
        }
    }

    /// Runs `program` with `dispatch` (RESIDENT bindings only), as
    /// [`Program::dispatch`] would (OUTPUT bindings zeroed first).
    pub fn dispatch(program: &'a Program, dispatch: Dispatch<'a>) -> Step<'a> {
        let mut step = Step::new(sys::vyre_sequence_step {
            kind: sys::VYRE_STEP_DISPATCH,
            program: program.handle,
            ..Default::default()
        });
        step.dispatch = Some(dispatch);
        step
    }

    /// Sets `bytes` bytes of `buffer` at `offset` to `value`.
    pub fn fill(buffer: &'a Buffer, offset: u64, bytes: u64, value: u8) -> Step<'a> {
        Step::new(sys::vyre_sequence_step {
            kind: sys::VYRE_STEP_FILL,
            buffer: buffer.handle,
            offset,
            bytes,
            fill_byte: u32::from(value),
            ..Default::default()
        })
    }

    /// Copies `bytes` from `src` at `src_offset` to `dst` at `dst_offset`
    /// (the ranges must not overlap).
    pub fn copy(
        dst: &'a Buffer,
        dst_offset: u64,
        src: &'a Buffer,
        src_offset: u64,
        bytes: u64,
    ) -> Step<'a> {
        Step::new(sys::vyre_sequence_step {
            kind: sys::VYRE_STEP_COPY,
            buffer: dst.handle,
            offset: dst_offset,
            bytes,
            src_buffer: src.handle,
            src_offset,
            ..Default::default()
        })
    }

    /// Copies host `src` into `buffer` at `offset` (read when a run starts).
    pub fn upload<T: Pod>(buffer: &'a Buffer, offset: u64, src: &'a [T]) -> Step<'a> {
        Step::new(sys::vyre_sequence_step {
            kind: sys::VYRE_STEP_UPLOAD,
            buffer: buffer.handle,
            offset,
            bytes: byte_len(src),
            host_src: if src.is_empty() {
                std::ptr::null()
            } else {
                src.as_ptr().cast()
            },
            ..Default::default()
        })
    }

    /// Copies `dst.len()` elements of `buffer` at `offset` into host `dst`
    /// (written when a run ends).
    pub fn download<T: Pod>(buffer: &'a Buffer, offset: u64, dst: &'a mut [T]) -> Step<'a> {
        let bytes = byte_len(dst);
        Step::new(sys::vyre_sequence_step {
            kind: sys::VYRE_STEP_DOWNLOAD,
            buffer: buffer.handle,
            offset,
            bytes,
            host_dst: if dst.is_empty() {
                std::ptr::null_mut()
            } else {
                dst.as_mut_ptr().cast()
            },
            ..Default::default()
        })
    }
}

/// A block of steps run `times` times: steps [first, first + count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repeat {
    pub first: usize,
    pub count: usize,
    pub times: u32,
}

/// Validated steps over resident buffers, run eagerly ([`run`](Self::run))
/// or recorded as one graph ([`record`](Self::record)), with identical
/// results. Borrows its buffers, programs and host memory for `'a`.
pub struct Sequence<'a> {
    handle: sys::vyre_sequence,
    ctx: Arc<ContextInner>,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for Sequence<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sequence({:#x})", self.handle.bits)
    }
}

impl Context {
    /// Validates `steps` and builds a sequence; `repeat` runs a block of
    /// them several times.
    pub fn sequence<'a>(
        &self,
        steps: Vec<Step<'a>>,
        repeat: Option<Repeat>,
    ) -> Result<Sequence<'a>> {
        const CALL: &str = "Context::sequence";
        for (i, step) in steps.iter().enumerate() {
            if let Some(d) = &step.dispatch {
                d.args.check(CALL)?;
                if !d.args.host.is_empty() {
                    return Err(Error::usage(
                        Status::InvalidArgument,
                        CALL,
                        format!(
                            "step {i} binds host memory, but sequence dispatch steps take \
                             resident buffers only. Fix: upload the data with a Step::upload \
                             into a buffer and bind the buffer."
                        ),
                    ));
                }
            }
        }
        // The dispatch descriptors, then the steps pointing at them.
        let descs: Vec<Option<sys::vyre_dispatch_desc>> = steps
            .iter()
            .map(|s| s.dispatch.as_ref().map(Dispatch::raw))
            .collect();
        let raw: Vec<sys::vyre_sequence_step> = steps
            .iter()
            .zip(&descs)
            .map(|(s, d)| sys::vyre_sequence_step {
                dispatch: d.as_ref().map_or(std::ptr::null(), |d| d as *const _),
                ..s.raw
            })
            .collect();
        let repeat = repeat.unwrap_or(Repeat {
            first: 0,
            count: 0,
            times: 0,
        });
        let desc = sys::vyre_sequence_desc {
            repeat_count: repeat.times,
            steps: if raw.is_empty() {
                std::ptr::null()
            } else {
                raw.as_ptr()
            },
            step_count: raw.len(),
            repeat_first: repeat.first,
            repeat_step_count: repeat.count,
            ..Default::default()
        };
        let mut handle = sys::vyre_sequence::default();
        // SAFETY: the descriptor's pointers are valid for the call (the
        // library copies the dispatch descriptors); host memory stays
        // borrowed by the Sequence for 'a.
        check(
            unsafe { sys::vyre_sequence_create(self.raw(), &desc, &mut handle) },
            "vyre_sequence_create",
        )?;
        Ok(Sequence {
            handle,
            ctx: Arc::clone(&self.inner),
            _borrow: PhantomData,
        })
    }
}

impl<'a> Sequence<'a> {
    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_sequence {
        self.handle
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    /// Runs the steps eagerly (one stream, one synchronisation at the end).
    pub fn run(&mut self) -> Result<Timing> {
        let mut timing = sys::vyre_timing::default();
        // SAFETY: the handle is ours; host memory is borrowed for 'a, and
        // exclusively here (no graph of this sequence is alive).
        check(
            unsafe { sys::vyre_sequence_run(self.handle, &mut timing) },
            "vyre_sequence_run",
        )?;
        Ok(Timing::from_raw(&timing))
    }

    /// Captures the whole sequence as one graph (replay it with
    /// [`Graph::launch`]). The graph borrows the sequence mutably: its
    /// replays write the same host memory as [`run`](Self::run).
    pub fn record(&mut self) -> Result<Graph<'_>> {
        let mut handle = sys::vyre_graph::default();
        // SAFETY: a valid out-pointer.
        check(
            unsafe { sys::vyre_sequence_record(self.handle, &mut handle) },
            "vyre_sequence_record",
        )?;
        Ok(Graph {
            handle,
            ctx: Arc::clone(&self.ctx),
            _sequence: PhantomData,
        })
    }

    /// Destroys the sequence now and returns the library's answer.
    pub fn destroy(mut self) -> Result<()> {
        let handle = std::mem::take(&mut self.handle);
        // SAFETY: the handle is ours and destroyed once.
        check(
            unsafe { sys::vyre_sequence_destroy(handle) },
            "vyre_sequence_destroy",
        )
    }
}

impl Drop for Sequence<'_> {
    fn drop(&mut self) {
        if self.handle.bits != 0 {
            // SAFETY: the handle is ours; errors are ignored in drop.
            let _ = unsafe { sys::vyre_sequence_destroy(self.handle) };
        }
    }
}
