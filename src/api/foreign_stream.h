// The caller's CUDA streams the API takes as integers (vyre_context_wait_stream,
// vyre_context_signal_stream, vyre_graph_launch).
#ifndef VYRE_API_FOREIGN_STREAM_H_
#define VYRE_API_FOREIGN_STREAM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "base/status.h"

namespace vyre {

// The CUstream of vyre_context_wait_stream / _signal_stream: any non-zero
// value (1 and 2 are CUDA's legacy and per-thread default streams).
inline absl::Status CheckForeignStream(const char* what, uint64_t cu_stream) {
  if (cu_stream != 0) return absl::OkStatus();
  return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                "%s: cu_stream is 0, which is ambiguous (the legacy or the per-thread default "
                "stream, depending on how the other code was compiled). Fix: pass 1 for the "
                "legacy default stream (CU_STREAM_LEGACY; the CUDA array interface and DLPack "
                "use 1 for it), 2 for the per-thread default stream (CU_STREAM_PER_THREAD), or "
                "the CUstream itself (e.g. a CuPy or PyTorch stream's ptr/cuda_stream).",
                what);
}

}  // namespace vyre

#endif  // VYRE_API_FOREIGN_STREAM_H_
