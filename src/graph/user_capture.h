// Captures of caller work (vyre_capture_begin / _dispatch / _end): a stream
// of the context's own, never its work stream, captured until the caller
// ends it into a graph. At most one open capture per context; the open ones
// live in a process-wide table keyed by context, so vyre_context_destroy can
// refuse while one is open.
#ifndef VYRE_GRAPH_USER_CAPTURE_H_
#define VYRE_GRAPH_USER_CAPTURE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "runtime/context/context.h"
#include "runtime/program/program.h"
#include "vyre_cuda.h"

namespace vyre {

// Begins a capture on `context` and returns its stream as an integer.
absl::StatusOr<uint64_t> BeginUserCapture(std::shared_ptr<Context> context,
                                          const vyre_capture_desc& desc, const char* what);

// Enqueues a dispatch of `program` (RESIDENT bindings only) into the open
// capture of its context.
absl::Status CaptureDispatch(std::shared_ptr<Program> program, const vyre_dispatch_desc& desc,
                             const char* what);

// Ends the open capture of `context` into a graph.
absl::StatusOr<std::shared_ptr<Graph>> EndUserCapture(const std::shared_ptr<Context>& context,
                                                      const char* what);

// Whether `context` has an open capture.
bool UserCaptureOpen(const Context& context);

// Refuses an open capture's stream where the API joins a caller's stream to
// the context's work stream by events (vyre_graph_launch,
// vyre_context_wait_stream / _signal_stream): the join would sweep the work
// stream, and so other threads' work, into the capture.
absl::Status RefuseCaptureStream(uint64_t cu_stream, const char* what);

}  // namespace vyre

#endif  // VYRE_GRAPH_USER_CAPTURE_H_
