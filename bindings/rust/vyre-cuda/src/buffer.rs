//! Resident device buffers.

use std::marker::PhantomData;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Result};
use crate::{byte_len, Context, Pending, Pod};

/// Device memory owned by a [`Context`]; freed on drop (a dispatch still
/// using it keeps it until that dispatch completes). A buffer from
/// [`Buffer::wrap`] borrows memory other CUDA code owns instead, and one from
/// [`Context::import_ipc`] maps memory another process owns: dropping either
/// releases the handle (and closes the mapping) only.
pub struct Buffer {
    pub(crate) handle: sys::vyre_buffer,
    bytes: u64,
    pub(crate) ctx: Arc<ContextInner>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({:#x}, {} bytes)", self.handle.bits, self.bytes)
    }
}

/// What [`Buffer::info`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    pub bytes: u64,
    /// The raw CUdeviceptr, for interop with other CUDA code in the process
    /// (valid while the buffer lives).
    pub device_pointer: u64,
    /// The memory belongs to other CUDA code ([`Buffer::wrap`]), or to
    /// another process ([`Context::import_ipc`]):
    /// `VYRE_BUFFER_INFO_FLAG_BORROWED`.
    pub borrowed: bool,
    /// The buffer maps memory another process exported
    /// ([`Context::import_ipc`]; `borrowed` is set too):
    /// `VYRE_BUFFER_INFO_FLAG_IMPORTED`.
    pub imported: bool,
}

/// A buffer exported for other processes ([`Buffer::export_ipc`]): the
/// [`IpcHandle::LEN`] (128) opaque bytes of `vyre_ipc_handle`, which the
/// caller sends to another process of the same machine over any channel (a
/// pipe, a socket, a file, MPI; [`to_hex`](Self::to_hex) gives text), where
/// [`Context::import_ipc`] maps the same device memory. Valid until the
/// exporter frees the buffer or exits.
///
/// Mechanism: CUDA's IPC memory handles (`cuIpcGetMemHandle` /
/// `cuIpcOpenMemHandle`); not available on Windows WDDM or WSL, where the
/// driver refuses it.
///
/// ```no_run
/// # fn main() -> vyre_cuda::Result<()> {
/// use vyre_cuda::{Context, IpcHandle};
/// // The exporting process: keeps `shared` alive until every importer has
/// // dropped its import.
/// let ctx = Context::new(0)?;
/// let shared = ctx.upload(&[1u32, 2, 3, 4])?;
/// let text = shared.export_ipc()?.to_hex(); // send it to the other process
///
/// // The importing process (another one; importing in the exporting
/// // process is refused):
/// let ctx = Context::new(0)?;
/// let import = ctx.import_ipc(&IpcHandle::from_hex(&text)?)?;
/// assert_eq!(import.to_vec::<u32>()?, [1, 2, 3, 4]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcHandle(pub [u8; IpcHandle::LEN]);

impl IpcHandle {
    /// The size of a handle in bytes (`VYRE_IPC_HANDLE_BYTES`).
    pub const LEN: usize = sys::VYRE_IPC_HANDLE_BYTES;

    /// The handle's bytes, to send to another process.
    pub fn as_bytes(&self) -> &[u8; IpcHandle::LEN] {
        &self.0
    }

    /// The handle of `bytes` received from the exporting process: exactly
    /// [`IpcHandle::LEN`] bytes, else [`Status::InvalidArgument`](crate::Status::InvalidArgument).
    /// The bytes themselves are checked by [`Context::import_ipc`].
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcHandle> {
        let array: [u8; IpcHandle::LEN] = bytes.try_into().map_err(|_| {
            crate::Error::usage(
                crate::Status::InvalidArgument,
                "IpcHandle::from_bytes",
                format!(
                    "an IPC handle is {} bytes, not {}. Fix: pass the bytes of \
                     Buffer::export_ipc as they are, whole.",
                    IpcHandle::LEN,
                    bytes.len()
                ),
            )
        })?;
        Ok(IpcHandle(array))
    }

    /// The handle as 256 lowercase hexadecimal digits (for a command line,
    /// an environment variable or a line of text).
    pub fn to_hex(&self) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(2 * IpcHandle::LEN);
        for b in self.0 {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// The handle of [`to_hex`](Self::to_hex)'s text (either case):
    /// [`Status::InvalidArgument`](crate::Status::InvalidArgument) for
    /// anything but 256 hexadecimal digits.
    pub fn from_hex(text: &str) -> Result<IpcHandle> {
        let text = text.trim();
        let digits = text.as_bytes();
        let bad = || {
            crate::Error::usage(
                crate::Status::InvalidArgument,
                "IpcHandle::from_hex",
                format!(
                    "{:?} ({} characters) is not an IPC handle's {} hexadecimal digits. \
                     Fix: pass the text of IpcHandle::to_hex as it is, whole.",
                    text.chars().take(40).collect::<String>(),
                    text.chars().count(),
                    2 * IpcHandle::LEN
                ),
            )
        };
        if digits.len() != 2 * IpcHandle::LEN || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad());
        }
        let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
        let mut out = [0u8; IpcHandle::LEN];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            out[i] = digit(pair[0]) << 4 | digit(pair[1]);
        }
        Ok(IpcHandle(out))
    }

    /// The library's struct.
    pub fn raw(&self) -> sys::vyre_ipc_handle {
        sys::vyre_ipc_handle { bytes: self.0 }
    }
}

impl std::fmt::Debug for IpcHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IpcHandle({})", self.to_hex())
    }
}

impl From<[u8; IpcHandle::LEN]> for IpcHandle {
    fn from(bytes: [u8; IpcHandle::LEN]) -> IpcHandle {
        IpcHandle(bytes)
    }
}

impl From<sys::vyre_ipc_handle> for IpcHandle {
    fn from(raw: sys::vyre_ipc_handle) -> IpcHandle {
        IpcHandle(raw.bytes)
    }
}

impl AsRef<[u8]> for IpcHandle {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl TryFrom<&[u8]> for IpcHandle {
    type Error = crate::Error;
    fn try_from(bytes: &[u8]) -> Result<IpcHandle> {
        IpcHandle::from_bytes(bytes)
    }
}

/// A byte range of a buffer (length 0: to the end), bound to a dispatch.
#[derive(Clone, Copy, Debug)]
pub struct BufferRange<'a> {
    pub(crate) buffer: &'a Buffer,
    pub(crate) offset: u64,
    pub(crate) length: u64,
}

/// One range of [`Buffer::upload_ranges`]: `src` copied to `offset`.
#[derive(Clone, Copy, Debug)]
pub struct UploadRange<'a> {
    raw: sys::vyre_upload_range,
    _src: PhantomData<&'a [u8]>,
}

impl<'a> UploadRange<'a> {
    pub fn new<T: Pod>(offset: u64, src: &'a [T]) -> UploadRange<'a> {
        UploadRange {
            raw: sys::vyre_upload_range {
                offset,
                bytes: byte_len(src),
                src: src.as_ptr().cast(),
            },
            _src: PhantomData,
        }
    }
}

/// One range of [`Buffer::download_ranges`]: `dst.len()` elements from `offset`.
#[derive(Debug)]
pub struct DownloadRange<'a> {
    raw: sys::vyre_download_range,
    _dst: PhantomData<&'a mut [u8]>,
}

impl<'a> DownloadRange<'a> {
    pub fn new<T: Pod>(offset: u64, dst: &'a mut [T]) -> DownloadRange<'a> {
        DownloadRange {
            raw: sys::vyre_download_range {
                offset,
                bytes: byte_len(dst),
                dst: dst.as_mut_ptr().cast(),
            },
            _dst: PhantomData,
        }
    }
}

/// A copy of a byte range from one buffer to another (`vyre_buffer_copy`),
/// whatever their contexts and devices: on one device a device-to-device
/// copy; between devices that can access each other as peers
/// ([`device_can_access_peer`](crate::device_can_access_peer)) a peer copy
/// (the first one enables peer access between the devices for the process);
/// between others, or when [`staged`](Self::staged), through pinned host
/// memory. The data never pass through the caller.
///
/// The copy starts after all work enqueued on both contexts before it, and
/// work either context enqueues afterwards starts after it. Refused: a range
/// past either buffer ([`Status::OutOfRange`](crate::Status::OutOfRange));
/// source and destination ranges that overlap in device memory (one buffer,
/// or two that wrap the same memory: [`Status::InvalidArgument`](crate::Status::InvalidArgument);
/// copy through a second buffer). 0 bytes copy nothing (the offsets are
/// still checked). [`Buffer::copy_to`] and [`Buffer::copy_to_async`] are
/// the short forms.
///
/// ```no_run
/// # fn main() -> vyre_cuda::Result<()> {
/// use vyre_cuda::{BufferCopy, Context};
/// let (gpu0, gpu1) = (Context::new(0)?, Context::new(1)?);
/// let src = gpu0.upload(&[1u32, 2, 3, 4])?;
/// let dst = gpu1.alloc(16)?;
/// BufferCopy::new(&src, &dst, 8).src_offset(8).run()?; // dst[0..8] = src[8..16]
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BufferCopy<'a> {
    _src: PhantomData<&'a Buffer>,
    dst: &'a Buffer,
    raw: sys::vyre_buffer_copy_desc,
}

impl<'a> BufferCopy<'a> {
    /// `bytes` from the start of `src` to the start of `dst`.
    pub fn new(src: &'a Buffer, dst: &'a Buffer, bytes: u64) -> BufferCopy<'a> {
        BufferCopy {
            _src: PhantomData,
            dst,
            raw: sys::vyre_buffer_copy_desc {
                src: src.handle,
                dst: dst.handle,
                bytes,
                ..Default::default()
            },
        }
    }

    /// The first byte of `src` read.
    pub fn src_offset(mut self, offset: u64) -> Self {
        self.raw.src_offset = offset;
        self
    }

    /// The first byte of `dst` written.
    pub fn dst_offset(mut self, offset: u64) -> Self {
        self.raw.dst_offset = offset;
        self
    }

    /// Between two devices, copy through pinned host memory even when they
    /// are peers (`VYRE_BUFFER_COPY_FLAG_STAGED`; to compare the paths, or
    /// to leave peer mappings alone). Ignored on one device.
    pub fn staged(mut self, on: bool) -> Self {
        if on {
            self.raw.flags |= sys::VYRE_BUFFER_COPY_FLAG_STAGED;
        } else {
            self.raw.flags &= !sys::VYRE_BUFFER_COPY_FLAG_STAGED;
        }
        self
    }

    /// The descriptor passed to the library.
    pub fn raw(&self) -> sys::vyre_buffer_copy_desc {
        self.raw
    }

    /// Copies and waits for the copy (`vyre_buffer_copy`).
    pub fn run(&self) -> Result<()> {
        // SAFETY: a descriptor of struct_size set naming two live buffers
        // (borrowed for 'a).
        check(
            unsafe { sys::vyre_buffer_copy(&self.raw) },
            "vyre_buffer_copy",
        )
    }

    /// Enqueues the copy and returns at once (`vyre_buffer_copy_async`).
    /// The [`Pending`] belongs to the destination's context (it keeps that
    /// context alive) and borrows no host memory; its timing has wall,
    /// enqueue and wait times, `device_ns` 0. Dropping either buffer, or
    /// the source's context, before the copy completes is safe: the library
    /// keeps the memory until the copy is seen to complete.
    pub fn run_async(&self) -> Result<Pending<'static>> {
        let mut handle = sys::vyre_pending::default();
        // SAFETY: as for run; a valid out-pointer.
        check(
            unsafe { sys::vyre_buffer_copy_async(&self.raw, &mut handle) },
            "vyre_buffer_copy_async",
        )?;
        Ok(Pending::new(handle, Some(Arc::clone(&self.dst.ctx)), &[]))
    }
}

// SAFETY: the ranges only carry borrows of Pod slices (Send + Sync).
unsafe impl Send for UploadRange<'_> {}
unsafe impl Sync for UploadRange<'_> {}
unsafe impl Send for DownloadRange<'_> {}
unsafe impl Sync for DownloadRange<'_> {}

impl Buffer {
    pub(crate) fn alloc(ctx: &Context, bytes: u64) -> Result<Buffer> {
        let mut handle = sys::vyre_buffer::default();
        // SAFETY: a valid out-pointer.
        check(
            unsafe { sys::vyre_buffer_alloc(ctx.raw(), bytes, &mut handle) },
            "vyre_buffer_alloc",
        )?;
        Ok(Buffer {
            handle,
            bytes,
            ctx: Arc::clone(&ctx.inner),
        })
    }

    /// A buffer over `bytes` (> 0) of device memory at `device_pointer` that
    /// other CUDA code in the process allocated (`cudaMalloc`, `cuMemAlloc`,
    /// a CuPy array's or a PyTorch tensor's data) on `ctx`'s device, in its
    /// primary context (`vyre_buffer_wrap`). The library checks with the
    /// driver that the range is device (or managed) memory of that device
    /// inside one allocation; it never frees the memory. Order work of other
    /// streams on it with [`Context::wait_stream`] and
    /// [`Context::signal_stream`].
    ///
    /// # Safety
    ///
    /// The memory must stay allocated (and not be reused for something
    /// else) until this buffer is dropped and the dispatches, graphs and
    /// sequences that use it have completed or been dropped: the library
    /// reads and writes it until then.
    pub unsafe fn wrap(ctx: &Context, device_pointer: u64, bytes: u64) -> Result<Buffer> {
        let desc = sys::vyre_buffer_wrap_desc {
            device_pointer,
            bytes,
            ..Default::default()
        };
        let mut handle = sys::vyre_buffer::default();
        // SAFETY: a valid descriptor and out-pointer; the caller vouches for
        // the memory's lifetime.
        check(
            unsafe { sys::vyre_buffer_wrap(ctx.raw(), &desc, &mut handle) },
            "vyre_buffer_wrap",
        )?;
        Ok(Buffer {
            handle,
            bytes,
            ctx: Arc::clone(&ctx.inner),
        })
    }

    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_buffer {
        self.handle
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    pub fn info(&self) -> Result<BufferInfo> {
        let mut info = sys::vyre_buffer_info::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_buffer_info_get(self.handle, &mut info) },
            "vyre_buffer_info_get",
        )?;
        Ok(BufferInfo {
            bytes: info.bytes,
            device_pointer: info.device_pointer,
            borrowed: info.flags & sys::VYRE_BUFFER_INFO_FLAG_BORROWED != 0,
            imported: info.flags & sys::VYRE_BUFFER_INFO_FLAG_IMPORTED != 0,
        })
    }

    /// The buffer's IPC handle (`vyre_buffer_export_ipc`), for
    /// [`Context::import_ipc`] in another process of this machine, which then
    /// reads and writes the same device memory; exporting again gives the
    /// same bytes. See [`IpcHandle`].
    ///
    /// Lifetime (CUDA's rule): keep this buffer alive until every importer
    /// has dropped its import; memory freed while mapped elsewhere is
    /// undefined to read there, and importing a handle of a freed buffer, or
    /// of an exited process, is refused. Ordering across processes is the
    /// caller's: writes are visible to the other process after the writer
    /// has waited for them ([`Buffer::upload`] and dispatches return after
    /// their work; wait on a [`Pending`]) and told it so over its channel.
    ///
    /// Refused ([`Status::InvalidArgument`](crate::Status::InvalidArgument),
    /// with a Fix): a buffer that is itself an import (export from the
    /// process that allocated it), or wrapped memory CUDA cannot share (a
    /// stream-ordered pool's, for example).
    pub fn export_ipc(&self) -> Result<IpcHandle> {
        let mut raw = sys::vyre_ipc_handle::default();
        // SAFETY: a valid out-pointer.
        check(
            unsafe { sys::vyre_buffer_export_ipc(self.handle, &mut raw) },
            "vyre_buffer_export_ipc",
        )?;
        Ok(IpcHandle(raw.bytes))
    }

    /// Maps the buffer another process exported (`vyre_buffer_import_ipc`);
    /// [`Context::import_ipc`] is the usual spelling.
    pub(crate) fn import_ipc(ctx: &Context, handle: &IpcHandle) -> Result<Buffer> {
        let raw = handle.raw();
        let mut out = sys::vyre_buffer::default();
        // SAFETY: a valid handle struct and out-pointer.
        check(
            unsafe { sys::vyre_buffer_import_ipc(ctx.raw(), &raw, &mut out) },
            "vyre_buffer_import_ipc",
        )?;
        let mut buffer = Buffer {
            handle: out,
            bytes: 0,
            ctx: Arc::clone(&ctx.inner),
        };
        // Its size is the exported buffer's; dropping `buffer` on an error
        // closes the mapping.
        buffer.bytes = buffer.info()?.bytes;
        Ok(buffer)
    }

    /// The whole buffer, as a dispatch binding.
    pub fn whole(&self) -> BufferRange<'_> {
        BufferRange {
            buffer: self,
            offset: 0,
            length: 0,
        }
    }

    /// Bytes [offset, offset + length) (length 0: to the end), as a binding.
    pub fn range(&self, offset: u64, length: u64) -> BufferRange<'_> {
        BufferRange {
            buffer: self,
            offset,
            length,
        }
    }

    /// Copies `src` into the buffer at byte `offset` and waits.
    pub fn upload<T: Pod>(&self, offset: u64, src: &[T]) -> Result<()> {
        // SAFETY: `src` is readable for its byte length during the call.
        check(
            unsafe {
                sys::vyre_buffer_upload(self.handle, offset, src.as_ptr().cast(), byte_len(src))
            },
            "vyre_buffer_upload",
        )
    }

    /// Fills `dst` from the buffer at byte `offset` and waits.
    pub fn download<T: Pod>(&self, offset: u64, dst: &mut [T]) -> Result<()> {
        let bytes = byte_len(dst);
        // SAFETY: `dst` is writable for its byte length during the call, and
        // any bytes are a valid T (Pod).
        check(
            unsafe {
                sys::vyre_buffer_download(self.handle, offset, dst.as_mut_ptr().cast(), bytes)
            },
            "vyre_buffer_download",
        )
    }

    /// The whole buffer as a vector of T (its size must be a multiple of T's).
    pub fn to_vec<T: Pod + Default>(&self) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>() as u64;
        if size == 0 || self.bytes % size != 0 {
            return Err(crate::Error::usage(
                crate::Status::InvalidArgument,
                "Buffer::to_vec",
                format!(
                    "the buffer's {} bytes are not a whole number of {}-byte elements. Fix: \
                     download into a slice with Buffer::download.",
                    self.bytes, size
                ),
            ));
        }
        let mut out = vec![T::default(); (self.bytes / size) as usize];
        self.download(0, &mut out)?;
        Ok(out)
    }

    /// Uploads many ranges with one staged copy and one synchronisation;
    /// every range is checked before anything is copied.
    pub fn upload_ranges(&self, ranges: &[UploadRange<'_>]) -> Result<()> {
        let raw: Vec<sys::vyre_upload_range> = ranges.iter().map(|r| r.raw).collect();
        // SAFETY: each range's source is borrowed for the call.
        check(
            unsafe { sys::vyre_buffer_upload_ranges(self.handle, raw.as_ptr(), raw.len()) },
            "vyre_buffer_upload_ranges",
        )
    }

    /// Downloads many ranges with one synchronisation.
    pub fn download_ranges(&self, ranges: &mut [DownloadRange<'_>]) -> Result<()> {
        let raw: Vec<sys::vyre_download_range> = ranges.iter().map(|r| r.raw).collect();
        // SAFETY: each range's destination is borrowed mutably for the call.
        check(
            unsafe { sys::vyre_buffer_download_ranges(self.handle, raw.as_ptr(), raw.len()) },
            "vyre_buffer_download_ranges",
        )
    }

    /// Copies `bytes` of this buffer at `src_offset` to `dst` at
    /// `dst_offset`, and waits: `dst` may belong to any context, on any
    /// device ([`BufferCopy`] says how, and what is refused).
    pub fn copy_to(
        &self,
        dst: &Buffer,
        src_offset: u64,
        dst_offset: u64,
        bytes: u64,
    ) -> Result<()> {
        BufferCopy::new(self, dst, bytes)
            .src_offset(src_offset)
            .dst_offset(dst_offset)
            .run()
    }

    /// As [`copy_to`](Self::copy_to), returning at once with the copy
    /// pending ([`BufferCopy::run_async`]).
    pub fn copy_to_async(
        &self,
        dst: &Buffer,
        src_offset: u64,
        dst_offset: u64,
        bytes: u64,
    ) -> Result<Pending<'static>> {
        BufferCopy::new(self, dst, bytes)
            .src_offset(src_offset)
            .dst_offset(dst_offset)
            .run_async()
    }

    /// Frees the buffer now and returns the library's answer.
    pub fn free(mut self) -> Result<()> {
        let handle = std::mem::take(&mut self.handle);
        // SAFETY: the handle is ours and freed once.
        check(unsafe { sys::vyre_buffer_free(handle) }, "vyre_buffer_free")
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.handle.bits != 0 {
            // SAFETY: the handle is ours; errors are ignored in drop.
            let _ = unsafe { sys::vyre_buffer_free(self.handle) };
        }
    }
}
