//! Errors: the library's status, CUresult and message, read on the calling
//! thread right after the failing call.

use std::ffi::CStr;
use std::fmt;

use vyre_cuda_sys as sys;

/// A `vyre_status` other than OK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    InvalidHandle,
    StaleHandle,
    UnsupportedStructSize,
    OutOfRange,
    NoDriver,
    NoDevice,
    DriverTooOld,
    NvrtcUnavailable,
    OutOfMemory,
    CompileFailed,
    EntryNotFound,
    LimitExceeded,
    LaunchFailed,
    Timeout,
    NotReady,
    InvalidState,
    DriverError,
    Internal,
    ShapeMismatch,
    /// The device faulted: drop every [`Context`](crate::Context) of that
    /// device (and what they own) and create a new one.
    DeviceFault,
    /// libvyre_cuda itself could not be loaded (these bindings' status, never
    /// the library's; raw value [`LIBRARY_NOT_LOADED`]): the message says
    /// where it was looked for, and its Fix how to point at it.
    LibraryNotLoaded,
    /// A status newer than these bindings.
    Other(u32),
}

/// The raw value of [`Status::LibraryNotLoaded`], outside the library's range.
pub const LIBRARY_NOT_LOADED: sys::vyre_status = u32::MAX;

impl Status {
    /// The status for a raw `vyre_status`; `None` for OK.
    pub fn from_raw(raw: sys::vyre_status) -> Option<Status> {
        use Status::*;
        Some(match raw {
            sys::VYRE_STATUS_OK => return None,
            sys::VYRE_STATUS_INVALID_ARGUMENT => InvalidArgument,
            sys::VYRE_STATUS_INVALID_HANDLE => InvalidHandle,
            sys::VYRE_STATUS_STALE_HANDLE => StaleHandle,
            sys::VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE => UnsupportedStructSize,
            sys::VYRE_STATUS_OUT_OF_RANGE => OutOfRange,
            sys::VYRE_STATUS_NO_DRIVER => NoDriver,
            sys::VYRE_STATUS_NO_DEVICE => NoDevice,
            sys::VYRE_STATUS_DRIVER_TOO_OLD => DriverTooOld,
            sys::VYRE_STATUS_NVRTC_UNAVAILABLE => NvrtcUnavailable,
            sys::VYRE_STATUS_OUT_OF_MEMORY => OutOfMemory,
            sys::VYRE_STATUS_COMPILE_FAILED => CompileFailed,
            sys::VYRE_STATUS_ENTRY_NOT_FOUND => EntryNotFound,
            sys::VYRE_STATUS_LIMIT_EXCEEDED => LimitExceeded,
            sys::VYRE_STATUS_LAUNCH_FAILED => LaunchFailed,
            sys::VYRE_STATUS_TIMEOUT => Timeout,
            sys::VYRE_STATUS_NOT_READY => NotReady,
            sys::VYRE_STATUS_INVALID_STATE => InvalidState,
            sys::VYRE_STATUS_DRIVER_ERROR => DriverError,
            sys::VYRE_STATUS_INTERNAL => Internal,
            sys::VYRE_STATUS_SHAPE_MISMATCH => ShapeMismatch,
            sys::VYRE_STATUS_DEVICE_FAULT => DeviceFault,
            LIBRARY_NOT_LOADED => LibraryNotLoaded,
            other => Other(other),
        })
    }

    /// The raw `vyre_status` value.
    pub fn as_raw(self) -> sys::vyre_status {
        use Status::*;
        match self {
            InvalidArgument => sys::VYRE_STATUS_INVALID_ARGUMENT,
            InvalidHandle => sys::VYRE_STATUS_INVALID_HANDLE,
            StaleHandle => sys::VYRE_STATUS_STALE_HANDLE,
            UnsupportedStructSize => sys::VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
            OutOfRange => sys::VYRE_STATUS_OUT_OF_RANGE,
            NoDriver => sys::VYRE_STATUS_NO_DRIVER,
            NoDevice => sys::VYRE_STATUS_NO_DEVICE,
            DriverTooOld => sys::VYRE_STATUS_DRIVER_TOO_OLD,
            NvrtcUnavailable => sys::VYRE_STATUS_NVRTC_UNAVAILABLE,
            OutOfMemory => sys::VYRE_STATUS_OUT_OF_MEMORY,
            CompileFailed => sys::VYRE_STATUS_COMPILE_FAILED,
            EntryNotFound => sys::VYRE_STATUS_ENTRY_NOT_FOUND,
            LimitExceeded => sys::VYRE_STATUS_LIMIT_EXCEEDED,
            LaunchFailed => sys::VYRE_STATUS_LAUNCH_FAILED,
            Timeout => sys::VYRE_STATUS_TIMEOUT,
            NotReady => sys::VYRE_STATUS_NOT_READY,
            InvalidState => sys::VYRE_STATUS_INVALID_STATE,
            DriverError => sys::VYRE_STATUS_DRIVER_ERROR,
            Internal => sys::VYRE_STATUS_INTERNAL,
            ShapeMismatch => sys::VYRE_STATUS_SHAPE_MISMATCH,
            DeviceFault => sys::VYRE_STATUS_DEVICE_FAULT,
            LibraryNotLoaded => LIBRARY_NOT_LOADED,
            Other(raw) => raw,
        }
    }

    /// The library's name for the status ("VYRE_STATUS_NO_DRIVER").
    pub fn name(self) -> &'static str {
        status_name(self.as_raw())
    }
}

/// The library's static name of a raw status ("VYRE_STATUS_UNKNOWN" for
/// values it does not know, and for all but [`LIBRARY_NOT_LOADED`] when the
/// library could not be loaded).
pub fn status_name(raw: sys::vyre_status) -> &'static str {
    if raw == LIBRARY_NOT_LOADED {
        return "VYRE_CUDA_LIBRARY_NOT_LOADED";
    }
    if sys::load().is_err() {
        return "VYRE_STATUS_UNKNOWN";
    }
    // SAFETY: the library returns a static NUL-terminated string, never NULL.
    let name = unsafe { CStr::from_ptr(sys::vyre_status_name(raw)) };
    name.to_str().unwrap_or("VYRE_STATUS_UNKNOWN")
}

/// A failed vyre-cuda call.
///
/// `message()` is the library's message: a first line (at most 1023 bytes)
/// `"<what failed>: <why>. Fix: <what to do>."`, then a compiler or JIT log,
/// capped, if any. `log()` is the whole log of a failed compile
/// (`vyre_last_error_log`). Errors the bindings detect themselves (a slice
/// too short for what a call reads, say) have the same form, with
/// `cu_result()` 0 and `call()` naming the Rust method.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    cu_result: i32,
    message: String,
    log: String,
    call: &'static str,
}

/// `Result<T, vyre_cuda::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn status(&self) -> Status {
        self.status
    }
    /// The CUDA driver's CUresult; 0 when the driver was not the cause.
    pub fn cu_result(&self) -> i32 {
        self.cu_result
    }
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The whole compiler or JIT log; empty when the failure carried none.
    pub fn log(&self) -> &str {
        &self.log
    }
    /// The C function (or Rust method) that failed.
    pub fn call(&self) -> &'static str {
        self.call
    }
    /// The "Fix: ..." sentence of the message's first line.
    pub fn fix(&self) -> Option<&str> {
        let first = self.message.lines().next().unwrap_or("");
        first.find("Fix:").map(|i| &first[i..])
    }

    /// An error found by these bindings before calling the library. The
    /// message must end with a "Fix: ..." sentence.
    pub(crate) fn usage(status: Status, call: &'static str, message: String) -> Error {
        debug_assert!(message.contains("Fix:"), "{message}");
        Error {
            status,
            cu_result: 0,
            message,
            log: String::new(),
            call,
        }
    }

    /// The calling thread's last error, read without clearing it.
    fn read_last(status: Status, call: &'static str) -> Error {
        let (_, cu_result, message) = read_last_error();
        Error {
            status,
            cu_result,
            message,
            log: read_last_error_log(),
            call,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (CUresult {}): {}",
            self.call,
            self.status.name(),
            self.cu_result,
            self.message
        )
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.status)
            .field("cu_result", &self.cu_result)
            .field("call", &self.call)
            .field("message", &self.message)
            .field("log_bytes", &self.log.len())
            .finish()
    }
}

impl std::error::Error for Error {}

/// OK when libvyre_cuda is loaded (loading it if need be), else the
/// [`Status::LibraryNotLoaded`] error, for the calls that need no object.
pub(crate) fn library_loaded(call: &'static str) -> Result<()> {
    match sys::load() {
        Ok(_) => Ok(()),
        Err(why) => Err(Error {
            status: Status::LibraryNotLoaded,
            cu_result: 0,
            message: why.to_string(),
            log: String::new(),
            call,
        }),
    }
}

/// The file libvyre_cuda was loaded from (loading it if need be; see
/// `vyre_cuda_sys::load` for where it is looked for), or the
/// [`Status::LibraryNotLoaded`] error saying why it could not be.
pub fn library_path() -> Result<&'static str> {
    library_loaded("vyre_cuda::library_path")?;
    Ok(sys::load().unwrap_or_default())
}

/// OK, or the error of the call that just returned `status` on this thread.
#[inline]
pub(crate) fn check(status: sys::vyre_status, call: &'static str) -> Result<()> {
    match Status::from_raw(status) {
        None => Ok(()),
        Some(s) => Err(Error::read_last(s, call)),
    }
}

/// Turns the status of a raw `vyre-cuda-sys` call made on this thread into a
/// `Result`, reading the library's message for a failure. Call it right
/// after the raw call: the next vyre-cuda call clears the message.
pub fn check_raw(status: sys::vyre_status, call: &'static str) -> Result<()> {
    check(status, call)
}

/// This thread's last error (`vyre_last_error` and `vyre_last_error_log`),
/// or `None` when the last call succeeded (or the library is not loaded).
/// Does not clear it.
pub fn last_error() -> Option<Error> {
    sys::load().ok()?;
    let (status, cu_result, message) = read_last_error();
    Status::from_raw(status).map(|status| Error {
        status,
        cu_result,
        message,
        log: read_last_error_log(),
        call: "vyre_last_error",
    })
}

/// The whole compiler or JIT log of this thread's last error
/// (`vyre_last_error_log`); empty when it carried none. Does not clear it.
pub fn last_error_log() -> String {
    if sys::load().is_err() {
        return String::new();
    }
    read_last_error_log()
}

fn read_last_error() -> (sys::vyre_status, i32, String) {
    let mut status: sys::vyre_status = 0;
    let mut cu_result: i32 = 0;
    let mut length: usize = 0;
    // SAFETY: every pointer may be NULL; the out-pointers are valid.
    unsafe {
        sys::vyre_last_error(
            &mut status,
            &mut cu_result,
            std::ptr::null_mut(),
            0,
            &mut length,
        );
    }
    let mut text = vec![0u8; length + 1];
    // SAFETY: `text` has room for `text.len()` bytes including the NUL.
    unsafe {
        sys::vyre_last_error(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            text.as_mut_ptr().cast(),
            text.len(),
            std::ptr::null_mut(),
        );
    }
    text.truncate(length);
    (
        status,
        cu_result,
        String::from_utf8_lossy(&text).into_owned(),
    )
}

fn read_last_error_log() -> String {
    let mut length: usize = 0;
    // SAFETY: NULL with capacity 0 asks the length only.
    unsafe { sys::vyre_last_error_log(std::ptr::null_mut(), 0, &mut length) };
    if length == 0 {
        return String::new();
    }
    let mut text = vec![0u8; length + 1];
    // SAFETY: `text` has room for `text.len()` bytes including the NUL.
    unsafe { sys::vyre_last_error_log(text.as_mut_ptr().cast(), text.len(), std::ptr::null_mut()) };
    // A log may hold NUL bytes: the library counts every byte.
    text.truncate(length);
    String::from_utf8_lossy(&text).into_owned()
}
