// Streams and events: create, destroy, synchronise, query, record, wait and
// elapsed time.
#include <chrono>
#include <cstdint>

#include "entry_points.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Streams and events
// ---------------------------------------------------------------------------

CUresult fake_cuStreamCreate(CUstream* stream, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamCreate")) return r;
  if (stream == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: NULL");
  auto* s = new FakeStream{};
  s->flags = flags;
  s->device = CurrentDevice();
  S().streams.insert(s);
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamDestroy(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamDestroy")) return r;
  auto* s = reinterpret_cast<FakeStream*>(stream);
  if (S().streams.count(s) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy: unknown stream %p",
                  static_cast<void*>(stream));
  }
  if (s->capture) {
    // Kept alive (and its capture invalidated) so the capture can still be ended.
    s->capture->invalidated = true;
    return Misuse(CUDA_ERROR_ILLEGAL_STATE, "cuStreamDestroy on a capturing stream");
  }
  S().streams.erase(s);
  delete s;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamSynchronize(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamSynchronize")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamSynchronize")) return r;
  if (CUresult r = RejectOnCapturingStream(stream, "cuStreamSynchronize")) return r;
  if (CUresult r = RejectImplicitCaptureDependency(stream, "cuStreamSynchronize")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuStreamSynchronize")) return r;
  WaitWhileHeld(lock);
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamQuery(CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamQuery")) return r;
  if (CUresult r = CheckStream(stream, "cuStreamQuery")) return r;
  if (CUresult r = RejectOnCapturingStream(stream, "cuStreamQuery")) return r;
  if (S().hold) return CUDA_ERROR_NOT_READY;
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventCreate(CUevent* event, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventCreate")) return r;
  if (event == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuEventCreate: NULL");
  auto* e = new FakeEvent{};
  e->flags = flags;
  e->device = CurrentDevice();
  S().events.insert(e);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult fake_cuEventDestroy(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventDestroy")) return r;
  auto* e = reinterpret_cast<FakeEvent*>(event);
  if (S().events.erase(e) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy: unknown event %p",
                  static_cast<void*>(event));
  }
  delete e;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventRecord(CUevent event, CUstream stream) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventRecord", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuEventRecord")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord: unknown event");
  if (CUresult r = CheckStreamDevice(stream, "cuEventRecord")) return r;
  if (e->device != CurrentDevice()) {
    // An event is recorded on a stream of its own context.
    return Misuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventRecord: an event of device %d's context recorded with device %d's "
                  "current",
                  e->device, CurrentDevice());
  }
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, "cuEventRecord", &capture)) return r;
  if (capture != nullptr) {
    // Legal (it orders other streams' work into the capture), but the event
    // then stands for no completed work: waiting on it is an error.
    e->captured = true;
    return CUDA_SUCCESS;
  }
  e->captured = false;
  e->recorded = true;
  e->stream = reinterpret_cast<uint64_t>(stream);
  e->time = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

// Streams run their work at once (or, deferred, in one queue in enqueue
// order), so a wait orders nothing here; it is validated and counted, and the
// streams it joined are kept for tests (fake_cuda_stats.last_wait_*).
CUresult fake_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuStreamWaitEvent", kEnqueue)) return r;
  if (S().latent != CUDA_SUCCESS) return CUDA_SUCCESS;  // a latent fault: accepted, dropped
  if (CUresult r = CheckStream(stream, "cuStreamWaitEvent")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent: unknown event");
  // The event may be another context's, of any device (how work is ordered
  // across devices); the stream must be the current context's.
  if (CUresult r = CheckStreamDevice(stream, "cuStreamWaitEvent")) return r;
  if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuStreamWaitEvent: flags 0x%x", flags);
  }
  if (!e->recorded && !e->captured) {
    // Legal (the wait is then a no-op), but the engine always records first.
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent on an event never recorded");
  }
  FakeCapture* capture = nullptr;
  if (CUresult r = StreamCapture(stream, "cuStreamWaitEvent", &capture)) return r;
  State& s = S();
  ++s.stats.stream_waits;
  s.stats.last_wait_stream = reinterpret_cast<uint64_t>(stream);
  s.stats.last_wait_event_stream = e->stream;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventSynchronize(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventSynchronize")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize: unknown event");
  if (e->captured) {
    return Misuse(CUDA_ERROR_CAPTURED_EVENT,
                  "cuEventSynchronize on an event last recorded in a capturing stream");
  }
  WaitWhileHeld(lock);
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventQuery(CUevent event) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventQuery")) return r;
  FakeEvent* e = FindEvent(event);
  if (e == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventQuery: unknown event");
  if (e->captured) {
    return Misuse(CUDA_ERROR_CAPTURED_EVENT,
                  "cuEventQuery on an event last recorded in a capturing stream");
  }
  if (S().hold) return CUDA_ERROR_NOT_READY;
  FlushDeferred();
  return CUDA_SUCCESS;
}

CUresult fake_cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuEventElapsedTime")) return r;
  FakeEvent* s = FindEvent(start);
  FakeEvent* e = FindEvent(end);
  if (s == nullptr || e == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime: unknown event");
  }
  if (ms == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuEventElapsedTime: NULL");
  if (s->captured || e->captured) {
    return Misuse(CUDA_ERROR_CAPTURED_EVENT,
                  "cuEventElapsedTime on an event last recorded in a capturing stream");
  }
  if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventElapsedTime on an event created with CU_EVENT_DISABLE_TIMING");
  }
  if (!s->recorded || !e->recorded) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime on an unrecorded event");
  }
  if (S().hold) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(e->time - s->time).count();
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
