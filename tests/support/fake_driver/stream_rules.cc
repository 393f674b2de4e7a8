// The rules for work on streams: which streams exist, where work enqueued
// on a capturing stream goes, and the calls a capture forbids.
#include <thread>

#include "state.h"

namespace fake_driver {

CUresult CheckStream(CUstream stream, const char* fn) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    return CUDA_SUCCESS;
  }
  if (S().streams.count(reinterpret_cast<FakeStream*>(stream)) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "%s: unknown stream %p", fn,
                  static_cast<void*>(stream));
  }
  return CUDA_SUCCESS;
}

// The object behind a created stream; null for the NULL, legacy and
// per-thread streams (and for unknown handles, which CheckStream rejects).
FakeStream* FindStream(CUstream stream) {
  auto* s = reinterpret_cast<FakeStream*>(stream);
  return S().streams.count(s) ? s : nullptr;
}

bool IsLegacyStream(CUstream stream) { return stream == nullptr || stream == CU_STREAM_LEGACY; }

// Work on the legacy stream waits for every blocking stream; a blocking stream
// that captures would thereby join the capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
// and that capture is invalidated.
CUresult RejectImplicitCaptureDependency(CUstream stream, const char* fn) {
  if (!IsLegacyStream(stream)) return CUDA_SUCCESS;
  bool conflict = false;
  for (FakeStream* s : S().streams) {
    if (s->capture && (s->flags & CU_STREAM_NON_BLOCKING) == 0) {
      s->capture->invalidated = true;
      conflict = true;
    }
  }
  if (!conflict) return CUDA_SUCCESS;
  return Misuse(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                "%s on the legacy stream while a blocking stream captures", fn);
}

// Where work enqueued on `stream` goes: *capture is the capture it joins, or
// null to run it now. A capture already invalidated takes no more work.
CUresult StreamCapture(CUstream stream, const char* fn, FakeCapture** capture) {
  *capture = nullptr;
  if (CUresult r = RejectImplicitCaptureDependency(stream, fn)) return r;
  FakeStream* s = FindStream(stream);
  if (s == nullptr || !s->capture) return CUDA_SUCCESS;
  if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *capture = s->capture.get();
  return CUDA_SUCCESS;
}

// A call that capture does not support, made on a capturing stream: fails and
// invalidates the capture.
CUresult RejectOnCapturingStream(CUstream stream, const char* fn) {
  FakeStream* s = FindStream(stream);
  if (s == nullptr || !s->capture) return CUDA_SUCCESS;
  s->capture->invalidated = true;
  return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s on a capturing stream", fn);
}

// "Potentially unsafe" calls (allocation, freeing, module loading, stream
// synchronisation) are forbidden to a thread with a capture of its own not
// begun in RELAXED mode, and, since every thread's interaction mode is the
// default GLOBAL, to all threads while any capture runs in GLOBAL mode. The
// call fails and invalidates those captures.
CUresult RejectUnsafeDuringCapture(const char* fn) {
  const std::thread::id self = std::this_thread::get_id();
  bool conflict = false;
  for (FakeStream* s : S().streams) {
    FakeCapture* c = s->capture.get();
    if (c == nullptr) continue;
    bool own = c->thread == self && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    if (own || c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
      c->invalidated = true;
      conflict = true;
    }
  }
  if (!conflict) return CUDA_SUCCESS;
  return Misuse(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "%s during a GLOBAL or THREAD_LOCAL stream capture", fn);
}

}  // namespace fake_driver
