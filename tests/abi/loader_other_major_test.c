/* abi.loader.other_major: vyre_cuda_loader_open refuses a library whose
 * major version is not the header's, with a message naming both versions
 * and a Fix, and leaves the table cleared.
 *
 *   loader_other_major_test STUB_LIBRARY */
#include "vyre_cuda_loader.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  vyre_cuda_loader loader;
  char error[1024];
  char wanted[64];
  const char* fix;
  size_t length;
  int failures = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: loader_other_major_test STUB_LIBRARY\n");
    return 2;
  }
  memset(&loader, 0xA5, sizeof loader);
  if (vyre_cuda_loader_open(argv[1], &loader, error, sizeof error) != -1) {
    fprintf(stderr, "loader_other_major_test: FAIL: a library of major version %u was accepted\n",
            (unsigned)VYRE_CUDA_VERSION_MAJOR + 1);
    return 1;
  }
  snprintf(wanted, sizeof wanted, "it is vyre-cuda %u.1.2", (unsigned)VYRE_CUDA_VERSION_MAJOR + 1);
  if (strstr(error, wanted) == NULL) {
    fprintf(stderr, "loader_other_major_test: FAIL: the message does not say \"%s\": %s\n", wanted,
            error);
    ++failures;
  }
  fix = strstr(error, ". Fix: ");
  length = strlen(error);
  if (fix == NULL || length == 0 || error[length - 1] != '.') {
    fprintf(stderr, "loader_other_major_test: FAIL: no Fix sentence ending in a period: %s\n",
            error);
    ++failures;
  }
  if (loader.library != NULL || loader.vyre_version != NULL || loader.vyre_dispatch != NULL) {
    fprintf(stderr, "loader_other_major_test: FAIL: the table was not cleared\n");
    ++failures;
  }
  if (failures == 0) printf("loader_other_major_test: OK (%s)\n", error);
  return failures == 0 ? 0 : 1;
}
