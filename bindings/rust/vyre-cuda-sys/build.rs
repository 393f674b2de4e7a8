//! Finds libvyre_cuda for the linker, in this order:
//!  1. `VYRE_CUDA_LIB_DIR`: a directory holding libvyre_cuda.so (a CMake
//!     build's `build/<preset>/src`, or an install's lib directory);
//!  2. `pkg-config --libs vyre_cuda` (the vyre_cuda.pc that `cmake --install`
//!     writes), run as a command: no crate from a registry is needed;
//!  3. otherwise the build fails with a message saying how to fix it.
//!
//! The directory found is passed on to dependent build scripts as
//! `DEP_VYRE_CUDA_LIB_DIR` (the vyre-cuda crate puts it in the run path of its
//! tests and examples), and put in the run path of this crate's own tests.
//! `VYRE_CUDA_NO_RPATH=1` leaves the run path alone (the loader then needs
//! LD_LIBRARY_PATH or an installed library).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "VYRE_CUDA_LIB_DIR",
        "VYRE_CUDA_NO_RPATH",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let dirs = match env::var_os("VYRE_CUDA_LIB_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if !has_library(&dir) {
                fail(&format!(
                    "VYRE_CUDA_LIB_DIR={} holds no libvyre_cuda.so. Fix: point it at the \
                     directory holding libvyre_cuda.so (after `cmake --build --preset cpu` that \
                     is build/cpu/src), or unset it to use pkg-config.",
                    dir.display()
                ));
            }
            vec![dir]
        }
        None => match pkg_config() {
            Ok(dirs) => dirs,
            Err(why) => fail(&format!(
                "libvyre_cuda was not found: VYRE_CUDA_LIB_DIR is not set and {why}. Fix: set \
                 VYRE_CUDA_LIB_DIR to the directory holding libvyre_cuda.so (after `cmake \
                 --build --preset cpu` that is build/cpu/src), or install vyre-cuda (`cmake \
                 --install`) and put its lib/pkgconfig directory on PKG_CONFIG_PATH."
            )),
        },
    };

    for dir in &dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=vyre_cuda");
    if let Some(first) = dirs.first() {
        // DEP_VYRE_CUDA_LIB_DIR for dependents' build scripts.
        println!("cargo:lib_dir={}", first.display());
        if env::var_os("VYRE_CUDA_NO_RPATH").map_or(true, |v| v != "1") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", first.display());
        }
    }
}

fn has_library(dir: &Path) -> bool {
    dir.join("libvyre_cuda.so").exists()
}

/// The -L directories `pkg-config --libs vyre_cuda` names that hold the library.
fn pkg_config() -> Result<Vec<PathBuf>, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&program)
        .args(["--libs", "vyre_cuda"])
        .output()
        .map_err(|e| format!("`{program}` could not be run ({e})"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "`{program} --libs vyre_cuda` failed ({})",
            stderr.trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dirs: Vec<PathBuf> = stdout
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-L"))
        .map(PathBuf::from)
        .collect();
    let found: Vec<PathBuf> = dirs.iter().filter(|d| has_library(d)).cloned().collect();
    if found.is_empty() && !dirs.is_empty() {
        return Err(format!(
            "`{program} --libs vyre_cuda` names {} but none holds libvyre_cuda.so",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // No -L at all: the library is in a system directory the linker searches.
    Ok(found)
}

fn fail(message: &str) -> ! {
    eprintln!("error: vyre-cuda-sys: {message}");
    std::process::exit(1);
}
