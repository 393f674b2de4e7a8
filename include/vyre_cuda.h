/*
 * vyre_cuda.h — the public C interface of libvyre_cuda.
 *
 * vyre-cuda runs GPU kernels through the CUDA driver API without the caller
 * linking CUDA: contexts, resident device buffers, programs (PTX, cubin/fatbin
 * or CUDA C++ through NVRTC) and dispatch over host or resident data.
 *
 * Rules that hold for every function in this header:
 *  - Every function returns a vyre_status; VYRE_STATUS_OK (0) is success.
 *    The details of a failure (status, CUresult, and a message of the form
 *    "<what failed>: <why>. Fix: <what to do>.", whose first line fits in
 *    1 KiB) are kept per thread and read with vyre_last_error(), a compile
 *    log with vyre_last_error_log(). Every function returning vyre_status,
 *    except those two, clears them on entry.
 *  - Objects are named by handles: structs holding one uint64_t that never
 *    changes for the object's life. 0 means "none". Destroyed, forged and
 *    wrong-type handles are reported (STALE_HANDLE / INVALID_HANDLE), never
 *    undefined behaviour. No handle value is ever issued twice in a process;
 *    once a type's handle space is used up, creation gives LIMIT_EXCEEDED.
 *  - Descriptors begin with uint32_t struct_size; initialise them with the
 *    matching VYRE_*_INIT macro. A struct smaller than the first release's
 *    (version 1) is refused with UNSUPPORTED_STRUCT_SIZE; one between that
 *    and this header's size is an older caller's, whose missing fields read
 *    as zero; a struct larger than this library knows is accepted only if its
 *    unknown tail is all zero bytes. Output structs (info, telemetry,
 *    timing, results) must cover version 1; the library writes only the
 *    fields the caller's struct_size holds.
 *  - The last error (vyre_last_error) is per thread. Every function that
 *    returns a vyre_status clears it on entry and sets it when it fails,
 *    except vyre_last_error and vyre_last_error_log, which read it;
 *    vyre_version and vyre_status_name leave it alone. Each of those
 *    status-returning functions is also an NVTX range named after itself.
 *  - Release calls (vyre_context_destroy, vyre_buffer_free,
 *    vyre_program_destroy, vyre_pending_release, vyre_graph_destroy,
 *    vyre_sequence_destroy, vyre_egraph_image_destroy, vyre_host_free,
 *    vyre_host_unregister) release everything their object owns and only
 *    then return the first device error they met: VYRE_STATUS_DEVICE_FAULT
 *    when the object's device faulted (before or during the release), else
 *    the status of a driver release call that failed (its CUresult attached);
 *    for a pending never waited on, the error its work met. Such an error's
 *    message says what was released ("<call>: the buffer is freed, but
 *    ..."), and the handle is gone (STALE_HANDLE afterwards). Only a call
 *    that refuses the handle or its arguments (a bad or stale handle or
 *    pointer, or vyre_host_unregister while a dispatch still uses the range)
 *    leaves the object alone.
 *  - No function aborts or lets a C++ exception escape, whatever its input.
 *  - All functions are thread-safe. A context may be used from many threads;
 *    its work runs in submission order on one CUDA stream.
 */
#ifndef VYRE_CUDA_H_
#define VYRE_CUDA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(VYRE_CUDA_BUILDING_LIBRARY)
#define VYRE_API __attribute__((visibility("default")))
#else
#define VYRE_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define VYRE_CUDA_VERSION_MAJOR 0
#define VYRE_CUDA_VERSION_MINOR 1
#define VYRE_CUDA_VERSION_PATCH 0
/** Packs a version as (major << 22) | (minor << 12) | patch. */
#define VYRE_MAKE_VERSION(major, minor, patch) \
  ((((uint32_t)(major)) << 22) | (((uint32_t)(minor)) << 12) | ((uint32_t)(patch)))
#define VYRE_CUDA_VERSION                                      \
  VYRE_MAKE_VERSION(VYRE_CUDA_VERSION_MAJOR, VYRE_CUDA_VERSION_MINOR, \
                    VYRE_CUDA_VERSION_PATCH)
#define VYRE_VERSION_MAJOR_OF(v) ((uint32_t)(v) >> 22)
#define VYRE_VERSION_MINOR_OF(v) (((uint32_t)(v) >> 12) & 0x3FFu)
#define VYRE_VERSION_PATCH_OF(v) ((uint32_t)(v) & 0xFFFu)

/** The version of the loaded library, packed as VYRE_MAKE_VERSION does.
 *  Compare its major number with VYRE_CUDA_VERSION_MAJOR to detect a header
 *  and library mismatch. */
VYRE_API uint32_t vyre_version(void);

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum vyre_status {
  VYRE_STATUS_OK = 0,
  /** An argument is NULL, zero, out of its domain or inconsistent. */
  VYRE_STATUS_INVALID_ARGUMENT = 1,
  /** The handle is 0, forged, or names an object of another type. */
  VYRE_STATUS_INVALID_HANDLE = 2,
  /** The handle named an object that has since been destroyed. */
  VYRE_STATUS_STALE_HANDLE = 3,
  /** A descriptor's struct_size is too small, or larger with a non-zero tail. */
  VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE = 4,
  /** An offset/length range falls outside a buffer, or arithmetic overflowed. */
  VYRE_STATUS_OUT_OF_RANGE = 5,
  /** No usable CUDA driver: libcuda.so.1 could not be loaded or lacks
   *  required entry points, is the CUDA toolkit's link stub
   *  (CUDA_ERROR_STUB_LIBRARY), does not match the NVIDIA kernel module
   *  (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH), or cannot initialise. */
  VYRE_STATUS_NO_DRIVER = 6,
  /** The driver loaded but has no usable CUDA device: none, not that
   *  ordinal, or one it cannot use now (held by another process, a
   *  forward-compatibility driver that does not support it, MPS or the
   *  system not ready). */
  VYRE_STATUS_NO_DEVICE = 7,
  /** The installed driver is older than this library needs (CUDA 12.0). */
  VYRE_STATUS_DRIVER_TOO_OLD = 8,
  /** NVRTC is needed (CUDA C++ program) but could not be loaded. */
  VYRE_STATUS_NVRTC_UNAVAILABLE = 9,
  /** Device or pinned host memory is exhausted. */
  VYRE_STATUS_OUT_OF_MEMORY = 10,
  /** PTX JIT or NVRTC compilation failed; the message carries the log. */
  VYRE_STATUS_COMPILE_FAILED = 11,
  /** The kernel entry name is not in the module. */
  VYRE_STATUS_ENTRY_NOT_FOUND = 12,
  /** A launch exceeds a device limit (block size, shared memory, residency). */
  VYRE_STATUS_LIMIT_EXCEEDED = 13,
  /** The device ran the work but its results are wrong: returned by
   *  vyre_context_selftest when its checked kernel's output differs from the
   *  expected sum (the device, its driver or the JIT computed it wrongly).
   *  Device faults (illegal address, launch failure, hardware error) are
   *  VYRE_STATUS_DEVICE_FAULT. */
  VYRE_STATUS_LAUNCH_FAILED = 14,
  /** The wait ended before the work completed; wait again later. */
  VYRE_STATUS_TIMEOUT = 15,
  /** Poll: the work has not completed yet. */
  VYRE_STATUS_NOT_READY = 16,
  /** The object is in a state that forbids the call (e.g. waited twice). */
  VYRE_STATUS_INVALID_STATE = 17,
  /** The CUDA driver returned an error not covered above (see cu_result). */
  VYRE_STATUS_DRIVER_ERROR = 18,
  /** A bug in vyre-cuda; please report the message. */
  VYRE_STATUS_INTERNAL = 19,
  /** A replay's inputs do not have the shape the graph was recorded with
   *  (binding count, source, or byte lengths); record the graph again. */
  VYRE_STATUS_SHAPE_MISMATCH = 20,
  /** The device faulted (illegal address, launch failure, trap, hardware
   *  error) and CUDA refuses all further work on the context: the failing
   *  call and every later call on any vyre context of that device, and on
   *  its objects, return this. Destroy every vyre context on that device
   *  (vyre_context_destroy) and create a new one: when the last one is
   *  destroyed the library resets the device (cuDevicePrimaryCtxReset), so
   *  the new one works. Frees, releases and destroys still release
   *  everything, then return this status too (the handle is gone; the
   *  message of the context destroy says what is left to do). See the
   *  README, "Device faults", for what the reset does to other CUDA users in
   *  the same process. */
  VYRE_STATUS_DEVICE_FAULT = 21,
  VYRE_STATUS_FORCE32 = 0x7FFFFFFF
} vyre_status;

/** A static, NUL-terminated name for a status ("VYRE_STATUS_OK", ...).
 *  Unknown values give "VYRE_STATUS_UNKNOWN". Never NULL. */
VYRE_API const char* vyre_status_name(vyre_status status);

/** Reads this thread's last error without clearing it.
 *  Every pointer may be NULL. `message` receives at most message_capacity
 *  bytes including the terminating NUL (truncated messages stay terminated);
 *  `out_message_length` receives the full length without the NUL, so a caller
 *  can size a buffer and ask again. `out_cu_result` is the CUresult the
 *  driver returned (0 when the failure did not come from the driver).
 *  Returns the last error's status (VYRE_STATUS_OK when the last call
 *  succeeded).
 *
 *  Layout: the first line of the message (up to the first '\n') is at most
 *  1023 bytes and reads "<what failed>: <why>. Fix: <what to do>.", so a
 *  1024-byte buffer always receives all of it, Fix included. Caller text too
 *  long for that (a huge entry name, path or option list) is shortened in the
 *  middle to " [... N bytes elided ...] "; cuts never split a UTF-8 sequence.
 *  A compiler or JIT log may follow after the '\n', capped so the whole
 *  message is at most 8191 bytes (a note then says how much was left out);
 *  vyre_last_error_log returns the whole log. */
VYRE_API vyre_status vyre_last_error(vyre_status* out_status, int32_t* out_cu_result,
                                     char* message, size_t message_capacity,
                                     size_t* out_message_length);

/** Reads the whole compiler or JIT log of this thread's last error (NVRTC's
 *  program log, the driver's JIT error log), uncapped, without clearing the
 *  last error. Same conventions as vyre_last_error: every pointer may be
 *  NULL; `log` receives at most log_capacity bytes including the terminating
 *  NUL (truncated logs stay terminated); `out_log_length` receives the full
 *  length without the NUL. The log is empty (length 0) when the last error
 *  carried none, or when the last call succeeded. Returns the last error's
 *  status, as vyre_last_error does. */
VYRE_API vyre_status vyre_last_error_log(char* log, size_t log_capacity, size_t* out_log_length);

/* ------------------------------------------------------------------------ */
/* Handles                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct vyre_context { uint64_t bits; } vyre_context;
typedef struct vyre_buffer { uint64_t bits; } vyre_buffer;
typedef struct vyre_program { uint64_t bits; } vyre_program;
typedef struct vyre_pending { uint64_t bits; } vyre_pending;
typedef struct vyre_graph { uint64_t bits; } vyre_graph;
typedef struct vyre_sequence { uint64_t bits; } vyre_sequence;
typedef struct vyre_egraph_image { uint64_t bits; } vyre_egraph_image;

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum vyre_log_level {
  VYRE_LOG_ERROR = 0,
  VYRE_LOG_WARNING = 1,
  VYRE_LOG_INFO = 2,
  /** Per-stage timings; also enabled by the environment VYRE_CUDA_TRACE=1. */
  VYRE_LOG_TRACE = 3,
  VYRE_LOG_LEVEL_FORCE32 = 0x7FFFFFFF
} vyre_log_level;

/** Receives log lines. May be called from any thread, concurrently; must not
 *  call back into vyre-cuda. `message` is valid only during the call. */
typedef void (*vyre_log_callback)(void* user_data, vyre_log_level level,
                                  const char* message);

/** Installs (or with NULL removes) the process-wide log callback and the most
 *  verbose level delivered. Without a callback, VYRE_CUDA_TRACE=1 prints
 *  trace lines to stderr. */
VYRE_API vyre_status vyre_set_log_callback(vyre_log_callback callback, void* user_data,
                                           vyre_log_level max_level);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

/** Number of CUDA devices. Loads the driver on first use: without one this
 *  returns VYRE_STATUS_NO_DRIVER. A driver with no device gives OK and 0. */
VYRE_API vyre_status vyre_device_count(uint32_t* out_count);

typedef struct vyre_device_info {
  uint32_t struct_size;
  uint32_t ordinal;
  char name[256];
  uint32_t compute_capability_major;
  uint32_t compute_capability_minor;
  uint64_t total_memory_bytes;
  uint32_t multiprocessor_count;
  uint32_t max_threads_per_block;
  uint32_t max_block_dim[3];
  uint32_t max_grid_dim[3];
  uint32_t max_shared_memory_per_block;
  uint32_t warp_size;
  /** 1 when cooperative (grid-synchronising) launches are supported. */
  uint32_t cooperative_launch;
  /** cuDriverGetVersion(), e.g. 13000 for CUDA 13.0. */
  uint32_t driver_version;
  /* Version 2 (336 bytes). */
  /** Bit p is set when this device can access device p's memory as a peer
   *  (cuDeviceCanAccessPeer), so vyre_buffer_copy between them runs as a
   *  peer copy; devices 0 to 63 (vyre_device_can_access_peer answers for
   *  any). Never this device's own bit. */
  uint64_t peer_access_mask;
} vyre_device_info;
#define VYRE_DEVICE_INFO_INIT {sizeof(vyre_device_info), 0, {0}, 0, 0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, 0, 0, 0, 0, 0}

/** Describes device `ordinal`. out->struct_size must be set (VYRE_DEVICE_INFO_INIT);
 *  an older, smaller struct receives only the fields it has. */
VYRE_API vyre_status vyre_device_info_get(uint32_t ordinal, vyre_device_info* out);

/** *out_can_access receives 1 when device `ordinal` can access device
 *  `peer_ordinal`'s memory as a peer (NVLink or PCIe peer-to-peer, as
 *  cuDeviceCanAccessPeer says), else 0; 0 for the same device. Copies
 *  between two such devices (vyre_buffer_copy) run device to device; others
 *  go through pinned host memory. Either ordinal past vyre_device_count is
 *  VYRE_STATUS_NO_DEVICE; loads the driver as vyre_device_count does. */
VYRE_API vyre_status vyre_device_can_access_peer(uint32_t ordinal, uint32_t peer_ordinal,
                                                 uint32_t* out_can_access);

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct vyre_context_desc {
  uint32_t struct_size;
  uint32_t device_ordinal;
  /** Most bytes the transient device pool keeps cached between dispatches;
   *  0 picks the default (1 GiB). */
  uint64_t transient_pool_limit_bytes;
  /** Most bytes the pinned host staging pool keeps cached; 0 = 1 GiB. */
  uint64_t pinned_pool_limit_bytes;
  /* Version 2 (40 bytes): the pipeline that moves large host data. Host
   * bindings, uploads and downloads over 256 KiB in pageable memory are cut
   * into pieces copied through a ring of pinned chunks, each piece's DMA
   * starting as soon as it is filled and overlapping the copy of the next.
   * 0 picks the default for each field. */
  /** Bytes per pinned chunk: a multiple of 64 KiB from 64 KiB to 256 MiB;
   *  0 = 8 MiB. */
  uint64_t staging_chunk_bytes;
  /** Chunks in the ring: 2 to 64; 0 = 4. */
  uint32_t staging_chunk_count;
  /** Threads that copy between pageable and pinned memory (the calling
   *  thread included): 1 to 64; 0 = min(12, hardware threads). The helper
   *  threads start with the first copy of 128 KiB or more and, after each
   *  copy, spin for up to 200 us watching for the next before they sleep:
   *  1 keeps all copying on the calling thread. */
  uint32_t staging_threads;
} vyre_context_desc;
#define VYRE_CONTEXT_DESC_INIT {sizeof(vyre_context_desc), 0, 0, 0, 0, 0, 0}

/** Creates a context on a device (its primary CUDA context). */
VYRE_API vyre_status vyre_context_create(const vyre_context_desc* desc, vyre_context* out);

/** Destroys a context: waits for its work, releases every buffer, program
 *  and pending dispatch it owns; all of their handles become stale. Then
 *  returns the first device error met on the way (see the release rule at
 *  the top), e.g. VYRE_STATUS_DEVICE_FAULT after a device fault, whose Fix
 *  says whether the device was reset (this was its last context) or which
 *  contexts remain to destroy. */
VYRE_API vyre_status vyre_context_destroy(vyre_context context);

/** Describes the context's device without querying the driver again.
 *  out->struct_size must be set (VYRE_DEVICE_INFO_INIT). */
VYRE_API vyre_status vyre_context_device_info(vyre_context context, vyre_device_info* out);

typedef struct vyre_telemetry {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t h2d_bytes;
  uint64_t h2d_operations;
  uint64_t d2h_bytes;
  uint64_t d2h_operations;
  uint64_t memset_operations;
  uint64_t kernel_launches;
  uint64_t sync_points;
  uint64_t dispatches;
  uint64_t transient_pool_hits;
  uint64_t transient_pool_misses;
  uint64_t transient_pool_cached_bytes;
  uint64_t pinned_pool_hits;
  uint64_t pinned_pool_misses;
  uint64_t pinned_pool_cached_bytes;
  uint64_t module_cache_hits;
  uint64_t module_cache_misses;
  uint64_t module_loads;
  /** Device bytes currently allocated by this context (buffers and pool). */
  uint64_t device_bytes_live;
  /** Pinned host bytes currently allocated by this context. */
  uint64_t pinned_bytes_live;
  uint64_t live_buffers;
  uint64_t live_programs;
  uint64_t live_pendings;
  /** Graphs recorded (from dispatches and sequences). */
  uint64_t graph_records;
  /** vyre_graph_replay / vyre_graph_replay_async calls that launched. */
  uint64_t graph_replays;
  /** Replays whose host inputs equalled the previous replay's, so the
   *  graph without input copies ran and no input byte moved. */
  uint64_t graph_uploads_skipped;
  /** cuGraphLaunch calls. */
  uint64_t graph_launches;
  /** Eager vyre_sequence_run calls. */
  uint64_t sequence_runs;
  uint64_t live_graphs;
  uint64_t live_sequences;
} vyre_telemetry;
#define VYRE_TELEMETRY_INIT {sizeof(vyre_telemetry), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** Copies the context's counters (cumulative since creation, or levels for
 *  the *_live and *_cached_bytes fields). */
VYRE_API vyre_status vyre_context_telemetry(vyre_context context, vyre_telemetry* out);

/** Releases the memory the context's transient and pinned pools keep cached. */
VYRE_API vyre_status vyre_context_trim(vyre_context context);

/** Runs the built-in self-test on the context's device: a vector add of
 *  random data through the host path, every element checked. OK means the
 *  JIT, staging, launch and read-back paths work on this device; a wrong
 *  element is VYRE_STATUS_LAUNCH_FAILED. */
VYRE_API vyre_status vyre_context_selftest(vyre_context context);

/* ------------------------------------------------------------------------ */
/* Resident buffers                                                          */
/* ------------------------------------------------------------------------ */

/** Allocates `bytes` (> 0) of device memory, uninitialised. */
VYRE_API vyre_status vyre_buffer_alloc(vyre_context context, uint64_t bytes, vyre_buffer* out);

/** Frees a buffer. The handle is stale at once; if a pending dispatch still
 *  uses the memory, it is released once that dispatch is seen to complete
 *  (vyre_pending_poll, vyre_pending_wait or vyre_pending_release). */
VYRE_API vyre_status vyre_buffer_free(vyre_buffer buffer);

/** Copies `bytes` from host `src` into the buffer at `offset` and waits. */
VYRE_API vyre_status vyre_buffer_upload(vyre_buffer buffer, uint64_t offset, const void* src,
                                        uint64_t bytes);

/** Copies `bytes` from the buffer at `offset` into host `dst` and waits. */
VYRE_API vyre_status vyre_buffer_download(vyre_buffer buffer, uint64_t offset, void* dst,
                                          uint64_t bytes);

typedef struct vyre_upload_range {
  uint64_t offset;
  uint64_t bytes;
  const void* src;
} vyre_upload_range;

typedef struct vyre_download_range {
  uint64_t offset;
  uint64_t bytes;
  void* dst;
} vyre_download_range;

/** Uploads many ranges through one staged copy and one synchronisation.
 *  Every range is checked before anything is copied. */
VYRE_API vyre_status vyre_buffer_upload_ranges(vyre_buffer buffer, const vyre_upload_range* ranges,
                                               size_t range_count);

/** Downloads many ranges with one synchronisation. */
VYRE_API vyre_status vyre_buffer_download_ranges(vyre_buffer buffer,
                                                 const vyre_download_range* ranges,
                                                 size_t range_count);

/** vyre_buffer_info.flags bits. */
enum {
  /** The buffer borrows memory other CUDA code owns (vyre_buffer_wrap);
   *  freeing the buffer never frees that memory. */
  VYRE_BUFFER_INFO_FLAG_BORROWED = 1u << 0,
  /** The buffer maps memory another process exported
   *  (vyre_buffer_import_ipc); BORROWED is set too. */
  VYRE_BUFFER_INFO_FLAG_IMPORTED = 1u << 1
};

typedef struct vyre_buffer_info {
  uint32_t struct_size;
  /** VYRE_BUFFER_INFO_FLAG_* bits. */
  uint32_t flags;
  uint64_t bytes;
  /** The raw CUdeviceptr, for interop with other CUDA code in the same
   *  process (valid until the buffer is freed). */
  uint64_t device_pointer;
  vyre_context context;
} vyre_buffer_info;
#define VYRE_BUFFER_INFO_INIT {sizeof(vyre_buffer_info), 0, 0, 0, {0}}

/** Reads a buffer's size, raw device pointer, flags and owning context.
 *  out->struct_size must be set (VYRE_BUFFER_INFO_INIT). */
VYRE_API vyre_status vyre_buffer_info_get(vyre_buffer buffer, vyre_buffer_info* out);

/* ------------------------------------------------------------------------ */
/* Copies between buffers of any contexts and devices                        */
/* ------------------------------------------------------------------------ */

/*
 * vyre_buffer_copy moves a byte range from one buffer to another without the
 * data passing through the caller. The two buffers may belong to any
 * contexts:
 *  - one context: a device-to-device copy on its stream;
 *  - two contexts of one device: the same copy, on the destination context's
 *    stream;
 *  - two devices that can access each other as peers
 *    (vyre_device_can_access_peer): a peer copy over NVLink or PCIe
 *    (cuMemcpyPeerAsync) on the destination context's stream. The first copy
 *    between two contexts enables peer access between their devices
 *    (cuCtxEnablePeerAccess, each direction the devices allow); it stays
 *    enabled for the process, as for any other CUDA code using the devices;
 *  - two devices that cannot (or VYRE_BUFFER_COPY_FLAG_STAGED): through
 *    pinned host memory from the source context's pinned pool, in pieces of
 *    up to 8 MiB, each piece's download on the source context's stream
 *    overlapping the upload of the one before on the destination's.
 *
 * Ordering: the copy starts after all work enqueued on both contexts before
 * the call, and work either context enqueues after the call returns starts
 * after the copy has completed. Nothing blocks the host but the wait of
 * vyre_buffer_copy (a synchronisation of the destination context's stream,
 * whose last work is the copy).
 *
 * Refusals, each with its Fix: src or dst 0, forged or of another type:
 * INVALID_HANDLE; freed, or of a destroyed context: STALE_HANDLE; an offset +
 * bytes past either buffer, or overflowing 64 bits: OUT_OF_RANGE; the source
 * and destination ranges overlapping in device memory (one buffer, or
 * buffers that wrap the same memory): INVALID_ARGUMENT (copy through a
 * second buffer: the device copy engines give no order between the bytes);
 * unknown flags: INVALID_ARGUMENT. bytes 0 copies and orders nothing: the
 * handles and offsets (at most the buffers' sizes) are still checked.
 * A fault of either device: DEVICE_FAULT.
 *
 * Freeing either buffer, or destroying the source's context, while an
 * asynchronous copy runs is safe: the memory stays until the copy is seen
 * to complete. The pending handle belongs to the destination's context
 * (destroying it waits for the copy and releases the handle).
 */

/** vyre_buffer_copy_desc.flags bits. */
enum {
  /** Between two devices: copy through pinned host memory even when they
   *  are peers (to compare the paths, or to leave peer mappings alone).
   *  Ignored when both buffers are on one device. */
  VYRE_BUFFER_COPY_FLAG_STAGED = 1u << 0
};

typedef struct vyre_buffer_copy_desc {
  uint32_t struct_size;
  /** VYRE_BUFFER_COPY_FLAG_* bits. */
  uint32_t flags;
  /** The buffer read, and the first byte read. */
  vyre_buffer src;
  uint64_t src_offset;
  /** The buffer written, and the first byte written. */
  vyre_buffer dst;
  uint64_t dst_offset;
  /** Bytes copied; 0 copies nothing (see above). */
  uint64_t bytes;
} vyre_buffer_copy_desc;
#define VYRE_BUFFER_COPY_DESC_INIT {sizeof(vyre_buffer_copy_desc), 0, {0}, 0, {0}, 0, 0}

/** Copies desc->bytes from desc->src to desc->dst and waits for the copy. */
VYRE_API vyre_status vyre_buffer_copy(const vyre_buffer_copy_desc* desc);

/** Enqueues the copy and returns at once with a pending handle (poll, wait,
 *  timing and release as for vyre_dispatch_async; its timing has wall,
 *  enqueue and wait times, device_ns 0). The descriptor is read before the
 *  call returns. */
VYRE_API vyre_status vyre_buffer_copy_async(const vyre_buffer_copy_desc* desc,
                                            vyre_pending* out);

/* ------------------------------------------------------------------------ */
/* Buffers shared between processes                                          */
/* ------------------------------------------------------------------------ */

/*
 * vyre_buffer_export_ipc turns a buffer into VYRE_IPC_HANDLE_BYTES plain
 * bytes that the caller sends to another process over any channel (a pipe,
 * a socket, a file, MPI); vyre_buffer_import_ipc there gives a buffer of that
 * process's context over the same device memory. Both processes then read
 * and write one copy of the bytes.
 *
 * Mechanism: CUDA's IPC memory handles (cuIpcGetMemHandle /
 * cuIpcOpenMemHandle). Every buffer vyre_buffer_alloc makes is one
 * cuMemAlloc allocation, which these handles share as they are, and the
 * handle is bytes, so any channel carries it. (Shareable-handle export,
 * cuMemExportToShareableHandle, needs memory made with cuMemCreate and a file
 * descriptor passed over a Unix socket.) Not available on Windows WDDM or
 * WSL, where the driver refuses it.
 *
 * The handle names the device by UUID, so the importing process may see it
 * under another ordinal (CUDA_VISIBLE_DEVICES): import into a context on
 * that same device. The import is borrowed memory, as from vyre_buffer_wrap
 * (VYRE_BUFFER_INFO_FLAG_BORROWED | VYRE_BUFFER_INFO_FLAG_IMPORTED): usable
 * wherever a buffer is; vyre_buffer_free (or destroying its context) closes
 * the mapping once pending work that uses it is done, and never frees the
 * exporter's memory. Importing one handle twice in a process maps it once;
 * each buffer holds the mapping.
 *
 * Lifetime (CUDA's rule): the exporting process keeps the buffer allocated
 * until every importer has freed its import. Memory freed by the exporter
 * while mapped elsewhere is undefined to read there. Importing a handle
 * whose buffer was already freed, or whose process exited, is
 * VYRE_STATUS_INVALID_ARGUMENT with a Fix, never a crash: the driver keeps
 * a freed small buffer's memory block while its process lives and would
 * open such a handle, so each exported buffer has an empty POSIX shared
 * memory object (/dev/shm/vyre_cuda_ipc_<pid>_<n>) while it is allocated,
 * which importers look for (without /dev/shm, only the driver checks).
 *
 * Ordering across processes is the caller's: the exporter's writes are
 * visible to the importer's work after the exporter has waited for them
 * (vyre_buffer_upload and vyre_dispatch return after their work completes;
 * for async work, wait on its pending) and told the importer so over its
 * channel; the same the other way.
 *
 * Refusals, each with its Fix: an exported handle of a buffer that is itself
 * an import (export from the process that allocated it), or of wrapped
 * memory that CUDA cannot share (a stream-ordered pool's, for example):
 * INVALID_ARGUMENT; bytes that are not a handle (corrupted or cut short):
 * INVALID_ARGUMENT; a handle exported by the calling process (CUDA does not
 * open those; use the buffer itself): INVALID_ARGUMENT; a context on another
 * device than the handle's: INVALID_ARGUMENT.
 */

#define VYRE_IPC_HANDLE_BYTES 128

/** An exported buffer: opaque bytes, valid in other processes of the same
 *  machine until the exporter frees the buffer or exits. */
typedef struct vyre_ipc_handle {
  uint8_t bytes[VYRE_IPC_HANDLE_BYTES];
} vyre_ipc_handle;

/** Writes the IPC handle of `buffer` (its whole range) to *out. Exporting a
 *  buffer again gives the same bytes. */
VYRE_API vyre_status vyre_buffer_export_ipc(vyre_buffer buffer, vyre_ipc_handle* out);

/** Maps the buffer another process exported into `context`'s device and
 *  returns a buffer handle over it (its size is the exported buffer's). */
VYRE_API vyre_status vyre_buffer_import_ipc(vyre_context context, const vyre_ipc_handle* handle,
                                            vyre_buffer* out);

/* ------------------------------------------------------------------------ */
/* Interop with other CUDA code in the process (CuPy, PyTorch, Numba, ...)   */
/* ------------------------------------------------------------------------ */

typedef struct vyre_buffer_wrap_desc {
  uint32_t struct_size;
  /** Must be 0. */
  uint32_t flags;
  /** A CUdeviceptr allocated by other CUDA code on the context's device
   *  (device or managed memory, e.g. from cuMemAlloc, cudaMalloc, a CuPy or
   *  PyTorch allocator). */
  uint64_t device_pointer;
  /** Bytes from device_pointer (> 0), inside that one allocation. */
  uint64_t bytes;
} vyre_buffer_wrap_desc;
#define VYRE_BUFFER_WRAP_DESC_INIT {sizeof(vyre_buffer_wrap_desc), 0, 0, 0}

/** Makes a buffer handle that borrows [device_pointer, device_pointer+bytes):
 *  usable wherever a vyre_buffer is (resident bindings, upload/download and
 *  ranges, graphs, sequences). The driver is asked what the pointer is
 *  (cuPointerGetAttributes): host memory, memory CUDA does not know, memory
 *  of another device or context, a range past the end of its allocation,
 *  bytes 0, pointer 0 or flags other than 0 are VYRE_STATUS_INVALID_ARGUMENT.
 *  vyre_buffer_free releases the handle (after pending work that uses it,
 *  like owned buffers) and never frees the memory; neither do
 *  vyre_context_trim nor vyre_context_destroy. The caller keeps the memory
 *  alive until then. vyre_buffer_info reports VYRE_BUFFER_INFO_FLAG_BORROWED;
 *  device_bytes_live does not count it. The library's work on it runs on the
 *  context's stream: order it against other streams with
 *  vyre_context_wait_stream / vyre_context_signal_stream. */
VYRE_API vyre_status vyre_buffer_wrap(vyre_context context, const vyre_buffer_wrap_desc* desc,
                                      vyre_buffer* out);

/** Work the context enqueues after this call starts after the work already
 *  enqueued on `cu_stream` (a CUstream of the same device; 1 =
 *  CU_STREAM_LEGACY and 2 = CU_STREAM_PER_THREAD accepted, 0 is refused with
 *  INVALID_ARGUMENT). Neither side blocks the host: the library records an
 *  event on `cu_stream` and makes its own stream wait for it. */
VYRE_API vyre_status vyre_context_wait_stream(vyre_context context, uint64_t cu_stream);

/** Work enqueued on `cu_stream` after this call starts after the work the
 *  context has already enqueued (same streams as vyre_context_wait_stream).
 *  The host does not block. */
VYRE_API vyre_status vyre_context_signal_stream(vyre_context context, uint64_t cu_stream);

/* ------------------------------------------------------------------------ */
/* Pinned host memory                                                        */
/* ------------------------------------------------------------------------ */

/* Host bindings, uploads and downloads whose bytes lie entirely inside memory
 * from vyre_host_alloc or vyre_host_register are copied by DMA straight from
 * or into that memory: no staging copy, and an async dispatch's copies run
 * while the caller goes on. Such memory belongs to the context it was
 * allocated or registered with and is released with it (vyre_context_destroy
 * frees or unregisters it). It serves every context of the process. */

/** Allocates `bytes` (> 0) of page-locked host memory; *out receives its
 *  address (aligned to 4 KiB, uninitialised). */
VYRE_API vyre_status vyre_host_alloc(vyre_context context, uint64_t bytes, void** out);

/** Frees memory from vyre_host_alloc (`pointer` must be the address it
 *  returned). If a pending dispatch still copies from or into it, the memory
 *  is released once that dispatch is seen to complete, like a buffer. */
VYRE_API vyre_status vyre_host_free(void* pointer);

/** Page-locks caller memory [pointer, pointer + bytes) so the library copies
 *  it by DMA. Ranges may not overlap memory already registered or allocated
 *  with vyre_host_alloc. The caller keeps ownership and must unregister
 *  before freeing it. */
VYRE_API vyre_status vyre_host_register(vyre_context context, void* pointer, uint64_t bytes);

/** Undoes vyre_host_register (`pointer` must be the registered start).
 *  Refused with VYRE_STATUS_INVALID_STATE while a pending dispatch still
 *  copies from or into the range: wait on it first. */
VYRE_API vyre_status vyre_host_unregister(void* pointer);

/* ------------------------------------------------------------------------ */
/* Programs                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum vyre_code_kind {
  /** PTX text (NUL-terminated or code_size bytes). */
  VYRE_CODE_PTX = 1,
  /** A cubin or fatbin image. */
  VYRE_CODE_BINARY = 2,
  /** CUDA C++ source compiled at run time through NVRTC. */
  VYRE_CODE_CUDA_SOURCE = 3,
  VYRE_CODE_KIND_FORCE32 = 0x7FFFFFFF
} vyre_code_kind;

typedef enum vyre_binding_role {
  VYRE_ROLE_INPUT = 1,
  VYRE_ROLE_OUTPUT = 2,
  VYRE_ROLE_INPUT_OUTPUT = 3,
  /** Dynamic shared memory: element_size * element_count bytes are added to
   *  the launch's dynamic shared memory; no pointer is passed. */
  VYRE_ROLE_SHARED = 4,
  VYRE_BINDING_ROLE_FORCE32 = 0x7FFFFFFF
} vyre_binding_role;

typedef struct vyre_binding_decl {
  uint32_t struct_size;
  vyre_binding_role role;
  /** For messages; may be NULL. Copied. */
  const char* name;
  /** Bytes per element (> 0). Every bound length must be a multiple. */
  uint32_t element_size;
  uint32_t reserved0;
  /** Elements, or 0 for "sized by what the dispatch binds". */
  uint64_t element_count;
  /** Output read-back range in bytes: only [offset, offset+length) of a host
   *  output is copied back. length 0 means the whole binding. */
  uint64_t output_offset;
  uint64_t output_length;
} vyre_binding_decl;
#define VYRE_BINDING_DECL_INIT {sizeof(vyre_binding_decl), VYRE_ROLE_INPUT, NULL, 4, 0, 0, 0, 0}

typedef enum vyre_param_kind {
  /** The device pointer of binding `index` (8 bytes). */
  VYRE_PARAM_BINDING = 1,
  /** A 4-byte scalar taken from dispatch scalars[index] (low 32 bits). */
  VYRE_PARAM_SCALAR32 = 2,
  /** An 8-byte scalar taken from dispatch scalars[index]. */
  VYRE_PARAM_SCALAR64 = 3,
  /** The device pointer of the dispatch's u32 parameter-word block. */
  VYRE_PARAM_PARAM_WORDS = 4,
  /** A null 8-byte pointer (e.g. Triton's unused scratch pointers). */
  VYRE_PARAM_NULL_POINTER = 5,
  VYRE_PARAM_KIND_FORCE32 = 0x7FFFFFFF
} vyre_param_kind;

typedef struct vyre_kernel_param {
  vyre_param_kind kind;
  uint32_t index;
} vyre_kernel_param;

typedef struct vyre_program_desc {
  uint32_t struct_size;
  vyre_code_kind code_kind;
  /** The code; copied. */
  const void* code;
  /** Bytes of code. For a binary, the image's exact size (required): the
   *  cubin's or fatbin's headers are checked to lie inside it before the
   *  driver reads it (VYRE_STATUS_INVALID_ARGUMENT otherwise). For PTX and
   *  CUDA source, 0 means NUL-terminated; a size may count trailing NULs,
   *  but a NUL before them is VYRE_STATUS_INVALID_ARGUMENT. */
  size_t code_size;
  /** Kernel entry name (the mangled name for C++ kernels not extern "C"). */
  const char* entry;
  const vyre_binding_decl* bindings;
  size_t binding_count;
  /** Threads per block; y and z of 0 mean 1. x must be > 0. */
  uint32_t workgroup_size[3];
  /** Dynamic shared memory bytes per launch, added to SHARED bindings. The
   *  dynamic total plus the kernel's static shared memory must fit the
   *  device's opt-in maximum per block (LIMIT_EXCEEDED otherwise). */
  uint32_t shared_memory_bytes;
  /** Explicit kernel parameter list; NULL/0 selects the default convention:
   *  one device pointer per non-SHARED binding in order, then the pointer to
   *  the u32 parameter words. */
  const vyre_kernel_param* params;
  size_t param_count;
  /** NVRTC options for VYRE_CODE_CUDA_SOURCE (e.g. "-std=c++17"). The
   *  library adds the device architecture. */
  const char* const* compile_options;
  size_t compile_option_count;
} vyre_program_desc;
#define VYRE_PROGRAM_DESC_INIT {sizeof(vyre_program_desc), VYRE_CODE_PTX, NULL, 0, NULL, NULL, 0, {0, 0, 0}, 0, NULL, 0, NULL, 0}

/** Builds a program: compiles/loads its module (through the context's module
 *  cache) and resolves the entry. Compile errors carry the JIT/NVRTC log. */
VYRE_API vyre_status vyre_program_create(vyre_context context, const vyre_program_desc* desc,
                                         vyre_program* out);

/** Destroys a program; its handle is stale at once. Dispatches already
 *  enqueued keep the module loaded until they complete. */
VYRE_API vyre_status vyre_program_destroy(vyre_program program);

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum vyre_binding_source {
  /** Borrowed host memory, staged for this dispatch only. */
  VYRE_SOURCE_HOST = 1,
  /** A resident buffer range. */
  VYRE_SOURCE_RESIDENT = 2,
  VYRE_BINDING_SOURCE_FORCE32 = 0x7FFFFFFF
} vyre_binding_source;

typedef struct vyre_dispatch_binding {
  uint32_t struct_size;
  vyre_binding_source source;
  /** HOST: bytes read from here before launch (INPUT, INPUT_OUTPUT). Copied
   *  before vyre_dispatch_async returns. */
  const void* host_input;
  /** HOST: results written here (OUTPUT, INPUT_OUTPUT) when the dispatch is
   *  waited on; may equal host_input. Must stay valid until then. */
  void* host_output;
  /** HOST: the binding's length in bytes. */
  uint64_t host_bytes;
  /** RESIDENT: the buffer and the byte range bound (length 0 = to the end). */
  vyre_buffer buffer;
  uint64_t offset;
  uint64_t length;
} vyre_dispatch_binding;
#define VYRE_DISPATCH_BINDING_INIT {sizeof(vyre_dispatch_binding), VYRE_SOURCE_HOST, NULL, NULL, 0, {0}, 0, 0}

enum {
  /** Record device start/end events so timing reports device_ns. */
  VYRE_DISPATCH_FLAG_DEVICE_TIMING = 1u << 0,
  /** Launch with cuLaunchCooperativeKernel (grid sync); the grid must be
   *  co-resident, which is checked before launch. */
  VYRE_DISPATCH_FLAG_COOPERATIVE = 1u << 1
};

typedef struct vyre_dispatch_desc {
  uint32_t struct_size;
  uint32_t flags;
  /** One per declared binding, in declaration order. The array is strided
   *  by bindings[0].struct_size, so every entry, a SHARED binding's
   *  included, must be initialised (VYRE_DISPATCH_BINDING_INIT) with the same
   *  struct_size; the other fields of a SHARED binding's entry are ignored. */
  const vyre_dispatch_binding* bindings;
  size_t binding_count;
  /** u32 parameter words, passed by device pointer (default convention or
   *  VYRE_PARAM_PARAM_WORDS). */
  const uint32_t* param_words;
  size_t param_word_count;
  /** Scalar values for VYRE_PARAM_SCALAR32/64 slots. */
  const uint64_t* scalars;
  size_t scalar_count;
  /** Grid in blocks; all zero derives x = ceil(element_count / block threads). */
  uint32_t grid[3];
  /** Block size; all zero uses the program's workgroup size. */
  uint32_t block[3];
  /** Elements the grid covers when grid is zero; 0 = the largest binding's
   *  element count. */
  uint64_t element_count;
  /** Times the kernel runs back to back (>= 1). */
  uint32_t fixpoint_iterations;
  /** Extra dynamic shared memory bytes for this dispatch (with the
   *  program's, and the kernel's static shared memory, within the device's
   *  opt-in maximum per block: LIMIT_EXCEEDED otherwise). */
  uint32_t shared_memory_bytes;
} vyre_dispatch_desc;
#define VYRE_DISPATCH_DESC_INIT {sizeof(vyre_dispatch_desc), 0, NULL, 0, NULL, 0, NULL, 0, {0, 0, 0}, {0, 0, 0}, 0, 1, 0}

typedef struct vyre_timing {
  uint32_t struct_size;
  uint32_t reserved0;
  /** Host time from entering dispatch to the end of the wait. */
  uint64_t wall_ns;
  /** Device time between the dispatch's first and last command
   *  (VYRE_DISPATCH_FLAG_DEVICE_TIMING or VYRE_CUDA_TRACE; else 0). */
  uint64_t device_ns;
  /** Host time spent staging and enqueueing. */
  uint64_t enqueue_ns;
  /** Host time spent in the wait, including read-back. */
  uint64_t wait_ns;
} vyre_timing;
#define VYRE_TIMING_INIT {sizeof(vyre_timing), 0, 0, 0, 0, 0}

/** Runs a program and waits: vyre_dispatch_async + wait + release.
 *  `out_timing` may be NULL. */
VYRE_API vyre_status vyre_dispatch(vyre_program program, const vyre_dispatch_desc* desc,
                                   vyre_timing* out_timing);

/** Enqueues a dispatch and returns at once with a pending handle. Host inputs
 *  are staged before return; host outputs are written by vyre_pending_wait. */
VYRE_API vyre_status vyre_dispatch_async(vyre_program program, const vyre_dispatch_desc* desc,
                                         vyre_pending* out);

/** OK when the dispatch's device work has completed, NOT_READY if not. */
VYRE_API vyre_status vyre_pending_poll(vyre_pending pending);

#define VYRE_WAIT_FOREVER UINT64_MAX

/** Waits up to timeout_ns for completion, then copies host outputs back.
 *  TIMEOUT leaves the dispatch waitable. A dispatch is waited on once; a
 *  second wait is INVALID_STATE. */
VYRE_API vyre_status vyre_pending_wait(vyre_pending pending, uint64_t timeout_ns);

/** Timing of a waited dispatch (INVALID_STATE before the wait).
 *  out->struct_size must be set (VYRE_TIMING_INIT). */
VYRE_API vyre_status vyre_pending_timing(vyre_pending pending, vyre_timing* out);

/** Releases a pending handle. If it was never waited on, this waits for the
 *  device work and skips the read-back into host outputs; an error that
 *  work met is returned here (the handle is released all the same), since
 *  no later call could see it. */
VYRE_API vyre_status vyre_pending_release(vyre_pending pending);

/* ------------------------------------------------------------------------ */
/* Graphs: record once, replay many times                                    */
/* ------------------------------------------------------------------------ */

/*
 * A graph is a dispatch (or a sequence, below) captured once as a CUDA graph
 * and replayed at the cost of one cuGraphLaunch.
 *
 * Recording a dispatch: vyre_graph_record takes the same program and
 * vyre_dispatch_desc as vyre_dispatch.
 *  - HOST bindings are sample inputs: the graph gets its own device memory and
 *    pinned host memory for them, and captures the input copies, the zeroing
 *    of OUTPUT bindings, the kernel x fixpoint_iterations and the output
 *    copies. Every replay must pass host data of exactly the recorded byte
 *    lengths (else VYRE_STATUS_SHAPE_MISMATCH). When a replay's host inputs
 *    equal the previous replay's byte for byte (and no binding is
 *    INPUT_OUTPUT), a second graph without the input copies runs instead.
 *  - RESIDENT bindings are captured by address. A replay may rebind them to
 *    other ranges of the same context (at least as large as the graph needs,
 *    see vyre_graph_replay_desc), which updates the kernel and memset nodes
 *    of the executable graph without capturing again.
 *  - The parameter words are uploaded once to a block the graph owns (room
 *    for the recorded count rounded up to 64 words, at least 64); a replay
 *    that passes other words rewrites the whole block in stream order, words
 *    past the new count reading 0.
 *  - Capacity class: a graph recorded for element count n can be replayed for
 *    any element count from 1 up to the next power of two of n, but no more
 *    than the device's largest grid x covers with the recorded block
 *    (vyre_graph_info.capacity_elements; past it LIMIT_EXCEEDED); the derived
 *    grid follows the count. A binding recorded with exactly n elements must
 *    hold the replay's count (a HOST one never grows: SHAPE_MISMATCH); any
 *    other binding keeps at least its recorded length.
 *  - Each HOST binding's size is fixed by the recording (the sample's
 *    host_bytes), OUTPUT ones included.
 *  - Not recordable: cooperative dispatches (a graph launches with
 *    cuLaunchKernel).
 *
 * Threads: recording captures on a stream of the context's own, with
 * thread-local capture mode, one recording per context at a time; dispatches,
 * buffer copies and replays from other threads on the same context keep
 * running meanwhile (they use the context's work stream, which is never
 * captured). Replays run on the context's work stream, in submission order
 * with dispatches. Replays of one graph are serialised; while an
 * asynchronous replay of a graph with HOST bindings is unwaited, any other
 * replay of it is INVALID_STATE (its pinned buffers hold that replay's data);
 * a graph without HOST bindings takes any number.
 *
 * Replay refusals: a binding count, source or HOST length other than
 * recorded, or more parameter words than the block holds, is
 * SHAPE_MISMATCH; an element count above the capacity class is
 * LIMIT_EXCEEDED; a resident range smaller than the graph needs, a buffer of
 * another context, or no bindings for a graph with HOST bindings is
 * INVALID_ARGUMENT; a freed buffer still bound is STALE_HANDLE.
 *
 * Destroying a graph, or freeing a buffer it uses, while a replay is in
 * flight is safe: the memory stays until that replay completes. A replay that
 * would use a freed buffer is refused (STALE_HANDLE) until it is rebound; the
 * freed buffer's memory is released once no graph binds it (rebound, or the
 * graph destroyed) and no replay uses it.
 */

/** Records a dispatch as a graph. `desc` is as for vyre_dispatch: HOST
 *  bindings carry sample inputs (not run: recording launches nothing). */
VYRE_API vyre_status vyre_graph_record(vyre_program program, const vyre_dispatch_desc* desc,
                                       vyre_graph* out);

typedef struct vyre_graph_replay_desc {
  uint32_t struct_size;
  /** VYRE_DISPATCH_FLAG_DEVICE_TIMING only. */
  uint32_t flags;
  /** One per declared binding, in declaration order, each with the source it
   *  was recorded with. HOST: host_input/host_output of the recorded
   *  host_bytes. RESIDENT: the range to bind from now on. NULL (with count
   *  0) keeps the current resident ranges; a graph with HOST bindings always
   *  needs them. */
  const vyre_dispatch_binding* bindings;
  size_t binding_count;
  /** New parameter words, kept for later replays; NULL keeps the current
   *  ones. At most the graph's block: the recorded count rounded up to a
   *  multiple of 64 words, at least 64 (else SHAPE_MISMATCH). */
  const uint32_t* param_words;
  size_t param_word_count;
  /** New scalar values for SCALAR32/64 kernel parameters, kept for later
   *  replays; NULL keeps the current ones. */
  const uint64_t* scalars;
  size_t scalar_count;
  /** Elements the derived grid covers, 1 .. capacity class; 0 keeps the
   *  current count. Needs a graph recorded with an all-zero grid. A new
   *  count sets grid x of every kernel node (over any earlier
   *  vyre_graph_kernel_node_update of it). */
  uint64_t element_count;
} vyre_graph_replay_desc;
#define VYRE_GRAPH_REPLAY_DESC_INIT {sizeof(vyre_graph_replay_desc), 0, NULL, 0, NULL, 0, NULL, 0, 0}

/** Replays a graph and waits; HOST outputs are written before it returns.
 *  `desc` may be NULL (a graph without HOST bindings, nothing changed);
 *  `out_timing` may be NULL. */
VYRE_API vyre_status vyre_graph_replay(vyre_graph graph, const vyre_graph_replay_desc* desc,
                                       vyre_timing* out_timing);

/** Enqueues a replay and returns a pending handle (poll, wait, timing,
 *  release as for vyre_dispatch_async). HOST inputs are read before return;
 *  HOST outputs are written by vyre_pending_wait. */
VYRE_API vyre_status vyre_graph_replay_async(vyre_graph graph,
                                             const vyre_graph_replay_desc* desc,
                                             vyre_pending* out);

/** Replays a graph ordered on a caller's CUDA stream, as
 *  vyre_graph_replay_async does otherwise (same `desc`, same pending):
 *  the graph starts after the work already enqueued on `cu_stream` (and the
 *  context's own earlier work), and work enqueued on `cu_stream` after this
 *  call starts after the graph. `cu_stream` is a CUstream of the context's
 *  device, 1 (CU_STREAM_LEGACY) or 2 (CU_STREAM_PER_THREAD); 0 is refused
 *  with INVALID_ARGUMENT (see vyre_context_wait_stream). Nothing blocks the
 *  host: the graph runs on the context's stream, joined to `cu_stream` by an
 *  event each way. A graph with HOST bindings writes its host outputs at
 *  vyre_pending_wait, as for vyre_graph_replay_async; its device work is
 *  ordered on the stream all the same. */
VYRE_API vyre_status vyre_graph_launch(vyre_graph graph, const vyre_graph_replay_desc* desc,
                                       uint64_t cu_stream, vyre_pending* out);

/** Destroys a graph; its handle is stale at once. A replay in flight keeps
 *  the graph's memory until it completes. */
VYRE_API vyre_status vyre_graph_destroy(vyre_graph graph);

typedef struct vyre_graph_info {
  uint32_t struct_size;
  /** 1 when recorded from a sequence (no bindings to replay with). */
  uint32_t from_sequence;
  vyre_context context;
  /** Nodes of the full executable graph (see vyre_graph_node_kind_get). */
  uint64_t node_count;
  uint64_t kernel_node_count;
  /** Nodes of the graph run when the inputs are unchanged (0 if none). */
  uint64_t unchanged_input_node_count;
  /** Element count of the next replay, and the largest allowed. */
  uint64_t element_count;
  uint64_t capacity_elements;
  uint64_t replays;
  /** HOST bytes each replay uploads (when inputs changed) and reads back. */
  uint64_t host_input_bytes;
  uint64_t host_output_bytes;
} vyre_graph_info;
#define VYRE_GRAPH_INFO_INIT {sizeof(vyre_graph_info), 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0}

/** Describes a graph. out->struct_size must be set (VYRE_GRAPH_INFO_INIT). */
VYRE_API vyre_status vyre_graph_info_get(vyre_graph graph, vyre_graph_info* out);

typedef enum vyre_graph_node_kind {
  VYRE_GRAPH_NODE_KERNEL = 1,
  VYRE_GRAPH_NODE_MEMCPY = 2,
  VYRE_GRAPH_NODE_MEMSET = 3,
  /** A CUDA graph node type with no kind of its own below. */
  VYRE_GRAPH_NODE_OTHER = 4,
  /** Node types the library does not record itself, for graphs that hold
   *  other CUDA code's work (reported as the driver names them). */
  VYRE_GRAPH_NODE_HOST = 5,
  VYRE_GRAPH_NODE_CHILD_GRAPH = 6,
  VYRE_GRAPH_NODE_EMPTY = 7,
  VYRE_GRAPH_NODE_EVENT_RECORD = 8,
  VYRE_GRAPH_NODE_EVENT_WAIT = 9,
  VYRE_GRAPH_NODE_CONDITIONAL = 10,
  VYRE_GRAPH_NODE_MEM_ALLOC = 11,
  VYRE_GRAPH_NODE_MEM_FREE = 12,
  VYRE_GRAPH_NODE_KIND_FORCE32 = 0x7FFFFFFF
} vyre_graph_node_kind;

/** Kernel arguments vyre_graph_node_info reports (the first ones). */
#define VYRE_GRAPH_NODE_MAX_ARGUMENTS 16

typedef struct vyre_graph_node_info {
  uint32_t struct_size;
  vyre_graph_node_kind kind;
  /** For interop: the node (a CUgraphNode of the CUgraph the library
   *  instantiated) and the executable graph (CUgraphExec) as integers,
   *  valid until vyre_graph_destroy. The library keeps changing the
   *  executable graph's nodes at replays (rebinding, counts, scalars); a
   *  caller that changes them through the driver takes over keeping them
   *  consistent (the next replay may overwrite what it set). */
  uint64_t cu_graph_node;
  uint64_t cu_graph_exec;
  /** KERNEL: what the next replay launches: the CUfunction, grid, block,
   *  dynamic shared memory, and the arguments, one 8-byte slot per kernel
   *  parameter in order (a pointer, a 64-bit scalar, or a 32-bit scalar in
   *  the low half), the first VYRE_GRAPH_NODE_MAX_ARGUMENTS of
   *  argument_count. A graph of captured work (vyre_capture_end) reports
   *  the function and shape the driver gives, and argument_count 0 (the
   *  library does not know those kernels' parameter lists). Zero for other
   *  kinds. */
  uint64_t cu_function;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_memory_bytes;
  uint32_t argument_count;
  uint64_t arguments[VYRE_GRAPH_NODE_MAX_ARGUMENTS];
  /** MEMSET: destination address, value, element size in bytes (1, 2 or 4),
   *  width in elements, height in rows, pitch in bytes (as
   *  CUDA_MEMSET_NODE_PARAMS), with the destination the next replay uses.
   *  Zero for other kinds. */
  uint64_t memset_dst;
  uint32_t memset_value;
  uint32_t memset_element_size;
  uint64_t memset_width;
  uint64_t memset_height;
  uint64_t memset_pitch;
} vyre_graph_node_info;
#define VYRE_GRAPH_NODE_INFO_INIT                                                           \
  {sizeof(vyre_graph_node_info), (vyre_graph_node_kind)0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, 0, 0, \
   {0}, 0, 0, 0, 0, 0, 0}

/** The kind of node `node_index` (0 .. node_count-1) of the full graph.
 *  Nodes are numbered in the order their work runs. */
VYRE_API vyre_status vyre_graph_node_kind_get(vyre_graph graph, uint64_t node_index,
                                              vyre_graph_node_kind* out);

/** Describes node `node_index` (0 .. node_count-1, numbered as for
 *  vyre_graph_node_kind_get) of the full graph: its kind, raw handles, and
 *  a kernel's or memset's parameters as the next replay uses them.
 *  out->struct_size must be set (VYRE_GRAPH_NODE_INFO_INIT). An index past
 *  the end is OUT_OF_RANGE. */
VYRE_API vyre_status vyre_graph_node_info_get(vyre_graph graph, uint64_t node_index,
                                              vyre_graph_node_info* out);

enum {
  /** vyre_graph_node_info_set: the caller takes responsibility for what the
   *  node touches. A kernel node takes every argument slot as given, pointer
   *  slots included (the memory must stay allocated, and be large enough,
   *  for as long as the graph may run), and any dynamic shared memory the
   *  device allows; a memset node takes its destination without the library
   *  asking the driver whose memory it is. */
  VYRE_GRAPH_NODE_SET_RAW = 1u << 0
};

/** Changes node `node_index` of the full graph (numbered as for
 *  vyre_graph_node_kind_get), and its twin in the graph without input
 *  copies, for later replays, without capturing again. `info` is what
 *  vyre_graph_node_info_get gave for that node with the fields to change
 *  edited (read, edit, set); info->struct_size must be set. `flags` is 0 or
 *  VYRE_GRAPH_NODE_SET_RAW. vyre_graph_node_info_get reports what was set.
 *
 *  Every kind: info->kind must be the node's kind (a KERNEL or a MEMSET
 *  node; other kinds, and kernels of captured work, whose parameter lists
 *  the library does not know, are INVALID_ARGUMENT); cu_graph_node and
 *  cu_graph_exec are 0 or the node's own (else INVALID_ARGUMENT: info of
 *  another node or graph). Fields of the other kind are ignored.
 *
 *  KERNEL: cu_function must stay the node's function and argument_count its
 *  parameter count (INVALID_ARGUMENT). grid and block are checked against
 *  the device's limits and block against the kernel's thread limit (a 0
 *  axis is INVALID_ARGUMENT, too large LIMIT_EXCEEDED); shared_memory_bytes
 *  against what the device allows next to the kernel's static shared
 *  memory (LIMIT_EXCEEDED). The first VYRE_GRAPH_NODE_MAX_ARGUMENTS
 *  argument slots are set from `arguments`; later ones keep their values.
 *  Checked (flags 0), as the library knows the kernel's parameter list:
 *  pointer slots (bindings, the parameter-word block) must keep their
 *  values (rebind through vyre_graph_replay_desc.bindings), a SCALAR32
 *  slot's high half must be 0, shared_memory_bytes must not drop below the
 *  program's own (its SHARED bindings and declared bytes), and block may
 *  change only in a graph recorded with an explicit grid (a derived grid is
 *  counted in the recorded block) — each INVALID_ARGUMENT. With
 *  VYRE_GRAPH_NODE_SET_RAW the slots are taken as given.
 *
 *  MEMSET: memset_element_size 1, 2 or 4; memset_value must fit it;
 *  memset_width >= 1 elements; memset_height must be 1 (the driver updates
 *  only one-row memsets of an executable graph); memset_dst aligned to the
 *  element size (each INVALID_ARGUMENT); memset_pitch is ignored. Checked:
 *  the destination range must lie inside one device allocation of the
 *  graph's context (INVALID_ARGUMENT otherwise). With
 *  VYRE_GRAPH_NODE_SET_RAW it is taken as given: the caller keeps it
 *  allocated while the graph may run.
 *
 *  What a replay changes comes after: a replay that rebinds an OUTPUT
 *  binding sets its memset node back to zeroing the new range, one that
 *  rebinds, passes scalars or changes the element count rewrites those
 *  argument slots and grid x of every kernel node; the rest keeps what was
 *  set. The graph keeps its buffers alive, not memory a RAW set points to.
 *  A replay in flight is unaffected (it runs what it was launched with). */
VYRE_API vyre_status vyre_graph_node_info_set(vyre_graph graph, uint64_t node_index,
                                              const vyre_graph_node_info* info, uint32_t flags);

enum {
  /** Set the node's grid from vyre_kernel_node_update.grid. */
  VYRE_KERNEL_NODE_UPDATE_GRID = 1u << 0,
  /** Set the node's scalar parameters from vyre_kernel_node_update.scalars. */
  VYRE_KERNEL_NODE_UPDATE_SCALARS = 1u << 1
};

typedef struct vyre_kernel_node_update {
  uint32_t struct_size;
  /** VYRE_KERNEL_NODE_UPDATE_* bits (at least one). */
  uint32_t flags;
  uint32_t grid[3];
  uint32_t reserved0;
  const uint64_t* scalars;
  size_t scalar_count;
} vyre_kernel_node_update;
#define VYRE_KERNEL_NODE_UPDATE_INIT {sizeof(vyre_kernel_node_update), 0, {0, 0, 0}, 0, NULL, 0}

/** Changes one kernel node of the executable graph (and its twin in the
 *  graph without input copies) for later replays, without capturing again.
 *  `node_index` must name a KERNEL node of a recorded dispatch or sequence
 *  (a kernel of captured work is INVALID_ARGUMENT). */
VYRE_API vyre_status vyre_graph_kernel_node_update(vyre_graph graph, uint64_t node_index,
                                                   const vyre_kernel_node_update* update);

/* ------------------------------------------------------------------------ */
/* Capturing caller work into a graph                                        */
/* ------------------------------------------------------------------------ */

/*
 * A capture turns whatever is enqueued on one CUDA stream — other CUDA code's
 * kernels, copies and memsets (CuPy, PyTorch, the caller's own driver calls)
 * and the library's own dispatches — into a vyre_graph that replays like any
 * other (vyre_graph_replay, _async, vyre_graph_launch, node info).
 *
 *  - vyre_capture_begin gives the capture stream as an integer (a CUstream
 *    of the context's device). It is the context's own non-blocking stream,
 *    never its work stream: dispatches, copies and replays from other
 *    threads keep running outside the capture, and nothing enqueued there
 *    runs until the graph is replayed. One capture per context at a time.
 *  - vyre_capture_dispatch enqueues a dispatch on it (RESIDENT bindings
 *    only: HOST memory is staged per call, which a graph cannot replay).
 *    Its parameter words go to a block the capture allocated at begin (the
 *    capture cannot allocate), uploaded once by vyre_capture_end.
 *  - vyre_capture_end ends it into a graph (nodes numbered in the order the
 *    driver lists them). The graph keeps the dispatches' programs and
 *    buffers alive; memory other code enqueued work on must stay allocated
 *    while the graph may run, which the library cannot see. A replay takes
 *    no bindings, parameter words, scalars or element count (as a sequence's
 *    graph). Kernel nodes of a captured graph report their function and
 *    shape but no arguments (argument_count 0: the library does not know
 *    their parameter lists) and cannot be set through the library; memset
 *    nodes can (vyre_graph_node_info_set).
 *
 * Modes (the driver's): THREAD_LOCAL (default) forbids the capturing
 * thread's own "unsafe" CUDA calls while the capture is open (allocations,
 * frees, module loads, synchronisations: most vyre calls on any context
 * that allocate or wait), GLOBAL forbids them to every thread of the
 * process, RELAXED to none. Such a call fails (DRIVER_ERROR naming the
 * capture) and invalidates the capture. So does a call that cannot be
 * captured (synchronising or querying the capture stream, a dependency on
 * the legacy stream, an event wait that would merge another stream's
 * unrelated work): vyre_capture_end then says so (INVALID_STATE) and the
 * context can begin another capture.
 *
 * Refusals: a second vyre_capture_begin on a context with one open, and
 * vyre_capture_dispatch or vyre_capture_end with none, are INVALID_STATE;
 * vyre_capture_end from another thread than the one that began a capture
 * not in RELAXED mode is INVALID_STATE (the driver would refuse it);
 * vyre_context_destroy while a capture is open is INVALID_STATE and
 * destroys nothing (end the capture first); the capture stream passed to
 * vyre_graph_launch, vyre_context_wait_stream or _signal_stream is
 * INVALID_ARGUMENT (their event joins would sweep the work stream, and so
 * other threads' work, into the capture: use vyre_capture_dispatch).
 */

enum {
  VYRE_CAPTURE_MODE_THREAD_LOCAL = 0,
  VYRE_CAPTURE_MODE_GLOBAL = 1,
  VYRE_CAPTURE_MODE_RELAXED = 2
};

typedef struct vyre_capture_desc {
  uint32_t struct_size;
  /** VYRE_CAPTURE_MODE_*. */
  uint32_t mode;
  /** Bytes of parameter words the capture's dispatches may use in all, each
   *  dispatch's rounded up to 256 (0: 64 KiB). Over it, vyre_capture_dispatch
   *  is LIMIT_EXCEEDED. */
  uint64_t param_bytes;
} vyre_capture_desc;
#define VYRE_CAPTURE_DESC_INIT {sizeof(vyre_capture_desc), VYRE_CAPTURE_MODE_THREAD_LOCAL, 0}

/** Begins capturing work on a stream of `context` and returns that stream
 *  (a CUstream, as an integer) in *out_cu_stream. `desc` may be NULL (the
 *  defaults). */
VYRE_API vyre_status vyre_capture_begin(vyre_context context, const vyre_capture_desc* desc,
                                        uint64_t* out_cu_stream);

/** Enqueues a dispatch of `program` into its context's open capture: as
 *  vyre_dispatch_async would run it (OUTPUT bindings zeroed, fixpoint
 *  iterations), but only when the captured graph is replayed. RESIDENT
 *  bindings only (a HOST one is INVALID_ARGUMENT); not cooperative
 *  (INVALID_ARGUMENT). Any thread may call it. */
VYRE_API vyre_status vyre_capture_dispatch(vyre_program program, const vyre_dispatch_desc* desc);

/** Ends the context's open capture into a graph. A capture the driver
 *  invalidated is INVALID_STATE (and ended: the context can begin again). */
VYRE_API vyre_status vyre_capture_end(vyre_context context, vyre_graph* out);

/* ------------------------------------------------------------------------ */
/* Loops on the device                                                       */
/* ------------------------------------------------------------------------ */

/*
 * A loop graph runs another graph (its body: a recorded dispatch, a recorded
 * sequence or captured work) again and again on the device while the body
 * asks for another round, with an upper bound, in one launch: no host round
 * trip per iteration (a CUDA conditional WHILE node, CUDA 12.4+ drivers).
 *
 * The condition is one u32 word in a RESIDENT buffer of the body's context.
 * The loop zeroes the word, runs the body, and runs it again (the word zeroed
 * again) while the body left the word non-zero and fewer than max_iterations
 * have run. So a fixpoint kernel writes any non-zero value to the word when
 * it changed something (many threads may write it; no atomics needed). Each
 * launch runs the body at least once. After a launch the word is 0 when the
 * body asked for no more, non-zero when the bound stopped it; the number of
 * iterations run is left in the optional count word. Each iteration costs
 * the body, one tiny kernel of the library's and the driver's relaunch of
 * the loop body (about 4.5 us on an H100/H200, docs/PERFORMANCE.md).
 *
 * The loop runs the body as it stands when the loop is created (bindings,
 * rebinding and node changes made by then): replays and node changes of the
 * body made later do not reach the loop. The loop keeps the body, and so its
 * buffers and programs, alive. A replay of the loop takes no bindings,
 * parameter words, scalars or element count (pass a NULL desc); launch it
 * with vyre_graph_replay, _replay_async or vyre_graph_launch. Its nodes are
 * the words' reset (a KERNEL) and the loop (a CONDITIONAL).
 *
 * Refused: a body with HOST bindings (their copies would run every
 * iteration; record with RESIDENT bindings) or of another context than the
 * buffers (INVALID_ARGUMENT); a driver older than CUDA 12.4
 * (DRIVER_TOO_OLD). The loop's own kernel is machine code for compute
 * capability 7.5 and newer (it calls the device runtime, which cannot be
 * JIT-compiled from PTX).
 */

typedef struct vyre_graph_loop_desc {
  uint32_t struct_size;
  /** Iterations per launch at most (>= 1). */
  uint32_t max_iterations;
  /** The condition word: a RESIDENT buffer of the body's context and a
   *  4-byte-aligned offset of a u32 inside it. */
  vyre_buffer condition_buffer;
  uint64_t condition_offset;
  /** Optional ({0}: none): where each launch leaves the number of iterations
   *  it ran, a u32 at a 4-byte-aligned offset of a RESIDENT buffer of the
   *  same context (it may share the condition's buffer, not its word). */
  vyre_buffer count_buffer;
  uint64_t count_offset;
} vyre_graph_loop_desc;
#define VYRE_GRAPH_LOOP_DESC_INIT {sizeof(vyre_graph_loop_desc), 1, {0}, 0, {0}, 0}

/** Creates a loop graph over `body` (see above) in *out. */
VYRE_API vyre_status vyre_graph_loop_create(vyre_graph body, const vyre_graph_loop_desc* desc,
                                            vyre_graph* out);

/* ------------------------------------------------------------------------ */
/* Sequences: many steps over resident buffers, eagerly or as one graph      */
/* ------------------------------------------------------------------------ */

typedef enum vyre_step_kind {
  /** Run `program` with `dispatch` (RESIDENT bindings only). */
  VYRE_STEP_DISPATCH = 1,
  /** Set `bytes` bytes of `buffer` at `offset` to `fill_byte`. */
  VYRE_STEP_FILL = 2,
  /** Copy `bytes` from `src_buffer` at `src_offset` to `buffer` at `offset`
   *  (the ranges must not overlap). */
  VYRE_STEP_COPY = 3,
  /** Copy `bytes` from host `host_src` to `buffer` at `offset`. */
  VYRE_STEP_UPLOAD = 4,
  /** Copy `bytes` from `buffer` at `offset` to host `host_dst`. */
  VYRE_STEP_DOWNLOAD = 5,
  VYRE_STEP_KIND_FORCE32 = 0x7FFFFFFF
} vyre_step_kind;

typedef struct vyre_sequence_step {
  uint32_t struct_size;
  vyre_step_kind kind;
  /* DISPATCH: the descriptor is copied (parameter words and scalars too). */
  vyre_program program;
  const vyre_dispatch_desc* dispatch;
  /* FILL, COPY, UPLOAD: the destination; DOWNLOAD: the source. */
  vyre_buffer buffer;
  uint64_t offset;
  uint64_t bytes;
  /* COPY: the source. */
  vyre_buffer src_buffer;
  uint64_t src_offset;
  /* UPLOAD / DOWNLOAD: host memory, valid for the sequence's life. */
  const void* host_src;
  void* host_dst;
  /* FILL: the byte value (0..255). */
  uint32_t fill_byte;
  uint32_t reserved0;
} vyre_sequence_step;
#define VYRE_SEQUENCE_STEP_INIT {sizeof(vyre_sequence_step), VYRE_STEP_FILL, {0}, NULL, {0}, 0, 0, {0}, 0, NULL, NULL, 0, 0}

typedef struct vyre_sequence_desc {
  uint32_t struct_size;
  /** Times the block [repeat_first, repeat_first + repeat_step_count) runs
   *  (>= 1 when there is a block; 0 when there is none). */
  uint32_t repeat_count;
  const vyre_sequence_step* steps;
  size_t step_count;
  size_t repeat_first;
  size_t repeat_step_count;
} vyre_sequence_desc;
#define VYRE_SEQUENCE_DESC_INIT {sizeof(vyre_sequence_desc), 0, NULL, 0, 0, 0}

/*
 * Semantics shared by vyre_sequence_run and a graph recorded from the
 * sequence (so both give identical results): steps run in order on the
 * context's work stream; DISPATCH steps behave as vyre_dispatch (OUTPUT
 * bindings zeroed, fixpoint iterations); UPLOAD steps read their host memory
 * when the run starts and DOWNLOAD steps write theirs when it ends (a step
 * repeated N times leaves its last result). The sequence keeps its buffers
 * and programs alive; a run after one of its buffers was freed is refused.
 */

/** Validates the steps and builds a sequence. */
VYRE_API vyre_status vyre_sequence_create(vyre_context context, const vyre_sequence_desc* desc,
                                          vyre_sequence* out);

/** Runs the steps eagerly (one stream, one synchronisation at the end).
 *  `out_timing` may be NULL. */
VYRE_API vyre_status vyre_sequence_run(vyre_sequence sequence, vyre_timing* out_timing);

/** Captures the whole sequence as one graph; replay it with
 *  vyre_graph_replay (desc NULL). The graph keeps the sequence's resources
 *  alive even if the sequence is destroyed. */
VYRE_API vyre_status vyre_sequence_record(vyre_sequence sequence, vyre_graph* out);

/** Destroys a sequence; its handle is stale at once. */
VYRE_API vyre_status vyre_sequence_destroy(vyre_sequence sequence);

/* ------------------------------------------------------------------------ */
/* E-graph congruence                                                        */
/* ------------------------------------------------------------------------ */

/*
 * An e-graph image holds an e-graph's e-nodes ("rows") as u32 columns and a
 * union-find over its e-classes, on the GPU (in one resident slab) or on the
 * host (the CPU reference: egg's rebuild semantics, one or many threads).
 *
 * Row r is the e-node op[r](children[off[r]], ..., children[off[r]+len[r]-1])
 * in e-class row_classes[r]; children are e-class ids. Op ids carry leaf
 * payloads (Const(1) and Const(2) are different ops). Two rows are congruent
 * when they have the same op, the same arity and, child by child, the same
 * canonical class. Canonical class of c: the minimum class id of c's set.
 *
 * A congruence pass returns, without merging, the pairs of canonical
 * classes that congruent rows put in different classes. A rebuild applies
 * optional unions, then repeats pass-and-merge on the device until a pass
 * finds nothing; the union-find state stays with the image for the next
 * rebuild (VYRE_EGRAPH_REBUILD_RESET starts again from every class alone).
 * Rows are grouped by a hash of their canonical form, and every candidate is
 * confirmed by comparing op, arity and every child, so a hash collision can
 * never merge anything. Results are the same on every run and device.
 */

typedef enum vyre_egraph_device {
  /** On the GPU of vyre_egraph_image_desc.context. */
  VYRE_EGRAPH_DEVICE_GPU = 1,
  /** The library's CPU reference; needs no driver or GPU (context {0}). */
  VYRE_EGRAPH_DEVICE_CPU = 2,
  VYRE_EGRAPH_DEVICE_FORCE32 = 0x7FFFFFFF
} vyre_egraph_device;

typedef struct vyre_egraph_image_desc {
  uint32_t struct_size;
  vyre_egraph_device device;
  /** GPU: the context the image lives on. CPU: {0}. */
  vyre_context context;
  /** Rows (e-nodes); 0 is valid (nothing to merge). At most 2^32 - 1. */
  uint64_t row_count;
  /** Every class id (row_classes, children) is below this; at most 2^32 - 1. */
  uint64_t class_count;
  /** Entries of `children`. */
  uint64_t child_count;
  /** row_count entries each: the row's e-class, op id, first child and
   *  number of children. Children of one row are children[off .. off+len). */
  const uint32_t* row_classes;
  const uint32_t* row_ops;
  const uint32_t* child_offsets;
  const uint32_t* child_lengths;
  /** Optional (NULL: computed): a caller's row signatures, kept with the
   *  columns. Grouping always uses the library's own hash of the canonical
   *  form, so a signature can neither merge nor separate rows. */
  const uint32_t* row_signatures;
  /** child_count class ids. */
  const uint32_t* children;
  /** CPU: worker threads (0 = every core, 1 = single-threaded). */
  uint32_t cpu_threads;
  uint32_t reserved0;
  /** Optional room reserved for vyre_egraph_image_append (0: exactly the
   *  counts above; a smaller value than the count is taken as the count).
   *  Appends past the capacity grow it to the next power of two. */
  uint64_t row_capacity;
  uint64_t class_capacity;
  uint64_t child_capacity;
} vyre_egraph_image_desc;
#define VYRE_EGRAPH_IMAGE_DESC_INIT {sizeof(vyre_egraph_image_desc), VYRE_EGRAPH_DEVICE_GPU, {0}, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0}

/** Validates the columns (equal row counts, every child range inside
 *  `children`, class ids below class_count, sizes that fit) and builds an
 *  image; every class starts alone. */
VYRE_API vyre_status vyre_egraph_image_create(const vyre_egraph_image_desc* desc,
                                              vyre_egraph_image* out);

/** Destroys an image; its handle is stale at once (a rebuild in flight keeps
 *  its memory until it completes). */
VYRE_API vyre_status vyre_egraph_image_destroy(vyre_egraph_image image);

typedef enum vyre_egraph_column {
  VYRE_EGRAPH_COLUMN_ROW_CLASSES = 1,
  VYRE_EGRAPH_COLUMN_ROW_OPS = 2,
  VYRE_EGRAPH_COLUMN_CHILD_OFFSETS = 3,
  VYRE_EGRAPH_COLUMN_CHILD_LENGTHS = 4,
  VYRE_EGRAPH_COLUMN_ROW_SIGNATURES = 5,
  VYRE_EGRAPH_COLUMN_CHILDREN = 6,
  /** class_count entries: the canonical class of every class (read only). */
  VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES = 7,
  VYRE_EGRAPH_COLUMN_FORCE32 = 0x7FFFFFFF
} vyre_egraph_column;

/** Copies entries [first, first + count) of a column into `dst`. */
VYRE_API vyre_status vyre_egraph_image_read(vyre_egraph_image image, vyre_egraph_column column,
                                            uint64_t first, uint64_t count, uint32_t* dst);

/** Overwrites entries [first, first + count) of a row column or of the
 *  children (not the canonical classes) in place. The rows affected are
 *  validated as at creation before anything changes. */
VYRE_API vyre_status vyre_egraph_image_write(vyre_egraph_image image, vyre_egraph_column column,
                                             uint64_t first, uint64_t count,
                                             const uint32_t* src);

typedef struct vyre_egraph_image_info {
  uint32_t struct_size;
  vyre_egraph_device device;
  vyre_context context;
  uint64_t row_count;
  uint64_t class_count;
  uint64_t child_count;
  /** Distinct canonical classes now. */
  uint64_t canonical_class_count;
  /** Device (GPU) or host (CPU) bytes the image and its scratch hold. */
  uint64_t bytes;
  /** Rows, classes and children the image holds before an append must grow
   *  it (copying its rows device to device; see vyre_egraph_image_append). */
  uint64_t row_capacity;
  uint64_t class_capacity;
  uint64_t child_capacity;
  /** Classes whose canonical class the last rebuild changed
   *  (vyre_egraph_changed_read). */
  uint64_t changed_class_count;
} vyre_egraph_image_info;
#define VYRE_EGRAPH_IMAGE_INFO_INIT {sizeof(vyre_egraph_image_info), VYRE_EGRAPH_DEVICE_GPU, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** Describes an image. out->struct_size must be set. */
VYRE_API vyre_status vyre_egraph_image_info_get(vyre_egraph_image image,
                                                vyre_egraph_image_info* out);

/** One congruence pass, merging nothing: writes the deduplicated pairs
 *  (left, right) of canonical classes, left < right, sorted, as 2 u32 each
 *  into `pairs` (room for pair_capacity pairs; may be NULL with capacity 0
 *  to ask the count). Each congruence group of rows contributes (m, c) for
 *  its minimum canonical class m and every other class c in it.
 *  *out_pair_count receives the number of pairs; if it exceeds
 *  pair_capacity, nothing is written and the call is OUT_OF_RANGE, naming
 *  the capacity needed (never a silent truncation). */
VYRE_API vyre_status vyre_egraph_pass(vyre_egraph_image image, uint32_t* pairs,
                                      uint64_t pair_capacity, uint64_t* out_pair_count);

enum {
  /** Start from every class alone instead of the image's current state. */
  VYRE_EGRAPH_REBUILD_RESET = 1u << 0,
  /** Record device events so the result reports device_ns. */
  VYRE_EGRAPH_REBUILD_DEVICE_TIMING = 1u << 1,
  /** Testing: group rows by a deliberately weak hash (op and arity only), so
   *  nearly every candidate is a collision that must be refused. GPU images
   *  keep it for their passes until a rebuild without it. */
  VYRE_EGRAPH_REBUILD_COLLIDING_HASH = 1u << 2,
  /** GPU images: run every round on the device in one launch of a loop
   *  graph (vyre_graph_loop_create's conditional WHILE node) that stops at
   *  the fixpoint, instead of batches of rounds with the host reading the
   *  counters between them. No rounds run past the fixpoint and the host
   *  waits once; the loop graph is built for the rebuild (tens of us of host
   *  time). Pays on rebuilds of many rounds (docs/PERFORMANCE.md). Same
   *  results. DRIVER_TOO_OLD on drivers older than CUDA 12.4; ignored by
   *  CPU images. */
  VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS = 1u << 3
};

typedef struct vyre_egraph_rebuild_result {
  uint32_t struct_size;
  /** Passes run, the last of which found nothing. */
  uint32_t rounds;
  /** Classes merged by congruence, and by the desc's unions. */
  uint64_t merges;
  uint64_t union_merges;
  /** Distinct canonical classes before the unions and after the rebuild. */
  uint64_t classes_before;
  uint64_t classes_after;
  /** Row visits over all rounds. A full round (the first rebuild of an
   *  image, VYRE_EGRAPH_REBUILD_RESET, after a column write, and on a GPU
   *  image after a pass, which reuses the group table's memory) visits every
   *  row; an incremental round only the rows appended since the last
   *  rebuild and the rows with a child whose class was merged. */
  uint64_t rows_visited;
  /** Device time of the rebuild (VYRE_EGRAPH_REBUILD_DEVICE_TIMING), and
   *  host time from the call to the end of the wait. */
  uint64_t device_ns;
  uint64_t wall_ns;
  /** Classes whose canonical class this rebuild changed (its unions
   *  included); vyre_egraph_changed_read lists them. */
  uint64_t changed_class_count;
  /** Rounds that visited every row (0 for a rebuild that was incremental
   *  throughout). */
  uint32_t full_rounds;
  uint32_t reserved0;
} vyre_egraph_rebuild_result;
#define VYRE_EGRAPH_REBUILD_RESULT_INIT {sizeof(vyre_egraph_rebuild_result), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct vyre_egraph_rebuild_desc {
  uint32_t struct_size;
  /** VYRE_EGRAPH_REBUILD_* bits. */
  uint32_t flags;
  /** union_count pairs of class ids (2 u32 each) to merge first, e.g. what an
   *  e-matching step found. Read before the call returns. */
  const uint32_t* unions;
  uint64_t union_count;
  /** Optional: receives the canonical class of every class (class_count
   *  entries) when the rebuild is waited on. */
  uint32_t* canonical_out;
  /** Optional (asynchronous rebuilds): receives the result on the wait. */
  vyre_egraph_rebuild_result* result_out;
  /** Stop after this many rounds even without a fixpoint (0: no limit). */
  uint32_t max_rounds;
  uint32_t reserved0;
} vyre_egraph_rebuild_desc;
#define VYRE_EGRAPH_REBUILD_DESC_INIT {sizeof(vyre_egraph_rebuild_desc), 0, NULL, 0, NULL, NULL, 0, 0}

/** Applies the unions and rebuilds to the fixpoint (congruence closure).
 *  `desc` may be NULL (no unions); `out` may be NULL. */
VYRE_API vyre_status vyre_egraph_rebuild(vyre_egraph_image image,
                                         const vyre_egraph_rebuild_desc* desc,
                                         vyre_egraph_rebuild_result* out);

/** Enqueues a rebuild (GPU images) and returns a pending handle; the wait
 *  finishes it (rounds beyond the first batch run there) and writes
 *  canonical_out and result_out. A CPU image's rebuild runs to completion
 *  inside this call. While the pending is unwaited, other calls on the image
 *  are INVALID_STATE; releasing the pending finishes the rebuild. */
VYRE_API vyre_status vyre_egraph_rebuild_async(vyre_egraph_image image,
                                               const vyre_egraph_rebuild_desc* desc,
                                               vyre_pending* out);

/* --- Growing images ----------------------------------------------------
 *
 * A saturation loop (match, add e-nodes, union, rebuild, repeat) grows its
 * e-graph in place: vyre_egraph_image_append adds rows and classes, and the
 * next rebuild is incremental. It visits the appended rows and, through a
 * parent index kept with the image (class -> rows that name it as a child),
 * only the rows whose children's classes the unions and merges changed,
 * keeping the canonical forms of every other row from the rebuilds before
 * (egg's worklist). Its partition is the one a rebuild of everything at once
 * finds. vyre_egraph_changed_read then lists the classes whose canonical
 * class changed, so an e-matcher updates its own indices from them alone.
 */

typedef struct vyre_egraph_append_desc {
  uint32_t struct_size;
  uint32_t reserved0;
  /** New classes, numbered from the image's class_count on; each starts
   *  alone. */
  uint64_t class_count;
  /** Rows (e-nodes) to append, after the image's rows. */
  uint64_t row_count;
  /** Entries of `children`. */
  uint64_t child_count;
  /** row_count entries each, as at creation; row_classes and children may
   *  name any class below the image's class_count plus this class_count.
   *  child_offsets index this desc's `children` (from 0, in row order). */
  const uint32_t* row_classes;
  const uint32_t* row_ops;
  const uint32_t* child_offsets;
  const uint32_t* child_lengths;
  /** Optional (NULL: computed), as at creation. */
  const uint32_t* row_signatures;
  const uint32_t* children;
} vyre_egraph_append_desc;
#define VYRE_EGRAPH_APPEND_DESC_INIT {sizeof(vyre_egraph_append_desc), 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL}

/** Appends classes and rows to an image in place. The new rows are validated
 *  as at creation (class ids, child ranges inside the desc's children); a
 *  refused append changes nothing. Within the image's capacity only the new
 *  rows are copied; past it the image grows to the next power of two of
 *  what it needs, copying its columns device to device (never re-uploading
 *  them), and the union-find and the canonical classes are kept. The next
 *  rebuild visits the new rows. INVALID_STATE while an asynchronous rebuild
 *  of the image is unwaited. */
VYRE_API vyre_status vyre_egraph_image_append(vyre_egraph_image image,
                                              const vyre_egraph_append_desc* desc);

/** The classes whose canonical class the image's last rebuild changed, as
 *  pairs (class, new canonical class), 2 u32 each, sorted by class: room for
 *  pair_capacity pairs in `pairs` (NULL with capacity 0 asks the count).
 *  *out_pair_count receives the count; if it exceeds pair_capacity nothing
 *  is written and the call is OUT_OF_RANGE, naming the room needed. With
 *  VYRE_EGRAPH_REBUILD_RESET the rebuild's start is every class alone. */
VYRE_API vyre_status vyre_egraph_changed_read(vyre_egraph_image image, uint32_t* pairs,
                                              uint64_t pair_capacity, uint64_t* out_pair_count);

#ifdef __cplusplus
} /* extern "C" */


#endif

#endif /* VYRE_CUDA_H_ */
