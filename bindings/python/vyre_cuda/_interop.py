"""Interop: __cuda_array_interface__, DLPack export (DeviceArray), foreign arrays."""

from __future__ import annotations

import array as _array
import sys
from ctypes import byref
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
# typing.Sequence as _Seq: this package's Sequence is the vyre sequence.
from typing import Sequence as _Seq

from . import _dlpack
from ._cdefs import STREAM_LEGACY, BufferInfoStruct, _new, _unsigned
from ._loader import _require
from ._errors import _call
from ._host_memory import InOut, PinnedMemory
from ._context import Buffer, BufferRange, Context


# ---------------------------------------------------------------------------
# Interop: exporting buffers (__cuda_array_interface__, DLPack) and binding
# other libraries' device arrays
# ---------------------------------------------------------------------------

class _DType:
    """An element type as both protocols name it: CAI's typestr ("<u4") and
    DLPack's (code, bits)."""

    __slots__ = ("name", "typestr", "code", "bits")

    def __init__(self, name: str, typestr: str, code: int, bits: int) -> None:
        self.name = name
        self.typestr = typestr
        self.code = code
        self.bits = bits

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    def __repr__(self) -> str:
        return f"dtype({self.name!r})"


_ENDIAN = "<" if sys.byteorder == "little" else ">"
_DTYPES: Dict[str, _DType] = {}
for _kind, _code, _names in (("i", _dlpack.KDL_INT, ("int8", "int16", "int32", "int64")),
                             ("u", _dlpack.KDL_UINT, ("uint8", "uint16", "uint32", "uint64")),
                             ("f", _dlpack.KDL_FLOAT, ("float16", "float32", "float64")),
                             ("c", _dlpack.KDL_COMPLEX, ("complex64", "complex128"))):
    for _n in _names:
        _bits = int("".join(ch for ch in _n if ch.isdigit()))
        _ts = ("|" if _bits == 8 else _ENDIAN) + _kind + str(_bits // 8)
        _DTYPES[_n] = _DType(_n, _ts, _code, _bits)
_DTYPES["bool"] = _DType("bool", "|b1", _dlpack.KDL_BOOL, 8)
_DTYPES_BY_TYPESTR = {d.typestr: d for d in _DTYPES.values()}
for _d in list(_DTYPES.values()):
    # "=u4", "<u4", "u4" all name the native type.
    _DTYPES_BY_TYPESTR.setdefault("=" + _d.typestr[1:], _d)
    _DTYPES_BY_TYPESTR.setdefault(_d.typestr[1:], _d)
    if _d.bits == 8:
        for _prefix in ("<", ">", "="):
            _DTYPES_BY_TYPESTR.setdefault(_prefix + _d.typestr[1:], _d)
_DTYPES.update({"float": _DTYPES["float64"], "int": _DTYPES["int64"],
                "half": _DTYPES["float16"], "double": _DTYPES["float64"]})
del _kind, _code, _names, _n, _bits, _ts, _d


def _dtype(dtype: Any) -> _DType:
    """A name ("uint32"), a typestr ("<u4") or a numpy dtype / type."""
    if isinstance(dtype, _DType):
        return dtype
    key = dtype
    if not isinstance(dtype, str):
        key = getattr(dtype, "str", None)  # a numpy dtype
        if key is None and _is_numpy_type(dtype):
            import numpy as np  # type: ignore[import-not-found]
            key = np.dtype(dtype).str
    if isinstance(key, str):
        found = _DTYPES.get(key.lower()) or _DTYPES_BY_TYPESTR.get(key)
        if found is not None:
            return found
    raise TypeError(f"dtype {dtype!r} is not supported. Fix: use one of "
                    f"{sorted(n for n in _DTYPES if n[-1].isdigit() or n == 'bool')}, a "
                    f"typestr like '<u4', or the numpy dtype of one.")


def _is_numpy_type(obj: Any) -> bool:
    return getattr(obj, "__module__", "").partition(".")[0] == "numpy"


def _stream_value(stream: Any, what: str) -> int:
    if isinstance(stream, bool) or not isinstance(stream, int):
        # torch.cuda.Stream / cupy.cuda.Stream objects: take their handle.
        for attr in ("cuda_stream", "ptr", "handle"):
            value = getattr(stream, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                stream = value
                break
        else:
            raise TypeError(f"{what}: {type(stream).__name__} is not a stream. Fix: pass a "
                            f"CUstream as an int (1 for the legacy default stream), or a "
                            f"torch/cupy stream object.")
    if stream == 0:
        # As DLPack and CAI v3 say: 0 is ambiguous.
        return STREAM_LEGACY
    return _unsigned(stream, 64, what)


def _view_pointer(buffer: Buffer, offset: int) -> int:
    """The device address of buffer byte `offset` (checks the handle: a
    closed buffer or context raises VyreError with the library's Fix)."""
    info = _new(BufferInfoStruct)
    _call("vyre_buffer_info_get", buffer._h(), byref(info))
    return info.device_pointer + offset


def _cai(buffer: Buffer, offset: int, shape: Tuple[int, ...], dtype: _DType) -> Dict[str, Any]:
    """__cuda_array_interface__ v3 of a C-contiguous view. "stream" is None
    when no work of the context is in flight, else the legacy default stream,
    which the context first makes wait for that work."""
    pointer = _view_pointer(buffer, offset)
    context = buffer._context
    stream = None
    if context._unwaited > 0:
        context._order_export(STREAM_LEGACY)
        stream = STREAM_LEGACY
    return {"shape": tuple(shape), "typestr": dtype.typestr, "data": (pointer, False),
            "strides": None, "version": 3, "stream": stream}


def _dlpack_export(buffer: Buffer, offset: int, shape: Tuple[int, ...], dtype: _DType,
                   stream: Any, max_version: Optional[Tuple[int, int]],
                   dl_device: Optional[Tuple[int, int]], copy: Optional[bool]) -> Any:
    """__dlpack__ of a C-contiguous view (array API 2023.12 arguments)."""
    device = (_dlpack.KDL_CUDA, buffer._context.device)
    if dl_device is not None and tuple(dl_device) != device:
        raise BufferError(f"__dlpack__: dl_device={tuple(dl_device)!r} but the buffer is on "
                          f"{device}. Fix: import it on its own device (CUDA "
                          f"{buffer._context.device}).")
    if copy:
        raise BufferError("__dlpack__: copy=True, but a vyre buffer is exported in place. "
                          "Fix: pass copy=None or False, and copy on the consumer's side.")
    pointer = _view_pointer(buffer, offset)
    if stream is None:
        stream = STREAM_LEGACY  # what the DLPack spec says None means for CUDA
    if stream != -1:
        buffer._context._order_export(_stream_value(stream, "__dlpack__ stream"))
    versioned = max_version is not None and int(max_version[0]) >= 1
    buffer._export_opened()
    try:
        return _dlpack.export(pointer, device, shape, (dtype.code, dtype.bits), buffer,
                              versioned=versioned, on_release=buffer._export_closed)
    except BaseException:
        buffer._export_closed()
        raise


class DeviceArray:
    """A typed, C-contiguous view of a Buffer's bytes (Buffer.as_array):
    dtype elements of `shape` from byte `offset`. It exports
    __cuda_array_interface__ and DLPack like the Buffer, and binds to a
    dispatch as the range it covers."""

    __slots__ = ("buffer", "dtype", "shape", "offset", "nbytes")

    def __init__(self, buffer: Buffer, dtype: Any = "uint8",
                 shape: Union[int, _Seq[int], None] = None, offset: int = 0) -> None:
        if not isinstance(buffer, Buffer):
            raise TypeError(f"DeviceArray: {type(buffer).__name__} is not a Buffer. Fix: call "
                            f"Buffer.as_array().")
        dt = _dtype(dtype)
        offset = _unsigned(offset, 64, "DeviceArray offset")
        room = buffer.nbytes - offset
        if room < 0:
            raise ValueError(f"DeviceArray: offset {offset} is past the buffer's "
                             f"{buffer.nbytes} bytes. Fix: pass an offset inside the buffer.")
        if shape is None:
            if room % dt.itemsize:
                raise ValueError(f"DeviceArray: {room} bytes are not a whole number of "
                                 f"{dt.name} elements. Fix: pass shape explicitly.")
            shape = (room // dt.itemsize,)
        elif isinstance(shape, int):
            shape = (shape,)
        shape = tuple(_unsigned(extent, 63, "DeviceArray shape") for extent in shape)
        count = 1
        for extent in shape:
            count *= extent
        if count * dt.itemsize > room:
            raise ValueError(f"DeviceArray: shape {shape} of {dt.name} needs "
                             f"{count * dt.itemsize} bytes, the buffer has {room} from offset "
                             f"{offset}. Fix: pass a smaller shape or a larger buffer.")
        self.buffer = buffer
        self.dtype = dt
        self.shape = shape
        self.offset = offset
        self.nbytes = count * dt.itemsize

    @property
    def size(self) -> int:
        return self.nbytes // self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device_pointer(self) -> int:
        return _view_pointer(self.buffer, self.offset)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return _cai(self.buffer, self.offset, self.shape, self.dtype)

    def __dlpack__(self, *, stream: Optional[int] = None,
                   max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        return _dlpack_export(self.buffer, self.offset, self.shape, self.dtype, stream,
                              max_version, dl_device, copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_dlpack.KDL_CUDA, self.buffer._context.device)

    def range(self) -> "BufferRange":
        """The bytes this view covers, as a BufferRange."""
        return BufferRange(self.buffer, self.offset, self.nbytes)

    def __repr__(self) -> str:
        return (f"<vyre_cuda.DeviceArray {self.dtype.name}{list(self.shape)} at byte "
                f"{self.offset} of {self.buffer!r}>")


# Host memory a binding never looks for device protocols on.
_HOST_TYPES = (bytes, bytearray, memoryview, _array.array, int, type(None), InOut)


def _foreign(obj: Any, what: str, writable: bool, context: Context,
             stream: Optional[int], waits: Optional[List[int]] = None) -> Optional[Buffer]:
    """obj wrapped as a borrowed Buffer when it is another library's device
    array (DLPack on a CUDA device, else __cuda_array_interface__); None when
    it is host memory (the buffer protocol path). The context waits for the
    array's stream before any later work."""
    if isinstance(obj, _HOST_TYPES) or isinstance(obj, (Buffer, BufferRange, DeviceArray,
                                                        PinnedMemory)):
        return None
    device_of = getattr(obj, "__dlpack_device__", None)
    if device_of is not None and hasattr(obj, "__dlpack__"):
        try:
            device = tuple(int(v) for v in device_of())
        except Exception as e:
            raise TypeError(f"{what}: {type(obj).__name__}.__dlpack_device__() failed: {e}. "
                            f"Fix: pass a valid DLPack array.") from None
        if device[0] in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            return _wrap_dlpack(obj, device, what, writable, context, stream, waits)
        if device[0] in (_dlpack.KDL_CPU, _dlpack.KDL_CUDA_HOST):
            try:
                memoryview(obj).release()
                return None  # host memory with the buffer protocol (numpy)
            except TypeError:
                pass
            raise TypeError(f"{what}: {type(obj).__name__} is host memory (DLPack device "
                            f"{device}) without the buffer protocol. Fix: pass a numpy "
                            f"array (e.g. tensor.numpy()), bytes-like data, or the array on "
                            f"CUDA device {context.device}.")
        raise TypeError(f"{what}: {type(obj).__name__} is on DLPack device type {device[0]}, "
                        f"not CUDA. Fix: pass memory of CUDA device {context.device} (DLPack "
                        f"device type {_dlpack.KDL_CUDA}) or host memory.")
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        return None
    return _wrap_cai(obj, cai, what, writable, context, waits)


def _ordered_after(buf: Buffer, stream: int, context: Context,
                   waits: Optional[List[int]]) -> Buffer:
    """A wrapped array's producer stream: the context waits for it now
    (waits None; buf is closed if that fails) or the stream is appended to
    waits for the caller; buf remembers it for signalling after the work."""
    if waits is not None:
        waits.append(stream)
    else:
        try:
            context.wait_stream(stream)
        except BaseException:
            buf.close()
            raise
    buf._stream = stream
    return buf


def _wrap_cai(obj: Any, cai: Any, what: str, writable: bool, context: Context,
              waits: Optional[List[int]] = None) -> Buffer:
    """waits (for every _wrap_*): None waits for the array's stream here;
    a list gets the stream appended instead, and the caller waits for each
    stream listed (once) before it enqueues work."""
    name = type(obj).__name__
    try:
        shape = tuple(int(extent) for extent in cai["shape"])
        typestr = str(cai["typestr"])
        pointer, read_only = cai["data"]
        pointer = int(pointer or 0)
        itemsize = int(typestr[2:])
        version = int(cai.get("version", 0))
    except (KeyError, TypeError, ValueError, IndexError):
        raise TypeError(f"{what}: {name}.__cuda_array_interface__ is malformed ({cai!r}). Fix: "
                        f"pass an object following the CUDA Array Interface (shape, typestr, "
                        f"data, version).") from None
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: {name} has a mask. Fix: pass an array without a mask.")
    strides = cai.get("strides")
    if strides is not None and not _dlpack.c_contiguous(shape, strides, itemsize):
        raise ValueError(f"{what}: {name} is not C-contiguous (shape {shape}, strides "
                         f"{tuple(strides)} bytes). Fix: pass a contiguous array, e.g. "
                         f"cupy.ascontiguousarray(a) or tensor.contiguous() (strides must be "
                         f"None or C-contiguous).")
    if read_only and writable:
        raise ValueError(f"{what}: {name} is read-only, and the kernel writes this binding. "
                         f"Fix: pass a writable array for an OUTPUT or INPUT_OUTPUT binding.")
    count = 1
    for extent in shape:
        count *= extent
    nbytes = count * itemsize
    if nbytes == 0:
        raise ValueError(f"{what}: {name} is empty. Fix: bind an array of at least one "
                         f"element.")
    stream = cai.get("stream") if version >= 3 else None
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, int) or stream == 0:
            raise ValueError(f"{what}: {name}.__cuda_array_interface__ has stream "
                             f"{stream!r}. Fix: the producer must give None or a nonzero int "
                             f"(CAI v3).")
    buf = Buffer._wrap(context, pointer, nbytes, obj, None)
    if stream is None:
        return buf
    return _ordered_after(buf, stream, context, waits)


def _wrap_dlpack(obj: Any, device: Tuple[int, ...], what: str, writable: bool,
                 context: Context, stream: Optional[int],
                 waits: Optional[List[int]] = None) -> Buffer:
    name = type(obj).__name__
    if device[1] != context.device:
        raise ValueError(f"{what}: {name} is on CUDA device {device[1]}, the context on device "
                         f"{context.device}. Fix: pass memory of the context's device, or use "
                         f"a Context(device={device[1]}).")
    _require("vyre_buffer_wrap", what)
    s = STREAM_LEGACY if stream is None else _stream_value(stream, f"{what} stream")
    try:
        capsule = obj.__dlpack__(stream=s, max_version=_dlpack.VERSION)
    except TypeError:
        capsule = obj.__dlpack__(stream=s)  # a producer older than the 2023.12 API
    try:
        imported = _dlpack.read(capsule, what)
    except _dlpack.DLPackError as e:
        raise ValueError(str(e)) from None
    try:
        if imported.read_only and writable:
            raise ValueError(f"{what}: {name} is exported read-only, and the kernel writes "
                             f"this binding. Fix: pass a writable array for an OUTPUT or "
                             f"INPUT_OUTPUT binding.")
        if imported.nbytes == 0:
            raise ValueError(f"{what}: {name} is empty. Fix: bind an array of at least one "
                             f"element.")
        buf = Buffer._wrap(context, imported.data, imported.nbytes, obj, imported)
    except BaseException:
        imported.release()
        raise
    return _ordered_after(buf, s, context, waits)


# ---------------------------------------------------------------------------
# PyTorch tensors and CuPy arrays at their own speed: read by exact type (no
# DLPack capsule, no protocol walk), their wraps cached by the Context
# ---------------------------------------------------------------------------

#: The wraps a Context keeps for PyTorch / CuPy arrays, at most.
_WRAP_CACHE_LIMIT = 64

# A reader takes an array and the context's device and returns (device
# pointer, bytes) when it can bind in place as is, or None to leave it to the
# generic path (__dlpack__ / __cuda_array_interface__), which then binds it
# or raises the error it always has. Its `stream` attribute, called with the
# device, gives the producer stream: the current stream of the device (of
# this thread), the same for every array a call reads, so a call reads it
# once, not once per array (each read is a call into the library).
_Reader = Callable[[Any, int], Optional[Tuple[int, int]]]
_readers: Dict[type, _Reader] = {}
_plain_types: Dict[type, bool] = {}  # types looked at and not read directly


def _torch_reader(torch: Any) -> _Reader:
    """torch.Tensor: data_ptr(), nbytes, is_contiguous(), the device and the
    current stream of its device, read directly."""
    strided = torch.strided
    # Whole-byte element types, complex left out (a conjugate view's memory
    # is not what it shows); the rest go through DLPack as before.
    dtypes = set()
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32",
                 "uint64", "float16", "bfloat16", "float32", "float64", "float8_e4m3fn",
                 "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        dt = getattr(torch, name, None)
        if dt is not None:
            dtypes.add(dt)
    dtypes = frozenset(dtypes)
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is None:
        def raw(index: int) -> int:
            return torch.cuda.current_stream(index).cuda_stream

    # Each read below is a call into PyTorch (about as costly as the rest of
    # the binding's work per array): one expression, every check once, in
    # an order that declines a CPU tensor at the first read.
    if hasattr(torch.Tensor, "nbytes"):
        def read(t: Any, device: int) -> Optional[Tuple[int, int]]:
            if (t.is_cuda and not t.requires_grad and t.layout is strided
                    and t.dtype in dtypes and t.get_device() == device and not t.is_neg()
                    and t.is_contiguous()):
                nbytes = t.nbytes
                if nbytes:
                    return t.data_ptr(), nbytes
            return None
    else:
        def read(t: Any, device: int) -> Optional[Tuple[int, int]]:
            if (t.is_cuda and not t.requires_grad and t.layout is strided
                    and t.dtype in dtypes and t.get_device() == device and not t.is_neg()
                    and t.is_contiguous()):
                nbytes = t.numel() * t.element_size()
                if nbytes:
                    return t.data_ptr(), nbytes
            return None

    read.stream = raw  # type: ignore[attr-defined]
    # PyTorch 2.10+ describes a tensor to C code through the DLPack C
    # exchange API (a capsule on the type): the compiled path then reads a
    # tensor with one C call instead of the nine attribute reads above, and
    # declines what read() declines (the table's DLTensor shows the device,
    # dtype, layout and contiguity; these two it cannot show).
    api = getattr(getattr(torch, "Tensor", None), "__dlpack_c_exchange_api__", None)
    if type(api).__name__ == "PyCapsule":
        read._c_read = ("dlpack_exchange", api, ("requires_grad",),  # type: ignore[attr-defined]
                        ("is_neg",))
    return read


def _cupy_reader(cupy: Any) -> _Reader:
    """cupy.ndarray: data.ptr, nbytes, flags.c_contiguous, data.device_id
    and the current stream, read directly."""
    get_stream = cupy.cuda.get_current_stream
    current_device = cupy.cuda.runtime.getDevice

    def read(a: Any, device: int) -> Optional[Tuple[int, int]]:
        memory = a.data
        if memory.device_id != device or not a.flags.c_contiguous:
            return None
        nbytes = a.nbytes
        if not nbytes:
            return None
        if current_device() != device:
            return None  # the current stream named is another device's
        return memory.ptr, nbytes

    def stream(device: int) -> int:
        # (read() checked the current device is the array's.)
        return get_stream().ptr

    read.stream = stream  # type: ignore[attr-defined]
    # The compiled path reads the same attributes itself (no Python call a
    # array), asking for the current device once a call; _c_contiguous is
    # the flag flags.c_contiguous reports, without the Flags object.
    if hasattr(getattr(cupy, "ndarray", None), "_c_contiguous"):
        read._c_read = ("cupy", current_device, get_stream,  # type: ignore[attr-defined]
                        "_c_contiguous")
    return read


def _reader_of(t: type) -> Optional[_Reader]:
    """The reader of exact type t (torch.Tensor, cupy.ndarray), or None."""
    reader = _readers.get(t)
    if reader is not None or t in _plain_types:
        return reader
    package = (getattr(t, "__module__", None) or "").partition(".")[0]
    module = sys.modules.get(package) if package in ("torch", "cupy") else None
    try:
        if module is not None and package == "torch" and t is getattr(module, "Tensor", None):
            reader = _torch_reader(module)
        elif module is not None and package == "cupy" and t is getattr(module, "ndarray", None):
            reader = _cupy_reader(module)
    except Exception:  # a build of the library without what the reader needs
        reader = None
    if reader is None:
        if len(_plain_types) < 1024:
            _plain_types[t] = True
    else:
        _readers[t] = reader
    return reader


def _cached_wrap(context: Context, pointer: int, nbytes: int) -> Buffer:
    """The Context's wrap of [pointer, +nbytes), made (vyre_buffer_wrap, which
    checks the range is this device's memory) on first use. A wrap borrows:
    it holds no reference to the array, and binding a later array over the
    same range through it is the same as wrapping that array afresh. Beyond
    _WRAP_CACHE_LIMIT the oldest leaves the cache; it is freed when the last
    call using it lets it go (its Buffer's last reference), and work in
    flight keeps what it uses."""
    key = (pointer, nbytes)
    buf = Buffer._wrap(context, pointer, nbytes, None, None)
    evicted = []
    with context._wraps_lock:
        cache = context._wraps
        known = cache.get(key)
        if known is None and context._bits:
            while len(cache) >= _WRAP_CACHE_LIMIT:
                evicted.append(cache.pop(next(iter(cache))))
            cache[key] = buf
    del evicted  # outside the lock: a Buffer no call holds closes here
    if known is not None:  # another thread wrapped it first
        buf.close()
        return known
    return buf


def _known_array(entry: Any, reader: _Reader, context: Context, stream: Any,
                 waits: List[int]) -> Optional[Buffer]:
    """A PyTorch / CuPy array as the Context's cached wrap of its memory, the
    streams to order the work after appended to waits: the array's producer
    (its device's current stream) and the dispatch's `stream` (default the
    legacy default stream), which the DLPack path orders after the producer.
    None sends the array down the generic path (which judges it as always)."""
    if not context._bits:
        return None
    try:
        device = context.device
        got = reader(entry, device)
        if got is None:
            return None
        pointer, nbytes = got
        producer = reader.stream(device)  # type: ignore[attr-defined]
        consumer = STREAM_LEGACY if stream is None else _stream_value(stream, "stream")
    except Exception:
        return None
    buf = context._wraps.get((pointer, nbytes))
    if buf is None:
        buf = _cached_wrap(context, pointer, nbytes)
    waits.append(producer or STREAM_LEGACY)  # 0: the legacy default stream
    waits.append(consumer)
    return buf
