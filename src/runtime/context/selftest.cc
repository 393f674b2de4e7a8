#include "runtime/context/selftest.h"

#include <cstdint>
#include <random>
#include <vector>

#include "base/status.h"
#include "runtime/dispatch/pending.h"
#include "runtime/program/program.h"

extern const char vyre_builtin_selftest_ptx[];

namespace vyre {

absl::Status RunSelfTest(const std::shared_ptr<Context>& context, const char* what) {
  constexpr uint32_t kElements = 4099;  // not a multiple of the block: tests the tail
  vyre_binding_decl decls[3];
  vyre_binding_role roles[3] = {VYRE_ROLE_INPUT, VYRE_ROLE_INPUT, VYRE_ROLE_OUTPUT};
  for (int i = 0; i < 3; ++i) {
    decls[i] = vyre_binding_decl{sizeof(vyre_binding_decl), roles[i], nullptr, 4, 0, 0, 0, 0};
  }
  vyre_program_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.code_kind = VYRE_CODE_PTX;
  desc.code = vyre_builtin_selftest_ptx;
  desc.entry = "vyre_selftest_add_u32";
  desc.bindings = decls;
  desc.binding_count = 3;
  desc.workgroup_size[0] = 256;
  VYRE_ASSIGN_OR_RETURN(std::shared_ptr<Program> program, Program::Create(context, desc));

  std::mt19937 rng(std::random_device{}());
  std::vector<uint32_t> a(kElements), b(kElements), out(kElements, 0xDEADBEEFu);
  for (uint32_t i = 0; i < kElements; ++i) {
    a[i] = rng() | 1u;
    b[i] = rng() | 1u;
  }
  vyre_dispatch_binding bound[3];
  const void* inputs[3] = {a.data(), b.data(), nullptr};
  for (int i = 0; i < 3; ++i) {
    bound[i] = vyre_dispatch_binding{sizeof(vyre_dispatch_binding), VYRE_SOURCE_HOST,
                                     inputs[i], i == 2 ? out.data() : nullptr,
                                     uint64_t{kElements} * 4, {0}, 0, 0};
  }
  uint32_t params[1] = {kElements};
  vyre_dispatch_desc dispatch{};
  dispatch.struct_size = sizeof(dispatch);
  dispatch.bindings = bound;
  dispatch.binding_count = 3;
  dispatch.param_words = params;
  dispatch.param_word_count = 1;
  dispatch.fixpoint_iterations = 1;
  PendingDispatch pending(program, /*synchronous=*/true);
  VYRE_RETURN_IF_ERROR(pending.Enqueue(dispatch, what));
  VYRE_RETURN_IF_ERROR(pending.Wait(VYRE_WAIT_FOREVER, what));
  for (uint32_t i = 0; i < kElements; ++i) {
    if (out[i] != a[i] + b[i]) {
      // Not a vyre-cuda bug (INTERNAL): the dispatch succeeded and its sum is
      // wrong, so the device, its driver or the JIT got it wrong.
      return Errorf(VYRE_STATUS_LAUNCH_FAILED,
                    "%s: the self-test kernel ran but wrote %u at element %u instead of %u "
                    "(a + b): the device, its driver or the driver's JIT computed a wrong "
                    "result. Fix: check the device for errors (nvidia-smi -q -d "
                    "ECC,PAGE_RETIREMENT; Xid messages in the kernel log), update the NVIDIA "
                    "driver, and report the device and driver (vyre-cuda info) if it persists.",
                    what, out[i], i, a[i] + b[i]);
    }
  }
  return absl::OkStatus();
}

}  // namespace vyre
