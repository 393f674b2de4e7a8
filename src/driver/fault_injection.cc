#include "driver/fault_injection.h"

#include <atomic>
#include <utility>

namespace vyre::driver::testing {
namespace {

constexpr int kEntries = static_cast<int>(Entry::kCount);

struct FaultPlan {
  std::atomic<uint64_t> calls[kEntries] = {};
  std::atomic<int> armed_entry{-1};
  std::atomic<uint64_t> fail_at{0};  // absolute call number of the armed entry
  std::atomic<uint64_t> fail_count{1};  // calls failing from fail_at on
  std::atomic<int> code{CUDA_SUCCESS};
  bool installed = false;
};

FaultPlan& Plan() {
  static FaultPlan* plan = new FaultPlan;
  return *plan;
}

// Counts the call and says whether it is the one to fail.
bool Trip(int index) {
  FaultPlan& plan = Plan();
  uint64_t n = plan.calls[index].fetch_add(1, std::memory_order_relaxed) + 1;
  if (plan.armed_entry.load(std::memory_order_acquire) != index) return false;
  const uint64_t at = plan.fail_at.load(std::memory_order_acquire);
  return n >= at && n - at < plan.fail_count.load(std::memory_order_acquire);
}

template <int Index, typename Fn>
struct Wrapper;

template <int Index, typename... Args>
struct Wrapper<Index, CUresult(CUDAAPI*)(Args...)> {
  static inline CUresult(CUDAAPI* real)(Args...) = nullptr;
  static CUresult CUDAAPI Call(Args... args) {
    if (Trip(Index)) return static_cast<CUresult>(Plan().code.load());
    return real(std::forward<Args>(args)...);
  }
};

template <int Index, typename Fn>
void Wrap(Fn& slot) {
  using W = Wrapper<Index, Fn>;
  if (slot == nullptr || slot == &W::Call) return;
  W::real = slot;
  slot = &W::Call;
}

}  // namespace

void InstallFaultInjection() {
  FaultPlan& plan = Plan();
  if (plan.installed) return;
  DriverApi& api = MutableApiForTesting();
#define VYRE_DRIVER_WRAP(name) Wrap<static_cast<int>(Entry::k_##name)>(api.name);
  VYRE_DRIVER_ENTRY_POINTS(VYRE_DRIVER_WRAP)
#undef VYRE_DRIVER_WRAP
  plan.installed = true;
}

void FailNthCall(Entry entry, uint64_t n, CUresult code, uint64_t count) {
  FaultPlan& plan = Plan();
  int index = static_cast<int>(entry);
  plan.armed_entry.store(-1, std::memory_order_release);
  plan.code.store(code);
  plan.fail_count.store(count, std::memory_order_release);
  plan.fail_at.store(plan.calls[index].load() + n, std::memory_order_release);
  plan.armed_entry.store(index, std::memory_order_release);
}

void ClearFaults() { Plan().armed_entry.store(-1, std::memory_order_release); }

uint64_t CallCount(Entry entry) { return Plan().calls[static_cast<int>(entry)].load(); }

}  // namespace vyre::driver::testing
