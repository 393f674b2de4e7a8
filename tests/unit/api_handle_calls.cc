#include "api_handle_calls.h"

#include <array>
#include <random>

#include "vyre_test_util.h"

namespace vyre_test {
namespace {

// Storage the calls read and write; contents never matter.
std::array<uint32_t, 4> g_input_a = {1, 2, 3, 4};
std::array<uint32_t, 4> g_input_b = {5, 6, 7, 8};
std::array<uint32_t, 4> g_output = {0, 0, 0, 0};
std::array<uint32_t, 4> g_scratch = {0, 0, 0, 0};

vyre_status CreateAddProgram(vyre_context context) {
  ProgramSpec spec = AddSpec();
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  return vyre_program_create(context, &desc, &program);
}

DispatchSpec HostAddDispatch() {
  DispatchSpec spec;
  spec.bindings = {HostIn(g_input_a.data(), 16), HostIn(g_input_b.data(), 16),
                   HostOut(g_output.data(), 16)};
  return spec;
}

// A replay of a graph recorded from HostAddDispatch().
vyre_status ReplayHostAdd(uint64_t graph_bits, bool async) {
  DispatchSpec spec = HostAddDispatch();
  vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
  desc.bindings = spec.bindings.data();
  desc.binding_count = spec.bindings.size();
  if (async) {
    vyre_pending pending{0};
    return vyre_graph_replay_async(vyre_graph{graph_bits}, &desc, &pending);
  }
  vyre_timing timing = VYRE_TIMING_INIT;
  return vyre_graph_replay(vyre_graph{graph_bits}, &desc, &timing);
}

// A sequence of one 16-byte FILL step on `buffer`.
vyre_status CreateFillSequence(vyre_context context, vyre_buffer buffer) {
  vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
  step.kind = VYRE_STEP_FILL;
  step.buffer = buffer;
  step.bytes = 16;
  step.fill_byte = 7;
  vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
  desc.steps = &step;
  desc.step_count = 1;
  vyre_sequence sequence{0};
  return vyre_sequence_create(context, &desc, &sequence);
}

}  // namespace

const char* HandleKindName(HandleKind kind) {
  switch (kind) {
    case HandleKind::kContext: return "context";
    case HandleKind::kBuffer: return "buffer";
    case HandleKind::kProgram: return "program";
    case HandleKind::kPending: return "pending";
    case HandleKind::kGraph: return "graph";
    case HandleKind::kSequence: return "sequence";
  }
  return "?";
}

std::vector<HandleCall> AllHandleCalls() {
  using K = HandleKind;
  std::vector<HandleCall> calls = {
      {"vyre_context_destroy", K::kContext,
       [](uint64_t bits) { return vyre_context_destroy(vyre_context{bits}); }},
      {"vyre_context_device_info", K::kContext,
       [](uint64_t bits) {
         vyre_device_info info = VYRE_DEVICE_INFO_INIT;
         return vyre_context_device_info(vyre_context{bits}, &info);
       }},
      {"vyre_context_telemetry", K::kContext,
       [](uint64_t bits) {
         vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
         return vyre_context_telemetry(vyre_context{bits}, &telemetry);
       }},
      {"vyre_context_trim", K::kContext,
       [](uint64_t bits) { return vyre_context_trim(vyre_context{bits}); }},
      {"vyre_context_selftest", K::kContext,
       [](uint64_t bits) { return vyre_context_selftest(vyre_context{bits}); }},
      {"vyre_capture_begin", K::kContext,
       [](uint64_t bits) {
         uint64_t stream = 0;
         return vyre_capture_begin(vyre_context{bits}, nullptr, &stream);
       }},
      {"vyre_capture_end", K::kContext,
       [](uint64_t bits) {
         vyre_graph graph{0};
         return vyre_capture_end(vyre_context{bits}, &graph);
       }},
      {"vyre_capture_dispatch", K::kProgram,
       [](uint64_t bits) {
         vyre_dispatch_desc desc = VYRE_DISPATCH_DESC_INIT;
         return vyre_capture_dispatch(vyre_program{bits}, &desc);
       }},
      {"vyre_buffer_alloc", K::kContext,
       [](uint64_t bits) {
         vyre_buffer buffer{0};
         return vyre_buffer_alloc(vyre_context{bits}, 16, &buffer);
       }},
      {"vyre_program_create", K::kContext,
       [](uint64_t bits) { return CreateAddProgram(vyre_context{bits}); }},
      {"vyre_buffer_wrap", K::kContext,
       [](uint64_t bits) {
         // The handle is checked before the pointer is.
         vyre_buffer_wrap_desc desc = VYRE_BUFFER_WRAP_DESC_INIT;
         desc.device_pointer = 0x100000;
         desc.bytes = 16;
         vyre_buffer buffer{0};
         return vyre_buffer_wrap(vyre_context{bits}, &desc, &buffer);
       }},
      {"vyre_context_wait_stream", K::kContext,
       [](uint64_t bits) { return vyre_context_wait_stream(vyre_context{bits}, 1); }},
      {"vyre_context_signal_stream", K::kContext,
       [](uint64_t bits) { return vyre_context_signal_stream(vyre_context{bits}, 1); }},
      {"vyre_buffer_free", K::kBuffer,
       [](uint64_t bits) { return vyre_buffer_free(vyre_buffer{bits}); }},
      {"vyre_buffer_upload", K::kBuffer,
       [](uint64_t bits) { return vyre_buffer_upload(vyre_buffer{bits}, 0, g_input_a.data(), 4); }},
      {"vyre_buffer_download", K::kBuffer,
       [](uint64_t bits) {
         return vyre_buffer_download(vyre_buffer{bits}, 0, g_scratch.data(), 4);
       }},
      {"vyre_buffer_upload_ranges", K::kBuffer,
       [](uint64_t bits) {
         vyre_upload_range range{0, 4, g_input_a.data()};
         return vyre_buffer_upload_ranges(vyre_buffer{bits}, &range, 1);
       }},
      {"vyre_buffer_download_ranges", K::kBuffer,
       [](uint64_t bits) {
         vyre_download_range range{0, 4, g_scratch.data()};
         return vyre_buffer_download_ranges(vyre_buffer{bits}, &range, 1);
       }},
      {"vyre_buffer_info_get", K::kBuffer,
       [](uint64_t bits) {
         vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
         return vyre_buffer_info_get(vyre_buffer{bits}, &info);
       }},
      // Both ends name the handle under test (the source is looked up first).
      {"vyre_buffer_copy", K::kBuffer,
       [](uint64_t bits) {
         vyre_buffer_copy_desc desc = VYRE_BUFFER_COPY_DESC_INIT;
         desc.src = vyre_buffer{bits};
         desc.dst = vyre_buffer{bits};
         desc.dst_offset = 8;
         desc.bytes = 4;
         return vyre_buffer_copy(&desc);
       }},
      {"vyre_buffer_copy_async", K::kBuffer,
       [](uint64_t bits) {
         vyre_buffer_copy_desc desc = VYRE_BUFFER_COPY_DESC_INIT;
         desc.src = vyre_buffer{bits};
         desc.dst = vyre_buffer{bits};
         desc.dst_offset = 8;
         desc.bytes = 4;
         vyre_pending pending{0};
         return vyre_buffer_copy_async(&desc, &pending);
       }},
      {"vyre_buffer_export_ipc", K::kBuffer,
       [](uint64_t bits) {
         vyre_ipc_handle handle{};
         return vyre_buffer_export_ipc(vyre_buffer{bits}, &handle);
       }},
      {"vyre_buffer_import_ipc", K::kContext,
       [](uint64_t bits) {
         vyre_ipc_handle handle{};
         vyre_buffer out{0};
         return vyre_buffer_import_ipc(vyre_context{bits}, &handle, &out);
       }},
      {"vyre_program_destroy", K::kProgram,
       [](uint64_t bits) { return vyre_program_destroy(vyre_program{bits}); }},
      {"vyre_dispatch", K::kProgram,
       [](uint64_t bits) {
         DispatchSpec spec = HostAddDispatch();
         vyre_dispatch_desc desc = spec.Desc();
         vyre_timing timing = VYRE_TIMING_INIT;
         return vyre_dispatch(vyre_program{bits}, &desc, &timing);
       }},
      {"vyre_dispatch_async", K::kProgram,
       [](uint64_t bits) {
         DispatchSpec spec = HostAddDispatch();
         vyre_dispatch_desc desc = spec.Desc();
         vyre_pending pending{0};
         return vyre_dispatch_async(vyre_program{bits}, &desc, &pending);
       }},
      {"vyre_pending_poll", K::kPending,
       [](uint64_t bits) { return vyre_pending_poll(vyre_pending{bits}); }},
      {"vyre_pending_wait", K::kPending,
       [](uint64_t bits) { return vyre_pending_wait(vyre_pending{bits}, 0); }},
      {"vyre_pending_timing", K::kPending,
       [](uint64_t bits) {
         vyre_timing timing = VYRE_TIMING_INIT;
         return vyre_pending_timing(vyre_pending{bits}, &timing);
       }},
      {"vyre_pending_release", K::kPending,
       [](uint64_t bits) { return vyre_pending_release(vyre_pending{bits}); }},
  };
  for (HandleCall& call : GraphHandleCalls()) calls.push_back(std::move(call));
  return calls;
}

std::vector<HandleCall> GraphHandleCalls() {
  using K = HandleKind;
  return {
      {"vyre_graph_record", K::kProgram,
       [](uint64_t bits) {
         DispatchSpec spec = HostAddDispatch();
         vyre_dispatch_desc desc = spec.Desc();
         vyre_graph graph{0};
         return vyre_graph_record(vyre_program{bits}, &desc, &graph);
       }},
      {"vyre_graph_replay", K::kGraph, [](uint64_t bits) { return ReplayHostAdd(bits, false); }},
      {"vyre_graph_replay_async", K::kGraph,
       [](uint64_t bits) { return ReplayHostAdd(bits, true); }},
      {"vyre_graph_launch", K::kGraph,
       [](uint64_t bits) {
         vyre_pending pending{0};
         return vyre_graph_launch(vyre_graph{bits}, nullptr, 1, &pending);
       }},
      {"vyre_graph_node_info_get", K::kGraph,
       [](uint64_t bits) {
         vyre_graph_node_info info = VYRE_GRAPH_NODE_INFO_INIT;
         return vyre_graph_node_info_get(vyre_graph{bits}, 0, &info);
       }},
      {"vyre_graph_node_info_set", K::kGraph,
       [](uint64_t bits) {
         vyre_graph_node_info info = VYRE_GRAPH_NODE_INFO_INIT;
         info.kind = VYRE_GRAPH_NODE_KERNEL;
         return vyre_graph_node_info_set(vyre_graph{bits}, 0, &info, 0);
       }},
      {"vyre_graph_loop_create", K::kGraph,
       [](uint64_t bits) {
         vyre_graph_loop_desc desc = VYRE_GRAPH_LOOP_DESC_INIT;
         vyre_graph loop{0};
         return vyre_graph_loop_create(vyre_graph{bits}, &desc, &loop);
       }},
      {"vyre_graph_destroy", K::kGraph,
       [](uint64_t bits) { return vyre_graph_destroy(vyre_graph{bits}); }},
      {"vyre_graph_info_get", K::kGraph,
       [](uint64_t bits) {
         vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
         return vyre_graph_info_get(vyre_graph{bits}, &info);
       }},
      {"vyre_graph_node_kind_get", K::kGraph,
       [](uint64_t bits) {
         vyre_graph_node_kind kind = VYRE_GRAPH_NODE_OTHER;
         return vyre_graph_node_kind_get(vyre_graph{bits}, 0, &kind);
       }},
      {"vyre_graph_kernel_node_update", K::kGraph,
       [](uint64_t bits) {
         vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
         update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
         update.grid[0] = update.grid[1] = update.grid[2] = 1;
         // Node 3 of a host add graph is its kernel node.
         return vyre_graph_kernel_node_update(vyre_graph{bits}, 3, &update);
       }},
      // The step's buffer is never looked up: the context handle comes first.
      {"vyre_sequence_create", K::kContext,
       [](uint64_t bits) { return CreateFillSequence(vyre_context{bits}, vyre_buffer{0}); }},
      {"vyre_sequence_run", K::kSequence,
       [](uint64_t bits) {
         vyre_timing timing = VYRE_TIMING_INIT;
         return vyre_sequence_run(vyre_sequence{bits}, &timing);
       }},
      {"vyre_sequence_record", K::kSequence,
       [](uint64_t bits) {
         vyre_graph graph{0};
         return vyre_sequence_record(vyre_sequence{bits}, &graph);
       }},
      {"vyre_sequence_destroy", K::kSequence,
       [](uint64_t bits) { return vyre_sequence_destroy(vyre_sequence{bits}); }},
  };
}

HandleCall ResidentBindingCall(vyre_program add_program) {
  return {"vyre_dispatch (RESIDENT binding)", HandleKind::kBuffer, [add_program](uint64_t bits) {
            DispatchSpec spec = HostAddDispatch();
            spec.bindings[0] = Resident(vyre_buffer{bits}, 0, 16);
            vyre_dispatch_desc desc = spec.Desc();
            return vyre_dispatch(add_program, &desc, nullptr);
          }};
}

HandleCall ResidentReplayCall(vyre_graph resident_add_graph) {
  return {"vyre_graph_replay (RESIDENT rebinding)", HandleKind::kBuffer,
          [resident_add_graph](uint64_t bits) {
            vyre_graph_replay_desc desc = VYRE_GRAPH_REPLAY_DESC_INIT;
            // Every binding names `bits`: binding 0's lookup decides.
            vyre_dispatch_binding bindings[3] = {Resident(vyre_buffer{bits}, 0, 16),
                                                 Resident(vyre_buffer{bits}, 0, 16),
                                                 Resident(vyre_buffer{bits}, 0, 16)};
            desc.bindings = bindings;
            desc.binding_count = 3;
            return vyre_graph_replay(resident_add_graph, &desc, nullptr);
          }};
}

HandleCall SequenceStepBufferCall(vyre_context context) {
  return {"vyre_sequence_create (FILL step buffer)", HandleKind::kBuffer,
          [context](uint64_t bits) { return CreateFillSequence(context, vyre_buffer{bits}); }};
}

HandleCall SequenceStepProgramCall(vyre_context context, vyre_buffer buffer) {
  return {"vyre_sequence_create (DISPATCH step program)", HandleKind::kProgram,
          [context, buffer](uint64_t bits) {
            DispatchSpec spec;
            spec.bindings = {Resident(buffer, 0, 16)};
            spec.param_words = {4};
            vyre_dispatch_desc dispatch = spec.Desc();
            vyre_sequence_step step = VYRE_SEQUENCE_STEP_INIT;
            step.kind = VYRE_STEP_DISPATCH;
            step.program = vyre_program{bits};
            step.dispatch = &dispatch;
            vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
            desc.steps = &step;
            desc.step_count = 1;
            vyre_sequence sequence{0};
            return vyre_sequence_create(context, &desc, &sequence);
          }};
}

std::vector<uint64_t> ForgedHandleBits() {
  std::mt19937_64 rng(0x5eed);
  std::vector<uint64_t> bits = {~uint64_t{0}, 0x0123456789ABCDEFull, uint64_t{1} << 63, 1};
  for (int i = 0; i < 12; ++i) bits.push_back(rng() | 1);
  return bits;
}

}  // namespace vyre_test
