/* abi.loader: include/vyre_cuda_loader.h against the header and the library.
 *
 *   loader_test LIBRARY SYMBOLS_FILE
 *
 * At compile time (abi.loader.types.{c99,c++17}: -Werror, with
 * VYRE_LOADER_TYPE_CHECK): every member of the loader's table has exactly
 * the type of the function it is named after, or the assignments below do
 * not compile. At run time: the loader's
 * function list is exactly abi/vyre_cuda.symbols (the library's exports), the
 * library opens and works through the table (no driver needed: the test runs
 * with a nonexistent driver path), and failures read
 * "<what failed>: <why>. Fix: <what to do>." with a cleared table. */
#include "vyre_cuda_loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                \
  do {                                                  \
    if (!(cond)) {                                      \
      fprintf(stderr, "loader_test: FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                            \
      ++failures;                                       \
    }                                                   \
  } while (0)

#ifdef VYRE_LOADER_TYPE_CHECK
/* Compiled (-fsyntax-only, -Werror) by abi.loader.types.*, never linked: the
 * program itself must not link the library it loads. */
void loader_test_types_match(vyre_cuda_loader* table);
void loader_test_types_match(vyre_cuda_loader* table) {
#define ASSIGN(ret, name, params) table->name = &name;
  VYRE_CUDA_LOADER_FUNCTIONS(ASSIGN)
#undef ASSIGN
}
#endif

static const char* const kLoaderNames[] = {
#define NAME(ret, name, params) #name,
    VYRE_CUDA_LOADER_FUNCTIONS(NAME)
#undef NAME
};
#define LOADER_COUNT (sizeof kLoaderNames / sizeof kLoaderNames[0])

static int InLoader(const char* name) {
  size_t i;
  for (i = 0; i < LOADER_COUNT; ++i) {
    if (strcmp(kLoaderNames[i], name) == 0) return 1;
  }
  return 0;
}

static int HasFixSentence(const char* message) {
  const char* fix = strstr(message, ". Fix: ");
  size_t length = strlen(message);
  return fix != NULL && length > 0 && message[length - 1] == '.';
}

static int TableIsClear(const vyre_cuda_loader* table) {
  vyre_cuda_loader zero;
  memset(&zero, 0, sizeof zero);
  return memcmp(table, &zero, sizeof zero) == 0;
}

int main(int argc, char** argv) {
  char line[256];
  char why[1024];
  size_t exported = 0;
  FILE* symbols;
  vyre_cuda_loader vc;
  uint32_t count = 7;
  vyre_status status;
  if (argc != 3) {
    fprintf(stderr, "usage: loader_test LIBRARY SYMBOLS_FILE\n");
    return 2;
  }

  /* The list is the library's exports, no more, no fewer. */
  symbols = fopen(argv[2], "r");
  if (symbols == NULL) {
    fprintf(stderr, "loader_test: cannot read %s\n", argv[2]);
    return 2;
  }
  while (fgets(line, sizeof line, symbols) != NULL) {
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '\0') continue;
    ++exported;
    CHECK(InLoader(line), "%s is exported but not in VYRE_CUDA_LOADER_FUNCTIONS", line);
  }
  fclose(symbols);
  CHECK(exported == LOADER_COUNT, "%u exports, %u loader functions", (unsigned)exported,
        (unsigned)LOADER_COUNT);

  /* Opened by path, the table works. */
  CHECK(vyre_cuda_loader_open(argv[1], &vc, why, sizeof why) == 0, "open %s: %s", argv[1], why);
  if (vc.library != NULL) {
    CHECK(why[0] == '\0', "a successful open left a message: %s", why);
    CHECK(vc.version == VYRE_CUDA_VERSION, "version %u, header %u", (unsigned)vc.version,
          (unsigned)VYRE_CUDA_VERSION);
    CHECK(strcmp(vc.vyre_status_name(VYRE_STATUS_NO_DRIVER), "VYRE_STATUS_NO_DRIVER") == 0,
          "vyre_status_name through the table");
    status = vc.vyre_device_count(&count);
    CHECK(status == VYRE_STATUS_NO_DRIVER, "vyre_device_count without a driver gave %s",
          vc.vyre_status_name(status));
    why[0] = '\0';
    vc.vyre_last_error(NULL, NULL, why, sizeof why, NULL);
    CHECK(strstr(why, "Fix:") != NULL, "the last error has no Fix: '%s'", why);
    vyre_cuda_loader_close(&vc);
    CHECK(TableIsClear(&vc), "close left the table filled");
    vyre_cuda_loader_close(&vc); /* twice: harmless */
  }

  /* A library that is not there. */
  memset(&vc, 0xAB, sizeof vc);
  CHECK(vyre_cuda_loader_open("/nonexistent/libvyre_cuda.so.0", &vc, why, sizeof why) == -1,
        "a missing library opened");
  CHECK(strncmp(why, "cannot load /nonexistent/libvyre_cuda.so.0: ", 44) == 0 &&
            HasFixSentence(why),
        "missing library message: '%s'", why);
  CHECK(TableIsClear(&vc), "a failed open left the table filled");

  /* A library that is not vyre-cuda: libc has no vyre_version. */
  CHECK(vyre_cuda_loader_open("libc.so.6", &vc, why, sizeof why) == -1, "libc opened as vyre");
  CHECK(strstr(why, "it has no vyre_version") != NULL && HasFixSentence(why),
        "foreign library message: '%s'", why);
  CHECK(TableIsClear(&vc), "a failed open left the table filled");

  /* A short buffer still gets a terminated message; no buffer is fine. */
  CHECK(vyre_cuda_loader_open("/nonexistent/x.so", &vc, why, 8) == -1, "short buffer");
  CHECK(strlen(why) == 7, "short buffer: '%s'", why);
  CHECK(vyre_cuda_loader_open("/nonexistent/x.so", &vc, NULL, 0) == -1, "no buffer");
  CHECK(vyre_cuda_loader_open(argv[1], NULL, why, sizeof why) == -1 && HasFixSentence(why),
        "NULL loader: '%s'", why);

  if (failures == 0) printf("loader_test: OK (%u functions)\n", (unsigned)LOADER_COUNT);
  return failures == 0 ? 0 : 1;
}
