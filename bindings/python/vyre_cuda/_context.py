"""Contexts and buffers: Context, Buffer, BufferRange, devices, telemetry, logging."""

from __future__ import annotations

import ctypes
import threading
from ctypes import byref, c_uint32
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union
# typing.Sequence as _Seq: this package's Sequence is the vyre sequence.
from typing import Sequence as _Seq
from typing import TypeVar

# The type of `self` for context-manager entry (typing.Self needs 3.11).
_H = TypeVar("_H")

from . import _dlpack, _loader
from ._cdefs import (BUFFER_COPY_FLAG_STAGED, BUFFER_INFO_FLAG_BORROWED,
                     BUFFER_INFO_FLAG_IMPORTED, IPC_HANDLE_BYTES, BufferCopyDescStruct,
                     BufferHandle, BufferInfoStruct, BufferWrapDescStruct, ContextDescStruct,
                     CaptureMode, IpcHandleStruct,
                     ContextHandle, DeviceInfoStruct, Dim3, DownloadRangeStruct, LogCallbackType,
                     LogLevel, PendingHandle, Role, TelemetryStruct, UploadRangeStruct, _new,
                     _struct_dict, _unsigned)
from ._loader import _lib_lock, _require, load
from ._errors import _call, _check
from ._host_memory import PinnedMemory, Registration, _byte_view, _readable, _writable


if TYPE_CHECKING:  # annotations only: these modules import this one
    from ._egraph import EgraphImage
    from ._graph import Capture, Repeat, Sequence, Step
    from ._interop import DeviceArray
    from ._program import Binding, Pending, Program


def device_count() -> int:
    """Number of CUDA devices. Raises VyreError(NO_DRIVER) without a driver."""
    count = c_uint32()
    _call("vyre_device_count", byref(count))
    return count.value


def _device_dict(info):
    d = _struct_dict(info)
    d["name"] = info.name.decode("utf-8", "replace")
    d["compute_capability"] = (info.compute_capability_major, info.compute_capability_minor)
    d["cooperative_launch"] = bool(info.cooperative_launch)
    return d


def device_can_access_peer(ordinal: int, peer: int) -> bool:
    """Whether device `ordinal` can access device `peer`'s memory as a peer
    (NVLink or PCIe peer-to-peer): Buffer.copy_to between their contexts then
    runs device to device, else through pinned host memory. False for the
    same device; NO_DEVICE for an ordinal past device_count()."""
    out = c_uint32()
    _call("vyre_device_can_access_peer", ordinal, peer, byref(out))
    return bool(out.value)


def device_info(ordinal: int = 0) -> Dict[str, Any]:
    """A dict describing device `ordinal` (name, compute_capability, limits...)."""
    info = _new(DeviceInfoStruct)
    _call("vyre_device_info_get", ordinal, byref(info))
    return _device_dict(info)


# Installed trampolines are never freed: the library may be inside the old
# callback on another thread while a new one is installed, and freeing the
# ctypes thunk under it would crash the process. A few bytes per call is
# the price.
_log_trampolines: List[Any] = []


def set_log_callback(callback: Optional[Callable[[Union[LogLevel, int], str], None]],
                     max_level: LogLevel = LogLevel.INFO) -> None:
    """Routes library log lines to callback(level: LogLevel, message: str).

    None removes it. The callback may run on any thread, concurrently, and
    must not call back into vyre_cuda; exceptions it raises are swallowed.
    """
    lib = load()
    if callback is None:
        _check(lib.vyre_set_log_callback(None, None, int(max_level)),
               "vyre_set_log_callback")
        return

    def trampoline(_user_data, level, message):
        try:
            try:
                level = LogLevel(level)
            except ValueError:
                pass
            callback(level, message.decode("utf-8", "replace") if message else "")
        except BaseException:  # an exception must never unwind into C
            pass

    thunk = LogCallbackType(trampoline)
    with _lib_lock:
        _log_trampolines.append(thunk)
    _check(lib.vyre_set_log_callback(thunk, None, int(max_level)), "vyre_set_log_callback")


# ---------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------

class _Object:
    """Owns one library handle. close() is idempotent and thread-safe."""

    _handle_type: Any = None
    _destroy: Any = None

    def __init__(self, bits: int, context: Optional[Context]) -> None:
        self._bits = bits
        # Any: None only for a CPU e-graph image and the Context itself.
        self._context: Any = context  # a strong reference: children keep their context alive
        self._close_lock = threading.Lock()

    @property
    def handle(self) -> int:
        """The library handle (a stable 64-bit value), 0 once closed."""
        return self._bits

    @property
    def closed(self) -> bool:
        return self._bits == 0

    def _h(self):
        # Closed objects pass handle 0, which the library rejects with
        # INVALID_HANDLE and a Fix message, like any other bad handle.
        return self._handle_type(self._bits)

    def close(self) -> None:
        with self._close_lock:
            bits, self._bits = self._bits, 0
        if not bits:
            return
        if self._context is not None and self._context.closed:
            return  # destroying the context already released this object
        _call(self._destroy, self._handle_type(bits))

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        # Never raise from a finaliser; at interpreter exit even the module
        # globals may already be gone.
        try:
            if getattr(self, "_bits", 0):
                self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self.closed else f"handle=0x{self._bits:016x}"
        return f"<vyre_cuda.{type(self).__name__} {state}>"


class Context(_Object):
    """A vyre-cuda context on one device (its primary CUDA context).

    Thread-safe: share it between threads freely."""

    _handle_type = ContextHandle
    _destroy = "vyre_context_destroy"
    # The Capture open on this context (Context.capture), if any.
    _open_capture: Optional["Capture"] = None

    def __init__(self, device: int = 0, transient_pool_limit_bytes: int = 0,
                 pinned_pool_limit_bytes: int = 0, staging_chunk_bytes: int = 0,
                 staging_chunk_count: int = 0, staging_threads: int = 0) -> None:
        """The staging_* arguments tune how large pageable host data moves
        (see vyre_context_desc); 0 keeps each default."""
        super().__init__(0, None)
        # Wraps of PyTorch / CuPy arrays' memory by (device pointer, bytes),
        # reused by dispatches (see _interop._cached_wrap); freed at close().
        self._wraps: Dict[Tuple[int, int], Buffer] = {}
        self._wraps_lock = threading.Lock()
        desc = _new(ContextDescStruct, device_ordinal=device,
                    transient_pool_limit_bytes=transient_pool_limit_bytes,
                    pinned_pool_limit_bytes=pinned_pool_limit_bytes,
                    staging_chunk_bytes=staging_chunk_bytes,
                    staging_chunk_count=staging_chunk_count,
                    staging_threads=staging_threads)
        handle = ContextHandle()
        _call("vyre_context_create", byref(desc), byref(handle))
        self._bits = handle.bits
        #: The device ordinal.
        self.device = device
        # Pendings not yet waited or released: while there are none, no work
        # of this context is in flight, and exports need no stream ordering.
        self._unwaited = 0
        self._unwaited_lock = threading.Lock()

    def _drop_wraps(self) -> None:
        """Frees the cached wraps of foreign arrays (their memory stays the
        owners'; dispatches in flight keep what they use)."""
        with self._wraps_lock:
            wraps, self._wraps = self._wraps, {}
        for buf in wraps.values():
            try:
                buf.close()
            except Exception:
                pass

    def close(self) -> None:
        # The library refuses to destroy a context with a capture open: end
        # it (discarding what it captured) first.
        capture = self._open_capture
        if capture is not None:
            capture.abort()
        # The cache is emptied first, so no dispatch can pick a wrap whose
        # context is gone (destroying the context frees the handles).
        wraps = getattr(self, "_wraps", None)
        if wraps:
            with self._wraps_lock:
                wraps, self._wraps = self._wraps, {}
        try:
            super().close()
        finally:
            for buf in (wraps or {}).values():
                try:
                    buf.close()  # only marks it closed once the context is
                except Exception:
                    pass

    def _pending_started(self) -> None:
        with self._unwaited_lock:
            self._unwaited += 1

    def _pending_finished(self) -> None:
        with self._unwaited_lock:
            self._unwaited -= 1

    def wait_stream(self, stream: int) -> None:
        """Work this context enqueues from now on starts after the work
        already enqueued on `stream` (a CUstream of this device as an int:
        torch.cuda.Stream.cuda_stream, cupy.cuda.Stream.ptr; STREAM_LEGACY
        (1) and STREAM_PER_THREAD (2) too). The host does not block."""
        _require("vyre_context_wait_stream", "Context.wait_stream")
        from ._interop import _stream_value
        _call("vyre_context_wait_stream", self._h(), _stream_value(stream, "stream"))

    def signal_stream(self, stream: int) -> None:
        """Work enqueued on `stream` from now on starts after the work this
        context has already enqueued (streams as for wait_stream). The host
        does not block."""
        _require("vyre_context_signal_stream", "Context.signal_stream")
        from ._interop import _stream_value
        _call("vyre_context_signal_stream", self._h(), _stream_value(stream, "stream"))

    def _order_export(self, stream: Optional[int]) -> None:
        """Before another library reads this context's memory on `stream`:
        if work may still be in flight, make `stream` wait for it."""
        if stream is None or self._unwaited <= 0:
            return
        if "vyre_context_signal_stream" in _loader._lib_missing:
            raise BufferError(
                "export: this context has dispatches in flight and the library has no "
                "vyre_context_signal_stream to order them. Fix: wait() the Pendings first, "
                "or update libvyre_cuda.")
        self.signal_stream(stream)

    def wrap(self, obj: Any, nbytes: Optional[int] = None,
             writable: bool = True, stream: Optional[int] = None) -> "Buffer":
        """A Buffer over device memory another library owns, without a copy
        (vyre_buffer_wrap): usable wherever a Buffer is (bindings, uploads,
        downloads, sequences, graphs). close() releases the handle only.

        obj: an object with __cuda_array_interface__ or __dlpack__ (a CuPy
          array, a PyTorch tensor, a Numba device array), C-contiguous; or a
          raw device pointer (int) with nbytes.
        writable: False accepts read-only arrays.
        stream: for DLPack objects, the stream the producer orders its work
          before (default STREAM_LEGACY); this context then waits for it,
          as it waits for a CAI array's "stream".

        The Buffer keeps obj alive (and a DLPack export open) until close();
        keep the memory alive as long as the library may use it."""
        if isinstance(obj, int) and not isinstance(obj, bool):
            if nbytes is None:
                raise ValueError("Context.wrap: a device pointer needs nbytes. Fix: pass "
                                 "wrap(pointer, nbytes).")
            return Buffer._wrap(self, obj, nbytes, None, None)
        from ._interop import _foreign
        foreign = _foreign(obj, "Context.wrap", writable, self, stream)
        if foreign is None:
            raise TypeError(f"Context.wrap: {type(obj).__name__} is not device memory. Fix: "
                            f"pass an object with __cuda_array_interface__ or __dlpack__ on a "
                            f"CUDA device, or a device pointer and nbytes.")
        return foreign

    def import_ipc(self, handle: Union[bytes, bytearray, memoryview]) -> "Buffer":
        """The buffer another process exported (Buffer.export_ipc), mapped
        into this context's device (vyre_buffer_import_ipc): a Buffer over
        the same device memory, usable wherever a Buffer is, whose nbytes is
        the exported buffer's and whose `imported` and `borrowed` are True.
        close() (or closing the context) closes the mapping once pending work
        that uses it is done, and never frees the exporter's memory.
        Importing one handle twice in a process maps it once; each Buffer
        holds the mapping.

        handle: the IPC_HANDLE_BYTES (128) bytes export_ipc returned, as
          bytes, bytearray or memoryview (bytes.fromhex() turns hex text
          back into them). Anything else raises TypeError; another length
          ValueError.

        The handle names the device by UUID, so this process may see it
        under another ordinal (CUDA_VISIBLE_DEVICES): import into a context
        on that same device. Refused with VyreError (INVALID_ARGUMENT and a
        Fix, never a crash): bytes that are not a handle (corrupted); a
        handle this process exported (use the Buffer itself); a handle whose
        buffer was freed or whose process exited; a context on another
        device than the handle's."""
        return Buffer._import_ipc(self, handle)

    def device_info(self) -> Dict[str, Any]:
        info = _new(DeviceInfoStruct)
        _call("vyre_context_device_info", self._h(), byref(info))
        return _device_dict(info)

    def telemetry(self) -> Dict[str, int]:
        """Counters as a dict (see vyre_telemetry in vyre_cuda.h)."""
        t = _new(TelemetryStruct)
        _call("vyre_context_telemetry", self._h(), byref(t))
        return _struct_dict(t)

    def trim(self) -> None:
        """Releases the memory cached by the transient and pinned pools, and
        the wraps of PyTorch / CuPy arrays kept for dispatches."""
        self._drop_wraps()
        _call("vyre_context_trim", self._h())

    def selftest(self) -> None:
        """Runs the library's built-in self-test on this device (a checked
        vector add through the host path); raises VyreError on failure."""
        _call("vyre_context_selftest", self._h())

    def alloc(self, nbytes: int) -> Buffer:
        """A resident device buffer of nbytes (> 0), uninitialised."""
        return Buffer(self, nbytes)

    def upload(self, data: Any) -> Buffer:
        """A resident buffer holding a copy of data."""
        buf = Buffer(self, _byte_view(data, "Context.upload").nbytes)
        try:
            buf.upload(data)
        except BaseException:
            buf.close()
            raise
        return buf

    def pinned(self, nbytes: int) -> PinnedMemory:
        """nbytes (> 0) of page-locked host memory (PinnedMemory): host
        bindings, uploads and downloads in it are copied by DMA in place."""
        return PinnedMemory(self, nbytes)

    def register(self, obj: Any) -> Registration:
        """Page-locks the memory of a writable, C-contiguous buffer (a
        bytearray, a numpy array...) so the library copies it by DMA in
        place; returns a Registration whose close() unregisters it."""
        return Registration(self, obj)

    def program(self, code: Union[str, bytes], entry: Union[str, bytes],
                bindings: _Seq[Union[Binding, Role, str]], workgroup_size: Dim3 = 256,
                **kwargs: Any) -> Program:
        """Builds a Program; see Program for the arguments."""
        from ._program import Program
        return Program(self, code, entry, bindings, workgroup_size, **kwargs)

    def sequence(self, steps: Iterable[Union[Step, Repeat]]) -> "Sequence":
        """Builds a Sequence from steps; see Sequence."""
        from ._graph import Sequence
        return Sequence(self, steps)

    def capture(self, mode: Union[CaptureMode, str, int] = CaptureMode.THREAD_LOCAL,
                param_bytes: int = 0) -> "Capture":
        """Begins capturing this context's capture stream into a graph
        (vyre_capture_begin) and returns the open Capture; use it as a
        context manager:

            with ctx.capture() as cap:
                ...  # other CUDA code's work on cap.stream, cap.dispatch(...)
            cap.graph.replay()

        mode: CaptureMode.THREAD_LOCAL (0, the default), GLOBAL or RELAXED
          (or their names, "relaxed"): whose unsafe CUDA calls the driver
          forbids while the capture is open (see Capture).
        param_bytes: bytes of parameter words all the capture's dispatches
          may use, each dispatch's rounded up to 256 (0: 64 KiB).
        One capture per context at a time (VyreError INVALID_STATE). A
        library without the capture calls raises LibraryLoadError with a
        Fix."""
        from ._graph import Capture
        return Capture(self, mode, param_bytes)

    def egraph_image(self, *args: Any, **kwargs: Any) -> EgraphImage:
        """An EgraphImage on this context's GPU; arguments as for EgraphImage."""
        from ._egraph import EgraphImage
        return EgraphImage(*args, context=self, **kwargs)  # type: ignore[misc]

    def egraph_image_from_nodes(self, nodes: Iterable[Tuple[int, int, Iterable[int]]],
                                **kwargs: Any) -> EgraphImage:
        """EgraphImage.from_nodes on this context's GPU."""
        from ._egraph import EgraphImage
        return EgraphImage.from_nodes(nodes, context=self, **kwargs)


_WRAP_DESC_SIZE = ctypes.sizeof(BufferWrapDescStruct)


class BufferRange:
    """A byte range of a resident buffer, bound to a dispatch.
    length 0 means "to the end of the buffer"."""

    __slots__ = ("buffer", "offset", "length")

    def __init__(self, buffer: Buffer, offset: int = 0, length: int = 0) -> None:
        self.buffer = buffer
        self.offset = offset
        self.length = length


class Buffer(_Object):
    """Resident device memory owned by a Context (or, from Context.wrap,
    borrowed from another library; or, from Context.import_ipc, mapped from
    another process, which export_ipc shares it with).

    Other libraries read it without a copy: it exports
    __cuda_array_interface__ (v3) and DLPack (__dlpack__,
    __dlpack_device__) as 1-D uint8 of its size; as_array(dtype, shape)
    gives a typed view. A DLPack export keeps the Buffer alive until the
    consumer deletes it (a capsule dropped unconsumed: at the next garbage
    collection, export or close()), and close() meanwhile only marks it
    closed: the memory is freed when the last export is deleted. Closing the
    Context frees it regardless."""

    _handle_type = BufferHandle
    _destroy = "vyre_buffer_free"
    # Defaults, so a half-built Buffer closes quietly.
    nbytes = 0
    _exports = 0
    _deferred = 0
    _owner: Any = None
    _imported: Optional[_dlpack.Imported] = None
    #: For a wrapped foreign array: the stream its producer orders work on.
    _stream: Optional[int] = None
    #: True for a Buffer from Context.import_ipc.
    _ipc = False

    def __init__(self, context: Context, nbytes: int) -> None:
        super().__init__(0, context)
        handle = BufferHandle()
        _call("vyre_buffer_alloc", context._h(), nbytes, byref(handle))
        self._bits = handle.bits
        self.nbytes = nbytes

    @classmethod
    def _wrap(cls, context: Context, pointer: int, nbytes: int, owner: Any,
              imported: Optional[_dlpack.Imported]) -> "Buffer":
        _require("vyre_buffer_wrap", "Context.wrap")
        buf = cls.__new__(cls)
        _Object.__init__(buf, 0, context)
        desc = BufferWrapDescStruct()
        desc.struct_size = _WRAP_DESC_SIZE
        desc.device_pointer = _unsigned(pointer, 64, "device pointer")
        desc.bytes = _unsigned(nbytes, 64, "nbytes")
        handle = BufferHandle()
        status = (_loader._lib or load()).vyre_buffer_wrap(ContextHandle(context._bits),
                                                           byref(desc), byref(handle))
        if status:
            _check(status, "vyre_buffer_wrap")
        buf._bits = handle.bits
        buf.nbytes = nbytes
        buf._owner = owner
        buf._imported = imported
        return buf

    @classmethod
    def _import_ipc(cls, context: Context,
                    handle: Union[bytes, bytearray, memoryview]) -> "Buffer":
        if not isinstance(handle, (bytes, bytearray, memoryview)):
            hint = (" (hex text? pass bytes.fromhex(text))" if isinstance(handle, str) else "")
            raise TypeError(f"Context.import_ipc: the handle is {type(handle).__name__}, not "
                            f"bytes{hint}. Fix: pass the {IPC_HANDLE_BYTES} bytes "
                            f"Buffer.export_ipc returned in the exporting process.")
        data = bytes(handle)
        if len(data) != IPC_HANDLE_BYTES:
            raise ValueError(f"Context.import_ipc: an IPC handle is {IPC_HANDLE_BYTES} bytes, "
                             f"not {len(data)}. Fix: pass the bytes of Buffer.export_ipc as "
                             f"they are, whole.")
        _require("vyre_buffer_import_ipc", "Context.import_ipc")
        raw = IpcHandleStruct()
        ctypes.memmove(raw.bytes, data, IPC_HANDLE_BYTES)
        buf = cls.__new__(cls)
        _Object.__init__(buf, 0, context)
        out = BufferHandle()
        _call("vyre_buffer_import_ipc", context._h(), byref(raw), byref(out))
        buf._bits = out.bits
        buf._ipc = True
        try:
            buf.nbytes = buf.info()["bytes"]  # the exported buffer's size
        except BaseException:
            buf.close()
            raise
        return buf

    @property
    def context(self) -> Context:
        return self._context

    @property
    def borrowed(self) -> bool:
        """True for a Buffer from Context.wrap (its memory is another
        library's) or Context.import_ipc (another process's)."""
        return self._owner is not None or self._imported is not None or self._ipc

    @property
    def imported(self) -> bool:
        """True for a Buffer from Context.import_ipc: it maps memory another
        process exported (BUFFER_INFO_FLAG_IMPORTED)."""
        return self._ipc

    def export_ipc(self) -> bytes:
        """This buffer's IPC handle (vyre_buffer_export_ipc): IPC_HANDLE_BYTES
        (128) opaque bytes to send to another process of this machine over
        any channel (a pipe, a socket, a file, MPI; .hex() gives text), where
        Context.import_ipc maps the same device memory. Exporting again
        gives the same bytes. Mechanism: CUDA's IPC memory handles; not
        available on Windows WDDM or WSL.

        Lifetime (CUDA's rule): keep this Buffer open until every importer
        has closed its import; memory freed while mapped elsewhere is
        undefined to read there, and importing a handle of a freed buffer,
        or of an exited process, is refused. Ordering across processes is
        the caller's: writes are visible to the other process after the
        writer has waited for them (upload() and dispatch() return after
        their work; wait() on a Pending) and told it so over its channel.

        Refused with VyreError (INVALID_ARGUMENT and a Fix): a Buffer that
        is itself an import (export from the process that allocated it), or
        wrapped memory CUDA cannot share (a stream-ordered pool's, for
        example)."""
        _require("vyre_buffer_export_ipc", "Buffer.export_ipc")
        raw = IpcHandleStruct()
        _call("vyre_buffer_export_ipc", self._h(), byref(raw))
        return bytes(raw.bytes)

    @property
    def owner(self) -> Any:
        """The foreign object a wrapped Buffer keeps alive (None otherwise)."""
        return self._owner

    def info(self) -> Dict[str, int]:
        """dict(flags, bytes, device_pointer, context, borrowed, imported):
        device_pointer is the raw CUdeviceptr, valid until the buffer is
        freed; flags holds BUFFER_INFO_FLAG_BORROWED for a wrapped or
        imported buffer and BUFFER_INFO_FLAG_IMPORTED for one from
        Context.import_ipc; borrowed and imported are those bits as bools."""
        info = _new(BufferInfoStruct)
        _call("vyre_buffer_info_get", self._h(), byref(info))
        out = _struct_dict(info)
        out["borrowed"] = bool(info.flags & BUFFER_INFO_FLAG_BORROWED)
        out["imported"] = bool(info.flags & BUFFER_INFO_FLAG_IMPORTED)
        return out

    @property
    def device_pointer(self) -> int:
        return self.info()["device_pointer"]

    def range(self, offset: int = 0, length: int = 0) -> "BufferRange":
        """This buffer's bytes [offset, offset+length) for a dispatch binding."""
        return BufferRange(self, offset, length)

    def as_array(self, dtype: Any = "uint8", shape: Union[int, _Seq[int], None] = None,
                 offset: int = 0) -> "DeviceArray":
        """A typed, C-contiguous view of the bytes from offset: dtype a name
        ("uint32", "float32", ...), a typestr ("<u4") or a numpy dtype;
        shape None: as many elements as fit the rest of the buffer (it must
        divide evenly). The view exports both protocols and binds like a
        BufferRange."""
        from ._interop import DeviceArray
        return DeviceArray(self, dtype, shape, offset)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        from ._interop import _cai, _dtype
        return _cai(self, 0, (self.nbytes,), _dtype("uint8"))

    def __dlpack__(self, *, stream: Optional[int] = None,
                   max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        from ._interop import _dlpack_export, _dtype
        return _dlpack_export(self, 0, (self.nbytes,), _dtype("uint8"), stream, max_version,
                              dl_device, copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_dlpack.KDL_CUDA, self._context.device)

    def _export_opened(self) -> None:
        with self._close_lock:
            self._exports += 1

    def _export_closed(self) -> None:
        with self._close_lock:
            self._exports -= 1
            bits = 0
            if self._exports == 0 and self._deferred:
                bits, self._deferred = self._deferred, 0
        if bits:
            self._free(bits)

    def close(self) -> None:
        if self._exports:
            # DLPack capsules dropped unconsumed (a consumer that refused
            # one) end their exports now, so the free is not deferred.
            _dlpack.reap(blocking=False)
        with self._close_lock:
            bits, self._bits = self._bits, 0
            if bits and self._exports:
                self._deferred = bits  # freed when the last export is deleted
                return
        self._free(bits)

    def _free(self, bits: int) -> None:
        try:
            if bits and not (self._context is not None and self._context._bits == 0):
                status = (_loader._lib or load()).vyre_buffer_free(BufferHandle(bits))
                if status:
                    _check(status, "vyre_buffer_free")
        finally:
            # The handle is gone: the foreign memory may go too.
            imported, self._imported = self._imported, None
            self._owner = None
            if imported is not None:
                imported.release()

    def _copy_desc(self, dst: "Buffer", nbytes: Optional[int], src_offset: int,
                   dst_offset: int, staged: bool) -> BufferCopyDescStruct:
        if not isinstance(dst, Buffer):
            raise TypeError(f"Buffer.copy_to: dst is {type(dst).__name__}, not a Buffer. Fix: "
                            "pass a vyre_cuda Buffer (Context.alloc, upload or wrap).")
        if nbytes is None:
            nbytes = max(min(self.nbytes - src_offset, dst.nbytes - dst_offset), 0)
        return _new(BufferCopyDescStruct, flags=BUFFER_COPY_FLAG_STAGED if staged else 0,
                    src=self._h(), src_offset=src_offset, dst=dst._h(), dst_offset=dst_offset,
                    bytes=nbytes)

    def copy_to(self, dst: "Buffer", nbytes: Optional[int] = None, src_offset: int = 0,
                dst_offset: int = 0, staged: bool = False) -> None:
        """Copies nbytes (default: as many as both ranges hold) from this buffer
        at src_offset into dst at dst_offset, and waits. dst may belong to any
        context: same device, another context of it, or another device (a peer
        copy where device_can_access_peer says so, else through pinned host
        memory; staged=True forces that). Ordered after the work already
        enqueued on both contexts, before the work they enqueue after it.
        Overlapping ranges are refused (copy through a second buffer)."""
        desc = self._copy_desc(dst, nbytes, src_offset, dst_offset, staged)
        _call("vyre_buffer_copy", byref(desc))

    def copy_to_async(self, dst: "Buffer", nbytes: Optional[int] = None, src_offset: int = 0,
                      dst_offset: int = 0, staged: bool = False) -> "Pending":
        """copy_to without the wait: a Pending of dst's context (wait(), then
        close()); both buffers are referenced until it is done."""
        from ._program import Outputs, Pending
        desc = self._copy_desc(dst, nbytes, src_offset, dst_offset, staged)
        handle = PendingHandle()
        _call("vyre_buffer_copy_async", byref(desc), byref(handle))
        return Pending(handle.bits, dst, (self, dst), Outputs())

    def upload(self, data: Any, offset: int = 0) -> None:
        """Copies data (any bytes-like object) into the buffer at offset, and waits."""
        fast = _loader._fast
        if fast is not None and fast.buffer_upload(self._bits, data, offset) is not NotImplemented:
            return
        src = _readable(data, "Buffer.upload")
        _call("vyre_buffer_upload", self._h(), offset, src.address, src.nbytes)

    def download(self, nbytes: Optional[int] = None, offset: int = 0, out: Any = None) -> Any:
        """Copies bytes out of the buffer, and waits.

        Into `out` (a writable buffer, whose size is the byte count) when
        given, else into a new bytearray of nbytes (default: to the end)."""
        if out is None:
            if nbytes is None:
                nbytes = max(self.nbytes - offset, 0)
            out = nbytes
        fast = _loader._fast
        if fast is not None:
            result = fast.buffer_download(self._bits, out, offset)
            if result is not NotImplemented:
                return result
        dst = _writable(out, "Buffer.download")
        _call("vyre_buffer_download", self._h(), offset, dst.address, dst.nbytes)
        return dst.owner

    def upload_ranges(self, ranges: Iterable[Tuple[int, Any]]) -> None:
        """Uploads [(offset, data), ...] with one staged copy and one sync."""
        refs = [(int(off), _readable(data, "Buffer.upload_ranges")) for off, data in ranges]
        arr = (UploadRangeStruct * max(len(refs), 1))()
        for i, (off, ref) in enumerate(refs):
            arr[i] = UploadRangeStruct(off, ref.nbytes, ref.address)
        _call("vyre_buffer_upload_ranges", self._h(), arr, len(refs))

    def download_ranges(self, ranges: Iterable[Tuple[int, Any]]) -> List[Any]:
        """Downloads [(offset, nbytes_or_writable_buffer), ...] with one sync;
        returns the filled objects in order."""
        refs = [(int(off), _writable(dst, "Buffer.download_ranges")) for off, dst in ranges]
        arr = (DownloadRangeStruct * max(len(refs), 1))()
        for i, (off, ref) in enumerate(refs):
            arr[i] = DownloadRangeStruct(off, ref.nbytes, ref.address)
        _call("vyre_buffer_download_ranges", self._h(), arr, len(refs))
        return [ref.owner for _, ref in refs]
