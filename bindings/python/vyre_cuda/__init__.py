"""Python bindings for vyre-cuda, through ctypes (no compiler, no numpy needed).

    import vyre_cuda as vc

    with vc.Context() as ctx:
        prog = ctx.program(ptx_text, "my_add_u32",
                           [vc.Binding(vc.Role.INPUT), vc.Binding(vc.Role.INPUT),
                            vc.Binding(vc.Role.OUTPUT)],
                           workgroup_size=256)
        a = array.array("I", ...); b = array.array("I", ...)
        out = prog.dispatch([a, b, len(a) * 4], params=[len(a)])[2]   # a bytearray

The library is the file named by the environment variable VYRE_CUDA_LIBRARY,
else the one bundled in the package (vyre_cuda/_lib/libvyre_cuda.so.0, put
there by `pip install`), else libvyre_cuda.so.0 from the loader's search
path. It is loaded on first use, so importing this module never fails for
lack of it; library_path() names the file loaded.

Every failing call raises VyreError, which carries the library's status, its
name, the driver's CUresult and the message (its first line, at most 1023
bytes, ends with a "Fix:" sentence; a compile log may follow, capped), and
the whole compiler or JIT log of a failed compile as .log.

Host data is anything with the buffer protocol: bytes, bytearray, memoryview,
array.array, numpy arrays. Inputs are read in place when writable and
C-contiguous (otherwise copied once); outputs are written into a writable
buffer you pass, or into a new bytearray when you pass a byte count. An
INPUT_OUTPUT binding is updated in place when writable; InOut(src, dst)
reads it from src and writes the result to dst (same byte count), src
untouched.

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

E-graph images hold e-nodes as u32 columns and rebuild their congruence
closure on the GPU (device "gpu", with a Context) or with the library's CPU
reference (device "cpu", no driver needed):

        img = vc.EgraphImage.from_nodes([(0, A, ()), (1, B, ()),
                                         (2, F, (0,)), (3, F, (1,))])
        img.pass_pairs()                    # congruent classes, nothing merged
        res = img.rebuild(unions=[(0, 1)])  # a = b, so f(a) = f(b)
        res.merges, res.canonical           # 1, [0, 0, 2, 2]

Objects (Context, Buffer, Program, Pending, Graph, Sequence, EgraphImage) own
a library handle: close() them or use them as context managers; garbage
collection closes them too. A child keeps its Context alive, and closing a
Context releases everything it owns (the children's close() then does nothing).

Interop with CuPy, PyTorch, Numba and anything else that speaks
__cuda_array_interface__ (v3) or DLPack, without copies:

        buf = ctx.upload(a)                     # a resident Buffer
        t = torch.from_dlpack(buf)              # 1-D uint8 over its bytes
        c = cupy.asarray(buf.as_array("uint32"))  # a typed view (DeviceArray)
        prog.dispatch([t_a, cupy_b, numba_out], params=[n])   # bound in place

A foreign device array passed as a binding is wrapped for the call
(vyre_buffer_wrap), after the context waits for its stream (its CAI
"stream", or for DLPack the dispatch's `stream`, default the legacy default
stream); it must be C-contiguous. numpy arrays are host bindings.
"""

from __future__ import annotations

import array as _array
import ctypes
import enum
import operator
import os
import struct as _struct
import sys
import threading
from ctypes import (POINTER, Structure, byref, c_char, c_char_p, c_int, c_int32,
                    c_size_t, c_uint32, c_uint64, c_void_p)
# typing.Sequence as _Seq: this module's Sequence is the vyre sequence.
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union
from typing import Sequence as _Seq

from . import _dlpack

__all__ = [
    "VERSION_MAJOR", "WAIT_FOREVER", "DISPATCH_FLAG_DEVICE_TIMING", "DISPATCH_FLAG_COOPERATIVE",
    "KERNEL_NODE_UPDATE_GRID", "KERNEL_NODE_UPDATE_SCALARS",
    "EGRAPH_REBUILD_RESET", "EGRAPH_REBUILD_DEVICE_TIMING", "EGRAPH_REBUILD_COLLIDING_HASH",
    "Status", "Role", "CodeKind", "ParamKind", "Source", "LogLevel", "GraphNodeKind", "StepKind",
    "EgraphDevice", "EgraphColumn",
    "VyreError", "LibraryLoadError", "Binding", "BufferRange", "InOut",
    "Context", "Buffer", "PinnedMemory", "Registration", "Program", "Pending", "Outputs",
    "Graph", "Sequence",
    "Step", "DispatchStep", "FillStep", "CopyStep", "UploadStep", "DownloadStep", "Repeat",
    "EgraphImage", "EgraphRebuildResult",
    "load", "library_path", "has_function", "version", "version_string", "status_name", "last_error",
    "last_error_log", "device_count",
    "device_info", "set_log_callback", "f32", "f64",
    "BUFFER_INFO_FLAG_BORROWED", "DeviceArray", "STREAM_LEGACY", "STREAM_PER_THREAD",
]

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

#: vyre_buffer_info.flags: the buffer borrows memory other CUDA code owns.
BUFFER_INFO_FLAG_BORROWED = 1 << 0
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
    #: Any other CUDA graph node type (none are recorded by this library).
    OTHER = 4


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
    ]


class EgraphRebuildResultStruct(Structure):
    _c_name_ = "vyre_egraph_rebuild_result"
    _fields_ = [("struct_size", c_uint32), ("rounds", c_uint32)] + [
        (name, c_uint64) for name in (
            "merges", "union_merges", "classes_before", "classes_after", "rows_visited",
            "device_ns", "wall_ns")
    ]


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


#: Every C struct mirrored above (for the layout test).
C_STRUCTS = (ContextHandle, BufferHandle, ProgramHandle, PendingHandle, GraphHandle,
             SequenceHandle, EgraphImageHandle, DeviceInfoStruct, ContextDescStruct,
             TelemetryStruct, UploadRangeStruct, DownloadRangeStruct, BufferInfoStruct,
             BufferWrapDescStruct,
             BindingDeclStruct, KernelParamStruct, ProgramDescStruct, DispatchBindingStruct,
             DispatchDescStruct, TimingStruct, GraphReplayDescStruct, GraphInfoStruct,
             KernelNodeUpdateStruct, SequenceStepStruct, SequenceDescStruct,
             EgraphImageDescStruct, EgraphImageInfoStruct, EgraphRebuildResultStruct,
             EgraphRebuildDescStruct)


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
    "vyre_last_error_log": (_S, [c_char_p, c_size_t, POINTER(c_size_t)]),
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
}

# Functions newer than some libraries these bindings may load: a library
# without them still loads, and only the features that need them fail.
_OPTIONAL = frozenset({"vyre_buffer_wrap", "vyre_context_wait_stream",
                       "vyre_context_signal_stream"})


# ---------------------------------------------------------------------------
# Errors and loading
# ---------------------------------------------------------------------------

class VyreError(Exception):
    """A vyre-cuda call failed.

    status: a Status (or the raw int for a status newer than these bindings);
    status_name: the library's name for it ("VYRE_STATUS_NO_DRIVER");
    cu_result: the CUDA driver's CUresult, 0 when the driver was not the cause;
    message: the library's message: a first line (at most 1023 bytes) ending
        with a "Fix:" sentence, then a compiler or JIT log, capped, if any;
    call: the C function that failed;
    log: the whole compiler or JIT log (vyre_last_error_log), "" when none.
    """

    def __init__(self, status: Union[Status, int], status_name: str, cu_result: int,
                 message: str, call: Optional[str] = None, log: str = "") -> None:
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.status_name = status_name
        self.cu_result = cu_result
        self.message = message
        self.call = call
        self.log = log
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{status_name} (CUresult {cu_result}): {message}")


class LibraryLoadError(OSError):
    """libvyre_cuda could not be loaded, or is the wrong version."""


_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_lib_missing: frozenset = frozenset()
_lib_lock = threading.Lock()

#: The library `pip install` bundles into the package.
BUNDLED_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib",
                               "libvyre_cuda.so.%d" % VERSION_MAJOR)


def _default_library_path() -> str:
    env = os.environ.get("VYRE_CUDA_LIBRARY")
    if env:
        return env
    if os.path.exists(BUNDLED_LIBRARY):
        return BUNDLED_LIBRARY
    return "libvyre_cuda.so.%d" % VERSION_MAJOR


def _loaded_file(lib: ctypes.CDLL, fallback: str) -> str:
    """The file the dynamic loader mapped for lib (dladdr of one of its
    functions), else what was asked for."""

    class DlInfo(Structure):
        _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p),
                    ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]

    try:
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
        dladdr.argtypes = [c_void_p, POINTER(DlInfo)]
        dladdr.restype = c_int
        info = DlInfo()
        if dladdr(ctypes.cast(lib.vyre_version, c_void_p), byref(info)) and info.dli_fname:
            return os.path.realpath(os.fsdecode(info.dli_fname))
    except (AttributeError, OSError):
        pass
    return fallback


def load(path: Optional[str] = None) -> ctypes.CDLL:
    """Loads the library (once per process) and returns the ctypes CDLL.

    path defaults to $VYRE_CUDA_LIBRARY, else the library bundled in the
    package (vyre_cuda/_lib), else libvyre_cuda.so.0 through the loader's
    search path. Later calls return the library already loaded.
    """
    global _lib, _lib_path, _lib_missing
    lib = _lib
    if lib is not None:
        return lib  # set last, once the library is fully set up: no lock needed
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = path or _default_library_path()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryLoadError(
                f"cannot load {path}: {e}. Fix: install the package with pip (it bundles "
                f"the library), set VYRE_CUDA_LIBRARY to the path of libvyre_cuda.so.0, or "
                f"add its directory to LD_LIBRARY_PATH.") from None
        missing = set()
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                if name in _OPTIONAL:
                    missing.add(name)
                    continue
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
        _lib_missing = frozenset(missing)
        _lib_path = _loaded_file(lib, path)
        _lib = lib
        return lib


def library_path() -> str:
    """The path of the library file loaded (loading it if not yet)."""
    load()
    assert _lib_path is not None
    return _lib_path


def has_function(name: str) -> bool:
    """Whether the loaded library exports `name` (functions newer than an
    older library, like vyre_buffer_wrap, may be missing)."""
    load()
    return name not in _lib_missing


def _require(name: str, what: str) -> None:
    if name in _lib_missing:
        raise LibraryLoadError(
            f"{what}: {library_path()} does not export {name}. Fix: rebuild or reinstall "
            f"libvyre_cuda from the same release as these bindings.")


def _last_error_of(lib):
    status = _S()
    cu_result = c_int32()
    length = c_size_t()
    # The length first: compile logs can make messages long.
    lib.vyre_last_error(byref(status), byref(cu_result), None, 0, byref(length))
    text = ctypes.create_string_buffer(length.value + 1)
    lib.vyre_last_error(None, None, text, len(text), None)
    return status.value, cu_result.value, text.value.decode("utf-8", "replace")


def _last_error_log_of(lib):
    length = c_size_t()
    lib.vyre_last_error_log(None, 0, byref(length))
    if length.value == 0:
        return ""
    text = ctypes.create_string_buffer(length.value + 1)
    lib.vyre_last_error_log(text, len(text), None)
    # .raw: a log may hold NUL bytes; the library counts every byte.
    return text.raw[:length.value].decode("utf-8", "replace")


def _check(status, call):
    """Raises VyreError for a failed status, with this thread's last error."""
    if status == 0:
        return
    lib = load()
    # Read at once, on this thread: the detail is per thread and the next call
    # clears it. ctypes runs the call and this read on the same OS thread.
    _, cu_result, message = _last_error_of(lib)
    log = _last_error_log_of(lib)
    name = lib.vyre_status_name(status).decode("ascii", "replace")
    raise VyreError(status, name, cu_result, message, call, log)


def _call(name, *args):
    status = getattr(_lib or load(), name)(*args)
    if status:
        _check(status, name)


def version() -> Tuple[int, int, int]:
    """The loaded library's version as (major, minor, patch)."""
    v = load().vyre_version()
    return (v >> 22, (v >> 12) & 0x3FF, v & 0xFFF)


def version_string() -> str:
    return "%d.%d.%d" % version()


def status_name(status: int) -> str:
    """The library's name for a status value ("VYRE_STATUS_UNKNOWN" if unknown)."""
    return load().vyre_status_name(int(status)).decode("ascii", "replace")


def last_error() -> Tuple[Union[Status, int], int, str]:
    """This thread's last error as (status, cu_result, message); status 0 if none."""
    status, cu_result, message = _last_error_of(load())
    try:
        status = Status(status)
    except ValueError:
        pass
    return status, cu_result, message


def last_error_log() -> str:
    """The whole compiler or JIT log of this thread's last error ("" if none).

    VyreError.log already holds it for the call that raised; this reads it
    again (it is kept until the next library call on this thread)."""
    return _last_error_log_of(load())


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


def f32(x: float) -> int:
    """The bit pattern of float x as float32, for a SCALAR32 slot."""
    return _struct.unpack("<I", _struct.pack("<f", x))[0]


def f64(x: float) -> int:
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
    if isinstance(entry, DeviceArray):
        return entry.range()
    return None


class _Imports(list):
    """The borrowed Buffers wrapping foreign device arrays for one call,
    released together once the library is done with them."""

    def streams(self) -> List[int]:
        seen: List[int] = []
        for buf in self:
            if buf._stream is not None and buf._stream not in seen and buf._stream != -1:
                seen.append(buf._stream)
        return seen

    def signal(self, context: Context) -> None:
        """After enqueueing: the producers' streams wait for that work."""
        for stream in self.streams():
            context.signal_stream(stream)

    def release(self) -> None:
        while self:
            buf = self.pop()
            try:
                buf.close()
            except Exception:
                pass


def _marshal_bindings(decls, bindings, context=None, stream=None):
    """vyre_dispatch_binding structs for one entry per declared binding.

    decls: the program's Binding list (their roles say how host data is
    bound). context: where foreign device arrays are wrapped (None: they are
    not recognised); stream: the stream a DLPack producer orders its work
    before. Returns (structs, keep, keep_out, outputs, residents, imports):
    keep holds what C reads during the call, keep_out the host output memory
    (it must live until the wait), outputs[i] the host object receiving
    binding i's result (or None), residents the Buffers bound (wrapped ones
    included), imports the wrapped foreign arrays (an _Imports the caller
    releases)."""
    bindings = list(bindings)
    imports = _Imports()
    try:
        return _marshal_into(decls, bindings, context, stream, imports) + (imports,)
    except BaseException:
        imports.release()
        raise


def _marshal_into(decls, bindings, context, stream, imports):
    keep = []
    keep_out = []
    residents = []
    outputs = Outputs([None] * len(bindings))
    structs = (DispatchBindingStruct * max(len(bindings), 1))()
    for i, entry in enumerate(bindings):
        role = decls[i].role if i < len(decls) else Role.INPUT
        structs[i] = _marshal_entry(i, entry, role, context, stream, imports, keep, keep_out,
                                    residents, outputs)
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
_WRAP_DESC_SIZE = ctypes.sizeof(BufferWrapDescStruct)
_BYTES_OFFSET = _bytes_data_offset()
_TIMING_NAMES = tuple(name for name, _ in TimingStruct._fields_
                      if name != "struct_size" and not name.startswith("reserved"))
_timing_values = operator.attrgetter(*_TIMING_NAMES)
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

    def __enter__(self):
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

    def __init__(self, device: int = 0, transient_pool_limit_bytes: int = 0,
                 pinned_pool_limit_bytes: int = 0, staging_chunk_bytes: int = 0,
                 staging_chunk_count: int = 0, staging_threads: int = 0) -> None:
        """The staging_* arguments tune how large pageable host data moves
        (see vyre_context_desc); 0 keeps each default."""
        super().__init__(0, None)
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
        _call("vyre_context_wait_stream", self._h(), _stream_value(stream, "stream"))

    def signal_stream(self, stream: int) -> None:
        """Work enqueued on `stream` from now on starts after the work this
        context has already enqueued (streams as for wait_stream). The host
        does not block."""
        _require("vyre_context_signal_stream", "Context.signal_stream")
        _call("vyre_context_signal_stream", self._h(), _stream_value(stream, "stream"))

    def _order_export(self, stream: Optional[int]) -> None:
        """Before another library reads this context's memory on `stream`:
        if work may still be in flight, make `stream` wait for it."""
        if stream is None or self._unwaited <= 0:
            return
        if "vyre_context_signal_stream" in _lib_missing:
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
        foreign = _foreign(obj, "Context.wrap", writable, self, stream)
        if foreign is None:
            raise TypeError(f"Context.wrap: {type(obj).__name__} is not device memory. Fix: "
                            f"pass an object with __cuda_array_interface__ or __dlpack__ on a "
                            f"CUDA device, or a device pointer and nbytes.")
        return foreign

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
        """Releases the memory cached by the transient and pinned pools."""
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
        return Program(self, code, entry, bindings, workgroup_size, **kwargs)

    def sequence(self, steps: Iterable[Union[Step, Repeat]]) -> "Sequence":
        """Builds a Sequence from steps; see Sequence."""
        return Sequence(self, steps)

    def egraph_image(self, *args: Any, **kwargs: Any) -> EgraphImage:
        """An EgraphImage on this context's GPU; arguments as for EgraphImage."""
        return EgraphImage(*args, context=self, **kwargs)  # type: ignore[misc]

    def egraph_image_from_nodes(self, nodes: Iterable[Tuple[int, int, Iterable[int]]],
                                **kwargs: Any) -> EgraphImage:
        """EgraphImage.from_nodes on this context's GPU."""
        return EgraphImage.from_nodes(nodes, context=self, **kwargs)


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
    def array(self):
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

    def __enter__(self):
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

    def __enter__(self):
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
    borrowed from another library).

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
        status = (_lib or load()).vyre_buffer_wrap(ContextHandle(context._bits), byref(desc),
                                                   byref(handle))
        if status:
            _check(status, "vyre_buffer_wrap")
        buf._bits = handle.bits
        buf.nbytes = nbytes
        buf._owner = owner
        buf._imported = imported
        return buf

    @property
    def context(self) -> Context:
        return self._context

    @property
    def borrowed(self) -> bool:
        """True for a Buffer from Context.wrap (its memory is another library's)."""
        return self._owner is not None or self._imported is not None

    @property
    def owner(self) -> Any:
        """The foreign object a wrapped Buffer keeps alive (None otherwise)."""
        return self._owner

    def info(self) -> Dict[str, int]:
        """dict(flags, bytes, device_pointer, context): device_pointer is the
        raw CUdeviceptr, valid until the buffer is freed; flags holds
        BUFFER_INFO_FLAG_BORROWED for a wrapped buffer."""
        info = _new(BufferInfoStruct)
        _call("vyre_buffer_info_get", self._h(), byref(info))
        return _struct_dict(info)

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
        return DeviceArray(self, dtype, shape, offset)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return _cai(self, 0, (self.nbytes,), _dtype("uint8"))

    def __dlpack__(self, *, stream: Optional[int] = None,
                   max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
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
                status = (_lib or load()).vyre_buffer_free(BufferHandle(bits))
                if status:
                    _check(status, "vyre_buffer_free")
        finally:
            # The handle is gone: the foreign memory may go too.
            imported, self._imported = self._imported, None
            self._owner = None
            if imported is not None:
                imported.release()

    def upload(self, data: Any, offset: int = 0) -> None:
        """Copies data (any bytes-like object) into the buffer at offset, and waits."""
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
                 fixpoint_iterations, shared_memory_bytes, flags, stream=None):
        """Builds the dispatch descriptor. Returns (desc, keep, keep_out,
        outputs, imports): keep holds what C reads during the call; keep_out
        the host output memory, which must live until the wait; outputs[i]
        is the host object that receives binding i's result, or None;
        imports the foreign arrays wrapped for the call (release them once
        the library is done)."""
        structs, keep, keep_out, outputs, _, imports = _marshal_bindings(
            self.bindings, bindings, self._context, stream)
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
            resident memory, bound in place (C-contiguous only);
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
                for s in dict.fromkeys(waits):
                    self._context.wait_stream(s)
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
            status = (_lib or load()).vyre_dispatch(sc.handle, sc.desc_ref, sc.timing_ref)
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
        desc, keep, keep_out, outputs, imports = self._prepare(
            bindings, params, scalars, grid, block, element_count, fixpoint_iterations,
            shared_memory_bytes, flags, stream)
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
        imports.signal(self._context)
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
        _call("vyre_pending_wait", self._h(), timeout)
        self._settled()
        finish, self._finish = self._finish, None
        if finish is not None:
            self._outputs = finish()
        self._outputs.timing = self.timing()
        return self._outputs

    def timing(self) -> Dict[str, int]:
        """dict of wall_ns, device_ns, enqueue_ns, wait_ns (after wait)."""
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
    _program: Optional[Program] = None
    _decls: Any = ()
    _residents: Any = ()
    _sequence_keep: Any = None
    _downloads: Any = ()
    _imports: Optional[_Imports] = None

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

    @property
    def context(self) -> Context:
        return self._context

    @property
    def program(self):
        """The recorded Program (None for a sequence graph)."""
        return self._program

    @property
    def from_sequence(self):
        return self._sequence_keep is not None

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
        desc, keep, keep_out, outputs, residents, imports = self._replay_desc(
            bindings, params, scalars, element_count, flags, stream)
        handle = PendingHandle()
        try:
            _call("vyre_graph_replay_async", self._h(), byref(desc), byref(handle))
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

    def close(self):
        try:
            super().close()
        finally:
            if self.closed:
                self._residents = ()
                self._sequence_keep = None
                imports, self._imports = self._imports, None
                if imports is not None:
                    imports.release()


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
    def out(self):
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

    @property
    def context(self) -> Context:
        return self._context

    def run(self) -> Outputs:
        """Runs the steps and waits. Returns Outputs: the DOWNLOAD steps'
        host objects in step order, with .timing."""
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

    def close(self):
        try:
            super().close()
        finally:
            if self.closed:
                self._keep = None


# ---------------------------------------------------------------------------
# E-graph images
# ---------------------------------------------------------------------------

# array.array's type code for 4-byte unsigned items ("I" on the usual platforms).
_U32_CODE = "I" if _array.array("I").itemsize == 4 else "L"
# memoryview formats of native u32 items, which C can read in place.
_U32_FORMATS = {_U32_CODE, "@" + _U32_CODE, "=I", "<I" if sys.byteorder == "little" else ">I"}


def _is_numpy_array(obj):
    return type(obj).__module__.partition(".")[0] == "numpy" and hasattr(obj, "dtype")


def _u32_pointer(address):
    """A uint32_t* for an address (None: NULL). It does not keep the memory
    alive: hold the _HostRef it came from."""
    return None if not address else ctypes.cast(c_void_p(address), POINTER(c_uint32))


class _U32Column:
    """u32 values as C reads them: ref (address and what keeps the memory
    alive), count, data (a 1-D container of the values) and whether they came
    from numpy."""

    __slots__ = ("ref", "count", "data", "numpy")

    def __init__(self, ref, count, data, numpy):
        self.ref = ref
        self.count = count
        self.data = data
        self.numpy = numpy

    def pointer(self):
        return _u32_pointer(self.ref.address)

    def max(self):
        """The largest value, or -1 for no values."""
        if self.count == 0:
            return -1
        return int(self.data.max()) if self.numpy else max(self.data)


def _u32_column(values, what):
    """values (a sequence of ints, array.array("I"), a u32 memoryview or a
    numpy integer array) as a _U32Column. Native u32 memory is read in place
    when writable (else copied once); anything else is converted, each value
    checked to fit 32 unsigned bits."""
    if _is_numpy_array(values):
        import numpy as np
        a = np.asarray(values).reshape(-1)
        if a.dtype != np.uint32:
            if a.dtype.kind not in "ui":
                raise TypeError(f"{what}: a numpy array of {a.dtype}. Fix: pass integer values "
                                f"(a numpy.uint32 array is used without a copy).")
            if a.size and (int(a.min()) < 0 or int(a.max()) > _U32_MAX):
                raise ValueError(f"{what}: values outside [0, 2**32). Fix: pass u32 values.")
            a = a.astype(np.uint32)
        a = np.ascontiguousarray(a)
        return _U32Column(_readable(a, what), int(a.size), a, True)
    try:
        view = memoryview(values)
    except TypeError:
        view = None
    if (view is not None and view.ndim == 1 and view.itemsize == 4
            and view.format in _U32_FORMATS):
        return _U32Column(_readable(values, what), len(view), view, False)
    try:
        items = iter(values)
    except TypeError:
        raise TypeError(f"{what}: {type(values).__name__} is not a sequence of integers. Fix: "
                        f"pass a list, array.array('I') or numpy array of u32 values.") from None
    out = _array.array(_U32_CODE)
    for i, v in enumerate(items):
        try:
            v = operator.index(v)
        except TypeError:
            raise TypeError(f"{what}[{i}] is {type(v).__name__}, not an integer. Fix: pass "
                            f"integer u32 values.") from None
        if not 0 <= v <= _U32_MAX:
            raise ValueError(f"{what}[{i}] = {v} is outside [0, 2**32). Fix: pass u32 values.")
        out.append(v)
    return _U32Column(_readable(out, what), len(out), out, False)


def _union_words(unions, what):
    """Unions as a _U32Column of 2 class ids each: a sequence of (a, b)
    pairs, or flat u32 memory / a numpy array (shape (n, 2) or 2n values)."""
    if unions is None:
        unions = ()
    flat = _is_numpy_array(unions)
    if not flat:
        try:
            view = memoryview(unions)
            flat = view.itemsize == 4 and view.format in _U32_FORMATS
        except TypeError:
            pass
    if flat:
        col = _u32_column(unions, what)
        if col.count % 2:
            raise ValueError(f"{what}: {col.count} class ids, not pairs. Fix: pass 2 class ids "
                             f"per union.")
        return col
    try:
        items = iter(unions)
    except TypeError:
        raise TypeError(f"{what}: {type(unions).__name__} is not a sequence of pairs. Fix: pass "
                        f"unions as (a, b) pairs of class ids, e.g. [(0, 1)].") from None
    words = []
    for i, pair in enumerate(items):
        try:
            a, b = pair
        except (TypeError, ValueError):
            raise TypeError(f"{what}[{i}] is {pair!r}, not a pair of class ids. Fix: pass "
                            f"unions as (a, b) pairs, e.g. [(0, 1)].") from None
        words += (a, b)
    return _u32_column(words, what)


def _egraph_device(device, context):
    if device is None:
        return EgraphDevice.GPU if context is not None else EgraphDevice.CPU
    if isinstance(device, str):
        try:
            return EgraphDevice[device.upper()]
        except KeyError:
            raise ValueError(f"unknown e-graph device {device!r}. Fix: use \"gpu\" (with a "
                             f"Context) or \"cpu\".") from None
    device = operator.index(device)
    if not -2 ** 31 <= device < 2 ** 31:
        raise ValueError(f"e-graph device {device} does not fit the C enum. Fix: use "
                         f"EgraphDevice.GPU or EgraphDevice.CPU.")
    return device  # any other value: the library says what is wrong


def _egraph_column(column):
    if isinstance(column, str):
        try:
            return EgraphColumn[column.upper()]
        except KeyError:
            raise ValueError(f"unknown e-graph column {column!r}. Fix: use one of "
                             f"{[c.name.lower() for c in EgraphColumn]}.") from None
    column = operator.index(column)
    if not -2 ** 31 <= column < 2 ** 31:
        raise ValueError(f"e-graph column {column} does not fit the C enum. Fix: use an "
                         f"EgraphColumn value.")
    try:
        return EgraphColumn(column)
    except ValueError:
        return column  # the library refuses it with its own message


class EgraphRebuildResult:
    """What a rebuild did (vyre_egraph_rebuild_result), with its canonical
    classes.

    rounds: passes run, the last of which found nothing (unless max_rounds
      stopped the rebuild first);
    merges / union_merges: classes merged by congruence / by the unions given;
    classes_before / classes_after: distinct canonical classes before the
      unions and after the rebuild;
    rows_visited: row visits over all rounds;
    device_ns (device_timing, GPU images) and wall_ns: times;
    canonical: the canonical class of every class (a list, a numpy array for
      a numpy image, or the buffer passed as canonical), None if not asked;
    timing: for an asynchronous rebuild, the Pending's timing dict.
    """

    _FIELDS = ("rounds", "merges", "union_merges", "classes_before", "classes_after",
               "rows_visited", "device_ns", "wall_ns")
    __slots__ = _FIELDS + ("canonical", "timing")

    def __init__(self, result, canonical=None):
        for name in self._FIELDS:
            setattr(self, name, getattr(result, name))
        self.canonical = canonical
        self.timing = None

    def as_dict(self) -> Dict[str, int]:
        """The counts and times as a dict (without canonical and timing)."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)}" for name in self._FIELDS)
        return f"EgraphRebuildResult({fields})"


class EgraphImage(_Object):
    """An e-graph's e-nodes ("rows") as u32 columns and a union-find over its
    e-classes (vyre_egraph_image), on a GPU or in the library's CPU reference.

    Row r is the e-node row_ops[r] applied to the classes
    children[child_offsets[r] : child_offsets[r] + child_lengths[r]], in
    e-class row_classes[r]; each row's children come after the previous
    row's. Op ids carry leaf payloads (Const(1) and Const(2) are different
    ops). Rows are congruent when they have the same op, the same arity and,
    child by child, the same canonical class; the canonical class of c is the
    minimum class id of c's set.

    Columns are sequences of ints, array.array("I") or numpy integer arrays
    (uint32 ones are read without a copy). The image copies them: change it
    with write(). from_nodes() builds the columns from (class, op, children)
    tuples.

    class_count: the number of e-classes (every id is below it); None: one
      more than the largest id in row_classes and children.
    device: "gpu" (on `context`'s GPU), "cpu" (no context, no driver), or
      None: "gpu" when a context is given, else "cpu".
    cpu_threads: CPU images: worker threads (0 = every core, 1 = one).
    row_signatures: optional per-row u32 values kept with the columns; they
      never affect which rows merge.
    numpy: read() and rebuild() return numpy arrays (else lists); None: when
      any column given is a numpy array.

    Every class starts alone; rebuild() merges, and the image keeps its
    union-find for the next rebuild. A GPU image belongs to its Context:
    closing the context releases it.
    """

    _handle_type = EgraphImageHandle
    _destroy = "vyre_egraph_image_destroy"
    # Defaults, so a closed or half-built image still reports INVALID_HANDLE.
    row_count = class_count = child_count = 0
    device = None
    numpy = False

    def __init__(self, row_classes: Any, row_ops: Any, child_offsets: Any, child_lengths: Any,
                 children: Any, class_count: Optional[int] = None,
                 device: Union[EgraphDevice, str, None] = None,
                 context: Optional[Context] = None, cpu_threads: int = 0,
                 row_signatures: Any = None, numpy: Optional[bool] = None) -> None:
        device = _egraph_device(device, context)
        if device == EgraphDevice.GPU and context is None:
            raise ValueError("EgraphImage: a GPU image needs a Context. Fix: pass "
                             "context=vc.Context(), or device=\"cpu\" for the CPU reference.")
        super().__init__(0, context)
        cols = {}
        for name, values in (("row_classes", row_classes), ("row_ops", row_ops),
                             ("child_offsets", child_offsets), ("child_lengths", child_lengths),
                             ("row_signatures", row_signatures), ("children", children)):
            if values is not None or name != "row_signatures":
                cols[name] = _u32_column(values, f"EgraphImage {name}")
        rows = cols["row_classes"].count
        for name in ("row_ops", "child_offsets", "child_lengths", "row_signatures"):
            if name in cols and cols[name].count != rows:
                raise ValueError(f"EgraphImage: {name} has {cols[name].count} entries but "
                                 f"row_classes has {rows}. Fix: pass one entry per row in every "
                                 f"row column.")
        if class_count is None:
            class_count = max(cols["row_classes"].max(), cols["children"].max()) + 1
        desc = _new(EgraphImageDescStruct, device=device, row_count=rows,
                    class_count=_unsigned(class_count, 64, "class_count"),
                    child_count=cols["children"].count,
                    cpu_threads=_unsigned(cpu_threads, 32, "cpu_threads"))
        if context is not None:
            desc.context = context._h()
        for name, col in cols.items():
            setattr(desc, name, col.pointer())
        handle = EgraphImageHandle()
        _call("vyre_egraph_image_create", byref(desc), byref(handle))
        self._bits = handle.bits
        self.device = EgraphDevice(int(device))
        self.row_count = rows
        self.class_count = desc.class_count
        self.child_count = desc.child_count
        self.numpy = (any(col.numpy for col in cols.values()) if numpy is None
                      else bool(numpy))

    @classmethod
    def from_nodes(cls, nodes: Iterable[Tuple[int, int, Iterable[int]]],
                   **kwargs: Any) -> "EgraphImage":
        """An image of one row per node, each (class, op, children) with
        children a sequence of class ids (empty for a leaf), laid out in row
        order. Other arguments as for EgraphImage."""
        row_classes: List[int] = []
        row_ops: List[int] = []
        offsets: List[int] = []
        lengths: List[int] = []
        children: List[int] = []
        for i, node in enumerate(nodes):
            try:
                klass, op, kids = node
                kids = list(kids)
            except (TypeError, ValueError):
                raise TypeError(f"EgraphImage.from_nodes: node {i} is {node!r}. Fix: give "
                                f"each node as (class, op, children), children a sequence of "
                                f"class ids.") from None
            row_classes.append(klass)
            row_ops.append(op)
            offsets.append(len(children))
            lengths.append(len(kids))
            children.extend(kids)
        return cls(row_classes, row_ops, offsets, lengths, children, **kwargs)

    @property
    def context(self):
        """The Context of a GPU image; None for a CPU image."""
        return self._context

    def _entries(self, column):
        if column == EgraphColumn.CHILDREN:
            return self.child_count
        if column == EgraphColumn.CANONICAL_CLASSES:
            return self.class_count
        if column in (EgraphColumn.ROW_CLASSES, EgraphColumn.ROW_OPS,
                      EgraphColumn.CHILD_OFFSETS, EgraphColumn.CHILD_LENGTHS,
                      EgraphColumn.ROW_SIGNATURES):
            return self.row_count
        return 0

    def _new_u32(self, count):
        """count zeroed u32 entries: a numpy array for a numpy image."""
        if self.numpy:
            import numpy as np
            return np.zeros(count, dtype=np.uint32)
        return _array.array(_U32_CODE, bytes(4 * count))

    def _deliver(self, data):
        return data if self.numpy else data.tolist()

    def read(self, column: Union[EgraphColumn, str, int], first: int = 0,
             count: Optional[int] = None, out: Any = None) -> Any:
        """Entries [first, first + count) of a column: an EgraphColumn or its
        name ("row_classes", "row_ops", "child_offsets", "child_lengths",
        "row_signatures", "children", "canonical_classes"); count None: to
        the end of the column.

        Returns a list (a numpy uint32 array for a numpy image), or fills and
        returns `out`, a writable u32 buffer (array.array("I"), numpy.uint32
        array) with room for count entries (count None: as many as it holds)."""
        column = _egraph_column(column)
        first = _unsigned(first, 64, "first")
        if out is None:
            if count is None:
                count = max(self._entries(column) - first, 0)
            data = self._new_u32(_unsigned(count, 64, "count"))
        else:
            data = out
        dst = _writable(data, "EgraphImage.read out")
        room = dst.nbytes // 4
        count = room if count is None else _unsigned(count, 64, "count")
        if count > room:
            raise ValueError(f"EgraphImage.read: out holds {room} u32 entries but count is "
                             f"{count}. Fix: pass a larger out, or a smaller count.")
        _call("vyre_egraph_image_read", self._h(), int(column), first, count,
              _u32_pointer(dst.address))
        del dst
        return out if out is not None else self._deliver(data)

    def canonical_classes(self) -> Any:
        """The canonical class of every class (the image's union-find now)."""
        return self.read(EgraphColumn.CANONICAL_CLASSES)

    def write(self, column: Union[EgraphColumn, str, int], values: Any,
              first: int = 0) -> None:
        """Overwrites entries [first, first + len(values)) of a row column or
        of the children (not canonical_classes) in place. The library checks
        the rows affected as at creation (class ids below class_count, child
        ranges in row order) and changes nothing when they are wrong."""
        column = _egraph_column(column)
        col = _u32_column(values, "EgraphImage.write values")
        _call("vyre_egraph_image_write", self._h(), int(column), _unsigned(first, 64, "first"),
              col.count, col.pointer())

    def info(self) -> Dict[str, Any]:
        """dict(device, context, row_count, class_count, child_count,
        canonical_class_count, bytes); see vyre_egraph_image_info. context is
        the Context's handle (0 for a CPU image); bytes the device (GPU) or
        host (CPU) memory the image holds."""
        info = _new(EgraphImageInfoStruct)
        _call("vyre_egraph_image_info_get", self._h(), byref(info))
        d = _struct_dict(info)
        try:
            d["device"] = EgraphDevice(info.device)
        except ValueError:
            pass
        return d

    def pass_count(self) -> int:
        """How many pairs pass_pairs() would return now."""
        count = c_uint64()
        _call("vyre_egraph_pass", self._h(), None, 0, byref(count))
        return count.value

    def _pass_into(self, capacity):
        # Never NULL: NULL with capacity 0 would only ask the count.
        pairs = (c_uint32 * max(2 * capacity, 2))()
        count = c_uint64()
        _call("vyre_egraph_pass", self._h(), pairs, capacity, byref(count))
        return [(pairs[2 * i], pairs[2 * i + 1]) for i in range(count.value)]

    def pass_pairs(self, capacity: Optional[int] = None) -> List[Tuple[int, int]]:
        """One congruence pass, merging nothing: the pairs (left, right) of
        canonical classes, left < right, sorted and deduplicated, that
        congruent rows put in different classes. Each group of congruent rows
        gives (m, c) for its minimum canonical class m and every other class
        c in it.

        capacity None asks the count first, then fetches. An int passes room
        for that many pairs: fewer than the pass finds raises
        VyreError(OUT_OF_RANGE), whose message names the room needed."""
        if capacity is not None:
            return self._pass_into(_unsigned(capacity, 64, "capacity"))
        for attempt in range(4):
            try:
                return self._pass_into(self.pass_count())
            except VyreError as e:
                # Another thread wrote the image between the count and the
                # fetch: ask again.
                if e.status != Status.OUT_OF_RANGE or attempt == 3:
                    raise
        raise AssertionError("unreachable")

    def _rebuild_desc(self, unions, reset, max_rounds, colliding_hash, device_timing,
                      canonical, what):
        """Returns (desc, keep, collect): keep holds the memory C uses,
        collect() the canonical classes once written."""
        flags = ((EGRAPH_REBUILD_RESET if reset else 0)
                 | (EGRAPH_REBUILD_DEVICE_TIMING if device_timing else 0)
                 | (EGRAPH_REBUILD_COLLIDING_HASH if colliding_hash else 0))
        words = _union_words(unions, f"{what} unions")
        desc = _new(EgraphRebuildDescStruct, flags=flags, union_count=words.count // 2,
                    max_rounds=_unsigned(max_rounds, 32, "max_rounds"))
        desc.unions = words.pointer()
        keep = [words]
        if canonical is None or canonical is False:
            return desc, keep, lambda: None
        if canonical is True:
            data = self._new_u32(self.class_count)
            collect = lambda: self._deliver(data)  # noqa: E731
        elif isinstance(canonical, int):
            raise TypeError(f"{what}: canonical={canonical!r}. Fix: pass True, False or a "
                            f"writable u32 buffer of class_count entries.")
        else:
            data = canonical
            collect = lambda: data  # noqa: E731
        ref = _writable(data, f"{what} canonical")
        if ref.nbytes < 4 * self.class_count:
            raise ValueError(f"{what}: canonical holds {ref.nbytes // 4} u32 entries, the image "
                             f"has {self.class_count} classes. Fix: pass room for class_count "
                             f"entries.")
        desc.canonical_out = _u32_pointer(ref.address)
        keep.append(ref)
        return desc, keep, collect

    def rebuild(self, unions: Any = (), reset: bool = False, max_rounds: int = 0,
                colliding_hash: bool = False, device_timing: bool = False,
                canonical: Any = True) -> EgraphRebuildResult:
        """Merges `unions` (pairs (a, b) of class ids, e.g. what e-matching
        found; or flat u32 memory of 2 ids each), then merges congruent
        classes round after round until a pass finds nothing (the congruence
        closure), and waits.

        reset: start from every class alone instead of the image's state.
        max_rounds: stop after that many rounds even without a fixpoint
          (0: no limit); the next rebuild goes on from there.
        colliding_hash: testing: group rows by op and arity only; every
          candidate is still confirmed child by child, so results are equal.
        device_timing: GPU images: report device_ns.
        canonical: True: result.canonical is the canonical class of every
          class (a list, a numpy array for a numpy image); False: not read;
          or a writable u32 buffer of class_count entries to fill.

        Returns an EgraphRebuildResult."""
        desc, keep, collect = self._rebuild_desc(unions, reset, max_rounds, colliding_hash,
                                                 device_timing, canonical,
                                                 "EgraphImage.rebuild")
        result = _new(EgraphRebuildResultStruct)
        _call("vyre_egraph_rebuild", self._h(), byref(desc), byref(result))
        del keep
        return EgraphRebuildResult(result, collect())

    def rebuild_async(self, unions: Any = (), reset: bool = False, max_rounds: int = 0,
                      colliding_hash: bool = False, device_timing: bool = False,
                      canonical: Any = True) -> Pending:
        """Starts a rebuild (arguments as for rebuild()) and returns a Pending
        at once; its wait() returns the EgraphRebuildResult (with .timing).
        The unions are read before this returns. Until the wait, every other
        call on the image raises VyreError(INVALID_STATE); closing the Pending
        unwaited finishes the rebuild without reading its results. A CPU
        image's rebuild runs to completion inside this call."""
        desc, keep, collect = self._rebuild_desc(unions, reset, max_rounds, colliding_hash,
                                                 device_timing, canonical,
                                                 "EgraphImage.rebuild_async")
        result = _new(EgraphRebuildResultStruct)
        desc.result_out = ctypes.pointer(result)
        handle = PendingHandle()
        _call("vyre_egraph_rebuild_async", self._h(), byref(desc), byref(handle))
        # The result and the canonical classes are written by the wait.
        keep.append(result)
        return Pending(handle.bits, self, keep, None,
                       finish=lambda: EgraphRebuildResult(result, collect()))
