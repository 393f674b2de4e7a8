"""Programs and dispatch: Binding, Program, Pending, marshalling, the fast path."""

from __future__ import annotations

import array as _array
import ctypes
import operator
import os
import struct as _struct
import sys
from ctypes import byref, c_char, c_char_p, c_uint32, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union
# typing.Sequence as _Seq: this package's Sequence is the vyre sequence.
from typing import Sequence as _Seq

from . import _loader
from ._cdefs import (STREAM_LEGACY, WAIT_FOREVER, _U32_MAX, _U64_MAX, BindingDeclStruct,
                     BufferHandle, CodeKind, Dim3, DispatchBindingStruct, DispatchDescStruct,
                     KernelParamStruct, ParamKind, PendingHandle, ProgramDescStruct,
                     ProgramHandle, Role, Source, Status, TimingStruct, _new, _struct_dict,
                     _unsigned)
from ._loader import load
from ._errors import _call, _check
from ._host_memory import InOut, _readable, _writable
from ._context import Buffer, BufferRange, Context, _Object
from ._interop import (_HOST_TYPES, DeviceArray, _cached_wrap, _foreign, _known_array,
                       _plain_types, _reader_of, _readers, _stream_value)


if TYPE_CHECKING:  # annotations only: _graph imports this module
    from ._graph import Graph


def f32(x: float) -> int:
    """The bit pattern of float x as float32, for a SCALAR32 slot."""
    return _struct.unpack("<I", _struct.pack("<f", x))[0]


def f64(x: float) -> int:
    """The bit pattern of float x as float64, for a SCALAR64 slot."""
    return _struct.unpack("<Q", _struct.pack("<d", x))[0]


def _u32_array(values, what):
    values = list(values)
    out = (c_uint32 * max(len(values), 1))()
    for i, v in enumerate(values):
        v = int(v)
        if not -2 ** 31 <= v <= _U32_MAX:
            raise ValueError(f"{what}[{i}] = {v} does not fit 32 bits. Fix: pass values in "
                             f"[-2**31, 2**32).")
        out[i] = v & _U32_MAX
    return out, len(values)


def _dim3(value, what):
    if value is None:
        return (0, 0, 0)
    if isinstance(value, int):
        value = (value,)
    value = tuple(_unsigned(v, 32, what) for v in value)
    if not 1 <= len(value) <= 3:
        raise ValueError(f"{what} has {len(value)} dimensions. Fix: pass 1 to 3 sizes.")
    return value + (1,) * (3 - len(value))


def _resident_range(entry):
    """entry as a BufferRange when it names resident memory, else None."""
    if isinstance(entry, tuple) and entry and isinstance(entry[0], Buffer):
        return BufferRange(*entry)
    if isinstance(entry, Buffer):
        return BufferRange(entry)
    if isinstance(entry, BufferRange):
        return entry
    if isinstance(entry, DeviceArray):
        return entry.range()
    return None


class _Imports(list):
    """The borrowed Buffers wrapping foreign device arrays for one call,
    released together once the library is done with them; `held`: PyTorch /
    CuPy arrays bound through the Context's cached wraps, referenced until
    then, and `signals`: their streams to order after the work."""

    held: List[Any] = []  # (class defaults, never mutated: set per instance)
    signals: List[int] = []
    #: Owners besides the first (a loop graph over the graph holding these,
    #: Graph.loop): release() only drops one owner while any is left.
    shares = 0

    def streams(self) -> List[int]:
        seen: List[int] = []
        for s in self.signals:
            if s not in seen:
                seen.append(s)
        for buf in self:
            if buf._stream is not None and buf._stream not in seen and buf._stream != -1:
                seen.append(buf._stream)
        return seen

    def signal(self, context: Context) -> None:
        """After enqueueing: the producers' streams wait for that work."""
        for stream in self.streams():
            context.signal_stream(stream)

    def share(self) -> "_Imports":
        """One more owner: the wraps close at the last owner's release()."""
        self.shares += 1
        return self

    def release(self) -> None:
        if self.shares:
            self.shares -= 1
            return
        if self.held:
            self.held = []
        while self:
            buf = self.pop()
            try:
                buf.close()
            except Exception:
                pass


def _wait_streams(context: Context, streams: List[int]) -> None:
    """The context's later work waits for each stream (once each)."""
    fast = _loader._fast
    bits = context._bits
    for s in (streams if len(streams) == 1 else dict.fromkeys(streams)):
        if fast is None or fast.context_wait_stream(bits, s) is NotImplemented:
            context.wait_stream(s)


def _signal_streams(context: Context, streams: Iterable[int]) -> None:
    fast = _loader._fast
    for s in dict.fromkeys(streams):
        if fast is None or fast.context_signal_stream(context._bits, s) is NotImplemented:
            context.signal_stream(s)


def _resolve_known(decls, bindings, context, stream):
    """bindings with each PyTorch tensor / CuPy array (exact types) replaced
    by the Context's cached wrap of its memory, once the context waits for
    their streams; None when there is none (or bindings is not a list or
    tuple). Returns (entries, arrays, stream): the arrays replaced, and the
    stream an async dispatch then orders after its work (the dispatch's
    `stream`, as for a DLPack array). (_known_array, inlined: this runs on
    every call over such arrays.)"""
    if type(bindings) is not list and type(bindings) is not tuple:
        return None
    fast = _loader._fast
    if fast is not None and stream is None:
        # The same loop in C (half a microsecond less over three arrays);
        # NotImplemented leaves a case it does not settle to the loop below.
        got = fast.resolve_known(decls, bindings, context, _readers, _plain_types)
        if got is not NotImplemented:
            if got is None:
                return None
            _wait_streams(context, got[2])
            return got[0], got[1], STREAM_LEGACY
    entries = None
    readers = _readers
    wraps = context._wraps
    device = context.device
    nd = len(decls)
    for i, entry in enumerate(bindings):
        t = type(entry)
        reader = readers.get(t)
        if reader is None:
            if t is Buffer or t in _plain_types:
                continue
            reader = _reader_of(t)
            if reader is None:
                continue
        if i < nd and decls[i].role == _ROLE_SHARED:
            continue
        try:
            got = reader(entry, device)
        except Exception:
            continue  # the generic path judges it
        if got is None:
            continue
        if entries is None:
            if not context._bits:
                return None
            try:
                consumer = STREAM_LEGACY if stream is None else _stream_value(stream, "stream")
            except Exception:
                return None
            entries = list(bindings)
            held = [entry]
            used = [reader]
        else:
            held.append(entry)
            if reader is not used[0] and reader not in used:
                used.append(reader)
        buf = wraps.get((got[0], got[1]))
        if buf is None:
            buf = _cached_wrap(context, got[0], got[1])
        entries[i] = buf
    if entries is None:
        return None
    # The producers' streams (each reader's: the current stream of the
    # device, read once per call), then the dispatch's, each once.
    try:
        producers = []
        for reader in used:
            producer = reader.stream(device) or STREAM_LEGACY  # 0: the legacy default stream
            if producer not in producers:
                producers.append(producer)
    except Exception:
        return None  # the generic path (DLPack) orders these arrays instead
    if consumer not in producers:
        producers.append(consumer)
    _wait_streams(context, producers)
    return entries, held, consumer


def _known_imports(held, stream):
    """An _Imports holding the arrays resolved for an async dispatch and
    naming the stream to order after it."""
    imports = _Imports()
    imports.held = held
    imports.signals = [stream]
    return imports


def _marshal_bindings(decls, bindings, context=None, stream=None, waits=None):
    """vyre_dispatch_binding structs for one entry per declared binding.

    decls: the program's Binding list (their roles say how host data is
    bound). context: where foreign device arrays are wrapped (None: they are
    not recognised); stream: the stream a DLPack producer orders its work
    before. Returns (structs, keep, keep_out, outputs, residents, imports):
    keep holds what C reads during the call, keep_out the host output memory
    (it must live until the wait), outputs[i] the host object receiving
    binding i's result (or None), residents the Buffers bound (wrapped ones
    included), imports the wrapped foreign arrays (an _Imports the caller
    releases). waits: as for _marshal_entry (None: the context waits for
    the arrays' streams at once)."""
    bindings = list(bindings)
    imports = _Imports()
    try:
        return _marshal_into(decls, bindings, context, stream, imports, waits) + (imports,)
    except BaseException:
        imports.release()
        raise


def _marshal_into(decls, bindings, context, stream, imports, waits=None):
    keep = []
    keep_out = []
    residents = []
    outputs = Outputs([None] * len(bindings))
    structs = (DispatchBindingStruct * max(len(bindings), 1))()
    for i, entry in enumerate(bindings):
        role = decls[i].role if i < len(decls) else Role.INPUT
        structs[i] = _marshal_entry(i, entry, role, context, stream, imports, keep, keep_out,
                                    residents, outputs, waits)
    return structs, keep, keep_out, outputs, residents


def _marshal_entry(i, entry, role, context, stream, imports, keep, keep_out, residents,
                   outputs, waits=None):
    """The vyre_dispatch_binding of binding i (see _marshal_bindings); waits:
    None to wait for a foreign array's stream at once, else a list the
    stream is appended to, for the caller to wait for before the call."""
    s = _new(DispatchBindingStruct, source=int(Source.HOST))
    what = f"binding {i}"
    resident = _resident_range(entry)
    if (resident is None and context is not None and role != Role.SHARED
            and not isinstance(entry, _HOST_TYPES)):
        wrapped = _foreign(entry, what, role in (Role.OUTPUT, Role.INPUT_OUTPUT), context,
                           stream, waits)
        if wrapped is not None:
            imports.append(wrapped)
            resident = BufferRange(wrapped)
    if resident is not None:
        s.source = int(Source.RESIDENT)
        s.buffer = BufferHandle(resident.buffer.handle)
        s.offset = _unsigned(resident.offset, 64, f"{what} offset")
        s.length = _unsigned(resident.length, 64, f"{what} length")
        residents.append(resident.buffer)
    elif role == Role.SHARED or entry is None:
        pass  # SHARED entries are ignored; None leaves the library to object
    elif type(entry) is InOut:
        if role != Role.INPUT_OUTPUT:
            name = role.name if isinstance(role, Role) else str(role)
            alone = "the input" if role == Role.INPUT else "the output buffer (or a byte count)"
            raise TypeError(f"{what}: InOut(src, dst) is for INPUT_OUTPUT bindings; this one "
                            f"is {name}. Fix: pass {alone} alone.")
        src = _readable(entry.src, f"{what} (InOut src)")
        dst = _writable(entry.dst, f"{what} (InOut dst)")
        if src.nbytes != dst.nbytes:
            raise ValueError(f"{what}: InOut src has {src.nbytes} bytes, dst {dst.nbytes}. "
                             f"Fix: pass an output buffer of the input's size "
                             f"({src.nbytes} bytes).")
        keep.append(src)
        keep_out.append(dst)
        s.host_input, s.host_output, s.host_bytes = src.address, dst.address, src.nbytes
        outputs[i] = dst.owner
    elif role == Role.INPUT:
        ref = _readable(entry, what)
        keep.append(ref)
        s.host_input, s.host_bytes = ref.address, ref.nbytes
    elif role == Role.OUTPUT:
        ref = _writable(entry, what)
        keep_out.append(ref)
        s.host_output, s.host_bytes = ref.address, ref.nbytes
        outputs[i] = ref.owner
    else:  # INPUT_OUTPUT: in place when writable, else into a new bytearray
        try:
            ref = _writable(entry, what)
            keep_out.append(ref)
            s.host_input = s.host_output = ref.address
            s.host_bytes = ref.nbytes
            outputs[i] = ref.owner
        except TypeError:
            src = _readable(entry, what)
            dst = _writable(src.nbytes, what)
            keep.append(src)
            keep_out.append(dst)
            s.host_input, s.host_output, s.host_bytes = src.address, dst.address, src.nbytes
            outputs[i] = dst.owner
    return s


def _scalar_array(values, params, what):
    """A uint64_t array of scalar values and its length. A float goes in as
    the bit pattern of the width its slot declares in params (a Program's
    [(ParamKind, index)] list; float32 when unknown)."""
    scalar_kinds = {}
    for kind, index in params or ():
        if kind in (ParamKind.SCALAR32, ParamKind.SCALAR64):
            scalar_kinds[index] = kind
    values = list(values)
    out = (c_uint64 * max(len(values), 1))()
    for i, v in enumerate(values):
        if isinstance(v, float):
            v = f64(v) if scalar_kinds.get(i) == ParamKind.SCALAR64 else f32(v)
        v = int(v)
        if not -2 ** 63 <= v <= _U64_MAX:
            raise ValueError(f"{what}[{i}] = {v} does not fit 64 bits. Fix: pass values "
                             f"in [-2**63, 2**64).")
        out[i] = v & _U64_MAX
    return out, len(values)


# ---------------------------------------------------------------------------
# Program.dispatch's fast path: reused descriptors, written word by word
# ---------------------------------------------------------------------------

def _binding_layout():
    """(HOST head word, RESIDENT head word) when vyre_dispatch_binding is
    seven 64-bit words (struct_size and source, host_input, host_output,
    host_bytes, buffer, offset, length), as on every 64-bit ABI; else None
    (the fast path then writes fields one by one)."""
    names = ("host_input", "host_output", "host_bytes", "buffer", "offset", "length")
    if ctypes.sizeof(DispatchBindingStruct) != 56:
        return None
    for k, name in enumerate(names):
        field = getattr(DispatchBindingStruct, name)
        if field.offset != 8 * (k + 1) or field.size != 8:
            return None
    heads = []
    for source in (Source.HOST, Source.RESIDENT):
        heads.append(c_uint64.from_buffer_copy(
            _new(DispatchBindingStruct, source=int(source))).value)
    return tuple(heads)


def _bytes_data_offset():
    """Where a bytes object's data lies from id(obj) (CPython's ob_sval),
    checked against ctypes' own c_char_p address; None when not CPython or
    the check fails (bytes then go through c_char_p)."""
    if sys.implementation.name != "cpython":
        return None
    offset = bytes.__basicsize__ - 1
    probe = bytes(range(16)) + os.urandom(8)  # a fresh, non-interned object
    if ctypes.cast(c_char_p(probe), c_void_p).value != id(probe) + offset:
        return None
    return offset


_LAYOUT = _binding_layout()
_BYTES_OFFSET = _bytes_data_offset()
_TIMING_NAMES = tuple(name for name, _ in TimingStruct._fields_
                      if name != "struct_size" and not name.startswith("reserved"))
_timing_values = operator.attrgetter(*_TIMING_NAMES)
# vyre_timing's words after struct_size/reserved0, as _fast passes them.
_RAW_TIMING = _struct.Struct("=4Q")
# The timing fields after struct_size/reserved0, as 64-bit words, zeroed
# before each call (a fresh vyre_timing in effect).
_TIMING_FIRST_WORD = TimingStruct.wall_ns.offset // 8
_TIMING_WORDS = ctypes.sizeof(TimingStruct) // 8 - _TIMING_FIRST_WORD
_TIMING_ZEROS = (0,) * _TIMING_WORDS
_c_char_from_buffer = c_char.from_buffer
_addressof = ctypes.addressof
_ROLE_INPUT = Role.INPUT
_ROLE_OUTPUT = Role.OUTPUT
_ROLE_SHARED = Role.SHARED


class _DispatchScratch:
    """One vyre_dispatch descriptor with its binding array, parameter words
    and timing struct, reused by one Program.dispatch call at a time (a
    Program keeps a pool: concurrent calls each take their own). Every call
    rewrites each binding it passes in full; the descriptor's other fields
    are rewritten when they differ from what the last call left."""

    __slots__ = ("capacity", "structs", "words", "params", "param_capacity", "desc",
                 "desc_ref", "timing", "timing_words", "timing_ref", "handle", "count",
                 "word_count", "plain", "scalars")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.structs = (DispatchBindingStruct * capacity)()
        self.words = ((c_uint64 * (7 * capacity)).from_buffer(self.structs)
                      if _LAYOUT is not None else None)
        self.param_capacity = 8
        self.params = (c_uint32 * self.param_capacity)()
        self.desc = _new(DispatchDescStruct, fixpoint_iterations=1)
        self.desc_ref = byref(self.desc)
        self.timing = _new(TimingStruct)
        self.timing_words = (c_uint64 * _TIMING_WORDS).from_buffer(
            self.timing, _TIMING_FIRST_WORD * 8)
        self.timing_ref = byref(self.timing)
        self.handle = ProgramHandle()
        self.count = -1  # binding_count and bindings not yet set
        self.word_count = -1  # param_words and param_word_count not yet set
        self.plain = True  # flags, grid, block, ... at dispatch()'s defaults
        self.scalars = False  # scalars set


class Binding:
    """One kernel binding of a Program (vyre_binding_decl).

    role: Role or its name ("input", "output", "input_output", "shared");
    element_size: bytes per element; element_count: 0 = sized by the dispatch;
    output_offset/output_length: the byte range of a host output read back
    (length 0 = all)."""

    __slots__ = ("role", "element_size", "element_count", "name", "output_offset",
                 "output_length")

    def __init__(self, role: Union[Role, str, int], element_size: int = 4,
                 element_count: int = 0, name: Optional[str] = None, output_offset: int = 0,
                 output_length: int = 0) -> None:
        if isinstance(role, str):
            try:
                role = Role[role.upper()]
            except KeyError:
                raise ValueError(f"unknown binding role {role!r}. Fix: use one of "
                                 f"{[r.name.lower() for r in Role]}.") from None
        self.role = role
        self.element_size = element_size
        self.element_count = element_count
        self.name = name
        self.output_offset = output_offset
        self.output_length = output_length

    def __repr__(self):
        role = self.role.name if isinstance(self.role, Role) else self.role
        return (f"Binding({role}, element_size={self.element_size}, "
                f"element_count={self.element_count}, name={self.name!r})")


class Outputs(list):
    """One entry per binding: the host object holding a host output's result
    (OUTPUT / INPUT_OUTPUT bound to host memory), else None. `timing` is a
    dict of wall_ns, device_ns, enqueue_ns and wait_ns when known (else
    None)."""

    # The compiled path leaves the call's vyre_timing words in _raw_timing
    # (32 bytes) and the dict is made on first read: building it (and an
    # instance __dict__ to hold it) on every call cost about half a
    # microsecond of a 4 KiB dispatch.
    __slots__ = ("_timing", "_raw_timing")

    @property
    def timing(self) -> Optional[Dict[str, int]]:
        try:
            return self._timing
        except AttributeError:
            pass
        try:
            raw = self._raw_timing
        except AttributeError:
            return None
        self._timing = timing = dict(zip(_TIMING_NAMES, _RAW_TIMING.unpack(raw)))
        return timing

    @timing.setter
    def timing(self, value: Optional[Dict[str, int]]) -> None:
        self._timing = value


class Program(_Object):
    """Kernel code, its entry and its bindings, loaded into a Context.

    code: PTX or CUDA C++ text (str or bytes), or a cubin/fatbin image (bytes
        with code_kind=CodeKind.BINARY).
    entry: the kernel's name (mangled for C++ kernels that are not extern "C").
    bindings: a list of Binding, one per kernel buffer, in order.
    workgroup_size: threads per block, an int or 1-3 sizes.
    params: None for the default convention (one pointer per non-SHARED
        binding, then the u32 parameter words), or a list of (ParamKind, index).
    compile_options: NVRTC options for CUDA source.
    """

    _handle_type = ProgramHandle
    _destroy = "vyre_program_destroy"
    # Whether the last dispatch() bound PyTorch / CuPy arrays (see dispatch).
    _known_last = False

    def __init__(self, context: Context, code: Union[str, bytes], entry: Union[str, bytes],
                 bindings: _Seq[Union[Binding, Role, str]], workgroup_size: Dim3 = 256,
                 code_kind: Optional[CodeKind] = None, shared_memory_bytes: int = 0,
                 params: Optional[_Seq[Tuple[ParamKind, int]]] = None,
                 compile_options: Optional[_Seq[Union[str, bytes]]] = None) -> None:
        super().__init__(0, context)
        self._scratch: List[_DispatchScratch] = []  # dispatch()'s descriptors, reused
        if code_kind is None:
            code_kind = CodeKind.PTX
        if isinstance(code, str):
            code = code.encode("utf-8")
        code_ref = _readable(code, "Program code")
        self.bindings = [b if isinstance(b, Binding) else Binding(b) for b in bindings]
        decls = (BindingDeclStruct * max(len(self.bindings), 1))()
        names = []  # the encoded names must outlive the call
        for i, b in enumerate(self.bindings):
            name = b.name.encode("utf-8") if b.name else None
            names.append(name)
            what = f"binding {i}"
            decls[i] = _new(BindingDeclStruct, role=int(b.role), name=name,
                            element_size=_unsigned(b.element_size, 32, f"{what} element_size"),
                            element_count=_unsigned(b.element_count, 64,
                                                    f"{what} element_count"),
                            output_offset=_unsigned(b.output_offset, 64,
                                                    f"{what} output_offset"),
                            output_length=_unsigned(b.output_length, 64,
                                                    f"{what} output_length"))
        self.params = None if params is None else [(ParamKind(k), int(i)) for k, i in params]
        kparams = None
        if self.params is not None:
            kparams = (KernelParamStruct * max(len(self.params), 1))()
            for i, (kind, index) in enumerate(self.params):
                kparams[i] = KernelParamStruct(int(kind), _unsigned(index, 32, f"params[{i}]"))
        options = [o.encode("utf-8") if isinstance(o, str) else o
                   for o in (compile_options or [])]
        c_options = (c_char_p * max(len(options), 1))(*options)
        desc = _new(ProgramDescStruct, code_kind=int(code_kind), code=code_ref.address,
                    code_size=code_ref.nbytes,
                    entry=entry.encode("utf-8") if isinstance(entry, str) else entry,
                    bindings=decls if self.bindings else None,
                    binding_count=len(self.bindings),
                    shared_memory_bytes=_unsigned(shared_memory_bytes, 32,
                                                  "shared_memory_bytes"),
                    params=kparams, param_count=len(self.params or ()),
                    compile_options=c_options if options else None,
                    compile_option_count=len(options))
        desc.workgroup_size[:] = _dim3(workgroup_size, "workgroup_size")
        handle = ProgramHandle()
        _call("vyre_program_create", context._h(), byref(desc), byref(handle))
        self._bits = handle.bits
        self.entry = entry

    @property
    def context(self) -> Context:
        return self._context

    def _prepare(self, bindings, params, scalars, grid, block, element_count,
                 fixpoint_iterations, shared_memory_bytes, flags, stream=None, waits=None):
        """Builds the dispatch descriptor. Returns (desc, keep, keep_out,
        outputs, imports): keep holds what C reads during the call; keep_out
        the host output memory, which must live until the wait; outputs[i]
        is the host object that receives binding i's result, or None;
        imports the foreign arrays wrapped for the call (release them once
        the library is done). waits: as for _marshal_bindings."""
        structs, keep, keep_out, outputs, _, imports = _marshal_bindings(
            self.bindings, bindings, self._context, stream, waits)
        try:
            count = len(outputs)
            words, word_count = _u32_array(params or (), "params")
            c_scalars, scalar_count = _scalar_array(scalars or (), self.params, "scalars")
            keep += [structs, words, c_scalars, bindings]

            desc = _new(DispatchDescStruct, flags=_unsigned(flags, 32, "flags"),
                        bindings=structs if count else None,
                        binding_count=count, param_words=words if word_count else None,
                        param_word_count=word_count,
                        scalars=c_scalars if scalar_count else None,
                        scalar_count=scalar_count,
                        element_count=_unsigned(element_count, 64, "element_count"),
                        fixpoint_iterations=_unsigned(fixpoint_iterations, 32,
                                                      "fixpoint_iterations"),
                        shared_memory_bytes=_unsigned(shared_memory_bytes, 32,
                                                      "shared_memory_bytes"))
            desc.grid[:] = _dim3(grid, "grid")
            desc.block[:] = _dim3(block, "block")
        except BaseException:
            imports.release()
            raise
        return desc, keep, keep_out, outputs, imports

    def dispatch(self, bindings: _Seq[Any], params: Iterable[int] = (),
                 scalars: Iterable[Union[int, float]] = (), grid: Dim3 = None,
                 block: Dim3 = None, element_count: int = 0, fixpoint_iterations: int = 1,
                 shared_memory_bytes: int = 0, flags: int = 0,
                 stream: Optional[int] = None) -> Outputs:
        """Runs the program and waits.

        bindings: one entry per declared binding, in order:
          a Buffer, BufferRange, DeviceArray or (Buffer, offset, length) ->
            resident memory;
          another library's device array (anything with __dlpack__ on a CUDA
            device or __cuda_array_interface__: CuPy, PyTorch, Numba) ->
            resident memory, bound in place (C-contiguous only); a
            torch.Tensor / cupy.ndarray is read directly (no DLPack capsule)
            and bound through a wrap the Context keeps for its memory;
          INPUT: any bytes-like object (numpy arrays too);
          OUTPUT: a writable buffer to fill, or a byte count for a new bytearray;
          INPUT_OUTPUT: a writable buffer (updated in place), read-only
            bytes (the result goes to a new bytearray), or InOut(src, dst)
            (read from src, the result written to dst, e.g. PinnedMemory);
          SHARED: ignored (pass None).
        params: u32 parameter words. scalars: values for SCALAR32/64 slots
        (floats are packed to the slot's width). grid/block: None derives the
        grid from element_count and uses the program's workgroup size.
        stream: the stream DLPack producers order their pending work before
          (an int CUstream or a torch/cupy stream; default the legacy default
          stream); the dispatch waits for it. A CAI array's own "stream" is
          waited for too.

        Returns Outputs: per binding, the object holding its host result (or
        None), with .timing."""
        # The compiled fast path (vyre_cuda._fast) takes resident Buffers,
        # host memory and int/float parameters; NotImplemented sends
        # anything else (and every validation error) to the ctypes code below.
        fast = _loader._fast
        if fast is not None:
            # PyTorch tensors / CuPy arrays are bound through the Context's
            # cached wraps. Without a `stream`, the compiled call reads them
            # itself (their wraps cached; the context waits for their
            # streams through _wait_streams, as below). Otherwise (or when
            # it declines: a wrap not cached yet) they are resolved here:
            # first when the last call had some (a loop over tensors then
            # skips a compiled call that would decline), else after the
            # compiled call declines.
            resolved = None
            if stream is None:
                result = fast.dispatch(self, bindings, params, scalars, grid, block,
                                       element_count, fixpoint_iterations, shared_memory_bytes,
                                       flags, False, True)
            else:
                if self._known_last:
                    resolved = _resolve_known(self.bindings, bindings, self._context, stream)
                    if resolved is None:
                        self._known_last = False
                    else:
                        bindings = resolved[0]
                result = fast.dispatch(self, bindings, params, scalars, grid, block,
                                       element_count, fixpoint_iterations, shared_memory_bytes,
                                       flags, False)
            if result is not NotImplemented:
                return result
            if resolved is None:
                resolved = _resolve_known(self.bindings, bindings, self._context, stream)
                if resolved is not None:
                    self._known_last = True
                    bindings = resolved[0]
                    result = fast.dispatch(self, bindings, params, scalars, grid, block,
                                           element_count, fixpoint_iterations,
                                           shared_memory_bytes, flags, False)
                    if result is not NotImplemented:
                        return result
        # The common entries (Buffer, BufferRange, bytes, bytearray,
        # array.array) are written straight into a reused descriptor; the
        # rest go through _marshal_entry, as in dispatch_async and record.
        if type(bindings) is not list and type(bindings) is not tuple:
            bindings = list(bindings)
        n = len(bindings)
        pool = self._scratch
        try:
            sc = pool.pop()
            if sc.capacity < n:
                sc = _DispatchScratch(n)
        except IndexError:
            sc = _DispatchScratch(max(n, 4))
        decls = self.bindings
        nd = len(decls)
        structs = sc.structs
        q = sc.words
        outputs = Outputs([None] * n)
        pins = []  # buffer exports: the memory stays put until C is done
        general = None  # (keep, keep_out, residents) of _marshal_entry
        imports = None
        waits = None
        extra = None  # a params or scalars array C reads during the call
        desc = sc.desc
        try:
            for i in range(n):
                entry = bindings[i]
                t = type(entry)
                role = decls[i].role if i < nd else _ROLE_INPUT
                if q is not None:
                    j = 7 * i
                    if t is Buffer:
                        q[j:j + 7] = (_LAYOUT[1], 0, 0, 0, entry._bits, 0, 0)
                        continue
                    if t is BufferRange:
                        buf, off, length = entry.buffer, entry.offset, entry.length
                        if (type(buf) is Buffer and type(off) is int and type(length) is int
                                and 0 <= off <= _U64_MAX and 0 <= length <= _U64_MAX):
                            q[j:j + 7] = (_LAYOUT[1], 0, 0, 0, buf._bits, off, length)
                            continue
                    elif role != _ROLE_SHARED:
                        if t is bytes:
                            if role == _ROLE_INPUT and _BYTES_OFFSET is not None:
                                q[j:j + 7] = (_LAYOUT[0], id(entry) + _BYTES_OFFSET, 0,
                                              len(entry), 0, 0, 0)
                                continue
                        elif t is bytearray or t is _array.array:
                            nbytes = len(entry) if t is bytearray else len(entry) * entry.itemsize
                            if nbytes:
                                pin = _c_char_from_buffer(entry)
                                pins.append(pin)
                                address = _addressof(pin)
                                if role == _ROLE_INPUT:
                                    q[j:j + 7] = (_LAYOUT[0], address, 0, nbytes, 0, 0, 0)
                                else:
                                    q[j:j + 7] = (_LAYOUT[0], 0 if role == _ROLE_OUTPUT
                                                  else address, address, nbytes, 0, 0, 0)
                                    outputs[i] = entry
                                continue
                        elif t is not tuple and t is not DeviceArray and entry is not None:
                            # Another library's device array: wrapped for this call.
                            if imports is None:
                                imports = _Imports()
                                waits = []
                            reader = _reader_of(t)
                            if reader is not None:  # PyTorch / CuPy: a cached wrap
                                known = _known_array(entry, reader, self._context, stream,
                                                     waits)
                                if known is not None:
                                    pins.append(known)  # held until C is done
                                    q[j:j + 7] = (_LAYOUT[1], 0, 0, 0, known._bits, 0, 0)
                                    continue
                            wrapped = _foreign(entry, f"binding {i}",
                                               role == Role.OUTPUT or role == Role.INPUT_OUTPUT,
                                               self._context, stream, waits)
                            if wrapped is not None:
                                imports.append(wrapped)
                                q[j:j + 7] = (_LAYOUT[1], 0, 0, 0, wrapped._bits, 0, 0)
                                continue
                            # Not foreign (host memory, a vyre object): no second look.
                            if general is None:
                                general = ([], [], [])
                            structs[i] = _marshal_entry(i, entry, role, None, None, imports,
                                                        general[0], general[1], general[2],
                                                        outputs)
                            continue
                if general is None:
                    general = ([], [], [])
                if imports is None:
                    imports = _Imports()
                    waits = []
                structs[i] = _marshal_entry(i, entry, role, self._context, stream, imports,
                                            general[0], general[1], general[2], outputs, waits)
            if waits:
                # Each producer stream once, after every array is wrapped.
                _wait_streams(self._context, waits)
            if n != sc.count:
                desc.bindings = structs if n else None
                desc.binding_count = n
                sc.count = n
            if params:
                k = -1
                if type(params) is list or type(params) is tuple:
                    k = len(params)
                    if k > sc.param_capacity:
                        sc.params = (c_uint32 * k)()
                        sc.param_capacity = k
                        sc.word_count = -1
                    try:
                        if -2 ** 31 <= min(params) and max(params) <= _U32_MAX:
                            sc.params[0:k] = params
                        else:
                            k = -1
                    except TypeError:
                        k = -1
                if k < 0:  # anything else, or a value to convert or refuse
                    extra, k = _u32_array(params, "params")
                    desc.param_words = extra if k else None
                    desc.param_word_count = k
                    sc.word_count = -1
                elif k != sc.word_count:
                    desc.param_words = sc.params
                    desc.param_word_count = k
                    sc.word_count = k
            elif sc.word_count != 0:
                desc.param_words = None
                desc.param_word_count = 0
                sc.word_count = 0
            if scalars:
                c_scalars, scalar_count = _scalar_array(scalars, self.params, "scalars")
                extra = (extra, c_scalars)
                desc.scalars = c_scalars if scalar_count else None
                desc.scalar_count = scalar_count
                sc.scalars = True
            elif sc.scalars:
                desc.scalars = None
                desc.scalar_count = 0
                sc.scalars = False
            if (grid is None and block is None and element_count == 0
                    and fixpoint_iterations == 1 and shared_memory_bytes == 0 and flags == 0):
                if not sc.plain:
                    desc.flags = 0
                    desc.element_count = 0
                    desc.fixpoint_iterations = 1
                    desc.shared_memory_bytes = 0
                    desc.grid[:] = (0, 0, 0)
                    desc.block[:] = (0, 0, 0)
                    sc.plain = True
            else:
                sc.plain = False
                desc.flags = _unsigned(flags, 32, "flags")
                desc.element_count = _unsigned(element_count, 64, "element_count")
                desc.fixpoint_iterations = _unsigned(fixpoint_iterations, 32,
                                                     "fixpoint_iterations")
                desc.shared_memory_bytes = _unsigned(shared_memory_bytes, 32,
                                                     "shared_memory_bytes")
                desc.grid[:] = _dim3(grid, "grid")
                desc.block[:] = _dim3(block, "block")
            sc.handle.bits = self._bits
            sc.timing_words[:] = _TIMING_ZEROS
            status = (_loader._lib or load()).vyre_dispatch(sc.handle, sc.desc_ref, sc.timing_ref)
        finally:
            # The dispatch has completed (or never ran): foreign memory is free.
            if imports is not None:
                imports.release()
        del pins, general, extra  # C is done with the host memory
        if status:
            pool.append(sc)
            _check(status, "vyre_dispatch")
        outputs.timing = dict(zip(_TIMING_NAMES, _timing_values(sc.timing)))
        pool.append(sc)
        return outputs

    def dispatch_async(self, bindings: _Seq[Any], params: Iterable[int] = (),
                       scalars: Iterable[Union[int, float]] = (), grid: Dim3 = None,
                       block: Dim3 = None, element_count: int = 0,
                       fixpoint_iterations: int = 1, shared_memory_bytes: int = 0,
                       flags: int = 0, stream: Optional[int] = None) -> "Pending":
        """Enqueues a dispatch and returns a Pending at once (arguments as for
        dispatch). Inputs are copied before it returns; outputs are written by
        Pending.wait(), and the Pending keeps their memory alive until then.
        Foreign device arrays stay referenced until the Pending is waited or
        closed, and their streams (a CAI array's, or `stream` for DLPack) are
        made to wait for this dispatch."""
        fast = _loader._fast
        known = None  # PyTorch / CuPy arrays bound through cached wraps
        result = NotImplemented
        if fast is not None:
            result = fast.dispatch(self, bindings, params, scalars, grid, block, element_count,
                                   fixpoint_iterations, shared_memory_bytes, flags, True)
        if result is NotImplemented:
            resolved = _resolve_known(self.bindings, bindings, self._context, stream)
            if resolved is not None:
                bindings = resolved[0]
                # The arrays and the wraps bound (an evicted wrap then stays
                # open until the work is done) stay referenced until the wait.
                known = _known_imports(resolved[1] + bindings, resolved[2])
                if fast is not None:
                    result = fast.dispatch(self, bindings, params, scalars, grid, block,
                                           element_count, fixpoint_iterations,
                                           shared_memory_bytes, flags, True)
        if result is not NotImplemented:
            bits, outputs, keep_out = result  # keep_out: views of the host outputs
            pending = Pending(bits, self, keep_out, outputs, imports=known)
            if known is not None:
                _signal_streams(self._context, known.streams())
            return pending
        try:
            desc, keep, keep_out, outputs, imports = self._prepare(
                bindings, params, scalars, grid, block, element_count, fixpoint_iterations,
                shared_memory_bytes, flags, stream)
        except BaseException:
            if known is not None:
                known.release()
            raise
        if known is not None:
            imports.held, imports.signals = known.held, known.signals
        handle = PendingHandle()
        try:
            _call("vyre_dispatch_async", self._h(), byref(desc), byref(handle))
        except BaseException:
            imports.release()
            raise
        # Inputs were copied before the call returned; only the outputs'
        # memory must outlive it.
        del keep
        pending = Pending(handle.bits, self, keep_out, outputs, imports=imports)
        _signal_streams(self._context, imports.streams())
        return pending

    def record(self, bindings: _Seq[Any], params: Iterable[int] = (),
               scalars: Iterable[Union[int, float]] = (), grid: Dim3 = None,
               block: Dim3 = None, element_count: int = 0, fixpoint_iterations: int = 1,
               shared_memory_bytes: int = 0, flags: int = 0,
               stream: Optional[int] = None) -> "Graph":
        """Records this dispatch as a Graph (arguments as for dispatch();
        host entries are sample data of the shape every replay must keep).
        Nothing runs until Graph.replay(). Foreign device arrays are bound
        by address and stay referenced until the graph is closed."""
        from ._graph import Graph
        return Graph(self, bindings, params, scalars, grid, block, element_count,
                     fixpoint_iterations, shared_memory_bytes, flags, stream)


class Pending(_Object):
    """An enqueued dispatch, graph replay or e-graph rebuild. wait() once,
    then close() (or let it be collected). Closing without waiting waits for
    the device work but skips copying host outputs back."""

    _handle_type = PendingHandle
    _destroy = "vyre_pending_release"
    _finish: Any = None
    _imports: Optional[_Imports] = None
    _counted = False

    def __init__(self, bits: int, source: Any, keep: Any, outputs: Any,
                 finish: Optional[Callable[[], Any]] = None,
                 imports: Optional[_Imports] = None) -> None:
        # source: the Program dispatched, the Graph replayed or the
        # EgraphImage rebuilt (a CPU image has no context).
        super().__init__(bits, source.context)
        self._source = source
        # The host output memory is written during wait(), or by the device
        # until release: it must outlive the handle.
        self._keep = keep
        self._outputs = outputs
        # Builds what wait() returns once the library has written the outputs.
        self._finish = finish
        # Foreign arrays bound to the work: referenced until it is done.
        self._imports = imports
        if self._context is not None:
            self._context._pending_started()
            self._counted = True

    def _settled(self) -> None:
        """The device work is done (waited, or released): foreign arrays and
        the context's in-flight count may go."""
        imports, self._imports = self._imports, None
        if imports is not None:
            imports.release()
        if self._counted:
            self._counted = False
            self._context._pending_finished()

    def poll(self) -> bool:
        """True when the device work has completed, False if not yet."""
        status = load().vyre_pending_poll(self._h())
        if status == Status.NOT_READY:
            return False
        _check(status, "vyre_pending_poll")
        return True

    def wait(self, timeout_ns: Optional[int] = None) -> Any:
        """Waits (forever by default) and copies host outputs back; returns
        Outputs as dispatch() does (an EgraphRebuildResult for a rebuild).
        A timeout raises VyreError(TIMEOUT) and leaves the work waitable; a
        second wait is INVALID_STATE."""
        timeout = WAIT_FOREVER if timeout_ns is None else int(timeout_ns)
        fast = _loader._fast
        if fast is None or fast.pending_wait(self._bits, timeout) is NotImplemented:
            _call("vyre_pending_wait", self._h(), timeout)
        self._settled()
        finish, self._finish = self._finish, None
        if finish is not None:
            self._outputs = finish()
        self._outputs.timing = self.timing()
        return self._outputs

    def timing(self) -> Dict[str, int]:
        """dict of wall_ns, device_ns, enqueue_ns, wait_ns (after wait)."""
        fast = _loader._fast
        if fast is not None:
            result = fast.pending_timing(self._bits)
            if result is not NotImplemented:
                return result
        t = _new(TimingStruct)
        _call("vyre_pending_timing", self._h(), byref(t))
        return _struct_dict(t)

    def close(self) -> None:
        try:
            super().close()
        finally:
            # The library no longer touches the host memory once released (or
            # once its context is gone).
            if self.closed:
                self._keep = None
                self._settled()
