/* Compiled as C99 and C11 with -Wall -Wextra -pedantic -Werror (see
 * CMakeLists.txt): vyre_cuda.h must be clean C, and every _INIT macro must
 * initialise its struct completely. */
#include "vyre_cuda.h"

#include <stddef.h>

/* Every function, by address: the prototypes exist and have these types. */
typedef void (*any_fn)(void);
static const any_fn kFunctions[] = {
    (any_fn)vyre_version,          (any_fn)vyre_status_name,
    (any_fn)vyre_last_error,       (any_fn)vyre_last_error_log,
    (any_fn)vyre_set_log_callback,
    (any_fn)vyre_device_count,     (any_fn)vyre_device_info_get,
    (any_fn)vyre_device_can_access_peer,
    (any_fn)vyre_context_create,   (any_fn)vyre_context_destroy,
    (any_fn)vyre_context_device_info, (any_fn)vyre_context_telemetry,
    (any_fn)vyre_context_trim,     (any_fn)vyre_context_selftest,
    (any_fn)vyre_buffer_alloc,
    (any_fn)vyre_buffer_free,      (any_fn)vyre_buffer_upload,
    (any_fn)vyre_buffer_download,  (any_fn)vyre_buffer_upload_ranges,
    (any_fn)vyre_buffer_download_ranges, (any_fn)vyre_buffer_info_get,
    (any_fn)vyre_buffer_copy,      (any_fn)vyre_buffer_copy_async,
    (any_fn)vyre_buffer_export_ipc, (any_fn)vyre_buffer_import_ipc,
    (any_fn)vyre_buffer_wrap,      (any_fn)vyre_context_wait_stream,
    (any_fn)vyre_context_signal_stream,
    (any_fn)vyre_program_create,   (any_fn)vyre_program_destroy,
    (any_fn)vyre_dispatch,         (any_fn)vyre_dispatch_async,
    (any_fn)vyre_pending_poll,     (any_fn)vyre_pending_wait,
    (any_fn)vyre_pending_timing,   (any_fn)vyre_pending_release,
    (any_fn)vyre_graph_launch,    (any_fn)vyre_graph_node_info_get,    (any_fn)vyre_graph_node_info_set,    (any_fn)vyre_graph_record,     (any_fn)vyre_graph_replay,
    (any_fn)vyre_graph_replay_async, (any_fn)vyre_graph_destroy,
    (any_fn)vyre_graph_info_get,   (any_fn)vyre_graph_node_kind_get,
    (any_fn)vyre_graph_kernel_node_update,
    (any_fn)vyre_sequence_create,  (any_fn)vyre_sequence_run,
    (any_fn)vyre_sequence_record,  (any_fn)vyre_sequence_destroy,
    (any_fn)vyre_capture_begin,    (any_fn)vyre_capture_dispatch, (any_fn)vyre_capture_end,
    (any_fn)vyre_graph_loop_create,
    (any_fn)vyre_egraph_image_create, (any_fn)vyre_egraph_image_destroy,
    (any_fn)vyre_egraph_image_read, (any_fn)vyre_egraph_image_write,
    (any_fn)vyre_egraph_image_info_get, (any_fn)vyre_egraph_pass,
    (any_fn)vyre_egraph_rebuild,   (any_fn)vyre_egraph_rebuild_async,
};

size_t header_check_function_count(void);
size_t header_check_function_count(void) { return sizeof(kFunctions) / sizeof(kFunctions[0]); }

int header_check_inits(void);
int header_check_inits(void) {
  vyre_device_info device_info = VYRE_DEVICE_INFO_INIT;
  vyre_context_desc context_desc = VYRE_CONTEXT_DESC_INIT;
  vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
  vyre_buffer_info buffer_info = VYRE_BUFFER_INFO_INIT;
  vyre_buffer_wrap_desc wrap_desc = VYRE_BUFFER_WRAP_DESC_INIT;
  vyre_buffer_copy_desc copy_desc = VYRE_BUFFER_COPY_DESC_INIT;
  vyre_binding_decl binding_decl = VYRE_BINDING_DECL_INIT;
  vyre_program_desc program_desc = VYRE_PROGRAM_DESC_INIT;
  vyre_dispatch_binding dispatch_binding = VYRE_DISPATCH_BINDING_INIT;
  vyre_dispatch_desc dispatch_desc = VYRE_DISPATCH_DESC_INIT;
  vyre_timing timing = VYRE_TIMING_INIT;
  vyre_graph_replay_desc replay_desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  vyre_graph_info graph_info = VYRE_GRAPH_INFO_INIT;
  vyre_kernel_node_update node_update = VYRE_KERNEL_NODE_UPDATE_INIT;
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  vyre_sequence_desc sequence_desc = VYRE_SEQUENCE_DESC_INIT;
  vyre_egraph_image_desc egraph_desc = VYRE_EGRAPH_IMAGE_DESC_INIT;
  vyre_egraph_image_info egraph_info = VYRE_EGRAPH_IMAGE_INFO_INIT;
  vyre_egraph_rebuild_desc rebuild_desc = VYRE_EGRAPH_REBUILD_DESC_INIT;
  vyre_egraph_rebuild_result rebuild_result = VYRE_EGRAPH_REBUILD_RESULT_INIT;
  vyre_egraph_image egraph = {0};
  uint32_t rebuild_flags = VYRE_EGRAPH_REBUILD_RESET | VYRE_EGRAPH_REBUILD_DEVICE_TIMING |
                           VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
  vyre_graph graph = {0};
  vyre_sequence sequence = {0};
  vyre_graph_node_kind node_kind = VYRE_GRAPH_NODE_KERNEL;
  uint32_t update_flags = VYRE_KERNEL_NODE_UPDATE_GRID | VYRE_KERNEL_NODE_UPDATE_SCALARS;
  vyre_context context = {0};
  vyre_buffer buffer = {0};
  vyre_program program = {0};
  vyre_pending pending = {0};
  vyre_upload_range upload = {0, 0, NULL};
  vyre_download_range download = {0, 0, NULL};
  vyre_kernel_param param = {VYRE_PARAM_BINDING, 0};
  vyre_log_callback callback = NULL;
  uint32_t flags = VYRE_DISPATCH_FLAG_DEVICE_TIMING | VYRE_DISPATCH_FLAG_COOPERATIVE;
  uint64_t forever = VYRE_WAIT_FOREVER;
  int ok = 1;
  ok &= device_info.struct_size == sizeof(vyre_device_info);
  ok &= context_desc.struct_size == sizeof(vyre_context_desc);
  ok &= telemetry.struct_size == sizeof(vyre_telemetry);
  ok &= buffer_info.struct_size == sizeof(vyre_buffer_info) && buffer_info.flags == 0 &&
        VYRE_BUFFER_INFO_FLAG_BORROWED == 1u;
  ok &= wrap_desc.struct_size == sizeof(vyre_buffer_wrap_desc) && wrap_desc.flags == 0 &&
        wrap_desc.device_pointer == 0 && wrap_desc.bytes == 0;
  ok &= copy_desc.struct_size == sizeof(vyre_buffer_copy_desc) && copy_desc.flags == 0 &&
        copy_desc.src.bits == 0 && copy_desc.dst.bits == 0 && copy_desc.bytes == 0 &&
        VYRE_BUFFER_COPY_FLAG_STAGED == 1u;
  ok &= device_info.peer_access_mask == 0;
  ok &= binding_decl.struct_size == sizeof(vyre_binding_decl);
  ok &= program_desc.struct_size == sizeof(vyre_program_desc);
  ok &= dispatch_binding.struct_size == sizeof(vyre_dispatch_binding);
  ok &= dispatch_desc.struct_size == sizeof(vyre_dispatch_desc);
  ok &= timing.struct_size == sizeof(vyre_timing);
  ok &= replay_desc.struct_size == sizeof(vyre_graph_replay_desc);
  ok &= graph_info.struct_size == sizeof(vyre_graph_info);
  ok &= node_update.struct_size == sizeof(vyre_kernel_node_update);
  ok &= step.struct_size == sizeof(vyre_sequence_step) && step.kind == VYRE_STEP_FILL;
  ok &= sequence_desc.struct_size == sizeof(vyre_sequence_desc);
  ok &= graph.bits == 0 && sequence.bits == 0 && node_kind == 1 && update_flags == 3u;
  ok &= VYRE_STATUS_SHAPE_MISMATCH == 20;
  ok &= VYRE_STATUS_DEVICE_FAULT == 21;
  ok &= egraph_desc.struct_size == sizeof(vyre_egraph_image_desc) &&
        egraph_desc.device == VYRE_EGRAPH_DEVICE_GPU;
  ok &= egraph_info.struct_size == sizeof(vyre_egraph_image_info);
  ok &= rebuild_desc.struct_size == sizeof(vyre_egraph_rebuild_desc);
  ok &= rebuild_result.struct_size == sizeof(vyre_egraph_rebuild_result);
  ok &= egraph.bits == 0 && rebuild_flags == 7u && VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES == 7;
  ok &= context.bits == 0 && buffer.bits == 0 && program.bits == 0 && pending.bits == 0;
  ok &= upload.bytes == 0 && download.bytes == 0 && param.index == 0 && callback == NULL;
  ok &= flags == 3u && forever == UINT64_MAX;
  ok &= VYRE_CUDA_VERSION == VYRE_MAKE_VERSION(VYRE_CUDA_VERSION_MAJOR, VYRE_CUDA_VERSION_MINOR,
                                               VYRE_CUDA_VERSION_PATCH);
  return ok;
}
