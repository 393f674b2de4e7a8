"""C declarations: vyre_cuda.h's constants, enums, struct layouts and prototypes."""

from __future__ import annotations

import ctypes
import enum
from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_int32, c_size_t, c_uint8,
                    c_uint32, c_uint64, c_void_p)
from typing import Union
# typing.Sequence as _Seq: this package's Sequence is the vyre sequence.
from typing import Sequence as _Seq


#: The major version of vyre_cuda.h these bindings were written for.
VERSION_MAJOR = 0

WAIT_FOREVER = 2 ** 64 - 1
DISPATCH_FLAG_DEVICE_TIMING = 1 << 0
DISPATCH_FLAG_COOPERATIVE = 1 << 1
KERNEL_NODE_UPDATE_GRID = 1 << 0
KERNEL_NODE_UPDATE_SCALARS = 1 << 1
#: vyre_egraph_rebuild_desc.flags: start from every class alone.
EGRAPH_REBUILD_RESET = 1 << 0
#: Record device events so the result reports device_ns (GPU images).
EGRAPH_REBUILD_DEVICE_TIMING = 1 << 1
#: Testing: group rows by a deliberately weak hash (op and arity only).
EGRAPH_REBUILD_COLLIDING_HASH = 1 << 2
EGRAPH_REBUILD_DEVICE_ROUNDS = 1 << 3

#: vyre_buffer_info.flags: the buffer borrows memory other CUDA code owns.
BUFFER_INFO_FLAG_BORROWED = 1 << 0
#: vyre_buffer_info.flags: the buffer maps memory another process exported
#: (Context.import_ipc); BUFFER_INFO_FLAG_BORROWED is set too.
BUFFER_INFO_FLAG_IMPORTED = 1 << 1
#: The size of an IPC handle (Buffer.export_ipc) in bytes.
IPC_HANDLE_BYTES = 128
#: Kernel arguments vyre_graph_node_info reports (VYRE_GRAPH_NODE_MAX_ARGUMENTS).
GRAPH_NODE_MAX_ARGUMENTS = 16
BUFFER_COPY_FLAG_STAGED = 1 << 0
#: vyre_graph_node_info_set: take the node's fields as given (unchecked
#: pointer slots, dynamic shared memory, memset destination).
GRAPH_NODE_SET_RAW = 1 << 0
#: CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, as stream arguments.
STREAM_LEGACY = 1
STREAM_PER_THREAD = 2

#: A grid or block size: one int, 1-3 ints, or None for the default.
Dim3 = Union[int, _Seq[int], None]

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
    #: The device faulted (illegal address, launch failure, hardware error):
    #: destroy every context on that device and create a new one.
    DEVICE_FAULT = 21


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
    #: A CUDA graph node type with no kind of its own below.
    OTHER = 4
    #: Node types the library does not record itself (other CUDA code's work).
    HOST = 5
    CHILD_GRAPH = 6
    EMPTY = 7
    EVENT_RECORD = 8
    EVENT_WAIT = 9
    CONDITIONAL = 10
    MEM_ALLOC = 11
    MEM_FREE = 12


class CaptureMode(enum.IntEnum):
    """vyre_capture_desc.mode: which threads' "unsafe" CUDA calls (allocations,
    frees, module loads, synchronisations) the driver forbids while a capture
    is open."""
    #: The capturing thread's own (the default).
    THREAD_LOCAL = 0
    #: Every thread's of the process.
    GLOBAL = 1
    #: None.
    RELAXED = 2


class StepKind(enum.IntEnum):
    DISPATCH = 1
    FILL = 2
    COPY = 3
    UPLOAD = 4
    DOWNLOAD = 5


class EgraphDevice(enum.IntEnum):
    #: On the GPU of a Context.
    GPU = 1
    #: The library's CPU reference; needs no driver or GPU.
    CPU = 2


class EgraphColumn(enum.IntEnum):
    ROW_CLASSES = 1
    ROW_OPS = 2
    CHILD_OFFSETS = 3
    CHILD_LENGTHS = 4
    ROW_SIGNATURES = 5
    CHILDREN = 6
    #: class_count entries: the canonical class of every class (read only).
    CANONICAL_CLASSES = 7


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


class EgraphImageHandle(_Handle):
    _c_name_ = "vyre_egraph_image"


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
        # Version 2 (336 bytes).
        ("peer_access_mask", c_uint64),
    ]


class ContextDescStruct(Structure):
    _c_name_ = "vyre_context_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("device_ordinal", c_uint32),
        ("transient_pool_limit_bytes", c_uint64),
        ("pinned_pool_limit_bytes", c_uint64),
        ("staging_chunk_bytes", c_uint64),
        ("staging_chunk_count", c_uint32),
        ("staging_threads", c_uint32),
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
        ("flags", c_uint32),
        ("bytes", c_uint64),
        ("device_pointer", c_uint64),
        ("context", ContextHandle),
    ]


class BufferWrapDescStruct(Structure):
    _c_name_ = "vyre_buffer_wrap_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("device_pointer", c_uint64),
        ("bytes", c_uint64),
    ]


class IpcHandleStruct(Structure):
    _c_name_ = "vyre_ipc_handle"
    _fields_ = [("bytes", c_uint8 * IPC_HANDLE_BYTES)]


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


class BufferCopyDescStruct(Structure):
    _c_name_ = "vyre_buffer_copy_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("src", BufferHandle),
        ("src_offset", c_uint64),
        ("dst", BufferHandle),
        ("dst_offset", c_uint64),
        ("bytes", c_uint64),
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


class GraphNodeInfoStruct(Structure):
    _c_name_ = "vyre_graph_node_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", c_uint32),
        ("cu_graph_node", c_uint64),
        ("cu_graph_exec", c_uint64),
        ("cu_function", c_uint64),
        ("grid", c_uint32 * 3),
        ("block", c_uint32 * 3),
        ("shared_memory_bytes", c_uint32),
        ("argument_count", c_uint32),
        ("arguments", c_uint64 * GRAPH_NODE_MAX_ARGUMENTS),
        ("memset_dst", c_uint64),
        ("memset_value", c_uint32),
        ("memset_element_size", c_uint32),
        ("memset_width", c_uint64),
        ("memset_height", c_uint64),
        ("memset_pitch", c_uint64),
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


class CaptureDescStruct(Structure):
    _c_name_ = "vyre_capture_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("mode", c_uint32),
        ("param_bytes", c_uint64),
    ]


class GraphLoopDescStruct(Structure):
    _c_name_ = "vyre_graph_loop_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_iterations", c_uint32),
        ("condition_buffer", BufferHandle),
        ("condition_offset", c_uint64),
        ("count_buffer", BufferHandle),
        ("count_offset", c_uint64),
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


class EgraphImageDescStruct(Structure):
    _c_name_ = "vyre_egraph_image_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("device", _c_enum),
        ("context", ContextHandle),
        ("row_count", c_uint64),
        ("class_count", c_uint64),
        ("child_count", c_uint64),
        ("row_classes", POINTER(c_uint32)),
        ("row_ops", POINTER(c_uint32)),
        ("child_offsets", POINTER(c_uint32)),
        ("child_lengths", POINTER(c_uint32)),
        ("row_signatures", POINTER(c_uint32)),
        ("children", POINTER(c_uint32)),
        ("cpu_threads", c_uint32),
        ("reserved0", c_uint32),
        ("row_capacity", c_uint64),
        ("class_capacity", c_uint64),
        ("child_capacity", c_uint64),
    ]


class EgraphImageInfoStruct(Structure):
    _c_name_ = "vyre_egraph_image_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("device", _c_enum),
        ("context", ContextHandle),
        ("row_count", c_uint64),
        ("class_count", c_uint64),
        ("child_count", c_uint64),
        ("canonical_class_count", c_uint64),
        ("bytes", c_uint64),
        ("row_capacity", c_uint64),
        ("class_capacity", c_uint64),
        ("child_capacity", c_uint64),
        ("changed_class_count", c_uint64),
    ]


class EgraphRebuildResultStruct(Structure):
    _c_name_ = "vyre_egraph_rebuild_result"
    _fields_ = [("struct_size", c_uint32), ("rounds", c_uint32)] + [
        (name, c_uint64) for name in (
            "merges", "union_merges", "classes_before", "classes_after", "rows_visited",
            "device_ns", "wall_ns", "changed_class_count")
    ] + [("full_rounds", c_uint32), ("reserved0", c_uint32)]


class EgraphRebuildDescStruct(Structure):
    _c_name_ = "vyre_egraph_rebuild_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("unions", POINTER(c_uint32)),
        ("union_count", c_uint64),
        ("canonical_out", POINTER(c_uint32)),
        ("result_out", POINTER(EgraphRebuildResultStruct)),
        ("max_rounds", c_uint32),
        ("reserved0", c_uint32),
    ]


class EgraphAppendDescStruct(Structure):
    _c_name_ = "vyre_egraph_append_desc"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("class_count", c_uint64),
        ("row_count", c_uint64),
        ("child_count", c_uint64),
        ("row_classes", POINTER(c_uint32)),
        ("row_ops", POINTER(c_uint32)),
        ("child_offsets", POINTER(c_uint32)),
        ("child_lengths", POINTER(c_uint32)),
        ("row_signatures", POINTER(c_uint32)),
        ("children", POINTER(c_uint32)),
    ]


#: Every C struct mirrored above (for the layout test).
C_STRUCTS = (ContextHandle, BufferHandle, ProgramHandle, PendingHandle, GraphHandle,
             SequenceHandle, EgraphImageHandle, DeviceInfoStruct, ContextDescStruct,
             TelemetryStruct, UploadRangeStruct, DownloadRangeStruct, BufferInfoStruct,
             BufferWrapDescStruct, BufferCopyDescStruct, IpcHandleStruct,
             BindingDeclStruct, KernelParamStruct, ProgramDescStruct, DispatchBindingStruct,
             DispatchDescStruct, TimingStruct, GraphReplayDescStruct, GraphInfoStruct,
             GraphNodeInfoStruct, KernelNodeUpdateStruct, CaptureDescStruct, GraphLoopDescStruct,
             SequenceStepStruct, SequenceDescStruct,
             EgraphImageDescStruct, EgraphImageInfoStruct, EgraphRebuildResultStruct,
             EgraphRebuildDescStruct, EgraphAppendDescStruct)


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


def _unsigned(value, bits, what):
    """value as an int that fits `bits` unsigned bits; ctypes would silently
    truncate it otherwise (2**32 in a uint32_t field becomes 0)."""
    value = int(value)
    if not 0 <= value < 2 ** bits:
        raise ValueError(f"{what} = {value} is outside [0, 2**{bits}). Fix: pass a value "
                         f"in range.")
    return value


LogCallbackType = ctypes.CFUNCTYPE(None, c_void_p, _c_enum, c_char_p)

# name: (restype, argtypes). Every function in vyre_cuda.h.
_S = _c_enum  # vyre_status
_PROTOTYPES = {
    "vyre_version": (c_uint32, []),
    "vyre_status_name": (c_char_p, [_S]),
    "vyre_last_error": (_S, [POINTER(_S), POINTER(c_int32), c_char_p, c_size_t,
                             POINTER(c_size_t)]),
    "vyre_last_error_log": (_S, [c_char_p, c_size_t, POINTER(c_size_t)]),
    "vyre_set_log_callback": (_S, [LogCallbackType, c_void_p, _c_enum]),
    "vyre_device_count": (_S, [POINTER(c_uint32)]),
    "vyre_device_info_get": (_S, [c_uint32, POINTER(DeviceInfoStruct)]),
    "vyre_device_can_access_peer": (_S, [c_uint32, c_uint32, POINTER(c_uint32)]),
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
    "vyre_buffer_copy": (_S, [POINTER(BufferCopyDescStruct)]),
    "vyre_buffer_copy_async": (_S, [POINTER(BufferCopyDescStruct), POINTER(PendingHandle)]),
    "vyre_buffer_export_ipc": (_S, [BufferHandle, POINTER(IpcHandleStruct)]),
    "vyre_buffer_import_ipc": (_S, [ContextHandle, POINTER(IpcHandleStruct),
                                    POINTER(BufferHandle)]),
    "vyre_buffer_wrap": (_S, [ContextHandle, POINTER(BufferWrapDescStruct),
                              POINTER(BufferHandle)]),
    "vyre_context_wait_stream": (_S, [ContextHandle, c_uint64]),
    "vyre_context_signal_stream": (_S, [ContextHandle, c_uint64]),
    "vyre_host_alloc": (_S, [ContextHandle, c_uint64, POINTER(c_void_p)]),
    "vyre_host_free": (_S, [c_void_p]),
    "vyre_host_register": (_S, [ContextHandle, c_void_p, c_uint64]),
    "vyre_host_unregister": (_S, [c_void_p]),
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
    "vyre_graph_launch": (_S, [GraphHandle, POINTER(GraphReplayDescStruct), c_uint64,
                               POINTER(PendingHandle)]),
    "vyre_graph_node_info_get": (_S, [GraphHandle, c_uint64, POINTER(GraphNodeInfoStruct)]),
    "vyre_graph_node_info_set": (_S, [GraphHandle, c_uint64, POINTER(GraphNodeInfoStruct),
                                      c_uint32]),
    "vyre_capture_begin": (_S, [ContextHandle, POINTER(CaptureDescStruct), POINTER(c_uint64)]),
    "vyre_capture_dispatch": (_S, [ProgramHandle, POINTER(DispatchDescStruct)]),
    "vyre_capture_end": (_S, [ContextHandle, POINTER(GraphHandle)]),
    "vyre_graph_loop_create": (_S, [GraphHandle, POINTER(GraphLoopDescStruct),
                                    POINTER(GraphHandle)]),
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
    "vyre_egraph_image_create": (_S, [POINTER(EgraphImageDescStruct),
                                      POINTER(EgraphImageHandle)]),
    "vyre_egraph_image_destroy": (_S, [EgraphImageHandle]),
    "vyre_egraph_image_read": (_S, [EgraphImageHandle, _c_enum, c_uint64, c_uint64,
                                    POINTER(c_uint32)]),
    "vyre_egraph_image_write": (_S, [EgraphImageHandle, _c_enum, c_uint64, c_uint64,
                                     POINTER(c_uint32)]),
    "vyre_egraph_image_info_get": (_S, [EgraphImageHandle, POINTER(EgraphImageInfoStruct)]),
    "vyre_egraph_pass": (_S, [EgraphImageHandle, POINTER(c_uint32), c_uint64,
                              POINTER(c_uint64)]),
    "vyre_egraph_rebuild": (_S, [EgraphImageHandle, POINTER(EgraphRebuildDescStruct),
                                 POINTER(EgraphRebuildResultStruct)]),
    "vyre_egraph_rebuild_async": (_S, [EgraphImageHandle, POINTER(EgraphRebuildDescStruct),
                                       POINTER(PendingHandle)]),
    "vyre_egraph_image_append": (_S, [EgraphImageHandle, POINTER(EgraphAppendDescStruct)]),
    "vyre_egraph_changed_read": (_S, [EgraphImageHandle, POINTER(c_uint32), c_uint64,
                                      POINTER(c_uint64)]),
}

# Functions newer than some libraries these bindings may load: a library
# without them still loads, and only the features that need them fail.
_OPTIONAL = frozenset({"vyre_buffer_wrap", "vyre_context_wait_stream",
                       "vyre_context_signal_stream", "vyre_egraph_image_append",
                       "vyre_egraph_changed_read", "vyre_buffer_copy",
                       "vyre_buffer_copy_async", "vyre_device_can_access_peer",
                       "vyre_buffer_export_ipc", "vyre_buffer_import_ipc",
                       "vyre_graph_launch", "vyre_graph_node_info_get",
                       "vyre_graph_node_info_set", "vyre_capture_begin",
                       "vyre_capture_dispatch", "vyre_capture_end",
                       "vyre_graph_loop_create"})
