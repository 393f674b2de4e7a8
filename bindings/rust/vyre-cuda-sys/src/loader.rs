//! Loads libvyre_cuda at run time (dlopen), the way the C loader header
//! (`include/vyre_cuda_loader.h`) and the Python binding do, so that a
//! program using these bindings has no link-time dependency on the library:
//! it needs no run path, no `LD_LIBRARY_PATH` and no build script of its own.
//!
//! The library is loaded once per process, on the first call of any function
//! (or of [`load`]), from the first of:
//!  1. `$VYRE_CUDA_LIBRARY`, a path (or a file name for the loader's search),
//!     when set and not empty; nothing else is tried then;
//!  2. the library this crate's build script found ([`BUILD_LIBRARY`]: from
//!     `$VYRE_CUDA_LIB_DIR`, else `pkg-config`'s `libdir` of `vyre_cuda`),
//!     when that file still exists;
//!  3. `libvyre_cuda.so.0` through the dynamic loader's search
//!     (`LD_LIBRARY_PATH`, the program's run path, `/etc/ld.so.cache`, the
//!     system directories).
//!
//! Every function must resolve and the library's major version must be this
//! crate's (`VYRE_CUDA_VERSION_MAJOR`), as the C loader checks.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

use crate::Api;

/// The library file the build script found (an absolute path), if any.
pub const BUILD_LIBRARY: Option<&str> = option_env!("VYRE_CUDA_SYS_BUILD_LIBRARY");

/// The file name the dynamic loader searches for (the library's SONAME).
pub const LIBRARY_SONAME: &str = "libvyre_cuda.so.0";

const FIX: &str = "Fix: set VYRE_CUDA_LIBRARY to the path of libvyre_cuda.so.0 (a CMake \
build's <build>/src, an install's lib directory, or the Python package's vyre_cuda/_lib), or \
build with VYRE_CUDA_LIB_DIR naming its directory (the path is kept in the program), or install \
it where the dynamic loader looks (cmake --install build/release --prefix /usr/local, then \
ldconfig).";

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlclose(handle: *mut c_void) -> c_int;
    fn dlerror() -> *mut c_char;
    fn dladdr(address: *const c_void, info: *mut DlInfo) -> c_int;
}
const RTLD_NOW: c_int = 2;

#[repr(C)]
struct DlInfo {
    dli_fname: *const c_char,
    dli_fbase: *mut c_void,
    dli_sname: *const c_char,
    dli_saddr: *mut c_void,
}

pub(crate) struct Library {
    pub(crate) api: Api,
    path: String,
}

static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();

/// Loads the library if it is not loaded yet. Returns the path of the file
/// loaded, or why it could not be loaded: a message ending in a
/// "Fix: ..." sentence. The outcome is kept for the process: a later call
/// returns the same answer.
pub fn load() -> Result<&'static str, &'static str> {
    match LIBRARY.get_or_init(open) {
        Ok(library) => Ok(&library.path),
        Err(why) => Err(why),
    }
}

/// The functions, loading the library on first use.
///
/// # Panics
/// When the library cannot be loaded, with [`load`]'s message.
#[inline]
pub(crate) fn api() -> &'static Api {
    match LIBRARY.get_or_init(open) {
        Ok(library) => &library.api,
        Err(why) => panic!("{why}"),
    }
}

fn open() -> Result<Library, String> {
    if let Some(path) = std::env::var_os("VYRE_CUDA_LIBRARY").filter(|v| !v.is_empty()) {
        let path = path.to_string_lossy().into_owned();
        return open_file(&path).map_err(|why| {
            format!(
                "libvyre_cuda could not be loaded from VYRE_CUDA_LIBRARY={path}: {why}. Fix: \
                 point VYRE_CUDA_LIBRARY at libvyre_cuda.so.0 (a CMake build's <build>/src, an \
                 install's lib directory, or the Python package's vyre_cuda/_lib), or unset it."
            )
        });
    }
    let mut tried = Vec::new();
    if let Some(built) = BUILD_LIBRARY {
        if Path::new(built).exists() {
            // There but unusable (another major version, a function
            // missing): say so rather than look further.
            return open_file(built).map_err(|why| {
                format!("libvyre_cuda could not be loaded from {built} (found at build time): {why}. {FIX}")
            });
        }
        tried.push(format!("{built} (found at build time) no longer exists"));
    }
    match open_file(LIBRARY_SONAME) {
        Ok(library) => Ok(library),
        Err(why) => {
            tried.push(why);
            Err(format!(
                "libvyre_cuda could not be loaded: {}. {FIX}",
                tried.join("; ")
            ))
        }
    }
}

/// dlopen, every function resolved, the major version checked.
fn open_file(path: &str) -> Result<Library, String> {
    let c_path = CString::new(path).map_err(|_| format!("{path:?} holds a NUL byte"))?;
    // SAFETY: a valid NUL-terminated string; dlerror's answer is copied at once.
    let handle = unsafe { dlopen(c_path.as_ptr(), RTLD_NOW) };
    if handle.is_null() {
        return Err(last_dl_error(&format!("dlopen({path}) failed")));
    }
    // SAFETY: a handle from dlopen; Api::resolve reads symbols only.
    let api = match unsafe { Api::resolve(handle) } {
        Ok(api) => api,
        Err(missing) => {
            // SAFETY: the handle is ours and nothing of it is in use.
            unsafe { dlclose(handle) };
            return Err(format!(
                "{path} does not export {missing}: it is not libvyre_cuda, or one older than these bindings"
            ));
        }
    };
    // SAFETY: vyre_version takes no arguments and always succeeds.
    let version = unsafe { (api.vyre_version)() };
    let major = crate::vyre_version_major_of(version);
    if major != crate::VYRE_CUDA_VERSION_MAJOR {
        // SAFETY: as above.
        unsafe { dlclose(handle) };
        return Err(format!(
            "{path} is version {major}.{}.{}, these bindings are for major version {}",
            crate::vyre_version_minor_of(version),
            crate::vyre_version_patch_of(version),
            crate::VYRE_CUDA_VERSION_MAJOR
        ));
    }
    // The handle stays open for the process: the functions live in it.
    Ok(Library {
        path: loaded_file(api.vyre_version as *const c_void).unwrap_or_else(|| path.to_string()),
        api,
    })
}

/// The address of `name` in the library, or `Err(name)`.
pub(crate) fn symbol(handle: *mut c_void, name: &'static str) -> Result<*mut c_void, &'static str> {
    let c_name = CStr::from_bytes_with_nul(name.as_bytes()).expect("NUL-terminated name");
    // SAFETY: a handle from dlopen and a NUL-terminated name.
    let address = unsafe { dlsym(handle, c_name.as_ptr()) };
    if address.is_null() {
        Err(name.trim_end_matches('\0'))
    } else {
        Ok(address)
    }
}

/// The file the loader mapped for the code at `address`.
fn loaded_file(address: *const c_void) -> Option<String> {
    let mut info = DlInfo {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `info` is writable; dladdr only reads the address.
    if unsafe { dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated name owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    Some(
        std::fs::canonicalize(&name)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or(name),
    )
}

fn last_dl_error(fallback: &str) -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string.
    let text = unsafe { dlerror() };
    if text.is_null() {
        fallback.to_string()
    } else {
        // SAFETY: checked non-NULL above.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Declares the C functions: a table of pointers resolved by dlsym, and one
/// `pub unsafe fn` per function, with the C function's name and signature,
/// that calls through the table.
macro_rules! functions {
    ($(
        $(#[$meta:meta])*
        pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;
    )*) => {
        /// Every function of the library, resolved by dlsym.
        pub(crate) struct Api {
            $(pub(crate) $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
        }

        impl Api {
            /// # Safety
            /// `handle` is a live dlopen handle of libvyre_cuda.
            unsafe fn resolve(handle: *mut core::ffi::c_void) -> Result<Api, &'static str> {
                Ok(Api {
                    $($name: {
                        let address = crate::loader::symbol(handle, concat!(stringify!($name), "\0"))?;
                        // SAFETY: the library exports the function with the
                        // signature of vyre_cuda.h, which this declaration
                        // mirrors (checked by the tests against the header).
                        unsafe {
                            core::mem::transmute::<*mut core::ffi::c_void, unsafe extern "C" fn($($ty),*) $(-> $ret)?>(address)
                        }
                    },)*
                })
            }
        }

        $(
            $(#[$meta])*
            ///
            /// Loads libvyre_cuda on first use ([`load`]); panics with
            /// `load()`'s message when it cannot be loaded.
            ///
            /// # Safety
            /// The contract of the C function of the same name in
            /// `vyre_cuda.h`.
            #[inline]
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: the caller upholds the C function's contract.
                unsafe { (crate::loader::api().$name)($($arg),*) }
            }
        )*
    };
}
