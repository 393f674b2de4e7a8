// Modules and functions: loading images (with the JIT error log), unloading,
// kernel lookup, function attributes and occupancy.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "entry_points.h"
#include "kernels.h"
#include "module_image.h"
#include "state.h"

namespace fake_driver {

// ---------------------------------------------------------------------------
// Modules and functions
// ---------------------------------------------------------------------------

namespace {


void WriteJitErrorLog(unsigned int count, const CUjit_option* options, void** values,
                      const char* message) {
  if (options == nullptr || values == nullptr) return;
  char* buffer = nullptr;
  size_t capacity = 0;
  int size_index = -1;
  for (unsigned int i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      capacity = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
      size_index = static_cast<int>(i);
    }
  }
  if (buffer == nullptr || capacity == 0) return;
  size_t written = std::min(capacity - 1, std::strlen(message));
  std::memcpy(buffer, message, written);
  buffer[written] = '\0';
  // Like the real driver, report the bytes used through the size option.
  values[size_index] = reinterpret_cast<void*>(static_cast<uintptr_t>(written + 1));
}

}  // namespace

CUresult fake_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count,
                                 CUjit_option* options, void** values) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleLoadDataEx")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuModuleLoadDataEx")) return r;
  if (module == nullptr || image == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: NULL module or image");
  }
  if (count > 0 && (options == nullptr || values == nullptr)) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: %u options but NULL arrays",
                  count);
  }
  // PTX text holding "fake-jit-log-bytes: <n>" fails with a JIT error log of
  // n bytes (FAKE_CUDA_JIT_LOG_PATTERN repeated and cut at n), so tests can
  // check how the engine carries a huge log.
  if (!IsElf(static_cast<const unsigned char*>(image)) &&
      !IsFatbin(static_cast<const unsigned char*>(image))) {
    const char* marker = std::strstr(static_cast<const char*>(image), "fake-jit-log-bytes: ");
    if (marker != nullptr) {
      size_t bytes = std::strtoull(marker + std::strlen("fake-jit-log-bytes: "), nullptr, 10);
      // A test asks for a few MiB at most; fuzzed PTX may ask for anything.
      constexpr size_t kMaxJitLogBytes = size_t{16} << 20;
      if (bytes > kMaxJitLogBytes) bytes = kMaxJitLogBytes;
      std::string log;
      log.reserve(bytes);
      while (log.size() < bytes) log += FAKE_CUDA_JIT_LOG_PATTERN;
      log.resize(bytes);
      WriteJitErrorLog(count, options, values, log.c_str());
      return CUDA_ERROR_INVALID_PTX;
    }
  }
  std::vector<std::string> names = ModuleEntryNames(image);
  if (names.empty()) {
    WriteJitErrorLog(count, options, values, "fake ptxas: no .entry found");
    return CUDA_ERROR_INVALID_PTX;
  }
  // Text with entries that is still not PTX (no .version first): refused at
  // its first token, as the real JIT does.
  if (!IsElf(static_cast<const unsigned char*>(image)) &&
      !IsFatbin(static_cast<const unsigned char*>(image))) {
    const std::string log = PtxStartError(static_cast<const char*>(image));
    if (!log.empty()) {
      WriteJitErrorLog(count, options, values, log.c_str());
      return CUDA_ERROR_INVALID_PTX;
    }
  }
  auto* m = new FakeModule{std::move(names), ++S().module_serial};
  // PTX text holding "fake-static-shared-bytes: <n>": every kernel of the
  // module declares n bytes of static shared memory.
  if (!IsElf(static_cast<const unsigned char*>(image)) &&
      !IsFatbin(static_cast<const unsigned char*>(image))) {
    const char* marker =
        std::strstr(static_cast<const char*>(image), "fake-static-shared-bytes: ");
    if (marker != nullptr) {
      m->static_shared_bytes = static_cast<int>(
          std::strtol(marker + std::strlen("fake-static-shared-bytes: "), nullptr, 10));
    }
  }
  S().modules.insert(m);
  ++S().stats.module_loads;
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleUnload(CUmodule module) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleUnload")) return r;
  if (CUresult r = RejectUnsafeDuringCapture("cuModuleUnload")) return r;
  State& s = S();
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (s.modules.erase(m) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload: unknown module %p",
                  static_cast<void*>(module));
  }
  for (auto it = s.functions.begin(); it != s.functions.end();) {
    it = it->second->module == m ? s.functions.erase(it) : std::next(it);
  }
  delete m;
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuModuleGetFunction")) return r;
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (S().modules.count(m) == 0) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction: unknown module %p",
                  static_cast<void*>(module));
  }
  if (function == nullptr || name == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction: NULL function or name");
  }
  if (std::find(m->entries.begin(), m->entries.end(), name) == m->entries.end()) {
    return CUDA_ERROR_NOT_FOUND;
  }
  auto f = std::make_unique<FakeFunction>();
  f->module = m;
  f->name = name;
  f->static_shared_bytes = m->static_shared_bytes;
  f->max_dynamic_shared_bytes = std::max(0, kSharedBytesPerBlock - m->static_shared_bytes);
  FakeFunction* raw = f.get();
  S().functions.emplace(raw, std::move(f));
  *function = reinterpret_cast<CUfunction>(raw);
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuFuncGetAttribute")) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncGetAttribute: unknown function");
  if (value == nullptr) return Misuse(CUDA_ERROR_INVALID_VALUE, "cuFuncGetAttribute: NULL");
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = kMaxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = f->max_dynamic_shared_bytes;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = f->static_shared_bytes; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuFuncSetAttribute")) return r;
  FakeFunction* f = FindFunction(function);
  if (f == nullptr) return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncSetAttribute: unknown function");
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    // The opt-in maximum less the kernel's static shared memory.
    if (value < 0 || value > kSharedBytesPerBlock - f->static_shared_bytes) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    f->max_dynamic_shared_bytes = value;
  }
  return CUDA_SUCCESS;
}

int MaxActiveBlocksPerMultiprocessor(int block_size, size_t dynamic_shared_bytes) {
  if (dynamic_shared_bytes > static_cast<size_t>(kSharedBytesPerBlock)) return 0;
  return kMaxThreadsPerMultiprocessor / block_size;
}

CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function,
                                                          int block_size, size_t shared_bytes) {
  Lock lock(S().mu);
  if (CUresult r = RequireContext("cuOccupancyMaxActiveBlocksPerMultiprocessor")) return r;
  if (FindFunction(function) == nullptr) {
    return Misuse(CUDA_ERROR_INVALID_HANDLE, "cuOccupancyMaxActiveBlocksPerMultiprocessor: "
                  "unknown function");
  }
  if (blocks == nullptr || block_size <= 0) {
    return Misuse(CUDA_ERROR_INVALID_VALUE,
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor: NULL or block size %d",
                  block_size);
  }
  *blocks = MaxActiveBlocksPerMultiprocessor(block_size, shared_bytes);
  return CUDA_SUCCESS;
}

}  // namespace fake_driver
