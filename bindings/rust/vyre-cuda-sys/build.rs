//! Finds libvyre_cuda at build time, to remember where it is: the crate does
//! not link it, it loads it at run time (src/loader.rs), first from
//! `$VYRE_CUDA_LIBRARY`, then from the file found here, then as
//! `libvyre_cuda.so.0` through the dynamic loader's search. Looked for, in
//! this order:
//!  1. `VYRE_CUDA_LIB_DIR`: an absolute path to a directory holding
//!     libvyre_cuda.so.0 (or libvyre_cuda.so): a CMake build's
//!     `build/<preset>/src`, an install's lib directory, or the Python
//!     package's `vyre_cuda/_lib`. Set but wrong, the build fails with a Fix;
//!  2. the `libdir` of `pkg-config vyre_cuda` (the vyre_cuda.pc that
//!     `cmake --install` writes), run as a command: no registry crate;
//!  3. otherwise none is remembered (a warning says so) and the program
//!     needs `VYRE_CUDA_LIBRARY` or an installed library at run time.
//!
//! The file found is compiled into the crate as `BUILD_LIBRARY`
//! (`VYRE_CUDA_SYS_BUILD_LIBRARY`) and passed on to dependent build scripts
//! as `DEP_VYRE_CUDA_LIBRARY` and `DEP_VYRE_CUDA_LIB_DIR`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const NAMES: [&str; 2] = ["libvyre_cuda.so.0", "libvyre_cuda.so"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["VYRE_CUDA_LIB_DIR", "PKG_CONFIG_PATH", "PKG_CONFIG"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let library = match env::var_os("VYRE_CUDA_LIB_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if !dir.is_absolute() {
                fail(&format!(
                    "VYRE_CUDA_LIB_DIR={} is a relative path. Fix: give the absolute path of \
                     the directory holding libvyre_cuda.so.0 (after `cmake --build --preset cpu` \
                     that is <repo>/build/cpu/src).",
                    dir.display()
                ));
            }
            match library_in(&dir) {
                Some(file) => Some(file),
                None => fail(&format!(
                    "VYRE_CUDA_LIB_DIR={} holds no libvyre_cuda.so.0. Fix: point it at the \
                     directory holding libvyre_cuda.so.0 (after `cmake --build --preset cpu` that \
                     is <repo>/build/cpu/src; an install's lib directory; the Python package's \
                     vyre_cuda/_lib), or unset it to use pkg-config.",
                    dir.display()
                )),
            }
        }
        None => match pkg_config_libdir() {
            Ok(dir) => match library_in(&dir) {
                Some(file) => Some(file),
                None => {
                    warn(&format!(
                        "pkg-config's libdir of vyre_cuda, {}, holds no libvyre_cuda.so.0; \
                         none is remembered",
                        dir.display()
                    ));
                    None
                }
            },
            Err(why) => {
                warn(&format!(
                    "libvyre_cuda was not found at build time (VYRE_CUDA_LIB_DIR is not set and \
                     {why}): the program will load libvyre_cuda.so.0 from VYRE_CUDA_LIBRARY or \
                     the dynamic loader's search path. Fix: set VYRE_CUDA_LIB_DIR to the \
                     directory holding libvyre_cuda.so.0 (after `cmake --build --preset cpu` \
                     that is <repo>/build/cpu/src), or install vyre-cuda (`cmake --install`) \
                     where pkg-config finds its vyre_cuda.pc"
                ));
                None
            }
        },
    };

    if let Some(file) = library {
        println!(
            "cargo:rustc-env=VYRE_CUDA_SYS_BUILD_LIBRARY={}",
            file.display()
        );
        // DEP_VYRE_CUDA_LIBRARY and DEP_VYRE_CUDA_LIB_DIR for dependents'
        // build scripts.
        println!("cargo:library={}", file.display());
        if let Some(dir) = file.parent() {
            println!("cargo:lib_dir={}", dir.display());
        }
    }
}

/// dir/libvyre_cuda.so.0 (else dir/libvyre_cuda.so), the directory made
/// canonical, the file name kept (a build's .so.0 is a link that survives a
/// rebuild of another patch version).
fn library_in(dir: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    NAMES.iter().map(|n| dir.join(n)).find(|f| f.exists())
}

/// `pkg-config --variable=libdir vyre_cuda`.
fn pkg_config_libdir() -> Result<PathBuf, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&program)
        .args(["--print-errors", "--variable=libdir", "vyre_cuda"])
        .output()
        .map_err(|e| format!("`{program}` could not be run ({e})"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || stdout.trim().is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = stderr.lines().next().unwrap_or("").trim();
        return Err(format!(
            "`{program} --variable=libdir vyre_cuda` failed{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ));
    }
    Ok(PathBuf::from(stdout.trim()))
}

fn warn(message: &str) {
    println!("cargo:warning={message}");
}

fn fail(message: &str) -> ! {
    eprintln!("error: vyre-cuda-sys: {message}");
    std::process::exit(1);
}
