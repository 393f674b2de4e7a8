// Optional run-time compilation of CUDA C++ through NVRTC, loaded with dlopen
// on first use like the driver, so the library needs no toolkit at run time
// unless a program is built from source.
#ifndef VYRE_DRIVER_NVRTC_H_
#define VYRE_DRIVER_NVRTC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "vyre_cuda.h"

namespace vyre::driver {

// Compiles `source` for compute capability major.minor and returns a cubin.
// Errors: NVRTC_UNAVAILABLE (library missing); by NVRTC's result: a compile
// error is COMPILE_FAILED (with the log), an option NVRTC rejects
// INVALID_ARGUMENT, NVRTC out of memory OUT_OF_MEMORY (NvrtcFailure).
// `what` (the API call) starts the messages.
absl::StatusOr<std::string> CompileCudaSource(absl::string_view source, absl::string_view entry,
                                              const std::vector<std::string>& options,
                                              int cc_major, int cc_minor, const char* what);

// How an nvrtcResult of nvrtcCompileProgram (or nvrtcCreateProgram) is
// reported: its status and Fix (without "Fix: " and the final period; the
// compile error's Fix names the log). Every nvrtcResult up to CUDA 13.0's,
// and a generic answer for newer ones.
struct NvrtcFailureInfo {
  vyre_status status;
  const char* fix;
};
NvrtcFailureInfo NvrtcFailure(int nvrtc_result, bool has_log);

}  // namespace vyre::driver

#endif  // VYRE_DRIVER_NVRTC_H_
