#include "runtime/dispatch/kernel_launch.h"

#include "absl/strings/str_format.h"
#include "driver/cu_error.h"
#include "driver/driver_api.h"

namespace vyre {

void UpdateKernelScalars(const Program& program, const uint64_t* scalars, KernelValues* values) {
  const std::vector<vyre_kernel_param>& params = program.params();
  for (size_t i = 0; i < params.size() && i < values->size(); ++i) {
    const vyre_kernel_param& p = params[i];
    if (p.kind == VYRE_PARAM_SCALAR32) (*values)[i] = scalars[p.index] & 0xFFFFFFFFu;
    if (p.kind == VYRE_PARAM_SCALAR64) (*values)[i] = scalars[p.index];
  }
}

void PointKernelArgs(KernelValues& values, KernelArgs* args) {
  args->resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) (*args)[i] = &values[i];
}

size_t ScalarSlotsNeeded(const Program& program) {
  size_t needed = 0;
  for (const vyre_kernel_param& p : program.params()) {
    if ((p.kind == VYRE_PARAM_SCALAR32 || p.kind == VYRE_PARAM_SCALAR64) && p.index + 1 > needed) {
      needed = size_t{p.index} + 1;
    }
  }
  return needed;
}

absl::Status OptInSharedMemory(const Program& program, uint32_t shared_bytes, const char* what) {
  // Without the opt-in a block gets 48 KiB of shared memory in all, static
  // and dynamic together.
  if (uint64_t{shared_bytes} + program.static_shared_bytes() <= 48 * 1024) {
    return absl::OkStatus();
  }
  VYRE_CU(what, cuFuncSetAttribute, program.function(),
          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared_bytes));
  return absl::OkStatus();
}

absl::Status LaunchKernel(const Program& program, const LaunchShape& shape, uint32_t iterations,
                          void** args, CUstream stream, bool cooperative, Telemetry* telemetry,
                          const char* what) {
  CUfunction function = program.function();
  for (uint32_t iteration = 0; iteration < iterations; ++iteration) {
    CUresult r =
        cooperative
            ? driver::Api().cuLaunchCooperativeKernel(
                  function, shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                  shape.block[1], shape.block[2], shape.shared_bytes, stream, args)
            : driver::Api().cuLaunchKernel(function, shape.grid[0], shape.grid[1], shape.grid[2],
                                           shape.block[0], shape.block[1], shape.block[2],
                                           shape.shared_bytes, stream, args, nullptr);
    if (r != CUDA_SUCCESS) {
      return driver::CuError(r,
                             absl::StrFormat("%s: launching '%s' (iteration %u of %u)", what,
                                             program.entry(), iteration + 1, iterations),
                             cooperative ? "cuLaunchCooperativeKernel" : "cuLaunchKernel");
    }
    if (telemetry != nullptr) telemetry->kernel_launches.Add();
  }
  return absl::OkStatus();
}

}  // namespace vyre
