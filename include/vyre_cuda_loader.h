/* vyre_cuda_loader.h - use vyre-cuda through dlopen, without linking it.
 *
 * One call opens the library, checks that its major version is this
 * header's, and fills a table with every vyre_* function; the table's
 * members are named like the functions:
 *
 *   vyre_cuda_loader vc;
 *   char why[1024];
 *   if (vyre_cuda_loader_open(NULL, &vc, why, sizeof why) != 0) {
 *     fprintf(stderr, "%s\n", why);  // "<what failed>: <why>. Fix: <what to do>."
 *     return 2;
 *   }
 *   vyre_context context = {0};
 *   vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
 *   vyre_status status = vc.vyre_context_create(&desc, &context);
 *   ...
 *   vyre_cuda_loader_close(&vc);
 *
 * Header-only (static inline; C99 or C++), POSIX dlopen/dlsym (link -ldl
 * where glibc is older than 2.34). The function list below is checked
 * against vyre_cuda.h and the library's exports by the abi.loader test, so
 * it cannot drift from the API. */
#ifndef VYRE_CUDA_LOADER_H_
#define VYRE_CUDA_LOADER_H_

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "vyre_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's file name for dlopen's search (LD_LIBRARY_PATH, the
 * runpath, the system's directories) when no path is given. */
#define VYRE_CUDA_LIBRARY_SONAME "libvyre_cuda.so.0"

/* Every function of vyre_cuda.h: X(return type, name, (parameters)). */
#define VYRE_CUDA_LOADER_FUNCTIONS(X) \
  X(uint32_t, vyre_version, (void)) \
  X(const char*, vyre_status_name, (vyre_status status)) \
  X(vyre_status, vyre_last_error, (vyre_status* out_status, int32_t* out_cu_result, char* message, size_t message_capacity, size_t* out_message_length)) \
  X(vyre_status, vyre_last_error_log, (char* log, size_t log_capacity, size_t* out_log_length)) \
  X(vyre_status, vyre_set_log_callback, (vyre_log_callback callback, void* user_data, vyre_log_level max_level)) \
  X(vyre_status, vyre_device_count, (uint32_t* out_count)) \
  X(vyre_status, vyre_device_info_get, (uint32_t ordinal, vyre_device_info* out)) \
  X(vyre_status, vyre_device_can_access_peer, (uint32_t ordinal, uint32_t peer_ordinal, uint32_t* out_can_access)) \
  X(vyre_status, vyre_context_create, (const vyre_context_desc* desc, vyre_context* out)) \
  X(vyre_status, vyre_context_destroy, (vyre_context context)) \
  X(vyre_status, vyre_context_device_info, (vyre_context context, vyre_device_info* out)) \
  X(vyre_status, vyre_context_telemetry, (vyre_context context, vyre_telemetry* out)) \
  X(vyre_status, vyre_context_trim, (vyre_context context)) \
  X(vyre_status, vyre_context_selftest, (vyre_context context)) \
  X(vyre_status, vyre_buffer_alloc, (vyre_context context, uint64_t bytes, vyre_buffer* out)) \
  X(vyre_status, vyre_buffer_free, (vyre_buffer buffer)) \
  X(vyre_status, vyre_buffer_upload, (vyre_buffer buffer, uint64_t offset, const void* src, uint64_t bytes)) \
  X(vyre_status, vyre_buffer_download, (vyre_buffer buffer, uint64_t offset, void* dst, uint64_t bytes)) \
  X(vyre_status, vyre_buffer_upload_ranges, (vyre_buffer buffer, const vyre_upload_range* ranges, size_t range_count)) \
  X(vyre_status, vyre_buffer_download_ranges, (vyre_buffer buffer, const vyre_download_range* ranges, size_t range_count)) \
  X(vyre_status, vyre_buffer_info_get, (vyre_buffer buffer, vyre_buffer_info* out)) \
  X(vyre_status, vyre_buffer_copy, (const vyre_buffer_copy_desc* desc)) \
  X(vyre_status, vyre_buffer_copy_async, (const vyre_buffer_copy_desc* desc, vyre_pending* out)) \
  X(vyre_status, vyre_buffer_export_ipc, (vyre_buffer buffer, vyre_ipc_handle* out)) \
  X(vyre_status, vyre_buffer_import_ipc, (vyre_context context, const vyre_ipc_handle* handle, vyre_buffer* out)) \
  X(vyre_status, vyre_buffer_wrap, (vyre_context context, const vyre_buffer_wrap_desc* desc, vyre_buffer* out)) \
  X(vyre_status, vyre_context_wait_stream, (vyre_context context, uint64_t cu_stream)) \
  X(vyre_status, vyre_context_signal_stream, (vyre_context context, uint64_t cu_stream)) \
  X(vyre_status, vyre_host_alloc, (vyre_context context, uint64_t bytes, void** out)) \
  X(vyre_status, vyre_host_free, (void* pointer)) \
  X(vyre_status, vyre_host_register, (vyre_context context, void* pointer, uint64_t bytes)) \
  X(vyre_status, vyre_host_unregister, (void* pointer)) \
  X(vyre_status, vyre_program_create, (vyre_context context, const vyre_program_desc* desc, vyre_program* out)) \
  X(vyre_status, vyre_program_destroy, (vyre_program program)) \
  X(vyre_status, vyre_dispatch, (vyre_program program, const vyre_dispatch_desc* desc, vyre_timing* out_timing)) \
  X(vyre_status, vyre_dispatch_async, (vyre_program program, const vyre_dispatch_desc* desc, vyre_pending* out)) \
  X(vyre_status, vyre_pending_poll, (vyre_pending pending)) \
  X(vyre_status, vyre_pending_wait, (vyre_pending pending, uint64_t timeout_ns)) \
  X(vyre_status, vyre_pending_timing, (vyre_pending pending, vyre_timing* out)) \
  X(vyre_status, vyre_pending_release, (vyre_pending pending)) \
  X(vyre_status, vyre_graph_record, (vyre_program program, const vyre_dispatch_desc* desc, vyre_graph* out)) \
  X(vyre_status, vyre_graph_replay, (vyre_graph graph, const vyre_graph_replay_desc* desc, vyre_timing* out_timing)) \
  X(vyre_status, vyre_graph_replay_async, (vyre_graph graph, const vyre_graph_replay_desc* desc, vyre_pending* out)) \
  X(vyre_status, vyre_graph_launch, (vyre_graph graph, const vyre_graph_replay_desc* desc, uint64_t cu_stream, vyre_pending* out)) \
  X(vyre_status, vyre_graph_destroy, (vyre_graph graph)) \
  X(vyre_status, vyre_graph_info_get, (vyre_graph graph, vyre_graph_info* out)) \
  X(vyre_status, vyre_graph_node_kind_get, (vyre_graph graph, uint64_t node_index, vyre_graph_node_kind* out)) \
  X(vyre_status, vyre_graph_node_info_get, (vyre_graph graph, uint64_t node_index, vyre_graph_node_info* out)) \
  X(vyre_status, vyre_graph_node_info_set, (vyre_graph graph, uint64_t node_index, const vyre_graph_node_info* info, uint32_t flags)) \
  X(vyre_status, vyre_graph_kernel_node_update, (vyre_graph graph, uint64_t node_index, const vyre_kernel_node_update* update)) \
  X(vyre_status, vyre_sequence_create, (vyre_context context, const vyre_sequence_desc* desc, vyre_sequence* out)) \
  X(vyre_status, vyre_sequence_run, (vyre_sequence sequence, vyre_timing* out_timing)) \
  X(vyre_status, vyre_sequence_record, (vyre_sequence sequence, vyre_graph* out)) \
  X(vyre_status, vyre_sequence_destroy, (vyre_sequence sequence)) \
  X(vyre_status, vyre_capture_begin, (vyre_context context, const vyre_capture_desc* desc, uint64_t* out_cu_stream)) \
  X(vyre_status, vyre_capture_dispatch, (vyre_program program, const vyre_dispatch_desc* desc)) \
  X(vyre_status, vyre_capture_end, (vyre_context context, vyre_graph* out)) \
  X(vyre_status, vyre_graph_loop_create, (vyre_graph body, const vyre_graph_loop_desc* desc, vyre_graph* out)) \
  X(vyre_status, vyre_egraph_image_create, (const vyre_egraph_image_desc* desc, vyre_egraph_image* out)) \
  X(vyre_status, vyre_egraph_image_destroy, (vyre_egraph_image image)) \
  X(vyre_status, vyre_egraph_image_read, (vyre_egraph_image image, vyre_egraph_column column, uint64_t first, uint64_t count, uint32_t* dst)) \
  X(vyre_status, vyre_egraph_image_write, (vyre_egraph_image image, vyre_egraph_column column, uint64_t first, uint64_t count, const uint32_t* src)) \
  X(vyre_status, vyre_egraph_image_info_get, (vyre_egraph_image image, vyre_egraph_image_info* out)) \
  X(vyre_status, vyre_egraph_pass, (vyre_egraph_image image, uint32_t* pairs, uint64_t pair_capacity, uint64_t* out_pair_count)) \
  X(vyre_status, vyre_egraph_rebuild, (vyre_egraph_image image, const vyre_egraph_rebuild_desc* desc, vyre_egraph_rebuild_result* out)) \
  X(vyre_status, vyre_egraph_rebuild_async, (vyre_egraph_image image, const vyre_egraph_rebuild_desc* desc, vyre_pending* out)) \
  X(vyre_status, vyre_egraph_image_append, (vyre_egraph_image image, const vyre_egraph_append_desc* desc)) \
  X(vyre_status, vyre_egraph_changed_read, (vyre_egraph_image image, uint32_t* pairs, uint64_t pair_capacity, uint64_t* out_pair_count))

typedef struct vyre_cuda_loader {
  /* dlopen's handle; NULL when not open. */
  void* library;
  /* vyre_version() of the loaded library. */
  uint32_t version;
#define VYRE_CUDA_LOADER_MEMBER(ret, name, params) ret(*name) params;
  VYRE_CUDA_LOADER_FUNCTIONS(VYRE_CUDA_LOADER_MEMBER)
#undef VYRE_CUDA_LOADER_MEMBER
} vyre_cuda_loader;

/* Closes the library (when open) and clears the table. Harmless twice. */
static inline void vyre_cuda_loader_close(vyre_cuda_loader* loader) {
  if (loader == NULL) return;
  if (loader->library != NULL) dlclose(loader->library);
  memset(loader, 0, sizeof *loader);
}

/* Opens `path` (NULL or "": VYRE_CUDA_LIBRARY_SONAME through dlopen's
 * search), checks the major version and fills *loader. Returns 0, or -1
 * with *loader cleared and, when error_capacity > 0, a NUL-terminated
 * message in `error` whose first line reads
 * "<what failed>: <why>. Fix: <what to do>.". */
static inline int vyre_cuda_loader_open(const char* path, vyre_cuda_loader* loader, char* error,
                                        size_t error_capacity) {
  const char* name = (path != NULL && path[0] != '\0') ? path : VYRE_CUDA_LIBRARY_SONAME;
  void* library;
  void* symbol;
  if (error != NULL && error_capacity > 0) error[0] = '\0';
  if (loader == NULL) {
    if (error != NULL && error_capacity > 0) {
      snprintf(error, error_capacity,
               "vyre_cuda_loader_open: loader is NULL. Fix: pass a vyre_cuda_loader to fill.");
    }
    return -1;
  }
  memset(loader, 0, sizeof *loader);
  library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char* why = dlerror();
    if (error != NULL && error_capacity > 0) {
      snprintf(error, error_capacity,
               "cannot load %s: %s. Fix: pass the library's path, or add its directory to "
               "LD_LIBRARY_PATH.",
               name, why != NULL ? why : "dlopen failed");
    }
    return -1;
  }
  loader->library = library;
#define VYRE_CUDA_LOADER_RESOLVE(ret, fn, params)                                              \
  symbol = dlsym(library, #fn);                                                                \
  if (symbol == NULL) {                                                                        \
    if (error != NULL && error_capacity > 0) {                                                 \
      snprintf(error, error_capacity,                                                          \
               "cannot load %s: it has no " #fn ", which this header (vyre-cuda %u.%u) needs. " \
               "Fix: load a vyre-cuda library of version %u.%u or later.",                    \
               name, (unsigned)VYRE_CUDA_VERSION_MAJOR, (unsigned)VYRE_CUDA_VERSION_MINOR,     \
               (unsigned)VYRE_CUDA_VERSION_MAJOR, (unsigned)VYRE_CUDA_VERSION_MINOR);          \
    }                                                                                          \
    vyre_cuda_loader_close(loader);                                                            \
    return -1;                                                                                 \
  }                                                                                            \
  memcpy((void*)&loader->fn, &symbol, sizeof symbol);
  VYRE_CUDA_LOADER_FUNCTIONS(VYRE_CUDA_LOADER_RESOLVE)
#undef VYRE_CUDA_LOADER_RESOLVE
  loader->version = loader->vyre_version();
  if (VYRE_VERSION_MAJOR_OF(loader->version) != VYRE_CUDA_VERSION_MAJOR) {
    if (error != NULL && error_capacity > 0) {
      snprintf(error, error_capacity,
               "cannot use %s: it is vyre-cuda %u.%u.%u, but this header is for major version "
               "%u. Fix: load a library of major version %u, or build against its header.",
               name, (unsigned)VYRE_VERSION_MAJOR_OF(loader->version),
               (unsigned)VYRE_VERSION_MINOR_OF(loader->version),
               (unsigned)VYRE_VERSION_PATCH_OF(loader->version),
               (unsigned)VYRE_CUDA_VERSION_MAJOR, (unsigned)VYRE_CUDA_VERSION_MAJOR);
    }
    vyre_cuda_loader_close(loader);
    return -1;
  }
  return 0;
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* VYRE_CUDA_LOADER_H_ */
