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

namespace vyre::driver {

// Compiles `source` for compute capability major.minor and returns a cubin.
// Errors: NVRTC_UNAVAILABLE (library missing), COMPILE_FAILED (with the log).
absl::StatusOr<std::string> CompileCudaSource(absl::string_view source, absl::string_view entry,
                                              const std::vector<std::string>& options,
                                              int cc_major, int cc_minor);

}  // namespace vyre::driver

#endif  // VYRE_DRIVER_NVRTC_H_
