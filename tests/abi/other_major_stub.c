/* abi.loader.other_major: a stand-in library that exports every function of
 * the loader's table, as a vyre-cuda library of the next major version
 * would, so that vyre_cuda_loader_open must refuse it by its version alone.
 * Every function but vyre_version returns zero; none is called. */
#define vyre_version vyre_version_of_the_table
#include "vyre_cuda_loader.h"

#define STUB(ret, fn, params) \
  ret fn params;              \
  ret fn params { return (ret)0; }
VYRE_CUDA_LOADER_FUNCTIONS(STUB)
#undef STUB
#undef vyre_version

uint32_t vyre_version(void);
uint32_t vyre_version(void) {
  return ((uint32_t)(VYRE_CUDA_VERSION_MAJOR + 1) << 22) | (1u << 12) | 2u;
}
