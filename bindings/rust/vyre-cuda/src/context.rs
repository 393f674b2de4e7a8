//! Devices, contexts and telemetry.

use std::ffi::CStr;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::{Buffer, IpcHandle, PinnedBuffer, Pod, Registration};

/// What the driver reports about a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    pub compute_capability: (u32, u32),
    pub total_memory_bytes: u64,
    pub multiprocessor_count: u32,
    pub max_threads_per_block: u32,
    pub max_block_dim: [u32; 3],
    pub max_grid_dim: [u32; 3],
    pub max_shared_memory_per_block: u32,
    pub warp_size: u32,
    /// Grid-synchronising (cooperative) launches are supported.
    pub cooperative_launch: bool,
    /// `cuDriverGetVersion()`, e.g. 13000 for CUDA 13.0.
    pub driver_version: u32,
    /// Bit p is set when this device can access device p's memory as a peer
    /// (`cuDeviceCanAccessPeer`), so [`Buffer::copy_to`] between them runs
    /// as a peer copy; devices 0 to 63 ([`device_can_access_peer`] answers
    /// for any). Never this device's own bit.
    pub peer_access_mask: u64,
}

impl DeviceInfo {
    fn from_raw(info: &sys::vyre_device_info) -> DeviceInfo {
        // SAFETY: the library NUL-terminates the name inside its 256 bytes;
        // the last byte is forced to 0 regardless.
        let mut name = info.name;
        name[255] = 0;
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        DeviceInfo {
            ordinal: info.ordinal,
            name,
            compute_capability: (info.compute_capability_major, info.compute_capability_minor),
            total_memory_bytes: info.total_memory_bytes,
            multiprocessor_count: info.multiprocessor_count,
            max_threads_per_block: info.max_threads_per_block,
            max_block_dim: info.max_block_dim,
            max_grid_dim: info.max_grid_dim,
            max_shared_memory_per_block: info.max_shared_memory_per_block,
            warp_size: info.warp_size,
            cooperative_launch: info.cooperative_launch != 0,
            driver_version: info.driver_version,
            peer_access_mask: info.peer_access_mask,
        }
    }
}

/// The number of CUDA devices (loads the driver on first use; without one
/// this is [`Status::NoDriver`]).
pub fn device_count() -> Result<u32> {
    crate::error::library_loaded("vyre_device_count")?;
    let mut count = 0u32;
    // SAFETY: a valid out-pointer.
    check(
        unsafe { sys::vyre_device_count(&mut count) },
        "vyre_device_count",
    )?;
    Ok(count)
}

/// Describes device `ordinal`.
pub fn device_info(ordinal: u32) -> Result<DeviceInfo> {
    crate::error::library_loaded("vyre_device_info_get")?;
    let mut info = sys::vyre_device_info::default();
    // SAFETY: struct_size is set; a valid out-pointer.
    check(
        unsafe { sys::vyre_device_info_get(ordinal, &mut info) },
        "vyre_device_info_get",
    )?;
    Ok(DeviceInfo::from_raw(&info))
}

/// Whether device `ordinal` can access device `peer`'s memory as a peer
/// (NVLink or PCIe peer-to-peer, as `cuDeviceCanAccessPeer` says); false for
/// the same device. Copies between two such devices ([`Buffer::copy_to`])
/// run device to device, others through pinned host memory. Either ordinal
/// past [`device_count`] is [`Status::NoDevice`]; loads the driver as
/// [`device_count`] does.
pub fn device_can_access_peer(ordinal: u32, peer: u32) -> Result<bool> {
    crate::error::library_loaded("vyre_device_can_access_peer")?;
    let mut can_access = 0u32;
    // SAFETY: a valid out-pointer.
    check(
        unsafe { sys::vyre_device_can_access_peer(ordinal, peer, &mut can_access) },
        "vyre_device_can_access_peer",
    )?;
    Ok(can_access != 0)
}

/// Options of [`Context::with_options`]; 0 picks the library's default for
/// every field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextOptions {
    pub device_ordinal: u32,
    /// Most bytes the transient device pool keeps cached (0: 1 GiB).
    pub transient_pool_limit_bytes: u64,
    /// Most bytes the pinned staging pool keeps cached (0: 1 GiB).
    pub pinned_pool_limit_bytes: u64,
    /// Bytes per pinned chunk of the staging ring for large pageable copies
    /// (a multiple of 64 KiB, 64 KiB to 256 MiB; 0: 8 MiB).
    pub staging_chunk_bytes: u64,
    /// Chunks in the ring (2 to 64; 0: 4).
    pub staging_chunk_count: u32,
    /// Threads copying between pageable and pinned memory (1 to 64; 0:
    /// min(12, hardware threads)).
    pub staging_threads: u32,
}

/// Counters of a context (cumulative since creation; `*_live` and
/// `*_cached_bytes` are levels).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Telemetry {
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

macro_rules! copy_fields {
    ($from:expr, $to:ident { $($f:ident),* $(,)? }) => {
        $to { $($f: $from.$f),* }
    };
}

impl Telemetry {
    fn from_raw(t: &sys::vyre_telemetry) -> Telemetry {
        copy_fields!(
            t,
            Telemetry {
                h2d_bytes,
                h2d_operations,
                d2h_bytes,
                d2h_operations,
                memset_operations,
                kernel_launches,
                sync_points,
                dispatches,
                transient_pool_hits,
                transient_pool_misses,
                transient_pool_cached_bytes,
                pinned_pool_hits,
                pinned_pool_misses,
                pinned_pool_cached_bytes,
                module_cache_hits,
                module_cache_misses,
                module_loads,
                device_bytes_live,
                pinned_bytes_live,
                live_buffers,
                live_programs,
                live_pendings,
                graph_records,
                graph_replays,
                graph_uploads_skipped,
                graph_launches,
                sequence_runs,
                live_graphs,
                live_sequences,
            }
        )
    }
}

/// The handle of a context, destroyed when the last owner drops it.
pub(crate) struct ContextInner {
    pub(crate) handle: sys::vyre_context,
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: the handle is ours; a failure (a device fault, say) leaves
        // nothing to do: the library still releases what it can.
        let _ = unsafe { sys::vyre_context_destroy(self.handle) };
    }
}

/// A vyre context on one device (its primary CUDA context): buffers,
/// programs and their work, in submission order on one stream.
///
/// Cloning is cheap and shares the context. Every object made from it keeps
/// it alive; it is destroyed (`vyre_context_destroy`) when the last clone and
/// the last such object are dropped.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({:#x})", self.inner.handle.bits)
    }
}

impl Context {
    /// A context on device `ordinal` with default options.
    pub fn new(ordinal: u32) -> Result<Context> {
        Context::with_options(&ContextOptions {
            device_ordinal: ordinal,
            ..Default::default()
        })
    }

    pub fn with_options(options: &ContextOptions) -> Result<Context> {
        crate::error::library_loaded("vyre_context_create")?;
        let (major, minor, patch) = crate::version();
        if major != crate::VERSION_MAJOR {
            return Err(Error::usage(
                Status::InvalidState,
                "Context::new",
                format!(
                    "the loaded libvyre_cuda is version {major}.{minor}.{patch}, these bindings \
                     need major version {}. Fix: build vyre-cuda-sys against the library it \
                     runs with.",
                    crate::VERSION_MAJOR
                ),
            ));
        }
        let desc = sys::vyre_context_desc {
            device_ordinal: options.device_ordinal,
            transient_pool_limit_bytes: options.transient_pool_limit_bytes,
            pinned_pool_limit_bytes: options.pinned_pool_limit_bytes,
            staging_chunk_bytes: options.staging_chunk_bytes,
            staging_chunk_count: options.staging_chunk_count,
            staging_threads: options.staging_threads,
            ..Default::default()
        };
        let mut handle = sys::vyre_context::default();
        // SAFETY: a valid descriptor and out-pointer.
        check(
            unsafe { sys::vyre_context_create(&desc, &mut handle) },
            "vyre_context_create",
        )?;
        Ok(Context {
            inner: Arc::new(ContextInner { handle }),
        })
    }

    pub(crate) fn from_inner(inner: &Arc<ContextInner>) -> Context {
        Context {
            inner: Arc::clone(inner),
        }
    }

    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_context {
        self.inner.handle
    }

    /// Describes the context's device (no driver query).
    pub fn device_info(&self) -> Result<DeviceInfo> {
        let mut info = sys::vyre_device_info::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_context_device_info(self.raw(), &mut info) },
            "vyre_context_device_info",
        )?;
        Ok(DeviceInfo::from_raw(&info))
    }

    pub fn telemetry(&self) -> Result<Telemetry> {
        let mut t = sys::vyre_telemetry::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_context_telemetry(self.raw(), &mut t) },
            "vyre_context_telemetry",
        )?;
        Ok(Telemetry::from_raw(&t))
    }

    /// Releases the memory the transient and pinned pools keep cached.
    pub fn trim(&self) -> Result<()> {
        // SAFETY: a handle we own.
        check(
            unsafe { sys::vyre_context_trim(self.raw()) },
            "vyre_context_trim",
        )
    }

    /// Runs the library's self-test (a vector add, every element checked).
    pub fn selftest(&self) -> Result<()> {
        // SAFETY: a handle we own.
        check(
            unsafe { sys::vyre_context_selftest(self.raw()) },
            "vyre_context_selftest",
        )
    }

    /// Work this context enqueues from now on starts after the work already
    /// enqueued on `cu_stream`, a `CUstream` of the same device (or
    /// [`CU_STREAM_LEGACY`](crate::CU_STREAM_LEGACY),
    /// [`CU_STREAM_PER_THREAD`](crate::CU_STREAM_PER_THREAD); 0 is refused).
    /// The host does not block (`vyre_context_wait_stream`).
    pub fn wait_stream(&self, cu_stream: u64) -> Result<()> {
        // SAFETY: a handle we own; the driver validates the stream.
        check(
            unsafe { sys::vyre_context_wait_stream(self.raw(), cu_stream) },
            "vyre_context_wait_stream",
        )
    }

    /// Work enqueued on `cu_stream` from now on starts after the work this
    /// context has already enqueued (`vyre_context_signal_stream`; streams
    /// as for [`Context::wait_stream`]).
    pub fn signal_stream(&self, cu_stream: u64) -> Result<()> {
        // SAFETY: a handle we own; the driver validates the stream.
        check(
            unsafe { sys::vyre_context_signal_stream(self.raw(), cu_stream) },
            "vyre_context_signal_stream",
        )
    }

    /// `bytes` (> 0) of device memory, uninitialised.
    pub fn alloc(&self, bytes: u64) -> Result<Buffer> {
        Buffer::alloc(self, bytes)
    }

    /// The buffer another process exported ([`Buffer::export_ipc`]), mapped
    /// into this context's device (`vyre_buffer_import_ipc`): a [`Buffer`]
    /// over the same device memory, usable wherever a buffer is, whose size
    /// is the exported buffer's and whose [`info`](Buffer::info) says
    /// `borrowed` and `imported`. Dropping it (or the context) closes the
    /// mapping once pending work that uses it is done, and never frees the
    /// exporter's memory; importing one handle twice in a process maps it
    /// once, and each buffer holds the mapping.
    ///
    /// The handle names the device by UUID, so this process may see it under
    /// another ordinal (`CUDA_VISIBLE_DEVICES`): import into a context on
    /// that same device. Refused ([`Status::InvalidArgument`](crate::Status::InvalidArgument),
    /// with a Fix, never a crash): bytes that are not a handle (corrupted or
    /// cut short); a handle this process exported (use the buffer itself);
    /// a handle whose buffer was freed or whose process exited; a context
    /// on another device than the handle's.
    pub fn import_ipc(&self, handle: &IpcHandle) -> Result<Buffer> {
        Buffer::import_ipc(self, handle)
    }

    /// A device buffer holding a copy of `data`.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<Buffer> {
        let buffer = Buffer::alloc(self, crate::byte_len(data))?;
        buffer.upload(0, data)?;
        Ok(buffer)
    }

    /// `bytes` (> 0) of page-locked host memory (`vyre_host_alloc`), zeroed.
    pub fn alloc_pinned(&self, bytes: usize) -> Result<PinnedBuffer> {
        PinnedBuffer::alloc(self, bytes)
    }

    /// Page-locks `data` (`vyre_host_register`) until the guard is dropped.
    pub fn register<'a, T: Pod>(&self, data: &'a mut [T]) -> Result<Registration<'a, T>> {
        Registration::new(self, data)
    }
}
