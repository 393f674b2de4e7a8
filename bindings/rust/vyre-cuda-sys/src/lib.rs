//! Raw declarations of the C API of libvyre_cuda (`include/vyre_cuda.h`),
//! written by hand: no bindgen, no registry crates.
//!
//! Every item mirrors the header one to one, under the same name. The tests of
//! this crate parse the header and check that every `VYRE_API` function is
//! declared here with the same parameter and return types, that every
//! enumerator and constant has the header's value, and that every struct has
//! the C compiler's size, alignment and field offsets and that its `Default`
//! equals the header's `VYRE_*_INIT` macro.
//!
//! C enums are `u32` type aliases with one constant per enumerator (a value
//! the library adds later is then still representable). Descriptor structs
//! implement `Default` as their `VYRE_*_INIT` macro does (`struct_size` set).
//!
//! The functions are not linked: the library is loaded at run time (dlopen)
//! on the first call, from `$VYRE_CUDA_LIBRARY`, else the file the build
//! script found (`$VYRE_CUDA_LIB_DIR`, else `pkg-config`; see
//! [`BUILD_LIBRARY`]), else `libvyre_cuda.so.0` through the dynamic loader's
//! search. So a program using this crate, directly or through `vyre-cuda`,
//! starts without a run path or `LD_LIBRARY_PATH`. [`load`] loads it and
//! says which file it loaded, or why none could be (a message ending in a
//! "Fix:" sentence); the functions panic with that message instead.
//!
//! Use the `vyre-cuda` crate for a safe API.

#![allow(non_camel_case_types)]

#[macro_use]
mod loader;
pub use loader::{load, BUILD_LIBRARY, LIBRARY_SONAME};

use core::ffi::{c_char, c_void};
use core::mem::size_of;
use core::ptr;

// ---------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------

pub const VYRE_CUDA_VERSION_MAJOR: u32 = 0;
pub const VYRE_CUDA_VERSION_MINOR: u32 = 1;
pub const VYRE_CUDA_VERSION_PATCH: u32 = 0;

/// `VYRE_MAKE_VERSION`: (major << 22) | (minor << 12) | patch.
pub const fn vyre_make_version(major: u32, minor: u32, patch: u32) -> u32 {
    (major << 22) | (minor << 12) | patch
}
pub const VYRE_CUDA_VERSION: u32 = vyre_make_version(
    VYRE_CUDA_VERSION_MAJOR,
    VYRE_CUDA_VERSION_MINOR,
    VYRE_CUDA_VERSION_PATCH,
);
pub const fn vyre_version_major_of(v: u32) -> u32 {
    v >> 22
}
pub const fn vyre_version_minor_of(v: u32) -> u32 {
    (v >> 12) & 0x3FF
}
pub const fn vyre_version_patch_of(v: u32) -> u32 {
    v & 0xFFF
}

// ---------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------

pub type vyre_status = u32;
pub const VYRE_STATUS_OK: vyre_status = 0;
pub const VYRE_STATUS_INVALID_ARGUMENT: vyre_status = 1;
pub const VYRE_STATUS_INVALID_HANDLE: vyre_status = 2;
pub const VYRE_STATUS_STALE_HANDLE: vyre_status = 3;
pub const VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE: vyre_status = 4;
pub const VYRE_STATUS_OUT_OF_RANGE: vyre_status = 5;
pub const VYRE_STATUS_NO_DRIVER: vyre_status = 6;
pub const VYRE_STATUS_NO_DEVICE: vyre_status = 7;
pub const VYRE_STATUS_DRIVER_TOO_OLD: vyre_status = 8;
pub const VYRE_STATUS_NVRTC_UNAVAILABLE: vyre_status = 9;
pub const VYRE_STATUS_OUT_OF_MEMORY: vyre_status = 10;
pub const VYRE_STATUS_COMPILE_FAILED: vyre_status = 11;
pub const VYRE_STATUS_ENTRY_NOT_FOUND: vyre_status = 12;
pub const VYRE_STATUS_LIMIT_EXCEEDED: vyre_status = 13;
pub const VYRE_STATUS_LAUNCH_FAILED: vyre_status = 14;
pub const VYRE_STATUS_TIMEOUT: vyre_status = 15;
pub const VYRE_STATUS_NOT_READY: vyre_status = 16;
pub const VYRE_STATUS_INVALID_STATE: vyre_status = 17;
pub const VYRE_STATUS_DRIVER_ERROR: vyre_status = 18;
pub const VYRE_STATUS_INTERNAL: vyre_status = 19;
pub const VYRE_STATUS_SHAPE_MISMATCH: vyre_status = 20;
pub const VYRE_STATUS_DEVICE_FAULT: vyre_status = 21;
pub const VYRE_STATUS_FORCE32: vyre_status = 0x7FFF_FFFF;

pub type vyre_log_level = u32;
pub const VYRE_LOG_ERROR: vyre_log_level = 0;
pub const VYRE_LOG_WARNING: vyre_log_level = 1;
pub const VYRE_LOG_INFO: vyre_log_level = 2;
pub const VYRE_LOG_TRACE: vyre_log_level = 3;
pub const VYRE_LOG_LEVEL_FORCE32: vyre_log_level = 0x7FFF_FFFF;

pub type vyre_code_kind = u32;
pub const VYRE_CODE_PTX: vyre_code_kind = 1;
pub const VYRE_CODE_BINARY: vyre_code_kind = 2;
pub const VYRE_CODE_CUDA_SOURCE: vyre_code_kind = 3;
pub const VYRE_CODE_KIND_FORCE32: vyre_code_kind = 0x7FFF_FFFF;

pub type vyre_binding_role = u32;
pub const VYRE_ROLE_INPUT: vyre_binding_role = 1;
pub const VYRE_ROLE_OUTPUT: vyre_binding_role = 2;
pub const VYRE_ROLE_INPUT_OUTPUT: vyre_binding_role = 3;
pub const VYRE_ROLE_SHARED: vyre_binding_role = 4;
pub const VYRE_BINDING_ROLE_FORCE32: vyre_binding_role = 0x7FFF_FFFF;

pub type vyre_param_kind = u32;
pub const VYRE_PARAM_BINDING: vyre_param_kind = 1;
pub const VYRE_PARAM_SCALAR32: vyre_param_kind = 2;
pub const VYRE_PARAM_SCALAR64: vyre_param_kind = 3;
pub const VYRE_PARAM_PARAM_WORDS: vyre_param_kind = 4;
pub const VYRE_PARAM_NULL_POINTER: vyre_param_kind = 5;
pub const VYRE_PARAM_KIND_FORCE32: vyre_param_kind = 0x7FFF_FFFF;

pub type vyre_binding_source = u32;
pub const VYRE_SOURCE_HOST: vyre_binding_source = 1;
pub const VYRE_SOURCE_RESIDENT: vyre_binding_source = 2;
pub const VYRE_BINDING_SOURCE_FORCE32: vyre_binding_source = 0x7FFF_FFFF;

/// Flags of `vyre_buffer_info.flags` (an anonymous enum in the header).
pub const VYRE_BUFFER_INFO_FLAG_BORROWED: u32 = 1 << 0;
/// The buffer maps memory another process exported
/// (`vyre_buffer_import_ipc`); `BORROWED` is set too.
pub const VYRE_BUFFER_INFO_FLAG_IMPORTED: u32 = 1 << 1;

/// Flags of `vyre_dispatch_desc.flags` (an anonymous enum in the header).
pub const VYRE_DISPATCH_FLAG_DEVICE_TIMING: u32 = 1 << 0;
pub const VYRE_DISPATCH_FLAG_COOPERATIVE: u32 = 1 << 1;

/// Flags of `vyre_buffer_copy_desc.flags` (an anonymous enum in the header).
pub const VYRE_BUFFER_COPY_FLAG_STAGED: u32 = 1 << 0;

pub const VYRE_WAIT_FOREVER: u64 = u64::MAX;

/// Size of `vyre_ipc_handle` (`vyre_buffer_export_ipc`).
pub const VYRE_IPC_HANDLE_BYTES: usize = 128;

pub type vyre_graph_node_kind = u32;
pub const VYRE_GRAPH_NODE_KERNEL: vyre_graph_node_kind = 1;
pub const VYRE_GRAPH_NODE_MEMCPY: vyre_graph_node_kind = 2;
pub const VYRE_GRAPH_NODE_MEMSET: vyre_graph_node_kind = 3;
pub const VYRE_GRAPH_NODE_OTHER: vyre_graph_node_kind = 4;
pub const VYRE_GRAPH_NODE_HOST: vyre_graph_node_kind = 5;
pub const VYRE_GRAPH_NODE_CHILD_GRAPH: vyre_graph_node_kind = 6;
pub const VYRE_GRAPH_NODE_EMPTY: vyre_graph_node_kind = 7;
pub const VYRE_GRAPH_NODE_EVENT_RECORD: vyre_graph_node_kind = 8;
pub const VYRE_GRAPH_NODE_EVENT_WAIT: vyre_graph_node_kind = 9;
pub const VYRE_GRAPH_NODE_CONDITIONAL: vyre_graph_node_kind = 10;
pub const VYRE_GRAPH_NODE_MEM_ALLOC: vyre_graph_node_kind = 11;
pub const VYRE_GRAPH_NODE_MEM_FREE: vyre_graph_node_kind = 12;
/// Kernel arguments `vyre_graph_node_info` reports (the first ones).
pub const VYRE_GRAPH_NODE_MAX_ARGUMENTS: usize = 16;
pub const VYRE_GRAPH_NODE_KIND_FORCE32: vyre_graph_node_kind = 0x7FFF_FFFF;

/// Flags of `vyre_kernel_node_update.flags`.
pub const VYRE_KERNEL_NODE_UPDATE_GRID: u32 = 1 << 0;
pub const VYRE_KERNEL_NODE_UPDATE_SCALARS: u32 = 1 << 1;

/// Flags of `vyre_graph_node_info_set` (an anonymous enum in the header):
/// the caller takes responsibility for what the node touches.
pub const VYRE_GRAPH_NODE_SET_RAW: u32 = 1 << 0;

/// `vyre_capture_desc.mode` (an anonymous enum in the header): the driver's
/// stream capture modes.
pub const VYRE_CAPTURE_MODE_THREAD_LOCAL: u32 = 0;
pub const VYRE_CAPTURE_MODE_GLOBAL: u32 = 1;
pub const VYRE_CAPTURE_MODE_RELAXED: u32 = 2;

pub type vyre_step_kind = u32;
pub const VYRE_STEP_DISPATCH: vyre_step_kind = 1;
pub const VYRE_STEP_FILL: vyre_step_kind = 2;
pub const VYRE_STEP_COPY: vyre_step_kind = 3;
pub const VYRE_STEP_UPLOAD: vyre_step_kind = 4;
pub const VYRE_STEP_DOWNLOAD: vyre_step_kind = 5;
pub const VYRE_STEP_KIND_FORCE32: vyre_step_kind = 0x7FFF_FFFF;

pub type vyre_egraph_device = u32;
pub const VYRE_EGRAPH_DEVICE_GPU: vyre_egraph_device = 1;
pub const VYRE_EGRAPH_DEVICE_CPU: vyre_egraph_device = 2;
pub const VYRE_EGRAPH_DEVICE_FORCE32: vyre_egraph_device = 0x7FFF_FFFF;

pub type vyre_egraph_column = u32;
pub const VYRE_EGRAPH_COLUMN_ROW_CLASSES: vyre_egraph_column = 1;
pub const VYRE_EGRAPH_COLUMN_ROW_OPS: vyre_egraph_column = 2;
pub const VYRE_EGRAPH_COLUMN_CHILD_OFFSETS: vyre_egraph_column = 3;
pub const VYRE_EGRAPH_COLUMN_CHILD_LENGTHS: vyre_egraph_column = 4;
pub const VYRE_EGRAPH_COLUMN_ROW_SIGNATURES: vyre_egraph_column = 5;
pub const VYRE_EGRAPH_COLUMN_CHILDREN: vyre_egraph_column = 6;
pub const VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES: vyre_egraph_column = 7;
pub const VYRE_EGRAPH_COLUMN_FORCE32: vyre_egraph_column = 0x7FFF_FFFF;

/// Flags of `vyre_egraph_rebuild_desc.flags`.
pub const VYRE_EGRAPH_REBUILD_RESET: u32 = 1 << 0;
pub const VYRE_EGRAPH_REBUILD_DEVICE_TIMING: u32 = 1 << 1;
pub const VYRE_EGRAPH_REBUILD_COLLIDING_HASH: u32 = 1 << 2;
pub const VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS: u32 = 1 << 3;

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------

macro_rules! handles {
    ($($name:ident),* $(,)?) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name {
            pub bits: u64,
        }
    )*};
}
handles!(
    vyre_context,
    vyre_buffer,
    vyre_program,
    vyre_pending,
    vyre_graph,
    vyre_sequence,
    vyre_egraph_image
);

/// Receives log lines; may be called from any thread, concurrently, and must
/// not call back into vyre-cuda. `message` is valid only during the call.
pub type vyre_log_callback = Option<
    unsafe extern "C" fn(user_data: *mut c_void, level: vyre_log_level, message: *const c_char),
>;

// ---------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------

/// `struct_size` for a descriptor type.
const fn size32<T>() -> u32 {
    size_of::<T>() as u32
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_device_info {
    pub struct_size: u32,
    pub ordinal: u32,
    pub name: [c_char; 256],
    pub compute_capability_major: u32,
    pub compute_capability_minor: u32,
    pub total_memory_bytes: u64,
    pub multiprocessor_count: u32,
    pub max_threads_per_block: u32,
    pub max_block_dim: [u32; 3],
    pub max_grid_dim: [u32; 3],
    pub max_shared_memory_per_block: u32,
    pub warp_size: u32,
    pub cooperative_launch: u32,
    pub driver_version: u32,
    /// Version 2 (336 bytes): bit p set when this device can access device
    /// p's memory as a peer (devices 0 to 63; never its own bit).
    pub peer_access_mask: u64,
}
impl Default for vyre_device_info {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            ordinal: 0,
            name: [0; 256],
            compute_capability_major: 0,
            compute_capability_minor: 0,
            total_memory_bytes: 0,
            multiprocessor_count: 0,
            max_threads_per_block: 0,
            max_block_dim: [0; 3],
            max_grid_dim: [0; 3],
            max_shared_memory_per_block: 0,
            warp_size: 0,
            cooperative_launch: 0,
            driver_version: 0,
            peer_access_mask: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_context_desc {
    pub struct_size: u32,
    pub device_ordinal: u32,
    pub transient_pool_limit_bytes: u64,
    pub pinned_pool_limit_bytes: u64,
    pub staging_chunk_bytes: u64,
    pub staging_chunk_count: u32,
    pub staging_threads: u32,
}
impl Default for vyre_context_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            device_ordinal: 0,
            transient_pool_limit_bytes: 0,
            pinned_pool_limit_bytes: 0,
            staging_chunk_bytes: 0,
            staging_chunk_count: 0,
            staging_threads: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_telemetry {
    pub struct_size: u32,
    pub reserved0: u32,
    pub h2d_bytes: u64,
    pub h2d_operations: u64,
    pub d2h_bytes: u64,
    pub d2h_operations: u64,
    pub memset_operations: u64,
    pub kernel_launches: u64,
    pub sync_points: u64,
    pub dispatches: u64,
    pub transient_pool_hits: u64,
    pub transient_pool_misses: u64,
    pub transient_pool_cached_bytes: u64,
    pub pinned_pool_hits: u64,
    pub pinned_pool_misses: u64,
    pub pinned_pool_cached_bytes: u64,
    pub module_cache_hits: u64,
    pub module_cache_misses: u64,
    pub module_loads: u64,
    pub device_bytes_live: u64,
    pub pinned_bytes_live: u64,
    pub live_buffers: u64,
    pub live_programs: u64,
    pub live_pendings: u64,
    pub graph_records: u64,
    pub graph_replays: u64,
    pub graph_uploads_skipped: u64,
    pub graph_launches: u64,
    pub sequence_runs: u64,
    pub live_graphs: u64,
    pub live_sequences: u64,
}
impl Default for vyre_telemetry {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            reserved0: 0,
            h2d_bytes: 0,
            h2d_operations: 0,
            d2h_bytes: 0,
            d2h_operations: 0,
            memset_operations: 0,
            kernel_launches: 0,
            sync_points: 0,
            dispatches: 0,
            transient_pool_hits: 0,
            transient_pool_misses: 0,
            transient_pool_cached_bytes: 0,
            pinned_pool_hits: 0,
            pinned_pool_misses: 0,
            pinned_pool_cached_bytes: 0,
            module_cache_hits: 0,
            module_cache_misses: 0,
            module_loads: 0,
            device_bytes_live: 0,
            pinned_bytes_live: 0,
            live_buffers: 0,
            live_programs: 0,
            live_pendings: 0,
            graph_records: 0,
            graph_replays: 0,
            graph_uploads_skipped: 0,
            graph_launches: 0,
            sequence_runs: 0,
            live_graphs: 0,
            live_sequences: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_upload_range {
    pub offset: u64,
    pub bytes: u64,
    pub src: *const c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_download_range {
    pub offset: u64,
    pub bytes: u64,
    pub dst: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_buffer_info {
    pub struct_size: u32,
    /// `VYRE_BUFFER_INFO_FLAG_*` bits.
    pub flags: u32,
    pub bytes: u64,
    pub device_pointer: u64,
    pub context: vyre_context,
}
impl Default for vyre_buffer_info {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            bytes: 0,
            device_pointer: 0,
            context: vyre_context { bits: 0 },
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_buffer_copy_desc {
    pub struct_size: u32,
    /// `VYRE_BUFFER_COPY_FLAG_*` bits.
    pub flags: u32,
    /// The buffer read, and the first byte read.
    pub src: vyre_buffer,
    pub src_offset: u64,
    /// The buffer written, and the first byte written.
    pub dst: vyre_buffer,
    pub dst_offset: u64,
    /// Bytes copied; 0 copies nothing.
    pub bytes: u64,
}
impl Default for vyre_buffer_copy_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            src: vyre_buffer { bits: 0 },
            src_offset: 0,
            dst: vyre_buffer { bits: 0 },
            dst_offset: 0,
            bytes: 0,
        }
    }
}

/// An exported buffer (`vyre_buffer_export_ipc`): opaque bytes, valid in
/// other processes of the same machine until the exporter frees the buffer
/// or exits. The header has no INIT macro for it; `Default` is all zeros.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct vyre_ipc_handle {
    pub bytes: [u8; VYRE_IPC_HANDLE_BYTES],
}
impl Default for vyre_ipc_handle {
    fn default() -> Self {
        Self {
            bytes: [0; VYRE_IPC_HANDLE_BYTES],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_buffer_wrap_desc {
    pub struct_size: u32,
    /// Must be 0.
    pub flags: u32,
    /// A CUdeviceptr other CUDA code allocated on the context's device.
    pub device_pointer: u64,
    pub bytes: u64,
}
impl Default for vyre_buffer_wrap_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            device_pointer: 0,
            bytes: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_binding_decl {
    pub struct_size: u32,
    pub role: vyre_binding_role,
    pub name: *const c_char,
    pub element_size: u32,
    pub reserved0: u32,
    pub element_count: u64,
    pub output_offset: u64,
    pub output_length: u64,
}
impl Default for vyre_binding_decl {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            role: VYRE_ROLE_INPUT,
            name: ptr::null(),
            element_size: 4,
            reserved0: 0,
            element_count: 0,
            output_offset: 0,
            output_length: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct vyre_kernel_param {
    pub kind: vyre_param_kind,
    pub index: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_program_desc {
    pub struct_size: u32,
    pub code_kind: vyre_code_kind,
    pub code: *const c_void,
    pub code_size: usize,
    pub entry: *const c_char,
    pub bindings: *const vyre_binding_decl,
    pub binding_count: usize,
    pub workgroup_size: [u32; 3],
    pub shared_memory_bytes: u32,
    pub params: *const vyre_kernel_param,
    pub param_count: usize,
    pub compile_options: *const *const c_char,
    pub compile_option_count: usize,
}
impl Default for vyre_program_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            code_kind: VYRE_CODE_PTX,
            code: ptr::null(),
            code_size: 0,
            entry: ptr::null(),
            bindings: ptr::null(),
            binding_count: 0,
            workgroup_size: [0; 3],
            shared_memory_bytes: 0,
            params: ptr::null(),
            param_count: 0,
            compile_options: ptr::null(),
            compile_option_count: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_dispatch_binding {
    pub struct_size: u32,
    pub source: vyre_binding_source,
    pub host_input: *const c_void,
    pub host_output: *mut c_void,
    pub host_bytes: u64,
    pub buffer: vyre_buffer,
    pub offset: u64,
    pub length: u64,
}
impl Default for vyre_dispatch_binding {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            source: VYRE_SOURCE_HOST,
            host_input: ptr::null(),
            host_output: ptr::null_mut(),
            host_bytes: 0,
            buffer: vyre_buffer { bits: 0 },
            offset: 0,
            length: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_dispatch_desc {
    pub struct_size: u32,
    pub flags: u32,
    pub bindings: *const vyre_dispatch_binding,
    pub binding_count: usize,
    pub param_words: *const u32,
    pub param_word_count: usize,
    pub scalars: *const u64,
    pub scalar_count: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub element_count: u64,
    pub fixpoint_iterations: u32,
    pub shared_memory_bytes: u32,
}
impl Default for vyre_dispatch_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            bindings: ptr::null(),
            binding_count: 0,
            param_words: ptr::null(),
            param_word_count: 0,
            scalars: ptr::null(),
            scalar_count: 0,
            grid: [0; 3],
            block: [0; 3],
            element_count: 0,
            fixpoint_iterations: 1,
            shared_memory_bytes: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_timing {
    pub struct_size: u32,
    pub reserved0: u32,
    pub wall_ns: u64,
    pub device_ns: u64,
    pub enqueue_ns: u64,
    pub wait_ns: u64,
}
impl Default for vyre_timing {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            reserved0: 0,
            wall_ns: 0,
            device_ns: 0,
            enqueue_ns: 0,
            wait_ns: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_graph_replay_desc {
    pub struct_size: u32,
    pub flags: u32,
    pub bindings: *const vyre_dispatch_binding,
    pub binding_count: usize,
    pub param_words: *const u32,
    pub param_word_count: usize,
    pub scalars: *const u64,
    pub scalar_count: usize,
    pub element_count: u64,
}
impl Default for vyre_graph_replay_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            bindings: ptr::null(),
            binding_count: 0,
            param_words: ptr::null(),
            param_word_count: 0,
            scalars: ptr::null(),
            scalar_count: 0,
            element_count: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_graph_info {
    pub struct_size: u32,
    pub from_sequence: u32,
    pub context: vyre_context,
    pub node_count: u64,
    pub kernel_node_count: u64,
    pub unchanged_input_node_count: u64,
    pub element_count: u64,
    pub capacity_elements: u64,
    pub replays: u64,
    pub host_input_bytes: u64,
    pub host_output_bytes: u64,
}
impl Default for vyre_graph_info {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            from_sequence: 0,
            context: vyre_context { bits: 0 },
            node_count: 0,
            kernel_node_count: 0,
            unchanged_input_node_count: 0,
            element_count: 0,
            capacity_elements: 0,
            replays: 0,
            host_input_bytes: 0,
            host_output_bytes: 0,
        }
    }
}

/// One node of a graph as the next replay runs it (`vyre_graph_node_info_get`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_graph_node_info {
    pub struct_size: u32,
    pub kind: vyre_graph_node_kind,
    pub cu_graph_node: u64,
    pub cu_graph_exec: u64,
    pub cu_function: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_memory_bytes: u32,
    pub argument_count: u32,
    pub arguments: [u64; VYRE_GRAPH_NODE_MAX_ARGUMENTS],
    pub memset_dst: u64,
    pub memset_value: u32,
    pub memset_element_size: u32,
    pub memset_width: u64,
    pub memset_height: u64,
    pub memset_pitch: u64,
}
impl Default for vyre_graph_node_info {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            kind: 0,
            cu_graph_node: 0,
            cu_graph_exec: 0,
            cu_function: 0,
            grid: [0; 3],
            block: [0; 3],
            shared_memory_bytes: 0,
            argument_count: 0,
            arguments: [0; VYRE_GRAPH_NODE_MAX_ARGUMENTS],
            memset_dst: 0,
            memset_value: 0,
            memset_element_size: 0,
            memset_width: 0,
            memset_height: 0,
            memset_pitch: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_kernel_node_update {
    pub struct_size: u32,
    pub flags: u32,
    pub grid: [u32; 3],
    pub reserved0: u32,
    pub scalars: *const u64,
    pub scalar_count: usize,
}
impl Default for vyre_kernel_node_update {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            grid: [0; 3],
            reserved0: 0,
            scalars: ptr::null(),
            scalar_count: 0,
        }
    }
}

/// A capture of caller work into a graph (`vyre_capture_begin`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_capture_desc {
    pub struct_size: u32,
    pub mode: u32,
    pub param_bytes: u64,
}
impl Default for vyre_capture_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            mode: VYRE_CAPTURE_MODE_THREAD_LOCAL,
            param_bytes: 0,
        }
    }
}

/// A loop graph over a body graph (`vyre_graph_loop_create`): the body runs
/// on the device while it leaves the condition word non-zero, at most
/// `max_iterations` times per launch.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_graph_loop_desc {
    pub struct_size: u32,
    pub max_iterations: u32,
    pub condition_buffer: vyre_buffer,
    pub condition_offset: u64,
    /// Optional (`bits` 0: none).
    pub count_buffer: vyre_buffer,
    pub count_offset: u64,
}
impl Default for vyre_graph_loop_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            max_iterations: 1,
            condition_buffer: vyre_buffer { bits: 0 },
            condition_offset: 0,
            count_buffer: vyre_buffer { bits: 0 },
            count_offset: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_sequence_step {
    pub struct_size: u32,
    pub kind: vyre_step_kind,
    pub program: vyre_program,
    pub dispatch: *const vyre_dispatch_desc,
    pub buffer: vyre_buffer,
    pub offset: u64,
    pub bytes: u64,
    pub src_buffer: vyre_buffer,
    pub src_offset: u64,
    pub host_src: *const c_void,
    pub host_dst: *mut c_void,
    pub fill_byte: u32,
    pub reserved0: u32,
}
impl Default for vyre_sequence_step {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            kind: VYRE_STEP_FILL,
            program: vyre_program { bits: 0 },
            dispatch: ptr::null(),
            buffer: vyre_buffer { bits: 0 },
            offset: 0,
            bytes: 0,
            src_buffer: vyre_buffer { bits: 0 },
            src_offset: 0,
            host_src: ptr::null(),
            host_dst: ptr::null_mut(),
            fill_byte: 0,
            reserved0: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_sequence_desc {
    pub struct_size: u32,
    pub repeat_count: u32,
    pub steps: *const vyre_sequence_step,
    pub step_count: usize,
    pub repeat_first: usize,
    pub repeat_step_count: usize,
}
impl Default for vyre_sequence_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            repeat_count: 0,
            steps: ptr::null(),
            step_count: 0,
            repeat_first: 0,
            repeat_step_count: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_egraph_image_desc {
    pub struct_size: u32,
    pub device: vyre_egraph_device,
    pub context: vyre_context,
    pub row_count: u64,
    pub class_count: u64,
    pub child_count: u64,
    pub row_classes: *const u32,
    pub row_ops: *const u32,
    pub child_offsets: *const u32,
    pub child_lengths: *const u32,
    pub row_signatures: *const u32,
    pub children: *const u32,
    pub cpu_threads: u32,
    pub reserved0: u32,
    pub row_capacity: u64,
    pub class_capacity: u64,
    pub child_capacity: u64,
}
impl Default for vyre_egraph_image_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            device: VYRE_EGRAPH_DEVICE_GPU,
            context: vyre_context { bits: 0 },
            row_count: 0,
            class_count: 0,
            child_count: 0,
            row_classes: ptr::null(),
            row_ops: ptr::null(),
            child_offsets: ptr::null(),
            child_lengths: ptr::null(),
            row_signatures: ptr::null(),
            children: ptr::null(),
            cpu_threads: 0,
            reserved0: 0,
            row_capacity: 0,
            class_capacity: 0,
            child_capacity: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_egraph_image_info {
    pub struct_size: u32,
    pub device: vyre_egraph_device,
    pub context: vyre_context,
    pub row_count: u64,
    pub class_count: u64,
    pub child_count: u64,
    pub canonical_class_count: u64,
    pub bytes: u64,
    pub row_capacity: u64,
    pub class_capacity: u64,
    pub child_capacity: u64,
    pub changed_class_count: u64,
}
impl Default for vyre_egraph_image_info {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            device: VYRE_EGRAPH_DEVICE_GPU,
            context: vyre_context { bits: 0 },
            row_count: 0,
            class_count: 0,
            child_count: 0,
            canonical_class_count: 0,
            bytes: 0,
            row_capacity: 0,
            class_capacity: 0,
            child_capacity: 0,
            changed_class_count: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_egraph_rebuild_result {
    pub struct_size: u32,
    pub rounds: u32,
    pub merges: u64,
    pub union_merges: u64,
    pub classes_before: u64,
    pub classes_after: u64,
    pub rows_visited: u64,
    pub device_ns: u64,
    pub wall_ns: u64,
    pub changed_class_count: u64,
    pub full_rounds: u32,
    pub reserved0: u32,
}
impl Default for vyre_egraph_rebuild_result {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            rounds: 0,
            merges: 0,
            union_merges: 0,
            classes_before: 0,
            classes_after: 0,
            rows_visited: 0,
            device_ns: 0,
            wall_ns: 0,
            changed_class_count: 0,
            full_rounds: 0,
            reserved0: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_egraph_rebuild_desc {
    pub struct_size: u32,
    pub flags: u32,
    pub unions: *const u32,
    pub union_count: u64,
    pub canonical_out: *mut u32,
    pub result_out: *mut vyre_egraph_rebuild_result,
    pub max_rounds: u32,
    pub reserved0: u32,
}
impl Default for vyre_egraph_rebuild_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            flags: 0,
            unions: ptr::null(),
            union_count: 0,
            canonical_out: ptr::null_mut(),
            result_out: ptr::null_mut(),
            max_rounds: 0,
            reserved0: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct vyre_egraph_append_desc {
    pub struct_size: u32,
    pub reserved0: u32,
    pub class_count: u64,
    pub row_count: u64,
    pub child_count: u64,
    pub row_classes: *const u32,
    pub row_ops: *const u32,
    pub child_offsets: *const u32,
    pub child_lengths: *const u32,
    pub row_signatures: *const u32,
    pub children: *const u32,
}
impl Default for vyre_egraph_append_desc {
    fn default() -> Self {
        Self {
            struct_size: size32::<Self>(),
            reserved0: 0,
            class_count: 0,
            row_count: 0,
            child_count: 0,
            row_classes: ptr::null(),
            row_ops: ptr::null(),
            child_offsets: ptr::null(),
            child_lengths: ptr::null(),
            row_signatures: ptr::null(),
            children: ptr::null(),
        }
    }
}

// ---------------------------------------------------------------------------
// Functions (in the header's order)
// ---------------------------------------------------------------------------

// Each is a `pub unsafe fn` of the C function's name and signature that calls
// the library loaded at run time (see `load`); the list reads like an extern
// block, and the tests parse it as one.
functions! {
    // Version, status and errors
    pub fn vyre_version() -> u32;
    pub fn vyre_status_name(status: vyre_status) -> *const c_char;
    pub fn vyre_last_error(
        out_status: *mut vyre_status,
        out_cu_result: *mut i32,
        message: *mut c_char,
        message_capacity: usize,
        out_message_length: *mut usize,
    ) -> vyre_status;
    pub fn vyre_last_error_log(
        log: *mut c_char,
        log_capacity: usize,
        out_log_length: *mut usize,
    ) -> vyre_status;

    // Logging
    pub fn vyre_set_log_callback(
        callback: vyre_log_callback,
        user_data: *mut c_void,
        max_level: vyre_log_level,
    ) -> vyre_status;

    // Devices
    pub fn vyre_device_count(out_count: *mut u32) -> vyre_status;
    pub fn vyre_device_info_get(ordinal: u32, out: *mut vyre_device_info) -> vyre_status;
    pub fn vyre_device_can_access_peer(
        ordinal: u32,
        peer_ordinal: u32,
        out_can_access: *mut u32,
    ) -> vyre_status;

    // Contexts
    pub fn vyre_context_create(
        desc: *const vyre_context_desc,
        out: *mut vyre_context,
    ) -> vyre_status;
    pub fn vyre_context_destroy(context: vyre_context) -> vyre_status;
    pub fn vyre_context_device_info(
        context: vyre_context,
        out: *mut vyre_device_info,
    ) -> vyre_status;
    pub fn vyre_context_telemetry(context: vyre_context, out: *mut vyre_telemetry) -> vyre_status;
    pub fn vyre_context_trim(context: vyre_context) -> vyre_status;
    pub fn vyre_context_selftest(context: vyre_context) -> vyre_status;

    // Resident buffers
    pub fn vyre_buffer_alloc(
        context: vyre_context,
        bytes: u64,
        out: *mut vyre_buffer,
    ) -> vyre_status;
    pub fn vyre_buffer_free(buffer: vyre_buffer) -> vyre_status;
    pub fn vyre_buffer_upload(
        buffer: vyre_buffer,
        offset: u64,
        src: *const c_void,
        bytes: u64,
    ) -> vyre_status;
    pub fn vyre_buffer_download(
        buffer: vyre_buffer,
        offset: u64,
        dst: *mut c_void,
        bytes: u64,
    ) -> vyre_status;
    pub fn vyre_buffer_upload_ranges(
        buffer: vyre_buffer,
        ranges: *const vyre_upload_range,
        range_count: usize,
    ) -> vyre_status;
    pub fn vyre_buffer_download_ranges(
        buffer: vyre_buffer,
        ranges: *const vyre_download_range,
        range_count: usize,
    ) -> vyre_status;
    pub fn vyre_buffer_info_get(buffer: vyre_buffer, out: *mut vyre_buffer_info) -> vyre_status;

    // Copies between buffers of any contexts and devices
    pub fn vyre_buffer_copy(desc: *const vyre_buffer_copy_desc) -> vyre_status;
    pub fn vyre_buffer_copy_async(
        desc: *const vyre_buffer_copy_desc,
        out: *mut vyre_pending,
    ) -> vyre_status;

    // Buffers shared between processes
    pub fn vyre_buffer_export_ipc(buffer: vyre_buffer, out: *mut vyre_ipc_handle) -> vyre_status;
    pub fn vyre_buffer_import_ipc(
        context: vyre_context,
        handle: *const vyre_ipc_handle,
        out: *mut vyre_buffer,
    ) -> vyre_status;

    // Interop with other CUDA code in the process
    pub fn vyre_buffer_wrap(
        context: vyre_context,
        desc: *const vyre_buffer_wrap_desc,
        out: *mut vyre_buffer,
    ) -> vyre_status;
    pub fn vyre_context_wait_stream(context: vyre_context, cu_stream: u64) -> vyre_status;
    pub fn vyre_context_signal_stream(context: vyre_context, cu_stream: u64) -> vyre_status;

    // Pinned host memory
    pub fn vyre_host_alloc(context: vyre_context, bytes: u64, out: *mut *mut c_void)
        -> vyre_status;
    pub fn vyre_host_free(pointer: *mut c_void) -> vyre_status;
    pub fn vyre_host_register(
        context: vyre_context,
        pointer: *mut c_void,
        bytes: u64,
    ) -> vyre_status;
    pub fn vyre_host_unregister(pointer: *mut c_void) -> vyre_status;

    // Programs
    pub fn vyre_program_create(
        context: vyre_context,
        desc: *const vyre_program_desc,
        out: *mut vyre_program,
    ) -> vyre_status;
    pub fn vyre_program_destroy(program: vyre_program) -> vyre_status;

    // Dispatch
    pub fn vyre_dispatch(
        program: vyre_program,
        desc: *const vyre_dispatch_desc,
        out_timing: *mut vyre_timing,
    ) -> vyre_status;
    pub fn vyre_dispatch_async(
        program: vyre_program,
        desc: *const vyre_dispatch_desc,
        out: *mut vyre_pending,
    ) -> vyre_status;
    pub fn vyre_pending_poll(pending: vyre_pending) -> vyre_status;
    pub fn vyre_pending_wait(pending: vyre_pending, timeout_ns: u64) -> vyre_status;
    pub fn vyre_pending_timing(pending: vyre_pending, out: *mut vyre_timing) -> vyre_status;
    pub fn vyre_pending_release(pending: vyre_pending) -> vyre_status;

    // Graphs
    pub fn vyre_graph_record(
        program: vyre_program,
        desc: *const vyre_dispatch_desc,
        out: *mut vyre_graph,
    ) -> vyre_status;
    pub fn vyre_graph_replay(
        graph: vyre_graph,
        desc: *const vyre_graph_replay_desc,
        out_timing: *mut vyre_timing,
    ) -> vyre_status;
    pub fn vyre_graph_replay_async(
        graph: vyre_graph,
        desc: *const vyre_graph_replay_desc,
        out: *mut vyre_pending,
    ) -> vyre_status;
    pub fn vyre_graph_launch(
        graph: vyre_graph,
        desc: *const vyre_graph_replay_desc,
        cu_stream: u64,
        out: *mut vyre_pending,
    ) -> vyre_status;
    pub fn vyre_graph_destroy(graph: vyre_graph) -> vyre_status;
    pub fn vyre_graph_info_get(graph: vyre_graph, out: *mut vyre_graph_info) -> vyre_status;
    pub fn vyre_graph_node_kind_get(
        graph: vyre_graph,
        node_index: u64,
        out: *mut vyre_graph_node_kind,
    ) -> vyre_status;
    pub fn vyre_graph_node_info_get(
        graph: vyre_graph,
        node_index: u64,
        out: *mut vyre_graph_node_info,
    ) -> vyre_status;
    pub fn vyre_graph_node_info_set(
        graph: vyre_graph,
        node_index: u64,
        info: *const vyre_graph_node_info,
        flags: u32,
    ) -> vyre_status;
    pub fn vyre_graph_kernel_node_update(
        graph: vyre_graph,
        node_index: u64,
        update: *const vyre_kernel_node_update,
    ) -> vyre_status;

    // Capturing caller work into a graph
    pub fn vyre_capture_begin(
        context: vyre_context,
        desc: *const vyre_capture_desc,
        out_cu_stream: *mut u64,
    ) -> vyre_status;
    pub fn vyre_capture_dispatch(
        program: vyre_program,
        desc: *const vyre_dispatch_desc,
    ) -> vyre_status;
    pub fn vyre_capture_end(context: vyre_context, out: *mut vyre_graph) -> vyre_status;

    // Loops on the device
    pub fn vyre_graph_loop_create(
        body: vyre_graph,
        desc: *const vyre_graph_loop_desc,
        out: *mut vyre_graph,
    ) -> vyre_status;

    // Sequences
    pub fn vyre_sequence_create(
        context: vyre_context,
        desc: *const vyre_sequence_desc,
        out: *mut vyre_sequence,
    ) -> vyre_status;
    pub fn vyre_sequence_run(sequence: vyre_sequence, out_timing: *mut vyre_timing) -> vyre_status;
    pub fn vyre_sequence_record(sequence: vyre_sequence, out: *mut vyre_graph) -> vyre_status;
    pub fn vyre_sequence_destroy(sequence: vyre_sequence) -> vyre_status;

    // E-graph congruence
    pub fn vyre_egraph_image_create(
        desc: *const vyre_egraph_image_desc,
        out: *mut vyre_egraph_image,
    ) -> vyre_status;
    pub fn vyre_egraph_image_destroy(image: vyre_egraph_image) -> vyre_status;
    pub fn vyre_egraph_image_read(
        image: vyre_egraph_image,
        column: vyre_egraph_column,
        first: u64,
        count: u64,
        dst: *mut u32,
    ) -> vyre_status;
    pub fn vyre_egraph_image_write(
        image: vyre_egraph_image,
        column: vyre_egraph_column,
        first: u64,
        count: u64,
        src: *const u32,
    ) -> vyre_status;
    pub fn vyre_egraph_image_info_get(
        image: vyre_egraph_image,
        out: *mut vyre_egraph_image_info,
    ) -> vyre_status;
    pub fn vyre_egraph_pass(
        image: vyre_egraph_image,
        pairs: *mut u32,
        pair_capacity: u64,
        out_pair_count: *mut u64,
    ) -> vyre_status;
    pub fn vyre_egraph_rebuild(
        image: vyre_egraph_image,
        desc: *const vyre_egraph_rebuild_desc,
        out: *mut vyre_egraph_rebuild_result,
    ) -> vyre_status;
    pub fn vyre_egraph_rebuild_async(
        image: vyre_egraph_image,
        desc: *const vyre_egraph_rebuild_desc,
        out: *mut vyre_pending,
    ) -> vyre_status;

    // Growing images
    pub fn vyre_egraph_image_append(
        image: vyre_egraph_image,
        desc: *const vyre_egraph_append_desc,
    ) -> vyre_status;
    pub fn vyre_egraph_changed_read(
        image: vyre_egraph_image,
        pairs: *mut u32,
        pair_capacity: u64,
        out_pair_count: *mut u64,
    ) -> vyre_status;
}
