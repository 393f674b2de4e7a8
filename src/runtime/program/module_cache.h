// Loaded CUDA modules keyed by what determines the machine code: the code
// bytes, their kind, the compile options and the device's compute capability.
// The key holds the full bytes, not just a hash, so a hit is exact.
#ifndef VYRE_RUNTIME_PROGRAM_MODULE_CACHE_H_
#define VYRE_RUNTIME_PROGRAM_MODULE_CACHE_H_

#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "driver/guards.h"
#include "runtime/context/telemetry.h"
#include "vyre_cuda.h"

namespace vyre {

// A loaded module; unloaded (with its context bound) when the last program
// using it and the cache have let go.
class LoadedModule {
 public:
  LoadedModule(CUcontext context, driver::ModuleGuard module)
      : context_(context), module_(std::move(module)) {}
  ~LoadedModule() {
    driver::ScopedContext bind(context_, driver::ScopedContext::Purpose::kRelease);
    module_.reset();
  }
  CUmodule get() const { return module_.get(); }

 private:
  CUcontext context_;
  driver::ModuleGuard module_;
};

struct ModuleKey {
  vyre_code_kind kind;
  std::string code;
  std::string options;
  int cc_major, cc_minor;

  template <typename H>
  friend H AbslHashValue(H h, const ModuleKey& k) {
    return H::combine(std::move(h), static_cast<int>(k.kind), k.code, k.options, k.cc_major,
                      k.cc_minor);
  }
  friend bool operator==(const ModuleKey& a, const ModuleKey& b) {
    return std::tie(a.kind, a.code, a.options, a.cc_major, a.cc_minor) ==
           std::tie(b.kind, b.code, b.options, b.cc_major, b.cc_minor);
  }
};

class ModuleCache {
 public:
  ModuleCache(CUcontext context, int cc_major, int cc_minor, Telemetry* telemetry)
      : context_(context), cc_major_(cc_major), cc_minor_(cc_minor), telemetry_(telemetry) {}

  // Returns the cached module or compiles/loads it. `entry` and `what` (the
  // API call) are for messages.
  absl::StatusOr<std::shared_ptr<LoadedModule>> GetOrLoad(vyre_code_kind kind,
                                                          absl::string_view code,
                                                          const std::vector<std::string>& options,
                                                          absl::string_view entry,
                                                          const char* what);
  void Clear();

 private:
  absl::StatusOr<std::shared_ptr<LoadedModule>> Load(const ModuleKey& key, absl::string_view entry,
                                                     const char* what);
  // The Fix for a failed cuModuleLoadDataEx, fitting its cause (empty: the
  // CUresult table's Fix).
  std::string LoadFix(const ModuleKey& key, CUresult result, bool has_log) const;

  const CUcontext context_;
  const int cc_major_, cc_minor_;
  Telemetry* const telemetry_;
  std::mutex mu_;  // guards the members below
  absl::flat_hash_map<ModuleKey, std::shared_ptr<LoadedModule>> modules_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_PROGRAM_MODULE_CACHE_H_
