// A sequence: an ordered list of steps over resident buffers (dispatch, fill,
// copy, upload, download) with an optional repeated block, validated once.
// The same enqueue code runs it eagerly and records it as a graph, so both
// give identical results.
#ifndef VYRE_GRAPH_SEQUENCE_H_
#define VYRE_GRAPH_SEQUENCE_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "graph/capture.h"
#include "graph/sequence_plan.h"
#include "runtime/transfer/buffer.h"
#include "runtime/context/context.h"
#include "runtime/dispatch/kernel_launch.h"
#include "runtime/transfer/memory.h"
#include "runtime/program/program.h"
#include "vyre_cuda.h"

namespace vyre {

class Sequence {
 public:
  static absl::StatusOr<std::shared_ptr<Sequence>> Create(std::shared_ptr<Context> context,
                                                          const vyre_sequence_desc& desc,
                                                          const char* what);
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  Context& context() const { return *context_; }
  const std::shared_ptr<Context>& context_ref() const { return context_; }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }

  // Runs every step on the context's work stream and waits.
  absl::Status Run(vyre_timing* timing, const char* what);

  // Enqueues every step in run order on `stream`, with host staging at
  // `pinned` (pinned_bytes() long); describes each operation in `ops` when
  // not null. Used by Run and by graph recording.
  absl::Status Enqueue(CUstream stream, unsigned char* pinned, std::vector<RecordedOp>* ops,
                       const char* what) const;
  // STALE_HANDLE when a buffer the steps use was freed.
  absl::Status CheckBuffersLive(const char* what) const;
  // Copies the UPLOAD steps' host memory into `pinned`, and the DOWNLOAD
  // steps' results out of it.
  void StageUploads(unsigned char* pinned) const;
  void FinishDownloads(const unsigned char* pinned) const;
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  const SequenceCounts& counts() const { return counts_; }

 private:
  explicit Sequence(std::shared_ptr<Context> context) : context_(std::move(context)) {}
  // Creation after CheckSequenceDesc, in call order: every step planned,
  // then the DISPATCH steps' parameter words uploaded and pointed at.
  absl::Status AddSteps(const vyre_sequence_desc& desc, const char* what);
  absl::Status UploadParamWords(const char* what);

  std::shared_ptr<Context> context_;  // first: outlives the memory below
  std::vector<SequenceStep> steps_;
  std::vector<uint32_t> order_;  // step indices in run order, the block repeated
  OwnedBytes params_;            // every DISPATCH step's parameter words
  OwnedBytes pinned_;            // eager runs' upload/download staging
  uint64_t pinned_bytes_ = 0;
  SequenceCounts counts_;
  uint64_t handle_ = 0;
  bool counted_ = false;
  std::mutex run_mu_;  // eager runs share pinned_
};

// The process-wide table of sequence handles.
HandleRegistry<Sequence>& Sequences();

}  // namespace vyre

#endif  // VYRE_GRAPH_SEQUENCE_H_
