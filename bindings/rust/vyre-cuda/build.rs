//! Puts the directory vyre-cuda-sys linked libvyre_cuda from into the run
//! path of this crate's tests and examples, so they run without
//! LD_LIBRARY_PATH (VYRE_CUDA_NO_RPATH=1 leaves it out).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_VYRE_CUDA_LIB_DIR");
    println!("cargo:rerun-if-env-changed=VYRE_CUDA_NO_RPATH");
    if std::env::var_os("VYRE_CUDA_NO_RPATH").is_some_and(|v| v == "1") {
        return;
    }
    if let Some(dir) = std::env::var_os("DEP_VYRE_CUDA_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.to_string_lossy());
    }
}
