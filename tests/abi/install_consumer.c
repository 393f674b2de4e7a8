/* Built only from the installed header, library and pkg-config file. */
#include <stdio.h>
#include <string.h>

#include "vyre_cuda.h"

int main(void) {
  uint32_t count = 0;
  char message[1024];
  if (VYRE_VERSION_MAJOR_OF(vyre_version()) != VYRE_CUDA_VERSION_MAJOR) return 1;
  /* Run without a driver: the installed library must answer, not crash. */
  if (vyre_device_count(&count) != VYRE_STATUS_NO_DRIVER) return 2;
  vyre_last_error(NULL, NULL, message, sizeof message, NULL);
  if (strstr(message, "Fix:") == NULL) return 3;
  printf("installed vyre-cuda %u.%u.%u answers: %s\n", VYRE_VERSION_MAJOR_OF(vyre_version()),
         VYRE_VERSION_MINOR_OF(vyre_version()), VYRE_VERSION_PATCH_OF(vyre_version()),
         vyre_status_name(VYRE_STATUS_NO_DRIVER));
  return 0;
}
