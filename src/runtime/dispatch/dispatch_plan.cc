#include "runtime/dispatch/dispatch_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/checked_math.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "runtime/transfer/buffer.h"

namespace vyre {
namespace {

constexpr uint32_t kKnownFlags = VYRE_DISPATCH_FLAG_DEVICE_TIMING | VYRE_DISPATCH_FLAG_COOPERATIVE;

}  // namespace

absl::StatusOr<uint32_t> BindingArrayStride(const char* what, const BindingDecl* first_decl,
                                            const vyre_dispatch_binding* bindings, size_t count) {
  if (count == 0 || bindings == nullptr) return 0u;
  vyre_dispatch_binding first;
  absl::Status checked = ReadDescriptor(what, "vyre_dispatch_binding", bindings, &first);
  if (checked.ok()) return bindings[0].struct_size;
  if (first_decl == nullptr || first_decl->role != VYRE_ROLE_SHARED) return checked;
  // The fields of a SHARED binding's entry are ignored, but entry 0's
  // struct_size is the array's stride: without it no other entry can be found.
  return Errorf(VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
                "%s: binding 0 ('%s') is SHARED, so its entry's fields are ignored, but its "
                "struct_size (%u) is the stride of the whole binding array and is not a "
                "vyre_dispatch_binding's. Fix: initialise every entry, SHARED ones included, "
                "with VYRE_DISPATCH_BINDING_INIT.",
                what, first_decl->name, bindings[0].struct_size);
}

absl::Status BindHost(const char* what, size_t i, const BindingDecl& decl,
                      const vyre_dispatch_binding& in, PlannedBinding* out) {
  if (in.host_bytes == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: binding %u ('%s') is HOST with host_bytes 0. Fix: pass the binding's "
                  "length in bytes.",
                  what, i, decl.name);
  }
  if (decl.reads() && in.host_input == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: binding %u ('%s') is read by the kernel but host_input is NULL. Fix: "
                  "point host_input at %u bytes of input.",
                  what, i, decl.name, in.host_bytes);
  }
  if (decl.writes() && in.host_output == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: binding %u ('%s') is written by the kernel but host_output is NULL. "
                  "Fix: point host_output at %u writable bytes (it may equal host_input).",
                  what, i, decl.name, in.host_bytes);
  }
  out->host = true;
  out->host_input = in.host_input;
  out->host_output = in.host_output;
  out->bytes = in.host_bytes;
  out->staged = in.host_bytes <= kStagedCopyLimit;
  return absl::OkStatus();
}

absl::Status BindResident(const char* what, size_t i, const BindingDecl& decl,
                          const Context& context, const vyre_dispatch_binding& in,
                          PlannedBinding* out) {
  auto looked_up = Buffers().Lookup(in.buffer.bits, what);
  if (!looked_up.ok()) {
    // Name the binding, but only on the error path: the hot path formats nothing.
    absl::string_view message = looked_up.status().message();
    absl::ConsumePrefix(&message, absl::StrCat(what, ": "));
    return MakeError(PublicCode(looked_up.status()),
                     absl::StrCat(what, ": binding ", i, " ('", decl.name, "'): ", message));
  }
  out->buffer = *std::move(looked_up);
  const Buffer& buffer = *out->buffer;
  std::string field;  // built only if a check below fails
  auto describe = [&]() -> const std::string& {
    if (field.empty()) field = absl::StrCat(what, ": binding ", i, " ('", decl.name, "')");
    return field;
  };
  if (&buffer.context() != &context) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the buffer belongs to another context. Fix: bind buffers allocated on "
                  "the program's context.",
                  describe());
  }
  if (in.offset > buffer.bytes()) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: offset %u is past the buffer's %u bytes. Fix: bind a range inside the "
                  "buffer.",
                  describe(), in.offset, buffer.bytes());
  }
  uint64_t length = in.length ? in.length : buffer.bytes() - in.offset;
  if (!RangeInside(in.offset, length, buffer.bytes())) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: range [%u, +%u) ends past the buffer's %u bytes. Fix: keep offset + "
                  "length within the buffer.",
                  describe(), in.offset, length, buffer.bytes());
  }
  if (length == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the bound range is empty (offset %u is the buffer's end). Fix: bind at "
                  "least one element.",
                  describe(), in.offset);
  }
  if (in.offset % decl.element_size != 0) {
    // A kernel reading elements at a misaligned address faults, and a fault
    // leaves the whole CUDA context unusable: refuse it here instead.
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: offset %u is not a multiple of the %u-byte element size. Fix: bind at "
                  "an element boundary.",
                  describe(), in.offset, decl.element_size);
  }
  out->offset = in.offset;
  out->bytes = length;
  return absl::OkStatus();
}

absl::Status CheckLength(const char* what, size_t i, const BindingDecl& decl,
                         PlannedBinding* bound, uint64_t* elements) {
  if (bound->bytes % decl.element_size != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: binding %u ('%s') is %u bytes, not a multiple of its %u-byte elements. "
                  "Fix: bind a whole number of elements.",
                  what, i, decl.name, bound->bytes, decl.element_size);
  }
  *elements = bound->bytes / decl.element_size;
  if (decl.element_count != 0 && *elements != decl.element_count) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: binding %u ('%s') holds %u elements but the program declares %u. Fix: "
                  "bind exactly element_count x element_size = %u bytes.",
                  what, i, decl.name, *elements, decl.element_count,
                  decl.element_count * decl.element_size);
  }
  if (decl.writes()) {
    // output_length 0 reads back from output_offset to the binding's end.
    uint64_t length = decl.output_length;
    if (length == 0 && decl.output_offset <= bound->bytes) length = bound->bytes - decl.output_offset;
    bound->readback_offset = decl.output_offset;
    bound->readback_bytes = length;
    if (!RangeInside(decl.output_offset, length, bound->bytes) ||
        (length == 0 && decl.output_offset >= bound->bytes)) {
      return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                    "%s: binding %u ('%s') declares output range [%u, +%u) but only %u bytes "
                    "are bound. Fix: bind at least output_offset + output_length bytes.",
                    what, i, decl.name, decl.output_offset, decl.output_length, bound->bytes);
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status PlanShape(const Program& program, const vyre_dispatch_desc& desc, const char* what,
                       uint64_t max_elements, DispatchPlan* plan) {
  const vyre_device_info& device = program.context().device();
  if (desc.block[0] == 0 && desc.block[1] == 0 && desc.block[2] == 0) {
    for (int a = 0; a < 3; ++a) plan->block[a] = program.workgroup()[a];
  } else {
    plan->block[0] = desc.block[0];
    plan->block[1] = desc.block[1] ? desc.block[1] : 1;
    plan->block[2] = desc.block[2] ? desc.block[2] : 1;
  }
  VYRE_RETURN_IF_ERROR(
      CheckBlockShape(what, plan->block, device, program.max_threads_per_block()));
  if (desc.grid[0] == 0 && desc.grid[1] == 0 && desc.grid[2] == 0) {
    uint64_t elements = desc.element_count ? desc.element_count : max_elements;
    uint64_t threads = uint64_t{plan->block[0]} * plan->block[1] * plan->block[2];
    // Rounded up without overflow: elements may be close to 2^64.
    uint64_t blocks = elements == 0 ? 1 : elements / threads + (elements % threads != 0);
    if (blocks > device.max_grid_dim[0]) {
      return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                    "%s: covering %u elements with %u-thread blocks needs %u blocks, over the "
                    "device's grid limit of %u. Fix: give an explicit 2-D/3-D grid, larger "
                    "blocks, or split the dispatch.",
                    what, elements, threads, blocks, device.max_grid_dim[0]);
    }
    plan->grid[0] = static_cast<uint32_t>(blocks);
    plan->grid[1] = plan->grid[2] = 1;
  } else {
    plan->grid[0] = desc.grid[0];
    plan->grid[1] = desc.grid[1] ? desc.grid[1] : 1;
    plan->grid[2] = desc.grid[2] ? desc.grid[2] : 1;
    for (int a = 0; a < 3; ++a) {
      if (plan->grid[a] == 0) {
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: grid dimension %c is 0. Fix: use at least 1 block per axis, or an "
                      "all-zero grid to derive it from the element count.",
                      what, "xyz"[a]);
      }
      if (plan->grid[a] > device.max_grid_dim[a]) {
        return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                      "%s: grid dimension %c is %u, over the device's limit of %u. Fix: use a "
                      "smaller grid or split the dispatch.",
                      what, "xyz"[a], plan->grid[a], device.max_grid_dim[a]);
      }
    }
  }
  plan->shared_memory_bytes = program.shared_memory_bytes() + desc.shared_memory_bytes;
  // Against the opt-in maximum minus the kernel's static shared memory: the
  // driver would refuse the launch with CUDA_ERROR_INVALID_VALUE.
  VYRE_RETURN_IF_ERROR(CheckSharedMemory(what, plan->shared_memory_bytes, program,
                                         "the dispatch asks for"));
  if ((desc.flags & VYRE_DISPATCH_FLAG_COOPERATIVE) && !device.cooperative_launch) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %s does not support cooperative launches. Fix: dispatch without "
                  "VYRE_DISPATCH_FLAG_COOPERATIVE.",
                  what, device.name);
  }
  return absl::OkStatus();
}

absl::Status CheckScalars(const Program& program, const vyre_dispatch_desc& desc,
                          const char* what) {
  if (desc.scalar_count > 0 && desc.scalars == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: scalars is NULL but scalar_count is %u. Fix: pass the scalar values.",
                  what, desc.scalar_count);
  }
  for (size_t i = 0; i < program.params().size(); ++i) {
    const vyre_kernel_param& p = program.params()[i];
    if ((p.kind == VYRE_PARAM_SCALAR32 || p.kind == VYRE_PARAM_SCALAR64) &&
        p.index >= desc.scalar_count) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: kernel parameter %u reads scalar slot %u but the dispatch passes %u "
                    "scalars. Fix: pass at least %u scalars.",
                    what, i, p.index, desc.scalar_count, p.index + 1);
    }
  }
  return absl::OkStatus();
}

// Places host bindings in the slabs; see the layout in the header.
absl::Status Layout(const char* what, DispatchPlan* plan) {
  uint64_t cursor = 0;
  bool ok = true;
  auto place = [&](uint64_t bytes) -> uint64_t {
    uint64_t at = cursor;
    auto aligned = CheckedAlignUp(bytes, kSlabAlignment);
    auto next = aligned ? CheckedAdd(cursor, *aligned) : std::nullopt;
    ok = ok && next.has_value();
    cursor = next.value_or(0);
    return at;
  };
  place(plan->param_bytes);
  // Staged bindings, readers first, then outputs: the outputs' pinned bytes
  // are zeroed on the host, so one copy both uploads inputs and clears outputs.
  for (int pass = 0; pass < 2; ++pass) {
    for (PlannedBinding& b : plan->bindings) {
      if (b.host && b.staged && b.decl->reads() == (pass == 0)) {
        b.device_offset = b.pinned_offset = place(b.bytes);
      }
    }
  }
  plan->h2d_prefix_bytes = cursor;
  plan->pinned_slab_bytes = cursor;
  for (PlannedBinding& b : plan->bindings) {
    if (b.host && !b.staged && b.decl->reads()) b.device_offset = place(b.bytes);
  }
  plan->output_region_offset = cursor;
  for (PlannedBinding& b : plan->bindings) {
    if (b.host && !b.staged && !b.decl->reads()) b.device_offset = place(b.bytes);
  }
  if (!ok) {
    return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                  "%s: the dispatch's host bindings total more than 2^64 bytes. Fix: split "
                  "the dispatch.",
                  what);
  }
  plan->output_region_bytes = cursor - plan->output_region_offset;
  plan->device_slab_bytes = cursor;
  return absl::OkStatus();
}

}  // namespace

absl::Status BuildDispatchPlan(const Program& program, const vyre_dispatch_desc& desc,
                               const char* what, DispatchPlan* plan) {
  const std::vector<BindingDecl>& decls = program.bindings();
  if ((desc.flags & ~kKnownFlags) != 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: flags 0x%x contain unknown bits. Fix: use VYRE_DISPATCH_FLAG_* values "
                  "only.",
                  what, desc.flags);
  }
  if (desc.fixpoint_iterations == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: fixpoint_iterations is 0, so the kernel would never run. Fix: set it to "
                  "1 or more (VYRE_DISPATCH_DESC_INIT sets 1).",
                  what);
  }
  if (desc.binding_count != decls.size()) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the dispatch binds %u bindings but program '%s' declares %u. Fix: pass "
                  "one vyre_dispatch_binding per declared binding, in declaration order.",
                  what, desc.binding_count, program.entry(), decls.size());
  }
  if (desc.binding_count > 0 && desc.bindings == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: bindings is NULL but binding_count is %u. Fix: pass the binding array.",
                  what, desc.binding_count);
  }
  if (desc.param_word_count > 0 && desc.param_words == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: param_words is NULL but param_word_count is %u. Fix: pass the words or "
                  "a count of 0.",
                  what, desc.param_word_count);
  }
  if (desc.param_word_count > (uint64_t{1} << 28)) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %u parameter words exceed the limit of 2^28. Fix: pass bulk data "
                  "through a binding.",
                  what, desc.param_word_count);
  }
  VYRE_RETURN_IF_ERROR(CheckScalars(program, desc, what));
  plan->iterations = desc.fixpoint_iterations;
  plan->flags = desc.flags;
  plan->param_words = desc.param_words;
  plan->param_bytes = uint64_t{desc.param_word_count} * 4;
  plan->scalars = desc.scalars;
  plan->scalar_count = desc.scalar_count;

  VYRE_ASSIGN_OR_RETURN(const uint32_t stride,
                        BindingArrayStride(what, decls.empty() ? nullptr : &decls[0],
                                           desc.bindings, desc.binding_count));
  uint64_t max_elements = 0;
  plan->bindings.resize(decls.size());
  for (size_t i = 0; i < decls.size(); ++i) {
    const BindingDecl& decl = decls[i];
    PlannedBinding& bound = plan->bindings[i];
    bound.decl = &decl;
    if (decl.role == VYRE_ROLE_SHARED) continue;
    vyre_dispatch_binding in;
    VYRE_RETURN_IF_ERROR(ReadArrayEntry(what, "vyre_dispatch_binding", "binding",
                                        "VYRE_DISPATCH_BINDING_INIT", desc.bindings, i, stride,
                                        &in));
    const uint32_t source = RawEnum(in.source);
    if (source == VYRE_SOURCE_HOST) {
      VYRE_RETURN_IF_ERROR(BindHost(what, i, decl, in, &bound));
    } else if (source == VYRE_SOURCE_RESIDENT) {
      VYRE_RETURN_IF_ERROR(BindResident(what, i, decl, program.context(), in, &bound));
    } else {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: binding %u ('%s') has source %d. Fix: use VYRE_SOURCE_HOST or "
                    "VYRE_SOURCE_RESIDENT.",
                    what, i, decl.name, static_cast<int32_t>(source));
    }
    uint64_t elements = 0;
    VYRE_RETURN_IF_ERROR(CheckLength(what, i, decl, &bound, &elements));
    if (elements > max_elements) max_elements = elements;
  }
  VYRE_RETURN_IF_ERROR(PlanShape(program, desc, what, max_elements, plan));
  return Layout(what, plan);
}

}  // namespace vyre
