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

Graphs record a dispatch once and replay it at the cost of one launch:

        graph = prog.record([a, b, len(a) * 4], params=[len(a)])  # sample data
        out = graph.replay([a2, b2, len(a2) * 4])[2]   # same byte lengths

Sequences chain steps over resident buffers and run eagerly or as a graph:

        seq = ctx.sequence([vc.UploadStep(da, a), vc.UploadStep(db, b),
                            vc.Repeat(4, [vc.DispatchStep(prog, [da, db, dout],
                                                          params=[n]),
                                          vc.CopyStep(da, dout)]),
                            vc.DownloadStep(dout)])
        out = seq.run()[0]                  # or seq.record().replay()[0]

Objects (Context, Buffer, Program, Pending, Graph, Sequence) own a library
handle: close() them or use them as context managers; garbage collection
closes them too. A child keeps its Context alive, and closing a Context
releases everything it owns (the children's close() then does nothing).
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
    "KERNEL_NODE_UPDATE_GRID", "KERNEL_NODE_UPDATE_SCALARS",
    "Status", "Role", "CodeKind", "ParamKind", "Source", "LogLevel", "GraphNodeKind", "StepKind",
    "VyreError", "LibraryLoadError", "Binding", "BufferRange",
    "Context", "Buffer", "Program", "Pending", "Outputs", "Graph", "Sequence",
    "Step", "DispatchStep", "FillStep", "CopyStep", "UploadStep", "DownloadStep", "Repeat",
    "load", "version", "version_string", "status_name", "last_error", "device_count",
    "device_info", "set_log_callback", "f32", "f64",
]

#: The major version of vyre_cuda.h these bindings were written for.
VERSION_MAJOR = 0

WAIT_FOREVER = 2 ** 64 - 1
DISPATCH_FLAG_DEVICE_TIMING = 1 << 0
DISPATCH_FLAG_COOPERATIVE = 1 << 1
KERNEL_NODE_UPDATE_GRID = 1 << 0
KERNEL_NODE_UPDATE_SCALARS = 1 << 1

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
    #: A graph replay's bindings differ from the recorded shape.
    SHAPE_MISMATCH = 20


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


class GraphNodeKind(enum.IntEnum):
    KERNEL = 1
    MEMCPY = 2
    MEMSET = 3
    #: Any other CUDA graph node type (none are recorded by this library).
    OTHER = 4


class StepKind(enum.IntEnum):
    DISPATCH = 1
    FILL = 2
    COPY = 3
    UPLOAD = 4
    DOWNLOAD = 5


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


class GraphHandle(_Handle):
    _c_name_ = "vyre_graph"


class SequenceHandle(_Handle):
    _c_name_ = "vyre_sequence"


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
            "live_buffers", "live_programs", "live_pendings", "graph_records",
            "graph_replays", "graph_uploads_skipped", "graph_launches", "sequence_runs",
            "live_graphs", "live_sequences")
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


class GraphReplayDescStruct(Structure):
    _c_name_ = "vyre_graph_replay_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("bindings", POINTER(DispatchBindingStruct)),
        ("binding_count", c_size_t),
        ("param_words", POINTER(c_uint32)),
        ("param_word_count", c_size_t),
        ("scalars", POINTER(c_uint64)),
        ("scalar_count", c_size_t),
        ("element_count", c_uint64),
    ]


class GraphInfoStruct(Structure):
    _c_name_ = "vyre_graph_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("from_sequence", c_uint32),
        ("context", ContextHandle),
        ("node_count", c_uint64),
        ("kernel_node_count", c_uint64),
        ("unchanged_input_node_count", c_uint64),
        ("element_count", c_uint64),
        ("capacity_elements", c_uint64),
        ("replays", c_uint64),
        ("host_input_bytes", c_uint64),
        ("host_output_bytes", c_uint64),
    ]


class KernelNodeUpdateStruct(Structure):
    _c_name_ = "vyre_kernel_node_update"
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("grid", c_uint32 * 3),
        ("reserved0", c_uint32),
        ("scalars", POINTER(c_uint64)),
        ("scalar_count", c_size_t),
    ]


class SequenceStepStruct(Structure):
    _c_name_ = "vyre_sequence_step"
    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", _c_enum),
        ("program", ProgramHandle),
        ("dispatch", POINTER(DispatchDescStruct)),
        ("buffer", BufferHandle),
        ("offset", c_uint64),
        ("bytes", c_uint64),
        ("src_buffer", BufferHandle),
        ("src_offset", c_uint64),
        ("host_src", c_void_p),
        ("host_dst", c_void_p),
        ("fill_byte", c_uint32),
        ("reserved0", c_uint32),
    ]


class SequenceDescStruct(Structure):
    _c_name_ = "vyre_sequence_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("repeat_count", c_uint32),
        ("steps", POINTER(SequenceStepStruct)),
        ("step_count", c_size_t),
        ("repeat_first", c_size_t),
        ("repeat_step_count", c_size_t),
    ]


#: Every C struct mirrored above (for the layout test).
C_STRUCTS = (ContextHandle, BufferHandle, ProgramHandle, PendingHandle, GraphHandle,
             SequenceHandle, DeviceInfoStruct, ContextDescStruct, TelemetryStruct,
             UploadRangeStruct, DownloadRangeStruct, BufferInfoStruct, BindingDeclStruct,
             KernelParamStruct, ProgramDescStruct, DispatchBindingStruct, DispatchDescStruct,
             TimingStruct, GraphReplayDescStruct, GraphInfoStruct, KernelNodeUpdateStruct,
             SequenceStepStruct, SequenceDescStruct)


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
    "vyre_graph_record": (_S, [ProgramHandle, POINTER(DispatchDescStruct), POINTER(GraphHandle)]),
    "vyre_graph_replay": (_S, [GraphHandle, POINTER(GraphReplayDescStruct),
                               POINTER(TimingStruct)]),
    "vyre_graph_replay_async": (_S, [GraphHandle, POINTER(GraphReplayDescStruct),
                                     POINTER(PendingHandle)]),
    "vyre_graph_destroy": (_S, [GraphHandle]),
    "vyre_graph_info_get": (_S, [GraphHandle, POINTER(GraphInfoStruct)]),
    "vyre_graph_node_kind_get": (_S, [GraphHandle, c_uint64, POINTER(_c_enum)]),
    "vyre_graph_kernel_node_update": (_S, [GraphHandle, c_uint64,
                                           POINTER(KernelNodeUpdateStruct)]),
    "vyre_sequence_create": (_S, [ContextHandle, POINTER(SequenceDescStruct),
                                  POINTER(SequenceHandle)]),
    "vyre_sequence_run": (_S, [SequenceHandle, POINTER(TimingStruct)]),
    "vyre_sequence_record": (_S, [SequenceHandle, POINTER(GraphHandle)]),
    "vyre_sequence_destroy": (_S, [SequenceHandle]),
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


def _resident_range(entry):
    """entry as a BufferRange when it names resident memory, else None."""
    if isinstance(entry, tuple) and entry and isinstance(entry[0], Buffer):
        return BufferRange(*entry)
    if isinstance(entry, Buffer):
        return BufferRange(entry)
    if isinstance(entry, BufferRange):
        return entry
    return None


def _marshal_bindings(decls, bindings):
    """vyre_dispatch_binding structs for one entry per declared binding.

    decls: the program's Binding list (their roles say how host data is
    bound). Returns (structs, keep, keep_out, outputs, residents): keep holds
    what C reads during the call, keep_out the host output memory (it must
    live until the wait), outputs[i] the host object receiving binding i's
    result (or None), residents the Buffers bound."""
    bindings = list(bindings)
    keep = []
    keep_out = []
    residents = []
    outputs = Outputs([None] * len(bindings))
    structs = (DispatchBindingStruct * max(len(bindings), 1))()
    for i, entry in enumerate(bindings):
        role = decls[i].role if i < len(decls) else Role.INPUT
        s = _new(DispatchBindingStruct, source=int(Source.HOST))
        what = f"binding {i}"
        resident = _resident_range(entry)
        if resident is not None:
            s.source = int(Source.RESIDENT)
            s.buffer = BufferHandle(resident.buffer.handle)
            s.offset = _unsigned(resident.offset, 64, f"{what} offset")
            s.length = _unsigned(resident.length, 64, f"{what} length")
            residents.append(resident.buffer)
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
    return structs, keep, keep_out, outputs, residents


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

    def sequence(self, steps):
        """Builds a Sequence from steps; see Sequence."""
        return Sequence(self, steps)


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
        structs, keep, keep_out, outputs, _ = _marshal_bindings(self.bindings, bindings)
        count = len(outputs)
        words, word_count = _u32_array(params or (), "params")
        c_scalars, scalar_count = _scalar_array(scalars or (), self.params, "scalars")
        keep += [structs, words, c_scalars, bindings]

        desc = _new(DispatchDescStruct, flags=_unsigned(flags, 32, "flags"),
                    bindings=structs if count else None,
                    binding_count=count, param_words=words if word_count else None,
                    param_word_count=word_count, scalars=c_scalars if scalar_count else None,
                    scalar_count=scalar_count,
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

    def record(self, bindings, params=(), scalars=(), grid=None, block=None, element_count=0,
               fixpoint_iterations=1, shared_memory_bytes=0, flags=0):
        """Records this dispatch as a Graph (arguments as for dispatch();
        host entries are sample data of the shape every replay must keep).
        Nothing runs until Graph.replay()."""
        return Graph(self, bindings, params, scalars, grid, block, element_count,
                     fixpoint_iterations, shared_memory_bytes, flags)


class Pending(_Object):
    """An enqueued dispatch or graph replay. wait() once, then close() (or
    let it be collected). Closing without waiting waits for the device work
    but skips copying host outputs back."""

    _handle_type = PendingHandle
    _destroy = "vyre_pending_release"

    def __init__(self, bits, source, keep, outputs):
        # source: the Program dispatched or the Graph replayed.
        super().__init__(bits, source.context)
        self._source = source
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
    they return the sequence's DOWNLOAD results.

    The graph keeps the Python objects it uses (program, bound buffers, the
    sequence's host memory) alive until close().
    """

    _handle_type = GraphHandle
    _destroy = "vyre_graph_destroy"
    # Defaults, so a closed or half-built Graph still reports INVALID_HANDLE.
    _program = None
    _decls = ()
    _residents = ()
    _sequence_keep = None
    _downloads = ()

    def __init__(self, program, bindings, params=(), scalars=(), grid=None, block=None,
                 element_count=0, fixpoint_iterations=1, shared_memory_bytes=0, flags=0):
        """Records `program` dispatched with these arguments (see
        Program.dispatch); nothing runs."""
        super().__init__(0, program.context)
        bindings = list(bindings)
        desc, keep, keep_out, _ = program._prepare(bindings, params, scalars, grid, block,
                                                   element_count, fixpoint_iterations,
                                                   shared_memory_bytes, flags)
        handle = GraphHandle()
        _call("vyre_graph_record", program._h(), byref(desc), byref(handle))
        del keep, keep_out  # the sample inputs were copied; nothing else is kept
        self._bits = handle.bits
        self._program = program
        self._decls = program.bindings
        self._residents = [r.buffer for r in map(_resident_range, bindings) if r is not None]

    @classmethod
    def _of_sequence(cls, bits, sequence):
        graph = cls.__new__(cls)
        _Object.__init__(graph, bits, sequence.context)
        # The library reads the sequence's host memory at every replay, even
        # once the sequence itself is closed.
        graph._sequence_keep = sequence._keep
        graph._downloads = sequence._downloads
        return graph

    @property
    def context(self):
        return self._context

    @property
    def program(self):
        """The recorded Program (None for a sequence graph)."""
        return self._program

    @property
    def from_sequence(self):
        return self._sequence_keep is not None

    def _replay_desc(self, bindings, params, scalars, element_count, flags):
        """Returns (desc, keep, keep_out, outputs, residents)."""
        keep, keep_out, residents = [], [], None
        desc = _new(GraphReplayDescStruct, flags=_unsigned(flags, 32, "flags"),
                    element_count=_unsigned(element_count, 64, "element_count"))
        if self.from_sequence:
            outputs = Outputs(step.out for step in self._downloads)
            keep_out.append(self._sequence_keep)
        else:
            outputs = Outputs([None] * len(self._decls))
        if bindings is not None:
            structs, keep, bound_out, outputs, residents = _marshal_bindings(self._decls,
                                                                             bindings)
            keep_out += bound_out
            keep.append(structs)
            # Non-NULL even for an empty list: "these bindings", not "keep them".
            desc.bindings = structs
            desc.binding_count = len(outputs)
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
        return desc, keep, keep_out, outputs, residents

    def replay(self, bindings=None, params=None, scalars=None, element_count=0, flags=0):
        """Replays the graph and waits.

        bindings: None keeps the current resident ranges (a graph without
          HOST bindings only); else one entry per declared binding with the
          source it was recorded with, as for Program.dispatch: host data of
          the recorded byte lengths, or a Buffer / BufferRange /
          (Buffer, offset, length) to bind from now on.
        params: new u32 parameter words (kept for later replays); None keeps.
        scalars: new scalar values (kept); None keeps.
        element_count: elements the derived grid covers (1 .. capacity
          class); 0 keeps the current count.
        flags: 0 or DISPATCH_FLAG_DEVICE_TIMING.

        Returns Outputs with .timing: per binding, the host object holding
        its result (or None); for a sequence graph, the DOWNLOAD steps'
        host objects in step order."""
        desc, keep, keep_out, outputs, residents = self._replay_desc(bindings, params, scalars,
                                                                     element_count, flags)
        timing = _new(TimingStruct)
        _call("vyre_graph_replay", self._h(), byref(desc), byref(timing))
        del keep, keep_out
        if residents is not None:
            self._residents = residents
        outputs.timing = _struct_dict(timing)
        return outputs

    def replay_async(self, bindings=None, params=None, scalars=None, element_count=0,
                     flags=0):
        """Enqueues a replay and returns a Pending at once (arguments as for
        replay). Host inputs are read before it returns; host outputs are
        written by Pending.wait(). A graph with HOST bindings allows one
        unwaited asynchronous replay at a time."""
        desc, keep, keep_out, outputs, residents = self._replay_desc(bindings, params, scalars,
                                                                     element_count, flags)
        handle = PendingHandle()
        _call("vyre_graph_replay_async", self._h(), byref(desc), byref(handle))
        del keep
        if residents is not None:
            self._residents = residents
        return Pending(handle.bits, self, keep_out, outputs)

    def info(self):
        """dict(from_sequence, context, node_count, kernel_node_count,
        unchanged_input_node_count, element_count, capacity_elements, replays,
        host_input_bytes, host_output_bytes); see vyre_graph_info."""
        info = _new(GraphInfoStruct)
        _call("vyre_graph_info_get", self._h(), byref(info))
        d = _struct_dict(info)
        d["from_sequence"] = bool(info.from_sequence)
        return d

    def node_kind(self, index):
        """The GraphNodeKind of node `index` (nodes numbered in run order)."""
        kind = _c_enum()
        _call("vyre_graph_node_kind_get", self._h(), _unsigned(index, 64, "index"),
              byref(kind))
        try:
            return GraphNodeKind(kind.value)
        except ValueError:
            return kind.value

    def node_kinds(self):
        """The GraphNodeKind of every node, in run order."""
        return [self.node_kind(i) for i in range(self.info()["node_count"])]

    def kernel_nodes(self):
        """Indices of the KERNEL nodes, for update_kernel_node()."""
        return [i for i, kind in enumerate(self.node_kinds()) if kind == GraphNodeKind.KERNEL]

    def update_kernel_node(self, index, grid=None, scalars=None):
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

    def close(self):
        try:
            super().close()
        finally:
            if self.closed:
                self._residents = ()
                self._sequence_keep = None


class Step:
    """One step of a Sequence. Build with DispatchStep, FillStep, CopyStep,
    UploadStep or DownloadStep; group steps to repeat in a Repeat."""

    kind = None

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
    resident bindings only: move host data with UploadStep / DownloadStep."""

    kind = StepKind.DISPATCH

    def __init__(self, program, bindings, params=(), scalars=(), grid=None, block=None,
                 element_count=0, fixpoint_iterations=1, shared_memory_bytes=0, flags=0):
        self.program = program
        self.bindings = list(bindings)
        self._args = (params, scalars, grid, block, element_count, fixpoint_iterations,
                      shared_memory_bytes, flags)

    def _struct(self, keep):
        desc, desc_keep, keep_out, _ = self.program._prepare(self.bindings, *self._args)
        keep += [desc, desc_keep, keep_out]  # read (and copied) by vyre_sequence_create
        return _new(SequenceStepStruct, kind=int(self.kind),
                    program=ProgramHandle(self.program.handle), dispatch=ctypes.pointer(desc))


class FillStep(Step):
    """Sets nbytes (default: to the end) of a buffer at offset to byte `value`."""

    kind = StepKind.FILL

    def __init__(self, target, value=0, nbytes=None, offset=0):
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

    def __init__(self, dst, src, nbytes=None, dst_offset=0, src_offset=0):
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

    def __init__(self, target, data, offset=0):
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

    def __init__(self, target, out=None, offset=0):
        if out is None:
            _, _, out = _step_range(target, offset, None, "DownloadStep")
        self._ref = _writable(out, "DownloadStep out")
        self.buffer, self.offset, self.nbytes = _step_range(target, offset, self._ref.nbytes,
                                                            "DownloadStep")

    @property
    def out(self):
        return self._ref.owner

    def _struct(self, keep):
        return _new(SequenceStepStruct, kind=int(self.kind),
                    buffer=BufferHandle(self.buffer.handle), offset=self.offset,
                    bytes=self.nbytes, host_dst=self._ref.address)


class Repeat:
    """A block of steps a Sequence runs `count` times in a row (one block per
    sequence)."""

    def __init__(self, count, steps):
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
    _keep = None
    _downloads = ()

    def __init__(self, context, steps):
        super().__init__(0, context)
        flat = []
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
        keep = []
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

    @property
    def context(self):
        return self._context

    def run(self):
        """Runs the steps and waits. Returns Outputs: the DOWNLOAD steps'
        host objects in step order, with .timing."""
        timing = _new(TimingStruct)
        _call("vyre_sequence_run", self._h(), byref(timing))
        outputs = Outputs(step.out for step in self._downloads)
        outputs.timing = _struct_dict(timing)
        return outputs

    def record(self):
        """Captures the whole sequence as one Graph; replay it with replay()."""
        handle = GraphHandle()
        _call("vyre_sequence_record", self._h(), byref(handle))
        return Graph._of_sequence(handle.bits, self)

    def close(self):
        try:
            super().close()
        finally:
            if self.closed:
                self._keep = None
