"""Python bindings for vyre-cuda, through ctypes (no compiler, no numpy needed).

    import vyre_cuda as vc

    with vc.Context() as ctx:
        prog = ctx.program(ptx_text, "my_add_u32",
                           [vc.Binding(vc.Role.INPUT), vc.Binding(vc.Role.INPUT),
                            vc.Binding(vc.Role.OUTPUT)],
                           workgroup_size=256)
        a = array.array("I", ...); b = array.array("I", ...)
        out = prog.dispatch([a, b, len(a) * 4], params=[len(a)])[2]   # a bytearray

The library is libvyre_cuda.so.0 from the loader's search path, or the file
named by the environment variable VYRE_CUDA_LIBRARY. It is loaded on first
use, so importing this module never fails for lack of it.

Every failing call raises VyreError, which carries the library's status, its
name, the driver's CUresult and the message (ending with a "Fix:" sentence).

Host data is anything with the buffer protocol: bytes, bytearray, memoryview,
array.array, numpy arrays. Inputs are read in place when writable and
C-contiguous (otherwise copied once); outputs are written into a writable
buffer you pass, or into a new bytearray when you pass a byte count.

Objects (Context, Buffer, Program, Pending) own a library handle: close() them
or use them as context managers; garbage collection closes them too. A child
keeps its Context alive, and closing a Context releases everything it owns
(the children's close() then does nothing).
"""

import ctypes
import enum
import os
import struct as _struct
import threading
from ctypes import (POINTER, Structure, byref, c_char, c_char_p, c_int, c_int32,
                    c_size_t, c_uint32, c_uint64, c_void_p)

__all__ = [
    "VERSION_MAJOR", "WAIT_FOREVER", "DISPATCH_FLAG_DEVICE_TIMING", "DISPATCH_FLAG_COOPERATIVE",
    "Status", "Role", "CodeKind", "ParamKind", "Source", "LogLevel",
    "VyreError", "LibraryLoadError", "Binding", "BufferRange",
    "Context", "Buffer", "Program", "Pending", "Outputs",
    "load", "version", "version_string", "status_name", "last_error", "device_count",
    "device_info", "set_log_callback", "f32", "f64",
]

#: The major version of vyre_cuda.h these bindings were written for.
VERSION_MAJOR = 0

WAIT_FOREVER = 2 ** 64 - 1
DISPATCH_FLAG_DEVICE_TIMING = 1 << 0
DISPATCH_FLAG_COOPERATIVE = 1 << 1

_U32_MAX = 2 ** 32 - 1
_U64_MAX = 2 ** 64 - 1


# ---------------------------------------------------------------------------
# Enumerations (values from vyre_cuda.h)
# ---------------------------------------------------------------------------

class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    STALE_HANDLE = 3
    UNSUPPORTED_STRUCT_SIZE = 4
    OUT_OF_RANGE = 5
    NO_DRIVER = 6
    NO_DEVICE = 7
    DRIVER_TOO_OLD = 8
    NVRTC_UNAVAILABLE = 9
    OUT_OF_MEMORY = 10
    COMPILE_FAILED = 11
    ENTRY_NOT_FOUND = 12
    LIMIT_EXCEEDED = 13
    LAUNCH_FAILED = 14
    TIMEOUT = 15
    NOT_READY = 16
    INVALID_STATE = 17
    DRIVER_ERROR = 18
    INTERNAL = 19


class Role(enum.IntEnum):
    INPUT = 1
    OUTPUT = 2
    INPUT_OUTPUT = 3
    #: Dynamic shared memory (element_size * element_count bytes); no pointer.
    SHARED = 4


class CodeKind(enum.IntEnum):
    PTX = 1
    #: A cubin or fatbin image.
    BINARY = 2
    #: CUDA C++ compiled at run time through NVRTC.
    CUDA_SOURCE = 3


class ParamKind(enum.IntEnum):
    BINDING = 1
    SCALAR32 = 2
    SCALAR64 = 3
    PARAM_WORDS = 4
    NULL_POINTER = 5


class Source(enum.IntEnum):
    HOST = 1
    RESIDENT = 2


class LogLevel(enum.IntEnum):
    ERROR = 0
    WARNING = 1
    INFO = 2
    TRACE = 3


# ---------------------------------------------------------------------------
# C layouts. Field for field as in vyre_cuda.h; the tests compare every
# offset and size with the C compiler's.
# ---------------------------------------------------------------------------

class _Handle(Structure):
    _fields_ = [("bits", c_uint64)]


class ContextHandle(_Handle):
    _c_name_ = "vyre_context"


class BufferHandle(_Handle):
    _c_name_ = "vyre_buffer"


class ProgramHandle(_Handle):
    _c_name_ = "vyre_program"


class PendingHandle(_Handle):
    _c_name_ = "vyre_pending"


_c_enum = c_int  # every vyre enum has a FORCE32 member: 4 bytes


class DeviceInfoStruct(Structure):
    _c_name_ = "vyre_device_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("ordinal", c_uint32),
        ("name", c_char * 256),
        ("compute_capability_major", c_uint32),
        ("compute_capability_minor", c_uint32),
        ("total_memory_bytes", c_uint64),
        ("multiprocessor_count", c_uint32),
        ("max_threads_per_block", c_uint32),
        ("max_block_dim", c_uint32 * 3),
        ("max_grid_dim", c_uint32 * 3),
        ("max_shared_memory_per_block", c_uint32),
        ("warp_size", c_uint32),
        ("cooperative_launch", c_uint32),
        ("driver_version", c_uint32),
    ]


class ContextDescStruct(Structure):
    _c_name_ = "vyre_context_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("device_ordinal", c_uint32),
        ("transient_pool_limit_bytes", c_uint64),
        ("pinned_pool_limit_bytes", c_uint64),
    ]


class TelemetryStruct(Structure):
    _c_name_ = "vyre_telemetry"
    _fields_ = [("struct_size", c_uint32), ("reserved0", c_uint32)] + [
        (name, c_uint64) for name in (
            "h2d_bytes", "h2d_operations", "d2h_bytes", "d2h_operations", "memset_operations",
            "kernel_launches", "sync_points", "dispatches", "transient_pool_hits",
            "transient_pool_misses", "transient_pool_cached_bytes", "pinned_pool_hits",
            "pinned_pool_misses", "pinned_pool_cached_bytes", "module_cache_hits",
            "module_cache_misses", "module_loads", "device_bytes_live", "pinned_bytes_live",
            "live_buffers", "live_programs", "live_pendings")
    ]


class UploadRangeStruct(Structure):
    _c_name_ = "vyre_upload_range"
    _fields_ = [("offset", c_uint64), ("bytes", c_uint64), ("src", c_void_p)]


class DownloadRangeStruct(Structure):
    _c_name_ = "vyre_download_range"
    _fields_ = [("offset", c_uint64), ("bytes", c_uint64), ("dst", c_void_p)]


class BufferInfoStruct(Structure):
    _c_name_ = "vyre_buffer_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("bytes", c_uint64),
        ("device_pointer", c_uint64),
        ("context", ContextHandle),
    ]


class BindingDeclStruct(Structure):
    _c_name_ = "vyre_binding_decl"
    _fields_ = [
        ("struct_size", c_uint32),
        ("role", _c_enum),
        ("name", c_char_p),
        ("element_size", c_uint32),
        ("reserved0", c_uint32),
        ("element_count", c_uint64),
        ("output_offset", c_uint64),
        ("output_length", c_uint64),
    ]


class KernelParamStruct(Structure):
    _c_name_ = "vyre_kernel_param"
    _fields_ = [("kind", _c_enum), ("index", c_uint32)]


class ProgramDescStruct(Structure):
    _c_name_ = "vyre_program_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("code_kind", _c_enum),
        ("code", c_void_p),
        ("code_size", c_size_t),
        ("entry", c_char_p),
        ("bindings", POINTER(BindingDeclStruct)),
        ("binding_count", c_size_t),
        ("workgroup_size", c_uint32 * 3),
        ("shared_memory_bytes", c_uint32),
        ("params", POINTER(KernelParamStruct)),
        ("param_count", c_size_t),
        ("compile_options", POINTER(c_char_p)),
        ("compile_option_count", c_size_t),
    ]


class DispatchBindingStruct(Structure):
    _c_name_ = "vyre_dispatch_binding"
    _fields_ = [
        ("struct_size", c_uint32),
        ("source", _c_enum),
        ("host_input", c_void_p),
        ("host_output", c_void_p),
        ("host_bytes", c_uint64),
        ("buffer", BufferHandle),
        ("offset", c_uint64),
        ("length", c_uint64),
    ]


class DispatchDescStruct(Structure):
    _c_name_ = "vyre_dispatch_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("bindings", POINTER(DispatchBindingStruct)),
        ("binding_count", c_size_t),
        ("param_words", POINTER(c_uint32)),
        ("param_word_count", c_size_t),
        ("scalars", POINTER(c_uint64)),
        ("scalar_count", c_size_t),
        ("grid", c_uint32 * 3),
        ("block", c_uint32 * 3),
        ("element_count", c_uint64),
        ("fixpoint_iterations", c_uint32),
        ("shared_memory_bytes", c_uint32),
    ]


class TimingStruct(Structure):
    _c_name_ = "vyre_timing"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("wall_ns", c_uint64),
        ("device_ns", c_uint64),
        ("enqueue_ns", c_uint64),
        ("wait_ns", c_uint64),
    ]


#: Every C struct mirrored above (for the layout test).
C_STRUCTS = (ContextHandle, BufferHandle, ProgramHandle, PendingHandle, DeviceInfoStruct,
             ContextDescStruct, TelemetryStruct, UploadRangeStruct, DownloadRangeStruct,
             BufferInfoStruct, BindingDeclStruct, KernelParamStruct, ProgramDescStruct,
             DispatchBindingStruct, DispatchDescStruct, TimingStruct)


def _new(struct_type, **fields):
    """A zeroed descriptor with struct_size set, as the VYRE_*_INIT macros do."""
    s = struct_type(**fields)
    s.struct_size = ctypes.sizeof(struct_type)
    return s


def _struct_dict(s):
    """A ctypes struct as a plain dict, without struct_size and reserved fields."""
    out = {}
    for name, _ in s._fields_:
        if name == "struct_size" or name.startswith("reserved"):
            continue
        value = getattr(s, name)
        if isinstance(value, ctypes.Array):
            value = list(value)
        elif isinstance(value, _Handle):
            value = value.bits
        out[name] = value
    return out


LogCallbackType = ctypes.CFUNCTYPE(None, c_void_p, _c_enum, c_char_p)

# name: (restype, argtypes). Every function in vyre_cuda.h.
_S = _c_enum  # vyre_status
_PROTOTYPES = {
    "vyre_version": (c_uint32, []),
    "vyre_status_name": (c_char_p, [_S]),
    "vyre_last_error": (_S, [POINTER(_S), POINTER(c_int32), c_char_p, c_size_t,
                             POINTER(c_size_t)]),
    "vyre_set_log_callback": (_S, [LogCallbackType, c_void_p, _c_enum]),
    "vyre_device_count": (_S, [POINTER(c_uint32)]),
    "vyre_device_info_get": (_S, [c_uint32, POINTER(DeviceInfoStruct)]),
    "vyre_context_create": (_S, [POINTER(ContextDescStruct), POINTER(ContextHandle)]),
    "vyre_context_destroy": (_S, [ContextHandle]),
    "vyre_context_device_info": (_S, [ContextHandle, POINTER(DeviceInfoStruct)]),
    "vyre_context_telemetry": (_S, [ContextHandle, POINTER(TelemetryStruct)]),
    "vyre_context_trim": (_S, [ContextHandle]),
    "vyre_context_selftest": (_S, [ContextHandle]),
    "vyre_buffer_alloc": (_S, [ContextHandle, c_uint64, POINTER(BufferHandle)]),
    "vyre_buffer_free": (_S, [BufferHandle]),
    "vyre_buffer_upload": (_S, [BufferHandle, c_uint64, c_void_p, c_uint64]),
    "vyre_buffer_download": (_S, [BufferHandle, c_uint64, c_void_p, c_uint64]),
    "vyre_buffer_upload_ranges": (_S, [BufferHandle, POINTER(UploadRangeStruct), c_size_t]),
    "vyre_buffer_download_ranges": (_S, [BufferHandle, POINTER(DownloadRangeStruct), c_size_t]),
    "vyre_buffer_info_get": (_S, [BufferHandle, POINTER(BufferInfoStruct)]),
    "vyre_program_create": (_S, [ContextHandle, POINTER(ProgramDescStruct),
                                 POINTER(ProgramHandle)]),
    "vyre_program_destroy": (_S, [ProgramHandle]),
    "vyre_dispatch": (_S, [ProgramHandle, POINTER(DispatchDescStruct), POINTER(TimingStruct)]),
    "vyre_dispatch_async": (_S, [ProgramHandle, POINTER(DispatchDescStruct),
                                 POINTER(PendingHandle)]),
    "vyre_pending_poll": (_S, [PendingHandle]),
    "vyre_pending_wait": (_S, [PendingHandle, c_uint64]),
    "vyre_pending_timing": (_S, [PendingHandle, POINTER(TimingStruct)]),
    "vyre_pending_release": (_S, [PendingHandle]),
}


# ---------------------------------------------------------------------------
# Errors and loading
# ---------------------------------------------------------------------------

class VyreError(Exception):
    """A vyre-cuda call failed.

    status: a Status (or the raw int for a status newer than these bindings);
    status_name: the library's name for it ("VYRE_STATUS_NO_DRIVER");
    cu_result: the CUDA driver's CUresult, 0 when the driver was not the cause;
    message: the library's message, ending with a "Fix:" sentence;
    call: the C function that failed.
    """

    def __init__(self, status, status_name, cu_result, message, call=None):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.status_name = status_name
        self.cu_result = cu_result
        self.message = message
        self.call = call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{status_name} (CUresult {cu_result}): {message}")


class LibraryLoadError(OSError):
    """libvyre_cuda could not be loaded, or is the wrong version."""


_lib = None
_lib_lock = threading.Lock()


def _default_library_path():
    return os.environ.get("VYRE_CUDA_LIBRARY") or "libvyre_cuda.so.0"


def load(path=None):
    """Loads the library (once per process) and returns the ctypes CDLL.

    path defaults to $VYRE_CUDA_LIBRARY, else libvyre_cuda.so.0 through the
    loader's search path. Later calls return the library already loaded.
    """
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = path or _default_library_path()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryLoadError(
                f"cannot load {path}: {e}. Fix: set VYRE_CUDA_LIBRARY to the path of "
                f"libvyre_cuda.so.0, or add its directory to LD_LIBRARY_PATH.") from None
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise LibraryLoadError(
                    f"{path} does not export {name}. Fix: point VYRE_CUDA_LIBRARY at a "
                    f"libvyre_cuda.so.0 that matches these bindings.") from None
            fn.restype = restype
            fn.argtypes = argtypes
        major = lib.vyre_version() >> 22
        if major != VERSION_MAJOR:
            raise LibraryLoadError(
                f"{path} has major version {major}, these bindings need {VERSION_MAJOR}. "
                f"Fix: install the bindings and the library from the same release.")
        _lib = lib
        return lib


def _last_error_of(lib):
    status = _S()
    cu_result = c_int32()
    length = c_size_t()
    # The length first: compile logs can make messages long.
    lib.vyre_last_error(byref(status), byref(cu_result), None, 0, byref(length))
    text = ctypes.create_string_buffer(length.value + 1)
    lib.vyre_last_error(None, None, text, len(text), None)
    return status.value, cu_result.value, text.value.decode("utf-8", "replace")


def _check(status, call):
    """Raises VyreError for a failed status, with this thread's last error."""
    if status == 0:
        return
    lib = load()
    # Read at once, on this thread: the detail is per thread and the next call
    # clears it. ctypes runs the call and this read on the same OS thread.
    _, cu_result, message = _last_error_of(lib)
    name = lib.vyre_status_name(status).decode("ascii", "replace")
    raise VyreError(status, name, cu_result, message, call)


def _call(name, *args):
    _check(getattr(load(), name)(*args), name)


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = load().vyre_version()
    return (v >> 22, (v >> 12) & 0x3FF, v & 0xFFF)


def version_string():
    return "%d.%d.%d" % version()


def status_name(status):
    """The library's name for a status value ("VYRE_STATUS_UNKNOWN" if unknown)."""
    return load().vyre_status_name(int(status)).decode("ascii", "replace")


def last_error():
    """This thread's last error as (status, cu_result, message); status 0 if none."""
    status, cu_result, message = _last_error_of(load())
    try:
        status = Status(status)
    except ValueError:
        pass
    return status, cu_result, message


def device_count():
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


def device_info(ordinal=0):
    """A dict describing device `ordinal` (name, compute_capability, limits...)."""
    info = _new(DeviceInfoStruct)
    _call("vyre_device_info_get", ordinal, byref(info))
    return _device_dict(info)


# Installed trampolines are never freed: the library may be inside the old
# callback on another thread while a new one is installed, and freeing the
# ctypes thunk under it would crash the process. A few bytes per call is
# the price.
_log_trampolines = []


def set_log_callback(callback, max_level=LogLevel.INFO):
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


def f32(x):
    """The bit pattern of float x as float32, for a SCALAR32 slot."""
    return _struct.unpack("<I", _struct.pack("<f", x))[0]


def f64(x):
    """The bit pattern of float x as float64, for a SCALAR64 slot."""
    return _struct.unpack("<Q", _struct.pack("<d", x))[0]


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


def _unsigned(value, bits, what):
    """value as an int that fits `bits` unsigned bits; ctypes would silently
    truncate it otherwise (2**32 in a uint32_t field becomes 0)."""
    value = int(value)
    if not 0 <= value < 2 ** bits:
        raise ValueError(f"{what} = {value} is outside [0, 2**{bits}). Fix: pass a value "
                         f"in range.")
    return value


def _dim3(value, what):
    if value is None:
        return (0, 0, 0)
    if isinstance(value, int):
        value = (value,)
    value = tuple(_unsigned(v, 32, what) for v in value)
    if not 1 <= len(value) <= 3:
        raise ValueError(f"{what} has {len(value)} dimensions. Fix: pass 1 to 3 sizes.")
    return value + (1,) * (3 - len(value))


# ---------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------

class _Object:
    """Owns one library handle. close() is idempotent and thread-safe."""

    _handle_type = None
    _destroy = None

    def __init__(self, bits, context):
        self._bits = bits
        self._context = context  # a strong reference: children keep their context alive
        self._close_lock = threading.Lock()

    @property
    def handle(self):
        """The library handle (a stable 64-bit value), 0 once closed."""
        return self._bits

    @property
    def closed(self):
        return self._bits == 0

    def _h(self):
        # Closed objects pass handle 0, which the library rejects with
        # INVALID_HANDLE and a Fix message, like any other bad handle.
        return self._handle_type(self._bits)

    def close(self):
        with self._close_lock:
            bits, self._bits = self._bits, 0
        if not bits:
            return
        if self._context is not None and self._context.closed:
            return  # destroying the context already released this object
        _call(self._destroy, self._handle_type(bits))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

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

    def __init__(self, device=0, transient_pool_limit_bytes=0, pinned_pool_limit_bytes=0):
        super().__init__(0, None)
        desc = _new(ContextDescStruct, device_ordinal=device,
                    transient_pool_limit_bytes=transient_pool_limit_bytes,
                    pinned_pool_limit_bytes=pinned_pool_limit_bytes)
        handle = ContextHandle()
        _call("vyre_context_create", byref(desc), byref(handle))
        self._bits = handle.bits

    def device_info(self):
        info = _new(DeviceInfoStruct)
        _call("vyre_context_device_info", self._h(), byref(info))
        return _device_dict(info)

    def telemetry(self):
        """Counters as a dict (see vyre_telemetry in vyre_cuda.h)."""
        t = _new(TelemetryStruct)
        _call("vyre_context_telemetry", self._h(), byref(t))
        return _struct_dict(t)

    def trim(self):
        """Releases the memory cached by the transient and pinned pools."""
        _call("vyre_context_trim", self._h())

    def selftest(self):
        """Runs the library's built-in self-test on this device (a checked
        vector add through the host path); raises VyreError on failure."""
        _call("vyre_context_selftest", self._h())

    def alloc(self, nbytes):
        """A resident device buffer of nbytes (> 0), uninitialised."""
        return Buffer(self, nbytes)

    def upload(self, data):
        """A resident buffer holding a copy of data."""
        buf = Buffer(self, _byte_view(data, "Context.upload").nbytes)
        try:
            buf.upload(data)
        except BaseException:
            buf.close()
            raise
        return buf

    def program(self, code, entry, bindings, workgroup_size=256, **kwargs):
        """Builds a Program; see Program for the arguments."""
        return Program(self, code, entry, bindings, workgroup_size, **kwargs)


class BufferRange:
    """A byte range of a resident buffer, bound to a dispatch.
    length 0 means "to the end of the buffer"."""

    __slots__ = ("buffer", "offset", "length")

    def __init__(self, buffer, offset=0, length=0):
        self.buffer = buffer
        self.offset = offset
        self.length = length


class Buffer(_Object):
    """Resident device memory owned by a Context."""

    _handle_type = BufferHandle
    _destroy = "vyre_buffer_free"

    def __init__(self, context, nbytes):
        super().__init__(0, context)
        handle = BufferHandle()
        _call("vyre_buffer_alloc", context._h(), nbytes, byref(handle))
        self._bits = handle.bits
        self.nbytes = nbytes

    @property
    def context(self):
        return self._context

    def info(self):
        """dict(bytes, device_pointer, context): device_pointer is the raw
        CUdeviceptr, valid until the buffer is freed."""
        info = _new(BufferInfoStruct)
        _call("vyre_buffer_info_get", self._h(), byref(info))
        return _struct_dict(info)

    @property
    def device_pointer(self):
        return self.info()["device_pointer"]

    def range(self, offset=0, length=0):
        """This buffer's bytes [offset, offset+length) for a dispatch binding."""
        return BufferRange(self, offset, length)

    def upload(self, data, offset=0):
        """Copies data (any bytes-like object) into the buffer at offset, and waits."""
        src = _readable(data, "Buffer.upload")
        _call("vyre_buffer_upload", self._h(), offset, src.address, src.nbytes)

    def download(self, nbytes=None, offset=0, out=None):
        """Copies bytes out of the buffer, and waits.

        Into `out` (a writable buffer, whose size is the byte count) when
        given, else into a new bytearray of nbytes (default: to the end)."""
        if out is None:
            if nbytes is None:
                nbytes = max(self.nbytes - offset, 0)
            out = nbytes
        dst = _writable(out, "Buffer.download")
        _call("vyre_buffer_download", self._h(), offset, dst.address, dst.nbytes)
        return dst.owner

    def upload_ranges(self, ranges):
        """Uploads [(offset, data), ...] with one staged copy and one sync."""
        refs = [(int(off), _readable(data, "Buffer.upload_ranges")) for off, data in ranges]
        arr = (UploadRangeStruct * max(len(refs), 1))()
        for i, (off, ref) in enumerate(refs):
            arr[i] = UploadRangeStruct(off, ref.nbytes, ref.address)
        _call("vyre_buffer_upload_ranges", self._h(), arr, len(refs))

    def download_ranges(self, ranges):
        """Downloads [(offset, nbytes_or_writable_buffer), ...] with one sync;
        returns the filled objects in order."""
        refs = [(int(off), _writable(dst, "Buffer.download_ranges")) for off, dst in ranges]
        arr = (DownloadRangeStruct * max(len(refs), 1))()
        for i, (off, ref) in enumerate(refs):
            arr[i] = DownloadRangeStruct(off, ref.nbytes, ref.address)
        _call("vyre_buffer_download_ranges", self._h(), arr, len(refs))
        return [ref.owner for _, ref in refs]


class Binding:
    """One kernel binding of a Program (vyre_binding_decl).

    role: Role or its name ("input", "output", "input_output", "shared");
    element_size: bytes per element; element_count: 0 = sized by the dispatch;
    output_offset/output_length: the byte range of a host output read back
    (length 0 = all)."""

    __slots__ = ("role", "element_size", "element_count", "name", "output_offset",
                 "output_length")

    def __init__(self, role, element_size=4, element_count=0, name=None, output_offset=0,
                 output_length=0):
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
    dict of wall_ns, device_ns, enqueue_ns and wait_ns when known."""

    timing = None


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

    def __init__(self, context, code, entry, bindings, workgroup_size=256, code_kind=None,
                 shared_memory_bytes=0, params=None, compile_options=None):
        super().__init__(0, context)
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
    def context(self):
        return self._context

    def _prepare(self, bindings, params, scalars, grid, block, element_count,
                 fixpoint_iterations, shared_memory_bytes, flags):
        """Builds the dispatch descriptor. Returns (desc, keep, keep_out,
        outputs): keep holds what C reads during the call; keep_out the host
        output memory, which must live until the wait; outputs[i] is the host
        object that receives binding i's result, or None."""
        bindings = list(bindings)
        keep = []
        keep_out = []
        outputs = Outputs([None] * len(bindings))
        structs = (DispatchBindingStruct * max(len(bindings), 1))()
        for i, entry in enumerate(bindings):
            role = self.bindings[i].role if i < len(self.bindings) else Role.INPUT
            s = _new(DispatchBindingStruct, source=int(Source.HOST))
            what = f"binding {i}"
            if isinstance(entry, tuple) and entry and isinstance(entry[0], Buffer):
                entry = BufferRange(*entry)
            if isinstance(entry, Buffer):
                entry = BufferRange(entry)
            if isinstance(entry, BufferRange):
                s.source = int(Source.RESIDENT)
                s.buffer = BufferHandle(entry.buffer.handle)
                s.offset = _unsigned(entry.offset, 64, f"{what} offset")
                s.length = _unsigned(entry.length, 64, f"{what} length")
            elif role == Role.SHARED or entry is None:
                pass  # SHARED entries are ignored; None leaves the library to object
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
            structs[i] = s

        words, word_count = _u32_array(params or (), "params")
        scalar_kinds = {}
        for kind, index in self.params or ():
            if kind in (ParamKind.SCALAR32, ParamKind.SCALAR64):
                scalar_kinds[index] = kind
        scalars = list(scalars or ())
        c_scalars = (c_uint64 * max(len(scalars), 1))()
        for i, v in enumerate(scalars):
            if isinstance(v, float):
                # A float goes in as the bit pattern of the width its slot declares.
                v = f64(v) if scalar_kinds.get(i) == ParamKind.SCALAR64 else f32(v)
            v = int(v)
            if not -2 ** 63 <= v <= _U64_MAX:
                raise ValueError(f"scalars[{i}] = {v} does not fit 64 bits. Fix: pass values "
                                 f"in [-2**63, 2**64).")
            c_scalars[i] = v & _U64_MAX
        keep += [structs, words, c_scalars, bindings]

        desc = _new(DispatchDescStruct, flags=_unsigned(flags, 32, "flags"),
                    bindings=structs if bindings else None,
                    binding_count=len(bindings), param_words=words if word_count else None,
                    param_word_count=word_count, scalars=c_scalars if scalars else None,
                    scalar_count=len(scalars),
                    element_count=_unsigned(element_count, 64, "element_count"),
                    fixpoint_iterations=_unsigned(fixpoint_iterations, 32,
                                                  "fixpoint_iterations"),
                    shared_memory_bytes=_unsigned(shared_memory_bytes, 32,
                                                  "shared_memory_bytes"))
        desc.grid[:] = _dim3(grid, "grid")
        desc.block[:] = _dim3(block, "block")
        return desc, keep, keep_out, outputs

    def dispatch(self, bindings, params=(), scalars=(), grid=None, block=None, element_count=0,
                 fixpoint_iterations=1, shared_memory_bytes=0, flags=0):
        """Runs the program and waits.

        bindings: one entry per declared binding, in order:
          a Buffer, BufferRange or (Buffer, offset, length) -> resident memory;
          INPUT: any bytes-like object;
          OUTPUT: a writable buffer to fill, or a byte count for a new bytearray;
          INPUT_OUTPUT: a writable buffer (updated in place), or read-only
            bytes (the result goes to a new bytearray);
          SHARED: ignored (pass None).
        params: u32 parameter words. scalars: values for SCALAR32/64 slots
        (floats are packed to the slot's width). grid/block: None derives the
        grid from element_count and uses the program's workgroup size.

        Returns Outputs: per binding, the object holding its host result (or
        None), with .timing."""
        desc, keep, keep_out, outputs = self._prepare(bindings, params, scalars, grid, block,
                                                      element_count, fixpoint_iterations,
                                                      shared_memory_bytes, flags)
        timing = _new(TimingStruct)
        _call("vyre_dispatch", self._h(), byref(desc), byref(timing))
        del keep, keep_out  # C is done with the host memory
        outputs.timing = _struct_dict(timing)
        return outputs

    def dispatch_async(self, bindings, params=(), scalars=(), grid=None, block=None,
                       element_count=0, fixpoint_iterations=1, shared_memory_bytes=0, flags=0):
        """Enqueues a dispatch and returns a Pending at once (arguments as for
        dispatch). Inputs are copied before it returns; outputs are written by
        Pending.wait(), and the Pending keeps their memory alive until then."""
        desc, keep, keep_out, outputs = self._prepare(bindings, params, scalars, grid, block,
                                                      element_count, fixpoint_iterations,
                                                      shared_memory_bytes, flags)
        handle = PendingHandle()
        _call("vyre_dispatch_async", self._h(), byref(desc), byref(handle))
        # Inputs were copied before the call returned; only the outputs'
        # memory must outlive it.
        del keep
        return Pending(handle.bits, self, keep_out, outputs)


class Pending(_Object):
    """An enqueued dispatch. wait() once, then close() (or let it be
    collected). Closing without waiting waits for the device work but skips
    copying host outputs back."""

    _handle_type = PendingHandle
    _destroy = "vyre_pending_release"

    def __init__(self, bits, program, keep, outputs):
        super().__init__(bits, program.context)
        self._program = program
        # The host output memory is written during wait(), or by the device
        # until release: it must outlive the handle.
        self._keep = keep
        self._outputs = outputs

    def poll(self):
        """True when the device work has completed, False if not yet."""
        status = load().vyre_pending_poll(self._h())
        if status == Status.NOT_READY:
            return False
        _check(status, "vyre_pending_poll")
        return True

    def wait(self, timeout_ns=None):
        """Waits (forever by default) and copies host outputs back; returns
        Outputs as dispatch() does. A timeout raises VyreError(TIMEOUT) and
        leaves the dispatch waitable; a second wait is INVALID_STATE."""
        timeout = WAIT_FOREVER if timeout_ns is None else int(timeout_ns)
        _call("vyre_pending_wait", self._h(), timeout)
        self._outputs.timing = self.timing()
        return self._outputs

    def timing(self):
        """dict of wall_ns, device_ns, enqueue_ns, wait_ns (after wait)."""
        t = _new(TimingStruct)
        _call("vyre_pending_timing", self._h(), byref(t))
        return _struct_dict(t)

    def close(self):
        try:
            super().close()
        finally:
            # The library no longer touches the host memory once released (or
            # once its context is gone).
            if self.closed:
                self._keep = None
