/* A C99 program linked against libvyre_cuda.so, run without a CUDA driver:
 * the library loads, answers, and reports the missing driver with a Fix. */
#include <stdio.h>
#include <string.h>

#include "vyre_cuda.h"

static int failures = 0;

static void check(int condition, const char* what) {
  if (!condition) {
    fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

int main(void) {
  uint32_t version = vyre_version();
  uint32_t count = 7;
  vyre_status status;
  vyre_status recorded = VYRE_STATUS_OK;
  char message[1024];
  size_t length = 0;

  check(VYRE_VERSION_MAJOR_OF(version) == VYRE_CUDA_VERSION_MAJOR,
        "header and library major versions match");
  check(strcmp(vyre_status_name(VYRE_STATUS_NO_DRIVER), "VYRE_STATUS_NO_DRIVER") == 0,
        "vyre_status_name");

  status = vyre_device_count(&count);
  check(status == VYRE_STATUS_NO_DRIVER, "vyre_device_count says NO_DRIVER without a driver");
  check(vyre_last_error(&recorded, NULL, message, sizeof(message), &length) == status,
        "vyre_last_error returns the last status");
  check(recorded == status, "vyre_last_error's out_status");
  check(length == strlen(message), "vyre_last_error's length");
  check(strstr(message, "Fix:") != NULL, "the message has a Fix: sentence");
  printf("vyre-cuda %u.%u.%u: %s: %s\n", VYRE_VERSION_MAJOR_OF(version),
         VYRE_VERSION_MINOR_OF(version), VYRE_VERSION_PATCH_OF(version),
         vyre_status_name(status), message);
  return failures == 0 ? 0 : 1;
}
