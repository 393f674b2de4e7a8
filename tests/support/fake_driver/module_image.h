// The parsers of module images (PTX text, cubins, fatbins) that find their
// kernel entries, for cuModuleLoadDataEx.
#ifndef VYRE_TESTS_SUPPORT_FAKE_DRIVER_MODULE_IMAGE_H_
#define VYRE_TESTS_SUPPORT_FAKE_DRIVER_MODULE_IMAGE_H_

#include <string>
#include <vector>

namespace fake_driver {

bool IsElf(const unsigned char* image);
bool IsFatbin(const unsigned char* image);
// The kernel entries of a module image: PTX text, a cubin or a fatbin.
std::vector<std::string> ModuleEntryNames(const void* image);
// For NUL-terminated PTX text: empty when its first statement (after blank
// space and comments) is the .version directive, else a ptxas-like JIT log
// of the refusal (CUDA C++ given as PTX, say, fails at its first token).
std::string PtxStartError(const char* text);

}  // namespace fake_driver

#endif  // VYRE_TESTS_SUPPORT_FAKE_DRIVER_MODULE_IMAGE_H_
