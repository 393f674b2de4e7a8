// A program: a loaded kernel entry plus the binding declarations and kernel
// parameter list that tell dispatch how to call it.
#ifndef VYRE_RUNTIME_PROGRAM_PROGRAM_H_
#define VYRE_RUNTIME_PROGRAM_PROGRAM_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "runtime/context/context.h"
#include "runtime/dispatch/recycle_pool.h"
#include "runtime/program/module_cache.h"
#include "vyre_cuda.h"

namespace vyre {

class PendingDispatch;

struct BindingDecl {
  vyre_binding_role role;
  std::string name;  // never empty: "binding <i>" when the caller gave none
  uint32_t element_size;
  uint64_t element_count;
  uint64_t output_offset;
  uint64_t output_length;

  bool reads() const { return role == VYRE_ROLE_INPUT || role == VYRE_ROLE_INPUT_OUTPUT; }
  bool writes() const { return role == VYRE_ROLE_OUTPUT || role == VYRE_ROLE_INPUT_OUTPUT; }
};

class Program {
 public:
  static absl::StatusOr<std::shared_ptr<Program>> Create(std::shared_ptr<Context> context,
                                                         const vyre_program_desc& desc);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  Context& context() const { return *context_; }
  const std::shared_ptr<Context>& context_ref() const { return context_; }
  CUfunction function() const { return function_; }
  const std::string& entry() const { return entry_; }
  const std::vector<BindingDecl>& bindings() const { return bindings_; }
  // The kernel's parameter list; the default convention is expanded into it.
  const std::vector<vyre_kernel_param>& params() const { return params_; }
  const uint32_t* workgroup() const { return workgroup_; }
  // Dynamic shared memory: the desc's bytes plus every SHARED binding.
  uint64_t shared_memory_bytes() const { return shared_memory_bytes_; }
  // The kernel's static shared memory (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES):
  // dynamic shared memory may use the device's opt-in maximum minus this.
  uint32_t static_shared_bytes() const { return static_shared_bytes_; }
  uint32_t max_threads_per_block() const { return max_threads_per_block_; }
  uint64_t handle() const { return handle_; }
  void set_handle(uint64_t bits) { handle_ = bits; }
  // Released asynchronous dispatches of this program, kept for reuse.
  RecyclePool<PendingDispatch>& recycled_dispatches() { return recycled_dispatches_; }

  // Parameter words of dispatches without staged host data live in a small
  // per-program device block that is rewritten only when the words change.
  // The rewrite goes through the context's stream, so kernels already queued
  // still read the old words; holding `mu` from the comparison through the
  // launch keeps another thread's rewrite from slipping in between.
  struct ParamCache {
    std::mutex mu;  // guards the fields below
    CUdeviceptr device = 0;
    std::string words;
    bool valid = false;
  };
  static constexpr uint64_t kParamCacheBytes = 4096;
  ParamCache& param_cache() const { return param_cache_; }

 private:
  explicit Program(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  std::shared_ptr<Context> context_;  // first: outlives the module
  std::shared_ptr<LoadedModule> module_;
  CUfunction function_ = nullptr;
  std::string entry_;
  std::vector<BindingDecl> bindings_;
  std::vector<vyre_kernel_param> params_;
  uint32_t workgroup_[3] = {1, 1, 1};
  uint64_t shared_memory_bytes_ = 0;
  uint32_t static_shared_bytes_ = 0;
  uint32_t max_threads_per_block_ = 0;
  uint64_t handle_ = 0;
  bool counted_ = false;  // in live_programs
  mutable ParamCache param_cache_;
  RecyclePool<PendingDispatch> recycled_dispatches_;
};

// Checks that `dynamic_bytes` of dynamic shared memory fit next to the
// kernel's static shared memory in the device's opt-in maximum per block
// (LIMIT_EXCEEDED otherwise, before the driver would refuse the launch).
absl::Status CheckSharedMemory(const char* what, uint64_t dynamic_bytes, const Program& program,
                               const char* dynamic_source);

// Checks a block shape against the device and the kernel's own limit.
absl::Status CheckBlockShape(const char* what, const uint32_t block[3],
                             const vyre_device_info& device, uint32_t kernel_max_threads);

// The process-wide table of program handles.
HandleRegistry<Program>& Programs();

}  // namespace vyre

#endif  // VYRE_RUNTIME_PROGRAM_PROGRAM_H_
