//! Graphs: a dispatch or a sequence recorded once and replayed at the cost
//! of one launch; loops of a graph on the device.

use std::marker::PhantomData;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::dispatch::Args;
use crate::error::{check, Result};
use crate::{Arg, Buffer, Context, Dispatch, Pending, Program, Timing};

/// A recorded CUDA graph. `Graph<'static>` comes from
/// [`Program::record`]; a graph recorded from a [`Sequence`](crate::Sequence)
/// borrows it (its host upload and download memory) for `'s`.
pub struct Graph<'s> {
    pub(crate) handle: sys::vyre_graph,
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) _sequence: PhantomData<&'s mut ()>,
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({:#x})", self.handle.bits)
    }
}

/// What [`Graph::info`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphInfo {
    /// Recorded from a sequence (no bindings to replay with).
    pub from_sequence: bool,
    pub node_count: u64,
    pub kernel_node_count: u64,
    /// Nodes of the graph run when the host inputs are unchanged (0: none).
    pub unchanged_input_node_count: u64,
    /// Element count of the next replay, and the largest allowed.
    pub element_count: u64,
    pub capacity_elements: u64,
    pub replays: u64,
    /// HOST bytes each replay uploads (when inputs changed) and reads back.
    pub host_input_bytes: u64,
    pub host_output_bytes: u64,
}

/// The kind of a graph node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphNodeKind {
    Kernel,
    Memcpy,
    Memset,
    /// Any other node type (the raw value).
    Other(u32),
}

/// What [`Graph::update_kernel_node`] changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelNodeUpdate {
    pub grid: Option<[u32; 3]>,
    pub scalars: Option<Vec<u64>>,
}

/// The inputs of a replay: one [`Arg`] per declared binding with the source
/// it was recorded with (HOST: data of the recorded byte lengths; RESIDENT:
/// the range to bind from now on), or none to keep the current ones; new
/// parameter words, scalars or element count, or none to keep them.
#[derive(Default)]
pub struct Replay<'a> {
    args: Option<Args>,
    params: Option<Vec<u32>>,
    scalars: Option<Vec<u64>>,
    element_count: u64,
    flags: u32,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a Replay only carries borrows of Pod slices and of Buffers.
unsafe impl Send for Replay<'_> {}
unsafe impl Sync for Replay<'_> {}

impl<'a> Replay<'a> {
    pub fn new() -> Replay<'a> {
        Replay::default()
    }
    /// Appends the entry of the next declared binding.
    pub fn arg(mut self, arg: impl Into<Arg<'a>>) -> Self {
        self.args.get_or_insert_with(Args::default).push(arg.into());
        self
    }
    pub fn args<A: Into<Arg<'a>>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        let all = self.args.get_or_insert_with(Args::default);
        for arg in args {
            all.push(arg.into());
        }
        self
    }
    /// New parameter words, kept for later replays.
    pub fn params(mut self, words: &[u32]) -> Self {
        self.params = Some(words.to_vec());
        self
    }
    /// New scalar values (raw 64-bit patterns), kept for later replays.
    pub fn scalars(mut self, values: &[u64]) -> Self {
        self.scalars = Some(values.to_vec());
        self
    }
    /// Elements the derived grid covers (1 ..= capacity; 0 keeps it).
    pub fn element_count(mut self, n: u64) -> Self {
        self.element_count = n;
        self
    }
    /// Record device events so the timing reports device_ns.
    pub fn device_timing(mut self, on: bool) -> Self {
        if on {
            self.flags |= sys::VYRE_DISPATCH_FLAG_DEVICE_TIMING;
        } else {
            self.flags &= !sys::VYRE_DISPATCH_FLAG_DEVICE_TIMING;
        }
        self
    }

    fn raw(&self) -> sys::vyre_graph_replay_desc {
        fn opt<T>(v: Option<&Vec<T>>) -> (*const T, usize) {
            match v {
                Some(v) if !v.is_empty() => (v.as_ptr(), v.len()),
                // Empty or absent: NULL, which keeps the current values.
                _ => (std::ptr::null(), 0),
            }
        }
        let (bindings, binding_count) = opt(self.args.as_ref().map(|a| &a.raw));
        let (param_words, param_word_count) = opt(self.params.as_ref());
        let (scalars, scalar_count) = opt(self.scalars.as_ref());
        sys::vyre_graph_replay_desc {
            flags: self.flags,
            bindings,
            binding_count,
            param_words,
            param_word_count,
            scalars,
            scalar_count,
            element_count: self.element_count,
            ..Default::default()
        }
    }

    fn check(&self, call: &'static str) -> Result<()> {
        self.args.as_ref().map_or(Ok(()), |a| a.check(call))
    }

    fn host(&self) -> &[crate::host::HostRange] {
        self.args.as_ref().map_or(&[], |a| &a.host)
    }
}

impl Program {
    /// Records `dispatch` as a graph (launching nothing). HOST bindings are
    /// sample inputs that fix each binding's byte length; the graph does not
    /// keep them.
    pub fn record(&self, dispatch: &Dispatch<'_>) -> Result<Graph<'static>> {
        dispatch.args.check("Program::record")?;
        let desc = dispatch.raw();
        let mut handle = sys::vyre_graph::default();
        // SAFETY: the descriptor's pointers are valid for the call.
        check(
            unsafe { sys::vyre_graph_record(self.handle, &desc, &mut handle) },
            "vyre_graph_record",
        )?;
        Ok(Graph {
            handle,
            ctx: Arc::clone(&self.ctx),
            _sequence: PhantomData,
        })
    }
}

impl<'s> Graph<'s> {
    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_graph {
        self.handle
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    /// Replays with nothing changed (`desc` NULL: a graph without HOST
    /// bindings) and waits.
    pub fn launch(&self) -> Result<Timing> {
        let mut timing = sys::vyre_timing::default();
        // SAFETY: NULL desc is allowed; a valid out-pointer.
        check(
            unsafe { sys::vyre_graph_replay(self.handle, std::ptr::null(), &mut timing) },
            "vyre_graph_replay",
        )?;
        Ok(Timing::from_raw(&timing))
    }

    /// Replays and waits; HOST outputs are written before it returns.
    pub fn replay(&self, mut replay: Replay<'_>) -> Result<Timing> {
        self.replay_with(&mut replay)
    }

    /// As [`replay`](Self::replay), keeping the descriptor for reuse.
    pub fn replay_with(&self, replay: &mut Replay<'_>) -> Result<Timing> {
        replay.check("Graph::replay")?;
        let desc = replay.raw();
        let mut timing = sys::vyre_timing::default();
        // SAFETY: the descriptor's pointers are valid for the call; outputs
        // are borrowed mutably by `replay`.
        check(
            unsafe { sys::vyre_graph_replay(self.handle, &desc, &mut timing) },
            "vyre_graph_replay",
        )?;
        Ok(Timing::from_raw(&timing))
    }

    /// Enqueues a replay; HOST inputs are read before it returns, HOST
    /// outputs written by [`Pending::wait`]. The pending borrows the graph
    /// and the host memory.
    pub fn replay_async<'p>(&'p self, replay: Replay<'p>) -> Result<Pending<'p>> {
        self.enqueue(replay, "Graph::replay_async", "vyre_graph_replay_async", |desc, out| {
            // SAFETY: as for replay; host memory stays borrowed for 'p.
            unsafe { sys::vyre_graph_replay_async(self.handle, desc, out) }
        })
    }

    /// Enqueues a replay ordered on a caller's CUDA stream
    /// (`vyre_graph_launch`): `cu_stream` is a `CUstream` as an integer, 1
    /// (legacy) or 2 (per-thread); 0 is refused. The graph starts after the
    /// work already on the stream, and later work on it starts after the
    /// graph; otherwise as [`Graph::replay_async`].
    pub fn launch_on_stream<'p>(&'p self, replay: Replay<'p>, cu_stream: u64) -> Result<Pending<'p>> {
        self.enqueue(replay, "Graph::launch_on_stream", "vyre_graph_launch", |desc, out| {
            // SAFETY: as for replay_async; the stream is an integer the
            // library checks and the driver uses.
            unsafe { sys::vyre_graph_launch(self.handle, desc, cu_stream, out) }
        })
    }

    /// The asynchronous replays: checks `replay`, lets `call` enqueue it
    /// with its descriptor and the pending's out-pointer, and wraps the
    /// pending, which borrows the graph and the host memory.
    fn enqueue<'p>(
        &'p self,
        replay: Replay<'p>,
        what: &'static str,
        function: &'static str,
        call: impl FnOnce(&sys::vyre_graph_replay_desc, &mut sys::vyre_pending) -> sys::vyre_status,
    ) -> Result<Pending<'p>> {
        replay.check(what)?;
        let desc = replay.raw();
        let mut handle = sys::vyre_pending::default();
        check(call(&desc, &mut handle), function)?;
        Ok(Pending::new(
            handle,
            Some(Arc::clone(&self.ctx)),
            replay.host(),
        ))
    }

    /// Node `index` as the next replay runs it (`vyre_graph_node_info_get`):
    /// its kind, the raw `CUgraphNode`/`CUgraphExec` for interop, and a
    /// kernel's or memset's parameters (the raw struct; `arguments` holds
    /// the first `argument_count` slots).
    pub fn node_info(&self, index: u64) -> Result<sys::vyre_graph_node_info> {
        let mut info = sys::vyre_graph_node_info::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_graph_node_info_get(self.handle, index, &mut info) },
            "vyre_graph_node_info_get",
        )?;
        Ok(info)
    }

    /// Changes node `index` (a KERNEL or MEMSET node) for later replays,
    /// without capturing again (`vyre_graph_node_info_set`, checked): `info`
    /// is what [`node_info`](Self::node_info) gave for that node with the
    /// fields to change edited (read, edit, set); `node_info` then reports
    /// what was set. The library checks it: the kind and function stay the
    /// node's, grid, block and shared memory within the device's limits; a
    /// kernel's pointer slots (bindings, the parameter-word block) keep
    /// their values (rebind through [`Replay::arg`] instead) and a SCALAR32
    /// slot's high half is 0; a memset's range lies inside one device
    /// allocation of the graph's context. Each refusal is
    /// [`Status::InvalidArgument`](crate::Status::InvalidArgument) (limits:
    /// `LimitExceeded`) with a Fix, and changes nothing. Kernel nodes of a
    /// captured graph ([`Capture::end`](crate::Capture::end)) cannot be set.
    ///
    /// The graph keeps only its own bindings alive: a memset moved into a
    /// buffer the graph does not bind writes it at every replay, so keep
    /// that buffer alive while the graph may run. A later replay that
    /// rebinds, passes scalars or changes the element count rewrites those
    /// slots (and an OUTPUT binding's zeroing memset).
    pub fn set_node_info(&self, index: u64, info: &sys::vyre_graph_node_info) -> Result<()> {
        // SAFETY: flags 0: the library checks every pointer the node takes.
        unsafe { self.set_node_info_flags(index, info, 0) }
    }

    /// As [`set_node_info`](Self::set_node_info) with
    /// `VYRE_GRAPH_NODE_SET_RAW`: a kernel node takes every argument slot as
    /// given, pointer slots included, and any dynamic shared memory the
    /// device allows; a memset node takes its destination without the
    /// library asking the driver whose memory it is. The kind, function,
    /// argument count and the device's limits are still checked.
    ///
    /// # Safety
    /// Every pointer slot and memset destination set must address device
    /// memory that is allocated, large enough for what the kernel or memset
    /// touches, and kept so for as long as the graph may run (the graph
    /// keeps nothing a raw set points to alive); shared memory set below
    /// what the kernel uses is the caller's to answer for.
    pub unsafe fn set_node_info_raw(&self, index: u64, info: &sys::vyre_graph_node_info) -> Result<()> {
        // SAFETY: the caller upholds the raw set's contract.
        unsafe { self.set_node_info_flags(index, info, sys::VYRE_GRAPH_NODE_SET_RAW) }
    }

    /// # Safety
    /// With `VYRE_GRAPH_NODE_SET_RAW`, as for `set_node_info_raw`.
    unsafe fn set_node_info_flags(
        &self,
        index: u64,
        info: &sys::vyre_graph_node_info,
        flags: u32,
    ) -> Result<()> {
        // SAFETY: a valid pointer to the caller's struct (its struct_size as
        // given: the library refuses one it does not know).
        check(
            unsafe { sys::vyre_graph_node_info_set(self.handle, index, info, flags) },
            "vyre_graph_node_info_set",
        )
    }

    pub fn info(&self) -> Result<GraphInfo> {
        let mut i = sys::vyre_graph_info::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_graph_info_get(self.handle, &mut i) },
            "vyre_graph_info_get",
        )?;
        Ok(GraphInfo {
            from_sequence: i.from_sequence != 0,
            node_count: i.node_count,
            kernel_node_count: i.kernel_node_count,
            unchanged_input_node_count: i.unchanged_input_node_count,
            element_count: i.element_count,
            capacity_elements: i.capacity_elements,
            replays: i.replays,
            host_input_bytes: i.host_input_bytes,
            host_output_bytes: i.host_output_bytes,
        })
    }

    /// The kind of node `index` (0 .. node_count, in the order work runs).
    pub fn node_kind(&self, index: u64) -> Result<GraphNodeKind> {
        let mut kind: sys::vyre_graph_node_kind = 0;
        // SAFETY: a valid out-pointer.
        check(
            unsafe { sys::vyre_graph_node_kind_get(self.handle, index, &mut kind) },
            "vyre_graph_node_kind_get",
        )?;
        Ok(match kind {
            sys::VYRE_GRAPH_NODE_KERNEL => GraphNodeKind::Kernel,
            sys::VYRE_GRAPH_NODE_MEMCPY => GraphNodeKind::Memcpy,
            sys::VYRE_GRAPH_NODE_MEMSET => GraphNodeKind::Memset,
            other => GraphNodeKind::Other(other),
        })
    }

    /// The kinds of every node, in order.
    pub fn node_kinds(&self) -> Result<Vec<GraphNodeKind>> {
        (0..self.info()?.node_count)
            .map(|i| self.node_kind(i))
            .collect()
    }

    /// Changes the grid and/or scalars of kernel node `index` for later
    /// replays, without capturing again.
    pub fn update_kernel_node(&self, index: u64, update: &KernelNodeUpdate) -> Result<()> {
        let mut raw = sys::vyre_kernel_node_update::default();
        if let Some(grid) = update.grid {
            raw.flags |= sys::VYRE_KERNEL_NODE_UPDATE_GRID;
            raw.grid = grid;
        }
        if let Some(scalars) = &update.scalars {
            raw.flags |= sys::VYRE_KERNEL_NODE_UPDATE_SCALARS;
            raw.scalars = if scalars.is_empty() {
                std::ptr::null()
            } else {
                scalars.as_ptr()
            };
            raw.scalar_count = scalars.len();
        }
        // SAFETY: the update's pointers are valid for the call.
        check(
            unsafe { sys::vyre_graph_kernel_node_update(self.handle, index, &raw) },
            "vyre_graph_kernel_node_update",
        )
    }

    /// A loop graph over this graph (`vyre_graph_loop_create`): one launch
    /// runs this graph (the body) on the device again and again while it
    /// asks for another round, at most `max_iterations` (>= 1) times, with
    /// no host round trip per iteration (a CUDA conditional WHILE node:
    /// CUDA 12.4+ drivers, else [`Status::DriverTooOld`](crate::Status::DriverTooOld)).
    ///
    /// `condition` is a u32 word of a resident [`Buffer`] of the body's
    /// context at a 4-byte-aligned byte offset: the loop zeroes it before
    /// each iteration and runs another while the body left it non-zero (a
    /// fixpoint kernel writes any non-zero value when it changed something;
    /// no atomics needed). Each launch runs the body at least once; after
    /// it the word is 0 when the body asked for no more, non-zero when the
    /// bound stopped it. `count`, when given, is a u32 word (another word,
    /// possibly of the same buffer) where each launch leaves the number of
    /// iterations it ran.
    ///
    /// The loop runs the body as it stands now (bindings, rebinding, node
    /// changes made so far; later ones do not reach it) and keeps it, its
    /// buffers and programs, and the condition and count buffers alive in
    /// the library, so `self` may be dropped first. Launch it with
    /// [`launch`](Self::launch), an empty [`Replay`] or the asynchronous
    /// replays: it takes no bindings, parameter words, scalars or element
    /// count. Its nodes are the words' reset (a KERNEL) and the loop (a
    /// CONDITIONAL).
    /// The loop carries the body's lifetime `'s` (a sequence's host
    /// memory), not a borrow of the body.
    ///
    /// Refused ([`Status::InvalidArgument`](crate::Status::InvalidArgument),
    /// with a Fix): `max_iterations` 0, a misaligned offset, the count on
    /// the condition's word, a body with HOST bindings (record with
    /// resident ones), a buffer of another context; an offset past its
    /// buffer is [`Status::OutOfRange`](crate::Status::OutOfRange).
    pub fn loop_while(
        &self,
        condition: (&Buffer, u64),
        max_iterations: u32,
        count: Option<(&Buffer, u64)>,
    ) -> Result<Graph<'s>> {
        let (count_buffer, count_offset) =
            count.map_or((sys::vyre_buffer::default(), 0), |(b, o)| (b.handle, o));
        let desc = sys::vyre_graph_loop_desc {
            max_iterations,
            condition_buffer: condition.0.handle,
            condition_offset: condition.1,
            count_buffer,
            count_offset,
            ..Default::default()
        };
        let mut handle = sys::vyre_graph::default();
        // SAFETY: handles we hold (the buffers are borrowed for the call; the
        // library keeps what the loop uses alive), a valid descriptor and
        // out-pointer.
        check(
            unsafe { sys::vyre_graph_loop_create(self.handle, &desc, &mut handle) },
            "vyre_graph_loop_create",
        )?;
        Ok(Graph {
            handle,
            ctx: Arc::clone(&self.ctx),
            _sequence: PhantomData,
        })
    }

    /// Destroys the graph now and returns the library's answer.
    pub fn destroy(mut self) -> Result<()> {
        let handle = std::mem::take(&mut self.handle);
        // SAFETY: the handle is ours and destroyed once.
        check(
            unsafe { sys::vyre_graph_destroy(handle) },
            "vyre_graph_destroy",
        )
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if self.handle.bits != 0 {
            // SAFETY: the handle is ours; errors are ignored in drop.
            let _ = unsafe { sys::vyre_graph_destroy(self.handle) };
        }
    }
}
