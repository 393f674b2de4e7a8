#include "driver/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace vyre::driver {
namespace {

#define VYRE_NVRTC_ENTRY_POINTS(X) \
  X(nvrtcGetErrorString)           \
  X(nvrtcCreateProgram)            \
  X(nvrtcDestroyProgram)           \
  X(nvrtcCompileProgram)           \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)

struct NvrtcApi {
#define VYRE_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  VYRE_NVRTC_ENTRY_POINTS(VYRE_NVRTC_MEMBER)
#undef VYRE_NVRTC_MEMBER
};

struct LoadedNvrtc {
  absl::once_flag once;
  absl::Status status;
  NvrtcApi api;
};

LoadedNvrtc& Loaded() {
  static LoadedNvrtc* nvrtc = new LoadedNvrtc;
  return *nvrtc;
}

absl::Status Load(LoadedNvrtc& n) {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("VYRE_CUDA_NVRTC_LIBRARY"); path && *path) {
    candidates.push_back(path);  // an explicit choice replaces the search
  } else {
    for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) {
      candidates.push_back(name);
    }
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* root = std::getenv(env); root && *root) {
        candidates.push_back(absl::StrCat(root, "/lib64/libnvrtc.so"));
      }
    }
    candidates.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  }
  void* library = nullptr;
  for (const std::string& candidate : candidates) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
  }
  if (library == nullptr) {
    return MakeError(VYRE_STATUS_NVRTC_UNAVAILABLE,
                     absl::StrCat("loading NVRTC: none of ", absl::StrJoin(candidates, ", "),
                                  " could be opened. Fix: install the CUDA toolkit's NVRTC "
                                  "(libnvrtc) or set VYRE_CUDA_NVRTC_LIBRARY to its path; or "
                                  "build the program from PTX or a cubin instead."));
  }
#define VYRE_NVRTC_RESOLVE(name)                                                       \
  n.api.name = reinterpret_cast<decltype(n.api.name)>(dlsym(library, #name));          \
  if (n.api.name == nullptr) {                                                         \
    return MakeError(VYRE_STATUS_NVRTC_UNAVAILABLE,                                    \
                     "loading NVRTC: the library lacks " #name ". Fix: install NVRTC " \
                     "from CUDA 12.0 or newer.");                                      \
  }
  VYRE_NVRTC_ENTRY_POINTS(VYRE_NVRTC_RESOLVE)
#undef VYRE_NVRTC_RESOLVE
  return absl::OkStatus();
}

// Owns one nvrtcProgram.
class ProgramGuard {
 public:
  explicit ProgramGuard(const NvrtcApi& api) : api_(api) {}
  ~ProgramGuard() {
    if (program_ != nullptr) api_.nvrtcDestroyProgram(&program_);
  }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_ = nullptr;
};

}  // namespace

NvrtcFailureInfo NvrtcFailure(int nvrtc_result, bool has_log) {
  // Numbers rather than enumerators: older nvrtc.h versions lack the newest.
  switch (nvrtc_result) {
    case 1:  // NVRTC_ERROR_OUT_OF_MEMORY
    case 14:  // NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED
      return {VYRE_STATUS_OUT_OF_MEMORY,
              "NVRTC ran out of host memory: free memory in this process, or compile less "
              "code at once"};
    case 5:  // NVRTC_ERROR_INVALID_OPTION
      return {VYRE_STATUS_INVALID_ARGUMENT,
              "remove or correct the compile option NVRTC rejects (the library adds "
              "--gpu-architecture itself; NVRTC's options are listed in its documentation)"};
    case 6:  // NVRTC_ERROR_COMPILATION
      return {VYRE_STATUS_COMPILE_FAILED,
              has_log ? "correct the source errors the NVRTC log names (it follows this line; "
                        "all of it: vyre_last_error_log)"
                      : "correct the source; NVRTC wrote no log"};
    case 12:  // NVRTC_ERROR_TIME_FILE_WRITE_FAILED
    case 17:  // NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED
      return {VYRE_STATUS_INVALID_ARGUMENT,
              "NVRTC could not write the file a --time or --fdevice-time-trace option names: "
              "give a writable path in compile_options, or drop the option"};
    case 13:  // NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED
    case 15:  // NVRTC_ERROR_PCH_CREATE
      return {VYRE_STATUS_COMPILE_FAILED,
              "NVRTC could not create the precompiled header the options ask for: drop the "
              "--create-pch / --pch options from compile_options"};
    case 2:   // NVRTC_ERROR_PROGRAM_CREATION_FAILURE
    case 7:   // NVRTC_ERROR_BUILTIN_OPERATION_FAILURE
    case 11:  // NVRTC_ERROR_INTERNAL_ERROR
      return {VYRE_STATUS_COMPILE_FAILED,
              "NVRTC failed inside itself: retry, use another NVRTC version "
              "(VYRE_CUDA_NVRTC_LIBRARY), or build the program from PTX or a cubin instead"};
    case 3:   // NVRTC_ERROR_INVALID_INPUT
    case 4:   // NVRTC_ERROR_INVALID_PROGRAM
    case 8:   // NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION
    case 9:   // NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION
    case 10:  // NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID
    case 16:  // NVRTC_ERROR_CANCELLED
      return {VYRE_STATUS_INTERNAL,
              "vyre-cuda called NVRTC wrongly: report this message as a vyre-cuda bug"};
    default:
      return {VYRE_STATUS_COMPILE_FAILED,
              "NVRTC returned a result newer than vyre-cuda knows: look it up in your nvrtc.h, "
              "or build the program from PTX or a cubin instead"};
  }
}

absl::StatusOr<std::string> CompileCudaSource(absl::string_view source, absl::string_view entry,
                                              const std::vector<std::string>& options,
                                              int cc_major, int cc_minor, const char* what) {
  LoadedNvrtc& n = Loaded();
  absl::call_once(n.once, [&n] { n.status = Load(n); });
  if (!n.status.ok()) {
    // Loaded once per process; each call names itself.
    return MakeError(PublicCode(n.status), absl::StrCat(what, ": ", n.status.message()));
  }
  const NvrtcApi& api = n.api;

  std::string text(source);
  ProgramGuard program(api);
  nvrtcResult r = api.nvrtcCreateProgram(program.out(), text.c_str(), "vyre_program.cu", 0,
                                         nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    const NvrtcFailureInfo failure = NvrtcFailure(r, /*has_log=*/false);
    return MakeError(failure.status,
                     absl::StrCat(what, ": compiling CUDA source for '", entry,
                                  "': nvrtcCreateProgram failed: ", api.nvrtcGetErrorString(r),
                                  ". Fix: ", failure.fix, "."));
  }
  std::vector<std::string> all_options = options;
  all_options.push_back(absl::StrCat("--gpu-architecture=sm_", cc_major, cc_minor));
  std::vector<const char*> option_ptrs;
  option_ptrs.reserve(all_options.size());
  for (const std::string& o : all_options) option_ptrs.push_back(o.c_str());

  r = api.nvrtcCompileProgram(program.get(), static_cast<int>(option_ptrs.size()),
                              option_ptrs.data());
  size_t log_size = 0;
  std::string log;
  if (api.nvrtcGetProgramLogSize(program.get(), &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (api.nvrtcGetProgramLog(program.get(), log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  if (r != NVRTC_SUCCESS) {
    // By cause: a rejected option is the caller's argument, NVRTC out of
    // memory is memory, a compile error is the source's. The log goes after
    // the first line (capped there; vyre_last_error_log returns all of it),
    // so a long log never pushes the Fix out of reach.
    const NvrtcFailureInfo failure = NvrtcFailure(r, !log.empty());
    return MakeErrorWithLog(
        failure.status,
        absl::StrCat(what, ": compiling CUDA source for '", entry, "' with options [",
                     absl::StrJoin(all_options, " "), "]: nvrtcCompileProgram returned ",
                     api.nvrtcGetErrorString(r),
                     log.empty() ? " and NVRTC wrote no log"
                                 : " (the NVRTC log follows this line)",
                     ". Fix: ", failure.fix, "."),
        log);
  }
  size_t cubin_size = 0;
  r = api.nvrtcGetCUBINSize(program.get(), &cubin_size);
  std::string cubin;
  if (r == NVRTC_SUCCESS) {
    cubin.resize(cubin_size);
    r = api.nvrtcGetCUBIN(program.get(), cubin.data());
  }
  if (r != NVRTC_SUCCESS || cubin.empty()) {
    return MakeError(VYRE_STATUS_COMPILE_FAILED,
                     absl::StrCat(what, ": compiling CUDA source for '", entry,
                                  "': NVRTC produced no cubin for sm_", cc_major, cc_minor,
                                  ". Fix: use an NVRTC version that supports this device."));
  }
  return cubin;
}

}  // namespace vyre::driver
