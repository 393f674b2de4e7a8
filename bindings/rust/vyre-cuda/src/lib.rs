//! Safe Rust bindings of vyre-cuda: GPU kernels through the CUDA driver API,
//! without linking CUDA.
//!
//! ```no_run
//! use vyre_cuda::{Arg, Binding, Code, Context, Dispatch, Program};
//!
//! # fn main() -> vyre_cuda::Result<()> {
//! # let ptx = "";
//! let ctx = Context::new(0)?;
//! let add = Program::builder(Code::Ptx(ptx), "my_add_u32")
//!     .bindings([Binding::input::<u32>(), Binding::input::<u32>(), Binding::output::<u32>()])
//!     .workgroup_size(256)
//!     .build(&ctx)?;
//! let (a, b) = (vec![1u32; 1000], vec![2u32; 1000]);
//! let mut out = vec![0u32; 1000];
//! add.dispatch(Dispatch::new()
//!     .arg(Arg::input(&a)).arg(Arg::input(&b)).arg(Arg::output(&mut out))
//!     .params(&[1000]))?;
//! assert!(out.iter().all(|&x| x == 3));
//! # Ok(()) }
//! ```
//!
//! # Ownership
//! Every object owns one library handle and frees it on `Drop` (errors there
//! are ignored, never panicked on); the explicit `free`/`destroy`/`release`
//! methods consume the object and return the library's answer. Objects keep
//! their [`Context`] alive (it is reference-counted): the context is destroyed
//! when the last of them is dropped, so no object can outlive it, and a
//! handle can never be used after it was freed. Everything is `Send` and
//! `Sync` (the C API is thread-safe) but a [`Capture`], which is `Sync` and
//! stays on the thread that began it; a [`Pending`] and the objects borrowing
//! host memory carry its lifetime.
//!
//! # Host memory
//! Host data are slices of [`Pod`] types: inputs `&[T]`, outputs `&mut [T]`.
//! An asynchronous dispatch borrows them until its [`Pending`] is waited on
//! and dropped. [`PinnedBuffer`] (page-locked memory from `vyre_host_alloc`)
//! and [`Registration`] (a slice page-locked with `vyre_host_register` for
//! the guard's life) make host copies run by DMA in place.
//!
//! # Errors
//! Every failing call returns an [`Error`] with the library's [`Status`],
//! the driver's CUresult and the message ending in a "Fix:" sentence, read
//! on the calling thread right after the call.
//!
//! # Finding the library
//! Nothing is linked: libvyre_cuda is loaded at run time, on the first call,
//! from `$VYRE_CUDA_LIBRARY` if set, else the file the `vyre-cuda-sys` build
//! script found (in `$VYRE_CUDA_LIB_DIR`, else pkg-config's `libdir` of
//! `vyre_cuda`), else `libvyre_cuda.so.0` through the dynamic loader's
//! search. So a program starts without a run path or `LD_LIBRARY_PATH`.
//! [`library_path`] names the file loaded; without one, calls that need no
//! object return [`Status::LibraryNotLoaded`] with a Fix. The CUDA driver is
//! loaded at run time too (`$VYRE_CUDA_DRIVER_LIBRARY` overrides
//! libcuda.so.1); without one, calls return [`Status::NoDriver`].

#![deny(unsafe_op_in_unsafe_fn)]

mod buffer;
mod capture;
mod context;
mod dispatch;
mod egraph;
mod error;
mod graph;
mod host;
mod log;
mod program;
mod sequence;

pub use vyre_cuda_sys as sys;

pub use buffer::{
    Buffer, BufferCopy, BufferInfo, BufferRange, DownloadRange, IpcHandle, UploadRange,
};
pub use capture::{Capture, CaptureMode, CaptureOptions};
pub use context::{
    device_can_access_peer, device_count, device_info, Context, ContextOptions, DeviceInfo,
    Telemetry,
};
pub use dispatch::{Arg, Dispatch, Pending, Timing};
pub use egraph::{
    EgraphAppend, EgraphCapacity, EgraphColumn, EgraphColumns, EgraphDevice, EgraphImage,
    EgraphImageInfo, EgraphNodes, Rebuild, RebuildResult,
};
pub use error::{
    check_raw, last_error, last_error_log, library_path, status_name, Error, Result, Status,
    LIBRARY_NOT_LOADED,
};
pub use graph::{Graph, GraphInfo, GraphNodeKind, KernelNodeUpdate, Replay};
pub use host::{PinnedBuffer, Registration};
pub use log::{clear_log_callback, set_log_callback, LogLevel};
pub use program::{Binding, Code, Param, Program, ProgramBuilder, Role};
pub use sequence::{Repeat, Sequence, Step};

/// CUDA's legacy default stream (`CU_STREAM_LEGACY`), for
/// [`Context::wait_stream`] and [`Context::signal_stream`] (the CUDA array
/// interface and DLPack name it 1 too).
pub const CU_STREAM_LEGACY: u64 = 1;
/// CUDA's per-thread default stream (`CU_STREAM_PER_THREAD`).
pub const CU_STREAM_PER_THREAD: u64 = 2;

/// The version these bindings were written for (`VYRE_CUDA_VERSION_MAJOR`).
pub const VERSION_MAJOR: u32 = sys::VYRE_CUDA_VERSION_MAJOR;

/// The loaded library's version as (major, minor, patch).
///
/// # Panics
/// When libvyre_cuda cannot be loaded ([`library_path`] and
/// [`Context::new`] return that as an [`Error`] instead).
pub fn version() -> (u32, u32, u32) {
    // SAFETY: no arguments; always succeeds.
    let v = unsafe { sys::vyre_version() };
    (
        sys::vyre_version_major_of(v),
        sys::vyre_version_minor_of(v),
        sys::vyre_version_patch_of(v),
    )
}

/// Plain old data: host memory the library may copy to and from the device
/// byte for byte.
///
/// # Safety
/// Implement it only for `Copy` types without padding bytes, pointers or
/// references, for which every bit pattern is a valid value (a kernel can
/// write any bytes into an output).
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: integers and floats: no padding, every bit pattern valid.
        unsafe impl Pod for $t {}
    )*};
}
pod!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, isize, f32, f64);
// SAFETY: an array of Pod has no padding between its elements.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// The bytes of a slice of Pod values.
pub(crate) fn byte_len<T: Pod>(s: &[T]) -> u64 {
    std::mem::size_of_val(s) as u64
}
