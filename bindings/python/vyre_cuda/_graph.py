"""Graphs and sequences: Graph, the Sequence steps, and Sequence."""

from __future__ import annotations

import ctypes
import threading
from ctypes import byref
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union
# typing.Sequence as _Seq: this package's Sequence is the vyre sequence.
from typing import Sequence as _Seq

from ._cdefs import (GRAPH_NODE_MAX_ARGUMENTS, GRAPH_NODE_SET_RAW, KERNEL_NODE_UPDATE_GRID,
                     KERNEL_NODE_UPDATE_SCALARS, BufferHandle, CaptureDescStruct, CaptureMode,
                     Dim3, GraphHandle, GraphInfoStruct, GraphNodeInfoStruct, GraphNodeKind,
                     GraphLoopDescStruct, GraphReplayDescStruct,
                     KernelNodeUpdateStruct, PendingHandle, ProgramHandle, SequenceDescStruct,
                     SequenceHandle, SequenceStepStruct, StepKind, TimingStruct, _c_enum, _new,
                     _struct_dict, _unsigned)
from . import _loader
from ._errors import VyreError, _call
from ._host_memory import _readable, _writable
from ._context import Buffer, Context, _Object
from ._program import (Outputs, Pending, Program, _Imports, _dim3, _marshal_bindings,
                       _resident_range, _scalar_array, _u32_array)


# ---------------------------------------------------------------------------
# Graphs and sequences
# ---------------------------------------------------------------------------

class Graph(_Object):
    """A dispatch (Program.record) or a sequence (Sequence.record) recorded
    once as a CUDA graph and replayed at the cost of one launch.

    Dispatch graphs: HOST bindings at record time are sample data; every
    replay passes host data of the same byte lengths (else VyreError with
    Status.SHAPE_MISMATCH). RESIDENT bindings are kept by address; a replay
    may rebind them to other ranges of the same context. Replays may also
    change the parameter words, the scalars and (for a graph recorded with a
    derived grid) the element count, up to info()["capacity_elements"].

    Sequence graphs replay the whole sequence with replay() and no arguments;
    they return the sequence's DOWNLOAD results. Loop graphs (Graph.loop)
    and captured graphs (Context.capture) replay with no arguments too.

    The graph keeps the Python objects it uses (program, bound buffers, the
    sequence's host memory) alive until close().
    """

    _handle_type = GraphHandle
    _destroy = "vyre_graph_destroy"
    # Defaults, so a closed or half-built Graph still reports INVALID_HANDLE.
    _program: Optional[Program] = None
    _decls: Any = ()
    _residents: Any = ()
    _sequence_keep: Any = None
    _downloads: Any = ()
    _download_outs: Any = ()  # their host objects (fixed at creation), for the fast path
    _imports: Optional[_Imports] = None
    _capture_keep: Any = None  # a captured graph's programs, buffers and wraps
    _loop_keep: Any = None  # a loop graph's _LoopKeep: its body and words

    def __init__(self, program: Program, bindings: _Seq[Any], params: Iterable[int] = (),
                 scalars: Iterable[Union[int, float]] = (), grid: Dim3 = None,
                 block: Dim3 = None, element_count: int = 0, fixpoint_iterations: int = 1,
                 shared_memory_bytes: int = 0, flags: int = 0,
                 stream: Optional[int] = None) -> None:
        """Records `program` dispatched with these arguments (see
        Program.dispatch); nothing runs."""
        super().__init__(0, program.context)
        bindings = list(bindings)
        desc, keep, keep_out, _, imports = program._prepare(
            bindings, params, scalars, grid, block, element_count, fixpoint_iterations,
            shared_memory_bytes, flags, stream)
        handle = GraphHandle()
        try:
            _call("vyre_graph_record", program._h(), byref(desc), byref(handle))
        except BaseException:
            imports.release()
            raise
        del keep, keep_out  # the sample inputs were copied; nothing else is kept
        self._bits = handle.bits
        self._program = program
        self._decls = program.bindings
        self._residents = ([r.buffer for r in map(_resident_range, bindings) if r is not None]
                           + list(imports))
        # Foreign arrays are bound by address: kept until a rebind or close().
        self._imports = imports

    @classmethod
    def _of_sequence(cls, bits, sequence):
        graph = cls.__new__(cls)
        _Object.__init__(graph, bits, sequence.context)
        # The library reads the sequence's host memory at every replay, even
        # once the sequence itself is closed.
        graph._sequence_keep = sequence._keep
        graph._downloads = sequence._downloads
        return graph

    @classmethod
    def _of_capture(cls, bits, context, keep):
        graph = cls.__new__(cls)
        _Object.__init__(graph, bits, context)
        # The library keeps the captured dispatches' programs and buffers
        # alive, but a closed handle makes replays stale: keep the objects.
        graph._capture_keep = keep
        return graph

    @classmethod
    def _of_loop(cls, bits, body, keep):
        graph = cls.__new__(cls)
        _Object.__init__(graph, bits, body.context)
        graph._loop_keep = keep
        return graph

    @property
    def context(self) -> Context:
        return self._context

    @property
    def program(self) -> Optional[Program]:
        """The recorded Program (None for a sequence or captured graph)."""
        return self._program

    @property
    def from_sequence(self) -> bool:
        return self._sequence_keep is not None

    @property
    def from_capture(self) -> bool:
        """True for a graph of captured work (Context.capture): replay() it
        with no arguments."""
        return self._capture_keep is not None

    @property
    def body(self) -> Optional["Graph"]:
        """For a loop graph (Graph.loop): the Graph it loops over (kept
        referenced while the loop lives); None for any other graph."""
        return self._loop_keep.body if self._loop_keep is not None else None

    def loop(self, condition: Any, max_iterations: int, count: Any = None) -> "Graph":
        """A new Graph that runs this one (its body) again and again on the
        device, in one launch, while the body leaves the condition word
        non-zero, at most max_iterations times (vyre_graph_loop_create; a
        CUDA conditional WHILE node, CUDA 12.4+ drivers):

            body = prog.record([data, (flags, 0, 4)], params=[n])
            loop = body.loop(condition=(flags, 0), max_iterations=100,
                             count=(flags, 4))
            loop.replay()    # runs body until it clears flags[0], <= 100 times

        condition: the u32 condition word, a Buffer (offset 0), a
          (Buffer, offset) / (Buffer, offset, length) tuple or a BufferRange
          (its offset): RESIDENT memory of this graph's context, the offset
          4-byte aligned. The loop zeroes the word before each iteration;
          the body writes any non-zero value to it to ask for another (many
          threads may write it; no atomics needed). Each launch runs the body
          at least once; after it the word is 0 when the body asked for no
          more, non-zero when max_iterations stopped it.
        max_iterations: iterations per launch at most (>= 1).
        count: None, or a u32 word given as `condition` is (its own word,
          possibly in the same buffer) where each launch leaves the number
          of iterations it ran.

        The loop runs the body as it stands now (bindings, rebinding and
        node changes made so far): later replays, rebinds or node changes
        of the body do not reach it. Replay the loop with replay(),
        replay_async() or launch() and no bindings, params, scalars or
        element count. It keeps this Graph, what it uses and the word
        buffers referenced (the body may be closed meanwhile); closing the
        word buffers or the body's buffers makes its replays raise VyreError
        STALE_HANDLE.

        Refused (VyreError, with a Fix): max_iterations 0, a misaligned
        offset, the count on the condition's word, a body with HOST bindings
        or a buffer of another context (INVALID_ARGUMENT); a word past its
        buffer's end (OUT_OF_RANGE); a driver older than CUDA 12.4
        (DRIVER_TOO_OLD). A library without the call raises
        LibraryLoadError with a Fix."""
        _loader._require("vyre_graph_loop_create", "Graph.loop")
        cond_buffer, cond_offset = _loop_word(condition, "Graph.loop condition")
        desc = _new(GraphLoopDescStruct,
                    max_iterations=_unsigned(max_iterations, 32, "Graph.loop max_iterations"),
                    condition_buffer=BufferHandle(cond_buffer.handle),
                    condition_offset=cond_offset)
        count_buffer = None
        if count is not None:
            count_buffer, count_offset = _loop_word(count, "Graph.loop count")
            desc.count_buffer = BufferHandle(count_buffer.handle)
            desc.count_offset = count_offset
        handle = GraphHandle()
        _call("vyre_graph_loop_create", self._h(), byref(desc), byref(handle))
        return Graph._of_loop(handle.bits, self, _LoopKeep(self, cond_buffer, count_buffer))

    def _replay_desc(self, bindings, params, scalars, element_count, flags, stream=None):
        """Returns (desc, keep, keep_out, outputs, residents, imports)."""
        keep, keep_out, residents = [], [], None
        imports = _Imports()
        desc = _new(GraphReplayDescStruct, flags=_unsigned(flags, 32, "flags"),
                    element_count=_unsigned(element_count, 64, "element_count"))
        if self.from_sequence:
            outputs = Outputs(step.out for step in self._downloads)
            keep_out.append(self._sequence_keep)
        else:
            outputs = Outputs([None] * len(self._decls))
        if bindings is not None:
            structs, keep, bound_out, outputs, residents, imports = _marshal_bindings(
                self._decls, bindings, self._context, stream)
            keep_out += bound_out
            keep.append(structs)
            # Non-NULL even for an empty list: "these bindings", not "keep them".
            desc.bindings = structs
            desc.binding_count = len(outputs)
        elif self._imports:
            # Foreign arrays bound earlier: their producers may have written
            # them since; this replay waits for their streams.
            for s in self._imports.streams():
                self._context.wait_stream(s)
        if params is not None:
            words, word_count = _u32_array(params, "params")
            keep.append(words)
            desc.param_words = words
            desc.param_word_count = word_count
        if scalars is not None:
            c_scalars, scalar_count = _scalar_array(
                scalars, self._program.params if self._program else None, "scalars")
            keep.append(c_scalars)
            desc.scalars = c_scalars
            desc.scalar_count = scalar_count
        return desc, keep, keep_out, outputs, residents, imports

    def _rebound(self, residents, imports):
        """After a replay that passed bindings: the graph now uses these;
        returns the foreign arrays no longer bound (to release once the
        replay is done)."""
        if residents is None:
            return None
        self._residents = residents
        old, self._imports = self._imports, imports
        return old

    def replay(self, bindings: Optional[_Seq[Any]] = None,
               params: Optional[Iterable[int]] = None,
               scalars: Optional[Iterable[Union[int, float]]] = None, element_count: int = 0,
               flags: int = 0, stream: Optional[int] = None) -> Outputs:
        """Replays the graph and waits.

        bindings: None keeps the current resident ranges (a graph without
          HOST bindings only); else one entry per declared binding with the
          source it was recorded with, as for Program.dispatch: host data of
          the recorded byte lengths, or a Buffer / BufferRange /
          (Buffer, offset, length) to bind from now on, or a foreign device
          array (kept referenced until the next rebind or close()).
        params: new u32 parameter words (kept for later replays); None keeps.
        scalars: new scalar values (kept); None keeps.
        element_count: elements the derived grid covers (1 .. capacity
          class); 0 keeps the current count.
        flags: 0 or DISPATCH_FLAG_DEVICE_TIMING.

        Returns Outputs with .timing: per binding, the host object holding
        its result (or None); for a sequence graph, the DOWNLOAD steps'
        host objects in step order."""
        fast = _loader._fast
        if (fast is not None and bindings is None and self._sequence_keep is None
                and not self._imports):
            # A dispatch graph keeping its ranges: the compiled fast path.
            result = fast.graph_replay(self._bits, len(self._decls), params, scalars,
                                       self._program.params if self._program else None,
                                       element_count, flags, False)
            if result is not NotImplemented:
                return result
        desc, keep, keep_out, outputs, residents, imports = self._replay_desc(
            bindings, params, scalars, element_count, flags, stream)
        timing = _new(TimingStruct)
        try:
            _call("vyre_graph_replay", self._h(), byref(desc), byref(timing))
        except BaseException:
            imports.release()
            raise
        del keep, keep_out
        old = self._rebound(residents, imports)
        if old is not None:
            old.release()  # the replay has completed
        outputs.timing = _struct_dict(timing)
        return outputs

    def replay_async(self, bindings: Optional[_Seq[Any]] = None,
                     params: Optional[Iterable[int]] = None,
                     scalars: Optional[Iterable[Union[int, float]]] = None,
                     element_count: int = 0, flags: int = 0,
                     stream: Optional[int] = None) -> Pending:
        """Enqueues a replay and returns a Pending at once (arguments as for
        replay). Host inputs are read before it returns; host outputs are
        written by Pending.wait(). A graph with HOST bindings allows one
        unwaited asynchronous replay at a time."""
        fast = _loader._fast
        if (fast is not None and bindings is None and self._sequence_keep is None
                and not self._imports):
            bits = fast.graph_replay(self._bits, len(self._decls), params, scalars,
                                     self._program.params if self._program else None,
                                     element_count, flags, True)
            if bits is not NotImplemented:
                return Pending(bits, self, [], Outputs([None] * len(self._decls)))
        return self._enqueue("vyre_graph_replay_async", (), bindings, params, scalars,
                             element_count, flags, stream)

    def launch(self, stream: int, bindings: Optional[_Seq[Any]] = None,
               params: Optional[Iterable[int]] = None,
               scalars: Optional[Iterable[Union[int, float]]] = None,
               element_count: int = 0, flags: int = 0) -> Pending:
        """Replays ordered on a caller's CUDA stream (vyre_graph_launch):
        `stream` is a CUstream as an int (a CuPy stream's ptr, a PyTorch
        stream's cuda_stream), STREAM_LEGACY or STREAM_PER_THREAD (0 is
        refused). The graph starts after the work already on `stream`, and
        work enqueued there later starts after the graph; otherwise as
        replay_async (host outputs are written by Pending.wait()).

        `stream` also orders foreign arrays bound here, as replay_async's
        `stream` does. bindings, params, scalars, element_count and flags
        are replay's. A library without vyre_graph_launch raises
        LibraryLoadError with a Fix."""
        _loader._require("vyre_graph_launch", "Graph.launch")
        return self._enqueue("vyre_graph_launch", (_unsigned(stream, 64, "stream"),), bindings,
                             params, scalars, element_count, flags, stream)

    def _enqueue(self, function: str, extra: tuple, bindings, params, scalars,
                 element_count: int, flags: int, stream: Optional[int]) -> Pending:
        # The ctypes path of replay_async and launch: `function` takes the
        # graph, the descriptor, `extra` and the pending's out-pointer.
        desc, keep, keep_out, outputs, residents, imports = self._replay_desc(
            bindings, params, scalars, element_count, flags, stream)
        handle = PendingHandle()
        try:
            _call(function, self._h(), byref(desc), *extra, byref(handle))
        except BaseException:
            imports.release()
            raise
        del keep
        # Arrays this replay unbinds go when it is done (earlier replays ran
        # before it, on the same stream).
        old = self._rebound(residents, imports)
        pending = Pending(handle.bits, self, keep_out, outputs, imports=old)
        (self._imports or _Imports()).signal(self._context)
        return pending

    def info(self) -> Dict[str, Any]:
        """dict(from_sequence, context, node_count, kernel_node_count,
        unchanged_input_node_count, element_count, capacity_elements, replays,
        host_input_bytes, host_output_bytes); see vyre_graph_info."""
        info = _new(GraphInfoStruct)
        _call("vyre_graph_info_get", self._h(), byref(info))
        d = _struct_dict(info)
        d["from_sequence"] = bool(info.from_sequence)
        return d

    def node_kind(self, index: int) -> Union[GraphNodeKind, int]:
        """The GraphNodeKind of node `index` (nodes numbered in run order)."""
        kind = _c_enum()
        _call("vyre_graph_node_kind_get", self._h(), _unsigned(index, 64, "index"),
              byref(kind))
        try:
            return GraphNodeKind(kind.value)
        except ValueError:
            return kind.value

    def node_info(self, index: int) -> Dict[str, Any]:
        """Node `index` as the next replay runs it (vyre_graph_node_info_get):
        dict(kind, cu_graph_node, cu_graph_exec, cu_function, grid, block,
        shared_memory_bytes, argument_count, arguments (the first
        argument_count of GRAPH_NODE_MAX_ARGUMENTS 8-byte slots), memset_dst,
        memset_value, memset_element_size, memset_width, memset_height,
        memset_pitch). The raw handles are for interop with other CUDA code
        and live until the graph is closed."""
        info = _new(GraphNodeInfoStruct)
        _call("vyre_graph_node_info_get", self._h(), _unsigned(index, 64, "index"), byref(info))
        d = _struct_dict(info)
        try:
            d["kind"] = GraphNodeKind(info.kind)
        except ValueError:
            pass
        d["arguments"] = d["arguments"][:min(info.argument_count, len(d["arguments"]))]
        return d

    def set_node_info(self, index: int, info: Mapping[str, Any], raw: bool = False) -> None:
        """Changes node `index` for later replays without recording again
        (vyre_graph_node_info_set): read, edit, set.

            info = graph.node_info(k)
            info["arguments"][0] = vc.f32(2.5)     # a SCALAR32 slot
            info["grid"] = [4, 1, 1]
            graph.set_node_info(k, info)

        info: the dict node_info() returns, edited; keys left out keep the
          node's current values (node_info(index) is read first), so a
          partial dict such as {"memset_value": 7} works too. KERNEL nodes:
          grid, block, shared_memory_bytes and the argument slots (8-byte
          bit patterns: vyre_cuda.f32 / f64 for floats); cu_function and
          argument_count must stay. MEMSET nodes: memset_dst, memset_value,
          memset_element_size (1, 2 or 4), memset_width (elements);
          memset_height must stay 1. Other kinds, and kernels of captured
          work, are refused.
        raw: False checks the change against what the library knows (a
          kernel's pointer slots must keep their values: rebind through
          replay(bindings); a memset must stay inside one allocation of the
          context); True (GRAPH_NODE_SET_RAW) takes the fields as given,
          and the caller keeps any memory they point to allocated while the
          graph may run.

        A refusal raises VyreError (INVALID_ARGUMENT or LIMIT_EXCEEDED, with
        a Fix) and changes nothing. A later replay that rebinds, passes
        scalars or changes the element count rewrites those slots (see
        vyre_graph_node_info_set). A library without the call raises
        LibraryLoadError with a Fix."""
        _loader._require("vyre_graph_node_info_set", "Graph.set_node_info")
        if not isinstance(info, Mapping):
            raise TypeError(f"Graph.set_node_info: info is {type(info).__name__}, not a dict. "
                            f"Fix: pass the dict node_info({index}) returns, edited.")
        index = _unsigned(index, 64, "index")
        current = _new(GraphNodeInfoStruct)
        _call("vyre_graph_node_info_get", self._h(), index, byref(current))
        unknown = sorted(set(info) - _NODE_INFO_FIELDS)
        if unknown:
            raise ValueError(f"Graph.set_node_info: unknown field(s) {unknown}. Fix: pass the "
                             f"keys node_info() returns ({sorted(_NODE_INFO_FIELDS)}).")
        for name, value in info.items():
            what = f"Graph.set_node_info {name}"
            if name in ("grid", "block"):
                values = list(value)
                if len(values) != 3:
                    raise ValueError(f"{what} has {len(values)} sizes. Fix: pass 3 "
                                     f"(x, y, z), as node_info() gives.")
                getattr(current, name)[:] = [_unsigned(v, 32, what) for v in values]
            elif name == "arguments":
                values = list(value)
                if len(values) > GRAPH_NODE_MAX_ARGUMENTS:
                    raise ValueError(f"{what}: {len(values)} slots. Fix: pass at most "
                                     f"GRAPH_NODE_MAX_ARGUMENTS ({GRAPH_NODE_MAX_ARGUMENTS}); "
                                     f"later slots keep their values.")
                for i, v in enumerate(values):
                    current.arguments[i] = _unsigned(v, 64, f"{what}[{i}]")
            elif name in _NODE_INFO_U32:
                setattr(current, name, _unsigned(value, 32, what))
            else:
                setattr(current, name, _unsigned(value, 64, what))
        _call("vyre_graph_node_info_set", self._h(), index, byref(current),
              GRAPH_NODE_SET_RAW if raw else 0)

    def node_kinds(self) -> List[Union[GraphNodeKind, int]]:
        """The GraphNodeKind of every node, in run order."""
        return [self.node_kind(i) for i in range(self.info()["node_count"])]

    def kernel_nodes(self) -> List[int]:
        """Indices of the KERNEL nodes, for update_kernel_node()."""
        return [i for i, kind in enumerate(self.node_kinds()) if kind == GraphNodeKind.KERNEL]

    def update_kernel_node(self, index: int, grid: Dim3 = None,
                           scalars: Optional[Iterable[Union[int, float]]] = None) -> None:
        """Changes kernel node `index` for later replays without recording
        again: its grid (1-3 sizes) and/or its scalar parameters. At least one
        must be given."""
        update = _new(KernelNodeUpdateStruct)
        flags = 0
        keep = None
        if grid is not None:
            flags |= KERNEL_NODE_UPDATE_GRID
            update.grid[:] = _dim3(grid, "grid")
        if scalars is not None:
            flags |= KERNEL_NODE_UPDATE_SCALARS
            keep, count = _scalar_array(
                scalars, self._program.params if self._program else None, "scalars")
            update.scalars = keep
            update.scalar_count = count
        update.flags = flags
        _call("vyre_graph_kernel_node_update", self._h(), _unsigned(index, 64, "index"),
              byref(update))
        del keep

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.closed:
                self._residents = ()
                self._sequence_keep = None
                imports, self._imports = self._imports, None
                if imports is not None:
                    imports.release()
                keep, self._capture_keep = self._capture_keep, None
                if keep is not None:
                    keep.release()
                loop_keep, self._loop_keep = self._loop_keep, None
                if loop_keep is not None:
                    loop_keep.release()


def _loop_word(target, what):
    """(Buffer, offset) of a loop's condition or count word: a Buffer,
    (Buffer, offset[, length]) or a BufferRange / DeviceArray. The library
    checks the offset (alignment, range) and the buffer (resident, context)."""
    if isinstance(target, tuple) and not (target and isinstance(target[0], Buffer)):
        r = None
    else:
        r = _resident_range(target)
    if r is None:
        raise TypeError(f"{what}: {type(target).__name__} is not a word of resident memory. "
                        f"Fix: pass (Buffer, offset) of a u32 in a Buffer of the body's "
                        f"context (or the Buffer itself for offset 0).")
    return r.buffer, _unsigned(r.offset, 64, f"{what} offset")


class _LoopKeep:
    """What a loop graph uses (Graph.loop): its body Graph and, as the body
    stands when the loop is made, the body's program, bound buffers and
    sequence or capture objects (the body may rebind or close later), the
    condition and count buffers, and shares of the body's foreign-array
    wraps (closed once the body and every loop over it are)."""

    def __init__(self, body: "Graph", condition: Buffer, count: Optional[Buffer]) -> None:
        self.body = body
        capture = body._capture_keep
        inner = body._loop_keep  # a loop over a loop: what the inner one uses
        self.objects: List[Any] = [body._program, body._residents, body._sequence_keep,
                                   condition, count]
        self.imports: List[_Imports] = []
        if body._imports:
            self.imports.append(body._imports.share())
        for keep in (capture, inner):
            if keep is not None:
                self.objects.append(list(keep.objects))
                self.imports += [i.share() for i in keep.imports]
        if inner is not None:
            self.objects.append(inner.body)

    def release(self) -> None:
        self.objects = []
        imports, self.imports = self.imports, []
        for i in imports:
            i.release()


#: The keys of Graph.node_info's dict, and those of them that are 32-bit.
_NODE_INFO_FIELDS = frozenset(name for name, _ in GraphNodeInfoStruct._fields_
                              if name != "struct_size")
_NODE_INFO_U32 = frozenset(("kind", "shared_memory_bytes", "argument_count", "memset_value",
                            "memset_element_size"))


class _CaptureKeep:
    """What a capture's dispatches use: the Programs and Buffers (kept
    referenced while the graph may replay) and the wraps of foreign arrays
    (closed once the graph is)."""

    def __init__(self) -> None:
        self.objects: List[Any] = []
        self.imports: List[_Imports] = []

    def release(self) -> None:
        self.objects = []
        imports, self.imports = self.imports, []
        for i in imports:
            i.release()


class Capture:
    """An open capture of a Context's CUDA stream (vyre_capture_begin): the
    work other CUDA code enqueues on `stream` (CuPy, PyTorch, raw driver
    calls) and the library dispatches enqueued with dispatch() become one
    Graph, run only when it is replayed. Made by Context.capture():

        with ctx.capture() as cap:
            s = cupy.cuda.ExternalStream(cap.stream)   # or torch.cuda.ExternalStream
            with s:
                x_view += 1                             # CuPy work, captured
            cap.dispatch(prog, [da, db, dout], params=[n])
        graph = cap.graph                               # replay() it, launch() it
        graph.replay()

    The with-block ends the capture into `graph`; an exception inside it
    ends the capture and discards what was captured. Without a with-block,
    end() returns the graph (abort() discards it).

    One capture per context at a time (a second raises VyreError
    INVALID_STATE). While it is open, in THREAD_LOCAL mode (the default)
    the capturing thread must make no "unsafe" CUDA call: allocations,
    frees, module loads, synchronisations (most vyre calls that allocate or
    wait: ctx.alloc/upload, Buffer.download, Program.dispatch, closing a
    Buffer...); GLOBAL forbids them to every thread, RELAXED to none. Such
    a call fails and invalidates the capture, and end() then raises
    VyreError INVALID_STATE (the context can capture again). Create
    buffers, programs, foreign arrays and their views before the capture,
    and run foreign kernels once beforehand so their modules are loaded.

    Memory other code's captured work touches must stay allocated while the
    graph may run; the graph keeps the dispatches' Programs and Buffers."""

    _graph: Optional[Graph] = None
    _stream = 0
    _open = False

    def __init__(self, context: Context,
                 mode: Union[CaptureMode, str, int] = CaptureMode.THREAD_LOCAL,
                 param_bytes: int = 0) -> None:
        """Begins capturing (see Context.capture)."""
        _loader._require("vyre_capture_begin", "Context.capture")
        if isinstance(mode, str):
            try:
                mode = CaptureMode[mode.upper()]
            except KeyError:
                raise ValueError(f"Context.capture: unknown mode {mode!r}. Fix: use one of "
                                 f"{[m.name.lower() for m in CaptureMode]}.") from None
        self.context = context
        self.mode = CaptureMode(mode) if int(mode) in set(CaptureMode) else int(mode)
        self._keep = _CaptureKeep()
        desc = _new(CaptureDescStruct, mode=_unsigned(int(mode), 32, "mode"),
                    param_bytes=_unsigned(param_bytes, 64, "param_bytes"))
        stream = ctypes.c_uint64()
        _call("vyre_capture_begin", context._h(), byref(desc), byref(stream))
        self._stream = stream.value
        self._thread = threading.get_ident()
        self._open = True
        context._open_capture = self

    @property
    def stream(self) -> int:
        """The capture stream, a CUstream as an int (usable as
        cupy.cuda.ExternalStream(cap.stream), torch.cuda.ExternalStream(
        cap.stream)); 0 once the capture has ended. It is the context's own
        stream: do not pass it to Context.wait_stream / signal_stream or
        Graph.launch (refused: use dispatch())."""
        return self._stream if self._open else 0

    @property
    def open(self) -> bool:
        """True until end() or abort()."""
        return self._open

    @property
    def graph(self) -> Graph:
        """The Graph the capture ended into (after the with-block or end())."""
        if self._graph is None:
            state = "still open" if self._open else "was discarded"
            raise RuntimeError(f"Capture.graph: the capture {state}, so there is no graph. "
                               f"Fix: read it after the with-block (or end()) completed "
                               f"without an exception.")
        return self._graph

    def dispatch(self, program: Program, bindings: _Seq[Any], params: Iterable[int] = (),
                 scalars: Iterable[Union[int, float]] = (), grid: Dim3 = None,
                 block: Dim3 = None, element_count: int = 0, fixpoint_iterations: int = 1,
                 shared_memory_bytes: int = 0, flags: int = 0) -> None:
        """Enqueues a dispatch of `program` (of this capture's context) into
        the capture (vyre_capture_dispatch): run as dispatch_async would
        (OUTPUT bindings zeroed first, fixpoint iterations), but only when
        the graph is replayed. Arguments as for Program.dispatch_async with
        resident bindings only: Buffer, BufferRange, DeviceArray, (Buffer,
        offset, length), or a foreign device array, bound by address (kept
        referenced while the graph lives; enqueue its producer's work on
        `stream`, or make the array before the capture: a DLPack producer
        is asked to order its current stream before `stream`, and a
        cross-stream join during the capture may invalidate it). Host data
        is refused (VyreError
        INVALID_ARGUMENT), as is DISPATCH_FLAG_COOPERATIVE. The parameter
        words of all the capture's dispatches (each rounded up to 256 bytes)
        must fit the capture's param_bytes (else LIMIT_EXCEEDED). Any thread
        may call it."""
        _loader._require("vyre_capture_dispatch", "Capture.dispatch")
        # A foreign array's producer stream is not waited for: a join of
        # another stream would pull it into (or break) the capture. DLPack
        # producers order their work before the capture stream instead.
        desc, keep, _, _, imports = program._prepare(
            bindings, params, scalars, grid, block, element_count, fixpoint_iterations,
            shared_memory_bytes, flags, self._stream if self._open else None, waits=[])
        try:
            _call("vyre_capture_dispatch", program._h(), byref(desc))
        except BaseException:
            imports.release()
            raise
        self._keep.objects.append((program, list(bindings)))
        self._keep.imports.append(imports)
        del keep

    def end(self) -> Graph:
        """Ends the capture into a Graph (vyre_capture_end) and returns it
        (also as .graph); after that, returns the same Graph. A capture the
        driver invalidated raises VyreError INVALID_STATE (it is over: the
        context can capture again). In THREAD_LOCAL or GLOBAL mode, end it
        on the thread that began it."""
        if self._graph is not None:
            return self._graph
        _loader._require("vyre_capture_end", "Capture.end")
        handle = GraphHandle()
        try:
            _call("vyre_capture_end", self.context._h(), byref(handle))
        except VyreError:
            # Refused on another thread than the one that began a capture not
            # in RELAXED mode, the capture stays open; any other failure (an
            # invalidated capture) ended it.
            if not self._on_other_thread():
                self._finish()
                keep, self._keep = self._keep, _CaptureKeep()
                keep.release()
            raise
        self._finish()
        self._graph = Graph._of_capture(handle.bits, self.context, self._keep)
        self._keep = _CaptureKeep()
        return self._graph

    def abort(self) -> None:
        """Ends the capture and discards what was captured (the with-block
        does this when an exception leaves it). Does nothing for a capture
        already over; raises VyreError INVALID_STATE (the capture staying
        open) on another thread than the one that began a capture not in
        RELAXED mode."""
        if not self._open:
            return
        handle = GraphHandle()
        try:
            _call("vyre_capture_end", self.context._h(), byref(handle))
        except VyreError:
            if self._on_other_thread():
                raise
        else:
            try:
                _call("vyre_graph_destroy", handle)
            except VyreError:
                pass
        self._finish()
        keep, self._keep = self._keep, _CaptureKeep()
        keep.release()

    def _on_other_thread(self) -> bool:
        """Whether vyre_capture_end refuses this thread (and leaves the
        capture open)."""
        return self.mode != CaptureMode.RELAXED and threading.get_ident() != self._thread

    def _finish(self) -> None:
        self._open = False
        if getattr(self.context, "_open_capture", None) is self:
            self.context._open_capture = None

    def __enter__(self) -> "Capture":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        elif self._open:
            self.end()

    def __repr__(self) -> str:
        state = (f"open, stream=0x{self._stream:x}" if self._open
                 else "ended" if self._graph is not None else "discarded")
        return f"<vyre_cuda.Capture {state}>"


class Step:
    """One step of a Sequence. Build with DispatchStep, FillStep, CopyStep,
    UploadStep or DownloadStep; group steps to repeat in a Repeat."""

    kind: Any = None

    def _struct(self, keep):
        raise NotImplementedError


def _step_range(target, offset, nbytes, what):
    """(buffer, offset, nbytes) for a step's Buffer / BufferRange /
    (Buffer, offset, length); offset is added to a range's own, and nbytes
    None means to the end of the range (or buffer)."""
    r = _resident_range(target)
    if r is None:
        raise TypeError(f"{what}: {type(target).__name__} is not resident memory. Fix: pass a "
                        f"Buffer, a BufferRange or (Buffer, offset, length).")
    start = int(r.offset) + int(offset)
    if nbytes is None:
        end = int(r.offset) + int(r.length) if r.length else r.buffer.nbytes
        nbytes = max(end - start, 0)
    return (r.buffer, _unsigned(start, 64, f"{what} offset"),
            _unsigned(nbytes, 64, f"{what} bytes"))


class DispatchStep(Step):
    """Runs `program` as Program.dispatch would (same arguments), with
    resident bindings only: move host data with UploadStep / DownloadStep.
    Foreign device arrays are wrapped when a Sequence is built from the step
    and stay referenced as long as the step is."""

    kind = StepKind.DISPATCH

    def __init__(self, program: Program, bindings: _Seq[Any], params: Iterable[int] = (),
                 scalars: Iterable[Union[int, float]] = (), grid: Dim3 = None,
                 block: Dim3 = None, element_count: int = 0, fixpoint_iterations: int = 1,
                 shared_memory_bytes: int = 0, flags: int = 0,
                 stream: Optional[int] = None) -> None:
        self.program = program
        self.bindings = list(bindings)
        self._args = (params, scalars, grid, block, element_count, fixpoint_iterations,
                      shared_memory_bytes, flags, stream)
        self._imports: List[Buffer] = []

    def _struct(self, keep):
        desc, desc_keep, keep_out, _, imports = self.program._prepare(self.bindings,
                                                                      *self._args)
        self._imports.extend(imports)
        keep += [desc, desc_keep, keep_out]  # read (and copied) by vyre_sequence_create
        return _new(SequenceStepStruct, kind=int(self.kind),
                    program=ProgramHandle(self.program.handle), dispatch=ctypes.pointer(desc))


class FillStep(Step):
    """Sets nbytes (default: to the end) of a buffer at offset to byte `value`."""

    kind = StepKind.FILL

    def __init__(self, target: Any, value: int = 0, nbytes: Optional[int] = None,
                 offset: int = 0) -> None:
        self.buffer, self.offset, self.nbytes = _step_range(target, offset, nbytes, "FillStep")
        self.value = _unsigned(value, 32, "FillStep value")

    def _struct(self, keep):
        return _new(SequenceStepStruct, kind=int(self.kind),
                    buffer=BufferHandle(self.buffer.handle), offset=self.offset,
                    bytes=self.nbytes, fill_byte=self.value)


class CopyStep(Step):
    """Copies nbytes (default: the rest of src) from src to dst (device to
    device; the ranges must not overlap)."""

    kind = StepKind.COPY

    def __init__(self, dst: Any, src: Any, nbytes: Optional[int] = None, dst_offset: int = 0,
                 src_offset: int = 0) -> None:
        self.src, self.src_offset, src_bytes = _step_range(src, src_offset, nbytes,
                                                           "CopyStep src")
        self.buffer, self.offset, self.nbytes = _step_range(dst, dst_offset, src_bytes,
                                                            "CopyStep dst")

    def _struct(self, keep):
        return _new(SequenceStepStruct, kind=int(self.kind),
                    buffer=BufferHandle(self.buffer.handle), offset=self.offset,
                    bytes=self.nbytes, src_buffer=BufferHandle(self.src.handle),
                    src_offset=self.src_offset)


class UploadStep(Step):
    """Copies host `data` into a buffer at offset, read when each run (or
    replay of a recorded graph) starts. Writable C-contiguous data (a
    bytearray, array.array, numpy array) is read in place, so changing it
    between runs changes what is uploaded; other data is copied once here."""

    kind = StepKind.UPLOAD

    def __init__(self, target: Any, data: Any, offset: int = 0) -> None:
        self._ref = _readable(data, "UploadStep data")
        self.data = data
        self.buffer, self.offset, self.nbytes = _step_range(target, offset, self._ref.nbytes,
                                                            "UploadStep")

    def _struct(self, keep):
        return _new(SequenceStepStruct, kind=int(self.kind),
                    buffer=BufferHandle(self.buffer.handle), offset=self.offset,
                    bytes=self.nbytes, host_src=self._ref.address)


class DownloadStep(Step):
    """Copies bytes of a buffer at offset into host memory when each run (or
    replay) ends. out: a writable buffer (its size is the byte count), a byte
    count for a new bytearray, or None for the rest of the buffer. The result
    is in .out (and in what run()/replay() return)."""

    kind = StepKind.DOWNLOAD

    def __init__(self, target: Any, out: Any = None, offset: int = 0) -> None:
        if out is None:
            _, _, out = _step_range(target, offset, None, "DownloadStep")
        self._ref = _writable(out, "DownloadStep out")
        self.buffer, self.offset, self.nbytes = _step_range(target, offset, self._ref.nbytes,
                                                            "DownloadStep")

    @property
    def out(self) -> Any:
        """The host object the step downloads into."""
        return self._ref.owner

    def _struct(self, keep):
        return _new(SequenceStepStruct, kind=int(self.kind),
                    buffer=BufferHandle(self.buffer.handle), offset=self.offset,
                    bytes=self.nbytes, host_dst=self._ref.address)


class Repeat:
    """A block of steps a Sequence runs `count` times in a row (one block per
    sequence)."""

    def __init__(self, count: int, steps: Iterable[Step]) -> None:
        self.count = count
        self.steps = list(steps)


class Sequence(_Object):
    """Steps over resident buffers (dispatch, fill, copy, upload, download)
    with at most one repeated block, validated once; run() runs them eagerly,
    record() captures them as a Graph. Both give identical results.

        seq = ctx.sequence([vc.UploadStep(da, a),
                            vc.Repeat(10, [vc.DispatchStep(prog, [da, db, dout], params=[n]),
                                           vc.CopyStep(da, dout)]),
                            vc.DownloadStep(dout)])
        result = seq.run()[0]

    The sequence keeps its steps (their buffers, programs and host memory)
    alive until close(); a graph recorded from it keeps them until its own
    close()."""

    _handle_type = SequenceHandle
    _destroy = "vyre_sequence_destroy"
    _keep: Any = None
    _downloads: Any = ()
    _download_outs: Any = ()  # their host objects (fixed at creation), for the fast path

    def __init__(self, context: Context, steps: Iterable[Union[Step, Repeat]]) -> None:
        super().__init__(0, context)
        flat: List[Step] = []
        repeat_first = repeat_step_count = repeat_count = 0
        seen_repeat = False
        for item in steps:
            if isinstance(item, Repeat):
                if seen_repeat:
                    raise ValueError("Sequence: more than one Repeat block. Fix: a sequence "
                                     "repeats one block; build a second sequence for another.")
                seen_repeat = True
                repeat_first, repeat_step_count = len(flat), len(item.steps)
                repeat_count = _unsigned(item.count, 32, "Repeat count")
                for inner in item.steps:
                    if not isinstance(inner, Step):
                        raise TypeError(f"Sequence: a Repeat holds {type(inner).__name__}. "
                                        f"Fix: repeat steps (DispatchStep, FillStep, ...), "
                                        f"not nested blocks.")
                    flat.append(inner)
            elif isinstance(item, Step):
                flat.append(item)
            else:
                raise TypeError(f"Sequence: {type(item).__name__} is not a step. Fix: pass "
                                f"DispatchStep, FillStep, CopyStep, UploadStep, DownloadStep "
                                f"or Repeat objects.")
        keep: List[Any] = []
        structs = (SequenceStepStruct * max(len(flat), 1))()
        for i, step in enumerate(flat):
            structs[i] = step._struct(keep)
        desc = _new(SequenceDescStruct, repeat_count=repeat_count,
                    steps=structs if flat else None, step_count=len(flat),
                    repeat_first=repeat_first, repeat_step_count=repeat_step_count)
        handle = SequenceHandle()
        _call("vyre_sequence_create", context._h(), byref(desc), byref(handle))
        del keep  # the dispatch descriptors were copied
        self._bits = handle.bits
        self.steps = flat
        # The steps hold the buffers, programs and host memory the library uses.
        self._keep = [flat]
        self._downloads = [step for step in flat if isinstance(step, DownloadStep)]
        self._download_outs = tuple(step.out for step in self._downloads)

    @property
    def context(self) -> Context:
        return self._context

    def run(self) -> Outputs:
        """Runs the steps and waits. Returns Outputs: the DOWNLOAD steps'
        host objects in step order, with .timing."""
        fast = _loader._fast
        if fast is not None:
            result = fast.sequence_run(self._bits, self._download_outs)
            if result is not NotImplemented:
                return result
        timing = _new(TimingStruct)
        _call("vyre_sequence_run", self._h(), byref(timing))
        outputs = Outputs(step.out for step in self._downloads)
        outputs.timing = _struct_dict(timing)
        return outputs

    def record(self) -> Graph:
        """Captures the whole sequence as one Graph; replay it with replay()."""
        handle = GraphHandle()
        _call("vyre_sequence_record", self._h(), byref(handle))
        return Graph._of_sequence(handle.bits, self)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.closed:
                self._keep = None
