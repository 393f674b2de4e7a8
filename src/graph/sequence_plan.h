// A sequence's plan: its descriptor and each caller step checked and resolved
// into the SequenceStep the enqueue code runs (buffers looked up, ranges
// checked, host staging laid out), and the run order the repeated block
// expands to. Nothing here uploads or allocates device memory, so Create
// can check every step before it moves any bytes.
#ifndef VYRE_GRAPH_SEQUENCE_PLAN_H_
#define VYRE_GRAPH_SEQUENCE_PLAN_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "runtime/context/context.h"
#include "runtime/dispatch/kernel_launch.h"
#include "runtime/program/program.h"
#include "runtime/transfer/buffer.h"
#include "vyre_cuda.h"

namespace vyre {

struct SequenceStep {
  vyre_step_kind kind = VYRE_STEP_FILL;
  // Every buffer the step touches, kept alive and checked before each run.
  absl::InlinedVector<std::shared_ptr<Buffer>, 4> buffers;
  // DISPATCH
  std::shared_ptr<Program> program;
  LaunchShape shape;
  uint32_t iterations = 1;
  KernelValues values;
  absl::InlinedVector<std::pair<CUdeviceptr, uint64_t>, 4> zeroed;  // OUTPUT bindings
  std::string param_words;  // until uploaded at creation
  // FILL / COPY / UPLOAD / DOWNLOAD
  CUdeviceptr dst = 0;
  CUdeviceptr src = 0;
  uint64_t bytes = 0;
  unsigned char fill_byte = 0;
  const void* host_src = nullptr;
  void* host_dst = nullptr;
  uint64_t pinned_offset = 0;  // UPLOAD / DOWNLOAD staging
};

// What one run moves, for telemetry.
struct SequenceCounts {
  uint64_t h2d_bytes = 0, h2d_operations = 0, d2h_bytes = 0, d2h_operations = 0;
  uint64_t memset_operations = 0, kernel_launches = 0;
};

// "DISPATCH", "FILL", ... for messages; "unknown" for other values.
const char* StepKindName(uint32_t kind);

// The descriptor's own fields: a step array, a repeated block that lies
// within it and runs, and a run that stays under the step limit.
absl::Status CheckSequenceDesc(const vyre_sequence_desc& desc, const char* what);

// Checks caller step `index` and resolves it into `step`. An UPLOAD or
// DOWNLOAD step takes its staging at *pinned_bytes and advances it. A
// DISPATCH step's kernel is opted in to large shared memory here (a driver
// call), in step order; its parameter-word pointer is left for the caller to
// fill once the words are uploaded.
absl::Status PlanSequenceStep(const Context& context, const vyre_sequence_step& in, size_t index,
                              uint64_t* pinned_bytes, const char* what, SequenceStep* step);

// Step indices in run order: the steps before the block, the block
// repeat_count times, the steps after it. `desc` passed CheckSequenceDesc.
std::vector<uint32_t> SequenceRunOrder(const vyre_sequence_desc& desc);

// What one run in `order` moves.
SequenceCounts CountSequenceRun(const std::vector<SequenceStep>& steps,
                                const std::vector<uint32_t>& order);

}  // namespace vyre

#endif  // VYRE_GRAPH_SEQUENCE_PLAN_H_
