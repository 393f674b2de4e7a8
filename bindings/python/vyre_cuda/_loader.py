"""Loading libvyre_cuda: finding the file, binding its prototypes, its version."""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, Structure, byref, c_char_p, c_int, c_void_p
from typing import Optional, Tuple

from ._cdefs import VERSION_MAJOR, _OPTIONAL, _PROTOTYPES


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


def version() -> Tuple[int, int, int]:
    """The loaded library's version as (major, minor, patch)."""
    v = load().vyre_version()
    return (v >> 22, (v >> 12) & 0x3FF, v & 0xFFF)


def version_string() -> str:
    return "%d.%d.%d" % version()
