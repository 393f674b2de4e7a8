// One kernel launch, shared by dispatch, graph recording and sequences: the
// argument values a program's parameter list asks for, the dynamic
// shared-memory opt-in, and the checked launch loop.
#ifndef VYRE_RUNTIME_DISPATCH_KERNEL_LAUNCH_H_
#define VYRE_RUNTIME_DISPATCH_KERNEL_LAUNCH_H_

#include <cuda.h>

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "runtime/program/program.h"
#include "runtime/context/telemetry.h"

namespace vyre {

struct LaunchShape {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;
};

// One 8-byte value per kernel parameter (4-byte scalars use the low half,
// which is how a little-endian device reads them).
using KernelValues = absl::InlinedVector<uint64_t, 16>;
using KernelArgs = absl::InlinedVector<void*, 16>;

// Fills `values` from the program's parameter list. `binding_pointer(i)`
// gives the device address bound to binding i.
template <typename BindingPointer>
void FillKernelValues(const Program& program, BindingPointer binding_pointer,
                      CUdeviceptr param_pointer, const uint64_t* scalars, KernelValues* values) {
  const std::vector<vyre_kernel_param>& params = program.params();
  values->resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const vyre_kernel_param& p = params[i];
    uint64_t& v = (*values)[i];
    switch (p.kind) {
      case VYRE_PARAM_BINDING: v = binding_pointer(p.index); break;
      case VYRE_PARAM_SCALAR32: v = scalars[p.index] & 0xFFFFFFFFu; break;
      case VYRE_PARAM_SCALAR64: v = scalars[p.index]; break;
      case VYRE_PARAM_PARAM_WORDS: v = param_pointer; break;
      default: v = 0; break;  // VYRE_PARAM_NULL_POINTER
    }
  }
}

// Rewrites only the binding-pointer slots of `values` (graph rebinding).
template <typename BindingPointer>
void UpdateKernelBindings(const Program& program, BindingPointer binding_pointer,
                          KernelValues* values) {
  const std::vector<vyre_kernel_param>& params = program.params();
  for (size_t i = 0; i < params.size() && i < values->size(); ++i) {
    if (params[i].kind == VYRE_PARAM_BINDING) (*values)[i] = binding_pointer(params[i].index);
  }
}

// Rewrites only the scalar slots of `values` (graph node updates).
void UpdateKernelScalars(const Program& program, const uint64_t* scalars, KernelValues* values);

// args[i] = &values[i]; `values` must not move afterwards.
void PointKernelArgs(KernelValues& values, KernelArgs* args);

// The largest scalar slot the program reads, plus one (0 when none).
size_t ScalarSlotsNeeded(const Program& program);

// Above 48 KiB of shared memory in all (the kernel's static plus the dynamic
// bytes) a kernel must opt in to the larger dynamic shared memory.
absl::Status OptInSharedMemory(const Program& program, uint32_t shared_bytes, const char* what);

// Launches the program's function `iterations` times on `stream`.
absl::Status LaunchKernel(const Program& program, const LaunchShape& shape, uint32_t iterations,
                          void** args, CUstream stream, bool cooperative, Telemetry* telemetry,
                          const char* what);

}  // namespace vyre

#endif  // VYRE_RUNTIME_DISPATCH_KERNEL_LAUNCH_H_
