#include "fake_cuda_client.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace vyre_test {
namespace {

struct Controls {
  fake_cuda_get_stats_fn get_stats = nullptr;
  fake_cuda_set_hold_fn set_hold = nullptr;
  fake_cuda_inject_fault_fn inject_fault = nullptr;
  fake_cuda_inject_latent_fault_fn inject_latent_fault = nullptr;
};

// dlopen of the path the engine loaded returns the same instance.
const Controls& LoadControls() {
  static const Controls controls = [] {
    Controls c;
    const char* path = std::getenv("VYRE_CUDA_DRIVER_LIBRARY");
    if (path == nullptr) return c;
    void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      std::fprintf(stderr, "fake cuda client: dlopen(%s): %s\n", path, dlerror());
      return c;
    }
    c.get_stats = reinterpret_cast<fake_cuda_get_stats_fn>(dlsym(library, "fake_cuda_get_stats"));
    c.set_hold = reinterpret_cast<fake_cuda_set_hold_fn>(dlsym(library, "fake_cuda_set_hold"));
    c.inject_fault =
        reinterpret_cast<fake_cuda_inject_fault_fn>(dlsym(library, "fake_cuda_inject_fault"));
    c.inject_latent_fault = reinterpret_cast<fake_cuda_inject_latent_fault_fn>(
        dlsym(library, "fake_cuda_inject_latent_fault"));
    return c;
  }();
  return controls;
}

}  // namespace

bool FakeCuda::Available() {
  return LoadControls().get_stats != nullptr && LoadControls().set_hold != nullptr;
}

fake_cuda_stats FakeCuda::Stats() {
  fake_cuda_stats stats{};
  if (LoadControls().get_stats != nullptr) LoadControls().get_stats(&stats);
  return stats;
}

void FakeCuda::SetHold(bool hold) {
  if (LoadControls().set_hold != nullptr) LoadControls().set_hold(hold ? 1 : 0);
}

bool FakeCuda::InjectFault(int cu_result, bool latent) {
  const Controls& c = LoadControls();
  auto inject = latent ? c.inject_latent_fault : c.inject_fault;
  if (inject == nullptr) return false;
  inject(cu_result);
  return true;
}

}  // namespace vyre_test
