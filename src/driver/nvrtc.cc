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

absl::StatusOr<std::string> CompileCudaSource(absl::string_view source, absl::string_view entry,
                                              const std::vector<std::string>& options,
                                              int cc_major, int cc_minor) {
  LoadedNvrtc& n = Loaded();
  absl::call_once(n.once, [&n] { n.status = Load(n); });
  VYRE_RETURN_IF_ERROR(n.status);
  const NvrtcApi& api = n.api;

  std::string text(source);
  ProgramGuard program(api);
  nvrtcResult r = api.nvrtcCreateProgram(program.out(), text.c_str(), "vyre_program.cu", 0,
                                         nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return MakeError(VYRE_STATUS_COMPILE_FAILED,
                     absl::StrCat("compiling CUDA source for '", entry,
                                  "': nvrtcCreateProgram failed: ", api.nvrtcGetErrorString(r),
                                  ". Fix: pass valid NUL-free source text."));
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
    // The log goes after the first line (capped there; vyre_last_error_log
    // returns all of it), so a long log never pushes the Fix out of reach.
    return MakeErrorWithLog(
        VYRE_STATUS_COMPILE_FAILED,
        absl::StrCat("compiling CUDA source for '", entry, "' with options [",
                     absl::StrJoin(all_options, " "), "]: ", api.nvrtcGetErrorString(r),
                     log.empty() ? " and NVRTC wrote no log"
                                 : " (the NVRTC log follows this line)",
                     ". Fix: correct the source errors the NVRTC log names (all of it: "
                     "vyre_last_error_log)."),
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
                     absl::StrCat("compiling CUDA source for '", entry,
                                  "': NVRTC produced no cubin for sm_", cc_major, cc_minor,
                                  ". Fix: use an NVRTC version that supports this device."));
  }
  return cubin;
}

}  // namespace vyre::driver
