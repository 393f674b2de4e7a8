// Validation and memory layout of one dispatch, before anything touches the
// device. Host bindings share one transient device slab and one pinned slab:
//
//   pinned: [param words][staged readers][staged outputs]
//   device: [param words][staged readers][staged outputs][direct readers][direct outputs]
//
// The pinned slab mirrors the head of the device slab, with staged outputs
// zeroed on the host, so ONE host-to-device copy carries the parameter words,
// every small input and the zeroing of every small output. "Staged" bindings
// (at most kStagedCopyLimit bytes) go through pinned memory; larger "direct"
// ones are copied by DMA in place when they lie in pinned memory the library
// knows (vyre_host_alloc / vyre_host_register), else through the context's
// staging ring, and the direct outputs are zeroed by one memset.
#ifndef VYRE_RUNTIME_DISPATCH_DISPATCH_PLAN_H_
#define VYRE_RUNTIME_DISPATCH_DISPATCH_PLAN_H_

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/dispatch/kernel_launch.h"
#include "runtime/transfer/buffer.h"
#include "runtime/transfer/host_memory.h"
#include "runtime/program/program.h"
#include "vyre_cuda.h"

namespace vyre {

inline constexpr uint64_t kSlabAlignment = 256;

struct PlannedBinding {
  const BindingDecl* decl = nullptr;
  bool host = false;
  bool staged = false;  // host only: goes through the pinned slab
  const void* host_input = nullptr;
  void* host_output = nullptr;
  uint64_t bytes = 0;
  std::shared_ptr<Buffer> buffer;  // resident only; keeps the memory alive
  // Direct host bindings whose input or output lies in pinned memory the
  // library knows: copied by DMA in place (and kept alive while in use).
  std::shared_ptr<HostRegion> input_region;
  std::shared_ptr<HostRegion> output_region;
  uint64_t offset = 0;             // resident: offset into the buffer
  uint64_t device_offset = 0;      // host: offset into the device slab
  uint64_t pinned_offset = 0;      // staged: offset into the pinned slab
  // The byte range of this binding that is read back (host outputs).
  uint64_t readback_offset = 0;
  uint64_t readback_bytes = 0;
};

struct DispatchPlan {
  absl::InlinedVector<PlannedBinding, 8> bindings;
  uint32_t block[3] = {1, 1, 1};
  uint32_t grid[3] = {1, 1, 1};
  uint64_t shared_memory_bytes = 0;
  uint32_t iterations = 1;
  uint32_t flags = 0;
  const uint32_t* param_words = nullptr;
  uint64_t param_bytes = 0;
  const uint64_t* scalars = nullptr;
  size_t scalar_count = 0;
  uint64_t device_slab_bytes = 0;
  uint64_t pinned_slab_bytes = 0;
  uint64_t h2d_prefix_bytes = 0;      // pinned [0, n) -> device [0, n)
  uint64_t output_region_offset = 0;  // device slab range memset to zero
  uint64_t output_region_bytes = 0;
};

// The plan's grid, block and dynamic shared memory as a launch takes them.
inline LaunchShape LaunchShapeOf(const DispatchPlan& plan) {
  LaunchShape shape;
  for (int a = 0; a < 3; ++a) {
    shape.grid[a] = plan.grid[a];
    shape.block[a] = plan.block[a];
  }
  shape.shared_bytes = static_cast<uint32_t>(plan.shared_memory_bytes);
  return shape;
}

// One binding of a dispatch, checked against its declaration: a HOST one's
// pointers and length, a RESIDENT one's buffer, context, range and alignment
// (BindResident looks the buffer up). CheckLength then checks the length
// against the element size and declared count and sets the read-back range.
absl::Status BindHost(const char* what, size_t i, const BindingDecl& decl,
                      const vyre_dispatch_binding& in, PlannedBinding* out);
absl::Status BindResident(const char* what, size_t i, const BindingDecl& decl,
                          const Context& context, const vyre_dispatch_binding& in,
                          PlannedBinding* out);
absl::Status CheckLength(const char* what, size_t i, const BindingDecl& decl,
                         PlannedBinding* bound, uint64_t* elements);

// The stride of a caller's array of `count` vyre_dispatch_binding entries:
// entry 0's struct_size, whatever binding 0's role. A SHARED binding's entry
// is otherwise ignored, but entry 0 must still be initialised
// (VYRE_DISPATCH_BINDING_INIT): the array cannot be walked without it, so a
// zeroed or garbage entry 0 is UNSUPPORTED_STRUCT_SIZE naming binding 0 (and,
// when it is SHARED, why its struct_size matters). 0 when count is 0.
absl::StatusOr<uint32_t> BindingArrayStride(const char* what, const BindingDecl* first_decl,
                                            const vyre_dispatch_binding* bindings, size_t count);

// Validates `desc` against the program and its device and lays out the slabs.
absl::Status BuildDispatchPlan(const Program& program, const vyre_dispatch_desc& desc,
                               const char* what, DispatchPlan* plan);

}  // namespace vyre

#endif  // VYRE_RUNTIME_DISPATCH_DISPATCH_PLAN_H_
