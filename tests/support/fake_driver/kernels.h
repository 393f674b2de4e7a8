// The kernels the fake runs on the host, their arguments as a launch passes
// them, and launches: shape checks, armed faults and graph kernel nodes.
#ifndef VYRE_TESTS_SUPPORT_FAKE_DRIVER_KERNELS_H_
#define VYRE_TESTS_SUPPORT_FAKE_DRIVER_KERNELS_H_

#include <cuda.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "state.h"

namespace fake_driver {

// Reads kernel arguments either from kernelParams (one pointer per argument)
// or from an `extra` CU_LAUNCH_PARAM_BUFFER_POINTER block (naturally aligned).
class KernelArgs {
 public:
  KernelArgs(void** params, void** extra) : params_(params) {
    if (params_ == nullptr && extra != nullptr) {
      for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer_ = static_cast<const char*>(e[1]);
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
          buffer_size_ = *static_cast<const size_t*>(e[1]);
        }
      }
    }
  }

  bool present() const { return params_ != nullptr || buffer_ != nullptr; }

  // Reads argument `index` of type T, given the types of those before it
  // (`offset_sizes` are their sizes, for the packed-buffer layout).
  template <typename T>
  bool Read(size_t index, std::initializer_list<size_t> previous_sizes, T* out) const {
    size_t offset = 0;
    for (size_t size : previous_sizes) offset = (offset + size - 1) / size * size + size;
    offset = (offset + sizeof(T) - 1) / sizeof(T) * sizeof(T);
    return ReadBytes(index, offset, sizeof(T), out);
  }

  // Reads the `size` bytes of argument `index`, found at `offset` in a packed
  // buffer.
  bool ReadBytes(size_t index, size_t offset, size_t size, void* out) const {
    if (params_ != nullptr) {
      if (params_[index] == nullptr) return false;
      std::memcpy(out, params_[index], size);
      return true;
    }
    if (buffer_ == nullptr || offset + size > buffer_size_) return false;
    std::memcpy(out, buffer_ + offset, size);
    return true;
  }

 private:
  void** params_ = nullptr;
  const char* buffer_ = nullptr;
  size_t buffer_size_ = 0;
};

// --- kernels.cc -------------------------------------------------------------

std::vector<size_t> KernelParamSizes(const std::string& name);
CUresult PackKernelArgs(const std::string& name, const KernelArgs& args,
                        std::vector<unsigned char>* packed);
CUresult CheckLaunchShape(const FakeFunction& f, const LaunchShape& shape);
// CUDA_ERROR_NOT_SUPPORTED for a kernel the fake does not know (neither a
// test kernel it runs nor one of the library's it accepts), noting its name
// for TakeRefusedKernel and on stderr; CUDA_SUCCESS otherwise. `fn` is the
// entry point refusing it.
CUresult KernelRefusal(const std::string& name, const char* fn);
// Forgets the calling thread's last refusal (each launch call starts so).
void ClearRefusedKernel();
// fake_cuda_take_refused_kernel: the calling thread's last refused kernel.
size_t TakeRefusedKernel(char* name, size_t size);
CUresult RunLaunch(const std::string& name, const LaunchShape& shape, const KernelArgs& args,
                   bool cooperative);

// --- modules.cc -------------------------------------------------------------

int MaxActiveBlocksPerMultiprocessor(int block_size, size_t dynamic_shared_bytes);

// --- graph_exec.cc ----------------------------------------------------------

CUresult RunKernelNode(const FakeGraphNode& n);

// vyre_eg_validate on the host (egraph_kernels.cc).
CUresult RunEgraphValidate(const char* name, const KernelArgs& args, uint64_t threads);

}  // namespace fake_driver

#endif  // VYRE_TESTS_SUPPORT_FAKE_DRIVER_KERNELS_H_
