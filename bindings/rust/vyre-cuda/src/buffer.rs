//! Resident device buffers.

use std::marker::PhantomData;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Result};
use crate::{byte_len, Context, Pod};

/// Device memory owned by a [`Context`]; freed on drop (a dispatch still
/// using it keeps it until that dispatch completes). A buffer from
/// [`Buffer::wrap`] borrows memory other CUDA code owns instead: dropping it
/// releases the handle only.
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
    /// The memory belongs to other CUDA code ([`Buffer::wrap`]).
    pub borrowed: bool,
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
        })
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
