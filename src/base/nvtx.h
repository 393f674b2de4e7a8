// NVTX ranges around the library's entry points and dispatch stages, so a
// dispatch shows up by name in Nsight Systems. NVTX v3 is header-only: with
// no tool attached a range costs a check of one function pointer.
#ifndef VYRE_BASE_NVTX_H_
#define VYRE_BASE_NVTX_H_

#include <nvtx3/nvToolsExt.h>

namespace vyre {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace vyre

#endif  // VYRE_BASE_NVTX_H_
