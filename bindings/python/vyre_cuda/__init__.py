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

A saturation loop grows the image in place: append the e-nodes a match
found (new classes are numbered from img.class_count on; reserve room at
creation with row_capacity, class_capacity, child_capacity), rebuild with
its unions (incrementally: the new rows and those whose children changed
class), and update the matcher from the classes that moved:

        img.append_nodes([(4, G, (2,)), (5, G, (3,))])  # g(f(a)), g(f(b))
        res = img.rebuild()                 # g(f(a)) = g(f(b)): 5 joins 4
        img.changed_pairs()                 # [(5, 4)]: (class, new canonical)

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
torch.Tensor and cupy.ndarray (exact types) skip DLPack in dispatch() and
dispatch_async(): their pointer, size, device and current stream are read
directly and bound through a wrap the Context keeps per (pointer, bytes)
(see the package README, "PyTorch tensors and CuPy arrays").

Caller work (CuPy, PyTorch, raw driver calls on the capture stream) and
library dispatches are captured into one graph:

        with ctx.capture() as cap:
            with cupy.cuda.ExternalStream(cap.stream):
                x += 1                          # captured, not run
            cap.dispatch(prog, [da, db, dout], params=[n])
        cap.graph.replay()                      # runs all of it, in order

and a recorded node is changed in place: info = graph.node_info(k), edit
it, graph.set_node_info(k, info) (raw=True for unchecked pointer slots).

A graph loops on the device while its body leaves a u32 condition word of a
resident buffer non-zero, with no host round trip per iteration:

        loop = body.loop(condition=(flags, 0), max_iterations=100,
                         count=(flags, 4))
        loop.replay()                           # body runs until it clears flags[0]

Buffers are shared between processes of one machine through CUDA IPC:

        handle = buf.export_ipc()           # 128 bytes; send them anywhere
        shared = ctx.import_ipc(handle)     # in the other process: a Buffer

(the exporter keeps buf open until every importer has closed its import;
see Buffer.export_ipc and Context.import_ipc).
"""

from __future__ import annotations

import ctypes
import enum
import operator
import os
import sys
import threading
from ctypes import (POINTER, Structure, byref, c_char, c_char_p, c_int, c_int32,
                    c_size_t, c_uint32, c_uint64, c_void_p)
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

# A directory holding the compiled module (vyre_cuda._fast) built outside the
# package, e.g. by the CMake test build: searched after the package's own.
if os.environ.get("VYRE_CUDA_EXTENSION_DIR"):
    __path__.append(os.environ["VYRE_CUDA_EXTENSION_DIR"])  # noqa: F821

from . import _dlpack
from ._cdefs import (BUFFER_COPY_FLAG_STAGED, BUFFER_INFO_FLAG_BORROWED, BUFFER_INFO_FLAG_IMPORTED,
                     C_STRUCTS, DISPATCH_FLAG_COOPERATIVE, IPC_HANDLE_BYTES, IpcHandleStruct,
                     GRAPH_NODE_MAX_ARGUMENTS, GRAPH_NODE_SET_RAW, GraphNodeInfoStruct,
                     CaptureDescStruct, CaptureMode, GraphLoopDescStruct,
                     DISPATCH_FLAG_DEVICE_TIMING, EGRAPH_REBUILD_COLLIDING_HASH,
                     EGRAPH_REBUILD_DEVICE_ROUNDS,
                     EGRAPH_REBUILD_DEVICE_TIMING, EGRAPH_REBUILD_RESET, KERNEL_NODE_UPDATE_GRID,
                     KERNEL_NODE_UPDATE_SCALARS, STREAM_LEGACY, STREAM_PER_THREAD, VERSION_MAJOR,
                     WAIT_FOREVER, _OPTIONAL, _PROTOTYPES, BindingDeclStruct, BufferHandle,
                     BufferCopyDescStruct, BufferInfoStruct, BufferWrapDescStruct, CodeKind, ContextDescStruct,
                     ContextHandle, DeviceInfoStruct, Dim3, DispatchBindingStruct,
                     DispatchDescStruct, DownloadRangeStruct, EgraphAppendDescStruct,
                     EgraphColumn, EgraphDevice, EgraphImageDescStruct, EgraphImageHandle, EgraphImageInfoStruct,
                     EgraphRebuildDescStruct, EgraphRebuildResultStruct, GraphHandle,
                     GraphInfoStruct, GraphNodeKind, GraphReplayDescStruct,
                     KernelNodeUpdateStruct, KernelParamStruct, LogCallbackType, LogLevel,
                     ParamKind, PendingHandle, ProgramDescStruct, ProgramHandle, Role,
                     SequenceDescStruct, SequenceHandle, SequenceStepStruct, Source, Status,
                     StepKind, TelemetryStruct, TimingStruct, UploadRangeStruct, _new)
from ._loader import (BUNDLED_LIBRARY, LibraryLoadError, has_function, library_path, load,
                      version, version_string)
from ._errors import VyreError, _call, last_error, last_error_log, status_name
from ._host_memory import InOut, PinnedMemory, Registration, _readable, _writable
from ._context import (Buffer, BufferRange, Context, _Object, device_can_access_peer,
                       device_count, device_info, set_log_callback)
from ._interop import DeviceArray, _dtype
from ._program import (Binding, Outputs, Pending, Program, _dim3, _marshal_bindings, _u32_array,
                       f32, f64)
from ._graph import (Capture, CopyStep, DispatchStep, DownloadStep, FillStep, Graph, Repeat,
                     Sequence, Step, UploadStep)
from ._egraph import EgraphImage, EgraphRebuildResult

__all__ = [
    "VERSION_MAJOR", "WAIT_FOREVER", "DISPATCH_FLAG_DEVICE_TIMING", "DISPATCH_FLAG_COOPERATIVE",
    "KERNEL_NODE_UPDATE_GRID", "KERNEL_NODE_UPDATE_SCALARS",
    "EGRAPH_REBUILD_RESET", "EGRAPH_REBUILD_DEVICE_TIMING", "EGRAPH_REBUILD_COLLIDING_HASH",
    "EGRAPH_REBUILD_DEVICE_ROUNDS",
    "Status", "Role", "CodeKind", "ParamKind", "Source", "LogLevel", "GraphNodeKind", "StepKind",
    "EgraphDevice", "EgraphColumn",
    "VyreError", "LibraryLoadError", "Binding", "BufferRange", "InOut",
    "Context", "Buffer", "PinnedMemory", "Registration", "Program", "Pending", "Outputs",
    "Graph", "Sequence",
    "Step", "DispatchStep", "FillStep", "CopyStep", "UploadStep", "DownloadStep", "Repeat",
    "EgraphImage", "EgraphRebuildResult",
    "load", "library_path", "has_function", "version", "version_string", "status_name", "last_error",
    "last_error_log", "device_count", "device_can_access_peer",
    "device_info", "set_log_callback", "f32", "f64",
    "BUFFER_INFO_FLAG_BORROWED", "BUFFER_COPY_FLAG_STAGED", "DeviceArray", "STREAM_LEGACY",
    "STREAM_PER_THREAD", "BUFFER_INFO_FLAG_IMPORTED", "IPC_HANDLE_BYTES",
    "GRAPH_NODE_MAX_ARGUMENTS", "GRAPH_NODE_SET_RAW", "CaptureMode", "Capture",
]

# Importable from here as when the package was one module, though not in
# __all__: the C layouts and handles, helpers the tests use, and the
# standard-library names that module imported (dir(vyre_cuda) is unchanged).
_COMPAT = (C_STRUCTS, _OPTIONAL, _PROTOTYPES, BindingDeclStruct, BufferHandle, BufferInfoStruct,
           BufferCopyDescStruct, IpcHandleStruct,
           BufferWrapDescStruct, ContextDescStruct, ContextHandle, DeviceInfoStruct, Dim3,
           DispatchBindingStruct, DispatchDescStruct, DownloadRangeStruct, EgraphAppendDescStruct,
           EgraphImageDescStruct,
           EgraphImageHandle, EgraphImageInfoStruct, EgraphRebuildDescStruct,
           EgraphRebuildResultStruct, GraphHandle, GraphInfoStruct, GraphNodeInfoStruct,
           CaptureDescStruct, GraphLoopDescStruct,
           GraphReplayDescStruct,
           KernelNodeUpdateStruct, KernelParamStruct, LogCallbackType, PendingHandle,
           ProgramDescStruct, ProgramHandle, SequenceDescStruct, SequenceHandle,
           SequenceStepStruct, TelemetryStruct, TimingStruct, UploadRangeStruct, _new,
           BUNDLED_LIBRARY, _call, _readable, _writable, _Object, _dtype, _dim3,
           _marshal_bindings, _u32_array, byref, c_char, c_char_p, c_int, c_int32, c_size_t,
           c_uint32, c_uint64, c_void_p, ctypes, enum, operator, os, sys, threading, Any,
           Callable, Dict, Iterable, List, Optional, POINTER, Structure, Tuple, Union)

# Classes and functions keep the module name they had before the split
# (vyre_cuda.Context, not vyre_cuda._context.Context): reprs and tracebacks
# read as before, and pickles find them here.
for _obj in (*(globals()[_name] for _name in __all__), *_COMPAT):
    if callable(_obj) and getattr(_obj, "__module__", "").startswith(__name__ + "._") and \
            _obj.__module__ != _dlpack.__name__:
        _obj.__module__ = __name__
del _obj, _COMPAT
