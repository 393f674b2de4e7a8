// Graphs and sequences.
#include "api/api_call.h"
#include "api/foreign_stream.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "driver/release_report.h"
#include "graph/graph.h"
#include "graph/graph_replay.h"
#include "graph/sequence.h"
#include "graph/user_capture.h"
#include "runtime/dispatch/pending_work.h"

using vyre::Errorf;

namespace vyre {
namespace {

// A NULL replay descriptor means "nothing changes".
absl::Status ReadReplayDesc(const char* what, const vyre_graph_replay_desc* desc,
                            vyre_graph_replay_desc* out) {
  if (desc == nullptr) {
    *out = vyre_graph_replay_desc{};
    out->struct_size = sizeof(*out);
    return absl::OkStatus();
  }
  return ReadDescriptor(what, "vyre_graph_replay_desc", desc, out);
}

// An asynchronous replay; with `cu_stream`, ordered after that stream's
// earlier work and before its later work (an event each way: the replay
// itself runs on the context's stream, where the library tracks it).
absl::Status ReplayAsync(vyre_graph graph, const vyre_graph_replay_desc* desc, CUstream cu_stream,
                         vyre_pending* out, const char* what) {
  VYRE_RETURN_IF_ERROR(RequireOut(what, out, "out"));
  out->bits = 0;
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, Graphs().Lookup(graph.bits, what));
  vyre_graph_replay_desc d;
  VYRE_RETURN_IF_ERROR(ReadReplayDesc(what, desc, &d));
  std::shared_ptr<Context> ctx = g->context_ref();
  if (cu_stream != nullptr) VYRE_RETURN_IF_ERROR(ctx->WaitForStream(cu_stream, what));
  std::shared_ptr<GraphReplay> replay = g->recycled_replays().Take();
  if (replay) {
    replay->Attach(std::move(g));
  } else {
    replay = std::make_shared<GraphReplay>(std::move(g), /*synchronous=*/false);
  }
  VYRE_RETURN_IF_ERROR(replay->Enqueue(d, /*host_timing=*/true, what));
  if (cu_stream != nullptr) {
    // Refused here, the replay is still enqueued and tracked: release it
    // (which waits for it) so the caller gets the error with no handle.
    absl::Status signalled = ctx->SignalStream(cu_stream, what);
    if (!signalled.ok()) {
      replay->Abandon(what).IgnoreError();
      return signalled;
    }
  }
  VYRE_ASSIGN_OR_RETURN(out->bits, Register(Pendings(), std::move(replay), ctx.get(), what));
  return absl::OkStatus();
}

}  // namespace
}  // namespace vyre

extern "C" {

VYRE_API vyre_status vyre_graph_record(vyre_program program, const vyre_dispatch_desc* desc,
                                       vyre_graph* out) {
  const char* what = "vyre_graph_record";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Program> p,
                          vyre::Programs().Lookup(program.bits, what));
    vyre_dispatch_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_dispatch_desc", desc, &d));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> graph,
                          vyre::Graph::RecordDispatch(std::move(p), d, what));
    vyre::Context* owner = &graph->context();
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Graphs(), std::move(graph), owner, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_graph_replay(vyre_graph graph, const vyre_graph_replay_desc* desc,
                                       vyre_timing* out_timing) {
  const char* what = "vyre_graph_replay";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(graph.bits, what));
    vyre_graph_replay_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadReplayDesc(what, desc, &d));
    if (out_timing != nullptr) {
      VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_timing", out_timing));
    }
    // On the stack: a synchronous replay allocates nothing.
    vyre::GraphReplay replay(std::move(g), /*synchronous=*/true);
    VYRE_RETURN_IF_ERROR(replay.Enqueue(d, out_timing != nullptr, what));
    VYRE_RETURN_IF_ERROR(replay.Wait(VYRE_WAIT_FOREVER, what));
    if (out_timing != nullptr) {
      VYRE_ASSIGN_OR_RETURN(vyre_timing timing, replay.Timing(what));
      return vyre::WriteOutStruct(what, "vyre_timing", out_timing, timing);
    }
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_graph_replay_async(vyre_graph graph,
                                             const vyre_graph_replay_desc* desc,
                                             vyre_pending* out) {
  const char* what = "vyre_graph_replay_async";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    return vyre::ReplayAsync(graph, desc, /*cu_stream=*/nullptr, out, what);
  });
}

VYRE_API vyre_status vyre_graph_launch(vyre_graph graph, const vyre_graph_replay_desc* desc,
                                       uint64_t cu_stream, vyre_pending* out) {
  const char* what = "vyre_graph_launch";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::CheckForeignStream(what, cu_stream));
    VYRE_RETURN_IF_ERROR(vyre::RefuseCaptureStream(cu_stream, what));
    return vyre::ReplayAsync(graph, desc, reinterpret_cast<CUstream>(cu_stream), out, what);
  });
}

VYRE_API vyre_status vyre_graph_destroy(vyre_graph graph) {
  const char* what = "vyre_graph_destroy";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Remove(graph.bits, what));
    vyre::driver::ReleaseReport::NoteContext(g->context().cu());
    g->context().Disown(vyre::Graphs(), graph.bits);
    // The graph goes with its last reference: now, or when a replay in
    // flight completes.
    std::shared_ptr<vyre::Context> ctx = g->context_ref();
    g.reset();
    return report.Result(what, "the graph is destroyed");
  });
}

VYRE_API vyre_status vyre_graph_info_get(vyre_graph graph, vyre_graph_info* out) {
  const char* what = "vyre_graph_info_get";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(graph.bits, what));
    VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_graph_info", out));
    return vyre::WriteOutStruct(what, "vyre_graph_info", out, g->Info());
  });
}

VYRE_API vyre_status vyre_graph_node_kind_get(vyre_graph graph, uint64_t node_index,
                                              vyre_graph_node_kind* out) {
  const char* what = "vyre_graph_node_kind_get";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(graph.bits, what));
    VYRE_ASSIGN_OR_RETURN(*out, g->NodeKind(node_index, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_graph_node_info_get(vyre_graph graph, uint64_t node_index,
                                              vyre_graph_node_info* out) {
  const char* what = "vyre_graph_node_info_get";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(graph.bits, what));
    VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_graph_node_info", out));
    VYRE_ASSIGN_OR_RETURN(vyre_graph_node_info info, g->NodeInfo(node_index, what));
    return vyre::WriteOutStruct(what, "vyre_graph_node_info", out, info);
  });
}

VYRE_API vyre_status vyre_graph_node_info_set(vyre_graph graph, uint64_t node_index,
                                              const vyre_graph_node_info* info, uint32_t flags) {
  const char* what = "vyre_graph_node_info_set";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(graph.bits, what));
    vyre_graph_node_info in;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_graph_node_info", info, &in));
    return g->SetNodeInfo(node_index, in, flags, what);
  });
}

VYRE_API vyre_status vyre_graph_loop_create(vyre_graph body, const vyre_graph_loop_desc* desc,
                                            vyre_graph* out) {
  const char* what = "vyre_graph_loop_create";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(body.bits, what));
    vyre_graph_loop_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_graph_loop_desc", desc, &d));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> loop,
                          vyre::Graph::CreateLoop(std::move(g), d, what));
    vyre::Context* owner = &loop->context();
    VYRE_ASSIGN_OR_RETURN(out->bits, vyre::Register(vyre::Graphs(), std::move(loop), owner, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_graph_kernel_node_update(vyre_graph graph, uint64_t node_index,
                                                   const vyre_kernel_node_update* update) {
  const char* what = "vyre_graph_kernel_node_update";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> g, vyre::Graphs().Lookup(graph.bits, what));
    vyre_kernel_node_update u;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_kernel_node_update", update, &u));
    return g->UpdateKernelNode(node_index, u, what);
  });
}

VYRE_API vyre_status vyre_sequence_create(vyre_context context, const vyre_sequence_desc* desc,
                                          vyre_sequence* out) {
  const char* what = "vyre_sequence_create";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Context> ctx,
                          vyre::Contexts().Lookup(context.bits, what));
    vyre_sequence_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_sequence_desc", desc, &d));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Sequence> seq,
                          vyre::Sequence::Create(std::move(ctx), d, what));
    vyre::Context* owner = &seq->context();
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Sequences(), std::move(seq), owner, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_sequence_run(vyre_sequence sequence, vyre_timing* out_timing) {
  const char* what = "vyre_sequence_run";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Sequence> s,
                          vyre::Sequences().Lookup(sequence.bits, what));
    if (out_timing == nullptr) return s->Run(nullptr, what);
    VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_timing", out_timing));
    vyre_timing timing{};
    VYRE_RETURN_IF_ERROR(s->Run(&timing, what));
    return vyre::WriteOutStruct(what, "vyre_timing", out_timing, timing);
  });
}

VYRE_API vyre_status vyre_sequence_record(vyre_sequence sequence, vyre_graph* out) {
  const char* what = "vyre_sequence_record";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Sequence> s,
                          vyre::Sequences().Lookup(sequence.bits, what));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Graph> graph,
                          vyre::Graph::RecordSequence(std::move(s), what));
    vyre::Context* owner = &graph->context();
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Graphs(), std::move(graph), owner, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_sequence_destroy(vyre_sequence sequence) {
  const char* what = "vyre_sequence_destroy";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Sequence> s,
                          vyre::Sequences().Remove(sequence.bits, what));
    vyre::driver::ReleaseReport::NoteContext(s->context().cu());
    s->context().Disown(vyre::Sequences(), sequence.bits);
    std::shared_ptr<vyre::Context> ctx = s->context_ref();
    s.reset();
    return report.Result(what, "the sequence is destroyed");
  });
}

}  // extern "C"
