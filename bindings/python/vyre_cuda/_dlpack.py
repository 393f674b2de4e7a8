"""DLPack through ctypes: the C structs, capsules to export device memory and
the reading of capsules other libraries export.

Layouts from dlpack.h: DLManagedTensor (v0.8, capsule "dltensor") and
DLManagedTensorVersioned (v1.x, capsule "dltensor_versioned"). A consumer
renames the capsule to "used_dltensor" / "used_dltensor_versioned" once it
owns the tensor, and then calls its deleter exactly once; a capsule dropped
unconsumed must free the tensor all the same.

Exported capsules have no destructor. A consumer drops a capsule it refuses
with its own exception set (numpy: RuntimeError "Unsupported device in
DLTensor."), and a destructor that is a ctypes callback cannot keep that
exception: a Python callback that returns with an exception set is turned
into SystemError, which ctypes prints as unraisable and clears, so the
consumer returns NULL with no exception set. So this module keeps
a reference to each capsule it hands out, and frees the tensor of one that
nobody else references any more and that is still unconsumed at the next
garbage collection, export, or live_exports() (see reap()); a consumed one
is freed by its deleter, as before. The deleter itself must be a callback:
a consumer that calls it with its own exception set loses that exception
(numpy saves and restores around its call; keeping it in every case needs a
deleter written in C).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, PYFUNCTYPE, Structure, c_char_p, c_int, c_int32,
                    c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, py_object)
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

# DLDeviceType values used here.
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

# DLDataTypeCode values.
KDL_INT = 0
KDL_UINT = 1
KDL_FLOAT = 2
KDL_BFLOAT = 4
KDL_COMPLEX = 5
KDL_BOOL = 6

#: DLManagedTensorVersioned.flags bits.
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1

#: The DLPack version the versioned export reports.
VERSION = (1, 0)


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    # void (*deleter)(DLManagedTensor*): kept as an address, called through
    # _DELETER_TYPE (the same C signature for both layouts).
    ("deleter", c_void_p),
]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", c_void_p),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


_DELETER_TYPE = CFUNCTYPE(None, c_void_p)

# Capsule names: C strings that must outlive every capsule (module lifetime).
_NAMES = {name: ctypes.create_string_buffer(name) for name in (
    b"dltensor", b"used_dltensor", b"dltensor_versioned", b"used_dltensor_versioned")}


def _name(name: bytes) -> int:
    return ctypes.addressof(_NAMES[name])


def _api(name: str, restype: Any, *argtypes: Any) -> Any:
    # Own function objects: setting argtypes on ctypes.pythonapi's shared
    # attributes could clash with other libraries doing the same.
    return PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_new = _api("PyCapsule_New", py_object, c_void_p, c_void_p, c_void_p)
_capsule_is_valid = _api("PyCapsule_IsValid", c_int, py_object, c_char_p)
_capsule_get_pointer = _api("PyCapsule_GetPointer", c_void_p, py_object, c_char_p)
_capsule_set_name = _api("PyCapsule_SetName", c_int, py_object, c_void_p)


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

class _Export:
    """What one exported tensor holds: the C structs (their memory is what
    the consumer reads), the owner kept alive until the deleter runs, and the
    capsule's unconsumed name."""

    __slots__ = ("managed", "shape", "strides", "owner", "on_release", "name")

    def __init__(self, managed: Any, shape: Any, strides: Any, owner: Any,
                 on_release: Optional[Callable[[], None]], name: bytes) -> None:
        self.managed = managed
        self.shape = shape
        self.strides = strides
        self.owner = owner
        self.on_release = on_release
        self.name = name  # the capsule's name while unconsumed


_live: Dict[int, _Export] = {}
# The capsules handed out and not yet seen consumed or dropped, by tensor
# address: a strong reference each, so a consumer's drop never frees one
# (a capsule without a destructor is freed without running any code).
_capsules: Dict[int, Any] = {}
_live_lock = threading.Lock()
_released_count = 0


def _references(table: Dict[int, Any], key: int) -> int:
    return sys.getrefcount(table[key])


# What _references() counts for an object only a table holds (the table's
# reference and the argument's), measured rather than assumed: interpreters
# differ in the references a call holds.
_ONLY_HERE = _references({0: object()}, 0)


def live_exports() -> int:
    """How many exported tensors have not been deleted yet (after reap())."""
    reap()
    with _live_lock:
        return len(_live)


def released_exports() -> int:
    """How many exported tensors were deleted since the process started
    (after reap())."""
    reap()
    return _released_count


def reap(blocking: bool = True) -> int:
    """Deletes the tensors of capsules dropped unconsumed (this module holds
    their last reference, and their name is still "dltensor..."), and lets go
    of capsules their consumer renamed (it calls the deleter). Runs after
    each garbage collection, at each export and in live_exports(); returns
    how many tensors it deleted. blocking=False gives up at once when another
    caller holds the lock (the garbage collector may run inside it)."""
    global _released_count
    if not _capsules:
        return 0
    if not _live_lock.acquire(blocking):
        return 0
    dropped = []
    try:
        for address in list(_capsules):
            export = _live.get(address)
            if export is None:  # deleted meanwhile: nothing to watch
                del _capsules[address]
            elif not _capsule_is_valid(_capsules[address], export.name):
                del _capsules[address]  # consumed: the consumer calls the deleter
            elif _references(_capsules, address) <= _ONLY_HERE:
                del _capsules[address]  # nobody else can reach it: never consumed
                del _live[address]
                _released_count += 1
                dropped.append(export)
    finally:
        _live_lock.release()
    for export in dropped:
        if export.on_release is not None:
            try:
                export.on_release()
            except Exception:  # one owner's failure must not keep the others
                pass
    return len(dropped)


def _after_collection(phase: str, info: Dict[str, Any]) -> None:
    try:
        if phase == "stop" and _capsules:
            reap(blocking=False)
    except Exception:  # never raise out of the garbage collector (nor at exit)
        pass


gc.callbacks.append(_after_collection)


def _release(address: Optional[int]) -> None:
    """The deleter of every tensor exported here: runs once per tensor (a
    second call finds nothing)."""
    global _released_count
    if not address:
        return
    with _live_lock:
        export = _live.pop(address, None)
        if export is not None:
            _released_count += 1
        capsule = _capsules.pop(address, None)
    del capsule  # has no destructor: freeing it here runs nothing
    if export is not None and export.on_release is not None:
        export.on_release()


def _deleter(address: Optional[int]) -> None:
    # A consumer may call the deleter with its own exception set. As a ctypes
    # callback this cannot keep it (see the module docstring), and with it
    # set the first C call here raises SystemError: take that first, or
    # lock.__enter__ in _release would raise after acquiring, leaving the
    # lock held for good (every later export would hang).
    try:
        id(None)
    except BaseException:
        pass
    try:
        _release(address)
    except BaseException:  # never unwind into the consumer's C code
        pass


# Module lifetime: C keeps this function pointer.
_DELETER = _DELETER_TYPE(_deleter)
_DELETER_ADDRESS = ctypes.cast(_DELETER, c_void_p).value


def export(data: int, device: Tuple[int, int], shape: Sequence[int], dtype: Tuple[int, int],
           owner: Any, versioned: bool = False, read_only: bool = False,
           on_release: Optional[Callable[[], None]] = None) -> Any:
    """A DLPack capsule over C-contiguous memory at `data` of `shape`
    elements of dtype (code, bits), one lane. `owner` is kept alive and
    `on_release` called once, when the consumer deletes the tensor (or, for
    a capsule dropped unconsumed, when reap() finds it)."""
    reap()
    ndim = len(shape)
    c_shape = (c_int64 * max(ndim, 1))(*shape)
    strides = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    c_strides = (c_int64 * max(ndim, 1))(*reversed(strides))
    managed: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = managed.dl_tensor
    t.data = data or None
    t.device = DLDevice(*device)
    t.ndim = ndim
    t.dtype = DLDataType(dtype[0], dtype[1], 1)
    t.shape = c_shape
    t.strides = c_strides
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DELETER_ADDRESS
    if versioned:
        managed.version = DLPackVersion(*VERSION)
        managed.flags = FLAG_READ_ONLY if read_only else 0
    address = ctypes.addressof(managed)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    entry = _Export(managed, c_shape, c_strides, owner, on_release, name)
    with _live_lock:
        _live[address] = entry
    try:
        # No destructor (NULL): see the module docstring.
        capsule = _capsule_new(address, _name(name), None)
        with _live_lock:
            _capsules[address] = capsule
        return capsule
    except BaseException:
        _release(address)
        raise


# ---------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------

# Producers' deleters as callables, by address: a library has one or a few,
# and making the ctypes function each time costs more than the call.
_deleters: Dict[int, Any] = {}


class Imported:
    """A tensor taken from another library's capsule: its device, data
    address (byte_offset applied), bytes, shape, element bits and flags.
    release() calls the producer's deleter (once); until then the memory is
    the producer's to keep."""

    __slots__ = ("device", "data", "nbytes", "shape", "dtype", "read_only", "_managed",
                 "_deleter", "_lock")

    def __init__(self, device: Tuple[int, int], data: int, nbytes: int,
                 shape: Tuple[int, ...], dtype: Tuple[int, int, int], read_only: bool,
                 managed: int, deleter: Optional[int]) -> None:
        self.device = device
        self.data = data
        self.nbytes = nbytes
        self.shape = shape
        self.dtype = dtype
        self.read_only = read_only
        self._managed = managed
        self._deleter = deleter
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            deleter, self._deleter = self._deleter, None
        if deleter:
            fn = _deleters.get(deleter)
            if fn is None:
                if len(_deleters) >= 64:
                    _deleters.clear()  # not one deleter per producer: don't grow
                fn = _deleters[deleter] = _DELETER_TYPE(deleter)
            fn(self._managed)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass


class DLPackError(ValueError):
    pass


def c_contiguous(shape: Tuple[int, ...], strides: Sequence[int], unit: int) -> bool:
    """Whether `strides` (in units of `unit`: 1 for DLPack's elements, the
    item size for CAI's bytes) lay `shape` out row-major. Extents of 1, and
    arrays of at most one element, constrain nothing."""
    count = 1
    for extent in shape:
        count *= extent
    if count <= 1:
        return True
    expected = unit
    for extent, stride in zip(reversed(shape), reversed(tuple(strides))):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def read(capsule: Any, what: str) -> Imported:
    """Takes the tensor of a "dltensor" or "dltensor_versioned" capsule:
    checks it is C-contiguous (strides NULL or row-major), renames the
    capsule "used_..." and returns an Imported, whose release() deletes it.
    On error the capsule is left as it was, unconsumed (its producer deletes
    it)."""
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        name, versioned = b"dltensor_versioned", True
    elif _capsule_is_valid(capsule, b"dltensor"):
        name, versioned = b"dltensor", False
    else:
        raise DLPackError(f"{what}: __dlpack__() returned {type(capsule).__name__}, not an "
                          f"unused DLPack capsule. Fix: pass the array itself, not a capsule "
                          f"already consumed.")
    address = _capsule_get_pointer(capsule, name)
    managed: Any
    if versioned:
        managed = DLManagedTensorVersioned.from_address(address)
        if managed.version.major != 1:
            raise DLPackError(f"{what}: DLPack version {managed.version.major}."
                              f"{managed.version.minor}. Fix: pass an array of a library "
                              f"that exports DLPack 1.x or 0.x.")
        read_only = bool(managed.flags & FLAG_READ_ONLY)
    else:
        managed = DLManagedTensor.from_address(address)
        read_only = False
    t = managed.dl_tensor
    ndim = t.ndim
    if ndim < 0:
        raise DLPackError(f"{what}: ndim {ndim}. Fix: pass a valid DLPack tensor.")
    shape = tuple(t.shape[i] for i in range(ndim)) if ndim else ()
    if any(extent < 0 for extent in shape):
        raise DLPackError(f"{what}: negative extent in shape {shape}. Fix: pass a valid "
                          f"DLPack tensor.")
    bits = t.dtype.bits * max(t.dtype.lanes, 1)
    if bits % 8:
        raise DLPackError(f"{what}: elements of {bits} bits. Fix: pass an array of whole-byte "
                          f"elements.")
    count = 1
    for extent in shape:
        count *= extent
    if t.strides and count > 1:
        strides = tuple(t.strides[i] for i in range(ndim))
        if not c_contiguous(shape, strides, 1):
            raise DLPackError(
                f"{what}: the array is not C-contiguous (shape {shape}, strides "
                f"{strides} elements). Fix: pass a contiguous array (e.g. "
                f".contiguous() in PyTorch, cupy.ascontiguousarray).")
    data = (t.data or 0) + t.byte_offset
    result = Imported((t.device.device_type, t.device.device_id), data, count * bits // 8,
                      shape, (t.dtype.code, t.dtype.bits, t.dtype.lanes), read_only,
                      address, managed.deleter)
    # Ours from here: the consumer side of the protocol.
    _capsule_set_name(capsule, _name(b"used_" + name))
    return result
