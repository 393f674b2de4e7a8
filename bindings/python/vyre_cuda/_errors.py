"""Errors: VyreError, status names, and the library's last error (message, log)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int32, c_size_t
from typing import Optional, Tuple, Union

from . import _loader
from ._cdefs import _S, Status
from ._loader import load


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
    status = getattr(_loader._lib or load(), name)(*args)
    if status:
        _check(status, name)


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
