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
  char log[16];
  size_t log_length = 99;
  size_t first_line = 0;

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
  /* The first line fits a 1 KiB buffer whole and ends with its Fix. */
  first_line = strcspn(message, "\n");
  check(first_line > 0 && first_line <= 1023, "the first line is at most 1023 bytes");
  check(first_line > 0 && strstr(message, ". Fix: ") != NULL && message[first_line - 1] == '.',
        "the first line ends with its Fix sentence");
  /* No compile log here: vyre_last_error_log gives "" and keeps the error. */
  log[0] = 'x';
  check(vyre_last_error_log(log, sizeof(log), &log_length) == status,
        "vyre_last_error_log returns the last status");
  check(log_length == 0 && log[0] == '\0', "vyre_last_error_log: an empty log");
  check(vyre_last_error(NULL, NULL, NULL, 0, NULL) == status,
        "reading the log keeps the last error");
  printf("vyre-cuda %u.%u.%u: %s: %s\n", VYRE_VERSION_MAJOR_OF(version),
         VYRE_VERSION_MINOR_OF(version), VYRE_VERSION_PATCH_OF(version),
         vyre_status_name(status), message);
  return failures == 0 ? 0 : 1;
}
