"""Host memory: buffer-protocol data in place, pinned and registered memory, InOut."""

from __future__ import annotations

import ctypes
import threading
from ctypes import byref, c_char, c_char_p, c_void_p
from typing import TYPE_CHECKING, Any, Optional, TypeVar

# The type of `self` for context-manager entry (typing.Self needs 3.11).
_H = TypeVar("_H")

from ._errors import _call


if TYPE_CHECKING:  # annotations only: _context imports this module
    from ._context import Context


# ---------------------------------------------------------------------------
# Host memory
# ---------------------------------------------------------------------------

class _HostRef:
    """A pinned view of Python memory: its address, size and what keeps it
    alive (and unresizable) while C uses it."""

    __slots__ = ("address", "nbytes", "owner", "_keep")

    def __init__(self, address, nbytes, owner, keep):
        self.address = address
        self.nbytes = nbytes
        self.owner = owner  # the object the caller gets back for outputs
        self._keep = keep


def _byte_view(obj, what):
    if isinstance(obj, PinnedMemory):
        obj = obj.array
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what}: {type(obj).__name__} does not support the buffer protocol. "
                        f"Fix: pass bytes, bytearray, memoryview, array.array or a numpy "
                        f"array.") from None
    return view


def _pin(view, owner):
    """Exposes a writable, C-contiguous view's memory to C without a copy.

    from_buffer() holds a buffer export, so the owner (a bytearray, say)
    cannot be resized or freed under C while the returned ref lives. It asks
    for plain bytes, which works whatever the element format (numpy's '<u4'
    included, which memoryview.cast would refuse)."""
    if view.nbytes == 0:
        return _HostRef(None, 0, owner, (view,))
    arr = (c_char * view.nbytes).from_buffer(view)
    return _HostRef(ctypes.addressof(arr), view.nbytes, owner, (view, arr))


def _readable(obj, what):
    """Address and size of obj's bytes, copying only when C cannot read it in
    place (read-only or non-contiguous memory)."""
    if isinstance(obj, bytes):
        # c_char_p points at the bytes object's own storage: no copy.
        ptr = c_char_p(obj)
        return _HostRef(ctypes.cast(ptr, c_void_p).value, len(obj), obj, (obj, ptr))
    view = _byte_view(obj, what)
    if view.readonly or not view.c_contiguous:
        data = view.tobytes()  # one copy, in C order
        ptr = c_char_p(data)
        return _HostRef(ctypes.cast(ptr, c_void_p).value, len(data), obj, (data, ptr))
    return _pin(view, obj)


def _writable(obj, what):
    """Address and size of a writable, C-contiguous buffer; an int n makes a
    new bytearray(n)."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        if obj < 0:
            raise ValueError(f"{what}: a byte count of {obj}. Fix: pass a non-negative size.")
        obj = bytearray(obj)
    view = _byte_view(obj, what)
    if view.readonly:
        raise TypeError(f"{what}: {type(obj).__name__} is read-only. Fix: pass a bytearray, "
                        f"a writable array, or a byte count.")
    if not view.c_contiguous:
        raise ValueError(f"{what}: the buffer is not C-contiguous. Fix: pass a contiguous "
                         f"buffer (numpy: np.ascontiguousarray).")
    return _pin(view, obj)


class PinnedMemory:
    """Page-locked host memory from vyre_host_alloc, owned by a Context.

    It supports the buffer protocol (memoryview(p), numpy.frombuffer(p)), so
    it can be filled, read and passed as a host binding, upload source or
    download target; those copies then run by DMA in place. close() frees it
    (deferred while a pending dispatch still uses it); the context's destroy
    frees it too, after which views of it must not be used."""

    def __init__(self, context: Context, nbytes: int) -> None:
        self._context = context
        self._close_lock = threading.Lock()
        self._address = None
        address = c_void_p()
        _call("vyre_host_alloc", context._h(), nbytes, byref(address))
        self._address = address.value
        self.nbytes = nbytes
        self._array = (c_char * nbytes).from_address(address.value or 0)

    @property
    def address(self) -> Optional[int]:
        """The memory's address (None once closed)."""
        return self._address

    @property
    def closed(self) -> bool:
        return self._address is None

    def __buffer__(self, flags):  # Python 3.12+; older versions: p.view
        return self.view

    @property
    def array(self) -> Any:
        """A ctypes c_char array over the memory (supports the buffer protocol)."""
        if self._address is None:
            raise ValueError("PinnedMemory is closed. Fix: use it before close().")
        return self._array

    @property
    def view(self) -> memoryview:
        """A writable memoryview of unsigned bytes over the memory; numpy:
        numpy.frombuffer(p.view, dtype=...)."""
        return memoryview(self.array).cast("B")

    def close(self) -> None:
        with self._close_lock:
            address, self._address = self._address, None
        if address is None or self._context.closed:
            return
        _call("vyre_host_free", c_void_p(address))

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_address", None) is not None:
                self.close()
        except Exception:
            pass


class Registration:
    """Caller memory page-locked with vyre_host_register; close() (or the
    context's destroy) unregisters it. Keeps the object alive and unresizable
    while registered."""

    def __init__(self, context: Context, obj: Any) -> None:
        self._context = context
        self._ref = _writable(obj, "Context.register")
        if self._ref.nbytes == 0:
            raise ValueError("Context.register: the buffer is empty. Fix: register at least "
                             "one byte.")
        _call("vyre_host_register", context._h(), c_void_p(self._ref.address), self._ref.nbytes)
        self.obj = obj

    @property
    def closed(self) -> bool:
        return self._ref is None

    def close(self) -> None:
        ref, self._ref = self._ref, None
        if ref is None or self._context.closed:
            return
        _call("vyre_host_unregister", c_void_p(ref.address))

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_ref", None) is not None:
                self.close()
        except Exception:
            pass


class InOut:
    """One INPUT_OUTPUT host binding with a separate output: the kernel
    reads `src`'s bytes and the result is written to `dst`, a distinct
    writable buffer of the same byte count (a bytearray, a writable numpy
    array, PinnedMemory, ...); `src` is left untouched. It sets the C
    binding's host_input and host_output to different memory, where a
    plain entry is either updated in place or copied into a new bytearray.
    Accepted wherever a host entry is (Program.dispatch, dispatch_async,
    record, Graph.replay and replay_async); the result's Outputs entry is
    `dst`. For INPUT_OUTPUT bindings only."""

    __slots__ = ("src", "dst")

    def __init__(self, src: Any, dst: Any) -> None:
        self.src = src
        self.dst = dst

    def __repr__(self) -> str:
        return f"InOut({type(self.src).__name__}, {type(self.dst).__name__})"
