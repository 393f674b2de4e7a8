#include "runtime/program/module_cache.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "driver/cu_error.h"
#include "driver/nvrtc.h"

namespace vyre {

absl::StatusOr<std::shared_ptr<LoadedModule>> ModuleCache::GetOrLoad(
    vyre_code_kind kind, absl::string_view code, const std::vector<std::string>& options,
    absl::string_view entry, const char* what) {
  ModuleKey key{kind, std::string(code), absl::StrJoin(options, "\x1f"), cc_major_, cc_minor_};
  {
    std::lock_guard lock(mu_);
    auto it = modules_.find(key);
    if (it != modules_.end()) {
      telemetry_->module_cache_hits.Add();
      return it->second;
    }
  }
  telemetry_->module_cache_misses.Add();
  // Loading happens outside the lock: a JIT can take milliseconds. Two threads
  // loading the same code both succeed; the first insert wins.
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModule> module, Load(key, entry, what));
  std::lock_guard lock(mu_);
  auto [it, inserted] = modules_.try_emplace(std::move(key), module);
  return it->second;
}

namespace {

// CUDA C++ handed over as PTX (the default code kind) fails in the PTX JIT
// with a log about the first C++ token; the Fix must name the code kind, in
// every binding's words. PTX never holds these C++ spellings (its directives
// are `.entry`, `.extern`, `.version`).
absl::string_view CudaSourceMarker(absl::string_view code) {
  for (absl::string_view marker : {"__global__", "extern \"C\"", "#include"}) {
    if (absl::StrContains(code, marker)) return marker;
  }
  return {};
}

bool IsCodeRefusal(CUresult result) {
  return result == CUDA_ERROR_INVALID_PTX || result == CUDA_ERROR_INVALID_SOURCE ||
         result == CUDA_ERROR_INVALID_IMAGE || result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
}

}  // namespace

std::string ModuleCache::LoadFix(const ModuleKey& key, CUresult result, bool has_log) const {
  if (key.kind == VYRE_CODE_PTX && IsCodeRefusal(result)) {
    absl::string_view marker = CudaSourceMarker(key.code);
    if (!marker.empty() && !absl::StrContains(key.code, ".version")) {
      return absl::StrCat(
          "this code is CUDA C++ (it has ", marker,
          "), not PTX: create the program with code kind VYRE_CODE_CUDA_SOURCE (Python: "
          "code_kind=CodeKind.CUDA_SOURCE; Rust: Code::CudaSource; Go: "
          "vyrecuda.CodeCUDASource), which compiles it with NVRTC");
    }
  }
  const int cc = cc_major_ * 10 + cc_minor_;
  switch (static_cast<int>(result)) {
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_SOURCE:
      return absl::StrCat(has_log ? "correct the code errors the JIT log names (it follows this "
                                    "line; all of it: vyre_last_error_log)"
                                  : "correct the code (the driver wrote no JIT log)",
                          "; PTX must target a virtual architecture this device supports "
                          "(compute_",
                          cc, " or lower)");
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return absl::StrCat("the image holds no code for this device (sm_", cc,
                          "): compile for it (nvcc -arch=sm_", cc, ", or -gencode arch=compute_",
                          cc, ",code=sm_", cc, "), or include PTX for compute_", cc,
                          " or lower that the driver can JIT");
    case CUDA_ERROR_INVALID_IMAGE:
      return absl::StrCat("rebuild the cubin or fatbin with nvcc (-cubin or -fatbin, -arch=sm_",
                          cc, ") using a toolkit no newer than the driver");
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return absl::StrCat(driver::DefaultFixFor(result),
                          "; the PTX's .version line names the PTX ISA it needs, and a cubin "
                          "for sm_",
                          cc, " needs no JIT at all");
    default:
      // Out of memory, a missing or disabled JIT, a device fault, ...: the
      // table's Fix for the result (the code itself may be fine).
      return std::string();
  }
}

absl::StatusOr<std::shared_ptr<LoadedModule>> ModuleCache::Load(const ModuleKey& key,
                                                                 absl::string_view entry,
                                                                 const char* what) {
  std::string image;
  if (key.kind == VYRE_CODE_CUDA_SOURCE) {
    std::vector<std::string> options;
    if (!key.options.empty()) options = absl::StrSplit(key.options, '\x1f');
    VYRE_ASSIGN_OR_RETURN(image, driver::CompileCudaSource(key.code, entry, options, cc_major_,
                                                           cc_minor_, what));
  } else {
    image = key.code;
    // PTX must reach the JIT NUL-terminated; a cubin/fatbin carries its size.
    if (key.kind == VYRE_CODE_PTX) image.push_back('\0');
  }

  // The driver writes its JIT error log here: a heap buffer large enough that
  // real logs arrive whole (vyre_last_error_log returns them); only the pages
  // the driver writes are touched.
  constexpr size_t kJitLogBytes = size_t{1} << 20;
  std::unique_ptr<char[]> error_log(new char[kJitLogBytes]);
  error_log[0] = '\0';
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.get(),
                    reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes))};
  driver::ScopedContext bind(context_);
  VYRE_RETURN_IF_ERROR(
      bind.status(absl::StrCat(what, ": loading the module for entry '", entry, "'").c_str()));
  driver::ModuleGuard module;
  CUresult r = driver::Api().cuModuleLoadDataEx(module.out(), image.data(), 2, options, values);
  telemetry_->module_loads.Add();
  if (r != CUDA_SUCCESS) {
    error_log[kJitLogBytes - 1] = '\0';
    std::string log = error_log.get();
    while (!log.empty() && log.back() == '\n') log.pop_back();
    if (log.size() + 1 >= kJitLogBytes) {
      log += "\n[the JIT log filled the 1 MiB the driver was given; the rest is lost]";
    }
    const char* kind_name = key.kind == VYRE_CODE_PTX ? "PTX" : key.kind == VYRE_CODE_BINARY
                                                                    ? "cubin/fatbin image"
                                                                    : "NVRTC output";
    // The JIT log goes after the first line (capped in the message), so a
    // long log never pushes the Fix out of reach.
    absl::Status error = driver::CuError(
        r, absl::StrCat(what, ": loading the ", kind_name, " module for entry '", entry, "'"),
        "cuModuleLoadDataEx", LoadFix(key, r, !log.empty()));
    return WithLog(error, log);
  }
  return std::make_shared<LoadedModule>(context_, std::move(module));
}

void ModuleCache::Clear() {
  std::lock_guard lock(mu_);
  modules_.clear();
}

}  // namespace vyre
