// Compiled as C++17 and C++20 with -Wall -Wextra -pedantic -Werror (see
// CMakeLists.txt): vyre_cuda.h must be clean C++, with C linkage, and every
// _INIT macro must initialise its struct completely.
#include "vyre_cuda.h"

#include <cstddef>
#include <type_traits>

// Handles and descriptors are plain C data.
static_assert(std::is_trivially_copyable_v<vyre_context>);
static_assert(std::is_standard_layout_v<vyre_dispatch_desc>);
static_assert(sizeof(vyre_context) == 8 && sizeof(vyre_buffer) == 8 &&
              sizeof(vyre_program) == 8 && sizeof(vyre_pending) == 8);
static_assert(sizeof(vyre_status) == 4, "FORCE32 keeps enums 32-bit");
static_assert(sizeof(vyre_log_level) == 4 && sizeof(vyre_code_kind) == 4 &&
              sizeof(vyre_binding_role) == 4 && sizeof(vyre_param_kind) == 4 &&
              sizeof(vyre_binding_source) == 4);
// Handles of different types are different types (no accidental mixing).
static_assert(!std::is_same_v<vyre_context, vyre_buffer>);

// Functions have C linkage and these exact types.
static_assert(std::is_same_v<decltype(&vyre_version), uint32_t (*)()>);
static_assert(std::is_same_v<decltype(&vyre_buffer_free), vyre_status (*)(vyre_buffer)>);
static_assert(std::is_same_v<decltype(&vyre_buffer_copy_async),
                             vyre_status (*)(const vyre_buffer_copy_desc*, vyre_pending*)>);
static_assert(std::is_same_v<decltype(&vyre_buffer_export_ipc),
                             vyre_status (*)(vyre_buffer, vyre_ipc_handle*)>);
static_assert(std::is_same_v<decltype(&vyre_buffer_import_ipc),
                             vyre_status (*)(vyre_context, const vyre_ipc_handle*, vyre_buffer*)>);
static_assert(sizeof(vyre_ipc_handle) == VYRE_IPC_HANDLE_BYTES);
static_assert(std::is_same_v<decltype(&vyre_device_can_access_peer),
                             vyre_status (*)(uint32_t, uint32_t, uint32_t*)>);
static_assert(std::is_same_v<decltype(&vyre_pending_wait),
                             vyre_status (*)(vyre_pending, uint64_t)>);
static_assert(std::is_same_v<decltype(&vyre_graph_record),
                             vyre_status (*)(vyre_program, const vyre_dispatch_desc*,
                                             vyre_graph*)>);
static_assert(std::is_same_v<decltype(&vyre_graph_replay),
                             vyre_status (*)(vyre_graph, const vyre_graph_replay_desc*,
                                             vyre_timing*)>);
static_assert(std::is_same_v<decltype(&vyre_sequence_record),
                             vyre_status (*)(vyre_sequence, vyre_graph*)>);
static_assert(std::is_same_v<decltype(&vyre_buffer_wrap),
                             vyre_status (*)(vyre_context, const vyre_buffer_wrap_desc*,
                                             vyre_buffer*)>);
static_assert(std::is_same_v<decltype(&vyre_context_wait_stream),
                             vyre_status (*)(vyre_context, uint64_t)>);
static_assert(std::is_same_v<decltype(&vyre_context_signal_stream),
                             vyre_status (*)(vyre_context, uint64_t)>);
static_assert(std::is_standard_layout_v<vyre_buffer_wrap_desc>);
static_assert(!std::is_same_v<vyre_graph, vyre_sequence>);
static_assert(sizeof(vyre_graph) == 8 && sizeof(vyre_sequence) == 8);
static_assert(sizeof(vyre_graph_node_kind) == 4 && sizeof(vyre_step_kind) == 4);
static_assert(std::is_standard_layout_v<vyre_graph_replay_desc> &&
              std::is_standard_layout_v<vyre_sequence_step>);

int HeaderCheckInits();
int HeaderCheckInits() {
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
  constexpr vyre_context_desc kConstant = VYRE_CONTEXT_DESC_INIT;  // usable in constexpr
  static_assert(kConstant.struct_size == sizeof(vyre_context_desc));
  int ok = 1;
  ok &= device_info.struct_size == sizeof(device_info);
  ok &= context_desc.struct_size == sizeof(context_desc);
  ok &= telemetry.struct_size == sizeof(telemetry);
  ok &= buffer_info.struct_size == sizeof(buffer_info) && buffer_info.flags == 0;
  ok &= wrap_desc.struct_size == sizeof(wrap_desc) && wrap_desc.flags == 0;
  ok &= copy_desc.struct_size == sizeof(copy_desc) && copy_desc.flags == 0;
  ok &= binding_decl.struct_size == sizeof(binding_decl);
  ok &= program_desc.struct_size == sizeof(program_desc);
  ok &= dispatch_binding.struct_size == sizeof(dispatch_binding);
  ok &= dispatch_desc.struct_size == sizeof(dispatch_desc);
  ok &= timing.struct_size == sizeof(timing);
  ok &= replay_desc.struct_size == sizeof(replay_desc);
  ok &= graph_info.struct_size == sizeof(graph_info);
  ok &= node_update.struct_size == sizeof(node_update);
  ok &= step.struct_size == sizeof(step);
  ok &= sequence_desc.struct_size == sizeof(sequence_desc);
  ok &= dispatch_desc.fixpoint_iterations == 1;
  return ok;
}
