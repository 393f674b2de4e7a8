// The torture operations that record, destroy and query graphs (vector adds
// and increments over HOST or RESIDENT bindings); replays are in
// ops_graph_replay.cc.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {
namespace {

// The graph a recording of `prog` makes: n elements, a parameter word and
// fixpoint iterations.
GraphState NewRecordedGraph(Rng* rng, const ProgramState& prog) {
  GraphState g;
  g.context = prog.context;
  g.kernel = prog.kind;
  g.decls = prog.decls;
  g.threads_per_block = uint64_t{prog.workgroup[0]} * prog.workgroup[1] * prog.workgroup[2];
  const uint64_t n = rng->Chance(0.1) ? rng->Range(1, 4096) : rng->Range(1, 600);
  g.recorded = g.count = n;
  g.capacity = NextPow2(n);
  g.param_n = uint32_t(rng->Chance(0.8) ? n : rng->Range(1, n));
  g.iterations = uint32_t(rng->Range(1, 3));
  return g;
}

}  // namespace

void Torture::GraphRecord() {
  if (pop_.graphs.size() >= kMaxGraphs) {
    GraphDestroy();
    return;
  }
  const char* call = "vyre_graph_record";
  int program_index;
  HandleChoice choice;
  vyre_program program{PickProgramHandle(&program_index, &choice)};
  const ProgramState* prog = program_index >= 0 ? &pop_.programs[size_t(program_index)] : nullptr;
  if (prog == nullptr || prog->kind == KernelKind::kOther) {
    RecordOtherProgram(program, choice);
    return;
  }
  const bool add = prog->kind == KernelKind::kAdd;
  GraphState g = NewRecordedGraph(&rng_, *prog);
  const uint64_t n = g.recorded;
  const vyre_binding_decl& out_decl = prog->decls[add ? 2 : 0];
  const bool ranged = out_decl.output_offset != 0 || out_decl.output_length != 0;
  bool well_formed = true;
  if (ranged && (!InRange(out_decl.output_offset, out_decl.output_length, n * 4) ||
                 (out_decl.output_length == 0 && out_decl.output_offset >= n * 4))) {
    well_formed = false;
  }
  // Resident graphs use ranges of exactly n elements, the output disjoint
  // from the inputs (the model does not follow aliasing).
  g.host = ranged || rng_.Chance(0.5);
  std::vector<vyre_dispatch_binding> bindings(prog->decls.size());
  PendingState host;  // the host memory, checked to be untouched by recording
  if (!g.host) BindRecordedRanges(&g, &bindings);
  if (g.host) BindRecordedHost(g, &bindings, &host);
  DispatchSpec spec;
  spec.bindings = bindings;
  spec.param_words = {g.param_n};
  spec.fixpoint_iterations = g.iterations;
  WithTail<vyre_dispatch_desc> desc{spec.Desc(), {}};
  // At most one malformation, with its exact status.
  vyre_status expected = VYRE_STATUS_OK;
  bool null_out = false, null_desc = false;
  if (well_formed && rng_.Chance(0.15)) {
    expected = MalformRecord(g.host, &spec, &desc.value, &null_out, &null_desc);
  }
  vyre_graph out{0};
  vyre_status s = Check(vyre_graph_record(program, null_desc ? nullptr : &desc.value,
                                          null_out ? nullptr : &out),
                        call);
  ExpectNotOk(s, choice, call);
  if (well_formed) ExpectStatus(s, expected, call);
  if (!well_formed && s == VYRE_STATUS_OK) Fail("vyre_graph_record accepted a malformed dispatch");
  // Recording launches nothing: host memory is untouched.
  CheckHostOutputs(host, false, call);
  if (s != VYRE_STATUS_OK) return;
  if (!well_formed || expected != VYRE_STATUS_OK) {
    Check(vyre_graph_destroy(out), "vyre_graph_destroy");
    return;
  }
  g.handle = out;
  pop_.graphs.push_back(std::move(g));
}

// A host vector add's shape: refused for a bad handle; for a program of
// random declarations only the rules every call obeys are checked, and
// a graph it makes is destroyed at once.
void Torture::RecordOtherProgram(vyre_program program, HandleChoice choice) {
  const char* call = "vyre_graph_record";
  std::vector<uint8_t> a(64, 1), b(64, 2), out(64, 0);
  DispatchSpec spec;
  spec.bindings = {HostIn(a.data(), 64), HostIn(b.data(), 64), HostOut(out.data(), 64)};
  spec.param_words = {16};
  vyre_dispatch_desc desc = spec.Desc();
  vyre_graph graph{0};
  vyre_status s = Check(vyre_graph_record(program, &desc, &graph), call);
  ExpectNotOk(s, choice, call);
  if (choice == HandleChoice::kStale) ExpectStatus(s, VYRE_STATUS_STALE_HANDLE, call);
  if (s == VYRE_STATUS_OK) {
    ExpectStatus(Check(vyre_graph_destroy(graph), "vyre_graph_destroy"), VYRE_STATUS_OK,
                 "vyre_graph_destroy");
  }
}

// Resident ranges of n elements for every binding; a HOST graph instead
// (g->host) when one does not fit.
void Torture::BindRecordedRanges(GraphState* g, std::vector<vyre_dispatch_binding>* bindings) {
  const bool add = g->kernel == KernelKind::kAdd;
  const size_t count = g->decls.size();
  std::vector<Range> ranges;
  for (size_t i = 0; i < count && !g->host; ++i) {
    Range r;
    std::vector<Range> avoid = add && i == 2 ? ranges : std::vector<Range>{};
    if (!RandomRange(g->context, g->recorded * 4, avoid, &r)) g->host = true;
    ranges.push_back(r);
  }
  if (!g->host) {
    g->bound = ranges;
    for (size_t i = 0; i < count; ++i) {
      (*bindings)[i] = Resident(vyre_buffer{ranges[i].buffer}, ranges[i].offset, ranges[i].bytes);
    }
  }
}

// HOST bindings of n elements, in `host` to check that recording leaves them
// alone.
void Torture::BindRecordedHost(const GraphState& g, std::vector<vyre_dispatch_binding>* bindings,
                               PendingState* host) {
  const uint64_t n = g.recorded;
  for (size_t i = 0; i < g.decls.size(); ++i) {
    host->host.emplace_back();
    HostBinding& h = host->host.back();
    h.memory = std::make_shared<std::vector<uint8_t>>(RandomBytes(n * 4));
    const uint32_t role = RoleOf(g.decls[i]);
    if (role == VYRE_ROLE_OUTPUT) std::fill(h.memory->begin(), h.memory->end(), kPoisonByte);
    h.before = *h.memory;
    if (role == VYRE_ROLE_INPUT) (*bindings)[i] = HostIn(h.memory->data(), n * 4);
    if (role == VYRE_ROLE_OUTPUT) (*bindings)[i] = HostOut(h.memory->data(), n * 4);
    if (role == VYRE_ROLE_INPUT_OUTPUT) (*bindings)[i] = HostInOut(h.memory->data(), n * 4);
  }
}

// One malformation of a recording; returns the status it calls for.
vyre_status Torture::MalformRecord(bool host, DispatchSpec* spec, vyre_dispatch_desc* desc,
                                   bool* null_out, bool* null_desc) {
  vyre_status expected = VYRE_STATUS_OK;
  switch (rng_.Below(8)) {
    case 0: *null_out = true; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
    case 1: *null_desc = true; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
    case 2:
      desc->flags = VYRE_DISPATCH_FLAG_COOPERATIVE;
      expected = VYRE_STATUS_INVALID_ARGUMENT;
      break;
    case 3:
      desc->binding_count = spec->bindings.size() - 1;
      expected = VYRE_STATUS_INVALID_ARGUMENT;
      break;
    case 4: desc->struct_size = 0; expected = VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE; break;
    case 5: desc->fixpoint_iterations = 0; expected = VYRE_STATUS_INVALID_ARGUMENT; break;
    case 6:
      if (!host && !pop_.dead_buffers.empty()) {
        spec->bindings[0].buffer.bits = rng_.Pick(pop_.dead_buffers);
        expected = VYRE_STATUS_STALE_HANDLE;
      }
      break;
    default:
      if (!host) {
        spec->bindings[0].offset = UINT64_MAX - 4 * rng_.Below(4);
        expected = VYRE_STATUS_OUT_OF_RANGE;
      }
      break;
  }
  return expected;
}

void Torture::GraphDestroy() {
  int index;
  HandleChoice choice;
  vyre_graph graph{PickGraphHandle(&index, &choice)};
  vyre_status s = Check(vyre_graph_destroy(graph), "vyre_graph_destroy");
  ExpectNotOk(s, choice, "vyre_graph_destroy");
  if (choice == HandleChoice::kStale) {
    ExpectStatus(s, VYRE_STATUS_STALE_HANDLE, "vyre_graph_destroy");
  }
  if (choice != HandleChoice::kValid) return;
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_graph_destroy");
  // A pending replay keeps the graph until it is waited on or released.
  ForgetGraph(size_t(index));
}

void Torture::GraphQuery() {
  int index;
  HandleChoice choice;
  vyre_graph graph{PickGraphHandle(&index, &choice)};
  WithTail<vyre_graph_info> info{VYRE_GRAPH_INFO_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &info, &well_formed);
  // An output struct: a larger one with a non-zero tail is fine too.
  well_formed = well_formed || info.value.struct_size > sizeof(vyre_graph_info);
  vyre_status s = Check(vyre_graph_info_get(graph, &info.value), "vyre_graph_info_get");
  ExpectNotOk(s, choice, "vyre_graph_info_get");
  if (choice != HandleChoice::kValid) {
    ExpectHandleError(s, choice, "vyre_graph_info_get");
    return;
  }
  if (!well_formed) {
    ExpectStatus(s, VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE, "vyre_graph_info_get");
    return;
  }
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_graph_info_get");
  if (s == VYRE_STATUS_OK) CheckGraphInfo(pop_.graphs[size_t(index)], info.value);
  QueryGraphNodes(graph, info.value.node_count);
}

void Torture::CheckGraphInfo(const GraphState& g, const vyre_graph_info& i) {
  bool right = i.context.bits == g.context && i.node_count >= 1 &&
               i.from_sequence == (g.sequence ? 1u : 0u);
  if (!g.sequence) {
    right = right && i.element_count == g.count && i.capacity_elements == g.capacity &&
            i.kernel_node_count == g.iterations;
  }
  if (!right) {
    Fail("vyre_graph_info_get: node_count " + std::to_string(i.node_count) + ", element_count " +
         std::to_string(i.element_count) + " (expected " + std::to_string(g.count) +
         "), capacity " + std::to_string(i.capacity_elements) + " (expected " +
         std::to_string(g.capacity) + ")");
  }
}

// Node kinds and kernel node updates; an index past the end sometimes.
void Torture::QueryGraphNodes(vyre_graph graph, uint64_t nodes) {
  uint64_t node = rng_.Below(nodes + 2);
  if (rng_.Chance(0.05)) node = UINT64_MAX - rng_.Below(4);
  vyre_graph_node_kind kind = VYRE_GRAPH_NODE_KIND_FORCE32;
  vyre_status s = Check(vyre_graph_node_kind_get(graph, node, &kind), "vyre_graph_node_kind_get");
  if (node >= nodes) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_graph_node_kind_get");
  } else {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_graph_node_kind_get");
    if (kind != VYRE_GRAPH_NODE_KERNEL && kind != VYRE_GRAPH_NODE_MEMCPY &&
        kind != VYRE_GRAPH_NODE_MEMSET) {
      Fail("vyre_graph_node_kind_get: node " + std::to_string(node) + " has kind " +
           std::to_string(int(kind)));
    }
  }
  if (rng_.Chance(0.3)) {
    s = Check(vyre_graph_node_kind_get(graph, 0, nullptr), "vyre_graph_node_kind_get");
    ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, "vyre_graph_node_kind_get(NULL)");
  }
  if (!rng_.Chance(0.5)) return;
  UpdateKernelNode(graph, node, nodes, kind);
}

// A grid at least as large as any derived one (every binding holds at most
// 16384 elements): the model's results stay the same.
void Torture::UpdateKernelNode(vyre_graph graph, uint64_t node, uint64_t nodes,
                               vyre_graph_node_kind kind) {
  vyre_kernel_node_update update = VYRE_KERNEL_NODE_UPDATE_INIT;
  update.flags = VYRE_KERNEL_NODE_UPDATE_GRID;
  if (rng_.Chance(0.3)) update.flags |= VYRE_KERNEL_NODE_UPDATE_SCALARS;  // the kernels read none
  update.grid[0] = uint32_t(16384 * rng_.Range(1, 4));
  update.grid[1] = update.grid[2] = 1;
  vyre_status expected = VYRE_STATUS_OK;
  if (node >= nodes) {
    expected = VYRE_STATUS_OUT_OF_RANGE;
  } else if (kind != VYRE_GRAPH_NODE_KERNEL) {
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  } else if (rng_.Chance(0.1)) {
    update.flags = 0;
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  } else if (rng_.Chance(0.1)) {
    update.grid[1] = 0;
    expected = VYRE_STATUS_INVALID_ARGUMENT;
  }
  vyre_status s =
      Check(vyre_graph_kernel_node_update(graph, node, &update), "vyre_graph_kernel_node_update");
  ExpectStatus(s, expected, "vyre_graph_kernel_node_update");
}

}  // namespace torture
}  // namespace vyre_test
