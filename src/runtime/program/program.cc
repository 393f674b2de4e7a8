#include "runtime/program/program.h"

#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "base/checked_math.h"
#include "base/raw_enum.h"
#include "base/status.h"
#include "base/struct_size.h"
#include "driver/cu_error.h"
#include "runtime/program/image_check.h"
#include "runtime/transfer/memory.h"

namespace vyre {
namespace {

constexpr const char* kWhat = "vyre_program_create";

bool ValidRole(uint32_t role) {
  return role == VYRE_ROLE_INPUT || role == VYRE_ROLE_OUTPUT ||
         role == VYRE_ROLE_INPUT_OUTPUT || role == VYRE_ROLE_SHARED;
}

absl::StatusOr<absl::string_view> CodeOf(const vyre_program_desc& desc) {
  uint32_t kind = RawEnum(desc.code_kind);
  if (kind != VYRE_CODE_PTX && kind != VYRE_CODE_BINARY && kind != VYRE_CODE_CUDA_SOURCE) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: code_kind %d is not a vyre_code_kind. Fix: use VYRE_CODE_PTX, "
                  "VYRE_CODE_BINARY or VYRE_CODE_CUDA_SOURCE.",
                  kWhat, static_cast<int32_t>(kind));
  }
  if (desc.code == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: code is NULL. Fix: point code at the PTX text, cubin image or CUDA "
                  "source.",
                  kWhat);
  }
  const char* text = static_cast<const char*>(desc.code);
  size_t size = desc.code_size;
  if (kind == VYRE_CODE_BINARY) {
    if (size == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: code_size is 0 for a binary image, which has no terminator to find "
                    "its end by. Fix: pass the image's size in bytes.",
                    kWhat);
    }
    // The driver takes no size and trusts the image's headers: prove it
    // whole first (a cut-short cubin crashes or hangs libcuda).
    VYRE_RETURN_IF_ERROR(CheckBinaryImage(kWhat, text, size).status());
    return absl::string_view(text, size);
  }
  if (size == 0) {
    size = std::strlen(text);
  } else {
    // Text given with a length may or may not include its terminator; a NUL
    // before that would silently cut the code short.
    while (size > 0 && text[size - 1] == '\0') --size;
    VYRE_RETURN_IF_ERROR(
        CheckCodeText(kWhat, kind == VYRE_CODE_PTX ? "PTX" : "CUDA source", text, size));
  }
  if (size == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the code is empty. Fix: pass the kernel's code.", kWhat);
  }
  // The driver picks the format from the first bytes: PTX that begins like
  // a cubin or fatbin would be parsed as one, unchecked.
  if (kind == VYRE_CODE_PTX) VYRE_RETURN_IF_ERROR(CheckPtxIsNotBinary(kWhat, text, size));
  return absl::string_view(text, size);
}

absl::Status ReadBindings(const vyre_program_desc& desc, std::vector<BindingDecl>* out) {
  if (desc.binding_count > 0 && desc.bindings == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: bindings is NULL but binding_count is %u. Fix: pass binding_count "
                  "vyre_binding_decl structs.",
                  kWhat, desc.binding_count);
  }
  if (desc.binding_count > 4096) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %u bindings exceed the limit of 4096. Fix: pack data into fewer "
                  "buffers.",
                  kWhat, desc.binding_count);
  }
  out->reserve(desc.binding_count);
  // An array of descriptors is strided by the caller's struct_size, which
  // differs from ours when the caller was compiled against another header.
  const uint32_t stride = desc.binding_count > 0 ? desc.bindings[0].struct_size : 0;
  for (size_t i = 0; i < desc.binding_count; ++i) {
    vyre_binding_decl d;
    std::string field = absl::StrCat("vyre_binding_decl[", i, "]");
    VYRE_RETURN_IF_ERROR(ReadArrayEntry(kWhat, field.c_str(), "binding", "VYRE_BINDING_DECL_INIT",
                                        desc.bindings, i, stride, &d));
    BindingDecl b;
    b.name = d.name && *d.name ? d.name : absl::StrCat("binding ", i);
    if (!ValidRole(RawEnum(d.role))) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %s ('%s') has role %d. Fix: use VYRE_ROLE_INPUT, _OUTPUT, "
                    "_INPUT_OUTPUT or _SHARED.",
                    kWhat, field, b.name, static_cast<int32_t>(RawEnum(d.role)));
    }
    if (d.element_size == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %s ('%s') has element_size 0. Fix: set the size in bytes of one "
                    "element.",
                    kWhat, field, b.name);
    }
    auto declared_bytes = CheckedMul(d.element_size, d.element_count);
    if (!declared_bytes) {
      return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                    "%s: %s ('%s'): element_size x element_count overflows 64 bits. Fix: "
                    "declare a realistic element count.",
                    kWhat, field, b.name);
    }
    b.role = d.role;
    b.element_size = d.element_size;
    b.element_count = d.element_count;
    b.output_offset = d.output_offset;
    b.output_length = d.output_length;
    if ((d.output_offset != 0 || d.output_length != 0) && !b.writes()) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %s ('%s') declares an output range but is not an output. Fix: set "
                    "output_offset/output_length only on OUTPUT or INPUT_OUTPUT bindings.",
                    kWhat, field, b.name);
    }
    if (b.role == VYRE_ROLE_SHARED && d.element_count == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: %s ('%s') is SHARED with element_count 0. Fix: declare how many "
                    "elements of shared memory the kernel needs.",
                    kWhat, field, b.name);
    }
    if (d.element_count > 0 && d.output_length > 0 &&
        !RangeInside(d.output_offset, d.output_length, *declared_bytes)) {
      return Errorf(VYRE_STATUS_OUT_OF_RANGE,
                    "%s: %s ('%s') output range [%u, +%u) exceeds its %u declared bytes. Fix: "
                    "keep the output range inside the binding.",
                    kWhat, field, b.name, d.output_offset, d.output_length, *declared_bytes);
    }
    out->push_back(std::move(b));
  }
  return absl::OkStatus();
}

absl::Status ReadParams(const vyre_program_desc& desc, const std::vector<BindingDecl>& bindings,
                        std::vector<vyre_kernel_param>* out) {
  if (desc.param_count == 0) {
    for (size_t i = 0; i < bindings.size(); ++i) {
      if (bindings[i].role != VYRE_ROLE_SHARED) {
        out->push_back({VYRE_PARAM_BINDING, static_cast<uint32_t>(i)});
      }
    }
    out->push_back({VYRE_PARAM_PARAM_WORDS, 0});
    return absl::OkStatus();
  }
  if (desc.params == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: params is NULL but param_count is %u. Fix: pass param_count "
                  "vyre_kernel_param entries, or 0 for the default calling convention.",
                  kWhat, desc.param_count);
  }
  if (desc.param_count > 1024) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: %u kernel parameters exceed the limit of 1024. Fix: pass data through "
                  "buffers or parameter words.",
                  kWhat, desc.param_count);
  }
  for (size_t i = 0; i < desc.param_count; ++i) {
    vyre_kernel_param p = desc.params[i];
    switch (RawEnum(p.kind)) {
      case VYRE_PARAM_BINDING:
        if (p.index >= bindings.size() || bindings[p.index].role == VYRE_ROLE_SHARED) {
          return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                        "%s: params[%u] refers to binding %u, which %s. Fix: refer to a "
                        "declared, non-SHARED binding.",
                        kWhat, i, p.index,
                        p.index >= bindings.size() ? "does not exist" : "is SHARED");
        }
        break;
      case VYRE_PARAM_SCALAR32:
      case VYRE_PARAM_SCALAR64:
      case VYRE_PARAM_PARAM_WORDS:
      case VYRE_PARAM_NULL_POINTER:
        break;
      default:
        return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                      "%s: params[%u] has kind %d. Fix: use a vyre_param_kind value.", kWhat,
                      i, static_cast<int32_t>(RawEnum(p.kind)));
    }
    out->push_back(p);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadOptions(const vyre_program_desc& desc) {
  std::vector<std::string> options;
  if (desc.compile_option_count > 0 && desc.compile_options == nullptr) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: compile_options is NULL but compile_option_count is %u. Fix: pass the "
                  "option strings or a count of 0.",
                  kWhat, desc.compile_option_count);
  }
  for (size_t i = 0; i < desc.compile_option_count; ++i) {
    if (desc.compile_options[i] == nullptr) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: compile_options[%u] is NULL. Fix: pass NUL-terminated strings.", kWhat,
                    i);
    }
    options.emplace_back(desc.compile_options[i]);
  }
  return options;
}

}  // namespace

absl::Status CheckBlockShape(const char* what, const uint32_t block[3],
                             const vyre_device_info& device, uint32_t kernel_max_threads) {
  for (int axis = 0; axis < 3; ++axis) {
    if (block[axis] == 0) {
      return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                    "%s: block dimension %c is 0. Fix: use at least 1 thread on every axis.",
                    what, "xyz"[axis]);
    }
    if (block[axis] > device.max_block_dim[axis]) {
      return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                    "%s: block dimension %c is %u but %s allows at most %u. Fix: use a "
                    "smaller workgroup.",
                    what, "xyz"[axis], block[axis], device.name, device.max_block_dim[axis]);
    }
  }
  uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  uint32_t limit = device.max_threads_per_block;
  if (kernel_max_threads > 0 && kernel_max_threads < limit) limit = kernel_max_threads;
  if (threads > limit) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: a block of %ux%ux%u = %u threads exceeds the limit of %u threads for "
                  "this kernel on %s. Fix: use at most %u threads per block.",
                  what, block[0], block[1], block[2], threads, limit, device.name, limit);
  }
  return absl::OkStatus();
}

absl::Status CheckSharedMemory(const char* what, uint64_t dynamic_bytes, const Program& program,
                               const char* dynamic_source) {
  const vyre_device_info& device = program.context().device();
  const uint64_t limit = device.max_shared_memory_per_block;
  const uint64_t fixed = program.static_shared_bytes();
  if (fixed <= limit && dynamic_bytes <= limit - fixed) return absl::OkStatus();
  return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                "%s: %s %u bytes of dynamic shared memory, and kernel '%s' declares %u bytes of "
                "static shared memory: together over the %u bytes per block %s offers (its "
                "opt-in maximum). Fix: keep the dynamic shared memory (SHARED bindings plus "
                "shared_memory_bytes) at or below %u bytes, or use less static shared memory in "
                "the kernel.",
                what, dynamic_source, dynamic_bytes, program.entry(), fixed, limit, device.name,
                fixed <= limit ? limit - fixed : 0);
}

absl::StatusOr<std::shared_ptr<Program>> Program::Create(std::shared_ptr<Context> context,
                                                         const vyre_program_desc& desc) {
  VYRE_ASSIGN_OR_RETURN(absl::string_view code, CodeOf(desc));
  if (desc.entry == nullptr || desc.entry[0] == '\0') {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: entry is %s. Fix: name the kernel function to run (its extern \"C\" or "
                  "mangled name).",
                  kWhat, desc.entry == nullptr ? "NULL" : "empty");
  }
  std::shared_ptr<Program> program(new Program(context));
  program->entry_ = desc.entry;
  VYRE_RETURN_IF_ERROR(ReadBindings(desc, &program->bindings_));
  VYRE_RETURN_IF_ERROR(ReadParams(desc, program->bindings_, &program->params_));
  VYRE_ASSIGN_OR_RETURN(std::vector<std::string> options, ReadOptions(desc));

  program->workgroup_[0] = desc.workgroup_size[0];
  program->workgroup_[1] = desc.workgroup_size[1] ? desc.workgroup_size[1] : 1;
  program->workgroup_[2] = desc.workgroup_size[2] ? desc.workgroup_size[2] : 1;
  if (program->workgroup_[0] == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: workgroup_size[0] is 0. Fix: set the threads per block (e.g. 256).",
                  kWhat);
  }
  const vyre_device_info& device = context->device();
  VYRE_RETURN_IF_ERROR(CheckBlockShape(kWhat, program->workgroup_, device, 0));

  uint64_t shared = desc.shared_memory_bytes;
  for (const BindingDecl& b : program->bindings_) {
    if (b.role != VYRE_ROLE_SHARED) continue;
    auto sum = CheckedAdd(shared, uint64_t{b.element_size} * b.element_count);
    shared = sum ? *sum : UINT64_MAX;  // the limit check below rejects an overflow
  }
  if (shared > device.max_shared_memory_per_block) {
    return Errorf(VYRE_STATUS_LIMIT_EXCEEDED,
                  "%s: the program needs %u bytes of dynamic shared memory but %s offers at "
                  "most %u per block. Fix: shrink SHARED bindings or shared_memory_bytes.",
                  kWhat, shared, device.name, device.max_shared_memory_per_block);
  }
  program->shared_memory_bytes_ = shared;

  VYRE_ASSIGN_OR_RETURN(program->module_,
                        context->modules().GetOrLoad(desc.code_kind, code, options,
                                                     program->entry_, kWhat));
  driver::ScopedContext bind(context->cu());
  VYRE_RETURN_IF_ERROR(bind.status(kWhat));
  CUresult r = driver::Api().cuModuleGetFunction(&program->function_, program->module_->get(),
                                                 program->entry_.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    return MakeError(VYRE_STATUS_ENTRY_NOT_FOUND,
                     absl::StrFormat("%s: the module has no kernel named '%s'. Fix: pass the "
                                     "kernel's exact entry name (declare it extern \"C\" to "
                                     "avoid C++ name mangling).",
                                     kWhat, program->entry_),
                     static_cast<int32_t>(r));
  }
  if (r != CUDA_SUCCESS) {
    return driver::CuError(r, absl::StrCat(kWhat, ": resolving entry '", program->entry_, "'"),
                           "cuModuleGetFunction");
  }
  int max_threads = 0;
  VYRE_CU("vyre_program_create: reading the kernel's thread limit", cuFuncGetAttribute,
          &max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, program->function_);
  program->max_threads_per_block_ = static_cast<uint32_t>(max_threads);
  VYRE_RETURN_IF_ERROR(
      CheckBlockShape(kWhat, program->workgroup_, device, program->max_threads_per_block_));
  int static_shared = 0;
  VYRE_CU("vyre_program_create: reading the kernel's static shared memory", cuFuncGetAttribute,
          &static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, program->function_);
  program->static_shared_bytes_ = static_cast<uint32_t>(static_shared < 0 ? 0 : static_shared);
  VYRE_RETURN_IF_ERROR(
      CheckSharedMemory(kWhat, program->shared_memory_bytes_, *program, "the program declares"));
  context->telemetry().live_programs.Add();
  program->counted_ = true;
  return program;
}

Program::~Program() {
  if (counted_) context_->telemetry().live_programs.Sub(1);
  std::lock_guard lock(param_cache_.mu);
  if (param_cache_.device != 0) {
    driver::ScopedContext bind(context_->cu(), driver::ScopedContext::Purpose::kRelease);
    FreeDeviceBytes(param_cache_.device, kParamCacheBytes, &context_->telemetry());
  }
}

HandleRegistry<Program>& Programs() {
  static auto* registry =
      new HandleRegistry<Program>(HandleType::kProgram, ReleaseRank::kPrograms);
  return *registry;
}

}  // namespace vyre
