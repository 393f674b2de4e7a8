/* Prints the size and alignment of every public struct and the offset of
 * every field, one per line, sorted as written here. The abi.layout test
 * compares the output with abi/vyre_cuda.layout: a difference is an ABI
 * break (update the file only together with a major version bump, or when
 * appending fields at the end of an extensible struct). */
#include <stddef.h>
#include <stdio.h>

#include "vyre_cuda.h"

#define STRUCT(T) printf("%s size %zu align %zu\n", #T, sizeof(T), _Alignof(T))
#define FIELD(T, f) printf("%s.%s offset %zu\n", #T, #f, offsetof(T, f))
#define ENUM(e) printf("%s = %lld\n", #e, (long long)(e))

int main(void) {
  STRUCT(vyre_context);
  STRUCT(vyre_buffer);
  STRUCT(vyre_program);
  STRUCT(vyre_pending);
  STRUCT(vyre_graph);
  STRUCT(vyre_sequence);

  STRUCT(vyre_device_info);
  FIELD(vyre_device_info, struct_size);
  FIELD(vyre_device_info, ordinal);
  FIELD(vyre_device_info, name);
  FIELD(vyre_device_info, compute_capability_major);
  FIELD(vyre_device_info, compute_capability_minor);
  FIELD(vyre_device_info, total_memory_bytes);
  FIELD(vyre_device_info, multiprocessor_count);
  FIELD(vyre_device_info, max_threads_per_block);
  FIELD(vyre_device_info, max_block_dim);
  FIELD(vyre_device_info, max_grid_dim);
  FIELD(vyre_device_info, max_shared_memory_per_block);
  FIELD(vyre_device_info, warp_size);
  FIELD(vyre_device_info, cooperative_launch);
  FIELD(vyre_device_info, driver_version);
  FIELD(vyre_device_info, peer_access_mask);

  STRUCT(vyre_context_desc);
  FIELD(vyre_context_desc, struct_size);
  FIELD(vyre_context_desc, device_ordinal);
  FIELD(vyre_context_desc, transient_pool_limit_bytes);
  FIELD(vyre_context_desc, pinned_pool_limit_bytes);
  FIELD(vyre_context_desc, staging_chunk_bytes);
  FIELD(vyre_context_desc, staging_chunk_count);
  FIELD(vyre_context_desc, staging_threads);

  STRUCT(vyre_telemetry);
  FIELD(vyre_telemetry, struct_size);
  FIELD(vyre_telemetry, h2d_bytes);
  FIELD(vyre_telemetry, h2d_operations);
  FIELD(vyre_telemetry, d2h_bytes);
  FIELD(vyre_telemetry, d2h_operations);
  FIELD(vyre_telemetry, memset_operations);
  FIELD(vyre_telemetry, kernel_launches);
  FIELD(vyre_telemetry, sync_points);
  FIELD(vyre_telemetry, dispatches);
  FIELD(vyre_telemetry, transient_pool_hits);
  FIELD(vyre_telemetry, transient_pool_misses);
  FIELD(vyre_telemetry, transient_pool_cached_bytes);
  FIELD(vyre_telemetry, pinned_pool_hits);
  FIELD(vyre_telemetry, pinned_pool_misses);
  FIELD(vyre_telemetry, pinned_pool_cached_bytes);
  FIELD(vyre_telemetry, module_cache_hits);
  FIELD(vyre_telemetry, module_cache_misses);
  FIELD(vyre_telemetry, module_loads);
  FIELD(vyre_telemetry, device_bytes_live);
  FIELD(vyre_telemetry, pinned_bytes_live);
  FIELD(vyre_telemetry, live_buffers);
  FIELD(vyre_telemetry, live_programs);
  FIELD(vyre_telemetry, live_pendings);
  FIELD(vyre_telemetry, graph_records);
  FIELD(vyre_telemetry, graph_replays);
  FIELD(vyre_telemetry, graph_uploads_skipped);
  FIELD(vyre_telemetry, graph_launches);
  FIELD(vyre_telemetry, sequence_runs);
  FIELD(vyre_telemetry, live_graphs);
  FIELD(vyre_telemetry, live_sequences);

  STRUCT(vyre_upload_range);
  FIELD(vyre_upload_range, offset);
  FIELD(vyre_upload_range, bytes);
  FIELD(vyre_upload_range, src);
  STRUCT(vyre_download_range);
  FIELD(vyre_download_range, offset);
  FIELD(vyre_download_range, bytes);
  FIELD(vyre_download_range, dst);

  STRUCT(vyre_buffer_info);
  FIELD(vyre_buffer_info, struct_size);
  FIELD(vyre_buffer_info, flags);
  FIELD(vyre_buffer_info, bytes);
  FIELD(vyre_buffer_info, device_pointer);
  FIELD(vyre_buffer_info, context);

  STRUCT(vyre_buffer_wrap_desc);
  FIELD(vyre_buffer_wrap_desc, struct_size);
  FIELD(vyre_buffer_wrap_desc, flags);
  FIELD(vyre_buffer_wrap_desc, device_pointer);
  FIELD(vyre_buffer_wrap_desc, bytes);

  STRUCT(vyre_capture_desc);
  FIELD(vyre_capture_desc, struct_size);
  FIELD(vyre_capture_desc, mode);
  FIELD(vyre_capture_desc, param_bytes);
  STRUCT(vyre_graph_loop_desc);
  FIELD(vyre_graph_loop_desc, struct_size);
  FIELD(vyre_graph_loop_desc, max_iterations);
  FIELD(vyre_graph_loop_desc, condition_buffer);
  FIELD(vyre_graph_loop_desc, condition_offset);
  FIELD(vyre_graph_loop_desc, count_buffer);
  FIELD(vyre_graph_loop_desc, count_offset);
  STRUCT(vyre_graph_node_info);
  FIELD(vyre_graph_node_info, struct_size);
  FIELD(vyre_graph_node_info, kind);
  FIELD(vyre_graph_node_info, cu_graph_node);
  FIELD(vyre_graph_node_info, cu_graph_exec);
  FIELD(vyre_graph_node_info, cu_function);
  FIELD(vyre_graph_node_info, grid);
  FIELD(vyre_graph_node_info, block);
  FIELD(vyre_graph_node_info, shared_memory_bytes);
  FIELD(vyre_graph_node_info, argument_count);
  FIELD(vyre_graph_node_info, arguments);
  FIELD(vyre_graph_node_info, memset_dst);
  FIELD(vyre_graph_node_info, memset_value);
  FIELD(vyre_graph_node_info, memset_element_size);
  FIELD(vyre_graph_node_info, memset_width);
  FIELD(vyre_graph_node_info, memset_height);
  FIELD(vyre_graph_node_info, memset_pitch);
  STRUCT(vyre_ipc_handle);
  FIELD(vyre_ipc_handle, bytes);
  STRUCT(vyre_buffer_copy_desc);
  FIELD(vyre_buffer_copy_desc, struct_size);
  FIELD(vyre_buffer_copy_desc, flags);
  FIELD(vyre_buffer_copy_desc, src);
  FIELD(vyre_buffer_copy_desc, src_offset);
  FIELD(vyre_buffer_copy_desc, dst);
  FIELD(vyre_buffer_copy_desc, dst_offset);
  FIELD(vyre_buffer_copy_desc, bytes);

  STRUCT(vyre_binding_decl);
  FIELD(vyre_binding_decl, struct_size);
  FIELD(vyre_binding_decl, role);
  FIELD(vyre_binding_decl, name);
  FIELD(vyre_binding_decl, element_size);
  FIELD(vyre_binding_decl, element_count);
  FIELD(vyre_binding_decl, output_offset);
  FIELD(vyre_binding_decl, output_length);

  STRUCT(vyre_kernel_param);
  FIELD(vyre_kernel_param, kind);
  FIELD(vyre_kernel_param, index);

  STRUCT(vyre_program_desc);
  FIELD(vyre_program_desc, struct_size);
  FIELD(vyre_program_desc, code_kind);
  FIELD(vyre_program_desc, code);
  FIELD(vyre_program_desc, code_size);
  FIELD(vyre_program_desc, entry);
  FIELD(vyre_program_desc, bindings);
  FIELD(vyre_program_desc, binding_count);
  FIELD(vyre_program_desc, workgroup_size);
  FIELD(vyre_program_desc, shared_memory_bytes);
  FIELD(vyre_program_desc, params);
  FIELD(vyre_program_desc, param_count);
  FIELD(vyre_program_desc, compile_options);
  FIELD(vyre_program_desc, compile_option_count);

  STRUCT(vyre_dispatch_binding);
  FIELD(vyre_dispatch_binding, struct_size);
  FIELD(vyre_dispatch_binding, source);
  FIELD(vyre_dispatch_binding, host_input);
  FIELD(vyre_dispatch_binding, host_output);
  FIELD(vyre_dispatch_binding, host_bytes);
  FIELD(vyre_dispatch_binding, buffer);
  FIELD(vyre_dispatch_binding, offset);
  FIELD(vyre_dispatch_binding, length);

  STRUCT(vyre_dispatch_desc);
  FIELD(vyre_dispatch_desc, struct_size);
  FIELD(vyre_dispatch_desc, flags);
  FIELD(vyre_dispatch_desc, bindings);
  FIELD(vyre_dispatch_desc, binding_count);
  FIELD(vyre_dispatch_desc, param_words);
  FIELD(vyre_dispatch_desc, param_word_count);
  FIELD(vyre_dispatch_desc, scalars);
  FIELD(vyre_dispatch_desc, scalar_count);
  FIELD(vyre_dispatch_desc, grid);
  FIELD(vyre_dispatch_desc, block);
  FIELD(vyre_dispatch_desc, element_count);
  FIELD(vyre_dispatch_desc, fixpoint_iterations);
  FIELD(vyre_dispatch_desc, shared_memory_bytes);

  STRUCT(vyre_timing);
  FIELD(vyre_timing, struct_size);
  FIELD(vyre_timing, wall_ns);
  FIELD(vyre_timing, device_ns);
  FIELD(vyre_timing, enqueue_ns);
  FIELD(vyre_timing, wait_ns);

  STRUCT(vyre_graph_replay_desc);
  FIELD(vyre_graph_replay_desc, struct_size);
  FIELD(vyre_graph_replay_desc, flags);
  FIELD(vyre_graph_replay_desc, bindings);
  FIELD(vyre_graph_replay_desc, binding_count);
  FIELD(vyre_graph_replay_desc, param_words);
  FIELD(vyre_graph_replay_desc, param_word_count);
  FIELD(vyre_graph_replay_desc, scalars);
  FIELD(vyre_graph_replay_desc, scalar_count);
  FIELD(vyre_graph_replay_desc, element_count);

  STRUCT(vyre_graph_info);
  FIELD(vyre_graph_info, struct_size);
  FIELD(vyre_graph_info, from_sequence);
  FIELD(vyre_graph_info, context);
  FIELD(vyre_graph_info, node_count);
  FIELD(vyre_graph_info, kernel_node_count);
  FIELD(vyre_graph_info, unchanged_input_node_count);
  FIELD(vyre_graph_info, element_count);
  FIELD(vyre_graph_info, capacity_elements);
  FIELD(vyre_graph_info, replays);
  FIELD(vyre_graph_info, host_input_bytes);
  FIELD(vyre_graph_info, host_output_bytes);

  STRUCT(vyre_kernel_node_update);
  FIELD(vyre_kernel_node_update, struct_size);
  FIELD(vyre_kernel_node_update, flags);
  FIELD(vyre_kernel_node_update, grid);
  FIELD(vyre_kernel_node_update, scalars);
  FIELD(vyre_kernel_node_update, scalar_count);

  STRUCT(vyre_sequence_step);
  FIELD(vyre_sequence_step, struct_size);
  FIELD(vyre_sequence_step, kind);
  FIELD(vyre_sequence_step, program);
  FIELD(vyre_sequence_step, dispatch);
  FIELD(vyre_sequence_step, buffer);
  FIELD(vyre_sequence_step, offset);
  FIELD(vyre_sequence_step, bytes);
  FIELD(vyre_sequence_step, src_buffer);
  FIELD(vyre_sequence_step, src_offset);
  FIELD(vyre_sequence_step, host_src);
  FIELD(vyre_sequence_step, host_dst);
  FIELD(vyre_sequence_step, fill_byte);

  STRUCT(vyre_sequence_desc);
  FIELD(vyre_sequence_desc, struct_size);
  FIELD(vyre_sequence_desc, repeat_count);
  FIELD(vyre_sequence_desc, steps);
  FIELD(vyre_sequence_desc, step_count);
  FIELD(vyre_sequence_desc, repeat_first);
  FIELD(vyre_sequence_desc, repeat_step_count);

  ENUM(VYRE_STATUS_OK);
  ENUM(VYRE_STATUS_INVALID_ARGUMENT);
  ENUM(VYRE_STATUS_INVALID_HANDLE);
  ENUM(VYRE_STATUS_STALE_HANDLE);
  ENUM(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE);
  ENUM(VYRE_STATUS_OUT_OF_RANGE);
  ENUM(VYRE_STATUS_NO_DRIVER);
  ENUM(VYRE_STATUS_NO_DEVICE);
  ENUM(VYRE_STATUS_DRIVER_TOO_OLD);
  ENUM(VYRE_STATUS_NVRTC_UNAVAILABLE);
  ENUM(VYRE_STATUS_OUT_OF_MEMORY);
  ENUM(VYRE_STATUS_COMPILE_FAILED);
  ENUM(VYRE_STATUS_ENTRY_NOT_FOUND);
  ENUM(VYRE_STATUS_LIMIT_EXCEEDED);
  ENUM(VYRE_STATUS_LAUNCH_FAILED);
  ENUM(VYRE_STATUS_TIMEOUT);
  ENUM(VYRE_STATUS_NOT_READY);
  ENUM(VYRE_STATUS_INVALID_STATE);
  ENUM(VYRE_STATUS_DRIVER_ERROR);
  ENUM(VYRE_STATUS_INTERNAL);
  ENUM(VYRE_STATUS_SHAPE_MISMATCH);
  ENUM(VYRE_STATUS_DEVICE_FAULT);
  ENUM(VYRE_LOG_ERROR);
  ENUM(VYRE_LOG_WARNING);
  ENUM(VYRE_LOG_INFO);
  ENUM(VYRE_LOG_TRACE);
  ENUM(VYRE_CODE_PTX);
  ENUM(VYRE_CODE_BINARY);
  ENUM(VYRE_CODE_CUDA_SOURCE);
  ENUM(VYRE_ROLE_INPUT);
  ENUM(VYRE_ROLE_OUTPUT);
  ENUM(VYRE_ROLE_INPUT_OUTPUT);
  ENUM(VYRE_ROLE_SHARED);
  ENUM(VYRE_PARAM_BINDING);
  ENUM(VYRE_PARAM_SCALAR32);
  ENUM(VYRE_PARAM_SCALAR64);
  ENUM(VYRE_PARAM_PARAM_WORDS);
  ENUM(VYRE_PARAM_NULL_POINTER);
  ENUM(VYRE_SOURCE_HOST);
  ENUM(VYRE_SOURCE_RESIDENT);
  ENUM(VYRE_BUFFER_INFO_FLAG_BORROWED);
  ENUM(VYRE_DISPATCH_FLAG_DEVICE_TIMING);
  ENUM(VYRE_DISPATCH_FLAG_COOPERATIVE);
  ENUM(VYRE_GRAPH_NODE_KERNEL);
  ENUM(VYRE_GRAPH_NODE_MEMCPY);
  ENUM(VYRE_GRAPH_NODE_MEMSET);
  ENUM(VYRE_GRAPH_NODE_OTHER);
  ENUM(VYRE_KERNEL_NODE_UPDATE_GRID);
  ENUM(VYRE_KERNEL_NODE_UPDATE_SCALARS);
  ENUM(VYRE_STEP_DISPATCH);
  ENUM(VYRE_STEP_FILL);
  ENUM(VYRE_STEP_COPY);
  ENUM(VYRE_STEP_UPLOAD);
  ENUM(VYRE_STEP_DOWNLOAD);
  STRUCT(vyre_egraph_image);

  STRUCT(vyre_egraph_image_desc);
  FIELD(vyre_egraph_image_desc, struct_size);
  FIELD(vyre_egraph_image_desc, device);
  FIELD(vyre_egraph_image_desc, context);
  FIELD(vyre_egraph_image_desc, row_count);
  FIELD(vyre_egraph_image_desc, class_count);
  FIELD(vyre_egraph_image_desc, child_count);
  FIELD(vyre_egraph_image_desc, row_classes);
  FIELD(vyre_egraph_image_desc, row_ops);
  FIELD(vyre_egraph_image_desc, child_offsets);
  FIELD(vyre_egraph_image_desc, child_lengths);
  FIELD(vyre_egraph_image_desc, row_signatures);
  FIELD(vyre_egraph_image_desc, children);
  FIELD(vyre_egraph_image_desc, cpu_threads);
  FIELD(vyre_egraph_image_desc, reserved0);
  FIELD(vyre_egraph_image_desc, row_capacity);
  FIELD(vyre_egraph_image_desc, class_capacity);
  FIELD(vyre_egraph_image_desc, child_capacity);

  STRUCT(vyre_egraph_image_info);
  FIELD(vyre_egraph_image_info, struct_size);
  FIELD(vyre_egraph_image_info, device);
  FIELD(vyre_egraph_image_info, context);
  FIELD(vyre_egraph_image_info, row_count);
  FIELD(vyre_egraph_image_info, class_count);
  FIELD(vyre_egraph_image_info, child_count);
  FIELD(vyre_egraph_image_info, canonical_class_count);
  FIELD(vyre_egraph_image_info, bytes);
  FIELD(vyre_egraph_image_info, row_capacity);
  FIELD(vyre_egraph_image_info, class_capacity);
  FIELD(vyre_egraph_image_info, child_capacity);
  FIELD(vyre_egraph_image_info, changed_class_count);

  STRUCT(vyre_egraph_rebuild_result);
  FIELD(vyre_egraph_rebuild_result, struct_size);
  FIELD(vyre_egraph_rebuild_result, rounds);
  FIELD(vyre_egraph_rebuild_result, merges);
  FIELD(vyre_egraph_rebuild_result, union_merges);
  FIELD(vyre_egraph_rebuild_result, classes_before);
  FIELD(vyre_egraph_rebuild_result, classes_after);
  FIELD(vyre_egraph_rebuild_result, rows_visited);
  FIELD(vyre_egraph_rebuild_result, device_ns);
  FIELD(vyre_egraph_rebuild_result, wall_ns);
  FIELD(vyre_egraph_rebuild_result, changed_class_count);
  FIELD(vyre_egraph_rebuild_result, full_rounds);
  FIELD(vyre_egraph_rebuild_result, reserved0);

  STRUCT(vyre_egraph_append_desc);
  FIELD(vyre_egraph_append_desc, struct_size);
  FIELD(vyre_egraph_append_desc, reserved0);
  FIELD(vyre_egraph_append_desc, class_count);
  FIELD(vyre_egraph_append_desc, row_count);
  FIELD(vyre_egraph_append_desc, child_count);
  FIELD(vyre_egraph_append_desc, row_classes);
  FIELD(vyre_egraph_append_desc, row_ops);
  FIELD(vyre_egraph_append_desc, child_offsets);
  FIELD(vyre_egraph_append_desc, child_lengths);
  FIELD(vyre_egraph_append_desc, row_signatures);
  FIELD(vyre_egraph_append_desc, children);

  STRUCT(vyre_egraph_rebuild_desc);
  FIELD(vyre_egraph_rebuild_desc, struct_size);
  FIELD(vyre_egraph_rebuild_desc, flags);
  FIELD(vyre_egraph_rebuild_desc, unions);
  FIELD(vyre_egraph_rebuild_desc, union_count);
  FIELD(vyre_egraph_rebuild_desc, canonical_out);
  FIELD(vyre_egraph_rebuild_desc, result_out);
  FIELD(vyre_egraph_rebuild_desc, max_rounds);
  FIELD(vyre_egraph_rebuild_desc, reserved0);
  ENUM(VYRE_EGRAPH_DEVICE_GPU);
  ENUM(VYRE_EGRAPH_DEVICE_CPU);
  ENUM(VYRE_EGRAPH_COLUMN_ROW_CLASSES);
  ENUM(VYRE_EGRAPH_COLUMN_ROW_OPS);
  ENUM(VYRE_EGRAPH_COLUMN_CHILD_OFFSETS);
  ENUM(VYRE_EGRAPH_COLUMN_CHILD_LENGTHS);
  ENUM(VYRE_EGRAPH_COLUMN_ROW_SIGNATURES);
  ENUM(VYRE_EGRAPH_COLUMN_CHILDREN);
  ENUM(VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES);
  ENUM(VYRE_EGRAPH_REBUILD_RESET);
  ENUM(VYRE_EGRAPH_REBUILD_DEVICE_TIMING);
  ENUM(VYRE_EGRAPH_REBUILD_COLLIDING_HASH);
  return 0;
}
