//! The process-wide log callback.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock};

use vyre_cuda_sys as sys;

use crate::error::{check, Result};

/// The level of a log line; a callback receives the lines up to its
/// maximum level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Error,
    Warning,
    Info,
    /// Per-stage timings (also enabled by VYRE_CUDA_TRACE=1).
    Trace,
}

impl LogLevel {
    fn raw(self) -> sys::vyre_log_level {
        match self {
            LogLevel::Error => sys::VYRE_LOG_ERROR,
            LogLevel::Warning => sys::VYRE_LOG_WARNING,
            LogLevel::Info => sys::VYRE_LOG_INFO,
            LogLevel::Trace => sys::VYRE_LOG_TRACE,
        }
    }

    fn from_raw(raw: sys::vyre_log_level) -> LogLevel {
        match raw {
            sys::VYRE_LOG_ERROR => LogLevel::Error,
            sys::VYRE_LOG_WARNING => LogLevel::Warning,
            sys::VYRE_LOG_INFO => LogLevel::Info,
            _ => LogLevel::Trace,
        }
    }
}

type Callback = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// The installed callback. The library calls the trampoline, which clones
/// the callback out of here, so replacing it never frees one in use.
static CALLBACK: RwLock<Option<Callback>> = RwLock::new(None);
/// Serialises set/clear so the library's state and CALLBACK agree.
static SETTING: Mutex<()> = Mutex::new(());

unsafe extern "C" fn trampoline(
    _user_data: *mut c_void,
    level: sys::vyre_log_level,
    message: *const c_char,
) {
    // Nothing may unwind into C: a panicking callback loses its line.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let callback = CALLBACK.read().ok().and_then(|c| c.clone());
        if let (Some(callback), false) = (callback, message.is_null()) {
            // SAFETY: the library passes a NUL-terminated line valid for the call.
            let text = unsafe { CStr::from_ptr(message) }.to_string_lossy();
            callback(LogLevel::from_raw(level), &text);
        }
    }));
}

/// Installs the process-wide log callback, receiving lines up to
/// `max_level`, from any thread, concurrently. It must not call back into
/// vyre-cuda. Replaces any callback installed before.
pub fn set_log_callback<F>(callback: F, max_level: LogLevel) -> Result<()>
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    crate::error::library_loaded("vyre_set_log_callback")?;
    let _serial = SETTING.lock().unwrap_or_else(|e| e.into_inner());
    let previous = CALLBACK
        .write()
        .map(|mut c| c.replace(Arc::new(callback)))
        .unwrap_or(None);
    // SAFETY: the trampoline is a valid callback for the process's life.
    let status = unsafe {
        sys::vyre_set_log_callback(Some(trampoline), std::ptr::null_mut(), max_level.raw())
    };
    let result = check(status, "vyre_set_log_callback");
    if result.is_err() {
        if let Ok(mut c) = CALLBACK.write() {
            *c = previous;
        }
    }
    result
}

/// Removes the log callback (VYRE_CUDA_TRACE=1 then prints trace lines to
/// stderr).
pub fn clear_log_callback() -> Result<()> {
    crate::error::library_loaded("vyre_set_log_callback")?;
    let _serial = SETTING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: NULL removes the callback.
    let status =
        unsafe { sys::vyre_set_log_callback(None, std::ptr::null_mut(), sys::VYRE_LOG_ERROR) };
    let result = check(status, "vyre_set_log_callback");
    if result.is_ok() {
        if let Ok(mut c) = CALLBACK.write() {
            *c = None;
        }
    }
    result
}
