// Shared by the libFuzzer targets in tests/fuzz: the environment, the one
// context every target makes once, and the checks every call's outcome must
// pass (the rules the public header states for every function).
//
// A failed check prints what went wrong and aborts, which libFuzzer reports
// as a crash and saves the input, like a sanitizer finding.
#ifndef VYRE_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define VYRE_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "vyre_cuda.h"

namespace vyre_fuzz {

// Points VYRE_CUDA_DRIVER_LIBRARY at the fake driver built with the targets
// (unless the environment already names one) and VYRE_CUDA_NVRTC_LIBRARY at
// a path that does not exist (unless set): NVRTC is an uninstrumented
// third-party compiler, slow on every input; CUDA source still runs through
// every check before the compiler is loaded. The fake device gets 256 MiB
// (FAKE_CUDA_MEMORY_BYTES, unless set). Call first in LLVMFuzzerInitialize.
void SetUpEnvironment();

// Creates a context on the fake device with a small staging ring (so inputs
// over 256 KiB take the pinned-chunk pipeline without large allocations);
// aborts if that fails.
vyre_context MakeContext();

[[noreturn]] void Fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Checks the outcome of a call that returned `status`: a status the header
// defines, never INTERNAL, DRIVER_ERROR or DEVICE_FAULT (the fake driver
// fails only on misuse or when a fault is armed, and no target arms one);
// vyre_last_error() reports the same status; an OK
// call leaves no message; a failure's message has the first line
// "<what failed>: <why>. Fix: <what to do>." of at most 1023 bytes with a Fix
// of its own. Returns `status`.
vyre_status Check(vyre_status status, const char* call);
#define VYRE_FUZZ_CALL(expr) ::vyre_fuzz::Check((expr), #expr)

// Like Check, and the status must be `expected`.
void Expect(vyre_status status, vyre_status expected, const char* call);
#define VYRE_FUZZ_EXPECT(expr, expected) ::vyre_fuzz::Expect((expr), (expected), #expr)

// The fake driver's misuse counter (calls the real driver would reject:
// pointers outside every allocation, unknown handles, double frees, no current
// context). Any increase is an engine bug, unless the input made a kernel
// read outside its arguments, which the targets avoid.
uint64_t FakeMisuseCount();
// Aborts if the counter moved since `before`.
void ExpectNoMisuse(uint64_t before, const char* after_what);

// Object counts from vyre_context_telemetry that must return to their level
// once an input's objects are destroyed.
struct LiveObjects {
  uint64_t buffers = 0, programs = 0, pendings = 0, graphs = 0, sequences = 0;
  bool operator==(const LiveObjects& o) const {
    return buffers == o.buffers && programs == o.programs && pendings == o.pendings &&
           graphs == o.graphs && sequences == o.sequences;
  }
};
LiveObjects Live(vyre_context context);
void ExpectLive(vyre_context context, const LiveObjects& expected, const char* after_what);

// Picks an "interesting" 64-bit value: small numbers, edges (2^k, 2^k +- 1,
// UINT32_MAX, UINT64_MAX, ...), or raw fuzz bytes.
uint64_t InterestingU64(FuzzedDataProvider& in);
uint32_t InterestingU32(FuzzedDataProvider& in);

// A NUL-terminated string for a name field: empty, short, long (up to
// `max_long` bytes), with bytes that are not UTF-8, or fuzz bytes verbatim.
// The result is owned by the caller; pass .c_str().
std::string FuzzName(FuzzedDataProvider& in, size_t max_long);

// A struct_size for a descriptor of `ours` bytes: 0, 8 bytes short, 8 bytes
// long, anything up to `max`, or `ours` for every other outcome of a draw
// in [0, last_choice] (the targets weigh "ours" differently).
uint32_t PickStructSize(FuzzedDataProvider& in, uint32_t ours, uint32_t max, int last_choice);

// Writes `entry` as entry `i` of a caller's array of `stride`-byte
// descriptors in `bytes` (exactly the caller's array, so ASan reports any
// read past it). Entry 0's struct_size is the stride; a later one now and
// then claims another size (at most `max_stride`). A caller whose struct is
// `stride` bytes writes that many per entry (entries never overlap, so every
// struct_size the library reads is one written), and now and then puts
// `tail_byte` into the part of an entry the library does not know.
template <typename T>
void WriteArrayEntry(FuzzedDataProvider& in, T entry, size_t i, uint32_t stride, uint32_t ours,
                     uint32_t max_stride, int last_choice, unsigned char tail_byte,
                     std::vector<unsigned char>* bytes) {
  entry.struct_size =
      i == 0 ? stride
             : (in.ConsumeIntegralInRange<int>(0, 15) == 0
                    ? PickStructSize(in, ours, max_stride, last_choice)
                    : stride);
  if (stride >= 4) {
    std::memcpy(&(*bytes)[i * stride], &entry, std::min<size_t>(stride, sizeof entry));
  } else if (i == 0) {
    std::memcpy(&(*bytes)[0], &entry.struct_size, 4);
  }
  if (stride >= 4 && entry.struct_size > ours && i * stride + entry.struct_size <= bytes->size() &&
      in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    (*bytes)[i * stride + in.ConsumeIntegralInRange<size_t>(ours, entry.struct_size - 1)] =
        tail_byte;
  }
}

}  // namespace vyre_fuzz

#endif  // VYRE_TESTS_FUZZ_FUZZ_SUPPORT_H_
