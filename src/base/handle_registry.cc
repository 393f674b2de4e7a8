#include "base/handle_registry.h"

namespace vyre {

const char* HandleTypeName(HandleType type) {
  switch (type) {
    case HandleType::kContext: return "context";
    case HandleType::kBuffer: return "buffer";
    case HandleType::kProgram: return "program";
    case HandleType::kPending: return "pending";
    case HandleType::kGraph: return "graph";
    case HandleType::kSequence: return "sequence";
    case HandleType::kEgraphImage: return "e-graph image";
  }
  return "unknown";
}

const char* HandleTypeMaker(HandleType type) {
  switch (type) {
    case HandleType::kContext: return "vyre_context_create";
    case HandleType::kBuffer: return "vyre_buffer_alloc";
    case HandleType::kProgram: return "vyre_program_create";
    case HandleType::kPending: return "vyre_dispatch_async";
    case HandleType::kGraph: return "vyre_graph_record";
    case HandleType::kSequence: return "vyre_sequence_create";
    case HandleType::kEgraphImage: return "vyre_egraph_image_create";
  }
  return "the matching create function";
}

absl::Status HandleError(const char* what, HandleType expected, uint64_t bits, bool stale) {
  const char* name = HandleTypeName(expected);
  if (bits == 0) {
    return Errorf(VYRE_STATUS_INVALID_HANDLE,
                  "%s: the %s handle is 0 (none). Fix: pass a handle returned by %s.", what,
                  name, HandleTypeMaker(expected));
  }
  uint8_t tag = handle_bits::TypeOf(bits);
  if (tag != static_cast<uint8_t>(expected)) {
    const char* actual = "unknown";
    for (HandleType t : {HandleType::kContext, HandleType::kBuffer, HandleType::kProgram,
                         HandleType::kPending, HandleType::kGraph, HandleType::kSequence,
                         HandleType::kEgraphImage}) {
      if (tag == static_cast<uint8_t>(t)) actual = HandleTypeName(t);
    }
    return Errorf(VYRE_STATUS_INVALID_HANDLE,
                  "%s: handle 0x%016x is not a %s handle (its type tag says %s). Fix: pass "
                  "the %s handle returned by %s, not a handle of another type.",
                  what, bits, name, actual, name, HandleTypeMaker(expected));
  }
  if (stale) {
    return Errorf(VYRE_STATUS_STALE_HANDLE,
                  "%s: %s handle 0x%016x names an object that was destroyed (directly or with "
                  "its context). Fix: stop using a handle after destroying it; create a new "
                  "one with %s.",
                  what, name, bits, HandleTypeMaker(expected));
  }
  return Errorf(VYRE_STATUS_INVALID_HANDLE,
                "%s: %s handle 0x%016x was never issued by this library. Fix: pass a handle "
                "returned by %s, unmodified.",
                what, name, bits, HandleTypeMaker(expected));
}

}  // namespace vyre
