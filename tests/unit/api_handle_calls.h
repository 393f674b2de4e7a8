// Every public entry point that takes a handle, called with otherwise valid
// arguments, so a table-driven test can feed each one 0, forged, wrong-type
// and stale handles and check that the handle alone decides the status.
#ifndef VYRE_TESTS_UNIT_API_HANDLE_CALLS_H_
#define VYRE_TESTS_UNIT_API_HANDLE_CALLS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vyre_cuda.h"

namespace vyre_test {

enum class HandleKind { kContext, kBuffer, kProgram, kPending, kGraph, kSequence };

const char* HandleKindName(HandleKind kind);

struct HandleCall {
  std::string function;   // e.g. "vyre_buffer_upload"
  HandleKind kind;        // the handle type it expects
  std::function<vyre_status(uint64_t bits)> call;
};

// All handle-taking calls. Each passes `bits` as its handle and valid values
// for everything else (a vector-add program desc, a 16-byte host dispatch, a
// replay of that dispatch's graph). The graph and sequence calls are in the
// table too (kinds kGraph and kSequence, plus vyre_graph_record (kProgram)
// and vyre_sequence_create (kContext)); a table of only them is
// GraphHandleCalls().
std::vector<HandleCall> AllHandleCalls();
std::vector<HandleCall> GraphHandleCalls();

// A dispatch call over a RESIDENT binding whose buffer handle is `bits`,
// through a live vector-add program (kind kBuffer).
HandleCall ResidentBindingCall(vyre_program add_program);

// A replay of `resident_add_graph` (a vector add recorded over three RESIDENT
// bindings of 16 bytes) that rebinds every binding to the buffer `bits`
// (kind kBuffer).
HandleCall ResidentReplayCall(vyre_graph resident_add_graph);

// vyre_sequence_create on `context` with one FILL step of 16 bytes on the
// buffer `bits` (kind kBuffer).
HandleCall SequenceStepBufferCall(vyre_context context);

// vyre_sequence_create on `context` with one DISPATCH step of the program
// `bits` over `buffer` (>= 16 bytes) as an inc program's RESIDENT binding
// (kind kProgram).
HandleCall SequenceStepProgramCall(vyre_context context, vyre_buffer buffer);

// Random 64-bit values no library would issue (fixed seed).
std::vector<uint64_t> ForgedHandleBits();

}  // namespace vyre_test

#endif  // VYRE_TESTS_UNIT_API_HANDLE_CALLS_H_
