"""Loading libvyre_cuda: finding the file, binding its prototypes, its version."""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, Structure, byref, c_char_p, c_int, c_void_p
from typing import Any, Optional, Tuple

from ._cdefs import VERSION_MAJOR, _OPTIONAL, _PROTOTYPES


class LibraryLoadError(OSError):
    """libvyre_cuda could not be loaded, or is the wrong version."""


_lib: Optional[ctypes.CDLL] = None
#: The compiled fast path (vyre_cuda._fast, set up by load()), or None: the
#: ctypes path then runs everywhere.
_fast: Any = None
#: Why the compiled fast path is not in use ("" when it is).
_fast_reason = "the library is not loaded yet"
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
        _setup_fast(lib)
        _lib = lib
        return lib


# The entry points the compiled fast path calls; it receives their addresses
# from this CDLL, so both paths use the same library instance.
_FAST_FUNCTIONS = ("vyre_dispatch", "vyre_dispatch_async", "vyre_pending_wait",
                   "vyre_pending_timing", "vyre_graph_replay", "vyre_graph_replay_async",
                   "vyre_buffer_upload", "vyre_buffer_download", "vyre_sequence_run")
# Passed when the library has them (the module leaves their calls to ctypes
# otherwise).
_FAST_OPTIONAL = ("vyre_context_wait_stream", "vyre_context_signal_stream")


def _setup_fast(lib: ctypes.CDLL) -> None:
    """Imports vyre_cuda._fast and gives it the library's entry points,
    unless VYRE_CUDA_PURE_PYTHON=1. Without the module (a source checkout,
    another interpreter) the ctypes path serves every call; with
    VYRE_CUDA_REQUIRE_FAST=1 (the test build) that is an error instead."""
    global _fast, _fast_reason
    if os.environ.get("VYRE_CUDA_PURE_PYTHON") == "1":
        _fast, _fast_reason = None, "VYRE_CUDA_PURE_PYTHON=1"
        return
    try:
        from . import _fast as fast  # type: ignore[attr-defined]
        import array
        from ._context import Buffer, BufferRange
        from ._errors import _check
        from ._host_memory import PinnedMemory
        from ._program import Outputs
        addresses = {name: ctypes.cast(getattr(lib, name), c_void_p).value
                     for name in _FAST_FUNCTIONS}
        addresses.update((name, ctypes.cast(getattr(lib, name), c_void_p).value)
                         for name in _FAST_OPTIONAL if name not in _lib_missing)
        fast.init(addresses, Buffer, BufferRange, array.array, PinnedMemory, Outputs,
                  _check)
        # PyTorch tensors / CuPy arrays read in the compiled dispatch: the
        # readers by type, and _program's namespace (for its _wait_streams).
        from . import _program
        from ._interop import _readers
        fast.init_known(_readers, vars(_program))
    except (ImportError, AttributeError, OSError, TypeError, ValueError) as e:
        _fast, _fast_reason = None, f"vyre_cuda._fast unavailable: {e}"
        if os.environ.get("VYRE_CUDA_REQUIRE_FAST") == "1":
            raise LibraryLoadError(
                f"VYRE_CUDA_REQUIRE_FAST=1 but {_fast_reason}. Fix: build the module "
                f"(the CMake target vyre_cuda_python_fast, or pip install) and set "
                f"VYRE_CUDA_EXTENSION_DIR to its directory, or unset VYRE_CUDA_REQUIRE_FAST."
            ) from None
        return
    _fast, _fast_reason = fast, ""


def fast_path() -> bool:
    """Whether calls in loops go through the compiled module (vyre_cuda._fast)
    rather than ctypes; loads the library if not yet."""
    load()
    return _fast is not None


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


def version() -> Tuple[int, int, int]:
    """The loaded library's version as (major, minor, patch)."""
    v = load().vyre_version()
    return (v >> 22, (v >> 12) & 0x3FF, v & 0xFFF)


def version_string() -> str:
    return "%d.%d.%d" % version()
